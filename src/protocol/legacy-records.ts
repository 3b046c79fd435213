/**
 * Legacy message sets (magic 0 and 1, Kafka's LegacyRecord and AbstractLegacyRecordBatch):
 * decoded for old clients' produce requests and converted to v2 batches, which is all the
 * log stores.
 */
import { assert } from '../common/assert.js'
import {
  COMPRESSION_CODEC_MASK,
  CompressionType,
  LOG_OVERHEAD,
  TIMESTAMP_TYPE_MASK,
  TimestampType,
} from './batch-header.js'
import { CorruptRecordError, type DecompressOptions, decompress } from './compression.js'
import { crc32 } from './crc32c.js'
import { encodeRecordBatch } from './default-record-batch.js'
import { SPAN_INVALID, SPAN_PARTIAL, spanSize } from './memory-records.js'
import {
  InvalidRecordError,
  LEGACY_MESSAGE_OVERHEAD_V0,
  LEGACY_MESSAGE_OVERHEAD_V1,
  MAGIC_V0,
  MAGIC_V1,
  MAX_COMPRESSION_CODEC,
  NO_TIMESTAMP,
  readInt64Number,
} from './record-batch-format.js'

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
