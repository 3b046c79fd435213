/**
 * One client connection: frames in, requests dispatched in arrival order, responses out in
 * request order even when a later request finishes first (Kafka clients pipeline and match
 * responses by order as well as correlation id).
 *
 * Handlers are invoked synchronously in arrival order, so work a handler starts before its
 * first await (queuing an append) keeps request order. Bad input closes this connection
 * only, logged once; it never reaches other connections.
 *
 * It runs over any ByteStream (a TCP socket, the simulator's network), so every world runs
 * this dispatch.
 */

import { assert, InvariantError } from '../common/assert.js'
import type { Clock, TimerHandle } from '../common/clock.js'
import { ProtocolDecodeError } from '../common/errors.js'
import type { Logger } from '../common/logger.js'
import type { ByteStream } from '../common/network.js'
import { readBufferPool } from '../common/read-buffer-pool.js'
import type { RequestObservation, RequestObserver } from '../ops/request-observer.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { FrameDecoder, FrameError } from '../protocol/frame-decoder.js'
import { encodeResponseFrame } from '../protocol/frame-encoder.js'
import {
  ApiKey,
  apiCodec,
  apis,
  decodeRequestHeader,
  loadApiCodec,
  type RequestHeader,
} from '../protocol/generated/index.js'
import { Reader } from '../protocol/primitives.js'
import { ANONYMOUS, type KafkaPrincipal } from '../security/principal.js'
import { type SaslListenerSettings, SaslSession } from '../security/sasl-server.js'
import type { HandlerRegistry } from './handlers/registry.js'
import type { ClientQuotas } from './quota/client-quotas.js'
import type { ClientConnection, RequestContext } from './request-context.js'
import type { RequestMemoryPool } from './request-memory-pool.js'

/**
 * A tap on the request path (the simulator's invariants on answers): called as a request is
 * dispatched; the returned function, if any, when it is answered (null: no response, as
 * acks=0) or failed. Metrics use the richer RequestObserver of src/ops.
 */
export type RequestTap = (
  context: RequestContext,
  request: unknown,
) => ((outcome: { response: unknown } | { error: unknown }) => void) | undefined

export interface ConnectionOptions {
  id: number
  stream: ByteStream
  handlers: HandlerRegistry
  /** socket.request.max.bytes */
  socketRequestMaxBytes: number
  /** Requests read but not yet answered before reading pauses (backpressure). */
  maxQueuedRequests: number
  /**
   * Bytes of requests read but not yet answered before reading pauses; one request is always
   * read, however large. Unset: no bound but maxQueuedRequests.
   */
  maxQueuedRequestBytes?: number
  /** queued.max.request.bytes: the broker's bound over all its connections. */
  requestMemoryPool?: RequestMemoryPool
  logger: Logger
  /** Called with a programmer error (InvariantError): the broker decides to stop. */
  onFatal(error: Error): void
  onClose(connection: Connection): void
  /** Builds the per-request context the handlers receive. */
  makeContext(connection: Connection, header: RequestHeader, observation?: RequestObservation): RequestContext
  readonly tap?: RequestTap
  /** Request metrics (src/ops), when the broker's HTTP listener is on. */
  requestObserver?: RequestObserver
  /** The listener accepting this connection (default: PLAINTEXT). */
  listenerName?: string
  /** A SASL listener's mechanisms and credentials: requests wait for authentication. */
  sasl?: SaslListenerSettings
  /** The principal the TLS handshake proved (a client certificate), when there was one. */
  principal?: KafkaPrincipal
  /** Times the delayed close after a failed authentication, and quota throttling. */
  clock?: Clock
  /** Client quotas (KIP-219): a throttled response mutes the connection after it is sent. */
  quotas?: ClientQuotas
}

interface ResponseSlot {
  done: boolean
  chunks: Buffer[] | null
  observation?: RequestObservation
  /** Set when a quota throttles this request: reading stops this long once it is sent. */
  throttleTimeMs?: number
  /** The request frame's size, counted in the connection's queued bytes until the slot leaves. */
  requestBytes?: number
}

const UNKNOWN_CLIENT_SOFTWARE = { name: 'unknown', version: 'unknown' } as const

export class Connection implements ClientConnection {
  readonly id: number
  readonly remoteAddress: string
  private decoder: FrameDecoder
  private readonly queue: ResponseSlot[] = []
  /** Sum of the queued slots' requestBytes. */
  private queuedRequestBytes = 0
  private closed = false
  /**
   * False once this side closed the connection: frames not yet handled are dropped then. A
   * close by the peer leaves it true: the requests it wrote before closing are still handled
   * (their answers go nowhere), as Kafka handles every request it read before it sees the
   * close. An acks=0 producer closes right after its last write, with nothing to wait for.
   */
  private dispatching = true
  private readingPaused = false
  /**
   * Non-null while a request that must finish before the next is read (an acks=0 produce)
   * is in flight: frames that arrive meanwhile wait here, as Kafka reads one request at a
   * time per connection. Otherwise a write pipelined behind a failing acks=0 produce could
   * be appended and then lose its response when the connection closes.
   */
  private heldFrames: Buffer[] | null = null
  readonly listenerName: string
  readonly sasl: SaslSession | null
  /** Kafka's ClientInformation: "unknown" until ApiVersions v3+ names the client's software. */
  clientSoftware: { readonly name: string; readonly version: string } = UNKNOWN_CLIENT_SOFTWARE
  /** True once SASL completed and frames may grow to socket.request.max.bytes. */
  private widenDecoder = false
  /**
   * KIP-219 muting: throttled responses not yet sent, and the timer that unmutes once the
   * last sent one's throttle time has passed. Reading stays paused while either is set.
   */
  private throttledUnsent = 0
  private unmuteTimer: TimerHandle | null = null
  private unmuteAtMs = 0
  /** Frames read (the rest of a chunk, frames held behind an acks=0 produce) while muted. */
  private mutedFrames: Buffer[] = []

  /** Told once when the connection closes (share sessions release what their member holds). */
  private closeListeners: (() => void)[] = []
  /** Bumped by every read and every response written: the idle sweep compares it (SocketServer). */
  private activity = 0

  setClientSoftware(name: string, version: string): void {
    this.clientSoftware = { name, version }
  }

  whenClosed(listener: () => void): void {
    if (this.closed) listener()
    else this.closeListeners.push(listener)
  }

  constructor(private readonly options: ConnectionOptions) {
    this.id = options.id
    const { stream } = options
    this.remoteAddress = stream.remoteAddress
    this.listenerName = options.listenerName ?? 'PLAINTEXT'
    this.sasl = options.sasl ? new SaslSession(options.sasl) : null
    // Before authentication only small SASL requests are read (sasl.server.max.receive.size).
    this.decoder = new FrameDecoder(
      options.sasl
        ? Math.min(options.sasl.maxReceiveBytes, options.socketRequestMaxBytes)
        : options.socketRequestMaxBytes,
    )
    stream.onData((chunk) => this.onData(chunk))
    stream.onDrain(() => this.maybeResumeReading())
    stream.onClose((error) => {
      if (error) this.options.logger.debug({ err: error, conn: this.id }, 'connection error')
      this.onStreamClose()
    })
  }

  get isClosed(): boolean {
    return this.closed
  }

  get principal(): KafkaPrincipal {
    return this.sasl?.principal ?? this.options.principal ?? ANONYMOUS
  }

  /** Closes the connection after logging why, once. */
  close(reason: string, error?: unknown, level: 'warn' | 'info' | 'debug' = 'warn'): void {
    this.dispatching = false
    if (this.closed) return
    this.options.logger[level](
      { conn: this.id, remote: this.remoteAddress, err: error },
      `closing connection: ${reason}`,
    )
    this.closed = true
    this.options.stream.destroy()
  }

  private onStreamClose(): void {
    this.closed = true
    this.unmuteTimer?.cancel()
    this.unmuteTimer = null
    this.mutedFrames = []
    this.queue.length = 0
    this.options.requestMemoryPool?.forget(this.onPoolFreed)
    this.options.requestMemoryPool?.give(this.queuedRequestBytes)
    this.queuedRequestBytes = 0
    const listeners = this.closeListeners
    this.closeListeners = []
    for (const listener of listeners) listener()
    this.options.onClose(this)
  }

  /** Reads and writes so far; unchanged between two looks, the connection was idle between them. */
  get activityCount(): number {
    return this.activity
  }

  /** Requests read and not answered yet, or reading held back by a quota: not idle, whatever the time. */
  get isBusy(): boolean {
    return this.queue.length > 0 || this.unmuteTimer !== null
  }

  private onData(chunk: Buffer): void {
    if (this.closed) return
    this.activity++
    if (this.widenDecoder && this.decoder.bufferedBytes === 0) {
      this.widenDecoder = false
      this.decoder = new FrameDecoder(this.options.socketRequestMaxBytes)
    }
    try {
      this.decoder.push(chunk, (frame) => this.onFrame(frame))
    } catch (error) {
      this.onDispatchError(error)
    }
  }

  private onDispatchError(error: unknown): void {
    if (error instanceof InvariantError) {
      this.close('internal invariant violated', error)
      this.options.onFatal(error)
    } else if (error instanceof FrameError || error instanceof ProtocolDecodeError) {
      this.close(error.message)
    } else {
      this.close('request failed', error)
    }
  }

  private onFrame(frame: Buffer): void {
    if (!this.dispatching) return
    if (this.heldFrames !== null) {
      this.heldFrames.push(frame)
      return
    }
    if (this.isMuted) {
      this.mutedFrames.push(frame)
      return
    }
    const sasl = this.sasl
    if (sasl !== null && !sasl.isComplete) {
      if (sasl.state === 'failed') return
      if (sasl.state === 'raw-authenticate') {
        this.onRawSaslToken(sasl, frame)
        return
      }
    }
    if (frame.length < 8) throw new ProtocolDecodeError(`request of ${frame.length} bytes has no header`)
    const apiKey = frame.readInt16BE(0)
    const apiVersion = frame.readInt16BE(2)
    if (
      sasl?.isComplete &&
      apiKey !== ApiKey.SaslHandshake &&
      this.options.clock &&
      sasl.isExpired(this.options.clock.nowMs())
    ) {
      // KIP-368: past its session lifetime only a re-authentication may come; Kafka closes.
      this.close(
        'SASL session expired without re-authentication (connections.max.reauth.ms)',
        undefined,
        'info',
      )
      return
    }
    if (sasl !== null && !sasl.allows(apiKey)) {
      // Kafka's SaslServerAuthenticator: any other request before authentication ends the connection.
      this.close(
        `request of api key ${apiKey} in SASL state ${sasl.state}: not authenticated`,
        undefined,
        'info',
      )
      return
    }
    const handler = this.options.handlers.get(apiKey)
    if (!handler) {
      this.close(`unsupported api key ${apiKey}`)
      return
    }
    if (apiVersion < handler.minVersion || apiVersion > handler.maxVersion) {
      if (apiKey === ApiKey.ApiVersions) {
        this.answerUnsupportedApiVersions(frame.readInt32BE(4), handler.minVersion, handler.maxVersion)
      } else {
        this.close(`unsupported version ${apiVersion} of api key ${apiKey}`)
      }
      return
    }
    if (apiCodec(apiKey) === undefined) {
      this.holdUntilCodecLoaded(apiKey, frame)
      return
    }
    this.dispatch(frame, apiKey, apiVersion)
  }

  /**
   * An API's first request on this process: its codec is a file of the bundle, loaded now
   * rather than at start-up (docs/notes/startup.md). This frame and the ones after it wait, so
   * requests are still handled in order.
   */
  private holdUntilCodecLoaded(apiKey: number, frame: Buffer): void {
    this.heldFrames = [frame]
    this.options.stream.pause()
    loadApiCodec(apiKey).then(
      () => this.releaseHeldFrames(),
      (error: unknown) => this.onDispatchError(error),
    )
  }

  private dispatch(frame: Buffer, apiKey: number, apiVersion: number): void {
    const observation = this.options.requestObserver?.onRequest(apiKey, apiVersion, this.remoteAddress)
    const descriptor = apis.get(apiKey)
    assert(descriptor, `handler registered for api key ${apiKey} without a codec`)
    const quotas = this.options.clock && this.options.quotas?.enabled ? this.options.quotas : null
    // Timed only while a request_percentage quota exists: otherwise no clock read per request.
    const startedMs = quotas?.timesRequests ? this.options.clock!.monotonicMs() : 0
    const reader = new Reader(frame)
    const header = decodeRequestHeader(reader, descriptor.requestHeaderVersion(apiVersion))
    const request = descriptor.decodeRequest(reader, apiVersion)
    const handler = this.options.handlers.get(apiKey)!
    const context = this.options.makeContext(this, header, observation)
    const slot: ResponseSlot = { done: false, chunks: null, observation, requestBytes: frame.length }
    this.queue.push(slot)
    this.queuedRequestBytes += frame.length
    this.options.requestMemoryPool?.take(frame.length)
    this.maybePauseReading()
    const observed = this.options.tap?.(context, request)
    let handlerMs = 0
    const respond = (answer: unknown): void => {
      let response = answer
      observed?.({ response })
      observation?.onResponse(response)
      try {
        const quota =
          quotas === null
            ? null
            : {
                apiKey,
                request,
                user: this.principal.name,
                clientId: header.clientId ?? '',
                requestBytes: frame.length,
                requestTimeMs: handlerMs,
                nowMs: this.options.clock!.monotonicMs(),
              }
        let throttleTimeMs = quota === null ? 0 : quotas!.throttleBeforeEncode(quota)
        if (throttleTimeMs > 0) response = withThrottleTime(response, throttleTimeMs)
        slot.chunks =
          response === null ? null : encodeResponseFrame(apiKey, apiVersion, header.correlationId, response)
        if (quota !== null && slot.chunks !== null && apiKey === ApiKey.Fetch && apiVersion >= 1) {
          const fetchThrottleMs = quotas!.throttleFetchResponse(quota, totalLength(slot.chunks) - 4)
          if (fetchThrottleMs > throttleTimeMs) {
            throttleTimeMs = fetchThrottleMs
            patchFetchThrottleTime(slot.chunks, descriptor.responseHeaderVersion(apiVersion), throttleTimeMs)
          }
        }
        if (throttleTimeMs > 0) this.muteUntilSent(slot, throttleTimeMs)
      } catch (error) {
        slot.done = true
        this.onDispatchError(error)
        return
      }
      slot.done = true
      this.flushResponses()
      if (this.sasl !== null && (apiKey === ApiKey.SaslHandshake || apiKey === ApiKey.SaslAuthenticate))
        this.afterSaslStep(this.sasl)
    }
    observation?.onHandlerStart(request, header.clientId)
    const result = handler.handle(context, request)
    if (quotas?.timesRequests) handlerMs = this.options.clock!.monotonicMs() - startedMs
    if (result instanceof Promise) {
      result.then(respond, (error: unknown) => {
        observed?.({ error })
        observation?.onFailed()
        slot.done = true
        this.onDispatchError(error)
      })
      // After respond: a held request's throttle (acks=0) mutes before held frames replay.
      if (handler.holdsConnection?.(request)) this.holdUntilSettled(result)
    } else {
      respond(result)
    }
  }

  /**
   * A v0 handshake's tokens come bare (size, then the token) and are answered the same way
   * (KIP-43); a failure there can only close the connection.
   */
  private onRawSaslToken(sasl: SaslSession, token: Buffer): void {
    const slot: ResponseSlot = { done: false, chunks: null }
    this.queue.push(slot)
    sasl.authenticate(token).then(
      (outcome) => {
        slot.done = true
        if (outcome.errorCode !== ErrorCode.NONE) {
          this.close(`SASL authentication failed: ${outcome.errorMessage}`, undefined, 'info')
          return
        }
        const size = Buffer.alloc(4)
        size.writeInt32BE(outcome.authBytes.length, 0)
        slot.chunks = [size, outcome.authBytes]
        this.flushResponses()
        this.afterSaslStep(sasl)
      },
      (error: unknown) => {
        slot.done = true
        this.onDispatchError(error)
      },
    )
  }

  /** After a SASL answer went out: widen the frame limit once authenticated, or close a failed exchange. */
  private afterSaslStep(sasl: SaslSession): void {
    if (sasl.isComplete) {
      this.widenDecoder = true
      this.options.logger.debug({ conn: this.id, principal: sasl.principal }, 'authenticated')
      return
    }
    if (sasl.state !== 'failed' || this.closed) return
    // Kafka delays the close of a failed authentication (connection.failed.authentication.delay.ms)
    // so a client cannot hammer the broker with guesses; the answer is already written.
    this.options.stream.pause()
    const delayMs = this.sasl?.settings.failedAuthenticationDelayMs ?? 0
    const close = (): void => this.close('SASL authentication failed', undefined, 'info')
    if (this.options.clock && delayMs > 0) this.options.clock.setTimeout(close, delayMs)
    else if (this.options.clock) this.options.clock.setTimeout(close, 0)
    else close()
  }

  private holdUntilSettled(request: Promise<unknown>): void {
    this.heldFrames = []
    this.options.stream.pause()
    const release = (): void => this.releaseHeldFrames()
    request.then(release, release)
  }

  private releaseHeldFrames(): void {
    const frames = this.heldFrames ?? []
    this.heldFrames = null
    if (!this.readingPaused && !this.isMuted && !this.closed) this.options.stream.resume()
    this.replayHeldFrames(frames)
  }

  private replayHeldFrames(frames: readonly Buffer[]): void {
    for (let i = 0; i < frames.length; i++) {
      if (this.heldFrames !== null) {
        this.heldFrames.push(...frames.slice(i))
        return
      }
      try {
        this.onFrame(frames[i])
      } catch (error) {
        this.onDispatchError(error)
        return
      }
    }
  }

  /**
   * Kafka answers an ApiVersions request of a version it does not know without parsing its
   * body: a v0-shaped response with UNSUPPORTED_VERSION and only its own ApiVersions range,
   * so clients can retry with a version both sides know (KIP-511).
   */
  private answerUnsupportedApiVersions(correlationId: number, minVersion: number, maxVersion: number): void {
    const slot: ResponseSlot = { done: true, chunks: null }
    slot.chunks = encodeResponseFrame(ApiKey.ApiVersions, 0, correlationId, {
      errorCode: ErrorCode.UNSUPPORTED_VERSION,
      apiKeys: [{ apiKey: ApiKey.ApiVersions, minVersion, maxVersion }],
      throttleTimeMs: 0,
    })
    this.queue.push(slot)
    this.flushResponses()
  }

  private flushResponses(): void {
    if (this.closed) return
    let ready: Buffer[] | null = null
    let throttledMs = 0
    while (this.queue.length > 0 && this.queue[0].done) {
      const slot = this.queue.shift()!
      if (slot.requestBytes !== undefined) {
        this.queuedRequestBytes -= slot.requestBytes
        this.options.requestMemoryPool?.give(slot.requestBytes)
      }
      if (slot.throttleTimeMs !== undefined) {
        this.throttledUnsent--
        throttledMs = Math.max(throttledMs, slot.throttleTimeMs)
      }
      if (slot.chunks === null) {
        slot.observation?.onSent()
        continue
      }
      if (ready === null) ready = slot.chunks
      else for (const chunk of slot.chunks) ready.push(chunk)
      slot.observation?.onSent()
    }
    if (ready !== null) {
      this.activity++
      // Pooled read buffers (fetched records) go back to the pool once the socket wrote them.
      // Not with a tap, which may keep the responses it observes.
      const written = ready
      if (this.options.tap === undefined && readBufferPool.holdsAny(written))
        this.options.stream.write(written, () => readBufferPool.release(written))
      else this.options.stream.write(written)
    }
    if (throttledMs > 0) this.startThrottle(throttledMs)
    this.maybePauseReading()
    this.maybeResumeReading()
  }

  /**
   * Too many requests, or too many of their bytes on this connection or in the whole broker,
   * wait for answers: read no more for now. A connection holding nothing always reads one.
   */
  private get isQueueFull(): boolean {
    if (this.queue.length >= this.options.maxQueuedRequests) return true
    if (this.queuedRequestBytes >= (this.options.maxQueuedRequestBytes ?? Number.POSITIVE_INFINITY))
      return true
    return this.queuedRequestBytes > 0 && this.options.requestMemoryPool?.hasRoom === false
  }

  /** The broker's pool has room again: read if nothing else holds reading back. */
  private readonly onPoolFreed = (): void => this.maybeResumeReading()

  private maybePauseReading(): void {
    const full = this.isQueueFull || this.options.stream.writableNeedDrain
    if (full && this.options.requestMemoryPool?.hasRoom === false)
      this.options.requestMemoryPool.whenFreed(this.onPoolFreed)
    if (!this.readingPaused && full) {
      this.readingPaused = true
      this.options.stream.pause()
    }
  }

  private maybeResumeReading(): void {
    const { stream } = this.options
    if (
      this.readingPaused &&
      !this.isMuted &&
      this.heldFrames === null &&
      !this.isQueueFull &&
      !stream.writableNeedDrain
    ) {
      this.readingPaused = false
      stream.resume()
    }
  }

  private get isMuted(): boolean {
    return this.throttledUnsent > 0 || this.unmuteTimer !== null
  }

  /** Reading stops now; the throttle time counts from when the response has gone (KIP-219). */
  private muteUntilSent(slot: ResponseSlot, throttleTimeMs: number): void {
    if (slot.throttleTimeMs === undefined) this.throttledUnsent++
    slot.throttleTimeMs = throttleTimeMs
    this.options.stream.pause()
  }

  private startThrottle(throttleTimeMs: number): void {
    const clock = this.options.clock!
    const untilMs = clock.monotonicMs() + throttleTimeMs
    if (this.unmuteTimer !== null && untilMs <= this.unmuteAtMs) return
    this.unmuteTimer?.cancel()
    this.unmuteAtMs = untilMs
    this.unmuteTimer = clock.setTimeout(() => {
      this.unmuteTimer = null
      this.maybeUnmute()
    }, throttleTimeMs)
  }

  private maybeUnmute(): void {
    if (this.closed || this.isMuted || this.heldFrames !== null) return
    const frames = this.mutedFrames
    this.mutedFrames = []
    this.replayHeldFrames(frames)
    if (this.isMuted || this.heldFrames !== null || this.closed) return
    if (this.readingPaused) this.maybeResumeReading()
    else this.options.stream.resume()
  }
}

/** The response with `throttleTimeMs` raised to the quota's (every API but a few has the field). */
function withThrottleTime(response: unknown, throttleTimeMs: number): unknown {
  if (response === null || typeof response !== 'object' || !('throttleTimeMs' in response)) return response
  const current = (response as { throttleTimeMs: number }).throttleTimeMs
  return current >= throttleTimeMs ? response : { ...response, throttleTimeMs }
}

function totalLength(chunks: readonly Buffer[]): number {
  let length = 0
  for (const chunk of chunks) length += chunk.length
  return length
}

/**
 * A fetch's size is known only once encoded; its throttle_time_ms (the body's first field
 * from v1) is written into the bytes rather than encoding it again: after the size, the
 * correlation id and, for a flexible header, its empty tagged fields.
 */
function patchFetchThrottleTime(chunks: Buffer[], headerVersion: number, throttleTimeMs: number): void {
  const offset = 4 + 4 + (headerVersion >= 1 ? 1 : 0)
  assert(chunks[0].length >= offset + 4, 'fetch response shorter than its header')
  chunks[0].writeInt32BE(throttleTimeMs, offset)
}
