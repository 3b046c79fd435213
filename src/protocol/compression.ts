/**
 * The four Kafka compression codecs, applied to the records section of a batch (v2) or to
 * the value of a wrapper message (magic 0/1).
 *
 * Wire formats, as the Java client writes and reads them:
 * - gzip: RFC 1952 stream(s), node:zlib.
 * - snappy: the Java client writes xerial snappy-java framing (16-byte header, then
 *   [int32 length, raw snappy block] chunks of 32 KiB input); librdkafka and others may write
 *   one raw snappy block. We write xerial (every client reads it) and read both.
 * - lz4: the LZ4 frame format, one frame, independent blocks, no content checksum, like the
 *   Java client (lz4-napi picks 64 KiB blocks for small inputs, up to 4 MiB for large ones;
 *   Kafka's reader accepts 64 KiB to 4 MiB).
 *   Kafka's magic-0 messages carry a wrong frame-descriptor checksum (KAFKA-3160: the old
 *   Java client hashed the magic number too); Kafka ignores HC for magic 0, so can we, see
 *   `ignoreLz4HeaderChecksum`.
 * - zstd: standard zstd frame(s); @mongodb-js/zstd is async only.
 *
 * Corrupt compressed bytes from the network surface as CorruptRecordError, never a crash.
 *
 * The codecs load on first use (a synchronous require), not at import: the three native ones
 * are addons whose loaders probe the platform (@mongodb-js/zstd builds a full process
 * report), and a broker that starts and never sees compressed records needs none of them.
 */
import { createRequire } from 'node:module'
import type { ZlibOptions } from 'node:zlib'
import { assert, unreachable } from '../common/assert.js'
import { TidelogError } from '../common/errors.js'
import { CompressionType } from './batch-header.js'

type Zlib = typeof import('node:zlib')
type Zstd = typeof import('@mongodb-js/zstd')
type Lz4 = typeof import('lz4-napi')
type Snappy = typeof import('snappy')

const requireNative = createRequire(import.meta.url)
let zlibModule: Zlib | undefined
let zstdModule: Zstd | undefined
let lz4Module: Lz4 | undefined
let snappyModule: Snappy | undefined

const zlib = (): Zlib => (zlibModule ??= requireNative('node:zlib') as Zlib)
const zstd = (): Zstd => (zstdModule ??= requireNative('@mongodb-js/zstd') as Zstd)
const lz4 = (): Lz4 => (lz4Module ??= requireNative('lz4-napi') as Lz4)
const snappy = (): Snappy => (snappyModule ??= requireNative('snappy') as Snappy)

/**
 * Loads the module behind a codec before decompressing, outside the try that turns errors
 * into CorruptRecordError: a native addon that fails to load is an operating error, not a
 * corrupt batch. Unknown codec numbers are left to the decompressor to reject.
 */
function loadCodec(type: CompressionType): void {
  if (type === CompressionType.Gzip) zlib()
  else if (type === CompressionType.Snappy) snappy()
  else if (type === CompressionType.Lz4) lz4()
  else if (type === CompressionType.Zstd) zstd()
}

/** Bytes that fail to decompress or do not parse as records; Kafka's CORRUPT_MESSAGE. */
export class CorruptRecordError extends TidelogError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_CORRUPT_RECORD', message, options)
    this.name = 'CorruptRecordError'
  }
}

/**
 * Decompressed size limit: a few KiB of gzip can expand to gigabytes. Kafka batches are
 * bounded by message.max.bytes (1 MiB by default) compressed; 256 MiB uncompressed is far
 * above anything a real producer sends and far below what would exhaust the heap.
 */
export const DECOMPRESSED_BYTES_MAX = 256 * 1024 * 1024

export interface DecompressOptions {
  /** Defaults to DECOMPRESSED_BYTES_MAX. */
  maxOutputBytes?: number
  /** Magic-0 lz4 only (KAFKA-3160): accept a wrong frame-descriptor checksum. */
  ignoreLz4HeaderChecksum?: boolean
}

const GZIP_LEVEL_DEFAULT = 6 // java.util.zip.Deflater.DEFAULT_COMPRESSION, Kafka's default
const ZSTD_LEVEL_DEFAULT = 3 // Kafka's compression.zstd.level default

function gzipAsync(data: Buffer, options: ZlibOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    zlib().gzip(data, options, (error, result) => (error ? reject(error) : resolve(result)))
  })
}

function gunzipAsync(data: Buffer, options: ZlibOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    zlib().gunzip(data, options, (error, result) => (error ? reject(error) : resolve(result)))
  })
}

/** Whether compressSync/decompressSync support this codec (zstd is async only). */
export function hasSyncCodec(type: CompressionType): boolean {
  return type !== CompressionType.Zstd
}

/**
 * Compresses `data`. `level` applies to gzip (1-9) and zstd (1-22); snappy has no levels
 * and lz4-napi exposes none (Kafka's compression.lz4.level is ignored).
 */
export async function compress(type: CompressionType, data: Buffer, level?: number): Promise<Buffer> {
  switch (type) {
    case CompressionType.None:
      return data
    case CompressionType.Gzip:
      return gzipAsync(data, { level: level ?? GZIP_LEVEL_DEFAULT })
    case CompressionType.Snappy:
      return xerialCompress(data, (block) => snappy().compress(block))
    case CompressionType.Lz4:
      return lz4().compressFrame(data)
    case CompressionType.Zstd:
      return zstd().compress(data, level ?? ZSTD_LEVEL_DEFAULT)
    default:
      return unreachable(type, 'compression type')
  }
}

export function compressSync(type: CompressionType, data: Buffer, level?: number): Buffer {
  assert(hasSyncCodec(type), () => `no synchronous compressor for ${CompressionType[type]}`)
  switch (type) {
    case CompressionType.None:
      return data
    case CompressionType.Gzip:
      return zlib().gzipSync(data, { level: level ?? GZIP_LEVEL_DEFAULT })
    case CompressionType.Snappy:
      return xerialCompressSync(data)
    case CompressionType.Lz4:
      return lz4().compressFrameSync(data)
    default:
      return unreachable(type as never, 'compression type')
  }
}

/** Decompresses `data`; throws CorruptRecordError for anything that does not decode. */
export async function decompress(
  type: CompressionType,
  data: Buffer,
  options: DecompressOptions = {},
): Promise<Buffer> {
  const maxOutputBytes = options.maxOutputBytes ?? DECOMPRESSED_BYTES_MAX
  loadCodec(type)
  let output: Buffer
  try {
    output = await decompressUnchecked(type, data, maxOutputBytes, options.ignoreLz4HeaderChecksum === true)
  } catch (error) {
    throw asCorrupt(type, error)
  }
  return checkOutputSize(type, output, maxOutputBytes)
}

export function decompressSync(type: CompressionType, data: Buffer, options: DecompressOptions = {}): Buffer {
  assert(hasSyncCodec(type), () => `no synchronous decompressor for ${CompressionType[type]}`)
  const maxOutputBytes = options.maxOutputBytes ?? DECOMPRESSED_BYTES_MAX
  loadCodec(type)
  let output: Buffer
  try {
    output = decompressUncheckedSync(type, data, maxOutputBytes, options.ignoreLz4HeaderChecksum === true)
  } catch (error) {
    throw asCorrupt(type, error)
  }
  return checkOutputSize(type, output, maxOutputBytes)
}

async function decompressUnchecked(
  type: CompressionType,
  data: Buffer,
  maxOutputBytes: number,
  ignoreLz4HeaderChecksum: boolean,
): Promise<Buffer> {
  switch (type) {
    case CompressionType.None:
      return data
    case CompressionType.Gzip:
      return gunzipAsync(data, { maxOutputLength: maxOutputBytes })
    case CompressionType.Snappy:
      return snappyDecompress(data, maxOutputBytes, async (block) =>
        asBuffer(await snappy().uncompress(block)),
      )
    case CompressionType.Lz4:
      checkLz4FrameComplete(data)
      return lz4().decompressFrame(ignoreLz4HeaderChecksum ? withFixedLz4HeaderChecksum(data) : data)
    case CompressionType.Zstd:
      return zstd().decompress(data)
    default:
      throw new CorruptRecordError(`unknown compression codec ${type as number}`)
  }
}

function decompressUncheckedSync(
  type: CompressionType,
  data: Buffer,
  maxOutputBytes: number,
  ignoreLz4HeaderChecksum: boolean,
): Buffer {
  switch (type) {
    case CompressionType.None:
      return data
    case CompressionType.Gzip:
      return zlib().gunzipSync(data, { maxOutputLength: maxOutputBytes })
    case CompressionType.Snappy:
      return snappyDecompressSync(data, maxOutputBytes)
    case CompressionType.Lz4:
      checkLz4FrameComplete(data)
      return lz4().decompressFrameSync(ignoreLz4HeaderChecksum ? withFixedLz4HeaderChecksum(data) : data)
    default:
      throw new CorruptRecordError(`unknown compression codec ${type as number}`)
  }
}

function asCorrupt(type: CompressionType, error: unknown): CorruptRecordError {
  if (error instanceof CorruptRecordError) return error
  const detail = error instanceof Error ? error.message : String(error)
  return new CorruptRecordError(`${CompressionType[type] ?? type} decompression failed: ${detail}`, {
    cause: error,
  })
}

/** lz4 and zstd have no output bound in their APIs, so the limit is checked afterwards. */
function checkOutputSize(type: CompressionType, output: Buffer, maxOutputBytes: number): Buffer {
  if (output.length > maxOutputBytes) {
    throw new CorruptRecordError(
      `${CompressionType[type]} data decompresses to ${output.length} bytes, above the limit ${maxOutputBytes}`,
    )
  }
  return output
}

function asBuffer(value: string | Buffer): Buffer {
  assert(Buffer.isBuffer(value), 'snappy returned a string without asBuffer:false')
  return value
}

// ---- snappy: raw blocks and xerial framing ---------------------------------------------

/** 0x82 'SNAPPY' 0x00, then int32 version 1 and int32 minimum compatible version 1. */
const XERIAL_MAGIC = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00])
const XERIAL_HEADER_BYTES = 16
const XERIAL_VERSION = 1
/** snappy-java's SnappyOutputStream default block size, used by the Java client. */
const XERIAL_BLOCK_BYTES = 32 * 1024
/** The first four magic bytes read as an int32: snappy-java accepts concatenated streams. */
const XERIAL_MAGIC_HEAD = XERIAL_MAGIC.readUInt32BE(0)

export function isXerialSnappy(data: Buffer): boolean {
  return data.length >= XERIAL_HEADER_BYTES && data.compare(XERIAL_MAGIC, 0, 8, 0, 8) === 0
}

function xerialHeader(): Buffer {
  const header = Buffer.alloc(XERIAL_HEADER_BYTES)
  XERIAL_MAGIC.copy(header, 0)
  header.writeInt32BE(XERIAL_VERSION, 8)
  header.writeInt32BE(XERIAL_VERSION, 12)
  return header
}

function xerialInputBlocks(data: Buffer): Buffer[] {
  const blocks: Buffer[] = []
  for (let at = 0; at < data.length; at += XERIAL_BLOCK_BYTES) {
    blocks.push(data.subarray(at, Math.min(at + XERIAL_BLOCK_BYTES, data.length)))
  }
  return blocks
}

function xerialFrame(compressedBlocks: Buffer[]): Buffer {
  const parts: Buffer[] = [xerialHeader()]
  for (const block of compressedBlocks) {
    const length = Buffer.allocUnsafe(4)
    length.writeInt32BE(block.length, 0)
    parts.push(length, block)
  }
  return Buffer.concat(parts)
}

async function xerialCompress(
  data: Buffer,
  compressBlock: (block: Buffer) => Promise<Buffer>,
): Promise<Buffer> {
  return xerialFrame(await Promise.all(xerialInputBlocks(data).map(compressBlock)))
}

function xerialCompressSync(data: Buffer): Buffer {
  return xerialFrame(xerialInputBlocks(data).map((block) => snappy().compressSync(block)))
}

/** The compressed blocks of a xerial stream, as views into `data`. */
function xerialBlocks(data: Buffer): Buffer[] {
  const blocks: Buffer[] = []
  let at = XERIAL_HEADER_BYTES
  // Each chunk takes at least 4 bytes, which bounds the loop.
  while (at < data.length) {
    if (data.length - at < 4) throw new CorruptRecordError('xerial snappy: truncated chunk length')
    const length = data.readUInt32BE(at)
    if (length === XERIAL_MAGIC_HEAD) {
      if (!isXerialSnappy(data.subarray(at))) throw new CorruptRecordError('xerial snappy: bad inner header')
      at += XERIAL_HEADER_BYTES
      continue
    }
    if (length > 0x7fffffff || at + 4 + length > data.length) {
      throw new CorruptRecordError(`xerial snappy: chunk of ${length} bytes at ${at} exceeds the data`)
    }
    blocks.push(data.subarray(at + 4, at + 4 + length))
    at += 4 + length
  }
  return blocks
}

/** A raw snappy block starts with its uncompressed length as a varint; check it first. */
function checkSnappyBlock(block: Buffer, budgetBytes: number): number {
  let length = 0
  for (let i = 0, shift = 0; i < 5; i++, shift += 7) {
    if (i >= block.length) break
    const byte = block[i]
    length += (byte & 0x7f) * 2 ** shift
    if ((byte & 0x80) === 0) {
      if (length > budgetBytes) {
        throw new CorruptRecordError(`snappy block decompresses to ${length} bytes, above the limit`)
      }
      return length
    }
  }
  throw new CorruptRecordError('snappy: bad uncompressed-length preamble')
}

async function snappyDecompress(
  data: Buffer,
  maxOutputBytes: number,
  uncompressBlock: (block: Buffer) => Promise<Buffer>,
): Promise<Buffer> {
  if (!isXerialSnappy(data)) {
    checkSnappyBlock(data, maxOutputBytes)
    return uncompressBlock(data)
  }
  const blocks = xerialBlocks(data)
  checkXerialBudget(blocks, maxOutputBytes)
  return Buffer.concat(await Promise.all(blocks.map(uncompressBlock)))
}

function snappyDecompressSync(data: Buffer, maxOutputBytes: number): Buffer {
  if (!isXerialSnappy(data)) {
    checkSnappyBlock(data, maxOutputBytes)
    return asBuffer(snappy().uncompressSync(data))
  }
  const blocks = xerialBlocks(data)
  checkXerialBudget(blocks, maxOutputBytes)
  return Buffer.concat(blocks.map((block) => asBuffer(snappy().uncompressSync(block))))
}

function checkXerialBudget(blocks: Buffer[], maxOutputBytes: number): void {
  let budget = maxOutputBytes
  for (const block of blocks) budget -= checkSnappyBlock(block, budget)
}

// ---- lz4: KAFKA-3160 -------------------------------------------------------------------

const LZ4_FRAME_MAGIC = 0x184d2204
const LZ4_FLG_BLOCK_CHECKSUM = 0x10
const LZ4_FLG_CONTENT_SIZE = 0x08
const LZ4_FLG_CONTENT_CHECKSUM = 0x04
const LZ4_FLG_DICT_ID = 0x01
const LZ4_BLOCK_UNCOMPRESSED_BIT = 0x80000000

function lz4DescriptorBytes(flg: number): number {
  return 2 + (flg & LZ4_FLG_CONTENT_SIZE ? 8 : 0) + (flg & LZ4_FLG_DICT_ID ? 4 : 0)
}

/**
 * lz4-napi treats the end of input at a block boundary as the end of the frame, so a frame
 * cut between blocks would decode to a silently shorter output. Kafka's reader requires the
 * EndMark; so do we, by walking the block sizes (no decompression).
 */
function checkLz4FrameComplete(frame: Buffer): void {
  if (frame.length < 7 || frame.readUInt32LE(0) !== LZ4_FRAME_MAGIC) return // the codec reports it
  const flg = frame[4]
  const blockChecksumBytes = flg & LZ4_FLG_BLOCK_CHECKSUM ? 4 : 0
  let at = 4 + lz4DescriptorBytes(flg) + 1
  // Each block takes at least 4 bytes, which bounds the loop.
  while (at + 4 <= frame.length) {
    const word = frame.readUInt32LE(at)
    if (word === 0) {
      const checksumBytes = flg & LZ4_FLG_CONTENT_CHECKSUM ? 4 : 0
      if (at + 4 + checksumBytes <= frame.length) return
      break
    }
    at += 4 + (word & ~LZ4_BLOCK_UNCOMPRESSED_BIT) + blockChecksumBytes
  }
  throw new CorruptRecordError('lz4 frame ends before its EndMark')
}

/**
 * A copy of an lz4 frame with its header checksum (HC) recomputed, so that lz4-napi, which
 * always verifies HC, accepts frames from pre-0.10 Java clients. Kafka itself skips the
 * check for magic 0 (KafkaLZ4BlockInputStream's ignoreFlagDescriptorChecksum).
 */
export function withFixedLz4HeaderChecksum(frame: Buffer): Buffer {
  if (frame.length < 7 || frame.readUInt32LE(0) !== LZ4_FRAME_MAGIC) return frame // the codec reports it
  const descriptorBytes = lz4DescriptorBytes(frame[4])
  const hcAt = 4 + descriptorBytes
  if (hcAt >= frame.length) return frame
  const fixed = Buffer.from(frame)
  fixed[hcAt] = (xxh32Short(frame, 4, descriptorBytes) >>> 8) & 0xff
  return fixed
}

const PRIME32_1 = 2654435761
const PRIME32_2 = 2246822519
const PRIME32_3 = 3266489917
const PRIME32_4 = 668265263
const PRIME32_5 = 374761393

function rotl32(value: number, bits: number): number {
  return ((value << bits) | (value >>> (32 - bits))) >>> 0
}

/** XXH32 with seed 0 of fewer than 16 bytes: all a frame descriptor needs (2 to 14 bytes). */
export function xxh32Short(buf: Buffer, at: number, length: number): number {
  assert(length < 16, 'xxh32Short handles inputs under 16 bytes only')
  assert(at >= 0 && at + length <= buf.length, 'xxh32Short range outside the buffer')
  let h = (PRIME32_5 + length) >>> 0
  let i = at
  const end = at + length
  for (; i + 4 <= end; i += 4) {
    h = (h + Math.imul(buf.readUInt32LE(i), PRIME32_3)) >>> 0
    h = Math.imul(rotl32(h, 17), PRIME32_4) >>> 0
  }
  for (; i < end; i++) {
    h = (h + Math.imul(buf[i], PRIME32_5)) >>> 0
    h = Math.imul(rotl32(h, 11), PRIME32_1) >>> 0
  }
  h = Math.imul(h ^ (h >>> 15), PRIME32_2) >>> 0
  h = Math.imul(h ^ (h >>> 13), PRIME32_3) >>> 0
  return (h ^ (h >>> 16)) >>> 0
}
