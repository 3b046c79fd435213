/**
 * Delayed operations (Kafka's purgatories), each completing exactly once and removing every
 * watcher it registered: a fetch that found fewer than minBytes waits until enough data is
 * committed (consumers) or appended (followers) on its partitions or maxWaitMs passes; an
 * acks=all produce waits until the high watermark covers its records or it times out.
 */

import type { Clock } from '../common/clock.js'
import type { Offset } from '../common/types.js'
import type { Partition } from './partition.js'

/**
 * Told when a request starts and stops waiting in a purgatory, for the request metrics'
 * remote time and the purgatory sizes. Optional: the core works without one.
 */
export interface PurgatoryTimer {
  enter(purgatory: 'Produce' | 'Fetch'): void
  leave(purgatory: 'Produce' | 'Fetch'): void
}

export interface DelayedFetchWatch {
  readonly partition: Partition
  /** The request's fetch offset on this partition. */
  readonly fetchOffset: Offset
  /**
   * Taken before the fetch's first read, so that data arriving during that read counts as
   * new: bytes of the log, the end offset this reader may read up to (the high watermark
   * for consumers, the log end for followers) and the leader epoch.
   */
  readonly logSizeAtStart: number
  readonly visibleEndAtStart: number
  readonly leaderEpochAtStart: number
}

/**
 * Followers read up to the log end and wake on appends, consumers on commits: up to the
 * high watermark, or for read_committed up to the LSO (which only moves with the high
 * watermark, so the same watchers wake both).
 */
export type FetchWakeOn = 'highWatermark' | 'lastStableOffset' | 'logEnd'

/** The baseline of a delayed fetch on `partition`; take it before the first read. */
export function fetchWatch(
  partition: Partition,
  fetchOffset: Offset,
  wakeOn: FetchWakeOn,
): DelayedFetchWatch {
  return {
    partition,
    fetchOffset,
    logSizeAtStart: partition.log.size,
    visibleEndAtStart: visibleEnd(partition, wakeOn),
    leaderEpochAtStart: partition.leaderEpoch,
  }
}

function visibleEnd(partition: Partition, wakeOn: FetchWakeOn): number {
  if (wakeOn === 'logEnd') return partition.log.logEndOffset
  return wakeOn === 'lastStableOffset' ? partition.lastStableOffset : partition.highWatermark
}

/**
 * What `watch`'s partition adds to the fetch's total: only what became readable counts. The
 * log's growth measures it in bytes; records appended before the baseline and committed
 * since did not grow it, yet they are new to this fetch: they count as at least one byte
 * (minBytes is 1 for most clients).
 */
function gainedSince(watch: DelayedFetchWatch, wakeOn: FetchWakeOn): number {
  const end = visibleEnd(watch.partition, wakeOn)
  if (end <= watch.visibleEndAtStart || end <= watch.fetchOffset) return 0
  return Math.max(1, watch.partition.log.size - watch.logSizeAtStart)
}

/**
 * Resolves when the watched partitions have gained at least `bytesNeeded` bytes in total
 * since their baselines, or after `maxWaitMs`; at once when a partition's leadership
 * changed (the re-read answers the error), as Kafka's DelayedFetch does. Checks once after
 * registering its watchers, as a purgatory's tryComplete does: an append or commit between
 * the baseline and the registration fired no watcher.
 *
 * A change re-reads only the partition whose watcher fired and adjusts the running total by
 * that partition's difference: a follower's fetch watches thousands of partitions, and a
 * walk over all of them per append or commit made a broker's CPU grow with the square of its
 * partition count under a creation storm (issue 38). Each partition's watchers fire on every
 * change that can move its share (the high watermark, the log end for followers, its
 * leadership), so the total equals what a full walk would find, except that a consumer's
 * partition counts bytes appended above its high watermark only once that moves (they are
 * not readable before).
 */
export function waitForFetchData(
  clock: Clock,
  watches: readonly DelayedFetchWatch[],
  bytesNeeded: number,
  maxWaitMs: number,
  wakeOn: FetchWakeOn = 'highWatermark',
  purgatoryTimer?: PurgatoryTimer,
  /** Registers a wake-up from outside the watches (a follower session's clean partitions). */
  watchMore?: (wake: () => void) => () => void,
): Promise<void> {
  purgatoryTimer?.enter('Fetch')
  return new Promise((resolve) => {
    let completed = false
    const removers: (() => void)[] = []
    const complete = (): void => {
      if (completed) return
      completed = true
      purgatoryTimer?.leave('Fetch')
      timer.cancel()
      for (const remove of removers) remove()
      resolve()
    }
    // Each watch's last counted share, and their sum.
    const counted = new Float64Array(watches.length)
    let gained = 0
    const checkOne = (index: number): void => {
      if (completed) return
      const watch = watches[index]
      const p = watch.partition
      if (!p.isLeader || p.leaderEpoch !== watch.leaderEpochAtStart) {
        complete()
        return
      }
      const share = gainedSince(watch, wakeOn)
      gained += share - counted[index]
      counted[index] = share
      if (gained >= bytesNeeded) complete()
    }
    const timer = clock.setTimeout(complete, maxWaitMs)
    for (let index = 0; index < watches.length; index++) {
      const p = watches[index].partition
      const check = (): void => checkOne(index)
      removers.push(p.watchHighWatermark(check))
      // A follower's fetch wakes on appends too; the high watermark's watchers also hear of
      // leadership changes.
      if (wakeOn === 'logEnd') removers.push(p.watchLogEnd(check))
    }
    if (watchMore !== undefined) removers.push(watchMore(complete))
    for (let index = 0; index < watches.length && !completed; index++) checkOne(index)
  })
}

/**
 * The produce purgatory for acks=all: resolves true once the high watermark reaches
 * `targetOffset` (every ISR member has the records), false after `timeoutMs` or as soon as
 * the leadership at `leaderEpoch` ends (its records may be truncated; a high watermark
 * learnt as a follower says nothing about them). Completes exactly once and removes its
 * watcher.
 */
export function waitForHighWatermark(
  clock: Clock,
  partition: Partition,
  targetOffset: Offset,
  timeoutMs: number,
  leaderEpoch = partition.leaderEpoch,
  purgatoryTimer?: PurgatoryTimer,
): Promise<boolean> {
  const deposed = (): boolean => !partition.isLeader || partition.leaderEpoch !== leaderEpoch
  if (deposed()) return Promise.resolve(false)
  if (partition.highWatermark >= targetOffset) return Promise.resolve(true)
  purgatoryTimer?.enter('Produce')
  return new Promise((resolve) => {
    let completed = false
    const complete = (reached: boolean): void => {
      if (completed) return
      completed = true
      purgatoryTimer?.leave('Produce')
      timer.cancel()
      unwatch()
      resolve(reached)
    }
    const timer = clock.setTimeout(() => complete(false), timeoutMs)
    const unwatch = partition.watchHighWatermark(() => {
      if (deposed()) complete(false)
      else if (partition.highWatermark >= targetOffset) complete(true)
    })
  })
}
