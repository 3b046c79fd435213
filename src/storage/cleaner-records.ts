/**
 * The cleaner's record framing (part of Kafka's Cleaner): spans of a batch's records, found
 * with the cleaner's own varint readers so retained records are copied byte for byte, and
 * a batch rebuilt from the records it keeps (or emptied) with its header and CRC redone.
 */
import { assert } from '../common/assert.js'
import {
  ATTRIBUTES_OFFSET,
  BASE_TIMESTAMP_OFFSET,
  BATCH_LENGTH_OFFSET,
  COMPRESSION_CODEC_MASK,
  CompressionType,
  CRC_OFFSET,
  LOG_OVERHEAD,
  MAX_TIMESTAMP_OFFSET,
  RECORD_BATCH_OVERHEAD,
  RECORDS_COUNT_OFFSET,
  TIMESTAMP_TYPE_MASK,
} from '../protocol/batch-header.js'
import { compress } from '../protocol/compression.js'
import { crc32c } from '../protocol/crc32c.js'
import { DELETE_HORIZON_FLAG_MASK } from '../protocol/record-batch.js'
import {
  readVarintAt,
  readVarlongAt,
  varintBytes,
  varlongBytes,
  writeVarint,
  writeVarlong,
} from '../protocol/varint.js'
import { readInt64, writeInt64 } from './record-batch-check.js'

/** One batch found in a segment window. */
export interface BatchView {
  readonly buf: Buffer
  readonly at: number
  readonly size: number
}

/** One record of a decoded records section, as byte positions. */
export interface RecordSpan {
  /** Position of the record's length varint. */
  readonly start: number
  readonly end: number
  /** Position right after the timestampDelta varlong (offsetDelta onwards is copied as is). */
  readonly afterTimestamp: number
  readonly timestampDelta: number
  readonly offsetDelta: number
  readonly keyStart: number
  /** -1 for a null key. */
  readonly keyLength: number
  readonly isTombstone: boolean
  readonly attributes: number
}

// ---- record framing (spans, to copy retained records byte for byte) ----

/** The `count` records of an uncompressed records section, as spans. Stored batches passed their CRC: bad framing is a bug or disk damage. */
export function walkRecords(data: Buffer, count: number): RecordSpan[] {
  const spans: RecordSpan[] = new Array(count)
  let pos = 0
  for (let i = 0; i < count; i++) {
    const start = pos
    const [length, bodyStart] = readVarintAt(data, pos)
    const end = bodyStart + length
    assert(length > 0 && end <= data.length, () => `record ${i} overruns its batch`)
    const [timestampDelta, afterTimestamp] = readVarlongAt(data, bodyStart + 1)
    const [offsetDelta, afterOffset] = readVarintAt(data, afterTimestamp)
    const [keyLength, keyStart] = readVarintAt(data, afterOffset)
    const afterKey = keyLength < 0 ? keyStart : keyStart + keyLength
    const [valueLength] = readVarintAt(data, afterKey)
    spans[i] = {
      start,
      end,
      afterTimestamp,
      timestampDelta,
      offsetDelta,
      keyStart,
      keyLength: keyLength < 0 ? -1 : keyLength,
      isTombstone: valueLength < 0,
      attributes: data[bodyStart],
    }
    pos = end
  }
  assert(pos === data.length, 'bytes left after the last record')
  return spans
}

/**
 * A batch holding only `retained` of `batch`'s records: same base offset, lastOffsetDelta,
 * codec, timestamp type, producer fields and leader epoch; recordsCount, maxTimestamp
 * (CreateTime), the delete horizon and the CRC recomputed. Records are copied as they
 * are unless the base timestamp moves (a delete horizon set or cleared).
 */
export async function rebuildBatch(
  batch: BatchView,
  data: Buffer,
  retained: readonly RecordSpan[],
  horizonMs: number | undefined,
): Promise<Buffer> {
  const { buf, at } = batch
  const attributes = buf.readInt16BE(at + ATTRIBUTES_OFFSET)
  const oldBase = readInt64(buf, at + BASE_TIMESTAMP_OFFSET)
  const hadHorizon = (attributes & DELETE_HORIZON_FLAG_MASK) !== 0
  const firstTimestamp = oldBase + retained[0].timestampDelta
  const newBase = horizonMs ?? (hadHorizon ? firstTimestamp : oldBase)
  let total = 0
  let maxTimestamp = -1
  for (const span of retained) {
    const timestamp = oldBase + span.timestampDelta
    maxTimestamp = Math.max(maxTimestamp, timestamp)
    if (newBase === oldBase) {
      total += span.end - span.start
    } else {
      const body = span.end - span.afterTimestamp + 1 + varlongBytes(timestamp - newBase)
      total += varintBytes(body) + body
    }
  }
  const plain = Buffer.allocUnsafe(total)
  let pos = 0
  for (const span of retained) {
    if (newBase === oldBase) {
      pos += data.copy(plain, pos, span.start, span.end)
      continue
    }
    const delta = oldBase + span.timestampDelta - newBase
    const body = span.end - span.afterTimestamp + 1 + varlongBytes(delta)
    pos = writeVarint(plain, pos, body)
    plain[pos++] = span.attributes
    pos = writeVarlong(plain, pos, delta)
    pos += data.copy(plain, pos, span.afterTimestamp, span.end)
  }
  assert(pos === total, 'rebuilt records size mismatch')
  const codec = attributes & COMPRESSION_CODEC_MASK
  const section = codec === CompressionType.None ? plain : await compress(codec, plain)
  const out = Buffer.allocUnsafe(RECORD_BATCH_OVERHEAD + section.length)
  buf.copy(out, 0, at, at + RECORD_BATCH_OVERHEAD)
  section.copy(out, RECORD_BATCH_OVERHEAD)
  out.writeInt32BE(out.length - LOG_OVERHEAD, BATCH_LENGTH_OFFSET)
  const newAttributes =
    horizonMs === undefined ? attributes & ~DELETE_HORIZON_FLAG_MASK : attributes | DELETE_HORIZON_FLAG_MASK
  out.writeInt16BE(newAttributes, ATTRIBUTES_OFFSET)
  writeInt64(out, BASE_TIMESTAMP_OFFSET, newBase)
  if ((attributes & TIMESTAMP_TYPE_MASK) === 0) writeInt64(out, MAX_TIMESTAMP_OFFSET, maxTimestamp)
  out.writeInt32BE(retained.length, RECORDS_COUNT_OFFSET)
  out.writeUInt32BE(crc32c(out.subarray(ATTRIBUTES_OFFSET)), CRC_OFFSET)
  return out
}

/** The header of `batch` alone, counting no records (Kafka's empty batch keeping producer state). */
export function emptyBatchOf(batch: BatchView): Buffer {
  const out = Buffer.allocUnsafe(RECORD_BATCH_OVERHEAD)
  batch.buf.copy(out, 0, batch.at, batch.at + RECORD_BATCH_OVERHEAD)
  out.writeInt32BE(RECORD_BATCH_OVERHEAD - LOG_OVERHEAD, BATCH_LENGTH_OFFSET)
  // No records section, so no codec either (Kafka's writeEmptyHeader).
  const attributes = out.readInt16BE(ATTRIBUTES_OFFSET)
  out.writeInt16BE(attributes & ~DELETE_HORIZON_FLAG_MASK & ~COMPRESSION_CODEC_MASK, ATTRIBUTES_OFFSET)
  out.writeInt32BE(0, RECORDS_COUNT_OFFSET)
  out.writeUInt32BE(crc32c(out.subarray(ATTRIBUTES_OFFSET)), CRC_OFFSET)
  return out
}
