/**
 * One partition replica's log (Kafka's UnifiedLog over LocalLog): ordered segments, the
 * log start offset, log end offset, high watermark (set by the replication layer), recovery
 * point, and the leader-epoch cache.
 *
 * Concurrency: every mutation (appends, roll, flush, truncation, retention, close) runs on
 * one per-log queue, strictly in call order. Appends queued in the same tick, or while an
 * earlier write is in flight, form one group: offsets are assigned in order and the whole
 * group reaches the segment in one writev (and at most one fsync). Reads do not queue:
 * they see only bytes whose write has completed. Different logs never wait for each other.
 */
import { basename } from 'node:path'
import { assert } from '../common/assert.js'
import { type Clock, systemClock, type TimerHandle } from '../common/clock.js'
import type { FileSystem } from '../common/file-system.js'
import { type Logger, silentLogger } from '../common/logger.js'
import {
  LAST_OFFSET_DELTA_OFFSET,
  LOG_OVERHEAD,
  NO_PARTITION_LEADER_EPOCH,
  PARTITION_LEADER_EPOCH_OFFSET,
  TimestampType,
} from '../protocol/batch-header.js'
import { setLogAppendTime } from '../protocol/record-batch.js'
import { nodeFileSystem } from '../runtime/node-file-system.js'
import {
  isStorageError,
  offsetOutOfRange,
  SegmentReplacedError,
  StorageError,
  storageFailure,
} from './errors.js'
import { type EpochEndOffset, LeaderEpochFileCache, UNDEFINED_EPOCH_OFFSET } from './leader-epoch-cache.js'
import { DEFAULT_LOG_CONFIG, hasCompactPolicy, hasDeletePolicy, type LogConfig } from './log-config.js'
import { loadLog } from './log-loader.js'
import {
  type AppendedBatch,
  CLEANED_FILE_SUFFIX,
  DELETED_FILE_SUFFIX,
  LogSegment,
  type SegmentOptions,
  SWAP_FILE_SUFFIX,
} from './log-segment.js'
import { type BatchSummary, checkBatch, writeInt64 } from './record-batch-check.js'
import { NO_TIMESTAMP } from './time-index.js'

/** A Kafka offset. int64 on the wire; a JS number here, exact up to 2^53. */
export type Offset = number
export type LeaderEpoch = number

export interface TopicPartition {
  readonly topic: string
  readonly partition: number
}

export interface PartitionLogOptions {
  /** The `<topic>-<partition>` directory; created if missing. */
  readonly dir: string
  readonly config?: LogConfig
  readonly fs?: FileSystem
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
  /** Called once when a disk operation fails and the log goes offline (KAFKA_STORAGE_ERROR). */
  readonly onStorageError?: (err: StorageError) => void
  /** Called after each fsync of appended data with its duration (the log flush metric). */
  readonly onFlushed?: (durationMs: number) => void
}

export interface AppendOptions {
  /** Leader: rewrite base offsets to the next offsets. Follower: the batches must carry them. */
  readonly assignOffsets: boolean
  /** Leader only: stamped into each batch's partitionLeaderEpoch and recorded in the epoch cache. */
  readonly leaderEpoch?: LeaderEpoch
  /**
   * Leader only. A number stamps LogAppendTime (timestamp type bit, maxTimestamp, CRC); null
   * keeps CreateTime; undefined follows message.timestamp.type (clock time for LogAppendTime).
   */
  readonly logAppendTimeMs?: number | null
}

export interface LogAppendInfo {
  readonly firstOffset: Offset
  readonly lastOffset: Offset
  /** The stamped LogAppendTime, or -1 for CreateTime (as in ProduceResponse). */
  readonly logAppendTimeMs: number
  readonly maxTimestamp: number
  readonly offsetOfMaxTimestamp: Offset
  readonly shallowCount: number
  readonly validBytes: number
  readonly logStartOffset: Offset
}

export interface ReadOptions {
  readonly maxBytes: number
  /** Exclusive bound (high watermark or last stable offset); default the log end offset. */
  readonly maxOffset?: Offset
  /** Return the first batch even when larger than maxBytes (Kafka's minOneMessage). Default true. */
  readonly minOneMessage?: boolean
}

export interface FetchDataInfo {
  /** Whole batches, in offset order: slices of file reads (one per read), no copies. */
  readonly records: Buffer[]
  readonly sizeInBytes: number
  /** Base offset of the first batch returned (may precede the requested offset), else the requested offset. */
  readonly firstOffset: Offset
  /** Offset after the last batch returned, else the requested offset. */
  readonly nextOffset: Offset
  readonly highWatermark: Offset
  readonly logStartOffset: Offset
  readonly logEndOffset: Offset
}

export interface TimestampAndOffset {
  readonly timestamp: number
  readonly offset: Offset
  readonly leaderEpoch: LeaderEpoch | undefined
}

/** The offsets of an earlier identical batch, which a leader answers a producer's retry with. */
export interface DuplicateBatch {
  readonly firstOffset: Offset
  readonly lastOffset: Offset
  readonly maxTimestamp: number
}

/**
 * Producer state (idempotence) kept in step with the log, as UnifiedLog drives Kafka's
 * ProducerStateManager. Every call runs on the log's queue, so it sees appends, rolls and
 * truncations in log order, and onAppend is synchronous: no other append can come between
 * a batch's sequence check and its offsets.
 */
export interface ProducerStateHook {
  /** Loads the state (snapshot plus the log after it); the log's queue waits for it. */
  load(): Promise<void>
  /**
   * One append whose batches passed validation and carry their offsets, before the write.
   * A leader append (`fromLeader`) may throw a Kafka outcome to refuse it, or return the
   * batch it duplicates, which is then answered without writing anything.
   */
  onAppend(batches: Buffer, fromLeader: boolean): DuplicateBatch | undefined
  /** A new segment starts at `baseOffset` (everything below it is applied): snapshot time. */
  onRoll(baseOffset: Offset): Promise<void>
  /** The log's tail was cut (truncateTo, truncateFullyAndStartAt): the state must follow it. */
  onTruncated(): Promise<void>
  /** Retention deleted segments: snapshots below the log start can go. */
  onSegmentsDeleted(logStartOffset: Offset): Promise<void>
  /** Clean close: a snapshot at the log end spares the next open a replay. */
  onClose(): Promise<void>
}

interface PendingAppend {
  readonly buffer: Buffer
  readonly options: AppendOptions
  readonly resolve: (info: LogAppendInfo) => void
  readonly reject: (err: unknown) => void
}

/** An append validated and given its offsets, waiting for its group's writev. */
interface PreparedAppend {
  readonly pending: PendingAppend
  readonly batches: AppendedBatch[]
  readonly epochStarts: { epoch: number; startOffset: number }[]
  readonly info: Omit<LogAppendInfo, 'logStartOffset'>
}

type Task =
  | { kind: 'appends'; appends: PendingAppend[] }
  | { kind: 'op'; run: () => Promise<void>; reject: (err: unknown) => void }

const TOPIC_PARTITION_DIR = /^(.+)-(\d+)$/
/** Times a read starts over when the cleaner replaced a segment under it (once per clean is the norm). */
const READ_RETRIES_MAX = 8

/** `<topic>-<partition>` as Kafka names partition directories; undefined for other names. */
export function parseTopicPartition(dirName: string): TopicPartition | undefined {
  const match = TOPIC_PARTITION_DIR.exec(dirName)
  if (match === null) return undefined
  return { topic: match[1], partition: Number(match[2]) }
}

export function topicPartitionDirName(tp: TopicPartition): string {
  return `${tp.topic}-${tp.partition}`
}

export class PartitionLog {
  readonly topicPartition: TopicPartition | undefined
  private segments: LogSegment[]
  private logStartOffsetValue: Offset
  private logEndOffsetValue: Offset
  private highWatermarkValue: Offset
  private recoveryPointValue: Offset
  private lastFlushMs: number
  private onFlushed: ((durationMs: number) => void) | undefined
  private configValue: LogConfig
  private readonly queue: Task[] = []
  private draining = false
  private flushTimer: TimerHandle | undefined
  private failure: StorageError | undefined
  private closed = false
  private closing = false
  /** The pending close: a second caller (a delete after a stop) waits for the same one. */
  private pendingClose: Promise<void> | undefined
  private producerStateHook: ProducerStateHook | undefined
  /** Lowest log end a truncation left since the cleaner last asked (its dirty offset must not pass it). */
  private truncatedToSinceCleaning: Offset | undefined

  private constructor(
    readonly dir: string,
    config: LogConfig,
    private readonly fs: FileSystem,
    private readonly clock: Clock,
    private readonly logger: Logger,
    readonly leaderEpochCache: LeaderEpochFileCache,
    loaded: { segments: LogSegment[]; logStartOffset: Offset; logEndOffset: Offset; recoveryPoint: Offset },
    highWatermark: Offset,
    private readonly onStorageError: ((err: StorageError) => void) | undefined,
    private readonly wasCompacted: boolean,
  ) {
    this.topicPartition = parseTopicPartition(basename(dir))
    this.configValue = config
    this.segments = loaded.segments
    this.logStartOffsetValue = loaded.logStartOffset
    this.logEndOffsetValue = loaded.logEndOffset
    this.recoveryPointValue = loaded.recoveryPoint
    this.highWatermarkValue = Math.min(Math.max(highWatermark, loaded.logStartOffset), loaded.logEndOffset)
    this.lastFlushMs = clock.nowMs()
    this.checkInvariants()
  }

  static async open(options: PartitionLogOptions): Promise<PartitionLog> {
    const fs = options.fs ?? nodeFileSystem
    const clock = options.clock ?? systemClock
    const config = options.config ?? DEFAULT_LOG_CONFIG
    const logger = (options.logger ?? silentLogger).child({ log: basename(options.dir) })
    await fs.mkdir(options.dir)
    const leaderEpochCache = await LeaderEpochFileCache.load(fs, options.dir, logger)
    const loaded = await loadLog({
      fs,
      dir: options.dir,
      segmentOptions: segmentOptions(config),
      nowMs: clock.nowMs(),
      logger,
      hadCleanShutdown: options.hadCleanShutdown ?? false,
      recoveryPoint: options.recoveryPoint ?? 0,
      logStartOffset: options.logStartOffset ?? 0,
      leaderEpochCache,
      allowOffsetGaps: hasCompactPolicy(config) || options.wasCompacted === true,
    })
    const log = new PartitionLog(
      options.dir,
      config,
      fs,
      clock,
      logger,
      leaderEpochCache,
      loaded,
      options.highWatermark ?? 0,
      options.onStorageError,
      options.wasCompacted === true,
    )
    log.onFlushed = options.onFlushed
    return log
  }

  // ---- state ----

  get config(): LogConfig {
    return this.configValue
  }
  get logStartOffset(): Offset {
    return this.logStartOffsetValue
  }
  /** Offset after the last batch whose write completed. */
  get logEndOffset(): Offset {
    return this.logEndOffsetValue
  }
  get highWatermark(): Offset {
    return this.highWatermarkValue
  }
  /** Everything below it is fsynced. */
  get recoveryPoint(): Offset {
    return this.recoveryPointValue
  }
  get latestEpoch(): LeaderEpoch | undefined {
    return this.leaderEpochCache.latestEpoch
  }
  get numberOfSegments(): number {
    return this.segments.length
  }
  /** Base offsets of the segments, oldest first. */
  get segmentBaseOffsets(): Offset[] {
    return this.segments.map((s) => s.baseOffset)
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
  get fileSystem(): FileSystem {
    return this.fs
  }
  get producerState(): ProducerStateHook | undefined {
    return this.producerStateHook
  }
  get isOffline(): boolean {
    return this.failure !== undefined
  }
  get unflushedMessages(): number {
    return this.logEndOffsetValue - this.recoveryPointValue
  }
  get lastFlushTimeMs(): number {
    return this.lastFlushMs
  }

  /** New topic configuration; segment sizes apply from the next roll (as in Kafka). */
  updateConfig(config: LogConfig): void {
    this.configValue = config
  }

  /**
   * Moves the high watermark, clamped into [logStartOffset, logEndOffset] as Kafka's
   * updateHighWatermark does; returns the value set. The replication layer owns its meaning.
   */
  updateHighWatermark(offset: Offset): Offset {
    assert(Number.isSafeInteger(offset), () => `bad high watermark ${offset}`)
    this.highWatermarkValue = Math.min(Math.max(offset, this.logStartOffsetValue), this.logEndOffsetValue)
    this.checkInvariants()
    return this.highWatermarkValue
  }

  /** Loads `hook` and keeps it in step with this log from then on (once per log). */
  attachProducerState(hook: ProducerStateHook): Promise<void> {
    assert(this.producerStateHook === undefined, () => `${this.dir} already has producer state`)
    return this.enqueue(async () => {
      await hook.load()
      this.producerStateHook = hook
    })
  }

  // ---- append ----

  /**
   * Appends a produce request's (or a fetch response's) record batches for this partition,
   * concatenated in `batches`. The buffer is taken over and patched in place (base offsets,
   * leader epoch, LogAppendTime); it is written as is, never copied. Validates framing,
   * magic 2, CRC and offsets; an invalid buffer is refused whole.
   */
  append(batches: Buffer, options: AppendOptions): Promise<LogAppendInfo> {
    return new Promise<LogAppendInfo>((resolve, reject) => {
      const unusable = this.unusableError()
      if (unusable !== undefined) {
        reject(unusable)
        return
      }
      const pending: PendingAppend = { buffer: batches, options, resolve, reject }
      const last = this.queue.at(-1)
      if (last?.kind === 'appends') last.appends.push(pending)
      else this.queue.push({ kind: 'appends', appends: [pending] })
      this.scheduleDrain()
    })
  }

  private async runAppends(appends: readonly PendingAppend[]): Promise<void> {
    let nextOffset = this.logEndOffsetValue
    let latestEpoch = this.leaderEpochCache.latestEpoch ?? NO_PARTITION_LEADER_EPOCH
    let group: PreparedAppend[] = []
    let groupBytes = 0
    for (const pending of appends) {
      let prepared: PreparedAppend
      try {
        prepared = this.prepareAppend(pending, nextOffset, latestEpoch)
      } catch (err) {
        pending.reject(err)
        continue
      }
      const bytes = pending.buffer.length
      if (prepared.info.shallowCount === 0) {
        pending.resolve({ ...prepared.info, logStartOffset: this.logStartOffsetValue })
        continue
      }
      if (this.shouldRoll(group, groupBytes, prepared, bytes)) {
        await this.writeGroup(group)
        group = []
        groupBytes = 0
        await this.rollAt(nextOffset)
      }
      // After the roll, so that a roll's snapshot holds exactly the batches below it.
      let duplicate: DuplicateBatch | undefined
      try {
        duplicate = this.producerStateHook?.onAppend(pending.buffer, pending.options.assignOffsets)
      } catch (err) {
        pending.reject(err)
        continue
      }
      if (duplicate !== undefined) {
        pending.resolve(duplicateAppendInfo(duplicate, this.logStartOffsetValue))
        continue
      }
      group.push(prepared)
      groupBytes += bytes
      nextOffset = prepared.info.lastOffset + 1
      for (const start of prepared.epochStarts) latestEpoch = Math.max(latestEpoch, start.epoch)
    }
    await this.writeGroup(group)
  }

  /** Validates one append and assigns (or checks) its offsets; throws to refuse it whole. */
  private prepareAppend(
    pending: PendingAppend,
    nextOffset: Offset,
    latestEpoch: LeaderEpoch,
  ): PreparedAppend {
    const { buffer, options } = pending
    const summaries = this.validateBatches(buffer, options.assignOffsets)
    const noInfo = emptyAppendInfo(nextOffset)
    if (summaries.length === 0) return { pending, batches: [], epochStarts: [], info: noInfo }
    if (buffer.length > this.configValue.segmentBytes) {
      throw new StorageError(
        'RECORD_BATCH_TOO_LARGE',
        `append of ${buffer.length} bytes exceeds segment.bytes ${this.configValue.segmentBytes}`,
      )
    }
    if (options.assignOffsets) return this.assignOffsets(pending, summaries, nextOffset, latestEpoch)
    return this.checkFollowerOffsets(pending, summaries, nextOffset, latestEpoch)
  }

  /** Framing, magic, CRC and (leader) record counts of every batch in the buffer. */
  private validateBatches(buffer: Buffer, isLeader: boolean): BatchSummary[] {
    const summaries: BatchSummary[] = []
    let at = 0
    while (at < buffer.length) {
      if (isLeader && buffer.length - at >= LOG_OVERHEAD) {
        const size = LOG_OVERHEAD + buffer.readInt32BE(at + 8)
        if (size > this.configValue.maxMessageBytes) {
          throw new StorageError(
            'MESSAGE_TOO_LARGE',
            `batch of ${size} bytes exceeds max.message.bytes ${this.configValue.maxMessageBytes}`,
          )
        }
      }
      const check = checkBatch(buffer, at, buffer.length, buffer.length)
      if (!check.ok)
        throw new StorageError('CORRUPT_MESSAGE', `batch at byte ${at} is invalid: ${check.problem}`)
      const batch = check.batch
      if (
        isLeader &&
        (batch.recordsCount <= 0 || batch.recordsCount !== batch.lastOffset - batch.baseOffset + 1)
      ) {
        throw new StorageError(
          'INVALID_RECORD',
          `batch at byte ${at} has ${batch.recordsCount} records but lastOffsetDelta ${batch.lastOffset - batch.baseOffset}`,
        )
      }
      summaries.push(batch)
      at += batch.sizeInBytes
    }
    return summaries
  }

  private assignOffsets(
    pending: PendingAppend,
    summaries: readonly BatchSummary[],
    nextOffset: Offset,
    latestEpoch: LeaderEpoch,
  ): PreparedAppend {
    const { buffer, options } = pending
    const epoch = options.leaderEpoch
    if (epoch !== undefined && epoch < latestEpoch) {
      throw new StorageError(
        'INVALID_LEADER_EPOCH',
        `leader epoch ${epoch} is older than the log's ${latestEpoch}`,
      )
    }
    const logAppendTimeMs = this.resolveLogAppendTime(options)
    const batches: AppendedBatch[] = []
    let offset = nextOffset
    let maxTimestamp = NO_TIMESTAMP
    let offsetOfMaxTimestamp = nextOffset
    for (const batch of summaries) {
      const lastOffsetDelta = buffer.readInt32BE(batch.position + LAST_OFFSET_DELTA_OFFSET)
      writeInt64(buffer, batch.position, offset)
      if (epoch !== undefined) buffer.writeInt32BE(epoch, batch.position + PARTITION_LEADER_EPOCH_OFFSET)
      if (logAppendTimeMs !== -1) setLogAppendTime(buffer, batch.position, logAppendTimeMs)
      const batchMaxTimestamp = logAppendTimeMs !== -1 ? logAppendTimeMs : batch.maxTimestamp
      const lastOffset = offset + lastOffsetDelta
      if (batchMaxTimestamp > maxTimestamp) {
        maxTimestamp = batchMaxTimestamp
        offsetOfMaxTimestamp = lastOffset
      }
      batches.push({
        sizeInBytes: batch.sizeInBytes,
        baseOffset: offset,
        lastOffset,
        maxTimestamp: batchMaxTimestamp,
      })
      offset = lastOffset + 1
    }
    const epochStarts = epoch !== undefined && epoch >= 0 ? [{ epoch, startOffset: nextOffset }] : []
    return {
      pending,
      batches,
      epochStarts,
      info: {
        firstOffset: nextOffset,
        lastOffset: offset - 1,
        logAppendTimeMs,
        maxTimestamp,
        offsetOfMaxTimestamp,
        shallowCount: summaries.length,
        validBytes: buffer.length,
      },
    }
  }

  /** -1 for CreateTime, else the LogAppendTime to stamp. */
  private resolveLogAppendTime(options: AppendOptions): number {
    if (options.logAppendTimeMs === null) return -1
    if (options.logAppendTimeMs !== undefined) return options.logAppendTimeMs
    return this.configValue.messageTimestampType === TimestampType.LogAppendTime ? this.clock.nowMs() : -1
  }

  private checkFollowerOffsets(
    pending: PendingAppend,
    summaries: readonly BatchSummary[],
    nextOffset: Offset,
    latestEpoch: LeaderEpoch,
  ): PreparedAppend {
    const batches: AppendedBatch[] = []
    const epochStarts: { epoch: number; startOffset: number }[] = []
    let expected = nextOffset
    let epoch = latestEpoch
    let maxTimestamp = NO_TIMESTAMP
    let offsetOfMaxTimestamp = nextOffset
    for (const batch of summaries) {
      // A compacted leader's batches leave gaps (then going back is the only error).
      const gapsAllowed = this.wasCompacted || hasCompactPolicy(this.configValue)
      if (gapsAllowed ? batch.baseOffset < expected : batch.baseOffset !== expected) {
        throw new StorageError(
          'UNEXPECTED_APPEND_OFFSET',
          `batch base offset ${batch.baseOffset}, expected ${expected} (log end offset ${nextOffset})`,
        )
      }
      if (batch.partitionLeaderEpoch >= 0 && batch.partitionLeaderEpoch < epoch) {
        throw new StorageError(
          'INVALID_LEADER_EPOCH',
          `batch epoch ${batch.partitionLeaderEpoch} after epoch ${epoch}`,
        )
      }
      if (batch.partitionLeaderEpoch > epoch) {
        epoch = batch.partitionLeaderEpoch
        epochStarts.push({ epoch, startOffset: batch.baseOffset })
      }
      if (batch.maxTimestamp > maxTimestamp) {
        maxTimestamp = batch.maxTimestamp
        offsetOfMaxTimestamp = batch.lastOffset
      }
      batches.push(batch)
      expected = batch.lastOffset + 1
    }
    return {
      pending,
      batches,
      epochStarts,
      info: {
        firstOffset: nextOffset,
        lastOffset: expected - 1,
        logAppendTimeMs: -1,
        maxTimestamp,
        offsetOfMaxTimestamp,
        shallowCount: summaries.length,
        validBytes: pending.buffer.length,
      },
    }
  }

  /** Kafka's shouldRoll, counting the group not yet written as part of the active segment. */
  private shouldRoll(
    group: readonly PreparedAppend[],
    groupBytes: number,
    next: PreparedAppend,
    bytes: number,
  ): boolean {
    const segment = this.activeSegment
    const size = segment.size + groupBytes
    if (size === 0) return false
    if (size > this.configValue.segmentBytes - bytes) return true
    let groupBatches = 0
    for (const prepared of group) groupBatches += prepared.batches.length
    const newIndexEntries = groupBatches + next.batches.length
    if (segment.offsetIndex.entries + newIndexEntries > segment.offsetIndex.maxEntries) return true
    if (segment.timeIndex.entries + newIndexEntries > segment.timeIndex.maxEntries - 1) return true
    if (next.info.lastOffset - segment.baseOffset > 0x7fffffff) return true
    return this.timeWaitedForRoll(segment, next.info.maxTimestamp) > this.configValue.segmentMs
  }

  /** segment.ms counts from the first batch's timestamp when there is one, else from creation (Kafka). */
  private timeWaitedForRoll(segment: LogSegment, maxTimestampInMessages: number): number {
    const first = segment.rollingBasedTimestamp
    if (first !== undefined && first >= 0) return maxTimestampInMessages - first
    return this.clock.nowMs() - segment.createdMs
  }

  private async writeGroup(group: readonly PreparedAppend[]): Promise<void> {
    if (group.length === 0) return
    const segment = this.activeSegment
    const buffers = group.map((p) => p.pending.buffer)
    const batches = group.flatMap((p) => p.batches)
    await segment.append(buffers, batches, this.clock.nowMs())
    this.logEndOffsetValue = group[group.length - 1].info.lastOffset + 1
    for (const prepared of group) {
      for (const { epoch, startOffset } of prepared.epochStarts)
        await this.leaderEpochCache.assign(epoch, startOffset)
    }
    this.checkInvariants()
    if (this.unflushedMessages >= this.configValue.flushMessages) await this.flushUpTo(this.logEndOffsetValue)
    else this.armFlushTimer()
    for (const prepared of group)
      prepared.pending.resolve({ ...prepared.info, logStartOffset: this.logStartOffsetValue })
  }

  // ---- roll and flush ----

  /** Closes the active segment for writes and starts a new one at the log end offset. */
  roll(): Promise<void> {
    return this.enqueue(() => this.rollAt(this.logEndOffsetValue))
  }

  private async rollAt(newBaseOffset: Offset): Promise<void> {
    const old = this.activeSegment
    assert(
      newBaseOffset === this.logEndOffsetValue,
      () => `roll at ${newBaseOffset}, log end ${this.logEndOffsetValue}`,
    )
    if (old.size === 0) return
    assert(newBaseOffset > old.baseOffset, () => `roll to ${newBaseOffset} after segment ${old.baseOffset}`)
    await old.onBecomeInactiveSegment()
    const segment = await LogSegment.create(
      this.fs,
      this.dir,
      newBaseOffset,
      segmentOptions(this.configValue),
      this.clock.nowMs(),
    )
    this.segments.push(segment)
    // The old segment and every one before it are fsynced (each at its own roll).
    this.recoveryPointValue = Math.max(this.recoveryPointValue, newBaseOffset)
    this.checkInvariants()
    await this.producerStateHook?.onRoll(newBaseOffset)
    this.logger.debug({ baseOffset: newBaseOffset }, 'rolled new log segment')
  }

  /** fsync of everything appended before this call; moves the recovery point to the log end. */
  flush(): Promise<void> {
    return this.enqueue(() => this.flushUpTo(this.logEndOffsetValue))
  }

  private async flushUpTo(offset: Offset): Promise<void> {
    this.cancelFlushTimer()
    if (offset <= this.recoveryPointValue) return
    const startedMs = this.clock.monotonicMs()
    for (const segment of this.segmentsFrom(this.recoveryPointValue)) {
      if (segment.baseOffset >= offset) break
      await segment.flush()
    }
    this.recoveryPointValue = offset
    this.lastFlushMs = this.clock.nowMs()
    this.onFlushed?.(this.clock.monotonicMs() - startedMs)
  }

  /** flush.ms: one timer per log, armed while there is unflushed data. */
  private armFlushTimer(): void {
    if (this.flushTimer !== undefined || !Number.isFinite(this.configValue.flushMs)) return
    if (this.unflushedMessages === 0) return
    const dueInMs = Math.max(0, this.lastFlushMs + this.configValue.flushMs - this.clock.nowMs())
    this.flushTimer = this.clock.setTimeout(() => {
      this.flushTimer = undefined
      this.flush().catch((err: unknown) => this.logger.error({ err }, 'scheduled flush failed'))
    }, dueInMs)
  }

  private cancelFlushTimer(): void {
    this.flushTimer?.cancel()
    this.flushTimer = undefined
  }

  // ---- read ----

  /**
   * Whole batches from the one holding `startOffset`, up to `maxBytes` (at least one batch
   * with minOneMessage), never a batch whose last offset is >= maxOffset. Throws
   * OFFSET_OUT_OF_RANGE outside [logStartOffset, logEndOffset].
   */
  async read(startOffset: Offset, options: ReadOptions): Promise<FetchDataInfo> {
    return this.retryingReplacedSegments(() => this.readOnce(startOffset, options))
  }

  /**
   * Runs a read again when the cleaner swapped a segment under it: the read chose its
   * segments before the swap and found one gone, so it starts over on the current ones.
   */
  private async retryingReplacedSegments<T>(read: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await read()
      } catch (err) {
        if (!(err instanceof SegmentReplacedError) || attempt >= READ_RETRIES_MAX) throw err
      }
    }
  }

  private async readOnce(startOffset: Offset, options: ReadOptions): Promise<FetchDataInfo> {
    const unusable = this.unusableError()
    if (unusable !== undefined) throw unusable
    const logStartOffset = this.logStartOffsetValue
    const logEndOffset = this.logEndOffsetValue
    if (startOffset < logStartOffset || startOffset > logEndOffset) {
      throw offsetOutOfRange(startOffset, logStartOffset, logEndOffset)
    }
    const maxOffset = Math.min(options.maxOffset ?? logEndOffset, logEndOffset)
    const result = {
      records: [] as Buffer[],
      sizeInBytes: 0,
      firstOffset: startOffset,
      nextOffset: startOffset,
      highWatermark: this.highWatermarkValue,
      logStartOffset,
      logEndOffset,
    }
    if (startOffset >= maxOffset) return result
    await this.readSegments(startOffset, maxOffset, options, result)
    return result
  }

  private async readSegments(
    startOffset: Offset,
    maxOffset: Offset,
    options: ReadOptions,
    result: { records: Buffer[]; sizeInBytes: number; firstOffset: Offset; nextOffset: Offset },
  ): Promise<void> {
    const segments = this.segmentsFrom(startOffset)
    let offset = startOffset
    for (let i = 0; i < segments.length && result.sizeInBytes < options.maxBytes; i++) {
      const segment = segments[i]
      const nextBase = segments[i + 1]?.baseOffset ?? Infinity
      const minOne = (options.minOneMessage ?? true) && result.sizeInBytes === 0
      const read = await segment.read(offset, maxOffset, options.maxBytes - result.sizeInBytes, minOne)
      if (read === undefined) {
        offset = Math.max(offset, nextBase)
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
  }

  /** Segments from the one holding `offset` (or the first, when it precedes them). */
  private segmentsFrom(offset: Offset): LogSegment[] {
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

  // ---- lookups ----

  /**
   * ListOffsets by time: the first record at or after logStartOffset with timestamp >=
   * `timestampMs`, through the time index. Exact per record for uncompressed CreateTime
   * batches; the batch's base offset otherwise. Undefined when no record is that late.
   */
  offsetForTimestamp(timestampMs: number): Promise<TimestampAndOffset | undefined> {
    return this.retryingReplacedSegments(() => this.offsetForTimestampOnce(timestampMs))
  }

  private async offsetForTimestampOnce(timestampMs: number): Promise<TimestampAndOffset | undefined> {
    const startingOffset = this.logStartOffsetValue
    // A copy: the cleaner may splice the list while this awaits (a stale segment throws and the lookup retries).
    for (const segment of [...this.segments]) {
      if (segment.maxTimestampSoFar < timestampMs) continue
      const found = await segment.findOffsetByTimestamp(timestampMs, startingOffset)
      if (found !== undefined)
        return { ...found, leaderEpoch: this.leaderEpochCache.epochForOffset(found.offset) }
    }
    return undefined
  }

  /** ListOffsets MAX_TIMESTAMP: the largest timestamp and the offset of its record. */
  latestTimestamp(): Promise<TimestampAndOffset | undefined> {
    return this.retryingReplacedSegments(() => this.latestTimestampOnce())
  }

  private async latestTimestampOnce(): Promise<TimestampAndOffset | undefined> {
    let best: LogSegment | undefined
    for (const segment of this.segments) {
      if (segment.maxTimestampSoFar > (best?.maxTimestampSoFar ?? NO_TIMESTAMP)) best = segment
    }
    if (best === undefined) return undefined
    const found = await best.maxTimestampAndOffset()
    if (found === undefined) return undefined
    return { ...found, leaderEpoch: this.leaderEpochCache.epochForOffset(found.offset) }
  }

  /** OffsetForLeaderEpoch: the end offset of `leaderEpoch` in this log, or undefined if unknown. */
  endOffsetForEpoch(leaderEpoch: LeaderEpoch): EpochEndOffset | undefined {
    const found = this.leaderEpochCache.endOffsetFor(leaderEpoch, this.logEndOffsetValue)
    return found.endOffset === UNDEFINED_EPOCH_OFFSET ? undefined : found
  }

  // ---- truncation and deletion ----

  /**
   * Follower truncation (Kafka's truncateTo): removes every batch from the one holding
   * `targetOffset`. When that batch starts before the target, the log ends at its base
   * offset, so the log always ends on a batch boundary. False when nothing was removed.
   */
  truncateTo(targetOffset: Offset): Promise<boolean> {
    assert(
      Number.isSafeInteger(targetOffset) && targetOffset >= 0,
      () => `cannot truncate to ${targetOffset}`,
    )
    return this.enqueue(async () => {
      if (targetOffset >= this.logEndOffsetValue) return false
      if (this.segments[0].baseOffset > targetOffset) {
        await this.truncateFullyAndStartAtNow(targetOffset)
        return true
      }
      await this.truncateSegmentsTo(targetOffset)
      return true
    })
  }

  private async truncateSegmentsTo(targetOffset: Offset): Promise<void> {
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
    // The cut batch may start after the target when compaction left a gap before it: the
    // log then ends at the target, never above it (the offsets between are not held).
    const logEndOffset = Math.min(cut.cutAtOffset ?? (await active.readNextOffset()), targetOffset)
    await active.onBecomeActiveSegment()
    this.logger.info({ targetOffset, logEndOffset, truncatedBytes: cut.truncatedBytes }, 'truncated log')
    this.logEndOffsetValue = logEndOffset
    this.noteTruncation(logEndOffset)
    await this.leaderEpochCache.truncateFromEnd(logEndOffset)
    this.logStartOffsetValue = Math.min(this.logStartOffsetValue, logEndOffset)
    this.highWatermarkValue = Math.min(this.highWatermarkValue, logEndOffset)
    this.recoveryPointValue = Math.min(this.recoveryPointValue, logEndOffset)
    this.checkInvariants()
    await this.producerStateHook?.onTruncated()
  }

  /** Deletes everything and restarts the log empty at `newOffset` (a replica that must refetch all). */
  truncateFullyAndStartAt(newOffset: Offset): Promise<void> {
    assert(Number.isSafeInteger(newOffset) && newOffset >= 0, () => `cannot restart at ${newOffset}`)
    return this.enqueue(() => this.truncateFullyAndStartAtNow(newOffset))
  }

  private async truncateFullyAndStartAtNow(newOffset: Offset): Promise<void> {
    const removed = this.segments
    for (const segment of removed) await segment.deleteFiles()
    this.segments = [
      await LogSegment.create(
        this.fs,
        this.dir,
        newOffset,
        segmentOptions(this.configValue),
        this.clock.nowMs(),
      ),
    ]
    await this.leaderEpochCache.clearAndFlush()
    this.logEndOffsetValue = newOffset
    this.noteTruncation(newOffset)
    this.logStartOffsetValue = newOffset
    this.highWatermarkValue = newOffset
    this.recoveryPointValue = newOffset
    this.logger.info({ newOffset, deletedSegments: removed.length }, 'truncated log fully')
    this.checkInvariants()
    await this.producerStateHook?.onTruncated()
  }

  /**
   * DeleteRecords: the log now starts at `offset` (-1: the high watermark). Must not pass
   * the high watermark. Whole segments below it are deleted by the next retention pass.
   * Returns the new log start offset.
   */
  deleteRecordsBefore(offset: Offset): Promise<Offset> {
    return this.enqueue(async () => {
      const target = offset === -1 ? this.highWatermarkValue : offset
      if (target < 0 || target > this.highWatermarkValue) {
        throw offsetOutOfRange(target, this.logStartOffsetValue, this.highWatermarkValue)
      }
      if (target > this.logStartOffsetValue) {
        this.logStartOffsetValue = target
        await this.leaderEpochCache.truncateFromStart(target)
        this.checkInvariants()
      }
      return this.logStartOffsetValue
    })
  }

  /**
   * Retention pass (Kafka's deleteOldSegments): segments wholly below the log start offset,
   * then by retention.bytes, then by retention.ms; never the active segment, never data at
   * or above the high watermark. Returns the number of segments deleted.
   */
  deleteOldSegments(): Promise<number> {
    return this.enqueue(async () => {
      let deleted = await this.deleteSegmentsWhile(
        (segment) => this.nextBaseOffset(segment) <= this.logStartOffsetValue,
      )
      if (!hasDeletePolicy(this.configValue)) return deleted
      let excessBytes = this.size - this.configValue.retentionBytes
      deleted += await this.deleteSegmentsWhile((segment) => {
        if (excessBytes - segment.size < 0) return false
        excessBytes -= segment.size
        return true
      })
      const nowMs = this.clock.nowMs()
      deleted += await this.deleteSegmentsWhile(
        (segment) => nowMs - segment.largestTimestamp > this.configValue.retentionMs,
      )
      return deleted
    })
  }

  private nextBaseOffset(segment: LogSegment): Offset {
    const i = this.segments.indexOf(segment)
    return this.segments[i + 1]?.baseOffset ?? this.logEndOffsetValue
  }

  /** Deletes the oldest segments while `predicate` holds, stopping at the active one or the high watermark. */
  private async deleteSegmentsWhile(predicate: (segment: LogSegment) => boolean): Promise<number> {
    const deletable: LogSegment[] = []
    for (const segment of this.segments.slice(0, -1)) {
      if (this.nextBaseOffset(segment) > this.highWatermarkValue || !predicate(segment)) break
      deletable.push(segment)
    }
    if (deletable.length === 0) return 0
    this.segments = this.segments.slice(deletable.length)
    this.logStartOffsetValue = Math.max(this.logStartOffsetValue, this.segments[0].baseOffset)
    this.recoveryPointValue = Math.max(this.recoveryPointValue, this.logStartOffsetValue)
    await this.leaderEpochCache.truncateFromStart(this.logStartOffsetValue)
    for (const segment of deletable) {
      this.logger.info(
        { baseOffset: segment.baseOffset, sizeInBytes: segment.size },
        'deleting log segment (retention)',
      )
      await segment.deleteFiles()
    }
    this.checkInvariants()
    await this.producerStateHook?.onSegmentsDeleted(this.logStartOffsetValue)
    return deletable.length
  }

  // ---- log cleaner ----

  private noteTruncation(logEndOffset: Offset): void {
    this.truncatedToSinceCleaning = Math.min(this.truncatedToSinceCleaning ?? Infinity, logEndOffset)
  }

  /** The lowest log end a truncation left since the last call, then forgets it (the cleaner's dirty offset follows it). */
  takeTruncationSinceCleaning(): Offset | undefined {
    const offset = this.truncatedToSinceCleaning
    this.truncatedToSinceCleaning = undefined
    return offset
  }

  /** The segments, oldest first, for the cleaner to read (it never writes them). */
  get segmentList(): readonly LogSegment[] {
    return this.segments
  }

  /** A new empty segment with `.cleaned` files, for the cleaner to fill; not part of the log yet. */
  createCleanedSegment(baseOffset: Offset): Promise<LogSegment> {
    return LogSegment.create(
      this.fs,
      this.dir,
      baseOffset,
      segmentOptions(this.configValue),
      this.clock.nowMs(),
      CLEANED_FILE_SUFFIX,
    )
  }

  /**
   * Swaps `cleaned` (complete, fsynced, `.cleaned` files) in for `oldSegments`, consecutive
   * inactive segments it was built from, as Kafka's replaceSegments does, crash-safely:
   * 1. `.cleaned` -> `.swap` (from here recovery completes the swap: see log-loader);
   * 2. the old segments' files -> `.deleted`; 3. `.swap` -> final names; each step's
   * renames fsynced with the directory; 4. the old files are unlinked, their open handles
   * kept until reads in flight finish (later reads retry on the new segment).
   * False, with nothing changed, when the old segments are no longer what the cleaner
   * read (truncated, deleted by retention, grown into the active segment).
   */
  replaceSegments(
    oldSegments: readonly LogSegment[],
    sizes: readonly number[],
    cleaned: LogSegment,
  ): Promise<boolean> {
    assert(
      oldSegments.length > 0 && oldSegments.length === sizes.length,
      'replaceSegments needs old segments',
    )
    assert(cleaned.baseOffset === oldSegments[0].baseOffset, 'a cleaned segment keeps its first base offset')
    return this.enqueue(async () => {
      const first = this.segments.indexOf(oldSegments[0])
      const unchanged =
        first >= 0 &&
        first + oldSegments.length < this.segments.length &&
        oldSegments.every((segment, i) => this.segments[first + i] === segment && segment.size === sizes[i])
      if (!unchanged) return false
      await cleaned.changeFileSuffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
      await this.fs.syncDir(this.dir)
      for (const segment of oldSegments) await segment.changeFileSuffixes('', DELETED_FILE_SUFFIX)
      await this.fs.syncDir(this.dir)
      await cleaned.changeFileSuffixes(SWAP_FILE_SUFFIX, '')
      await this.fs.syncDir(this.dir)
      this.segments.splice(first, oldSegments.length, cleaned)
      for (const segment of oldSegments) await segment.deleteReplacedFiles()
      this.checkInvariants()
      return true
    })
  }

  // ---- lifecycle ----

  /** Clean close: waits for queued work, fsyncs, trims the active segment's indexes. */
  close(): Promise<void> {
    if (this.pendingClose !== undefined) return this.pendingClose
    if (this.closed) return Promise.resolve()
    const done = this.enqueue(async () => {
      this.cancelFlushTimer()
      await this.flushUpTo(this.logEndOffsetValue)
      await this.producerStateHook?.onClose()
      for (const segment of this.segments.slice(0, -1)) await segment.closeHandlers()
      await this.activeSegment.close()
      this.closed = true
    })
    this.closing = true
    this.pendingClose = done
    return done
  }

  /** Closes file handles without flushing or trimming: the directory failed, or a test simulates a crash. */
  async closeHandlers(): Promise<void> {
    this.cancelFlushTimer()
    this.closed = true
    for (const segment of this.segments) await segment.closeHandlers()
  }

  /** Closes and removes the partition directory (the replica was deleted). */
  async delete(): Promise<void> {
    await this.close()
    await this.fs.rmdir(this.dir)
  }

  // ---- the queue ----

  private enqueue<T>(run: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const unusable = this.unusableError()
      if (unusable !== undefined) {
        reject(unusable)
        return
      }
      const settle = async () => {
        try {
          resolve(await run())
        } catch (err) {
          // An outcome for the caller (out of range, ...) leaves the log usable; anything else takes it offline.
          if (!isStorageError(err) || err.code === 'KAFKA_STORAGE_ERROR') throw err
          reject(err)
        }
      }
      this.queue.push({ kind: 'op', run: settle, reject })
      this.scheduleDrain()
    })
  }

  private scheduleDrain(): void {
    if (this.draining) return
    this.draining = true
    // A microtask, so that appends made in the same tick join one group (one writev).
    queueMicrotask(() => {
      this.drain().catch((err: unknown) => this.fail(err))
    })
  }

  private async drain(): Promise<void> {
    try {
      for (let task = this.queue.shift(); task !== undefined; task = this.queue.shift()) {
        await this.runTask(task)
      }
    } finally {
      this.draining = false
    }
  }

  private async runTask(task: Task): Promise<void> {
    if (this.failure !== undefined) {
      this.rejectTask(task, this.failure)
      return
    }
    try {
      if (task.kind === 'appends') await this.runAppends(task.appends)
      else await task.run()
    } catch (err) {
      this.fail(err)
      this.rejectTask(task, this.failure ?? err)
    }
  }

  private rejectTask(task: Task, err: unknown): void {
    if (task.kind === 'appends') for (const pending of task.appends) pending.reject(err)
    else task.reject(err)
  }

  /** A failed disk operation: the log goes offline; everything queued and later fails. */
  private fail(err: unknown): void {
    if (this.failure !== undefined) return
    this.failure = isStorageError(err, 'KAFKA_STORAGE_ERROR')
      ? err
      : storageFailure(`log ${this.dir} failed`, err)
    this.logger.error({ err }, 'log went offline after a failed disk operation')
    this.cancelFlushTimer()
    this.onStorageError?.(this.failure)
    for (const task of this.queue.splice(0)) this.rejectTask(task, this.failure)
  }

  private unusableError(): StorageError | undefined {
    if (this.failure !== undefined) return this.failure
    if (this.closed || this.closing) return new StorageError('LOG_CLOSED', `log ${this.dir} is closed`)
    return undefined
  }

  /** Every offset change ends here. */
  private checkInvariants(): void {
    const lso = this.logStartOffsetValue
    const hw = this.highWatermarkValue
    const leo = this.logEndOffsetValue
    assert(lso <= hw, () => `logStartOffset ${lso} > highWatermark ${hw}`)
    assert(hw <= leo, () => `highWatermark ${hw} > logEndOffset ${leo}`)
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

function segmentOptions(config: LogConfig): SegmentOptions {
  return { indexIntervalBytes: config.indexIntervalBytes, maxIndexBytes: config.segmentIndexBytes }
}

/** A retried batch's answer: its first write's offsets; no LogAppendTime, as Kafka. */
function duplicateAppendInfo(duplicate: DuplicateBatch, logStartOffset: Offset): LogAppendInfo {
  return {
    firstOffset: duplicate.firstOffset,
    lastOffset: duplicate.lastOffset,
    logAppendTimeMs: -1,
    maxTimestamp: duplicate.maxTimestamp,
    offsetOfMaxTimestamp: duplicate.lastOffset,
    shallowCount: 0,
    validBytes: 0,
    logStartOffset,
  }
}

function emptyAppendInfo(nextOffset: Offset): Omit<LogAppendInfo, 'logStartOffset'> {
  return {
    firstOffset: -1,
    lastOffset: -1,
    logAppendTimeMs: -1,
    maxTimestamp: NO_TIMESTAMP,
    offsetOfMaxTimestamp: nextOffset,
    shallowCount: 0,
    validBytes: 0,
  }
}
