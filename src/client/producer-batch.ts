/**
 * A batch of records for one partition, as the Java client's ProducerBatch: each record is
 * encoded into the batch's bytes as it is appended (RecordBatchBuilder, Kafka's
 * MemoryRecordsBuilder), the header, compression and CRC are done once when the batch is
 * first drained, and a retry re-sends the same bytes. Each record's promise settles when
 * the batch does.
 */
import { assert } from '../common/assert.js'
import type { CompressionType } from '../protocol/batch-header.js'
import { hasSyncCodec } from '../protocol/compression.js'
import {
  decodeRecords,
  RecordBatchBuilder,
  type RecordHeader,
  type RecordInput,
} from '../protocol/record-batch.js'
import { asClientError, type KafkaClientError } from './errors.js'

/** A record's bytes beyond key, value and headers in the worst case (varints, attributes, deltas). */
export const RECORD_OVERHEAD_MAX = 21
const HEADER_OVERHEAD_MAX = 10
/** The v2 batch header. */
export const BATCH_OVERHEAD = 61

export interface RecordMetadata {
  topic: string
  partition: number
  /** The record's offset; -1 with acks=0 (no answer to learn it from). */
  offset: number
  /** LogAppendTime when the topic uses it, else the record's CreateTime. */
  timestamp: number
}

export interface Completion {
  resolve(metadata: RecordMetadata): void
  reject(error: Error): void
}

/** Producer.produce()'s callback, and send()'s optional one. */
export type RecordCallback = (error: KafkaClientError | null, metadata?: RecordMetadata) => void

/**
 * A record's settlement is a pair: a promise's resolve and reject, or (produce()) its
 * callback and CALLBACK in reject's place, so no closure is made per record.
 */
export type Settle = Completion['resolve'] | RecordCallback
export type Reject = Completion['reject'] | typeof CALLBACK
export const CALLBACK: unique symbol = Symbol('callback')

/** Fails one record; a callback is called on the next tick (never inside send/produce itself). */
export function failSettle(resolve: Settle, reject: Reject, error: Error): void {
  if (reject !== CALLBACK) {
    reject(error)
    return
  }
  const failure = asClientError(error)
  process.nextTick(() => invokeCallback(resolve as RecordCallback, failure))
}

/**
 * Settles a completed batch's records, each with its metadata. Its own function, the loops
 * alone: a batch's loop runs hundreds of times, so V8 compiles it on the stack (OSR) during
 * the first batches, while nothing after the loop has run yet. With the code after the
 * loop in the same function, that first compilation deoptimized as soon as a loop ended
 * ("insufficient type feedback for call") and the whole loop, with the user's callback
 * inlined into it, was compiled again. For the same reason every load here runs for every
 * batch: `runStarts` ends with the record count (the sentinel `complete` pushes), so the
 * run's end is read without a branch taken only by batches of several milliseconds.
 */
function settleRecords(
  topic: string,
  partition: number,
  resolves: readonly Settle[],
  rejects: readonly Reject[] | null,
  runTimestamps: readonly number[],
  runStarts: readonly number[],
  baseOffset: number,
  logAppendTimeMs: number,
): void {
  let i = 0
  for (let run = 0; run < runTimestamps.length; run++) {
    const end = runStarts[run + 1]
    const timestamp = logAppendTimeMs >= 0 ? logAppendTimeMs : runTimestamps[run]
    for (; i < end; i++) {
      const metadata: RecordMetadata = {
        topic,
        partition,
        offset: baseOffset < 0 ? -1 : baseOffset + i,
        timestamp,
      }
      const reject = rejects === null ? CALLBACK : rejects[i]
      if (reject === CALLBACK) invokeCallback(resolves[i] as RecordCallback, null, metadata)
      else (resolves[i] as Completion['resolve'])(metadata)
    }
  }
}

/** A throwing user callback surfaces like an exception in an event handler. */
export function invokeCallback(
  callback: RecordCallback,
  error: KafkaClientError | null,
  metadata?: RecordMetadata,
): void {
  try {
    callback(error, metadata)
  } catch (thrown) {
    process.nextTick(() => {
      throw thrown
    })
  }
}

export function recordSizeUpperBound(record: RecordInput): number {
  let size = RECORD_OVERHEAD_MAX + (record.key?.length ?? 0) + (record.value?.length ?? 0)
  const headers = record.headers
  if (headers === undefined) return size
  for (let i = 0; i < headers.length; i++) {
    const header = headers[i]
    size += HEADER_OVERHEAD_MAX + Buffer.byteLength(header.key) + (header.value?.length ?? 0)
  }
  return size
}

export interface BatchEncoding {
  compression: CompressionType
  compressionLevel?: number
  /** batch.size: how large the batch's first buffer is (up to 16 KiB; it grows in chunks). */
  batchSize?: number
  /** Where the batch's buffers come from (and go back to, via releaseBuffers). */
  allocate?: (bytes: number) => Buffer
}

/*
 * The per-record arrays start in the elements kind they end in. A `[]` starts as small
 * integers and changes kind at its first push of a double or a function; optimized code
 * compiled while a batch's arrays were of the first kind deoptimized ("not a Smi") at the
 * first push into a new batch's arrays, and `appendFields`, with the builder's append
 * inlined, was compiled again, twice a run.
 */
function emptyDoubles(): number[] {
  const array = [0.5]
  array.pop()
  return array
}

function emptyObjects<T>(): T[] {
  const array: unknown[] = [null]
  array.pop()
  return array as T[]
}

export class ProducerBatch {
  /** The records, encoded as they are appended. */
  private readonly builder: RecordBatchBuilder
  /**
   * The records' CreateTimes, for their metadata, as runs: records runStarts[r] up to
   * runStarts[r + 1] have runTimestamps[r]. A batch's records mostly share a few
   * milliseconds, so this is a push per millisecond instead of one per record (and the
   * array's growth, ~24 bytes of garbage per record).
   */
  private readonly runTimestamps: number[] = emptyDoubles()
  private readonly runStarts: number[] = []
  /** The last record's timestamp; NaN (a double field from the start) before the first. */
  private lastTimestamp = Number.NaN
  /** Each record's promise, settled when the batch is (two arrays: no object per record). */
  private readonly resolves: Settle[] = emptyObjects()
  /**
   * null while every record so far is a produce() callback (CALLBACK in reject's place):
   * then there is nothing to keep per record, which is the high-rate path.
   */
  private rejects: Reject[] | null = null
  /** Estimated encoded size, compression ignored (as Kafka estimates for batch.size). */
  sizeBytes = BATCH_OVERHEAD
  /** Set when first drained: nothing more is appended, the bytes are fixed. */
  encoded: Buffer | Buffer[] | null = null
  attempts = 0
  retryAtMs = 0
  inFlight = false
  lastError: Error | null = null
  /**
   * An idempotent producer stamps these (InitProducerId's id and epoch, the partition's
   * next sequence) when the batch is first sent, before its first encode; a retry keeps
   * them and the bytes. -1: not idempotent, or not stamped yet.
   */
  producerId = -1n
  producerEpoch = -1
  baseSequence = -1
  /** Set once the sequence was given up and the batch re-stamped (KIP-360 reset). */
  sequenceReset = false
  /** Stamped by a transactional producer: part of its ongoing transaction. */
  isTransactional = false
  /** When the batch was first drained (a producer-wide counter; -1: not yet): retries requeue in this order. */
  drainOrder = -1
  private settled = false
  private readonly settledPromise: Promise<void>
  private markSettled!: () => void

  constructor(
    readonly topic: string,
    readonly partition: number,
    /** On the client clock's monotonic scale, as deadlineMs and retryAtMs (not a record timestamp). */
    readonly createdMs: number,
    readonly deadlineMs: number,
    encoding: BatchEncoding,
    /** Buffer memory this batch holds; released when it settles. */
    public reservedBytes = 0,
  ) {
    this.builder = new RecordBatchBuilder({
      compression: encoding.compression,
      compressionLevel: encoding.compressionLevel,
      expectedBytes: encoding.batchSize,
      ...(encoding.allocate ? { allocate: encoding.allocate } : {}),
    })
    this.settledPromise = new Promise((resolve) => {
      this.markSettled = resolve
    })
  }

  get recordCount(): number {
    return this.resolves.length
  }

  get isSealed(): boolean {
    return this.encoded !== null
  }

  /** Resolves when every record's promise has settled (for flush). */
  get done(): Promise<void> {
    return this.settledPromise
  }

  hasRoomFor(bytes: number, batchSize: number): boolean {
    if (this.isSealed || this.drainOrder >= 0 || this.settled) return false
    return this.resolves.length === 0 || this.sizeBytes + bytes <= batchSize
  }

  isFull(batchSize: number): boolean {
    return this.sizeBytes >= batchSize
  }

  /** Encodes the record into the batch now; `record.timestamp` must be set. */
  append(record: RecordInput, sizeBytes: number, resolve: Settle, reject: Reject): void {
    this.appendFields(
      record.timestamp!,
      record.key ?? null,
      record.value,
      record.headers,
      sizeBytes,
      resolve,
      reject,
    )
  }

  /** `append` with the record's fields as arguments: the producer's path, no RecordInput per record. */
  appendFields(
    timestamp: number,
    key: Buffer | null,
    value: Buffer | null,
    headers: readonly RecordHeader[] | undefined,
    sizeBytes: number,
    resolve: Settle,
    reject: Reject,
  ): void {
    if (this.encoded !== null || this.settled) assert(false, 'append to a sealed batch')
    this.builder.append(timestamp, key, value, headers)
    if (timestamp !== this.lastTimestamp) {
      this.lastTimestamp = timestamp
      this.runTimestamps.push(timestamp)
      this.runStarts.push(this.resolves.length)
    }
    if (reject !== CALLBACK || this.rejects !== null) this.pushReject(reject)
    this.resolves.push(resolve)
    this.sizeBytes += sizeBytes
  }

  /** Keeps the record's reject; the first that is not CALLBACK makes the array. */
  private pushReject(reject: Reject): void {
    if (this.rejects === null) this.rejects = Array.from(this.resolves, (): Reject => CALLBACK)
    this.rejects.push(reject)
  }

  private rejectOf(i: number): Reject {
    return this.rejects === null ? CALLBACK : this.rejects[i]
  }

  /**
   * The batch's bytes, built once (header with the stamped producer fields, compression,
   * CRC); a retry re-sends the same bytes.
   */
  async encode(): Promise<Buffer | Buffer[]> {
    if (this.encoded) return this.encoded
    const stamp = {
      producerId: this.producerId,
      producerEpoch: this.producerEpoch,
      baseSequence: this.baseSequence,
      isTransactional: this.isTransactional,
    }
    // zstd's binding is asynchronous only; the others build without a round trip to the pool.
    const encoded = hasSyncCodec(this.builder.compression)
      ? this.builder.build(stamp)
      : await this.builder.buildAsync(stamp)
    this.encoded ??= encoded
    return this.encoded
  }

  /** Stamps the idempotent producer's identity and this batch's first sequence before its first encode. */
  stamp(producerId: bigint, producerEpoch: number, baseSequence: number, isTransactional = false): void {
    assert(this.encoded === null, 'stamp of an encoded batch')
    this.producerId = producerId
    this.producerEpoch = producerEpoch
    this.baseSequence = baseSequence
    this.isTransactional = isTransactional
  }

  /**
   * Gives up the batch's producer id, epoch and sequence (after UNKNOWN_PRODUCER_ID, an
   * epoch error or a gap, KIP-360): it is stamped and encoded again when next drained.
   */
  resetProducerState(): void {
    this.encoded = null
    this.producerId = -1n
    this.producerEpoch = -1
    this.baseSequence = -1
    this.isTransactional = false
    this.sequenceReset = true
  }

  get hasSequence(): boolean {
    return this.baseSequence >= 0
  }

  /** Resolves every record: offsets count up from baseOffset. */
  complete(baseOffset: number, logAppendTimeMs: number): void {
    if (this.settled) return
    this.settled = true
    // The sentinel: the last run ends at the record count (nothing is appended once settled).
    this.runStarts.push(this.resolves.length)
    settleRecords(
      this.topic,
      this.partition,
      this.resolves,
      this.rejects,
      this.runTimestamps,
      this.runStarts,
      baseOffset,
      logAppendTimeMs,
    )
    this.markSettled()
  }

  fail(error: Error): void {
    if (this.settled) return
    this.settled = true
    for (let i = 0; i < this.resolves.length; i++) {
      const reject = this.rejectOf(i)
      if (reject === CALLBACK) invokeCallback(this.resolves[i] as RecordCallback, asClientError(error))
      else reject(error)
    }
    this.markSettled()
  }

  /** Whether its records' promises settled (or, after split, passed to the halves). */
  get isSettled(): boolean {
    return this.settled
  }

  /**
   * The batch's buffers, for reuse: only once it settled and no request holds its bytes
   * (an answer arrived, or the connection closed). A second call returns none.
   */
  releaseBuffers(): Buffer[] {
    assert(this.settled && !this.inFlight, 'buffers of a batch still in use')
    this.encoded = null
    return this.builder.takeBuffers()
  }

  /** Two batches holding the two halves of this one (after MESSAGE_TOO_LARGE), same deadline. */
  split(encoding: BatchEncoding): [ProducerBatch, ProducerBatch] {
    const count = this.resolves.length
    assert(count >= 2, 'split of a batch with fewer than two records')
    const half = Math.ceil(count / 2)
    const first = new ProducerBatch(this.topic, this.partition, this.createdMs, this.deadlineMs, encoding)
    const second = new ProducerBatch(this.topic, this.partition, this.createdMs, this.deadlineMs, encoding)
    // The records are read back from this batch's own bytes, as Java's ProducerBatch.split.
    const records = decodeRecords(this.builder.recordsSection(), count)
    let run = -1
    for (let i = 0; i < count; i++) {
      const target = i < half ? first : second
      if (run + 1 < this.runStarts.length && this.runStarts[run + 1] === i) run++
      const input: RecordInput = {
        key: records[i].key,
        value: records[i].value,
        headers: records[i].headers,
        timestamp: this.runTimestamps[run],
      }
      target.append(input, recordSizeUpperBound(input), this.resolves[i], this.rejectOf(i))
    }
    first.reservedBytes = Math.floor(this.reservedBytes / 2)
    second.reservedBytes = this.reservedBytes - first.reservedBytes
    first.attempts = this.attempts
    second.attempts = this.attempts
    first.drainOrder = this.drainOrder
    second.drainOrder = this.drainOrder
    // The records now belong to the halves; this batch settles without touching them.
    this.settled = true
    this.markSettled()
    return [first, second]
  }
}

/** Headers of a record without any (shared: nothing appends to it). */
export const NO_HEADERS: readonly RecordHeader[] = Object.freeze([])

export function toHeaders(headers: ProducerHeaders | undefined): RecordHeader[] {
  if (!headers) return NO_HEADERS as RecordHeader[]
  const entries = Array.isArray(headers) ? headers : Object.entries(headers)
  return entries.map(([key, value]) => ({ key, value: toBytes(value) }))
}

export type Bytes = Buffer | Uint8Array | string
export type ProducerHeaders =
  | Readonly<Record<string, Bytes | null>>
  | readonly (readonly [string, Bytes | null])[]

export function toBytes(value: Bytes | null | undefined): Buffer | null {
  if (value === null || value === undefined) return null
  if (typeof value === 'string') return Buffer.from(value, 'utf8')
  return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength)
}
