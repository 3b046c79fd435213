/**
 * The few record-batch checks storage needs, on headers only (records stay encoded):
 * framing (length fits, magic 2), the CRC-32C, and the offset fields. Used by append (to
 * reject bad input) and by recovery (to find the first torn or corrupt batch).
 */
import { assert } from '../common/assert.js'
import type { LeaderEpoch, Offset } from '../common/types.js'
import {
  ATTRIBUTES_OFFSET,
  BASE_OFFSET_OFFSET,
  BASE_TIMESTAMP_OFFSET,
  BATCH_LENGTH_OFFSET,
  COMPRESSION_CODEC_MASK,
  type CompressionType,
  LAST_OFFSET_DELTA_OFFSET,
  LOG_OVERHEAD,
  MAX_TIMESTAMP_OFFSET,
  PARTITION_LEADER_EPOCH_OFFSET,
  RECORD_BATCH_OVERHEAD,
  RECORDS_COUNT_OFFSET,
  TIMESTAMP_TYPE_MASK,
} from '../protocol/batch-header.js'
import { decompress } from '../protocol/compression.js'
import { type ValidationFailureReason, validateRecordBatch } from '../protocol/record-batch.js'

/** batchLength counts the bytes after the length field; a v2 header alone is 49 of them. */
export const MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
/** Bytes needed to know where a batch ends and which offsets it holds. */
export const BATCH_OFFSETS_HEADER_BYTES = LAST_OFFSET_DELTA_OFFSET + 4

export interface BatchSummary {
  /** Byte position of the batch in the buffer it was found in. */
  readonly position: number
  readonly sizeInBytes: number
  readonly baseOffset: Offset
  readonly lastOffset: Offset
  readonly maxTimestamp: number
  readonly partitionLeaderEpoch: LeaderEpoch
  readonly recordsCount: number
}

export type BatchProblem = 'truncated' | 'bad-length' | 'bad-magic' | 'bad-crc' | 'bad-offsets'

export type BatchCheck =
  | { readonly ok: true; readonly batch: BatchSummary }
  | { readonly ok: false; readonly problem: BatchProblem }

/** A signed int64 as a JS number; exact below 2^53 (offsets and timestamps). */
export function readInt64(buf: Buffer, at: number): number {
  return buf.readInt32BE(at) * 4294967296 + buf.readUInt32BE(at + 4)
}

/** The inverse of readInt64, without a BigInt per call (it patches every appended batch's base offset). */
export function writeInt64(buf: Buffer, at: number, value: number): void {
  assert(Number.isSafeInteger(value), () => `int64 value ${value} is not a safe integer`)
  const high = Math.floor(value / 4294967296)
  buf.writeInt32BE(high, at)
  buf.writeUInt32BE(value - high * 4294967296, at + 4)
}

/** Offsets and size of the batch at `at`, from the first 27 bytes; no CRC. Undefined if not all there. */
export function peekBatch(buf: Buffer, at: number, end: number): BatchSummary | undefined {
  if (end - at < BATCH_OFFSETS_HEADER_BYTES) return undefined
  const batchLength = buf.readInt32BE(at + BATCH_LENGTH_OFFSET)
  const baseOffset = readInt64(buf, at + BASE_OFFSET_OFFSET) as Offset
  return {
    position: at,
    sizeInBytes: LOG_OVERHEAD + batchLength,
    baseOffset,
    lastOffset: (baseOffset + buf.readInt32BE(at + LAST_OFFSET_DELTA_OFFSET)) as Offset,
    maxTimestamp: end - at >= MAX_TIMESTAMP_OFFSET + 8 ? readInt64(buf, at + MAX_TIMESTAMP_OFFSET) : -1,
    partitionLeaderEpoch: buf.readInt32BE(at + PARTITION_LEADER_EPOCH_OFFSET) as LeaderEpoch,
    recordsCount: end - at >= RECORD_BATCH_OVERHEAD ? buf.readInt32BE(at + RECORDS_COUNT_OFFSET) : -1,
  }
}

/**
 * Validates the framing and checksum of the batch at `at` (bytes up to `end` available)
 * with the protocol layer's validator (magic, CRC-32C, header fields), after bounding the
 * length field by `maxBatchBytes` so a corrupt length is not trusted.
 */
export function checkBatch(buf: Buffer, at: number, end: number, maxBatchBytes: number): BatchCheck {
  if (end - at < LOG_OVERHEAD) return { ok: false, problem: 'truncated' }
  const batchLength = buf.readInt32BE(at + BATCH_LENGTH_OFFSET)
  if (batchLength < MIN_BATCH_LENGTH || LOG_OVERHEAD + batchLength > maxBatchBytes) {
    return { ok: false, problem: 'bad-length' }
  }
  if (end - at < LOG_OVERHEAD + batchLength) return { ok: false, problem: 'truncated' }
  const validation = validateRecordBatch(end === buf.length ? buf : buf.subarray(0, end), at)
  if (!validation.ok) return { ok: false, problem: PROBLEM_BY_REASON[validation.reason] }
  const batch = peekBatch(buf, at, end)
  if (batch === undefined || batch.lastOffset < batch.baseOffset || batch.baseOffset < 0) {
    return { ok: false, problem: 'bad-offsets' }
  }
  return { ok: true, batch }
}

const PROBLEM_BY_REASON: Readonly<Record<ValidationFailureReason, BatchProblem>> = {
  corrupt: 'bad-crc',
  invalid: 'bad-offsets',
  'unsupported-magic': 'bad-magic',
}

/** Unsigned LEB128 at `at` as a number (exact below 2^53), and the position after it. */
function readUnsignedVarlong(buf: Buffer, at: number, end: number): [number, number] | undefined {
  let value = 0
  let scale = 1
  for (let i = at; i < end && i < at + 10; i++) {
    const byte = buf[i]
    value += (byte & 0x7f) * scale
    if ((byte & 0x80) === 0) return [value, i + 1]
    scale *= 128
  }
  return undefined
}

function readVarlong(buf: Buffer, at: number, end: number): [number, number] | undefined {
  const raw = readUnsignedVarlong(buf, at, end)
  if (raw === undefined) return undefined
  const [value, next] = raw
  return [value % 2 === 0 ? value / 2 : -(value + 1) / 2, next]
}

/**
 * In an uncompressed CreateTime batch, the first record at or after `minOffset` whose
 * timestamp satisfies `matches`; walks the record framing only (length, attributes,
 * timestampDelta, offsetDelta). Undefined when the batch is compressed or holds no match.
 */
export function findRecord(
  buf: Buffer,
  at: number,
  sizeInBytes: number,
  minOffset: Offset,
  matches: (timestampMs: number) => boolean,
): TimestampAndOffsetInBatch | undefined {
  const attributes = buf.readInt16BE(at + ATTRIBUTES_OFFSET)
  if ((attributes & COMPRESSION_CODEC_MASK) !== 0 || (attributes & TIMESTAMP_TYPE_MASK) !== 0)
    return undefined
  // A batch in the log was checked when it was appended (offsets assigned by the leader).
  const baseOffset = readInt64(buf, at + BASE_OFFSET_OFFSET) as Offset
  const baseTimestamp = readInt64(buf, at + BASE_TIMESTAMP_OFFSET)
  return findInRecords(
    buf,
    at + RECORD_BATCH_OVERHEAD,
    at + sizeInBytes,
    baseOffset,
    baseTimestamp,
    minOffset,
    matches,
  )
}

/** A CreateTime batch whose records are compressed: findRecordInCompressed reads it. */
export function isCompressedCreateTime(buf: Buffer, at: number): boolean {
  const attributes = buf.readInt16BE(at + ATTRIBUTES_OFFSET)
  return (attributes & COMPRESSION_CODEC_MASK) !== 0 && (attributes & TIMESTAMP_TYPE_MASK) === 0
}

/**
 * findRecord for a compressed CreateTime batch (`batch` holds it whole): the records are
 * decompressed, as Kafka's LogSegment.findOffsetByTimestamp iterates them, so ListOffsets
 * by time names the record, not the batch. Undefined when none matches.
 */
export async function findRecordInCompressed(
  batch: Buffer,
  minOffset: Offset,
  matches: (timestampMs: number) => boolean,
): Promise<TimestampAndOffsetInBatch | undefined> {
  const codec = (batch.readInt16BE(ATTRIBUTES_OFFSET) & COMPRESSION_CODEC_MASK) as CompressionType
  const records = await decompress(codec, batch.subarray(RECORD_BATCH_OVERHEAD))
  const baseOffset = readInt64(batch, BASE_OFFSET_OFFSET) as Offset
  const baseTimestamp = readInt64(batch, BASE_TIMESTAMP_OFFSET)
  return findInRecords(records, 0, records.length, baseOffset, baseTimestamp, minOffset, matches)
}

/** Walks the records of `buf` from `pos` to `end` (their framing only) for the first match. */
function findInRecords(
  buf: Buffer,
  start: number,
  end: number,
  baseOffset: Offset,
  baseTimestamp: number,
  minOffset: Offset,
  matches: (timestampMs: number) => boolean,
): TimestampAndOffsetInBatch | undefined {
  let pos = start
  while (pos < end) {
    const length = readVarlong(buf, pos, end)
    if (length === undefined) return undefined
    const recordEnd = length[1] + length[0]
    const timestampDelta = readVarlong(buf, length[1] + 1, end)
    if (timestampDelta === undefined) return undefined
    const offsetDelta = readVarlong(buf, timestampDelta[1], end)
    if (offsetDelta === undefined) return undefined
    const offset = (baseOffset + offsetDelta[0]) as Offset
    const timestamp = baseTimestamp + timestampDelta[0]
    if (offset >= minOffset && matches(timestamp)) return { timestamp, offset }
    pos = recordEnd
  }
  return undefined
}

export interface TimestampAndOffsetInBatch {
  readonly timestamp: number
  readonly offset: Offset
}
