/**
 * The sticky and cooperative-sticky assignors against the assignments Java's
 * AbstractStickyAssignorTest, StickyAssignorTest and CooperativeStickyAssignorTest assert
 * (Kafka 3.5+, no racks), with the member names and insertion order of those tests (Java's
 * HashMap order decides some outcomes), and java.util.HashMap's iteration order itself.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  type MemberSubscription,
  rebalanceProtocolOf,
  resolveAssignors,
} from '../../src/client/group/assignors.js'
import { javaHashMapOrder, javaStringHash } from '../../src/client/group/java-hash-order.js'
import {
  cooperativeMemberData,
  cooperativeStickyAssign,
  decodeStickyUserData,
  encodeCooperativeUserData,
  encodeStickyUserData,
  stickyAssign,
} from '../../src/client/group/sticky-assignor.js'
import type { TopicPartition } from '../../src/client/leader-requests.js'

const tp = (topic: string, partition: number): TopicPartition => ({ topic, partition })
const counts = (entries: Record<string, number>) => new Map(Object.entries(entries))
const GENERATION = 1

/** A subscription as the Java tests' buildSubscriptionV2Above: owned partitions and generation. */
const v2 = (memberId: string, topics: string[], owned: TopicPartition[] = [], generationId = GENERATION) => ({
  memberId,
  groupInstanceId: null,
  topics,
  ownedPartitions: owned,
  generationId,
})
/** A first-time member (the Java tests' subscription(topics, index)). */
const fresh = (memberId: string, topics: string[]): MemberSubscription => ({
  memberId,
  groupInstanceId: null,
  topics,
})

const str = (list: readonly TopicPartition[] | undefined) =>
  (list ?? []).map((p) => `${p.topic}-${p.partition}`)

/** The sticky result before cooperative adjustment (what AbstractStickyAssignorTest asserts). */
function sticky(partitionsPerTopic: Map<string, number>, members: MemberSubscription[]) {
  const { assignment, partitionsTransferringOwnership } = stickyAssign(
    partitionsPerTopic,
    members,
    cooperativeMemberData,
  )
  const out: Record<string, string[]> = {}
  for (const [m, list] of assignment) out[m] = str(list)
  const transferring =
    partitionsTransferringOwnership === null
      ? null
      : Object.fromEntries(
          [...partitionsTransferringOwnership.values()].map((e) => [str([e.tp])[0], e.consumer]),
        )
  return { out, transferring, raw: assignment }
}

test('java-hash-order: HashMap iteration order of member ids (checked against java.util.HashMap)', () => {
  assert.deepEqual(javaHashMapOrder(['consumer1', 'consumer2', 'consumer3'], javaStringHash), [
    'consumer3',
    'consumer2',
    'consumer1',
  ])
  assert.deepEqual(javaHashMapOrder(['C0', 'C1', 'C2'], javaStringHash), ['C0', 'C1', 'C2'])
  // 15 keys: the table has grown to 32 buckets.
  const keys = [
    'member-1-a0f',
    'member-2-bb1',
    'm3',
    'zz',
    'consumer-group-1-7d2c9a1e-3f5b-4c1a-9e3d-1a2b3c4d5e6f',
  ]
  keys.push('x', 'y', 'z', 'a', 'b', 'c', 'd', 'e', 'f', 'g')
  assert.deepEqual(
    javaHashMapOrder(keys, javaStringHash).join(','),
    'zz,a,b,c,d,e,m3,f,g,member-1-a0f,member-2-bb1,x,y,z,consumer-group-1-7d2c9a1e-3f5b-4c1a-9e3d-1a2b3c4d5e6f',
  )
})

test('sticky: one consumer gets every partition; owned partitions of unsubscribed topics are dropped', () => {
  assert.deepEqual(sticky(counts({ topic: 3 }), [fresh('consumer', ['topic'])]).out, {
    consumer: ['topic-0', 'topic-1', 'topic-2'],
  })
  const owned = [tp('topic', 0), tp('topic', 1), tp('other', 0), tp('other', 1)]
  const r = sticky(counts({ topic: 2 }), [v2('consumer', ['topic'], owned)])
  assert.deepEqual(r.out, { consumer: ['topic-0', 'topic-1'] })
  assert.deepEqual(r.transferring, {})
  assert.deepEqual(sticky(counts({ topic1: 1, topic2: 2 }), [fresh('consumer', ['topic1', 'topic2'])]).out, {
    consumer: ['topic1-0', 'topic2-0', 'topic2-1'],
  })
})

test('sticky: testTwoConsumersTwoTopicsSixPartitions', () => {
  const r = sticky(counts({ topic1: 3, topic2: 3 }), [
    fresh('consumer1', ['topic1', 'topic2']),
    fresh('consumer2', ['topic1', 'topic2']),
  ])
  assert.deepEqual(r.out, {
    consumer1: ['topic1-0', 'topic1-2', 'topic2-1'],
    consumer2: ['topic1-1', 'topic2-0', 'topic2-2'],
  })
})

test('sticky: testConsumerOwningMinQuotaExpectedMaxQuota', () => {
  const topics = ['topic1', 'topic2']
  const r = sticky(counts({ topic1: 2, topic2: 3 }), [
    v2('consumer1', topics, [tp('topic1', 0), tp('topic2', 1)]),
    v2('consumer2', topics, [tp('topic1', 1), tp('topic2', 2)]),
  ])
  assert.deepEqual(r.out.consumer1, ['topic1-0', 'topic2-1', 'topic2-0'])
  assert.deepEqual(r.out.consumer2, ['topic1-1', 'topic2-2'])
  assert.deepEqual(r.transferring, {})
})

test('sticky: testMaxQuotaConsumerMoreThanNumExpectedMaxCapacityMembers (HashMap order picks consumer2)', () => {
  const topics = ['topic1', 'topic2']
  const r = sticky(counts({ topic1: 2, topic2: 2 }), [
    v2('consumer1', topics, [tp('topic1', 0), tp('topic2', 0)]),
    v2('consumer2', topics, [tp('topic1', 1), tp('topic2', 1)]),
    v2('consumer3', topics, []),
  ])
  assert.deepEqual(r.transferring, { 'topic2-0': 'consumer3' })
  assert.deepEqual(r.out, {
    consumer1: ['topic1-0'],
    consumer2: ['topic1-1', 'topic2-1'],
    consumer3: ['topic2-0'],
  })
})

test('sticky: testAllConsumersAreUnderMinQuota', () => {
  const topics = ['topic1', 'topic2']
  const r = sticky(counts({ topic1: 2, topic2: 3 }), [
    v2('consumer1', topics, [tp('topic1', 0)]),
    v2('consumer2', topics, [tp('topic1', 1)]),
    v2('consumer3', topics, []),
  ])
  assert.deepEqual(r.transferring, {})
  assert.deepEqual(r.out, {
    consumer1: ['topic1-0', 'topic2-1'],
    consumer2: ['topic1-1', 'topic2-2'],
    consumer3: ['topic2-0'],
  })
})

test('sticky: testAddRemoveConsumerOneTopic', () => {
  const first = sticky(counts({ topic: 3 }), [fresh('consumer1', ['topic'])])
  assert.deepEqual(first.out, { consumer1: ['topic-0', 'topic-1', 'topic-2'] })
  const second = sticky(counts({ topic: 3 }), [
    v2('consumer1', ['topic'], first.raw.get('consumer1')),
    v2('consumer2', ['topic'], []),
  ])
  assert.deepEqual(second.transferring, { 'topic-2': 'consumer2' })
  assert.deepEqual(second.out, { consumer1: ['topic-0', 'topic-1'], consumer2: ['topic-2'] })
  const third = sticky(counts({ topic: 3 }), [v2('consumer2', ['topic'], second.raw.get('consumer2'))])
  assert.deepEqual(new Set(third.out.consumer2), new Set(['topic-0', 'topic-1', 'topic-2']))
  assert.deepEqual(third.transferring, {})
})

test('sticky: testAddRemoveTwoConsumersTwoTopics', () => {
  const topics = ['topic1', 'topic2']
  const partitions = counts({ topic1: 3, topic2: 4 })
  const first = sticky(partitions, [fresh('consumer1', topics), fresh('consumer2', topics)])
  assert.deepEqual(first.out, {
    consumer1: ['topic1-0', 'topic1-2', 'topic2-1', 'topic2-3'],
    consumer2: ['topic1-1', 'topic2-0', 'topic2-2'],
  })
  const second = sticky(partitions, [
    v2('consumer1', topics, first.raw.get('consumer1')),
    v2('consumer2', topics, first.raw.get('consumer2')),
    v2('consumer3', topics, []),
    v2('consumer4', topics, []),
  ])
  assert.deepEqual(second.transferring, {
    'topic1-2': 'consumer3',
    'topic2-3': 'consumer3',
    'topic2-2': 'consumer4',
  })
  assert.deepEqual(second.out, {
    consumer1: ['topic1-0', 'topic2-1'],
    consumer2: ['topic2-0', 'topic1-1'],
    consumer3: ['topic1-2', 'topic2-3'],
    consumer4: ['topic2-2'],
  })
  const third = sticky(partitions, [
    v2('consumer3', topics, second.raw.get('consumer3')),
    v2('consumer4', topics, second.raw.get('consumer4')),
  ])
  assert.deepEqual(third.out, {
    consumer3: ['topic1-2', 'topic2-3', 'topic1-0', 'topic2-1'],
    consumer4: ['topic2-2', 'topic1-1', 'topic2-0'],
  })
  assert.deepEqual(third.transferring, {})
})

test('sticky: testMultipleConsumersMixedTopicSubscriptions takes the general algorithm', () => {
  const r = sticky(counts({ topic1: 3, topic2: 2 }), [
    fresh('consumer1', ['topic1']),
    fresh('consumer2', ['topic1', 'topic2']),
    fresh('consumer3', ['topic1']),
  ])
  assert.equal(r.transferring, null)
  assert.deepEqual(r.out, {
    consumer1: ['topic1-0', 'topic1-2'],
    consumer2: ['topic2-0', 'topic2-1'],
    consumer3: ['topic1-1'],
  })
})

test('cooperative-sticky: partitions changing owner are held back for the follow-up rebalance', () => {
  const topics = ['topic1', 'topic2']
  const partitions = counts({ topic1: 3, topic2: 4 })
  const owned1 = [tp('topic1', 0), tp('topic1', 2), tp('topic2', 1), tp('topic2', 3)]
  const owned2 = [tp('topic1', 1), tp('topic2', 0), tp('topic2', 2)]
  const members = [
    v2('consumer1', topics, owned1),
    v2('consumer2', topics, owned2),
    v2('consumer3', topics, []),
    v2('consumer4', topics, []),
  ]
  const first = cooperativeStickyAssign(partitions, members)
  assert.deepEqual(str(first.get('consumer1')), ['topic1-0', 'topic2-1'])
  assert.deepEqual(str(first.get('consumer2')), ['topic2-0', 'topic1-1'])
  assert.deepEqual(first.get('consumer3'), [])
  assert.deepEqual(first.get('consumer4'), [])
  // The old owners revoked and rejoined: now the partitions move.
  const second = cooperativeStickyAssign(partitions, [
    v2('consumer1', topics, first.get('consumer1'), 2),
    v2('consumer2', topics, first.get('consumer2'), 2),
    v2('consumer3', topics, [], 2),
    v2('consumer4', topics, [], 2),
  ])
  assert.deepEqual(str(second.get('consumer3')), ['topic1-2', 'topic2-3'])
  assert.deepEqual(str(second.get('consumer4')), ['topic2-2'])
  assert.deepEqual(str(second.get('consumer1')), ['topic1-0', 'topic2-1'])
})

test('cooperative-sticky: general algorithm, partitions moving between members are held back', () => {
  // consumer1 owns all of topic1 and topic2; consumer2 joins for topic1 only: balance is 2 and 2.
  const partitions = counts({ topic1: 2, topic2: 2 })
  const members = [
    v2(
      'consumer1',
      ['topic1', 'topic2'],
      [tp('topic1', 0), tp('topic1', 1), tp('topic2', 0), tp('topic2', 1)],
    ),
    v2('consumer2', ['topic1'], []),
  ]
  const plain = stickyAssign(partitions, members, cooperativeMemberData)
  assert.equal(plain.partitionsTransferringOwnership, null)
  assert.deepEqual(str(plain.assignment.get('consumer2')).sort(), ['topic1-0', 'topic1-1'])
  const first = cooperativeStickyAssign(partitions, members)
  assert.deepEqual(first.get('consumer2'), [])
  assert.deepEqual(str(first.get('consumer1')), ['topic2-0', 'topic2-1'])
  const second = cooperativeStickyAssign(partitions, [
    v2('consumer1', ['topic1', 'topic2'], first.get('consumer1'), 2),
    v2('consumer2', ['topic1'], [], 2),
  ])
  assert.deepEqual(str(second.get('consumer2')).sort(), ['topic1-0', 'topic1-1'])
  assert.deepEqual(str(second.get('consumer1')), ['topic2-0', 'topic2-1'])
})

test('sticky: two members of one generation claiming a partition: neither keeps it, higher generation wins', () => {
  const topics = ['topic']
  const same = sticky(counts({ topic: 3 }), [
    v2('consumer1', topics, [tp('topic', 0), tp('topic', 1)]),
    v2('consumer2', topics, [tp('topic', 1), tp('topic', 2)]),
  ])
  assert.equal(Object.values(same.out).flat().length, 3)
  assert.ok('topic-1' in same.transferring!)
  const newer = sticky(counts({ topic: 3 }), [
    v2('consumer1', topics, [tp('topic', 0), tp('topic', 1)], 1),
    v2('consumer2', topics, [tp('topic', 1), tp('topic', 2)], 2),
  ])
  assert.ok(newer.out.consumer2.includes('topic-1'))
  assert.ok(newer.out.consumer2.includes('topic-2'))
  assert.deepEqual(newer.out.consumer1, ['topic-0'])
})

test('sticky (eager): ownership and generation travel in the user data it wrote at its last assignment', () => {
  const [a1] = resolveAssignors(['sticky'])
  const [a2] = resolveAssignors(['sticky'])
  assert.notEqual(a1, a2, 'one instance per consumer: each remembers its own assignment')
  assert.equal(a1.subscriptionUserData!(['topic']), null)
  a1.onAssignment!([tp('topic', 0), tp('topic', 1)], 5)
  const userData = a1.subscriptionUserData!(['topic'])!
  assert.deepEqual(decodeStickyUserData(userData), {
    partitions: [tp('topic', 0), tp('topic', 1)],
    generation: 5,
  })
  // Version 0 user data (no generation).
  const v0 = encodeStickyUserData({ partitions: [tp('t', 3)], generation: null }).subarray(0, -4)
  assert.deepEqual(decodeStickyUserData(v0), { partitions: [tp('t', 3)], generation: null })
  const result = a2.assign(counts({ topic: 3 }), [
    { memberId: 'consumer1', groupInstanceId: null, topics: ['topic'], userData },
    { memberId: 'consumer2', groupInstanceId: null, topics: ['topic'], userData: null },
  ])
  assert.deepEqual(str(result.get('consumer1')), ['topic-0', 'topic-1'])
  assert.deepEqual(str(result.get('consumer2')), ['topic-2'])
})

test('cooperative-sticky: generation from the v2 field, else from the user data; protocols', () => {
  assert.deepEqual(cooperativeMemberData(v2('m', ['t'], [tp('t', 0)], 7)), {
    partitions: [tp('t', 0)],
    generation: 7,
  })
  assert.deepEqual(
    cooperativeMemberData({
      ...fresh('m', ['t']),
      ownedPartitions: [tp('t', 0)],
      userData: encodeCooperativeUserData(4),
    }),
    { partitions: [tp('t', 0)], generation: 4 },
  )
  assert.deepEqual(cooperativeMemberData({ ...fresh('m', ['t']), userData: Buffer.alloc(1) }), {
    partitions: [],
    generation: -1,
  })
  assert.equal(rebalanceProtocolOf(resolveAssignors(['cooperative-sticky'])), 'cooperative')
  assert.equal(rebalanceProtocolOf(resolveAssignors(['range', 'cooperative-sticky'])), 'eager')
  assert.equal(rebalanceProtocolOf(resolveAssignors(['sticky'])), 'eager')
  assert.throws(() => resolveAssignors(['nope' as 'range']), /unknown assignor 'nope'.*cooperative-sticky/)
})

test('sticky: balanced and complete over random subscriptions and ownership (general and constrained)', () => {
  let seed = 42
  const next = (n: number) => {
    seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff
    return seed % n
  }
  for (let round = 0; round < 200; round++) {
    const topics = Array.from({ length: 1 + next(4) }, (_, i) => `t${i}`)
    const partitions = new Map(topics.map((t) => [t, 1 + next(6)]))
    const sameTopics = next(2) === 0
    const members: MemberSubscription[] = Array.from({ length: 1 + next(5) }, (_, i) => {
      const subscribed = sameTopics ? topics : topics.filter(() => next(2) === 0)
      return v2(`m${i}`, subscribed.length > 0 ? subscribed : [topics[0]], [], GENERATION)
    })
    let previous = new Map<string, TopicPartition[]>()
    for (let step = 0; step < 3; step++) {
      const input = members.map((m) => ({ ...m, ownedPartitions: previous.get(m.memberId) ?? [] }))
      const { assignment } = stickyAssign(partitions, input, cooperativeMemberData)
      const all = [...assignment.values()].flat().map((p) => `${p.topic}-${p.partition}`)
      assert.equal(new Set(all).size, all.length, 'no partition twice')
      const total = [...partitions.values()].reduce((a, b) => a + b, 0)
      if (sameTopics) {
        assert.equal(all.length, total)
        const sizes = [...assignment.values()].map((l) => l.length)
        assert.ok(Math.max(...sizes) - Math.min(...sizes) <= 1, `balanced: ${sizes}`)
      }
      for (const m of input)
        for (const p of assignment.get(m.memberId)!)
          assert.ok(m.topics.includes(p.topic), 'only subscribed topics')
      previous = assignment
      if (members.length > 1) members.pop()
    }
  }
})

test('sticky: the StickyAssignor javadoc, example 1 (same subscriptions; C1 leaves, nothing else moves)', () => {
  const topics = ['t0', 't1', 't2', 't3']
  const partitions = counts({ t0: 2, t1: 2, t2: 2, t3: 2 })
  const first = sticky(
    partitions,
    ['C0', 'C1', 'C2'].map((m) => fresh(m, topics)),
  )
  assert.deepEqual(first.out, {
    C0: ['t0-0', 't1-1', 't3-0'],
    C1: ['t0-1', 't2-0', 't3-1'],
    C2: ['t1-0', 't2-1'],
  })
  const second = sticky(partitions, [
    v2('C0', topics, first.raw.get('C0')),
    v2('C2', topics, first.raw.get('C2')),
  ])
  // The javadoc's point: every previous assignment is kept, C1's four partitions are shared.
  for (const m of ['C0', 'C2'] as const) {
    assert.equal(second.out[m].length, 4)
    for (const p of first.out[m]) assert.ok(second.out[m].includes(p), `${m} keeps ${p}`)
  }
})

test('sticky: the StickyAssignor javadoc, example 2 (different subscriptions; C0 leaves)', () => {
  const partitions = counts({ t0: 1, t1: 2, t2: 3 })
  const first = sticky(partitions, [
    fresh('C0', ['t0']),
    fresh('C1', ['t0', 't1']),
    fresh('C2', ['t0', 't1', 't2']),
  ])
  assert.deepEqual(first.out, { C0: ['t0-0'], C1: ['t1-0', 't1-1'], C2: ['t2-0', 't2-1', 't2-2'] })
  const second = sticky(partitions, [
    v2('C1', ['t0', 't1'], first.raw.get('C1')),
    v2('C2', ['t0', 't1', 't2'], first.raw.get('C2')),
  ])
  assert.deepEqual(second.out, { C1: ['t1-0', 't1-1', 't0-0'], C2: ['t2-0', 't2-1', 't2-2'] })
})

/**
 * AbstractStickyAssignorTest's verifyValidityAndBalance: only subscribed topics, no partition
 * twice, and no member more than one partition behind another that holds a partition it
 * could take.
 */
function assertValidAndBalanced(
  members: readonly MemberSubscription[],
  assignment: ReadonlyMap<string, TopicPartition[]>,
) {
  const seen = new Set<string>()
  for (const m of members) {
    for (const p of assignment.get(m.memberId) ?? []) {
      assert.ok(m.topics.includes(p.topic), `${m.memberId} got ${p.topic} without subscribing`)
      const key = `${p.topic}-${p.partition}`
      assert.ok(!seen.has(key), `${key} assigned twice`)
      seen.add(key)
    }
  }
  for (const a of members)
    for (const b of members) {
      const small = assignment.get(a.memberId)!
      const large = assignment.get(b.memberId)!
      if (large.length - small.length <= 1) continue
      for (const p of large)
        assert.ok(
          !a.topics.includes(p.topic),
          `${p.topic}-${p.partition} could move from ${b.memberId} to ${a.memberId}`,
        )
    }
}

const pad = (prefix: string, i: number, max: number) =>
  `${prefix}${String(i).padStart(String(max).length, '0')}`

test('sticky: testReassignmentAfterOneConsumerLeaves (19 members over nested subscriptions), valid and sticky', () => {
  const partitions = new Map<string, number>()
  for (let i = 1; i < 20; i++) partitions.set(pad('topic', i, 20), i)
  const members: MemberSubscription[] = []
  for (let i = 1; i < 20; i++)
    members.push(
      fresh(
        pad('consumer', i, 20),
        Array.from({ length: i }, (_, j) => pad('topic', j + 1, 20)),
      ),
    )
  const first = stickyAssign(partitions, members, cooperativeMemberData).assignment
  assertValidAndBalanced(members, first)
  const rest = members
    .filter((m) => m.memberId !== 'consumer10')
    .map((m) => v2(m.memberId, [...m.topics], first.get(m.memberId)))
  const second = stickyAssign(partitions, rest, cooperativeMemberData).assignment
  assertValidAndBalanced(rest, second)
  // Sticky: a partition that moved came from the member that left, or balances out a move.
  let kept = 0
  for (const m of rest)
    for (const p of first.get(m.memberId)!) if (str(second.get(m.memberId)).includes(str([p])[0])) kept++
  const owned = rest.reduce((n, m) => n + first.get(m.memberId)!.length, 0)
  assert.ok(kept >= owned - first.get('consumer10')!.length, `kept ${kept} of ${owned}`)
})

test('sticky: 200 members, 40 topics, random subscriptions, 50 leave: valid, balanced, in bounded time', () => {
  let seed = 7
  const next = (n: number) => {
    seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff
    return seed % n
  }
  const partitions = new Map<string, number>()
  for (let i = 0; i < 40; i++) partitions.set(pad('topic', i, 40), next(10) + 1)
  const members: MemberSubscription[] = []
  for (let i = 0; i < 200; i++) {
    const topics = new Set<string>()
    const count = next(20)
    for (let j = 0; j < count; j++) topics.add(pad('topic', next(40), 40))
    members.push(fresh(pad('consumer', i, 200), [...topics]))
  }
  const startMs = performance.now()
  const first = stickyAssign(partitions, members, cooperativeMemberData).assignment
  assertValidAndBalanced(members, first)
  const leaving = new Set(Array.from({ length: 50 }, () => pad('consumer', next(200), 200)))
  const rest = members
    .filter((m) => !leaving.has(m.memberId))
    .map((m) => v2(m.memberId, [...m.topics], first.get(m.memberId)))
  const second = stickyAssign(partitions, rest, cooperativeMemberData).assignment
  assertValidAndBalanced(rest, second)
  assert.ok(performance.now() - startMs < 20000, 'Java runs this within its 60 s test timeout; so must we')
})

test('CooperativeStickyAssignorTest: a partition claimed by two members of one generation goes to neither this round', () => {
  const topics = ['topic']
  const members = (owned1: TopicPartition[], owned2: TopicPartition[]) => [
    v2('consumer1', topics, owned1),
    v2('consumer2', topics, owned2),
    v2('consumer3', topics, []),
  ]
  // ...WithEqualPartitionsPerConsumer
  const equal = cooperativeStickyAssign(
    counts({ topic: 3 }),
    members([tp('topic', 0), tp('topic', 1)], [tp('topic', 0), tp('topic', 2)]),
  )
  assert.deepEqual(str(equal.get('consumer1')), ['topic-1'])
  assert.deepEqual(str(equal.get('consumer2')), ['topic-2'])
  assert.deepEqual(equal.get('consumer3'), [])
  // StickyAssignorTest, same inputs (ownership in the user data): topic-0 goes to consumer3 at once.
  const [stickyAssignor] = resolveAssignors(['sticky'])
  const withUserData = (memberId: string, owned: TopicPartition[]) => ({
    ...v2(memberId, topics, owned),
    userData: encodeStickyUserData({ partitions: owned, generation: GENERATION }),
  })
  const eager = stickyAssignor.assign(counts({ topic: 3 }), [
    withUserData('consumer1', [tp('topic', 0), tp('topic', 1)]),
    withUserData('consumer2', [tp('topic', 0), tp('topic', 2)]),
    withUserData('consumer3', []),
  ])
  assert.deepEqual(
    ['consumer1', 'consumer2', 'consumer3'].map((m) => str(eager.get(m))),
    [['topic-1'], ['topic-2'], ['topic-0']],
  )
  // ...WithUnequalPartitionsPerConsumer
  const unequal = cooperativeStickyAssign(
    counts({ topic: 4 }),
    members([tp('topic', 0), tp('topic', 1)], [tp('topic', 0), tp('topic', 2)]),
  )
  assert.deepEqual(str(unequal.get('consumer1')), ['topic-1', 'topic-3'])
  assert.deepEqual(str(unequal.get('consumer2')), ['topic-2'])
  assert.deepEqual(unequal.get('consumer3'), [])
})

test('CooperativeStickyAssignorTest: old subscriptions (v1, no generation) and the generation in the user data', () => {
  // testAssignorWithOldVersionSubscriptions
  const result = cooperativeStickyAssign(counts({ topic1: 3 }), [
    { ...fresh('consumer1', ['topic1']), ownedPartitions: [tp('topic1', 0)] },
    { ...fresh('consumer2', ['topic1']), ownedPartitions: [tp('topic1', 1)] },
    v2('consumer3', ['topic1'], []),
  ])
  assert.deepEqual(
    ['consumer1', 'consumer2', 'consumer3'].map((m) => str(result.get(m))),
    [['topic1-0'], ['topic1-1'], ['topic1-2']],
  )
  // testEncodeAndDecodeGeneration / testDecodeGeneration / testMemberDataWithInconsistentData
  const [assignor] = resolveAssignors(['cooperative-sticky'])
  assert.deepEqual(
    cooperativeMemberData({ ...fresh('m', ['topic']), userData: assignor.subscriptionUserData!(['topic']) }),
    {
      partitions: [],
      generation: -1,
    },
  )
  assert.deepEqual(cooperativeMemberData(fresh('m', ['topic'])), { partitions: [], generation: null })
  assignor.onAssignment!([tp('topic', 1)], GENERATION)
  const userData = assignor.subscriptionUserData!(['topic'])
  assert.deepEqual(
    cooperativeMemberData({ ...fresh('m', ['topic']), userData, ownedPartitions: [tp('topic', 0)] }),
    {
      partitions: [tp('topic', 0)],
      generation: GENERATION,
    },
  )
  // testMemberDataWithEmptyPartitionsAndHigherGeneration: the v2 field wins over the user data.
  assert.deepEqual(
    cooperativeMemberData({ ...v2('m', ['topic'], [], 5), userData: encodeCooperativeUserData(4) }),
    {
      partitions: [],
      generation: 5,
    },
  )
})
