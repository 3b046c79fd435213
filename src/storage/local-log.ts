/**
 * The segment list of one partition log (Kafka's LocalLog): appends to the active segment,
 * rolls, reads across segments, truncation, removal of the oldest segments, the cleaner's
 * file swap, the recovery point and the fsync of segments.
 *
 * It knows offsets only as positions in the segments (log end offset, recovery point);
 * the log start offset, high watermark, leader epochs, producer state and the order of
 * operations belong to UnifiedLog, which calls every mutation here from its queue.
 */
import { basename, dirname } from 'node:path'
import { assert } from '../common/assert.js'
import type { Clock } from '../common/clock.js'
import type { FileSystem } from '../common/file-system.js'
import type { Logger } from '../common/logger.js'
import { maxOffset, minOffset, nextOffset, type Offset } from '../common/types.js'
import type { LogConfig } from './log-config.js'
import { CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX, SWAP_FILE_SUFFIX } from './log-file-names.js'
import type { AppendedBatch, LogSegment, SegmentOptions } from './log-segment.js'
import { createSegment } from './log-segment-open.js'
import { NO_TIMESTAMP, type TimestampOffset } from './time-index.js'
import type { AbortedTxn } from './transaction-index.js'
import type { HookedLog, LogHooks } from './unified-log-options.js'

/** What a read across segments found: whole batches, slices of file reads, no copies. */
export interface LocalReadResult {
  records: Buffer[]
  sizeInBytes: number
  /** Base offset of the first batch returned (may precede the requested offset), else the requested offset. */
  firstOffset: Offset
  /** Offset after the last batch returned, else the requested offset. */
  nextOffset: Offset
}

/** The next append as shouldRoll sees it. */
export interface RollCandidate {
  readonly sizeInBytes: number
  readonly batchCount: number
  readonly lastOffset: Offset
  readonly maxTimestamp: number
}

export interface LoadedSegments {
  readonly segments: LogSegment[]
  readonly logEndOffset: Offset
  readonly recoveryPoint: Offset
}

export interface LocalLogOptions {
  /** The `<topic>-<partition>` directory. */
  readonly dir: string
  readonly config: LogConfig
  readonly fs: FileSystem
  readonly clock: Clock
  readonly logger: Logger
  /** The segments as the loader left them. */
  readonly loaded: LoadedSegments
  /** The directory was made by this open: its entry in the log dir is not on disk yet. */
  readonly createdNew?: boolean
  readonly hooks?: Pick<LogHooks, 'syncParentDir'>
}

export class LocalLog {
  private segments: LogSegment[]
  private logEndOffsetValue: Offset
  private recoveryPointValue: Offset
  private lastFlushMs: number
  private configValue: LogConfig
  /** Set for a new log until its first flush has fsynced its entry in the log dir. */
  private parentDirNeedsSync: boolean
  private readonly syncParentDir: ((log: HookedLog) => Promise<void>) | undefined

  readonly dir: string
  readonly fs: FileSystem
  private readonly clock: Clock
  /** The broker's: each message names the log (`name`). */
  private readonly logger: Logger

  constructor(options: LocalLogOptions) {
    const { clock, loaded } = options
    this.dir = options.dir
    this.fs = options.fs
    this.clock = clock
    this.logger = options.logger
    this.configValue = options.config
    this.segments = loaded.segments
    this.logEndOffsetValue = loaded.logEndOffset
    this.recoveryPointValue = loaded.recoveryPoint
    this.lastFlushMs = clock.nowMs()
    this.parentDirNeedsSync = options.createdNew === true
    this.syncParentDir = options.hooks?.syncParentDir
    this.checkInvariants()
  }
  /** `<topic>-<partition>`: what its log messages name it. */
  private get name(): string {
    return basename(this.dir)
  }

  // ---- state ----

  get config(): LogConfig {
    return this.configValue
  }
  /** Segment sizes apply from the next roll (as in Kafka). */
  updateConfig(config: LogConfig): void {
    this.configValue = config
  }
  /** Offset after the last batch whose write completed. */
  get logEndOffset(): Offset {
    return this.logEndOffsetValue
  }
  /** Everything below it is fsynced. */
  get recoveryPoint(): Offset {
    return this.recoveryPointValue
  }
  get unflushedMessages(): number {
    return this.logEndOffsetValue - this.recoveryPointValue
  }
  get lastFlushTimeMs(): number {
    return this.lastFlushMs
  }
  get numberOfSegments(): number {
    return this.segments.length
  }
  get segmentBaseOffsets(): Offset[] {
    return this.segments.map((s) => s.baseOffset)
  }
  /** The segments, oldest first (the list is replaced or spliced, never to be written by callers). */
  get segmentList(): readonly LogSegment[] {
    return this.segments
  }
  get firstSegment(): LogSegment {
    return this.segments[0]
  }
  get activeSegment(): LogSegment {
    return this.segments[this.segments.length - 1]
  }
  /** Bytes of all segments. */
  get size(): number {
    let total = 0
    for (const segment of this.segments) total += segment.size
    return total
  }

  /** Base offset of the segment after `segment`, or the log end offset for the active one. */
  nextBaseOffset(segment: LogSegment): Offset {
    const i = this.segments.indexOf(segment)
    return this.segments[i + 1]?.baseOffset ?? this.logEndOffsetValue
  }

  /** Segments from the one holding `offset` (or the first, when it precedes them). */
  segmentsFrom(offset: Offset): LogSegment[] {
    let lo = 0
    let hi = this.segments.length - 1
    let found = 0
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1
      if (this.segments[mid].baseOffset <= offset) {
        found = mid
        lo = mid + 1
      } else {
        hi = mid - 1
      }
    }
    return this.segments.slice(found)
  }

  // ---- append and roll ----

  /**
   * Kafka's shouldRoll for `next`, counting `pendingBytes` and `pendingBatches` not yet
   * written (the rest of the append group) as part of the active segment.
   */
  shouldRoll(pendingBytes: number, pendingBatches: number, next: RollCandidate): boolean {
    const segment = this.activeSegment
    const size = segment.size + pendingBytes
    if (size === 0) return false
    if (size > this.configValue.segmentBytes - next.sizeInBytes) return true
    const newIndexEntries = pendingBatches + next.batchCount
    if (segment.offsetIndex.entries + newIndexEntries > segment.offsetIndex.maxEntries) return true
    if (segment.timeIndex.entries + newIndexEntries > segment.timeIndex.maxEntries - 1) return true
    if (next.lastOffset - segment.baseOffset > 0x7fffffff) return true
    return this.timeWaitedForRoll(segment, next.maxTimestamp) > this.configValue.segmentMs
  }

  /** segment.ms counts from the first batch's timestamp when there is one, else from creation (Kafka). */
  private timeWaitedForRoll(segment: LogSegment, maxTimestampInMessages: number): number {
    const first = segment.rollingBasedTimestamp
    if (first !== undefined && first >= 0) return maxTimestampInMessages - first
    return this.clock.nowMs() - segment.createdMs
  }

  /** One writev of validated, offset-assigned batches to the active segment; the log then ends after `lastOffset`. */
  async append(
    buffers: readonly Buffer[],
    batches: readonly AppendedBatch[],
    lastOffset: Offset,
  ): Promise<void> {
    assert(batches.length > 0, 'an append writes at least one batch')
    assert(
      batches[0].baseOffset >= this.logEndOffsetValue && lastOffset >= batches[0].baseOffset,
      () => `append of ${batches[0].baseOffset}..${lastOffset} at log end ${this.logEndOffsetValue}`,
    )
    await this.activeSegment.append(buffers, batches, this.clock.nowMs())
    this.logEndOffsetValue = nextOffset(lastOffset)
    this.checkInvariants()
  }

  /**
   * Closes the active segment for writes and starts a new one at `newBaseOffset`, the log
   * end offset. False, with nothing changed, when the active segment is empty.
   */
  async roll(newBaseOffset: Offset): Promise<boolean> {
    const old = this.activeSegment
    assert(
      newBaseOffset === this.logEndOffsetValue,
      () => `roll at ${newBaseOffset}, log end ${this.logEndOffsetValue}`,
    )
    if (old.size === 0) return false
    assert(newBaseOffset > old.baseOffset, () => `roll to ${newBaseOffset} after segment ${old.baseOffset}`)
    await old.onBecomeInactiveSegment()
    this.segments.push(await this.createSegment(newBaseOffset))
    // The old segment and every one before it are fsynced (each at its own roll).
    this.recoveryPointValue = maxOffset(this.recoveryPointValue, newBaseOffset)
    this.checkInvariants()
    this.logger.debug({ log: this.name, baseOffset: newBaseOffset }, 'rolled new log segment')
    return true
  }

  /** A new empty segment at `baseOffset` with the current segment options (not added to the list). */
  createSegment(baseOffset: Offset, fileSuffix = ''): Promise<LogSegment> {
    return createSegment(
      this.fs,
      this.dir,
      baseOffset,
      segmentOptions(this.configValue),
      this.clock.nowMs(),
      fileSuffix,
    )
  }

  // ---- flush ----

  /** fsync of the segments below `offset` not yet flushed; the recovery point moves to `offset`. */
  async flush(offset: Offset): Promise<void> {
    if (offset <= this.recoveryPointValue) return
    assert(
      offset <= this.logEndOffsetValue,
      () => `flush to ${offset} past log end ${this.logEndOffsetValue}`,
    )
    const previousRecoveryPoint = this.recoveryPointValue
    let newSegmentFlushed = false
    for (const segment of this.segmentsFrom(previousRecoveryPoint)) {
      if (segment.baseOffset >= offset) break
      await segment.flush()
      newSegmentFlushed ||= segment.baseOffset >= previousRecoveryPoint
    }
    // A segment made since the last flush has its files' entries only in the page cache
    // until its directory is fsynced (as Kafka's LocalLog.flush does); a new log's own
    // directory entry likewise until the log dir is.
    if (newSegmentFlushed) await this.syncDirs()
    this.recoveryPointValue = offset
    this.lastFlushMs = this.clock.nowMs()
    this.checkInvariants()
  }

  private async syncDirs(): Promise<void> {
    await this.fs.syncDir(this.dir)
    if (!this.parentDirNeedsSync) return
    if (this.syncParentDir === undefined) await this.fs.syncDir(dirname(this.dir))
    else await this.syncParentDir(this)
    this.parentDirNeedsSync = false
  }

  /** Raises the recovery point to `offset` (the data below it is gone or known durable). */
  raiseRecoveryPoint(offset: Offset): void {
    this.recoveryPointValue = maxOffset(this.recoveryPointValue, offset)
    this.checkInvariants()
  }

  // ---- read ----

  /**
   * Whole batches from the one holding `startOffset`, up to `maxBytes` (at least one with
   * `minOneMessage`), none whose last offset is >= `maxOffset`. The caller checks the range.
   */
  async read(
    startOffset: Offset,
    maxOffset: Offset,
    maxBytes: number,
    minOneMessage: boolean,
    allowOffsetGaps = true,
  ): Promise<LocalReadResult> {
    const result: LocalReadResult = {
      records: [],
      sizeInBytes: 0,
      firstOffset: startOffset,
      nextOffset: startOffset,
    }
    const segments = this.segmentsFrom(startOffset)
    let offset = startOffset
    for (let i = 0; i < segments.length && result.sizeInBytes < maxBytes; i++) {
      const segment = segments[i]
      // Past the last segment: no bound (Infinity is not an offset, so this stays a number).
      const nextBase: number = segments[i + 1]?.baseOffset ?? Infinity
      const minOne = minOneMessage && result.sizeInBytes === 0
      const read = await segment.read(
        offset,
        maxOffset,
        maxBytes - result.sizeInBytes,
        minOne,
        allowOffsetGaps,
      )
      const indexWarning = segment.takeIndexWarning()
      if (indexWarning !== undefined) {
        this.logger.warn(
          { log: this.name, segment: segment.logPath, finding: indexWarning },
          'offset index points into a batch; reading the segment from its start until it is rebuilt',
        )
      }
      if (read === undefined) {
        offset = Math.max(offset, nextBase) as Offset
        continue
      }
      if (read.sizeInBytes === 0) break
      if (result.sizeInBytes === 0) result.firstOffset = read.firstOffset
      result.records.push(...read.records)
      result.sizeInBytes += read.sizeInBytes
      result.nextOffset = read.nextOffset
      offset = read.nextOffset
      // Stopped inside this segment: a limit was reached.
      if (offset < nextBase) break
    }
    return result
  }

  // ---- lookups ----

  /**
   * The first record at or after `startingOffset` with timestamp >= `timestampMs`, from the
   * first segment whose max timestamp is that late; undefined when no record is.
   */
  async offsetForTimestamp(
    timestampMs: number,
    startingOffset: Offset,
  ): Promise<TimestampOffset | undefined> {
    // A copy: the cleaner may splice the list while this awaits (a stale segment throws and the lookup retries).
    for (const segment of [...this.segments]) {
      await segment.ensureLoaded()
      if (segment.maxTimestampSoFar < timestampMs) continue
      const found = await segment.findOffsetByTimestamp(timestampMs, startingOffset)
      if (found !== undefined) return found
    }
    return undefined
  }

  /** The largest timestamp of the log and the offset of its record (from the segment that holds it). */
  async latestTimestamp(): Promise<TimestampOffset | undefined> {
    let best: LogSegment | undefined
    // A copy, as above: loading a lazily opened segment's indexes awaits.
    for (const segment of [...this.segments]) {
      await segment.ensureLoaded()
      if (segment.maxTimestampSoFar > (best?.maxTimestampSoFar ?? NO_TIMESTAMP)) best = segment
    }
    return best?.maxTimestampAndOffset()
  }

  // ---- transaction indexes ----

  /**
   * Kafka's LocalLog.collectAbortedTransactions: the aborted transactions overlapping
   * [startOffset, upperBoundOffset), from the `.txnindex` of the segment holding
   * `startOffset` and of later ones until an entry's LSO passes the bound.
   */
  collectAbortedTransactions(startOffset: Offset, upperBoundOffset: Offset): AbortedTxn[] {
    const found: AbortedTxn[] = []
    const segments = this.segments
    let first = 0
    for (let i = 0; i < segments.length; i++) if (segments[i].baseOffset <= startOffset) first = i
    for (let i = first; i < segments.length; i++) {
      const search = segments[i].txnIndex.collect(startOffset, upperBoundOffset)
      found.push(...search.abortedTransactions)
      if (search.isComplete) break
    }
    return found
  }

  /**
   * Makes sure the segment holding each marker indexes its aborted transaction (an index
   * write a crash lost). Entries already there, and markers below `logStartOffset` or past
   * the log end, are skipped.
   */
  async indexAbortedTransactions(entries: readonly AbortedTxn[], logStartOffset: Offset): Promise<void> {
    const segments = this.segments
    for (const entry of entries) {
      if (entry.lastOffset < logStartOffset || entry.lastOffset >= this.logEndOffset) continue
      let segment: LogSegment | undefined
      for (const s of segments) if (s.baseOffset <= entry.lastOffset) segment = s
      if (segment !== undefined) await segment.txnIndex.restore(entry)
    }
  }

  // ---- truncation and deletion ----

  /**
   * Removes every batch from the one holding `targetOffset` (the first segment must start
   * at or below it) and fsyncs the cut; returns the new log end offset, at most the target:
   * the end of the last batch kept, or `logStartOffset` when that is higher and at most the
   * target.
   */
  async truncateTo(targetOffset: Offset, logStartOffset: Offset): Promise<Offset> {
    assert(
      this.segments[0].baseOffset <= targetOffset && targetOffset < this.logEndOffsetValue,
      () => `truncate to ${targetOffset} outside [${this.segments[0].baseOffset}, ${this.logEndOffsetValue})`,
    )
    const removed = this.segments.filter((s) => s.baseOffset > targetOffset)
    this.segments = this.segments.filter((s) => s.baseOffset <= targetOffset)
    for (const segment of removed) await segment.deleteFiles()
    const active = this.activeSegment
    const cut = await active.truncateTo(targetOffset)
    // The cut must be durable before anything written after it (refetched batches, the
    // leader-epoch checkpoint, the high-watermark checkpoint): otherwise a power loss brings
    // the removed batches back under checkpoints that no longer describe them (found by the
    // deterministic simulation, seeds 5 and 91).
    await active.flush()
    // The log ends after its last kept batch, not at the target nor at the cut batch's base:
    // compaction can leave a gap below either, and a log end above its last batch would
    // leave offsets [end of that batch, log end) that no read can get past (a fetch there
    // finds nothing, its consumer lags forever) and that a reopen would not find either
    // (the loader ends the log after its last batch; cleaner model test, seed 376299867). Segments are contiguous (a roll starts at
    // the log end, the cleaner keeps each group's last offset), so an emptied active
    // segment's base offset is where the previous one ends.
    const keptEndOffset = await active.readNextOffset()
    const logEndOffset = maxOffset(keptEndOffset, minOffset(logStartOffset, targetOffset))
    assert(
      logEndOffset <= targetOffset && (cut.cutAtOffset === undefined || keptEndOffset <= cut.cutAtOffset),
      () => `truncation to ${targetOffset} ends the log at ${logEndOffset} (cut at ${cut.cutAtOffset})`,
    )
    await active.onBecomeActiveSegment()
    this.logger.info(
      { log: this.name, targetOffset, logEndOffset, truncatedBytes: cut.truncatedBytes },
      'truncated log',
    )
    this.logEndOffsetValue = logEndOffset
    this.recoveryPointValue = minOffset(this.recoveryPointValue, logEndOffset)
    this.checkInvariants()
    return logEndOffset
  }

  /**
   * A read found a damaged batch in segment `baseOffset`: the segment is validated from its
   * start as recovery does (LogSegment.recover), cut at its first invalid batch, and the
   * segments after it are deleted. For a follower, which then fetches the rest again.
   * Undefined when the segment is gone already (retention, an earlier truncation).
   */
  async truncateAtCorruption(
    baseOffset: Offset,
    allowOffsetGaps: boolean,
  ): Promise<{ logEndOffset: Offset; truncatedBytes: number; problem: string | undefined } | undefined> {
    const index = this.segments.findIndex((s) => s.baseOffset === baseOffset)
    if (index < 0) return undefined
    const segment = this.segments[index]
    const removed = this.segments.slice(index + 1)
    let truncatedBytes = 0
    for (const s of removed) truncatedBytes += s.size
    this.segments = this.segments.slice(0, index + 1)
    for (const s of removed) await s.deleteFiles()
    const result = await segment.recover(segment.baseOffset, true, undefined, allowOffsetGaps)
    // Durable before anything is fetched on top of it (as truncateTo).
    await segment.flush()
    await segment.onBecomeActiveSegment()
    const logEndOffset = result.nextOffset ?? segment.baseOffset
    this.logEndOffsetValue = logEndOffset
    this.recoveryPointValue = minOffset(this.recoveryPointValue, logEndOffset)
    this.checkInvariants()
    return { logEndOffset, truncatedBytes: truncatedBytes + result.truncatedBytes, problem: result.problem }
  }

  /** Deletes every segment and starts again with one empty segment at `newOffset`; returns how many went. */
  async truncateFullyAndStartAt(newOffset: Offset): Promise<number> {
    const removed = this.segments
    for (const segment of removed) await segment.deleteFiles()
    this.segments = [await this.createSegment(newOffset)]
    this.logEndOffsetValue = newOffset
    this.recoveryPointValue = newOffset
    this.checkInvariants()
    return removed.length
  }

  /**
   * The oldest inactive segments while `predicate` holds and they end at or below
   * `maxEndOffset` (the high watermark): the candidates of a retention pass, unchanged.
   */
  deletableSegments(maxEndOffset: Offset, predicate: (segment: LogSegment) => boolean): LogSegment[] {
    const deletable: LogSegment[] = []
    for (const segment of this.segments.slice(0, -1)) {
      if (this.nextBaseOffset(segment) > maxEndOffset || !predicate(segment)) break
      deletable.push(segment)
    }
    return deletable
  }

  /** Takes the `count` oldest segments out of the list (never the active one); their files stay until deleteSegmentFiles. */
  removeOldestSegments(count: number): LogSegment[] {
    assert(
      count >= 0 && count < this.segments.length,
      () => `cannot remove ${count} of ${this.segments.length} segments`,
    )
    const removed = this.segments.slice(0, count)
    this.segments = this.segments.slice(count)
    this.checkInvariants()
    return removed
  }

  /**
   * Loads lazily opened inactive segments, oldest first, while `predicate` holds of them:
   * what a retention pass by time will look at (largestTimestamp needs the time index), and
   * no further, as Kafka's LazyIndex.
   */
  async loadOldestWhile(predicate: (segment: LogSegment) => boolean): Promise<void> {
    for (const segment of this.segments.slice(0, -1)) {
      await segment.ensureLoaded()
      if (!predicate(segment)) return
    }
  }

  /** Deletes the files of segments already taken out of the list (retention). */
  async deleteSegmentFiles(removed: readonly LogSegment[]): Promise<void> {
    for (const segment of removed) {
      this.logger.info(
        { log: this.name, baseOffset: segment.baseOffset, sizeInBytes: segment.size },
        'deleting log segment (retention)',
      )
      await segment.deleteFiles()
    }
  }

  /**
   * Where `oldSegments` still are, consecutive and inactive, at the `sizes` the cleaner read
   * them at; undefined when they changed since (truncated, deleted by retention, grown into
   * the active segment).
   */
  indexOfUnchanged(oldSegments: readonly LogSegment[], sizes: readonly number[]): number | undefined {
    const segments = this.segments
    const first = segments.indexOf(oldSegments[0])
    const unchanged =
      first >= 0 &&
      first + oldSegments.length < segments.length &&
      oldSegments.every((segment, i) => segments[first + i] === segment && segment.size === sizes[i])
    return unchanged ? first : undefined
  }

  /**
   * The cleaner's swap (Kafka's replaceSegments) of `cleaned` for `oldSegments`, the
   * consecutive inactive segments from index `first` it was built from, crash-safely:
   * 1. `.cleaned` -> `.swap` (from here recovery completes the swap: see log-loader);
   * 2. the old segments' files -> `.deleted`; 3. `.swap` -> final names; each step's
   * renames fsynced with the directory; 4. the old files are unlinked, their open handles
   * kept until reads in flight finish (later reads retry on the new segment).
   */
  async replaceSegments(
    first: number,
    oldSegments: readonly LogSegment[],
    cleaned: LogSegment,
  ): Promise<void> {
    assert(
      first >= 0 &&
        first + oldSegments.length < this.segments.length &&
        oldSegments.every((segment, i) => this.segments[first + i] === segment),
      'replaced segments are consecutive inactive segments of the log',
    )
    await cleaned.changeFileSuffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
    await this.fs.syncDir(this.dir)
    for (const segment of oldSegments) await segment.changeFileSuffixes('', DELETED_FILE_SUFFIX)
    await this.fs.syncDir(this.dir)
    await cleaned.changeFileSuffixes(SWAP_FILE_SUFFIX, '')
    await this.fs.syncDir(this.dir)
    this.segments.splice(first, oldSegments.length, cleaned)
    for (const segment of oldSegments) await segment.deleteReplacedFiles()
    this.checkInvariants()
  }

  // ---- lifecycle ----

  /** Clean close of every segment (the active one trims its indexes); flush first. */
  async close(): Promise<void> {
    for (const segment of this.segments.slice(0, -1)) await segment.closeHandlers()
    await this.activeSegment.close()
  }

  /** Closes file handles without flushing or trimming. */
  async closeHandlers(): Promise<void> {
    for (const segment of this.segments) await segment.closeHandlers()
  }

  /** Removes the partition directory (after close). */
  deleteDir(): Promise<void> {
    return this.fs.rmdir(this.dir)
  }

  /** The segment list's own invariants; UnifiedLog adds the log start and high watermark. */
  checkInvariants(): void {
    const leo = this.logEndOffsetValue
    assert(
      this.recoveryPointValue <= leo,
      () => `recoveryPoint ${this.recoveryPointValue} > logEndOffset ${leo}`,
    )
    assert(this.segments.length > 0, 'a log has at least one segment')
    for (let i = 1; i < this.segments.length; i++) {
      assert(this.segments[i].baseOffset > this.segments[i - 1].baseOffset, 'segment base offsets increase')
    }
    assert(this.activeSegment.baseOffset <= leo, () => `active segment starts after logEndOffset ${leo}`)
  }
}

export function segmentOptions(config: LogConfig): SegmentOptions {
  return { indexIntervalBytes: config.indexIntervalBytes, maxIndexBytes: config.segmentIndexBytes }
}
