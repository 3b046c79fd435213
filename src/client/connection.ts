/**
 * One TCP connection to one broker. Requests are pipelined and matched to responses by
 * correlation id (a broker answers in request order). On connect the connection asks for
 * ApiVersions (v3, falling back to v0 as Kafka's own clients do) and from then on picks,
 * per request, the highest version both sides speak.
 *
 * A request that gets no answer within its timeout closes the connection and fails every
 * request on it, as Kafka's NetworkClient does: a late answer could otherwise be matched
 * to nothing, and the socket's state is unknown.
 *
 * The byte stream comes from the injected connector (connector.ts): TCP or TLS by default,
 * the simulator's network in a simulation. With `sasl` the connection authenticates right
 * after ApiVersions (SaslHandshake v1, then SaslAuthenticate v2 tokens, as Kafka's
 * SaslClientAuthenticator) and is handed out only once the broker accepted it.
 */
import { assert } from '../common/assert.js'
import type { Clock, TimerHandle } from '../common/clock.js'
import { TidelogError } from '../common/errors.js'
import type { ByteStream } from '../common/network.js'
import { type Random, systemRandom } from '../common/random.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { FrameDecoder } from '../protocol/frame-decoder.js'
import { encodeRequestFrame } from '../protocol/frame-encoder.js'
import type { ApiVersionsResponse } from '../protocol/generated/api-versions-response.js'
import { ApiKey, apis, loadAllApiCodecs } from '../protocol/generated/index.js'
import { decodeResponseHeader } from '../protocol/generated/response-header.js'
import type { SaslAuthenticateResponse } from '../protocol/generated/sasl-authenticate-response.js'
import type { SaslHandshakeResponse } from '../protocol/generated/sasl-handshake-response.js'
import { Reader } from '../protocol/primitives.js'
import { saslClientExchange } from '../protocol/sasl-client.js'
import type { ClientConnector } from './connector.js'
import {
  ConnectionError,
  KafkaClientError,
  KafkaProtocolError,
  RequestTimeoutError,
  SaslAuthenticationFailedError,
  UnsupportedApiError,
} from './errors.js'
import type { SaslOptions, SslOptions } from './security-options.js'
import { CLIENT_VERSIONS, pickVersion, type VersionRange } from './versions.js'

/** Responses above this size are a broken peer, not data (fetch.max.bytes is far below). */
const MAX_RESPONSE_BYTES = 512 * 1024 * 1024
/** Pipelined requests per connection; callers bound themselves well below this. */
const MAX_IN_FLIGHT = 1024
const CLIENT_SOFTWARE_NAME = 'tidelog-client'
const CLIENT_SOFTWARE_VERSION = '0.1.0'
const SASL_HANDSHAKE_VERSION = 1
const SASL_AUTHENTICATE_VERSION = 2

export interface ConnectionOptions {
  host: string
  port: number
  clientId: string
  connectTimeoutMs: number
  requestTimeoutMs: number
  /** Connect and request timeouts run on it. */
  clock: Clock
  /** For messages only: which broker and which role (produce, fetch, normal). */
  label: string
  /** TLS (security.protocol SSL or SASL_SSL); absent: plain TCP. */
  ssl?: SslOptions
  /** Opens the byte stream (ClientOptions.connector: TCP or TLS unless a simulation injects its network). */
  connector: ClientConnector
  /** SASL (security.protocol SASL_PLAINTEXT or SASL_SSL); absent: no authentication. */
  sasl?: SaslOptions
  /** SCRAM client nonces. */
  random?: Random
  /** Told of every response that carried a quota throttle time (KIP-219). */
  onThrottle?(apiKey: number, throttleTimeMs: number): void
}

/**
 * The first versions whose throttle the client must honour itself (KIP-219): the broker
 * answered at once and muted the connection; requests written meanwhile wait in its socket.
 * Before them the broker delayed the answer instead.
 */
const CLIENT_THROTTLES_FROM: ReadonlyMap<number, number> = new Map([
  [ApiKey.Produce, 6],
  [ApiKey.Fetch, 8],
  [ApiKey.ListOffsets, 3],
  [ApiKey.Metadata, 6],
  [ApiKey.FindCoordinator, 2],
  [ApiKey.CreateTopics, 3],
  [ApiKey.DeleteTopics, 2],
  [ApiKey.DescribeConfigs, 2],
  [ApiKey.AlterConfigs, 1],
  [ApiKey.CreatePartitions, 1],
  [ApiKey.InitProducerId, 1],
])

export interface RequestOptions {
  /** Overrides request.timeout.ms (a long-poll fetch adds its max wait). */
  timeoutMs?: number
  /** Pins the version (tests); otherwise the highest both sides speak. */
  version?: number
}

interface InFlight {
  readonly apiKey: number
  readonly version: number
  readonly timer: TimerHandle
  resolve(body: unknown): void
  reject(error: Error): void
}

export class BrokerConnection {
  private readonly inFlight = new Map<number, InFlight>()
  /** For a stream that delivers chunks; one that reads frames itself (`readFrames`) needs none. */
  private decoder: FrameDecoder | null = null
  /** Writes whose caller waits for the bytes to leave (acks=0 produce): failed with the connection. */
  private readonly pendingWrites = new Set<(error?: Error | null) => void>()
  private readonly closeListeners: ((error: Error) => void)[] = []
  private brokerVersions = new Map<number, VersionRange>()
  /** The cluster's finalized feature levels, as this broker's ApiVersions (v3+) said them. */
  private finalizedFeatures = new Map<string, number>()
  private nextCorrelationId = 1
  private closedWith: Error | null = null
  /** KIP-219: nothing is written before this (monotonic ms) after a throttled response. */
  private throttledUntilMs = 0
  /** Frames waiting for the throttle to end, in order, and the timer that writes them. */
  private throttledWrites: { chunks: readonly Buffer[]; done?: (error?: Error | null) => void }[] = []
  private throttleTimer: TimerHandle | null = null

  private constructor(
    private readonly stream: ByteStream,
    readonly options: ConnectionOptions,
  ) {
    if (stream.readFrames)
      stream.readFrames(
        MAX_RESPONSE_BYTES,
        (frame) => this.onResponse(frame),
        (error) => this.onBadResponse(error),
      )
    else {
      this.decoder = new FrameDecoder(MAX_RESPONSE_BYTES)
      stream.onData((chunk) => this.onData(chunk))
    }
    stream.onClose((error) =>
      this.fail(
        error
          ? new ConnectionError(`${this.describe()}: ${error.message}`, error)
          : new ConnectionError(`${this.describe()}: connection closed`),
      ),
    )
  }

  /** Opens the stream and negotiates versions; rejects with ConnectionError. */
  static async open(options: ConnectionOptions): Promise<BrokerConnection> {
    // A client uses many APIs: their codecs load while the stream connects.
    const [stream] = await Promise.all([openStream(options), loadAllApiCodecs()])
    const connection = new BrokerConnection(stream, options)
    try {
      await connection.negotiateVersions()
      if (options.sasl) await connection.authenticate(options.sasl)
    } catch (error) {
      connection.close()
      throw error
    }
    return connection
  }

  get isClosed(): boolean {
    return this.closedWith !== null
  }

  get inFlightCount(): number {
    return this.inFlight.size
  }

  onClose(listener: (error: Error) => void): void {
    this.closeListeners.push(listener)
  }

  /** Whether the broker serves this API at a version this client speaks. */
  supports(apiKey: number): boolean {
    const broker = this.brokerVersions.get(apiKey)
    const client = CLIENT_VERSIONS.get(apiKey)
    if (!broker) return false
    return client ? pickVersion(client, broker) >= 0 : true
  }

  /** Whether the broker advertises the API at all (any version). */
  advertises(apiKey: number): boolean {
    return this.brokerVersions.has(apiKey)
  }

  /**
   * The version a request of this API goes out at; throws UnsupportedApiError. `maxVersion`
   * lowers the client's highest (a transactional producer at transaction version 1 keeps
   * Produce at 11 and EndTxn at 4, as Java's builders do).
   */
  versionFor(apiKey: number, maxVersion?: number): number {
    const api = apis.get(apiKey)
    assert(api, () => `unknown api key ${apiKey}`)
    const range = CLIENT_VERSIONS.get(apiKey) ?? { min: api.minVersion, max: api.maxVersion }
    const client = maxVersion === undefined ? range : { min: range.min, max: Math.min(range.max, maxVersion) }
    const broker = this.brokerVersions.get(apiKey)
    if (!broker) {
      throw new UnsupportedApiError(
        api.name,
        `${this.describe()} does not serve ${api.name} (api key ${apiKey})`,
      )
    }
    const version = pickVersion(client, broker)
    if (version < 0) {
      throw new UnsupportedApiError(
        api.name,
        `${api.name}: broker serves v${broker.min}-${broker.max}, this client v${client.min}-${client.max}`,
      )
    }
    return version
  }

  /** A feature's finalized level (`transaction.version`...); 0 when not finalized or not said. */
  finalizedFeatureLevel(name: string): number {
    return this.finalizedFeatures.get(name) ?? 0
  }

  /** Sends a request and resolves with its decoded response body. */
  request<T>(apiKey: number, body: unknown, options: RequestOptions = {}): Promise<T> {
    const version = options.version ?? this.versionFor(apiKey)
    return this.send<T>(apiKey, version, body, options.timeoutMs ?? this.options.requestTimeoutMs)
  }

  /**
   * Sends a request that gets no response (Produce with acks=0); resolves once the bytes
   * are handed to the kernel.
   */
  sendOneWay(apiKey: number, body: unknown): Promise<void> {
    if (this.closedWith) return Promise.reject(this.closedWith)
    const version = this.versionFor(apiKey)
    const frame = encodeRequestFrame(apiKey, version, this.nextCorrelationId++, this.options.clientId, body)
    return new Promise<void>((resolve, reject) => {
      this.write(frame, (error) =>
        error ? reject(new ConnectionError(`${this.describe()}: write failed`, error)) : resolve(),
      )
    })
  }

  close(): void {
    this.fail(new ConnectionError(`${this.describe()}: closed by the client`))
  }

  describe(): string {
    return `${this.options.label} (${this.options.host}:${this.options.port})`
  }

  private send<T>(apiKey: number, version: number, body: unknown, timeoutMs: number): Promise<T> {
    if (this.closedWith) return Promise.reject(this.closedWith)
    if (this.inFlight.size >= MAX_IN_FLIGHT) {
      return Promise.reject(
        new ConnectionError(`${this.describe()}: more than ${MAX_IN_FLIGHT} requests in flight`),
      )
    }
    const correlationId = this.nextCorrelationId++
    const frame = encodeRequestFrame(apiKey, version, correlationId, this.options.clientId, body)
    return new Promise<T>((resolve, reject) => {
      const timer = this.options.clock.setTimeout(() => this.onTimeout(apiKey, timeoutMs), timeoutMs)
      this.inFlight.set(correlationId, {
        apiKey,
        version,
        timer,
        resolve: resolve as (b: unknown) => void,
        reject,
      })
      this.write(frame)
    })
  }

  private write(chunks: readonly Buffer[], done?: (error?: Error | null) => void): void {
    const waitMs = this.throttledUntilMs - this.options.clock.monotonicMs()
    if (this.throttledWrites.length > 0 || waitMs > 0) {
      this.throttledWrites.push({ chunks, done })
      this.throttleTimer ??= this.options.clock.setTimeout(() => this.writeThrottled(), Math.max(0, waitMs))
      return
    }
    this.writeNow(chunks, done)
  }

  private writeThrottled(): void {
    this.throttleTimer = null
    if (this.closedWith) return
    const waitMs = this.throttledUntilMs - this.options.clock.monotonicMs()
    if (waitMs > 0) {
      this.throttleTimer = this.options.clock.setTimeout(() => this.writeThrottled(), waitMs)
      return
    }
    for (const { chunks, done } of this.throttledWrites.splice(0)) this.writeNow(chunks, done)
  }

  /** A response's throttle time: reported, and honoured when the version says the client must. */
  private onThrottleTime(apiKey: number, version: number, body: unknown): void {
    const throttleTimeMs = (body as { throttleTimeMs?: unknown } | null)?.throttleTimeMs
    if (typeof throttleTimeMs !== 'number' || throttleTimeMs <= 0) return
    this.options.onThrottle?.(apiKey, throttleTimeMs)
    const from = CLIENT_THROTTLES_FROM.get(apiKey)
    if (from === undefined || version < from) return
    this.throttledUntilMs = Math.max(this.throttledUntilMs, this.options.clock.monotonicMs() + throttleTimeMs)
  }

  private writeNow(chunks: readonly Buffer[], done?: (error?: Error | null) => void): void {
    if (done === undefined) {
      this.stream.write(chunks)
      return
    }
    // A stream never reports a failed write: the connection's failure fails the waiter instead.
    this.pendingWrites.add(done)
    this.stream.write(chunks, () => {
      if (this.pendingWrites.delete(done)) done()
    })
  }

  private onData(chunk: Buffer): void {
    try {
      this.decoder!.push(chunk, (frame) => this.onResponse(frame))
    } catch (error) {
      this.onBadResponse(error)
    }
  }

  private onBadResponse(error: unknown): void {
    this.fail(new ConnectionError(`${this.describe()}: bad response`, error))
  }

  private onResponse(frame: Buffer): void {
    const correlationId = frame.length >= 4 ? frame.readInt32BE(0) : -1
    const request = this.inFlight.get(correlationId)
    if (!request)
      throw new ConnectionError(`${this.describe()}: response for unknown correlation id ${correlationId}`)
    // A broker answers in request order: an answer that skips an older request means that
    // request's answer is lost (and whether the broker acted on it unknown), so the
    // connection is closed, failing both, as Kafka's NetworkClient does on a correlation id
    // mismatch. Answering the newer request alone would let a retried produce land after
    // batches sent behind it, out of reach of the broker's duplicate check.
    const oldest = this.inFlight.keys().next().value
    if (correlationId !== oldest)
      throw new ConnectionError(
        `${this.describe()}: response for correlation id ${correlationId} while ${oldest} is unanswered`,
      )
    this.inFlight.delete(correlationId)
    request.timer.cancel()
    const api = apis.get(request.apiKey)!
    const reader = new Reader(frame)
    let body: unknown
    try {
      decodeResponseHeader(reader, api.responseHeaderVersion(request.version))
      body = decodeBody(request.apiKey, request.version, reader)
    } catch (error) {
      request.reject(
        new ConnectionError(
          `${this.describe()}: undecodable ${api.name} v${request.version} response`,
          error,
        ),
      )
      return
    }
    this.onThrottleTime(request.apiKey, request.version, body)
    request.resolve(body)
  }

  private onTimeout(apiKey: number, timeoutMs: number): void {
    const name = apis.get(apiKey)?.name ?? String(apiKey)
    this.fail(new RequestTimeoutError(`${this.describe()}: no ${name} response within ${timeoutMs} ms`))
  }

  private fail(error: Error): void {
    if (this.closedWith) return
    this.closedWith = error
    this.stream.destroy()
    this.throttleTimer?.cancel()
    this.throttleTimer = null
    for (const { done } of this.throttledWrites.splice(0)) done?.(error)
    for (const done of this.pendingWrites) done(error)
    this.pendingWrites.clear()
    for (const request of this.inFlight.values()) {
      request.timer.cancel()
      request.reject(error)
    }
    this.inFlight.clear()
    for (const listener of this.closeListeners.splice(0)) listener(error)
  }

  /** ApiVersions v3, then v0 if the broker is older (it answers UNSUPPORTED_VERSION). */
  private async negotiateVersions(): Promise<void> {
    const request = {
      clientSoftwareName: CLIENT_SOFTWARE_NAME,
      clientSoftwareVersion: CLIENT_SOFTWARE_VERSION,
    }
    let response = await this.send<ApiVersionsResponse>(
      ApiKey.ApiVersions,
      3,
      request,
      this.options.connectTimeoutMs,
    )
    if (response.errorCode === ErrorCode.UNSUPPORTED_VERSION) {
      response = await this.send<ApiVersionsResponse>(
        ApiKey.ApiVersions,
        0,
        request,
        this.options.connectTimeoutMs,
      )
    }
    if (response.errorCode !== ErrorCode.NONE) {
      throw new ConnectionError(`${this.describe()}: ApiVersions failed with error ${response.errorCode}`)
    }
    this.brokerVersions = new Map(
      response.apiKeys.map((k) => [k.apiKey, { min: k.minVersion, max: k.maxVersion }]),
    )
    // v3+ only, and only with a known epoch (-1: the broker does not know them yet).
    this.finalizedFeatures =
      response.finalizedFeaturesEpoch >= 0n
        ? new Map((response.finalizedFeatures ?? []).map((f) => [f.name, f.maxVersionLevel]))
        : new Map()
  }

  /**
   * SaslHandshake v1 then the mechanism's SaslAuthenticate v2 round trips. A refusal is not
   * retriable: the same credentials fail the same way (Kafka's AuthenticationException).
   */
  private async authenticate(sasl: SaslOptions): Promise<void> {
    const mechanism = sasl.mechanism.toUpperCase() as Uppercase<SaslOptions['mechanism']>
    const handshake = await this.send<SaslHandshakeResponse>(
      ApiKey.SaslHandshake,
      SASL_HANDSHAKE_VERSION,
      { mechanism },
      this.options.connectTimeoutMs,
    )
    if (handshake.errorCode !== ErrorCode.NONE) {
      throw new KafkaProtocolError(
        handshake.errorCode,
        `${this.describe()}: SASL mechanism ${mechanism} refused; the broker offers ${handshake.mechanisms.join(', ') || 'none'}`,
      )
    }
    const step = async (token: Buffer): Promise<Buffer> => {
      const response = await this.send<SaslAuthenticateResponse>(
        ApiKey.SaslAuthenticate,
        SASL_AUTHENTICATE_VERSION,
        { authBytes: token },
        this.options.connectTimeoutMs,
      )
      if (response.errorCode === ErrorCode.SASL_AUTHENTICATION_FAILED)
        throw new SaslAuthenticationFailedError(
          `${this.describe()}: ${response.errorMessage ?? 'SASL authentication failed'}`,
        )
      if (response.errorCode !== ErrorCode.NONE)
        throw new KafkaProtocolError(
          response.errorCode,
          `${this.describe()}: ${response.errorMessage ?? 'SaslAuthenticate failed'}`,
        )
      return response.authBytes
    }
    try {
      await saslClientExchange(
        { mechanism, username: sasl.username, password: sasl.password },
        this.options.random ?? systemRandom,
        step,
      )
    } catch (error) {
      // The broker's SCRAM answers did not check out (a server that does not know the password).
      if (error instanceof TidelogError && !(error instanceof KafkaClientError))
        throw new SaslAuthenticationFailedError(`${this.describe()}: ${error.message}`, error)
      throw error
    }
  }
}

/**
 * Decodes a response body. ApiVersions is special: a broker that does not know our version
 * answers in the v0 shape (KIP-511), so a v3 body that does not decode is read as v0.
 */
function decodeBody(apiKey: number, version: number, reader: Reader): unknown {
  const api = apis.get(apiKey)!
  if (apiKey !== ApiKey.ApiVersions || version === 0) return api.decodeResponse(reader, version)
  const start = reader.offset
  try {
    return api.decodeResponse(reader, version)
  } catch {
    // Not an error to report: the v0-framed UNSUPPORTED_VERSION answer is expected here.
    reader.offset = start
    return api.decodeResponse(reader, 0)
  }
}

/**
 * The connector's stream, within socket.connection.setup.timeout.ms. A connector's own error
 * becomes a ConnectionError naming the broker; a KafkaClientError (a refused certificate)
 * is passed on as it is.
 */
function openStream(options: ConnectionOptions): Promise<ByteStream> {
  const where = `${options.host}:${options.port}`
  const abort = new AbortController()
  return new Promise((resolve, reject) => {
    const timer = options.clock.setTimeout(() => {
      const error = new ConnectionError(
        `${options.label}: connect to ${where} timed out after ${options.connectTimeoutMs} ms`,
      )
      abort.abort(error)
      reject(error)
    }, options.connectTimeoutMs)
    const target = {
      host: options.host,
      port: options.port,
      ssl: options.ssl,
      maxFrameBytes: MAX_RESPONSE_BYTES,
    }
    options.connector(target, abort.signal).then(
      (stream) => {
        timer.cancel()
        // Too late: the caller has its timeout error already.
        if (abort.signal.aborted) stream.destroy()
        else resolve(stream)
      },
      (error: unknown) => {
        timer.cancel()
        if (error instanceof KafkaClientError) reject(error)
        else {
          const message = error instanceof Error ? error.message : String(error)
          reject(new ConnectionError(`cannot connect to ${where}: ${message}`, error))
        }
      },
    )
  })
}
