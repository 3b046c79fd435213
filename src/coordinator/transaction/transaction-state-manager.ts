/**
 * The transaction coordinator's state (Kafka's TransactionStateManager) on the coordinator
 * runtime (runtime/coordinator-runtime.ts): one TransactionShard per `__transaction_state`
 * partition this broker leads, loaded and dropped by the runtime. The coordinator epoch of
 * a shard is the partition's leader epoch, so markers sent by a coordinator that lost the
 * partition are fenced by the leaders. Changes are prepared on the metadata, appended with
 * acks=all and applied only once committed.
 */

import { ErrorCode } from '../../protocol/error-codes.js'
import type { CoordinatorLocation } from '../coordinator-locator.js'
import { javaStringHashCode } from '../group.js'
import {
  CoordinatorRuntime,
  type CoordinatorRuntimeHost,
  type ShardContext,
} from '../runtime/coordinator-runtime.js'
import type { CoordinatorSerde, CoordinatorShard, ReplayedBatch } from '../runtime/coordinator-shard.js'
import {
  decodeTransactionLogKey,
  decodeTransactionLogValue,
  encodeTransactionLogKey,
  encodeTransactionLogValue,
  TRANSACTION_STATE_TOPIC,
  type TransactionLogValue,
} from './transaction-log.js'
import {
  NO_PRODUCER_EPOCH,
  TransactionMetadata,
  TransactionState,
  type TransactionTransit,
} from './transaction-metadata.js'

/** What the transaction coordinator needs from its broker. */
export type TransactionHost = CoordinatorRuntimeHost

export interface TransactionStateConfig {
  readonly transactionStateLogNumPartitions: number
  readonly transactionStateLogReplicationFactor: number
  readonly transactionStateLogMinIsr: number
  readonly transactionStateLogSegmentBytes: number
  readonly transactionStateLogLoadBufferSize: number
}

/** One `__transaction_state` record: a transactional id's state, or its tombstone. */
export interface TransactionLogRecord {
  readonly transactionalId: string
  readonly value: TransactionLogValue | null
}

const TRANSACTION_LOG_SERDE: CoordinatorSerde<TransactionLogRecord> = {
  serialize: (r) => ({
    key: encodeTransactionLogKey(r.transactionalId),
    value: r.value === null ? null : encodeTransactionLogValue(r.value),
  }),
  deserialize: (key, value) => {
    const transactionalId = decodeTransactionLogKey(key)
    if (transactionalId === undefined) return undefined
    return { transactionalId, value: value === null ? null : decodeTransactionLogValue(value) }
  },
}

/** The transactions of one `__transaction_state` partition led here. */
export class TransactionShard implements CoordinatorShard<TransactionLogRecord> {
  readonly transactions = new Map<string, TransactionMetadata>()

  constructor(
    private readonly context: ShardContext<TransactionShard>,
    private readonly onLoadedShard: (shard: TransactionShard) => void,
  ) {}

  get partition(): number {
    return this.context.partition
  }

  /** The leader epoch of the partition when loading began. */
  get coordinatorEpoch(): number {
    return this.context.epoch
  }

  get unloaded(): boolean {
    return this.context.state === 'closed'
  }

  /** The last record of an id wins. */
  replay(batch: ReplayedBatch<TransactionLogRecord>): void {
    for (const { transactionalId, value } of batch.records) {
      if (value === null) this.transactions.delete(transactionalId)
      else
        this.transactions.set(
          transactionalId,
          new TransactionMetadata(transactionalId, { ...value, lastProducerEpoch: NO_PRODUCER_EPOCH }),
        )
    }
  }

  /** Markers in `__transaction_state` are none of its business. */
  replayEndTransactionMarker(): void {}

  onLoaded(): void {
    this.onLoadedShard(this)
  }

  onUnloaded(): void {}

  summary() {
    return { transactionalIds: this.transactions.size }
  }
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
  private readonly runtime: CoordinatorRuntime<TransactionShard, TransactionLogRecord>

  constructor(
    private readonly host: TransactionHost,
    readonly config: TransactionStateConfig,
    /** Called once a shard is loaded (the coordinator resends the markers of Prepare* states). */
    onLoaded: (shard: TransactionShard) => void,
  ) {
    this.runtime = new CoordinatorRuntime(host, {
      topic: TRANSACTION_STATE_TOPIC,
      name: 'transaction coordinator',
      serde: TRANSACTION_LOG_SERDE,
      loadBufferSize: config.transactionStateLogLoadBufferSize,
      noTopicErrorCode: ErrorCode.NOT_COORDINATOR,
      partitionFor: partitionForTransactionalId,
      topicSpec: () => this.topicSpec(),
      newShard: (context) => new TransactionShard(context, onLoaded),
    })
  }

  shutdown(): void {
    this.runtime.shutdown()
  }

  /** The loaded shards (timeouts, expiration, ListTransactions). */
  loadedShards(): TransactionShard[] {
    return this.runtime.activeContexts().map((context) => context.shard)
  }

  /** True while some shard led here is still loading (ListTransactions' error). */
  get isLoading(): boolean {
    return this.runtime.isLoading
  }

  /** Called after each metadata image is applied: load newly led partitions, drop lost ones. */
  onPartitionsChanged(): void {
    this.runtime.onPartitionsChanged()
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
    const context = this.runtime.contextFor(transactionalId)
    if (typeof context === 'number') return context
    return { shard: context.shard, metadata: context.shard.transactions.get(transactionalId) }
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
  appendTransactionToLog(
    metadata: TransactionMetadata,
    coordinatorEpoch: number,
    transit: TransactionTransit,
    retryOnError: (errorCode: number) => boolean = () => false,
  ): Promise<number> {
    const transactionalId = metadata.transactionalId
    const context = this.runtime.context(this.partitionFor(transactionalId))
    // Kafka checks the coordinator epoch before appending: a moved coordinator writes nothing.
    if (context === undefined || context.epoch !== coordinatorEpoch)
      return Promise.resolve(ErrorCode.NOT_COORDINATOR)
    const value: TransactionLogValue | null =
      transit.state === TransactionState.Dead
        ? null
        : {
            producerId: transit.producerId,
            previousProducerId: transit.previousProducerId,
            nextProducerId: transit.nextProducerId,
            producerEpoch: transit.producerEpoch,
            txnTimeoutMs: transit.txnTimeoutMs,
            state: transit.state,
            partitions: transit.partitions,
            txnLastUpdateTimestampMs: transit.txnLastUpdateTimestampMs,
            txnStartTimestampMs: transit.txnStartTimestampMs,
            clientTransactionVersion: transit.clientTransactionVersion,
          }
    const moved = (): number => {
      this.host.logger.info({ transactionalId }, 'transaction coordinator moved while appending its state')
      return ErrorCode.NOT_COORDINATOR
    }
    return this.runtime.scheduleWriteOperation(context, {
      records: [{ transactionalId, value }],
      timeoutMs: transit.txnTimeoutMs,
      notCoordinator: moved,
      complete: (appendCode) => {
        const errorCode = transactionAppendError(appendCode)
        // The partition may have moved without the shard being unloaded yet, or the id's
        // metadata been replaced (expired and created again) meanwhile.
        const entry = this.getTransactionState(transactionalId)
        const sameCoordinator =
          typeof entry !== 'number' && entry.shard === context.shard && entry.metadata === metadata
        if (!sameCoordinator) return errorCode === ErrorCode.NONE ? moved() : ErrorCode.NOT_COORDINATOR
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
      },
    })
  }

  // ---- FindCoordinator ---------------------------------------------------------------------

  findCoordinator(transactionalId: string): Promise<CoordinatorLocation> {
    return this.runtime.findCoordinator(transactionalId)
  }

  /**
   * __transaction_state as Kafka creates it on first use: compacted, with
   * transaction.state.log.num.partitions partitions and
   * transaction.state.log.replication.factor replicas capped at the live brokers. Its
   * min.insync.replicas (transaction.state.log.min.isr) is capped at that factor too, or a
   * cluster smaller than the factor could never write a transaction.
   */
  private topicSpec() {
    const live = Math.max(1, this.host.metadataImage().brokers.size)
    const replicationFactor = Math.min(this.config.transactionStateLogReplicationFactor, live)
    const minIsr = Math.min(this.config.transactionStateLogMinIsr, replicationFactor)
    return {
      partitions: this.config.transactionStateLogNumPartitions,
      replicationFactor: this.config.transactionStateLogReplicationFactor,
      configs: {
        'cleanup.policy': 'compact',
        'compression.type': 'uncompressed',
        'min.insync.replicas': String(minIsr),
        'segment.bytes': String(this.config.transactionStateLogSegmentBytes),
        'unclean.leader.election.enable': 'false',
      },
    }
  }
}

/**
 * On top of the runtime's mapping (coordinator-runtime.ts), Kafka's TransactionStateManager
 * answers a state too large for the log UNKNOWN_SERVER_ERROR.
 */
function transactionAppendError(code: number): number {
  switch (code) {
    case ErrorCode.MESSAGE_TOO_LARGE:
    case ErrorCode.RECORD_LIST_TOO_LARGE:
      return ErrorCode.UNKNOWN_SERVER_ERROR
    default:
      return code
  }
}
