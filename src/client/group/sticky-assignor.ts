/**
 * The sticky assignors, computed as Java's AbstractStickyAssignor (Kafka 3.5+, without
 * racks): `sticky` (StickyAssignor, eager: previous ownership travels in the subscription's
 * user data) and `cooperative-sticky` (CooperativeStickyAssignor, KIP-429: ownership from
 * the subscription's ownedPartitions, v1+, and generationId, v2+, else the generation in
 * its user data; partitions that change owner are held back for one rebalance, so their
 * old owner revokes them first).
 *
 * Two algorithms, as Java's:
 * - constrained (every member subscribes to the same topics): each member keeps up to its
 *   quota (minQuota = ⌊partitions/members⌋, maxQuota = ⌈…⌉, only `partitions % members`
 *   members at maxQuota) of what it owned, owned partitions sorted by partition then topic;
 *   the rest, sorted by topic then partition, go round-robin to the members (sorted) still
 *   below minQuota, then one each to members at exactly minQuota.
 * - general (different subscriptions): keep every valid ownership, give each unassigned
 *   partition (topics with fewest subscribers first) to the least loaded eligible member,
 *   then move partitions from members more than one above another eligible member, back to
 *   a previous owner (older generation) when that helps, keeping the result only if it is
 *   more balanced.
 *
 * Where Java's outcome depends on HashMap or HashSet iteration order (members visited in
 * the order of the map the leader fills from JoinGroup), java-hash-order.ts reproduces it.
 * Java keeps the highest generation seen in an assignor instance across rebalances; here
 * it is the highest in the current subscriptions (the same while generations only grow).
 */
import { assert } from '../../common/assert.js'
import { Reader, Writer } from '../../protocol/primitives.js'
import { type TopicPartition, tpKey } from '../leader-requests.js'
import type { GroupAssignment, MemberSubscription, PartitionAssignor } from './assignor.js'
import { JavaHashSet, javaHashMapOrder, javaStringHash, javaTopicPartitionHash } from './java-hash-order.js'

/** AbstractStickyAssignor.DEFAULT_GENERATION: no generation known. */
export const DEFAULT_GENERATION = -1

/** What a member owned before this rebalance, and in which generation (null: unknown). */
export interface MemberData {
  partitions: TopicPartition[]
  generation: number | null
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/**
 * A map keyed by topic partition without building a key string per lookup: the assignors
 * look up every partition of the group several times, a million of them in Java's tests.
 */
class TpMap<V> {
  private readonly byTopic = new Map<string, Map<number, V>>()

  get(tp: TopicPartition): V | undefined {
    return this.byTopic.get(tp.topic)?.get(tp.partition)
  }

  has(tp: TopicPartition): boolean {
    return this.byTopic.get(tp.topic)?.has(tp.partition) ?? false
  }

  set(tp: TopicPartition, value: V): void {
    let partitions = this.byTopic.get(tp.topic)
    if (!partitions) {
      partitions = new Map()
      this.byTopic.set(tp.topic, partitions)
    }
    partitions.set(tp.partition, value)
  }

  delete(tp: TopicPartition): void {
    this.byTopic.get(tp.topic)?.delete(tp.partition)
  }

  clone(): TpMap<V> {
    const copy = new TpMap<V>()
    for (const [topic, partitions] of this.byTopic) copy.byTopic.set(topic, new Map(partitions))
    return copy
  }

  /** Becomes a copy of `other`. */
  assign(other: TpMap<V>): void {
    this.byTopic.clear()
    for (const [topic, partitions] of other.byTopic) this.byTopic.set(topic, new Map(partitions))
  }
}

/** A set of topic partitions (a TpMap of nothing). */
class TpSet {
  private readonly map = new TpMap<true>()

  constructor(partitions: Iterable<TopicPartition> = []) {
    for (const tp of partitions) this.add(tp)
  }

  has(tp: TopicPartition): boolean {
    return this.map.has(tp)
  }

  add(tp: TopicPartition): void {
    this.map.set(tp, true)
  }
}

function removeFrom(list: TopicPartition[], tp: TopicPartition): void {
  const i = list.findIndex((p) => p.topic === tp.topic && p.partition === tp.partition)
  if (i >= 0) list.splice(i, 1)
}

// ---- user data ---------------------------------------------------------------------------

/**
 * StickyAssignor's user data, version 1: previous_assignment [topic string, partitions
 * [int32]], generation int32 (version 0 has no generation). Old-style Struct encoding:
 * int32 array counts, int16 string lengths.
 */
export function encodeStickyUserData(data: MemberData): Buffer {
  const byTopic = new Map<string, number[]>()
  for (const tp of data.partitions) byTopic.set(tp.topic, [...(byTopic.get(tp.topic) ?? []), tp.partition])
  const w = new Writer()
  w.writeInt32(byTopic.size)
  for (const [topic, partitions] of byTopic) {
    w.writeString(topic)
    w.writeInt32(partitions.length)
    for (const p of partitions) w.writeInt32(p)
  }
  w.writeInt32(data.generation ?? DEFAULT_GENERATION)
  return w.toBuffer()
}

/** Version 1, else version 0 (no generation), as Java reads it; unreadable bytes throw. */
export function decodeStickyUserData(bytes: Buffer): MemberData {
  const reader = new Reader(bytes)
  const partitions: TopicPartition[] = []
  const topics = reader.readInt32()
  for (let t = 0; t < topics; t++) {
    const topic = reader.readString()
    const count = reader.readInt32()
    for (let p = 0; p < count; p++) partitions.push({ topic, partition: reader.readInt32() })
  }
  const generation = reader.remaining >= 4 ? reader.readInt32() : null
  return { partitions, generation }
}

/** CooperativeStickyAssignor's user data: the member's generation, int32. */
export function encodeCooperativeUserData(generation: number): Buffer {
  const w = new Writer()
  w.writeInt32(generation)
  return w.toBuffer()
}

// ---- the algorithm -----------------------------------------------------------------------

interface StickyResult {
  assignment: GroupAssignment
  /** Constrained algorithm: partitions given to a member that someone else owned; null after the general one. */
  partitionsTransferringOwnership: Map<string, { tp: TopicPartition; consumer: string }> | null
}

/**
 * AbstractStickyAssignor.assignPartitions without racks. `memberData(m)`: the ownership
 * and generation the assignor reads from a member's subscription.
 */
export function stickyAssign(
  partitionsPerTopic: ReadonlyMap<string, number>,
  members: readonly MemberSubscription[],
  memberData: (m: MemberSubscription) => MemberData,
): StickyResult {
  // The order Java iterates its subscriptions map in.
  const ordered = javaHashMapOrder(members, (m) => javaStringHash(m.memberId))
  const subscriptions = new Map(ordered.map((m) => [m.memberId, m]))
  const data = new Map(ordered.map((m) => [m.memberId, memberData(m)]))
  const counts = new Map([...partitionsPerTopic].filter(([, n]) => n > 0))
  const owned = new Map<string, TopicPartition[]>()
  const multiplyOwned = new TpSet()
  const allEqual = allSubscriptionsEqual(counts, ordered, data, owned, multiplyOwned)
  if (allEqual) {
    const transferring = new Map<string, { tp: TopicPartition; consumer: string }>()
    const assignment = constrainedAssign(counts, owned, multiplyOwned, transferring)
    return { assignment, partitionsTransferringOwnership: transferring }
  }
  return {
    assignment: new GeneralAssignment(counts, subscriptions, data, owned).build(),
    partitionsTransferringOwnership: null,
  }
}

/**
 * true iff every member subscribes to the same topics. Fills `owned` with each member's
 * previously owned, still existing partitions; a partition claimed by two members of the
 * same generation goes to neither (`multiplyOwned`), else to the higher generation.
 */
function allSubscriptionsEqual(
  counts: ReadonlyMap<string, number>,
  ordered: readonly MemberSubscription[],
  data: ReadonlyMap<string, MemberData>,
  owned: Map<string, TopicPartition[]>,
  multiplyOwned: TpSet,
): boolean {
  let equal = true
  let subscribed = new Set<string>()
  const previousOwner = new TpMap<string>()
  const protocolGeneration = new Map(ordered.map((m) => [m.memberId, m.generationId ?? DEFAULT_GENERATION]))
  for (const member of ordered) {
    const topics = new Set(member.topics)
    // As Java: the first non-empty subscription is the reference.
    if (subscribed.size === 0) subscribed = topics
    else if (equal && !(topics.size === subscribed.size && [...topics].every((t) => subscribed.has(t))))
      equal = false
    const memberData = data.get(member.memberId)!
    const generation = memberData.generation ?? DEFAULT_GENERATION
    const mine: TopicPartition[] = []
    owned.set(member.memberId, mine)
    for (const tp of memberData.partitions) {
      if (!counts.has(tp.topic)) continue
      const other = previousOwner.get(tp)
      if (other === undefined) {
        mine.push(tp)
        previousOwner.set(tp, member.memberId)
        continue
      }
      // Java compares with the other member's protocol generationId, not its user data's.
      const otherGeneration = protocolGeneration.get(other)!
      if (generation === otherGeneration) {
        multiplyOwned.add(tp)
        removeFrom(owned.get(other)!, tp)
        previousOwner.set(tp, member.memberId)
      } else if (generation > otherGeneration) {
        mine.push(tp)
        removeFrom(owned.get(other)!, tp)
        previousOwner.set(tp, member.memberId)
      }
    }
  }
  return equal
}

/** Every partition of the topics, topics sorted, partitions ascending. */
function allPartitionsSorted(
  counts: ReadonlyMap<string, number>,
  topics: readonly string[],
): TopicPartition[] {
  const out: TopicPartition[] = []
  for (const topic of topics) for (let p = 0; p < counts.get(topic)!; p++) out.push({ topic, partition: p })
  return out
}

function constrainedAssign(
  counts: ReadonlyMap<string, number>,
  owned: ReadonlyMap<string, TopicPartition[]>,
  multiplyOwned: TpSet,
  transferring: Map<string, { tp: TopicPartition; consumer: string }>,
): GroupAssignment {
  const total = [...counts.values()].reduce((a, b) => a + b, 0)
  const consumers = owned.size
  const minQuota = Math.floor(total / consumers)
  const maxQuota = Math.ceil(total / consumers)
  const expectedOverMin = total % consumers
  let currentOverMin = 0
  const assignment: GroupAssignment = new Map([...owned.keys()].map((c) => [c, []]))
  const assigned = new TpSet()
  const revoked = new TpSet()
  let underMin: string[] = []
  let exactlyMin: string[] = []

  // 1. Keep owned partitions up to the quota (Java's map order decides who gets maxQuota).
  for (const [consumer, list] of owned) {
    const mine = [...list]
      .sort((a, b) => a.partition - b.partition || compareStrings(a.topic, b.topic))
      .filter((tp) => !multiplyOwned.has(tp))
    const target = assignment.get(consumer)!
    let keep: number
    if (mine.length < minQuota) {
      keep = mine.length
      underMin.push(consumer)
    } else if (mine.length >= maxQuota && currentOverMin < expectedOverMin) {
      keep = maxQuota
      currentOverMin++
      if (currentOverMin === expectedOverMin) exactlyMin = []
    } else {
      keep = minQuota
      if (currentOverMin < expectedOverMin) exactlyMin.push(consumer)
    }
    for (const tp of mine.slice(0, keep)) {
      target.push(tp)
      assigned.add(tp)
    }
    for (const tp of mine.slice(keep)) revoked.add(tp)
  }

  const topics = [...counts.keys()].sort(compareStrings)
  const unassigned = allPartitionsSorted(counts, topics).filter((tp) => !assigned.has(tp))
  underMin = underMin.sort(compareStrings)
  exactlyMin = exactlyMin.sort(compareStrings)

  // 2. Round-robin over the members below minQuota, then one more each to those at minQuota.
  // `cursor` walks underMin as Java's list iterator does (removal steps it back).
  let cursor = 0
  unassigned.forEach((tp, index) => {
    let consumer: string
    let fromIterator = true
    if (cursor < underMin.length) {
      consumer = underMin[cursor++]
    } else if (underMin.length === 0) {
      assert(
        exactlyMin.length > 0,
        () => `sticky: no member left for ${unassigned.length - index} partitions`,
      )
      consumer = exactlyMin.shift()!
      fromIterator = false
    } else {
      cursor = 0
      consumer = underMin[cursor++]
    }
    const target = assignment.get(consumer)!
    target.push(tp)
    if (revoked.has(tp) || multiplyOwned.has(tp)) transferring.set(tpKey(tp), { tp, consumer })
    if (target.length === minQuota) {
      assert(fromIterator, 'sticky: a member at minQuota came back to minQuota')
      underMin.splice(--cursor, 1)
      exactlyMin.push(consumer)
    } else if (target.length === maxQuota) {
      currentOverMin++
    }
  })

  // Java's verifyUnfilledMembers: members left below minQuota mean the quotas were wrong.
  for (const consumer of underMin)
    assert(
      currentOverMin === expectedOverMin && assignment.get(consumer)!.length === minQuota,
      () => `sticky: ${consumer} ends below minQuota ${minQuota}`,
    )
  return assignment
}

/** Java's ConsumerGenerationPair: who owned a partition in an older generation. */
interface PreviousOwner {
  consumer: string
  generation: number
}

/** Java's PartitionMovements: where partitions moved during this rebalance, per topic. */
class PartitionMovements {
  /** tpKey → [src, dst]. */
  private readonly movements = new Map<string, [string, string]>()
  /** topic → "src\u0000dst" → the partitions that moved so (a Java HashSet). */
  private readonly byTopic = new Map<string, Map<string, JavaHashSet<TopicPartition>>>()

  private pairKey(src: string, dst: string): string {
    return `${src}\u0000${dst}`
  }

  private remove(tp: TopicPartition): [string, string] {
    const pair = this.movements.get(tpKey(tp))!
    this.movements.delete(tpKey(tp))
    const topicMovements = this.byTopic.get(tp.topic)!
    const key = this.pairKey(pair[0], pair[1])
    const set = topicMovements.get(key)!
    set.delete(tp)
    if (set.size === 0) topicMovements.delete(key)
    if (topicMovements.size === 0) this.byTopic.delete(tp.topic)
    return pair
  }

  private add(tp: TopicPartition, src: string, dst: string): void {
    this.movements.set(tpKey(tp), [src, dst])
    let topicMovements = this.byTopic.get(tp.topic)
    if (!topicMovements) {
      topicMovements = new Map()
      this.byTopic.set(tp.topic, topicMovements)
    }
    const key = this.pairKey(src, dst)
    let set = topicMovements.get(key)
    if (!set) {
      set = new JavaHashSet<TopicPartition>(javaTopicPartitionHash, tpKey)
      topicMovements.set(key, set)
    }
    set.add(tp)
  }

  movePartition(tp: TopicPartition, oldConsumer: string, newConsumer: string): void {
    if (!this.movements.has(tpKey(tp))) {
      this.add(tp, oldConsumer, newConsumer)
      return
    }
    const [src, dst] = this.remove(tp)
    assert(dst === oldConsumer, 'sticky: a moved partition moves from where it went')
    // A partition moving back to where it started has not moved at all.
    if (src !== newConsumer) this.add(tp, src, newConsumer)
  }

  /**
   * Moving a partition from old to new when another partition of its topic already moved
   * new → old: move that one back instead, so no two members swap partitions of a topic.
   */
  actualPartitionToMove(tp: TopicPartition, oldConsumer: string, newConsumer: string): TopicPartition {
    const topicMovements = this.byTopic.get(tp.topic)
    if (!topicMovements) return tp
    let from = oldConsumer
    const moved = this.movements.get(tpKey(tp))
    if (moved) {
      assert(moved[1] === oldConsumer, 'sticky: a moved partition is where it went')
      from = moved[0]
    }
    const reverse = topicMovements.get(this.pairKey(newConsumer, from))
    if (!reverse) return tp
    return reverse.values()[0]
  }
}

/** Java's GeneralAssignmentBuilder without racks. */
class GeneralAssignment {
  private readonly topicConsumers = new Map<string, string[]>()
  private readonly consumerTopics = new Map<string, string[]>()
  /** Java's currentAssignment: the result, updated in place. */
  private readonly current: Map<string, TopicPartition[]>
  private readonly partitionConsumer = new TpMap<string>()
  private sortedAllPartitions: TopicPartition[]
  /**
   * Java's TreeSet of members ordered by (assignment size, member id), kept sorted: a member
   * leaves it before its size changes and comes back after, as Java's code does.
   */
  private sortedMembers: string[] = []
  private revocationRequired = false
  private readonly movements = new PartitionMovements()
  private readonly total: number

  constructor(
    private readonly counts: ReadonlyMap<string, number>,
    private readonly subscriptions: ReadonlyMap<string, MemberSubscription>,
    private readonly data: ReadonlyMap<string, MemberData>,
    owned: Map<string, TopicPartition[]>,
  ) {
    this.total = [...counts.values()].reduce((a, b) => a + b, 0)
    for (const topic of counts.keys()) this.topicConsumers.set(topic, [])
    this.current = owned
    for (const [memberId, member] of subscriptions) {
      const topics: string[] = []
      this.consumerTopics.set(memberId, topics)
      for (const topic of member.topics) {
        if (!counts.has(topic)) continue
        topics.push(topic)
        this.topicConsumers.get(topic)!.push(memberId)
      }
      if (!this.current.has(memberId)) this.current.set(memberId, [])
    }
    for (const [memberId, list] of this.current)
      for (const tp of list) this.partitionConsumer.set(tp, memberId)
    const topics = [...this.topicConsumers.keys()].sort(
      (a, b) =>
        this.topicConsumers.get(a)!.length - this.topicConsumers.get(b)!.length || compareStrings(a, b),
    )
    this.sortedAllPartitions = allPartitionsSorted(counts, topics)
  }

  build(): GroupAssignment {
    const previous = this.previousAssignment()
    const assigned = this.keepOwnedPartitions()
    const unassigned = this.unassignedPartitions(assigned)
    for (const consumer of this.current.keys()) this.insertSorted(consumer)
    this.balance(previous, unassigned)
    return this.current
  }

  private size(consumer: string): number {
    return this.current.get(consumer)!.length
  }

  private sorted(): readonly string[] {
    return this.sortedMembers
  }

  private compareMembers(a: string, b: string): number {
    return this.size(a) - this.size(b) || compareStrings(a, b)
  }

  /** Where `consumer` goes (or is) in sortedMembers, by binary search at its current size. */
  private sortedIndex(consumer: string): number {
    let low = 0
    let high = this.sortedMembers.length
    while (low < high) {
      const mid = (low + high) >>> 1
      if (this.compareMembers(this.sortedMembers[mid], consumer) < 0) low = mid + 1
      else high = mid
    }
    return low
  }

  private insertSorted(consumer: string): void {
    const i = this.sortedIndex(consumer)
    if (this.sortedMembers[i] !== consumer) this.sortedMembers.splice(i, 0, consumer)
  }

  private removeSorted(consumer: string): void {
    const i = this.sortedIndex(consumer)
    if (this.sortedMembers[i] === consumer) this.sortedMembers.splice(i, 1)
  }

  /** Partitions whose owner in an older generation than the newest is known (Java's prevAssignment). */
  private previousAssignment(): Map<string, PreviousOwner> {
    const maxGeneration = Math.max(
      DEFAULT_GENERATION,
      ...[...this.data.values()].map((d) => d.generation ?? DEFAULT_GENERATION),
    )
    const previous = new Map<string, PreviousOwner>()
    const note = (partitions: readonly TopicPartition[], consumer: string, generation: number) => {
      for (const tp of partitions) {
        const known = previous.get(tpKey(tp))
        if (!known || generation > known.generation) previous.set(tpKey(tp), { consumer, generation })
      }
    }
    for (const [consumer, d] of this.data) {
      if (d.generation !== null && d.generation < maxGeneration) note(d.partitions, consumer, d.generation)
      else if (d.generation === null && maxGeneration > DEFAULT_GENERATION)
        note(d.partitions, consumer, DEFAULT_GENERATION)
    }
    return previous
  }

  /** Drops ownership of topics gone or no longer subscribed; returns the partitions kept. */
  private keepOwnedPartitions(): TopicPartition[] {
    const kept: TopicPartition[] = []
    for (const [consumer, list] of this.current) {
      const subscription = this.subscriptions.get(consumer)!
      for (const tp of [...list]) {
        if (!this.topicConsumers.has(tp.topic)) {
          removeFrom(list, tp)
          this.partitionConsumer.delete(tp)
        } else if (!subscription.topics.includes(tp.topic)) {
          removeFrom(list, tp)
          this.revocationRequired = true
        } else {
          kept.push(tp)
        }
      }
    }
    return kept
  }

  private unassignedPartitions(assigned: readonly TopicPartition[]): TopicPartition[] {
    if (assigned.length === 0) return this.sortedAllPartitions
    const taken = new TpSet(assigned)
    return this.sortedAllPartitions.filter((tp) => !taken.has(tp))
  }

  private maxAssignmentSize(consumer: string): number {
    const topics = this.consumerTopics.get(consumer)!
    if (topics.length === this.counts.size) return this.total
    return topics.reduce((sum, t) => sum + this.counts.get(t)!, 0)
  }

  private isBalanced(): boolean {
    const sorted = this.sorted()
    if (this.size(sorted[0]) >= this.size(sorted[sorted.length - 1]) - 1) return true
    const owner = new TpMap<string>()
    for (const [consumer, list] of this.current) for (const tp of list) owner.set(tp, consumer)
    for (const consumer of sorted) {
      const count = this.size(consumer)
      if (count === this.maxAssignmentSize(consumer)) continue
      const mine = new TpSet(this.current.get(consumer)!)
      for (const topic of this.consumerTopics.get(consumer)!) {
        for (let p = 0; p < this.counts.get(topic)!; p++) {
          const tp = { topic, partition: p }
          if (mine.has(tp)) continue
          const other = owner.get(tp)
          if (other !== undefined && count + 1 < this.size(other)) return false
        }
      }
    }
    return true
  }

  private balanceScore(assignment: ReadonlyMap<string, TopicPartition[]>): number {
    const sizes = [...assignment.values()].map((l) => l.length)
    let score = 0
    for (let i = 0; i < sizes.length; i++)
      for (let j = i + 1; j < sizes.length; j++) score += Math.abs(sizes[i] - sizes[j])
    return score
  }

  private assignPartition(tp: TopicPartition): void {
    for (const consumer of this.sorted()) {
      if (!this.consumerTopics.get(consumer)!.includes(tp.topic)) continue
      this.removeSorted(consumer)
      this.current.get(consumer)!.push(tp)
      this.partitionConsumer.set(tp, consumer)
      this.insertSorted(consumer)
      return
    }
  }

  private topicCanMove(topic: string): boolean {
    return this.topicConsumers.get(topic)!.length >= 2
  }

  private consumerCanMove(consumer: string): boolean {
    const list = this.current.get(consumer)!
    if (list.length < this.maxAssignmentSize(consumer)) return true
    return list.some((tp) => this.topicCanMove(tp.topic))
  }

  private balance(previous: ReadonlyMap<string, PreviousOwner>, unassignedInput: TopicPartition[]): void {
    const sorted = this.sorted()
    const initializing = this.size(sorted[sorted.length - 1]) === 0
    for (const tp of unassignedInput) {
      if (this.topicConsumers.get(tp.topic)!.length === 0) continue
      this.assignPartition(tp)
    }
    // Only partitions with two or more possible owners, and members that can change, take part.
    const fixedTopics = new Set([...this.topicConsumers.keys()].filter((t) => !this.topicCanMove(t)))
    this.sortedAllPartitions = this.sortedAllPartitions.filter((tp) => !fixedTopics.has(tp.topic))
    const unassigned = unassignedInput.filter((tp) => !fixedTopics.has(tp.topic))
    const fixed = new Map<string, TopicPartition[]>()
    for (const consumer of this.consumerTopics.keys()) {
      if (this.consumerCanMove(consumer)) continue
      this.removeSorted(consumer)
      fixed.set(consumer, this.current.get(consumer)!)
      this.current.delete(consumer)
    }
    const before = new Map([...this.current].map(([c, l]) => [c, [...l]]))
    const beforeOwners = this.partitionConsumer.clone()
    if (!this.revocationRequired) this.performReassignments(unassigned, previous)
    const reassigned = this.performReassignments(this.sortedAllPartitions, previous)
    if (!initializing && reassigned && this.balanceScore(this.current) >= this.balanceScore(before)) {
      this.current.clear()
      for (const [c, l] of before) this.current.set(c, l)
      this.partitionConsumer.assign(beforeOwners)
      // Java's TreeSet goes stale here; nothing reads its order from now on.
      this.sortedMembers = [...this.current.keys()].sort((a, b) => this.compareMembers(a, b))
    }
    for (const [consumer, list] of fixed) {
      this.current.set(consumer, list)
      this.insertSorted(consumer)
    }
  }

  private performReassignments(
    partitions: readonly TopicPartition[],
    previous: ReadonlyMap<string, PreviousOwner>,
  ): boolean {
    let performed = false
    let modified: boolean
    // Bounded: every move strictly lowers the spread between two members' sizes.
    do {
      modified = false
      for (const tp of partitions) {
        if (this.isBalanced()) break
        const consumer = this.partitionConsumer.get(tp)
        assert(consumer !== undefined, () => `sticky: ${tpKey(tp)} has no owner`)
        const prev = previous.get(tpKey(tp))
        if (
          prev !== undefined &&
          this.current.has(prev.consumer) &&
          this.size(consumer) > this.size(prev.consumer) + 1
        ) {
          this.reassign(tp, prev.consumer)
          performed = true
          modified = true
          continue
        }
        for (const other of this.topicConsumers.get(tp.topic)!) {
          if (!this.current.has(other)) continue
          if (this.size(consumer) > this.size(other) + 1) {
            const target = this.sorted().find((c) => this.consumerTopics.get(c)!.includes(tp.topic))
            assert(target !== undefined, () => `sticky: no member for ${tpKey(tp)}`)
            this.reassign(tp, target)
            performed = true
            modified = true
            break
          }
        }
      }
    } while (modified)
    return performed
  }

  private reassign(tp: TopicPartition, newConsumer: string): void {
    const consumer = this.partitionConsumer.get(tp)!
    const toMove = this.movements.actualPartitionToMove(tp, consumer, newConsumer)
    const oldConsumer = this.partitionConsumer.get(toMove)!
    this.removeSorted(oldConsumer)
    this.removeSorted(newConsumer)
    this.movements.movePartition(toMove, oldConsumer, newConsumer)
    removeFrom(this.current.get(oldConsumer)!, toMove)
    this.current.get(newConsumer)!.push(toMove)
    this.partitionConsumer.set(toMove, newConsumer)
    this.insertSorted(newConsumer)
    this.insertSorted(oldConsumer)
  }
}

// ---- the two assignors -------------------------------------------------------------------

/** StickyAssignor (eager): ownership and generation from the user data it wrote last time. */
export function createStickyAssignor(): PartitionAssignor {
  let memberAssignment: TopicPartition[] | null = null
  let generation = DEFAULT_GENERATION
  return {
    name: 'sticky',
    rebalanceProtocols: ['eager'],
    assign(partitionsPerTopic, members) {
      return stickyAssign(partitionsPerTopic, members, stickyMemberData).assignment
    },
    subscriptionUserData() {
      return memberAssignment === null
        ? null
        : encodeStickyUserData({ partitions: memberAssignment, generation })
    },
    onAssignment(partitions, generationId) {
      memberAssignment = [...partitions]
      generation = generationId
    },
  }
}

function stickyMemberData(m: MemberSubscription): MemberData {
  // Eager: the member gave up its partitions before joining, so ownership is in the user data.
  const userData = m.userData ?? null
  if (userData === null || userData.length === 0) return { partitions: [], generation: null }
  return decodeStickyUserData(userData)
}

/** CooperativeStickyAssignor: the sticky assignment minus partitions still owned by another member. */
export function createCooperativeStickyAssignor(): PartitionAssignor {
  let generation = DEFAULT_GENERATION
  return {
    name: 'cooperative-sticky',
    rebalanceProtocols: ['eager', 'cooperative'],
    assign(partitionsPerTopic, members) {
      return cooperativeStickyAssign(partitionsPerTopic, members)
    },
    subscriptionUserData() {
      return encodeCooperativeUserData(generation)
    },
    onAssignment(_partitions, generationId) {
      generation = generationId
    },
  }
}

export function cooperativeMemberData(m: MemberSubscription): MemberData {
  const ownedPartitions = [...(m.ownedPartitions ?? [])]
  const protocolGeneration = m.generationId ?? DEFAULT_GENERATION
  // Subscription v2+: the generation is a field of its own (absent there as -1).
  if (protocolGeneration >= 0) return { partitions: ownedPartitions, generation: protocolGeneration }
  const userData = m.userData ?? null
  if (userData === null) return { partitions: ownedPartitions, generation: null }
  // As Java: unreadable user data counts as DEFAULT_GENERATION, not as unknown.
  const generation = userData.length >= 4 ? userData.readInt32BE(0) : DEFAULT_GENERATION
  return { partitions: ownedPartitions, generation }
}

export function cooperativeStickyAssign(
  partitionsPerTopic: ReadonlyMap<string, number>,
  members: readonly MemberSubscription[],
): GroupAssignment {
  const { assignment, partitionsTransferringOwnership } = stickyAssign(
    partitionsPerTopic,
    members,
    cooperativeMemberData,
  )
  const transferring = partitionsTransferringOwnership ?? computeTransferring(members, assignment)
  // Held back one rebalance: the old owner revokes them, then rejoins, and they move.
  for (const { tp, consumer } of transferring.values()) removeFrom(assignment.get(consumer)!, tp)
  return assignment
}

/** After the general algorithm: partitions assigned to one member and owned by another. */
function computeTransferring(
  members: readonly MemberSubscription[],
  assignment: GroupAssignment,
): Map<string, { tp: TopicPartition; consumer: string }> {
  const added = new Map<string, { tp: TopicPartition; consumer: string }>()
  const revoked = new Set<string>()
  for (const member of members) {
    const owned = member.ownedPartitions ?? []
    const assigned = assignment.get(member.memberId) ?? []
    const ownedSet = new TpSet(owned)
    const assignedSet = new TpSet(assigned)
    for (const tp of assigned) if (!ownedSet.has(tp)) added.set(tpKey(tp), { tp, consumer: member.memberId })
    for (const tp of owned) if (!assignedSet.has(tp)) revoked.add(tpKey(tp))
  }
  for (const key of [...added.keys()]) if (!revoked.has(key)) added.delete(key)
  return added
}
