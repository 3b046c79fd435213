/**
 * The task assignment of a streams group: Kafka 4.4's StickyTaskAssignor (the default and
 * only one of `group.streams.assignors`, "sticky"), written anew for tidelog:
 *  - load is counted per process (a Streams instance: its members are its threads): a
 *    process's load is its tasks over its members, and a member's quota is the tasks left
 *    over the members still under their quota, rounded up;
 *  - active tasks, in (partition, subtopology) order, go first back to the member that had
 *    them active, then to a member holding state for them (a standby, or changelog offsets it
 *    reported in the heartbeat's TaskOffsets: previous standbys first, then the highest
 *    offset sum), each while it is under its active quota; the rest, in (subtopology,
 *    partition) order, to the least loaded member of the least loaded process;
 *  - with `num.standby.replicas` = n, each task of a stateful subtopology gets up to n standby
 *    copies, never on a process that has the task: first on its previous active member, then
 *    on the members holding state for it (as above) while under the total quota, then on the
 *    least loaded processes.
 * This is all the lag awareness Kafka 4.4 has: it places no warm-up tasks (its
 * AssignmentRefiner returns the target as it is, so `num.warmup.replicas` and
 * `acceptable.recovery.lag` change nothing) and the assignor never reads the end offsets.
 * Where Kafka's hash maps and priority queues leave a tie to chance, tidelog breaks it by
 * process, then member id.
 */
import { assert } from '../../common/assert.js'
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
  /** What it holds now (active and standby). */
  readonly current: TasksTuple
  /** The changelog offset sums it reported per task (the heartbeat's TaskOffsets). */
  readonly taskOffsets: ReadonlyMap<SubtopologyId, ReadonlyMap<number, bigint>>
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

type Task = readonly [SubtopologyId, number]

const compareIds = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)
const byPartitionThenSubtopology = (a: Task, b: Task): number => a[1] - b[1] || compareIds(a[0], b[0])
const bySubtopologyThenPartition = (a: Task, b: Task): number => compareIds(a[0], b[0]) || a[1] - b[1]

/** One Streams instance: its members, their task counts, and every task it holds. */
class ProcessTasks {
  readonly memberTaskCounts = new Map<string, number>()
  readonly tasks = new Set<string>()
  private taskTotal = 0

  constructor(readonly processId: string) {}

  get load(): number {
    return this.taskTotal / this.memberTaskCounts.size
  }

  has(task: Task): boolean {
    return this.tasks.has(taskKey(task[0], task[1]))
  }

  /** Adds the task to the member; its new task count. */
  add(memberId: string, task: Task): number {
    const count = (this.memberTaskCounts.get(memberId) ?? 0) + 1
    assert(this.memberTaskCounts.has(memberId), `member ${memberId} is not of process ${this.processId}`)
    this.memberTaskCounts.set(memberId, count)
    this.tasks.add(taskKey(task[0], task[1]))
    this.taskTotal++
    return count
  }

  leastLoadedMember(): string {
    let best: string | null = null
    for (const [memberId, count] of this.memberTaskCounts) {
      const bestCount = best === null ? Number.POSITIVE_INFINITY : (this.memberTaskCounts.get(best) ?? 0)
      if (count < bestCount || (count === bestCount && best !== null && memberId < best)) best = memberId
    }
    assert(best !== null, `process ${this.processId} has no member`)
    return best
  }
}

/** The per-member quota (Kafka's tasksPerMember), shrinking as members reach it. */
class Quota {
  private perMember: number

  constructor(
    private tasksLeft: number,
    private membersLeft: number,
  ) {
    this.perMember = Quota.share(tasksLeft, membersLeft)
  }

  static share(tasks: number, members: number): number {
    return members === 0 ? 0 : Math.ceil(tasks / members)
  }

  allows(count: number): boolean {
    return count < this.perMember
  }

  /** A member now holds `count` tasks: at the quota, it leaves the pool. */
  onCount(count: number): void {
    if (count !== this.perMember) return
    this.membersLeft--
    this.tasksLeft -= count
    this.perMember = Quota.share(this.tasksLeft, this.membersLeft)
  }
}

interface AssignmentState {
  readonly processes: Map<string, ProcessTasks>
  readonly processOf: Map<string, string>
  readonly previousActive: Map<string, string>
  /** Task → members holding state for it, best first. */
  readonly stateHolders: Map<string, string[]>
  readonly activeQuota: Quota
  readonly totalQuota: Quota
  readonly result: Map<string, TasksTuple>
}

function offsetOf(m: AssignorMember, task: Task): bigint {
  return m.taskOffsets.get(task[0])?.get(task[1]) ?? 0n
}

/** Kafka's standby candidates: previous standbys first, then by reported offset sum, highest first. */
function rankStateHolders(members: readonly AssignorMember[]): Map<string, string[]> {
  const candidates = new Map<string, { memberId: string; wasStandby: boolean; offset: bigint }[]>()
  const push = (task: Task, memberId: string, wasStandby: boolean, offset: bigint) => {
    const key = taskKey(task[0], task[1])
    const list = candidates.get(key) ?? []
    list.push({ memberId, wasStandby, offset })
    candidates.set(key, list)
  }
  for (const m of members) {
    for (const [id, partitions] of m.current.standby)
      for (const p of partitions) push([id, p], m.memberId, true, offsetOf(m, [id, p]))
    for (const [id, offsets] of m.taskOffsets)
      for (const [p, offset] of offsets)
        if (!hasTask(m.current.standby, id, p)) push([id, p], m.memberId, false, offset)
  }
  const ranked = new Map<string, string[]>()
  for (const [key, list] of candidates) {
    list.sort(
      (a, b) =>
        Number(b.wasStandby) - Number(a.wasStandby) ||
        (a.offset > b.offset ? -1 : a.offset < b.offset ? 1 : 0),
    )
    ranked.set(
      key,
      list.map((c) => c.memberId),
    )
  }
  return ranked
}

function memberCount(state: AssignmentState, memberId: string): number {
  const process = state.processes.get(state.processOf.get(memberId) ?? '')
  return process?.memberTaskCounts.get(memberId) ?? 0
}

/**
 * Kafka's findPrevMemberWithLeastLoad: the first candidate, replaced only by one lower in
 * both its process's load and its own count; for a standby, not on a process with the task.
 */
function leastLoadedHolder(
  state: AssignmentState,
  holders: readonly string[] | undefined,
  standbyOf: Task | null,
): string | null {
  let chosen: string | null = null
  let chosenProcessLoad = Number.POSITIVE_INFINITY
  let chosenCount = Number.POSITIVE_INFINITY
  for (const memberId of holders ?? []) {
    const process = state.processes.get(state.processOf.get(memberId) ?? '')
    if (!process || (standbyOf !== null && process.has(standbyOf))) continue
    const count = process.memberTaskCounts.get(memberId) ?? 0
    if (chosen === null || (process.load < chosenProcessLoad && count < chosenCount)) {
      chosen = memberId
      chosenProcessLoad = process.load
      chosenCount = count
    }
  }
  return chosen
}

/** Processes by load, least first (ties: more members first, then process id). */
function processesByLoad(state: AssignmentState): ProcessTasks[] {
  return [...state.processes.values()].sort(
    (a, b) =>
      a.load - b.load ||
      b.memberTaskCounts.size - a.memberTaskCounts.size ||
      compareIds(a.processId, b.processId),
  )
}

function give(state: AssignmentState, memberId: string, task: Task, active: boolean): number {
  const process = state.processes.get(state.processOf.get(memberId) ?? '')
  assert(process !== undefined, `member ${memberId} has no process`)
  const count = process.add(memberId, task)
  const tuple = state.result.get(memberId)
  assert(tuple !== undefined, `member ${memberId} has no result`)
  addTask(active ? tuple.active : tuple.standby, task[0], task[1])
  if (active) state.activeQuota.onCount(count)
  state.totalQuota.onCount(count)
  return count
}

function assignActive(state: AssignmentState, tasks: Task[]): void {
  let left = [...tasks].sort(byPartitionThenSubtopology)
  // 1. Back to the member that had it active, within the quota.
  left = left.filter((task) => {
    const previous = state.previousActive.get(taskKey(task[0], task[1]))
    if (previous === undefined || !state.activeQuota.allows(memberCount(state, previous))) return true
    give(state, previous, task, true)
    return false
  })
  // 2. To the least loaded member holding its state, within the quota.
  left = left.filter((task) => {
    const holder = leastLoadedHolder(state, state.stateHolders.get(taskKey(task[0], task[1])), null)
    if (holder === null || !state.activeQuota.allows(memberCount(state, holder))) return true
    give(state, holder, task, true)
    return false
  })
  // 3. The rest to the least loaded member of the least loaded process.
  for (const task of left.sort(bySubtopologyThenPartition)) {
    const process = processesByLoad(state)[0]
    assert(process !== undefined, 'no process to assign an active task to')
    give(state, process.leastLoadedMember(), task, true)
  }
}

function assignStandby(state: AssignmentState, tasks: Task[], replicas: number): void {
  const toLeastLoaded: { task: Task; remaining: number }[] = []
  for (const task of [...tasks].sort(byPartitionThenSubtopology).reverse()) {
    const key = taskKey(task[0], task[1])
    let placed = 0
    while (placed < replicas) {
      const previous = state.previousActive.get(key)
      const previousProcess = state.processes.get(state.processOf.get(previous ?? '') ?? '')
      if (
        previous !== undefined &&
        previousProcess !== undefined &&
        !previousProcess.has(task) &&
        state.totalQuota.allows(memberCount(state, previous))
      ) {
        give(state, previous, task, false)
        placed++
        continue
      }
      const holder = leastLoadedHolder(state, state.stateHolders.get(key), task)
      if (holder === null || !state.totalQuota.allows(memberCount(state, holder))) break
      give(state, holder, task, false)
      placed++
    }
    toLeastLoaded.push({ task, remaining: replicas - placed })
  }
  toLeastLoaded.sort((a, b) => bySubtopologyThenPartition(b.task, a.task))
  for (const { task, remaining } of toLeastLoaded) {
    for (let copy = 0; copy < remaining; copy++) {
      // Kafka warns and leaves the copy out when every process already has the task.
      const process = processesByLoad(state).find((candidate) => !candidate.has(task))
      if (!process) break
      give(state, process.leastLoadedMember(), task, false)
    }
  }
}

/** Computes every member's target tasks (member id → tuple; warm-up tasks always empty). */
export function assignTasks(input: AssignorInput): Map<string, TasksTuple> {
  const members = [...input.members].sort((a, b) => compareIds(a.memberId, b.memberId))
  const result = new Map<string, TasksTuple>(members.map((m) => [m.memberId, emptyTasks()]))
  if (members.length === 0) return result
  const active: Task[] = []
  const stateful: Task[] = []
  for (const id of [...input.taskCounts.keys()].sort(compareIds)) {
    for (let p = 0; p < (input.taskCounts.get(id) ?? 0); p++) {
      active.push([id, p])
      if (input.stateful.has(id)) stateful.push([id, p])
    }
  }
  const processes = new Map<string, ProcessTasks>()
  const processOf = new Map<string, string>()
  const previousActive = new Map<string, string>()
  for (const m of members) {
    const process = processes.get(m.processId) ?? new ProcessTasks(m.processId)
    process.memberTaskCounts.set(m.memberId, 0)
    processes.set(m.processId, process)
    processOf.set(m.memberId, m.processId)
    for (const [id, partitions] of m.current.active)
      for (const p of partitions) previousActive.set(taskKey(id, p), m.memberId)
  }
  const standbyTotal = input.numStandbyReplicas > 0 ? stateful.length * input.numStandbyReplicas : 0
  const state: AssignmentState = {
    processes,
    processOf,
    previousActive,
    stateHolders: rankStateHolders(members),
    activeQuota: new Quota(active.length, members.length),
    totalQuota: new Quota(active.length + standbyTotal, members.length),
    result,
  }
  assignActive(state, active)
  if (input.numStandbyReplicas > 0) assignStandby(state, stateful, input.numStandbyReplicas)
  return result
}
