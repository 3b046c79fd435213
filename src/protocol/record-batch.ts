/**
 * Kafka record batches (magic v2) and legacy message sets (magic 0 and 1).
 *
 * Two kinds of callers:
 * - the produce, replication and recovery paths work on whole batches as bytes:
 *   `validateRecordBatch`, `splitBatches`, `assignOffsets`, `setLogAppendTime`. These read
 *   the fixed header only, never copy the batch and allocate nothing per record.
 * - consumers, compaction, tests and the client decode records: `decodeRecordBatch`, and
 *   build batches: `encodeRecordBatch`.
 *
 * Record layout (all lengths and deltas are zigzag varints, timestampDelta a varlong):
 *   length | attributes int8 | timestampDelta | offsetDelta | keyLength | key |
 *   valueLength | value | headerCount | [headerKeyLength headerKey headerValueLength value]
 * A length of -1 means null. The records section is compressed as a whole; recordsCount in
 * the header stays uncompressed.
 *
 * Offsets and timestamps are JavaScript numbers (exact below 2^53, which Kafka offsets and
 * millisecond timestamps never reach); producerId is a bigint, as in BatchHeader.
 */
import { assert } from '../common/assert.js'
import { TidelogError } from '../common/errors.js'
import {
  ATTRIBUTES_OFFSET,
  BASE_OFFSET_OFFSET,
  BASE_SEQUENCE_OFFSET,
  BASE_TIMESTAMP_OFFSET,
  BATCH_LENGTH_OFFSET,
  BatchHeader,
  COMPRESSION_CODEC_MASK,
  CONTROL_FLAG_MASK,
  CompressionType,
  CRC_OFFSET,
  LAST_OFFSET_DELTA_OFFSET,
  LOG_OVERHEAD,
  MAGIC_OFFSET,
  MAX_TIMESTAMP_OFFSET,
  NO_PARTITION_LEADER_EPOCH,
  NO_PRODUCER_ID,
  NO_SEQUENCE,
  PARTITION_LEADER_EPOCH_OFFSET,
  PRODUCER_EPOCH_OFFSET,
  PRODUCER_ID_OFFSET,
  RECORD_BATCH_OVERHEAD,
  RECORDS_COUNT_OFFSET,
  TIMESTAMP_TYPE_MASK,
  TimestampType,
  TRANSACTIONAL_FLAG_MASK,
} from './batch-header.js'
import {
  CorruptRecordError,
  compress,
  compressSync,
  type DecompressOptions,
  decompress,
  decompressSync,
  hasSyncCodec,
} from './compression.js'
import { crc32, crc32c } from './crc32c.js'

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
const RECORD_BYTES_MIN = 7
/** Bit 6 of the attributes: the batch carries a delete horizon (KIP-534); kept, never set here. */
export const DELETE_HORIZON_FLAG_MASK = 0x40
const MAX_COMPRESSION_CODEC = CompressionType.Zstd
const INT32_MAX = 0x7fffffff
/** Zigzag of a number is exact while its magnitude stays below 2^52. */
const VARLONG_NUMBER_MAX = 2 ** 52

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
  producerId: bigint
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

function readInt64Number(buf: Buffer, at: number): number {
  return buf.readInt32BE(at) * TWO_POW_32 + buf.readUInt32BE(at + 4)
}

function writeInt64Number(buf: Buffer, at: number, value: number): void {
  assert(Number.isSafeInteger(value), () => `int64 value ${value} is not a safe integer`)
  const high = Math.floor(value / TWO_POW_32)
  buf.writeInt32BE(high, at)
  buf.writeUInt32BE(value - high * TWO_POW_32, at + 4)
}

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

function writeCrc(buf: Buffer, at: number, sizeInBytes: number): void {
  buf.writeUInt32BE(crc32c(buf.subarray(at + ATTRIBUTES_OFFSET, at + sizeInBytes)), at + CRC_OFFSET)
}

// ---- walking a records blob -----------------------------------------------------------------

/** One batch (v2) or one legacy message entry (magic 0/1): both share offset + length framing. */
export interface BatchSpan {
  at: number
  sizeInBytes: number
  magic: number
}

export type BatchesTail =
  | { kind: 'complete' }
  /** The blob ends inside an entry, as fetch responses may; sizeInBytes is -1 when unknown. */
  | { kind: 'partial'; at: number; availableBytes: number; sizeInBytes: number }
  | { kind: 'invalid'; at: number; message: string }

export interface SplitBatches {
  batches: BatchSpan[]
  /** Bytes covered by whole entries: the start of the tail. */
  validBytes: number
  tail: BatchesTail
}

const SPAN_PARTIAL = -1
const SPAN_INVALID = -2

/** Size of the entry at `at`, SPAN_PARTIAL if the blob ends first, SPAN_INVALID if its length is impossible. */
function spanSize(buf: Buffer, at: number): number {
  const available = buf.length - at
  if (available < LOG_OVERHEAD) return SPAN_PARTIAL
  const length = buf.readInt32BE(at + BATCH_LENGTH_OFFSET)
  if (length < LEGACY_MESSAGE_OVERHEAD_V0) return SPAN_INVALID
  if (available <= MAGIC_OFFSET) return SPAN_PARTIAL
  if (buf[at + MAGIC_OFFSET] === MAGIC_V2 && length < BATCH_LENGTH_MIN) return SPAN_INVALID
  return available < LOG_OVERHEAD + length ? SPAN_PARTIAL : LOG_OVERHEAD + length
}

function tailAt(buf: Buffer, at: number, size: number): BatchesTail {
  if (size === SPAN_INVALID) {
    return {
      kind: 'invalid',
      at,
      message: `entry length ${buf.readInt32BE(at + BATCH_LENGTH_OFFSET)} is impossible`,
    }
  }
  const known = buf.length - at >= LOG_OVERHEAD
  const sizeInBytes = known ? LOG_OVERHEAD + buf.readInt32BE(at + BATCH_LENGTH_OFFSET) : -1
  return { kind: 'partial', at, availableBytes: buf.length - at, sizeInBytes }
}

/**
 * Walks the entries of a records blob (v2 batches, legacy messages, or both). Yields each
 * whole entry and returns how the blob ends. Checks framing only: validate each batch too.
 */
export function* iterateBatches(buf: Buffer): Generator<BatchSpan, BatchesTail, undefined> {
  let at = 0
  // Each entry takes at least LOG_OVERHEAD bytes, which bounds the loop.
  for (let steps = 0; steps <= buf.length / LOG_OVERHEAD; steps++) {
    if (at === buf.length) return { kind: 'complete' }
    const size = spanSize(buf, at)
    if (size < 0) return tailAt(buf, at, size)
    yield { at, sizeInBytes: size, magic: buf[at + MAGIC_OFFSET] }
    at += size
  }
  assert(false, 'iterateBatches made more steps than the blob has entries')
}

export function splitBatches(buf: Buffer): SplitBatches {
  const batches: BatchSpan[] = []
  const walk = iterateBatches(buf)
  let step = walk.next()
  while (step.done !== true) {
    batches.push(step.value)
    step = walk.next()
  }
  const tail = step.value
  const validBytes = tail.kind === 'complete' ? buf.length : tail.at
  return { batches, validBytes, tail }
}

/** Whether the blob starts with a legacy (magic 0/1) message; needs 17 bytes. */
export function isLegacyMagic(buf: Buffer, at = 0): boolean {
  return buf.length > at + MAGIC_OFFSET && buf[at + MAGIC_OFFSET] < MAGIC_V2
}

// ---- varint helpers (numbers, no BigInt) ---------------------------------------------------

function zigzag32(value: number): number {
  return ((value << 1) ^ (value >> 31)) >>> 0
}

// The producer's append path inlines these into large optimized functions. A branch that
// TurboFan never saw taken (a comparison chain's later arms, a loop's body, Math in a path
// not run yet) is compiled as a deoptimization, and the first record to reach it throws
// away every function that inlined it: the append path, and the caller's send loop with
// it. The record timestamp's delta grows as a batch fills (its varlong reaches 2 bytes at
// 64 ms), so its encoding shares writeUnsignedVarint with the lengths, whose loop runs
// from the first record on, and the sizes are computed without branches.

/** Bytes of a uint32 as an unsigned varint: ceil(significant bits / 7), at least 1. */
function unsignedVarintBytes(value: number): number {
  return Math.max(1, ((38 - Math.clz32(value)) / 7) | 0)
}

function varintBytes(value: number): number {
  return unsignedVarintBytes(zigzag32(value))
}

/** A uint32 as an unsigned varint. */
function writeUnsignedVarint(buf: Buffer, at: number, value: number): number {
  let v = value
  while (v >= 0x80) {
    buf[at++] = (v & 0x7f) | 0x80
    v >>>= 7
  }
  buf[at++] = v
  return at
}

function writeVarint(buf: Buffer, at: number, value: number): number {
  return writeUnsignedVarint(buf, at, zigzag32(value))
}

function zigzag64(value: number): number {
  return value >= 0 ? value * 2 : -value * 2 - 1
}

function varlongBytes(value: number): number {
  let v = zigzag64(value)
  if (v <= 0xffffffff) return unsignedVarintBytes(v)
  let bytes = 1
  while (v >= 0x80) {
    v = Math.floor(v / 0x80)
    bytes++
  }
  return bytes
}

function writeVarlong(buf: Buffer, at: number, value: number): number {
  let v = zigzag64(value)
  if (v <= 0xffffffff) return writeUnsignedVarint(buf, at, v)
  while (v >= 0x80) {
    buf[at++] = (v % 0x80) | 0x80
    v = Math.floor(v / 0x80)
  }
  buf[at++] = v
  return at
}

/** Reads records with a cursor; malformed bytes throw CorruptRecordError. */
class RecordCursor {
  constructor(
    readonly buf: Buffer,
    public pos: number,
    readonly end: number,
  ) {}

  private corrupt(what: string): CorruptRecordError {
    return new CorruptRecordError(`record ${what} at byte ${this.pos}`)
  }

  byte(): number {
    if (this.pos >= this.end) throw this.corrupt('truncated')
    return this.buf[this.pos++]
  }

  /** Kafka's varint: at most 5 bytes, 32 bits, zigzag. */
  varint(): number {
    let raw = 0
    for (let shift = 0; shift <= 28; shift += 7) {
      const b = this.byte()
      raw = (raw | ((b & 0x7f) << shift)) >>> 0
      if ((b & 0x80) === 0) return (raw >>> 1) ^ -(raw & 1)
    }
    throw this.corrupt('varint longer than 5 bytes')
  }

  /** Kafka's varlong, as a number: magnitudes past 2^52 are refused (no timestamp delta is that large). */
  varlong(): number {
    let raw = 0
    for (let shift = 0; shift <= 63; shift += 7) {
      const b = this.byte()
      raw += (b & 0x7f) * 2 ** shift
      if ((b & 0x80) === 0) {
        if (raw > VARLONG_NUMBER_MAX * 2) throw this.corrupt('varlong beyond 2^52')
        return raw % 2 === 0 ? raw / 2 : -(raw + 1) / 2
      }
    }
    throw this.corrupt('varlong longer than 10 bytes')
  }

  /** A view of `length` bytes; Kafka reads any negative length as null. */
  nullableBytes(length: number): Buffer | null {
    if (length < 0) return null
    if (length > this.end - this.pos) throw this.corrupt(`field of ${length} bytes overruns`)
    const start = this.pos
    this.pos += length
    return this.buf.subarray(start, this.pos)
  }
}

// ---- encoding ---------------------------------------------------------------------------------

interface NormalizedBatch {
  baseTimestamp: number
  maxTimestamp: number
  lastOffsetDelta: number
  timestamps: number[]
  offsetDeltas: number[]
}

function normalizeRecords(opts: EncodeRecordBatchOptions): NormalizedBatch {
  const timestamps: number[] = []
  const offsetDeltas: number[] = []
  let maxTimestamp = NO_TIMESTAMP
  for (let i = 0; i < opts.records.length; i++) {
    const record = opts.records[i]
    const timestamp = record.timestamp ?? opts.defaultTimestamp
    assert(timestamp !== undefined, () => `record ${i} has no timestamp and there is no defaultTimestamp`)
    assert(Number.isSafeInteger(timestamp), () => `record ${i} timestamp ${timestamp} is not an integer`)
    const offsetDelta = record.offsetDelta ?? i
    const previous = i === 0 ? -1 : offsetDeltas[i - 1]
    assert(
      offsetDelta > previous && offsetDelta <= INT32_MAX,
      () => `record ${i} offsetDelta ${offsetDelta} out of order`,
    )
    timestamps.push(timestamp)
    offsetDeltas.push(offsetDelta)
    maxTimestamp = Math.max(maxTimestamp, timestamp)
  }
  const lastRecordDelta = offsetDeltas.length === 0 ? 0 : offsetDeltas[offsetDeltas.length - 1]
  const lastOffsetDelta = opts.lastOffsetDelta ?? lastRecordDelta
  assert(lastOffsetDelta >= lastRecordDelta, 'lastOffsetDelta below the last record offsetDelta')
  const baseTimestamp = timestamps.length === 0 ? (opts.defaultTimestamp ?? NO_TIMESTAMP) : timestamps[0]
  return {
    baseTimestamp,
    maxTimestamp: opts.maxTimestamp ?? maxTimestamp,
    lastOffsetDelta,
    timestamps,
    offsetDeltas,
  }
}

function recordBodyBytes(record: RecordInput, timestampDelta: number, offsetDelta: number): number {
  const key = record.key ?? null
  let bytes = 1 + varlongBytes(timestampDelta) + varintBytes(offsetDelta)
  bytes += key === null ? 1 : varintBytes(key.length) + key.length
  bytes += record.value === null ? 1 : varintBytes(record.value.length) + record.value.length
  const headers = record.headers ?? []
  bytes += varintBytes(headers.length)
  for (const header of headers) {
    const keyBytes = Buffer.byteLength(header.key)
    bytes += varintBytes(keyBytes) + keyBytes
    bytes += header.value === null ? 1 : varintBytes(header.value.length) + header.value.length
  }
  return bytes
}

function writeNullableBytes(buf: Buffer, at: number, value: Buffer | null): number {
  if (value === null) return writeVarint(buf, at, -1)
  const pos = writeVarint(buf, at, value.length)
  return pos + value.copy(buf, pos)
}

function writeRecord(
  buf: Buffer,
  at: number,
  record: RecordInput,
  bodyBytes: number,
  tsDelta: number,
  offsetDelta: number,
): number {
  const start = writeVarint(buf, at, bodyBytes)
  let pos = start
  buf[pos++] = 0 // record attributes: unused by Kafka
  pos = writeVarlong(buf, pos, tsDelta)
  pos = writeVarint(buf, pos, offsetDelta)
  pos = writeNullableBytes(buf, pos, record.key ?? null)
  pos = writeNullableBytes(buf, pos, record.value)
  const headers = record.headers ?? []
  pos = writeVarint(buf, pos, headers.length)
  for (const header of headers) {
    pos = writeVarint(buf, pos, Buffer.byteLength(header.key))
    pos += buf.write(header.key, pos, 'utf8')
    pos = writeNullableBytes(buf, pos, header.value)
  }
  assert(pos - start === bodyBytes, () => `record body took ${pos - start} bytes, sized ${bodyBytes}`)
  return pos
}

/** Encodes the records section into a buffer with `headroom` free bytes in front (for the header). */
function encodeRecords(opts: EncodeRecordBatchOptions, batch: NormalizedBatch, headroom: number): Buffer {
  const bodies = new Array<number>(opts.records.length)
  let total = 0
  for (let i = 0; i < opts.records.length; i++) {
    const tsDelta = batch.timestamps[i] - batch.baseTimestamp
    assert(Math.abs(tsDelta) < VARLONG_NUMBER_MAX, () => `record ${i} timestamp delta ${tsDelta} too large`)
    bodies[i] = recordBodyBytes(opts.records[i], tsDelta, batch.offsetDeltas[i])
    total += unsignedVarintBytes(zigzag32(bodies[i])) + bodies[i]
  }
  const buf = Buffer.allocUnsafe(headroom + total)
  let pos = headroom
  for (let i = 0; i < opts.records.length; i++) {
    const tsDelta = batch.timestamps[i] - batch.baseTimestamp
    pos = writeRecord(buf, pos, opts.records[i], bodies[i], tsDelta, batch.offsetDeltas[i])
  }
  assert(pos === buf.length, 'records section size mismatch')
  return buf
}

function attributesOf(opts: EncodeRecordBatchOptions): number {
  const compression = opts.compression ?? CompressionType.None
  assert(compression >= 0 && compression <= MAX_COMPRESSION_CODEC, () => `bad compression ${compression}`)
  let attributes = compression
  if (opts.timestampType === TimestampType.LogAppendTime) attributes |= TIMESTAMP_TYPE_MASK
  if (opts.isTransactional === true) attributes |= TRANSACTIONAL_FLAG_MASK
  if (opts.isControl === true) attributes |= CONTROL_FLAG_MASK
  return attributes
}

/** Fills the 61-byte header of a batch whose records section is already in place, then the CRC. */
function writeHeader(buf: Buffer, opts: EncodeRecordBatchOptions, batch: NormalizedBatch): void {
  const epoch = opts.producerEpoch ?? -1
  assert(epoch >= -1 && epoch <= 0x7fff, () => `bad producerEpoch ${epoch}`)
  writeInt64Number(buf, BASE_OFFSET_OFFSET, opts.baseOffset ?? 0)
  buf.writeInt32BE(buf.length - LOG_OVERHEAD, BATCH_LENGTH_OFFSET)
  buf.writeInt32BE(opts.partitionLeaderEpoch ?? NO_PARTITION_LEADER_EPOCH, PARTITION_LEADER_EPOCH_OFFSET)
  buf.writeInt8(MAGIC_V2, MAGIC_OFFSET)
  buf.writeInt16BE(attributesOf(opts), ATTRIBUTES_OFFSET)
  buf.writeInt32BE(batch.lastOffsetDelta, LAST_OFFSET_DELTA_OFFSET)
  writeInt64Number(buf, BASE_TIMESTAMP_OFFSET, batch.baseTimestamp)
  writeInt64Number(buf, MAX_TIMESTAMP_OFFSET, batch.maxTimestamp)
  buf.writeBigInt64BE(opts.producerId ?? NO_PRODUCER_ID, PRODUCER_ID_OFFSET)
  buf.writeInt16BE(epoch, PRODUCER_EPOCH_OFFSET)
  buf.writeInt32BE(opts.baseSequence ?? NO_SEQUENCE, BASE_SEQUENCE_OFFSET)
  buf.writeInt32BE(opts.records.length, RECORDS_COUNT_OFFSET)
  writeCrc(buf, 0, buf.length)
}

function withHeaderRoom(compressed: Buffer): Buffer {
  const buf = Buffer.allocUnsafe(RECORD_BATCH_OVERHEAD + compressed.length)
  compressed.copy(buf, RECORD_BATCH_OVERHEAD)
  return buf
}

/**
 * Builds one complete v2 batch. An empty records list gives a header-only batch with no
 * records section even when compressed, as Kafka writes empty batches.
 */
export async function encodeRecordBatch(opts: EncodeRecordBatchOptions): Promise<Buffer> {
  const compression = opts.compression ?? CompressionType.None
  const batch = normalizeRecords(opts)
  let buf: Buffer
  if (compression === CompressionType.None || opts.records.length === 0) {
    buf = encodeRecords(opts, batch, RECORD_BATCH_OVERHEAD)
  } else {
    const plain = encodeRecords(opts, batch, 0)
    buf = withHeaderRoom(await compress(compression, plain, opts.compressionLevel))
  }
  writeHeader(buf, opts, batch)
  return buf
}

/** encodeRecordBatch for codecs with a synchronous implementation (all but zstd). */
export function encodeRecordBatchSync(opts: EncodeRecordBatchOptions): Buffer {
  const compression = opts.compression ?? CompressionType.None
  assert(hasSyncCodec(compression), () => `${CompressionType[compression]} has no synchronous codec`)
  const batch = normalizeRecords(opts)
  let buf: Buffer
  if (compression === CompressionType.None || opts.records.length === 0) {
    buf = encodeRecords(opts, batch, RECORD_BATCH_OVERHEAD)
  } else {
    buf = withHeaderRoom(compressSync(compression, encodeRecords(opts, batch, 0), opts.compressionLevel))
  }
  writeHeader(buf, opts, batch)
  return buf
}

// ---- incremental building (Kafka's MemoryRecordsBuilder) -------------------------------------

/** First chunk of a builder at most this size unless a record needs more; later chunks grow to CHUNK_BYTES_MAX. */
const BUILDER_FIRST_CHUNK_MAX = 16384
const BUILDER_CHUNK_BYTES_MAX = 65536

export interface RecordBatchBuilderOptions {
  /** Where chunk buffers come from (a producer's pool of reusable buffers); default allocUnsafe. */
  allocate?: (bytes: number) => Buffer
  compression?: CompressionType
  compressionLevel?: number
  /** Bytes the batch is expected to reach (batch.size): the first chunk's size, up to 16 KiB. */
  expectedBytes?: number
  /** baseTimestamp of a batch built without records. */
  defaultTimestamp?: number
}

/** What a producer stamps when the batch is first sent (fixed-offset header fields). */
export interface RecordBatchStamp {
  producerId?: bigint
  producerEpoch?: number
  baseSequence?: number
  /** A transactional producer's batch: the attribute bit its COMMIT or ABORT marker ends. */
  isTransactional?: boolean
}

/**
 * Encodes records into batch bytes as they are appended, instead of keeping record objects
 * to encode when the batch is drained: each record is written once into a chunk (the first
 * chunk starts with room for the 61-byte header; a record never spans chunks). `build`
 * fills the header (producer id, epoch and base sequence given then, as an idempotent
 * producer stamps a batch when it first sends it), compresses the records section once
 * and computes the CRC over the final bytes. Building again (a re-stamped batch) rewrites
 * the header and CRC over the same records. The bytes equal `encodeRecordBatch`'s for the
 * same records, timestamps as given and offset deltas 0..n-1.
 */
export class RecordBatchBuilder {
  readonly compression: CompressionType
  private readonly compressionLevel: number | undefined
  private readonly defaultTimestamp: number
  /** Filled parts of earlier chunks. */
  private readonly chunks: Buffer[] = []
  private current: Buffer
  /** Where the current chunk's records start (RECORD_BATCH_OVERHEAD in the first chunk). */
  private currentStart = RECORD_BATCH_OVERHEAD
  private pos = RECORD_BATCH_OVERHEAD
  private count = 0
  private baseTimestamp = NO_TIMESTAMP
  private maxTimestamp = NO_TIMESTAMP
  private recordsBytes = 0
  /** The compressed batch with room for its header, once built (compressed codecs only). */
  private compressed: Buffer | null = null
  private built = false
  private readonly allocate: (bytes: number) => Buffer
  /** Every chunk buffer taken from `allocate`, whole (for `takeBuffers`). */
  private readonly allocated: Buffer[] = []

  constructor(options: RecordBatchBuilderOptions = {}) {
    this.compression = options.compression ?? CompressionType.None
    assert(
      this.compression >= 0 && this.compression <= MAX_COMPRESSION_CODEC,
      () => `bad compression ${this.compression}`,
    )
    this.compressionLevel = options.compressionLevel
    this.defaultTimestamp = options.defaultTimestamp ?? NO_TIMESTAMP
    this.allocate = options.allocate ?? ((bytes) => Buffer.allocUnsafe(bytes))
    const expected = options.expectedBytes ?? BUILDER_FIRST_CHUNK_MAX
    this.current = this.newChunk(
      Math.max(RECORD_BATCH_OVERHEAD + 64, Math.min(expected, BUILDER_FIRST_CHUNK_MAX)),
    )
  }

  private newChunk(bytes: number): Buffer {
    const chunk = this.allocate(bytes)
    assert(chunk.length >= bytes, 'allocate returned a short buffer')
    this.allocated.push(chunk)
    return chunk
  }

  /**
   * Hands back the chunk buffers for reuse once the batch's bytes are no longer needed
   * (acknowledged or failed, no request holding them); the builder is unusable after.
   */
  takeBuffers(): Buffer[] {
    this.built = true
    this.compressed = null
    return this.allocated.splice(0)
  }

  get recordCount(): number {
    return this.count
  }

  /** Encoded size so far, header included, before compression. */
  get sizeInBytes(): number {
    return RECORD_BATCH_OVERHEAD + this.recordsBytes
  }

  get isBuilt(): boolean {
    return this.built
  }

  /** Appends one record (offset delta: its index); returns the bytes it took. */
  append(
    timestamp: number,
    key: Buffer | null,
    value: Buffer | null,
    headers?: readonly RecordHeader[],
  ): number {
    // The checks are plain ifs: assert's message closures were allocated per record by the
    // interpreter and baseline code that run the first thousands of records.
    if (this.built) assert(false, 'append to a built batch')
    if (!Number.isSafeInteger(timestamp)) assert(false, `record timestamp ${timestamp} is not an integer`)
    const offsetDelta = this.count
    if (offsetDelta >= INT32_MAX) assert(false, 'too many records in one batch')
    if (offsetDelta === 0) this.baseTimestamp = timestamp
    const tsDelta = timestamp - this.baseTimestamp
    if (!(Math.abs(tsDelta) < VARLONG_NUMBER_MAX))
      assert(false, `record timestamp delta ${tsDelta} too large`)
    // Each length's varint size is computed once, for the body's size and for the write.
    const keyLength = key === null ? -1 : key.length
    const valueLength = value === null ? -1 : value.length
    const keyLengthBytes = varintBytes(keyLength)
    const valueLengthBytes = varintBytes(valueLength)
    const headerCount = headers === undefined ? 0 : headers.length
    let body =
      1 +
      varlongBytes(tsDelta) +
      varintBytes(offsetDelta) +
      keyLengthBytes +
      Math.max(keyLength, 0) +
      valueLengthBytes +
      Math.max(valueLength, 0) +
      varintBytes(headerCount)
    for (let i = 0; i < headerCount; i++) {
      const header = headers![i]
      const keyBytes = Buffer.byteLength(header.key)
      body += varintBytes(keyBytes) + keyBytes
      body += header.value === null ? 1 : varintBytes(header.value.length) + header.value.length
    }
    const total = varintBytes(body) + body
    if (this.pos + total > this.current.length) this.nextChunk(total)
    const buf = this.current
    let pos = writeVarint(buf, this.pos, body)
    const start = pos
    buf[pos++] = 0 // record attributes: unused by Kafka
    pos = writeVarlong(buf, pos, tsDelta)
    pos = writeVarint(buf, pos, offsetDelta)
    pos = writeVarint(buf, pos, keyLength) // -1 (zigzag 1) for a null key
    if (keyLength > 0) {
      buf.set(key!, pos)
      pos += keyLength
    }
    pos = writeVarint(buf, pos, valueLength)
    if (valueLength > 0) {
      buf.set(value!, pos)
      pos += valueLength
    }
    pos = writeVarint(buf, pos, headerCount)
    for (let i = 0; i < headerCount; i++) {
      const header = headers![i]
      pos = writeVarint(buf, pos, Buffer.byteLength(header.key))
      pos += buf.write(header.key, pos, 'utf8')
      pos = writeNullableBytes(buf, pos, header.value)
    }
    if (pos - start !== body) assert(false, `record body took ${pos - start} bytes, sized ${body}`)
    this.pos = pos
    this.count++
    this.recordsBytes += total
    if (timestamp > this.maxTimestamp) this.maxTimestamp = timestamp
    return total
  }

  private nextChunk(needed: number): void {
    if (this.pos > this.currentStart || this.chunks.length === 0) {
      this.chunks.push(this.current.subarray(0, this.pos))
    }
    const size = Math.max(needed, Math.min(this.current.length * 2, BUILDER_CHUNK_BYTES_MAX))
    this.current = this.newChunk(size)
    this.currentStart = 0
    this.pos = 0
  }

  /** The records section, uncompressed, as chunks (the first one starts at the header). */
  private recordChunks(): Buffer[] {
    const parts = [...this.chunks, this.current.subarray(0, this.pos)]
    parts[0] = parts[0].subarray(RECORD_BATCH_OVERHEAD)
    return parts.filter((part) => part.length > 0)
  }

  /** The uncompressed records section as one buffer (for splitting or decoding). */
  recordsSection(): Buffer {
    const parts = this.recordChunks()
    return parts.length === 1 ? parts[0] : Buffer.concat(parts, this.recordsBytes)
  }

  /**
   * The batch (one buffer, or chunks to write in order) for codecs with a synchronous
   * implementation; compresses on the first call only.
   */
  build(stamp: RecordBatchStamp = {}): Buffer | Buffer[] {
    if (this.compression !== CompressionType.None && this.count > 0 && this.compressed === null) {
      assert(
        hasSyncCodec(this.compression),
        () => `${CompressionType[this.compression]} has no synchronous codec`,
      )
      this.compressed = withHeaderRoom(
        compressSync(this.compression, this.recordsSection(), this.compressionLevel),
      )
    }
    return this.finish(stamp)
  }

  /** `build` for every codec (zstd compresses asynchronously). */
  async buildAsync(stamp: RecordBatchStamp = {}): Promise<Buffer | Buffer[]> {
    if (this.compression !== CompressionType.None && this.count > 0 && this.compressed === null) {
      const compressed = withHeaderRoom(
        await compress(this.compression, this.recordsSection(), this.compressionLevel),
      )
      // A concurrent build may have finished first; both compressed the same bytes.
      this.compressed ??= compressed
    }
    return this.finish(stamp)
  }

  private finish(stamp: RecordBatchStamp): Buffer | Buffer[] {
    this.built = true
    let parts: Buffer[]
    if (this.compressed !== null) {
      parts = [this.compressed]
    } else {
      parts = this.chunks.length === 0 ? [] : [...this.chunks]
      if (this.chunks.length === 0 || this.pos > this.currentStart)
        parts.push(this.current.subarray(0, this.pos))
    }
    const head = parts[0]
    let size = 0
    for (const part of parts) size += part.length
    const epoch = stamp.producerEpoch ?? -1
    assert(epoch >= -1 && epoch <= 0x7fff, () => `bad producerEpoch ${epoch}`)
    writeInt64Number(head, BASE_OFFSET_OFFSET, 0)
    head.writeInt32BE(size - LOG_OVERHEAD, BATCH_LENGTH_OFFSET)
    head.writeInt32BE(NO_PARTITION_LEADER_EPOCH, PARTITION_LEADER_EPOCH_OFFSET)
    head.writeInt8(MAGIC_V2, MAGIC_OFFSET)
    head.writeInt16BE(
      this.compression | (stamp.isTransactional === true ? TRANSACTIONAL_FLAG_MASK : 0),
      ATTRIBUTES_OFFSET,
    )
    head.writeInt32BE(this.count === 0 ? 0 : this.count - 1, LAST_OFFSET_DELTA_OFFSET)
    writeInt64Number(
      head,
      BASE_TIMESTAMP_OFFSET,
      this.count === 0 ? this.defaultTimestamp : this.baseTimestamp,
    )
    writeInt64Number(head, MAX_TIMESTAMP_OFFSET, this.maxTimestamp)
    head.writeBigInt64BE(stamp.producerId ?? NO_PRODUCER_ID, PRODUCER_ID_OFFSET)
    head.writeInt16BE(epoch, PRODUCER_EPOCH_OFFSET)
    head.writeInt32BE(stamp.baseSequence ?? NO_SEQUENCE, BASE_SEQUENCE_OFFSET)
    head.writeInt32BE(this.count, RECORDS_COUNT_OFFSET)
    let crc = crc32c(head.subarray(ATTRIBUTES_OFFSET))
    for (let i = 1; i < parts.length; i++) crc = crc32c(parts[i], crc)
    head.writeUInt32BE(crc, CRC_OFFSET)
    return parts.length === 1 ? head : parts
  }
}

// ---- decoding ---------------------------------------------------------------------------------

export interface DecodeOptions extends DecompressOptions {
  /** Check the CRC before decoding (default true); off only for bytes validated just before. */
  verifyCrc?: boolean
}

/** Header fields of the batch at `at`, assuming its header is in the buffer. */
export function readBatchHeader(buf: Buffer, at = 0): RecordBatchHeaderFields {
  assert(buf.length - at >= RECORD_BATCH_OVERHEAD, 'readBatchHeader needs a whole batch header')
  const attributes = buf.readInt16BE(at + ATTRIBUTES_OFFSET)
  const batchLength = buf.readInt32BE(at + BATCH_LENGTH_OFFSET)
  return {
    baseOffset: readInt64Number(buf, at + BASE_OFFSET_OFFSET),
    batchLength,
    sizeInBytes: LOG_OVERHEAD + batchLength,
    partitionLeaderEpoch: buf.readInt32BE(at + PARTITION_LEADER_EPOCH_OFFSET),
    magic: buf.readInt8(at + MAGIC_OFFSET),
    crc: buf.readUInt32BE(at + CRC_OFFSET),
    attributes,
    compression: attributes & COMPRESSION_CODEC_MASK,
    timestampType: attributes & TIMESTAMP_TYPE_MASK ? TimestampType.LogAppendTime : TimestampType.CreateTime,
    isTransactional: (attributes & TRANSACTIONAL_FLAG_MASK) !== 0,
    isControl: (attributes & CONTROL_FLAG_MASK) !== 0,
    lastOffsetDelta: buf.readInt32BE(at + LAST_OFFSET_DELTA_OFFSET),
    baseTimestamp: readInt64Number(buf, at + BASE_TIMESTAMP_OFFSET),
    maxTimestamp: readInt64Number(buf, at + MAX_TIMESTAMP_OFFSET),
    producerId: buf.readBigInt64BE(at + PRODUCER_ID_OFFSET),
    producerEpoch: buf.readInt16BE(at + PRODUCER_EPOCH_OFFSET),
    baseSequence: buf.readInt32BE(at + BASE_SEQUENCE_OFFSET),
    recordsCount: buf.readInt32BE(at + RECORDS_COUNT_OFFSET),
  }
}

/**
 * Receives each record of a records section, its fields as on the wire (deltas relative
 * to the batch). Keys, values and header values are views into the section.
 */
export type RecordVisitor = (
  offsetDelta: number,
  timestampDelta: number,
  key: Buffer | null,
  value: Buffer | null,
  headers: RecordHeader[],
  attributes: number,
) => void

function visitRecord(cursor: RecordCursor, visit: RecordVisitor): void {
  const length = cursor.varint()
  if (length < RECORD_BYTES_MIN - 1 || length > cursor.end - cursor.pos) {
    throw new CorruptRecordError(`record length ${length} at byte ${cursor.pos} is impossible`)
  }
  const start = cursor.pos
  const attributes = cursor.byte()
  const timestampDelta = cursor.varlong()
  const offsetDelta = cursor.varint()
  const key = cursor.nullableBytes(cursor.varint())
  const value = cursor.nullableBytes(cursor.varint())
  const headers = readHeaders(cursor)
  if (cursor.pos - start !== length) {
    throw new CorruptRecordError(`record declared ${length} bytes but holds ${cursor.pos - start}`)
  }
  visit(offsetDelta, timestampDelta, key, value, headers, attributes)
}

function readHeaders(cursor: RecordCursor): RecordHeader[] {
  const count = cursor.varint()
  // Each header takes at least two bytes: a hostile count cannot make us allocate.
  if (count < 0 || count * 2 > cursor.end - cursor.pos)
    throw new CorruptRecordError(`bad header count ${count}`)
  const headers: RecordHeader[] = new Array(count)
  for (let i = 0; i < count; i++) {
    const keyLength = cursor.varint()
    if (keyLength < 0) throw new CorruptRecordError(`negative header key length ${keyLength}`)
    const key = cursor.nullableBytes(keyLength) as Buffer
    headers[i] = { key: key.toString('utf8'), value: cursor.nullableBytes(cursor.varint()) }
  }
  return headers
}

/**
 * Walks an uncompressed records section holding exactly `count` records, handing each to
 * `visit` before reading the next. For readers that build their own record objects (the
 * consumer): decodeRecords' Record per record is then not made. A record that does not
 * parse throws CorruptRecordError after the records before it were visited.
 */
export function visitRecords(data: Buffer, count: number, visit: RecordVisitor): void {
  assert(Number.isInteger(count) && count >= 0, () => `bad record count ${count}`)
  if (count * RECORD_BYTES_MIN > data.length) {
    throw new CorruptRecordError(`${count} records cannot fit in ${data.length} bytes`)
  }
  const cursor = new RecordCursor(data, 0, data.length)
  for (let i = 0; i < count; i++) visitRecord(cursor, visit)
  if (cursor.pos !== data.length) {
    throw new CorruptRecordError(`${data.length - cursor.pos} bytes left after ${count} records`)
  }
}

/** Parses an uncompressed records section holding exactly `count` records. */
export function decodeRecords(data: Buffer, count: number): Record[] {
  const records: Record[] = []
  visitRecords(data, count, (offsetDelta, timestampDelta, key, value, headers, attributes) => {
    records.push({ attributes, offsetDelta, timestampDelta, key, value, headers })
  })
  return records
}

function toDecoded(header: RecordBatchHeaderFields, records: Record[]): DecodedRecordBatch {
  const logAppendTime = header.timestampType === TimestampType.LogAppendTime
  const decoded: DecodedRecord[] = new Array(records.length)
  for (let i = 0; i < records.length; i++) {
    const r = records[i]
    decoded[i] = {
      offset: header.baseOffset + r.offsetDelta,
      timestamp: logAppendTime ? header.maxTimestamp : header.baseTimestamp + r.timestampDelta,
      key: r.key,
      value: r.value,
      headers: r.headers,
    }
  }
  return { ...header, records: decoded }
}

function checkedHeader(buf: Buffer, at: number, options: DecodeOptions): RecordBatchHeaderFields {
  if (options.verifyCrc !== false) throwIfInvalid(validateRecordBatch(buf, at))
  return readBatchHeader(buf, at)
}

/**
 * The header of the v2 batch at `at`, its CRC and fields checked (unless verifyCrc is
 * false), and its records section decompressed: what decodeRecordBatch decodes, for
 * readers that walk the records with visitRecords. Bad bytes throw as decodeRecordBatch.
 */
export async function openRecordBatch(
  buf: Buffer,
  at = 0,
  options: DecodeOptions = {},
): Promise<{ header: RecordBatchHeaderFields; records: Buffer }> {
  const header = checkedHeader(buf, at, options)
  // Kafka reads nothing, not even a compression stream, when a batch counts no records.
  if (header.recordsCount === 0) return { header, records: EMPTY_SECTION }
  const section = buf.subarray(at + RECORD_BATCH_OVERHEAD, at + header.sizeInBytes)
  const records =
    header.compression === CompressionType.None
      ? section
      : await decompress(header.compression, section, options)
  return { header, records }
}

const EMPTY_SECTION = Buffer.alloc(0)

/** Decodes the v2 batch at `at`, decompressing its records. Bad bytes throw CorruptRecordError/InvalidRecordError. */
export async function decodeRecordBatch(
  buf: Buffer,
  at = 0,
  options: DecodeOptions = {},
): Promise<DecodedRecordBatch> {
  const { header, records } = await openRecordBatch(buf, at, options)
  return toDecoded(header, header.recordsCount === 0 ? [] : decodeRecords(records, header.recordsCount))
}

/** decodeRecordBatch for batches whose codec has a synchronous implementation (all but zstd). */
export function decodeRecordBatchSync(buf: Buffer, at = 0, options: DecodeOptions = {}): DecodedRecordBatch {
  const header = checkedHeader(buf, at, options)
  if (header.recordsCount === 0) return toDecoded(header, [])
  const section = buf.subarray(at + RECORD_BATCH_OVERHEAD, at + header.sizeInBytes)
  if (!hasSyncCodec(header.compression)) {
    throw new InvalidRecordError(
      `${CompressionType[header.compression]} batches need decodeRecordBatch (async)`,
    )
  }
  return toDecoded(
    header,
    decodeRecords(decompressSync(header.compression, section, options), header.recordsCount),
  )
}

// ---- legacy message sets (magic 0 and 1) ----------------------------------------------------

/**
 * MessageSet => [offset int64, messageSize int32, Message]
 * Message v0 => crc uint32 (CRC-32 IEEE of magic..end) | magic int8 | attributes int8 | key bytes | value bytes
 * Message v1 => crc | magic | attributes | timestamp int64 | key | value
 * A compressed wrapper's value is a compressed inner message set. Kafka allows one level
 * of nesting only; for magic 1, inner offsets are relative and the wrapper carries the
 * absolute offset of the last inner message.
 */
export interface LegacyMessage {
  offset: number
  magic: number
  attributes: number
  /** -1 for magic 0. Inner messages of a LogAppendTime wrapper take the wrapper's timestamp. */
  timestamp: number
  timestampType: TimestampType
  key: Buffer | null
  value: Buffer | null
}

export interface LegacyMessageSet {
  messages: LegacyMessage[]
  /** Codec of the last compressed wrapper (Kafka's "source codec"), None if none was compressed. */
  compression: CompressionType
  /** Bytes covered by whole messages; the rest is a partial trailing message. */
  validBytes: number
  partialBytes: number
}

interface LegacyEntry extends LegacyMessage {
  compression: CompressionType
}

const LEGACY_CRC_OFFSET = 0
const LEGACY_MAGIC_OFFSET = 4
const LEGACY_ATTRIBUTES_OFFSET = 5
const LEGACY_TIMESTAMP_OFFSET = 6

/** Reads an int32-length nullable byte field inside a message ending at `end`. */
function legacyBytes(buf: Buffer, at: number, end: number): { value: Buffer | null; next: number } {
  if (end - at < 4) throw new CorruptRecordError('legacy message truncated before a length')
  const length = buf.readInt32BE(at)
  if (length === -1) return { value: null, next: at + 4 }
  if (length < 0 || length > end - at - 4)
    throw new CorruptRecordError(`legacy field length ${length} is impossible`)
  return { value: buf.subarray(at + 4, at + 4 + length), next: at + 4 + length }
}

/** Parses the message of `size` bytes at `at` (after offset and size) and checks its CRC. */
function parseLegacyMessage(buf: Buffer, offset: number, at: number, size: number): LegacyEntry {
  const end = at + size
  const magic = buf.readInt8(at + LEGACY_MAGIC_OFFSET)
  if (magic !== MAGIC_V0 && magic !== MAGIC_V1)
    throw new InvalidRecordError(`magic ${magic} inside a legacy message set`)
  if (size < (magic === MAGIC_V0 ? LEGACY_MESSAGE_OVERHEAD_V0 : LEGACY_MESSAGE_OVERHEAD_V1)) {
    throw new CorruptRecordError(`legacy v${magic} message of ${size} bytes is too small`)
  }
  const stored = buf.readUInt32BE(at + LEGACY_CRC_OFFSET)
  const computed = crc32(buf.subarray(at + LEGACY_MAGIC_OFFSET, end)) >>> 0
  if (stored !== computed)
    throw new CorruptRecordError(`legacy message crc mismatch: stored ${stored}, computed ${computed}`)
  const attributes = buf.readInt8(at + LEGACY_ATTRIBUTES_OFFSET)
  const v1 = magic === MAGIC_V1
  const key = legacyBytes(buf, at + (v1 ? LEGACY_TIMESTAMP_OFFSET + 8 : LEGACY_TIMESTAMP_OFFSET), end)
  const value = legacyBytes(buf, key.next, end)
  if (value.next !== end)
    throw new CorruptRecordError(`legacy message has ${end - value.next} trailing bytes`)
  return {
    offset,
    magic,
    attributes,
    timestamp: v1 ? readInt64Number(buf, at + LEGACY_TIMESTAMP_OFFSET) : NO_TIMESTAMP,
    timestampType:
      v1 && attributes & TIMESTAMP_TYPE_MASK ? TimestampType.LogAppendTime : TimestampType.CreateTime,
    key: key.value,
    value: value.value,
    compression: attributes & COMPRESSION_CODEC_MASK,
  }
}

/** Splits a message set into entries; at depth 0 a trailing partial entry is tolerated. */
function parseLegacyEntries(buf: Buffer, inner: boolean): { entries: LegacyEntry[]; validBytes: number } {
  const entries: LegacyEntry[] = []
  let at = 0
  for (let steps = 0; at < buf.length; steps++) {
    assert(steps <= buf.length / LOG_OVERHEAD, 'legacy walk made more steps than the set has messages')
    const size = spanSize(buf, at)
    if (size === SPAN_INVALID) throw new CorruptRecordError(`legacy message length at ${at} is impossible`)
    if (size === SPAN_PARTIAL) {
      if (inner) throw new CorruptRecordError('compressed message set ends inside a message')
      break
    }
    const offset = readInt64Number(buf, at)
    entries.push(parseLegacyMessage(buf, offset, at + LOG_OVERHEAD, size - LOG_OVERHEAD))
    at += size
  }
  return { entries, validBytes: at }
}

async function expandWrapper(wrapper: LegacyEntry, options: DecompressOptions): Promise<LegacyMessage[]> {
  if (wrapper.compression > MAX_COMPRESSION_CODEC)
    throw new CorruptRecordError(`unknown codec ${wrapper.compression}`)
  if (wrapper.compression === CompressionType.Zstd) throw new InvalidRecordError('zstd needs magic 2')
  if (wrapper.value === null) throw new InvalidRecordError('compressed wrapper message with a null value')
  const data = await decompress(wrapper.compression, wrapper.value, {
    ...options,
    ignoreLz4HeaderChecksum: wrapper.magic === MAGIC_V0, // KAFKA-3160
  })
  const { entries } = parseLegacyEntries(data, true)
  if (entries.length === 0) throw new InvalidRecordError('compressed wrapper message holds no messages')
  const lastInnerOffset = entries[entries.length - 1].offset
  return entries.map((entry) => innerMessage(wrapper, entry, lastInnerOffset))
}

function innerMessage(wrapper: LegacyEntry, entry: LegacyEntry, lastInnerOffset: number): LegacyMessage {
  if (entry.compression !== CompressionType.None) throw new InvalidRecordError('nested compressed messages')
  if (entry.magic !== wrapper.magic) {
    throw new InvalidRecordError(
      `inner message magic ${entry.magic} differs from wrapper magic ${wrapper.magic}`,
    )
  }
  const relative = wrapper.magic === MAGIC_V1
  const logAppendTime = wrapper.timestampType === TimestampType.LogAppendTime
  return {
    offset: relative ? wrapper.offset - lastInnerOffset + entry.offset : entry.offset,
    magic: entry.magic,
    attributes: entry.attributes,
    timestamp: logAppendTime ? wrapper.timestamp : entry.timestamp,
    timestampType: wrapper.timestampType,
    key: entry.key,
    value: entry.value,
  }
}

function plainMessage(entry: LegacyEntry): LegacyMessage {
  const { compression: _codec, ...message } = entry
  return message
}

/**
 * Decodes a magic 0/1 message set, expanding compressed wrappers and checking every CRC.
 * A trailing partial message is reported, not decoded. Throws CorruptRecordError or
 * InvalidRecordError for bad bytes.
 */
export async function decodeLegacyMessageSet(
  buf: Buffer,
  options: DecompressOptions = {},
): Promise<LegacyMessageSet> {
  const { entries, validBytes } = parseLegacyEntries(buf, false)
  const messages: LegacyMessage[] = []
  let compression = CompressionType.None
  for (const entry of entries) {
    if (entry.compression === CompressionType.None) {
      messages.push(plainMessage(entry))
      continue
    }
    compression = entry.compression
    for (const message of await expandWrapper(entry, options)) messages.push(message)
  }
  return { messages, compression, validBytes, partialBytes: buf.length - validBytes }
}

export interface ConvertLegacyOptions {
  baseOffset?: number
  /** Codec of the v2 batch; defaults to the source codec, as Kafka's compression.type=producer. */
  compression?: CompressionType
  compressionLevel?: number
}

/**
 * Converts a legacy message set from an old producer into one v2 batch holding the same
 * records with contiguous offsets from baseOffset (the broker stores v2 only, like Kafka
 * 3.x). Magic 0 records keep timestamp -1 (NO_TIMESTAMP). An empty set gives an empty
 * buffer; a truncated set is corrupt.
 */
export async function convertLegacyToV2(buf: Buffer, options: ConvertLegacyOptions = {}): Promise<Buffer> {
  const set = await decodeLegacyMessageSet(buf)
  if (set.partialBytes > 0)
    throw new CorruptRecordError(`message set ends with ${set.partialBytes} partial bytes`)
  if (set.messages.length === 0) return Buffer.alloc(0)
  return encodeRecordBatch({
    records: set.messages.map((message) => ({
      key: message.key,
      value: message.value,
      timestamp: message.timestamp,
    })),
    baseOffset: options.baseOffset ?? 0,
    compression: options.compression ?? set.compression,
    compressionLevel: options.compressionLevel,
  })
}
