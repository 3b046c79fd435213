/**
 * Client telemetry (KIP-714), Kafka's ClientMetricsManager: which subscriptions each client
 * instance matches, the rules a GetTelemetrySubscriptions and a PushTelemetry are checked
 * against, and the pushed metrics, kept per client instance and served on /metrics with the
 * client's labels until the client stops pushing.
 *
 * Where tidelog differs from Kafka, and why:
 * - Kafka hands the payload to a ClientTelemetryReceiver plugin and advertises the telemetry
 *   APIs only when one is configured; tidelog is its own receiver (/metrics) and always
 *   serves them.
 * - deltaTemporality is false: Prometheus counters are cumulative, and a client may push to
 *   another broker after a reconnect, so deltas would split one counter across brokers (a
 *   delta sum pushed anyway is added up here).
 * - A client instance is forgotten max(60 s, 3 x its push interval) after its last request,
 *   as in Kafka, but not when its connection closes (Kafka drops it then); its metrics leave
 *   /metrics 3 x its push interval after its last push.
 */
import assert from 'node:assert/strict'
import type { Clock } from '../../common/clock.js'
import type { Logger } from '../../common/logger.js'
import type { Random } from '../../common/random.js'
import { newUuid } from '../../metadata/ids.js'
import { CompressionType } from '../../protocol/batch-header.js'
import { decompress } from '../../protocol/compression.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import {
  ALL_METRICS,
  type MatchSelector,
  PUSH_INTERVAL_MS_DEFAULT,
  parseSubscription,
  type Subscription,
} from './client-metrics-config.js'
import type { DecodedMetrics, MetricPoint } from './otlp-metrics.js'

/** Compression types offered to clients, preferred first (Kafka's SUPPORTED_COMPRESSION_TYPES). */
export const ACCEPTED_COMPRESSION_TYPES: readonly number[] = [
  CompressionType.Zstd,
  CompressionType.Lz4,
  CompressionType.Gzip,
  CompressionType.Snappy,
]
/** Kafka's ClientMetricsManager.CACHE_MAX_SIZE: client instances remembered per broker. */
const INSTANCES_MAX = 16_384
/** Kafka's DEFAULT_CACHE_EXPIRY_MS: the shortest time an idle client instance is remembered. */
const INSTANCE_EXPIRY_MS_MIN = 60_000
/** Pushed metrics stay on /metrics this many push intervals after the client's last push. */
const METRICS_EXPIRY_INTERVALS = 3
/**
 * A compressed push is decompressed up to this many times telemetry.max.bytes (16 MiB by
 * default), so that a payload over the limit is told apart from one that does not decompress
 * without a decompression bomb taking the heap.
 */
const DECOMPRESSION_RATIO_MAX = 16
/** Kafka's reserved Uuids (ZERO_UUID, ONE_UUID): never a client instance id. */
const RESERVED_UUIDS = new Set([ZERO_UUID, 'AAAAAAAAAAAAAAAAAAAAAQ'])

/** What the broker knows of the client sending a telemetry request. */
export interface ClientRequestInfo {
  readonly clientId: string
  readonly softwareName: string
  readonly softwareVersion: string
  /** `host:port` of the connection. */
  readonly remoteAddress: string
}

export interface SubscriptionsAnswer {
  readonly errorCode: number
  readonly errorMessage: string | null
  readonly clientInstanceId: string
  readonly subscriptionId: number
  readonly acceptedCompressionTypes: readonly number[]
  readonly pushIntervalMs: number
  readonly telemetryMaxBytes: number
  readonly deltaTemporality: boolean
  readonly requestedMetrics: readonly string[]
}

export interface PushInput {
  readonly clientInstanceId: string
  readonly subscriptionId: number
  readonly terminating: boolean
  readonly compressionType: number
  readonly metrics: Buffer
}

export interface PushAnswer {
  readonly errorCode: number
  readonly errorMessage: string | null
}

export interface ClientMetricsManagerOptions {
  readonly clock: Clock
  readonly random: Random
  readonly logger: Logger
  /** telemetry.max.bytes: the largest payload a push may carry (compressed, and decompressed). */
  readonly telemetryMaxBytes: number
  /** The subscriptions (CLIENT_METRICS config resources) in the current cluster image. */
  readonly subscriptionConfigs: () => ReadonlyMap<string, Readonly<Record<string, string>>> | undefined
  /** Loads the OTLP decoder (protobufjs) on the first push. */
  readonly loadDecoder?: () => Promise<(payload: Buffer) => DecodedMetrics>
}

interface ClientInstance {
  readonly clientInstanceId: string
  readonly attributes: Readonly<Record<MatchSelector, string>>
  /** The subscriptions fingerprint this instance's subscription was computed from. */
  readonly subscriptionsVersion: string
  readonly subscriptionId: number
  readonly metrics: readonly string[]
  readonly pushIntervalMs: number
  lastGetMs: number
  lastPushMs: number
  lastRequestMs: number
  lastError: number
  terminating: boolean
  /** The latest value of each series the client pushed, by metric name and labels. */
  series: Map<string, Series>
}

interface Series {
  readonly name: string
  readonly help: string
  readonly type: 'gauge' | 'counter'
  readonly labels: Readonly<Record<string, string>>
  value: number
}

export class ClientMetricsManager {
  private readonly instances = new Map<string, ClientInstance>()
  private subscriptionsSource: ReadonlyMap<string, Readonly<Record<string, string>>> | undefined = undefined
  private subscriptions: { version: string; list: Subscription[] } = { version: '', list: [] }
  private decoder: Promise<(payload: Buffer) => DecodedMetrics> | null = null

  constructor(private readonly options: ClientMetricsManagerOptions) {
    assert(options.telemetryMaxBytes >= 1, 'telemetry.max.bytes is at least 1')
  }

  /** Subscription names (ListClientMetricsResources). */
  subscriptionNames(): string[] {
    return this.currentSubscriptions().list.map((s) => s.name)
  }

  /** Client instances remembered now. */
  get instanceCount(): number {
    return this.instances.size
  }

  /**
   * GetTelemetrySubscriptions: a zero id gets a new one; the instance's subscription is
   * (re)computed when the subscriptions changed; a second request within the push interval
   * is THROTTLING_QUOTA_EXCEEDED unless the last push failed for an unknown subscription or
   * an unsupported compression type (the client is expected to ask again at once then).
   */
  getSubscriptions(requestedInstanceId: string, client: ClientRequestInfo): SubscriptionsAnswer {
    const nowMs = this.options.clock.monotonicMs()
    this.expire(nowMs)
    const clientInstanceId = RESERVED_UUIDS.has(requestedInstanceId)
      ? this.newInstanceId()
      : requestedInstanceId
    const instance = this.instance(clientInstanceId, client, nowMs)
    const sinceLastMs = nowMs - Math.max(instance.lastGetMs, instance.lastPushMs)
    const allowed =
      instance.lastGetMs < 0 && instance.lastPushMs < 0 ? true : sinceLastMs >= instance.pushIntervalMs
    if (allowed) instance.lastGetMs = nowMs
    else if (
      instance.lastError !== ErrorCode.UNKNOWN_SUBSCRIPTION_ID &&
      instance.lastError !== ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    ) {
      return {
        ...this.answer(ZERO_UUID, null),
        errorCode: ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        errorMessage: `Request from the client [${requestedInstanceId}] arrived before the next push interval time`,
      }
    }
    instance.lastError = ErrorCode.NONE
    return this.answer(clientInstanceId, instance)
  }

  /**
   * PushTelemetry, checked in Kafka's order: a reserved id (INVALID_REQUEST), a push after a
   * terminating one (INVALID_REQUEST), before the push interval (THROTTLING_QUOTA_EXCEEDED,
   * except a push right after GetTelemetrySubscriptions, or a terminating one), a stale
   * subscription id (UNKNOWN_SUBSCRIPTION_ID), an unknown compression type
   * (UNSUPPORTED_COMPRESSION_TYPE), a payload over telemetry.max.bytes compressed or not
   * (TELEMETRY_TOO_LARGE); a payload that does not decompress or decode is INVALID_RECORD.
   */
  async push(input: PushInput, client: ClientRequestInfo): Promise<PushAnswer> {
    const id = input.clientInstanceId
    if (RESERVED_UUIDS.has(id)) {
      return fail(
        ErrorCode.INVALID_REQUEST,
        `Invalid request from the client [${id}], invalid client instance id`,
      )
    }
    const nowMs = this.options.clock.monotonicMs()
    this.expire(nowMs)
    const instance = this.instance(id, client, nowMs)
    const problem = this.checkPush(input, instance, nowMs)
    instance.terminating = input.terminating
    if (problem !== null) return this.refuse(instance, problem.errorCode, problem.errorMessage ?? '')
    if (input.metrics.length > 0) {
      let payload: Buffer
      try {
        payload =
          input.compressionType === CompressionType.None
            ? input.metrics
            : await decompress(input.compressionType, input.metrics, {
                maxOutputBytes: DECOMPRESSION_RATIO_MAX * this.options.telemetryMaxBytes,
              })
      } catch (error) {
        return this.refuse(
          instance,
          ErrorCode.INVALID_RECORD,
          `Telemetry request from [${id}] does not decompress`,
          error,
        )
      }
      if (payload.length > this.options.telemetryMaxBytes) {
        return this.refuse(
          instance,
          ErrorCode.TELEMETRY_TOO_LARGE,
          `Telemetry request from [${id}] decompresses to more than the maximum allowed size [${this.options.telemetryMaxBytes}]`,
        )
      }
      let decoded: DecodedMetrics
      try {
        decoded = (await this.loadDecoder())(payload)
      } catch (error) {
        return this.refuse(
          instance,
          ErrorCode.INVALID_RECORD,
          `Telemetry request from [${id}] is not OTLP MetricsData`,
          error,
        )
      }
      this.record(instance, decoded.points)
    }
    instance.lastError = ErrorCode.NONE
    return { errorCode: ErrorCode.NONE, errorMessage: null }
  }

  private refuse(
    instance: ClientInstance,
    errorCode: number,
    errorMessage: string,
    cause?: unknown,
  ): PushAnswer {
    instance.lastError = errorCode
    this.options.logger.debug(
      { err: cause, clientInstanceId: instance.clientInstanceId, errorCode },
      `push telemetry refused: ${errorMessage}`,
    )
    return { errorCode, errorMessage }
  }

  /** The pushed metrics in Prometheus' text format (0.0.4), one family per metric name. */
  exposition(): string {
    const nowMs = this.options.clock.monotonicMs()
    this.expire(nowMs)
    const families = new Map<string, { type: 'gauge' | 'counter'; help: string; lines: string[] }>()
    for (const instance of this.instances.values()) {
      if (instance.lastPushMs < 0) continue
      if (nowMs - instance.lastPushMs > METRICS_EXPIRY_INTERVALS * instance.pushIntervalMs) continue
      for (const series of instance.series.values()) {
        let family = families.get(series.name)
        if (family === undefined) {
          family = { type: series.type, help: series.help, lines: [] }
          families.set(series.name, family)
        }
        // One name pushed as a gauge by one client and a counter by another: the first wins.
        if (family.type !== series.type) continue
        family.lines.push(`${series.name}${labelText(series.labels)} ${valueText(series.value)}`)
      }
    }
    let text = ''
    for (const [name, family] of families) {
      text += `# HELP ${name} ${escapeHelp(family.help)}\n# TYPE ${name} ${family.type}\n`
      text += `${family.lines.join('\n')}\n`
    }
    return text
  }

  private checkPush(input: PushInput, instance: ClientInstance, nowMs: number): PushAnswer | null {
    const id = input.clientInstanceId
    if (instance.terminating) {
      return fail(
        ErrorCode.INVALID_REQUEST,
        `Client [${id}] sent the previous request with state terminating to TRUE, can not accept any requests after that`,
      )
    }
    // A push right after GetTelemetrySubscriptions is accepted early: clients add jitter. So
    // is the first request of an instance this broker has not seen (it asked another broker).
    let accepted =
      instance.lastGetMs > instance.lastPushMs || (instance.lastGetMs < 0 && instance.lastPushMs < 0)
    if (!accepted)
      accepted = nowMs - Math.max(instance.lastGetMs, instance.lastPushMs) >= instance.pushIntervalMs
    if (accepted) instance.lastPushMs = nowMs
    else if (!input.terminating) {
      return fail(
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        `Request from the client [${id}] arrived before the next push interval time`,
      )
    }
    if (input.subscriptionId !== instance.subscriptionId) {
      return fail(ErrorCode.UNKNOWN_SUBSCRIPTION_ID, `Unknown client subscription id for the client [${id}]`)
    }
    if (!(input.compressionType in CompressionType) || input.compressionType < 0) {
      return fail(
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        `Unknown compression type [${input.compressionType}] is received in telemetry request from [${id}]`,
      )
    }
    if (input.metrics.length > this.options.telemetryMaxBytes) {
      return fail(
        ErrorCode.TELEMETRY_TOO_LARGE,
        `Telemetry request from [${id}] is larger than the maximum allowed size [${this.options.telemetryMaxBytes}]`,
      )
    }
    return null
  }

  private record(instance: ClientInstance, points: readonly MetricPoint[]): void {
    const labels = instanceLabels(instance.attributes)
    for (const point of points) {
      const name = metricName(point.name)
      const type = point.kind === 'sum' && point.monotonic ? 'counter' : 'gauge'
      const seriesLabels: Record<string, string> = {}
      for (const [key, value] of Object.entries(point.attributes)) seriesLabels[labelName(key)] = value
      // The broker's own view of the client wins over what the client says of itself.
      Object.assign(seriesLabels, labels)
      const key = `${name}${labelText(seriesLabels)}`
      const existing = instance.series.get(key)
      const delta = point.kind === 'sum' && point.temporality === 1
      if (existing !== undefined && delta) existing.value += point.value
      else if (existing !== undefined) existing.value = point.value
      else {
        instance.series.set(key, {
          name,
          help: point.description === '' ? point.name : point.description,
          type,
          labels: seriesLabels,
          value: point.value,
        })
      }
    }
  }

  private answer(clientInstanceId: string, instance: ClientInstance | null): SubscriptionsAnswer {
    return {
      errorCode: ErrorCode.NONE,
      errorMessage: null,
      clientInstanceId,
      subscriptionId: instance?.subscriptionId ?? 0,
      acceptedCompressionTypes: instance === null ? [] : ACCEPTED_COMPRESSION_TYPES,
      pushIntervalMs: instance?.pushIntervalMs ?? 0,
      telemetryMaxBytes: instance === null ? 0 : this.options.telemetryMaxBytes,
      deltaTemporality: false,
      requestedMetrics: instance?.metrics ?? [],
    }
  }

  /** The instance for `id`, created, or recomputed when the subscriptions changed since. */
  private instance(id: string, client: ClientRequestInfo, nowMs: number): ClientInstance {
    const subscriptions = this.currentSubscriptions()
    const existing = this.instances.get(id)
    let instance: ClientInstance
    if (existing === undefined) {
      instance = this.newInstance(id, instanceAttributes(id, client), subscriptions)
      this.evictIfFull()
    } else if (existing.subscriptionsVersion !== subscriptions.version) {
      // Kafka creates the instance anew: its timestamps and last error start over.
      instance = { ...this.newInstance(id, existing.attributes, subscriptions), series: existing.series }
    } else instance = existing
    instance.lastRequestMs = nowMs
    // Re-inserted so that the map's order is least recently used first.
    this.instances.delete(id)
    this.instances.set(id, instance)
    return instance
  }

  private newInstance(
    id: string,
    attributes: Readonly<Record<MatchSelector, string>>,
    subscriptions: { version: string; list: Subscription[] },
  ): ClientInstance {
    let pushIntervalMs = PUSH_INTERVAL_MS_DEFAULT
    const metrics = new Set<string>()
    let all = false
    for (const subscription of subscriptions.list) {
      if (!matches(subscription, attributes)) continue
      for (const metric of subscription.metrics) metrics.add(metric)
      if (subscription.metrics.includes(ALL_METRICS)) all = true
      pushIntervalMs = Math.min(pushIntervalMs, subscription.intervalMs)
    }
    const requested = all ? [ALL_METRICS] : [...metrics].sort()
    return {
      clientInstanceId: id,
      attributes,
      subscriptionsVersion: subscriptions.version,
      subscriptionId: subscriptionIdOf(requested, pushIntervalMs, id),
      metrics: requested,
      pushIntervalMs,
      lastGetMs: -1,
      lastPushMs: -1,
      lastRequestMs: -1,
      lastError: ErrorCode.NONE,
      terminating: false,
      series: new Map(),
    }
  }

  private currentSubscriptions(): { version: string; list: Subscription[] } {
    const source = this.options.subscriptionConfigs()
    if (source === this.subscriptionsSource) return this.subscriptions
    this.subscriptionsSource = source
    const entries = [...(source ?? new Map<string, Readonly<Record<string, string>>>())].sort(([a], [b]) =>
      a < b ? -1 : a > b ? 1 : 0,
    )
    const version = JSON.stringify(entries)
    if (version === this.subscriptions.version) return this.subscriptions
    const list: Subscription[] = []
    for (const [name, configs] of entries) {
      try {
        list.push(parseSubscription(name, configs))
      } catch (error) {
        // Validated when written; a subscription written by another version may not parse here.
        this.options.logger.warn({ err: error, subscription: name }, 'client metrics subscription ignored')
      }
    }
    this.subscriptions = { version, list }
    return this.subscriptions
  }

  private newInstanceId(): string {
    for (;;) {
      const id = newUuid(this.options.random)
      if (!id.startsWith('-') && !this.instances.has(id)) return id
    }
  }

  private evictIfFull(): void {
    while (this.instances.size >= INSTANCES_MAX) {
      const oldest = this.instances.keys().next().value as string
      this.instances.delete(oldest)
    }
  }

  private expire(nowMs: number): void {
    for (const [id, instance] of this.instances) {
      const expiryMs = Math.max(INSTANCE_EXPIRY_MS_MIN, METRICS_EXPIRY_INTERVALS * instance.pushIntervalMs)
      if (nowMs - instance.lastRequestMs > expiryMs) this.instances.delete(id)
    }
  }

  private loadDecoder(): Promise<(payload: Buffer) => DecodedMetrics> {
    this.decoder ??= (
      this.options.loadDecoder ?? (() => import('./otlp-metrics.js').then((m) => m.decodeMetricsData))
    )()
    return this.decoder
  }
}

function fail(errorCode: number, errorMessage: string): PushAnswer {
  return { errorCode, errorMessage }
}

function instanceAttributes(id: string, client: ClientRequestInfo): Record<MatchSelector, string> {
  const colon = client.remoteAddress.lastIndexOf(':')
  const host = colon < 0 ? client.remoteAddress : client.remoteAddress.slice(0, colon)
  return {
    client_instance_id: id,
    client_id: client.clientId,
    client_software_name: client.softwareName,
    client_software_version: client.softwareVersion,
    client_source_address: host.replace(/^\[|\]$/g, ''),
    client_source_port: colon < 0 ? '' : client.remoteAddress.slice(colon + 1),
  }
}

function matches(subscription: Subscription, attributes: Readonly<Record<MatchSelector, string>>): boolean {
  for (const [selector, pattern] of subscription.match) if (!pattern.test(attributes[selector])) return false
  return true
}

/**
 * A number that changes with the subscription's metrics and interval and differs between
 * instances (Kafka: CRC32C of the metrics and interval XOR the instance id's hash; any value
 * works, as clients only echo it).
 */
function subscriptionIdOf(metrics: readonly string[], pushIntervalMs: number, id: string): number {
  let hash = 0x811c9dc5
  for (const char of `${metrics.join(',')}|${pushIntervalMs}|${id}`) {
    hash ^= char.codePointAt(0) ?? 0
    hash = Math.imul(hash, 0x01000193)
  }
  return hash | 0
}

function instanceLabels(attributes: Readonly<Record<MatchSelector, string>>): Record<string, string> {
  const labels: Record<string, string> = {}
  for (const [key, value] of Object.entries(attributes)) if (value !== '') labels[key] = value
  return labels
}

/** A Prometheus metric name: `org.apache.kafka.producer.x` -> `org_apache_kafka_producer_x`. */
export function metricName(name: string): string {
  const sanitized = name.replace(/[^a-zA-Z0-9_:]/g, '_')
  return /^[0-9]/.test(sanitized) ? `_${sanitized}` : sanitized
}

function labelName(name: string): string {
  const sanitized = name.replace(/[^a-zA-Z0-9_]/g, '_')
  return /^[0-9]/.test(sanitized) || sanitized.startsWith('__')
    ? `_${sanitized.replace(/^_+/, '')}`
    : sanitized
}

function labelText(labels: Readonly<Record<string, string>>): string {
  const keys = Object.keys(labels).sort()
  if (keys.length === 0) return ''
  return `{${keys.map((k) => `${k}="${labels[k].replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')}"`).join(',')}}`
}

function valueText(value: number): string {
  if (Number.isNaN(value)) return 'NaN'
  if (value === Number.POSITIVE_INFINITY) return '+Inf'
  if (value === Number.NEGATIVE_INFINITY) return '-Inf'
  return String(value)
}

function escapeHelp(help: string): string {
  return help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')
}
