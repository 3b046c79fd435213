/**
 * The task assignment of a streams group: a balanced, sticky assignor in the spirit of
 * Kafka's StickyTaskAssignor (group.streams.assignors' default "sticky"), simpler and stated
 * as such:
 *  - every task (subtopology, partition) of the configured topology is active on exactly one
 *    member; members' active counts differ by at most one;
 *  - a member keeps the active tasks it has (its current assignment, else its previous
 *    target) as long as that keeps the balance; the rest go to the least loaded members,
 *    ties broken by member id;
 *  - with group.streams.num.standby.replicas = n, each task of a stateful subtopology (one
 *    with changelog topics) gets up to n standby copies on members of other processes than
 *    its active one's, least loaded first, previous standby owners first.
 * Kafka balances per process first and then per member and places warm-up tasks while a
 * standby catches up; tidelog balances per member and gives no warm-up tasks.
 */
import type { SubtopologyId } from './streams-topology.js'

/** subtopology id → partitions, sorted. */
export type TaskSet = Map<SubtopologyId, number[]>

export interface TasksTuple {
  readonly active: TaskSet
  readonly standby: TaskSet
  readonly warmup: TaskSet
}

export function emptyTasks(): TasksTuple {
  return { active: new Map(), standby: new Map(), warmup: new Map() }
}

export interface AssignorMember {
  readonly memberId: string
  readonly processId: string
  /** What it holds now (active and standby), preferred when balance allows. */
  readonly current: TasksTuple
}

export interface AssignorInput {
  readonly members: readonly AssignorMember[]
  /** Subtopology → task count. */
  readonly taskCounts: ReadonlyMap<SubtopologyId, number>
  /** Subtopologies with state (changelog topics): only their tasks get standbys. */
  readonly stateful: ReadonlySet<SubtopologyId>
  readonly numStandbyReplicas: number
}

function taskKey(subtopologyId: SubtopologyId, partition: number): string {
  return `${subtopologyId}\u0000${partition}`
}

export function hasTask(tasks: TaskSet, subtopologyId: SubtopologyId, partition: number): boolean {
  return tasks.get(subtopologyId)?.includes(partition) === true
}

export function addTask(tasks: TaskSet, subtopologyId: SubtopologyId, partition: number): void {
  const partitions = tasks.get(subtopologyId) ?? []
  if (partitions.includes(partition)) return
  partitions.push(partition)
  partitions.sort((a, b) => a - b)
  tasks.set(subtopologyId, partitions)
}

export function taskCount(tasks: TaskSet): number {
  let n = 0
  for (const partitions of tasks.values()) n += partitions.length
  return n
}

/** Every task, in a stable order (subtopology id, then partition). */
function allTasks(taskCounts: ReadonlyMap<SubtopologyId, number>): [SubtopologyId, number][] {
  const result: [SubtopologyId, number][] = []
  for (const id of [...taskCounts.keys()].sort())
    for (let p = 0; p < (taskCounts.get(id) ?? 0); p++) result.push([id, p])
  return result
}

/** Computes every member's target tasks (member id → tuple). */
export function assignTasks(input: AssignorInput): Map<string, TasksTuple> {
  const members = [...input.members].sort((a, b) =>
    a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0,
  )
  const result = new Map<string, TasksTuple>(members.map((m) => [m.memberId, emptyTasks()]))
  if (members.length === 0) return result
  const tasks = allTasks(input.taskCounts)
  const base = Math.floor(tasks.length / members.length)
  // How many members may hold one more than `base` (exact balance).
  let extra = tasks.length % members.length
  const load = new Map<string, number>(members.map((m) => [m.memberId, 0]))
  const owner = new Map<string, string>()
  // 1. Stickiness: members keep what they have, up to their share.
  for (const m of members) {
    for (const [id, partitions] of m.current.active) {
      for (const p of partitions) {
        if (!input.taskCounts.has(id) || p >= (input.taskCounts.get(id) ?? 0)) continue
        const key = taskKey(id, p)
        if (owner.has(key)) continue
        const held = load.get(m.memberId) ?? 0
        const cap = base + (held >= base && extra > 0 ? 1 : 0)
        if (held >= cap) continue
        if (held >= base) extra--
        owner.set(key, m.memberId)
        load.set(m.memberId, held + 1)
        addTask(result.get(m.memberId)?.active ?? new Map(), id, p)
      }
    }
  }
  // 2. The rest to the least loaded members.
  for (const [id, p] of tasks) {
    const key = taskKey(id, p)
    if (owner.has(key)) continue
    const target = members.reduce((best, m) =>
      (load.get(m.memberId) ?? 0) < (load.get(best.memberId) ?? 0) ? m : best,
    )
    owner.set(key, target.memberId)
    load.set(target.memberId, (load.get(target.memberId) ?? 0) + 1)
    addTask(result.get(target.memberId)?.active ?? new Map(), id, p)
  }
  if (input.numStandbyReplicas > 0) assignStandbys(input, members, tasks, owner, result)
  return result
}

function assignStandbys(
  input: AssignorInput,
  members: readonly AssignorMember[],
  tasks: readonly [SubtopologyId, number][],
  owner: ReadonlyMap<string, string>,
  result: Map<string, TasksTuple>,
): void {
  const processOf = new Map(members.map((m) => [m.memberId, m.processId]))
  const load = new Map<string, number>(members.map((m) => [m.memberId, 0]))
  for (const [id, p] of tasks) {
    if (!input.stateful.has(id)) continue
    const activeProcess = processOf.get(owner.get(taskKey(id, p)) ?? '')
    const used = new Set<string>(activeProcess === undefined ? [] : [activeProcess])
    for (let copy = 0; copy < input.numStandbyReplicas; copy++) {
      const candidates = members.filter((m) => !used.has(m.processId))
      if (candidates.length === 0) break
      candidates.sort(
        (a, b) =>
          Number(hasTask(b.current.standby, id, p)) - Number(hasTask(a.current.standby, id, p)) ||
          (load.get(a.memberId) ?? 0) - (load.get(b.memberId) ?? 0),
      )
      const chosen = candidates[0]
      if (!chosen) break
      used.add(chosen.processId)
      load.set(chosen.memberId, (load.get(chosen.memberId) ?? 0) + 1)
      addTask(result.get(chosen.memberId)?.standby ?? new Map(), id, p)
    }
  }
}
