/**
 * What a client-side assignor is (Java's ConsumerPartitionAssignor): the group leader hands
 * it every member's subscription and the partition counts it knows, and it answers each
 * member's partitions. Its own file so that the assignors and their registry
 * (assignors.ts) can share it without importing each other.
 */
import type { TopicPartition } from '../leader-requests.js'

export interface MemberSubscription {
  readonly memberId: string
  readonly groupInstanceId: string | null
  readonly topics: readonly string[]
  /** Consumer protocol v1+: the partitions the member owns as it joins (absent: none). */
  readonly ownedPartitions?: readonly TopicPartition[]
  /** Consumer protocol v2+: the member's generation as it joins (-1 or absent: unknown). */
  readonly generationId?: number
  /** The assignor's own bytes from the member's subscription. */
  readonly userData?: Buffer | null
}

/**
 * Java's RebalanceProtocol: eager members give up every partition before they rejoin;
 * cooperative ones (KIP-429) keep theirs and give up only those that move.
 */
export type RebalanceProtocol = 'eager' | 'cooperative'

/** memberId → its partitions (every member present, maybe with none). */
export type GroupAssignment = Map<string, TopicPartition[]>

export interface PartitionAssignor {
  /** The protocol name offered in JoinGroup ('range', 'roundrobin'). */
  readonly name: string
  /** `partitionsPerTopic`: partition count of each topic known to the leader (absent: skipped). */
  assign(
    partitionsPerTopic: ReadonlyMap<string, number>,
    members: readonly MemberSubscription[],
  ): GroupAssignment
  /** The protocols it supports (absent: eager only). */
  readonly rebalanceProtocols?: readonly RebalanceProtocol[]
  /** Bytes for the member's subscription (Java's subscriptionUserData). */
  subscriptionUserData?(topics: readonly string[]): Buffer | null
  /** The member's assignment of a new generation (Java's onAssignment). */
  onAssignment?(partitions: readonly TopicPartition[], generationId: number): void
}
