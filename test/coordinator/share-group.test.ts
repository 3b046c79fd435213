/**
 * Share groups' membership steps (coordinator/share-group.ts) without a broker: joins and
 * epochs, the `simple` assignor's sharing and balance, leaving, session expiry, and the
 * errors Kafka gives (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, INVALID_REQUEST).
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  DEFAULT_SHARE_GROUP_CONFIG,
  expireShareMembers,
  newShareGroup,
  nextShareDeadline,
  type ShareGroup,
  type ShareHeartbeatRequest,
  type ShareTopicsView,
  shareGroupHeartbeat,
  shareGroupStateName,
  simpleAssign,
  validateShareHeartbeat,
} from '../../src/coordinator/share-group.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ShareSessionCache } from '../../src/server/share/share-session-cache.js'

/** Every change reassigns at once, except in the assignment interval's own test. */
const config = { ...DEFAULT_SHARE_GROUP_CONFIG, assignmentIntervalMs: 0 }

function topics(entries: Record<string, number>): ShareTopicsView {
  return {
    byName: new Map(
      Object.entries(entries).map(([name, partitions]) => [name, { topicId: `id-${name}`, partitions }]),
    ),
  }
}

function request(
  memberId: string,
  memberEpoch: number,
  subscribed: string[] | null = null,
): ShareHeartbeatRequest {
  return {
    groupId: 'g',
    memberId,
    memberEpoch,
    rackId: null,
    subscribedTopicNames: subscribed,
    clientId: 'client',
    clientHost: '/127.0.0.1',
  }
}

/** Every member's partitions of `topicId`, by member. */
function owners(group: ShareGroup, view: ShareTopicsView): Map<string, number[]> {
  const assignment = simpleAssign(group, view)
  return new Map([...assignment].map(([id, a]) => [id, a.get('id-t') ?? []]))
}

describe('share group heartbeats', () => {
  it('joins at a new group epoch with the whole topic, heartbeats at that epoch, and leaves', () => {
    const group = newShareGroup('g')
    const view = topics({ t: 3 })
    const joined = shareGroupHeartbeat(group, request('a', 0, ['t']), 0, config, view)
    assert.equal(joined.errorCode, ErrorCode.NONE)
    assert.equal(joined.memberEpoch, 1)
    assert.deepEqual(joined.assignment, [{ topicId: 'id-t', partitions: [0, 1, 2] }])
    assert.equal(joined.heartbeatIntervalMs, config.heartbeatIntervalMs)
    const again = shareGroupHeartbeat(group, request('a', 1), 1000, config, view)
    assert.equal(again.memberEpoch, 1)
    assert.equal(again.assignment, null, 'unchanged: not sent again')
    assert.equal(shareGroupStateName(group), 'Stable')
    const left = shareGroupHeartbeat(group, request('a', -1), 2000, config, view)
    assert.equal(left.memberEpoch, -1)
    assert.equal(shareGroupStateName(group), 'Empty')
  })

  it('moves a member to the new target at its next heartbeat when another joins', () => {
    const group = newShareGroup('g')
    const view = topics({ t: 2 })
    shareGroupHeartbeat(group, request('a', 0, ['t']), 0, config, view)
    const b = shareGroupHeartbeat(group, request('b', 0, ['t']), 0, config, view)
    assert.equal(b.memberEpoch, 2)
    const a = shareGroupHeartbeat(group, request('a', 1), 0, config, view)
    assert.equal(a.memberEpoch, 2)
    assert.equal(a.assignment?.[0].partitions.length, 1)
    assert.equal(b.assignment?.[0].partitions.length, 1)
    assert.notDeepEqual(a.assignment, b.assignment)
  })

  it('refuses a wrong epoch, an unknown member and malformed requests as Kafka', () => {
    const group = newShareGroup('g')
    const view = topics({ t: 1 })
    shareGroupHeartbeat(group, request('a', 0, ['t']), 0, config, view)
    assert.equal(
      shareGroupHeartbeat(group, request('a', 7), 0, config, view).errorCode,
      ErrorCode.FENCED_MEMBER_EPOCH,
    )
    assert.equal(
      shareGroupHeartbeat(group, request('x', 1), 0, config, view).errorCode,
      ErrorCode.UNKNOWN_MEMBER_ID,
    )
    assert.equal(
      shareGroupHeartbeat(group, request('x', -1), 0, config, view).errorCode,
      ErrorCode.UNKNOWN_MEMBER_ID,
    )
    assert.equal(validateShareHeartbeat(request('', 0, ['t']))?.errorCode, ErrorCode.INVALID_REQUEST)
    assert.equal(validateShareHeartbeat(request('a', 0, []))?.errorCode, ErrorCode.INVALID_REQUEST)
    assert.equal(validateShareHeartbeat(request('a', -2, ['t']))?.errorCode, ErrorCode.INVALID_REQUEST)
    assert.equal(
      validateShareHeartbeat({ ...request('a', 0, ['t']), rackId: '' })?.errorCode,
      ErrorCode.INVALID_REQUEST,
    )
    assert.equal(validateShareHeartbeat(request('a', 0, ['t'])), null)
  })

  it('refuses members past group.share.max.size', () => {
    const group = newShareGroup('g')
    const small = { ...config, maxSize: 1 }
    shareGroupHeartbeat(group, request('a', 0, ['t']), 0, small, topics({ t: 1 }))
    const refused = shareGroupHeartbeat(group, request('b', 0, ['t']), 0, small, topics({ t: 1 }))
    assert.equal(refused.errorCode, ErrorCode.GROUP_MAX_SIZE_REACHED)
  })

  it('bumps the epoch when a subscribed topic gains partitions', () => {
    const group = newShareGroup('g')
    shareGroupHeartbeat(group, request('a', 0, ['t']), 0, config, topics({ t: 1 }))
    const grown = shareGroupHeartbeat(group, request('a', 1), 0, config, topics({ t: 2 }))
    assert.equal(grown.memberEpoch, 2)
    assert.deepEqual(grown.assignment, [{ topicId: 'id-t', partitions: [0, 1] }])
  })

  it('holds a new target for group.share.assignment.interval.ms, then assigns at the first heartbeat after (KIP-1263)', () => {
    const withInterval = { ...DEFAULT_SHARE_GROUP_CONFIG, assignmentIntervalMs: 1000 }
    const group = newShareGroup('g')
    const view = topics({ t: 4 })
    const beat = (req: ShareHeartbeatRequest, nowMs: number) =>
      shareGroupHeartbeat(group, req, nowMs, withInterval, view)
    const a = beat(request('a', 0, ['t']), 5000)
    assert.deepEqual(
      a.assignment,
      [{ topicId: 'id-t', partitions: [0, 1, 2, 3] }],
      'a new group assigns at once',
    )
    const b = beat(request('b', 0, ['t']), 5500)
    assert.deepEqual([b.memberEpoch, b.assignment], [1, []], 'b waits for the interval with the old target')
    assert.deepEqual([group.groupEpoch, group.assignmentEpoch], [2, 1])
    assert.equal(beat(request('a', 1), 5999).assignment, null, 'a keeps everything inside the interval')
    const after = beat(request('a', 1), 6000)
    assert.deepEqual([after.memberEpoch, after.assignment?.[0]?.partitions.length], [2, 2])
    assert.deepEqual([group.assignmentEpoch, group.assignmentTimestampMs], [2, 6000])
    // A leave only moves the epoch and drops the member's target (Kafka's shareGroupFenceMember).
    beat(request('b', -1), 6100)
    assert.deepEqual(
      [group.groupEpoch, group.assignmentEpoch, [...group.targetAssignment.keys()]],
      [3, 2, ['a']],
    )
    // Emptied, the group starts afresh: the next join is not held by the interval.
    beat(request('a', -1), 6200)
    assert.deepEqual([group.assignmentEpoch, group.assignmentTimestampMs], [4, 0])
    const c = beat(request('c', 0, ['t']), 6300)
    assert.deepEqual([c.memberEpoch, c.assignment?.[0]?.partitions], [5, [0, 1, 2, 3]])
  })

  it('removes members whose session timed out', () => {
    const group = newShareGroup('g')
    const view = topics({ t: 1 })
    shareGroupHeartbeat(group, request('a', 0, ['t']), 0, config, view)
    shareGroupHeartbeat(group, request('b', 0, ['t']), 10_000, config, view)
    assert.equal(nextShareDeadline(group, config), config.sessionTimeoutMs)
    assert.equal(expireShareMembers(group, config.sessionTimeoutMs - 1, config), false)
    assert.equal(expireShareMembers(group, config.sessionTimeoutMs, config), true)
    assert.deepEqual([...group.members.keys()], ['b'])
    assert.equal(group.groupEpoch, 3)
  })
})

describe('the simple assignor', () => {
  function groupOf(memberCount: number, subscribed: string[] = ['t']): ShareGroup {
    const group = newShareGroup('g')
    for (let i = 0; i < memberCount; i++)
      shareGroupHeartbeat(group, request(`m${i}`, 0, subscribed), 0, config, topics({ t: 1 }))
    return group
  }

  it('shares a partition among all members when they outnumber partitions', () => {
    const assigned = owners(groupOf(3), topics({ t: 1 }))
    assert.deepEqual([...assigned.values()], [[0], [0], [0]])
  })

  it('balances partitions when they outnumber members, each partition to one member', () => {
    const assigned = owners(groupOf(3), topics({ t: 7 }))
    const counts = [...assigned.values()].map((p) => p.length).sort()
    assert.deepEqual(counts, [2, 2, 3])
    assert.deepEqual([...assigned.values()].flat().sort(), [0, 1, 2, 3, 4, 5, 6])
  })

  it('gives each partition to ceil(members / partitions) members', () => {
    const assigned = owners(groupOf(5), topics({ t: 2 }))
    const perPartition = [0, 1].map((p) => [...assigned.values()].filter((ps) => ps.includes(p)).length)
    assert.deepEqual(perPartition, [3, 3])
    for (const ps of assigned.values()) assert.ok(ps.length >= 1 && ps.length <= 2)
  })

  it('assigns nothing of topics that do not exist', () => {
    const assigned = owners(groupOf(2, ['missing']), topics({ t: 1 }))
    assert.deepEqual([...assigned.values()], [[], []])
  })
})

describe('share sessions', () => {
  it('open, continue at the current epoch only, close; Kafka errors otherwise', () => {
    const cache = new ShareSessionCache()
    const released: string[] = []
    const begin = (epoch: number, acks = false) =>
      cache.begin('g', 'm', epoch, acks, (old) => released.push(old.memberId))
    assert.deepEqual(begin(3), { kind: 'error', errorCode: ErrorCode.SHARE_SESSION_NOT_FOUND })
    assert.deepEqual(begin(0, true), { kind: 'error', errorCode: ErrorCode.INVALID_REQUEST })
    assert.equal(begin(0).kind, 'open')
    assert.deepEqual(begin(2), { kind: 'error', errorCode: ErrorCode.INVALID_SHARE_SESSION_EPOCH })
    assert.equal(begin(1).kind, 'continue')
    assert.equal(begin(2).kind, 'continue')
    assert.equal(begin(0).kind, 'open', 'a new opening replaces the session')
    assert.deepEqual(released, ['m'])
    assert.equal(begin(-1).kind, 'close')
    assert.equal(cache.size, 0)
    assert.deepEqual(begin(-1), { kind: 'error', errorCode: ErrorCode.SHARE_SESSION_NOT_FOUND })
  })
})
