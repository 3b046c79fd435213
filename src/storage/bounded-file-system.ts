/**
 * A FileSystem that keeps at most `maxOpenFiles` descriptors of the one below it open
 * (log.segment.open.files.max), so a broker's descriptors no longer grow with its
 * segments: each segment holds a .log, an .index, a .timeindex and maybe a .txnindex
 * handle for its whole life, and 10,000 partitions meant 30,000 descriptors (Kafka's lazy
 * indexes and Redpanda's open-file limits solve the same problem).
 *
 * The handles it gives out are virtual: the real descriptor opens on the first operation,
 * stays open while an operation uses it, and when the bound is reached the least recently
 * used idle one closes to make room; the next operation on it reopens it ('w+' and 'wx+'
 * reopen as 'r+', never truncating again). Busy handles are never closed, so a read racing
 * an eviction always runs on an open descriptor; when every descriptor is busy, an open
 * waits until one is released (an operation holds one descriptor for one syscall and never
 * waits for another while holding it, so the wait cannot deadlock). The bound is hard: the
 * descriptors open, opening or closing never exceed it. The indexes keep their entries in
 * memory, so a closed index costs nothing until its segment rolls, is truncated or closes.
 *
 * POSIX keeps an unlinked file readable through a descriptor still open; here a virtual
 * handle whose descriptor was evicted cannot reopen an unlinked file (ENOENT). Storage
 * never reads a deleted segment after its reads in flight, which hold the descriptor.
 * fsync works on the file, not the descriptor, so a handle written, evicted and reopened
 * is synced by the reopened descriptor.
 */
import { dirname } from 'node:path'
import { assert } from '../common/assert.js'
import type {
  FileHandle,
  FileLock,
  FileStat,
  FileSystem,
  FileSystemSpace,
  OpenFlags,
} from '../common/file-system.js'

/** Default of log.segment.open.files.max: three brokers in one process stay under a 20,000 ulimit -n. */
export const DEFAULT_MAX_OPEN_FILES = 4096
/** Descriptors closed at once by closeIdleDescriptors. */
const CLOSE_IDLE_BATCH = 64

export class BoundedFileSystem implements FileSystem {
  /** Idle handles holding a descriptor, least recently used first (busy ones are not candidates). */
  private readonly lru = new Map<LazyFileHandle, true>()
  /** Live virtual handles by path, so a rename moves them. */
  private readonly byPath = new Map<string, Set<LazyFileHandle>>()
  /** Paths in byPath per parent directory, so a file rename need not scan for a directory rename. */
  private readonly pathsPerDir = new Map<string, number>()
  /** Descriptors open, opening or closing: never above maxOpenFiles. */
  private openCount = 0
  /** Of openCount, the descriptors being closed to make room. */
  private closingCount = 0
  private peakOpenCount = 0
  /** Opens waiting for a descriptor to be released. */
  private waiters: (() => void)[] = []

  constructor(
    private readonly inner: FileSystem,
    readonly maxOpenFiles: number,
  ) {
    assert(Number.isSafeInteger(maxOpenFiles) && maxOpenFiles >= 1, () => `bad maxOpenFiles ${maxOpenFiles}`)
  }

  /** Descriptors of the underlying file system open now, and the most ever open at once. */
  get openDescriptors(): number {
    return this.openCount
  }
  get peakOpenDescriptors(): number {
    return this.peakOpenCount
  }

  /**
   * Closes every descriptor no operation uses; each reopens on its next use. After start-up
   * the descriptors open are those the load happened to touch last, up to the bound: an
   * idle broker then holds none of its partitions' files (Kafka holds each segment's .log).
   */
  async closeIdleDescriptors(): Promise<void> {
    const idle = [...this.lru.keys()]
    // A few at a time: thousands of closes queued at once on the thread pool cost the
    // process several MB of RSS it kept (measured at 2,000 partitions).
    for (let first = 0; first < idle.length; first += CLOSE_IDLE_BATCH) {
      const batch = idle.slice(first, first + CLOSE_IDLE_BATCH).filter((handle) => handle.isIdle)
      for (const handle of batch) handle.evict()
      await Promise.all(batch.map((handle) => handle.evicted()))
    }
  }

  async open(path: string, flags: OpenFlags): Promise<FileHandle> {
    const handle = new LazyFileHandle(this, path, flags === 'r' ? 'r' : 'r+')
    // The first open runs now, with the caller's flags, so 'wx+' fails and 'w+' truncates here.
    await handle.openFirst(flags)
    this.track(handle)
    return handle
  }

  async rename(from: string, to: string): Promise<void> {
    await this.inner.rename(from, to)
    const moved = this.byPath.get(from)
    if (moved !== undefined) {
      this.deletePath(from)
      for (const handle of moved) {
        handle.path = to
        this.track(handle)
      }
      return
    }
    // A directory rename moves the handles of the files in it (storage does not do this today).
    if (!this.pathsPerDir.has(from)) return
    const prefix = `${from}/`
    for (const [path, handles] of [...this.byPath]) {
      if (!path.startsWith(prefix)) continue
      this.deletePath(path)
      for (const handle of handles) {
        handle.path = to + path.slice(from.length)
        this.track(handle)
      }
    }
  }

  unlink(path: string): Promise<void> {
    return this.inner.unlink(path)
  }
  mkdir(path: string): Promise<boolean> {
    return this.inner.mkdir(path)
  }
  rmdir(path: string): Promise<void> {
    return this.inner.rmdir(path)
  }
  readdir(path: string): Promise<string[]> {
    return this.inner.readdir(path)
  }
  stat(path: string): Promise<FileStat> {
    return this.inner.stat(path)
  }
  syncDir(path: string): Promise<void> {
    return this.inner.syncDir(path)
  }
  statfs(path: string): Promise<FileSystemSpace> {
    return this.inner.statfs(path)
  }
  /** A lock's descriptor is held for the broker's life: not one of the bounded ones. */
  lockExclusive(path: string): Promise<FileLock> {
    return this.inner.lockExclusive(path)
  }

  // ---- for LazyFileHandle ----

  /** @internal Opens the descriptor of `handle` once the bound allows one more. */
  async openFor(handle: LazyFileHandle, flags: OpenFlags): Promise<FileHandle> {
    await this.reserve()
    try {
      return await this.inner.open(handle.path, flags)
    } catch (err) {
      this.release()
      throw err
    }
  }

  /** Resolves once a descriptor may be opened, counted from then. */
  private async reserve(): Promise<void> {
    for (;;) {
      if (this.openCount < this.maxOpenFiles) {
        this.openCount++
        this.peakOpenCount = Math.max(this.peakOpenCount, this.openCount)
        return
      }
      // One close in progress per waiting open; a busy bound waits for onIdle instead.
      if (this.closingCount <= this.waiters.length) this.firstIdle()?.evict()
      await new Promise<void>((resolve) => this.waiters.push(resolve))
    }
  }

  private firstIdle(): LazyFileHandle | undefined {
    for (const handle of this.lru.keys()) return handle
    return undefined
  }

  /** @internal `handle`'s descriptor is being closed. */
  onClosing(handle: LazyFileHandle): void {
    this.lru.delete(handle)
    this.closingCount++
  }

  /** @internal A descriptor is closed (or its open failed): its place goes to a waiting open. */
  onClosed(): void {
    this.closingCount--
    this.release()
  }

  private release(): void {
    this.openCount--
    this.waiters.shift()?.()
  }

  /**
   * @internal No operation uses `handle` now: closed at once if an open waits for room,
   * else the most recently used idle handle.
   */
  onIdle(handle: LazyFileHandle): void {
    if (this.waiters.length > this.closingCount) handle.evict()
    else this.lru.set(handle, true)
  }

  /** @internal An operation uses the handle: not a candidate for eviction until idle again. */
  onBusy(handle: LazyFileHandle): void {
    this.lru.delete(handle)
  }

  /** @internal The virtual handle was closed by its owner. */
  untrack(handle: LazyFileHandle): void {
    const set = this.byPath.get(handle.path)
    if (set === undefined) return
    set.delete(handle)
    if (set.size === 0) this.deletePath(handle.path)
  }

  private deletePath(path: string): void {
    if (!this.byPath.delete(path)) return
    const dir = dirname(path)
    const left = (this.pathsPerDir.get(dir) ?? 1) - 1
    if (left === 0) this.pathsPerDir.delete(dir)
    else this.pathsPerDir.set(dir, left)
  }

  private track(handle: LazyFileHandle): void {
    let set = this.byPath.get(handle.path)
    if (set === undefined) {
      set = new Set()
      this.byPath.set(handle.path, set)
      const dir = dirname(handle.path)
      this.pathsPerDir.set(dir, (this.pathsPerDir.get(dir) ?? 0) + 1)
    }
    set.add(handle)
  }
}

function closedError(path: string): Error {
  return Object.assign(new Error(`file handle of ${path} is closed`), { code: 'EBADF' })
}

/** The settled close every handle starts with, shared: one promise per file was ~50 bytes of heap each. */
const NO_CLOSE: Promise<void> = Promise.resolve()

class LazyFileHandle implements FileHandle {
  /** The open descriptor, or the open in progress. */
  private real: Promise<FileHandle> | undefined
  /** `real` once its open completed: an operation then starts without awaiting it. */
  private opened: FileHandle | undefined
  private users = 0
  private closed: Promise<void> | undefined
  /** The evicted descriptor's close in progress: a reopen waits for it, so at most one is open. */
  private closing = NO_CLOSE
  private idleWaiters: (() => void)[] = []

  constructor(
    private readonly owner: BoundedFileSystem,
    public path: string,
    private readonly reopenFlags: OpenFlags,
  ) {}

  /** Holds a descriptor no operation uses (so its open has completed). */
  get isIdle(): boolean {
    return this.users === 0 && this.real !== undefined
  }

  /** @internal */
  openFirst(flags: OpenFlags): Promise<void> {
    return this.use(() => Promise.resolve(), flags)
  }

  read(buffer: Buffer, offset: number, length: number, position: number): Promise<number> {
    return this.use((h) => h.read(buffer, offset, length, position))
  }
  write(buffer: Buffer, position: number): Promise<number> {
    return this.use((h) => h.write(buffer, position))
  }
  writev(buffers: readonly Buffer[], position: number): Promise<number> {
    return this.use((h) => h.writev(buffers, position))
  }
  sync(): Promise<void> {
    return this.use((h) => h.sync())
  }
  truncate(length: number): Promise<void> {
    return this.use((h) => h.truncate(length))
  }
  stat(): Promise<FileStat> {
    return this.use((h) => h.stat())
  }

  /** Waits for the operations in flight, then closes the descriptor. */
  close(): Promise<void> {
    if (this.closed === undefined) {
      this.owner.untrack(this)
      this.closed = this.closeWhenIdle()
    }
    return this.closed
  }

  private async closeWhenIdle(): Promise<void> {
    while (this.users > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve))
    await this.closing
    if (this.real !== undefined) this.evict()
    await this.closing
  }

  /** @internal Resolves once an eviction's close completed. */
  evicted(): Promise<void> {
    return this.closing
  }

  /** @internal Closes the idle descriptor; the next operation reopens it. */
  evict(): void {
    assert(this.isIdle, 'only an idle descriptor is closed')
    const real = this.real!
    this.real = undefined
    this.opened = undefined
    this.owner.onClosing(this)
    this.closing = (async () => {
      try {
        await (await real).close()
      } catch {
        // close(2) releases the descriptor even when it reports an error: nothing to retry.
      } finally {
        this.owner.onClosed()
      }
    })()
  }

  private async use<T>(op: (handle: FileHandle) => Promise<T>, firstOpenFlags?: OpenFlags): Promise<T> {
    if (this.closed !== undefined) throw closedError(this.path)
    if (this.users++ === 0) this.owner.onBusy(this)
    try {
      // The descriptor open (the case of every append and read): no await before the operation.
      const handle = this.opened ?? (await this.acquire(firstOpenFlags ?? this.reopenFlags))
      return await op(handle)
    } finally {
      this.users--
      if (this.users === 0) {
        const waiters = this.idleWaiters
        this.idleWaiters = []
        for (const wake of waiters) wake()
        if (this.closed === undefined && this.real !== undefined) this.owner.onIdle(this)
      }
    }
  }

  private async acquire(flags: OpenFlags): Promise<FileHandle> {
    while (this.real === undefined) {
      const closing = this.closing
      await closing
      if (this.real !== undefined || closing !== this.closing) continue
      const opening = this.owner.openFor(this, flags)
      this.real = opening
      opening.then(
        (handle) => {
          if (this.real === opening) this.opened = handle
        },
        () => {
          if (this.real === opening) this.real = undefined
        },
      )
    }
    return this.real
  }
}
