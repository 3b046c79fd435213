/**
 * The partitions this broker hosts, kept in step with the cluster metadata: it opens a log
 * for every partition assigned here, applies leadership and config changes, and deletes
 * the logs of deleted topics. Produce and fetch go through it.
 */
import type { Clock } from '../common/clock.js'
import { forEachConcurrently } from '../common/concurrency.js'
import type { Logger } from '../common/logger.js'
import { ACKS_ALL, type Acks, type BrokerId, nextOffset, type Offset } from '../common/types.js'
import {
  type ClusterImage,
  type PartitionState,
  type ServedRecord,
  STORAGE_ERROR_LEADER_EPOCH,
  servedRecordFrom,
  type TopicImage,
} from '../metadata/cluster-image.js'
import type { ImageDelta } from '../metadata/image-delta.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { isStorageError } from '../storage/errors.js'
import type { LogConfig } from '../storage/log-config.js'
import type { TopicPartition, UnifiedLog } from '../storage/unified-log.js'
import { AppendVerification, type TransactionVerification } from './append-verification.js'
import { type PurgatoryTimer, waitForHighWatermark } from './delayed-operations.js'
import {
  type FetchParams,
  type FetchPartitionRequest,
  type FetchPartitionResult,
  fetchMessages,
} from './fetch-messages.js'
import { KafkaError, toErrorCode } from './kafka-error.js'
import { type IsrProposal, type LeaderAppend, Partition, type PartitionContext } from './partition.js'
import { ProducerStateManager, type ProducerStateOptions } from './producer-state.js'
import type { FetcherStats } from './replica-fetcher.js'
import type { ReplicaFetcherManager } from './replica-fetcher-manager.js'

/** Where partition logs come from (the storage LogManager). */
export interface LogProvider {
  getOrCreateLog(tp: TopicPartition, config: LogConfig): Promise<UnifiedLog>
  deleteLog(tp: TopicPartition): Promise<void>
  /** Moves a closed-for-the-move log to another log dir (AlterReplicaLogDirs). */
  moveLog(tp: TopicPartition, logDir: string, config: LogConfig): Promise<UnifiedLog>
}

/** Effective per-topic settings the replication path needs, resolved from the metadata. */
export interface TopicSettings {
  readonly logConfig: LogConfig
  readonly minInsyncReplicas: number
}

export interface ReplicaManagerOptions {
  readonly nodeId: BrokerId
  readonly logs: LogProvider
  readonly clock: Clock
  /**
   * Where the delayed fetches and acks=all produces set their expiry: a timing wheel, as
   * there is one per waiting request (and per partition of a produce). The clock when absent.
   */
  readonly purgatoryClock?: Clock
  readonly logger: Logger
  readonly topicSettings: (image: ClusterImage, topic: string) => TopicSettings
  /** True while this broker has no metadata-store session: it must not act as leader. */
  readonly isFenced: () => boolean
  /** This broker's epoch from its current registration (-1 while unregistered). */
  readonly localBrokerEpoch?: () => number
  /** Writes an ISR change by compare-and-set; true when committed. */
  readonly alterIsr: (proposal: IsrProposal) => Promise<boolean>
  /** Followers' fetchers (broker-to-broker fetches). */
  readonly fetchers: ReplicaFetcherManager
  /** replica.lag.time.max.ms */
  readonly replicaLagTimeMaxMs: number
  /** producer.id.expiration.ms (Kafka's default: a day). */
  readonly producerIdExpirationMs?: number
  /** producer.id.expiration.check.interval.ms (Kafka's default: 10 minutes). */
  readonly producerIdExpirationCheckIntervalMs?: number
}

/** Partitions of one topic applied at once: log creation is bound by disk round trips, not CPU. */
const APPLY_CONCURRENCY = 16

const DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
const DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000

/** One partition's records of a produce request, for appendRecords. */
/** An append on a partition's leader, with its acks wait (ReplicaManager.appendToLeader). */
export interface LeaderAppendParams {
  readonly topic: string
  readonly partition: number
  readonly records: Buffer
  readonly requiredAcks: Acks
  /** How long acks=all waits for the ISR (REQUEST_TIMED_OUT after). */
  readonly timeoutMs: number
  readonly purgatoryTimer?: PurgatoryTimer
  /** How the partition checks the batch's producer: its origin, a verified transaction. */
  readonly leaderAppend?: LeaderAppend
}

/** A produce's append: a leader append after KIP-890's verification. */
export interface AppendRecordsParams extends Omit<LeaderAppendParams, 'leaderAppend'> {
  readonly verification: TransactionVerification
}

export interface AppendResult {
  readonly errorCode: number
  readonly baseOffset: Offset
  readonly logAppendTimeMs: number
  readonly logStartOffset: Offset
}

function key(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`
}

function sameEntries(a: ReadonlyMap<number, number>, b: ReadonlyMap<number, number>): boolean {
  if (a.size !== b.size) return false
  for (const [k, v] of a) if (b.get(k) !== v) return false
  return true
}

/** Settings are plain values (numbers, strings, booleans), resolved anew for each image. */
function sameSettings(a: TopicSettings, b: TopicSettings): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b)
}

export class ReplicaManager {
  private readonly partitions = new Map<string, Partition>()
  /**
   * Partitions assigned here whose log could not be created (the log dir failed): they answer
   * KAFKA_STORAGE_ERROR until the topic goes or the broker restarts, as Kafka's offline
   * partitions do. Their topic id, by key.
   */
  private readonly offline = new Map<string, string>()
  /** Replicas moving between log dirs (moveReplica): NOT_LEADER_OR_FOLLOWER meanwhile. */
  private readonly moving = new Set<string>()
  private readonly settings = new Map<string, TopicSettings>()
  /** The partition state last applied, by key: an image that kept it needs nothing done. */
  private readonly applied = new Map<string, PartitionState>()
  private readonly topicIds = new Map<string, string>()
  /** Image changes are applied one at a time, in order; a failed one does not stop the next. */
  private applying: Promise<void> = Promise.resolve()
  /**
   * The newest image handed to applyImage, ahead of the one being applied: a hosted replica
   * whose topic it no longer has (same name, other topic id, or none) is retired at once.
   */
  private latest: ClusterImage | null = null
  private isrTimer: { cancel(): void } | null = null
  private following = true
  /** Set by shutdown(): queued images are not applied, and one being applied stops early. */
  private stopped = false
  private producerExpiryTimer: { cancel(): void } | null = null
  /** Registered brokers and their broker epochs (-1: unknown), from the last applied image. */
  private live = new Map<number, number>()
  /** Set while an image is being applied and left set when it failed: the next one applies every topic. */
  private applyIncomplete = false
  /** KIP-890 part 1: transactional appends verified with the coordinator first. */
  private readonly appendVerification = new AppendVerification()

  constructor(private readonly options: ReplicaManagerOptions) {}

  /** Starts the ISR expiration check (every replica.lag.time.max.ms / 2, as Kafka). */
  startup(): void {
    const intervalMs = Math.max(1, Math.floor(this.options.replicaLagTimeMaxMs / 2))
    const tick = (): void => {
      for (const partition of this.partitions.values())
        partition.maybeShrinkIsr(this.options.replicaLagTimeMaxMs)
      this.isrTimer = this.options.clock.setTimeout(tick, intervalMs)
    }
    this.isrTimer = this.options.clock.setTimeout(tick, intervalMs)
    this.scheduleProducerExpiry()
  }

  /** Forgets idle producer ids in every hosted partition, every check interval (as Kafka). */
  private scheduleProducerExpiry(): void {
    const intervalMs =
      this.options.producerIdExpirationCheckIntervalMs ?? DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS
    this.producerExpiryTimer = this.options.clock.setTimeout(() => {
      this.removeExpiredProducers()
      this.scheduleProducerExpiry()
    }, intervalMs)
  }

  removeExpiredProducers(): number {
    let removed = 0
    for (const partition of this.partitions.values())
      removed += partition.producerState?.removeExpiredProducers() ?? 0
    return removed
  }

  /**
   * Stops fetching for good, first thing in a controlled shutdown: a broker on its way out
   * must not rejoin ISRs it is being removed from (Kafka's KIP-841).
   */
  stopFollowing(): void {
    this.following = false
    this.options.fetchers.shutdown()
  }

  shutdown(): void {
    this.stopped = true
    this.isrTimer?.cancel()
    this.isrTimer = null
    this.producerExpiryTimer?.cancel()
    this.producerExpiryTimer = null
    this.options.fetchers.shutdown()
  }

  /** The followers' fetcher counters (committed offsets lost to truncation). */
  get fetcherStats(): Readonly<FetcherStats> {
    return this.options.fetchers.stats
  }

  get hostedPartitions(): IterableIterator<Partition> {
    return this.partitions.values()
  }

  /** How many partitions are hosted (a caller caching a filtered list sees when it changed). */
  get hostedPartitionCount(): number {
    return this.partitions.size
  }

  /**
   * The leader epoch of every partition this broker leads now (log created, role applied,
   * store session held): what the metadata's leadership record publishes.
   */
  servedLeaderEpochs(): ServedRecord {
    const served: [string, number, number][] = []
    for (const partition of this.partitions.values())
      if (partition.isLeader) served.push([partition.id.topicId, partition.partition, partition.leaderEpoch])
    for (const [k, topicId] of this.offline)
      served.push([topicId, Number(k.slice(k.indexOf('\u0000') + 1)), STORAGE_ERROR_LEADER_EPOCH])
    return servedRecordFrom(served)
  }

  /**
   * The broker holds a store session again (its first registration, or one after a lost
   * session): each partition it leads by the metadata becomes leader now, with the high
   * watermark its ISR allows (Kafka's makeLeader), which an image applied while fenced left
   * where the checkpoint had it.
   */
  onLeadershipRegained(): void {
    for (const partition of this.partitions.values()) partition.maybeIncrementHighWatermark()
  }

  /**
   * The replica of `topic`-`partition` hosted here, if it belongs to the topic the metadata
   * has under that name now: a retired replica (of a deleted topic, or of the previous topic
   * of a re-created name, waiting for its log to be deleted) is not served. Produce into it
   * would be acknowledged and then deleted with it; a follower of the new topic fetching
   * from it would copy the old topic's records.
   */
  getPartition(topic: string, partition: number): Partition | undefined {
    const hosted = this.partitions.get(key(topic, partition))
    return hosted === undefined || hosted.retired ? undefined : hosted
  }

  /**
   * The partition, or the Kafka error a client should see for it: a retired replica answers
   * UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers once the deletion is in its metadata, and
   * retriable, so a producer retries into the re-created topic once its leader serves it.
   */
  getPartitionOrError(topic: string, partition: number): Partition {
    const hosted = this.getPartition(topic, partition)
    if (hosted) return hosted
    if (this.offline.has(key(topic, partition)))
      throw new KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, `${topic}-${partition} is on an offline log dir`)
    if (this.moving.has(key(topic, partition)))
      throw new KafkaError(
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        `${topic}-${partition} is moving between log dirs`,
      )
    throw new KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, `${topic}-${partition} is not hosted here`)
  }

  /** Whether the replica of topic-partition is on a log dir that failed (KAFKA_STORAGE_ERROR). */
  isOffline(topic: string, partition: number): boolean {
    return this.offline.has(key(topic, partition))
  }

  /**
   * Moves this broker's replica of topic-partition into log dir `logDir` (AlterReplicaLogDirs),
   * in turn with the images being applied. Kafka copies into a future replica that catches
   * up while the current one serves; here the replica stops (clients get
   * NOT_LEADER_OR_FOLLOWER and retry, followers fetch again), its closed log moves
   * (LogManager.moveLog), and it is hosted again from the latest image, in the role that
   * image gives it. Resolves once it serves again.
   */
  moveReplica(topic: string, partition: number, logDir: string): Promise<void> {
    const k = key(topic, partition)
    const run = this.applying.then(async () => {
      const hosted = this.partitions.get(k)
      if (this.stopped || hosted === undefined || hosted.retired) return
      this.moving.add(k)
      try {
        this.options.fetchers.unfollow(hosted)
        // Wakes the produces and fetches parked on it; nothing appends to it from now on.
        hosted.retire()
        this.partitions.delete(k)
        this.applied.delete(k)
        const settings = this.settings.get(topic)
        await this.options.logs.moveLog(
          { topic, partition },
          logDir,
          settings?.logConfig ?? hosted.log.config,
        )
      } finally {
        this.moving.delete(k)
        // Hosted again in whatever role the latest image gives it (getOrCreateLog finds the
        // moved log); a failed move reopened it where it was.
        const image = this.latest
        const topicImage = image?.topics.get(topic)
        const state = topicImage?.partitions[partition]
        if (image && topicImage && state && !this.stopped) {
          const settings = this.options.topicSettings(image, topic)
          await this.applyPartition(topicImage, state, settings)
          this.applied.set(k, state)
        }
      }
    })
    this.applying = run.catch(() => undefined)
    return run
  }

  topicSettings(topic: string): TopicSettings | undefined {
    return this.settings.get(topic)
  }

  /**
   * Queues the change to `image`; resolves when it has been applied, or rejects with why it
   * failed. Replicas whose topic `image` no longer has are retired now, not in turn: the
   * queue may be busy for seconds under load (creating a big topic's logs), and meanwhile
   * they must neither take records nor hold requests.
   */
  applyImage(image: ClusterImage, change?: { previous: ClusterImage; delta: ImageDelta }): Promise<void> {
    // A delta is relative to its previous image: usable only if that one was handed here last.
    const delta = change !== undefined && change.previous === this.latest ? change.delta : undefined
    this.latest = image
    this.retireReplaced(image)
    const applied = this.applying.then(() => this.doApplyImage(image, delta))
    // The next image is applied whatever became of this one (its failed partitions are
    // retried then): chaining on a rejected promise would skip every later image.
    this.applying = applied.catch(() => undefined)
    return applied
  }

  /**
   * Resolves once no image is being applied (after shutdown(): at most the partitions in
   * flight finish). The logs close after this: an apply still creating or deleting a log
   * meanwhile failed on a closed log or a removed directory, and logged errors at shutdown.
   */
  idle(): Promise<void> {
    return this.applying
  }

  /** Whether `image` has the topic `partition` belongs to (same name and topic id). */
  private static hasTopicOf(image: ClusterImage, partition: Partition): boolean {
    return image.topics.get(partition.topic)?.topicId === partition.id.topicId
  }

  /**
   * Retires the hosted replicas whose topic `image` no longer has. Only topics whose applied
   * id `image` contradicts are looked for, so an ordinary image costs O(topics).
   */
  private retireReplaced(image: ClusterImage): void {
    const gone = new Set<string>()
    for (const [name, topicId] of this.topicIds)
      if (image.topics.get(name)?.topicId !== topicId) gone.add(name)
    if (gone.size === 0) return
    for (const partition of this.partitions.values())
      if (gone.has(partition.topic) && !ReplicaManager.hasTopicOf(image, partition)) this.retire(partition)
  }

  private retire(partition: Partition): void {
    if (partition.retired) return
    this.options.fetchers.unfollow(partition)
    partition.retire()
    this.options.logger.info(
      { topic: partition.topic, partition: partition.partition, topicId: partition.id.topicId },
      'replica retired: its topic was deleted or re-created',
    )
  }

  private async doApplyImage(image: ClusterImage, delta: ImageDelta | undefined): Promise<void> {
    if (this.stopped) return
    const live = new Map([...image.brokers.values()].map((b) => [b.nodeId, b.brokerEpoch ?? -1]))
    // Roles depend on which brokers are registered: a change re-applies every partition.
    const liveChanged = !sameEntries(live, this.live)
    this.live = live
    // With a delta only the topics it names are looked at (an ISR change cost every broker a
    // walk of every partition); after an apply that did not finish, or without one, all are.
    const everyTopic =
      delta === undefined || delta.full || delta.settings || liveChanged || this.applyIncomplete
    this.applyIncomplete = true
    const topics = everyTopic
      ? image.topics.values()
      : [...delta.topics.keys()].flatMap((name) => image.topics.get(name) ?? [])
    for (const topic of topics) {
      // A new topic under a name this broker hosts (deleted and created again, and this
      // broker saw no image without it): the old topic goes first, every partition of it, as
      // Kafka treats a changed topic id as a deletion and a creation. Matching partitions by
      // index alone kept the old topic's partitions past the new one's count.
      const appliedTopicId = this.topicIds.get(topic.name)
      if (appliedTopicId !== undefined && appliedTopicId !== topic.topicId) await this.removeTopic(topic.name)
      const settings = this.options.topicSettings(image, topic.name)
      const previous = this.settings.get(topic.name)
      const settingsChanged = previous === undefined || !sameSettings(previous, settings)
      if (settingsChanged) this.settings.set(topic.name, settings)
      this.topicIds.set(topic.name, topic.topicId)
      // The metadata keeps the object of a partition state that did not change (see
      // metadata/image-delta.ts): applying only the changed ones makes an image changing k partitions
      // cost O(k) rather than O(partitions) in each broker.
      const indices = everyTopic ? null : delta.topics.get(topic.name)
      const states = indices ? indices.map((index) => topic.partitions[index]) : topic.partitions
      const changed =
        liveChanged || settingsChanged
          ? topic.partitions
          : states.filter((state) => this.applied.get(key(topic.name, state.partition)) !== state)
      // Partitions are independent; creating their logs one at a time waited on ~15 file
      // operations in a row per partition (10,000 partitions took 15-28 s).
      await forEachConcurrently(changed, APPLY_CONCURRENCY, async (state) => {
        if (this.stopped) return
        const k = key(topic.name, state.partition)
        // Forgotten first: a failed apply must be retried by the next image.
        this.applied.delete(k)
        await this.applyPartition(topic, state, settings)
        this.applied.set(k, state)
      })
    }
    for (const [name] of this.topicIds) {
      if (this.stopped) return
      const current = image.topics.get(name)
      if (!current) await this.removeTopic(name)
    }
    if (!this.stopped) this.applyIncomplete = false
  }

  private async applyPartition(
    topic: TopicImage,
    state: PartitionState,
    settings: TopicSettings,
  ): Promise<void> {
    const k = key(topic.name, state.partition)
    const existing = this.partitions.get(k)
    const offlineTopicId = this.offline.get(k)
    if (
      offlineTopicId !== undefined &&
      (offlineTopicId !== topic.topicId || !state.replicas.includes(this.options.nodeId))
    )
      this.offline.delete(k)
    if (!state.replicas.includes(this.options.nodeId)) {
      if (existing) await this.removePartition(existing)
      return
    }
    if (existing && existing.id.topicId !== topic.topicId) await this.removePartition(existing)
    const hosted = this.partitions.get(key(topic.name, state.partition))
    if (hosted) {
      hosted.updateState(state)
      hosted.log.updateConfig(settings.logConfig)
      this.applyRole(hosted, state)
      return
    }
    // Not retried on every image: its log dir stays offline until a restart (Kafka's).
    if (this.offline.has(k)) return
    let log: UnifiedLog
    try {
      log = await this.options.logs.getOrCreateLog(
        { topic: topic.name, partition: state.partition },
        settings.logConfig,
      )
      await this.attachProducerState(log)
    } catch (error) {
      // One partition's disk failure must not stop the rest of the image from applying.
      if (!isStorageError(error, 'KAFKA_STORAGE_ERROR')) throw error
      this.offline.set(k, topic.topicId)
      this.options.logger.error(
        { err: error, topic: topic.name, partition: state.partition },
        'could not create the log of an assigned partition; it is offline',
      )
      return
    }
    const partition = new Partition(
      { topic: topic.name, partition: state.partition, topicId: topic.topicId },
      log,
      state,
      this.partitionContext(),
    )
    this.partitions.set(key(topic.name, state.partition), partition)
    // An image newer than this one (applied later) may have deleted or replaced the topic
    // already: retireReplaced ran before this replica existed.
    if (this.latest !== null && !ReplicaManager.hasTopicOf(this.latest, partition)) {
      this.retire(partition)
      return
    }
    partition.maybeIncrementHighWatermark()
    this.applyRole(partition, state)
  }

  /**
   * One context for every hosted partition: what differs per partition comes as an
   * argument. A context and its closures per replica cost ~430 bytes of heap.
   */
  private partitionContext(): PartitionContext {
    this.sharedPartitionContext ??= {
      localBrokerId: this.options.nodeId,
      isFenced: this.options.isFenced,
      nowMs: () => this.options.clock.monotonicMs(),
      alterIsr: this.options.alterIsr,
      isRegistered: (brokerId) => this.live.has(brokerId),
      brokerEpochOf: (brokerId) => this.live.get(brokerId),
      localBrokerEpoch: this.options.localBrokerEpoch,
      minInsyncReplicas: (topic) => this.settings.get(topic)?.minInsyncReplicas ?? 1,
      onFollowerLogCut: (topic, partition) => {
        const cut = this.partitions.get(key(topic, partition))
        if (cut !== undefined) this.options.fetchers.touch(cut)
      },
    }
    return this.sharedPartitionContext
  }
  private sharedPartitionContext: PartitionContext | undefined

  /** Producer state loads (snapshot and log tail) before the partition takes any append. */
  private async attachProducerState(log: UnifiedLog): Promise<void> {
    if (log.producerState !== undefined) return
    this.producerStateOptions ??= {
      clock: this.options.clock,
      logger: this.options.logger,
      producerIdExpirationMs: this.options.producerIdExpirationMs ?? DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    }
    await log.attachProducerState(new ProducerStateManager(log, this.producerStateOptions))
  }
  /** One for every replica's producer state. */
  private producerStateOptions: ProducerStateOptions | undefined

  /** Followers of a live leader fetch from it; leaders and orphans fetch from no one. */
  private applyRole(partition: Partition, state: PartitionState): void {
    const follows =
      !partition.retired &&
      this.following &&
      state.leader !== this.options.nodeId &&
      state.leader !== -1 &&
      this.live.has(state.leader)
    if (follows) this.options.fetchers.follow(partition, state.leader, state.leaderEpoch)
    else this.options.fetchers.unfollow(partition)
  }

  private async removeTopic(name: string): Promise<void> {
    for (const partition of [...this.partitions.values()]) {
      if (partition.topic === name) await this.removePartition(partition)
    }
    for (const k of [...this.offline.keys()]) if (k.startsWith(`${name}\u0000`)) this.offline.delete(k)
    for (const k of [...this.applied.keys()]) if (k.startsWith(`${name}\u0000`)) this.applied.delete(k)
    this.settings.delete(name)
    this.topicIds.delete(name)
    this.options.logger.info({ topic: name }, 'deleted topic logs')
  }

  private async removePartition(partition: Partition): Promise<void> {
    this.options.fetchers.unfollow(partition)
    this.partitions.delete(key(partition.topic, partition.partition))
    await this.options.logs.deleteLog({ topic: partition.topic, partition: partition.partition })
  }

  /**
   * DeleteRecords (Kafka's ReplicaManager.deleteRecords): moves the log start offset of the
   * partition led here (see Partition.deleteRecordsOnLeader). A partition not hosted here
   * answers NOT_LEADER_OR_FOLLOWER when `knownPartition` (the metadata has it: the client
   * is sent to its leader), else UNKNOWN_TOPIC_OR_PARTITION. Tidelog answers once the
   * leader moved its log start; it does not wait for the followers' (Kafka's
   * DelayedDeleteRecords).
   */
  async deleteRecords(
    topic: string,
    partitionIndex: number,
    offset: Offset,
    knownPartition: boolean,
  ): Promise<{ readonly errorCode: number; readonly lowWatermark: number }> {
    try {
      const partition = this.getPartition(topic, partitionIndex)
      if (partition === undefined) {
        const errorCode = knownPartition
          ? ErrorCode.NOT_LEADER_OR_FOLLOWER
          : ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return { errorCode, lowWatermark: -1 }
      }
      return { errorCode: ErrorCode.NONE, lowWatermark: await partition.deleteRecordsOnLeader(offset) }
    } catch (error) {
      const code = toErrorCode(error)
      if (code === null) throw error
      return { errorCode: code, lowWatermark: -1 }
    }
  }

  /**
   * Fetch for a consumer or a follower: reads the partitions and, with fewer than minBytes
   * found, waits in the fetch purgatory for more (see fetch-messages.ts).
   */
  fetchMessages<T extends FetchPartitionRequest, R>(
    params: FetchParams<T>,
    respond: (results: FetchPartitionResult<T>[]) => R,
  ): Promise<R> {
    return fetchMessages(
      {
        clock: this.options.purgatoryClock ?? this.options.clock,
        getPartition: (topic, partition) => this.getPartition(topic, partition),
        getPartitionOrError: (topic, partition) => this.getPartitionOrError(topic, partition),
        brokerEpochOf: (brokerId) => this.live.get(brokerId),
      },
      params,
      respond,
    )
  }

  /**
   * A produce's append (Kafka's appendRecords): verified with the transaction coordinator
   * first when the records would open a transaction here (see append-verification.ts),
   * then appendToLeader. Called synchronously, so appends keep the order requests arrived in.
   */
  appendRecords(params: AppendRecordsParams): Promise<AppendResult> {
    const { topic, partition, records } = params
    return this.appendVerification.append(
      this.getPartition(topic, partition),
      records,
      params.verification,
      { topic, partition },
      (leaderAppend) => this.appendToLeader({ ...params, leaderAppend }),
    )
  }

  /**
   * Appends records on the leader of topic-partition (see Partition.appendRecordsToLeader).
   * acks=-1 then waits until the whole ISR has them (the high watermark passes them), up to
   * `timeoutMs` (REQUEST_TIMED_OUT), and fails with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the
   * ISR shrank below min.insync.replicas meanwhile.
   */
  async appendToLeader(params: LeaderAppendParams): Promise<AppendResult> {
    const { topic, records, requiredAcks, timeoutMs, purgatoryTimer, leaderAppend = {} } = params
    const partition = this.getPartitionOrError(topic, params.partition)
    const minInsyncReplicas = this.settings.get(topic)?.minInsyncReplicas ?? 1
    // The leadership the records are appended under (read before the append's first await).
    const leaderEpoch = partition.leaderEpoch
    const info = await partition.appendRecordsToLeader(records, requiredAcks, minInsyncReplicas, leaderAppend)
    const result = {
      errorCode: ErrorCode.NONE,
      baseOffset: info.firstOffset,
      logAppendTimeMs: info.logAppendTimeMs,
      logStartOffset: info.logStartOffset,
    }
    if (requiredAcks !== ACKS_ALL) return result
    const replicated = await waitForHighWatermark(
      this.options.purgatoryClock ?? this.options.clock,
      partition,
      nextOffset(info.lastOffset),
      timeoutMs,
      leaderEpoch,
      purgatoryTimer,
    )
    if (!replicated) {
      const stillLeader = partition.isLeader && partition.leaderEpoch === leaderEpoch
      const code = stillLeader ? ErrorCode.REQUEST_TIMED_OUT : ErrorCode.NOT_LEADER_OR_FOLLOWER
      return { ...result, errorCode: code }
    }
    if (partition.isr.length < minInsyncReplicas) {
      return { ...result, errorCode: ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND }
    }
    return result
  }
}
