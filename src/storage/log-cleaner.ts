/**
 * Log compaction (Kafka's LogCleaner, Cleaner and LogCleanerManager) for logs whose
 * cleanup.policy includes `compact`.
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
import { maxOffset, minOffset, type Offset } from '../common/types.js'
import {
  ATTRIBUTES_OFFSET,
  BASE_TIMESTAMP_OFFSET,
  BATCH_LENGTH_OFFSET,
  BatchHeader,
  COMPRESSION_CODEC_MASK,
  CONTROL_FLAG_MASK,
  CompressionType,
  CRC_OFFSET,
  LAST_OFFSET_DELTA_OFFSET,
  LOG_OVERHEAD,
  MAX_TIMESTAMP_OFFSET,
  PRODUCER_ID_OFFSET,
  RECORD_BATCH_OVERHEAD,
  RECORDS_COUNT_OFFSET,
  TIMESTAMP_TYPE_MASK,
} from '../protocol/batch-header.js'
import { compress, decompress } from '../protocol/compression.js'
import { crc32c } from '../protocol/crc32c.js'
import { DELETE_HORIZON_FLAG_MASK } from '../protocol/record-batch.js'
import { readEndTxnMarker } from './control-batch.js'
import { isStorageError } from './errors.js'
import { hasCompactPolicy, type LogConfig } from './log-config.js'
import type { AppendedBatch, LogSegment } from './log-segment.js'
import { readInt64, writeInt64 } from './record-batch-check.js'
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

export function isCleanable(config: LogConfig): boolean {
  return hasCompactPolicy(config)
}

export interface LogCleanerOptions {
  readonly clock: Clock
  readonly logger: Logger
  /** The cleanable end offset of a log; default its high watermark. */
  readonly cleanableEndOffset?: (log: UnifiedLog) => Offset
  readonly offsetMapMaxEntries?: number
  /** producer.id.expiration.ms (see CleanOptions). */
  readonly producerIdExpirationMs?: number
  /** After a failed clean, a log waits this long before the next try. */
  readonly failureBackoffMs?: number
  /** True once the owner shuts down: a clean in progress stops between slices. */
  readonly aborted?: () => boolean
}

/**
 * Chooses and cleans logs (Kafka's LogCleanerManager with one cleaner thread): every pass
 * takes the compacted logs whose dirty ratio reaches min.cleanable.dirty.ratio (or whose
 * max.compaction.lag.ms or a tombstone horizon passed), filthiest first, one at a time.
 * Keeps each log's first dirty offset (the `cleaner-offset-checkpoint` the owner persists).
 */
export class LogCleaner {
  /** log dir path -> first dirty offset. */
  private readonly firstDirtyOffsets = new Map<string, Offset>()
  /** log dir path -> earliest tombstone delete horizon (ms) a clean left in it. */
  private readonly deleteHorizons = new Map<string, number>()
  private readonly failedUntilMs = new Map<string, number>()
  /** Passes run one after another: a log is never cleaned twice at once. */
  private passes: Promise<unknown> = Promise.resolve()

  constructor(private readonly options: LogCleanerOptions) {}

  firstDirtyOffset(log: UnifiedLog): Offset {
    const truncatedTo = log.takeTruncationSinceCleaning()
    const checkpointed = this.firstDirtyOffsets.get(log.dir)
    const recorded = checkpointed ?? log.logStartOffset
    const known = truncatedTo === undefined ? recorded : minOffset(recorded, truncatedTo)
    let offset = maxOffset(log.logStartOffset, known)
    if (offset > log.logEndOffset) {
      // Every truncation lowers the checkpoint (noteTruncation), so one above the log end
      // means batches below it were appended after a truncation nobody was told of (or
      // lost with a disk): they were never cleaned, and taking them as clean would keep
      // a key's older values past its tombstone. Kafka's LogCleanerManager cleans such a
      // log again from its start; so does this.
      this.options.logger.warn(
        {
          dir: log.dir,
          checkpoint: offset,
          logEndOffset: log.logEndOffset,
          logStartOffset: log.logStartOffset,
        },
        'cleaner checkpoint above the log end: cleaning the log again from its start',
      )
      offset = log.logStartOffset
    }
    this.firstDirtyOffsets.set(log.dir, offset)
    return offset
  }

  /**
   * A truncation of the log to `logEndOffset`: its checkpoint, if above, comes down now (the
   * caller persists it), not only at the log's next clean, which a restart would forget.
   * Returns whether it changed.
   */
  noteTruncation(logDir: string, logEndOffset: Offset): boolean {
    const known = this.firstDirtyOffsets.get(logDir)
    if (known === undefined || known <= logEndOffset) return false
    this.firstDirtyOffsets.set(logDir, logEndOffset)
    return true
  }

  /**
   * Seeds the checkpoint read at startup, once `log` is loaded. One above the recovered log
   * end (a crash took batches the checkpoint covered, or the files were altered) is dropped
   * with a warning: the log's first clean then starts from its start, as firstDirtyOffset's
   * rule does.
   */
  restoreFirstDirtyOffset(log: UnifiedLog, offset: Offset): void {
    if (offset > log.logEndOffset) {
      this.options.logger.warn(
        { dir: log.dir, checkpoint: offset, logEndOffset: log.logEndOffset },
        'cleaner checkpoint above the recovered log end: the log will be cleaned again from its start',
      )
      return
    }
    this.firstDirtyOffsets.set(log.dir, offset)
  }

  /** The checkpointed offsets, by log dir path. */
  get checkpoints(): ReadonlyMap<string, Offset> {
    return this.firstDirtyOffsets
  }

  forget(logDir: string): void {
    this.firstDirtyOffsets.delete(logDir)
    this.deleteHorizons.delete(logDir)
    this.failedUntilMs.delete(logDir)
  }

  /** One pass over `logs` (after any pass in progress); returns the logs cleaned. */
  cleanLogs(logs: readonly UnifiedLog[]): Promise<UnifiedLog[]> {
    const pass = this.passes.then(() => this.runPass(logs))
    this.passes = pass.catch(() => undefined)
    return pass
  }

  private async runPass(logs: readonly UnifiedLog[]): Promise<UnifiedLog[]> {
    const cleaned: UnifiedLog[] = []
    const tried = new Set<UnifiedLog>()
    for (let round = 0; round < logs.length; round++) {
      const log = this.filthiestLog(logs.filter((l) => !tried.has(l)))
      if (log === undefined) break
      tried.add(log)
      if (await this.cleanOne(log)) cleaned.push(log)
    }
    return cleaned
  }

  private filthiestLog(logs: readonly UnifiedLog[]): UnifiedLog | undefined {
    const nowMs = this.options.clock.nowMs()
    let best: { log: UnifiedLog; score: number } | undefined
    for (const log of logs) {
      if (log.isOffline || !isCleanable(log.config)) continue
      if ((this.failedUntilMs.get(log.dir) ?? -Infinity) > nowMs) continue
      const range = cleanableRange(log, this.firstDirtyOffset(log), nowMs, this.cleanableEnd(log))
      if (range === undefined) continue
      const horizonDue = (this.deleteHorizons.get(log.dir) ?? Infinity) <= nowMs
      const dirtyDue = range.dirtyBytes > 0 && range.dirtyRatio >= log.config.minCleanableDirtyRatio
      const due = dirtyDue || range.compactionLagDue || horizonDue
      if (!due) continue
      // Logs past max.compaction.lag.ms or a horizon go first, then by dirty ratio.
      const score = range.dirtyRatio + (range.compactionLagDue || horizonDue ? 1 : 0)
      if (best === undefined || score > best.score) best = { log, score }
    }
    return best?.log
  }

  private cleanableEnd(log: UnifiedLog): Offset {
    return uncleanableFrom(log, this.options.cleanableEndOffset?.(log) ?? log.highWatermark)
  }

  private async cleanOne(log: UnifiedLog): Promise<boolean> {
    const { clock, logger } = this.options
    try {
      const stats = await cleanLog(log, clock, logger, {
        firstDirtyOffset: this.firstDirtyOffset(log),
        cleanableEndOffset: this.cleanableEnd(log),
        force: true,
        offsetMapMaxEntries: this.options.offsetMapMaxEntries,
        producerIdExpirationMs: this.options.producerIdExpirationMs,
        aborted: this.options.aborted,
      })
      if (!stats.cleaned) return false
      this.firstDirtyOffsets.set(log.dir, stats.endOffset)
      if (Number.isFinite(stats.nextDeleteHorizonMs))
        this.deleteHorizons.set(log.dir, stats.nextDeleteHorizonMs)
      else this.deleteHorizons.delete(log.dir)
      return true
    } catch (err) {
      // Shutdown, the log closed, or retention deleted a segment under the clean: the
      // next pass starts over; nothing to report.
      if (
        err instanceof CleanAborted ||
        isStorageError(err, 'LOG_CLOSED') ||
        isStorageError(err, 'OFFSET_OUT_OF_RANGE')
      )
        return false
      // Kafka marks the partition uncleanable; here it waits and tries again later.
      logger.error({ err, log: log.dir }, 'log cleaning failed')
      this.failedUntilMs.set(log.dir, clock.nowMs() + (this.options.failureBackoffMs ?? 60_000))
      return false
    }
  }
}

/** Kafka's firstUncleanableDirtyOffset: never at or past an open transaction. */
function uncleanableFrom(log: UnifiedLog, cleanableEndOffset: Offset): Offset {
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
  private readonly ongoingAborted = new Map<bigint, { txn: AbortedTxn; lastObservedBatchOffset?: number }>()
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
      aborted.lastObservedBatchOffset = header.lastOffset
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
  readonly offsets: Map<string, number>
  /** producer id (decimal string) -> its last batch in the cleaned range. */
  readonly producerLastBatches: Map<string, { lastOffset: number; maxTimestamp: number }>
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

/** One batch found in a segment window. */
interface BatchView {
  readonly buf: Buffer
  readonly at: number
  readonly size: number
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

/** One record of a decoded records section, as byte positions. */
interface RecordSpan {
  /** Position of the record's length varint. */
  readonly start: number
  readonly end: number
  /** Position right after the timestampDelta varlong (offsetDelta onwards is copied as is). */
  readonly afterTimestamp: number
  readonly timestampDelta: number
  readonly offsetDelta: number
  readonly keyStart: number
  /** -1 for a null key. */
  readonly keyLength: number
  readonly isTombstone: boolean
  readonly attributes: number
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
    const offsets = new Map<string, number>()
    const producerLastBatches = new Map<string, { lastOffset: number; maxTimestamp: number }>()
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
        const lastOffset = batchBaseOffset(batch) + batch.buf.readInt32BE(batch.at + LAST_OFFSET_DELTA_OFFSET)
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
          offsets.set(keyString(data, span), baseOffset + span.offsetDelta)
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
    const lastOffset = baseOffset + buf.readInt32BE(at + LAST_OFFSET_DELTA_OFFSET)
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
    const offset = baseOffset + span.offsetDelta
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
    lastOffset: (baseOffset + batch.readInt32BE(LAST_OFFSET_DELTA_OFFSET)) as Offset,
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

// ---- record framing (the cleaner's own, to copy retained records byte for byte) ----

function readVarint(buf: Buffer, at: number): [number, number] {
  let raw = 0
  for (let shift = 0, i = at; shift <= 28; shift += 7, i++) {
    assert(i < buf.length, 'varint runs past the records')
    const b = buf[i]
    raw = (raw | ((b & 0x7f) << shift)) >>> 0
    if ((b & 0x80) === 0) return [(raw >>> 1) ^ -(raw & 1), i + 1]
  }
  throw new Error('varint longer than 5 bytes')
}

function readVarlong(buf: Buffer, at: number): [number, number] {
  let raw = 0
  let scale = 1
  for (let i = at; i < at + 10; i++) {
    assert(i < buf.length, 'varlong runs past the records')
    const b = buf[i]
    raw += (b & 0x7f) * scale
    if ((b & 0x80) === 0) return [raw % 2 === 0 ? raw / 2 : -(raw + 1) / 2, i + 1]
    scale *= 128
  }
  throw new Error('varlong longer than 10 bytes')
}

function varlongBytes(value: number): number {
  let v = value >= 0 ? value * 2 : -value * 2 - 1
  let bytes = 1
  while (v >= 0x80) {
    v = Math.floor(v / 0x80)
    bytes++
  }
  return bytes
}

function writeVarlong(buf: Buffer, at: number, value: number): number {
  let v = value >= 0 ? value * 2 : -value * 2 - 1
  while (v >= 0x80) {
    buf[at++] = (v % 0x80) | 0x80
    v = Math.floor(v / 0x80)
  }
  buf[at++] = v
  return at
}

/** The `count` records of an uncompressed records section, as spans. Stored batches passed their CRC: bad framing is a bug or disk damage. */
export function walkRecords(data: Buffer, count: number): RecordSpan[] {
  const spans: RecordSpan[] = new Array(count)
  let pos = 0
  for (let i = 0; i < count; i++) {
    const start = pos
    const [length, bodyStart] = readVarint(data, pos)
    const end = bodyStart + length
    assert(length > 0 && end <= data.length, () => `record ${i} overruns its batch`)
    const [timestampDelta, afterTimestamp] = readVarlong(data, bodyStart + 1)
    const [offsetDelta, afterOffset] = readVarint(data, afterTimestamp)
    const [keyLength, keyStart] = readVarint(data, afterOffset)
    const afterKey = keyLength < 0 ? keyStart : keyStart + keyLength
    const [valueLength] = readVarint(data, afterKey)
    spans[i] = {
      start,
      end,
      afterTimestamp,
      timestampDelta,
      offsetDelta,
      keyStart,
      keyLength: keyLength < 0 ? -1 : keyLength,
      isTombstone: valueLength < 0,
      attributes: data[bodyStart],
    }
    pos = end
  }
  assert(pos === data.length, 'bytes left after the last record')
  return spans
}

function writeVarint(buf: Buffer, at: number, value: number): number {
  let v = ((value << 1) ^ (value >> 31)) >>> 0
  while (v >= 0x80) {
    buf[at++] = (v & 0x7f) | 0x80
    v >>>= 7
  }
  buf[at++] = v
  return at
}

function varintBytes(value: number): number {
  const v = ((value << 1) ^ (value >> 31)) >>> 0
  return v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5
}

/**
 * A batch holding only `retained` of `batch`'s records: same base offset, lastOffsetDelta,
 * codec, timestamp type, producer fields and leader epoch; recordsCount, maxTimestamp
 * (CreateTime), the delete horizon and the CRC recomputed. Records are copied as they
 * are unless the base timestamp moves (a delete horizon set or cleared).
 */
async function rebuildBatch(
  batch: BatchView,
  data: Buffer,
  retained: readonly RecordSpan[],
  horizonMs: number | undefined,
): Promise<Buffer> {
  const { buf, at } = batch
  const attributes = buf.readInt16BE(at + ATTRIBUTES_OFFSET)
  const oldBase = readInt64(buf, at + BASE_TIMESTAMP_OFFSET)
  const hadHorizon = (attributes & DELETE_HORIZON_FLAG_MASK) !== 0
  const firstTimestamp = oldBase + retained[0].timestampDelta
  const newBase = horizonMs ?? (hadHorizon ? firstTimestamp : oldBase)
  let total = 0
  let maxTimestamp = -1
  for (const span of retained) {
    const timestamp = oldBase + span.timestampDelta
    maxTimestamp = Math.max(maxTimestamp, timestamp)
    if (newBase === oldBase) {
      total += span.end - span.start
    } else {
      const body = span.end - span.afterTimestamp + 1 + varlongBytes(timestamp - newBase)
      total += varintBytes(body) + body
    }
  }
  const plain = Buffer.allocUnsafe(total)
  let pos = 0
  for (const span of retained) {
    if (newBase === oldBase) {
      pos += data.copy(plain, pos, span.start, span.end)
      continue
    }
    const delta = oldBase + span.timestampDelta - newBase
    const body = span.end - span.afterTimestamp + 1 + varlongBytes(delta)
    pos = writeVarint(plain, pos, body)
    plain[pos++] = span.attributes
    pos = writeVarlong(plain, pos, delta)
    pos += data.copy(plain, pos, span.afterTimestamp, span.end)
  }
  assert(pos === total, 'rebuilt records size mismatch')
  const codec = attributes & COMPRESSION_CODEC_MASK
  const section = codec === CompressionType.None ? plain : await compress(codec, plain)
  const out = Buffer.allocUnsafe(RECORD_BATCH_OVERHEAD + section.length)
  buf.copy(out, 0, at, at + RECORD_BATCH_OVERHEAD)
  section.copy(out, RECORD_BATCH_OVERHEAD)
  out.writeInt32BE(out.length - LOG_OVERHEAD, BATCH_LENGTH_OFFSET)
  const newAttributes =
    horizonMs === undefined ? attributes & ~DELETE_HORIZON_FLAG_MASK : attributes | DELETE_HORIZON_FLAG_MASK
  out.writeInt16BE(newAttributes, ATTRIBUTES_OFFSET)
  writeInt64(out, BASE_TIMESTAMP_OFFSET, newBase)
  if ((attributes & TIMESTAMP_TYPE_MASK) === 0) writeInt64(out, MAX_TIMESTAMP_OFFSET, maxTimestamp)
  out.writeInt32BE(retained.length, RECORDS_COUNT_OFFSET)
  out.writeUInt32BE(crc32c(out.subarray(ATTRIBUTES_OFFSET)), CRC_OFFSET)
  return out
}

/** The header of `batch` alone, counting no records (Kafka's empty batch keeping producer state). */
function emptyBatchOf(batch: BatchView): Buffer {
  const out = Buffer.allocUnsafe(RECORD_BATCH_OVERHEAD)
  batch.buf.copy(out, 0, batch.at, batch.at + RECORD_BATCH_OVERHEAD)
  out.writeInt32BE(RECORD_BATCH_OVERHEAD - LOG_OVERHEAD, BATCH_LENGTH_OFFSET)
  // No records section, so no codec either (Kafka's writeEmptyHeader).
  const attributes = out.readInt16BE(ATTRIBUTES_OFFSET)
  out.writeInt16BE(attributes & ~DELETE_HORIZON_FLAG_MASK & ~COMPRESSION_CODEC_MASK, ATTRIBUTES_OFFSET)
  out.writeInt32BE(0, RECORDS_COUNT_OFFSET)
  out.writeUInt32BE(crc32c(out.subarray(ATTRIBUTES_OFFSET)), CRC_OFFSET)
  return out
}
