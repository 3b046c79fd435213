/**
 * The transaction coordinator (Kafka's TransactionCoordinator): InitProducerId with a
 * transactional id, AddPartitionsToTxn (and its verify-only form, KIP-890), AddOffsetsToTxn,
 * EndTxn, DescribeTransactions, ListTransactions, the proactive abort of transactions past
 * their timeout and the expiration of idle transactional ids. Every change is prepared on
 * the metadata (so a concurrent request sees CONCURRENT_TRANSACTIONS), written to
 * `__transaction_state` and applied once committed; a commit or abort is acknowledged once
 * its Prepare* state is written, then the markers go out and Complete* is written.
 */

import { assert } from '../../common/assert.js'
import { ExponentialBackoff } from '../../common/backoff.js'
import type { TimerHandle } from '../../common/clock.js'
import type { Transport } from '../../common/network.js'
import type { TransactionResult } from '../../common/transaction.js'
import type { BrokerId, ProducerId } from '../../common/types.js'
import { finalizedLevel, TRANSACTION_VERSION_FEATURE } from '../../metadata/features.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { toErrorCode } from '../../replication/kafka-error.js'
import type { CoordinatorLocation } from '../coordinator-locator.js'
import { CONSUMER_OFFSETS_TOPIC, partitionForGroup } from '../group.js'
import { decideEndV1, decideEndV2 } from './end-transaction.js'
import {
  type MarkerJob,
  type MarkerOutcome,
  type MarkerSenderConfig,
  TransactionMarkerSender,
} from './transaction-marker-sender.js'
import {
  isEpochExhausted,
  listPartitions,
  NO_PRODUCER_EPOCH,
  NO_PRODUCER_ID,
  stateFromName,
  stateName,
  supportsEpochBump,
  type TopicPartitions,
  TransactionMetadata,
  TransactionState,
  type TransactionTransit,
  type TransactionVersion,
  TV_0,
  transactionVersionOf,
} from './transaction-metadata.js'
import {
  type TransactionHost,
  type TransactionShard,
  type TransactionStateConfig,
  TransactionStateManager,
} from './transaction-state-manager.js'

export interface TransactionCoordinatorConfig extends TransactionStateConfig, MarkerSenderConfig {
  /** transaction.max.timeout.ms: the longest transaction.timeout.ms a producer may ask for. */
  readonly transactionMaxTimeoutMs: number
  readonly transactionalIdExpirationMs: number
  readonly abortTimedOutTransactionCleanupIntervalMs: number
  readonly removeExpiredTransactionalIdCleanupIntervalMs: number
  /** AddOffsetsToTxn adds the group's __consumer_offsets partition before that topic exists. */
  readonly offsetsTopicNumPartitions: number
  /** add.partitions.to.txn.retry.backoff.ms, for the leaders' verifier (transaction-verifier.ts). */
  readonly addPartitionsRetryBackoffMs: number
  /** add.partitions.to.txn.retry.backoff.max.ms */
  readonly addPartitionsRetryBackoffMaxMs: number
}

export interface TransactionCoordinatorHost extends TransactionHost {
  readonly producerIdManager: { generateProducerId(): Promise<ProducerId> }
  /** The inter-broker listener's transport (TLS and SASL when that listener has them). */
  readonly transport: Transport
  /** A broker's endpoint on the inter-broker listener; undefined when it is not registered. */
  brokerAddress(nodeId: BrokerId): { host: string; port: number } | undefined
}

export interface ProducerIdAndEpoch {
  readonly producerId: ProducerId
  readonly producerEpoch: number
}

export interface InitProducerIdResult extends ProducerIdAndEpoch {
  readonly errorCode: number
}

/** EndTxn's answer: v5 (transaction version 2) names the producer id and epoch to go on with. */
export type EndTxnResult = InitProducerIdResult

export interface PartitionCode {
  readonly topic: string
  readonly partition: number
  readonly errorCode: number
}

export interface TransactionDescription {
  readonly errorCode: number
  readonly transactionalId: string
  readonly transactionState: string
  readonly transactionTimeoutMs: number
  readonly transactionStartTimeMs: number
  readonly producerId: ProducerId
  readonly producerEpoch: number
  readonly topics: { topic: string; partitions: number[] }[]
}

export interface TransactionListing {
  readonly errorCode: number
  readonly unknownStateFilters: string[]
  readonly transactionStates: { transactionalId: string; producerId: ProducerId; transactionState: string }[]
}

export interface ListTransactionsFilter {
  readonly states: readonly string[]
  readonly producerIds: readonly bigint[]
  /** Only transactions running longer than this; negative: all. */
  readonly durationMs: number
}

/** Where markers go: the inter-broker sender, or a test's stand-in. */
export interface MarkerChannel {
  send(job: MarkerJob): Promise<MarkerOutcome>
  shutdown(): void
}

/**
 * How long a request waits for the transaction ahead of it to finish completing (markers
 * and Complete* in flight) before it is answered CONCURRENT_TRANSACTIONS. Completion takes
 * milliseconds; the client's retry backoff after CONCURRENT_TRANSACTIONS (kafkajs: 300 ms
 * and up) would otherwise set the pace of back-to-back transactions.
 */
const COMPLETION_WAIT_MAX_MS = 2000

/** A step that changes nothing and answers `errorCode`, or the change to write. */
type Prepared = { errorCode: number } | { transit: TransactionTransit; fence: boolean }

export class TransactionCoordinator {
  readonly stateManager: TransactionStateManager
  private readonly markers: MarkerChannel
  private readonly completionBackoff: ExponentialBackoff
  private readonly timers = new Set<TimerHandle>()
  /** Requests waiting for a transaction's completion, woken when it is written (or abandoned). */
  private readonly completionWaiters = new Map<TransactionMetadata, (() => void)[]>()
  private stopped = false

  constructor(
    private readonly host: TransactionCoordinatorHost,
    readonly config: TransactionCoordinatorConfig,
    markers?: MarkerChannel,
  ) {
    this.stateManager = new TransactionStateManager(host, config, (shard) => this.onShardLoaded(shard))
    this.markers = markers ?? new TransactionMarkerSender(host, config)
    this.completionBackoff = new ExponentialBackoff({
      initialMs: config.retryBackoffMs,
      maxMs: config.retryBackoffMaxMs,
    })
  }

  startup(): void {
    this.every(this.config.abortTimedOutTransactionCleanupIntervalMs, () => this.abortTimedOutTransactions())
    this.every(this.config.removeExpiredTransactionalIdCleanupIntervalMs, () =>
      this.removeExpiredTransactionalIds(),
    )
  }

  shutdown(): void {
    this.stopped = true
    for (const metadata of [...this.completionWaiters.keys()]) this.wakeCompletionWaiters(metadata)
    for (const timer of this.timers) timer.cancel()
    this.timers.clear()
    this.markers.shutdown()
    this.stateManager.shutdown()
  }

  onPartitionsChanged(): void {
    this.stateManager.onPartitionsChanged()
  }

  findCoordinator(transactionalId: string): Promise<CoordinatorLocation> {
    return this.stateManager.findCoordinator(transactionalId)
  }

  // ---- InitProducerId -------------------------------------------------------------------------

  /**
   * A transactional producer starts (or restarts): its epoch is bumped, fencing any older
   * instance; an ongoing transaction of the old epoch is aborted first and the caller told
   * CONCURRENT_TRANSACTIONS to retry. `expected` is a KIP-360 request's current id and epoch.
   */
  async initProducerId(
    transactionalId: string,
    txnTimeoutMs: number,
    expected: ProducerIdAndEpoch | null,
  ): Promise<InitProducerIdResult> {
    const fail = (errorCode: number): InitProducerIdResult => ({
      errorCode,
      producerId: NO_PRODUCER_ID,
      producerEpoch: NO_PRODUCER_EPOCH,
    })
    if (transactionalId === '') return fail(ErrorCode.INVALID_REQUEST)
    if (!this.isValidTimeout(txnTimeoutMs)) return fail(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    await this.awaitCompletion(transactionalId)
    const found = this.stateManager.getTransactionState(transactionalId)
    if (typeof found === 'number') return fail(found)
    // Producer ids come from the metadata store (an await): take one first when it may be needed.
    const needsId = found.metadata === undefined || found.metadata.isProducerEpochExhausted
    let newProducerId = NO_PRODUCER_ID
    if (needsId) {
      try {
        newProducerId = await this.host.producerIdManager.generateProducerId()
      } catch (error) {
        this.host.logger.warn({ err: error }, 'InitProducerId: no producer id available')
        return fail(toErrorCode(error) ?? ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
      }
    }
    const entry = this.stateManager.getTransactionState(transactionalId)
    if (typeof entry === 'number') return fail(entry)
    const metadata =
      entry.metadata ??
      this.stateManager.putIfNotExists(
        entry.shard,
        TransactionMetadata.created(transactionalId, newProducerId, txnTimeoutMs, this.host.clock.nowMs()),
      )
    if (metadata.isProducerEpochExhausted && newProducerId === NO_PRODUCER_ID)
      return fail(ErrorCode.CONCURRENT_TRANSACTIONS)
    const coordinatorEpoch = entry.shard.coordinatorEpoch
    const prepared = this.prepareInitProducerId(metadata, txnTimeoutMs, expected, newProducerId)
    if ('errorCode' in prepared) return fail(prepared.errorCode)
    const { transit } = prepared
    if (prepared.fence) {
      // Not the client's: the cluster's transaction version decides (Kafka: the server's TV).
      const errorCode = await this.endTransaction(
        transactionalId,
        transit.producerId,
        transit.producerEpoch,
        'abort',
        false,
        this.serverTransactionVersion(),
      )
      return fail(errorCode === ErrorCode.NONE ? ErrorCode.CONCURRENT_TRANSACTIONS : errorCode)
    }
    const errorCode = await this.stateManager.appendTransactionToLog(metadata, coordinatorEpoch, transit)
    if (errorCode !== ErrorCode.NONE) return fail(errorCode)
    return { errorCode, producerId: transit.producerId, producerEpoch: transit.producerEpoch }
  }

  private prepareInitProducerId(
    metadata: TransactionMetadata,
    txnTimeoutMs: number,
    expected: ProducerIdAndEpoch | null,
    newProducerId: ProducerId,
  ): Prepared {
    if (metadata.hasPendingTransition) return { errorCode: ErrorCode.CONCURRENT_TRANSACTIONS }
    // A KIP-360 request is fenced unless it names the current producer id, the metadata is
    // new, or it names the previous id with an exhausted epoch (a retried rotation).
    if (
      expected !== null &&
      !(
        metadata.producerEpoch === NO_PRODUCER_EPOCH ||
        expected.producerId === metadata.producerId ||
        (expected.producerId === metadata.previousProducerId && isEpochExhausted(expected.producerEpoch))
      )
    )
      return { errorCode: ErrorCode.PRODUCER_FENCED }
    const nowMs = this.host.clock.nowMs()
    switch (metadata.state) {
      case TransactionState.PrepareAbort:
      case TransactionState.PrepareCommit:
        return { errorCode: ErrorCode.CONCURRENT_TRANSACTIONS }
      case TransactionState.CompleteAbort:
      case TransactionState.CompleteCommit:
      case TransactionState.Empty: {
        if (
          metadata.isProducerEpochExhausted &&
          (expected === null || expected.producerEpoch === metadata.producerEpoch)
        )
          return {
            transit: metadata.prepareProducerIdRotation(
              newProducerId,
              txnTimeoutMs,
              nowMs,
              expected !== null,
            ),
            fence: false,
          }
        const transit = metadata.prepareIncrementProducerEpoch(
          txnTimeoutMs,
          expected?.producerEpoch ?? null,
          nowMs,
        )
        return transit === null ? { errorCode: ErrorCode.PRODUCER_FENCED } : { transit, fence: false }
      }
      case TransactionState.Ongoing:
        // The bumped epoch is never handed out: the client retries after the abort and
        // bumps again (rotating the producer id if this used the last epoch).
        return { transit: metadata.prepareFenceProducerEpoch(), fence: true }
      default:
        assert(
          false,
          () => `${metadata.transactionalId} in state ${stateName(metadata.state)} at InitProducerId`,
        )
    }
  }

  private isValidTimeout(txnTimeoutMs: number): boolean {
    return txnTimeoutMs > 0 && txnTimeoutMs <= this.config.transactionMaxTimeoutMs
  }

  // ---- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------

  /**
   * Adds partitions to the producer's transaction, starting it if none is ongoing. A
   * partition leader adds them for a transaction version 2 producer (AddPartitionsToTxn v5,
   * Produce v12), which also marks the transaction as one of that version.
   */
  async addPartitions(
    transactionalId: string,
    producer: ProducerIdAndEpoch,
    partitions: TopicPartitions,
    clientTransactionVersion: TransactionVersion = TV_0,
  ): Promise<number> {
    if (transactionalId === '') return ErrorCode.INVALID_REQUEST
    // A leader adding a TV2 producer's partition is not parked: it holds a verification
    // guard that the previous transaction's marker, arriving meanwhile, would void. It is
    // answered CONCURRENT_TRANSACTIONS at once (Kafka's answer), and the produce retried.
    if (!supportsEpochBump(clientTransactionVersion)) await this.awaitCompletion(transactionalId)
    const entry = this.stateManager.getTransactionState(transactionalId)
    if (typeof entry === 'number') return entry
    const metadata = entry.metadata
    if (!metadata || metadata.producerId !== producer.producerId) return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if (metadata.producerEpoch !== producer.producerEpoch) return ErrorCode.PRODUCER_FENCED
    if (metadata.hasPendingTransition || isPreparing(metadata.state)) return ErrorCode.CONCURRENT_TRANSACTIONS
    if (metadata.state === TransactionState.Ongoing && metadata.containsAll(partitions)) return ErrorCode.NONE
    const transit = metadata.prepareAddPartitions(
      partitions,
      this.host.clock.nowMs(),
      clientTransactionVersion,
    )
    return this.stateManager.appendTransactionToLog(metadata, entry.shard.coordinatorEpoch, transit)
  }

  /**
   * KIP-890: is each partition in the producer's ongoing transaction? Changes nothing. An
   * error that concerns the whole transaction is given for every partition.
   */
  verifyPartitions(
    transactionalId: string,
    producer: ProducerIdAndEpoch,
    partitions: TopicPartitions,
  ): PartitionCode[] {
    const every = (errorCode: number): PartitionCode[] =>
      listPartitions(partitions).flatMap(({ topic, partitions: ids }) =>
        ids.map((partition) => ({ topic, partition, errorCode })),
      )
    if (transactionalId === '') return every(ErrorCode.INVALID_REQUEST)
    const entry = this.stateManager.getTransactionState(transactionalId)
    if (typeof entry === 'number') return every(entry)
    const metadata = entry.metadata
    if (!metadata || metadata.producerId !== producer.producerId)
      return every(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if (metadata.producerEpoch !== producer.producerEpoch) return every(ErrorCode.PRODUCER_FENCED)
    // A change in flight is not checked (Kafka's handleVerifyPartitionsInTransaction): the
    // partitions answered are those already written, and a produce to one of them must not
    // wait for an AddPartitionsToTxn of others.
    if (isPreparing(metadata.state)) return every(ErrorCode.CONCURRENT_TRANSACTIONS)
    return listPartitions(partitions).flatMap(({ topic, partitions: ids }) =>
      ids.map((partition) => ({
        topic,
        partition,
        // Kafka 4.4's handleVerifyPartitionsInTransaction; the leader answers producers older
        // than Produce v11 INVALID_TXN_STATE instead (server/handlers/produce.ts).
        errorCode: metadata.hasPartition(topic, partition) ? ErrorCode.NONE : ErrorCode.TRANSACTION_ABORTABLE,
      })),
    )
  }

  /** Adds the group's __consumer_offsets partition, so TxnOffsetCommit's offsets get its markers. */
  addOffsets(transactionalId: string, producer: ProducerIdAndEpoch, groupId: string): Promise<number> {
    const offsets = this.host.metadataImage().topics.get(CONSUMER_OFFSETS_TOPIC)
    const count = offsets?.partitions.length ?? this.config.offsetsTopicNumPartitions
    const partition = partitionForGroup(groupId, count)
    return this.addPartitions(
      transactionalId,
      producer,
      new Map([[CONSUMER_OFFSETS_TOPIC, new Set([partition])]]),
    )
  }

  // ---- EndTxn ----------------------------------------------------------------------------

  /**
   * Commits or aborts the ongoing transaction: answered once PrepareCommit/PrepareAbort is
   * written; the markers and the Complete* state follow. `isFromClient` false is the
   * coordinator's own abort (fence or timeout), whose epoch was just bumped. The answer's
   * error code; see endTxn for transaction version 2's producer id and epoch.
   */
  async endTransaction(
    transactionalId: string,
    producerId: ProducerId,
    producerEpoch: number,
    result: TransactionResult,
    isFromClient = true,
    clientTransactionVersion: TransactionVersion = TV_0,
  ): Promise<number> {
    const answer = await this.endTxn(
      transactionalId,
      { producerId, producerEpoch },
      result,
      isFromClient,
      clientTransactionVersion,
    )
    return answer.errorCode
  }

  /**
   * EndTxn. With transaction version 2 (EndTxn v5) the epoch is bumped by every end, the
   * markers carry the bumped epoch, and the answer names the producer id and epoch the
   * producer continues with (a new id at epoch 0 once the epochs are exhausted); a retry of
   * an end already done is answered NONE with them. Below version 2 they are -1.
   */
  async endTxn(
    transactionalId: string,
    producer: ProducerIdAndEpoch,
    result: TransactionResult,
    isFromClient: boolean,
    clientTransactionVersion: TransactionVersion,
  ): Promise<EndTxnResult> {
    const fail = (errorCode: number): EndTxnResult => ({
      errorCode,
      producerId: NO_PRODUCER_ID,
      producerEpoch: NO_PRODUCER_EPOCH,
    })
    if (transactionalId === '') return fail(ErrorCode.INVALID_REQUEST)
    // The coordinator's own aborts must run in the same turn as the fence they complete.
    if (isFromClient) await this.awaitCompletion(transactionalId)
    const bumps = supportsEpochBump(clientTransactionVersion)
    // The last epoch's end moves the producer to a new id, taken now (an await) if needed.
    let nextProducerId = NO_PRODUCER_ID
    if (bumps && isFromClient && this.isEpochExhausted(transactionalId)) {
      try {
        nextProducerId = await this.host.producerIdManager.generateProducerId()
      } catch (error) {
        this.host.logger.warn({ err: error }, 'EndTxn: no producer id available')
        return fail(toErrorCode(error) ?? ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
      }
    }
    const entry = this.stateManager.getTransactionState(transactionalId)
    if (typeof entry === 'number') return fail(entry)
    const metadata = entry.metadata
    if (!metadata) return fail(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    const request = { ...producer, result, isFromClient }
    const decision = bumps ? decideEndV2(metadata, request) : decideEndV1(metadata, request)
    if ('errorCode' in decision) {
      if (decision.errorCode === ErrorCode.INVALID_TXN_STATE) this.logInvalidTransition(metadata, result)
      return decision.current
        ? {
            errorCode: decision.errorCode,
            producerId: metadata.producerId,
            producerEpoch: metadata.producerEpoch,
          }
        : fail(decision.errorCode)
    }
    const exhausted = bumps && !decision.isEpochFence && metadata.isProducerEpochExhausted
    if (exhausted && nextProducerId === NO_PRODUCER_ID) return fail(ErrorCode.CONCURRENT_TRANSACTIONS)
    if (decision.isEpochFence) {
      // The fence is not written on its own: its bumped epoch rides on the PrepareAbort.
      // With TV2 the abort bumps the epoch itself, once (as Kafka 4.4: a timed-out
      // transaction ends one epoch up, and the producer's abort of it is then a retry).
      metadata.pendingState = null
      if (!bumps) {
        metadata.producerEpoch = producer.producerEpoch
        metadata.lastProducerEpoch = NO_PRODUCER_EPOCH
      }
    }
    const coordinatorEpoch = entry.shard.coordinatorEpoch
    const transit = metadata.prepareAbortOrCommit(
      decision.nextState,
      this.host.clock.nowMs(),
      clientTransactionVersion,
      exhausted ? nextProducerId : NO_PRODUCER_ID,
      decision.noPartitionAdded,
    )
    const errorCode = await this.stateManager.appendTransactionToLog(metadata, coordinatorEpoch, transit)
    if (errorCode !== ErrorCode.NONE) {
      // The fence's epoch is not bumped again by its retry (TV1: it stays bumped in memory).
      if (decision.isEpochFence && this.isCurrent(entry.shard, metadata)) metadata.hasFailedEpochFence = true
      return fail(errorCode)
    }
    // Re-check after the await before sending markers in this coordinator epoch's name.
    const recheck = this.recheckPrepared(entry.shard, metadata, producer, decision.nextState, bumps)
    if (recheck !== ErrorCode.NONE) {
      if (recheck === ErrorCode.INVALID_TXN_STATE) this.logInvalidTransition(metadata, result)
      return fail(recheck)
    }
    const complete = this.sendMarkers(entry.shard, metadata, result)
    return bumps
      ? { errorCode: ErrorCode.NONE, producerId: complete.producerId, producerEpoch: complete.producerEpoch }
      : fail(ErrorCode.NONE)
  }

  /** The finalized `transaction.version`: what the coordinator's own aborts follow. */
  private serverTransactionVersion(): TransactionVersion {
    return transactionVersionOf(finalizedLevel(this.host.metadataImage(), TRANSACTION_VERSION_FEATURE))
  }

  private isEpochExhausted(transactionalId: string): boolean {
    const entry = this.stateManager.getTransactionState(transactionalId)
    return typeof entry !== 'number' && entry.metadata?.isProducerEpochExhausted === true
  }

  /** After Prepare* is written: still ours, the same producer, and nothing else in flight? */
  private recheckPrepared(
    shard: TransactionShard,
    metadata: TransactionMetadata,
    producer: ProducerIdAndEpoch,
    expectedState: TransactionState,
    bumped: boolean,
  ): number {
    if (!this.isCurrent(shard, metadata)) return ErrorCode.NOT_COORDINATOR
    if (metadata.producerId !== producer.producerId) return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    const epochs = bumped ? [producer.producerEpoch, producer.producerEpoch + 1] : [producer.producerEpoch]
    if (!epochs.includes(metadata.producerEpoch)) return ErrorCode.PRODUCER_FENCED
    if (metadata.hasPendingTransition) return ErrorCode.CONCURRENT_TRANSACTIONS
    if (metadata.state !== expectedState) return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.NONE
  }

  private logInvalidTransition(metadata: TransactionMetadata, result: TransactionResult): void {
    this.host.logger.debug(
      { transactionalId: metadata.transactionalId, state: stateName(metadata.state), result },
      'EndTxn in a state that cannot take it',
    )
  }

  private isCurrent(shard: TransactionShard, metadata: TransactionMetadata): boolean {
    return !shard.unloaded && shard.transactions.get(metadata.transactionalId) === metadata
  }

  /**
   * Markers to every partition of a Prepare* transaction, then its Complete* state. The
   * Complete* change is prepared now, so new requests get CONCURRENT_TRANSACTIONS until done;
   * it is returned (the producer id and epoch the producer continues with).
   */
  private sendMarkers(
    shard: TransactionShard,
    metadata: TransactionMetadata,
    result: TransactionResult,
  ): TransactionTransit {
    const complete = metadata.prepareComplete(this.host.clock.nowMs())
    const job = {
      transactionalId: metadata.transactionalId,
      producerId: metadata.producerId,
      producerEpoch: metadata.producerEpoch,
      coordinatorEpoch: shard.coordinatorEpoch,
      result,
      pending: metadata,
      isCurrent: () => !this.stopped && this.isCurrent(shard, metadata),
    }
    this.markers
      .send(job)
      .then(async (outcome) => {
        // Fenced or no longer ours: the Prepare* state stays in the log for whoever coordinates next.
        if (outcome !== 'written') return
        await this.writeCompletion(shard, metadata, complete)
      })
      .catch((error: unknown) =>
        this.host.logger.error(
          { err: error, transactionalId: metadata.transactionalId },
          'completing a transaction failed',
        ),
      )
      .finally(() => this.wakeCompletionWaiters(metadata))
    return complete
  }

  /** Waits (bounded) while the transactional id's last transaction is still being completed. */
  private async awaitCompletion(transactionalId: string): Promise<void> {
    const entry = this.stateManager.getTransactionState(transactionalId)
    if (typeof entry === 'number' || entry.metadata === undefined) return
    const metadata = entry.metadata
    const completing =
      metadata.pendingState === TransactionState.CompleteCommit ||
      metadata.pendingState === TransactionState.CompleteAbort
    if (!completing || this.stopped) return
    await new Promise<void>((resolve) => {
      const waiters = this.completionWaiters.get(metadata) ?? []
      const timer = this.host.clock.setTimeout(() => {
        const left = this.completionWaiters.get(metadata)?.filter((w) => w !== wake)
        if (left && left.length > 0) this.completionWaiters.set(metadata, left)
        else this.completionWaiters.delete(metadata)
        resolve()
      }, COMPLETION_WAIT_MAX_MS)
      const wake = () => {
        timer.cancel()
        resolve()
      }
      waiters.push(wake)
      this.completionWaiters.set(metadata, waiters)
    })
  }

  private wakeCompletionWaiters(metadata: TransactionMetadata): void {
    const waiters = this.completionWaiters.get(metadata)
    this.completionWaiters.delete(metadata)
    for (const wake of waiters ?? []) wake()
  }

  /**
   * Writes Complete*, retrying while this broker coordinates the transaction (Kafka's
   * tryAppendToLog retries COORDINATOR_NOT_AVAILABLE; any other failure would leave the
   * transaction in Prepare* here with nobody to finish it, so it is retried too). Once this
   * broker is no longer the coordinator, the next one resends the markers and completes it.
   */
  private async writeCompletion(
    shard: TransactionShard,
    metadata: TransactionMetadata,
    complete: TransactionTransit,
  ): Promise<void> {
    const retriable = (code: number) =>
      code !== ErrorCode.NOT_COORDINATOR && code !== ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    for (let attempt = 1; this.isCurrent(shard, metadata) && !this.stopped; attempt++) {
      const errorCode = await this.stateManager.appendTransactionToLog(
        metadata,
        shard.coordinatorEpoch,
        complete,
        retriable,
      )
      if (errorCode === ErrorCode.NONE) return
      if (!retriable(errorCode)) {
        this.host.logger.info(
          { transactionalId: metadata.transactionalId, errorCode },
          'transaction completion not written; the next coordinator completes it',
        )
        return
      }
      await this.sleep(this.completionBackoff.delayMs(attempt))
    }
  }

  /** A freshly loaded shard: transactions that were being committed or aborted get their markers again. */
  private onShardLoaded(shard: TransactionShard): void {
    for (const metadata of shard.transactions.values()) {
      if (metadata.state === TransactionState.PrepareCommit) this.sendMarkers(shard, metadata, 'commit')
      else if (metadata.state === TransactionState.PrepareAbort) this.sendMarkers(shard, metadata, 'abort')
    }
  }

  // ---- timeouts and expiration ---------------------------------------------------------------

  /** Ongoing transactions older than their timeout are aborted, their producer fenced. */
  abortTimedOutTransactions(): void {
    const nowMs = this.host.clock.nowMs()
    for (const shard of this.stateManager.loadedShards())
      for (const metadata of [...shard.transactions.values()]) {
        if (metadata.state !== TransactionState.Ongoing || metadata.hasPendingTransition) continue
        if (metadata.txnStartTimestampMs + metadata.txnTimeoutMs >= nowMs) continue
        const fence = metadata.prepareFenceProducerEpoch()
        const transactionalId = metadata.transactionalId
        this.host.logger.info(
          { transactionalId, producerId: String(metadata.producerId), timeoutMs: metadata.txnTimeoutMs },
          'aborting a transaction past its timeout',
        )
        this.endTransaction(
          transactionalId,
          fence.producerId,
          fence.producerEpoch,
          'abort',
          false,
          this.serverTransactionVersion(),
        ).then(
          (errorCode) => {
            if (errorCode !== ErrorCode.NONE)
              this.host.logger.info(
                { transactionalId, errorCode },
                'timed-out transaction not aborted yet; retried',
              )
          },
          (error: unknown) =>
            this.host.logger.error(
              { err: error, transactionalId },
              'aborting a timed-out transaction failed',
            ),
        )
      }
  }

  /** Transactional ids idle longer than transactional.id.expiration.ms are removed (tombstones). */
  removeExpiredTransactionalIds(): void {
    const nowMs = this.host.clock.nowMs()
    for (const shard of this.stateManager.loadedShards())
      for (const metadata of [...shard.transactions.values()]) {
        const idle =
          metadata.state === TransactionState.Empty ||
          metadata.state === TransactionState.CompleteCommit ||
          metadata.state === TransactionState.CompleteAbort
        if (!idle || metadata.hasPendingTransition) continue
        if (metadata.txnLastUpdateTimestampMs > nowMs - this.config.transactionalIdExpirationMs) continue
        const transit = metadata.prepareDead()
        const transactionalId = metadata.transactionalId
        this.stateManager.appendTransactionToLog(metadata, shard.coordinatorEpoch, transit).then(
          (errorCode) => {
            if (errorCode === ErrorCode.NONE)
              this.host.logger.info({ transactionalId }, 'transactional id expired')
          },
          (error: unknown) =>
            this.host.logger.error({ err: error, transactionalId }, 'expiring a transactional id failed'),
        )
      }
  }

  // ---- admin -------------------------------------------------------------------------------

  describe(transactionalIds: readonly string[]): TransactionDescription[] {
    return transactionalIds.map((transactionalId) => {
      const none = {
        transactionalId,
        transactionState: '',
        transactionTimeoutMs: 0,
        transactionStartTimeMs: -1,
        producerId: NO_PRODUCER_ID,
        producerEpoch: NO_PRODUCER_EPOCH,
        topics: [],
      }
      if (transactionalId === '') return { ...none, errorCode: ErrorCode.TRANSACTIONAL_ID_NOT_FOUND }
      const entry = this.stateManager.getTransactionState(transactionalId)
      if (typeof entry === 'number') return { ...none, errorCode: entry }
      const metadata = entry.metadata
      if (!metadata || metadata.state === TransactionState.Dead)
        return { ...none, errorCode: ErrorCode.TRANSACTIONAL_ID_NOT_FOUND }
      return {
        errorCode: ErrorCode.NONE,
        transactionalId,
        transactionState: stateName(metadata.state),
        transactionTimeoutMs: metadata.txnTimeoutMs,
        transactionStartTimeMs: metadata.txnStartTimestampMs,
        producerId: metadata.producerId,
        producerEpoch: metadata.producerEpoch,
        topics: listPartitions(metadata.partitions),
      }
    })
  }

  list(filter: ListTransactionsFilter): TransactionListing {
    const states = new Set<TransactionState>()
    const unknownStateFilters: string[] = []
    for (const name of filter.states) {
      const state = stateFromName(name)
      if (state === undefined) unknownStateFilters.push(name)
      else states.add(state)
    }
    const producerIds = new Set(filter.producerIds)
    const nowMs = this.host.clock.nowMs()
    const transactionStates: TransactionListing['transactionStates'] = []
    for (const shard of this.stateManager.loadedShards())
      for (const metadata of shard.transactions.values()) {
        if (metadata.state === TransactionState.Dead) continue
        if (producerIds.size > 0 && !producerIds.has(metadata.producerId)) continue
        if (filter.states.length > 0 && !states.has(metadata.state)) continue
        if (filter.durationMs >= 0 && nowMs - metadata.txnStartTimestampMs <= filter.durationMs) continue
        transactionStates.push({
          transactionalId: metadata.transactionalId,
          producerId: metadata.producerId,
          transactionState: stateName(metadata.state),
        })
      }
    const errorCode = this.stateManager.isLoading ? ErrorCode.COORDINATOR_LOAD_IN_PROGRESS : ErrorCode.NONE
    return { errorCode, unknownStateFilters, transactionStates }
  }

  // ---- timers --------------------------------------------------------------------------------

  private every(intervalMs: number, task: () => void): void {
    const timer = this.host.clock.setTimeout(() => {
      this.timers.delete(timer)
      if (this.stopped) return
      task()
      this.every(intervalMs, task)
    }, intervalMs)
    this.timers.add(timer)
  }

  private sleep(delayMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = this.host.clock.setTimeout(() => {
        this.timers.delete(timer)
        resolve()
      }, delayMs)
      this.timers.add(timer)
    })
  }
}

function isPreparing(state: TransactionState): boolean {
  return state === TransactionState.PrepareCommit || state === TransactionState.PrepareAbort
}
