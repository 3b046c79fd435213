/**
 * One exponential backoff for every retry loop (Kafka's ExponentialBackoff: initial
 * interval, multiplier, maximum, jitter): the controller's campaigns, a broker's
 * re-registration, the simulator's clients and tidelog's client all use it.
 */
import { assert } from './assert.js'
import type { Random } from './random.js'

export interface BackoffOptions {
  readonly initialMs: number
  readonly maxMs: number
  /** Growth per attempt (default 2). */
  readonly multiplier?: number
  /** Fraction of the delay drawn at random either way, 0..1 (default 0: none). */
  readonly jitter?: number
}

export class ExponentialBackoff {
  private readonly multiplier: number
  private readonly jitter: number

  constructor(
    private readonly options: BackoffOptions,
    private readonly random?: Random | (() => number),
  ) {
    assert(options.initialMs >= 0 && options.maxMs >= options.initialMs, 'backoff bounds out of order')
    this.multiplier = options.multiplier ?? 2
    this.jitter = options.jitter ?? 0
    assert(this.jitter >= 0 && this.jitter <= 1, 'backoff jitter outside 0..1')
    assert(this.jitter === 0 || random !== undefined, 'a jittered backoff needs a random source')
  }

  /** Delay before retry `attempt` (1 = the first retry), capped at maxMs. */
  delayMs(attempt: number): number {
    const exponent = Math.min(Math.max(attempt - 1, 0), 40)
    const raw = Math.min(this.options.initialMs * this.multiplier ** exponent, this.options.maxMs)
    if (this.jitter === 0) return Math.round(raw)
    const draw = typeof this.random === 'function' ? this.random() : this.random!.next()
    const factor = 1 - this.jitter + draw * 2 * this.jitter
    return Math.max(0, Math.round(Math.min(raw * factor, this.options.maxMs)))
  }
}
