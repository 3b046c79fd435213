/**
 * Warns when the broker's event loop was held up for a good part of its store session's
 * timeout. A broker keeps its session with keep-alives sent from this loop: on a machine
 * with many more runnable processes than cores (the 33,000-partition runs, load 23-44 on 2
 * cores, docs/notes/scale.md), a long synchronous stretch (a full collection of a large
 * heap, applying thousands of partitions at once) or a paused process (SIGSTOP) stops the
 * keep-alives, and the session is lost without any other trace of why. A stall is the time
 * a timer of `intervalMs` fired past its due time; a paused process shows as one stall.
 */
import { assert } from '../common/assert.js'
import type { Clock, TimerHandle } from '../common/clock.js'
import type { Logger } from '../common/logger.js'

/** Checks per session timeout: a stall is seen within a tenth of it. */
const CHECKS_PER_SESSION = 10
/** Stalls longer than this fraction of the session timeout are logged and counted. */
const WARN_FRACTION_OF_SESSION = 1 / 3

export interface EventLoopStallCounters {
  /** Stalls longer than a third of broker.session.timeout.ms. */
  readonly stalls: number
  readonly longestStallMs: number
}

export class EventLoopStallMonitor {
  private readonly intervalMs: number
  private readonly warnAboveMs: number
  private timer: TimerHandle | null = null
  private dueAtMs = 0
  private stallCount = 0
  private longestMs = 0

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly sessionTimeoutMs: number,
  ) {
    assert(sessionTimeoutMs > 0, () => `session timeout ${sessionTimeoutMs} ms`)
    this.intervalMs = Math.max(1, Math.floor(sessionTimeoutMs / CHECKS_PER_SESSION))
    this.warnAboveMs = Math.floor(sessionTimeoutMs * WARN_FRACTION_OF_SESSION)
  }

  start(): void {
    if (this.timer === null) this.arm()
  }

  stop(): void {
    this.timer?.cancel()
    this.timer = null
  }

  get counters(): EventLoopStallCounters {
    return { stalls: this.stallCount, longestStallMs: this.longestMs }
  }

  private arm(): void {
    this.dueAtMs = this.clock.monotonicMs() + this.intervalMs
    this.timer = this.clock.setTimeout(() => this.onTick(), this.intervalMs)
  }

  private onTick(): void {
    const stalledMs = Math.round(this.clock.monotonicMs() - this.dueAtMs)
    if (stalledMs > this.warnAboveMs) {
      this.stallCount++
      this.longestMs = Math.max(this.longestMs, stalledMs)
      this.logger.warn(
        { stalledMs, sessionTimeoutMs: this.sessionTimeoutMs },
        'event loop stalled for a large part of broker.session.timeout.ms: the store session is at risk',
      )
    }
    this.arm()
  }
}
