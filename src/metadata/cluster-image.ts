/**
 * The cluster metadata every broker follows: registered brokers, topics with their ids,
 * configs and per-partition state (replicas, leader, leader epoch, ISR). The controller is
 * the only writer; brokers read an immutable snapshot and react to changes.
 */

import { assert } from '../common/assert.js'
import { type BrokerId, NO_BROKER_ID, type Offset, type PartitionEpoch } from '../common/types.js'

export type { BrokerId }

export interface BrokerRegistration {
  readonly nodeId: BrokerId
  /** The first advertised listener's address (what clients got before named listeners). */
  readonly host: string
  readonly port: number
  readonly rack: string | null
  /**
   * The broker process that registered (a random uuid per process start, KRaft's
   * incarnation id): a new one replaces its predecessor's registration at once.
   * Absent in registrations built by hand.
   */
  readonly incarnationId?: string
  /**
   * Grows with every registration of this node id (the store revision that wrote it, as
   * Kafka's broker epoch is the offset of its registration record): ISR changes, ISR
   * members and replica fetches carrying an older one come from a fenced incarnation.
   * Set by the metadata when it reads the registration; absent in images built by hand.
   */
  readonly brokerEpoch?: number
  /**
   * Every advertised listener, by name (Kafka's RegisterBrokerRecord endpoints). Absent in
   * registrations written before named listeners: then host/port is the only listener.
   */
  readonly endpoints?: readonly RegisteredEndpoint[]
  /**
   * Where this broker's schema registry answers (its own listener, or /schema-registry/ of
   * its HTTP listener): other brokers forward registry writes there when it is the writer.
   * Absent: it serves none.
   */
  readonly schemaRegistryUrl?: string
}

export interface RegisteredEndpoint {
  readonly listener: string
  readonly securityProtocol: string
  readonly host: string
  readonly port: number
}

/**
 * The address of `broker` on `listener`, as Kafka answers a client on that listener; null
 * when the broker does not advertise it (Kafka leaves such a broker out of Metadata).
 */
export function endpointFor(
  broker: BrokerRegistration,
  listener: string,
): { host: string; port: number } | null {
  if (broker.endpoints === undefined) return { host: broker.host, port: broker.port }
  return broker.endpoints.find((e) => e.listener === listener) ?? null
}

/** The broker epoch of a registered broker: undefined when it is not registered, -1 when unknown. */
export function brokerEpochOf(image: ClusterImage, brokerId: BrokerId): number | undefined {
  const registration = image.brokers.get(brokerId)
  return registration === undefined ? undefined : (registration.brokerEpoch ?? -1)
}

/** A replica's latest leader epoch and log end offset, as unclean recovery compares them. */
export interface LogEnd {
  readonly leaderEpoch: number
  readonly endOffset: Offset
}

export interface PartitionState {
  readonly partition: number
  /** Assignment order; the first replica is the preferred leader. */
  readonly replicas: readonly BrokerId[]
  readonly isr: readonly BrokerId[]
  /** -1 while the partition has no leader (offline). */
  readonly leader: BrokerId
  /** A plain number until metadata adopts common/types.ts's LeaderEpoch. */
  readonly leaderEpoch: number
  /** Bumped on every change; compare-and-set guard for ISR and leader updates. */
  readonly partitionEpoch: PartitionEpoch
  /**
   * KIP-966 eligible leader replicas: replicas that left the ISR while it was below
   * min.insync.replicas. The high watermark does not advance while the ISR is below min ISR,
   * so each holds every committed record and may be elected cleanly when no ISR member is
   * live. Cleared once the ISR is back at min ISR. Absent: empty.
   */
  readonly elr?: readonly BrokerId[]
  /**
   * ELR members removed because they registered again after an unclean shutdown (they may
   * have lost unflushed records): what an operator recovering the partition looks at.
   * Cleared with the ELR. Absent: empty.
   */
  readonly lastKnownElr?: readonly BrokerId[]
  /**
   * What each ISR or ELR member that registered after an unclean shutdown still had: its
   * latest leader epoch and log end offset, keyed by broker id. When the last ISR member
   * also comes back uncleanly, the member with the longest log leads instead of it (KIP-966's
   * unclean recovery): it has the records the others lost. Cleared with the ELR.
   */
  readonly recoveryLogEnds?: Readonly<Record<string, LogEnd>>
  /** During a reassignment: replicas being added (in `replicas` already, catching up). */
  readonly addingReplicas?: readonly BrokerId[]
  /** During a reassignment: replicas to remove once every added one is in the ISR. */
  readonly removingReplicas?: readonly BrokerId[]
}

export interface TopicImage {
  readonly name: string
  /** Kafka's Uuid in base64url form. */
  readonly topicId: string
  readonly partitions: readonly PartitionState[]
  /** Topic-level overrides only, by Kafka property name. */
  readonly configs: Readonly<Record<string, string>>
}

/**
 * Grows with every change of the finalized levels (the store revision that wrote them, as
 * Kafka's is the offset of the metadata image): a client keeps the newest it has seen.
 * int64 on the wire.
 */
export type FinalizedFeaturesEpoch = number & { readonly __brand: 'FinalizedFeaturesEpoch' }

/** The finalized levels as the metadata store holds them (ClusterImage.finalizedFeatures). */
export interface FinalizedFeatures {
  readonly epoch: FinalizedFeaturesEpoch
  /** Level by feature name; a feature not listed is at level 0 (disabled). */
  readonly levels: ReadonlyMap<string, number>
}

export interface ClusterImage {
  readonly clusterId: string
  readonly controllerId: BrokerId
  readonly brokers: ReadonlyMap<BrokerId, BrokerRegistration>
  readonly topics: ReadonlyMap<string, TopicImage>
  /**
   * Dynamic broker configs (AlterConfigs/IncrementalAlterConfigs on BROKER resources), by
   * Kafka property name: keyed by broker id as a string, or '' for the cluster-wide default.
   * Absent in images built before dynamic configs existed: treat as empty.
   */
  readonly brokerConfigs?: ReadonlyMap<string, Readonly<Record<string, string>>>
  /**
   * Client metrics subscriptions (KIP-714's CLIENT_METRICS config resources), by name: the
   * `metrics`, `interval.ms` and `match` a subscription sets. Absent: none.
   */
  readonly clientMetricsConfigs?: ReadonlyMap<string, Readonly<Record<string, string>>>
  /** Dynamic group configs (ConfigResource type GROUP), by group id. Absent: none. */
  readonly groupConfigs?: ReadonlyMap<string, Readonly<Record<string, string>>>
  /**
   * What each broker serves as leader: per broker id, the leader epoch of every partition
   * it has applied leadership of (log created, role taken), by topic id and range of
   * partitions (read it with servedLeaderEpoch). Written by the leaders themselves, one
   * store key per range (metadata/leadership-record.ts). Absent in images built by hand:
   * every named leader then counts as serving.
   */
  readonly servedLeaderEpochs?: ReadonlyMap<BrokerId, ServedRecord>
  /**
   * The finalized feature levels UpdateFeatures last wrote. Absent before any change: the
   * bootstrap levels of features.ts apply (read them through finalizedFeaturesOf).
   */
  readonly finalizedFeatures?: FinalizedFeatures
}

/**
 * The leader epoch a broker records in `servedLeaderEpochs` for a partition it was assigned
 * but could not create, its log dir having failed (EMFILE, ENOSPC, EIO): the partition
 * answers KAFKA_STORAGE_ERROR rather than waiting for a leader that will never serve it.
 */
export const STORAGE_ERROR_LEADER_EPOCH = -1

/**
 * Partitions per range of a served record: each range is one store key, rewritten whole when
 * any of its partitions changes. The controller writes a failover in transactions of up to
 * 128 partition states (etcd's max-txn-ops), a few hundred consecutive partitions of a
 * topic; ranges of 100 make each image rewrite about what it changed plus a range at each
 * end (at 3,000 partitions a survivor wrote 1.6 times its final record over a failover;
 * ranges of 1,000 wrote 7 times), a key stays under ~2 KB (128 fit in one request), and a
 * topic of up to 100 partitions is one key per leader.
 */
export const SERVED_RANGE_PARTITIONS = 100

/** One range of a served record: partition index to leader epoch. */
export type ServedRange = ReadonlyMap<number, number>

/** One broker's served record: by topic id, by range index (servedRangeIndex), its ranges. */
export type ServedRecord = ReadonlyMap<string, ReadonlyMap<number, ServedRange>>

export function servedRangeIndex(partition: number): number {
  return Math.floor(partition / SERVED_RANGE_PARTITIONS)
}

/** The range of `leader`'s served record holding `partition` of `topicId`, if any. */
export function servedRangeOf(
  image: ClusterImage,
  leader: BrokerId,
  topicId: string,
  partition: number,
): ServedRange | undefined {
  return image.servedLeaderEpochs?.get(leader)?.get(topicId)?.get(servedRangeIndex(partition))
}

/** A served record holding `entries` (topic id, partition, leader epoch). */
export function servedRecordFrom(
  entries: Iterable<readonly [topicId: string, partition: number, leaderEpoch: number]>,
): ServedRecord {
  const record = new Map<string, Map<number, Map<number, number>>>()
  for (const [topicId, partition, leaderEpoch] of entries) {
    let ranges = record.get(topicId)
    if (ranges === undefined) record.set(topicId, (ranges = new Map()))
    const index = servedRangeIndex(partition)
    let range = ranges.get(index)
    if (range === undefined) ranges.set(index, (range = new Map()))
    range.set(partition, leaderEpoch)
  }
  return record
}

/** Whether the partition's leader recorded that it cannot host the partition (STORAGE_ERROR_LEADER_EPOCH). */
export function leaderHasStorageError(
  image: ClusterImage,
  topic: TopicImage,
  state: PartitionState,
): boolean {
  if (state.leader === NO_LEADER || image.servedLeaderEpochs === undefined) return false
  return (
    servedRangeOf(image, state.leader, topic.topicId, state.partition)?.get(state.partition) ===
    STORAGE_ERROR_LEADER_EPOCH
  )
}

/**
 * Whether the partition's leader serves it in its current leader epoch: a partition whose
 * state names a leader that has not applied it yet would answer UNKNOWN_TOPIC_OR_PARTITION
 * or NOT_LEADER_OR_FOLLOWER.
 */
export function leaderServes(image: ClusterImage, topic: TopicImage, state: PartitionState): boolean {
  if (state.leader === NO_LEADER) return false
  if (image.servedLeaderEpochs === undefined) return true
  return (
    servedRangeOf(image, state.leader, topic.topicId, state.partition)?.get(state.partition) ===
    state.leaderEpoch
  )
}

/** The key of the cluster-wide default in `ClusterImage.brokerConfigs`. */
export const CLUSTER_DEFAULT_BROKER_CONFIG = ''

/** Dynamic overrides for one broker id ('' for the cluster default); empty when none. */
export function dynamicBrokerConfigs(image: ClusterImage, key: string): Readonly<Record<string, string>> {
  return image.brokerConfigs?.get(key) ?? {}
}

/** -1: the partition has no leader (offline). */
export const NO_LEADER = NO_BROKER_ID

export function checkPartitionState(topic: string, state: PartitionState): void {
  assert(state.replicas.length > 0, `${topic}-${state.partition}: no replicas`)
  assert(
    new Set(state.replicas).size === state.replicas.length,
    `${topic}-${state.partition}: duplicate replicas`,
  )
  for (const id of state.isr)
    assert(state.replicas.includes(id), `${topic}-${state.partition}: ISR member ${id} not a replica`)
  assert(
    state.leader === NO_LEADER || state.isr.includes(state.leader) || state.isr.length === 0,
    `${topic}-${state.partition}: leader ${state.leader} outside ISR ${state.isr.join(',')}`,
  )
  assert(state.leaderEpoch >= 0, `${topic}-${state.partition}: negative leader epoch`)
  for (const id of state.elr ?? []) {
    assert(state.replicas.includes(id), `${topic}-${state.partition}: ELR member ${id} not a replica`)
    assert(!state.isr.includes(id), `${topic}-${state.partition}: ELR member ${id} also in the ISR`)
  }
}

export function topicById(image: ClusterImage, topicId: string): TopicImage | undefined {
  for (const topic of image.topics.values()) if (topic.topicId === topicId) return topic
  return undefined
}
