/**
 * One clean of one log (Kafka's Cleaner): its cleanable range, the offset map of its dirty
 * section, and the rewrite of its segments group by group. log-cleaner.ts chooses the logs
 * and runs it; cleaner-records.ts copies the records a batch keeps.
 *
 * One clean of a log:
 * 1. The cleanable range: whole inactive segments below the cleanable end offset (the
 *    high watermark the replication layer hands the log, never above it), and below the
 *    first segment younger than min.compaction.lag.ms. It splits into the clean section
 *    [log start, first dirty offset) and the dirty section [first dirty offset, end).
 * 2. Offset map: every record of the dirty section, key -> offset of its last record
 *    (batches decompressed here; the produce and fetch paths never decode).
 * 3. Rewrite: segments from the log start to the end, in groups that fit one segment
 *    (segment.bytes, index entries, 32-bit relative offsets), each into a `.cleaned`
 *    segment keeping a record iff no later record has its key. Batches keep their base
 *    offset and lastOffsetDelta (as Kafka, so producer sequences stay right), codec,
 *    timestamp type and producer fields; the CRC is recomputed. A batch whose records all
 *    go disappears, except as an empty batch when it is its producer's last (producer
 *    state) or its group's last (so the cleaned segment ends where the old ones did).
 *    Keyless records (refused at produce) are dropped.
 *    Transactions (Kafka's CleanedTransactionMetadata): the records of aborted transactions
 *    (from the `.txnindex`) are removed and never enter the offset map. A marker stays
 *    while a batch of its transaction remains; then, like a tombstone, its batch gets a
 *    delete horizon and goes once the horizon passes. The cleaned segment's `.txnindex`
 *    keeps the entries of the ABORT markers it keeps whose data it still saw. Nothing at
 *    or above the first unstable offset is cleaned (an open transaction's outcome is unknown).
 * 4. Tombstones (null values) follow KIP-534: the first clean that keeps one stamps its
 *    batch with a delete horizon (now + delete.retention.ms, in baseTimestamp, attribute
 *    bit 6); a clean after the horizon removes it.
 * 5. Each group is swapped in by UnifiedLog.replaceSegments (crash-safe renames).
 *
 * The work runs in slices: every read of at most READ_WINDOW_BYTES is an await and
 * compression is asynchronous, so the event loop never waits long for the cleaner.
 */
import { assert } from '../common/assert.js'
import type { Clock } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import { maxOffset, minOffset, type Offset, offsetAfter, type ProducerId, toOffset } from '../common/types.js'
import {
  ATTRIBUTES_OFFSET,
  BASE_TIMESTAMP_OFFSET,
  BATCH_LENGTH_OFFSET,
  BatchHeader,
  COMPRESSION_CODEC_MASK,
  CONTROL_FLAG_MASK,
  CompressionType,
  LAST_OFFSET_DELTA_OFFSET,
  LOG_OVERHEAD,
  MAX_TIMESTAMP_OFFSET,
  PRODUCER_ID_OFFSET,
  RECORD_BATCH_OVERHEAD,
  RECORDS_COUNT_OFFSET,
} from '../protocol/batch-header.js'
import { decompress } from '../protocol/compression.js'
import { DELETE_HORIZON_FLAG_MASK } from '../protocol/record-batch.js'
import {
  type BatchView,
  emptyBatchOf,
  type RecordSpan,
  rebuildBatch,
  walkRecords,
} from './cleaner-records.js'
import { readEndTxnMarker } from './control-batch.js'
import type { LogConfig } from './log-config.js'
import type { AppendedBatch, LogSegment } from './log-segment.js'
import { readInt64 } from './record-batch-check.js'
import type { AbortedTxn, TransactionIndex } from './transaction-index.js'
import type { UnifiedLog } from './unified-log.js'

/** Bytes read from a segment per step: bounds both memory and the time between awaits. */
export const READ_WINDOW_BYTES = 1 << 20
/** Bytes of rewritten batches gathered before one append to the cleaned segment. */
const WRITE_CHUNK_BYTES = 1 << 20
/**
 * Keys the offset map holds (Kafka sizes it by log.cleaner.dedupe.buffer.size, 128 MiB at
 * 24 bytes an entry). A dirty section with more keys is cleaned in several passes.
 */
export const DEFAULT_OFFSET_MAP_MAX_ENTRIES = 4_000_000
/** Kafka's producer.id.expiration.ms default. */
const DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
const INT32_MAX = 0x7fffffff

export interface CleanOptions {
  /** Exclusive: nothing at or above it is cleaned (the high watermark). Default the log's. */
  readonly cleanableEndOffset?: Offset
  /** Where the dirty section starts (the cleaner checkpoint); default the log start. */
  readonly firstDirtyOffset?: Offset
  /** Clean even below min.cleanable.dirty.ratio (tests, max.compaction.lag.ms, tombstone horizons). */
  readonly force?: boolean
  readonly offsetMapMaxEntries?: number
  /**
   * producer.id.expiration.ms: a producer's last batch is kept (empty if need be) until the
   * producer expires, as producer state forgets it then. Default a day.
   */
  readonly producerIdExpirationMs?: number
  /** Checked between slices: true stops the clean and discards what it wrote. */
  readonly aborted?: () => boolean
}

/** Where a log stands for the cleaner (Kafka's LogToClean). */
export interface CleanableRange {
  readonly firstDirtyOffset: Offset
  /** Offset after the last cleanable segment: a segment boundary. */
  readonly endOffset: Offset
  readonly cleanBytes: number
  readonly dirtyBytes: number
  readonly dirtyRatio: number
  /** max.compaction.lag.ms passed for the oldest dirty record. */
  readonly compactionLagDue: boolean
}

export interface CleanStats {
  readonly cleaned: boolean
  /** The new first dirty offset (the cleaner checkpoint), when cleaned. */
  readonly endOffset: Offset
  readonly bytesRead: number
  readonly bytesWritten: number
  readonly recordsRead: number
  readonly recordsRetained: number
  readonly segmentsBefore: number
  readonly segmentsAfter: number
  /** Earliest tombstone delete horizon now in the log, Infinity when none. */
  readonly nextDeleteHorizonMs: number
  readonly elapsedMs: number
}

/** Loads the indexes of the log's lazily opened segments: choosing and grouping segments reads them. */
export async function loadSegmentIndexes(log: UnifiedLog): Promise<void> {
  // Retention may delete old segments meanwhile: those are no longer the cleaner's.
  for (const segment of [...log.segmentList]) if (!segment.isGone) await segment.ensureLoaded()
}

/** The cleanable range of `log` now, or undefined when it has no cleanable dirty segment. */
export function cleanableRange(
  log: UnifiedLog,
  firstDirtyOffset: Offset,
  nowMs: number,
  cleanableEndOffset: Offset = log.highWatermark,
): CleanableRange | undefined {
  const config = log.config
  const segments = log.segmentList
  const end = minOffset(cleanableEndOffset, log.activeSegment.baseOffset)
  const firstDirty = maxOffset(firstDirtyOffset, log.logStartOffset)
  let cleanBytes = 0
  let dirtyBytes = 0
  let endOffset = firstDirty
  let compactionLagDue = false
  for (let i = 0; i < segments.length - 1; i++) {
    const segment = segments[i]
    const next = segments[i + 1].baseOffset
    if (next <= log.logStartOffset) continue
    if (next <= firstDirty) {
      cleanBytes += segment.size
      continue
    }
    if (next > end) break
    if (config.minCompactionLagMs > 0 && segment.largestTimestamp > nowMs - config.minCompactionLagMs) break
    if (dirtyBytes === 0) {
      const firstTimestamp = segment.rollingBasedTimestamp ?? segment.largestTimestamp
      compactionLagDue = firstTimestamp >= 0 && nowMs - firstTimestamp > config.maxCompactionLagMs
    }
    dirtyBytes += segment.size
    endOffset = next
  }
  // Nothing dirty still leaves the clean section to re-clean (tombstones past their horizon).
  if (endOffset <= firstDirty && cleanBytes === 0) return undefined
  const total = cleanBytes + dirtyBytes
  return {
    firstDirtyOffset: firstDirty,
    endOffset,
    cleanBytes,
    dirtyBytes,
    dirtyRatio: total === 0 ? 0 : dirtyBytes / total,
    compactionLagDue,
  }
}

/** Kafka's firstUncleanableDirtyOffset: never at or past an open transaction. */
export function uncleanableFrom(log: UnifiedLog, cleanableEndOffset: Offset): Offset {
  const firstUnstable = log.producerState?.firstUnstableOffset?.()
  return firstUnstable === undefined ? cleanableEndOffset : minOffset(firstUnstable, cleanableEndOffset)
}

/**
 * What the cleaner knows of transactions as it reads batches in offset order (Kafka's
 * CleanedTransactionMetadata): the aborted ones from the `.txnindex`, which producers'
 * aborted or committed transactions it is inside, and for an aborted one whether it saw
 * one of its batches (then its marker must stay).
 */
class CleanedTransactions {
  private readonly pending: AbortedTxn[]
  private readonly ongoingAborted = new Map<
    ProducerId,
    { txn: AbortedTxn; lastObservedBatchOffset?: Offset }
  >()
  private readonly ongoingCommitted = new Set<bigint>()

  constructor(
    aborted: readonly AbortedTxn[],
    /** The cleaned segment's index, to copy kept ABORT markers' entries into (rewrite pass only). */
    private readonly cleanedIndex?: TransactionIndex,
  ) {
    this.pending = [...aborted].sort((a, b) => a.firstOffset - b.firstOffset)
  }

  private consumeAbortedUpTo(offset: number): void {
    while (this.pending.length > 0 && this.pending[0].firstOffset <= offset) {
      const txn = this.pending.shift()!
      if (!this.ongoingAborted.has(txn.producerId)) this.ongoingAborted.set(txn.producerId, { txn })
    }
  }

  /** A data batch: true when it belongs to an aborted transaction (its records all go). */
  onDataBatch(header: BatchHeader): boolean {
    this.consumeAbortedUpTo(header.lastOffset)
    if (!header.isTransactional) return false
    const aborted = this.ongoingAborted.get(header.producerId)
    if (aborted !== undefined) {
      aborted.lastObservedBatchOffset = toOffset(header.lastOffset)
      return true
    }
    this.ongoingCommitted.add(header.producerId)
    return false
  }

  /** A control batch: true when no batch of its transaction is left, so the marker may go. */
  async onControlBatch(header: BatchHeader): Promise<boolean> {
    this.consumeAbortedUpTo(header.lastOffset)
    // An empty control batch was cleaned before: nothing refers to it.
    if (header.recordsCount === 0) return true
    const marker = readEndTxnMarker(header)
    if (marker === undefined) return false
    const producerId = header.producerId
    if (marker.result === 'commit') return !this.ongoingCommitted.delete(producerId)
    const aborted = this.ongoingAborted.get(producerId)
    this.ongoingAborted.delete(producerId)
    if (aborted?.lastObservedBatchOffset === undefined) return true
    if (this.cleanedIndex !== undefined && aborted.txn.lastOffset > this.cleanedIndex.lastOffset)
      await this.cleanedIndex.append(aborted.txn)
    return false
  }
}

export class CleanAborted extends Error {
  constructor() {
    super('log cleaning aborted')
  }
}

/** What the map pass learns: keys' last offsets and each producer's last batch. */
interface CleanerMaps {
  readonly offsets: Map<string, Offset>
  /** producer id (decimal string) -> its last batch in the cleaned range. */
  readonly producerLastBatches: Map<string, { lastOffset: Offset; maxTimestamp: number }>
  /** Offset after the last segment the map covers: the end of this clean. */
  readonly endOffset: Offset
}

/**
 * Cleans `log` once if it has a cleanable dirty section (and, unless forced, its dirty
 * ratio reaches min.cleanable.dirty.ratio). Returns what it did.
 */
export async function cleanLog(
  log: UnifiedLog,
  clock: Clock,
  logger: Logger,
  options: CleanOptions = {},
): Promise<CleanStats> {
  await loadSegmentIndexes(log)
  const startedMs = clock.monotonicMs()
  const nowMs = clock.nowMs()
  const firstDirty = options.firstDirtyOffset ?? log.logStartOffset
  const range = cleanableRange(
    log,
    firstDirty,
    nowMs,
    uncleanableFrom(log, options.cleanableEndOffset ?? log.highWatermark),
  )
  const notCleaned: CleanStats = {
    cleaned: false,
    endOffset: firstDirty,
    bytesRead: 0,
    bytesWritten: 0,
    recordsRead: 0,
    recordsRetained: 0,
    segmentsBefore: log.numberOfSegments,
    segmentsAfter: log.numberOfSegments,
    nextDeleteHorizonMs: Infinity,
    elapsedMs: 0,
  }
  if (range === undefined) return notCleaned
  const dirtyDue = range.dirtyBytes > 0 && range.dirtyRatio >= log.config.minCleanableDirtyRatio
  if (options.force !== true && !range.compactionLagDue && !dirtyDue) return notCleaned
  const cleaner = new Cleaner(
    log,
    nowMs,
    options.aborted ?? (() => false),
    options.producerIdExpirationMs ?? DEFAULT_PRODUCER_ID_EXPIRATION_MS,
  )
  const maps = await cleaner.buildMaps(range, options.offsetMapMaxEntries ?? DEFAULT_OFFSET_MAP_MAX_ENTRIES)
  const segmentsBefore = log.numberOfSegments
  const swapped = await cleaner.rewrite(maps)
  const stats: CleanStats = {
    cleaned: swapped,
    endOffset: swapped ? maps.endOffset : firstDirty,
    bytesRead: cleaner.bytesRead,
    bytesWritten: cleaner.bytesWritten,
    recordsRead: cleaner.recordsRead,
    recordsRetained: cleaner.recordsRetained,
    segmentsBefore,
    segmentsAfter: log.numberOfSegments,
    nextDeleteHorizonMs: cleaner.nextDeleteHorizonMs,
    elapsedMs: clock.monotonicMs() - startedMs,
  }
  logger.info(
    {
      log: log.dir,
      firstDirtyOffset: range.firstDirtyOffset,
      dirtyRatio: Number(range.dirtyRatio.toFixed(3)),
      ...stats,
    },
    swapped ? 'cleaned log' : 'log cleaning gave up: the segments changed under it',
  )
  return stats
}

/** Segment batches, a window at a time; aborts between windows. */
async function* batchesOf(segment: LogSegment, aborted: () => boolean): AsyncGenerator<BatchView> {
  const size = segment.size
  let position = 0
  while (position < size) {
    if (aborted()) throw new CleanAborted()
    let window = await segment.readRange(position, READ_WINDOW_BYTES, size)
    let at = 0
    while (at + LOG_OVERHEAD <= window.length) {
      const batchSize = LOG_OVERHEAD + window.readInt32BE(at + BATCH_LENGTH_OFFSET)
      assert(
        batchSize >= RECORD_BATCH_OVERHEAD,
        () => `bad batch length at ${position + at} in ${segment.logPath}`,
      )
      if (at + batchSize > window.length) break
      yield { buf: window, at, size: batchSize }
      at += batchSize
    }
    if (at === 0) {
      // One batch larger than the window: read it whole.
      const batchSize =
        window.length >= LOG_OVERHEAD ? LOG_OVERHEAD + window.readInt32BE(BATCH_LENGTH_OFFSET) : 0
      assert(batchSize > 0 && position + batchSize <= size, () => `truncated batch in ${segment.logPath}`)
      window = await segment.readRange(position, batchSize, size)
      yield { buf: window, at: 0, size: batchSize }
      at = batchSize
    }
    position += at
  }
}

class Cleaner {
  bytesRead = 0
  bytesWritten = 0
  recordsRead = 0
  recordsRetained = 0
  nextDeleteHorizonMs = Infinity
  private readonly config: LogConfig

  constructor(
    private readonly log: UnifiedLog,
    private readonly nowMs: number,
    private readonly aborted: () => boolean,
    private readonly producerIdExpirationMs: number,
  ) {
    this.config = log.config
  }

  // ---- pass 1: the offset map ----

  async buildMaps(range: CleanableRange, maxEntries: number): Promise<CleanerMaps> {
    const offsets = new Map<string, Offset>()
    const producerLastBatches = new Map<string, { lastOffset: Offset; maxTimestamp: number }>()
    let endOffset = range.firstDirtyOffset
    const segments = [...this.log.segmentList]
    // An aborted record never shadows an earlier value of its key.
    const transactions = new CleanedTransactions(
      this.log.collectAbortedTransactions(range.firstDirtyOffset, range.endOffset),
    )
    for (let i = 0; i < segments.length - 1; i++) {
      const segment = segments[i]
      const next = segments[i + 1].baseOffset
      if (next <= this.log.logStartOffset) continue
      if (next > range.endOffset) break
      const dirty = next > range.firstDirtyOffset
      if (dirty && endOffset > range.firstDirtyOffset && offsets.size > maxEntries) break
      for await (const batch of batchesOf(segment, this.aborted)) {
        this.bytesRead += batch.size
        const attributes = batch.buf.readInt16BE(batch.at + ATTRIBUTES_OFFSET)
        if ((attributes & CONTROL_FLAG_MASK) !== 0) {
          // A marker ends its producer's transaction: its later batches are not aborted ones.
          if (dirty) await transactions.onControlBatch(new BatchHeader(batch.buf, batch.at))
          continue
        }
        const lastOffset = offsetAfter(
          batchBaseOffset(batch),
          batch.buf.readInt32BE(batch.at + LAST_OFFSET_DELTA_OFFSET),
        )
        const producerId = batch.buf.readBigInt64BE(batch.at + PRODUCER_ID_OFFSET)
        if (producerId >= 0n) {
          const maxTimestamp = readInt64(batch.buf, batch.at + MAX_TIMESTAMP_OFFSET)
          producerLastBatches.set(producerId.toString(), { lastOffset, maxTimestamp })
        }
        if (!dirty) continue
        if (transactions.onDataBatch(new BatchHeader(batch.buf, batch.at))) continue
        const baseOffset = batchBaseOffset(batch)
        const { data, spans } = await this.records(batch)
        for (const span of spans) {
          if (span.keyLength < 0) continue
          offsets.set(keyString(data, span), offsetAfter(baseOffset, span.offsetDelta))
        }
      }
      if (dirty) endOffset = next
    }
    return { offsets, producerLastBatches, endOffset }
  }

  /** The records of a batch as spans over its uncompressed records section. */
  private async records(batch: BatchView): Promise<{ data: Buffer; spans: RecordSpan[] }> {
    const { buf, at, size } = batch
    const count = buf.readInt32BE(at + RECORDS_COUNT_OFFSET)
    if (count === 0) return { data: buf, spans: [] }
    const codec = buf.readInt16BE(at + ATTRIBUTES_OFFSET) & COMPRESSION_CODEC_MASK
    const section = buf.subarray(at + RECORD_BATCH_OVERHEAD, at + size)
    const data = codec === CompressionType.None ? section : await decompress(codec, section)
    return { data, spans: walkRecords(data, count) }
  }

  // ---- pass 2: rewrite and swap ----

  /** Rewrites the segments below the map's end, group by group; false if a swap was refused. */
  async rewrite(maps: CleanerMaps): Promise<boolean> {
    const groups = groupSegments(this.log, maps.endOffset, this.config)
    for (const group of groups) {
      if (!(await this.cleanGroup(group, maps))) return false
    }
    return true
  }

  private async cleanGroup(group: readonly LogSegment[], maps: CleanerMaps): Promise<boolean> {
    const sizes = group.map((segment) => segment.size)
    const cleaned = await this.log.createCleanedSegment(group[0].baseOffset)
    let swapped = false
    try {
      await this.fillCleanedSegment(group, cleaned, maps)
      await cleaned.onBecomeInactiveSegment()
      swapped = await this.log.replaceSegments(group, sizes, cleaned)
      return swapped
    } finally {
      if (!swapped) {
        await cleaned.closeHandlers()
        await cleaned.deleteFiles().catch(() => undefined)
      }
    }
  }

  private async fillCleanedSegment(
    group: readonly LogSegment[],
    cleaned: LogSegment,
    maps: CleanerMaps,
  ): Promise<void> {
    let buffers: Buffer[] = []
    let appended: AppendedBatch[] = []
    let pendingBytes = 0
    const flush = async () => {
      if (appended.length === 0) return
      await cleaned.append(buffers, appended, this.nowMs)
      this.bytesWritten += pendingBytes
      buffers = []
      appended = []
      pendingBytes = 0
    }
    const emit = async (batch: Buffer) => {
      buffers.push(batch)
      appended.push(appendedBatch(batch))
      pendingBytes += batch.length
      if (pendingBytes >= WRITE_CHUNK_BYTES) await flush()
    }
    // The aborted transactions of the group's range, including ones begun before it.
    const next = this.log.segmentList[this.log.segmentList.indexOf(group.at(-1)!) + 1]
    assert(next !== undefined, 'a cleaned group is followed by a segment')
    const transactions = new CleanedTransactions(
      this.log.collectAbortedTransactions(group[0].baseOffset, next.baseOffset),
      cleaned.txnIndex,
    )
    // The last batch of the group, held back when dropped: an empty batch keeps the group's end.
    let lastDropped: Buffer | undefined
    for (const segment of group) {
      for await (const batch of batchesOf(segment, this.aborted)) {
        const kept = await this.filterBatch(batch, maps, transactions)
        if (kept === undefined) {
          lastDropped = emptyBatchOf(batch)
          continue
        }
        lastDropped = undefined
        await emit(kept)
      }
    }
    if (lastDropped !== undefined) await emit(lastDropped)
    await flush()
    assert(cleaned.size > 0, 'a cleaned segment holds at least one batch')
  }

  /** The batch to write for `batch` (itself, a rewrite, an empty batch), or undefined to drop it. */
  private async filterBatch(
    batch: BatchView,
    maps: CleanerMaps,
    transactions: CleanedTransactions,
  ): Promise<Buffer | undefined> {
    const { buf, at, size } = batch
    const original = buf.subarray(at, at + size)
    const attributes = buf.readInt16BE(at + ATTRIBUTES_OFFSET)
    const header = new BatchHeader(buf, at)
    const hasHorizon = (attributes & DELETE_HORIZON_FLAG_MASK) !== 0
    const horizonMs = hasHorizon ? readInt64(buf, at + BASE_TIMESTAMP_OFFSET) : undefined
    if ((attributes & CONTROL_FLAG_MASK) !== 0) {
      if (!(await transactions.onControlBatch(header))) return original
      // Emptied by an earlier clean and kept only as its group's last batch.
      if (header.recordsCount === 0) return undefined
      // A marker nothing refers to any more goes like a tombstone: after delete.retention.ms.
      if (horizonMs !== undefined) {
        if (this.nowMs >= horizonMs) return undefined
        this.nextDeleteHorizonMs = Math.min(this.nextDeleteHorizonMs, horizonMs)
        return original
      }
      const newHorizonMs = this.nowMs + this.config.deleteRetentionMs
      this.nextDeleteHorizonMs = Math.min(this.nextDeleteHorizonMs, newHorizonMs)
      const { data, spans } = await this.records(batch)
      return rebuildBatch(batch, data, spans, newHorizonMs)
    }
    const abortedData = transactions.onDataBatch(header)
    const baseOffset = batchBaseOffset(batch)
    const lastOffset = offsetAfter(baseOffset, buf.readInt32BE(at + LAST_OFFSET_DELTA_OFFSET))
    const producerId = buf.readBigInt64BE(at + PRODUCER_ID_OFFSET)
    const producersLast = producerId >= 0n ? maps.producerLastBatches.get(producerId.toString()) : undefined
    // Kept while producer state would still hold the producer (it expires as Kafka's does).
    const isProducersLast =
      producersLast?.lastOffset === lastOffset &&
      this.nowMs - producersLast.maxTimestamp < this.producerIdExpirationMs
    const { data, spans } = await this.records(batch)
    this.recordsRead += spans.length
    const retained: RecordSpan[] = []
    let tombstones = 0
    for (const span of spans) {
      if (abortedData || !this.shouldRetain(data, span, baseOffset, horizonMs, maps)) continue
      retained.push(span)
      if (span.isTombstone) tombstones++
    }
    this.recordsRetained += retained.length
    if (retained.length === 0) return isProducersLast ? emptyBatchOf(batch) : undefined
    let newHorizonMs: number | undefined
    if (tombstones > 0) {
      newHorizonMs = horizonMs ?? this.nowMs + this.config.deleteRetentionMs
      this.nextDeleteHorizonMs = Math.min(this.nextDeleteHorizonMs, newHorizonMs)
    }
    if (retained.length === spans.length && newHorizonMs === horizonMs) return original
    return rebuildBatch(batch, data, retained, newHorizonMs)
  }

  private shouldRetain(
    data: Buffer,
    span: RecordSpan,
    baseOffset: Offset,
    horizonMs: number | undefined,
    maps: CleanerMaps,
  ): boolean {
    if (span.keyLength < 0) return false
    const offset = offsetAfter(baseOffset, span.offsetDelta)
    const latest = maps.offsets.get(keyString(data, span))
    if (latest !== undefined && latest > offset) return false
    if (span.isTombstone && horizonMs !== undefined && this.nowMs >= horizonMs) return false
    return true
  }
}

function batchBaseOffset(batch: BatchView): Offset {
  return readInt64(batch.buf, batch.at) as Offset
}

function keyString(data: Buffer, span: RecordSpan): string {
  return data.toString('latin1', span.keyStart, span.keyStart + span.keyLength)
}

function appendedBatch(batch: Buffer): AppendedBatch {
  const baseOffset = readInt64(batch, 0) as Offset
  return {
    sizeInBytes: batch.length,
    baseOffset,
    lastOffset: offsetAfter(baseOffset, batch.readInt32BE(LAST_OFFSET_DELTA_OFFSET)),
    maxTimestamp: readInt64(batch, MAX_TIMESTAMP_OFFSET),
  }
}

/**
 * Consecutive segments from the log start up to `endOffset`, grouped so that each group
 * fits one segment (Kafka's groupSegmentsBySize): bytes within segment.bytes, index
 * entries within the index size, offsets within 32 bits of the group's base.
 */
export function groupSegments(log: UnifiedLog, endOffset: Offset, config: LogConfig): LogSegment[][] {
  const segments = log.segmentList
  const groups: LogSegment[][] = []
  let group: LogSegment[] = []
  let bytes = 0
  let indexEntries = 0
  for (let i = 0; i < segments.length - 1; i++) {
    const segment = segments[i]
    const next = segments[i + 1].baseOffset
    if (next <= log.logStartOffset) continue
    if (next > endOffset) break
    const entries = Math.max(segment.offsetIndex.entries, segment.timeIndex.entries) + 1
    const fits =
      group.length > 0 &&
      bytes + segment.size <= config.segmentBytes &&
      indexEntries + entries < segment.offsetIndex.maxEntries - 1 &&
      next - 1 - group[0].baseOffset <= INT32_MAX
    if (group.length > 0 && !fits) {
      groups.push(group)
      group = []
      bytes = 0
      indexEntries = 0
    }
    group.push(segment)
    bytes += segment.size
    indexEntries += entries
  }
  if (group.length > 0) groups.push(group)
  return groups
}
