/**
 * The v2 batch codec (Kafka's DefaultRecordBatch and DefaultRecord): one batch encoded from
 * record inputs, and decoded to records, its records section compressed as a whole.
 *
 * Record layout (all lengths and deltas are zigzag varints, timestampDelta a varlong):
 *   length | attributes int8 | timestampDelta | offsetDelta | keyLength | key |
 *   valueLength | value | headerCount | [headerKeyLength headerKey headerValueLength value]
 * A length of -1 means null. recordsCount in the header stays uncompressed.
 */

import { assert } from '../common/assert.js'
import type { ProducerId } from '../common/types.js'
import {
  ATTRIBUTES_OFFSET,
  BASE_OFFSET_OFFSET,
  BASE_SEQUENCE_OFFSET,
  BASE_TIMESTAMP_OFFSET,
  BATCH_LENGTH_OFFSET,
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
import { throwIfInvalid, validateRecordBatch } from './batch-validation.js'
import {
  CorruptRecordError,
  compress,
  compressSync,
  type DecompressOptions,
  decompress,
  decompressSync,
  hasSyncCodec,
} from './compression.js'
import {
  type DecodedRecord,
  type DecodedRecordBatch,
  type EncodeRecordBatchOptions,
  INT32_MAX,
  InvalidRecordError,
  MAGIC_V2,
  MAX_COMPRESSION_CODEC,
  NO_TIMESTAMP,
  RECORD_BYTES_MIN,
  type Record,
  type RecordBatchHeaderFields,
  type RecordHeader,
  type RecordInput,
  readInt64Number,
  VARLONG_NUMBER_MAX,
  writeCrc,
  writeInt64Number,
} from './record-batch-format.js'
import {
  unsignedVarintBytes,
  varintBytes,
  varlongBytes,
  writeVarint,
  writeVarlong,
  zigzag32,
} from './varint.js'

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

export function writeNullableBytes(buf: Buffer, at: number, value: Buffer | null): number {
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

export function withHeaderRoom(compressed: Buffer): Buffer {
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
    // Any int64 the batch carries (as the header getter): the producer state judges it.
    producerId: buf.readBigInt64BE(at + PRODUCER_ID_OFFSET) as ProducerId,
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
