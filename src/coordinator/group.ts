import type { Offset, ProducerId } from '../common/types.js'
import type { StreamsGroup } from './streams/streams-group.js'

/**
 * A classic consumer group as the coordinator holds it in memory: members, generation,
 * selected protocol, committed offsets and the deadlines that drive rebalances. The state
 * machine (rebalance.ts, offsets.ts) changes it; nothing here does I/O or reads a clock.
 */

export type GroupStateName = 'Empty' | 'PreparingRebalance' | 'CompletingRebalance' | 'Stable' | 'Dead'

export interface GroupProtocol {
  readonly name: string
  readonly metadata: Buffer
}

export interface Member {
  memberId: string
  groupInstanceId: string | null
  clientId: string
  clientHost: string
  sessionTimeoutMs: number
  rebalanceTimeoutMs: number
  protocolType: string
  protocols: readonly GroupProtocol[]
  assignment: Buffer
  /** Waiter of a JoinGroup parked until the rebalance completes. */
  joinWaiter: number | null
  /** Waiter of a SyncGroup parked until the leader's assignment is stored. */
  syncWaiter: number | null
  /** The session ends here unless a heartbeat (or join/sync) comes first. */
  heartbeatDeadlineMs: number
}

export interface CommittedOffset {
  readonly offset: bigint
  readonly leaderEpoch: number
  readonly metadata: string
  readonly commitTimestampMs: number
  readonly expireTimestampMs: number | null
  /**
   * Where the commit's batch starts in __consumer_offsets (Kafka's appendedBatchOffset): of a
   * plain and a transactional commit of one partition, the later written wins, whatever
   * order they complete in. Undefined only before the append.
   */
  readonly recordOffset?: Offset
}

/** A TxnOffsetCommit's offset, invisible until its transaction's COMMIT marker. */
export interface PendingTransactionalOffset {
  readonly topic: string
  readonly partition: number
  readonly value: CommittedOffset
}

/** The initial rebalance delay of a new group (group.initial.rebalance.delay.ms, KIP-134). */
export interface InitialDelay {
  readonly stepMs: number
  /** The delay never extends past the rebalance timeout of the first member. */
  readonly limitMs: number
  newMemberAdded: boolean
}

/** Kafka's MemberState of a KIP-848 member (its int8 in ConsumerGroupCurrentMemberAssignment). */
export const MemberState = { UNREVOKED_PARTITIONS: 0, UNRELEASED_PARTITIONS: 1, STABLE: 2 } as const
export type MemberStateCode = (typeof MemberState)[keyof typeof MemberState]

/** topic id → sorted partitions. */
export type TopicAssignment = Map<string, number[]>

/** A member of a KIP-848 consumer group (ConsumerGroupHeartbeat). */
export interface ConsumerMember {
  readonly memberId: string
  instanceId: string | null
  rackId: string | null
  clientId: string
  clientHost: string
  subscribedTopicNames: string[]
  subscribedTopicRegex: string | null
  serverAssignor: string | null
  rebalanceTimeoutMs: number
  /** -2 after a static member's temporary leave (it keeps its assignment until its session ends). */
  memberEpoch: number
  previousMemberEpoch: number
  state: MemberStateCode
  assignedPartitions: TopicAssignment
  partitionsPendingRevocation: TopicAssignment
  /** The session ends here unless a heartbeat comes first (group.consumer.session.timeout.ms). */
  sessionDeadlineMs: number
  /** While revoking: fenced if the revocation is not acknowledged by then (its rebalance timeout). */
  revocationDeadlineMs: number | null
}

/** The KIP-848 part of a group whose type is 'consumer'. */
export interface ConsumerGroupState {
  groupEpoch: number
  assignmentEpoch: number
  /**
   * When the target assignment was last computed (Kafka's AssignmentTimestamp); 0 when never,
   * or since the group emptied: the next one is then not held by the assignment interval.
   */
  assignmentTimestampMs: number
  readonly members: Map<string, ConsumerMember>
  /** member id → target assignment (ConsumerGroupTargetAssignmentMember). */
  readonly targetAssignment: Map<string, TopicAssignment>
  /** group.instance.id → member id. */
  readonly staticMembers: Map<string, string>
  /**
   * The subscribed topics' ids and partition counts when the group epoch last moved; a
   * change (topic created, partitions added, regex matching more) bumps the epoch. Null after
   * a load: the first heartbeat adopts the current metadata without a bump.
   */
  subscriptionSignature: string | null
  /** The assignor that computed the current target assignment. */
  assignorName: string
}

export function newConsumerGroupState(): ConsumerGroupState {
  return {
    groupEpoch: 0,
    assignmentEpoch: 0,
    assignmentTimestampMs: 0,
    members: new Map(),
    targetAssignment: new Map(),
    staticMembers: new Map(),
    subscriptionSignature: null,
    assignorName: '',
  }
}

export interface Group {
  readonly groupId: string
  /**
   * 'classic' (JoinGroup/SyncGroup) or 'consumer' (KIP-848 ConsumerGroupHeartbeat). For a
   * consumer group the classic fields stay unused; `state` is Empty without members and
   * Stable with some, which is what the offset rules (expiry, deletion) ask of it.
   */
  type: 'classic' | 'consumer'
  consumer: ConsumerGroupState | null
  /**
   * The KIP-1071 part of a streams group (streams/streams-group-coordinator.ts), written as
   * StreamsGroup* records (streams/streams-group-records.ts); its classic fields stay unused
   * and `state` follows its members like a consumer group's.
   */
  streams?: StreamsGroup
  state: GroupStateName
  generationId: number
  protocolType: string | null
  protocolName: string | null
  leaderId: string | null
  readonly members: Map<string, Member>
  /** Members given an id by MEMBER_ID_REQUIRED that have not joined with it yet: id → deadline. */
  readonly pendingMembers: Map<string, number>
  /** group.instance.id → member id of static members. */
  readonly staticMembers: Map<string, string>
  /** topic → partition → committed offset. */
  readonly offsets: Map<string, Map<number, CommittedOffset>>
  /**
   * Commits appended but not yet committed, per "topic\0partition" (how many): expiry skips
   * these partitions and keeps the group, as Kafka's pendingOffsetCommits do.
   */
  readonly pendingOffsetCommits: Map<string, number>
  /**
   * Transactional commits waiting for their transaction to end: producer id →
   * "topic\0partition" → offset (Kafka's pendingTransactionalOffsetCommits). Those whose
   * batch is not yet appended have no recordOffset; a COMMIT marker skips them.
   */
  readonly pendingTransactionalOffsets: Map<ProducerId, Map<string, PendingTransactionalOffset>>
  /** When PreparingRebalance gives up waiting for members to rejoin. */
  rebalanceDeadlineMs: number | null
  initialDelay: InitialDelay | null
  /** When the group entered its current state (offsets of an Empty group expire from here). */
  currentStateTimestampMs: number
}

export function newGroup(groupId: string, nowMs: number): Group {
  return {
    groupId,
    type: 'classic',
    consumer: null,
    state: 'Empty',
    generationId: 0,
    protocolType: null,
    protocolName: null,
    leaderId: null,
    members: new Map(),
    pendingMembers: new Map(),
    staticMembers: new Map(),
    offsets: new Map(),
    pendingOffsetCommits: new Map(),
    pendingTransactionalOffsets: new Map(),
    rebalanceDeadlineMs: null,
    initialDelay: null,
    currentStateTimestampMs: nowMs,
  }
}

/** Limits from the broker config (group.* and offsets.* properties). */
export interface CoordinatorConfig {
  readonly groupMinSessionTimeoutMs: number
  readonly groupMaxSessionTimeoutMs: number
  readonly groupInitialRebalanceDelayMs: number
  readonly groupMaxSize: number
  readonly offsetMetadataMaxBytes: number
  readonly offsetsRetentionMs: number
}

export const DEFAULT_COORDINATOR_CONFIG: CoordinatorConfig = {
  groupMinSessionTimeoutMs: 6000,
  groupMaxSessionTimeoutMs: 1800000,
  groupInitialRebalanceDelayMs: 3000,
  groupMaxSize: 2147483647,
  offsetMetadataMaxBytes: 4096,
  offsetsRetentionMs: 7 * 24 * 3600 * 1000,
}

/** Java's String.hashCode over UTF-16 code units, as Kafka hashes group ids. */
export function javaStringHashCode(value: string): number {
  let hash = 0
  for (let i = 0; i < value.length; i++) hash = (Math.imul(hash, 31) + value.charCodeAt(i)) | 0
  return hash
}

/** The __consumer_offsets partition of a group: Kafka's Utils.abs(hashCode) % partitions. */
export function partitionForGroup(groupId: string, partitionCount: number): number {
  const hash = javaStringHashCode(groupId)
  const abs = hash === -2147483648 ? 0 : Math.abs(hash)
  return abs % partitionCount
}

export const CONSUMER_OFFSETS_TOPIC = '__consumer_offsets'
