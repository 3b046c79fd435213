/**
 * KIP-848 consumer groups as pure steps (coordinator/consumer-group.ts): the server
 * assignors, the reconciliation state machine (revocation before reassignment, epochs,
 * fencing), leaves and static members, timeouts, offset epochs, and replay of the records.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { FIRST_OFFSET } from '../../src/common/types.js'
import { rangeAssign, uniformAssign } from '../../src/coordinator/consumer-assignors.js'
import {
  type ConsumerGroupConfig,
  type ConsumerHeartbeatRequest,
  type ConsumerHeartbeatResult,
  consumerGroupHeartbeat,
  consumerGroupTick,
  DEFAULT_CONSUMER_GROUP_CONFIG,
  makeConsumerGroup,
  type TopicsView,
  validateConsumerOffsetRequest,
  validateHeartbeat,
} from '../../src/coordinator/consumer-group.js'
import type { Effects } from '../../src/coordinator/effects.js'
import { type Group, MemberState, newGroup } from '../../src/coordinator/group.js'
import { replayRecord } from '../../src/coordinator/offsets.js'
import {
  type CoordinatorRecord,
  decodeConsumerKey,
  decodeTargetAssignmentMetadataValue,
} from '../../src/coordinator/records.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'

/** A topic id (Kafka's Uuid, base64url). */
const id = (n: number) => Buffer.alloc(16, n).toString('base64url')
const T = id(1)
const B = id(2)
const E = id(3)
const U = id(4)
const X = id(5)
const J = id(6)
const TOPICS: TopicsView = { byName: new Map([['a', { topicId: T, partitions: 6 }]]) }
/** Every change reassigns at once, except in the assignment interval's own test. */
const CONFIG = { ...DEFAULT_CONSUMER_GROUP_CONFIG, assignmentIntervalMs: 0 }

function beat(
  group: Group,
  log: CoordinatorRecord[],
  req: Partial<ConsumerHeartbeatRequest> & { memberId: string; memberEpoch: number },
  nowMs = 0,
  topics = TOPICS,
  config: ConsumerGroupConfig = CONFIG,
): ConsumerHeartbeatResult {
  const full: ConsumerHeartbeatRequest = {
    groupId: group.groupId,
    instanceId: null,
    rackId: null,
    rebalanceTimeoutMs: req.memberEpoch === 0 ? 30000 : -1,
    subscribedTopicNames: req.memberEpoch === 0 ? ['a'] : null,
    subscribedTopicRegex: null,
    serverAssignor: null,
    topicPartitions: req.memberEpoch === 0 ? [] : null,
    clientId: 'c',
    clientHost: '/127.0.0.1',
    ...req,
  }
  assert.equal(validateHeartbeat(full, 1, config), null)
  return settle(consumerGroupHeartbeat(group, full, 1, nowMs, config, topics, 'generated'), log)
}

/** Commits the step's records (appending them to `log`) and returns its reply. */
function settle(effects: Effects, log: CoordinatorRecord[]): ConsumerHeartbeatResult {
  log.push(...effects.records)
  const done = effects.afterAppend ? effects.afterAppend(ErrorCode.NONE, 0, FIRST_OFFSET) : effects
  assert.equal(done.replies.length, 1)
  return done.replies[0].response as ConsumerHeartbeatResult
}

function owned(result: ConsumerHeartbeatResult): number[] {
  return (result.assignment ?? []).flatMap((t) => t.partitions)
}

function consumerGroup(): Group {
  const group = newGroup('g', 0)
  makeConsumerGroup(group)
  return group
}

test('range assigns contiguous ranges per topic, the first members one more', () => {
  const members = ['m2', 'm1', 'm3'].map((memberId) => ({ memberId, subscribedTopicIds: new Set([T, B]) }))
  const result = rangeAssign({
    members,
    partitionCounts: new Map([
      [T, 7],
      [B, 2],
    ]),
    previous: new Map(),
  })
  assert.deepEqual(result.get('m1')?.get(T), [0, 1, 2])
  assert.deepEqual(result.get('m2')?.get(T), [3, 4])
  assert.deepEqual(result.get('m3')?.get(T), [5, 6])
  assert.deepEqual(result.get('m1')?.get(B), [0])
  assert.deepEqual(result.get('m2')?.get(B), [1])
  assert.equal(result.get('m3')?.get(B), undefined)
})

test('uniform balances within one and keeps partitions where the previous target put them', () => {
  const sub = new Set([T])
  const two = [
    { memberId: 'x', subscribedTopicIds: sub },
    { memberId: 'y', subscribedTopicIds: sub },
  ]
  const first = uniformAssign({ members: two, partitionCounts: new Map([[T, 6]]), previous: new Map() })
  assert.equal(first.get('x')?.get(T)?.length, 3)
  assert.equal(first.get('y')?.get(T)?.length, 3)
  const three = [...two, { memberId: 'z', subscribedTopicIds: sub }]
  const second = uniformAssign({ members: three, partitionCounts: new Map([[T, 6]]), previous: first })
  for (const id of ['x', 'y', 'z']) assert.equal(second.get(id)?.get(T)?.length, 2, id)
  // Sticky: x and y each lost exactly one partition, all the rest stayed.
  for (const id of ['x', 'y']) {
    const kept = second
      .get(id)
      ?.get(T)
      ?.filter((p) => first.get(id)?.get(T)?.includes(p))
    assert.equal(kept?.length, 2, id)
  }
  // Different subscriptions: a topic only one member wants all goes to that member.
  const mixed = uniformAssign({
    members: [
      { memberId: 'p', subscribedTopicIds: new Set([T]) },
      { memberId: 'q', subscribedTopicIds: new Set([T, B]) },
    ],
    partitionCounts: new Map([
      [T, 4],
      [B, 4],
    ]),
    previous: new Map(),
  })
  assert.deepEqual(mixed.get('q')?.get(B), [0, 1, 2, 3])
  assert.deepEqual(mixed.get('p')?.get(T), [0, 1, 2, 3])
})

test('a partition reaches its new owner only after the old owner acknowledged revoking it', () => {
  const group = consumerGroup()
  const log: CoordinatorRecord[] = []
  const a = beat(group, log, { memberId: 'A', memberEpoch: 0 })
  assert.equal(a.memberEpoch, 1)
  assert.deepEqual(owned(a), [0, 1, 2, 3, 4, 5])
  const b = beat(group, log, { memberId: 'B', memberEpoch: 0 })
  assert.equal(b.memberEpoch, 2)
  assert.deepEqual(owned(b), [], 'B waits: A still owns everything')
  assert.equal(group.consumer?.members.get('B')?.state, MemberState.UNRELEASED_PARTITIONS)
  // A is told to keep only its target (same epoch until it revokes).
  const a2 = beat(group, log, {
    memberId: 'A',
    memberEpoch: 1,
    topicPartitions: [{ topicId: T, partitions: [0, 1, 2, 3, 4, 5] }],
  })
  assert.equal(a2.memberEpoch, 1)
  const keep = owned(a2)
  assert.equal(keep.length, 3)
  assert.equal(group.consumer?.members.get('A')?.state, MemberState.UNREVOKED_PARTITIONS)
  // B still gets nothing while A holds the revoked partitions.
  assert.deepEqual(owned(beat(group, log, { memberId: 'B', memberEpoch: 2, topicPartitions: [] })), [])
  // A acknowledges: it owns only what it keeps; it moves to epoch 2.
  const a3 = beat(group, log, {
    memberId: 'A',
    memberEpoch: 1,
    topicPartitions: [{ topicId: T, partitions: keep }],
  })
  assert.equal(a3.memberEpoch, 2)
  const b3 = beat(group, log, { memberId: 'B', memberEpoch: 2, topicPartitions: [] })
  assert.deepEqual(
    [...keep, ...owned(b3)].sort((x, y) => x - y),
    [0, 1, 2, 3, 4, 5],
  )
  assert.equal(group.consumer?.members.get('B')?.state, MemberState.STABLE)
})

test('epochs: a newer or unknown epoch is fenced, the previous one accepted when the member owns nothing new', () => {
  const group = consumerGroup()
  const log: CoordinatorRecord[] = []
  beat(group, log, { memberId: 'A', memberEpoch: 0 })
  const fail = (memberEpoch: number, topicPartitions: { topicId: string; partitions: number[] }[] | null) =>
    settle(
      consumerGroupHeartbeat(
        group,
        { ...baseReq(), memberId: 'A', memberEpoch, topicPartitions },
        1,
        0,
        CONFIG,
        TOPICS,
        'x',
      ),
      log,
    ).errorCode
  assert.equal(fail(5, null), ErrorCode.FENCED_MEMBER_EPOCH)
  assert.equal(fail(0 + 1, null), ErrorCode.NONE)
  const unknown = settle(
    consumerGroupHeartbeat(group, { ...baseReq(), memberId: 'Z', memberEpoch: 3 }, 1, 0, CONFIG, TOPICS, 'x'),
    log,
  )
  assert.equal(unknown.errorCode, ErrorCode.UNKNOWN_MEMBER_ID)
  // Offsets: the member's epoch must be current.
  const state = group.consumer!
  assert.equal(validateConsumerOffsetRequest(state, 'A', 1, 'commit'), ErrorCode.NONE)
  assert.equal(validateConsumerOffsetRequest(state, 'A', 0, 'commit'), ErrorCode.STALE_MEMBER_EPOCH)
  assert.equal(validateConsumerOffsetRequest(state, 'A', 2, 'commit'), ErrorCode.FENCED_MEMBER_EPOCH)
  assert.equal(validateConsumerOffsetRequest(state, 'Q', 1, 'commit'), ErrorCode.UNKNOWN_MEMBER_ID)
  assert.equal(
    validateConsumerOffsetRequest(state, '', -1, 'commit'),
    ErrorCode.UNKNOWN_MEMBER_ID,
    'admin commit on a non-empty group',
  )
  assert.equal(validateConsumerOffsetRequest(state, '', -1, 'fetch'), ErrorCode.NONE)
})

function baseReq(): ConsumerHeartbeatRequest {
  return {
    groupId: 'g',
    memberId: '',
    memberEpoch: 0,
    instanceId: null,
    rackId: null,
    rebalanceTimeoutMs: -1,
    subscribedTopicNames: null,
    subscribedTopicRegex: null,
    serverAssignor: null,
    topicPartitions: null,
    clientId: 'c',
    clientHost: '/h',
  }
}

test('request validation: Kafka error codes for a bad first heartbeat, an unknown assignor, a bad regex', () => {
  const first = {
    ...baseReq(),
    memberId: 'm',
    rebalanceTimeoutMs: 1000,
    subscribedTopicNames: ['a'],
    topicPartitions: [],
  }
  assert.equal(validateHeartbeat(first, 1, CONFIG), null)
  assert.equal(validateHeartbeat({ ...first, groupId: '' }, 1, CONFIG)?.errorCode, ErrorCode.INVALID_GROUP_ID)
  assert.equal(validateHeartbeat({ ...first, memberId: '' }, 1, CONFIG)?.errorCode, ErrorCode.INVALID_REQUEST)
  assert.equal(
    validateHeartbeat({ ...first, memberId: '' }, 0, CONFIG),
    null,
    'v0 lets the coordinator pick the id',
  )
  assert.equal(
    validateHeartbeat({ ...first, subscribedTopicNames: null }, 1, CONFIG)?.errorCode,
    ErrorCode.INVALID_REQUEST,
  )
  assert.equal(
    validateHeartbeat({ ...first, serverAssignor: 'sticky' }, 1, CONFIG)?.errorCode,
    ErrorCode.UNSUPPORTED_ASSIGNOR,
  )
  assert.equal(validateHeartbeat({ ...first, serverAssignor: 'range' }, 1, CONFIG), null)
  assert.equal(
    validateHeartbeat({ ...first, subscribedTopicRegex: 'a(' }, 1, CONFIG)?.errorCode,
    ErrorCode.INVALID_REGULAR_EXPRESSION,
  )
  assert.equal(
    validateHeartbeat({ ...first, memberEpoch: -2, instanceId: null }, 1, CONFIG)?.errorCode,
    ErrorCode.INVALID_REQUEST,
  )
})

test('a regex subscription matches whole topic names and picks up new matching topics', () => {
  const group = consumerGroup()
  const log: CoordinatorRecord[] = []
  const topics: TopicsView = {
    byName: new Map([
      ['orders-eu', { topicId: E, partitions: 2 }],
      ['orders-us', { topicId: U, partitions: 2 }],
      ['xorders-eu', { topicId: X, partitions: 2 }],
    ]),
  }
  const r = beat(
    group,
    log,
    { memberId: 'A', memberEpoch: 0, subscribedTopicNames: null, subscribedTopicRegex: 'orders-.*' },
    0,
    topics,
  )
  assert.deepEqual(
    r.assignment?.map((t) => t.topicId),
    [E, U].sort(),
  )
  const more: TopicsView = {
    byName: new Map([...topics.byName, ['orders-jp', { topicId: J, partitions: 1 }]]),
  }
  const epoch = r.memberEpoch
  const r2 = beat(
    group,
    log,
    { memberId: 'A', memberEpoch: epoch, topicPartitions: r.assignment ?? [] },
    0,
    more,
  )
  assert.equal(r2.memberEpoch, epoch + 1)
  assert.deepEqual(
    r2.assignment?.map((t) => t.topicId),
    [E, J, U].sort(),
  )
})

test('leave (-1) frees partitions; static leave (-2) keeps them for the returning instance; session expiry removes', () => {
  const group = consumerGroup()
  const log: CoordinatorRecord[] = []
  const a = beat(group, log, { memberId: 'A', memberEpoch: 0, instanceId: 'i-a' })
  const b = beat(group, log, { memberId: 'B', memberEpoch: 0 })
  const a1 = beat(group, log, {
    memberId: 'A',
    memberEpoch: a.memberEpoch,
    topicPartitions: [{ topicId: T, partitions: [0, 1, 2, 3, 4, 5] }],
  })
  const heldByA = owned(a1)
  const a2 = beat(group, log, {
    memberId: 'A',
    memberEpoch: a.memberEpoch,
    topicPartitions: [{ topicId: T, partitions: [0, 1, 2] }],
  })
  // Not a full request and nothing moved: no assignment in the answer (Kafka's isFullRequest).
  assert.equal(a2.assignment, null)
  assert.deepEqual(heldByA, [0, 1, 2])
  beat(group, log, { memberId: 'B', memberEpoch: b.memberEpoch, topicPartitions: [] })
  // Static leave: A's partitions stay with it; another instance id may not take its place.
  assert.equal(beat(group, log, { memberId: 'A', memberEpoch: -2, instanceId: 'i-a' }).memberEpoch, -2)
  const epochBefore = group.consumer!.groupEpoch
  const back = beat(group, log, { memberId: 'A2', memberEpoch: 0, instanceId: 'i-a' })
  assert.deepEqual(owned(back), heldByA, 'the returning static member gets its old partitions')
  assert.equal(group.consumer!.groupEpoch, epochBefore, 'no rebalance for a returning static member')
  assert.equal(group.consumer!.members.has('A'), false)
  const twin = settle(
    consumerGroupHeartbeat(
      group,
      {
        ...baseReq(),
        memberId: 'A3',
        instanceId: 'i-a',
        rebalanceTimeoutMs: 1000,
        subscribedTopicNames: ['a'],
        topicPartitions: [],
      },
      1,
      0,
      CONFIG,
      TOPICS,
      'x',
    ),
    log,
  )
  assert.equal(twin.errorCode, ErrorCode.UNRELEASED_INSTANCE_ID)
  // A real leave bumps the group epoch and frees the partitions.
  assert.equal(beat(group, log, { memberId: 'A2', memberEpoch: -1 }).memberEpoch, -1)
  assert.equal(group.consumer!.groupEpoch, epochBefore + 1)
  // B's session runs out: the group becomes Empty.
  settle(
    {
      ...consumerGroupTick(group, CONFIG.sessionTimeoutMs + 1),
      replies: [{ waiter: 1, response: { errorCode: 0 } as never }],
    },
    log,
  )
  assert.equal(group.consumer!.members.size, 0)
  assert.equal(group.state, 'Empty')

  // Replaying the records rebuilds the same (empty) group with its epochs.
  const groups = new Map<string, Group>()
  for (const record of log) replayRecord(groups, record, 0)
  const replayed = groups.get('g')
  assert.equal(replayed?.type, 'consumer')
  assert.equal(replayed?.consumer?.groupEpoch, group.consumer!.groupEpoch)
  assert.equal(replayed?.consumer?.members.size, 0)
})

test('replay rebuilds members, epochs and assignments after a coordinator failover', () => {
  const group = consumerGroup()
  const log: CoordinatorRecord[] = []
  const a = beat(group, log, { memberId: 'A', memberEpoch: 0, instanceId: 'i-a' })
  const groups = new Map<string, Group>()
  for (const record of log) replayRecord(groups, record, 0)
  const member = groups.get('g')?.consumer?.members.get('A')
  assert.equal(member?.memberEpoch, a.memberEpoch)
  assert.equal(member?.instanceId, 'i-a')
  assert.deepEqual(member?.assignedPartitions.get(T), [0, 1, 2, 3, 4, 5])
  assert.deepEqual(member?.subscribedTopicNames, ['a'])
  assert.equal(groups.get('g')?.consumer?.assignmentEpoch, group.consumer!.assignmentEpoch)
  assert.equal(groups.get('g')?.consumer?.staticMembers.get('i-a'), 'A')
})

test('a member that does not revoke within its rebalance timeout is fenced and its partitions freed', () => {
  const group = consumerGroup()
  const log: CoordinatorRecord[] = []
  const a = beat(group, log, { memberId: 'A', memberEpoch: 0, rebalanceTimeoutMs: 5000 })
  beat(group, log, { memberId: 'B', memberEpoch: 0 }, 1000)
  // A hears about the revocation at t=2000 and never acknowledges it.
  beat(group, log, { memberId: 'A', memberEpoch: a.memberEpoch, topicPartitions: a.assignment ?? [] }, 2000)
  assert.equal(group.consumer?.members.get('A')?.state, MemberState.UNREVOKED_PARTITIONS)
  assert.equal(consumerGroupTick(group, 6999).records.length, 0, 'still inside the timeout')
  const fenced = consumerGroupTick(group, 7000)
  assert.ok(fenced.records.length > 0)
  assert.equal(group.consumer?.members.has('A'), false)
  // B now gets everything: nobody else holds a partition.
  const epoch = group.consumer?.members.get('B')?.memberEpoch ?? -1
  const b = beat(group, log, { memberId: 'B', memberEpoch: epoch, topicPartitions: [] }, 7100)
  assert.deepEqual(owned(b), [0, 1, 2, 3, 4, 5])
  assert.equal(b.memberEpoch, group.consumer?.groupEpoch)
})

test('the assignment interval holds a new target until the first heartbeat after it (KIP-1263)', () => {
  const config = { ...DEFAULT_CONSUMER_GROUP_CONFIG, assignmentIntervalMs: 1000 }
  const group = consumerGroup()
  const log: CoordinatorRecord[] = []
  const at = (nowMs: number, req: Parameters<typeof beat>[2]) => beat(group, log, req, nowMs, TOPICS, config)
  const a = at(5000, { memberId: 'A', memberEpoch: 0 })
  assert.deepEqual([a.memberEpoch, owned(a)], [1, [0, 1, 2, 3, 4, 5]], 'a new group assigns at once')
  // B joins within the interval: the group epoch moves, the target stays epoch 1's.
  const b = at(5100, { memberId: 'B', memberEpoch: 0 })
  assert.deepEqual([b.memberEpoch, owned(b)], [1, []])
  assert.deepEqual([group.consumer?.groupEpoch, group.consumer?.assignmentEpoch], [2, 1])
  const allOfIt = [{ topicId: T, partitions: [0, 1, 2, 3, 4, 5] }]
  const held = at(5999, { memberId: 'A', memberEpoch: 1, topicPartitions: allOfIt })
  assert.deepEqual([held.memberEpoch, held.assignment], [1, null], 'A keeps everything inside the interval')
  // The first heartbeat once the interval is over computes epoch 2's target: A revokes half.
  const revoking = at(6000, { memberId: 'A', memberEpoch: 1, topicPartitions: allOfIt })
  assert.equal(owned(revoking).length, 3)
  assert.deepEqual([group.consumer?.assignmentEpoch, group.consumer?.assignmentTimestampMs], [2, 6000])
  // The time is written as Kafka's tagged AssignmentTimestamp and read back by a new coordinator.
  const metadata = log
    .filter((r) => decodeConsumerKey(r.key)?.kind === 'consumer-target-metadata' && r.value !== null)
    .map((r) => decodeTargetAssignmentMetadataValue(r.value as Buffer))
  assert.deepEqual(metadata, [
    { assignmentEpoch: 1, assignmentTimestampMs: 5000 },
    { assignmentEpoch: 2, assignmentTimestampMs: 6000 },
  ])
  const groups = new Map<string, Group>()
  for (const record of log) replayRecord(groups, record, 0)
  assert.equal(groups.get('g')?.consumer?.assignmentTimestampMs, 6000)
  // Emptied, the group starts afresh (Kafka's consumerGroupFenceMembers): a join assigns at once.
  at(6100, { memberId: 'A', memberEpoch: -1 })
  at(6100, { memberId: 'B', memberEpoch: -1 })
  assert.deepEqual([group.consumer?.assignmentEpoch, group.consumer?.assignmentTimestampMs], [4, 0])
  const c = at(6200, { memberId: 'C', memberEpoch: 0 })
  assert.deepEqual([c.memberEpoch, owned(c)], [5, [0, 1, 2, 3, 4, 5]])
})

test('an empty regex sent again on every full heartbeat (librdkafka) does not move the group epoch', () => {
  const group = consumerGroup()
  const log: CoordinatorRecord[] = []
  const a = beat(group, log, { memberId: 'A', memberEpoch: 0, subscribedTopicRegex: '' })
  const full = { subscribedTopicNames: ['a'], subscribedTopicRegex: '', rebalanceTimeoutMs: 30000 }
  const again = beat(group, log, { memberId: 'A', memberEpoch: a.memberEpoch, ...full, topicPartitions: [] })
  assert.deepEqual([again.memberEpoch, group.consumer?.groupEpoch], [1, 1])
})
