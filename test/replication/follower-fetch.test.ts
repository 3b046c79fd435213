/**
 * KIP-392 (issue 40 item 5): with replica.selector.class=RackAwareReplicaSelector, a
 * consumer that gives its client.rack is sent by the leader to the in-sync replica in its
 * rack (preferredReadReplica, no records, answered at once) and reads there up to that
 * follower's high watermark. Three `tidelog broker` processes on etcd, one rack each;
 * checked with raw Fetch requests and with librdkafka, whose statistics say which broker
 * it fetched from.
 */

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { toOffset } from '../../src/common/types.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey, type FetchResponse } from '../../src/protocol/generated/index.js'
import { RACK_AWARE_REPLICA_SELECTOR, selectRackAware } from '../../src/replication/replica-selector.js'
import { toBrokerId } from '../helpers/broker-ids.js'
import { type EtcdCluster, waitFor, withEtcdCluster } from '../helpers/broker-process.js'
import { pythonJson } from '../helpers/compat-clients.js'
import { kcatMetadata, partitionOf } from '../helpers/metadata-view.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

const TOPIC = 'follower-fetch'
const RECORDS = 50

describe('RackAwareReplicaSelector', () => {
  const view = (
    brokerId: number,
    rack: string | null,
    logEndOffset: number,
    timeSinceLastCaughtUpMs = 0,
  ) => ({
    brokerId: toBrokerId(brokerId),
    rack,
    logEndOffset: toOffset(logEndOffset),
    timeSinceLastCaughtUpMs,
  })
  const leader = view(1, 'a', 100)

  it('keeps the leader without a client rack, without a replica in it, or when the leader is in it', () => {
    const followers = [view(2, 'b', 100), view(3, 'c', 100)]
    assert.equal(selectRackAware('', leader, [leader, ...followers]).brokerId, 1)
    assert.equal(selectRackAware('z', leader, [leader, ...followers]).brokerId, 1)
    assert.equal(selectRackAware('a', leader, [leader, view(2, 'a', 100)]).brokerId, 1)
  })

  it('picks the replica in the rack with the largest log end, then the most recently caught up', () => {
    const candidates = [leader, view(2, 'b', 90), view(3, 'b', 95, 50), view(4, 'b', 95, 10)]
    assert.equal(selectRackAware('b', leader, candidates).brokerId, 4)
  })
})

function fetchBody(rackId: string, maxWaitMs: number) {
  return {
    replicaId: -1,
    maxWaitMs,
    minBytes: 1,
    maxBytes: 1 << 20,
    rackId,
    topics: [
      {
        topic: TOPIC,
        partitions: [
          {
            partition: 0,
            currentLeaderEpoch: -1,
            fetchOffset: 0n,
            lastFetchedEpoch: -1,
            logStartOffset: -1n,
            partitionMaxBytes: 1 << 20,
          },
        ],
      },
    ],
  }
}

async function fetchFrom(port: number, version: number, rackId: string, maxWaitMs = 0) {
  const client = await RawClient.connect(port)
  try {
    const response = await rawCall<FetchResponse>(client, ApiKey.Fetch, version, fetchBody(rackId, maxWaitMs))
    return response.responses[0].partitions[0]
  } finally {
    client.socket.destroy()
  }
}

async function setUp(cluster: EtcdCluster): Promise<void> {
  const kafka = new Kafka({
    clientId: 'kip-392',
    brokers: cluster.liveBootstrap.split(','),
    logLevel: logLevel.NOTHING,
  })
  const admin = kafka.admin()
  await admin.connect()
  try {
    await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic: TOPIC, replicaAssignment: [{ partition: 0, replicas: [1, 2, 3] }] }],
    })
  } finally {
    await admin.disconnect()
  }
  const producer = kafka.producer()
  await producer.connect()
  try {
    const messages = Array.from({ length: RECORDS }, (_, i) => ({ partition: 0, value: `v${i}` }))
    await producer.send({ topic: TOPIC, acks: -1, messages })
  } finally {
    await producer.disconnect()
  }
  await waitFor(
    'the ISR of 3',
    async () => {
      const view = await kcatMetadata(cluster.liveBootstrap, TOPIC)
      const state = partitionOf(view, TOPIC, 0)
      return state.leader === 1 && state.isr.length === 3 ? true : undefined
    },
    20_000,
  )
}

describe('fetch from the closest replica', { timeout: 120_000 }, () => {
  it('the leader names the follower in the client rack; the follower serves it; librdkafka reads there', async () => {
    await withEtcdCluster(
      {
        brokers: 3,
        properties: { 'replica.selector.class': RACK_AWARE_REPLICA_SELECTOR },
        brokerProperties: (nodeId) => ({ 'broker.rack': `rack-${nodeId}` }),
      },
      async (cluster) => {
        await setUp(cluster)
        const [leaderPort, followerPort] = [cluster.broker(1).spec.port, cluster.broker(2).spec.port]
        // The leader answers at once (no long poll) with the follower's id and no records.
        const started = Date.now()
        const named = await fetchFrom(leaderPort, 11, 'rack-2', 5000)
        assert.equal(named.errorCode, ErrorCode.NONE)
        assert.equal(named.preferredReadReplica, 2)
        assert.equal(named.records?.length ?? 0, 0)
        assert.ok(Date.now() - started < 4000, 'the answer naming a replica waited for data')
        // A consumer in the leader's rack, or with no rack, reads from the leader.
        const here = await fetchFrom(leaderPort, 11, 'rack-1')
        assert.equal(here.preferredReadReplica, -1)
        assert.ok((here.records?.length ?? 0) > 0)
        // The follower serves a v11+ consumer fetch up to its high watermark.
        const fromFollower = await waitFor(
          'the follower high watermark',
          async () => {
            const answer = await fetchFrom(followerPort, 11, 'rack-2')
            return answer.highWatermark === BigInt(RECORDS) ? answer : undefined
          },
          10_000,
        )
        assert.equal(fromFollower.errorCode, ErrorCode.NONE)
        assert.ok((fromFollower.records?.length ?? 0) > 0)
        // Before v11 a fetch carries no client metadata: only the leader serves it.
        assert.equal((await fetchFrom(followerPort, 10, '')).errorCode, ErrorCode.NOT_LEADER_OR_FOLLOWER)

        const read = await pythonJson<{ values: string[]; fetchedFrom: number[]; leader: number }>(
          'follower_fetch.py',
          '',
          { bootstrap: cluster.liveBootstrap, topic: TOPIC, partition: 0, rack: 'rack-3', count: RECORDS },
          60_000,
        )
        assert.deepEqual(
          read.values,
          Array.from({ length: RECORDS }, (_, i) => `v${i}`),
        )
        assert.equal(read.leader, 1)
        assert.ok(read.fetchedFrom.includes(3), `librdkafka fetched from ${read.fetchedFrom.join(',')}`)
      },
    )
  })
})
