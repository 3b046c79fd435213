/**
 * A batch of records for one partition, as the Java client's ProducerBatch: records are
 * appended while it is open, it is encoded once when first drained, and a retry re-sends
 * the same bytes. Each record's promise settles when the batch does.
 */
import { assert } from '../common/assert.js'
import type { CompressionType } from '../protocol/batch-header.js'
import { hasSyncCodec } from '../protocol/compression.js'
import {
  encodeRecordBatch,
  encodeRecordBatchSync,
  type RecordHeader,
  type RecordInput,
} from '../protocol/record-batch.js'

/** A record's bytes beyond key, value and headers in the worst case (varints, attributes, deltas). */
const RECORD_OVERHEAD_MAX = 21
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

export function recordSizeUpperBound(record: RecordInput): number {
  let size = RECORD_OVERHEAD_MAX + (record.key?.length ?? 0) + (record.value?.length ?? 0)
  for (const header of record.headers ?? []) {
    size += HEADER_OVERHEAD_MAX + Buffer.byteLength(header.key) + (header.value?.length ?? 0)
  }
  return size
}

export interface BatchEncoding {
  compression: CompressionType
  compressionLevel?: number
}

export class ProducerBatch {
  readonly records: RecordInput[] = []
  private readonly completions: Completion[] = []
  /** Estimated encoded size, compression ignored (as Kafka estimates for batch.size). */
  sizeBytes = BATCH_OVERHEAD
  /** Set when first drained: nothing more is appended, the bytes are fixed. */
  encoded: Buffer | null = null
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
  /** When the batch was first drained (a producer-wide counter; -1: not yet): retries requeue in this order. */
  drainOrder = -1
  private settled = false
  private readonly settledPromise: Promise<void>
  private markSettled!: () => void

  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly createdMs: number,
    readonly deadlineMs: number,
    /** Buffer memory this batch holds; released when it settles. */
    public reservedBytes = 0,
  ) {
    this.settledPromise = new Promise((resolve) => {
      this.markSettled = resolve
    })
  }

  get recordCount(): number {
    return this.records.length
  }

  get isSealed(): boolean {
    return this.encoded !== null
  }

  /** Resolves when every record's promise has settled (for flush). */
  get done(): Promise<void> {
    return this.settledPromise
  }

  hasRoomFor(bytes: number, batchSize: number): boolean {
    if (this.isSealed || this.drainOrder >= 0) return false
    return this.records.length === 0 || this.sizeBytes + bytes <= batchSize
  }

  isFull(batchSize: number): boolean {
    return this.sizeBytes >= batchSize
  }

  append(record: RecordInput, sizeBytes: number, completion: Completion): void {
    assert(!this.isSealed && !this.settled, 'append to a sealed batch')
    this.records.push(record)
    this.completions.push(completion)
    this.sizeBytes += sizeBytes
  }

  /** Encodes once; a retry re-sends the same bytes. */
  async encode(encoding: BatchEncoding): Promise<Buffer> {
    if (this.encoded) return this.encoded
    const options = {
      records: this.records,
      compression: encoding.compression,
      compressionLevel: encoding.compressionLevel,
      defaultTimestamp: this.createdMs,
      producerId: this.producerId,
      producerEpoch: this.producerEpoch,
      baseSequence: this.baseSequence,
    }
    // zstd's binding is asynchronous only; the others encode without a round trip to the pool.
    this.encoded = hasSyncCodec(encoding.compression)
      ? encodeRecordBatchSync(options)
      : await encodeRecordBatch(options)
    return this.encoded
  }

  /** Stamps the idempotent producer's identity and this batch's first sequence before its first encode. */
  stamp(producerId: bigint, producerEpoch: number, baseSequence: number): void {
    assert(this.encoded === null, 'stamp of an encoded batch')
    this.producerId = producerId
    this.producerEpoch = producerEpoch
    this.baseSequence = baseSequence
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
    this.sequenceReset = true
  }

  get hasSequence(): boolean {
    return this.baseSequence >= 0
  }

  /** Resolves every record: offsets count up from baseOffset. */
  complete(baseOffset: number, logAppendTimeMs: number): void {
    if (this.settled) return
    this.settled = true
    for (let i = 0; i < this.completions.length; i++) {
      const timestamp = logAppendTimeMs >= 0 ? logAppendTimeMs : (this.records[i].timestamp ?? this.createdMs)
      this.completions[i].resolve({
        topic: this.topic,
        partition: this.partition,
        offset: baseOffset < 0 ? -1 : baseOffset + i,
        timestamp,
      })
    }
    this.markSettled()
  }

  fail(error: Error): void {
    if (this.settled) return
    this.settled = true
    for (const completion of this.completions) completion.reject(error)
    this.markSettled()
  }

  /** Two batches holding the two halves of this one (after MESSAGE_TOO_LARGE), same deadline. */
  split(): [ProducerBatch, ProducerBatch] {
    assert(this.records.length >= 2, 'split of a batch with fewer than two records')
    const half = Math.ceil(this.records.length / 2)
    const first = new ProducerBatch(this.topic, this.partition, this.createdMs, this.deadlineMs)
    const second = new ProducerBatch(this.topic, this.partition, this.createdMs, this.deadlineMs)
    for (let i = 0; i < this.records.length; i++) {
      const target = i < half ? first : second
      target.append(this.records[i], recordSizeUpperBound(this.records[i]), this.completions[i])
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

export function toHeaders(headers: ProducerHeaders | undefined): RecordHeader[] {
  if (!headers) return []
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
