/**
 * A simulated disk: an in-memory FileSystem with a page cache. Writes land in the cache
 * (`data`); `sync()` makes a file's bytes durable. `crash()` is a power loss for this disk:
 * every file goes back to its durable bytes, except that an append-only file may keep a
 * random prefix of its unflushed tail (a torn tail: some pages reached the platter).
 *
 * Namespace operations (create, rename, unlink, mkdir) are durable at once: a journaling
 * file system with ordered metadata, the case Kafka relies on. Unflushed data is what a
 * crash loses.
 *
 * Each broker incarnation uses the disk through a `ProcessDisk` view; once the process is
 * killed its calls never settle (a dead process gets no answers).
 */
import type {
  FileHandle,
  FileLock,
  FileStat,
  FileSystem,
  FileSystemSpace,
  OpenFlags,
} from '../common/file-system.js'
import type { SimRandom } from './random.js'

interface SimFile {
  data: Buffer
  durable: Buffer
  mtimeMs: number
}

function fsError(code: string, message: string): Error {
  return Object.assign(new Error(`${code}: ${message}`), { code })
}

function parentOf(path: string): string {
  const i = path.lastIndexOf('/')
  return i <= 0 ? '/' : path.slice(0, i)
}

export class SimDisk {
  private readonly files = new Map<string, SimFile>()
  private readonly dirs = new Set<string>(['/'])
  /**
   * Per directory path: the paths of the files and directories directly in it. readdir
   * scanned every path of the disk, O(files) per call: with hundreds of partitions (a
   * directory and 4 files each per broker) log loading and snapshot cleanup went quadratic.
   */
  private readonly children = new Map<string, Set<string>>([['/', new Set()]])
  /** flock(2)'s locks: per path, the lock taken and the process holding it (released when it dies). */
  private readonly locks = new Map<string, { readonly owner: ProcessDisk }>()
  /** Bytes lost and torn tails kept by the last crash, for the trace. */
  lastCrash = { filesReverted: 0, bytesLost: 0, tornTails: 0 }
  /**
   * An armed disk error (`diskErrors`): the next write or the next fsync of any file fails
   * with EIO, once. A failed write may have put a prefix of its bytes in the page cache (a
   * short write that then failed); a failed fsync makes nothing durable (the page cache keeps
   * the bytes, as the benign reading of Linux's fsync error: see README).
   */
  armedError: 'write' | 'sync' | null = null
  /** Told when an armed error fires: what failed, on which file. */
  onErrorFired: ((what: string) => void) | null = null

  constructor(
    private readonly random: SimRandom,
    private readonly nowMs: () => number,
  ) {}

  crash(tornTailProbability: number): void {
    const summary = { filesReverted: 0, bytesLost: 0, tornTails: 0 }
    for (const file of this.files.values()) {
      if (file.data.equals(file.durable)) continue
      summary.filesReverted++
      const appendOnly =
        file.data.length > file.durable.length &&
        file.data.subarray(0, file.durable.length).equals(file.durable)
      let keep = file.durable.length
      if (appendOnly && this.random.chance(tornTailProbability)) {
        keep = this.random.int(file.durable.length, file.data.length)
        if (keep > file.durable.length) summary.tornTails++
      }
      summary.bytesLost += Math.abs(file.data.length - keep)
      file.data = Buffer.from(appendOnly ? file.data.subarray(0, keep) : file.durable)
      file.durable = Buffer.from(file.data)
    }
    this.lastCrash = summary
  }

  // ---- operations (through ProcessDisk) ------------------------------------------------------

  open(path: string, flags: OpenFlags): SimFile {
    let file = this.files.get(path)
    if (flags === 'wx+' && file) throw fsError('EEXIST', path)
    if ((flags === 'r' || flags === 'r+') && !file) throw fsError('ENOENT', path)
    if (!this.dirs.has(parentOf(path))) throw fsError('ENOENT', parentOf(path))
    if (!file) {
      file = { data: Buffer.alloc(0), durable: Buffer.alloc(0), mtimeMs: this.nowMs() }
      this.setFile(path, file)
    } else if (flags === 'w+') {
      file.data = Buffer.alloc(0)
      file.mtimeMs = this.nowMs()
    }
    return file
  }

  /**
   * An exclusive lock on `path` (created if missing); EWOULDBLOCK while any process holds it,
   * this one included. Returns the token that unlock() takes.
   */
  lock(path: string, owner: ProcessDisk): object {
    if (!this.files.has(path)) this.open(path, 'w+')
    if (this.locks.has(path)) throw fsError('EWOULDBLOCK', `${path} is locked`)
    const token = { owner }
    this.locks.set(path, token)
    return token
  }

  /** Releases the lock `token` took, if it still holds it (a second release does nothing). */
  unlock(path: string, token: object): void {
    if (this.locks.get(path) === token) this.locks.delete(path)
  }

  /** A process died: the kernel releases its locks. */
  unlockAll(owner: ProcessDisk): void {
    for (const [path, token] of [...this.locks]) if (token.owner === owner) this.locks.delete(path)
  }

  isLive(file: SimFile, path: string): boolean {
    return this.files.get(path) === file
  }

  rename(from: string, to: string): void {
    const file = this.files.get(from)
    if (!file) throw fsError('ENOENT', from)
    this.deleteFile(from)
    this.setFile(to, file)
  }

  unlink(path: string): void {
    if (!this.deleteFile(path)) throw fsError('ENOENT', path)
  }

  private setFile(path: string, file: SimFile): void {
    this.files.set(path, file)
    this.list(path)
  }

  private deleteFile(path: string): boolean {
    if (!this.files.delete(path)) return false
    if (!this.dirs.has(path)) this.unlist(path)
    return true
  }

  /** Lists `path` in its parent directory (which need not exist: rename does not check). */
  private list(path: string): void {
    if (path === '/') return
    const parent = parentOf(path)
    let names = this.children.get(parent)
    if (names === undefined) {
      names = new Set()
      this.children.set(parent, names)
    }
    names.add(path)
  }

  private unlist(path: string): void {
    this.children.get(parentOf(path))?.delete(path)
  }

  /** True when `path` itself did not exist (see FileSystem.mkdir). */
  mkdir(path: string): boolean {
    const parts = path.split('/').filter((p) => p !== '')
    let at = ''
    let made = false
    for (const part of parts) {
      at = `${at}/${part}`
      if (this.files.has(at)) throw fsError('ENOTDIR', at)
      made = !this.dirs.has(at)
      this.dirs.add(at)
      this.list(at)
    }
    return made
  }

  rmdir(path: string): void {
    const prefix = `${path}/`
    for (const name of [...this.files.keys()]) if (name.startsWith(prefix)) this.deleteFile(name)
    for (const name of [...this.dirs])
      if (name === path || name.startsWith(prefix)) {
        this.dirs.delete(name)
        if (!this.files.has(name)) this.unlist(name)
      }
  }

  readdir(path: string): string[] {
    if (!this.dirs.has(path)) throw fsError('ENOENT', path)
    const prefix = path === '/' ? '/' : `${path}/`
    const names: string[] = []
    for (const name of this.children.get(path) ?? []) names.push(name.slice(prefix.length))
    return names.sort()
  }

  stat(path: string): FileStat {
    const file = this.files.get(path)
    if (file) return { size: file.data.length, mtimeMs: file.mtimeMs, isDirectory: false, isFile: true }
    if (this.dirs.has(path)) return { size: 0, mtimeMs: 0, isDirectory: true, isFile: false }
    throw fsError('ENOENT', path)
  }

  hasDir(path: string): boolean {
    return this.dirs.has(path)
  }

  private pathOf(file: SimFile): string {
    for (const [path, f] of this.files) if (f === file) return path
    return '(unlinked file)'
  }

  write(file: SimFile, buffer: Buffer, position: number): number {
    if (this.armedError === 'write') {
      this.armedError = null
      const written = this.random.int(0, Math.max(0, buffer.length - 1))
      if (written > 0) this.write(file, buffer.subarray(0, written), position)
      this.onErrorFired?.(
        `write of ${buffer.length} bytes at ${position} to ${this.pathOf(file)} (${written} bytes reached the page cache)`,
      )
      throw fsError('EIO', 'simulated write error')
    }
    const end = position + buffer.length
    if (end > file.data.length) {
      const grown = Buffer.alloc(end)
      file.data.copy(grown)
      file.data = grown
    }
    buffer.copy(file.data, position)
    file.mtimeMs = this.nowMs()
    return buffer.length
  }

  truncate(file: SimFile, length: number): void {
    const next = Buffer.alloc(length)
    file.data.copy(next, 0, 0, Math.min(length, file.data.length))
    file.data = next
  }

  sync(file: SimFile): void {
    if (this.armedError === 'sync') {
      this.armedError = null
      this.onErrorFired?.(`fsync of ${this.pathOf(file)}`)
      throw fsError('EIO', 'simulated fsync error')
    }
    file.durable = Buffer.from(file.data)
  }
}

/** One process's door to the disk: operations settle on the next microtasks while alive, never once killed. */
export class ProcessDisk implements FileSystem {
  private alive = true

  constructor(private readonly disk: SimDisk) {}

  kill(): void {
    this.alive = false
    this.disk.unlockAll(this)
  }

  /** Runs `op` for a live process; a dead one's promise never settles. */
  run<T>(op: () => T): Promise<T> {
    if (!this.alive) return new Promise<T>(() => undefined)
    return new Promise<T>((resolve, reject) => {
      try {
        resolve(op())
      } catch (error) {
        reject(error)
      }
    })
  }

  async open(path: string, flags: OpenFlags): Promise<FileHandle> {
    const file = await this.run(() => this.disk.open(path, flags))
    return new SimFileHandle(this, this.disk, file)
  }
  rename(from: string, to: string): Promise<void> {
    return this.run(() => this.disk.rename(from, to))
  }
  unlink(path: string): Promise<void> {
    return this.run(() => this.disk.unlink(path))
  }
  mkdir(path: string): Promise<boolean> {
    return this.run(() => this.disk.mkdir(path))
  }
  rmdir(path: string): Promise<void> {
    return this.run(() => this.disk.rmdir(path))
  }
  readdir(path: string): Promise<string[]> {
    return this.run(() => this.disk.readdir(path))
  }
  stat(path: string): Promise<FileStat> {
    return this.run(() => this.disk.stat(path))
  }
  syncDir(path: string): Promise<void> {
    return this.run(() => {
      if (!this.disk.hasDir(path)) throw fsError('ENOENT', path)
    })
  }
  lockExclusive(path: string): Promise<FileLock> {
    return this.run(() => {
      const token = this.disk.lock(path, this)
      return { path, release: () => this.run(() => this.disk.unlock(path, token)) }
    })
  }
  /** A fixed-size simulated disk: DescribeLogDirs answers the same in every run. */
  statfs(path: string): Promise<FileSystemSpace> {
    return this.run(() => {
      if (!this.disk.hasDir(path)) throw fsError('ENOENT', path)
      return { totalBytes: SIM_DISK_BYTES, usableBytes: SIM_DISK_BYTES }
    })
  }
}

const SIM_DISK_BYTES = 64 * 1024 ** 3

class SimFileHandle implements FileHandle {
  private closed = false

  constructor(
    private readonly process: ProcessDisk,
    private readonly disk: SimDisk,
    private readonly file: SimFile,
  ) {}

  private use<T>(op: () => T): Promise<T> {
    return this.process.run(() => {
      if (this.closed) throw fsError('EBADF', 'file handle closed')
      return op()
    })
  }

  read(buffer: Buffer, offset: number, length: number, position: number): Promise<number> {
    return this.use(() => {
      const available = Math.max(0, Math.min(length, this.file.data.length - position))
      this.file.data.copy(buffer, offset, position, position + available)
      return available
    })
  }
  write(buffer: Buffer, position: number): Promise<number> {
    return this.use(() => this.disk.write(this.file, buffer, position))
  }
  writev(buffers: readonly Buffer[], position: number): Promise<number> {
    return this.use(() => this.disk.write(this.file, Buffer.concat(buffers), position))
  }
  sync(): Promise<void> {
    return this.use(() => this.disk.sync(this.file))
  }
  truncate(length: number): Promise<void> {
    return this.use(() => this.disk.truncate(this.file, length))
  }
  stat(): Promise<FileStat> {
    return this.use(() => ({
      size: this.file.data.length,
      mtimeMs: this.file.mtimeMs,
      isDirectory: false,
      isFile: true,
    }))
  }
  close(): Promise<void> {
    return this.use(() => {
      this.closed = true
    })
  }
}
