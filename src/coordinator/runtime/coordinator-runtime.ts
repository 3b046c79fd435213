/**
 * The coordinator runtime (Kafka's CoordinatorRuntime), shared by the group coordinator
 * (`__consumer_offsets`) and the transaction coordinator (`__transaction_state`).
 *
 * A coordinator's state is split into shards, one per partition of its internal topic. The
 * runtime owns their lifecycle: when this broker becomes leader of a partition it creates a
 * shard whose coordinator epoch is the partition's leader epoch, replays the partition into
 * it (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and marks it active; when leadership moves
 * (or the leader epoch changes) the shard is unloaded, its timers cancelled and what it
 * parked answered NOT_COORDINATOR. `contextFor` answers every request the same way: the
 * active shard of its key, or the error a client must see. A write operation appends the
 * records it produced with acks=all and completes once they are committed (the high
 * watermark passed them), only if the shard that wrote them is still loaded; otherwise it
 * answers NOT_COORDINATOR. Each shard has its own timers (coordinator-timer.ts). The state
 * machine itself is pure: steps of the form `(state, request, nowMs) → {records, response}`.
 *
 * Share groups (KIP-932) and streams groups (KIP-1071) sit on it as Kafka puts them: share
 * groups' membership and assignment are more group types in the group coordinator's shards
 * (their records on `__consumer_offsets`, their heartbeats routed by `contextFor(groupId)`),
 * while the share-partition state (KIP-932's share coordinator, `__share_group_state`, keyed
 * by group, topic id and partition) is a third runtime over its own topic, with its own
 * serde, shard and `partitionFor`. Streams groups (KIP-1071) are one more group type in the
 * group coordinator's shards, with their topology and task assignment records replayed by the
 * same loader and their heartbeats as write operations; nothing in the runtime changes. (For
 * now they are kept in the shard's memory and write no records: see coordinator/streams/.)
 */

import { assert } from '../../common/assert.js'
import type { Clock } from '../../common/clock.js'
import type { Logger } from '../../common/logger.js'
import type { TransactionResult } from '../../common/transaction.js'
import {
  ACKS_ALL,
  type BrokerId,
  NO_OFFSET,
  type Offset,
  type ProducerId,
  toOffset,
} from '../../common/types.js'
import type { ClusterImage } from '../../metadata/cluster-image.js'
import type { InternalTopic, TopicAdmin } from '../../metadata/topic-admin.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { decodeRecordBatch, encodeRecordBatchSync, iterateBatches } from '../../protocol/record-batch.js'
import { toErrorCode } from '../../replication/kafka-error.js'
import type { Partition } from '../../replication/partition.js'
import type { AppendResult, LeaderAppendParams } from '../../replication/replica-manager.js'
import { CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT } from '../../storage/control-batch.js'
import { type CoordinatorLocation, locateCoordinator } from '../coordinator-locator.js'
import type { CoordinatorSerde, CoordinatorShard } from './coordinator-shard.js'
import { CoordinatorTimer } from './coordinator-timer.js'

/** What a coordinator runtime needs from its broker. */
export interface CoordinatorRuntimeHost {
  readonly nodeId: BrokerId
  readonly clock: Clock
  /**
   * Where the shards' timers go (a group's session and rebalance deadlines: one per group,
   * moved on most heartbeats): the broker's timing wheel. The clock when absent.
   */
  readonly timingWheel?: Clock
  readonly logger: Logger
  readonly replicaManager: {
    getPartition(topic: string, partition: number): Partition | undefined
    appendToLeader(params: Omit<LeaderAppendParams, 'purgatoryTimer'>): Promise<AppendResult>
  }
  metadataImage(): ClusterImage
  readonly topicAdmin: Pick<TopicAdmin, 'ensureInternalTopic'>
}

export interface CoordinatorRuntimeOptions<S extends CoordinatorShard<R>, R> {
  /** The internal topic: `__consumer_offsets`, `__transaction_state`. */
  readonly topic: string
  /** For log lines: 'group coordinator'. */
  readonly name: string
  readonly serde: CoordinatorSerde<R>
  /** How many bytes one read of the partition asks for while loading. */
  readonly loadBufferSize: number
  /** What `contextFor` answers while the internal topic does not exist. */
  readonly noTopicErrorCode: number
  /** The partition of a key (group id, transactional id). */
  partitionFor(key: string, partitionCount: number): number
  /** The topic to create on first use (FindCoordinator). */
  topicSpec(): Omit<InternalTopic, 'name'>
  newShard(context: ShardContext<S>): S
}

/** The producer a transactional write's batch is written as (TxnOffsetCommit). */
export interface TransactionalProducer {
  readonly producerId: ProducerId
  readonly producerEpoch: number
}

/** Kafka's CoordinatorState: LOADING, ACTIVE, and CLOSED (unloaded or failed to load). */
export type ShardState = 'loading' | 'active' | 'closed'

/** One shard and what the runtime keeps for it (Kafka's CoordinatorContext). */
export class ShardContext<S> {
  private currentState: ShardState = 'loading'
  readonly timer: CoordinatorTimer
  /**
   * The next sequence of each producer's transactional batches in this partition. The
   * partition's producer state checks them as a client's (a repeated sequence would be
   * taken for a retry and silently not written), so transactional batches carry real
   * sequences, recovered from the log on load; a new epoch starts again at 0.
   */
  readonly producerSequences = new Map<ProducerId, { producerEpoch: number; nextSequence: number }>()
  /** Markers told while loading: applied once the load (which may end before them) is done. */
  readonly markersWhileLoading: { producerId: ProducerId; result: TransactionResult }[] = []
  private current: S | undefined

  constructor(
    readonly partition: number,
    /** The coordinator epoch: the partition's leader epoch when loading began. */
    readonly epoch: number,
    clock: Clock,
  ) {
    this.timer = new CoordinatorTimer(clock)
  }

  get shard(): S {
    assert(this.current !== undefined, 'a shard context without its shard')
    return this.current
  }

  /** Set once, right after the context is made (the shard may keep its context). */
  attach(shard: S): void {
    assert(this.current === undefined, 'a shard context attached twice')
    this.current = shard
  }

  get state(): ShardState {
    return this.currentState
  }

  get isActive(): boolean {
    return this.currentState === 'active'
  }

  /** LOADING → ACTIVE once the partition is replayed. */
  activate(): void {
    assert(
      this.currentState === 'loading',
      () => `shard ${this.partition} activated while ${this.currentState}`,
    )
    this.currentState = 'active'
  }

  /** LOADING or ACTIVE → CLOSED, once: a closed shard never serves again. */
  close(): void {
    assert(this.currentState !== 'closed', () => `shard ${this.partition} closed twice`)
    this.currentState = 'closed'
    this.timer.close()
  }
}

/** A write: its records, and how to answer once they are committed or failed. */
export interface WriteOperation<R, T> {
  readonly records: readonly R[]
  /** How long the acks=all append may wait for the in-sync replicas. */
  readonly timeoutMs: number
  /** Written as one transactional batch of this producer (its marker ends it in the log). */
  readonly transactional?: TransactionalProducer
  /**
   * The records are committed (NONE) or failed (the error a coordinator client should
   * see); `baseOffset` is where their batch starts, -1 if it was never appended. Called
   * only while the shard that wrote them is still active.
   */
  complete(errorCode: number, baseOffset: Offset): T
  /** The answer when the shard was not active when the write was scheduled or completed. */
  notCoordinator(): T
}

export class CoordinatorRuntime<S extends CoordinatorShard<R>, R> {
  private readonly contexts = new Map<number, ShardContext<S>>()
  private creatingTopic: Promise<void> | null = null
  private stopped = false

  constructor(
    private readonly host: CoordinatorRuntimeHost,
    private readonly options: CoordinatorRuntimeOptions<S, R>,
  ) {}

  get topic(): string {
    return this.options.topic
  }

  shutdown(): void {
    this.stopped = true
    for (const context of [...this.contexts.values()]) this.unload(context)
  }

  // ---- shard lifecycle -----------------------------------------------------------------------

  /** Called after each metadata image is applied: load newly led partitions, drop lost ones. */
  onPartitionsChanged(): void {
    if (this.stopped) return
    const topic = this.host.metadataImage().topics.get(this.options.topic)
    const count = topic?.partitions.length ?? 0
    for (const context of [...this.contexts.values()]) if (context.partition >= count) this.unload(context)
    for (let p = 0; p < count; p++) {
      const partition = this.host.replicaManager.getPartition(this.options.topic, p)
      const context = this.contexts.get(p)
      const leads = partition?.isLeader === true
      if (context && (!leads || context.epoch !== partition?.leaderEpoch)) this.unload(context)
      if (leads && partition && !this.contexts.has(p)) this.load(partition)
    }
  }

  private load(partition: Partition): void {
    assert(
      !this.contexts.has(partition.partition),
      () => `${this.options.topic}-${partition.partition} loaded twice`,
    )
    const timers = this.host.timingWheel ?? this.host.clock
    const context = new ShardContext<S>(partition.partition, partition.leaderEpoch, timers)
    context.attach(this.options.newShard(context))
    this.contexts.set(context.partition, context)
    const started = this.host.clock.monotonicMs()
    this.replay(context, partition).then(
      (records) => {
        if (context.state !== 'loading') return
        context.activate()
        context.shard.onLoaded()
        for (const marker of context.markersWhileLoading.splice(0))
          context.shard.replayEndTransactionMarker(marker.producerId, marker.result)
        this.host.logger.info(
          {
            partition: context.partition,
            coordinatorEpoch: context.epoch,
            ...context.shard.summary(),
            records,
            tookMs: Math.round(this.host.clock.monotonicMs() - started),
          },
          `${this.options.name} loaded ${this.options.topic} partition`,
        )
      },
      (error: unknown) => {
        this.host.logger.error(
          { err: error, partition: context.partition },
          `loading ${this.options.topic} failed`,
        )
        // Answer NOT_COORDINATOR rather than loading forever; the next leadership change retries.
        if (context.state !== 'closed') this.unload(context)
      },
    )
  }

  /**
   * Replays the partition from its log start to its log end as it was when loading began
   * (Kafka's CoordinatorLoader); returns the records replayed.
   */
  private async replay(context: ShardContext<S>, partition: Partition): Promise<number> {
    const log = partition.log
    const end = log.logEndOffset
    let offset = log.logStartOffset
    let count = 0
    while (offset < end && context.state === 'loading') {
      const info = await log.read(offset, {
        maxBytes: this.options.loadBufferSize,
        maxOffset: end,
        minOneMessage: true,
      })
      if (info.sizeInBytes === 0) break
      for (const chunk of info.records)
        for (const span of iterateBatches(chunk)) {
          const batch = await decodeRecordBatch(chunk, span.at)
          if (context.state !== 'loading') return count
          if (batch.isControl) {
            const result = controlResult(batch.records[0]?.key ?? null)
            if (result) context.shard.replayEndTransactionMarker(batch.producerId, result)
            continue
          }
          if (batch.isTransactional)
            context.producerSequences.set(batch.producerId, {
              producerEpoch: batch.producerEpoch,
              nextSequence: batch.baseSequence + batch.lastOffsetDelta + 1,
            })
          const records: R[] = []
          for (const record of batch.records) {
            if (record.key === null) continue
            const decoded = this.options.serde.deserialize(record.key, record.value)
            if (decoded !== undefined) records.push(decoded)
          }
          count += records.length
          context.shard.replay({
            // The log assigned it (the decoded header is the protocol layer's number).
            baseOffset: toOffset(batch.baseOffset),
            producerId: batch.producerId,
            producerEpoch: batch.producerEpoch,
            isTransactional: batch.isTransactional,
            records,
          })
        }
      offset = info.nextOffset
    }
    return count
  }

  private unload(context: ShardContext<S>): void {
    const wasActive = context.state === 'active'
    context.close()
    if (this.contexts.get(context.partition) === context) this.contexts.delete(context.partition)
    context.shard.onUnloaded()
    if (wasActive)
      this.host.logger.info(
        { partition: context.partition, coordinatorEpoch: context.epoch },
        `${this.options.name} unloaded ${this.options.topic} partition`,
      )
  }

  // ---- routing -------------------------------------------------------------------------------

  /**
   * The active shard coordinating `key` here, or the error a client must see:
   * NOT_COORDINATOR when another broker (or none) leads its partition, or this broker leads
   * it under a newer epoch than its shard's; COORDINATOR_LOAD_IN_PROGRESS while loading.
   */
  contextFor(key: string): ShardContext<S> | number {
    const topic = this.host.metadataImage().topics.get(this.options.topic)
    if (!topic || topic.partitions.length === 0) return this.options.noTopicErrorCode
    const p = this.options.partitionFor(key, topic.partitions.length)
    const context = this.contexts.get(p)
    if (!context)
      return topic.partitions[p].leader === this.host.nodeId
        ? ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        : ErrorCode.NOT_COORDINATOR
    const partition = this.host.replicaManager.getPartition(this.options.topic, p)
    if (!partition?.isLeader || partition.leaderEpoch !== context.epoch) return ErrorCode.NOT_COORDINATOR
    if (context.state === 'loading') return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return context
  }

  /** The shard of `partition`, loading or active. */
  context(partition: number): ShardContext<S> | undefined {
    return this.contexts.get(partition)
  }

  activeContexts(): ShardContext<S>[] {
    return [...this.contexts.values()].filter((context) => context.isActive)
  }

  /** True while some partition led here is still loading. */
  get isLoading(): boolean {
    return [...this.contexts.values()].some((context) => context.state === 'loading')
  }

  /**
   * A COMMIT or ABORT marker was written to `partition` (the broker's onTransactionMarker):
   * the shard applies it now, or once loaded.
   */
  completeTransaction(partition: number, producerId: ProducerId, result: TransactionResult): void {
    const context = this.contexts.get(partition)
    if (!context || context.state === 'closed') return
    if (context.state === 'loading') context.markersWhileLoading.push({ producerId, result })
    else context.shard.replayEndTransactionMarker(producerId, result)
  }

  // ---- writes --------------------------------------------------------------------------------

  /**
   * Appends the operation's records with acks=all and completes it once they are committed
   * or failed, if `context` is still active then; otherwise answers `notCoordinator()`.
   * Never rejects.
   */
  scheduleWriteOperation<T>(context: ShardContext<S>, op: WriteOperation<R, T>): Promise<T> {
    if (!context.isActive) return Promise.resolve(op.notCoordinator())
    if (op.records.length === 0) return Promise.resolve(op.complete(ErrorCode.NONE, NO_OFFSET))
    // Re-checked once the append ends: the shard may have been unloaded, and its state with it.
    return this.append(context, op, (errorCode, baseOffset) =>
      context.isActive ? op.complete(errorCode, baseOffset) : op.notCoordinator(),
    )
  }

  /**
   * Appends with acks=all; `done` gets the error code a coordinator client should see and
   * the batch's base offset (-1 if it was never appended), in the append's own callback.
   */
  private append<T>(
    context: ShardContext<S>,
    op: WriteOperation<R, unknown>,
    done: (errorCode: number, baseOffset: Offset) => T,
  ): Promise<T> {
    const { topic } = this.options
    const { transactional } = op
    const batch = encodeRecordBatchSync({
      records: op.records.map((r) => this.options.serde.serialize(r)),
      defaultTimestamp: this.host.clock.nowMs(),
      ...(transactional ? this.transactionalHeader(context, transactional, op.records.length) : {}),
    })
    const appended = this.host.replicaManager.appendToLeader({
      topic,
      partition: context.partition,
      records: batch,
      requiredAcks: ACKS_ALL,
      timeoutMs: op.timeoutMs,
      // Kafka's AppendOrigin.COORDINATOR: the producer's epoch is checked (a fenced one is
      // refused), not its sequences, and KIP-890 verification is the handler's.
      leaderAppend: transactional ? { origin: 'coordinator' } : {},
    })
    return appended.then(
      (result) => {
        // Losing leadership mid-append is routine (failover, shutdown); anything else is worth a warning.
        if (result.errorCode === ErrorCode.NOT_LEADER_OR_FOLLOWER)
          this.host.logger.info({ partition: context.partition }, `append to ${topic} lost leadership`)
        else if (result.errorCode !== ErrorCode.NONE)
          this.host.logger.warn(
            { partition: context.partition, errorCode: result.errorCode },
            `append to ${topic} not committed`,
          )
        return done(appendError(result.errorCode), result.baseOffset)
      },
      (error: unknown) => {
        // Refused before anything was written: the sequence is free again.
        if (transactional) releaseSequence(context, transactional, op.records.length)
        const code = toErrorCode(error)
        if (code === null)
          this.host.logger.error({ err: error, partition: context.partition }, `append to ${topic} failed`)
        return done(code === null ? ErrorCode.UNKNOWN_SERVER_ERROR : appendError(code), NO_OFFSET)
      },
    )
  }

  /** The producer fields of a transactional batch, taking the producer's next sequences. */
  private transactionalHeader(context: ShardContext<S>, producer: TransactionalProducer, count: number) {
    const known = context.producerSequences.get(producer.producerId)
    const local =
      known !== undefined && known.producerEpoch === producer.producerEpoch ? known.nextSequence : 0
    // The partition's producer state is the authority (it may have seen what this shard
    // did not, as a batch written before a failed append was reported); the local count
    // covers appends still on their way to it.
    const entry = this.host.replicaManager
      .getPartition(this.options.topic, context.partition)
      ?.producerState?.lastEntry(producer.producerId)
    const logged =
      entry !== undefined && entry.producerEpoch === producer.producerEpoch && entry.lastSeq >= 0
        ? entry.lastSeq + 1
        : 0
    const baseSequence = Math.max(local, logged)
    // An older epoch keeps the entry: the partition refuses it (INVALID_PRODUCER_EPOCH).
    if (known === undefined || known.producerEpoch <= producer.producerEpoch)
      context.producerSequences.set(producer.producerId, {
        producerEpoch: producer.producerEpoch,
        nextSequence: (baseSequence + count) % 2 ** 31,
      })
    return {
      producerId: producer.producerId,
      producerEpoch: producer.producerEpoch,
      baseSequence,
      isTransactional: true,
    }
  }

  // ---- FindCoordinator -----------------------------------------------------------------------

  findCoordinator(key: string): Promise<CoordinatorLocation> {
    return locateCoordinator(
      {
        topic: this.options.topic,
        nodeId: this.host.nodeId,
        clock: this.host.clock,
        logger: this.host.logger,
        metadataImage: () => this.host.metadataImage(),
        createTopic: () => this.createTopic(),
        partitionFor: (k, count) => this.options.partitionFor(k, count),
        isLoaded: (p) => this.contexts.get(p)?.isActive === true,
        isStopped: () => this.stopped,
      },
      key,
    )
  }

  /** Creates the internal topic on first use, as Kafka does (once, shared by concurrent callers). */
  private createTopic(): Promise<void> {
    this.creatingTopic ??= this.host.topicAdmin
      .ensureInternalTopic({ name: this.options.topic, ...this.options.topicSpec() })
      .then(
        () => undefined,
        (error: unknown) => {
          this.creatingTopic = null
          throw error
        },
      )
    return this.creatingTopic
  }
}

function releaseSequence(
  context: ShardContext<unknown>,
  producer: TransactionalProducer,
  count: number,
): void {
  const known = context.producerSequences.get(producer.producerId)
  if (known?.producerEpoch !== producer.producerEpoch) return
  const nextSequence = known.nextSequence - count
  if (nextSequence <= 0) context.producerSequences.delete(producer.producerId)
  else
    context.producerSequences.set(producer.producerId, {
      producerEpoch: producer.producerEpoch,
      nextSequence,
    })
}

/** The result a control batch's record key names; undefined for another control type. */
function controlResult(key: Buffer | null): TransactionResult | undefined {
  if (key === null || key.length < 4) return undefined
  const type = key.readInt16BE(2)
  if (type === CONTROL_TYPE_COMMIT) return 'commit'
  return type === CONTROL_TYPE_ABORT ? 'abort' : undefined
}

/** Kafka's mapping of an internal topic's append errors to what coordinator clients see. */
function appendError(code: number): number {
  switch (code) {
    case ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
    case ErrorCode.NOT_ENOUGH_REPLICAS:
    case ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case ErrorCode.REQUEST_TIMED_OUT:
      return ErrorCode.COORDINATOR_NOT_AVAILABLE
    case ErrorCode.NOT_LEADER_OR_FOLLOWER:
    case ErrorCode.KAFKA_STORAGE_ERROR:
      return ErrorCode.NOT_COORDINATOR
    default:
      return code
  }
}
