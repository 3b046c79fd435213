/**
 * A Kafka-protocol connection from one broker to another (follower fetches,
 * OffsetForLeaderEpoch). Requests are pipelined and matched to responses by correlation
 * id; a connection error fails every request in flight and the next request reconnects.
 *
 * The byte stream comes from the injected network (TCP, or the simulator's network).
 */

import { TidelogError } from '../common/errors.js'
import type { ByteStream, Transport } from '../common/network.js'
import { FrameDecoder } from '../protocol/frame-decoder.js'
import { encodeRequestFrame } from '../protocol/frame-encoder.js'
import { apiCodec, apis, decodeResponseHeader, loadApiCodec } from '../protocol/generated/index.js'
import { Reader } from '../protocol/primitives.js'

export class BrokerConnectionError extends TidelogError {
  constructor(message: string, cause?: unknown) {
    super('ERR_BROKER_CONNECTION', message, { cause, retriable: true })
    this.name = 'BrokerConnectionError'
  }
}

interface InFlight {
  readonly apiKey: number
  readonly version: number
  resolve(body: unknown): void
  reject(error: Error): void
}

const MAX_RESPONSE_BYTES = 256 * 1024 * 1024

export class BrokerClient {
  private connection: Promise<ByteStream> | null = null
  private readonly inFlight = new Map<number, InFlight>()
  private nextCorrelationId = 1
  private closed = false

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly clientId: string,
    private readonly transport: Transport,
  ) {}

  /** Sends a request and resolves with its decoded response body. */
  async request<T>(apiKey: number, version: number, body: unknown): Promise<T> {
    if (this.closed) throw new BrokerConnectionError('client closed')
    if (apiCodec(apiKey) === undefined) await loadApiCodec(apiKey)
    const connection = await this.connect()
    const correlationId = this.nextCorrelationId++
    const frame = encodeRequestFrame(apiKey, version, correlationId, this.clientId, body)
    return new Promise<T>((resolve, reject) => {
      this.inFlight.set(correlationId, {
        apiKey,
        version,
        resolve: resolve as (body: unknown) => void,
        reject,
      })
      connection.write(frame)
    })
  }

  close(): void {
    this.closed = true
    const connection = this.connection
    this.connection = null
    connection?.then(
      (c) => c.destroy(),
      () => undefined,
    )
    this.failAll(new BrokerConnectionError('client closed'))
  }

  private connect(): Promise<ByteStream> {
    if (this.connection) return this.connection
    const pending = this.transport.connect(this.host, this.port).then((connection) => {
      const onBadFrame = (error: unknown): void => {
        connection.destroy()
        this.failAll(new BrokerConnectionError('bad response frame', error))
      }
      if (connection.readFrames) {
        connection.readFrames(MAX_RESPONSE_BYTES, (frame) => this.onResponse(frame), onBadFrame)
      } else {
        const decoder = new FrameDecoder(MAX_RESPONSE_BYTES)
        connection.onData((chunk) => {
          try {
            decoder.push(chunk, (frame) => this.onResponse(frame))
          } catch (error) {
            onBadFrame(error)
          }
        })
      }
      connection.onClose((error) => {
        if (this.connection === pending) this.connection = null
        this.failAll(new BrokerConnectionError(`connection to ${this.host}:${this.port} closed`, error))
      })
      return connection
    })
    pending.catch(() => {
      if (this.connection === pending) this.connection = null
    })
    this.connection = pending
    return pending.catch((error: unknown) => {
      throw new BrokerConnectionError(`cannot connect to ${this.host}:${this.port}`, error)
    })
  }

  private onResponse(frame: Buffer): void {
    const reader = new Reader(frame)
    const correlationId = reader.readInt32()
    const request = this.inFlight.get(correlationId)
    if (!request) throw new BrokerConnectionError(`response for unknown correlation id ${correlationId}`)
    this.inFlight.delete(correlationId)
    const api = apis.get(request.apiKey)!
    // The response header's tagged fields (v1) follow the correlation id.
    reader.offset = 0
    decodeResponseHeader(reader, api.responseHeaderVersion(request.version))
    request.resolve(api.decodeResponse(reader, request.version))
  }

  private failAll(error: Error): void {
    const requests = [...this.inFlight.values()]
    this.inFlight.clear()
    for (const request of requests) request.reject(error)
  }
}
