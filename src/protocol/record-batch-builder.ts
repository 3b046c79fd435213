/**
 * Incremental building of one v2 batch as records are appended (Kafka's
 * MemoryRecordsBuilder): the producer's accumulator writes each record once, and `build`
 * stamps the header, compresses and computes the CRC.
 */
import { assert } from '../common/assert.js'
import {
  ATTRIBUTES_OFFSET,
  BASE_OFFSET_OFFSET,
  BASE_SEQUENCE_OFFSET,
  BASE_TIMESTAMP_OFFSET,
  BATCH_LENGTH_OFFSET,
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
  TRANSACTIONAL_FLAG_MASK,
} from './batch-header.js'
import { compress, compressSync, hasSyncCodec } from './compression.js'
import { crc32c } from './crc32c.js'
import { withHeaderRoom, writeNullableBytes } from './default-record-batch.js'
import {
  INT32_MAX,
  MAGIC_V2,
  MAX_COMPRESSION_CODEC,
  NO_TIMESTAMP,
  type RecordHeader,
  VARLONG_NUMBER_MAX,
  writeInt64Number,
} from './record-batch-format.js'
import { varintBytes, varlongBytes, writeVarint, writeVarlong } from './varint.js'

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
