/**
 * Control batches that end a transaction (Kafka's EndTransactionMarker): one record whose
 * key is `version int16 (0) | type int16` (0 ABORT, 1 COMMIT) and whose value is
 * `version int16 (0) | coordinatorEpoch int32`, in a batch with the control and
 * transactional attributes, the producer's id and epoch, and no sequence.
 */

import { TidelogError } from '../common/errors.js'
import type { TransactionResult } from '../common/transaction.js'
import type { ProducerId } from '../common/types.js'
import { type BatchHeader, CompressionType, NO_SEQUENCE } from '../protocol/batch-header.js'
import { decodeRecordBatchSync, encodeRecordBatchSync } from '../protocol/record-batch.js'

/** Kafka's ControlRecordType ids. */
export const CONTROL_TYPE_ABORT = 0
export const CONTROL_TYPE_COMMIT = 1
const CONTROL_KEY_VERSION = 0
const END_TXN_MARKER_VERSION = 0
const CONTROL_KEY_BYTES = 4
const END_TXN_MARKER_VALUE_BYTES = 6

export interface EndTxnMarker {
  readonly result: TransactionResult
  readonly coordinatorEpoch: number
}

export interface EndTxnMarkerBatch extends EndTxnMarker {
  readonly producerId: ProducerId
  readonly producerEpoch: number
  readonly timestampMs: number
}

/** One COMMIT or ABORT control batch, offsets 0 (the leader assigns them). */
export function encodeEndTxnMarker(marker: EndTxnMarkerBatch): Buffer {
  const key = Buffer.alloc(CONTROL_KEY_BYTES)
  key.writeInt16BE(CONTROL_KEY_VERSION, 0)
  key.writeInt16BE(marker.result === 'commit' ? CONTROL_TYPE_COMMIT : CONTROL_TYPE_ABORT, 2)
  const value = Buffer.alloc(END_TXN_MARKER_VALUE_BYTES)
  value.writeInt16BE(END_TXN_MARKER_VERSION, 0)
  value.writeInt32BE(marker.coordinatorEpoch, 2)
  return encodeRecordBatchSync({
    records: [{ key, value, timestamp: marker.timestampMs }],
    compression: CompressionType.None,
    producerId: marker.producerId,
    producerEpoch: marker.producerEpoch,
    baseSequence: NO_SEQUENCE,
    isTransactional: true,
    isControl: true,
  })
}

/**
 * The marker a control batch holds; undefined for an empty control batch (the cleaner
 * emptied it) or another control type (Raft's). Throws InvalidRecordError when the record
 * cannot be read or its key or value is too short for its type.
 */
export function readEndTxnMarker(header: BatchHeader): EndTxnMarker | undefined {
  if (header.recordsCount === 0) return undefined
  const end = header.at + header.sizeInBytes
  const batch = decodeRecordBatchSync(header.buf.subarray(0, end), header.at)
  const record = batch.records[0]
  const key = record?.key
  if (key === null || key === undefined || key.length < CONTROL_KEY_BYTES)
    throw markerError(`control record key of ${key?.length ?? 0} bytes`)
  const type = key.readInt16BE(2)
  if (type !== CONTROL_TYPE_ABORT && type !== CONTROL_TYPE_COMMIT) return undefined
  const value = record.value
  if (value === null || value.length < END_TXN_MARKER_VALUE_BYTES)
    throw markerError(`end transaction marker value of ${value?.length ?? 0} bytes`)
  return {
    result: type === CONTROL_TYPE_COMMIT ? 'commit' : 'abort',
    coordinatorEpoch: value.readInt32BE(2),
  }
}

function markerError(problem: string): TidelogError {
  return new TidelogError('INVALID_RECORD', `invalid transaction marker: ${problem}`)
}
