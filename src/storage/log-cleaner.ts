/**
 * Log compaction for logs whose cleanup.policy includes `compact`: which log to clean and
 * when (Kafka's LogCleaner with LogCleanerManager), each log's first dirty offset (the
 * cleaner checkpoint), and back-off after failures. One clean of one log is cleaner.ts.
 */
import type { Clock } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import { maxOffset, minOffset, type Offset } from '../common/types.js'
import { CleanAborted, cleanableRange, cleanLog, loadSegmentIndexes, uncleanableFrom } from './cleaner.js'
import { isStorageError } from './errors.js'
import { hasCompactPolicy, type LogConfig } from './log-config.js'
import type { UnifiedLog } from './unified-log.js'

export {
  CleanAborted,
  type CleanableRange,
  type CleanOptions,
  type CleanStats,
  cleanableRange,
  cleanLog,
  DEFAULT_OFFSET_MAP_MAX_ENTRIES,
  groupSegments,
  READ_WINDOW_BYTES,
} from './cleaner.js'
export { walkRecords } from './cleaner-records.js'

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
    // The rounds walk the compacted logs only: most of a broker's logs are not compacted,
    // and an idle broker of 33,000 replicas copied all of them into a new array each round.
    const compacted = logs.filter((log) => !log.isOffline && isCleanable(log.config))
    // Choosing a log reads its segments' timestamps and index sizes.
    for (const log of compacted) await loadSegmentIndexes(log)
    for (let round = 0; round < compacted.length; round++) {
      const log = this.filthiestLog(compacted.filter((l) => !tried.has(l)))
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
