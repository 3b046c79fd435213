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
  decodeRecords,
  iterateBatches,
  MAGIC_V2,
  openRecordBatch,
  type RecordBatchHeaderFields,
  type RecordHeader,
  visitRecords,
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
function isAbortMarker(header: RecordBatchHeaderFields, records: Buffer): boolean {
  if (!header.isControl || header.recordsCount === 0) return false
  const key = decodeRecords(records, header.recordsCount)[0].key
  return key !== null && key.length >= 4 && key.readInt16BE(2) === 0
}

/** Parses records it keeps nothing of: a skipped batch's bytes are still checked, as before they were skipped. */
function ignoreRecord(): void {}

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
    const bytes = blob.subarray(span.at, span.at + span.sizeInBytes)
    try {
      const { header, records: section } = await openSpan(bytes)
      const end = header.baseOffset + header.lastOffsetDelta + 1
      let keep = end > fetchOffset
      if (keep) nextOffset = Math.max(nextOffset, end)
      if (keep && aborted !== null && header.producerId >= 0n) {
        const lastOffset = BigInt(end - 1)
        while (aborted.length > 0 && aborted[0].firstOffset <= lastOffset)
          abortedProducerIds.add(aborted.shift()!.producerId)
        if (isAbortMarker(header, section)) abortedProducerIds.delete(header.producerId)
        else if (header.isTransactional && abortedProducerIds.has(header.producerId)) keep = false
      }
      if (header.isControl) keep = false
      // Straight into the consumer's records (keys and values stay views into the fetch
      // response): no intermediate Record or DecodedRecord per record.
      visitRecords(
        section,
        header.recordsCount,
        keep ? recordsOf(header, topic, partition, fetchOffset, records) : ignoreRecord,
      )
    } catch (error) {
      throw new CorruptRecordError(`${topic}-${partition}: fetched batch does not decode`, error)
    }
  }
  return { records, nextOffset, batchCount }
}

/** The visitor that appends a batch's records at or past fetchOffset to `out`. */
function recordsOf(
  header: RecordBatchHeaderFields,
  topic: string,
  partition: number,
  fetchOffset: number,
  out: ConsumerRecord[],
): (
  offsetDelta: number,
  timestampDelta: number,
  key: Buffer | null,
  value: Buffer | null,
  headers: RecordHeader[],
) => void {
  const timestampType = header.timestampType === TimestampType.LogAppendTime ? 'LogAppendTime' : 'CreateTime'
  const { baseOffset, baseTimestamp, maxTimestamp, partitionLeaderEpoch } = header
  const logAppendTime = timestampType === 'LogAppendTime'
  return (offsetDelta, timestampDelta, key, value, headers) => {
    const offset = baseOffset + offsetDelta
    if (offset < fetchOffset) return
    out.push({
      topic,
      partition,
      offset,
      // LogAppendTime batches: every record takes the batch's maxTimestamp (as DecodedRecord).
      timestamp: logAppendTime ? maxTimestamp : baseTimestamp + timestampDelta,
      timestampType,
      key,
      value,
      headers,
      leaderEpoch: partitionLeaderEpoch,
    })
  }
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

async function openSpan(bytes: Buffer): Promise<Awaited<ReturnType<typeof openRecordBatch>>> {
  if (bytes[MAGIC_OFFSET] === MAGIC_V2) return await openRecordBatch(bytes)
  // A message set from an old producer, served as stored: convert, keeping its offsets.
  const base = Number(bytes.readBigInt64BE(0))
  return await openRecordBatch(await convertLegacyToV2(bytes, { baseOffset: base }))
}

function cmp(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0
}
