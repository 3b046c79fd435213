/** UnifiedLog's options, and what its constructor gets once `open` loaded the segments. */
import type { Clock } from '../common/clock.js'
import type { FileSystem } from '../common/file-system.js'
import type { Logger } from '../common/logger.js'
import type { Offset } from '../common/types.js'
import type { StorageError } from './errors.js'
import type { LeaderEpochFileCache } from './leader-epoch-cache.js'
import type { LogConfig } from './log-config.js'
import type { LogSegment } from './log-segment.js'

/** The log a hook is called for (the UnifiedLog itself). */
export interface HookedLog {
  readonly dir: string
}

/**
 * What a log tells its owner. The log is passed, so one object can serve every log of an
 * owner (UnifiedLogOptions.hooks): four closures and their options object per log cost
 * ~380 bytes of heap.
 */
export interface LogHooks {
  /** Called once when a disk operation fails and the log goes offline (KAFKA_STORAGE_ERROR). */
  readonly onStorageError?: (err: StorageError, log: HookedLog) => void
  /** Called after each fsync of appended data with its duration (the log flush metric). */
  readonly onFlushed?: (durationMs: number) => void
  /**
   * Awaited inside every truncation with the new log end, before it completes: the owner
   * lowers the log cleaner's checkpoint durably (Kafka's maybeTruncateCheckpoint). Batches
   * appended later at offsets below a checkpoint left above the truncation would count as
   * already cleaned, and a key's older value there would outlive its tombstone.
   */
  readonly onTruncated?: (logEndOffset: Offset, log: HookedLog) => Promise<void>
  /**
   * Called after each queued operation (appends, roll, flush, truncation, retention) and
   * high watermark move: the offsets the owner checkpoints may have moved.
   */
  readonly onChanged?: () => void
  /**
   * Makes a new log's directory entry in its log dir durable, at the log's first flush. An
   * owner of many logs coalesces the calls into few fsyncs of the log dir (one costs about
   * 0.6 ms here, and a shutdown flushes every log at once); without it the log fsyncs its
   * parent directory itself.
   */
  readonly syncParentDir?: (log: HookedLog) => Promise<void>
}

export interface UnifiedLogOptions extends LogHooks {
  /** Hooks shared with other logs, instead of the ones above. */
  readonly hooks?: LogHooks
  /** The `<topic>-<partition>` directory; created if missing. */
  readonly dir: string
  readonly config?: LogConfig
  /** The disk: storage never picks one itself (Node's in src/runtime, or a simulated one). */
  readonly fs: FileSystem
  readonly clock?: Clock
  readonly logger?: Logger
  /** From recovery-point-offset-checkpoint; recovery rescans from the segment holding it. Default 0. */
  readonly recoveryPoint?: Offset
  /** From log-start-offset-checkpoint. Default 0 (the first segment's base offset wins if larger). */
  readonly logStartOffset?: Offset
  /** From replication-offset-checkpoint; clamped into [logStartOffset, logEndOffset]. */
  readonly highWatermark?: Offset
  /** True when the log directory had the clean-shutdown marker: no rescan. Default false. */
  readonly hadCleanShutdown?: boolean
  /**
   * The log was compacted once (it has a cleaner checkpoint) though its policy may no
   * longer say compact: recovery accepts offset gaps between batches. Default false.
   */
  readonly wasCompacted?: boolean
  /** Bytes of the last written batches kept in memory for reads at the log end (0: none). */
  readonly recentBatchesMaxBytes?: number
}

/** What UnifiedLog.open hands its constructor: the options resolved and the segments loaded. */
export interface LoadedLogParts {
  readonly dir: string
  readonly config: LogConfig
  readonly fs: FileSystem
  readonly clock: Clock
  readonly logger: Logger
  readonly leaderEpochCache: LeaderEpochFileCache
  readonly loaded: {
    segments: LogSegment[]
    logStartOffset: Offset
    logEndOffset: Offset
    recoveryPoint: Offset
  }
  readonly highWatermark: Offset
  readonly wasCompacted: boolean
  readonly recentBatchesMaxBytes: number
  readonly hooks: LogHooks
  /** The directory was made by this open (createNewLog), not loaded. */
  readonly createdNew: boolean
}
