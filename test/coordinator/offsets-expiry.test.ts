/**
 * offsets.retention.minutes / offsets.retention.check.interval.ms with Kafka's rules
 * (GroupMetadata.removeExpiredOffsets, KIP-211), on a manual clock: the GroupCoordinator
 * runtime over an in-memory __consumer_offsets partition (so a second coordinator can load
 * what the first wrote), and the pure expireOffsets step for the finer rules.
 */

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import { systemRandom } from '../../src/common/random.js'
import { toOffset } from '../../src/common/types.js'
import type { Effects, JoinResult } from '../../src/coordinator/effects.js'
import {
  CONSUMER_OFFSETS_TOPIC,
  DEFAULT_COORDINATOR_CONFIG,
  type Group,
  newGroup,
} from '../../src/coordinator/group.js'
import { GroupCoordinator, type GroupCoordinatorConfig } from '../../src/coordinator/group-coordinator.js'
import {
  type CommitRequest,
  commitOffsets,
  expireOffsets,
  replayRecord,
} from '../../src/coordinator/offsets.js'
import { groupMetadataRecord, joinGroup, leaveGroup, syncGroup } from '../../src/coordinator/rebalance.js'
import {
  type CoordinatorRecord,
  decodeKey,
  encodeOffsetCommitValue,
  offsetCommitKey,
} from '../../src/coordinator/records.js'
import type { ClusterImage } from '../../src/metadata/cluster-image.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import {
  defaultConsumerProtocolSubscription,
  encodeConsumerProtocolSubscription,
} from '../../src/protocol/generated/consumer-protocol-subscription.js'
import { Writer } from '../../src/protocol/primitives.js'
import { decodeRecordBatch, iterateBatches } from '../../src/protocol/record-batch.js'
import type { Partition } from '../../src/replication/partition.js'
import { toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock } from '../storage/helpers.js'

const MINUTE = 60_000
const RETENTION_MS = 60 * MINUTE
const CHECK_INTERVAL_MS = 10 * MINUTE
const SESSION_MS = 30 * MINUTE

const CONFIG: GroupCoordinatorConfig = {
  ...DEFAULT_COORDINATOR_CONFIG,
  groupInitialRebalanceDelayMs: 0,
  offsetsRetentionMs: RETENTION_MS,
  offsetsRetentionCheckIntervalMs: CHECK_INTERVAL_MS,
  offsetsTopicNumPartitions: 1,
  offsetsTopicReplicationFactor: 1,
  offsetsTopicSegmentBytes: 100 * 1024 * 1024,
  offsetsCommitTimeoutMs: 5000,
  offsetsLoadBufferSize: 5 * 1024 * 1024,
}

function subscription(topics: string[]): Buffer {
  const w = new Writer(64)
  w.writeInt16(0)
  encodeConsumerProtocolSubscription(w, 0, { ...defaultConsumerProtocolSubscription(), topics })
  return w.toBuffer()
}

/** __consumer_offsets partition 0 in memory: one "offset" per appended batch. */
class MemoryLog {
  readonly batches: Buffer[] = []
  readonly logStartOffset = 0
  get logEndOffset(): number {
    return this.batches.length
  }
  async read(offset: number) {
    const records = this.batches.slice(offset)
    return {
      records,
      sizeInBytes: records.reduce((n, b) => n + b.length, 0),
      nextOffset: this.batches.length,
    }
  }
  /** Every record appended so far, decoded. */
  async records(): Promise<CoordinatorRecord[]> {
    const out: CoordinatorRecord[] = []
    for (const chunk of this.batches)
      for (const span of iterateBatches(chunk)) {
        const batch = await decodeRecordBatch(chunk, span.at)
        for (const r of batch.records) out.push({ key: r.key!, value: r.value })
      }
    return out
  }
}

/** One broker (node 1) leading __consumer_offsets-0, whose log is `log`; appends always commit. */
function startCoordinator(clock: ManualClock, log: MemoryLog): GroupCoordinator {
  const partition = { partition: 0, isLeader: true, leaderEpoch: 0, log } as unknown as Partition
  const partitions = [{ partition: 0, leader: 1 }]
  const image = {
    brokers: new Map([[1, { nodeId: 1, host: '127.0.0.1', port: 9092 }]]),
    topics: new Map([
      [CONSUMER_OFFSETS_TOPIC, { partitions }],
      // Two partitions each: commits to a partition a topic lacks are refused (UNKNOWN_TOPIC_OR_PARTITION).
      ['t1', { partitions: [...partitions, { partition: 1, leader: 1 }] }],
      ['t2', { partitions: [...partitions, { partition: 1, leader: 1 }] }],
    ]),
  } as unknown as ClusterImage
  const coordinator = new GroupCoordinator(
    {
      nodeId: toBrokerId(1),
      clock,
      random: systemRandom,
      logger: silentLogger,
      replicaManager: {
        getPartition: (topic, p) => (topic === CONSUMER_OFFSETS_TOPIC && p === 0 ? partition : undefined),
        appendToLeader: async ({ records }) => {
          log.batches.push(Buffer.from(records))
          return {
            errorCode: ErrorCode.NONE,
            baseOffset: toOffset(log.batches.length - 1),
            logAppendTimeMs: -1,
            logStartOffset: toOffset(0),
          }
        },
      },
      metadataImage: () => image,
      topicAdmin: { ensureInternalTopic: () => Promise.reject(new Error('not in this test')) },
    },
    CONFIG,
  )
  coordinator.onPartitionsChanged()
  return coordinator
}

/** Lets appends complete and their follow-ups run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
}

async function loaded(coordinator: GroupCoordinator): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (coordinator.fetchOffsets('any', []).errorCode === ErrorCode.NONE) return
    await settle()
  }
  throw new Error('the coordinator did not load')
}

/** A member subscribed to `topics`, joined and synced: the group is Stable. */
async function stableMember(coordinator: GroupCoordinator, groupId: string, topics: string[]) {
  const join = (await coordinator.join({
    groupId,
    memberId: '',
    groupInstanceId: null,
    protocolType: 'consumer',
    protocols: [{ name: 'range', metadata: subscription(topics) }],
    sessionTimeoutMs: SESSION_MS,
    rebalanceTimeoutMs: 10000,
    clientId: 'c',
    clientHost: '/127.0.0.1',
    requireKnownMemberId: false,
    supportsSkipAssignment: false,
  })) as JoinResult
  assert.equal(join.errorCode, ErrorCode.NONE)
  const sync = await coordinator.sync(groupId, {
    memberId: join.memberId,
    groupInstanceId: null,
    generationId: join.generationId,
    protocolType: 'consumer',
    protocolName: 'range',
    assignments: [{ memberId: join.memberId, assignment: Buffer.from('a') }],
  })
  assert.equal(sync.errorCode, ErrorCode.NONE)
  assert.equal(coordinator.describeGroup(groupId).state, 'Stable')
  return { memberId: join.memberId, generationId: join.generationId }
}

async function commit(
  coordinator: GroupCoordinator,
  groupId: string,
  member: { memberId: string; generationId: number } | null,
  offsets: [topic: string, partition: number, offset: number][],
): Promise<void> {
  const result = await coordinator.commit(groupId, {
    memberId: member?.memberId ?? '',
    groupInstanceId: null,
    generationId: member?.generationId ?? -1,
    retentionTimeMs: -1,
    partitions: offsets.map(([topic, partition, offset]) => ({
      topic,
      partition,
      offset: BigInt(offset),
      leaderEpoch: -1,
      metadata: '',
    })),
  })
  assert.deepEqual(
    [...result.partitions.values()],
    offsets.map(() => ErrorCode.NONE),
  )
}

/** Committed offsets as "topic-partition=offset", sorted; [] when none. */
function offsetsOf(coordinator: GroupCoordinator, groupId: string): string[] {
  const result = coordinator.fetchOffsets(groupId, null)
  assert.equal(result.errorCode, ErrorCode.NONE)
  return result.topics.flatMap((t) => t.partitions.map((p) => `${t.name}-${p.partition}=${p.offset}`)).sort()
}

/** Moves the clock in check-interval steps (expiry runs at each), heartbeating `member` if given. */
async function advance(
  clock: ManualClock,
  coordinator: GroupCoordinator,
  ms: number,
  heartbeat?: { groupId: string; memberId: string; generationId: number },
): Promise<void> {
  for (let left = ms; left > 0; left -= CHECK_INTERVAL_MS) {
    clock.advance(Math.min(left, CHECK_INTERVAL_MS))
    await settle()
    if (heartbeat)
      assert.equal(
        coordinator.heartbeat(heartbeat.groupId, heartbeat.memberId, null, heartbeat.generationId),
        ErrorCode.NONE,
      )
  }
}

/** Tombstones in the log, as "offset:group:topic-partition" or "group:group". */
async function tombstones(log: MemoryLog): Promise<string[]> {
  return (await log.records())
    .filter((r) => r.value === null)
    .map((r) => {
      const key = decodeKey(r.key)!
      return key.kind === 'offset'
        ? `offset:${key.group}:${key.topic}-${key.partition}`
        : `group:${key.group}`
    })
}

test('offsets of an Empty consumer group expire once the retention has passed since it became Empty, not before; a reload does not bring them back', async () => {
  const clock = new ManualClock()
  const log = new MemoryLog()
  const coordinator = startCoordinator(clock, log)
  await loaded(coordinator)
  const member = await stableMember(coordinator, 'g', ['t1'])
  await commit(coordinator, 'g', member, [
    ['t1', 0, 42],
    ['t1', 1, 7],
  ])
  // Stable for twice the retention: nothing expires (the commits are old, the group is not Empty).
  await advance(clock, coordinator, 2 * RETENTION_MS, { groupId: 'g', ...member })
  assert.deepEqual(offsetsOf(coordinator, 'g'), ['t1-0=42', 't1-1=7'])
  assert.deepEqual(coordinator.leave('g', [{ memberId: member.memberId, groupInstanceId: null }]).codes, [
    ErrorCode.NONE,
  ])
  await settle()
  assert.equal(coordinator.describeGroup('g').state, 'Empty')
  // Retention counts from when the group became Empty: 50 minutes on, the offsets are kept.
  await advance(clock, coordinator, 50 * MINUTE)
  assert.deepEqual(offsetsOf(coordinator, 'g'), ['t1-0=42', 't1-1=7'])
  assert.deepEqual(await tombstones(log), [])
  // The check after the hour has passed removes them, and the group with them.
  await advance(clock, coordinator, 20 * MINUTE)
  assert.deepEqual(offsetsOf(coordinator, 'g'), [])
  assert.equal(coordinator.describeGroup('g').state, 'Dead')
  assert.deepEqual(
    coordinator.listGroups().groups.map((g) => g.groupId),
    [],
  )
  assert.deepEqual((await tombstones(log)).sort(), ['group:g', 'offset:g:t1-0', 'offset:g:t1-1'])

  // A coordinator that loads the partition now (a failover) finds neither offsets nor group.
  coordinator.shutdown()
  const next = startCoordinator(clock, log)
  await loaded(next)
  assert.deepEqual(offsetsOf(next, 'g'), [])
  assert.equal(next.describeGroup('g').state, 'Dead')
  assert.deepEqual(
    next.listGroups().groups.map((g) => g.groupId),
    [],
  )
  next.shutdown()
})

test('a coordinator loading an Empty group keeps counting the retention from when it became Empty', async () => {
  const clock = new ManualClock()
  const log = new MemoryLog()
  const first = startCoordinator(clock, log)
  await loaded(first)
  const member = await stableMember(first, 'g', ['t1'])
  await commit(first, 'g', member, [['t1', 0, 5]])
  first.leave('g', [{ memberId: member.memberId, groupInstanceId: null }])
  await settle()
  await advance(clock, first, 40 * MINUTE)
  first.shutdown()
  const second = startCoordinator(clock, log)
  await loaded(second)
  assert.equal(second.describeGroup('g').state, 'Empty')
  // 50 minutes after the group became Empty: not yet.
  await advance(clock, second, 10 * MINUTE)
  assert.deepEqual(offsetsOf(second, 'g'), ['t1-0=5'])
  // 70 minutes: gone (had the load restarted the count, they would stay until 100).
  await advance(clock, second, 20 * MINUTE)
  assert.deepEqual(offsetsOf(second, 'g'), [])
  second.shutdown()
})

test("a Stable group's offsets do not expire, except those of topics no member subscribes to (KIP-211)", async () => {
  const clock = new ManualClock()
  const log = new MemoryLog()
  const coordinator = startCoordinator(clock, log)
  await loaded(coordinator)
  const member = await stableMember(coordinator, 'g', ['t1'])
  await commit(coordinator, 'g', member, [
    ['t1', 0, 10],
    ['t2', 0, 20],
  ])
  await advance(clock, coordinator, 50 * MINUTE, { groupId: 'g', ...member })
  assert.deepEqual(offsetsOf(coordinator, 'g'), ['t1-0=10', 't2-0=20'])
  await advance(clock, coordinator, 20 * MINUTE, { groupId: 'g', ...member })
  assert.deepEqual(offsetsOf(coordinator, 'g'), ['t1-0=10'], 't2 is not subscribed: its offset expired')
  await advance(clock, coordinator, 5 * RETENTION_MS, { groupId: 'g', ...member })
  assert.deepEqual(offsetsOf(coordinator, 'g'), ['t1-0=10'], 'the subscribed topic keeps its offset')
  assert.equal(coordinator.describeGroup('g').state, 'Stable')
  assert.deepEqual(await tombstones(log), ['offset:g:t2-0'])
  coordinator.shutdown()
  const next = startCoordinator(clock, log)
  await loaded(next)
  assert.deepEqual(offsetsOf(next, 'g'), ['t1-0=10'])
  next.shutdown()
})

test('a standalone group (commits only, no members) expires each offset by its commit time', async () => {
  const clock = new ManualClock()
  const log = new MemoryLog()
  const coordinator = startCoordinator(clock, log)
  await loaded(coordinator)
  await commit(coordinator, 's', null, [['t1', 0, 1]])
  await advance(clock, coordinator, 30 * MINUTE)
  await commit(coordinator, 's', null, [['t1', 1, 2]])
  await advance(clock, coordinator, 40 * MINUTE)
  assert.deepEqual(offsetsOf(coordinator, 's'), ['t1-1=2'], 'the older commit expired first')
  await advance(clock, coordinator, 30 * MINUTE)
  assert.deepEqual(offsetsOf(coordinator, 's'), [])
  assert.deepEqual(
    coordinator.listGroups().groups.map((g) => g.groupId),
    [],
  )
  // Offset storage only (no generation): offset tombstones, no group tombstone, as Kafka.
  assert.deepEqual(await tombstones(log), ['offset:s:t1-0', 'offset:s:t1-1'])
  coordinator.shutdown()
  const next = startCoordinator(clock, log)
  await loaded(next)
  assert.deepEqual(offsetsOf(next, 's'), [])
  next.shutdown()
})

// ---- the pure step ------------------------------------------------------------------------

const PURE_CONFIG = {
  ...DEFAULT_COORDINATOR_CONFIG,
  offsetsRetentionMs: RETENTION_MS,
  groupInitialRebalanceDelayMs: 0,
}

function commitRequest(
  offsets: [string, number, number][],
  retentionTimeMs = -1,
  member = { memberId: '', generationId: -1 },
): CommitRequest {
  return {
    memberId: member.memberId,
    groupInstanceId: null,
    generationId: member.generationId,
    retentionTimeMs,
    partitions: offsets.map(([topic, partition, offset]) => ({
      topic,
      partition,
      offset: BigInt(offset),
      leaderEpoch: -1,
      metadata: '',
    })),
  }
}

let nextRecordOffset = 0

/** Runs a step as if its records were committed at once (each batch at the next offset). */
function committed(effects: Effects, now: number): void {
  if (effects.records.length === 0 || !effects.afterAppend) return
  const baseOffset = toOffset(nextRecordOffset)
  nextRecordOffset += effects.records.length
  committed(effects.afterAppend(ErrorCode.NONE, now, baseOffset), now)
}

/** An Empty consumer group (one member joined, synced and left at `emptyAt`) with t1-0 committed. */
function emptyConsumerGroup(emptyAt: number): Group {
  const group = newGroup('g', 0)
  const join = (memberId: string) =>
    joinGroup(
      group,
      {
        groupId: 'g',
        memberId: '',
        groupInstanceId: null,
        protocolType: 'consumer',
        protocols: [{ name: 'range', metadata: subscription(['t1']) }],
        sessionTimeoutMs: SESSION_MS,
        rebalanceTimeoutMs: 10000,
        clientId: 'c',
        clientHost: 'h',
        requireKnownMemberId: false,
        supportsSkipAssignment: false,
        newMemberId: memberId,
      },
      1,
      0,
      PURE_CONFIG,
    )
  committed(join('m'), 0)
  committed(
    syncGroup(
      group,
      {
        memberId: 'm',
        groupInstanceId: null,
        generationId: 1,
        protocolType: null,
        protocolName: null,
        assignments: [],
      },
      2,
      0,
    ),
    0,
  )
  committed(
    commitOffsets(
      group,
      commitRequest([['t1', 0, 3]], -1, { memberId: 'm', generationId: 1 }),
      3,
      0,
      PURE_CONFIG,
      () => true,
    ),
    0,
  )
  committed(leaveGroup(group, [{ memberId: 'm', groupInstanceId: null }], emptyAt).effects, emptyAt)
  assert.equal(group.state, 'Empty')
  return group
}

test('expireOffsets: a commit with its own retention (OffsetCommit v2-4) expires at its expire timestamp', () => {
  const group = newGroup('s', 0)
  committed(
    commitOffsets(group, commitRequest([['t1', 0, 1]], 5 * MINUTE), 1, 0, PURE_CONFIG, () => true),
    0,
  )
  committed(
    commitOffsets(group, commitRequest([['t1', 1, 1]]), 1, 0, PURE_CONFIG, () => true),
    0,
  )
  assert.deepEqual(expireOffsets(group, 5 * MINUTE - 1, PURE_CONFIG), [])
  const records = expireOffsets(group, 5 * MINUTE, PURE_CONFIG)
  assert.deepEqual(
    records.map((r) => decodeKey(r.key)),
    [{ kind: 'offset', group: 's', topic: 't1', partition: 0 }],
  )
  assert.equal(group.state, 'Empty', 't1-1 is still there')
})

test('expireOffsets: a partition with a commit still being appended neither expires nor lets the group die', () => {
  const group = emptyConsumerGroup(0)
  // A new commit from outside the group (generation -1) is on its way when the check runs.
  const pending = commitOffsets(
    group,
    commitRequest([['t1', 0, 9]]),
    7,
    RETENTION_MS,
    PURE_CONFIG,
    () => true,
  )
  assert.deepEqual(expireOffsets(group, 2 * RETENTION_MS, PURE_CONFIG), [])
  assert.equal(group.state, 'Empty')
  committed(pending, 2 * RETENTION_MS)
  assert.equal(group.offsets.get('t1')?.get(0)?.offset, 9n)
  assert.equal(group.pendingOffsetCommits.size, 0)
  // The group has been Empty for two retentions: the offset goes at the next check, and the group with it.
  const records = expireOffsets(group, 2 * RETENTION_MS, PURE_CONFIG)
  assert.deepEqual(
    records.map((r) => decodeKey(r.key)?.kind),
    ['offset', 'group'],
  )
  assert.equal(group.state, 'Dead')
})

test('expireOffsets: nothing expires while the group rebalances; the tombstones replay to no group', () => {
  const group = emptyConsumerGroup(0)
  group.state = 'PreparingRebalance'
  assert.deepEqual(expireOffsets(group, 10 * RETENTION_MS, PURE_CONFIG), [])
  group.state = 'Empty'
  const records = expireOffsets(group, RETENTION_MS, PURE_CONFIG)
  assert.equal(group.state, 'Dead')
  // Replaying the group's records and then these tombstones leaves nothing behind.
  const groups = new Map<string, Group>()
  const history: CoordinatorRecord[] = [
    groupMetadataRecord(emptyConsumerGroup(0), 0),
    {
      key: offsetCommitKey('g', 't1', 0),
      value: encodeOffsetCommitValue({
        offset: 3n,
        leaderEpoch: -1,
        metadata: '',
        commitTimestampMs: 0,
        expireTimestampMs: null,
      }),
    },
  ]
  for (const record of history) replayRecord(groups, record, 0)
  assert.equal(groups.get('g')?.offsets.size, 1)
  for (const record of records) replayRecord(groups, record, 0)
  assert.equal(groups.size, 0)
})
