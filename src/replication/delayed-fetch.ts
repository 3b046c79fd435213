/**
 * The fetch purgatory: a fetch that found fewer than minBytes waits until enough data is
 * committed on one of its partitions or until maxWaitMs passes, whichever comes first. It
 * completes exactly once; every watcher it registered is removed when it does.
 */
import type { Clock } from '../common/clock.js'
import type { Partition } from './partition.js'

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
): Promise<void> {
  return new Promise((resolve) => {
    let completed = false
    const removers: (() => void)[] = []
    const complete = (): void => {
      if (completed) return
      completed = true
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
    for (const watch of watches) removers.push(watch.partition.watchHighWatermark(check))
  })
}
