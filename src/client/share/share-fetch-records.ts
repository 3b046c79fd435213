/**
 * Turns one partition of a ShareFetch answer into the records this member acquired (Java's
 * ShareCompletedFetch). The records blob holds whole batches, which may begin before and
 * end after what was acquired (other members hold the rest), so only the offsets inside an
 * AcquiredRecords range are delivered, each with that range's delivery count. An acquired
 * offset with no record (a transaction marker, a compacted record) is a gap: the consumer
 * answers it GAP, or it would stay acquired until its lock runs out. Acquired offsets past
 * the last whole batch of the blob (a cut batch) are neither: nothing is known of them, so
 * they are left to the acquisition lock.
 */
import type { ShareFetchResponseAcquiredRecords } from '../../protocol/generated/apis/share-fetch.js'
import type { RecordsData } from '../../protocol/generated/common.js'
import { type ConsumerRecord, decodeFetchedRecords } from '../fetch-records.js'

/** A record delivered by a share consumer: the consumer's record plus how often it has been delivered. */
export interface ShareConsumerRecord extends ConsumerRecord {
  readonly topicId: string
  /** 1 on the first delivery; higher after a RELEASE or an expired acquisition lock. */
  readonly deliveryCount: number
}

export interface AcquiredBatch {
  readonly records: ShareConsumerRecord[]
  /** Acquired offsets without a record, to be acknowledged as GAP. */
  readonly gapOffsets: number[]
}

/** Bounds the offsets walked for gaps in one range: a range is at most max.poll.records-ish, never millions. */
const ACQUIRED_RANGE_MAX = 1_000_000

export async function decodeAcquiredRecords(
  topicId: string,
  topic: string,
  partition: number,
  data: RecordsData,
  acquired: readonly ShareFetchResponseAcquiredRecords[],
): Promise<AcquiredBatch> {
  if (acquired.length === 0) return { records: [], gapOffsets: [] }
  const ranges = acquired
    .map((r) => ({
      first: Number(r.firstOffset),
      last: Number(r.lastOffset),
      deliveryCount: r.deliveryCount,
    }))
    .sort((a, b) => a.first - b.first)
  // Decoded responses hold one buffer; a list is what an encoder may be handed.
  const blob = data === null || Buffer.isBuffer(data) ? data : Buffer.concat(data as readonly Buffer[])
  const decoded = await decodeFetchedRecords(topic, partition, blob, ranges[0].first)
  const byOffset = new Map(decoded.records.map((r) => [r.offset, r]))
  const records: ShareConsumerRecord[] = []
  const gapOffsets: number[] = []
  for (const range of ranges) {
    if (range.last - range.first >= ACQUIRED_RANGE_MAX) {
      // Not a range a broker sends for one fetch; deliver what decoded, gaps left to the lock.
      for (const r of decoded.records)
        if (r.offset >= range.first && r.offset <= range.last)
          records.push({ ...r, topicId, deliveryCount: range.deliveryCount })
      continue
    }
    const lastKnown = Math.min(range.last, decoded.nextOffset - 1)
    for (let offset = range.first; offset <= lastKnown; offset++) {
      const record = byOffset.get(offset)
      if (record === undefined) gapOffsets.push(offset)
      else records.push({ ...record, topicId, deliveryCount: range.deliveryCount })
    }
  }
  return { records, gapOffsets }
}
