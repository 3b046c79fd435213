/**
 * Timers of one shard (Kafka's CoordinatorTimer): keyed, re-armed by key, all cancelled
 * when the shard is unloaded, so no task of a dropped shard ever runs.
 */
import { assert } from '../../common/assert.js'
import type { Clock, TimerHandle } from '../../common/clock.js'

export type TimerKey = string | symbol

interface Armed {
  readonly atMs: number
  handle: TimerHandle
}

const NOT_ARMED: TimerHandle = { cancel: () => undefined }

export class CoordinatorTimer {
  private readonly timers = new Map<TimerKey, Armed>()
  private closed = false

  constructor(private readonly clock: Clock) {}

  /**
   * Runs `task` at wall-clock `atMs` (at once if past), replacing what `key` had armed; a
   * timer already armed for the same time is kept as it is.
   */
  schedule(key: TimerKey, atMs: number, task: () => void): void {
    if (this.closed) return
    const armed = this.timers.get(key)
    if (armed?.atMs === atMs) return
    armed?.handle.cancel()
    const delayMs = Math.max(0, atMs - this.clock.nowMs())
    const entry: Armed = { atMs, handle: NOT_ARMED }
    this.timers.set(key, entry)
    entry.handle = this.clock.setTimeout(() => {
      if (this.timers.get(key) !== entry) return
      this.timers.delete(key)
      if (!this.closed) task()
    }, delayMs)
  }

  cancel(key: TimerKey): void {
    this.timers.get(key)?.handle.cancel()
    this.timers.delete(key)
  }

  isScheduled(key: TimerKey): boolean {
    return this.timers.has(key)
  }

  /** Cancels every timer; later schedules are ignored. */
  close(): void {
    for (const timer of this.timers.values()) timer.handle.cancel()
    this.timers.clear()
    this.closed = true
    assert(this.timers.size === 0, 'a closed timer holds no task')
  }
}
