/**
 * One quota type's enforcement (Kafka's ClientQuotaManager with its DefaultQuotaCallback):
 * which configured entity applies to a (user, client id), the rate sensor it shares with
 * every client the same entity covers, and the throttle time of a recorded value.
 *
 * Precedence (KIP-55), most specific first:
 *   1. user + client id   2. user + default client id   3. user
 *   4. default user + client id   5. default user + default client id   6. default user
 *   7. client id   8. default client id
 * The level found decides the sensor: a `user` quota is shared by all of that user's client
 * ids, a `client-id` quota by every user of that client id (Kafka's metric tags).
 */
import { entityKey, type QuotaKey } from './client-quota-entity.js'
import { type RateConfig, SampledRate } from './sampled-rate.js'

/** ClientQuotaManager.InactiveSensorExpirationTimeSeconds */
const INACTIVE_SENSOR_EXPIRATION_MS = 3600_000
const SENSOR_SWEEP_INTERVAL_MS = 60_000

export interface ClientQuotaManagerConfig extends RateConfig {
  readonly quotaKey: QuotaKey
  /**
   * Caps a throttle time (the request quota caps at one window, ClientRequestQuotaManager);
   * the byte-rate quotas are not capped, as in Kafka.
   */
  readonly maxThrottleTimeMs?: number
}

interface Sensor {
  readonly rate: SampledRate
  lastRecordMs: number
}

/** Kafka's quota metric tags: the part of (user, client id) a sensor is shared by. */
interface MetricTags {
  readonly user: string
  readonly clientId: string
}

export class ClientQuotaManager {
  /** Configured bounds by entity key (client-quota-entity.ts). */
  private quotas: ReadonlyMap<string, number> = new Map()
  private readonly sensors = new Map<string, Sensor>()
  private nextSweepMs = 0

  constructor(readonly config: ClientQuotaManagerConfig) {}

  /** False while no entity has this quota: nothing is recorded then (Kafka's quotasEnabled). */
  get enabled(): boolean {
    return this.quotas.size > 0
  }

  /** Replaces the configured quotas (entity key to bound). */
  setQuotas(quotas: ReadonlyMap<string, number>): void {
    this.quotas = quotas
    if (quotas.size === 0) this.sensors.clear()
  }

  /** The bound applying to (user, client id), or null when none does. */
  quotaLimit(user: string, clientId: string): number | null {
    return this.limitFor(this.metricTags(user, clientId))
  }

  /**
   * Records `value` for (user, client id) at `nowMs` and returns how long the client must
   * wait for the rate to come back to its quota: (observed - quota) / quota * window, 0 when
   * within it. The value counts even when throttled, as Kafka's Sensor records before checking.
   */
  recordAndGetThrottleTimeMs(user: string, clientId: string, value: number, nowMs: number): number {
    if (!this.enabled) return 0
    const tags = this.metricTags(user, clientId)
    const bound = this.limitFor(tags)
    if (bound === null) return 0
    const sensor = this.sensorFor(tags, nowMs)
    sensor.rate.record(value, nowMs)
    const observed = sensor.rate.measure(nowMs)
    if (observed <= bound) return 0
    const throttleMs = Math.round(((observed - bound) / bound) * sensor.rate.windowSizeMs(nowMs))
    return this.config.maxThrottleTimeMs === undefined
      ? throttleMs
      : Math.min(throttleMs, this.config.maxThrottleTimeMs)
  }

  /**
   * The most one response may carry without being throttled whatever came before
   * (getMaxValueInQuotaWindow): a fetch asks for no more, or one response could exceed
   * the quota by far more than a window's worth.
   */
  maxValueInQuotaWindow(user: string, clientId: string): number {
    if (!this.enabled) return Number.POSITIVE_INFINITY
    const bound = this.quotaLimit(user, clientId)
    if (bound === null) return Number.POSITIVE_INFINITY
    return bound * (this.config.samples - 1) * (this.config.windowMs / 1000)
  }

  /** The rate (per second) the sensor of (user, client id) measures now, 0 when it has none. */
  observedRate(user: string, clientId: string, nowMs: number): number {
    const tags = this.metricTags(user, clientId)
    return this.sensors.get(sensorKey(tags))?.rate.measure(nowMs) ?? 0
  }

  /** DefaultQuotaCallback.quotaMetricTags: walks the precedence until an entity has a quota. */
  private metricTags(user: string, clientId: string): MetricTags {
    const has = (u: string | null | undefined, c: string | null | undefined): boolean =>
      this.quotas.has(
        entityKey({ ...(u !== undefined ? { user: u } : {}), ...(c !== undefined ? { clientId: c } : {}) }),
      )
    if (has(user, clientId) || has(user, null)) return { user, clientId }
    if (has(user, undefined)) return { user, clientId: '' }
    if (has(null, clientId) || has(null, null)) return { user, clientId }
    if (has(null, undefined)) return { user, clientId: '' }
    return { user: '', clientId }
  }

  /** DefaultQuotaCallback.quotaLimit: the bound for a sensor's tags, defaults last. */
  private limitFor(tags: MetricTags): number | null {
    const get = (u: string | null | undefined, c: string | null | undefined): number | undefined =>
      this.quotas.get(
        entityKey({ ...(u !== undefined ? { user: u } : {}), ...(c !== undefined ? { clientId: c } : {}) }),
      )
    const { user, clientId } = tags
    if (user !== '' && clientId !== '')
      return get(user, clientId) ?? get(user, null) ?? get(null, clientId) ?? get(null, null) ?? null
    if (user !== '') return get(user, undefined) ?? get(null, undefined) ?? null
    if (clientId !== '') return get(undefined, clientId) ?? get(undefined, null) ?? null
    return null
  }

  private sensorFor(tags: MetricTags, nowMs: number): Sensor {
    if (nowMs >= this.nextSweepMs) this.sweep(nowMs)
    const key = sensorKey(tags)
    let sensor = this.sensors.get(key)
    if (sensor === undefined) {
      sensor = { rate: new SampledRate(this.config), lastRecordMs: nowMs }
      this.sensors.set(key, sensor)
    }
    sensor.lastRecordMs = nowMs
    return sensor
  }

  /** Sensors of clients gone quiet expire, as Kafka's do, so client ids cannot grow the map forever. */
  private sweep(nowMs: number): void {
    this.nextSweepMs = nowMs + SENSOR_SWEEP_INTERVAL_MS
    for (const [key, sensor] of this.sensors)
      if (nowMs - sensor.lastRecordMs >= INACTIVE_SENSOR_EXPIRATION_MS) this.sensors.delete(key)
  }
}

function sensorKey(tags: MetricTags): string {
  return `${encodeURIComponent(tags.user)}:${encodeURIComponent(tags.clientId)}`
}
