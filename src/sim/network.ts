/**
 * A simulated network between brokers: byte streams (the real Kafka framing and codecs run
 * over them) with a random delay per delivery, FIFO within a connection as TCP is, random
 * connection resets ("loss": TCP does not lose bytes inside a stream, so a loss is a broken
 * connection), and one-way or two-way partitions between pairs of nodes. Bytes sent across
 * a cut link are dropped silently (a black hole: the sender only learns by a timeout), and
 * connects across a cut link fail after a delay.
 */
import type { Transport, TransportConnection } from '../replication/broker-client.js'
import type { SimRandom } from './random.js'
import type { SimScheduler } from './scheduler.js'

export interface NetworkFaults {
  delayMinMs: number
  delayMaxMs: number
  /** Chance that a delivery resets its connection instead. */
  resetProbability: number
}

/** The server side of a connection: bytes in, `send` bytes back. */
export interface ServerEndpoint {
  onData(chunk: Buffer): void
  onClose(): void
}

export type Accept = (send: (chunks: readonly Buffer[]) => void, close: () => void) => ServerEndpoint

class Pipe {
  closed = false
  clientData: ((chunk: Buffer) => void) | null = null
  clientClose: ((error: Error | null) => void) | null = null
  server: ServerEndpoint | null = null
  /** Last scheduled delivery per direction, to keep FIFO order. */
  lastToServerMs = 0
  lastToClientMs = 0

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
  private nextPipeId = 1
  faults: NetworkFaults = { delayMinMs: 1, delayMaxMs: 5, resetProbability: 0 }

  constructor(
    private readonly scheduler: SimScheduler,
    private readonly random: SimRandom,
  ) {}

  static hostOf(nodeId: number): string {
    return `broker-${nodeId}`
  }

  listen(nodeId: number, accept: Accept): void {
    this.listeners.set(nodeId, accept)
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

  get cutLinks(): string[] {
    return [...this.cut].sort()
  }

  private canSend(from: number, to: number): boolean {
    return !this.cut.has(`${from}>${to}`)
  }

  private delay(): number {
    return this.random.int(this.faults.delayMinMs, this.faults.delayMaxMs)
  }

  /** The Transport broker `from` dials out with (its fetchers); dead processes get a fresh one per incarnation. */
  transportFor(from: number, isAlive: () => boolean): Transport {
    return {
      connect: (host, _port) =>
        new Promise<TransportConnection>((resolve, reject) => {
          const to = Number(host.replace('broker-', ''))
          this.scheduler.schedule(this.delay(), () => {
            if (!isAlive()) return
            const accept = this.listeners.get(to)
            if (!accept || !this.canSend(from, to) || !this.canSend(to, from)) {
              reject(Object.assign(new Error(`connect ${from}->${to} refused`), { code: 'ECONNREFUSED' }))
              return
            }
            resolve(this.open(from, to, accept))
          })
        }),
    }
  }

  private open(from: number, to: number, accept: Accept): TransportConnection {
    const pipe = new Pipe(this.nextPipeId++, from, to)
    this.pipes.add(pipe)
    pipe.server = accept(
      (chunks) => this.deliver(pipe, 'toClient', Buffer.concat(chunks)),
      () => this.reset(pipe),
    )
    return {
      write: (chunks) => this.deliver(pipe, 'toServer', Buffer.concat(chunks)),
      onData: (listener) => {
        pipe.clientData = listener
      },
      onClose: (listener) => {
        pipe.clientClose = listener
      },
      destroy: () => this.reset(pipe),
    }
  }

  private deliver(pipe: Pipe, direction: 'toServer' | 'toClient', bytes: Buffer): void {
    if (pipe.closed) return
    const [src, dst] = direction === 'toServer' ? [pipe.from, pipe.to] : [pipe.to, pipe.from]
    if (!this.canSend(src, dst)) return // black hole
    if (this.faults.resetProbability > 0 && this.random.chance(this.faults.resetProbability)) {
      this.scheduler.schedule(this.delay(), () => this.reset(pipe))
      return
    }
    const now = this.scheduler.now
    const last = direction === 'toServer' ? pipe.lastToServerMs : pipe.lastToClientMs
    const at = Math.max(now + this.delay(), last)
    if (direction === 'toServer') pipe.lastToServerMs = at
    else pipe.lastToClientMs = at
    this.scheduler.schedule(at - now, () => {
      if (pipe.closed) return
      if (direction === 'toServer') pipe.server?.onData(bytes)
      else pipe.clientData?.(bytes)
    })
  }

  private reset(pipe: Pipe): void {
    if (pipe.closed) return
    pipe.closed = true
    this.pipes.delete(pipe)
    // Both ends learn of the reset on a later event, never inside the caller's stack.
    this.scheduler.schedule(0, () => {
      pipe.server?.onClose()
      pipe.clientClose?.(Object.assign(new Error('connection reset'), { code: 'ECONNRESET' }))
    })
  }
}
