/**
 * The classic protocol's client-side assignors, as the Java consumer names and computes
 * them: the group leader runs the one the coordinator picked (the first name every member
 * offers) over every member's subscription and the partition counts it knows.
 *
 * - `range` (Java's RangeAssignor, the default): per topic, the partitions in order are cut
 *   into consecutive ranges over the topic's subscribers in sorted order; the first
 *   `partitions % subscribers` get one extra.
 * - `roundrobin` (Java's RoundRobinAssignor): every subscribed topic's partitions, topics
 *   sorted, dealt one at a time around the sorted members, skipping a member not
 *   subscribed to the partition's topic.
 *
 * - `sticky` and `cooperative-sticky` (Java's StickyAssignor, CooperativeStickyAssignor):
 *   sticky-assignor.ts.
 *
 * Members sort as Java's AbstractPartitionAssignor.MemberInfo: static members (with a
 * group.instance.id) first, by instance id; then dynamic members by member id.
 */
import { InvalidArgumentError } from '../errors.js'
import type { GroupAssignment, MemberSubscription, PartitionAssignor, RebalanceProtocol } from './assignor.js'
import { createCooperativeStickyAssignor, createStickyAssignor } from './sticky-assignor.js'

export type { GroupAssignment, MemberSubscription, PartitionAssignor, RebalanceProtocol } from './assignor.js'

export type AssignorName = 'range' | 'roundrobin' | 'sticky' | 'cooperative-sticky'

/** Java's MemberInfo order: instance ids first (sorted), then member ids (sorted). */
export function compareMembers(a: MemberSubscription, b: MemberSubscription): number {
  if (a.groupInstanceId !== null && b.groupInstanceId !== null)
    return compareStrings(a.groupInstanceId, b.groupInstanceId)
  if (a.groupInstanceId !== null) return -1
  if (b.groupInstanceId !== null) return 1
  return compareStrings(a.memberId, b.memberId)
}

/** Java's String.compareTo on the strings used here (UTF-16 code units), not locale order. */
function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

function emptyAssignment(members: readonly MemberSubscription[]): GroupAssignment {
  return new Map(members.map((m) => [m.memberId, []]))
}

export const rangeAssignor: PartitionAssignor = {
  name: 'range',
  assign(partitionsPerTopic, members) {
    const assignment = emptyAssignment(members)
    const topics = [...new Set(members.flatMap((m) => m.topics))].sort(compareStrings)
    for (const topic of topics) {
      const count = partitionsPerTopic.get(topic)
      if (count === undefined) continue
      const subscribers = members.filter((m) => m.topics.includes(topic)).sort(compareMembers)
      const perMember = Math.floor(count / subscribers.length)
      const withExtra = count % subscribers.length
      for (let i = 0; i < subscribers.length; i++) {
        const start = perMember * i + Math.min(i, withExtra)
        const length = perMember + (i < withExtra ? 1 : 0)
        const owned = assignment.get(subscribers[i].memberId)!
        for (let p = start; p < start + length; p++) owned.push({ topic, partition: p })
      }
    }
    return assignment
  },
}

export const roundRobinAssignor: PartitionAssignor = {
  name: 'roundrobin',
  assign(partitionsPerTopic, members) {
    const assignment = emptyAssignment(members)
    const sorted = [...members].sort(compareMembers)
    const topics = [...new Set(members.flatMap((m) => m.topics))].sort(compareStrings)
    let next = 0
    for (const topic of topics) {
      const count = partitionsPerTopic.get(topic) ?? 0
      for (let partition = 0; partition < count; partition++) {
        // Bounded: some member subscribes to `topic` (it came from a subscription).
        let skipped = 0
        while (!sorted[next % sorted.length].topics.includes(topic)) {
          next++
          if (++skipped > sorted.length) throw new Error(`no member subscribes to ${topic}`)
        }
        assignment.get(sorted[next % sorted.length].memberId)!.push({ topic, partition })
        next++
      }
    }
    return assignment
  },
}

/** Factories: the sticky assignors remember this member's last assignment, one per consumer. */
const BUILT_IN: ReadonlyMap<string, () => PartitionAssignor> = new Map([
  ['range', () => rangeAssignor],
  ['roundrobin', () => roundRobinAssignor],
  ['sticky', createStickyAssignor],
  ['cooperative-sticky', createCooperativeStickyAssignor],
])

/** partition.assignment.strategy: names of built-in assignors or custom ones, in preference order. */
export function resolveAssignors(
  strategy: readonly (AssignorName | PartitionAssignor)[] | undefined,
): PartitionAssignor[] {
  const list = strategy ?? ['range']
  if (list.length === 0) throw new InvalidArgumentError('partition.assignment.strategy is empty')
  const assignors = list.map((entry) => {
    if (typeof entry !== 'string') return entry
    const create = BUILT_IN.get(entry)
    if (!create)
      throw new InvalidArgumentError(
        `partition.assignment.strategy: unknown assignor '${entry}' (${[...BUILT_IN.keys()].join(', ')})`,
      )
    return create()
  })
  const names = assignors.map((a) => a.name)
  if (new Set(names).size !== names.length)
    throw new InvalidArgumentError(
      `partition.assignment.strategy names an assignor twice: ${names.join(', ')}`,
    )
  return assignors
}

/**
 * Java's ConsumerCoordinator: the highest protocol every configured assignor supports
 * (cooperative only when all of them are cooperative).
 */
export function rebalanceProtocolOf(assignors: readonly PartitionAssignor[]): RebalanceProtocol {
  const cooperative = assignors.every((a) => (a.rebalanceProtocols ?? ['eager']).includes('cooperative'))
  if (cooperative) return 'cooperative'
  const eager = assignors.every((a) => (a.rebalanceProtocols ?? ['eager']).includes('eager'))
  if (!eager)
    throw new InvalidArgumentError(
      `partition.assignment.strategy: ${assignors.map((a) => a.name).join(', ')} share no rebalance protocol`,
    )
  return 'eager'
}
