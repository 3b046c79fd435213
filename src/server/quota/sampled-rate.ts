/**
 * Kafka's `Rate` over a `SampledStat` (org.apache.kafka.common.metrics.stats): the values
 * recorded in the last `samples` windows of `windowMs`, divided by the elapsed time, which
 * counts at least `samples - 1` full windows so a client that just started is not measured
 * over a few milliseconds. A sample older than `samples * windowMs` is reset, not dropped.
 * Consequence, as in Kafka: a new client may send (samples - 1) windows' worth at once.
 */
import { assert } from '../../common/assert.js'

export interface RateConfig {
  /** quota.window.num */
  readonly samples: number
  /** quota.window.size.seconds, in ms */
  readonly windowMs: number
}

interface Sample {
  value: number
  /** When the sample's window opened (Kafka's lastWindowMs). */
  startMs: number
}

export class SampledRate {
  private readonly samples: Sample[] = []
  private current = 0

  constructor(private readonly config: RateConfig) {
    assert(config.samples >= 1, `quota.window.num ${config.samples} must be at least 1`)
    assert(config.windowMs > 0, `quota window of ${config.windowMs} ms must be positive`)
  }

  record(value: number, nowMs: number): void {
    let sample = this.currentSample(nowMs)
    const { windowMs } = this.config
    if (nowMs - sample.startMs >= windowMs) {
      // Kafka keeps windows on the grid the previous one started (SampledStat.record), so
      // samples stay one window long however irregular the recording times are.
      const previousEndMs = sample.startMs + windowMs
      sample = this.advance(nowMs - ((nowMs - previousEndMs) % windowMs))
    }
    sample.value += value
  }

  /** Units per second at `nowMs`. */
  measure(nowMs: number): number {
    this.purgeObsolete(nowMs)
    let total = 0
    for (const sample of this.samples) total += sample.value
    return total / (this.windowSizeMs(nowMs) / 1000)
  }

  /** The elapsed time the rate divides by (Rate.windowSize): at least samples - 1 windows. */
  windowSizeMs(nowMs: number): number {
    this.purgeObsolete(nowMs)
    const { samples, windowMs } = this.config
    let elapsedMs = nowMs - this.oldestStartMs(nowMs)
    const fullWindows = Math.floor(elapsedMs / windowMs)
    if (fullWindows < samples - 1) elapsedMs += (samples - 1 - fullWindows) * windowMs
    return elapsedMs
  }

  private currentSample(nowMs: number): Sample {
    if (this.samples.length === 0) this.samples.push({ value: 0, startMs: nowMs })
    return this.samples[this.current]
  }

  private advance(nowMs: number): Sample {
    this.current = (this.current + 1) % this.config.samples
    if (this.current >= this.samples.length) {
      const sample = { value: 0, startMs: nowMs }
      this.samples.push(sample)
      return sample
    }
    const sample = this.samples[this.current]
    sample.value = 0
    sample.startMs = nowMs
    return sample
  }

  private purgeObsolete(nowMs: number): void {
    const expireAgeMs = this.config.samples * this.config.windowMs
    for (const sample of this.samples) {
      if (nowMs - sample.startMs >= expireAgeMs) {
        sample.value = 0
        sample.startMs = nowMs
      }
    }
  }

  private oldestStartMs(nowMs: number): number {
    let oldest = nowMs
    for (const sample of this.samples) if (sample.startMs < oldest) oldest = sample.startMs
    return oldest
  }
}
