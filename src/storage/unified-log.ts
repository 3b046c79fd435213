/**
 * One partition replica's log (Kafka's UnifiedLog) over its segment list (LocalLog): the
 * log start offset, the high watermark (set by the replication layer), the leader-epoch
 * cache, producer state, retention, the log cleaner's swap, and the invariants tying them
 * to the log end offset and recovery point LocalLog keeps. Append-time rules are in
 * log-validator.ts.
 *
 * Concurrency: every mutation (appends, roll, flush, truncation, retention, close) runs on
 * one per-log queue (log-queue.ts), strictly in call order. Appends queued in the same
 * tick, or while an earlier write is in flight, form one group: offsets are assigned in
 * order and the whole group reaches the segment in one writev (and at most one fsync).
 * Reads do not queue: they see only bytes whose write has completed. Different logs never
 * wait for each other.
 */
import { basename } from 'node:path'
import { assert } from '../common/assert.js'
import { type Clock, systemClock, type TimerHandle } from '../common/clock.js'
import type { FileSystem } from '../common/file-system.js'
import { type Logger, silentLogger } from '../common/logger.js'
import { type LeaderEpoch, maxOffset, minOffset, type Offset } from '../common/types.js'
import {
  type CorruptSegmentError,
  isStorageError,
  offsetOutOfRange,
  retryingReplacedSegments,
  StorageError,
  storageFailure,
} from './errors.js'
import {
  type EpochEndOffset,
  type LeaderEpochFileCache,
  UNDEFINED_EPOCH,
  UNDEFINED_EPOCH_OFFSET,
} from './leader-epoch-cache.js'
import { LocalLog } from './local-log.js'
import { DEFAULT_LOG_CONFIG, hasCompactPolicy, hasDeletePolicy, type LogConfig } from './log-config.js'
import { CLEANED_FILE_SUFFIX } from './log-file-names.js'
import { openLogDir } from './log-loader.js'
import { LogQueue, type LogQueueHost, type PendingAppend } from './log-queue.js'
import type { LogSegment } from './log-segment.js'
import { appendRules, type ValidatedAppend, validateAppend } from './log-validator.js'
import { RECENT_BATCHES_MAX_BYTES_DEFAULT, RecentBatches } from './recent-batches.js'
import type { AbortedTxn } from './transaction-index.js'
import type { LoadedLogParts, LogHooks, UnifiedLogOptions } from './unified-log-options.js'
import {
  type AppendOptions,
  duplicateAppendInfo,
  type FetchDataInfo,
  type LogAppendInfo,
  type ProducerAppendOutcome,
  type ProducerStateHook,
  parseTopicPartition,
  type ReadOptions,
  type TimestampAndOffset,
  type TopicPartition,
} from './unified-log-types.js'

export type { LeaderEpoch, Offset } from '../common/types.js'
export type { UnifiedLogOptions } from './unified-log-options.js'
export {
  type AppendOptions,
  type AppendOrigin,
  type DuplicateBatch,
  type FetchDataInfo,
  type LogAppendInfo,
  type ProducerAppendOutcome,
  type ProducerStateHook,
  parseTopicPartition,
  type ReadOptions,
  type TimestampAndOffset,
  type TopicPartition,
  topicPartitionDirName,
} from './unified-log-types.js'

/** An append validated and given its offsets, waiting for its group's writev. */
interface PreparedAppend extends ValidatedAppend {
  readonly pending: PendingAppend
  abortedTransactions?: readonly AbortedTxn[]
}

export class UnifiedLog {
  readonly topicPartition: TopicPartition | undefined
  private readonly local: LocalLog
  private logStartOffsetValue: Offset
  private highWatermarkValue: Offset
  private readonly hooks: LogHooks
  /** The queue's calls into each log, one object for all (see LogQueueHost). */
  private static readonly queueHost: LogQueueHost<UnifiedLog> = {
    runAppends: (log, appends) => log.runAppends(appends),
    taskDone: (log) => log.hooks.onChanged?.(),
    unusableError: (log) => log.unusableError(),
    failure: (log) => log.failure,
    fail: (log, err) => log.fail(err),
  }
  private readonly queue = new LogQueue(this, UnifiedLog.queueHost)
  private flushTimer: TimerHandle | undefined
  private failure: StorageError | undefined
  private closed = false
  private closing = false
  /** The pending close: a second caller (a delete after a stop) waits for the same one. */
  private pendingClose: Promise<void> | undefined
  private producerStateHook: ProducerStateHook | undefined
  /** Lowest log end a truncation left since the cleaner last asked (its dirty offset must not pass it). */
  private truncatedToSinceCleaning: Offset | undefined
  private readonly recent: RecentBatches

  readonly dir: string
  /** Its directory was made by open(): every file in it is this process's. */
  readonly createdNew: boolean
  readonly leaderEpochCache: LeaderEpochFileCache
  private readonly clock: Clock
  private readonly logger: Logger
  private readonly wasCompacted: boolean

  /** Built by `open` once the segments are loaded. */
  private constructor(parts: LoadedLogParts) {
    this.dir = parts.dir
    this.createdNew = parts.createdNew
    this.clock = parts.clock
    this.logger = parts.logger
    this.leaderEpochCache = parts.leaderEpochCache
    this.wasCompacted = parts.wasCompacted
    this.hooks = parts.hooks
    const { loaded } = parts
    this.recent = new RecentBatches(parts.recentBatchesMaxBytes)
    this.topicPartition = parseTopicPartition(basename(parts.dir))
    // The loaded parts are LocalLog's options and more.
    this.local = new LocalLog(parts)
    this.logStartOffsetValue = loaded.logStartOffset
    this.highWatermarkValue = minOffset(
      maxOffset(parts.highWatermark, loaded.logStartOffset),
      loaded.logEndOffset,
    )
    this.checkInvariants()
  }

  static async open(options: UnifiedLogOptions): Promise<UnifiedLog> {
    const fs = options.fs
    assert(fs !== undefined, 'UnifiedLog.open needs a file system')
    const clock = options.clock ?? systemClock
    const config = options.config ?? DEFAULT_LOG_CONFIG
    // The broker's logger, each message naming the log: a pino child per replica cost ~190 bytes.
    const logger = options.logger ?? silentLogger
    const { createdNew, leaderEpochCache, loaded } = await openLogDir(options, { fs, config, clock, logger })
    return new UnifiedLog({
      dir: options.dir,
      config,
      fs,
      clock,
      logger,
      leaderEpochCache,
      loaded,
      highWatermark: options.highWatermark ?? (0 as Offset),
      wasCompacted: options.wasCompacted === true,
      recentBatchesMaxBytes: options.recentBatchesMaxBytes ?? RECENT_BATCHES_MAX_BYTES_DEFAULT,
      hooks: options.hooks ?? options,
      createdNew,
    })
  }

  // ---- state ----

  get config(): LogConfig {
    return this.local.config
  }
  /** `<topic>-<partition>`: what its log messages name it. */
  private get name(): string {
    return basename(this.dir)
  }
  get logStartOffset(): Offset {
    return this.logStartOffsetValue
  }
  /** Offset after the last batch whose write completed. */
  get logEndOffset(): Offset {
    return this.local.logEndOffset
  }
  get highWatermark(): Offset {
    return this.highWatermarkValue
  }
  /** Everything below it is fsynced. */
  get recoveryPoint(): Offset {
    return this.local.recoveryPoint
  }
  get latestEpoch(): LeaderEpoch | undefined {
    return this.leaderEpochCache.latestEpoch
  }
  get numberOfSegments(): number {
    return this.local.numberOfSegments
  }
  /** Base offsets of the segments, oldest first. */
  get segmentBaseOffsets(): Offset[] {
    return this.local.segmentBaseOffsets
  }
  get activeSegment(): LogSegment {
    return this.local.activeSegment
  }
  /** Bytes of all segments. */
  get size(): number {
    return this.local.size
  }
  get fileSystem(): FileSystem {
    return this.local.fs
  }
  get producerState(): ProducerStateHook | undefined {
    return this.producerStateHook
  }
  get isOffline(): boolean {
    return this.failure !== undefined
  }
  get unflushedMessages(): number {
    return this.local.unflushedMessages
  }
  get lastFlushTimeMs(): number {
    return this.local.lastFlushTimeMs
  }

  /** New topic configuration; segment sizes apply from the next roll (as in Kafka). */
  updateConfig(config: LogConfig): void {
    this.local.updateConfig(config)
    if (hasCompactPolicy(config)) this.compactedSinceOpen = true
  }

  /**
   * Whether batches may skip offsets: the log is compacted, was when it was opened, or was
   * since. Otherwise a read takes a gap between batches for a damaged base offset (the one
   * header field outside the CRC besides the length and leader epoch), as recovery does.
   */
  private get offsetGapsPossible(): boolean {
    return this.wasCompacted || this.compactedSinceOpen || hasCompactPolicy(this.local.config)
  }
  private compactedSinceOpen = false

  /**
   * Moves the high watermark, clamped into [logStartOffset, logEndOffset] as Kafka's
   * updateHighWatermark does; returns the value set. The replication layer owns its meaning.
   */
  updateHighWatermark(offset: Offset): Offset {
    assert(Number.isSafeInteger(offset), () => `bad high watermark ${offset}`)
    this.highWatermarkValue = minOffset(maxOffset(offset, this.logStartOffsetValue), this.logEndOffset)
    this.checkInvariants()
    this.hooks.onChanged?.()
    return this.highWatermarkValue
  }

  /** Loads `hook` and keeps it in step with this log from then on (once per log). */
  attachProducerState(hook: ProducerStateHook): Promise<void> {
    assert(this.producerStateHook === undefined, () => `${this.dir} already has producer state`)
    return this.enqueue(async () => {
      await hook.load(this.createdNew && this.logEndOffset === this.logStartOffset)
      this.producerStateHook = hook
    })
  }

  // ---- append ----

  /**
   * Appends a produce request's (or a fetch response's) record batches for this partition,
   * concatenated in `batches`. The buffer is taken over and patched in place (base offsets,
   * leader epoch, LogAppendTime); it is written as is, never copied. Validates framing,
   * magic 2, CRC and offsets (log-validator.ts); an invalid buffer is refused whole.
   */
  append(batches: Buffer, options: AppendOptions): Promise<LogAppendInfo> {
    return this.queue.append(batches, options)
  }

  private async runAppends(appends: readonly PendingAppend[]): Promise<void> {
    let nextOffset = this.logEndOffset
    let latestEpoch = this.leaderEpochCache.latestEpoch ?? UNDEFINED_EPOCH
    let group: PreparedAppend[] = []
    let groupBytes = 0
    let groupBatches = 0
    for (const pending of appends) {
      let prepared: PreparedAppend
      try {
        const { batches, epochStarts, info } = this.prepareAppend(pending, nextOffset, latestEpoch)
        // One object shape from the start: a property added later migrates its map on every append.
        prepared = { batches, epochStarts, info, pending, abortedTransactions: undefined }
      } catch (err) {
        pending.reject(err)
        continue
      }
      const bytes = pending.buffer.length
      if (prepared.info.shallowCount === 0) {
        pending.resolve({ ...prepared.info, logStartOffset: this.logStartOffsetValue })
        continue
      }
      const candidate = {
        sizeInBytes: bytes,
        batchCount: prepared.batches.length,
        lastOffset: prepared.info.lastOffset,
        maxTimestamp: prepared.info.maxTimestamp,
      }
      if (this.local.shouldRoll(groupBytes, groupBatches, candidate)) {
        await this.writeGroup(group)
        group = []
        groupBytes = 0
        groupBatches = 0
        await this.rollAt(nextOffset)
      }
      // After the roll, so that a roll's snapshot holds exactly the batches below it.
      let outcome: ProducerAppendOutcome | undefined
      try {
        outcome = this.producerStateHook?.onAppend(pending.buffer, pending.options)
      } catch (err) {
        pending.reject(err)
        continue
      }
      if (outcome?.duplicate !== undefined) {
        pending.resolve(duplicateAppendInfo(outcome.duplicate, this.logStartOffsetValue))
        continue
      }
      prepared.abortedTransactions = outcome?.abortedTransactions
      group.push(prepared)
      groupBytes += bytes
      groupBatches += prepared.batches.length
      nextOffset = (prepared.info.lastOffset + 1) as Offset
      for (const start of prepared.epochStarts) if (start.epoch > latestEpoch) latestEpoch = start.epoch
    }
    await this.writeGroup(group)
  }

  /** Validates one append and assigns (or checks) its offsets; throws to refuse it whole. */
  private prepareAppend(
    pending: PendingAppend,
    nextOffset: Offset,
    latestEpoch: LeaderEpoch,
  ): ValidatedAppend {
    const config = this.config
    return validateAppend(
      pending.buffer,
      appendRules(pending.options, config, {
        nextOffset,
        latestEpoch,
        nowMs: () => this.clock.nowMs(),
        offsetGapsAllowed: this.wasCompacted || hasCompactPolicy(config),
      }),
    )
  }

  private async writeGroup(group: readonly PreparedAppend[]): Promise<void> {
    if (group.length === 0) return
    const buffers = group.map((p) => p.pending.buffer)
    const batches = group.flatMap((p) => p.batches)
    // As Kafka's UnifiedLog.append: the markers' segment indexes the transactions they aborted.
    const txnIndex = this.local.activeSegment.txnIndex
    const indexed = txnIndex.appendAll(group.flatMap((p) => p.abortedTransactions ?? []))
    await this.local.append(buffers, batches, group[group.length - 1].info.lastOffset)
    this.recent.add(buffers, batches)
    await indexed
    for (const prepared of group) {
      for (const { epoch, startOffset } of prepared.epochStarts)
        await this.leaderEpochCache.assign(epoch, startOffset)
    }
    this.checkInvariants()
    if (this.unflushedMessages >= this.config.flushMessages) await this.flushUpTo(this.logEndOffset)
    else this.armFlushTimer()
    for (const prepared of group)
      prepared.pending.resolve({ ...prepared.info, logStartOffset: this.logStartOffsetValue })
  }

  // ---- roll and flush ----

  /** Closes the active segment for writes and starts a new one at the log end offset. */
  roll(): Promise<void> {
    return this.enqueue(() => this.rollAt(this.logEndOffset))
  }

  private async rollAt(newBaseOffset: Offset): Promise<void> {
    if (!(await this.local.roll(newBaseOffset))) return
    this.checkInvariants()
    await this.producerStateHook?.onRoll(newBaseOffset)
  }

  /** fsync of everything appended before this call; moves the recovery point to the log end. */
  flush(): Promise<void> {
    return this.enqueue(() => this.flushUpTo(this.logEndOffset))
  }

  private async flushUpTo(offset: Offset): Promise<void> {
    this.cancelFlushTimer()
    if (offset <= this.local.recoveryPoint) return
    const startedMs = this.clock.monotonicMs()
    await this.local.flush(offset)
    this.checkInvariants()
    this.hooks.onFlushed?.(this.clock.monotonicMs() - startedMs)
  }

  /** flush.ms: one timer per log, armed while there is unflushed data. */
  private armFlushTimer(): void {
    if (this.flushTimer !== undefined || !Number.isFinite(this.config.flushMs)) return
    if (this.unflushedMessages === 0) return
    const dueInMs = Math.max(0, this.lastFlushTimeMs + this.config.flushMs - this.clock.nowMs())
    this.flushTimer = this.clock.setTimeout(() => {
      this.flushTimer = undefined
      this.flush().catch((err: unknown) =>
        this.logger.error({ log: this.name, err }, 'scheduled flush failed'),
      )
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
    return retryingReplacedSegments(() => this.readOnce(startOffset, options))
  }

  private async readOnce(startOffset: Offset, options: ReadOptions): Promise<FetchDataInfo> {
    const unusable = this.unusableError()
    if (unusable !== undefined) throw unusable
    const logStartOffset = this.logStartOffsetValue
    const logEndOffset = this.logEndOffset
    if (startOffset < logStartOffset || startOffset > logEndOffset) {
      throw offsetOutOfRange(startOffset, logStartOffset, logEndOffset)
    }
    const readEnd = minOffset(options.maxOffset ?? logEndOffset, logEndOffset)
    const highWatermark = this.highWatermarkValue
    if (startOffset >= readEnd) {
      return {
        records: [],
        sizeInBytes: 0,
        firstOffset: startOffset,
        nextOffset: startOffset,
        highWatermark,
        logStartOffset,
        logEndOffset,
      }
    }
    const minOneMessage = options.minOneMessage ?? true
    const recent = this.recent.read(startOffset, readEnd, options.maxBytes, minOneMessage)
    if (recent !== undefined) return { ...recent, highWatermark, logStartOffset, logEndOffset }
    const read = await this.local.read(
      startOffset,
      readEnd,
      options.maxBytes,
      minOneMessage,
      this.offsetGapsPossible,
    )
    return { ...read, highWatermark, logStartOffset, logEndOffset }
  }

  // ---- transactions ----

  /**
   * Kafka's collectAbortedTransactions: the aborted transactions overlapping
   * [startOffset, upperBoundOffset), from the `.txnindex` of the segment holding
   * `startOffset` and of later ones until an entry's LSO passes the bound.
   */
  collectAbortedTransactions(startOffset: Offset, upperBoundOffset: Offset): AbortedTxn[] {
    return this.local.collectAbortedTransactions(startOffset, upperBoundOffset)
  }

  /**
   * For the producer state as it loads, on this log's queue: makes sure the segment holding
   * each marker indexes its aborted transaction (an index write a crash lost). Entries
   * already there, and markers the log no longer holds, are skipped.
   */
  indexAbortedTransactions(entries: readonly AbortedTxn[]): Promise<void> {
    return this.local.indexAbortedTransactions(entries, this.logStartOffsetValue)
  }

  // ---- lookups ----

  /**
   * ListOffsets by time: the first record at or after logStartOffset with timestamp >=
   * `timestampMs`, through the time index, exact per record as in Kafka (compressed batches
   * are decompressed; a LogAppendTime batch's records all carry its time). Undefined when no
   * record is that late.
   */
  offsetForTimestamp(timestampMs: number): Promise<TimestampAndOffset | undefined> {
    return retryingReplacedSegments(() => this.offsetForTimestampOnce(timestampMs))
  }

  private async offsetForTimestampOnce(timestampMs: number): Promise<TimestampAndOffset | undefined> {
    const found = await this.local.offsetForTimestamp(timestampMs, this.logStartOffsetValue)
    if (found === undefined) return undefined
    return { ...found, leaderEpoch: this.leaderEpochCache.epochForOffset(found.offset) }
  }

  /** ListOffsets MAX_TIMESTAMP: the largest timestamp and the offset of its record. */
  latestTimestamp(): Promise<TimestampAndOffset | undefined> {
    return retryingReplacedSegments(() => this.latestTimestampOnce())
  }

  private async latestTimestampOnce(): Promise<TimestampAndOffset | undefined> {
    const found = await this.local.latestTimestamp()
    if (found === undefined) return undefined
    return { ...found, leaderEpoch: this.leaderEpochCache.epochForOffset(found.offset) }
  }

  /** OffsetForLeaderEpoch: the end offset of `leaderEpoch` in this log, or undefined if unknown. */
  endOffsetForEpoch(leaderEpoch: LeaderEpoch): EpochEndOffset | undefined {
    const found = this.leaderEpochCache.endOffsetFor(leaderEpoch, this.logEndOffset)
    return found.endOffset === UNDEFINED_EPOCH_OFFSET ? undefined : found
  }

  // ---- truncation and deletion ----

  /**
   * Follower truncation (Kafka's truncateTo): removes every batch from the one holding
   * `targetOffset`. The log then ends after the last batch kept (below the target when that
   * batch straddles it or compaction emptied the offsets before it), so it always ends on a
   * batch boundary, yet not below the log start offset unless the target is. False when
   * nothing was removed.
   */
  truncateTo(targetOffset: Offset): Promise<boolean> {
    assert(
      Number.isSafeInteger(targetOffset) && targetOffset >= 0,
      () => `cannot truncate to ${targetOffset}`,
    )
    return this.enqueue(async () => {
      if (targetOffset >= this.logEndOffset) return false
      if (this.local.firstSegment.baseOffset > targetOffset) {
        await this.truncateFullyAndStartAtNow(targetOffset)
        return true
      }
      await this.truncateSegmentsTo(targetOffset)
      return true
    })
  }

  private async truncateSegmentsTo(targetOffset: Offset): Promise<void> {
    this.recent.clear()
    const logEndOffset = await this.local.truncateTo(targetOffset, this.logStartOffsetValue)
    await this.afterTruncationTo(logEndOffset)
  }

  /** What every cut of the log's tail but a full one updates, in this order, for the new log end. */
  private async afterTruncationTo(logEndOffset: Offset): Promise<void> {
    this.noteTruncation(logEndOffset)
    await this.hooks.onTruncated?.(logEndOffset, this)
    this.logStartOffsetValue = minOffset(this.logStartOffsetValue, logEndOffset)
    this.highWatermarkValue = minOffset(this.highWatermarkValue, logEndOffset)
    this.checkInvariants()
    await this.leaderEpochCache.truncateFromEnd(logEndOffset)
    this.checkInvariants()
    await this.producerStateHook?.onTruncated()
  }

  /**
   * A follower's read found a damaged batch (CorruptSegmentError): its segment is validated
   * and cut at the first bad batch, later segments go, and the replica fetches the rest
   * from the leader again (its fetch offset is the log end). A leader must not do this: it
   * would drop committed records it alone may still be asked for; it goes offline instead
   * (markCorrupt). Resolves to the new log end offset, or undefined if nothing changed.
   */
  truncateAtCorruption(err: CorruptSegmentError): Promise<Offset | undefined> {
    return this.enqueue(async () => {
      this.recent.clear()
      const before = this.logEndOffset
      const cut = await this.local.truncateAtCorruption(
        err.segmentBaseOffset as Offset,
        this.offsetGapsPossible,
      )
      if (cut === undefined) return undefined
      const { logEndOffset } = cut
      await this.afterTruncationTo(logEndOffset)
      this.logger.error(
        {
          log: this.name,
          segment: err.segmentPath,
          position: err.position,
          problem: err.problem,
          from: before,
          to: logEndOffset,
          truncatedBytes: cut.truncatedBytes,
        },
        'truncated a corrupt log segment; the replica fetches the rest from the leader again',
      )
      return logEndOffset
    })
  }

  /** A leader's read found a damaged batch: the log, and so its log dir, goes offline (Kafka's disk-failure path). */
  markCorrupt(err: CorruptSegmentError): void {
    this.logger.error(
      { log: this.name, segment: err.segmentPath, position: err.position, problem: err.problem },
      'corrupt record batch in a leader log: taking its log dir offline so an in-sync replica leads',
    )
    this.fail(err)
  }

  /** Deletes everything and restarts the log empty at `newOffset` (a replica that must refetch all). */
  truncateFullyAndStartAt(newOffset: Offset): Promise<void> {
    assert(Number.isSafeInteger(newOffset) && newOffset >= 0, () => `cannot restart at ${newOffset}`)
    return this.enqueue(() => this.truncateFullyAndStartAtNow(newOffset))
  }

  private async truncateFullyAndStartAtNow(newOffset: Offset): Promise<void> {
    this.recent.clear()
    const deletedSegments = await this.local.truncateFullyAndStartAt(newOffset)
    this.noteTruncation(newOffset)
    await this.hooks.onTruncated?.(newOffset, this)
    this.logStartOffsetValue = newOffset
    this.highWatermarkValue = newOffset
    this.checkInvariants()
    await this.leaderEpochCache.clearAndFlush()
    this.logger.info({ log: this.name, newOffset, deletedSegments }, 'truncated log fully')
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
        (segment) => this.local.nextBaseOffset(segment) <= this.logStartOffsetValue,
      )
      const config = this.config
      if (!hasDeletePolicy(config)) return deleted
      let excessBytes = this.size - config.retentionBytes
      deleted += await this.deleteSegmentsWhile((segment) => {
        if (excessBytes - segment.size < 0) return false
        excessBytes -= segment.size
        return true
      })
      const nowMs = this.clock.nowMs()
      const expired = (segment: LogSegment) => nowMs - segment.largestTimestamp > config.retentionMs
      await this.local.loadOldestWhile(expired)
      deleted += await this.deleteSegmentsWhile(expired)
      return deleted
    })
  }

  /** Deletes the oldest segments while `predicate` holds, stopping at the active one or the high watermark. */
  private async deleteSegmentsWhile(predicate: (segment: LogSegment) => boolean): Promise<number> {
    const deletable = this.local.deletableSegments(this.highWatermarkValue, predicate)
    if (deletable.length === 0) return 0
    const removed = this.local.removeOldestSegments(deletable.length)
    this.logStartOffsetValue = maxOffset(this.logStartOffsetValue, this.local.firstSegment.baseOffset)
    // Nothing below the log start is read again: recovery never needs to scan it.
    this.local.raiseRecoveryPoint(this.logStartOffsetValue)
    this.checkInvariants()
    await this.leaderEpochCache.truncateFromStart(this.logStartOffsetValue)
    await this.local.deleteSegmentFiles(removed)
    this.checkInvariants()
    await this.producerStateHook?.onSegmentsDeleted(this.logStartOffsetValue)
    return removed.length
  }

  // ---- log cleaner ----

  private noteTruncation(logEndOffset: Offset): void {
    this.truncatedToSinceCleaning = minOffset(this.truncatedToSinceCleaning ?? logEndOffset, logEndOffset)
  }

  /** The lowest log end a truncation left since the last call, then forgets it (the cleaner's dirty offset follows it). */
  takeTruncationSinceCleaning(): Offset | undefined {
    const offset = this.truncatedToSinceCleaning
    this.truncatedToSinceCleaning = undefined
    return offset
  }

  /** The segments, oldest first, for the cleaner to read (it never writes them). */
  get segmentList(): readonly LogSegment[] {
    return this.local.segmentList
  }

  /** A new empty segment with `.cleaned` files, for the cleaner to fill; not part of the log yet. */
  createCleanedSegment(baseOffset: Offset): Promise<LogSegment> {
    return this.local.createSegment(baseOffset, CLEANED_FILE_SUFFIX)
  }

  /**
   * Swaps `cleaned` (complete, fsynced, `.cleaned` files) in for `oldSegments`, consecutive
   * inactive segments it was built from, as Kafka's replaceSegments does, crash-safely
   * (LocalLog.replaceSegments). False, with nothing changed, when the old segments are no
   * longer what the cleaner read (truncated, deleted by retention, grown into the active
   * segment).
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
      const first = this.local.indexOfUnchanged(oldSegments, sizes)
      if (first === undefined) return false
      this.recent.clear()
      await this.local.replaceSegments(first, oldSegments, cleaned)
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
      await this.flushUpTo(this.logEndOffset)
      await this.producerStateHook?.onClose()
      await this.local.close()
      this.closed = true
    })
    this.closing = true
    this.pendingClose = done
    return done
  }

  /** Closes file handles without flushing or trimming: the directory failed, or a test simulates a crash. */
  async closeHandlers(): Promise<void> {
    this.cancelFlushTimer()
    this.recent.clear()
    this.closed = true
    await this.local.closeHandlers()
  }

  /** Closes and removes the partition directory (the replica was deleted). */
  async delete(): Promise<void> {
    await this.close()
    await this.local.deleteDir()
  }

  // ---- the queue ----

  /** An append, truncation or other queued operation is under way or waiting. */
  get hasQueuedWork(): boolean {
    return this.queue.hasQueuedWork
  }

  private enqueue<T>(run: () => Promise<T>): Promise<T> {
    return this.queue.enqueue(run)
  }

  /** A failed disk operation: the log goes offline; everything queued and later fails. */
  private fail(err: unknown): void {
    if (this.failure !== undefined) return
    this.failure = isStorageError(err, 'KAFKA_STORAGE_ERROR')
      ? err
      : storageFailure(`log ${this.dir} failed`, err)
    this.logger.error({ log: this.name, err }, 'log went offline after a failed disk operation')
    this.recent.clear()
    this.cancelFlushTimer()
    this.hooks.onStorageError?.(this.failure, this)
    this.queue.rejectAll(this.failure)
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
    const leo = this.logEndOffset
    assert(lso <= hw, () => `logStartOffset ${lso} > highWatermark ${hw}`)
    assert(hw <= leo, () => `highWatermark ${hw} > logEndOffset ${leo}`)
    this.local.checkInvariants()
  }
}
