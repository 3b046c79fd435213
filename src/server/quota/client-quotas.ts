/**
 * A broker's client quotas (Kafka's QuotaManagers): produce and fetch byte rates and the
 * request-time percentage, each with its own precedence over the entities in the metadata
 * store. The connection asks it, per answered request, how long to throttle; while no quota
 * is configured `enabled` is false and the connection asks nothing.
 *
 * What counts, as in KafkaApis: a Produce's request size in bytes (acks=0 too); a Fetch's
 * response size, except a follower's (replication is not a client); the time a request
 * kept the broker busy, as a percentage of one thread (request_percentage=100: one thread),
 * for every request but those between brokers and the SASL exchange.
 */
import { ApiKey } from '../../protocol/generated/index.js'
import { ClientQuotaManager } from './client-quota-manager.js'
import type { QuotaEntry } from './client-quota-store.js'
import type { RateConfig } from './sampled-rate.js'

/** Kafka's ClientQuotaManager.NanosToPercentagePerSecond, per millisecond. */
const MS_TO_PERCENTAGE_SECONDS = 100 / 1000

export interface QuotaRequest {
  readonly apiKey: number
  readonly request: unknown
  /** The authenticated principal's name: the quota `user` (ANONYMOUS on PLAINTEXT). */
  readonly user: string
  readonly clientId: string
  readonly requestBytes: number
  /** Time the broker spent on the request: decoding it and the handler's synchronous part. */
  readonly requestTimeMs: number
  readonly nowMs: number
}

export class ClientQuotas {
  readonly produce: ClientQuotaManager
  readonly fetch: ClientQuotaManager
  readonly request: ClientQuotaManager
  /** True while any quota is configured. */
  enabled = false

  constructor(window: RateConfig) {
    this.produce = new ClientQuotaManager({ ...window, quotaKey: 'producer_byte_rate' })
    this.fetch = new ClientQuotaManager({ ...window, quotaKey: 'consumer_byte_rate' })
    // ClientRequestQuotaManager caps its throttle at one window; the byte rates are not capped.
    this.request = new ClientQuotaManager({
      ...window,
      quotaKey: 'request_percentage',
      maxThrottleTimeMs: window.windowMs,
    })
  }

  /** Takes the entities of the metadata store (ClientQuotaStore.onChange). */
  apply(entries: ReadonlyMap<string, QuotaEntry>): void {
    for (const manager of [this.produce, this.fetch, this.request]) {
      const bounds = new Map<string, number>()
      for (const [key, { values }] of entries) {
        const bound = values[manager.config.quotaKey]
        if (bound !== undefined) bounds.set(key, bound)
      }
      manager.setQuotas(bounds)
    }
    this.enabled = this.produce.enabled || this.fetch.enabled || this.request.enabled
  }

  /** Whether the broker should time requests at all (request_percentage is set somewhere). */
  get timesRequests(): boolean {
    return this.request.enabled
  }

  /**
   * The throttle time known before the response is encoded: a produce's bytes and the
   * request time (Kafka throttles a produce by the larger of the two).
   */
  throttleBeforeEncode(r: QuotaRequest): number {
    let throttleMs = 0
    if (r.apiKey === ApiKey.Produce && this.produce.enabled)
      throttleMs = this.produce.recordAndGetThrottleTimeMs(r.user, r.clientId, r.requestBytes, r.nowMs)
    if (this.request.enabled && !isExempt(r.apiKey, r.request)) {
      const percentageSeconds = r.requestTimeMs * MS_TO_PERCENTAGE_SECONDS
      throttleMs = Math.max(
        throttleMs,
        this.request.recordAndGetThrottleTimeMs(r.user, r.clientId, percentageSeconds, r.nowMs),
      )
    }
    return throttleMs
  }

  /** A fetch's throttle time, once its response size is known. */
  throttleFetchResponse(r: QuotaRequest, responseBytes: number): number {
    if (r.apiKey !== ApiKey.Fetch || !this.fetch.enabled || isFollowerFetch(r.request)) return 0
    return this.fetch.recordAndGetThrottleTimeMs(r.user, r.clientId, responseBytes, r.nowMs)
  }

  /** The most a consumer's fetch may return (Kafka caps fetch.max.bytes by the quota window). */
  fetchMaxBytes(user: string, clientId: string): number {
    return this.fetch.maxValueInQuotaWindow(user, clientId)
  }
}

/**
 * Requests exempt from the request quota: those between brokers (Kafka's cluster actions)
 * and the SASL exchange, which runs before the principal the quota is looked up by exists.
 */
function isExempt(apiKey: number, request: unknown): boolean {
  return (
    apiKey === ApiKey.WriteTxnMarkers ||
    apiKey === ApiKey.SaslHandshake ||
    apiKey === ApiKey.SaslAuthenticate ||
    (apiKey === ApiKey.Fetch && isFollowerFetch(request))
  )
}

function isFollowerFetch(request: unknown): boolean {
  const fetch = request as { replicaId?: number; replicaState?: { replicaId: number } }
  return (fetch.replicaState?.replicaId ?? -1) >= 0 || (fetch.replicaId ?? -1) >= 0
}
