/**
 * All partition logs of a broker across its log.dirs (Kafka's LogManager): loading at
 * startup (recovery unless the directory was shut down cleanly), creation in the least
 * loaded directory, the broker-level checkpoint files, the clean-shutdown marker, and the
 * retention and checkpoint schedulers, driven by the injected Clock.
 *
 * Files per log dir, as Kafka writes them: `recovery-point-offset-checkpoint`,
 * `replication-offset-checkpoint` (high watermarks), `log-start-offset-checkpoint`
 * (version 0, count, `topic partition offset` lines), and `.kafka_cleanshutdown`.
 */
import { dirname, join } from 'node:path'
import { assert } from '../common/assert.js'
import { type Clock, systemClock, type TimerHandle } from '../common/clock.js'
import { forEachConcurrently } from '../common/concurrency.js'
import { exists, type FileLock, type FileSystem, lockDirectory } from '../common/file-system.js'
import { type Logger, silentLogger } from '../common/logger.js'
import { FIRST_OFFSET, type Offset } from '../common/types.js'
import { BoundedFileSystem } from './bounded-file-system.js'
import {
  CheckpointFile,
  CheckpointFormatError,
  topicPartitionOffsetFormat,
  topicPartitionOffsetLine,
} from './checkpoint-file.js'
import { CoalescedDirSync } from './coalesced-dir-sync.js'
import { isStorageError, StorageError, storageFailure } from './errors.js'
import { isCleanable, LogCleaner } from './log-cleaner.js'
import { DEFAULT_LOG_CONFIG, type LogConfig } from './log-config.js'
import { DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, futureDirPartition, moveLogDir } from './log-dir-move.js'
import { parseTopicPartition, type TopicPartition, topicPartitionDirName, UnifiedLog } from './unified-log.js'
import type { LogHooks } from './unified-log-options.js'

export const RECOVERY_POINT_CHECKPOINT_FILE = 'recovery-point-offset-checkpoint'
export const HIGH_WATERMARK_CHECKPOINT_FILE = 'replication-offset-checkpoint'
export const LOG_START_OFFSET_CHECKPOINT_FILE = 'log-start-offset-checkpoint'
export const CLEAN_SHUTDOWN_FILE = '.kafka_cleanshutdown'
/** Each compacted log's first dirty offset (Kafka's LogCleaner checkpoint). */
export const CLEANER_OFFSET_CHECKPOINT_FILE = 'cleaner-offset-checkpoint'

export interface LogManagerOptions {
  /** log.dirs */
  readonly logDirs: readonly string[]
  readonly defaultConfig?: LogConfig
  /** The topic's configuration (defaults merged); undefined means defaultConfig. */
  readonly topicConfig?: (topic: string) => LogConfig | undefined
  /** The disk of every log dir: storage never picks one itself (Node's is runtime/node-file-system.ts). */
  readonly fs: FileSystem
  readonly clock?: Clock
  readonly logger?: Logger
  /**
   * log.segment.open.files.max: descriptors the logs keep open at once (see
   * bounded-file-system.ts); undefined keeps every segment's files open.
   */
  readonly maxOpenFiles?: number
  /** log.retention.check.interval.ms */
  readonly retentionCheckIntervalMs?: number
  /** log.flush.offset.checkpoint.interval.ms */
  readonly recoveryPointCheckpointIntervalMs?: number
  /** log.flush.start.offset.checkpoint.interval.ms */
  readonly logStartOffsetCheckpointIntervalMs?: number
  /** replica.high.watermark.checkpoint.interval.ms */
  readonly highWatermarkCheckpointIntervalMs?: number
  /**
   * The log dirs' locks when the caller took them already (lockLogDirs), as the broker does
   * before anything else; without them open() takes them. The manager releases them at
   * shutdown, or when open() fails.
   */
  readonly dirLocks?: readonly FileLock[]
  /** Called when a log directory goes offline after a disk failure. */
  readonly onLogDirFailure?: (dir: string, err: StorageError) => void
  /**
   * log.cleaner.enable: compacts logs whose cleanup.policy has compact. Default false here
   * (the broker passes Kafka's default, true), so embedders that do not ask (the
   * simulator) keep their schedule of timers and disk operations.
   */
  readonly cleanerEnable?: boolean
  /** log.cleaner.backoff.ms (default 15000): pause between cleaner passes. */
  readonly cleanerBackoffMs?: number
  /** Offset map size of the cleaner in keys (from log.cleaner.dedupe.buffer.size). */
  readonly cleanerOffsetMapMaxEntries?: number
  /** producer.id.expiration.ms: the cleaner keeps a producer's last batch until then. */
  readonly producerIdExpirationMs?: number
  /** The offset below which a log may be cleaned; default its high watermark (set by replication). */
  readonly cleanableEndOffset?: (log: UnifiedLog) => Offset
}

/**
 * Locks every log dir (Kafka's LogManager.lockLogDirs), all or none: a DirectoryLockedError
 * when another broker, in this process or another, holds one. Taken before anything in the
 * dirs is read, so a refused start has read nothing.
 */
export async function lockLogDirs(fs: FileSystem, logDirs: readonly string[]): Promise<FileLock[]> {
  // At once: on real files each lock is a process spawn.
  const results = await Promise.allSettled(logDirs.map((dir) => lockDirectory(fs, dir)))
  const locks = results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []))
  const refused = results.find((result) => result.status === 'rejected')
  if (refused === undefined) return locks
  await Promise.allSettled(locks.map((lock) => lock.release()))
  throw refused.reason
}

/**
 * An error of the disk or the OS (EMFILE, ENOSPC, EIO, ... from the FileSystem, or a
 * KAFKA_STORAGE_ERROR raised from one), not a bug: it takes its log dir offline.
 */
function isDiskError(err: unknown): boolean {
  if (isStorageError(err, 'KAFKA_STORAGE_ERROR')) return true
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && DISK_ERROR_CODES.has(code)
}

const DISK_ERROR_CODES = new Set([
  'EMFILE',
  'ENFILE',
  'ENOSPC',
  'EDQUOT',
  'EIO',
  'EROFS',
  'EACCES',
  'EPERM',
  'EBADF',
  'ENOENT',
  'ENOTDIR',
  'ENXIO',
])

/**
 * Logs loaded at startup and closed at shutdown at once (Kafka's num.recovery.threads.per.data.dir
 * threads, which here are concurrent chains of awaits on the libuv pool). One at a time, a
 * broker with 10,000 partitions took 21 s to start; all at once, every log's files compete
 * for the bounded descriptors and the memory of 10,000 loads.
 */
const LOG_IO_CONCURRENCY = 16
/** How long a checkpoint may go uncompared with its logs when no change was counted. */
const CHECKPOINT_RECHECK_INTERVAL_MS = 60_000

interface HostedLog {
  readonly log: UnifiedLog
  readonly logDir: string
  readonly tp: TopicPartition
}

/**
 * A checkpoint file as last written, kept to tell whether it is still current without one
 * object per partition: each hosted log's offset in the file, in the hosted logs' order
 * (NOT_IN_FILE for a log the file leaves out), valid while `logsVersion` is the manager's.
 * As entry objects (issue 38), the 33,000-line checkpoints of an idle broker were its
 * largest allocation in the minute after a creation and held 33,000 objects each since.
 */
interface WrittenCheckpoint {
  readonly logsVersion: number
  readonly offsets: Float64Array
}
const NOT_IN_FILE = Number.NEGATIVE_INFINITY

interface DirCheckpoints {
  readonly recoveryPoints: Map<string, Offset>
  readonly logStartOffsets: Map<string, Offset>
  readonly highWatermarks: Map<string, Offset>
  readonly cleanerOffsets: Map<string, Offset>
}

function key(tp: TopicPartition): string {
  return topicPartitionDirName(tp)
}

export class LogManager {
  private readonly logs = new Map<string, HostedLog>()
  /**
   * Logs hosted per log dir, kept with `logs` (hostLog, unhostLog): choosing the dir of a new
   * log by walking every hosted one made creating N partitions cost O(N^2) (33,000 replica
   * logs created on one broker walked 5.4e8 entries).
   */
  private readonly logCountByDir = new Map<string, number>()
  private readonly offlineDirs = new Set<string>()
  private readonly timers = new Map<string, TimerHandle>()
  private readonly running = new Set<Promise<unknown>>()
  private checkpointChain: Promise<void> = Promise.resolve()
  /** What each checkpoint file holds since this manager last wrote it, by path. */
  private readonly lastCheckpoints = new Map<string, WrittenCheckpoint>()
  /** Counts changes to the hosted logs' set or order (hostLog, unhostLog): see WrittenCheckpoint. */
  private logsVersion = 0
  /** Counts what may move a checkpointed offset: a log's operations, logs added or removed. */
  private changes = 0
  /** `changes` when each checkpoint file was last found current, and when (monotonic ms). */
  private readonly checkedAt = new Map<string, { changes: number; atMs: number }>()
  private started = false
  private shutDown = false
  private readonly cleaner: LogCleaner
  /** Each log dir's `.lock`, held from before it is read until shutdown. */
  private dirLocks: FileLock[] = []
  /** Set by the metrics layer: told the duration of every log flush (fsync). */
  onLogFlushed: ((durationMs: number) => void) | null = null

  private constructor(
    private readonly options: LogManagerOptions,
    private readonly fs: FileSystem,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {
    this.cleaner = new LogCleaner({
      clock,
      logger: logger.child({ component: 'log-cleaner' }),
      cleanableEndOffset: options.cleanableEndOffset,
      offsetMapMaxEntries: options.cleanerOffsetMapMaxEntries,
      producerIdExpirationMs: options.producerIdExpirationMs,
      aborted: () => this.shutDown,
    })
  }

  /**
   * Locks every log dir unless given their locks (lockLogDirs), then loads every partition
   * log found under them. Call startup() to start the schedulers.
   */
  static async open(options: LogManagerOptions): Promise<LogManager> {
    assert(options.logDirs.length > 0, 'log.dirs is empty')
    const manager = new LogManager(
      options,
      options.maxOpenFiles === undefined
        ? options.fs
        : new BoundedFileSystem(options.fs, options.maxOpenFiles),
      options.clock ?? systemClock,
      options.logger ?? silentLogger,
    )
    try {
      manager.dirLocks = [...(options.dirLocks ?? (await lockLogDirs(options.fs, options.logDirs)))]
      for (const dir of options.logDirs) await manager.loadLogDir(dir)
      await manager.resolveFutureDirs()
      if (manager.fs instanceof BoundedFileSystem) await manager.fs.closeIdleDescriptors()
    } catch (err) {
      await manager.releaseDirLocks()
      throw err
    }
    return manager
  }

  get logDirs(): readonly string[] {
    return this.options.logDirs
  }
  get offlineLogDirs(): readonly string[] {
    return [...this.offlineDirs]
  }

  getLog(tp: TopicPartition): UnifiedLog | undefined {
    return this.logs.get(key(tp))?.log
  }

  allLogs(): UnifiedLog[] {
    return [...this.logs.values()].map((h) => h.log)
  }

  /** The log cleaner's first dirty offsets (what cleaner-offset-checkpoint holds), by log dir path. */
  get cleanerCheckpoints(): ReadonlyMap<string, Offset> {
    return this.cleaner.checkpoints
  }

  /** The log of `tp`, created empty in the log dir holding the fewest logs when missing. */
  async getOrCreateLog(tp: TopicPartition, config?: LogConfig): Promise<UnifiedLog> {
    const existing = this.logs.get(key(tp))
    if (existing !== undefined) return existing.log
    const logDir = this.pickLogDir()
    if (logDir === undefined)
      throw new StorageError('KAFKA_STORAGE_ERROR', `every log dir is offline: cannot create ${key(tp)}`)
    let log: UnifiedLog
    try {
      log = await this.openLog(logDir, tp, config ?? this.configFor(tp.topic), {
        hadCleanShutdown: true,
        recoveryPoint: FIRST_OFFSET,
        logStartOffset: FIRST_OFFSET,
        highWatermark: FIRST_OFFSET,
      })
    } catch (err) {
      if (!isDiskError(err)) throw err
      // EMFILE, ENOSPC, EIO: Kafka takes the directory offline on any IOException creating a log.
      const failure = isStorageError(err)
        ? err
        : storageFailure(`creating the log of ${key(tp)} in ${logDir}`, err)
      this.onLogDirFailure(logDir, failure)
      throw failure
    }
    // Another caller may have created it while this one awaited.
    const raced = this.logs.get(key(tp))
    if (raced !== undefined) {
      await log.close()
      return raced.log
    }
    this.hostLog(key(tp), { log, logDir, tp })
    this.changes++
    return log
  }

  /** The log dir holding the log of `tp`, undefined when there is none. */
  logDirOf(tp: TopicPartition): string | undefined {
    return this.logs.get(key(tp))?.logDir
  }

  isLogDirOnline(logDir: string): boolean {
    return this.options.logDirs.includes(logDir) && !this.offlineDirs.has(logDir)
  }

  /**
   * Moves the log of `tp` into log dir `destLogDir` (AlterReplicaLogDirs): closes it (the
   * caller stopped its replica), moves its directory (log-dir-move.ts) and opens it there
   * with the offsets it had. A failure before the source was given up reopens it where it
   * was; a disk error takes the directory it came from offline.
   */
  async moveLog(tp: TopicPartition, destLogDir: string, config: LogConfig): Promise<UnifiedLog> {
    const hosted = this.logs.get(key(tp))
    assert(hosted !== undefined, () => `no log of ${key(tp)} to move`)
    assert(this.isLogDirOnline(destLogDir), () => `log dir ${destLogDir} is not online`)
    if (hosted.logDir === destLogDir) return hosted.log
    const { log } = hosted
    this.cleaner.forget(log.dir)
    await log.close()
    const start = {
      hadCleanShutdown: true,
      recoveryPoint: log.logEndOffset,
      logStartOffset: log.logStartOffset,
      highWatermark: log.highWatermark,
    }
    let logDir = destLogDir
    try {
      await moveLogDir(this.fs, tp, hosted.logDir, destLogDir)
    } catch (err) {
      if (!isDiskError(err)) throw err
      logDir = hosted.logDir
      this.logger.warn(
        { err, tp: key(tp), destLogDir },
        'could not move a log between log dirs; reopening it',
      )
    }
    const moved = await this.openLog(logDir, tp, config, start)
    this.hostLog(key(tp), { log: moved, logDir, tp })
    this.changes++
    // The checkpoints of both dirs name it where it is now, before a crash could need them.
    await this.checkpointRecoveryPoints()
    await this.checkpointHighWatermarks()
    await this.checkpointLogStartOffsets()
    if (logDir !== destLogDir)
      throw new StorageError('KAFKA_STORAGE_ERROR', `could not move ${key(tp)} to ${destLogDir}`)
    return moved
  }

  /** Closes the log and removes its directory (the replica was deleted or reassigned away). */
  async deleteLog(tp: TopicPartition): Promise<void> {
    const hosted = this.logs.get(key(tp))
    if (hosted === undefined) return
    this.unhostLog(key(tp))
    this.changes++
    this.cleaner.forget(hosted.log.dir)
    await hosted.log.delete()
  }

  /** New configuration for a topic's logs (AlterConfigs). */
  updateTopicConfig(topic: string, config: LogConfig): void {
    for (const hosted of this.logs.values()) if (hosted.tp.topic === topic) hosted.log.updateConfig(config)
  }

  /** Starts retention and checkpoint schedulers. */
  startup(): void {
    assert(!this.started, 'log manager already started')
    this.started = true
    const o = this.options
    this.schedule('retention', o.retentionCheckIntervalMs ?? 300_000, () => this.cleanupLogs())
    this.schedule('recovery-point-checkpoint', o.recoveryPointCheckpointIntervalMs ?? 60_000, () =>
      this.checkpointRecoveryPoints(),
    )
    this.schedule('log-start-offset-checkpoint', o.logStartOffsetCheckpointIntervalMs ?? 60_000, () =>
      this.checkpointLogStartOffsets(),
    )
    this.schedule('high-watermark-checkpoint', o.highWatermarkCheckpointIntervalMs ?? 5_000, () =>
      this.checkpointHighWatermarks(),
    )
    if (o.cleanerEnable ?? false)
      // log.cleaner.backoff.ms=0 means no pause: the next pass right after a timer tick.
      this.schedule('log-cleaner', Math.max(1, o.cleanerBackoffMs ?? 15_000), () => this.cleanLogs())
  }

  /**
   * One log cleaner pass (compacted logs only): cleans those due, then checkpoints their
   * first dirty offsets. Returns how many logs were cleaned.
   */
  async cleanLogs(): Promise<number> {
    // One walk, keeping only the compacted logs (the cleaner's only ones), not three arrays
    // of every hosted log each log.cleaner.backoff.ms.
    const logs: UnifiedLog[] = []
    for (const hosted of this.logs.values())
      if (!this.offlineDirs.has(hosted.logDir) && isCleanable(hosted.log.config)) logs.push(hosted.log)
    const cleaned = await this.cleaner.cleanLogs(logs)
    if (cleaned.length > 0 && !this.shutDown) await this.checkpointCleanerOffsets()
    return cleaned.length
  }

  checkpointCleanerOffsets(): Promise<void> {
    if (this.cleaner.checkpoints.size === 0) return Promise.resolve()
    return this.writeCheckpoints(CLEANER_OFFSET_CHECKPOINT_FILE, (log) =>
      this.cleaner.checkpoints.get(log.dir),
    )
  }

  /** One retention pass over every log; returns the number of segments deleted. */
  async cleanupLogs(): Promise<number> {
    let deleted = 0
    for (const hosted of this.logs.values()) {
      if (hosted.log.isOffline) continue
      deleted += await hosted.log.deleteOldSegments()
    }
    return deleted
  }

  checkpointRecoveryPoints(): Promise<void> {
    return this.writeCheckpoints(RECOVERY_POINT_CHECKPOINT_FILE, (log) => log.recoveryPoint, true)
  }
  checkpointHighWatermarks(): Promise<void> {
    return this.writeCheckpoints(HIGH_WATERMARK_CHECKPOINT_FILE, (log) => log.highWatermark, true)
  }
  checkpointLogStartOffsets(): Promise<void> {
    return this.writeCheckpoints(LOG_START_OFFSET_CHECKPOINT_FILE, (log) => log.logStartOffset, true)
  }

  /**
   * Clean shutdown: stops the schedulers, closes every log (fsync, trimmed indexes), writes
   * the checkpoints, then the clean-shutdown marker of each log dir that is still online.
   */
  async shutdown(): Promise<void> {
    if (this.shutDown) return
    this.shutDown = true
    for (const timer of this.timers.values()) timer.cancel()
    this.timers.clear()
    try {
      await Promise.allSettled([...this.running])
      await forEachConcurrently(this.allLogs(), LOG_IO_CONCURRENCY, (log) =>
        log.isOffline ? Promise.resolve() : log.close(),
      )
      await this.checkpointRecoveryPoints()
      await this.checkpointHighWatermarks()
      await this.checkpointLogStartOffsets()
      await this.checkpointCleanerOffsets()
      for (const dir of this.options.logDirs) {
        if (this.offlineDirs.has(dir)) continue
        const marker = await this.fs.open(join(dir, CLEAN_SHUTDOWN_FILE), 'w+')
        await marker.sync()
        await marker.close()
        await this.fs.syncDir(dir)
      }
    } finally {
      // Last: the next owner of a dir must find it as this one left it.
      await this.releaseDirLocks()
    }
  }

  /** Releases every log dir's lock; one that fails to release is logged (the process's exit frees it). */
  private async releaseDirLocks(): Promise<void> {
    const locks = this.dirLocks
    this.dirLocks = []
    const results = await Promise.allSettled(locks.map((lock) => lock.release()))
    results.forEach((result, i) => {
      if (result.status === 'rejected')
        this.logger.warn({ lock: locks[i].path, err: result.reason }, 'releasing a log dir lock failed')
    })
  }

  // ---- loading ----

  /**
   * Whether every log dir was shut down cleanly (its marker found at load): after an
   * unclean shutdown unflushed records may be gone, so this broker may not be elected from
   * the ELR (KIP-966) before it has caught up.
   */
  get hadCleanShutdown(): boolean {
    return this.uncleanLogDirs.size === 0
  }

  private readonly uncleanLogDirs = new Set<string>()
  /** `-future` directories found while loading: moves a crash interrupted (log-dir-move.ts). */
  private readonly futureDirs: { logDir: string; name: string }[] = []
  /** Every log dir's checkpoints as loaded: a moved log's offsets are in its old dir's. */
  private readonly loadedCheckpoints: DirCheckpoints[] = []

  /**
   * Finishes or undoes the moves a crash interrupted: a future directory whose partition no
   * log dir holds is the whole copy (its source was already marked deleted), so it becomes
   * the partition's directory; otherwise the source is intact and the copy goes.
   */
  private async resolveFutureDirs(): Promise<void> {
    for (const { logDir, name } of this.futureDirs.splice(0)) {
      const tp = futureDirPartition(name)
      if (tp === undefined || this.logs.has(key(tp))) {
        this.logger.info({ dir: join(logDir, name) }, 'removing the copy of an unfinished log dir move')
        await this.fs.rmdir(join(logDir, name))
        continue
      }
      await this.fs.rename(join(logDir, name), join(logDir, topicPartitionDirName(tp)))
      await this.fs.syncDir(logDir)
      this.logger.info({ tp: key(tp), logDir }, 'finished a log dir move a crash interrupted')
      // The source's dir still names it in its checkpoints (rewritten only after a move).
      const offset = (of: (c: DirCheckpoints) => Map<string, Offset>): Offset =>
        this.loadedCheckpoints.map((c) => of(c).get(key(tp))).find((o) => o !== undefined) ?? FIRST_OFFSET
      const log = await this.openLog(logDir, tp, this.configFor(tp.topic), {
        hadCleanShutdown: false,
        recoveryPoint: offset((c) => c.recoveryPoints),
        logStartOffset: offset((c) => c.logStartOffsets),
        highWatermark: offset((c) => c.highWatermarks),
      })
      this.hostLog(key(tp), { log, logDir, tp })
      this.changes++
    }
    this.loadedCheckpoints.length = 0
  }

  private async loadLogDir(dir: string): Promise<void> {
    await this.fs.mkdir(dir)
    const markerPath = join(dir, CLEAN_SHUTDOWN_FILE)
    const hadCleanShutdown = await exists(this.fs, markerPath)
    if (!hadCleanShutdown) this.uncleanLogDirs.add(dir)
    const checkpoints = await this.readCheckpoints(dir)
    this.loadedCheckpoints.push(checkpoints)
    const found: TopicPartition[] = []
    for (const name of await this.fs.readdir(dir)) {
      const tp = await this.partitionDir(dir, name)
      if (tp !== undefined) found.push(tp)
    }
    const loaded = new Array<UnifiedLog | undefined>(found.length)
    try {
      await forEachConcurrently(found, LOG_IO_CONCURRENCY, async (tp, i) => {
        const k = key(tp)
        loaded[i] = await this.openLog(dir, tp, this.configFor(tp.topic), {
          hadCleanShutdown,
          recoveryPoint: checkpoints.recoveryPoints.get(k) ?? FIRST_OFFSET,
          logStartOffset: checkpoints.logStartOffsets.get(k) ?? FIRST_OFFSET,
          highWatermark: checkpoints.highWatermarks.get(k) ?? FIRST_OFFSET,
          wasCompacted: checkpoints.cleanerOffsets.has(k),
        })
      })
    } catch (err) {
      // The logs that did load hold files: the broker does not start, so nothing else closes them.
      await Promise.allSettled(loaded.map((log) => log?.closeHandlers()))
      throw err
    }
    // In directory order, whichever finished loading first.
    found.forEach((tp, i) => {
      const k = key(tp)
      const log = loaded[i]!
      assert(!this.logs.has(k), () => `partition ${k} exists in two log dirs`)
      this.hostLog(k, { log, logDir: dir, tp })
      this.changes++
      const firstDirty = checkpoints.cleanerOffsets.get(k)
      if (firstDirty !== undefined) this.cleaner.restoreFirstDirtyOffset(log, firstDirty)
    })
    // Kafka removes the marker once loaded: a crash from now on must trigger recovery.
    if (hadCleanShutdown) {
      await this.fs.unlink(markerPath)
      await this.fs.syncDir(dir)
    }
    this.logger.info({ dir, hadCleanShutdown, logs: this.logs.size }, 'loaded log dir')
  }

  /** The partition a directory entry holds, or undefined (files, `-delete` and `-future` dirs). */
  private async partitionDir(dir: string, name: string): Promise<TopicPartition | undefined> {
    const stat = await this.fs.stat(join(dir, name))
    if (!stat.isDirectory) return undefined
    if (name.endsWith(DELETE_DIR_SUFFIX)) {
      this.logger.info({ dir: name }, 'removing partition directory marked for deletion')
      await this.fs.rmdir(join(dir, name))
      return undefined
    }
    if (name.endsWith(FUTURE_DIR_SUFFIX)) {
      this.futureDirs.push({ logDir: dir, name })
      return undefined
    }
    const tp = parseTopicPartition(name)
    if (tp === undefined)
      this.logger.warn({ dir: name }, 'ignoring directory that is not <topic>-<partition>')
    return tp
  }

  private async readCheckpoints(dir: string): Promise<DirCheckpoints> {
    return {
      recoveryPoints: await this.readCheckpoint(dir, RECOVERY_POINT_CHECKPOINT_FILE),
      logStartOffsets: await this.readCheckpoint(dir, LOG_START_OFFSET_CHECKPOINT_FILE),
      highWatermarks: await this.readCheckpoint(dir, HIGH_WATERMARK_CHECKPOINT_FILE),
      cleanerOffsets:
        (this.options.cleanerEnable ?? false)
          ? await this.readCheckpoint(dir, CLEANER_OFFSET_CHECKPOINT_FILE)
          : new Map(),
    }
  }

  /** A malformed checkpoint is read as empty: recovery from 0 is slower but safe (as Kafka). */
  private async readCheckpoint(dir: string, name: string): Promise<Map<string, Offset>> {
    const file = new CheckpointFile(this.fs, join(dir, name), topicPartitionOffsetFormat)
    try {
      return new Map((await file.read()).map((e) => [key(e), e.offset]))
    } catch (err) {
      if (!(err instanceof CheckpointFormatError)) throw err
      this.logger.warn({ err: err.message }, 'ignoring malformed checkpoint file')
      return new Map()
    }
  }

  private openLog(
    logDir: string,
    tp: TopicPartition,
    config: LogConfig,
    start: {
      hadCleanShutdown: boolean
      recoveryPoint: Offset
      logStartOffset: Offset
      highWatermark: Offset
      wasCompacted?: boolean
    },
  ): Promise<UnifiedLog> {
    return UnifiedLog.open({
      dir: join(logDir, topicPartitionDirName(tp)),
      config,
      fs: this.fs,
      clock: this.clock,
      logger: this.logger,
      ...start,
      hooks: this.logHooks,
    })
  }

  /** One per log dir: new logs' first flushes share its fsyncs. */
  private readonly logDirSyncs = new Map<string, CoalescedDirSync>()

  /** Every log's hooks, one object for all of them. */
  private readonly logHooks: LogHooks = {
    syncParentDir: (log) => {
      const logDir = dirname(log.dir)
      let dirSync = this.logDirSyncs.get(logDir)
      if (dirSync === undefined)
        this.logDirSyncs.set(logDir, (dirSync = new CoalescedDirSync(this.fs, logDir)))
      return dirSync.sync()
    },
    onStorageError: (err, log) => this.onLogDirFailure(dirname(log.dir), err),
    onFlushed: (durationMs) => this.onLogFlushed?.(durationMs),
    onChanged: () => {
      this.changes++
    },
    onTruncated: async (logEndOffset, log) => {
      if (this.cleaner.noteTruncation(log.dir, logEndOffset) && !this.shutDown)
        await this.checkpointCleanerOffsets()
    },
  }

  private configFor(topic: string): LogConfig {
    return this.options.topicConfig?.(topic) ?? this.options.defaultConfig ?? DEFAULT_LOG_CONFIG
  }

  private pickLogDir(): string | undefined {
    const online = this.options.logDirs.filter((d) => !this.offlineDirs.has(d))
    if (online.length === 0) return undefined
    const count = (d: string) => this.logCountByDir.get(d) ?? 0
    return online.reduce((best, d) => (count(d) < count(best) ? d : best))
  }

  private hostLog(k: string, hosted: HostedLog): void {
    this.unhostLog(k)
    this.logs.set(k, hosted)
    this.logsVersion++
    this.logCountByDir.set(hosted.logDir, (this.logCountByDir.get(hosted.logDir) ?? 0) + 1)
  }

  private unhostLog(k: string): void {
    const hosted = this.logs.get(k)
    if (hosted === undefined) return
    this.logs.delete(k)
    this.logsVersion++
    const count = this.logCountByDir.get(hosted.logDir) ?? 0
    assert(count > 0, () => `log ${k} hosted in ${hosted.logDir}, which counts none`)
    this.logCountByDir.set(hosted.logDir, count - 1)
  }

  // ---- failures, checkpoints, schedulers ----

  /** A disk failure in one log takes its whole directory offline, as in Kafka. */
  private onLogDirFailure(dir: string, err: StorageError): void {
    if (this.offlineDirs.has(dir)) return
    this.offlineDirs.add(dir)
    this.changes++
    this.logger.error({ dir, err }, 'log dir offline after a disk failure')
    for (const hosted of this.logs.values()) {
      if (hosted.logDir !== dir) continue
      this.track(hosted.log.closeHandlers())
    }
    this.options.onLogDirFailure?.(dir, err)
  }

  /**
   * Writes checkpoint `name` in every online log dir. A disk error takes that dir offline
   * (Kafka's LogDirFailureChannel) rather than failing the caller: a broker whose checkpoints
   * fail must still stop, and the other dirs still get theirs.
   */
  private writeCheckpoints(
    name: string,
    offsetOf: (log: UnifiedLog) => Offset | undefined,
    /** The offsets are the logs' own, whose moves `changes` counts (not the cleaner's). */
    counted = false,
  ): Promise<void> {
    const run = async () => {
      for (const dir of this.options.logDirs) {
        if (this.offlineDirs.has(dir)) continue
        const path = join(dir, name)
        // An idle broker's checkpoints do not change: rewriting (and syncing) every
        // partition's line each interval would cost it O(partitions) of disk work for
        // nothing; so would comparing them, at 10,000 partitions, every 5 s. Nothing
        // counted since the file was last current: not even compared, unless a full
        // CHECKPOINT_RECHECK_INTERVAL_MS went by (a move the count would have missed).
        const changes = this.changes
        const nowMs = this.clock.monotonicMs()
        const checked = this.checkedAt.get(path)
        if (counted && checked?.changes === changes && nowMs - checked.atMs < CHECKPOINT_RECHECK_INTERVAL_MS)
          continue
        if (this.unchangedSince(this.lastCheckpoints.get(path), dir, offsetOf)) {
          this.checkedAt.set(path, { changes, atMs: nowMs })
          continue
        }
        const written: WrittenCheckpoint = {
          logsVersion: this.logsVersion,
          offsets: new Float64Array(this.logs.size),
        }
        const lines: string[] = []
        let index = 0
        for (const hosted of this.logs.values()) {
          const offset = this.checkpointed(hosted, dir, offsetOf)
          written.offsets[index++] = offset ?? NOT_IN_FILE
          if (offset !== undefined)
            lines.push(topicPartitionOffsetLine(hosted.tp.topic, hosted.tp.partition, offset))
        }
        this.lastCheckpoints.delete(path)
        this.checkedAt.delete(path)
        try {
          await new CheckpointFile(this.fs, path, topicPartitionOffsetFormat).writeLines(lines)
          this.lastCheckpoints.set(path, written)
          this.checkedAt.set(path, { changes, atMs: nowMs })
        } catch (err) {
          if (!isDiskError(err)) throw err
          this.onLogDirFailure(dir, storageFailure(`writing ${name} in ${dir}`, err))
        }
      }
    }
    // One checkpoint write at a time: they share temp file names.
    const next = this.checkpointChain.then(run)
    this.checkpointChain = next.catch(() => undefined)
    return next
  }

  private checkpointed(
    hosted: HostedLog,
    dir: string,
    offsetOf: (log: UnifiedLog) => Offset | undefined,
  ): Offset | undefined {
    return hosted.logDir === dir && !hosted.log.isOffline ? offsetOf(hosted.log) : undefined
  }

  /** Whether the file written last still holds every hosted log's offset (none allocated to tell). */
  private unchangedSince(
    previous: WrittenCheckpoint | undefined,
    dir: string,
    offsetOf: (log: UnifiedLog) => Offset | undefined,
  ): boolean {
    if (previous === undefined || previous.logsVersion !== this.logsVersion) return false
    assert(previous.offsets.length === this.logs.size, 'the hosted logs changed without a new logsVersion')
    let index = 0
    for (const hosted of this.logs.values()) {
      const offset = this.checkpointed(hosted, dir, offsetOf) ?? NOT_IN_FILE
      if (previous.offsets[index++] !== offset) return false
    }
    return true
  }

  private schedule(name: string, intervalMs: number, task: () => Promise<unknown>): void {
    if (!Number.isFinite(intervalMs) || intervalMs <= 0) return
    const arm = () => {
      const timer = this.clock.setTimeout(() => {
        if (this.shutDown) return
        this.track(
          task()
            .catch((err: unknown) => this.logger.error({ err, task: name }, 'scheduled storage task failed'))
            .finally(() => {
              if (!this.shutDown) arm()
            }),
        )
      }, intervalMs)
      this.timers.set(name, timer)
    }
    arm()
  }

  private track(promise: Promise<unknown>): void {
    const tracked = promise.catch((err: unknown) =>
      this.logger.error({ err }, 'storage background task failed'),
    )
    this.running.add(tracked)
    void tracked.finally(() => this.running.delete(tracked))
  }
}
