/**
 * When a small append may be written on the event loop itself (writevSync) instead of
 * through libuv's thread pool.
 *
 * Why: at a few thousand single-record requests a second the thread-pool round trip of an
 * asynchronous writev is most of a request's cost. It wakes a pool thread and then the event
 * loop once more, each into cold caches on a busy 2-core machine, about 10x the CPU and wall
 * time of the syscall itself (docs/notes/performance.md). Kafka writes to the page cache in its
 * request threads for the same reason.
 *
 * Why not always: a write to the page cache sometimes blocks for tens of milliseconds (dirty
 * page throttling, the journal), and a single event loop then stalls every partition and
 * connection of the broker. An earlier build that always wrote synchronously saw its
 * event-loop delay max at 33-238 ms under heavy load against 15-30 ms through the pool. So
 * each synchronous write is timed, and one that takes longer than `stallMs` sends the
 * following appends back to the pool for `pauseMs`, doubled for each stall that follows a
 * pause (up to `maxPauseMs`) and reset after `calmMs` of synchronous writes with no stall.
 * A disk that stalls then costs the loop one stall per pause, not one per write.
 */

export interface SyncAppendOptions {
  /** Appends above this size always go to the pool (a follower catching up, a large batch). */
  readonly maxBytes: number
  /** A synchronous write longer than this counts as a stall. */
  readonly stallMs: number
  /** How long the first stall sends appends to the pool. */
  readonly pauseMs: number
  readonly maxPauseMs: number
  /** Synchronous writes without a stall for this long forget the earlier stalls. */
  readonly calmMs: number
}

export const DEFAULT_SYNC_APPEND_OPTIONS: SyncAppendOptions = {
  // A 256 KiB copy into the page cache takes 30-100 µs here; a 1 KiB one 2-4 µs.
  maxBytes: 256 * 1024,
  // Far above a page-cache write, and below what a client sees as a latency spike.
  stallMs: 2,
  pauseMs: 1_000,
  maxPauseMs: 60_000,
  calmMs: 60_000,
}

export class SyncAppendPolicy {
  private pausedUntilMs = Number.NEGATIVE_INFINITY
  private nextPauseMs: number
  private stallCount = 0

  constructor(
    private readonly options: SyncAppendOptions,
    private readonly nowMs: () => number,
  ) {
    if (!(options.pauseMs > 0 && options.maxPauseMs >= options.pauseMs))
      throw new RangeError('SyncAppendPolicy: need 0 < pauseMs <= maxPauseMs')
    this.nextPauseMs = options.pauseMs
  }

  /** The current time, if an append of `bytes` may be written synchronously now; else undefined. */
  startSync(bytes: number): number | undefined {
    if (bytes > this.options.maxBytes) return undefined
    const now = this.nowMs()
    return now >= this.pausedUntilMs ? now : undefined
  }

  /** Reports how a synchronous write that startSync allowed at `startedMs` went. */
  finishSync(startedMs: number): void {
    const now = this.nowMs()
    if (now - startedMs <= this.options.stallMs) return
    this.stallCount++
    // Writing synchronously since the last pause ended for calmMs: that stall is forgotten.
    if (now - this.pausedUntilMs >= this.options.calmMs) this.nextPauseMs = this.options.pauseMs
    this.pausedUntilMs = now + this.nextPauseMs
    this.nextPauseMs = Math.min(this.nextPauseMs * 2, this.options.maxPauseMs)
  }

  /** Synchronous writes that took longer than stallMs so far (each started a pause). */
  get stalls(): number {
    return this.stallCount
  }

  get pausedUntil(): number {
    return this.pausedUntilMs
  }
}
