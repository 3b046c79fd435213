/**
 * The range and roundrobin assignors against the results Java's RangeAssignor and
 * RoundRobinAssignor document, and the consumer-protocol bytes (subscription, assignment)
 * against kafkajs's encoder and hand-written golden bytes.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { AssignerProtocol } from 'kafkajs'
import {
  compareMembers,
  type GroupAssignment,
  type MemberSubscription,
  rangeAssignor,
  resolveAssignors,
  roundRobinAssignor,
} from '../../src/client/group/assignors.js'
import {
  decodeAssignment,
  decodeSubscription,
  encodeAssignment,
  encodeSubscription,
} from '../../src/client/group/protocol.js'

const member = (
  memberId: string,
  topics: string[],
  groupInstanceId: string | null = null,
): MemberSubscription => ({
  memberId,
  groupInstanceId,
  topics,
})

/** memberId → ["t0p0", ...] for readable comparisons with Java's javadoc. */
function names(assignment: GroupAssignment): Record<string, string[]> {
  const out: Record<string, string[]> = {}
  for (const [memberId, tps] of assignment) out[memberId] = tps.map((tp) => `${tp.topic}p${tp.partition}`)
  return out
}

const counts = (entries: Record<string, number>) => new Map(Object.entries(entries))

test('range: the RangeAssignor javadoc example (2 consumers, 2 topics of 3 partitions)', () => {
  const result = rangeAssignor.assign(counts({ t0: 3, t1: 3 }), [
    member('C1', ['t0', 't1']),
    member('C0', ['t0', 't1']),
  ])
  assert.deepEqual(names(result), {
    C1: ['t0p2', 't1p2'],
    C0: ['t0p0', 't0p1', 't1p0', 't1p1'],
  })
})

test('range: per topic over its own subscribers; extra partitions to the first members; unknown topics skipped', () => {
  const result = rangeAssignor.assign(counts({ t0: 7, t1: 2 }), [
    member('c', ['t0']),
    member('a', ['t0', 't1', 'missing']),
    member('b', ['t0', 't1']),
  ])
  assert.deepEqual(names(result), {
    c: ['t0p5', 't0p6'],
    a: ['t0p0', 't0p1', 't0p2', 't1p0'],
    b: ['t0p3', 't0p4', 't1p1'],
  })
  // More members than partitions: the last ones get nothing (but are present).
  const few = rangeAssignor.assign(counts({ t: 2 }), [
    member('x', ['t']),
    member('y', ['t']),
    member('z', ['t']),
  ])
  assert.deepEqual(names(few), { x: ['tp0'], y: ['tp1'], z: [] })
})

test('roundrobin: the RoundRobinAssignor javadoc examples (identical and different subscriptions)', () => {
  const same = roundRobinAssignor.assign(counts({ t0: 3, t1: 3 }), [
    member('C0', ['t0', 't1']),
    member('C1', ['t1', 't0']),
  ])
  assert.deepEqual(names(same), { C0: ['t0p0', 't0p2', 't1p1'], C1: ['t0p1', 't1p0', 't1p2'] })
  const uneven = roundRobinAssignor.assign(counts({ t0: 1, t1: 2, t2: 3 }), [
    member('C2', ['t0', 't1', 't2']),
    member('C0', ['t0']),
    member('C1', ['t0', 't1']),
  ])
  assert.deepEqual(names(uneven), {
    C2: ['t1p1', 't2p0', 't2p1', 't2p2'],
    C0: ['t0p0'],
    C1: ['t1p0'],
  })
})

test('members sort as Java MemberInfo: static members by instance id first, then member ids', () => {
  const list = [member('a', ['t']), member('z', ['t'], 'i2'), member('b', ['t']), member('y', ['t'], 'i1')]
  assert.deepEqual(
    [...list].sort(compareMembers).map((m) => m.memberId),
    ['y', 'z', 'a', 'b'],
  )
  const result = rangeAssignor.assign(counts({ t: 4 }), list)
  assert.deepEqual(names(result), { a: ['tp2'], z: ['tp1'], b: ['tp3'], y: ['tp0'] })
})

test('partition.assignment.strategy: range by default; unknown names and duplicates are rejected', () => {
  assert.deepEqual(
    resolveAssignors(undefined).map((a) => a.name),
    ['range'],
  )
  assert.deepEqual(
    resolveAssignors(['roundrobin', 'range']).map((a) => a.name),
    ['roundrobin', 'range'],
  )
  assert.throws(() => resolveAssignors(['uniform' as 'range']), { code: 'ERR_INVALID_ARGUMENT' })
  assert.throws(() => resolveAssignors(['range', 'range']), { code: 'ERR_INVALID_ARGUMENT' })
  assert.throws(() => resolveAssignors([]), { code: 'ERR_INVALID_ARGUMENT' })
})

test('subscription bytes: version 0 equals kafkajs MemberMetadata; version 3 matches the golden layout', () => {
  const topics = ['orders', 'payments']
  const ours = encodeSubscription({ topics, userData: Buffer.alloc(0) }, 0)
  const theirs = AssignerProtocol.MemberMetadata.encode({ version: 0, topics, userData: Buffer.alloc(0) })
  assert.deepEqual(ours, theirs)
  assert.deepEqual(decodeSubscription(theirs).topics, topics)

  const v3 = encodeSubscription({ topics: ['t'] })
  const golden = Buffer.from([
    ...[0, 3], // version 3
    ...[0, 0, 0, 1, 0, 1, 0x74], // topics: ["t"]
    ...[0xff, 0xff, 0xff, 0xff], // user data: null
    ...[0, 0, 0, 0], // owned partitions: []
    ...[0xff, 0xff, 0xff, 0xff], // generation id: -1
    ...[0xff, 0xff], // rack id: null
  ])
  assert.deepEqual(v3, golden)
  // kafkajs reads a version 3 subscription's prefix (version, topics, user data).
  const read = AssignerProtocol.MemberMetadata.decode(v3)
  assert.equal(read?.version, 3)
  assert.deepEqual(read?.topics, ['t'])
  const back = decodeSubscription(v3)
  assert.deepEqual(back, {
    topics: ['t'],
    userData: null,
    ownedPartitions: [],
    generationId: -1,
    rackId: null,
  })
})

test('assignment bytes: version 0 equals kafkajs MemberAssignment; both decode each other', () => {
  const partitions = [
    { topic: 'a', partition: 0 },
    { topic: 'a', partition: 2 },
    { topic: 'b', partition: 1 },
  ]
  const ours = encodeAssignment({ partitions, userData: Buffer.alloc(0) }, 0)
  const theirs = AssignerProtocol.MemberAssignment.encode({
    version: 0,
    assignment: { a: [0, 2], b: [1] },
    userData: Buffer.alloc(0),
  })
  assert.deepEqual(ours, theirs)
  assert.deepEqual(decodeAssignment(theirs).partitions, partitions)

  const v3 = encodeAssignment({ partitions })
  assert.equal(v3.readInt16BE(0), 3)
  assert.deepEqual(AssignerProtocol.MemberAssignment.decode(v3)?.assignment, { a: [0, 2], b: [1] })
  assert.deepEqual(decodeAssignment(v3), { partitions, userData: null })
  // An empty buffer (a member given nothing) is an empty assignment.
  assert.deepEqual(decodeAssignment(Buffer.alloc(0)).partitions, [])
})
