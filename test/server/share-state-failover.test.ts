/**
 * Share-partition state survives its leader and its share coordinator (KIP-932,
 * `__share_group_state`) on a 3-broker in-process cluster: a member acquires records 0-9 of a
 * replicated partition, accepts 0-3, releases 4-5, rejects 6 and keeps 7-9 under its lock;
 * then the partition's leader is stopped (its leadership moves), started again, and the
 * broker then coordinating the share-partition's state is stopped too. A new member on the
 * partition's new leader gets 4-5 with delivery count 2 (the count goes on) and 7-9 (only
 * acquired before, never written: count 1), never the accepted or rejected records, and
 * DescribeShareGroupOffsets shows the persisted start offset 4; FindCoordinator key type 2
 * names the new share coordinator (7-9 may come with count 2: the stopping leader's
 * connections close, which releases them, and that write may land). Without the persisted state
 * the new leader would start over at the reset point and deliver 0-9 again with count 1.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { Producer } from '../../src/client/producer.js'
import { partitionForShareKey } from '../../src/coordinator/share/share-coordinator.js'
import { SHARE_GROUP_STATE_TOPIC } from '../../src/coordinator/share/share-state-records.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { DescribeShareGroupOffsetsResponse } from '../../src/protocol/generated/describe-share-group-offsets-response.js'
import { ApiKey, type FindCoordinatorResponse } from '../../src/protocol/generated/index.js'
import type { ShareAcknowledgeResponse } from '../../src/protocol/generated/share-acknowledge-response.js'
import type { ShareFetchResponse } from '../../src/protocol/generated/share-fetch-response.js'
import type { ShareGroupHeartbeatResponse } from '../../src/protocol/generated/share-group-heartbeat-response.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { ReplicationCluster, waitUntil } from '../replication/in-process-cluster.js'

const TOPIC = 'share-failover'
const GROUP = 'share-failover-group'
const FIRST = 'c2hhcmUtbWVtYmVyLWZpcnN0'
const SECOND = 'c2hhcmUtbWVtYmVyLXNlY29uZA'
const STATE_PARTITIONS = 3

const portOf = (cluster: ReplicationCluster, index: number) =>
  Number(cluster.broker(index).bootstrapServers.split(':')[1])

/** One ShareFetch of partition 0 by `memberId` at `epoch`; its acquired ranges as first-last×count. */
async function shareFetch(raw: RawClient, topicId: string, memberId: string, epoch: number) {
  const r = await rawCall<ShareFetchResponse>(
    raw,
    ApiKey.ShareFetch,
    1,
    {
      groupId: GROUP,
      memberId,
      shareSessionEpoch: epoch,
      maxWaitMs: 500,
      minBytes: 1,
      maxRecords: 100,
      batchSize: 100,
      topics:
        epoch === 0
          ? [
              {
                topicId,
                partitions: [{ partitionIndex: 0, partitionMaxBytes: 0, acknowledgementBatches: [] }],
              },
            ]
          : [],
    },
    15_000,
  )
  const partition = r.responses.flatMap((t) => t.partitions)[0]
  return {
    errorCode: r.errorCode,
    partitionError: partition?.errorCode ?? ErrorCode.NONE,
    acquired: (partition?.acquiredRecords ?? []).map(
      (a) => `${a.firstOffset}-${a.lastOffset}x${a.deliveryCount}`,
    ),
  }
}

test('3 brokers: share-partition state resumes after its leader and its share coordinator move', async () => {
  const cluster = await ReplicationCluster.start(3, {
    'offsets.topic.num.partitions': 1,
    'share.coordinator.state.topic.num.partitions': STATE_PARTITIONS,
    'tidelog.share.auto.offset.reset': 'earliest',
    'group.share.delivery.count.limit': 5,
  })
  const clients: RawClient[] = []
  const connect = async (index: number) => {
    const raw = await RawClient.connect(portOf(cluster, index))
    clients.push(raw)
    return raw
  }
  try {
    await cluster.createTopic(TOPIC, 1, 3)
    const topicId = cluster.broker(0).metadataImage().topics.get(TOPIC)?.topicId ?? ''
    const producer = new Producer({ bootstrapServers: cluster.bootstrap, lingerMs: 0, acks: -1 })
    // One batch per record: each offset its own batch, so ranges are exact.
    for (let i = 0; i < 10; i++)
      await producer.send({ topic: TOPIC, partition: 0, value: Buffer.from(`v${i}`) })
    await producer.close()
    const admin = new Admin({ bootstrapServers: cluster.bootstrap })
    await admin.findCoordinator(GROUP)
    admin.close()

    // A member of the group (the coordinator knows it), then its fetch on the leader.
    const joined = await rawCall<ShareGroupHeartbeatResponse>(
      await connect(cluster.state('__consumer_offsets', 0).leader),
      ApiKey.ShareGroupHeartbeat,
      1,
      { groupId: GROUP, memberId: FIRST, memberEpoch: 0, subscribedTopicNames: [TOPIC] },
    )
    assert.equal(joined.errorCode, ErrorCode.NONE)
    const leader = cluster.state(TOPIC, 0).leader
    const onLeader = await connect(leader)
    let first: Awaited<ReturnType<typeof shareFetch>> = { errorCode: 0, partitionError: 0, acquired: [] }
    let epoch = 0
    await waitUntil('the first member acquires 0-9', 60_000, async () => {
      first = await shareFetch(onLeader, topicId, FIRST, epoch)
      epoch++
      return first.acquired.length > 0
    })
    assert.deepEqual(first.acquired, ['0-9x1'])
    const acknowledged = await rawCall<ShareAcknowledgeResponse>(
      onLeader,
      ApiKey.ShareAcknowledge,
      1,
      {
        groupId: GROUP,
        memberId: FIRST,
        shareSessionEpoch: epoch,
        topics: [
          {
            topicId,
            partitions: [
              {
                partitionIndex: 0,
                partitionMaxBytes: 0,
                acknowledgementBatches: [
                  { firstOffset: 0n, lastOffset: 3n, acknowledgeTypes: [1] },
                  { firstOffset: 4n, lastOffset: 5n, acknowledgeTypes: [2] },
                  { firstOffset: 6n, lastOffset: 6n, acknowledgeTypes: [3] },
                ],
              },
            ],
          },
        ],
      },
      30_000,
    )
    assert.deepEqual(
      acknowledged.responses.flatMap((t) => t.partitions.map((p) => p.errorCode)),
      [ErrorCode.NONE],
      'acknowledged once written to the share coordinator',
    )

    // The partition's leader goes (its leadership moves), then comes back.
    await cluster.stopBroker(leader)
    await waitUntil('a new leader', 30_000, () => {
      const now = cluster.state(TOPIC, 0).leader
      return now >= 0 && now !== leader
    })
    await cluster.startBroker(leader)
    const stateKey = `${GROUP}:${topicId}:0`
    const statePartition = partitionForShareKey(stateKey, STATE_PARTITIONS)
    await waitUntil('the share state partition in sync on 3 brokers', 30_000, () => {
      const state = cluster.state(SHARE_GROUP_STATE_TOPIC, statePartition)
      return state.isr.length === 3 && state.leader >= 0
    })
    // Then the broker coordinating the share-partition's state goes.
    const coordinator = cluster.state(SHARE_GROUP_STATE_TOPIC, statePartition).leader
    await cluster.stopBroker(coordinator)
    await waitUntil('a new share coordinator and partition leader', 30_000, () => {
      const state = cluster.state(SHARE_GROUP_STATE_TOPIC, statePartition)
      const partition = cluster.state(TOPIC, 0)
      return (
        state.leader >= 0 &&
        state.leader !== coordinator &&
        partition.leader >= 0 &&
        partition.leader !== coordinator
      )
    })

    // FindCoordinator key type 2 names the share coordinator now; a malformed key is refused.
    const found = await rawCall<FindCoordinatorResponse>(
      await connect(cluster.state(TOPIC, 0).leader),
      ApiKey.FindCoordinator,
      6,
      {
        keyType: 2,
        coordinatorKeys: [stateKey, 'no-partition'],
      },
    )
    assert.deepEqual(
      found.coordinators.map((c) => `${c.errorCode} ${c.nodeId}`),
      [
        `${ErrorCode.NONE} ${cluster.state(SHARE_GROUP_STATE_TOPIC, statePartition).leader}`,
        `${ErrorCode.INVALID_REQUEST} -1`,
      ],
    )

    const newLeader = cluster.state(TOPIC, 0).leader
    const onNewLeader = await connect(newLeader)
    const seen: string[] = []
    let secondEpoch = 0
    await waitUntil('the second member acquires 4-5 and 7-9', 60_000, async () => {
      const got = await shareFetch(onNewLeader, topicId, SECOND, secondEpoch)
      secondEpoch++
      seen.push(...got.acquired)
      return seen.length >= 2
    })
    assert.equal(seen.length, 2, `${seen}`)
    assert.equal(seen[0], '4-5x2', 'accepted 0-3 and rejected 6 never again; 4-5 counted on')
    // 7-9 were only acquired, never written: delivered again with count 1, or with count 2 when
    // the stopping leader's closing connections released them (Kafka's socket server tells its
    // disconnect listeners on shutdown too) and that write reached the share coordinator first.
    assert.ok(['7-9x1', '7-9x2'].includes(seen[1]), `7-9 delivered again: ${seen[1]}`)

    const described = await rawCall<DescribeShareGroupOffsetsResponse>(
      await connect(cluster.state('__consumer_offsets', 0).leader),
      ApiKey.DescribeShareGroupOffsets,
      1,
      { groups: [{ groupId: GROUP, topics: [{ topicName: TOPIC, partitions: [0] }] }] },
      30_000,
    )
    const offsets = described.groups[0].topics[0].partitions[0]
    assert.equal(offsets.errorCode, ErrorCode.NONE)
    assert.equal(offsets.startOffset, 4n, 'the persisted SPSO')
  } finally {
    for (const raw of clients) raw.close()
    await cluster.close()
  }
})
