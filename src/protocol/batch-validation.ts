/**
 * Validation of a v2 batch from its header and CRC only (Kafka's
 * DefaultRecordBatch.ensureValid and the header checks of LogValidator): what the produce,
 * replication and recovery paths run on every batch, without decoding records.
 */
import { assert } from '../common/assert.js'
import {
  ATTRIBUTES_OFFSET,
  BATCH_LENGTH_OFFSET,
  BatchHeader,
  COMPRESSION_CODEC_MASK,
  CompressionType,
  CRC_OFFSET,
  LAST_OFFSET_DELTA_OFFSET,
  LOG_OVERHEAD,
  MAGIC_OFFSET,
  RECORDS_COUNT_OFFSET,
} from './batch-header.js'
import { CorruptRecordError } from './compression.js'
import { crc32c } from './crc32c.js'
import {
  BATCH_LENGTH_MIN,
  type BatchValidation,
  InvalidRecordError,
  MAGIC_V2,
  MAX_COMPRESSION_CODEC,
  RECORD_BYTES_MIN,
  type ValidationFailureReason,
} from './record-batch-format.js'

// ---- validation: header and CRC only -------------------------------------------------------

function fail(reason: ValidationFailureReason, message: string): BatchValidation {
  return { ok: false, reason, message }
}

/**
 * Validates the v2 batch at `at` without decoding its records: size, magic, CRC-32C,
 * attributes and counts. Never throws for bad input. The rules only a producer's batches
 * must meet (records present, offsets contiguous, no control batch) are the leader's:
 * replication/producer-batch-checks.ts.
 */
export function validateRecordBatch(buf: Buffer, at = 0): BatchValidation {
  assert(at >= 0 && at <= buf.length, () => `batch position ${at} outside a ${buf.length}-byte buffer`)
  const available = buf.length - at
  if (available < LOG_OVERHEAD) return fail('invalid', `truncated: ${available} bytes, need ${LOG_OVERHEAD}`)
  const batchLength = buf.readInt32BE(at + BATCH_LENGTH_OFFSET)
  if (available > MAGIC_OFFSET) {
    const magic = buf.readInt8(at + MAGIC_OFFSET)
    if (magic !== MAGIC_V2) return fail('unsupported-magic', `magic ${magic} is not a v2 record batch`)
  }
  if (batchLength < BATCH_LENGTH_MIN)
    return fail('invalid', `batchLength ${batchLength} below ${BATCH_LENGTH_MIN}`)
  const sizeInBytes = LOG_OVERHEAD + batchLength
  if (available < sizeInBytes) return fail('invalid', `truncated: ${available} of ${sizeInBytes} bytes`)
  const stored = buf.readUInt32BE(at + CRC_OFFSET)
  const computed = crc32c(buf.subarray(at + ATTRIBUTES_OFFSET, at + sizeInBytes))
  if (stored !== computed) return fail('corrupt', `crc mismatch: stored ${stored}, computed ${computed}`)
  const problem = checkHeaderFields(buf, at, batchLength)
  if (problem !== null) return fail('invalid', problem)
  return { ok: true, header: new BatchHeader(buf, at), sizeInBytes }
}

/** Field rules once the CRC holds; returns the problem or null. */
function checkHeaderFields(buf: Buffer, at: number, batchLength: number): string | null {
  const attributes = buf.readInt16BE(at + ATTRIBUTES_OFFSET)
  const codec = attributes & COMPRESSION_CODEC_MASK
  if (codec > MAX_COMPRESSION_CODEC) return `unknown compression codec ${codec}`
  const count = buf.readInt32BE(at + RECORDS_COUNT_OFFSET)
  if (count < 0) return `negative recordsCount ${count}`
  const lastOffsetDelta = buf.readInt32BE(at + LAST_OFFSET_DELTA_OFFSET)
  if (lastOffsetDelta < 0) return `negative lastOffsetDelta ${lastOffsetDelta}`
  // Compaction leaves gaps, so offsets may outnumber records, never the reverse.
  if (count > lastOffsetDelta + 1)
    return `recordsCount ${count} exceeds the offset range ${lastOffsetDelta + 1}`
  const recordsBytes = batchLength - BATCH_LENGTH_MIN
  if (codec === CompressionType.None && count * RECORD_BYTES_MIN > recordsBytes) {
    return `recordsCount ${count} cannot fit in ${recordsBytes} bytes`
  }
  return null
}

/** Throws the error a failed validation stands for (decode paths). */
export function throwIfInvalid(
  result: BatchValidation,
): asserts result is Extract<BatchValidation, { ok: true }> {
  if (result.ok) return
  if (result.reason === 'corrupt') throw new CorruptRecordError(result.message)
  throw new InvalidRecordError(result.message)
}
