/**
 * Issue 18 item 2: DeleteRecords on a broker that does not lead a partition of a known
 * topic answers NOT_LEADER_OR_FOLLOWER (so clients go to the leader), as Kafka does,
 * whether that broker follows the partition or does not host it; a topic or partition the
 * metadata does not know stays UNKNOWN_TOPIC_OR_PARTITION.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey, type DeleteRecordsResponse } from '../../src/protocol/generated/index.js'
import { startCluster } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

test('DeleteRecords on a broker that does not lead the partition: NOT_LEADER_OR_FOLLOWER', async () => {
  const cluster = await startCluster({ brokers: 3, port: 0 })
  const kafka = new Kafka({ brokers: cluster.bootstrapServers.split(','), logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  const clients: RawClient[] = []
  try {
    await admin.connect()
    // RF 2 on 3 brokers: partition 0 has a leader, a follower and a broker without it.
    await admin.createTopics({
      topics: [{ topic: 'dr', numPartitions: 1, replicationFactor: 2 }],
      waitForLeaders: true,
    })
    const roleOf = (index: number) => {
      const hosted = cluster.brokers[index].replicaManager.getPartition('dr', 0)
      return hosted === undefined ? 'absent' : hosted.isLeader ? 'leader' : 'follower'
    }
    const byRole = new Map<string, number>()
    for (let attempt = 0; attempt < 200 && byRole.size < 3; attempt++) {
      byRole.clear()
      for (let i = 0; i < 3; i++) byRole.set(roleOf(i), i)
      if (byRole.size < 3) await new Promise((resolve) => setTimeout(resolve, 10))
    }
    assert.deepEqual([...byRole.keys()].sort(), ['absent', 'follower', 'leader'])
    const deleteOn = async (role: string, topic: string, partitionIndex: number) => {
      const address = cluster.bootstrapServers.split(',')[byRole.get(role)!]
      const client = await RawClient.connect(Number(address.split(':')[1]))
      clients.push(client)
      const response = await rawCall<DeleteRecordsResponse>(client, ApiKey.DeleteRecords, 2, {
        topics: [{ name: topic, partitions: [{ partitionIndex, offset: -1n }] }],
        timeoutMs: 5000,
      })
      return response.topics[0].partitions[0].errorCode
    }
    assert.equal(await deleteOn('follower', 'dr', 0), ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert.equal(await deleteOn('absent', 'dr', 0), ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert.equal(await deleteOn('absent', 'dr', 1), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert.equal(await deleteOn('absent', 'no-such-topic', 0), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert.equal(await deleteOn('leader', 'dr', 0), ErrorCode.NONE)
  } finally {
    for (const client of clients) client.close()
    await admin.disconnect()
    await cluster.stop()
  }
})
