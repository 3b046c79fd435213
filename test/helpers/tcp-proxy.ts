/**
 * A TCP proxy in front of one broker for fault injection: brokers advertise the proxy's
 * port, so clients and the other brokers' replica fetchers all reach the broker through it.
 * Each connection is labelled by the client id of its first Kafka request (replica
 * fetchers use `tidelog-replica-<node id>`), so a test can cut one link (broker Y's
 * fetches from this broker) or every connection.
 *
 * A cut holds traffic both ways, as a network partition does to TCP: nothing is delivered
 * until `heal()`, then everything held is delivered in order (TCP retransmits). New
 * connections during a cut are accepted and held too. `reset()` destroys connections
 * instead (the peer sees the connection drop, as after a RST).
 *
 * `dropResponses(select)` loses answers instead: a Produce request that `select` picks is
 * delivered to the broker, and when its response comes back the connection is destroyed
 * before that response reaches the client (the responses ahead of it are delivered). The
 * broker wrote the records; the client never hears so and retries: the case idempotent
 * producers must not duplicate.
 */
import { connect, createServer, type Server, type Socket } from 'node:net'

type Filter = (clientId: string | null) => boolean
/** Picks the requests whose responses are lost (apiKey 0 is Produce). */
export type ResponseDropFilter = (request: { apiKey: number; clientId: string | null }) => boolean

/**
 * Finds frame starts in one direction of a Kafka connection (4-byte size prefix) without
 * changing the bytes, and shows `onFrame` the first `headerBytes` of each frame.
 */
class FrameScanner {
  private header = Buffer.alloc(0)
  private skip = 0

  constructor(
    private readonly headerBytes: number,
    private readonly onFrame: (header: Buffer) => boolean,
  ) {}

  /** Feeds `chunk`; returns where the frame `onFrame` stopped at starts in it (>= 0), else -1. */
  feed(chunk: Buffer): number {
    let at = 0
    while (at < chunk.length) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, chunk.length - at)
        this.skip -= n
        at += n
        continue
      }
      const start = at - this.header.length
      const take = Math.min(this.headerBytes - this.header.length, chunk.length - at)
      this.header = Buffer.concat([this.header, chunk.subarray(at, at + take)])
      at += take
      if (this.header.length < this.headerBytes) break
      const header = this.header
      this.header = Buffer.alloc(0)
      this.skip = Math.max(0, 4 + header.readInt32BE(0) - this.headerBytes)
      if (this.onFrame(header)) return Math.max(0, start)
    }
    return -1
  }
}

class ProxiedConnection {
  clientId: string | null = null
  private identified = false
  private head = Buffer.alloc(0)
  private readonly toUpstream: Buffer[] = []
  private readonly toDownstream: Buffer[] = []
  private upstreamConnected = false
  /** Correlation ids of requests whose responses are to be lost. */
  private readonly doomed = new Set<number>()
  private readonly requests = new FrameScanner(12, (header) => {
    const apiKey = header.readInt16BE(4)
    if (this.proxy.shouldDropResponse(apiKey, this.clientId)) this.doomed.add(header.readInt32BE(8))
    return false
  })
  private readonly responses = new FrameScanner(8, (header) => this.doomed.has(header.readInt32BE(4)))
  closed = false

  constructor(
    private readonly proxy: TcpProxy,
    readonly downstream: Socket,
    readonly upstream: Socket,
  ) {
    downstream.setNoDelay(true)
    upstream.setNoDelay(true)
    upstream.once('connect', () => {
      this.upstreamConnected = true
      this.flush()
    })
    downstream.on('data', (chunk) => {
      if (!this.identified) this.identify(chunk)
      this.requests.feed(chunk)
      this.toUpstream.push(chunk)
      this.flush()
    })
    upstream.on('data', (chunk: Buffer) => {
      const cut = this.responses.feed(chunk)
      if (cut >= 0) {
        this.loseResponse(chunk.subarray(0, cut))
        return
      }
      this.toDownstream.push(chunk)
      this.flush()
    })
    const close = () => this.close()
    for (const socket of [downstream, upstream]) {
      socket.on('error', close)
      socket.on('close', close)
      socket.on('end', close)
    }
  }

  /** Request header: size(4) apiKey(2) apiVersion(2) correlationId(4) clientId (int16 length + bytes). */
  private identify(chunk: Buffer): void {
    this.head = Buffer.concat([this.head, chunk])
    if (this.head.length < 14) return
    const length = this.head.readInt16BE(12)
    if (length < 0) {
      this.identified = true
      return
    }
    if (this.head.length < 14 + length) return
    this.clientId = this.head.subarray(14, 14 + length).toString('utf8')
    this.identified = true
    this.head = Buffer.alloc(0)
  }

  get held(): boolean {
    return this.proxy.isHeld(this)
  }

  get isIdentified(): boolean {
    return this.identified
  }

  flush(): void {
    if (this.closed || this.held) return
    if (this.upstreamConnected) for (const chunk of this.toUpstream.splice(0)) this.upstream.write(chunk)
    for (const chunk of this.toDownstream.splice(0)) this.downstream.write(chunk)
  }

  close(): void {
    if (this.closed) return
    // A close during a cut is held too, like any other packet; the proxy delivers it on heal.
    if (this.held) {
      this.proxy.deferClose(this)
      return
    }
    this.closed = true
    this.flush()
    this.downstream.destroy()
    this.upstream.destroy()
    this.proxy.forget(this)
  }

  /** Delivers `before` (the responses ahead of the lost one), then ends the connection. */
  private loseResponse(before: Buffer): void {
    this.toDownstream.push(before)
    this.flush()
    this.proxy.droppedResponses++
    this.closed = true
    this.downstream.end() // after what was written: the responses ahead still arrive
    this.upstream.destroy()
    this.proxy.forget(this)
  }

  destroy(): void {
    this.closed = true
    this.downstream.destroy()
    this.upstream.destroy()
    this.proxy.forget(this)
  }
}

export class TcpProxy {
  private server: Server | null = null
  private readonly connections = new Set<ProxiedConnection>()
  private readonly pendingClose = new Set<ProxiedConnection>()
  private cuts: Filter[] = []
  private responseDrop: ResponseDropFilter | null = null
  /** Responses lost so far by dropResponses. */
  droppedResponses = 0
  port = -1

  constructor(
    readonly targetPort: number,
    readonly targetHost = '127.0.0.1',
  ) {}

  /** Listens on `port` (0: a free one); returns the port. */
  async listen(port = 0): Promise<number> {
    const server = createServer((downstream) => {
      const upstream = connect({ host: this.targetHost, port: this.targetPort })
      this.connections.add(new ProxiedConnection(this, downstream, upstream))
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', () => resolve())
    })
    const address = server.address()
    if (address === null || typeof address === 'string') throw new Error('proxy has no port')
    this.server = server
    this.port = address.port
    return this.port
  }

  /** True while `connection` matches a cut (unidentified connections match only a cut of everything). */
  isHeld(connection: ProxiedConnection): boolean {
    if (this.cuts.length === 0) return false
    return this.cuts.some((cut) => cut(connection.isIdentified ? connection.clientId : null))
  }

  /** Holds every connection (clients and replicas) until heal(). */
  cutAll(): void {
    this.cuts.push(() => true)
  }

  /** Holds the connections whose client id matches `filter` until heal(). */
  cut(filter: Filter): void {
    // A connection not identified yet is held as well: it may turn out to match.
    this.cuts.push((clientId) => clientId === null || filter(clientId))
  }

  /** Loses the responses of the requests `select` picks (null: none), closing their connection. */
  dropResponses(select: ResponseDropFilter | null): void {
    this.responseDrop = select
  }

  shouldDropResponse(apiKey: number, clientId: string | null): boolean {
    return this.responseDrop?.({ apiKey, clientId }) ?? false
  }

  get isCut(): boolean {
    return this.cuts.length > 0
  }

  /** Ends every cut and delivers what was held, in order. */
  heal(): void {
    this.cuts = []
    for (const connection of this.connections) connection.flush()
    for (const connection of [...this.pendingClose]) {
      this.pendingClose.delete(connection)
      connection.close()
    }
  }

  /** Destroys every connection now (held data is dropped). */
  reset(): number {
    const count = this.connections.size
    for (const connection of [...this.connections]) connection.destroy()
    this.pendingClose.clear()
    return count
  }

  deferClose(connection: ProxiedConnection): void {
    this.pendingClose.add(connection)
  }

  forget(connection: ProxiedConnection): void {
    this.connections.delete(connection)
    this.pendingClose.delete(connection)
  }

  async close(): Promise<void> {
    this.reset()
    const server = this.server
    this.server = null
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
