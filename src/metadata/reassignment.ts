/**
 * Partition reassignment as pure state transitions (Kafka's KIP-455 model):
 * - start: replicas become target ++ (original -- target); the added ones start as followers
 *   and catch up like any replica;
 * - complete (controller, once every target replica is in the ISR): replicas become the
 *   target, removed brokers leave the ISR, and if the leader was removed the first target
 *   replica in the ISR leads (leader epoch bumped);
 * - cancel: back to the original replicas.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import type { BrokerId, PartitionState } from './cluster-image.js'

/** A partition's answer to AlterPartitionReassignments. */
export interface ReassignmentOutcome {
  readonly errorCode: number
  readonly errorMessage: string | null
}

/**
 * One partition of AlterPartitionReassignments, checked in Kafka's order
 * (ReplicationControlManager.changePartitionReassignment): null replicas cancel; otherwise
 * the list must be valid (INVALID_REPLICA_ASSIGNMENT), then, when the request (v1) forbids
 * changing the replication factor, as long as the partition's replication factor now (its
 * target's during a move) (INVALID_REPLICATION_FACTOR with Kafka's message).
 */
export function decideReassignment(
  state: PartitionState,
  replicas: readonly BrokerId[] | null,
  registered: ReadonlyMap<BrokerId, unknown>,
  allowReplicationFactorChange: boolean,
): { outcome: ReassignmentOutcome; next: PartitionState | null } {
  const fail = (errorCode: number, errorMessage: string) => ({
    outcome: { errorCode, errorMessage },
    next: null,
  })
  if (replicas === null) {
    const cancelled = cancelReassignment(state)
    if (cancelled) return { outcome: OK, next: cancelled }
    return fail(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, 'No reassignment is in progress')
  }
  const unregistered = replicas.find((id) => !registered.has(id))
  const problem =
    replicas.length === 0
      ? 'The replica list is empty'
      : new Set(replicas).size !== replicas.length
        ? 'The replica list has duplicates'
        : unregistered !== undefined
          ? `Broker ${unregistered} is not registered`
          : null
  if (problem) return fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
  const replicationFactor = targetReplicas(state).length
  if (!allowReplicationFactorChange && replicas.length !== replicationFactor)
    return fail(
      ErrorCode.INVALID_REPLICATION_FACTOR,
      `The replication factor is changed from ${replicationFactor} to ${replicas.length}`,
    )
  return { outcome: OK, next: startReassignment(state, [...replicas]) }
}

const OK: ReassignmentOutcome = { errorCode: ErrorCode.NONE, errorMessage: null }

export function isReassigning(state: PartitionState): boolean {
  return (state.addingReplicas?.length ?? 0) > 0 || (state.removingReplicas?.length ?? 0) > 0
}

/** The replicas before the reassignment began. */
export function originalReplicas(state: PartitionState): BrokerId[] {
  const adding = new Set(state.addingReplicas ?? [])
  return state.replicas.filter((id) => !adding.has(id))
}

/** The replicas the reassignment moves to. */
export function targetReplicas(state: PartitionState): BrokerId[] {
  const removing = new Set(state.removingReplicas ?? [])
  return state.replicas.filter((id) => !removing.has(id))
}

export function startReassignment(state: PartitionState, target: readonly BrokerId[]): PartitionState {
  const original = isReassigning(state) ? originalReplicas(state) : [...state.replicas]
  const adding = target.filter((id) => !original.includes(id))
  const removing = original.filter((id) => !target.includes(id))
  if (adding.length === 0 && removing.length === 0) {
    return { ...state, replicas: [...target], addingReplicas: [], removingReplicas: [] }
  }
  return {
    ...state,
    replicas: [...target, ...original.filter((id) => !target.includes(id))],
    addingReplicas: adding,
    removingReplicas: removing,
  }
}

export function cancelReassignment(state: PartitionState): PartitionState | null {
  if (!isReassigning(state)) return null
  const original = originalReplicas(state)
  const isr = state.isr.filter((id) => original.includes(id))
  return finish(state, original, isr)
}

/** Finishes a reassignment whose target replicas are all in the ISR; null while waiting. */
export function maybeCompleteReassignment(
  state: PartitionState,
  live: ReadonlySet<BrokerId>,
): PartitionState | null {
  if (!isReassigning(state)) return null
  const target = targetReplicas(state)
  if (!target.every((id) => state.isr.includes(id))) return null
  return finish(
    state,
    target,
    state.isr.filter((id) => target.includes(id)),
    live,
  )
}

function finish(
  state: PartitionState,
  replicas: BrokerId[],
  isr: BrokerId[],
  live?: ReadonlySet<BrokerId>,
): PartitionState | null {
  const done = { ...state, replicas, addingReplicas: [], removingReplicas: [] }
  if (state.leader !== -1 && replicas.includes(state.leader))
    return { ...done, isr: isr.length ? isr : [state.leader] }
  const leader = replicas.find((id) => isr.includes(id) && (live === undefined || live.has(id)))
  if (leader === undefined) return null // no eligible leader among them yet: keep waiting
  return { ...done, isr, leader, leaderEpoch: state.leaderEpoch + 1 }
}
