/**
 * KIP-1263's assignment interval, shared by consumer, share and streams groups (Kafka 4.4's
 * GroupMetadataManager.canComputeNextTargetAssignment). A group computes a new target
 * assignment at most once per `*.assignment.interval.ms`: a change within the interval only
 * moves the group epoch, members keep reconciling towards the previous target, and the first
 * heartbeat after the interval computes the new one. There is no timer: a group whose members
 * all wait for their next heartbeat waits with them, as in Kafka.
 */

/** Kafka's `group.{consumer,share,streams}.assignment.interval.ms` default. */
export const DEFAULT_ASSIGNMENT_INTERVAL_MS = 1000

/**
 * Whether a new target may be computed at `nowMs`: never computed (or the group emptied
 * since: `lastAssignmentMs` 0), no interval, or the interval since the last one is over.
 */
export function assignmentIntervalOver(lastAssignmentMs: number, intervalMs: number, nowMs: number): boolean {
  return lastAssignmentMs === 0 || intervalMs === 0 || nowMs >= lastAssignmentMs + intervalMs
}
