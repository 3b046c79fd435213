/**
 * A FileSystem that keeps at most `maxOpenFiles` descriptors of the one below it open
 * (log.segment.open.files.max), so a broker's descriptors no longer grow with its
 * segments: each segment holds a .log, an .index, a .timeindex and maybe a .txnindex
 * handle for its whole life, and 10,000 partitions meant 30,000 descriptors (Kafka's lazy
 * indexes and Redpanda's open-file limits solve the same problem).
 *
 * The handles it gives out are virtual: the real descriptor opens on the first operation,
 * stays open while an operation uses it, and the least recently used idle one closes when
 * the bound is passed; the next operation reopens it ('w+' and 'wx+' reopen as 'r+', never
 * truncating again). Busy handles are never closed, so a read racing an eviction always
 * runs on an open descriptor; if every handle is busy the bound is passed until one is
 * released. The indexes keep their entries in memory, so a closed index costs nothing
 * until its segment rolls, is truncated or closes.
 *
 * POSIX keeps an unlinked file readable through a descriptor still open; here a virtual
 * handle whose descriptor was evicted cannot reopen an unlinked file (ENOENT). Storage
 * never reads a deleted segment after its reads in flight, which hold the descriptor.
 * fsync works on the file, not the descriptor, so a handle written, evicted and reopened
 * is synced by the reopened descriptor.
 */
import { dirname } from 'node:path'
import { assert } from '../common/assert.js'
import type { FileHandle, FileStat, FileSystem, FileSystemSpace, OpenFlags } from '../common/file-system.js'

/** Default of log.segment.open.files.max: three brokers in one process stay under a 20,000 ulimit -n. */
export const DEFAULT_MAX_OPEN_FILES = 4096

export class BoundedFileSystem implements FileSystem {
  /** Handles holding a descriptor (or opening one), least recently used first. */
  private readonly lru = new Map<LazyFileHandle, true>()
  /** Live virtual handles by path, so a rename moves them. */
  private readonly byPath = new Map<string, Set<LazyFileHandle>>()
  /** Paths in byPath per parent directory, so a file rename need not scan for a directory rename. */
  private readonly pathsPerDir = new Map<string, number>()
  private openCount = 0
  private peakOpenCount = 0

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
  get virtualHandles(): number {
    let n = 0
    for (const set of this.byPath.values()) n += set.size
    return n
  }

  async open(path: string, flags: OpenFlags): Promise<FileHandle> {
    // The first open runs now, with the caller's flags, so 'wx+' fails and 'w+' truncates here.
    const handle = new LazyFileHandle(this, path, flags === 'r' ? 'r' : 'r+')
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
  mkdir(path: string): Promise<void> {
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

  // ---- for LazyFileHandle ----

  /** @internal */
  openInner(path: string, flags: OpenFlags): Promise<FileHandle> {
    return this.inner.open(path, flags)
  }

  /** @internal A descriptor is being opened (counted from now, so the bound holds while it opens). */
  onOpening(handle: LazyFileHandle): void {
    assert(!this.lru.has(handle), 'a handle opens one descriptor at a time')
    this.lru.set(handle, true)
    this.openCount++
    this.peakOpenCount = Math.max(this.peakOpenCount, this.openCount)
  }

  /** @internal The descriptor is closed (or failed to open). */
  onClosed(handle: LazyFileHandle): void {
    if (this.lru.delete(handle)) this.openCount--
  }

  /** @internal The handle was used: it becomes the most recently used. */
  touch(handle: LazyFileHandle): void {
    if (!this.lru.has(handle)) return
    this.lru.delete(handle)
    this.lru.set(handle, true)
  }

  /**
   * @internal Closes idle descriptors, least recently used first, until the bound holds;
   * resolves when they are closed, so an open that waits for it never passes the bound.
   */
  evictIdle(): Promise<void> {
    if (this.openCount <= this.maxOpenFiles) return Promise.resolve()
    const closes: Promise<void>[] = []
    for (const handle of this.lru.keys()) {
      if (this.openCount <= this.maxOpenFiles) break
      if (handle.isIdle) closes.push(handle.evict())
    }
    return Promise.all(closes).then(() => {})
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

class LazyFileHandle implements FileHandle {
  /** The open descriptor, or the open in progress. */
  private real: Promise<FileHandle> | undefined
  private users = 0
  private closed: Promise<void> | undefined
  /** The evicted descriptor's close in progress: a reopen waits for it, so at most one is open. */
  private closing: Promise<void> = Promise.resolve()
  private idleWaiters: (() => void)[] = []

  constructor(
    private readonly owner: BoundedFileSystem,
    public path: string,
    private readonly reopenFlags: OpenFlags,
  ) {}

  get isIdle(): boolean {
    return this.users === 0 && this.real !== undefined && this.closed === undefined
  }

  /** @internal */
  async openFirst(flags: OpenFlags): Promise<void> {
    this.owner.onOpening(this)
    try {
      await this.owner.evictIdle()
      this.real = this.owner.openInner(this.path, flags)
      await this.real
    } catch (err) {
      this.real = undefined
      this.owner.onClosed(this)
      throw err
    }
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
    await this.closeReal()
  }

  /** @internal Closes the idle descriptor now; the next operation reopens it. */
  evict(): Promise<void> {
    assert(this.users === 0, 'a busy descriptor is never evicted')
    // Out of the count at once, so one pass of evictIdle closes only as many as it must.
    this.owner.onClosed(this)
    this.closing = this.closeReal().catch(() => {
      // The descriptor is released by a failed close too (close(2) frees it even on EIO).
    })
    return this.closing
  }

  private async use<T>(op: (handle: FileHandle) => Promise<T>): Promise<T> {
    if (this.closed !== undefined) throw closedError(this.path)
    this.users++
    try {
      const handle = await this.acquire()
      this.owner.touch(this)
      return await op(handle)
    } finally {
      this.users--
      if (this.users === 0) {
        const waiters = this.idleWaiters
        this.idleWaiters = []
        for (const wake of waiters) wake()
        // Its caller waits for nothing: the closes are awaited by the next open.
        if (this.closed === undefined) void this.owner.evictIdle()
      }
    }
  }

  private async acquire(): Promise<FileHandle> {
    while (this.real === undefined) {
      const closing = this.closing
      await closing
      if (this.real !== undefined || closing !== this.closing) continue
      this.owner.onOpening(this)
      const opening = this.owner.evictIdle().then(() => this.owner.openInner(this.path, this.reopenFlags))
      this.real = opening
      opening.catch(() => {
        if (this.real !== opening) return
        this.real = undefined
        this.owner.onClosed(this)
      })
    }
    return this.real
  }

  private async closeReal(): Promise<void> {
    const real = this.real
    if (real === undefined) return
    this.real = undefined
    try {
      // An open that failed has nothing to close; its error went to its operation.
      const handle = await real.catch(() => undefined)
      await handle?.close()
    } finally {
      this.owner.onClosed(this)
    }
  }
}
