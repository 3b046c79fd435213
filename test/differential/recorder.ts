/**
 * The session recorder (issue 32, item 3): a TCP proxy between a real Kafka client and a
 * broker that keeps every request frame of the session with its answer, for replay as a
 * differential input (session.ts).
 *
 * The proxy fronts each broker: one loopback listener per broker address, opened when an
 * answer first names that broker. Answers that name brokers (Metadata, FindCoordinator,
 * DescribeCluster) are decoded, their host and port replaced by the broker's front, and
 * encoded again, so the client keeps talking through the proxy; every other frame passes
 * byte for byte. The session file keeps the broker's own answers, not the rewritten ones.
 *
 * Session file (JSON lines): a first line `{"session": {...}}` saying what was recorded, then
 * one line per request in the order the proxy received it (across the client's connections):
 * `{"seq", "conn", "atMs", "api", "apiKey", "version", "correlationId", "request", "response"}`,
 * request and response the frames without their size prefix, base64; `response` is null for
 * a request the broker never answered (acks=0, or in flight when the client hung up).
 */
import { writeFileSync } from 'node:fs'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { ApiKey, apis, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { decodeResponseHeader, encodeResponseHeader } from '../../src/protocol/generated/response-header.js'
import { Reader, Writer } from '../../src/protocol/primitives.js'

await loadAllApiCodecs()

/** One request of a recorded session, as a line of the session file. */
export interface RecordedExchange {
  /** Order of arrival at the proxy, across connections, from 0. */
  readonly seq: number
  /** The client connection it came on (the proxy's numbering, from 0). */
  readonly conn: number
  /** Milliseconds since the session started. */
  readonly atMs: number
  /** The API's name, for people reading the file. */
  readonly api: string
  readonly apiKey: number
  readonly version: number
  readonly correlationId: number
  /** The request frame without its size prefix (header and body), base64. */
  readonly request: string
  /** The broker's answer frame without its size prefix, base64; null when none came. */
  response: string | null
}

/** What the first line of a session file says about the recording. */
export interface SessionHeader {
  /** The client and its version, e.g. `kafkajs 2.2.4`. */
  readonly client: string
  /** What the session does, in a few words. */
  readonly scenario: string
  /** The broker recorded against. */
  readonly broker: string
  readonly recordedAt: string
  /** The topics, groups and transactional ids the session names (unique to it). */
  readonly names: readonly string[]
}

/** Answers that name brokers: their host and port are rewritten to the broker's front. */
const BROKER_LISTING_APIS: ReadonlySet<number> = new Set([
  ApiKey.Metadata,
  ApiKey.FindCoordinator,
  ApiKey.DescribeCluster,
])

/** Splits a byte stream into size-prefixed frames. */
class FrameSplitter {
  private buffered: Buffer = Buffer.alloc(0)

  push(chunk: Buffer): Buffer[] {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk])
    const frames: Buffer[] = []
    while (this.buffered.length >= 4) {
      const size = this.buffered.readInt32BE(0)
      if (this.buffered.length < 4 + size) break
      frames.push(Buffer.from(this.buffered.subarray(4, 4 + size)))
      this.buffered = this.buffered.subarray(4 + size)
    }
    return frames
  }
}

function sized(frame: Buffer): Buffer {
  const size = Buffer.alloc(4)
  size.writeInt32BE(frame.length)
  return Buffer.concat([size, frame])
}

export class SessionRecorder {
  readonly exchanges: RecordedExchange[] = []
  /** Front listener by upstream `host:port`. */
  private readonly fronts = new Map<string, Promise<{ server: Server; port: number }>>()
  private readonly sockets = new Set<Socket>()
  private readonly startedAt = Date.now()
  private connections = 0

  /** The bootstrap address for the client: the front of `upstreamHost:upstreamPort`. */
  async front(upstreamHost: string, upstreamPort: number): Promise<string> {
    return `127.0.0.1:${await this.frontPort(upstreamHost, upstreamPort)}`
  }

  private frontPort(host: string, port: number): Promise<number> {
    const key = `${host}:${port}`
    let front = this.fronts.get(key)
    if (!front) {
      front = new Promise((resolve, reject) => {
        const server = createServer((client) => this.relay(client, host, port))
        server.once('error', reject)
        server.listen(0, '127.0.0.1', () => {
          const address = server.address()
          if (address === null || typeof address === 'string') reject(new Error('no front port'))
          else resolve({ server, port: address.port })
        })
      })
      this.fronts.set(key, front)
    }
    return front.then((f) => f.port)
  }

  private relay(client: Socket, host: string, port: number): void {
    const conn = this.connections++
    const upstream = connect({ host, port })
    this.sockets.add(client)
    this.sockets.add(upstream)
    const pending = new Map<number, RecordedExchange>()
    const requests = new FrameSplitter()
    const answers = new FrameSplitter()
    // Answers are forwarded in order even when one needs rewriting (an async front lookup).
    let forwarding: Promise<void> = Promise.resolve()
    client.on('data', (chunk: Buffer) => {
      for (const frame of requests.push(chunk)) {
        const exchange = this.exchangeOf(conn, frame)
        pending.set(exchange.correlationId, exchange)
        this.exchanges.push(exchange)
        upstream.write(sized(frame))
      }
    })
    upstream.on('data', (chunk: Buffer) => {
      for (const frame of answers.push(chunk)) {
        const exchange = pending.get(frame.readInt32BE(0))
        if (exchange) {
          pending.delete(exchange.correlationId)
          exchange.response = frame.toString('base64')
        }
        forwarding = forwarding
          .then(() => (exchange ? this.rewritten(exchange, frame) : frame))
          .then((out) => {
            client.write(sized(out))
          })
          .catch((error: unknown) => {
            console.error(`recorder: answer not forwarded: ${String(error)}`)
            client.destroy()
          })
      }
    })
    const close = () => {
      client.destroy()
      upstream.destroy()
      this.sockets.delete(client)
      this.sockets.delete(upstream)
    }
    client.on('close', close)
    upstream.on('close', () => {
      void forwarding.then(close)
    })
    client.on('error', () => undefined)
    upstream.on('error', () => undefined)
  }

  private exchangeOf(conn: number, frame: Buffer): RecordedExchange {
    const apiKey = frame.readInt16BE(0)
    const version = frame.readInt16BE(2)
    return {
      seq: this.exchanges.length,
      conn,
      atMs: Date.now() - this.startedAt,
      api: apis.get(apiKey)?.name ?? `api ${apiKey}`,
      apiKey,
      version,
      correlationId: frame.readInt32BE(4),
      request: frame.toString('base64'),
      response: null,
    }
  }

  /** The answer as the client gets it: brokers' addresses replaced by their fronts. */
  private async rewritten(exchange: RecordedExchange, frame: Buffer): Promise<Buffer> {
    const api = apis.get(exchange.apiKey)
    if (!api || !BROKER_LISTING_APIS.has(exchange.apiKey)) return frame
    const headerVersion = api.responseHeaderVersion(exchange.version)
    const r = new Reader(frame)
    const header = decodeResponseHeader(r, headerVersion)
    const answer = api.decodeResponse(r, exchange.version) as Record<string, unknown>
    for (const broker of brokerEntries(answer)) {
      if (broker.host === '' || broker.port <= 0) continue
      broker.port = await this.frontPort(broker.host, broker.port)
      broker.host = '127.0.0.1'
    }
    const w = new Writer()
    encodeResponseHeader(w, headerVersion, header)
    api.encodeResponse(w, exchange.version, answer)
    return w.toBuffer()
  }

  /** Writes the session file: the header line, then the exchanges in order of arrival. */
  save(path: string, header: SessionHeader): void {
    const lines = [JSON.stringify({ session: header }), ...this.exchanges.map((e) => JSON.stringify(e))]
    writeFileSync(path, `${lines.join('\n')}\n`)
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy()
    const fronts = await Promise.all(this.fronts.values())
    await Promise.all(fronts.map((f) => new Promise((resolve) => f.server.close(resolve))))
  }
}

/** The structs of an answer that name a broker: Metadata's brokers, FindCoordinator's coordinators. */
function brokerEntries(answer: Record<string, unknown>): { host: string; port: number }[] {
  const found: { host: string; port: number }[] = []
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) for (const item of value) visit(item)
    else if (value !== null && typeof value === 'object' && !Buffer.isBuffer(value)) {
      const o = value as Record<string, unknown>
      if (typeof o.host === 'string' && typeof o.port === 'number')
        found.push(o as { host: string; port: number })
      for (const inner of Object.values(o)) visit(inner)
    }
  }
  visit(answer)
  return found
}
