/**
 * The producer-batch rules a leader applies before the log's own checks (Kafka's
 * LogValidator and its produce path): what a client may append. The log checks size, CRC
 * and framing; these check what only a producer's batches must satisfy.
 */
import {
  BatchHeader,
  CONTROL_FLAG_MASK,
  LOG_OVERHEAD,
  RECORDS_COUNT_OFFSET,
} from '../protocol/batch-header.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { decodeRecordBatch } from '../protocol/record-batch.js'
import type { AppendOrigin } from '../storage/unified-log.js'
import { KafkaError } from './kafka-error.js'

/**
 * Producer-side rules Kafka applies before the log's own checks (which cover size and CRC):
 * records present, consecutive offsets inside each batch, no control batches from clients
 * (only a coordinator writes transaction markers).
 */
export function checkProducerBatches(batches: Buffer, origin: AppendOrigin): void {
  if (batches.length === 0) throw new KafkaError(ErrorCode.INVALID_RECORD, 'produce request with no records')
  let at = 0
  while (at + LOG_OVERHEAD <= batches.length) {
    const header = new BatchHeader(batches, at)
    if (at + RECORDS_COUNT_OFFSET + 4 > batches.length) break // truncated: the log reports it
    const count = header.recordsCount
    if (count === 0 || count !== header.lastOffsetDelta + 1) {
      throw new KafkaError(
        ErrorCode.INVALID_RECORD,
        `batch of ${count} records with lastOffsetDelta ${header.lastOffsetDelta}`,
      )
    }
    if (header.attributes & CONTROL_FLAG_MASK && origin === 'client') {
      throw new KafkaError(ErrorCode.INVALID_RECORD, 'producers may not write control batches')
    }
    at += Math.max(header.sizeInBytes, LOG_OVERHEAD)
  }
}

/** A compacted topic needs a key on every record (Kafka: INVALID_RECORD). */
export async function checkKeysPresent(batches: Buffer): Promise<void> {
  let at = 0
  while (at + LOG_OVERHEAD <= batches.length) {
    const batch = await decodeRecordBatch(batches, at).catch(() => null)
    if (batch === null) return // framing and CRC errors are reported by the log's checks
    if (batch.records.some((record) => record.key === null)) {
      throw new KafkaError(ErrorCode.INVALID_RECORD, 'Compacted topic cannot accept message without key')
    }
    at += new BatchHeader(batches, at).sizeInBytes
  }
}
