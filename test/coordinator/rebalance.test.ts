/**
 * The classic rebalance state machine driven directly, time given by hand: joins, the
 * MEMBER_ID_REQUIRED round, sync, heartbeats, leaving, session and rebalance expiry,
 * static membership, and the group records it asks to append.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { toOffset } from '../../src/common/types.js'
import { combine, type Effects, type JoinResult, type SyncResult } from '../../src/coordinator/effects.js'
import {
  DEFAULT_COORDINATOR_CONFIG,
  type Group,
  newGroup,
  partitionForGroup,
} from '../../src/coordinator/group.js'
import { commitOffsets, replayRecord } from '../../src/coordinator/offsets.js'
import {
  heartbeat,
  type JoinRequest,
  joinGroup,
  leaveGroup,
  nextDeadline,
  syncGroup,
  tick,
} from '../../src/coordinator/rebalance.js'
import { decodeGroupMetadataValue, decodeKey } from '../../src/coordinator/records.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'

const config = { ...DEFAULT_COORDINATOR_CONFIG, groupInitialRebalanceDelayMs: 0 }

/** Collects replies by waiter and runs afterAppend as if every append committed. */
class Driver {
  readonly replies = new Map<number, unknown>()
  readonly records: Effects['records'][number][] = []
  private waiter = 1
  now = 1000
  constructor(readonly group: Group) {}

  apply(effects: Effects): void {
    for (const r of effects.replies) this.replies.set(r.waiter, r.response)
    const baseOffset = toOffset(this.records.length)
    this.records.push(...effects.records)
    if (effects.records.length > 0 && effects.afterAppend)
      this.apply(effects.afterAppend(ErrorCode.NONE, this.now, baseOffset))
  }

  join(req: Partial<JoinRequest> & { memberId: string }, id = `m${this.waiter}`): number {
    const waiter = this.waiter++
    const full: JoinRequest = {
      groupId: 'g',
      groupInstanceId: null,
      protocolType: 'consumer',
      protocols: [{ name: 'range', metadata: Buffer.from('meta') }],
      sessionTimeoutMs: 10000,
      rebalanceTimeoutMs: 30000,
      clientId: 'c',
      clientHost: '/127.0.0.1',
      requireKnownMemberId: false,
      supportsSkipAssignment: false,
      newMemberId: id,
      ...req,
    }
    this.apply(joinGroup(this.group, full, waiter, this.now, config))
    return waiter
  }

  sync(
    memberId: string,
    generationId: number,
    assignments: { memberId: string; assignment: Buffer }[] = [],
  ): number {
    const waiter = this.waiter++
    const req = {
      memberId,
      groupInstanceId: null,
      generationId,
      protocolType: null,
      protocolName: null,
      assignments,
    }
    this.apply(syncGroup(this.group, req, waiter, this.now))
    return waiter
  }

  advance(ms: number): void {
    this.now += ms
    this.apply(tick(this.group, this.now))
  }

  joinResult(waiter: number): JoinResult | undefined {
    return this.replies.get(waiter) as JoinResult | undefined
  }

  syncResult(waiter: number): SyncResult | undefined {
    return this.replies.get(waiter) as SyncResult | undefined
  }
}

/** Two dynamic members joined and synced: generation 1, a leader, assignments a/b. */
function stableGroupOfTwo(): { d: Driver; leader: string; follower: string } {
  const d = new Driver(newGroup('g', 0))
  const w1 = d.join({ memberId: '' }, 'a')
  assert.equal(d.joinResult(w1)?.generationId, 1, 'a lone member completes the join at once')
  d.sync('a', 1, [{ memberId: 'a', assignment: Buffer.from('A') }])
  assert.equal(d.group.state, 'Stable')
  const w2 = d.join({ memberId: '' }, 'b')
  assert.equal(d.joinResult(w2), undefined, 'b waits for a to rejoin')
  assert.equal(heartbeat(d.group, 'a', null, 1, d.now).errorCode, ErrorCode.REBALANCE_IN_PROGRESS)
  const w3 = d.join({ memberId: 'a' })
  const ja = d.joinResult(w3)!
  const jb = d.joinResult(w2)!
  assert.equal(ja.generationId, 2)
  assert.equal(ja.leader, 'a')
  assert.equal(ja.members.length, 2, 'the leader gets every member')
  assert.equal(jb.members.length, 0, 'followers get no member list')
  const sb = d.sync('b', 2)
  assert.equal(d.syncResult(sb), undefined, 'a follower waits for the leader')
  const sa = d.sync('a', 2, [
    { memberId: 'a', assignment: Buffer.from('A') },
    { memberId: 'b', assignment: Buffer.from('B') },
  ])
  assert.equal(d.syncResult(sa)?.assignment.toString(), 'A')
  assert.equal(d.syncResult(sb)?.assignment.toString(), 'B')
  assert.equal(d.group.state, 'Stable')
  return { d, leader: 'a', follower: 'b' }
}

test('join, sync and heartbeat: generations, leader, relayed assignments and a stored group record', () => {
  const { d } = stableGroupOfTwo()
  assert.equal(heartbeat(d.group, 'b', null, 2, d.now).errorCode, ErrorCode.NONE)
  assert.equal(heartbeat(d.group, 'b', null, 1, d.now).errorCode, ErrorCode.ILLEGAL_GENERATION)
  assert.equal(heartbeat(d.group, 'x', null, 2, d.now).errorCode, ErrorCode.UNKNOWN_MEMBER_ID)
  const last = d.records.at(-1)!
  assert.deepEqual(decodeKey(last.key), { kind: 'group', group: 'g' })
  const value = decodeGroupMetadataValue(last.value!)
  assert.equal(value.generation, 2)
  assert.equal(value.leader, 'a')
  assert.deepEqual(value.members.map((m) => m.assignment.toString()).sort(), ['A', 'B'])
})

test('JoinGroup v4+: a new member first gets MEMBER_ID_REQUIRED with its id, then joins with it', () => {
  const d = new Driver(newGroup('g', 0))
  const w = d.join({ memberId: '', requireKnownMemberId: true }, 'assigned-id')
  assert.equal(d.joinResult(w)?.errorCode, ErrorCode.MEMBER_ID_REQUIRED)
  assert.equal(d.joinResult(w)?.memberId, 'assigned-id')
  const w2 = d.join({ memberId: 'assigned-id', requireKnownMemberId: true })
  assert.equal(d.joinResult(w2)?.errorCode, ErrorCode.NONE)
  assert.equal(d.joinResult(w2)?.memberId, 'assigned-id')
})

test('a member that stops heartbeating is removed after its session timeout; the rest rebalance', () => {
  const { d } = stableGroupOfTwo()
  assert.equal(nextDeadline(d.group), d.now + 10000)
  d.advance(6000)
  assert.equal(heartbeat(d.group, 'a', null, 2, d.now).errorCode, ErrorCode.NONE)
  d.advance(4500) // b's session (10 s) is over, a heartbeated 4.5 s ago
  assert.equal(d.group.members.has('b'), false)
  assert.equal(d.group.state, 'PreparingRebalance')
  const w = d.join({ memberId: 'a' })
  assert.equal(d.joinResult(w)?.generationId, 3)
  assert.equal(d.joinResult(w)?.members.length, 1)
})

test('a member that does not rejoin within the rebalance timeout is dropped from the generation', () => {
  const { d } = stableGroupOfTwo()
  const w = d.join({ memberId: '' }, 'c')
  d.join({ memberId: 'a' })
  assert.equal(d.joinResult(w), undefined, 'b has not rejoined yet')
  d.advance(30000)
  const result = d.joinResult(w)!
  assert.equal(result.generationId, 3)
  assert.equal(d.group.members.has('b'), false)
  assert.deepEqual([...d.group.members.keys()].sort(), ['a', 'c'])
})

test('LeaveGroup removes the member at once; a pending SyncGroup gets REBALANCE_IN_PROGRESS', () => {
  const { d } = stableGroupOfTwo()
  const w = d.join({ memberId: '' }, 'c')
  d.join({ memberId: 'a' })
  d.join({ memberId: 'b' })
  assert.equal(d.joinResult(w)?.generationId, 3)
  const s = d.sync('c', 3)
  const { codes, effects } = leaveGroup(d.group, [{ memberId: 'b', groupInstanceId: null }], d.now)
  d.apply(effects)
  assert.deepEqual(codes, [ErrorCode.NONE])
  assert.equal(d.syncResult(s)?.errorCode, ErrorCode.REBALANCE_IN_PROGRESS)
  assert.equal(d.group.state, 'PreparingRebalance')
  const unknown = leaveGroup(d.group, [{ memberId: 'zzz', groupInstanceId: null }], d.now)
  assert.deepEqual(unknown.codes, [ErrorCode.UNKNOWN_MEMBER_ID])
})

test('the last member leaving empties the group and persists it empty with a new generation', () => {
  const d = new Driver(newGroup('g', 0))
  d.join({ memberId: '' }, 'a')
  d.sync('a', 1)
  d.apply(leaveGroup(d.group, [{ memberId: 'a', groupInstanceId: null }], d.now).effects)
  assert.equal(d.group.state, 'Empty')
  const value = decodeGroupMetadataValue(d.records.at(-1)!.value!)
  assert.equal(value.generation, 2)
  assert.equal(value.members.length, 0)
})

test('static members: a rejoin with a new member id takes over; the old id is fenced', () => {
  const d = new Driver(newGroup('g', 0))
  d.join({ memberId: '', groupInstanceId: 'i1' }, 'a')
  d.join({ memberId: '', groupInstanceId: 'i2' }, 'b')
  d.join({ memberId: 'a', groupInstanceId: 'i1' })
  d.sync('a', d.group.generationId, [])
  d.sync('b', d.group.generationId)
  assert.equal(d.group.state, 'Stable')
  const generation = d.group.generationId
  // i2 restarts (new member id); the group does not rebalance for a follower.
  const w = d.join({ memberId: '', groupInstanceId: 'i2' }, 'b2')
  assert.equal(d.joinResult(w)?.memberId, 'b2')
  assert.equal(d.joinResult(w)?.generationId, generation)
  assert.equal(d.group.state, 'Stable')
  assert.equal(heartbeat(d.group, 'b', 'i2', generation, d.now).errorCode, ErrorCode.FENCED_INSTANCE_ID)
  assert.equal(heartbeat(d.group, 'b2', 'i2', generation, d.now).errorCode, ErrorCode.NONE)
  const left = leaveGroup(d.group, [{ memberId: 'b', groupInstanceId: 'i2' }], d.now)
  assert.deepEqual(left.codes, [ErrorCode.FENCED_INSTANCE_ID])
})

test('static members: a returning leader keeps every assignment without a rebalance (KIP-345)', () => {
  const d = new Driver(newGroup('g', 0))
  d.join({ memberId: '', groupInstanceId: 'i1' }, 'a')
  d.join({ memberId: '', groupInstanceId: 'i2' }, 'b')
  d.join({ memberId: 'a', groupInstanceId: 'i1' })
  d.sync('a', d.group.generationId, [
    { memberId: 'a', assignment: Buffer.from('for a') },
    { memberId: 'b', assignment: Buffer.from('for b') },
  ])
  d.sync('b', d.group.generationId)
  assert.equal(d.group.state, 'Stable')
  const generation = d.group.generationId
  // The leader i1 restarts (librdkafka's close sends no LeaveGroup) with other metadata
  // bytes (owned partitions, user data) but the same protocol, and cannot skip assignment.
  const w = d.join(
    {
      memberId: '',
      groupInstanceId: 'i1',
      protocols: [{ name: 'range', metadata: Buffer.from('new meta') }],
    },
    'a2',
  )
  const joined = d.joinResult(w)!
  assert.equal(joined.errorCode, ErrorCode.NONE)
  assert.equal(joined.memberId, 'a2')
  assert.equal(joined.generationId, generation, 'no new generation')
  assert.equal(joined.leader, 'a', 'named a follower (the old leader id), so it only syncs')
  assert.deepEqual(joined.members, [], 'and gets no members to assign')
  assert.equal(d.group.state, 'Stable')
  assert.equal(d.group.leaderId, 'a2')
  const synced = d.sync('a2', generation)
  assert.equal(d.syncResult(synced)?.assignment.toString(), 'for a', 'its old assignment')
  assert.equal(heartbeat(d.group, 'b', 'i2', generation, d.now).errorCode, ErrorCode.NONE, 'b sees nothing')
  assert.equal(heartbeat(d.group, 'a', 'i1', generation, d.now).errorCode, ErrorCode.FENCED_INSTANCE_ID)
  // A returning leader that can skip assignment (v9+) learns the members instead.
  const w9 = d.join({ memberId: '', groupInstanceId: 'i1', supportsSkipAssignment: true }, 'a3')
  assert.equal(d.joinResult(w9)?.skipAssignment, true)
  assert.equal(d.joinResult(w9)?.leader, 'a3')
  assert.equal(d.joinResult(w9)?.members.length, 2)
  assert.equal(d.group.generationId, generation)
  assert.equal(d.group.state, 'Stable')
})

test('protocol selection: the common protocol most members prefer', () => {
  const d = new Driver(newGroup('g', 0))
  const rr = { name: 'roundrobin', metadata: Buffer.alloc(0) }
  const range = { name: 'range', metadata: Buffer.alloc(0) }
  const sticky = { name: 'sticky', metadata: Buffer.alloc(0) }
  d.join({ memberId: '', protocols: [range, rr] }, 'a')
  d.sync('a', 1)
  d.join({ memberId: '', protocols: [rr, range] }, 'b')
  d.join({ memberId: '', protocols: [rr, sticky, range] }, 'c')
  const w = d.join({ memberId: 'a', protocols: [range, rr] })
  assert.equal(d.joinResult(w)?.protocolName, 'roundrobin')
  const bad = d.join({ memberId: '', protocols: [sticky] }, 'd')
  assert.equal(d.joinResult(bad)?.errorCode, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
})

test('group.initial.rebalance.delay.ms: members joining a new group land in one generation', () => {
  const d = new Driver(newGroup('g', 0))
  const cfg = { ...config, groupInitialRebalanceDelayMs: 3000 }
  const mk = (id: string, waiter: number) =>
    joinGroup(
      d.group,
      {
        groupId: 'g',
        memberId: '',
        groupInstanceId: null,
        protocolType: 'consumer',
        protocols: [{ name: 'range', metadata: Buffer.alloc(0) }],
        sessionTimeoutMs: 10000,
        rebalanceTimeoutMs: 30000,
        clientId: 'c',
        clientHost: 'h',
        requireKnownMemberId: false,
        supportsSkipAssignment: false,
        newMemberId: id,
      },
      waiter,
      d.now,
      cfg,
    )
  d.apply(mk('a', 101))
  d.advance(1000)
  d.apply(mk('b', 102))
  assert.equal(d.joinResult(101), undefined, 'still in the initial delay')
  d.advance(2000) // first delay over, a member was added: one more step
  assert.equal(d.joinResult(101), undefined)
  d.advance(3000)
  assert.equal(d.joinResult(101)?.generationId, 1)
  assert.equal(d.joinResult(102)?.generationId, 1)
})

test('offset commits: generation checked, applied only after the append, replayed on load', () => {
  const { d } = stableGroupOfTwo()
  const commit = (generationId: number, memberId: string, waiter: number) =>
    commitOffsets(
      d.group,
      {
        memberId,
        groupInstanceId: null,
        generationId,
        retentionTimeMs: -1,
        partitions: [{ topic: 't', partition: 0, offset: 42n, leaderEpoch: 3, metadata: 'm' }],
      },
      waiter,
      d.now,
      config,
      () => true,
    )
  const stale = commit(1, 'a', 201)
  d.apply(stale)
  assert.equal(
    (d.replies.get(201) as { partitions: Map<string, number> }).partitions.get('t\u00000'),
    ErrorCode.ILLEGAL_GENERATION,
  )
  const ok = commit(2, 'a', 202)
  assert.equal(d.group.offsets.size, 0, 'not visible before the records are committed')
  d.apply(combine(ok, { records: [], replies: [] }))
  assert.equal(d.group.offsets.get('t')?.get(0)?.offset, 42n)
  // A new coordinator rebuilds the group from the records.
  const groups = new Map<string, Group>()
  for (const record of d.records) replayRecord(groups, record, 5000)
  const loaded = groups.get('g')!
  assert.equal(loaded.state, 'Stable')
  assert.equal(loaded.generationId, 2)
  assert.equal(loaded.offsets.get('t')?.get(0)?.offset, 42n)
  assert.equal(loaded.offsets.get('t')?.get(0)?.leaderEpoch, 3)
})

test("a group's coordinator partition is Kafka's abs(hashCode) % partitions", () => {
  // Java: "my-group".hashCode() == -1906497762 → 1906497762 % 50 == 12
  assert.equal(partitionForGroup('my-group', 50), 12)
  assert.equal(partitionForGroup('', 50), 0)
})
