/**
 * Delayed operations (Kafka's purgatories), each completing exactly once and removing every
 * watcher it registered: a fetch that found fewer than minBytes waits until enough data is
 * committed (consumers) or appended (followers) on its partitions or maxWaitMs passes; an
 * acks=all produce waits until the high watermark covers its records or it times out.
 */
import type { Clock } from '../common/clock.js'
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
  /** Bytes of the log when the fetch started waiting; growth beyond it counts as new data. */
  readonly logSizeAtStart: number
}

/**
 * Resolves when the watched partitions have gained at least `bytesNeeded` bytes in total
 * since the wait began (committed: the high watermark moved), or after `maxWaitMs`.
 */
export function waitForFetchData(
  clock: Clock,
  watches: readonly DelayedFetchWatch[],
  bytesNeeded: number,
  maxWaitMs: number,
  /** Followers wake on appends (they read up to the log end), consumers on commits. */
  wakeOn: 'highWatermark' | 'logEnd' = 'highWatermark',
  purgatoryTimer?: PurgatoryTimer,
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
    const check = (): void => {
      let gained = 0
      for (const watch of watches) gained += Math.max(0, watch.partition.log.size - watch.logSizeAtStart)
      if (gained >= bytesNeeded) complete()
    }
    const timer = clock.setTimeout(complete, maxWaitMs)
    for (const watch of watches) {
      const p = watch.partition
      removers.push(wakeOn === 'logEnd' ? p.watchLogEnd(check) : p.watchHighWatermark(check))
    }
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
  targetOffset: number,
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
