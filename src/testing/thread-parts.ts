/**
 * The fault API's shared state for brokers in worker threads (`startCluster({ workerThreads:
 * true })` of tidelog/testing): what a broker must see at once, without waiting for a
 * message, lives in SharedArrayBuffers that the main thread and every broker thread read.
 *
 * - Links: which links are cut, and which broker dialed from which local port. A broker's
 *   network checks both for every chunk it sends or receives, as fault-parts.ts's LinkTable
 *   is checked in one thread; a dialer's port is recorded before its first byte is sent, so
 *   the broker it reaches finds it by the time those bytes arrive.
 * - Death: a killed broker's calls must never settle from the moment kill() returns, not
 *   from when its thread reads a message; its ProcessState reads a shared flag.
 *
 * Healing a link wakes the senders that wait for it by a message (`heal`): cuts only ever
 * end all at once, by heal(), so the flag table alone tells who may send meanwhile.
 */
import { type LinkEnd, type Links, ProcessState } from './fault-parts.js'

/** The buffers, structured-cloned to every broker thread (they stay shared). */
export interface SharedLinkState {
  /** Brokers in the cluster; link ends are 0..brokers-1 and `brokers` for 'client'. */
  readonly brokers: number
  /** 1 where the link from row to column is cut: (brokers + 1)² entries. */
  readonly cut: SharedArrayBuffer
  /** Per loopback port: the id + 1 of the broker that dialed from it, 0 for none. */
  readonly dialers: SharedArrayBuffer
  /** Per broker id: its listener port. */
  readonly listenerPorts: readonly number[]
  /** Per broker id: 1 once killed (that incarnation's flag; a restart clears it). */
  readonly dead: SharedArrayBuffer
}

const PORTS = 65536

export function newSharedLinkState(listenerPorts: readonly number[]): SharedLinkState {
  const brokers = listenerPorts.length
  return {
    brokers,
    cut: new SharedArrayBuffer((brokers + 1) * (brokers + 1) * Int32Array.BYTES_PER_ELEMENT),
    dialers: new SharedArrayBuffer(PORTS * Int32Array.BYTES_PER_ELEMENT),
    listenerPorts: [...listenerPorts],
    dead: new SharedArrayBuffer(brokers * Int32Array.BYTES_PER_ELEMENT),
  }
}

/** The port of a `host:port` address on the loopback interface, or null. */
function loopbackPort(address: string): number | null {
  const colon = address.lastIndexOf(':')
  const host = address.slice(0, colon)
  if (host !== '127.0.0.1' && host !== '::ffff:127.0.0.1') return null
  const port = Number(address.slice(colon + 1))
  return Number.isInteger(port) && port > 0 && port < PORTS ? port : null
}

/** The link table over shared buffers, for the main thread and every broker thread. */
export class SharedLinks implements Links {
  private readonly cut: Int32Array
  private readonly dialers: Int32Array
  private healed: { promise: Promise<void>; resolve: () => void } | null = null

  constructor(private readonly state: SharedLinkState) {
    this.cut = new Int32Array(state.cut)
    this.dialers = new Int32Array(state.dialers)
  }

  private index(from: LinkEnd, to: LinkEnd): number {
    const end = (e: LinkEnd): number => (e === 'client' ? this.state.brokers : e)
    return end(from) * (this.state.brokers + 1) + end(to)
  }

  canSend(from: LinkEnd, to: LinkEnd): boolean {
    return Atomics.load(this.cut, this.index(from, to)) === 0
  }

  async whenOpen(from: LinkEnd, to: LinkEnd): Promise<void> {
    while (!this.canSend(from, to)) {
      if (!this.healed) {
        let resolve!: () => void
        const promise = new Promise<void>((r) => {
          resolve = r
        })
        this.healed = { promise, resolve }
      }
      await this.healed.promise
    }
  }

  dialerAt(address: string): number | undefined {
    const port = loopbackPort(address)
    if (port === null) return undefined
    const id = Atomics.load(this.dialers, port)
    return id === 0 ? undefined : id - 1
  }

  listenerAt(address: string): number | undefined {
    const port = loopbackPort(address)
    const id = port === null ? -1 : this.state.listenerPorts.indexOf(port)
    return id < 0 ? undefined : id
  }

  registerDialer(address: string, brokerId: number): void {
    const port = loopbackPort(address)
    if (port !== null) Atomics.store(this.dialers, port, brokerId + 1)
  }

  cutOneWay(from: LinkEnd, to: LinkEnd): void {
    Atomics.store(this.cut, this.index(from, to), 1)
  }

  /** Main thread: every link open again (each broker thread then gets `healed()`). */
  clear(): void {
    this.cut.fill(0)
  }

  /** A broker thread: the links were healed; senders waiting on them go on. */
  wakeWaiters(): void {
    const healed = this.healed
    this.healed = null
    healed?.resolve()
  }
}

/** A broker thread's process state, dead from the moment the main thread sets its flag. */
export class SharedProcessState extends ProcessState {
  private readonly flags: Int32Array

  constructor(
    dead: SharedArrayBuffer,
    private readonly brokerId: number,
  ) {
    super()
    this.flags = new Int32Array(dead)
  }

  override get isDead(): boolean {
    return Atomics.load(this.flags, this.brokerId) === 1 || super.isDead
  }

  /** Main thread: kill broker `id`'s running incarnation; a restart clears the flag first. */
  static setDead(dead: SharedArrayBuffer, brokerId: number, value: boolean): void {
    Atomics.store(new Int32Array(dead), brokerId, value ? 1 : 0)
  }
}
