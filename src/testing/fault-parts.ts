/**
 * Node's real parts (runtime/node-parts.ts) wrapped so that a test can inject faults into one
 * in-process broker, the way the simulator's parts do in simulated time: a crash (its timers,
 * disk calls, store calls and connections die with it), a power loss (what was not fsynced
 * is gone), a pause (SIGSTOP: nothing it does makes progress until resumed), a slow or full
 * disk, and cut links. One `BrokerFaults` per broker incarnation: a restart gets new parts.
 */
import type { Clock, TimerHandle } from '../common/clock.js'
import type {
  FileHandle,
  FileLock,
  FileStat,
  FileSystem,
  FileSystemSpace,
  OpenFlags,
} from '../common/file-system.js'
import type { ByteStream, Network, NetworkListener } from '../common/network.js'
import type {
  Leadership,
  Lease,
  MetadataStore,
  StoreLimits,
  Watch,
} from '../metadata/store/metadata-store.js'

/** Whether bytes may go from one end of a link to the other; ids are broker ids or 'client'. */
export type LinkEnd = number | 'client'

export interface Links {
  /** False while the link from `from` to `to` is cut. */
  canSend(from: LinkEnd, to: LinkEnd): boolean
  /** Waits until the link is healed (bytes held meanwhile, as TCP retransmits them). */
  whenOpen(from: LinkEnd, to: LinkEnd): Promise<void>
  /** The broker whose dialer has this local address (`host:port`), if any. */
  dialerAt(address: string): number | undefined
  /** The broker listening at `host:port`, if any. */
  listenerAt(address: string): number | undefined
  registerDialer(address: string, brokerId: number): void
}

const never = <T>(): Promise<T> => new Promise<T>(() => undefined)

/** The life of one broker process: dead, paused, or running. */
export class ProcessState {
  private dead = false
  private paused: Promise<void> | null = null
  private resumePaused: (() => void) | null = null

  get isDead(): boolean {
    return this.dead
  }

  get isPaused(): boolean {
    return this.paused !== null
  }

  kill(): void {
    this.dead = true
    this.resume()
  }

  pause(): void {
    if (this.paused !== null || this.isDead) return
    this.paused = new Promise<void>((resolve) => {
      this.resumePaused = resolve
    })
  }

  resume(): void {
    const resume = this.resumePaused
    this.paused = null
    this.resumePaused = null
    resume?.()
  }

  /** Runs `op` once the process runs; a dead process's call never settles, as a crashed one's. */
  async gate<T>(op: () => Promise<T>): Promise<T> {
    while (this.paused !== null) await this.paused
    if (this.isDead) return never<T>()
    const result = await op()
    while (this.paused !== null) await this.paused
    if (this.isDead) return never<T>()
    return result
  }
}

/** Timers of one process: dropped when it dies, held while it is paused. */
export class ProcessClock implements Clock {
  constructor(
    private readonly inner: Clock,
    private readonly process: ProcessState,
  ) {}

  nowMs(): number {
    return this.inner.nowMs()
  }

  monotonicMs(): number {
    return this.inner.monotonicMs()
  }

  setTimeout(callback: () => void, delayMs: number): TimerHandle {
    if (this.process.isDead) return { cancel: () => undefined }
    let cancelled = false
    const handle = this.inner.setTimeout(() => {
      if (cancelled) return
      this.process
        .gate(async () => undefined)
        .then(() => {
          if (!cancelled) callback()
        })
    }, delayMs)
    return {
      cancel: () => {
        cancelled = true
        handle.cancel()
      },
    }
  }
}

/**
 * A disk that can be slow, full, or lose what was not fsynced. Power loss is modeled for
 * growth only (logs, indexes and journals are appended to; checkpoints are written to a temp
 * file, fsynced and renamed): each file is cut back to the size it had at its last fsync.
 * Overwrites inside the durable part are not reverted.
 */
export class FaultyFileSystem implements FileSystem {
  /** Extra latency per operation, in ms (slowDisk). */
  slowMs = 0
  /** Writes fail with ENOSPC (diskFull). */
  full = false
  /** Per path: its size at its last fsync (undefined: never written through this disk). */
  private readonly durableSize = new Map<string, number>()
  /** Locks this process holds: the OS releases them when it dies (kill). */
  private readonly locks = new Set<FileLock>()

  constructor(
    private readonly inner: FileSystem,
    private readonly process: ProcessState,
    private readonly sleep: (ms: number) => Promise<void>,
  ) {}

  private run<T>(op: () => Promise<T>): Promise<T> {
    return this.process.gate(async () => {
      if (this.slowMs > 0) await this.sleep(this.slowMs)
      return op()
    })
  }

  failIfFull(path: string): void {
    if (this.full)
      throw Object.assign(new Error(`ENOSPC: no space left on device, write '${path}'`), { code: 'ENOSPC' })
  }

  /** Records a file's size as durable (at open of an existing file, and at each fsync). */
  markDurable(path: string, size: number): void {
    this.durableSize.set(path, size)
  }

  noteWritten(path: string): void {
    if (!this.durableSize.has(path)) this.durableSize.set(path, 0)
  }

  /** Power loss: every file written since its last fsync is cut back to its durable size. */
  async losePageCache(): Promise<{ files: number; bytes: number }> {
    let files = 0
    let bytes = 0
    for (const [path, durable] of this.durableSize) {
      let size: number
      try {
        size = (await this.inner.stat(path)).size
      } catch {
        continue
      }
      if (size <= durable) continue
      const handle = await this.inner.open(path, 'r+')
      try {
        await handle.truncate(durable)
      } finally {
        await handle.close()
      }
      files++
      bytes += size - durable
    }
    this.durableSize.clear()
    return { files, bytes }
  }

  async open(path: string, flags: OpenFlags): Promise<FileHandle> {
    const handle = await this.run(() => this.inner.open(path, flags))
    const size = flags === 'w+' || flags === 'wx+' ? 0 : (await handle.stat()).size
    if (!this.durableSize.has(path) || flags === 'w+' || flags === 'wx+')
      this.durableSize.set(path, flags === 'w+' || flags === 'wx+' ? 0 : size)
    return new FaultyFileHandle(handle, path, this)
  }
  rename(from: string, to: string): Promise<void> {
    return this.run(async () => {
      await this.inner.rename(from, to)
      const durable = this.durableSize.get(from)
      this.durableSize.delete(from)
      if (durable !== undefined) this.durableSize.set(to, durable)
    })
  }
  unlink(path: string): Promise<void> {
    return this.run(async () => {
      await this.inner.unlink(path)
      this.durableSize.delete(path)
    })
  }
  mkdir(path: string): Promise<boolean> {
    return this.run(() => this.inner.mkdir(path))
  }
  rmdir(path: string): Promise<void> {
    return this.run(async () => {
      await this.inner.rmdir(path)
      for (const file of [...this.durableSize.keys()])
        if (file.startsWith(`${path}/`)) this.durableSize.delete(file)
    })
  }
  readdir(path: string): Promise<string[]> {
    return this.run(() => this.inner.readdir(path))
  }
  stat(path: string): Promise<FileStat> {
    return this.run(() => this.inner.stat(path))
  }
  syncDir(path: string): Promise<void> {
    return this.run(() => this.inner.syncDir(path))
  }
  statfs(path: string): Promise<FileSystemSpace> {
    return this.run(async () => {
      const space = await this.inner.statfs(path)
      return this.full ? { totalBytes: space.totalBytes, usableBytes: 0 } : space
    })
  }

  lockExclusive(path: string): Promise<FileLock> {
    return this.run(async () => {
      const inner = await this.inner.lockExclusive(path)
      // Killed while it was being taken: the OS would release it with the process.
      if (this.process.isDead) {
        await inner.release()
        return inner
      }
      this.locks.add(inner)
      return {
        path,
        release: () =>
          this.run(async () => {
            this.locks.delete(inner)
            await inner.release()
          }),
      }
    })
  }

  /**
   * Process death (after ProcessState.kill): the OS closes its descriptors, so its locks are
   * free for the next process once this resolves.
   */
  async kill(): Promise<void> {
    const locks = [...this.locks]
    this.locks.clear()
    // Never rejects: a close that failed leaves nothing the next process could do about it.
    await Promise.allSettled(locks.map((lock) => lock.release()))
  }

  /** Used by FaultyFileHandle. */
  gate<T>(op: () => Promise<T>): Promise<T> {
    return this.run(op)
  }
}

class FaultyFileHandle implements FileHandle {
  constructor(
    private readonly inner: FileHandle,
    private readonly path: string,
    private readonly fs: FaultyFileSystem,
  ) {}

  read(buffer: Buffer, offset: number, length: number, position: number): Promise<number> {
    return this.fs.gate(() => this.inner.read(buffer, offset, length, position))
  }
  write(buffer: Buffer, position: number): Promise<number> {
    return this.fs.gate(() => {
      this.fs.failIfFull(this.path)
      this.fs.noteWritten(this.path)
      return this.inner.write(buffer, position)
    })
  }
  writev(buffers: readonly Buffer[], position: number): Promise<number> {
    return this.fs.gate(() => {
      this.fs.failIfFull(this.path)
      this.fs.noteWritten(this.path)
      return this.inner.writev(buffers, position)
    })
  }
  sync(): Promise<void> {
    return this.fs.gate(async () => {
      await this.inner.sync()
      this.fs.markDurable(this.path, (await this.inner.stat()).size)
    })
  }
  truncate(length: number): Promise<void> {
    return this.fs.gate(() => this.inner.truncate(length))
  }
  stat(): Promise<FileStat> {
    return this.fs.gate(() => this.inner.stat())
  }
  close(): Promise<void> {
    // A dead process's handles are closed by the OS.
    return this.inner.close()
  }
}

/**
 * The network of one broker: TCP underneath; the test cuts links between brokers, and
 * between clients and a broker, by holding bytes (as TCP does across a partition: nothing
 * arrives until the link heals, or an end gives up on the connection).
 */
export class FaultyNetwork implements Network {
  private readonly streams = new Set<ByteStream>()
  private listener: NetworkListener | null = null

  constructor(
    private readonly inner: Network,
    private readonly brokerId: number,
    private readonly process: ProcessState,
    private readonly links: Links,
  ) {}

  async listen(
    host: string,
    port: number,
    onConnection: (stream: ByteStream) => void,
  ): Promise<NetworkListener> {
    const listener = await this.inner.listen(host, port, (stream) => {
      if (this.process.isDead) {
        stream.destroy()
        return
      }
      // Who dialed is looked up per chunk: a broker's dialer registers its local address
      // once its connect resolves, which may be after this accept.
      const peer = (): LinkEnd => this.links.dialerAt(stream.remoteAddress) ?? 'client'
      onConnection(this.track(stream, peer))
    })
    this.listener = listener
    return listener
  }

  async connect(host: string, port: number): Promise<ByteStream> {
    const stream = await this.process.gate(() => this.inner.connect(host, port))
    if (stream.localAddress) this.links.registerDialer(stream.localAddress, this.brokerId)
    const target = this.links.listenerAt(`${host}:${port}`) ?? 'client'
    return this.track(stream, () => target)
  }

  /** Process death: the listener closes and every connection resets. */
  kill(): void {
    this.listener?.close().catch(() => undefined)
    this.listener = null
    for (const stream of this.streams) stream.destroy()
    this.streams.clear()
  }

  private track(stream: ByteStream, peer: () => LinkEnd): ByteStream {
    this.streams.add(stream)
    stream.onClose(() => this.streams.delete(stream))
    const me = this.brokerId
    let sending: Promise<void> = Promise.resolve()
    let receiving: Promise<void> = Promise.resolve()
    const wrapped: ByteStream = {
      remoteAddress: stream.remoteAddress,
      ...(stream.localAddress ? { localAddress: stream.localAddress } : {}),
      get writableNeedDrain() {
        return stream.writableNeedDrain
      },
      write: (chunks) => {
        const copy = [...chunks]
        if (!this.process.isPaused && this.links.canSend(me, peer()) && !this.process.isDead) {
          sending = sending.then(() => stream.write(copy))
          return
        }
        sending = sending.then(async () => {
          await this.process.gate(async () => undefined)
          await this.links.whenOpen(me, peer())
          stream.write(copy)
        })
      },
      pause: () => stream.pause(),
      resume: () => stream.resume(),
      onData: (listener) =>
        stream.onData((chunk) => {
          receiving = receiving.then(async () => {
            if (this.process.isPaused || !this.links.canSend(peer(), me)) {
              await this.process.gate(async () => undefined)
              await this.links.whenOpen(peer(), me)
            }
            if (!this.process.isDead) listener(chunk)
          })
        }),
      onDrain: (listener) => stream.onDrain(listener),
      onClose: (listener) => stream.onClose(listener),
      destroy: () => stream.destroy(),
    }
    return wrapped
  }
}

/** A store whose leases a test can stop keeping alive (EmbeddedStore's test hooks). */
export interface KeepAliveControl {
  suspendKeepAlive(leaseId: string): void
  resumeKeepAlive(leaseId: string): void
}

/** No lease is kept alive here: a broker thread's leases live in the main thread's store, which the fault API suspends there. */
export const keepAliveElsewhere: KeepAliveControl = {
  suspendKeepAlive: () => undefined,
  resumeKeepAlive: () => undefined,
}

/**
 * The shared store as one broker process sees it: a dead process's calls never settle and
 * its leases stop being kept alive (they expire one TTL later); a paused one's calls wait
 * and its leases are not kept alive meanwhile.
 */
export class ProcessStore implements MetadataStore {
  /** The shared store's: a process meets the same limits. */
  get limits(): StoreLimits {
    return this.store.limits
  }

  private readonly leases: Lease[] = []
  /** Cut off from the store (isolate): calls wait for the link, as a partitioned host's do. */
  private readonly link = new ProcessState()

  constructor(
    private readonly store: MetadataStore,
    private readonly process: ProcessState,
    private readonly keepAlive: KeepAliveControl,
  ) {}

  private call<T>(op: () => Promise<T>): Promise<T> {
    return this.process.gate(() => this.link.gate(op))
  }

  /** The link to the store is cut: calls wait, leases are not kept alive. */
  cutLink(): void {
    this.link.pause()
    this.suspendLeases()
  }

  healLink(): void {
    if (!this.link.isPaused) return
    if (!this.process.isPaused && !this.process.isDead) this.resumeLeases()
    this.link.resume()
  }

  get(key: string) {
    return this.call(() => this.store.get(key))
  }
  range(prefix: string) {
    return this.call(() => this.store.range(prefix))
  }
  txn(...args: Parameters<MetadataStore['txn']>) {
    return this.call(() => this.store.txn(...args))
  }
  watch(...args: Parameters<MetadataStore['watch']>): Watch {
    const [prefix, from, onEvents, onError] = args
    return this.store.watch(
      prefix,
      from,
      (events, revision) => {
        this.call(async () => onEvents(events, revision)).catch(() => undefined)
      },
      (error) => {
        if (!this.process.isDead) onError?.(error)
      },
    )
  }
  grantLease(ttlMs: number): Promise<Lease> {
    return this.call(async () => {
      const lease = await this.store.grantLease(ttlMs)
      this.leases.push(lease)
      return lease
    })
  }
  campaign(election: string, candidate: string, lease: Lease): Promise<Leadership> {
    return this.call(() => this.store.campaign(election, candidate, lease))
  }
  leader(election: string) {
    return this.call(() => this.store.leader(election))
  }
  close(): Promise<void> {
    return Promise.resolve()
  }

  /** The process stops keeping its leases alive (crash, pause). */
  suspendLeases(): void {
    for (const lease of this.leases) {
      try {
        this.keepAlive.suspendKeepAlive(lease.id)
      } catch {
        // LEASE_NOT_FOUND: already ended.
      }
    }
  }

  /** A resumed process keeps its leases alive again (those that have not expired). */
  resumeLeases(): void {
    for (const lease of this.leases) this.keepAlive.resumeKeepAlive(lease.id)
  }
}
