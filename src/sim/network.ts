/**
 * A simulated network between brokers: byte streams (the real Kafka framing and codecs run
 * over them) with a random delay per delivery, FIFO within a connection as TCP is, random
 * connection resets ("loss": TCP does not lose bytes inside a stream, so a loss is a broken
 * connection), and one-way or two-way partitions between pairs of nodes. Bytes sent across
 * a cut link are dropped silently (a black hole: the sender only learns by a timeout), and
 * connects across a cut link fail after a delay.
 */
import type { ClientConnector } from '../client/connector.js'
import type { ByteStream, Network, NetworkListener } from '../common/network.js'
import type { SimRandom } from './random.js'
import type { SimScheduler } from './scheduler.js'

export interface NetworkFaults {
  delayMinMs: number
  delayMaxMs: number
  /** Chance that a delivery resets its connection instead. */
  resetProbability: number
}

type Accept = (stream: ByteStream) => void

/** A server sees a client's connection come from this port + the pipe's id. */
const CLIENT_PORT_BASE = 40000

/** One end of a pipe: what its owner registered, and data held while it reads no more. */
class End {
  onData: ((chunk: Buffer) => void) | null = null
  onClose: ((error: Error | null) => void) | null = null
  paused = false
  held: Buffer[] = []
  /** Last scheduled delivery to this end, to keep FIFO order. */
  lastDeliveryMs = 0
}

class Pipe {
  closed = false
  /**
   * The client closed it while bytes it wrote were held on a stalled link: they still
   * reach the server (data sent before a FIN arrives), then the server end closes.
   */
  clientGone = false
  /** Some of its client's bytes were held by a stalled link. */
  held = false
  readonly client = new End()
  readonly server = new End()

  constructor(
    readonly id: number,
    readonly from: number,
    readonly to: number,
  ) {}
}

export class SimNetwork {
  private readonly listeners = new Map<number, Accept>()
  private readonly cut = new Set<string>()
  private readonly pipes = new Set<Pipe>()
  /** `from>to` → until when bytes sent that way are held (a stalled path: late, not lost). */
  private readonly stalled = new Map<string, number>()
  private nextPipeId = 1
  faults: NetworkFaults = { delayMinMs: 1, delayMaxMs: 5, resetProbability: 0 }

  constructor(
    private readonly scheduler: SimScheduler,
    private readonly random: SimRandom,
  ) {}

  static hostOf(nodeId: number): string {
    return `broker-${nodeId}`
  }

  /** A process died: it stops listening and all its connections break. */
  unlisten(nodeId: number): void {
    this.listeners.delete(nodeId)
    for (const pipe of [...this.pipes]) if (pipe.to === nodeId || pipe.from === nodeId) this.reset(pipe)
  }

  /** Cuts traffic from `a` to `b` (one way). */
  cutLink(a: number, b: number): void {
    this.cut.add(`${a}>${b}`)
  }

  healLink(a: number, b: number): void {
    this.cut.delete(`${a}>${b}`)
  }

  healAll(): void {
    this.cut.clear()
  }

  /**
   * Holds every byte `from` sends to `to` until `untilMs` (a path stuck in retransmission:
   * the bytes arrive late, in order, even if the sender closed the connection meanwhile).
   * For the transactional workload's late writes: a client cannot make its own request
   * land after it gave up on it.
   */
  stallLink(from: number, to: number, untilMs: number): void {
    const key = `${from}>${to}`
    this.stalled.set(key, Math.max(untilMs, this.stalled.get(key) ?? 0))
  }

  /** A server's view of a connection (`remoteAddress` as its stream gives it) the client already closed. */
  isClosedByClient(remoteAddress: string): boolean {
    const id = Number(remoteAddress.split(':')[1]) - CLIENT_PORT_BASE
    for (const pipe of this.pipes) if (pipe.id === id) return pipe.clientGone
    return false
  }

  get cutLinks(): string[] {
    return [...this.cut].sort()
  }

  private canSend(from: number, to: number): boolean {
    return !this.cut.has(`${from}>${to}`)
  }

  private delay(): number {
    return this.random.int(this.faults.delayMinMs, this.faults.delayMaxMs)
  }

  /**
   * The network as process `nodeId` sees it (the `Network` part of a simulated broker, or a
   * client's dialer): it listens as host broker-<nodeId>; a dead process neither connects
   * nor learns of a connection it asked for.
   */
  nodeNetwork(nodeId: number, isAlive: () => boolean): Network {
    return {
      listen: (host, _port, onConnection): Promise<NetworkListener> => {
        if (host !== SimNetwork.hostOf(nodeId)) throw new Error(`node ${nodeId} cannot listen as ${host}`)
        this.listeners.set(nodeId, onConnection)
        return Promise.resolve({
          port: 9092,
          close: async () => {
            if (this.listeners.get(nodeId) === onConnection) this.listeners.delete(nodeId)
          },
        })
      },
      connect: (host, _port) =>
        new Promise<ByteStream>((resolve, reject) => {
          const to = Number(host.replace('broker-', ''))
          this.scheduler.schedule(this.delay(), () => {
            if (!isAlive()) return
            const accept = this.listeners.get(to)
            if (!accept || !this.canSend(nodeId, to) || !this.canSend(to, nodeId)) {
              reject(Object.assign(new Error(`connect ${nodeId}->${to} refused`), { code: 'ECONNREFUSED' }))
              return
            }
            resolve(this.open(nodeId, to, accept))
          })
        }),
    }
  }

  /** A client's dialer (consumers, group members, the acks=0 producer). */
  transportFor(from: number, isAlive: () => boolean): Pick<Network, 'connect'> {
    return this.nodeNetwork(from, isAlive)
  }

  /**
   * tidelog's own client on process `from`: its connector dials over this network, so the
   * real producer and consumer meet its delays, resets and cuts. A client whose `isAlive`
   * turns false (a crashed share consumer) neither connects nor hears back, as a broker.
   * A simulated stream has no kernel buffer to empty: a write waiting for its bytes to leave
   * (an acks=0 produce) is told so on the next event.
   */
  clientConnector(
    from: number,
    isAlive: () => boolean = () => true,
    /** Sees each write before it leaves (to stall the link under it: `stallLink`). */
    beforeWrite?: (to: number, chunks: readonly Buffer[]) => void,
  ): ClientConnector {
    const network = this.nodeNetwork(from, isAlive)
    return async (target) => {
      const stream = await network.connect(target.host, target.port)
      const to = Number(target.host.replace('broker-', ''))
      return {
        ...stream,
        write: (chunks, onWritten) => {
          beforeWrite?.(to, chunks)
          stream.write(chunks)
          if (onWritten) this.scheduler.schedule(0, onWritten)
        },
      }
    }
  }

  private open(from: number, to: number, accept: Accept): ByteStream {
    const pipe = new Pipe(this.nextPipeId++, from, to)
    this.pipes.add(pipe)
    accept(this.stream(pipe, 'server'))
    return this.stream(pipe, 'client')
  }

  private stream(pipe: Pipe, side: 'client' | 'server'): ByteStream {
    const own = side === 'client' ? pipe.client : pipe.server
    const peer = side === 'client' ? 'server' : 'client'
    const [self, other] = side === 'client' ? [pipe.from, pipe.to] : [pipe.to, pipe.from]
    return {
      remoteAddress: `${SimNetwork.hostOf(other)}:${side === 'client' ? 9092 : CLIENT_PORT_BASE + pipe.id}`,
      write: (chunks) =>
        this.deliver(pipe, peer, self, other, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)),
      writableNeedDrain: false,
      pause: () => {
        own.paused = true
      },
      resume: () => {
        if (!own.paused) return
        own.paused = false
        // As a socket's resume: held data arrives on a later turn, never inside the caller.
        if (own.held.length > 0) this.scheduler.schedule(0, () => this.release(pipe, own))
      },
      onData: (listener) => {
        own.onData = listener
      },
      onDrain: () => undefined,
      onClose: (listener) => {
        own.onClose = listener
      },
      destroy: () => (side === 'client' ? this.closeFromClient(pipe) : this.reset(pipe)),
    }
  }

  private release(pipe: Pipe, end: End): void {
    while (!pipe.closed && !end.paused && end.held.length > 0) end.onData?.(end.held.shift()!)
  }

  private deliver(pipe: Pipe, to: 'client' | 'server', src: number, dst: number, bytes: Buffer): void {
    if (pipe.closed || (to === 'client' && pipe.clientGone)) return
    if (!this.canSend(src, dst)) return // black hole
    if (this.faults.resetProbability > 0 && this.random.chance(this.faults.resetProbability)) {
      this.scheduler.schedule(this.delay(), () => this.reset(pipe))
      return
    }
    const end = to === 'client' ? pipe.client : pipe.server
    const now = this.scheduler.now
    const heldUntilMs = this.stalled.get(`${src}>${dst}`) ?? 0
    if (heldUntilMs <= now) this.stalled.delete(`${src}>${dst}`)
    const at = Math.max(now + this.delay(), end.lastDeliveryMs, heldUntilMs)
    if (at === heldUntilMs) pipe.held = true
    end.lastDeliveryMs = at
    this.scheduler.schedule(at - now, () => {
      if (pipe.closed || (to === 'client' && pipe.clientGone)) return
      if (end.paused || end.held.length > 0) end.held.push(bytes)
      else end.onData?.(bytes)
    })
  }

  /**
   * The client closes its end. Bytes it sent that a stalled link still holds reach the
   * server first, as data before a FIN does; the server end then closes. Otherwise a reset.
   */
  private closeFromClient(pipe: Pipe): void {
    const now = this.scheduler.now
    if (pipe.closed || pipe.clientGone || !pipe.held || pipe.server.lastDeliveryMs <= now) {
      this.reset(pipe)
      return
    }
    pipe.clientGone = true
    this.scheduler.schedule(0, () => {
      pipe.client.onClose?.(Object.assign(new Error('connection closed'), { code: 'ECONNRESET' }))
    })
    this.scheduler.schedule(pipe.server.lastDeliveryMs - now, () => this.reset(pipe))
  }

  private reset(pipe: Pipe): void {
    if (pipe.closed) return
    pipe.closed = true
    this.pipes.delete(pipe)
    // Both ends learn of the reset on a later event, never inside the caller's stack.
    this.scheduler.schedule(0, () => {
      const error = Object.assign(new Error('connection reset'), { code: 'ECONNRESET' })
      pipe.server.onClose?.(error)
      if (!pipe.clientGone) pipe.client.onClose?.(error)
    })
  }
}
