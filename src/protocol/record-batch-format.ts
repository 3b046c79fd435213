/**
 * The v2 record batch's format: magic values, sizes, the error for well-formed bytes that
 * break a rule, the shapes of records and batches as encoded and decoded, and the
 * whole-batch rewrites of the produce and replication paths (offsets, LogAppendTime, CRC),
 * which touch fixed header fields only. The header's field offsets are batch-header.ts.
 */

import { assert } from '../common/assert.js'
import { TidelogError } from '../common/errors.js'
import type { ProducerId } from '../common/types.js'
import {
  ATTRIBUTES_OFFSET,
  BASE_OFFSET_OFFSET,
  BATCH_LENGTH_OFFSET,
  type BatchHeader,
  CompressionType,
  CRC_OFFSET,
  LAST_OFFSET_DELTA_OFFSET,
  LOG_OVERHEAD,
  MAGIC_OFFSET,
  MAX_TIMESTAMP_OFFSET,
  RECORD_BATCH_OVERHEAD,
  TIMESTAMP_TYPE_MASK,
  type TimestampType,
} from './batch-header.js'
import { crc32c } from './crc32c.js'

export { CorruptRecordError } from './compression.js'

/** Well-formed bytes that break a rule (nested compression, control batch from a client...); Kafka's INVALID_RECORD. */
export class InvalidRecordError extends TidelogError {
  constructor(message: string) {
    super('ERR_INVALID_RECORD', message)
    this.name = 'InvalidRecordError'
  }
}

export const MAGIC_V0 = 0
export const MAGIC_V1 = 1
export const MAGIC_V2 = 2
export const NO_TIMESTAMP = -1
/** Smallest batchLength of a v2 batch: the header after the batchLength field. */
export const BATCH_LENGTH_MIN = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
/** Smallest legacy message: crc, magic, attributes, key length, value length (v0). */
export const LEGACY_MESSAGE_OVERHEAD_V0 = 14
export const LEGACY_MESSAGE_OVERHEAD_V1 = 22
/** Smallest encoded record: length, attributes, deltas, key, value and header count, one byte each. */
export const RECORD_BYTES_MIN = 7
/** Bit 6 of the attributes: the batch carries a delete horizon (KIP-534); kept, never set here. */
export const DELETE_HORIZON_FLAG_MASK = 0x40
export const MAX_COMPRESSION_CODEC = CompressionType.Zstd
export const INT32_MAX = 0x7fffffff
/** Zigzag of a number is exact while its magnitude stays below 2^52. */
export const VARLONG_NUMBER_MAX = 2 ** 52

// ---- types -------------------------------------------------------------------------------

export interface RecordHeader {
  key: string
  value: Buffer | null
}

/** One record as it is on the wire, relative to its batch. */
export interface Record {
  attributes: number
  offsetDelta: number
  timestampDelta: number
  key: Buffer | null
  value: Buffer | null
  headers: RecordHeader[]
}

/** One record with absolute offset and timestamp (LogAppendTime batches: the batch's maxTimestamp). */
export interface DecodedRecord {
  offset: number
  timestamp: number
  key: Buffer | null
  value: Buffer | null
  headers: RecordHeader[]
}

/** A record to encode. offsetDelta defaults to its index; timestamp to the batch's defaultTimestamp. */
export interface RecordInput {
  key?: Buffer | null
  value: Buffer | null
  headers?: RecordHeader[]
  timestamp?: number
  offsetDelta?: number
}

export interface EncodeRecordBatchOptions {
  records: readonly RecordInput[]
  baseOffset?: number
  partitionLeaderEpoch?: number
  compression?: CompressionType
  compressionLevel?: number
  timestampType?: TimestampType
  producerId?: bigint
  producerEpoch?: number
  baseSequence?: number
  isTransactional?: boolean
  isControl?: boolean
  /** Timestamp of records that carry none; required if any record lacks one. */
  defaultTimestamp?: number
  /** Overrides the computed max timestamp (LogAppendTime, compaction keeping a header). */
  maxTimestamp?: number
  /** Overrides the last record's offsetDelta (compaction keeps the original offset range). */
  lastOffsetDelta?: number
}

export interface RecordBatchHeaderFields {
  baseOffset: number
  batchLength: number
  sizeInBytes: number
  partitionLeaderEpoch: number
  magic: number
  crc: number
  attributes: number
  compression: CompressionType
  timestampType: TimestampType
  isTransactional: boolean
  isControl: boolean
  lastOffsetDelta: number
  baseTimestamp: number
  maxTimestamp: number
  producerId: ProducerId
  producerEpoch: number
  baseSequence: number
  recordsCount: number
}

export interface DecodedRecordBatch extends RecordBatchHeaderFields {
  /** Keys, values and header values are views into the batch or its decompressed records. */
  records: DecodedRecord[]
}

export type ValidationFailureReason = 'corrupt' | 'invalid' | 'unsupported-magic'

export type BatchValidation =
  | { ok: true; header: BatchHeader; sizeInBytes: number }
  | { ok: false; reason: ValidationFailureReason; message: string }

// ---- int64 as number, without BigInt on the hot path --------------------------------------

const TWO_POW_32 = 2 ** 32

export function readInt64Number(buf: Buffer, at: number): number {
  return buf.readInt32BE(at) * TWO_POW_32 + buf.readUInt32BE(at + 4)
}

export function writeInt64Number(buf: Buffer, at: number, value: number): void {
  assert(Number.isSafeInteger(value), () => `int64 value ${value} is not a safe integer`)
  const high = Math.floor(value / TWO_POW_32)
  buf.writeInt32BE(high, at)
  buf.writeUInt32BE(value - high * TWO_POW_32, at + 4)
}

// ---- in-place rewrites (produce and replication paths) -------------------------------------

/** Sets the batch's base offset; the CRC does not cover it. Returns the batch's next offset. */
export function assignOffsets(buf: Buffer, at: number, baseOffset: number): number {
  assert(buf.length - at >= RECORD_BATCH_OVERHEAD, 'assignOffsets needs a whole batch header')
  assert(buf[at + MAGIC_OFFSET] === MAGIC_V2, 'assignOffsets works on v2 batches')
  assert(Number.isSafeInteger(baseOffset) && baseOffset >= 0, () => `bad base offset ${baseOffset}`)
  writeInt64Number(buf, at + BASE_OFFSET_OFFSET, baseOffset)
  return baseOffset + buf.readInt32BE(at + LAST_OFFSET_DELTA_OFFSET) + 1
}

/**
 * Stamps the batch with LogAppendTime as Kafka does: sets the timestamp-type bit and
 * maxTimestamp, leaves record deltas alone (readers use maxTimestamp for every record), and
 * recomputes the CRC. The batch must have been validated.
 */
export function setLogAppendTime(buf: Buffer, at: number, timestampMs: number): void {
  assert(buf.length - at >= RECORD_BATCH_OVERHEAD, 'setLogAppendTime needs a whole batch header')
  assert(buf[at + MAGIC_OFFSET] === MAGIC_V2, 'setLogAppendTime works on v2 batches')
  assert(Number.isSafeInteger(timestampMs) && timestampMs >= 0, () => `bad timestamp ${timestampMs}`)
  const sizeInBytes = LOG_OVERHEAD + buf.readInt32BE(at + BATCH_LENGTH_OFFSET)
  assert(
    sizeInBytes >= RECORD_BATCH_OVERHEAD && at + sizeInBytes <= buf.length,
    'batch extends past the buffer',
  )
  const attributes = buf.readInt16BE(at + ATTRIBUTES_OFFSET)
  buf.writeInt16BE(attributes | TIMESTAMP_TYPE_MASK, at + ATTRIBUTES_OFFSET)
  writeInt64Number(buf, at + MAX_TIMESTAMP_OFFSET, timestampMs)
  writeCrc(buf, at, sizeInBytes)
}

export function writeCrc(buf: Buffer, at: number, sizeInBytes: number): void {
  buf.writeUInt32BE(crc32c(buf.subarray(at + ATTRIBUTES_OFFSET, at + sizeInBytes)), at + CRC_OFFSET)
}

export function isLegacyMagic(buf: Buffer, at = 0): boolean {
  return buf.length > at + MAGIC_OFFSET && buf[at + MAGIC_OFFSET] < MAGIC_V2
}
