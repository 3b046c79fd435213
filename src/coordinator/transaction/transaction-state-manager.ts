/**
 * The transaction coordinator's state (Kafka's TransactionStateManager): one shard per
 * `__transaction_state` partition this broker leads, loaded from its log before serving
 * (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and dropped when leadership moves. The
 * coordinator epoch of a shard is the partition's leader epoch, so markers sent by a
 * coordinator that lost the partition are fenced by the leaders. Changes are appended
 * with acks=all and applied only once committed.
 */

import type { Clock } from '../../common/clock.js'
import type { Logger } from '../../common/logger.js'
import type { ClusterImage } from '../../metadata/cluster-image.js'
import type { TopicAdmin } from '../../metadata/topic-admin.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { decodeRecordBatch, encodeRecordBatchSync, iterateBatches } from '../../protocol/record-batch.js'
import { toErrorCode } from '../../replication/kafka-error.js'
import type { Partition } from '../../replication/partition.js'
import type { AppendResult } from '../../replication/replica-manager.js'
import { type CoordinatorLocation, locateCoordinator } from '../coordinator-locator.js'
import { javaStringHashCode } from '../group.js'
import {
  decodeTransactionLogKey,
  decodeTransactionLogValue,
  encodeTransactionLogKey,
  encodeTransactionLogValue,
  TRANSACTION_STATE_TOPIC,
} from './transaction-log.js'
import {
  NO_PRODUCER_EPOCH,
  TransactionMetadata,
  TransactionState,
  type TransactionTransit,
} from './transaction-metadata.js'

/** What the transaction coordinator needs from its broker. */
export interface TransactionHost {
  readonly nodeId: number
  readonly clock: Clock
  readonly logger: Logger
  readonly replicaManager: {
    getPartition(topic: string, partition: number): Partition | undefined
    appendToLeader(
      topic: string,
      partition: number,
      records: Buffer,
      acks: number,
      timeoutMs: number,
    ): Promise<AppendResult>
  }
  metadataImage(): ClusterImage
  readonly topicAdmin: Pick<TopicAdmin, 'ensureInternalTopic'>
}

export interface TransactionStateConfig {
  readonly transactionStateLogNumPartitions: number
  readonly transactionStateLogReplicationFactor: number
  readonly transactionStateLogMinIsr: number
  readonly transactionStateLogSegmentBytes: number
  readonly transactionStateLogLoadBufferSize: number
}

export interface TransactionShard {
  readonly partition: number
  /** The leader epoch of the partition when loading began. */
  readonly coordinatorEpoch: number
  loading: boolean
  unloaded: boolean
  readonly transactions: Map<string, TransactionMetadata>
}

/** A transactional id's coordinator here: its shard and its metadata, if it has any. */
export interface TransactionStateEntry {
  readonly shard: TransactionShard
  readonly metadata: TransactionMetadata | undefined
}

/** The `__transaction_state` partition of a transactional id: Kafka's Utils.abs(hashCode) % partitions. */
export function partitionForTransactionalId(transactionalId: string, partitionCount: number): number {
  const hash = javaStringHashCode(transactionalId)
  const abs = hash === -2147483648 ? 0 : Math.abs(hash)
  return abs % partitionCount
}

export class TransactionStateManager {
  private readonly shards = new Map<number, TransactionShard>()
  private creatingTopic: Promise<void> | null = null
  private stopped = false

  constructor(
    private readonly host: TransactionHost,
    readonly config: TransactionStateConfig,
    /** Called once a shard is loaded (the coordinator resends the markers of Prepare* states). */
    private readonly onLoaded: (shard: TransactionShard) => void,
  ) {}

  shutdown(): void {
    this.stopped = true
    for (const shard of [...this.shards.values()]) this.unload(shard)
  }

  /** The loaded shards (timeouts, expiration, ListTransactions). */
  loadedShards(): TransactionShard[] {
    return [...this.shards.values()].filter((shard) => !shard.loading && !shard.unloaded)
  }

  /** True while some shard led here is still loading (ListTransactions' error). */
  get isLoading(): boolean {
    return [...this.shards.values()].some((shard) => shard.loading)
  }

  // ---- leadership of __transaction_state partitions -----------------------------------------

  /** Called after each metadata image is applied: load newly led partitions, drop lost ones. */
  onPartitionsChanged(): void {
    if (this.stopped) return
    const topic = this.host.metadataImage().topics.get(TRANSACTION_STATE_TOPIC)
    const count = topic?.partitions.length ?? 0
    for (const shard of [...this.shards.values()]) if (shard.partition >= count) this.unload(shard)
    for (let p = 0; p < count; p++) {
      const partition = this.host.replicaManager.getPartition(TRANSACTION_STATE_TOPIC, p)
      const shard = this.shards.get(p)
      const leads = partition?.isLeader === true
      if (shard && (!leads || shard.coordinatorEpoch !== partition?.leaderEpoch)) this.unload(shard)
      if (leads && partition && this.shards.get(p) === undefined) this.startLoading(partition)
    }
  }

  private startLoading(partition: Partition): void {
    const shard: TransactionShard = {
      partition: partition.partition,
      coordinatorEpoch: partition.leaderEpoch,
      loading: true,
      unloaded: false,
      transactions: new Map(),
    }
    this.shards.set(shard.partition, shard)
    const started = this.host.clock.monotonicMs()
    this.load(shard, partition).then(
      (records) => {
        if (shard.unloaded) return
        shard.loading = false
        this.host.logger.info(
          {
            partition: shard.partition,
            coordinatorEpoch: shard.coordinatorEpoch,
            transactionalIds: shard.transactions.size,
            records,
            tookMs: Math.round(this.host.clock.monotonicMs() - started),
          },
          'transaction coordinator loaded __transaction_state partition',
        )
        this.onLoaded(shard)
      },
      (error: unknown) => {
        this.host.logger.error(
          { err: error, partition: shard.partition },
          'loading __transaction_state failed',
        )
        // Answer NOT_COORDINATOR rather than loading forever; the next leadership change retries.
        if (!shard.unloaded) this.unload(shard)
      },
    )
  }

  /** Replays the partition from its log start to its log end; the last record of an id wins. */
  private async load(shard: TransactionShard, partition: Partition): Promise<number> {
    const log = partition.log
    const end = log.logEndOffset
    let offset = log.logStartOffset
    let count = 0
    while (offset < end && !shard.unloaded) {
      const info = await log.read(offset, {
        maxBytes: this.config.transactionStateLogLoadBufferSize,
        maxOffset: end,
        minOneMessage: true,
      })
      if (info.sizeInBytes === 0) break
      for (const chunk of info.records) {
        for (const span of iterateBatches(chunk)) {
          const batch = await decodeRecordBatch(chunk, span.at)
          if (batch.isControl) continue
          for (const record of batch.records) {
            if (record.key === null) continue
            const transactionalId = decodeTransactionLogKey(record.key)
            if (transactionalId === undefined) continue
            count++
            if (record.value === null) {
              shard.transactions.delete(transactionalId)
              continue
            }
            const value = decodeTransactionLogValue(record.value)
            shard.transactions.set(
              transactionalId,
              new TransactionMetadata(transactionalId, { ...value, lastProducerEpoch: NO_PRODUCER_EPOCH }),
            )
          }
        }
      }
      offset = info.nextOffset
    }
    return count
  }

  private unload(shard: TransactionShard): void {
    shard.unloaded = true
    if (this.shards.get(shard.partition) === shard) this.shards.delete(shard.partition)
    if (!shard.loading)
      this.host.logger.info(
        { partition: shard.partition },
        'transaction coordinator unloaded __transaction_state partition',
      )
  }

  // ---- routing ---------------------------------------------------------------------------

  partitionFor(transactionalId: string): number {
    const topic = this.host.metadataImage().topics.get(TRANSACTION_STATE_TOPIC)
    const count = topic?.partitions.length ?? this.config.transactionStateLogNumPartitions
    return partitionForTransactionalId(transactionalId, count)
  }

  /**
   * The coordinator state of `transactionalId` here, or the error a client must see:
   * NOT_COORDINATOR when another broker (or none) leads its partition,
   * COORDINATOR_LOAD_IN_PROGRESS while this one loads it.
   */
  getTransactionState(transactionalId: string): TransactionStateEntry | number {
    const topic = this.host.metadataImage().topics.get(TRANSACTION_STATE_TOPIC)
    if (!topic || topic.partitions.length === 0) return ErrorCode.NOT_COORDINATOR
    const p = partitionForTransactionalId(transactionalId, topic.partitions.length)
    const shard = this.shards.get(p)
    if (!shard)
      return topic.partitions[p].leader === this.host.nodeId
        ? ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        : ErrorCode.NOT_COORDINATOR
    const partition = this.host.replicaManager.getPartition(TRANSACTION_STATE_TOPIC, p)
    if (!partition?.isLeader || partition.leaderEpoch !== shard.coordinatorEpoch)
      return ErrorCode.NOT_COORDINATOR
    if (shard.loading) return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return { shard, metadata: shard.transactions.get(transactionalId) }
  }

  /** Adds freshly created metadata unless another request created it meanwhile; returns the one kept. */
  putIfNotExists(shard: TransactionShard, metadata: TransactionMetadata): TransactionMetadata {
    const existing = shard.transactions.get(metadata.transactionalId)
    if (existing) return existing
    shard.transactions.set(metadata.transactionalId, metadata)
    return metadata
  }

  // ---- writing ---------------------------------------------------------------------------

  /**
   * Writes a prepared change with acks=all and applies it if this broker is still the
   * coordinator of that epoch. Resolves with the error a transactional client should see
   * (never rejects). `retryOnError` keeps the change pending for a retry instead of
   * dropping it (the Complete* write after the markers).
   */
  async appendTransactionToLog(
    metadata: TransactionMetadata,
    coordinatorEpoch: number,
    transit: TransactionTransit,
    retryOnError: (errorCode: number) => boolean = () => false,
  ): Promise<number> {
    const transactionalId = metadata.transactionalId
    const partition = this.partitionFor(transactionalId)
    const value =
      transit.state === TransactionState.Dead
        ? null
        : encodeTransactionLogValue({
            producerId: transit.producerId,
            producerEpoch: transit.producerEpoch,
            txnTimeoutMs: transit.txnTimeoutMs,
            state: transit.state,
            partitions: transit.partitions,
            txnLastUpdateTimestampMs: transit.txnLastUpdateTimestampMs,
            txnStartTimestampMs: transit.txnStartTimestampMs,
          })
    const batch = encodeRecordBatchSync({
      records: [{ key: encodeTransactionLogKey(transactionalId), value }],
      defaultTimestamp: this.host.clock.nowMs(),
    })
    let errorCode: number
    try {
      const result = await this.host.replicaManager.appendToLeader(
        TRANSACTION_STATE_TOPIC,
        partition,
        batch,
        -1,
        transit.txnTimeoutMs,
      )
      errorCode = appendError(result.errorCode)
    } catch (error) {
      const code = toErrorCode(error)
      if (code === null)
        this.host.logger.error({ err: error, transactionalId }, 'append to __transaction_state failed')
      errorCode = code === null ? ErrorCode.UNKNOWN_SERVER_ERROR : appendError(code)
    }
    // Re-check after the await: the partition may have moved, and with it the coordinator.
    const entry = this.getTransactionState(transactionalId)
    const sameCoordinator =
      typeof entry !== 'number' &&
      entry.shard.coordinatorEpoch === coordinatorEpoch &&
      entry.metadata === metadata
    if (!sameCoordinator) {
      if (errorCode === ErrorCode.NONE)
        this.host.logger.info({ transactionalId }, 'transaction coordinator moved while appending its state')
      return ErrorCode.NOT_COORDINATOR
    }
    if (errorCode === ErrorCode.NONE) {
      metadata.completeTransition(transit)
      if (transit.state === TransactionState.Dead) entry.shard.transactions.delete(transactionalId)
      return ErrorCode.NONE
    }
    if (!retryOnError(errorCode)) metadata.abandonTransition()
    this.host.logger.info(
      { transactionalId, errorCode, state: transit.state },
      'transaction state not written to __transaction_state',
    )
    return errorCode
  }

  // ---- FindCoordinator ---------------------------------------------------------------------

  findCoordinator(transactionalId: string): Promise<CoordinatorLocation> {
    return locateCoordinator(
      {
        topic: TRANSACTION_STATE_TOPIC,
        nodeId: this.host.nodeId,
        clock: this.host.clock,
        logger: this.host.logger,
        metadataImage: () => this.host.metadataImage(),
        createTopic: () => this.createTopic(),
        partitionFor: partitionForTransactionalId,
        isLoaded: (p) => this.shards.get(p)?.loading === false,
        isStopped: () => this.stopped,
      },
      transactionalId,
    )
  }

  /**
   * Creates __transaction_state on first use, as Kafka does: compacted, with
   * transaction.state.log.num.partitions partitions and
   * transaction.state.log.replication.factor replicas capped at the live brokers. Its
   * min.insync.replicas (transaction.state.log.min.isr) is capped at that factor too, or a
   * cluster smaller than the factor could never write a transaction.
   */
  private createTopic(): Promise<void> {
    const live = Math.max(1, this.host.metadataImage().brokers.size)
    const replicationFactor = Math.min(this.config.transactionStateLogReplicationFactor, live)
    const minIsr = Math.min(this.config.transactionStateLogMinIsr, replicationFactor)
    this.creatingTopic ??= this.host.topicAdmin
      .ensureInternalTopic({
        name: TRANSACTION_STATE_TOPIC,
        partitions: this.config.transactionStateLogNumPartitions,
        replicationFactor: this.config.transactionStateLogReplicationFactor,
        configs: {
          'cleanup.policy': 'compact',
          'compression.type': 'uncompressed',
          'min.insync.replicas': String(minIsr),
          'segment.bytes': String(this.config.transactionStateLogSegmentBytes),
          'unclean.leader.election.enable': 'false',
        },
      })
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

/** Kafka's mapping of __transaction_state append errors to what transactional clients see. */
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
    case ErrorCode.MESSAGE_TOO_LARGE:
    case ErrorCode.RECORD_LIST_TOO_LARGE:
      return ErrorCode.UNKNOWN_SERVER_ERROR
    default:
      return code
  }
}
