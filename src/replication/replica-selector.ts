/**
 * KIP-392: which replica a consumer should fetch from. Kafka's RackAwareReplicaSelector,
 * the one selector Kafka ships: a consumer whose client.rack names a rack is sent to a
 * replica in that rack (the leader when it is there), the most caught up one first;
 * otherwise it stays on the leader.
 */
import type { BrokerId, Offset } from '../common/types.js'
/** The value of replica.selector.class that turns follower fetching on. */
export const RACK_AWARE_REPLICA_SELECTOR = 'org.apache.kafka.common.replica.RackAwareReplicaSelector'

export interface ReplicaView {
  readonly brokerId: BrokerId
  readonly rack: string | null
  readonly logEndOffset: Offset
  readonly timeSinceLastCaughtUpMs: number
}

/**
 * The replica for a consumer in `clientRack` among `candidates` (the leader among them);
 * ties go to the larger log end, then the most recently caught up (Kafka's ReplicaView
 * comparator).
 */
export function selectRackAware(
  clientRack: string,
  leader: ReplicaView,
  candidates: readonly ReplicaView[],
): ReplicaView {
  if (clientRack === '') return leader
  const sameRack = candidates.filter((replica) => replica.rack === clientRack)
  if (sameRack.length === 0 || sameRack.some((replica) => replica.brokerId === leader.brokerId)) return leader
  return sameRack.reduce((best, replica) =>
    replica.logEndOffset > best.logEndOffset ||
    (replica.logEndOffset === best.logEndOffset &&
      replica.timeSinceLastCaughtUpMs < best.timeSinceLastCaughtUpMs)
      ? replica
      : best,
  )
}
