/**
 * The group coordinator's consumer-group writes (group-coordinator.ts): one at a time per
 * group, and a write refused before it reaches the log is undone in memory, so no later
 * heartbeat builds on a change the log does not hold. Driven through the real
 * GroupCoordinator with a replica manager whose appends succeed or are refused on demand.
 */

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import { systemRandom } from '../../src/common/random.js'
import { toOffset } from '../../src/common/types.js'
import {
  type ConsumerHeartbeatRequest,
  type ConsumerHeartbeatResult,
  DEFAULT_CONSUMER_GROUP_CONFIG,
} from '../../src/coordinator/consumer-group.js'
import { CONSUMER_OFFSETS_TOPIC, DEFAULT_COORDINATOR_CONFIG } from '../../src/coordinator/group.js'
import { GroupCoordinator } from '../../src/coordinator/group-coordinator.js'
import type { ClusterImage } from '../../src/metadata/cluster-image.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { KafkaError } from '../../src/replication/kafka-error.js'
import type { Partition } from '../../src/replication/partition.js'
import { plant } from '../../src/sim/mutations.js'
import { toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock } from '../storage/helpers.js'

const TOPIC_ID = Buffer.alloc(16, 7).toString('base64url')
const OFFSETS_TOPIC_ID = Buffer.alloc(16, 9).toString('base64url')

function startCoordinator(clock: ManualClock, appends: { refuse: boolean; count: number }): GroupCoordinator {
  const log = {
    logStartOffset: 0,
    logEndOffset: 0,
    read: () => Promise.resolve({ records: [], sizeInBytes: 0, nextOffset: 0 }),
  }
  const partition = { partition: 0, isLeader: true, leaderEpoch: 0, log } as unknown as Partition
  const image = {
    brokers: new Map([[1, { nodeId: 1, host: '127.0.0.1', port: 9092 }]]),
    topics: new Map([
      [
        CONSUMER_OFFSETS_TOPIC,
        {
          name: CONSUMER_OFFSETS_TOPIC,
          topicId: OFFSETS_TOPIC_ID,
          partitions: [{ partition: 0, leader: 1 }],
        },
      ],
      [
        't',
        { name: 't', topicId: TOPIC_ID, partitions: [0, 1, 2, 3].map((p) => ({ partition: p, leader: 1 })) },
      ],
    ]),
  } as unknown as ClusterImage
  return new GroupCoordinator(
    {
      nodeId: toBrokerId(1),
      clock,
      random: systemRandom,
      logger: silentLogger,
      replicaManager: {
        getPartition: (topic, p) => (topic === CONSUMER_OFFSETS_TOPIC && p === 0 ? partition : undefined),
        appendToLeader: async () => {
          appends.count++
          // Refused before anything is written, as an acks=all append below min ISR.
          if (appends.refuse)
            throw new KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, 'ISR below min.insync.replicas')
          return {
            errorCode: ErrorCode.NONE,
            baseOffset: toOffset(appends.count),
            logAppendTimeMs: -1,
            logStartOffset: toOffset(0),
          }
        },
      },
      metadataImage: () => image,
      topicAdmin: { ensureInternalTopic: () => Promise.reject(new Error('not in this test')) },
    },
    {
      ...DEFAULT_COORDINATOR_CONFIG,
      offsetsTopicNumPartitions: 1,
      offsetsTopicReplicationFactor: 1,
      offsetsTopicSegmentBytes: 100 * 1024 * 1024,
      offsetsCommitTimeoutMs: 5000,
      offsetsRetentionCheckIntervalMs: 600_000,
      offsetsLoadBufferSize: 5 * 1024 * 1024,
      // Every join reassigns at once: these tests are about writes, not the assignment interval.
      consumerGroup: { ...DEFAULT_CONSUMER_GROUP_CONFIG, assignmentIntervalMs: 0 },
    },
  )
}

function request(memberId: string, memberEpoch: number, owned: number[] | null): ConsumerHeartbeatRequest {
  return {
    groupId: 'g',
    memberId,
    memberEpoch,
    instanceId: null,
    rackId: null,
    rebalanceTimeoutMs: memberEpoch === 0 ? 30000 : -1,
    subscribedTopicNames: memberEpoch === 0 ? ['t'] : null,
    subscribedTopicRegex: null,
    serverAssignor: null,
    topicPartitions:
      memberEpoch === 0 ? [] : owned === null ? null : [{ topicId: TOPIC_ID, partitions: owned }],
    clientId: 'c',
    clientHost: '/127.0.0.1',
  }
}

const partitions = (r: ConsumerHeartbeatResult) => (r.assignment ?? []).flatMap((t) => t.partitions)

test('a consumer-group write refused before the log is undone: the partition stays with its owner', async () => {
  const clock = new ManualClock()
  const appends = { refuse: false, count: 0 }
  const coordinator = startCoordinator(clock, appends)
  coordinator.onPartitionsChanged()
  await new Promise((resolve) => setImmediate(resolve))
  const a = await coordinator.consumerGroupHeartbeat(request('A', 0, null), 1)
  assert.equal(a.errorCode, ErrorCode.NONE)
  assert.deepEqual(partitions(a), [0, 1, 2, 3])
  const b = await coordinator.consumerGroupHeartbeat(request('B', 0, null), 1)
  assert.equal(b.memberEpoch, 2)
  assert.deepEqual(partitions(b), [])
  // A is told what to keep; it revokes the rest.
  const keep = partitions(await coordinator.consumerGroupHeartbeat(request('A', 1, [0, 1, 2, 3]), 1))
  assert.equal(keep.length, 2)
  // A's acknowledgement cannot be written: it is refused and undone.
  appends.refuse = true
  const refused = await coordinator.consumerGroupHeartbeat(request('A', 1, keep), 1)
  assert.equal(refused.errorCode, ErrorCode.COORDINATOR_NOT_AVAILABLE)
  appends.refuse = false
  // So B may not take A's revoked partitions yet: A has not (durably) given them up.
  const stillWaiting = await coordinator.consumerGroupHeartbeat(request('B', 2, []), 1)
  assert.equal(stillWaiting.errorCode, ErrorCode.NONE)
  assert.deepEqual(partitions(stillWaiting), [])
  const described = coordinator.consumerGroupDescribe('g')
  const memberA = described.members.find((m) => m.memberId === 'A')
  assert.equal(memberA?.memberEpoch, 1, 'A is still revoking at epoch 1')
  // A acknowledges again, written this time; then B gets the partitions.
  const acked = await coordinator.consumerGroupHeartbeat(request('A', 1, keep), 1)
  assert.equal(acked.memberEpoch, 2)
  const handed = await coordinator.consumerGroupHeartbeat(request('B', 2, []), 1)
  assert.deepEqual([...keep, ...partitions(handed)].sort(), [0, 1, 2, 3])
  coordinator.shutdown()
})

test('with the undo planted out (sim mutation consumer-write-not-undone), B takes partitions A never durably gave up', async () => {
  const undo = plant('consumer-write-not-undone', () => undefined)
  try {
    const clock = new ManualClock()
    const appends = { refuse: false, count: 0 }
    const coordinator = startCoordinator(clock, appends)
    coordinator.onPartitionsChanged()
    await new Promise((resolve) => setImmediate(resolve))
    await coordinator.consumerGroupHeartbeat(request('A', 0, null), 1)
    await coordinator.consumerGroupHeartbeat(request('B', 0, null), 1)
    const keep = partitions(await coordinator.consumerGroupHeartbeat(request('A', 1, [0, 1, 2, 3]), 1))
    appends.refuse = true
    await coordinator.consumerGroupHeartbeat(request('A', 1, keep), 1)
    appends.refuse = false
    const b = await coordinator.consumerGroupHeartbeat(request('B', 2, []), 1)
    assert.equal(partitions(b).length, 2, 'the bug the first test guards against')
    coordinator.shutdown()
  } finally {
    undo()
  }
})

test('consumer-group writes of one group go one at a time, in arrival order', async () => {
  const clock = new ManualClock()
  const appends = { refuse: false, count: 0 }
  const coordinator = startCoordinator(clock, appends)
  coordinator.onPartitionsChanged()
  await new Promise((resolve) => setImmediate(resolve))
  // Two joins sent together: the second runs only after the first's records are written.
  const [a, b] = await Promise.all([
    coordinator.consumerGroupHeartbeat(request('A', 0, null), 1),
    coordinator.consumerGroupHeartbeat(request('B', 0, null), 1),
  ])
  assert.deepEqual([a.memberEpoch, b.memberEpoch], [1, 2])
  assert.equal(appends.count, 2)
  coordinator.shutdown()
})

test('a subscription regex is resolved against every topic, internal ones included, as Kafka does', async () => {
  const clock = new ManualClock()
  const coordinator = startCoordinator(clock, { refuse: false, count: 0 })
  coordinator.onPartitionsChanged()
  await new Promise((resolve) => setImmediate(resolve))
  // franz-go's Test848RegexBrokerResolves: Kafka 4.4 assigns __consumer_offsets to a member
  // whose regex matches it.
  const joined = await coordinator.consumerGroupHeartbeat(
    { ...request('A', 0, null), subscribedTopicNames: null, subscribedTopicRegex: '.*(?:t|_offsets)' },
    1,
  )
  assert.equal(joined.errorCode, ErrorCode.NONE)
  const topicIds = (joined.assignment ?? []).map((t) => t.topicId).sort()
  assert.deepEqual(topicIds, [OFFSETS_TOPIC_ID, TOPIC_ID].sort())
  const described = coordinator.consumerGroupDescribe('g')
  assert.equal(described.members[0]?.subscribedTopicRegex, '.*(?:t|_offsets)')
  coordinator.shutdown()
})
