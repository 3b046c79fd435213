/**
 * How a streams group member moves from its current tasks to its target (Kafka's streams
 * CurrentAssignmentBuilder), one heartbeat at a time:
 *  - STABLE at the target epoch: nothing to do;
 *  - a member that must give up active tasks keeps only the ones it may keep and stays at its
 *    epoch (UNREVOKED_TASKS) until a heartbeat reports it no longer owns the revoked ones;
 *  - then it takes the target epoch and the target's active tasks no other member still holds
 *    (assigned or pending revocation); while some are held elsewhere it waits
 *    (UNRELEASED_TASKS) and takes them on a later heartbeat once released.
 * Standby and warm-up tasks are given and taken without a revocation round, as in Kafka
 * (they hold no output a second owner could duplicate).
 */
import { addTask, emptyTasks, hasTask, type TaskSet, type TasksTuple } from './streams-assignor.js'

export type StreamsMemberState = 'STABLE' | 'UNREVOKED_TASKS' | 'UNRELEASED_TASKS'

/** Kafka's MemberState codes (StreamsGroupCurrentMemberAssignment / describe). */
export const STREAMS_MEMBER_STATE_CODE: Readonly<Record<StreamsMemberState, number>> = {
  UNREVOKED_TASKS: 0,
  UNRELEASED_TASKS: 1,
  STABLE: 2,
}

/** The tasks a member reports it owns (null fields: unchanged since its last heartbeat). */
export type OwnedTasks = TasksTuple

export interface ReconcilingMember {
  readonly memberEpoch: number
  readonly state: StreamsMemberState
  readonly assigned: TasksTuple
  readonly activePendingRevocation: TaskSet
}

export interface NextAssignment {
  readonly memberEpoch: number
  readonly state: StreamsMemberState
  readonly assigned: TasksTuple
  readonly activePendingRevocation: TaskSet
}

function copy(tasks: TaskSet): TaskSet {
  return new Map([...tasks].map(([id, partitions]) => [id, [...partitions]]))
}

function key(tasks: TaskSet): string {
  return [...tasks]
    .filter(([, partitions]) => partitions.length > 0)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([id, partitions]) => `${id}:${[...partitions].sort((a, b) => a - b).join(',')}`)
    .join(';')
}

export function sameTaskSet(a: TaskSet, b: TaskSet): boolean {
  return key(a) === key(b)
}

export function sameTasks(a: TasksTuple, b: TasksTuple): boolean {
  return (
    sameTaskSet(a.active, b.active) && sameTaskSet(a.standby, b.standby) && sameTaskSet(a.warmup, b.warmup)
  )
}

/** Kafka's check of a lagging epoch: the member owns what the coordinator thinks it has. */
export function ownedTasksMatch(owned: OwnedTasks | null, assigned: TasksTuple): boolean {
  return owned !== null && sameTaskSet(owned.active, assigned.active)
}

function stillOwnsAny(owned: TaskSet, pending: TaskSet): boolean {
  for (const [id, partitions] of pending) for (const p of partitions) if (hasTask(owned, id, p)) return true
  return false
}

/**
 * The member's next state given its target (at `targetEpoch`), what it reported owning and
 * whether an active task is still held by another member.
 */
export function computeNextAssignment(
  member: ReconcilingMember,
  targetEpoch: number,
  target: TasksTuple,
  owned: OwnedTasks | null,
  heldElsewhere: (subtopologyId: string, partition: number) => boolean,
): NextAssignment {
  if (member.state === 'UNREVOKED_TASKS') {
    // Revocation is complete only once the member says it no longer owns those tasks.
    if (owned === null || stillOwnsAny(owned.active, member.activePendingRevocation)) return member
  } else if (member.state === 'STABLE' && member.memberEpoch === targetEpoch) {
    return member
  }
  const kept: TaskSet = new Map()
  const revoked: TaskSet = new Map()
  for (const [id, partitions] of member.assigned.active)
    for (const p of partitions) addTask(hasTask(target.active, id, p) ? kept : revoked, id, p)
  if (revoked.size > 0)
    return {
      memberEpoch: member.memberEpoch,
      state: 'UNREVOKED_TASKS',
      assigned: { ...emptyTasks(), active: kept },
      activePendingRevocation: revoked,
    }
  const active = copy(kept)
  let unreleased = false
  for (const [id, partitions] of target.active) {
    for (const p of partitions) {
      if (hasTask(active, id, p)) continue
      if (heldElsewhere(id, p)) unreleased = true
      else addTask(active, id, p)
    }
  }
  // A standby may not sit where its task is active (it is, until released elsewhere).
  const standby: TaskSet = new Map()
  for (const [id, partitions] of target.standby)
    for (const p of partitions) if (!hasTask(active, id, p)) addTask(standby, id, p)
  return {
    memberEpoch: targetEpoch,
    state: unreleased ? 'UNRELEASED_TASKS' : 'STABLE',
    assigned: { active, standby, warmup: copy(target.warmup) },
    activePendingRevocation: new Map(),
  }
}
