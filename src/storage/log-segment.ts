/**
 * One segment of a partition log: `<baseOffset>.log` with the record batches as received
 * (base offsets rewritten), its sparse `.index`, its `.timeindex` and, once a transaction
 * aborts in it, its `.txnindex` (Kafka's LogSegment).
 *
 * The segment knows byte positions and batch framing; offsets and their rules belong to
 * UnifiedLog. `size` counts bytes whose write completed, so a reader never looks past
 * data still in flight.
 */
import { join } from 'node:path'
import { assert } from '../common/assert.js'
import type { FileHandle, FileSystem } from '../common/file-system.js'
import { readBufferPool } from '../common/read-buffer-pool.js'
import { maxOffset, type Offset } from '../common/types.js'
import { SegmentReplacedError, StorageError } from './errors.js'
import {
  filenamePrefixFromOffset,
  INDEX_FILE_SUFFIX,
  logFilePath,
  TIME_INDEX_FILE_SUFFIX,
} from './log-file-names.js'
import type { OffsetIndex } from './offset-index.js'
import {
  BATCH_OFFSETS_HEADER_BYTES,
  type BatchProblem,
  type BatchSummary,
  checkBatch,
  peekBatch,
} from './record-batch-check.js'
import {
  MIN_BATCH_BYTES,
  recordWithTimestamp,
  SCAN_WINDOW_BYTES,
  type SegmentBytes,
  scanBatches,
  searchForTimestamp,
  takeBatches,
} from './segment-batches.js'
import { CorruptionFinding, type OffsetWalk, ReadWindow } from './segment-read-window.js'
import { NO_TIMESTAMP, type TimeIndex, type TimestampOffset } from './time-index.js'
import { type TransactionIndex, TXN_INDEX_FILE_SUFFIX } from './transaction-index.js'

/** Largest batch framing recovery believes; a length field beyond it marks corruption. */
const MAX_BATCH_BYTES_ON_DISK = 0x7fffffff
/** From this read-ahead on, translateOffset's first read covers only the index interval (see there). */
export const PROBE_READ_AHEAD_MIN_BYTES = 64 * 1024

export interface SegmentOptions {
  readonly indexIntervalBytes: number
  readonly maxIndexBytes: number
}

/** What one append wrote, batch by batch; batches are already validated and offset-assigned. */
export interface AppendedBatch {
  readonly sizeInBytes: number
  readonly baseOffset: Offset
  readonly lastOffset: Offset
  readonly maxTimestamp: number
}

export interface SegmentRead {
  /** Whole batches, in order; more than one buffer only when the range needed several reads. */
  readonly records: Buffer[]
  readonly sizeInBytes: number
  readonly firstOffset: Offset
  readonly nextOffset: Offset
}

export interface RecoveryResult {
  readonly validBytes: number
  readonly truncatedBytes: number
  /** Offset after the last valid batch, undefined when the segment holds none. */
  readonly nextOffset: Offset | undefined
  readonly problem: BatchProblem | 'bad-offsets' | undefined
}

/** What LogSegment's constructor gets once log-segment-open.ts opened (or did not open) the files. */
export interface SegmentParts {
  readonly fs: FileSystem
  readonly dir: string
  readonly baseOffset: Offset
  readonly options: SegmentOptions
  /** The open `.log` file; undefined for a segment opened lazily (opened on first use). */
  readonly log: FileHandle | undefined
  /** Bytes of the `.log` already written (its size when opened). */
  readonly sizeInBytes: number
  readonly offsetIndex: OffsetIndex
  readonly timeIndex: TimeIndex
  readonly txnIndex: TransactionIndex
  readonly createdMs: number
  readonly fileSuffix?: string
  /** The .log's mtime (default createdMs). */
  readonly lastModifiedMs?: number
  /** The last time-index entry of indexes loaded sound. */
  readonly maxTimestamp?: { readonly timestamp: number; readonly offset: Offset }
  /** Set for a segment opened lazily: its indexes load on first use, told here if rebuilt. */
  readonly onIndexRebuild?: (problem: string) => void
}

export class LogSegment implements SegmentBytes {
  /** Bytes of the .log whose write has completed. */
  size: number
  private maxTimestampValue = NO_TIMESTAMP
  offsetOfMaxTimestampSoFar: Offset
  /** Max timestamp of the segment's first batch: segment.ms counts from it (Kafka). */
  rollingBasedTimestamp: number | undefined
  lastModifiedMs: number
  private bytesSinceLastIndexEntry = 0
  private pendingReads = 0
  private deleted = false
  /** Replaced by a cleaned segment: a read that finds it gone retries on the log's new segments. */
  private replaced = false
  private handleClosed = false
  /** '' for a live segment; CLEANED/SWAP/DELETED_FILE_SUFFIX while the cleaner swaps segments. */
  private fileSuffix = ''
  /** Bumped when bytes already counted in `size` change (truncation, recovery). */
  private layoutVersion = 0
  private changedSinceOpen = false // written or cut by this process: a clean close fsyncs it
  /** A read found the offset index pointing into a batch: lookups start at byte 0 until a rebuild. */
  private indexDistrusted = false
  /**
   * Batches from this byte to `size` were appended by this process to the active segment and
   * are served without checking their CRC again (their append did; the check was a third of a
   * large fetch's broker time; Kafka checks nothing it serves). Infinity once the segment rolls.
   */
  checkedBelow: number
  /** What made a read stop trusting the offset index, until the log has logged it. */
  private indexWarning: string | undefined

  private readonly fs: FileSystem
  readonly dir: string
  readonly baseOffset: Offset
  private readonly options: SegmentOptions
  /** The `.log`'s handle once opened (at open, or at the first read of a lazily opened segment). */
  private logHandle: FileHandle | undefined
  private logOpening: Promise<FileHandle> | undefined
  private readonly offsetIndexValue: OffsetIndex
  private readonly timeIndexValue: TimeIndex
  /**
   * False for a segment opened lazily (openLazily) until its first use loads the indexes:
   * a cleanly shut down log's inactive segments cost a restart one stat each (Kafka's
   * LazyIndex; Kafka also opens each .log at load, tidelog not even that).
   */
  private indexesLoaded = true
  private indexLoading: Promise<void> | undefined
  /** Told why a lazily opened segment's index was rebuilt at its first use (the loader logs it). */
  private onIndexRebuild: ((problem: string) => void) | undefined
  readonly txnIndex: TransactionIndex
  readonly createdMs: number

  /** Built by log-segment-open.ts (createSegment, openSegment, openSegmentLazily). */
  constructor(parts: SegmentParts) {
    this.fs = parts.fs
    this.dir = parts.dir
    this.baseOffset = parts.baseOffset
    this.options = parts.options
    this.logHandle = parts.log
    this.offsetIndexValue = parts.offsetIndex
    this.timeIndexValue = parts.timeIndex
    this.txnIndex = parts.txnIndex
    this.createdMs = parts.createdMs
    this.size = parts.sizeInBytes
    this.checkedBelow = parts.sizeInBytes
    this.offsetOfMaxTimestampSoFar = parts.maxTimestamp?.offset ?? parts.baseOffset
    this.maxTimestampValue = parts.maxTimestamp?.timestamp ?? NO_TIMESTAMP
    this.lastModifiedMs = parts.lastModifiedMs ?? parts.createdMs
    this.fileSuffix = parts.fileSuffix ?? ''
    this.onIndexRebuild = parts.onIndexRebuild
    this.indexesLoaded = parts.onIndexRebuild === undefined
  }

  /** For the batch walks of segment-batches.ts (SegmentBytes). */
  get indexIntervalBytes(): number {
    return this.options.indexIntervalBytes
  }

  get logPath(): string {
    return logFilePath(this.dir, this.baseOffset, this.fileSuffix)
  }

  get offsetIndex(): OffsetIndex {
    this.requireLoaded()
    return this.offsetIndexValue
  }
  get timeIndex(): TimeIndex {
    this.requireLoaded()
    return this.timeIndexValue
  }
  get maxTimestampSoFar(): number {
    this.requireLoaded()
    return this.maxTimestampValue
  }
  /** Whether the indexes are in memory (false until the first use of a lazily opened segment). */
  get isLoaded(): boolean {
    return this.indexesLoaded
  }

  /** A lazily opened segment's indexes must be loaded (ensureLoaded) before they are read. */
  private requireLoaded(): void {
    if (this.indexesLoaded) return
    this.throwIfGone()
    assert(false, () => `segment ${this.logPath} used before its indexes were loaded`)
  }

  private throwIfGone(): void {
    if (this.replaced) throw new SegmentReplacedError(this.baseOffset)
    if (this.deleted)
      throw new StorageError('OFFSET_OUT_OF_RANGE', `segment ${this.logPath} was deleted`, {
        retriable: true,
      })
  }

  /**
   * Loads the indexes of a lazily opened segment, once; concurrent callers share the load.
   * An index that fails its checks is rebuilt from the `.log` without cutting it: the
   * segment is below the recovery point (fsynced, trusted), and a damaged batch is found
   * and handled by the read that meets it, as in any other segment.
   */
  ensureLoaded(): Promise<void> {
    if (this.indexesLoaded) return Promise.resolve()
    this.throwIfGone()
    this.indexLoading ??= this.loadIndexes().finally(() => {
      this.indexLoading = undefined
    })
    return this.indexLoading
  }

  private async loadIndexes(): Promise<void> {
    const offsetProblem = await this.offsetIndexValue.load(this.size)
    const timeProblem = await this.timeIndexValue.load(this.size)
    this.indexesLoaded = true
    const problem = indexProblemOf(offsetProblem, timeProblem)
    if (problem === undefined) {
      const last = this.timeIndexValue.lastEntry
      this.maxTimestampValue = last.timestamp
      this.offsetOfMaxTimestampSoFar = last.offset
      return
    }
    this.onIndexRebuild?.(problem)
    await this.rebuildIndexes()
  }

  /** Rebuilds both indexes from the batches without cutting the file, and writes them trimmed. */
  private async rebuildIndexes(): Promise<void> {
    await this.recover(this.baseOffset, false, undefined, true, false)
    await this.offsetIndexValue.trimToValidSize()
    await this.timeIndexValue.trimToValidSize()
    await Promise.all([this.offsetIndexValue.sync(), this.timeIndexValue.sync()])
  }

  /** The `.log`'s handle, opened on first use for a lazily opened segment. */
  private logFile(): Promise<FileHandle> {
    if (this.logHandle !== undefined) return Promise.resolve(this.logHandle)
    if (this.handleClosed)
      return Promise.reject(
        new StorageError('KAFKA_STORAGE_ERROR', `segment ${this.logPath} is closed`, { retriable: false }),
      )
    this.logOpening ??= this.fs.open(this.logPath, 'r+').then((handle) => {
      this.logHandle = handle
      this.logOpening = undefined
      return handle
    })
    return this.logOpening
  }

  /** Renames the segment's files from suffix `from` to `to` (the cleaner's swap steps). */
  async changeFileSuffixes(from: string, to: string): Promise<void> {
    assert(this.fileSuffix === from, () => `${this.logPath} does not end in '${from}'`)
    const prefix = join(this.dir, filenamePrefixFromOffset(this.baseOffset))
    await this.fs.rename(
      logFilePath(this.dir, this.baseOffset, from),
      logFilePath(this.dir, this.baseOffset, to),
    )
    this.fileSuffix = to
    await this.offsetIndexValue.renameTo(prefix + INDEX_FILE_SUFFIX + to)
    await this.timeIndexValue.renameTo(prefix + TIME_INDEX_FILE_SUFFIX + to)
    await this.txnIndex.renameTo(prefix + TXN_INDEX_FILE_SUFFIX + to)
  }

  // ---- append ----

  /**
   * Writes the buffers with one writev at the end of the segment, then indexes the batches
   * (Kafka's LogSegment.append: an offset-index entry when more than index.interval.bytes
   * were written since the last one, keyed by the batch's last offset).
   */
  async append(buffers: readonly Buffer[], batches: readonly AppendedBatch[], nowMs: number): Promise<void> {
    assert(batches.length > 0, 'append of no batches')
    let totalBytes = 0
    for (const buf of buffers) totalBytes += buf.length
    this.changedSinceOpen = true
    const written = await (await this.logFile()).writev(buffers, this.size)
    if (written !== totalBytes) {
      throw new StorageError(
        'KAFKA_STORAGE_ERROR',
        `short write to ${this.logPath}: ${written} of ${totalBytes}`,
        {
          retriable: true,
        },
      )
    }
    if (this.size === 0) this.rollingBasedTimestamp = batches[0].maxTimestamp
    for (const batch of batches) this.indexBatch(batch, this.size)
    this.lastModifiedMs = nowMs
  }

  private indexBatch(batch: AppendedBatch, position: number): void {
    assert(
      batch.lastOffset - this.baseOffset <= 0x7fffffff,
      () => `offset ${batch.lastOffset} overflows segment ${this.baseOffset}`,
    )
    if (batch.maxTimestamp > this.maxTimestampValue) {
      this.maxTimestampValue = batch.maxTimestamp
      this.offsetOfMaxTimestampSoFar = batch.lastOffset
    }
    if (this.bytesSinceLastIndexEntry > this.options.indexIntervalBytes) {
      this.offsetIndex.append(batch.lastOffset, position)
      this.timeIndex.maybeAppend(this.maxTimestampValue, this.offsetOfMaxTimestampSoFar)
      this.bytesSinceLastIndexEntry = 0
    }
    this.size = position + batch.sizeInBytes
    this.bytesSinceLastIndexEntry += batch.sizeInBytes
  }

  /** Whether the indexes can take another entry (a full index forces a roll, as in Kafka). */
  get indexesFull(): boolean {
    return this.offsetIndex.isFull || this.timeIndex.isFull
  }

  // ---- read ----

  /** One read of up to `length` bytes at `position`; fewer near the end of the data. */
  async readRange(position: number, length: number, limit = this.size): Promise<Buffer> {
    this.throwIfGone()
    const available = Math.max(0, Math.min(length, limit - position))
    // A large read reuses a buffer a fetch response already wrote to its socket (see
    // read-buffer-pool.ts); one never given back is garbage collected as any other.
    const buf = readBufferPool.acquire(available)
    this.pendingReads++
    try {
      const log = await this.logFile()
      let filled = 0
      while (filled < available) {
        const n = await log.read(buf, filled, available - filled, position + filled)
        if (n === 0) break
        filled += n
      }
      return buf.subarray(0, filled)
    } finally {
      this.pendingReads--
      if (this.deleted && this.pendingReads === 0) await this.closeLogHandle()
    }
  }

  /** Makes `window` hold [position, position+length) if the data has it; reads `preferred` bytes ahead. */
  async fill(
    window: ReadWindow,
    position: number,
    length: number,
    preferred: number,
    limit = this.size,
  ): Promise<boolean> {
    if (window.covers(position, length)) return true
    window.buf = await this.readRange(position, Math.max(length, preferred), limit)
    window.start = position
    return window.covers(position, length)
  }

  /**
   * Position and header of the first batch whose last offset is >= `offset` (Kafka's
   * translateOffset). The window then holds that batch's header and, from the second read
   * on, `readAheadBytes` past it.
   *
   * A large read-ahead (a fetch's, PROBE_READ_AHEAD_MIN_BYTES or more) first reads only what
   * lies before the next index entry: the index is keyed by a batch's last offset, so the
   * lookup for the first offset of batch B lands on the batch before it, and with large
   * batches (librdkafka's are up to 1 MB) reading ahead from there read that whole batch for
   * nothing and then needed a second read for B (a replica fetch of 1 MiB per partition read
   * about 2 MB to send 1). Batches smaller than the index interval are all in the probe, so
   * the target is found in it; a larger one is skipped by its header.
   */
  async translateOffset(offset: Offset, walk: OffsetWalk = {}): Promise<BatchSummary | undefined> {
    await this.ensureLoaded()
    const {
      window = new ReadWindow(),
      readAheadBytes = 0,
      corruption,
      fromStart = this.indexDistrusted,
      allowOffsetGaps = true,
    } = walk
    const entry = fromStart ? { offset: this.baseOffset, position: 0 } : this.offsetIndex.lookup(offset)
    let position = entry.position
    const preferred = this.options.indexIntervalBytes + readAheadBytes + BATCH_OFFSETS_HEADER_BYTES
    let next =
      readAheadBytes >= PROBE_READ_AHEAD_MIN_BYTES
        ? this.options.indexIntervalBytes + BATCH_OFFSETS_HEADER_BYTES
        : preferred
    let previousLastOffset = -1
    for (;;) {
      if (!(await this.fill(window, position, BATCH_OFFSETS_HEADER_BYTES, next))) {
        // Ending anywhere but at the end of the data means a length field walked us astray.
        if (position !== this.size)
          corruption?.found(position, `batch header cut at byte ${position} of ${this.size}`)
        return undefined
      }
      next = preferred
      const batch = peekBatch(window.buf, position - window.start, window.buf.length)
      if (batch === undefined || batch.sizeInBytes < MIN_BATCH_BYTES) {
        corruption?.found(position, `batch length ${batch?.sizeInBytes}`)
        return undefined
      }
      // The batch an index entry points at holds the entry's offset (Kafka keys entries by
      // the batch's last offset); each next batch starts right after the one before, or
      // later in a compacted log. The base offset is outside the CRC: this is its check.
      const misplaced =
        previousLastOffset < 0
          ? entry.position > 0 && batch.baseOffset > entry.offset
          : allowOffsetGaps
            ? batch.baseOffset <= previousLastOffset
            : batch.baseOffset !== previousLastOffset + 1
      if (misplaced || batch.lastOffset < batch.baseOffset) {
        corruption?.found(
          position,
          `offsets [${batch.baseOffset}, ${batch.lastOffset}] after ${previousLastOffset}`,
        )
        return undefined
      }
      if (batch.lastOffset >= offset) return { ...batch, position }
      previousLastOffset = batch.lastOffset
      position += batch.sizeInBytes
    }
  }

  /**
   * Whole batches from the one holding `startOffset`, stopping before the first batch
   * whose last offset is >= `maxOffset` and before exceeding `maxBytes` (unless
   * `minOneBatch` and nothing was taken yet). Usually one read syscall. Undefined when
   * no batch at or after `startOffset` is in this segment; empty when a limit stopped it.
   */
  async read(
    startOffset: Offset,
    maxOffset: Offset,
    maxBytes: number,
    minOneBatch: boolean,
    allowOffsetGaps = true,
  ): Promise<SegmentRead | undefined> {
    const { first, window, corruption } = await this.findStartBatch(startOffset, maxBytes, allowOffsetGaps)
    corruption.throwIfFound()
    if (first === undefined) return undefined
    const nothing = {
      records: [],
      sizeInBytes: 0,
      firstOffset: first.baseOffset,
      nextOffset: first.baseOffset,
    }
    if (first.lastOffset >= maxOffset) return nothing
    const limits = { maxOffset, maxBytes, minOneBatch, allowOffsetGaps }
    const taken = await takeBatches(this, first, window, corruption, limits)
    if (taken.sizeInBytes === 0) return nothing
    return { ...taken, firstOffset: first.baseOffset }
  }

  /**
   * The batch holding `startOffset` (undefined: none in this segment), the window read
   * around it, and the damage found on the way, not thrown yet.
   */
  private async findStartBatch(
    startOffset: Offset,
    maxBytes: number,
    allowOffsetGaps: boolean,
  ): Promise<{ first: BatchSummary | undefined; window: ReadWindow; corruption: CorruptionFinding }> {
    let window = new ReadWindow()
    let corruption = new CorruptionFinding(this, this.layoutVersion)
    let first = await this.translateOffset(startOffset, {
      window,
      readAheadBytes: maxBytes,
      corruption,
      allowOffsetGaps,
    })
    if (corruption.isFound && !this.indexDistrusted) {
      // The index entry may be what is wrong (a bit flipped in a position that still looks
      // sane): walk from the segment's start, and if that finds the batch, read without the
      // index from now on. Its rebuild waits for the next recovery of this segment.
      window = new ReadWindow()
      const retry = new CorruptionFinding(this, this.layoutVersion)
      first = await this.translateOffset(startOffset, {
        window,
        readAheadBytes: maxBytes,
        corruption: retry,
        fromStart: true,
        allowOffsetGaps,
      })
      if (!retry.isFound) {
        this.indexDistrusted = true
        this.indexWarning = corruption.describe()
      }
      corruption = retry
    }
    // Without compaction's gaps the batch found holds the offset asked for; one starting
    // past it had its base offset changed on disk, and serving it would skip records.
    if (first !== undefined && !allowOffsetGaps && first.baseOffset > startOffset)
      corruption.found(
        first.position,
        `batch at offsets from ${first.baseOffset} found for offset ${startOffset}`,
      )
    return { first, window, corruption }
  }

  /** Offset after the last batch, scanning from the last index entry (Kafka's readNextOffset). */
  async readNextOffset(): Promise<Offset> {
    await this.ensureLoaded()
    let position = this.offsetIndex.lookup(this.offsetIndex.lastOffset).position
    let nextOffset = this.baseOffset
    const window = new ReadWindow()
    while (await this.fill(window, position, BATCH_OFFSETS_HEADER_BYTES, this.size - position)) {
      const batch = peekBatch(window.buf, position - window.start, window.buf.length)
      if (batch === undefined || batch.sizeInBytes <= 0) break
      nextOffset = (batch.lastOffset + 1) as Offset
      position += batch.sizeInBytes
    }
    return nextOffset
  }

  /**
   * The first record with timestamp >= `timestampMs` at or after `startingOffset` (Kafka's
   * findOffsetByTimestamp): the indexes give where to start, segment-batches.ts searches.
   */
  async findOffsetByTimestamp(
    timestampMs: number,
    startingOffset: Offset,
  ): Promise<TimestampOffset | undefined> {
    await this.ensureLoaded()
    const fromTimeIndex = this.timeIndex.lookup(timestampMs)
    const position = this.offsetIndex.lookup(maxOffset(fromTimeIndex.offset, startingOffset)).position
    return searchForTimestamp(this, position, timestampMs, startingOffset)
  }

  /** The record holding the segment's max timestamp (batch-level when the batch is compressed). */
  async maxTimestampAndOffset(): Promise<TimestampOffset | undefined> {
    await this.ensureLoaded()
    if (this.maxTimestampValue === NO_TIMESTAMP) return undefined
    const target = this.offsetOfMaxTimestampSoFar
    const position = this.offsetIndex.lookup(target).position
    return recordWithTimestamp(this, position, target, this.maxTimestampValue)
  }

  /** Reloads maxTimestampSoFar from the last time-index entry and the batches after it. */
  async loadLargestTimestamp(): Promise<void> {
    await this.ensureLoaded()
    const last = this.timeIndex.lastEntry
    this.maxTimestampValue = last.timestamp
    this.offsetOfMaxTimestampSoFar = last.offset
    const position = this.offsetIndex.lookup(last.offset).position
    await scanBatches(this, position, (_buf, _at, batch) => {
      if (batch.maxTimestamp > this.maxTimestampValue) {
        this.maxTimestampValue = batch.maxTimestamp
        this.offsetOfMaxTimestampSoFar = batch.lastOffset
      }
      return undefined
    })
    if (this.size > 0 && this.rollingBasedTimestamp === undefined) {
      const head = await this.readRange(0, 61)
      this.rollingBasedTimestamp = peekBatch(head, 0, head.length)?.maxTimestamp
    }
  }

  // ---- recovery ----

  /**
   * Validates every batch from the start (framing, magic, CRC, offsets consecutive from
   * `expectedFirstOffset`), rebuilds both indexes from the valid ones, and truncates the
   * file at the first invalid batch (Kafka's LogSegment.recover). `onBatch` sees each
   * valid batch (leader-epoch cache rebuild). `allowOffsetGaps`: a compacted log's batches
   * may skip offsets (the base offset is outside the CRC, so elsewhere a gap is damage).
   */
  async recover(
    expectedFirstOffset: Offset,
    preallocate: boolean,
    onBatch: (batch: BatchSummary) => void = () => {},
    allowOffsetGaps = false,
    truncate = true,
  ): Promise<RecoveryResult> {
    await this.ensureLoaded()
    this.layoutVersion++
    this.indexDistrusted = false
    await this.offsetIndex.reset(preallocate)
    await this.timeIndex.reset(preallocate)
    this.maxTimestampValue = NO_TIMESTAMP
    this.offsetOfMaxTimestampSoFar = this.baseOffset
    this.bytesSinceLastIndexEntry = 0
    this.rollingBasedTimestamp = undefined
    const fileSize = this.size
    this.size = 0
    const window = new ReadWindow()
    let position = 0
    let nextOffset: Offset | undefined
    let problem: RecoveryResult['problem']
    while (position < fileSize) {
      const check = await this.checkBatchAt(window, position, fileSize)
      if (!check.ok) {
        problem = check.problem
        break
      }
      const batch = check.batch
      // Offsets only increase; only compaction leaves gaps between batches.
      const expected = nextOffset ?? expectedFirstOffset
      const offsetsOk = allowOffsetGaps
        ? batch.baseOffset >= expected && batch.lastOffset - this.baseOffset <= 0x7fffffff
        : batch.baseOffset === expected
      if (!offsetsOk) {
        problem = 'bad-offsets'
        break
      }
      if (position === 0) this.rollingBasedTimestamp = batch.maxTimestamp
      this.indexBatch(batch, position)
      onBatch({ ...batch, position })
      nextOffset = (batch.lastOffset + 1) as Offset
      position += batch.sizeInBytes
    }
    if (!truncate) {
      // Indexes rebuilt for the valid prefix; the bytes after it stay for reads to find.
      this.size = fileSize
      this.offsetIndex.checkInvariants(this.size)
      this.timeIndex.checkInvariants(this.size)
      return { validBytes: position, truncatedBytes: 0, nextOffset, problem }
    }
    const truncatedBytes = fileSize - position
    this.changedSinceOpen ||= truncatedBytes > 0
    if (truncatedBytes > 0) await (await this.logFile()).truncate(position)
    this.size = position
    this.offsetIndex.checkInvariants(this.size)
    this.timeIndex.checkInvariants(this.size)
    // Entries for markers the scan did not find are gone with them; missing ones are
    // written again by the producer state as it replays the log.
    await this.txnIndex.truncateTo(nextOffset ?? this.baseOffset)
    return { validBytes: position, truncatedBytes, nextOffset, problem }
  }

  private async checkBatchAt(window: ReadWindow, position: number, fileSize: number) {
    const preferred = Math.min(SCAN_WINDOW_BYTES, fileSize - position)
    if (!(await this.fill(window, position, BATCH_OFFSETS_HEADER_BYTES, preferred, fileSize))) {
      return { ok: false, problem: 'truncated' } as const
    }
    const header = peekBatch(window.buf, position - window.start, window.buf.length)
    const length = header === undefined ? 0 : header.sizeInBytes
    if (length > 0 && position + length <= fileSize)
      await this.fill(window, position, length, preferred, fileSize)
    return checkBatch(window.buf, position - window.start, window.buf.length, MAX_BATCH_BYTES_ON_DISK)
  }

  // ---- truncation ----

  /**
   * Drops every batch from the one holding `offset` on, and their index entries. Returns
   * the bytes removed and the offset where the segment now ends (the cut batch's base).
   */
  async truncateTo(offset: Offset): Promise<{ truncatedBytes: number; cutAtOffset: Offset | undefined }> {
    await this.ensureLoaded()
    const cut = await this.translateOffset(offset)
    if (cut === undefined) return { truncatedBytes: 0, cutAtOffset: undefined }
    this.layoutVersion++
    await this.offsetIndex.truncateTo(cut.baseOffset, true)
    await this.timeIndex.truncateTo(cut.baseOffset, true)
    await this.txnIndex.truncateTo(cut.baseOffset)
    const truncatedBytes = this.size - cut.position
    this.changedSinceOpen = true
    await (await this.logFile()).truncate(cut.position)
    this.size = cut.position
    // The cut segment is the active one again: what is appended from the cut on is checked.
    this.checkedBelow = Math.min(this.checkedBelow, this.size)
    this.bytesSinceLastIndexEntry = 0
    if (this.size === 0) this.rollingBasedTimestamp = undefined
    await this.loadLargestTimestamp()
    return { truncatedBytes, cutAtOffset: cut.baseOffset }
  }

  // ---- durability and lifecycle ----

  /** fsync of the .log. The active segment's indexes are rebuilt after a crash, so they wait for roll/close. */
  async flush(): Promise<void> {
    // A lazily opened segment never opened was not written by this process.
    if (this.logHandle !== undefined || this.logOpening !== undefined) await (await this.logFile()).sync()
    await this.txnIndex.sync()
  }

  /** The segment stops being written: final time-index entry, indexes trimmed and fsynced (roll). */
  async onBecomeInactiveSegment(): Promise<void> {
    this.checkedBelow = Number.POSITIVE_INFINITY
    await this.ensureLoaded()
    const log = await this.logFile()
    this.timeIndex.maybeAppend(this.maxTimestampValue, this.offsetOfMaxTimestampSoFar, true)
    await this.offsetIndex.trimToValidSize()
    await this.timeIndex.trimToValidSize()
    await Promise.all([log.sync(), this.offsetIndex.sync(), this.timeIndex.sync(), this.txnIndex.sync()])
  }

  /**
   * Cuts index files longer than their entries, as a roll would have: an inactive segment
   * found so at load (a crash between a roll's index write and its trim).
   */
  async trimIndexes(): Promise<void> {
    await this.ensureLoaded()
    if (!this.offsetIndex.hasUnusedFileSpace && !this.timeIndex.hasUnusedFileSpace) return
    await this.offsetIndex.trimToValidSize()
    await this.timeIndex.trimToValidSize()
    await Promise.all([this.offsetIndex.sync(), this.timeIndex.sync()])
  }

  /** Preallocates the indexes again: the segment is the active one (after open or truncation). */
  async onBecomeActiveSegment(): Promise<void> {
    await this.ensureLoaded()
    await this.offsetIndex.preallocate()
    await this.timeIndex.preallocate()
  }

  /**
   * Clean close: everything on disk in Kafka's format, fsynced; a segment never written (no
   * index file made yet) has nothing to make durable (33,000 of them took 30 s to close).
   */
  async close(): Promise<void> {
    const untouched = !this.changedSinceOpen && this.size === 0 && this.offsetIndexValue.isFileDeferred
    if (!(untouched && this.timeIndexValue.isFileDeferred)) await this.onBecomeInactiveSegment()
    await this.closeHandlers()
  }

  /** Closes the files without flushing or trimming (a log directory failed, or a simulated crash). */
  async closeHandlers(): Promise<void> {
    await this.closeLogHandle()
    await this.offsetIndexValue.close()
    await this.timeIndexValue.close()
    await this.txnIndex.close()
  }

  private async closeLogHandle(): Promise<void> {
    if (this.handleClosed) return
    this.handleClosed = true
    const handle = this.logHandle ?? (await this.logOpening)
    this.logHandle = undefined
    await handle?.close()
  }

  /** Removes the files; reads in flight finish on the open handle, later ones get OFFSET_OUT_OF_RANGE. */
  async deleteFiles(): Promise<void> {
    this.deleted = true
    try {
      await this.offsetIndexValue.deleteFile()
      await this.timeIndexValue.deleteFile()
      await this.txnIndex.deleteFile()
      await this.fs.unlink(this.logPath)
    } finally {
      if (this.pendingReads === 0) await this.closeLogHandle()
    }
  }

  /**
   * A cleaned segment took this one's place: reads in flight finish on the open handle
   * (the file is only unlinked), later ones throw SegmentReplacedError and retry on the
   * log's current segments. The files must already carry DELETED_FILE_SUFFIX.
   */
  async deleteReplacedFiles(): Promise<void> {
    this.replaced = true
    await this.deleteFiles()
  }

  /** Once: what made a read stop trusting the offset index (the log logs it). */
  takeIndexWarning(): string | undefined {
    const warning = this.indexWarning
    this.indexWarning = undefined
    return warning
  }

  /** The file's bytes are as they were when `version` was read, and the file is still live. */
  isLayoutVersion(version: number): boolean {
    return this.layoutVersion === version && !this.deleted && !this.replaced
  }

  get isReplaced(): boolean {
    return this.replaced
  }

  /** Deleted (retention, truncation) or replaced by a cleaned segment. */
  get isGone(): boolean {
    return this.deleted || this.replaced
  }

  /** Largest timestamp for retention; the file's mtime when no batch has one (Kafka). */
  get largestTimestamp(): number {
    const maxTimestamp = this.maxTimestampSoFar
    return maxTimestamp >= 0 ? maxTimestamp : this.lastModifiedMs
  }
}

/** Why a segment's indexes cannot be trusted, from what each index's load found. */
export function indexProblemOf(
  offsetProblem: string | undefined,
  timeProblem: string | undefined,
): string | undefined {
  if (offsetProblem !== undefined) return `offset index ${offsetProblem}`
  return timeProblem === undefined ? undefined : `time index ${timeProblem}`
}
