/**
 * The server-side assignors of KIP-848 consumer groups (`group.consumer.assignors`):
 * `uniform` (the default) and `range`. Both are pure functions from the members'
 * subscriptions, the subscribed topics' partition counts and the previous target assignment
 * to the next target assignment. Topics are identified by id, as in the protocol.
 *
 * - `uniform` spreads all subscribed partitions so that member counts differ by at most one
 *   among members that could take a partition, keeping each partition where the previous
 *   target put it whenever that stays balanced (Kafka's UniformAssignor has the same goals;
 *   its placement of moved partitions may differ).
 * - `range` gives each member, per topic, a contiguous range of partitions, members ordered
 *   by member id and the first `partitions % members` getting one more (the classic
 *   RangeAssignor's rule, which co-partitions topics with equal partition counts).
 */
import { assert } from '../common/assert.js'

/** topic id → sorted partitions. */
export type Assignment = Map<string, number[]>

export interface AssignorMember {
  readonly memberId: string
  /** Ids of the topics the member subscribes to (names and regex resolved). */
  readonly subscribedTopicIds: ReadonlySet<string>
}

export interface AssignorInput {
  readonly members: readonly AssignorMember[]
  /** topic id → partition count, for every topic some member subscribes to. */
  readonly partitionCounts: ReadonlyMap<string, number>
  /** member id → its previous target assignment. */
  readonly previous: ReadonlyMap<string, Assignment>
}

export type ServerAssignor = (input: AssignorInput) => Map<string, Assignment>

export const SERVER_ASSIGNORS: Readonly<Record<string, ServerAssignor>> = {
  uniform: uniformAssign,
  range: rangeAssign,
}

export function rangeAssign(input: AssignorInput): Map<string, Assignment> {
  const result = emptyResult(input)
  for (const [topicId, count] of [...input.partitionCounts].sort(byKey)) {
    const members = input.members
      .filter((m) => m.subscribedTopicIds.has(topicId))
      .map((m) => m.memberId)
      .sort()
    if (members.length === 0) continue
    const per = Math.floor(count / members.length)
    const extra = count % members.length
    let next = 0
    members.forEach((memberId, i) => {
      const take = per + (i < extra ? 1 : 0)
      const partitions: number[] = []
      for (let p = next; p < next + take; p++) partitions.push(p)
      next += take
      if (partitions.length > 0) result.get(memberId)?.set(topicId, partitions)
    })
    assert(next === count, 'range assignment covers every partition')
  }
  return result
}

export function uniformAssign(input: AssignorInput): Map<string, Assignment> {
  const memberIds = input.members.map((m) => m.memberId).sort()
  const subscriptions = new Map(input.members.map((m) => [m.memberId, m.subscribedTopicIds]))
  const owner = new Map<string, string>()
  const owned = new Map<string, string[]>(memberIds.map((id) => [id, []]))
  const partitions: { topicId: string; partition: number; key: string }[] = []
  for (const [topicId, count] of [...input.partitionCounts].sort(byKey))
    for (let partition = 0; partition < count; partition++)
      if (memberIds.some((id) => subscriptions.get(id)?.has(topicId)))
        partitions.push({ topicId, partition, key: `${topicId}:${partition}` })
  const eligible = (memberId: string, topicId: string) => subscriptions.get(memberId)?.has(topicId) === true
  const give = (key: string, memberId: string) => {
    const before = owner.get(key)
    if (before !== undefined) {
      const list = owned.get(before) ?? []
      list.splice(list.indexOf(key), 1)
    }
    owner.set(key, memberId)
    owned.get(memberId)?.push(key)
  }
  const valid = new Set(partitions.map((p) => p.key))
  // Stickiness: keep what the previous target gave each member, if still subscribed and
  // present. A partition claimed twice (cannot happen in a consistent target) goes to the first.
  for (const memberId of memberIds)
    for (const [topicId, list] of input.previous.get(memberId) ?? new Map<string, number[]>())
      for (const partition of list) {
        const key = `${topicId}:${partition}`
        if (valid.has(key) && eligible(memberId, topicId) && !owner.has(key)) give(key, memberId)
      }
  const count = (memberId: string) => owned.get(memberId)?.length ?? 0
  const leastLoaded = (topicId: string): string | undefined => {
    let best: string | undefined
    for (const id of memberIds)
      if (eligible(id, topicId) && (best === undefined || count(id) < count(best))) best = id
    return best
  }
  for (const p of partitions) {
    if (owner.has(p.key)) continue
    const target = leastLoaded(p.topicId)
    assert(target !== undefined, 'a subscribed partition has an eligible member')
    give(p.key, target)
  }
  // Balance: move a partition from a member with two more than an eligible other, until no
  // such move exists. Each move lowers the sum of squared counts, so this ends; the bound is
  // a guard against a bug, not a limit reached in practice.
  const topicOf = new Map(partitions.map((p) => [p.key, p.topicId]))
  const maxMoves = partitions.length * Math.max(1, memberIds.length)
  for (let moves = 0; moves <= maxMoves; moves++) {
    let moved = false
    const heaviestFirst = [...memberIds].sort((a, b) => count(b) - count(a) || (a < b ? -1 : 1))
    for (const from of heaviestFirst) {
      // The newest partitions of a member move first, the ones it kept longest stay.
      for (const key of [...(owned.get(from) ?? [])].reverse()) {
        const topicId = topicOf.get(key) ?? ''
        const to = leastLoaded(topicId)
        if (to !== undefined && count(to) + 1 < count(from)) {
          give(key, to)
          moved = true
          break
        }
      }
      if (moved) break
    }
    if (!moved) break
    assert(moves < maxMoves, 'uniform assignor balancing did not converge')
  }
  const result = emptyResult(input)
  for (const [key, memberId] of owner) {
    const topicId = topicOf.get(key) ?? ''
    const partition = Number(key.slice(key.lastIndexOf(':') + 1))
    const assignment = result.get(memberId)
    if (!assignment) continue
    const list = assignment.get(topicId) ?? []
    list.push(partition)
    assignment.set(topicId, list)
  }
  for (const assignment of result.values()) for (const list of assignment.values()) list.sort((a, b) => a - b)
  return result
}

function emptyResult(input: AssignorInput): Map<string, Assignment> {
  return new Map(input.members.map((m) => [m.memberId, new Map<string, number[]>()]))
}

function byKey(a: [string, number], b: [string, number]): number {
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0
}
