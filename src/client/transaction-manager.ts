/**
 * The idempotent producer's sequence bookkeeping and the transactional producer's state
 * machine, as Kafka's TransactionManager keeps both for the Java producer. Pure: no
 * sockets, no timers (the requests to the coordinators are transaction-requests.ts'). The sender asks it whether a partition may send, has it stamp each
 * new batch, and reports every answer; when it gives up the producer id (a reset) the
 * sender fetches a new one with InitProducerId and hands it back.
 *
 * Rules. Each partition numbers its batches from sequence 0 under the current producer id
 * and epoch; a retried batch keeps its sequence (and its bytes). At most 5 batches of a
 * partition are in flight. A retried batch goes only when nothing else of its partition is
 * in flight, so retries land in sequence order. OUT_OF_ORDER_SEQUENCE_NUMBER is transient
 * while an earlier sequence is unacknowledged, and a real gap on the very next sequence
 * (that batch fails). UNKNOWN_PRODUCER_ID and INVALID_PRODUCER_EPOCH reset the partition
 * (KIP-360 for a non-transactional producer): a new producer id (the "epoch bump" of an
 * idempotent producer is a new InitProducerId), and the partition's unacknowledged batches
 * re-stamped from sequence 0 once none of them is in flight; other partitions move to the
 * new id when they are idle. A batch that fails for good resets its partition, so the
 * batches behind it do not wait for a sequence that never comes.
 *
 * Unresolved sequences (Java's maybeResolveSequences): a batch that expired after it was
 * sent may be in the log, so re-stamping the batches behind it could write them twice.
 * They keep their sequences and go first; new batches wait. Once none of them is left, the
 * partition keeps its producer id if every stamped sequence was acknowledged (the expired
 * batch was written: a later one would have met a gap otherwise), or is reset if not.
 */
import { assert } from '../common/assert.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { ProducerFencedError, TransactionAbortableError, TransactionStateError } from './errors.js'

/**
 * Transactions (a `transactionalId`), Java's states and transitions:
 *   UNINITIALIZED → INITIALIZING (initTransactions: InitProducerId with the transactional
 *   id, which fences older producers of the id and ends their open transaction) → READY
 *   → IN_TRANSACTION (beginTransaction) → COMMITTING_TRANSACTION / ABORTING_TRANSACTION
 *   (EndTxn once the batches are flushed) → READY.
 * A partition's batches go only once AddPartitionsToTxn added it. A failed batch or
 * request leaves ABORTABLE_ERROR: commit refuses, abortTransaction recovers. Fencing
 * (PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH from a coordinator) and authorization
 * failures are FATAL_ERROR: every later call throws, only close() is left. A
 * transaction that never added a partition or offsets ends without EndTxn.
 *
 * Transaction version 2 (KIP-890 part 2, Java's isTransactionV2Enabled, chosen at
 * initTransactions): no AddPartitionsToTxn (a partition joins the transaction with its
 * first Produce v12, so it may send at once) and no AddOffsetsToTxn (TxnOffsetCommit v5
 * adds the group); every EndTxn v5 bumps the epoch (a new producer id at epoch 0 when the
 * epoch would overflow) and answers it, and the next transaction uses it, every partition
 * again from sequence 0. That bump also does what version 1's client-side bump (an
 * InitProducerId after the abort of a failed batch) is for, so there is none.
 */
export type TransactionState =
  | 'UNINITIALIZED'
  | 'INITIALIZING'
  | 'READY'
  | 'IN_TRANSACTION'
  | 'COMMITTING_TRANSACTION'
  | 'ABORTING_TRANSACTION'
  | 'ABORTABLE_ERROR'
  | 'FATAL_ERROR'

/**
 * Java's State.isTransitionValid: the states each state may be entered from. Plus the
 * self-transitions of INITIALIZING, COMMITTING and ABORTING: the same call made again
 * after it timed out (max.block.ms), where Java keeps the pending request's result.
 */
const VALID_SOURCES: Readonly<Record<TransactionState, readonly TransactionState[]>> = {
  UNINITIALIZED: ['READY'],
  INITIALIZING: ['UNINITIALIZED', 'INITIALIZING', 'ABORTING_TRANSACTION'],
  READY: ['INITIALIZING', 'COMMITTING_TRANSACTION', 'ABORTING_TRANSACTION'],
  IN_TRANSACTION: ['READY'],
  COMMITTING_TRANSACTION: ['IN_TRANSACTION', 'COMMITTING_TRANSACTION'],
  ABORTING_TRANSACTION: ['IN_TRANSACTION', 'ABORTABLE_ERROR', 'ABORTING_TRANSACTION'],
  ABORTABLE_ERROR: ['IN_TRANSACTION', 'COMMITTING_TRANSACTION', 'ABORTABLE_ERROR'],
  FATAL_ERROR: [
    'UNINITIALIZED',
    'INITIALIZING',
    'READY',
    'IN_TRANSACTION',
    'COMMITTING_TRANSACTION',
    'ABORTING_TRANSACTION',
    'ABORTABLE_ERROR',
    'FATAL_ERROR',
  ],
}

/** Sequence numbers wrap after Int32 max, as Kafka's DefaultRecordBatch.incrementSequence. */
export const SEQUENCE_MODULUS = 2 ** 31
/** Batches per partition in flight for an idempotent producer (what a broker caches per producer). */
export const IDEMPOTENT_IN_FLIGHT_MAX = 5

/** What the bookkeeping reads and writes of a batch (ProducerBatch is one). */
export interface SequencedBatch {
  readonly topic: string
  readonly partition: number
  readonly recordCount: number
  readonly producerId: bigint
  readonly producerEpoch: number
  readonly baseSequence: number
  readonly hasSequence: boolean
  /** Set once the batch's sequence was given up (a reset): a gap on it is not a real one. */
  readonly sequenceReset: boolean
  stamp(producerId: bigint, producerEpoch: number, baseSequence: number, isTransactional?: boolean): void
  resetProducerState(): void
}

/**
 * What to do with a stamped batch after an error: 'retry' keeps its sequence, 'reset'
 * re-stamps its partition under a new producer id and retries, 'fail' fails it (and
 * resets the partition). `undefined` from canRetry leaves the error to the common rules.
 */
export type RetryVerdict = 'retry' | 'reset' | 'fail'

export interface ProducerIdAndEpoch {
  readonly producerId: bigint
  readonly producerEpoch: number
}

/** One partition's sequences under one producer id and epoch. */
interface PartitionSequences {
  producerId: bigint
  producerEpoch: number
  /** Sequence of the next new batch. */
  next: number
  /** Last sequence acknowledged under producerId/epoch; -1: none. */
  lastAcked: number
  /** Unacknowledged batches are re-stamped under a new producer id before anything else goes. */
  rewrite: boolean
  /** Last sequence of a batch that expired after it was sent; -1: none (see the file comment). */
  unresolvedLast: number
}

export function partitionKey(topic: string, partition: number): string {
  return `${topic}/${partition}`
}

export class TransactionManager {
  /** -1n: none yet, or a reset asked for a new one. */
  private producerId = -1n
  private producerEpoch = -1
  private readonly sequences = new Map<string, PartitionSequences>()
  private resets = 0
  private stateValue: TransactionState = 'UNINITIALIZED'
  private lastErrorValue: Error | null = null
  /** Partitions AddPartitionsToTxn added to the ongoing transaction. */
  private readonly partitionsInTransaction = new Set<string>()
  /** Partitions a send touched that are not added yet, nor being added. */
  private readonly newPartitions = new Map<string, { topic: string; partition: number }>()
  private readonly partitionsBeingAdded = new Set<string>()
  /** A partition or the group offsets were added: EndTxn is needed to end the transaction. */
  private transactionStarted = false
  /**
   * A batch of the transaction failed with its sequence possibly written: after the abort,
   * InitProducerId with the current id and epoch bumps the epoch (KIP-360) so every
   * partition starts again at sequence 0.
   */
  private epochBumpRequired = false
  /** Counts transactions begun: a send that waited (metadata, memory) checks it is still in its own. */
  private transactionCount = 0
  /** Transaction version 2 (see TransactionState's comment); set at initTransactions. */
  private transactionV2 = false

  constructor(
    /** transactional.id; null for an idempotent (or plain) producer. */
    readonly transactionalId: string | null = null,
  ) {}

  get isTransactional(): boolean {
    return this.transactionalId !== null
  }

  get state(): TransactionState {
    return this.stateValue
  }

  /** The error that put the producer in ABORTABLE_ERROR or FATAL_ERROR. */
  get lastError(): Error | null {
    return this.lastErrorValue
  }

  get hasFatalError(): boolean {
    return this.stateValue === 'FATAL_ERROR'
  }

  get hasAbortableError(): boolean {
    return this.stateValue === 'ABORTABLE_ERROR'
  }

  get needsEndTxn(): boolean {
    return this.transactionStarted
  }

  get needsEpochBump(): boolean {
    return this.epochBumpRequired
  }

  get currentTransaction(): number {
    return this.transactionCount
  }

  get isTransactionV2(): boolean {
    return this.transactionV2
  }

  // ---- transactions: state ---------------------------------------------------------------

  /** initTransactions: also after a timeout of an earlier call (the same InitProducerId again). */
  beginInitTransactions(): void {
    this.requireTransactional('initTransactions')
    this.maybeFailWithError()
    this.transitionTo('INITIALIZING')
  }

  /**
   * InitProducerId answered for the transactional id: a new epoch (or id), so every
   * partition's sequences start again at 0.
   */
  completeInitTransactions(producerId: bigint, producerEpoch: number, transactionV2?: boolean): void {
    assert(this.stateValue === 'INITIALIZING', () => `InitProducerId answered in ${this.stateValue}`)
    this.useProducerIdAndEpoch(producerId, producerEpoch)
    // The version is chosen by initTransactions; the epoch bump after an abort keeps it.
    if (transactionV2 !== undefined) this.transactionV2 = transactionV2
    this.epochBumpRequired = false
    this.transitionTo('READY')
    this.forgetTransaction()
  }

  /** A new epoch (or id): every partition's sequences start again at 0 under it. */
  private useProducerIdAndEpoch(producerId: bigint, producerEpoch: number): void {
    assert(producerId >= 0n && producerEpoch >= 0, () => `invalid producer id ${producerId}/${producerEpoch}`)
    this.producerId = producerId
    this.producerEpoch = producerEpoch
    this.sequences.clear()
  }

  beginTransaction(): void {
    this.requireTransactional('beginTransaction')
    this.maybeFailWithError()
    this.transitionTo('IN_TRANSACTION')
    this.transactionCount++
    this.transactionStarted = false
  }

  beginCommit(): void {
    this.requireTransactional('commitTransaction')
    this.maybeFailWithError()
    this.transitionTo('COMMITTING_TRANSACTION')
  }

  /** abortTransaction: from an ongoing transaction or an abortable error, not a fatal one. */
  beginAbort(): void {
    this.requireTransactional('abortTransaction')
    if (this.stateValue === 'FATAL_ERROR') this.maybeFailWithError()
    this.transitionTo('ABORTING_TRANSACTION')
    this.newPartitions.clear()
  }

  /**
   * EndTxn answered (or was not needed): ready for the next transaction. `next` is the id
   * and epoch EndTxn v5 answered (transaction version 2's bump), which the next transaction
   * uses; null when the answer named none (v4 and below answer -1).
   */
  completeTransaction(next: ProducerIdAndEpoch | null = null): void {
    this.transitionTo('READY')
    if (next !== null && next.producerId >= 0n)
      this.useProducerIdAndEpoch(next.producerId, next.producerEpoch)
    this.forgetTransaction()
  }

  private forgetTransaction(): void {
    this.lastErrorValue = null
    this.transactionStarted = false
    this.partitionsInTransaction.clear()
    this.newPartitions.clear()
    this.partitionsBeingAdded.clear()
  }

  /** Before the KIP-360 bump after an abort: InitProducerId runs again in INITIALIZING. */
  beginEpochBump(): void {
    assert(this.stateValue === 'ABORTING_TRANSACTION', () => `epoch bump in ${this.stateValue}`)
    this.transitionTo('INITIALIZING')
  }

  /** A failure the application recovers from with abortTransaction. Fatal errors stay fatal. */
  abortableError(error: Error): void {
    if (this.stateValue === 'FATAL_ERROR') return
    if (this.stateValue === 'ABORTING_TRANSACTION' || this.stateValue === 'READY') {
      // The abort fails on its own (its EndTxn answers); nothing is left to commit.
      this.lastErrorValue ??= error
      return
    }
    this.lastErrorValue = error
    this.transitionTo('ABORTABLE_ERROR')
  }

  fatalError(error: Error): void {
    this.lastErrorValue = error
    this.transitionTo('FATAL_ERROR')
  }

  /**
   * Java's maybeFailWithError: an earlier failure fails this call. A fencing is rethrown as
   * a fresh ProducerFencedError, anything else wrapped.
   */
  maybeFailWithError(): void {
    const error = this.lastErrorValue
    if (this.stateValue !== 'FATAL_ERROR' && this.stateValue !== 'ABORTABLE_ERROR') return
    if (error instanceof ProducerFencedError) {
      throw new ProducerFencedError(
        error.errorCode,
        `producer with transactional id '${this.transactionalId}' (producer id ${this.producerId}, epoch ${this.producerEpoch}) was fenced by another producer with the same transactional id`,
      )
    }
    if (this.stateValue === 'ABORTABLE_ERROR')
      throw new TransactionAbortableError(
        `the transaction cannot commit: ${error?.message ?? 'an earlier request failed'}; call abortTransaction()`,
        error,
      )
    throw new TransactionStateError(
      this.stateValue,
      `cannot run a transactional method: the producer failed (${error?.message ?? 'unknown error'})`,
      error,
    )
  }

  /** send(): a transactional producer sends only inside a transaction. */
  failIfNotReadyForSend(): void {
    if (!this.isTransactional) return
    this.maybeFailWithError()
    if (this.stateValue !== 'IN_TRANSACTION')
      throw new TransactionStateError(
        this.stateValue,
        `cannot send in state ${this.stateValue}: call beginTransaction() first`,
      )
  }

  /** sendOffsetsToTransaction(): inside a transaction. */
  failIfNotInTransaction(what: string): void {
    this.requireTransactional(what)
    this.maybeFailWithError()
    if (this.stateValue !== 'IN_TRANSACTION')
      throw new TransactionStateError(this.stateValue, `cannot call ${what} in state ${this.stateValue}`)
  }

  private requireTransactional(what: string): void {
    if (!this.isTransactional)
      throw new TransactionStateError(
        this.stateValue,
        `${what} needs a transactional producer (the transactionalId option)`,
      )
  }

  private transitionTo(target: TransactionState): void {
    if (!VALID_SOURCES[target].includes(this.stateValue))
      throw new TransactionStateError(
        this.stateValue,
        `invalid transition attempted from state ${this.stateValue} to state ${target}`,
      )
    this.stateValue = target
  }

  // ---- transactions: partitions --------------------------------------------------------------

  /** A record for the partition was appended: it joins the transaction before its batch goes. */
  maybeAddPartition(topic: string, partition: number): void {
    if (!this.isTransactional) return
    const key = partitionKey(topic, partition)
    if (this.transactionV2) {
      // The batch's Produce v12 adds the partition; EndTxn is needed from now on.
      this.partitionsInTransaction.add(key)
      this.transactionStarted = true
      return
    }
    if (this.partitionsInTransaction.has(key) || this.partitionsBeingAdded.has(key)) return
    this.newPartitions.set(key, { topic, partition })
  }

  /** Whether the partition's batches may go (it is in the transaction). */
  isSendToPartitionAllowed(key: string): boolean {
    if (!this.isTransactional) return true
    return !this.hasFatalError && this.partitionsInTransaction.has(key)
  }

  /** The partitions to add now (AddPartitionsToTxn); they count as being added until answered. */
  takeNewPartitions(): { topic: string; partition: number }[] {
    const taken = [...this.newPartitions.entries()]
    this.newPartitions.clear()
    for (const [key] of taken) this.partitionsBeingAdded.add(key)
    return taken.map(([, tp]) => tp)
  }

  /** AddPartitionsToTxn answered: `added` are in the transaction; `retry` go again. */
  onPartitionsAdded(
    added: readonly { topic: string; partition: number }[],
    retry: readonly { topic: string; partition: number }[] = [],
  ): void {
    for (const tp of added) {
      const key = partitionKey(tp.topic, tp.partition)
      this.partitionsBeingAdded.delete(key)
      this.partitionsInTransaction.add(key)
    }
    for (const tp of retry) {
      const key = partitionKey(tp.topic, tp.partition)
      this.partitionsBeingAdded.delete(key)
      this.newPartitions.set(key, tp)
    }
    if (added.length > 0) this.transactionStarted = true
  }

  get hasPartitionsToAdd(): boolean {
    return this.newPartitions.size > 0
  }

  /**
   * AddOffsetsToTxn succeeded: the group's offsets partition is in the transaction. At
   * version 2, before the TxnOffsetCommit that adds it (Java sets transactionStarted then).
   */
  onOffsetsAdded(): void {
    this.transactionStarted = true
  }

  /** The producer id and epoch in use; null while the sender must fetch one. */
  get producerIdAndEpoch(): ProducerIdAndEpoch | null {
    return this.producerId < 0n ? null : { producerId: this.producerId, producerEpoch: this.producerEpoch }
  }

  get hasProducerId(): boolean {
    return this.producerId >= 0n
  }

  /** How often a reset gave up the producer id. */
  get producerIdResets(): number {
    return this.resets
  }

  /** InitProducerId answered. Only asked for while there is no producer id. */
  setProducerIdAndEpoch(producerId: bigint, producerEpoch: number): void {
    assert(this.producerId < 0n, 'a producer id arrived while one is in use')
    assert(producerId >= 0n && producerEpoch >= 0, () => `invalid producer id ${producerId}/${producerEpoch}`)
    this.producerId = producerId
    this.producerEpoch = producerEpoch
  }

  /**
   * Whether the head of this partition's queue may be sent now, `inFlight` batches of the
   * partition being unanswered. A partition being rewritten first re-stamps its queued
   * batches (clears their sequences) once none is in flight; a retried batch goes alone; a
   * new batch needs a producer id, moves an idle partition to it, and waits while 5 are
   * in flight or unresolved sequences are pending. May give up the producer id (an
   * unresolved sequence that was not written).
   */
  readyToSend(key: string, queue: readonly SequencedBatch[], inFlight: number): boolean {
    assert(queue.length > 0, 'readyToSend on an empty queue')
    assert(inFlight >= 0, 'negative in-flight count')
    const state = this.sequences.get(key)
    if (state?.rewrite) {
      if (inFlight > 0 || this.producerId < 0n) return false
      for (const batch of queue) if (batch.hasSequence) batch.resetProducerState()
      this.sequences.set(key, this.freshSequences())
    }
    const first = queue[0]
    if (first.hasSequence) return inFlight === 0
    if (state && state.unresolvedLast >= 0 && !this.maybeResolveSequences(state, first, inFlight))
      return false
    if (this.producerId < 0n) return false
    const current = this.sequences.get(key)
    if (!current || current.producerId !== this.producerId || current.producerEpoch !== this.producerEpoch) {
      if (inFlight > 0) return false
      this.sequences.set(key, this.freshSequences())
    }
    return inFlight < IDEMPOTENT_IN_FLIGHT_MAX
  }

  /**
   * Whether a new batch of this partition can be stamped now. readyToSend said yes, but a
   * later partition of the same drain may have given the producer id up since.
   */
  canStamp(key: string): boolean {
    const state = this.sequences.get(key)
    return (
      state !== undefined &&
      this.producerId >= 0n &&
      state.producerId === this.producerId &&
      state.producerEpoch === this.producerEpoch &&
      !state.rewrite
    )
  }

  /** Gives a new batch the partition's next sequence numbers; only after readyToSend said yes. */
  stampBatch(key: string, batch: SequencedBatch): void {
    assert(!batch.hasSequence, 'stamping a batch that has a sequence')
    assert(this.canStamp(key), 'stamping a batch of a partition not on the current producer id')
    const state = this.sequences.get(key)!
    batch.stamp(state.producerId, state.producerEpoch, state.next, this.isTransactional)
    state.next = (state.next + batch.recordCount) % SEQUENCE_MODULUS
  }

  /** The broker acknowledged a batch (or said it is a duplicate of one it wrote). */
  handleCompletedBatch(batch: SequencedBatch): void {
    if (!batch.hasSequence) return
    const state = this.sequences.get(partitionKey(batch.topic, batch.partition))
    if (!state || state.producerId !== batch.producerId || state.producerEpoch !== batch.producerEpoch) return
    state.lastAcked = lastSequenceOf(batch)
  }

  /**
   * Java's canRetry for a non-transactional idempotent producer, on a stamped batch's
   * error code. `logStartOffset` is the partition response's (undefined: no response).
   * A 'reset' verdict has already given up the producer id when it was the batch's.
   */
  canRetry(batch: SequencedBatch, errorCode: number, logStartOffset?: bigint): RetryVerdict | undefined {
    assert(batch.hasSequence, 'canRetry on a batch without a sequence')
    if (this.isTransactional) return this.transactionalVerdict(batch, errorCode)
    const verdict = this.verdictFor(batch, errorCode, logStartOffset)
    if (verdict === 'reset') this.requestEpochBumpForPartition(batch)
    return verdict
  }

  /**
   * A stamped batch failed for good. One that expired after it was sent may be in the
   * log: its sequence stays unresolved (see the file comment). Any other failure resets
   * the partition: its sequences are never acknowledged.
   */
  handleFailedBatch(batch: SequencedBatch, expiredAfterSend: boolean): void {
    if (!batch.hasSequence) return
    if (this.isTransactional) {
      // Its sequence may or may not be in the log: the abort the application must now do
      // is followed by an epoch bump that starts every partition again at 0. At version 2
      // the abort's EndTxn bumps the epoch itself (Java's needToTriggerEpochBumpFromClient).
      if (!this.transactionV2) this.epochBumpRequired = true
      return
    }
    const state = this.sequences.get(partitionKey(batch.topic, batch.partition))
    const current =
      state !== undefined &&
      state.producerId === batch.producerId &&
      state.producerEpoch === batch.producerEpoch
    if (expiredAfterSend && current) state.unresolvedLast = lastSequenceOf(batch)
    else this.requestEpochBumpForPartition(batch)
  }

  /**
   * KIP-360: the partition's unacknowledged batches are re-stamped from sequence 0 under
   * a new producer id. The id is given up unless the batch is from an older one already
   * (a reset is under way).
   */
  requestEpochBumpForPartition(batch: SequencedBatch): void {
    this.resetPartition(partitionKey(batch.topic, batch.partition), batch.producerId, batch.producerEpoch)
  }

  /**
   * Java's canRetry for a transactional producer: the producer id belongs to the
   * transactional id, so no KIP-360 reset from here; an epoch or producer-id error fails
   * the batch (the transaction then aborts), a gap behind unacknowledged batches is
   * transient.
   */
  private transactionalVerdict(batch: SequencedBatch, errorCode: number): RetryVerdict | undefined {
    switch (errorCode) {
      case ErrorCode.UNKNOWN_PRODUCER_ID:
      case ErrorCode.INVALID_PRODUCER_EPOCH:
      case ErrorCode.PRODUCER_FENCED:
      case ErrorCode.INVALID_PRODUCER_ID_MAPPING:
      case ErrorCode.INVALID_TXN_STATE:
      case ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return 'fail'
      case ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: {
        const state = this.sequences.get(partitionKey(batch.topic, batch.partition))
        const sameId =
          state !== undefined &&
          state.producerId === batch.producerId &&
          state.producerEpoch === batch.producerEpoch
        const isNext = sameId && (state.lastAcked + 1) % SEQUENCE_MODULUS === batch.baseSequence
        return isNext ? 'fail' : 'retry'
      }
      default:
        return undefined
    }
  }

  private verdictFor(
    batch: SequencedBatch,
    errorCode: number,
    logStartOffset: bigint | undefined,
  ): RetryVerdict | undefined {
    switch (errorCode) {
      case ErrorCode.UNKNOWN_PRODUCER_ID:
        // No log start offset: the partition moved while answering; ask again.
        if (logStartOffset !== undefined && logStartOffset < 0n) return 'retry'
        return 'reset'
      case ErrorCode.INVALID_PRODUCER_EPOCH:
        return 'reset'
      case ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: {
        // Transient while an earlier batch is not acknowledged (being retried, or lost by a
        // leader change and resent first); a gap when it is the very next sequence.
        const state = this.sequences.get(partitionKey(batch.topic, batch.partition))
        const sameId =
          state !== undefined &&
          state.producerId === batch.producerId &&
          state.producerEpoch === batch.producerEpoch
        if (sameId && state.unresolvedLast >= 0) {
          // Right behind the expired batch: it never reached the log, a real gap. The
          // partition moves to a new producer id and this batch is retried there (Java).
          return (state.unresolvedLast + 1) % SEQUENCE_MODULUS === batch.baseSequence ? 'reset' : 'retry'
        }
        const isNext = sameId && (state.lastAcked + 1) % SEQUENCE_MODULUS === batch.baseSequence
        return batch.sequenceReset || !isNext ? 'retry' : 'fail'
      }
      default:
        return undefined
    }
  }

  /** Once none of the partition's stamped batches is in flight: keep the id, or reset. */
  private maybeResolveSequences(state: PartitionSequences, head: SequencedBatch, inFlight: number): boolean {
    if (inFlight > 0) return false
    const allAcknowledged = (state.lastAcked + 1) % SEQUENCE_MODULUS === state.next
    state.unresolvedLast = -1
    if (allAcknowledged) return true
    this.resetPartition(partitionKey(head.topic, head.partition), state.producerId, state.producerEpoch)
    return false
  }

  private resetPartition(key: string, producerId: bigint, producerEpoch: number): void {
    const state = this.sequences.get(key)
    if (state) {
      state.rewrite = true
      state.unresolvedLast = -1
    } else this.sequences.set(key, { ...this.freshSequences(), rewrite: true })
    if (producerId === this.producerId && producerEpoch === this.producerEpoch && producerId >= 0n) {
      this.resets++
      this.producerId = -1n
      this.producerEpoch = -1
    }
  }

  private freshSequences(): PartitionSequences {
    return {
      producerId: this.producerId,
      producerEpoch: this.producerEpoch,
      next: 0,
      lastAcked: -1,
      rewrite: false,
      unresolvedLast: -1,
    }
  }
}

function lastSequenceOf(batch: SequencedBatch): number {
  return (batch.baseSequence + batch.recordCount - 1) % SEQUENCE_MODULUS
}
