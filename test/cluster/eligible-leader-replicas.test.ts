/**
 * KIP-966 on a real cluster (RF 2, min.insync.replicas 2): a follower stopped cleanly while
 * the ISR is at min ISR joins the ELR; the leader killed next leaves the partition offline
 * with no live ISR member; the ELR member returning is elected cleanly (no unclean
 * election) with every acknowledged record; the killed broker, back after an unclean
 * shutdown, is out of the ELR (last known ELR) until it catches up and the ISR is full.
 * DescribeTopicPartitions (key 75) shows each step.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import type { DescribeTopicPartitionsResponse } from '../../src/protocol/generated/index.js'
import { ApiKey, apis, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { decodeResponseHeader } from '../../src/protocol/generated/response-header.js'
import { Reader } from '../../src/protocol/primitives.js'
import { RawClient } from '../helpers/raw-client.js'
import { startCluster } from '../helpers/testing.js'
import { waitUntil } from '../helpers/wait.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

const TOPIC = 'elr'

async function describePartition(
  port: number,
): Promise<DescribeTopicPartitionsResponse['topics'][number]['partitions'][number]> {
  const client = await RawClient.connect(port)
  try {
    client.write(
      RawClient.frame(ApiKey.DescribeTopicPartitions, 0, 7, {
        topics: [{ name: TOPIC }],
        responsePartitionLimit: 10,
        cursor: null,
      }),
    )
    const frame = await client.readFrame()
    assert.ok(frame, 'DescribeTopicPartitions answered')
    const r = new Reader(frame)
    const api = apis.get(ApiKey.DescribeTopicPartitions)!
    assert.equal(decodeResponseHeader(r, api.responseHeaderVersion(0)).correlationId, 7)
    const response = api.decodeResponse(r, 0) as DescribeTopicPartitionsResponse
    assert.equal(response.topics[0].errorCode, 0)
    return response.topics[0].partitions[0]
  } finally {
    client.socket.destroy()
  }
}

const until = waitUntil

test('an ELR member is elected cleanly when the last ISR member dies; an unclean restart leaves the ELR', async () => {
  const cluster = await startCluster({
    brokers: 2,
    properties: { 'offsets.topic.replication.factor': 2 },
    topics: [{ name: TOPIC, partitions: 1, replicationFactor: 2, configs: { 'min.insync.replicas': 2 } }],
  })
  const kafka = new Kafka({
    clientId: 'elr',
    brokers: cluster.bootstrapServers.split(','),
    logLevel: logLevel.NOTHING,
  })
  const producer = kafka.producer({ retry: { retries: 10 } })
  try {
    await producer.connect()
    await producer.send({
      topic: TOPIC,
      acks: -1,
      messages: Array.from({ length: 20 }, (_, i) => ({ value: `acked ${i}` })),
    })
    const leader = cluster.leaderOf(TOPIC, 0)
    const follower = 1 - leader
    const followerPort = cluster.broker(follower).port
    await cluster.stopBroker(follower) // controlled: it leaves the ISR, at min ISR, for the ELR
    const afterStop = await describePartition(cluster.broker(leader).port)
    assert.deepEqual(afterStop.isrNodes, [leader])
    assert.deepEqual(afterStop.eligibleLeaderReplicas, [follower])
    // Below min ISR an acks=1 write is appended but not committed: the HW stays (KIP-966).
    await producer.send({ topic: TOPIC, acks: 1, messages: [{ value: 'below min ISR' }] })
    assert.equal(cluster.broker(leader).replicaManager.getPartition(TOPIC, 0)?.highWatermark, 20)

    cluster.kill(leader) // the last ISR member, uncleanly
    await cluster.restart(follower)
    await until('the ELR member leads', 10_000, async () => cluster.leaderOf(TOPIC, 0) === follower)
    const elected = await describePartition(followerPort)
    assert.equal(elected.leaderId, follower)
    assert.deepEqual(elected.isrNodes, [follower])
    assert.deepEqual(elected.eligibleLeaderReplicas, [leader], 'the dead last ISR member joins the ELR')
    assert.equal(cluster.broker(follower).controller?.stats.uncleanElections ?? 0, 0)
    const log = cluster.broker(follower).replicaManager.getPartition(TOPIC, 0)!
    assert.ok(
      log.log.logEndOffset >= 20,
      `the ELR member holds every acknowledged record (${log.log.logEndOffset})`,
    )

    await cluster.restart(leader) // back after an unclean shutdown
    const back = await describePartition(followerPort)
    assert.ok(!back.eligibleLeaderReplicas?.includes(leader), 'out of the ELR after an unclean shutdown')
    await cluster.waitForIsr(TOPIC, { timeoutMs: 15_000 })
    const full = await describePartition(followerPort)
    assert.equal(full.isrNodes.length, 2)
    assert.deepEqual(full.eligibleLeaderReplicas, [], 'at min ISR again the ELR is cleared')
    assert.deepEqual(full.lastKnownElr, [])
  } finally {
    await producer.disconnect()
    await cluster.stop()
  }
})
