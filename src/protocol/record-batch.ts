/**
 * Kafka record batches (magic v2) and legacy message sets (magic 0 and 1): the one import
 * for the rest of tidelog, gathered from the files that follow Kafka's classes.
 *
 * Two kinds of callers:
 * - the produce, replication and recovery paths work on whole batches as bytes:
 *   `validateRecordBatch` (batch-validation.ts), `splitBatches` (memory-records.ts),
 *   `assignOffsets`, `setLogAppendTime` (record-batch-format.ts). These read the fixed
 *   header only, never copy the batch and allocate nothing per record.
 * - consumers, compaction, tests and the client decode records: `decodeRecordBatch`, and
 *   build batches: `encodeRecordBatch` (default-record-batch.ts), `RecordBatchBuilder`
 *   (record-batch-builder.ts); old clients' message sets are legacy-records.ts.
 *
 * Offsets and timestamps are JavaScript numbers (exact below 2^53, which Kafka offsets and
 * millisecond timestamps never reach); producerId is a bigint, as in BatchHeader.
 */
export { throwIfInvalid, validateRecordBatch } from './batch-validation.js'
export {
  type DecodeOptions,
  decodeRecordBatch,
  decodeRecordBatchSync,
  decodeRecords,
  encodeRecordBatch,
  encodeRecordBatchSync,
  openRecordBatch,
  type RecordVisitor,
  readBatchHeader,
  visitRecords,
} from './default-record-batch.js'
export {
  type ConvertLegacyOptions,
  convertLegacyToV2,
  decodeLegacyMessageSet,
  type LegacyMessage,
  type LegacyMessageSet,
} from './legacy-records.js'
export {
  type BatchesTail,
  type BatchSpan,
  iterateBatches,
  type SplitBatches,
  splitBatches,
} from './memory-records.js'
export {
  RecordBatchBuilder,
  type RecordBatchBuilderOptions,
  type RecordBatchStamp,
} from './record-batch-builder.js'
export {
  assignOffsets,
  BATCH_LENGTH_MIN,
  type BatchValidation,
  CorruptRecordError,
  DELETE_HORIZON_FLAG_MASK,
  type DecodedRecord,
  type DecodedRecordBatch,
  type EncodeRecordBatchOptions,
  InvalidRecordError,
  isLegacyMagic,
  LEGACY_MESSAGE_OVERHEAD_V0,
  LEGACY_MESSAGE_OVERHEAD_V1,
  MAGIC_V0,
  MAGIC_V1,
  MAGIC_V2,
  NO_TIMESTAMP,
  type Record,
  type RecordBatchHeaderFields,
  type RecordHeader,
  type RecordInput,
  setLogAppendTime,
  type ValidationFailureReason,
} from './record-batch-format.js'
