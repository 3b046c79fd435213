/**
 * Turns a fetched records blob into consumer records: walks the batches, checks each CRC,
 * decompresses, drops records below the fetch offset (a compressed batch starts where it
 * starts, not where we asked) and control batches (transaction markers), and reports the
 * offset to fetch next. A trailing partial batch is normal (fetch sizes cut batches) and
 * is fetched again next time.
 *
 * read_committed (`abortedTransactions` given, the fetch response's list): the broker
 * answers up to the last stable offset, aborted transactions included, and names the
 * aborted ones by producer id and first offset. As Java's CompletedFetch, a producer's
 * transactional batches are dropped from its aborted transaction's first offset until
 * its ABORT marker.
 */
import {
  BASE_OFFSET_OFFSET,
  LAST_OFFSET_DELTA_OFFSET,
  MAGIC_OFFSET,
  TimestampType,
} from '../protocol/batch-header.js'
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

export interface AbortedTransaction {
  readonly producerId: bigint
  readonly firstOffset: bigint
}

/** Kafka's control record key: int16 version, int16 type; type 0 is ABORT. */
function isAbortMarker(batch: DecodedRecordBatch): boolean {
  const key = batch.records[0]?.key
  return batch.isControl && key !== null && key !== undefined && key.length >= 4 && key.readInt16BE(2) === 0
}

export async function decodeFetchedRecords(
  topic: string,
  partition: number,
  blob: Buffer | null,
  fetchOffset: number,
  abortedTransactions: readonly AbortedTransaction[] | null = null,
): Promise<DecodedFetch> {
  const records: ConsumerRecord[] = []
  let nextOffset = fetchOffset
  let batchCount = 0
  if (!blob || blob.length === 0) return { records, nextOffset, batchCount }
  // Ordered by first offset; those begun at or before a batch's last offset are consumed into abortedProducerIds.
  const aborted = abortedTransactions
    ? [...abortedTransactions].sort((a, b) => cmp(a.firstOffset, b.firstOffset))
    : null
  const abortedProducerIds = new Set<bigint>()
  const walk = iterateBatches(blob)
  for (let step = walk.next(); step.done !== true; step = walk.next()) {
    const span = step.value
    batchCount++
    const batch = await decodeSpan(blob.subarray(span.at, span.at + span.sizeInBytes), topic, partition)
    const end = batch.baseOffset + batch.lastOffsetDelta + 1
    if (end <= fetchOffset) continue
    nextOffset = Math.max(nextOffset, end)
    if (aborted !== null && batch.producerId >= 0n) {
      const lastOffset = BigInt(end - 1)
      while (aborted.length > 0 && aborted[0].firstOffset <= lastOffset)
        abortedProducerIds.add(aborted.shift()!.producerId)
      if (isAbortMarker(batch)) abortedProducerIds.delete(batch.producerId)
      else if (batch.isTransactional && abortedProducerIds.has(batch.producerId)) continue
    }
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

/** A v2 batch header's size: the fields nextOffsetOf reads lie inside it. */
const V2_HEADER_BYTES = 61

/**
 * What decodeFetchedRecords will answer as nextOffset, read from the batch headers alone
 * (no CRC, no records), so the consumer can send its next fetch before decoding this one.
 * Null when a whole entry is not a plain v2 batch (legacy messages are converted first):
 * the caller then decodes before fetching again, as without the shortcut.
 */
export function nextOffsetOf(blob: Buffer | null, fetchOffset: number): number | null {
  let nextOffset = fetchOffset
  if (!blob || blob.length === 0) return nextOffset
  const walk = iterateBatches(blob)
  for (let step = walk.next(); step.done !== true; step = walk.next()) {
    const { at, sizeInBytes, magic } = step.value
    if (magic !== MAGIC_V2 || sizeInBytes < V2_HEADER_BYTES) return null
    const end =
      Number(blob.readBigInt64BE(at + BASE_OFFSET_OFFSET)) +
      blob.readInt32BE(at + LAST_OFFSET_DELTA_OFFSET) +
      1
    if (end > nextOffset) nextOffset = end
  }
  return nextOffset
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

function cmp(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0
}
