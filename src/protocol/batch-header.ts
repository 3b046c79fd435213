/**
 * The fixed 61-byte header of a magic v2 record batch, read and patched in place. The
 * produce and replication paths work on these fields only; records stay encoded bytes.
 *
 *   baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
 *   crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
 *   maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
 *   recordsCount int32 | records...
 *
 * batchLength counts the bytes after the batchLength field; the CRC-32C covers
 * attributes..end, so rewriting baseOffset or partitionLeaderEpoch keeps it valid.
 */
import type { ProducerId } from '../common/types.js'
export const BASE_OFFSET_OFFSET = 0
export const BATCH_LENGTH_OFFSET = 8
export const PARTITION_LEADER_EPOCH_OFFSET = 12
export const MAGIC_OFFSET = 16
export const CRC_OFFSET = 17
export const ATTRIBUTES_OFFSET = 21
export const LAST_OFFSET_DELTA_OFFSET = 23
export const BASE_TIMESTAMP_OFFSET = 27
export const MAX_TIMESTAMP_OFFSET = 35
export const PRODUCER_ID_OFFSET = 43
export const PRODUCER_EPOCH_OFFSET = 51
export const BASE_SEQUENCE_OFFSET = 53
export const RECORDS_COUNT_OFFSET = 57
export const RECORD_BATCH_OVERHEAD = 61
/** Bytes before batchLength's coverage starts: baseOffset + batchLength. */
export const LOG_OVERHEAD = 12

export const COMPRESSION_CODEC_MASK = 0x07
export const TIMESTAMP_TYPE_MASK = 0x08
export const TRANSACTIONAL_FLAG_MASK = 0x10
export const CONTROL_FLAG_MASK = 0x20

export { NO_PRODUCER_ID } from '../common/types.js'
export const NO_SEQUENCE = -1
export const NO_PARTITION_LEADER_EPOCH = -1

export enum CompressionType {
  None = 0,
  Gzip = 1,
  Snappy = 2,
  Lz4 = 3,
  Zstd = 4,
}

export enum TimestampType {
  CreateTime = 0,
  LogAppendTime = 1,
}

/** A view of one batch header at `at` inside `buf`; reads fields lazily. */
export class BatchHeader {
  constructor(
    readonly buf: Buffer,
    readonly at = 0,
  ) {}

  get baseOffset(): number {
    return Number(this.buf.readBigInt64BE(this.at + BASE_OFFSET_OFFSET))
  }
  get batchLength(): number {
    return this.buf.readInt32BE(this.at + BATCH_LENGTH_OFFSET)
  }
  /** Whole batch size on the wire and on disk. */
  get sizeInBytes(): number {
    return LOG_OVERHEAD + this.batchLength
  }
  get partitionLeaderEpoch(): number {
    return this.buf.readInt32BE(this.at + PARTITION_LEADER_EPOCH_OFFSET)
  }
  get magic(): number {
    return this.buf.readInt8(this.at + MAGIC_OFFSET)
  }
  get crc(): number {
    return this.buf.readUInt32BE(this.at + CRC_OFFSET)
  }
  get attributes(): number {
    return this.buf.readInt16BE(this.at + ATTRIBUTES_OFFSET)
  }
  get compression(): CompressionType {
    return this.attributes & COMPRESSION_CODEC_MASK
  }
  get timestampType(): TimestampType {
    return this.attributes & TIMESTAMP_TYPE_MASK ? TimestampType.LogAppendTime : TimestampType.CreateTime
  }
  get isTransactional(): boolean {
    return (this.attributes & TRANSACTIONAL_FLAG_MASK) !== 0
  }
  get isControl(): boolean {
    return (this.attributes & CONTROL_FLAG_MASK) !== 0
  }
  get lastOffsetDelta(): number {
    return this.buf.readInt32BE(this.at + LAST_OFFSET_DELTA_OFFSET)
  }
  get lastOffset(): number {
    return this.baseOffset + this.lastOffsetDelta
  }
  get nextOffset(): number {
    return this.lastOffset + 1
  }
  get baseTimestamp(): number {
    return Number(this.buf.readBigInt64BE(this.at + BASE_TIMESTAMP_OFFSET))
  }
  get maxTimestamp(): number {
    return Number(this.buf.readBigInt64BE(this.at + MAX_TIMESTAMP_OFFSET))
  }
  get producerId(): ProducerId {
    // Any int64 a batch carries, as Kafka reads it: the producer state, not the decoder,
    // decides what an id means (-1 none), so no range check here.
    return this.buf.readBigInt64BE(this.at + PRODUCER_ID_OFFSET) as ProducerId
  }
  get producerEpoch(): number {
    return this.buf.readInt16BE(this.at + PRODUCER_EPOCH_OFFSET)
  }
  get baseSequence(): number {
    return this.buf.readInt32BE(this.at + BASE_SEQUENCE_OFFSET)
  }
  get recordsCount(): number {
    return this.buf.readInt32BE(this.at + RECORDS_COUNT_OFFSET)
  }

  setBaseOffset(offset: number): void {
    this.buf.writeBigInt64BE(BigInt(offset), this.at + BASE_OFFSET_OFFSET)
  }
  setPartitionLeaderEpoch(epoch: number): void {
    this.buf.writeInt32BE(epoch, this.at + PARTITION_LEADER_EPOCH_OFFSET)
  }
}
