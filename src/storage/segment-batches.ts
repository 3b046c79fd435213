/**
 * Walks over a segment's `.log` bytes, batch by batch, that LogSegment's reads and lookups
 * share (what Kafka's FileRecords does for its LogSegment: the batches from a position, the
 * search by timestamp, the largest timestamp). Apart from log-segment.ts, which keeps the
 * file, its indexes and their lifecycle; these functions only read through `SegmentBytes`.
 */
import { maxOffset, type Offset } from '../common/types.js'
import { LOG_OVERHEAD } from '../protocol/batch-header.js'
import {
  BATCH_OFFSETS_HEADER_BYTES,
  type BatchSummary,
  checkBatch,
  findRecord,
  findRecordInCompressed,
  isCompressedCreateTime,
  MIN_BATCH_LENGTH,
  peekBatch,
} from './record-batch-check.js'
import { type CorruptionFinding, ReadWindow } from './segment-read-window.js'
import type { TimestampOffset } from './time-index.js'

/** Recovery and index rebuilds read the log in windows of this size. */
export const SCAN_WINDOW_BYTES = 8 * 1024 * 1024

/** The smallest batch: its log overhead and a v2 header. */
export const MIN_BATCH_BYTES = LOG_OVERHEAD + MIN_BATCH_LENGTH

/** What the walks read through: the segment's completed bytes (LogSegment implements it). */
export interface SegmentBytes {
  /** Bytes of the .log whose write has completed. */
  readonly size: number
  /** Batches at or after this byte were checked by their append and are served unchecked. */
  readonly checkedBelow: number
  readonly indexIntervalBytes: number
  /** Makes `window` hold [position, position+length) if the data has it; reads `preferred` bytes ahead. */
  fill(
    window: ReadWindow,
    position: number,
    length: number,
    preferred: number,
    limit?: number,
  ): Promise<boolean>
}

/**
 * `read`'s walk from the batch `first` on: whole batches within the limits, each checked
 * (framing, offsets, CRC), the window refilled when it ends inside one. Damage after a
 * sound batch ends the walk there; damage before any is thrown.
 */
export async function takeBatches(
  bytes: SegmentBytes,
  first: BatchSummary,
  window: ReadWindow,
  corruption: CorruptionFinding,
  limits: { maxOffset: Offset; maxBytes: number; minOneBatch: boolean; allowOffsetGaps: boolean },
): Promise<{ records: Buffer[]; sizeInBytes: number; nextOffset: Offset }> {
  const { maxOffset, maxBytes, minOneBatch, allowOffsetGaps } = limits
  const records: Buffer[] = []
  let sliceStart = first.position
  let position = first.position
  let taken = 0
  let nextOffset = first.baseOffset
  for (;;) {
    const headerHere = window.covers(position, BATCH_OFFSETS_HEADER_BYTES)
    const batch = headerHere ? peekBatch(window.buf, position - window.start, window.buf.length) : undefined
    if (
      batch !== undefined &&
      (batch.sizeInBytes < MIN_BATCH_BYTES ||
        position + batch.sizeInBytes > bytes.size ||
        batch.baseOffset < nextOffset ||
        (!allowOffsetGaps && batch.baseOffset !== nextOffset))
    ) {
      corruption.found(
        position,
        `batch of ${batch.sizeInBytes} bytes at offsets from ${batch.baseOffset}, after ${nextOffset}, in ${bytes.size} bytes`,
      )
      break
    }
    if (batch === undefined || !window.covers(position, batch.sizeInBytes)) {
      // The window ends inside this batch: keep what it holds and read on from here.
      if (batch !== undefined && batch.lastOffset >= maxOffset) break
      if (batch !== undefined && taken + batch.sizeInBytes > maxBytes && !(minOneBatch && taken === 0)) break
      if (position > sliceStart)
        records.push(window.buf.subarray(sliceStart - window.start, position - window.start))
      sliceStart = position
      const needed = batch === undefined ? BATCH_OFFSETS_HEADER_BYTES : batch.sizeInBytes
      if (!(await bytes.fill(window, position, needed, Math.max(maxBytes - taken, needed)))) {
        // Batches are written whole before `size` counts them: one cut short is damage.
        if (position !== bytes.size)
          corruption.found(position, `batch of ${needed} bytes cut by the end of the segment`)
        break
      }
      continue
    }
    if (batch.lastOffset >= maxOffset) break
    if (taken + batch.sizeInBytes > maxBytes && !(minOneBatch && taken === 0)) break
    // The CRC is checked before a batch leaves the broker, to a client or a follower: the
    // append checked it, so a mismatch here is the disk's doing (Kafka checks it only in
    // recovery and in the client). Not for what this process appended to the active segment
    // (LogSegment.checkedBelow): the check was a third of a large fetch's broker time.
    if (position < bytes.checkedBelow) {
      const check = checkBatch(window.buf, position - window.start, window.buf.length, batch.sizeInBytes)
      if (!check.ok) {
        corruption.found(position, check.problem)
        break
      }
    }
    taken += batch.sizeInBytes
    position += batch.sizeInBytes
    nextOffset = (batch.lastOffset + 1) as Offset
  }
  // What came before the damaged batch is sound and served; the next read starts at it and fails.
  if (taken === 0) corruption.throwIfFound()
  if (position > sliceStart)
    records.push(window.buf.subarray(sliceStart - window.start, position - window.start))
  return { records, sizeInBytes: taken, nextOffset }
}

/** Visits whole batches from `position` until `visit` returns a value. */
export async function scanBatches<T>(
  bytes: SegmentBytes,
  position: number,
  visit: (buf: Buffer, at: number, batch: BatchSummary) => T | undefined,
): Promise<T | undefined> {
  const window = new ReadWindow()
  const preferred = Math.min(SCAN_WINDOW_BYTES, Math.max(bytes.indexIntervalBytes * 4, 65536))
  let at = position
  while (await bytes.fill(window, at, BATCH_OFFSETS_HEADER_BYTES, preferred)) {
    const header = peekBatch(window.buf, at - window.start, window.buf.length)
    if (header === undefined || header.sizeInBytes <= 0) return undefined
    if (!(await bytes.fill(window, at, header.sizeInBytes, preferred))) return undefined
    const result = visit(window.buf, at - window.start, { ...header, position: at })
    if (result !== undefined) return result
    at += header.sizeInBytes
  }
  return undefined
}

/**
 * The first record from `position` on with timestamp >= `timestampMs` at or after
 * `startingOffset` (Kafka's FileRecords.searchForTimestamp): found in the first batch whose
 * max timestamp is that late, its records decompressed if need be. A LogAppendTime batch's
 * records all carry its max timestamp.
 */
export async function searchForTimestamp(
  bytes: SegmentBytes,
  position: number,
  timestampMs: number,
  startingOffset: Offset,
): Promise<TimestampOffset | undefined> {
  for (;;) {
    const found = await scanBatches(bytes, position, (buf, at, batch) => {
      if (batch.maxTimestamp < timestampMs || batch.lastOffset < startingOffset) return undefined
      // Decompressing needs an await: the batch is copied out of the scan's window.
      if (isCompressedCreateTime(buf, at))
        return {
          compressed: Buffer.from(buf.subarray(at, at + batch.sizeInBytes)),
          next: batch.position + batch.sizeInBytes,
        }
      const hit = findRecord(buf, at, batch.sizeInBytes, startingOffset, (ts) => ts >= timestampMs) ?? {
        timestamp: batch.maxTimestamp,
        offset: maxOffset(batch.baseOffset, startingOffset),
      }
      return { hit }
    })
    if (found === undefined) return undefined
    if ('hit' in found) return found.hit
    const hit = await findRecordInCompressed(found.compressed, startingOffset, (ts) => ts >= timestampMs)
    if (hit !== undefined) return hit
    position = found.next
  }
}

/**
 * The record holding `maxTimestamp` in the batch holding `target`, scanning from `position`
 * (batch-level when the batch is compressed).
 */
export function recordWithTimestamp(
  bytes: SegmentBytes,
  position: number,
  target: Offset,
  maxTimestamp: number,
): Promise<TimestampOffset | undefined> {
  return scanBatches(bytes, position, (buf, at, batch) => {
    if (batch.lastOffset < target) return undefined
    return (
      findRecord(buf, at, batch.sizeInBytes, batch.baseOffset, (ts) => ts === maxTimestamp) ?? {
        timestamp: maxTimestamp,
        offset: batch.lastOffset,
      }
    )
  })
}
