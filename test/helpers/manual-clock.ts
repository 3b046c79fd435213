/**
 * A Clock the test moves by hand, for the client's timers (linger, backoff, request and
 * delivery timeouts, max.block.ms, heartbeats). Advancing it runs the timers that fall due
 * on the way in due order (equal due times in the order they were set), each with the
 * clock at its own due time, including timers those callbacks set within the window.
 *
 * Against real sockets, `runUntil`/`runFor` step the clock in small steps and let real I/O
 * run between steps: no assertion depends on how fast the machine is, only on the virtual
 * time that passed. (Virtual time does run while a request is on the wire; keep timeouts
 * well above a step.)
 */
import type { Clock, TimerHandle } from '../../src/common/clock.js'

interface ManualTimer {
  readonly dueMs: number
  readonly seq: number
  readonly callback: () => void
  cancelled: boolean
}

/** Real wall time between steps for socket I/O to run; the assertions never depend on it. */
const IO_YIELD_MS = 1

export class ManualClock implements Clock {
  private elapsedMs = 0
  private timers: ManualTimer[] = []
  private seq = 0

  /** `wallStartMs`: what nowMs() says before the clock moves. */
  constructor(private readonly wallStartMs = 1_700_000_000_000) {}

  nowMs(): number {
    return this.wallStartMs + this.elapsedMs
  }

  /** Starts at 0 and moves only when the test moves it. */
  monotonicMs(): number {
    return this.elapsedMs
  }

  setTimeout(callback: () => void, delayMs: number): TimerHandle {
    if (!Number.isFinite(delayMs)) throw new Error(`ManualClock: delay ${delayMs} is not finite`)
    const timer: ManualTimer = {
      dueMs: this.elapsedMs + Math.max(delayMs, 0),
      seq: this.seq++,
      callback,
      cancelled: false,
    }
    this.timers.push(timer)
    return {
      cancel: () => {
        timer.cancelled = true
      },
    }
  }

  /** Timers set and neither run nor cancelled. */
  get pendingTimers(): number {
    return this.timers.filter((t) => !t.cancelled).length
  }

  /** Moves time forward by `ms`, running due timers synchronously, in order. */
  advance(ms: number): void {
    const targetMs = this.checkedTarget(ms)
    for (let next = this.takeDue(targetMs); next; next = this.takeDue(targetMs)) next.callback()
    this.elapsedMs = targetMs
  }

  /**
   * Like advance, but lets promise jobs and immediates run after each timer, so a timer
   * whose callback resolves a promise that sets the next timer (a retry loop) behaves as
   * under real time.
   */
  async tick(ms: number): Promise<void> {
    const targetMs = this.checkedTarget(ms)
    for (let next = this.takeDue(targetMs); next; next = this.takeDue(targetMs)) {
      next.callback()
      await settleJobs()
    }
    this.elapsedMs = targetMs
    await settleJobs()
  }

  /** Lets `ms` of virtual time pass in steps, real I/O running between them. */
  async runFor(ms: number, stepMs = 10): Promise<void> {
    const endMs = this.elapsedMs + ms
    while (this.elapsedMs < endMs) {
      await ioYield()
      await this.tick(Math.min(stepMs, endMs - this.elapsedMs))
    }
  }

  /**
   * Steps the clock until `promise` settles (I/O running between steps) and returns its
   * outcome; throws if more than `maxMs` of virtual time pass first.
   */
  async runUntil<T>(promise: Promise<T>, options: { stepMs?: number; maxMs?: number } = {}): Promise<T> {
    const stepMs = options.stepMs ?? 10
    const maxMs = options.maxMs ?? 600_000
    let settled = false
    const observed = promise.then(
      (value) => {
        settled = true
        return value
      },
      (error: unknown) => {
        settled = true
        throw error
      },
    )
    // Keeps a rejection from being reported as unhandled while the clock runs.
    observed.catch(() => undefined)
    const startMs = this.elapsedMs
    while (!settled) {
      if (this.elapsedMs - startMs > maxMs) {
        throw new Error(`ManualClock.runUntil: not settled after ${maxMs} ms of virtual time`)
      }
      await ioYield()
      if (!settled) await this.tick(stepMs)
    }
    return observed
  }

  private checkedTarget(ms: number): number {
    if (!(ms >= 0) || !Number.isFinite(ms)) throw new Error(`ManualClock: cannot advance by ${ms}`)
    return this.elapsedMs + ms
  }

  /** The earliest live timer due by `targetMs`, removed, with the clock moved to its due time. */
  private takeDue(targetMs: number): ManualTimer | undefined {
    this.timers = this.timers.filter((t) => !t.cancelled)
    let best: ManualTimer | undefined
    for (const timer of this.timers) {
      if (timer.dueMs > targetMs) continue
      if (!best || timer.dueMs < best.dueMs || (timer.dueMs === best.dueMs && timer.seq < best.seq))
        best = timer
    }
    if (!best) return undefined
    this.timers.splice(this.timers.indexOf(best), 1)
    this.elapsedMs = Math.max(this.elapsedMs, best.dueMs)
    return best
  }
}

/** Promise jobs, then one turn of the event loop (setImmediate callbacks such as a producer's drain). */
function settleJobs(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

function ioYield(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, IO_YIELD_MS))
}
