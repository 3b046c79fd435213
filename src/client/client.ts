/**
 * The shared core of the producer, consumer and admin: bootstrap, one connection pool,
 * and the metadata cache. Connections are per broker *and per purpose* (franz-go's
 * layout): produce requests, fetches and everything else travel on separate sockets, so a
 * fetch long-polling for fetch.max.wait.ms never delays an acknowledgement queued behind it.
 *
 * A KafkaClient may be shared: pass `{ client }` to Producer, Consumer or Admin and they
 * use its connections and metadata; the one who created it closes it.
 */
import { ExponentialBackoff } from '../common/backoff.js'
import type { Clock } from '../common/clock.js'
import { type Random, systemRandom } from '../common/random.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { ApiKey } from '../protocol/generated/index.js'
import type { MetadataRequest } from '../protocol/generated/metadata-request.js'
import type { MetadataResponse } from '../protocol/generated/metadata-response.js'
import { ZERO_UUID } from '../protocol/primitives.js'
import { BrokerConnection } from './connection.js'
import type { ClientConnector } from './connector.js'
import {
  ClientClosedError,
  ConnectionError,
  InvalidArgumentError,
  KafkaClientError,
  KafkaProtocolError,
} from './errors.js'
import { type BrokerNode, MetadataSnapshot } from './metadata.js'
import { type BrokerAddress, clientSystemClock, intOption, parseBootstrapServers } from './options.js'
import { sleep } from './retry.js'
import { checkSaslOptions, checkSslOptions, type SaslOptions, type SslOptions } from './security-options.js'
import { tcpConnector } from './tcp-connector.js'

/** Which socket a request travels on: 'group' carries JoinGroup/SyncGroup (held by the coordinator) and heartbeats. */
export type ConnectionPurpose = 'normal' | 'produce' | 'fetch' | 'group'

export interface ClientOptions {
  /** 'host:port,host:port' or a list (bootstrap.servers). */
  bootstrapServers: string | readonly string[]
  /** client.id (default 'tidelog'). */
  clientId?: string
  /** socket.connection.setup.timeout.ms (default 10000). */
  connectTimeoutMs?: number
  /** request.timeout.ms (default 30000). */
  requestTimeoutMs?: number
  /** metadata.max.age.ms (default 300000): metadata older than this is refreshed before use. */
  metadataMaxAgeMs?: number
  /** retry.backoff.ms (default 100). */
  retryBackoffMs?: number
  /** retry.backoff.max.ms (default 1000). */
  retryBackoffMaxMs?: number
  /**
   * Every timer and time reading of the client (linger, backoff, request timeouts,
   * heartbeats, ...); default: the system clock. A simulation passes a virtual one.
   */
  clock?: Clock
  /** Randomness (sticky partition choice, backoff jitter, broker choice); default: Node's. */
  random?: Random
  /**
   * Runs a callback on the next turn of the event loop (the producer's drain, so that the
   * sends of one tick share a request); default: setImmediate. A simulation passes an event
   * of its scheduler at the same simulated instant, so the drain runs in simulated time.
   */
  defer?: (callback: () => void) => void
  /** TLS to every broker (security.protocol SSL or SASL_SSL); `true`: Node's trusted roots. */
  ssl?: SslOptions | boolean
  /** SASL authentication on every connection (SASL_PLAINTEXT, or SASL_SSL with `ssl`). */
  sasl?: SaslOptions
  /**
   * How a connection to a broker is opened; default: TCP, or TLS with `ssl`. A simulation
   * passes its simulated network.
   */
  connector?: ClientConnector
}

export interface ResolvedClientOptions {
  readonly bootstrap: readonly BrokerAddress[]
  readonly clientId: string
  readonly connectTimeoutMs: number
  readonly requestTimeoutMs: number
  readonly metadataMaxAgeMs: number
  readonly retryBackoffMs: number
  readonly retryBackoffMaxMs: number
  readonly clock: Clock
  readonly random: Random
  readonly defer: (callback: () => void) => void
  readonly ssl: SslOptions | undefined
  readonly sasl: SaslOptions | undefined
  readonly connector: ClientConnector
}

export function resolveClientOptions(options: ClientOptions): ResolvedClientOptions {
  return {
    bootstrap: parseBootstrapServers(options.bootstrapServers),
    clientId: options.clientId ?? 'tidelog',
    connectTimeoutMs: intOption('socket.connection.setup.timeout.ms', options.connectTimeoutMs, 10000, 1),
    requestTimeoutMs: intOption('request.timeout.ms', options.requestTimeoutMs, 30000, 1),
    metadataMaxAgeMs: intOption('metadata.max.age.ms', options.metadataMaxAgeMs, 300000, 0),
    retryBackoffMs: intOption('retry.backoff.ms', options.retryBackoffMs, 100, 0),
    retryBackoffMaxMs: intOption('retry.backoff.max.ms', options.retryBackoffMaxMs, 1000, 0),
    clock: options.clock ?? clientSystemClock,
    random: options.random ?? systemRandom,
    defer: options.defer ?? nextTurn,
    ssl: checkSslOptions(options.ssl),
    sasl: checkSaslOptions(options.sasl),
    connector: options.connector ?? tcpConnector,
  }
}

/** The default `defer`: Node's next turn of the event loop. */
function nextTurn(callback: () => void): void {
  setImmediate(callback)
}

/**
 * KIP-580's retry backoff: retry.backoff.ms doubling up to retry.backoff.max.ms, ±20 %
 * jitter. A retry.backoff.ms above the maximum is a static backoff at the maximum, as Kafka
 * documents.
 */
export function retryBackoff(options: ResolvedClientOptions): ExponentialBackoff {
  return new ExponentialBackoff(
    {
      initialMs: Math.min(options.retryBackoffMs, options.retryBackoffMaxMs),
      maxMs: options.retryBackoffMaxMs,
      jitter: 0.2,
    },
    options.random,
  )
}

/**
 * The client a producer, consumer or admin runs on: the shared one, or a new one from the
 * options. A shared client brings its own clock and random source; passing different ones
 * beside it is refused rather than silently ignored.
 */
export function sharedOrNewClient(
  options: Partial<ClientOptions> & { client?: KafkaClient },
  owner: string,
): { client: KafkaClient; ownsClient: boolean } {
  const shared = options.client
  if (shared === undefined) {
    if (options.bootstrapServers === undefined)
      throw new InvalidArgumentError(`${owner}: bootstrapServers or client is required`)
    return { client: new KafkaClient(options as ClientOptions), ownsClient: true }
  }
  if (options.clock !== undefined && options.clock !== shared.clock)
    throw new InvalidArgumentError(`${owner}: clock differs from the shared client's; set it on the client`)
  if (options.ssl !== undefined || options.sasl !== undefined)
    throw new InvalidArgumentError(`${owner}: ssl and sasl belong to the shared client; set them there`)
  if (options.random !== undefined && options.random !== shared.random)
    throw new InvalidArgumentError(`${owner}: random differs from the shared client's; set it on the client`)
  if (options.defer !== undefined && options.defer !== shared.options.defer)
    throw new InvalidArgumentError(`${owner}: defer differs from the shared client's; set it on the client`)
  return { client: shared, ownsClient: false }
}

/** Who a request is for: a broker id, any broker, or the controller. */
export type RequestTarget = number | 'any' | 'controller'

export interface ClientRequestOptions {
  purpose?: ConnectionPurpose
  timeoutMs?: number
  /** Caps the client's highest version of the API for this request (see BrokerConnection.versionFor). */
  maxVersion?: number
}

interface Refresh {
  readonly topics: ReadonlySet<string> | 'all'
  readonly promise: Promise<MetadataSnapshot>
}

/** Attempts at a metadata refresh across the known brokers before giving up. */
const METADATA_ATTEMPTS_MAX = 3

/** Quota throttling seen by a client (Kafka's produce-throttle-time / fetch-throttle-time). */
export interface ThrottleStats {
  /** Responses that carried a throttle time. */
  responses: number
  totalMs: number
  maxMs: number
}

export interface ThrottleEvent {
  /** `host:port` of the broker that throttled. */
  readonly broker: string
  readonly apiKey: number
  readonly throttleTimeMs: number
}

export class KafkaClient {
  readonly options: ResolvedClientOptions
  /** The client's clock: the producer, consumer and admin sharing it use it too. */
  readonly clock: Clock
  readonly random: Random
  /** The one retry backoff of everything on this client (retry.backoff.ms, retry.backoff.max.ms). */
  readonly backoff: ExponentialBackoff
  private snapshot = MetadataSnapshot.empty()
  /** Topics every refresh includes (those the producer or consumer uses). */
  private readonly interest = new Set<string>()
  private readonly connections = new Map<string, Promise<BrokerConnection>>()
  private refreshing: Refresh | null = null
  private closed = false
  /** Quota throttle times brokers reported (KIP-219), over every connection of this client. */
  readonly throttle: ThrottleStats = { responses: 0, totalMs: 0, maxMs: 0 }
  private readonly throttleListeners: ((event: ThrottleEvent) => void)[] = []

  constructor(options: ClientOptions) {
    this.options = resolveClientOptions(options)
    this.clock = this.options.clock
    this.random = this.options.random
    this.backoff = retryBackoff(this.options)
  }

  get metadata(): MetadataSnapshot {
    return this.snapshot
  }

  /** Calls `listener` for every response a broker throttled (librdkafka's throttle_cb). */
  onThrottle(listener: (event: ThrottleEvent) => void): void {
    this.throttleListeners.push(listener)
  }

  get isClosed(): boolean {
    return this.closed
  }

  /** Topics to include in every refresh from now on. */
  addInterest(topics: Iterable<string>): void {
    for (const topic of topics) this.interest.add(topic)
  }

  /** Whether the snapshot is older than metadata.max.age.ms. */
  get metadataStale(): boolean {
    return this.clock.monotonicMs() - this.snapshot.updatedAtMs >= this.options.metadataMaxAgeMs
  }

  /**
   * Fetches metadata for the topics of interest plus `topics` ('all' for every topic).
   * Concurrent calls share one request when it covers what they asked for.
   */
  async refreshMetadata(
    topics: readonly string[] | 'all' = [],
    options: { allowAutoTopicCreation?: boolean } = {},
  ): Promise<MetadataSnapshot> {
    const wanted: ReadonlySet<string> | 'all' =
      topics === 'all' ? 'all' : new Set([...this.interest, ...topics])
    // Bounded: each pass waits for a refresh that started before this call.
    for (let pass = 0; this.refreshing && pass < 8; pass++) {
      const current: Refresh = this.refreshing
      if (covers(current.topics, wanted)) return current.promise
      await current.promise.catch(() => undefined)
    }
    const refresh: Refresh = {
      topics: wanted,
      promise: this.fetchMetadata(wanted, options.allowAutoTopicCreation ?? false),
    }
    this.refreshing = refresh
    try {
      return await refresh.promise
    } finally {
      if (this.refreshing === refresh) this.refreshing = null
    }
  }

  /**
   * Waits until every topic has partitions in the metadata, refreshing with backoff while
   * they are unknown or leaderless; rejects with the topic's error after `maxWaitMs`.
   */
  async waitForTopics(
    topics: readonly string[],
    options: { maxWaitMs: number; allowAutoTopicCreation?: boolean },
  ): Promise<MetadataSnapshot> {
    const deadline = this.clock.monotonicMs() + options.maxWaitMs
    let snapshot = this.snapshot
    for (let attempt = 1; ; attempt++) {
      const missing = topics.filter((t) => (snapshot.topics.get(t)?.partitions.length ?? 0) === 0)
      if (missing.length === 0) return snapshot
      if (attempt > 1 && this.clock.monotonicMs() >= deadline) {
        const code = snapshot.topicErrors.get(missing[0]) ?? ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        throw new KafkaProtocolError(code, `topic ${missing[0]} not available after ${options.maxWaitMs} ms`)
      }
      if (attempt > 1)
        await sleep(
          this.clock,
          Math.min(this.backoff.delayMs(attempt - 1), Math.max(deadline - this.clock.monotonicMs(), 0)),
        )
      snapshot = await this.refreshMetadata(missing, options)
    }
  }

  /** A connection to a broker of the current metadata (refreshing once if it is unknown). */
  async connectionTo(nodeId: number, purpose: ConnectionPurpose = 'normal'): Promise<BrokerConnection> {
    let node = this.snapshot.brokers.get(nodeId)
    if (!node) node = (await this.refreshMetadata()).brokers.get(nodeId)
    if (!node) throw new ConnectionError(`broker ${nodeId} is not in the cluster metadata`)
    return this.connect(node, purpose, `broker ${nodeId} ${purpose}`)
  }

  /** Sends a request to a broker, any broker (failing over), or the controller. */
  async request<T>(
    target: RequestTarget,
    apiKey: number,
    build: (version: number) => unknown,
    options: ClientRequestOptions = {},
  ): Promise<T> {
    const purpose = options.purpose ?? 'normal'
    if (target === 'any') return this.requestAny<T>(apiKey, build, options)
    let nodeId = target
    if (target === 'controller') {
      if (this.snapshot.controllerId < 0) await this.refreshMetadata()
      nodeId = this.snapshot.controllerId
      if (nodeId < 0) return this.requestAny<T>(apiKey, build, options)
    }
    const connection = await this.connectionTo(nodeId as number, purpose)
    const version = connection.versionFor(apiKey, options.maxVersion)
    return connection.request<T>(apiKey, build(version), { version, timeoutMs: options.timeoutMs })
  }

  /** A connection to any broker: known brokers first, then the bootstrap list. */
  async anyConnection(purpose: ConnectionPurpose = 'normal'): Promise<BrokerConnection> {
    let lastError: unknown = null
    for (const candidate of this.candidates()) {
      try {
        return await this.connect(candidate.address, purpose, candidate.label)
      } catch (error) {
        if (!(error instanceof ConnectionError)) throw error
        lastError = error
      }
    }
    throw new ConnectionError(
      `no broker reachable (tried ${this.describeCandidates()})${lastError instanceof Error ? `: ${lastError.message}` : ''}`,
      lastError,
    )
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    for (const pending of this.connections.values()) {
      pending.then(
        (c) => c.close(),
        () => undefined,
      )
    }
    this.connections.clear()
  }

  private async requestAny<T>(
    apiKey: number,
    build: (version: number) => unknown,
    options: ClientRequestOptions,
  ): Promise<T> {
    const connection = await this.anyConnection(options.purpose ?? 'normal')
    const version = connection.versionFor(apiKey, options.maxVersion)
    return connection.request<T>(apiKey, build(version), { version, timeoutMs: options.timeoutMs })
  }

  private async fetchMetadata(
    wanted: ReadonlySet<string> | 'all',
    allowAutoTopicCreation: boolean,
  ): Promise<MetadataSnapshot> {
    let lastError: unknown = null
    for (let attempt = 1; attempt <= METADATA_ATTEMPTS_MAX; attempt++) {
      if (this.closed) throw new ClientClosedError('client')
      try {
        const connection = await this.anyConnection('normal')
        const response = await connection.request<MetadataResponse>(
          ApiKey.Metadata,
          metadataRequest(wanted, allowAutoTopicCreation),
        )
        this.snapshot = this.snapshot.merge(response, this.clock.monotonicMs(), wanted === 'all')
        return this.snapshot
      } catch (error) {
        if (!(error instanceof KafkaClientError) || !error.retriable) throw error
        lastError = error
        await sleep(this.clock, this.backoff.delayMs(attempt))
      }
    }
    throw lastError
  }

  private candidates(): { address: BrokerAddress; label: string }[] {
    const known = [...this.snapshot.brokers.values()].map((b) => ({
      address: b,
      label: `broker ${b.nodeId} `,
    }))
    // Start at a random known broker so metadata load spreads; bootstrap addresses last.
    const start = known.length > 0 ? this.random.int(0, known.length - 1) : 0
    const rotated = [...known.slice(start), ...known.slice(0, start)]
    const bootstrap = this.options.bootstrap.map((a) => ({ address: a, label: 'bootstrap ' }))
    return [...rotated, ...bootstrap]
  }

  private onThrottleTime(broker: string, apiKey: number, throttleTimeMs: number): void {
    this.throttle.responses++
    this.throttle.totalMs += throttleTimeMs
    this.throttle.maxMs = Math.max(this.throttle.maxMs, throttleTimeMs)
    for (const listener of this.throttleListeners) listener({ broker, apiKey, throttleTimeMs })
  }

  private describeCandidates(): string {
    return this.candidates()
      .map((c) => `${c.address.host}:${c.address.port}`)
      .join(', ')
  }

  private connect(
    address: BrokerAddress | BrokerNode,
    purpose: ConnectionPurpose,
    label: string,
  ): Promise<BrokerConnection> {
    if (this.closed) return Promise.reject(new ClientClosedError('client'))
    const key = `${address.host}:${address.port}/${purpose}`
    const existing = this.connections.get(key)
    if (existing) return existing
    const pending = BrokerConnection.open({
      host: address.host,
      port: address.port,
      clientId: this.options.clientId,
      connectTimeoutMs: this.options.connectTimeoutMs,
      requestTimeoutMs: this.options.requestTimeoutMs,
      clock: this.clock,
      ssl: this.options.ssl,
      sasl: this.options.sasl,
      connector: this.options.connector,
      random: this.random,
      onThrottle: (apiKey, throttleTimeMs) =>
        this.onThrottleTime(`${address.host}:${address.port}`, apiKey, throttleTimeMs),
      label: label.trim().endsWith(purpose) ? label.trim() : `${label.trim()} ${purpose}`.trim(),
    })
    this.connections.set(key, pending)
    pending.then(
      (connection) => {
        connection.onClose(() => {
          if (this.connections.get(key) === pending) this.connections.delete(key)
        })
        if (this.closed) connection.close()
      },
      () => {
        if (this.connections.get(key) === pending) this.connections.delete(key)
      },
    )
    return pending
  }
}

function covers(have: ReadonlySet<string> | 'all', want: ReadonlySet<string> | 'all'): boolean {
  if (have === 'all') return true
  if (want === 'all') return false
  for (const topic of want) if (!have.has(topic)) return false
  return true
}

function metadataRequest(
  wanted: ReadonlySet<string> | 'all',
  allowAutoTopicCreation: boolean,
): MetadataRequest {
  return {
    topics: wanted === 'all' ? null : [...wanted].map((name) => ({ topicId: ZERO_UUID, name })),
    allowAutoTopicCreation,
    includeClusterAuthorizedOperations: false,
    includeTopicAuthorizedOperations: false,
  }
}
