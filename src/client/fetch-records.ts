/**
 * Turns a fetched records blob into consumer records: walks the batches, checks each CRC,
 * decompresses, drops records below the fetch offset (a compressed batch starts where it
 * starts, not where we asked) and control batches (transaction markers), and reports the
 * offset to fetch next. A trailing partial batch is normal (fetch sizes cut batches) and
 * is fetched again next time.
 */
import { MAGIC_OFFSET, TimestampType } from '../protocol/batch-header.js'
import {
  convertLegacyToV2,
  type DecodedRecordBatch,
  decodeRecordBatch,
  iterateBatches,
  MAGIC_V2,
  type RecordHeader,
} from '../protocol/record-batch.js'
import { CorruptRecordError } from './errors.js'

export interface ConsumerRecord {
  topic: string
  partition: number
  offset: number
  timestamp: number
  timestampType: 'CreateTime' | 'LogAppendTime'
  key: Buffer | null
  value: Buffer | null
  headers: RecordHeader[]
  leaderEpoch: number
}

export interface DecodedFetch {
  records: ConsumerRecord[]
  /** Where the next fetch starts: after the last whole batch (or fetchOffset if none). */
  nextOffset: number
  /** Whole batches seen (0 with a non-empty blob means one batch exceeds the fetch size). */
  batchCount: number
}

export async function decodeFetchedRecords(
  topic: string,
  partition: number,
  blob: Buffer | null,
  fetchOffset: number,
): Promise<DecodedFetch> {
  const records: ConsumerRecord[] = []
  let nextOffset = fetchOffset
  let batchCount = 0
  if (!blob || blob.length === 0) return { records, nextOffset, batchCount }
  const walk = iterateBatches(blob)
  for (let step = walk.next(); step.done !== true; step = walk.next()) {
    const span = step.value
    batchCount++
    const batch = await decodeSpan(blob.subarray(span.at, span.at + span.sizeInBytes), topic, partition)
    const end = batch.baseOffset + batch.lastOffsetDelta + 1
    if (end <= fetchOffset) continue
    nextOffset = Math.max(nextOffset, end)
    if (batch.isControl) continue
    const timestampType = batch.timestampType === TimestampType.LogAppendTime ? 'LogAppendTime' : 'CreateTime'
    for (const r of batch.records) {
      if (r.offset < fetchOffset) continue
      records.push({
        topic,
        partition,
        offset: r.offset,
        timestamp: r.timestamp,
        timestampType,
        key: r.key,
        value: r.value,
        headers: r.headers,
        leaderEpoch: batch.partitionLeaderEpoch,
      })
    }
  }
  return { records, nextOffset, batchCount }
}

async function decodeSpan(bytes: Buffer, topic: string, partition: number): Promise<DecodedRecordBatch> {
  try {
    if (bytes[MAGIC_OFFSET] === MAGIC_V2) return await decodeRecordBatch(bytes)
    // A message set from an old producer, served as stored: convert, keeping its offsets.
    const base = Number(bytes.readBigInt64BE(0))
    return await decodeRecordBatch(await convertLegacyToV2(bytes, { baseOffset: base }))
  } catch (error) {
    throw new CorruptRecordError(`${topic}-${partition}: fetched batch does not decode`, error)
  }
}
