/**
 * The idempotent producer's sequence bookkeeping, named after Kafka's TransactionManager
 * (which keeps it for the Java producer); idempotence only, no transactions yet. Pure: no
 * sockets, no timers. The sender asks it whether a partition may send, has it stamp each
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
  stamp(producerId: bigint, producerEpoch: number, baseSequence: number): void
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
    batch.stamp(state.producerId, state.producerEpoch, state.next)
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
