/**
 * Which leader epoch started at which offset, persisted in Kafka's leader-epoch-checkpoint
 * (version 0, count, `epoch startOffset` lines). Followers use it through
 * OffsetForLeaderEpoch to truncate to the leader's log instead of to the high watermark
 * (KIP-101/279), which is how Kafka avoids losing or diverging committed data.
 *
 * Invariant after every change: epochs strictly increase and so do start offsets.
 */
import { assert } from '../common/assert.js'
import type { FileSystem } from '../common/file-system.js'
import type { Logger } from '../common/logger.js'
import type { LeaderEpoch, Offset } from '../common/types.js'
import {
  CheckpointFile,
  CheckpointFormatError,
  type EpochEntry,
  epochEntryFormat,
} from './checkpoint-file.js'
import { joinFlat } from './log-file-names.js'

export const LEADER_EPOCH_CHECKPOINT_FILENAME = 'leader-epoch-checkpoint'
/** Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET. */
export const UNDEFINED_EPOCH = -1 as LeaderEpoch
export const UNDEFINED_EPOCH_OFFSET = -1 as Offset

export interface EpochEndOffset {
  readonly leaderEpoch: LeaderEpoch
  readonly endOffset: Offset
}

export class LeaderEpochFileCache {
  private epochs: EpochEntry[]
  /**
   * The checkpoint was malformed or out of order when loaded: its entries cannot be
   * trusted, so the log recovers every segment, which assigns the epochs again from the
   * batches' partitionLeaderEpoch fields.
   */
  damaged = false

  private constructor(
    private readonly checkpoint: CheckpointFile<EpochEntry>,
    entries: EpochEntry[],
    private readonly logger: Logger,
  ) {
    this.epochs = entries
    this.checkInvariants()
  }

  /** `newDir`: the log's directory was just made, so there is no checkpoint to read yet. */
  static async load(
    fs: FileSystem,
    dir: string,
    logger: Logger,
    newDir = false,
  ): Promise<LeaderEpochFileCache> {
    const checkpoint = new CheckpointFile(
      fs,
      joinFlat(dir, LEADER_EPOCH_CHECKPOINT_FILENAME),
      epochEntryFormat,
    )
    if (newDir) return new LeaderEpochFileCache(checkpoint, [], logger)
    let entries: EpochEntry[]
    try {
      entries = await checkpoint.read()
    } catch (err) {
      if (!(err instanceof CheckpointFormatError)) throw err
      logger.warn(
        { path: checkpoint.path, err: err.message },
        'leader-epoch-checkpoint is malformed; starting from an empty cache, recovered from the batches',
      )
      const cache = new LeaderEpochFileCache(checkpoint, [], logger)
      cache.damaged = true
      return cache
    }
    const sorted = entries.every(
      (e, i) => i === 0 || (e.epoch > entries[i - 1].epoch && e.startOffset > entries[i - 1].startOffset),
    )
    if (!sorted) {
      // A hand-edited or foreign file: keep the monotonic prefix, recovery re-adds the rest from the batches.
      logger.warn(
        { path: checkpoint.path },
        'leader-epoch-checkpoint is not monotonic; keeping its valid prefix',
      )
      const kept: EpochEntry[] = []
      for (const e of entries) {
        const last = kept.at(-1)
        if (last !== undefined && (e.epoch <= last.epoch || e.startOffset <= last.startOffset)) break
        kept.push(e)
      }
      const cache = new LeaderEpochFileCache(checkpoint, kept, logger)
      cache.damaged = true
      return cache
    }
    return new LeaderEpochFileCache(checkpoint, entries, logger)
  }

  entries(): readonly EpochEntry[] {
    return this.epochs
  }
  get latestEntry(): EpochEntry | undefined {
    return this.epochs.at(-1)
  }
  get latestEpoch(): LeaderEpoch | undefined {
    return this.epochs.at(-1)?.epoch
  }
  get earliestEntry(): EpochEntry | undefined {
    return this.epochs[0]
  }

  /**
   * Records that `epoch` starts at `startOffset` (Kafka's assign): a no-op for the current
   * epoch; entries that the new one contradicts (same or later epoch, same or later start)
   * are removed, which only happens after a truncation the cache has not seen.
   */
  async assign(epoch: LeaderEpoch, startOffset: Offset): Promise<void> {
    assert(epoch >= 0 && startOffset >= 0, () => `cannot assign epoch ${epoch} at ${startOffset}`)
    const last = this.latestEntry
    if (last !== undefined && last.epoch === epoch && last.startOffset <= startOffset) return
    const removed = this.removeFromEnd((e) => e.epoch >= epoch || e.startOffset >= startOffset)
    if (removed.length > 1 || (removed.length === 1 && removed[0].startOffset !== startOffset)) {
      this.logger.warn(
        { path: this.checkpoint.path, epoch, startOffset, removed },
        'leader epoch cache: removed entries contradicting a new epoch',
      )
    }
    this.epochs.push({ epoch, startOffset })
    await this.flush()
  }

  /** The epoch of the batch holding `offset`, or undefined when it precedes every entry. */
  epochForOffset(offset: Offset): LeaderEpoch | undefined {
    let found: LeaderEpoch | undefined
    for (const e of this.epochs) {
      if (e.startOffset > offset) break
      found = e.epoch
    }
    return found
  }

  /**
   * OffsetForLeaderEpoch (Kafka's endOffsetFor): the largest epoch <= `requestedEpoch` and
   * the offset where the next epoch starts (logEndOffset for the latest epoch).
   */
  endOffsetFor(requestedEpoch: LeaderEpoch, logEndOffset: Offset): EpochEndOffset {
    const undefinedResult = { leaderEpoch: UNDEFINED_EPOCH, endOffset: UNDEFINED_EPOCH_OFFSET }
    if (requestedEpoch === UNDEFINED_EPOCH) return undefinedResult
    if (this.latestEpoch === requestedEpoch) return { leaderEpoch: requestedEpoch, endOffset: logEndOffset }
    const higher = this.epochs.find((e) => e.epoch > requestedEpoch)
    if (higher === undefined) return undefinedResult
    const floor = this.epochs.findLast((e) => e.epoch <= requestedEpoch)
    // Older than every known epoch: answer the first known start, so the follower refetches from there.
    if (floor === undefined) return { leaderEpoch: requestedEpoch, endOffset: higher.startOffset }
    return { leaderEpoch: floor.epoch, endOffset: higher.startOffset }
  }

  /** Removes epochs starting at or after `endOffset` (the log was truncated there). */
  async truncateFromEnd(endOffset: Offset): Promise<void> {
    const last = this.latestEntry
    if (endOffset < 0 || last === undefined || last.startOffset < endOffset) return
    this.removeFromEnd((e) => e.startOffset >= endOffset)
    // None may be left at or past the end (entries out of start order would leave one): a
    // follower's OffsetForLeaderEpoch answer would point past the records this log holds.
    const left = this.epochs.find((e) => e.startOffset >= endOffset)
    assert(
      left === undefined,
      () => `epoch ${left?.epoch} starts at ${left?.startOffset}, not below the truncated end ${endOffset}`,
    )
    await this.flush()
  }

  /** The log now starts at `startOffset`: older epochs go, the one covering it is moved up to it. */
  async truncateFromStart(startOffset: Offset): Promise<void> {
    let covering: EpochEntry | undefined
    let removed = 0
    while (this.epochs.length > 0 && this.epochs[0].startOffset <= startOffset) {
      covering = this.epochs.shift()
      removed++
    }
    if (covering === undefined) return
    this.epochs.unshift({ epoch: covering.epoch, startOffset })
    // Every log load calls this with its start offset, which the first entry usually holds
    // already: rewriting the same file (two fsyncs and a rename) cost each partition of a
    // restart more than the rest of its load.
    if (removed === 1 && covering.startOffset === startOffset) return
    await this.flush()
  }

  async clearAndFlush(): Promise<void> {
    this.epochs = []
    await this.flush()
  }

  private removeFromEnd(predicate: (e: EpochEntry) => boolean): EpochEntry[] {
    const removed: EpochEntry[] = []
    while (this.epochs.length > 0 && predicate(this.epochs[this.epochs.length - 1]))
      removed.unshift(this.epochs.pop()!)
    return removed
  }

  private async flush(): Promise<void> {
    this.checkInvariants()
    await this.checkpoint.write(this.epochs)
  }

  private checkInvariants(): void {
    for (let i = 1; i < this.epochs.length; i++) {
      assert(
        this.epochs[i].epoch > this.epochs[i - 1].epoch,
        () => `leader epochs decrease: ${JSON.stringify(this.epochs)}`,
      )
      assert(
        this.epochs[i].startOffset > this.epochs[i - 1].startOffset,
        () => `epoch start offsets decrease: ${JSON.stringify(this.epochs)}`,
      )
    }
  }
}
