/**
 * The FileSystem on real files (node:fs): what the CLI and startBroker() hand the broker.
 */
import { constants as fsConstants, read as fsRead, writev as fsWritev, type Stats, writevSync } from 'node:fs'
import * as fsp from 'node:fs/promises'
import type {
  FileHandle,
  FileLock,
  FileStat,
  FileSystem,
  FileSystemSpace,
  OpenFlags,
} from '../common/file-system.js'
import { lockFile } from './file-lock.js'
import { DEFAULT_SYNC_APPEND_OPTIONS, SyncAppendPolicy } from './sync-append-policy.js'

/**
 * Reads and writevs (once per produce, follower append and consumer read) go to the
 * descriptor with node:fs's callback calls: the same libuv request as FileHandle's, without
 * the promise request, the result object and the handle's own reference counting, which cost
 * 2-4 µs of the event loop's CPU per call (a 1 KiB writev: 13-15 µs against 11). Those calls
 * hold no reference on the handle, so close() waits for the ones in flight itself. Small
 * appends are written synchronously while the disk answers them quickly (SyncAppendPolicy).
 */
class NodeFileHandle implements FileHandle {
  private inFlight = 0
  private idleWaiters: (() => void)[] = []
  private closing: Promise<void> | undefined

  constructor(
    private readonly handle: fsp.FileHandle,
    private readonly syncAppends: SyncAppendPolicy,
  ) {}

  read(buffer: Buffer, offset: number, length: number, position: number): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      const fd = this.begin()
      if (fd < 0) return reject(closedHandleError())
      fsRead(fd, buffer, offset, length, position, (err, bytesRead) => {
        this.end()
        if (err) reject(err)
        else resolve(bytesRead)
      })
    })
  }

  async write(buffer: Buffer, position: number): Promise<number> {
    let written = 0
    // A regular-file pwrite may still be short (quota, signal): loop until all is written.
    while (written < buffer.length) {
      const { bytesWritten } = await this.handle.write(
        buffer,
        written,
        buffer.length - written,
        position + written,
      )
      if (bytesWritten === 0) throw Object.assign(new Error('write made no progress'), { code: 'EIO' })
      written += bytesWritten
    }
    return written
  }

  writev(buffers: readonly Buffer[], position: number): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      const fd = this.begin()
      if (fd < 0) return reject(closedHandleError())
      const startedMs = this.syncAppends.startSync(totalLength(buffers))
      if (startedMs !== undefined) {
        // The same write on the event loop: see SyncAppendPolicy for when and why.
        try {
          resolve(writevSync(fd, buffers as Buffer[], position))
        } catch (err) {
          reject(err)
        } finally {
          this.syncAppends.finishSync(startedMs)
          this.end()
        }
        return
      }
      // libuv splits at IOV_MAX and retries partial writes itself (uv__fs_write_all).
      fsWritev(fd, buffers as Buffer[], position, (err, bytesWritten) => {
        this.end()
        if (err) reject(err)
        else resolve(bytesWritten)
      })
    })
  }

  sync(): Promise<void> {
    return this.handle.sync()
  }

  truncate(length: number): Promise<void> {
    return this.handle.truncate(length)
  }

  async stat(): Promise<FileStat> {
    return toFileStat(await this.handle.stat())
  }

  close(): Promise<void> {
    this.closing ??= this.closeWhenIdle()
    return this.closing
  }

  private async closeWhenIdle(): Promise<void> {
    while (this.inFlight > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve))
    await this.handle.close()
  }

  /** The descriptor for one callback call, counted in flight; -1 once close() was called. */
  private begin(): number {
    if (this.closing !== undefined || this.handle.fd < 0) return -1
    this.inFlight++
    return this.handle.fd
  }

  private end(): void {
    this.inFlight--
    if (this.inFlight > 0 || this.idleWaiters.length === 0) return
    const waiters = this.idleWaiters
    this.idleWaiters = []
    for (const wake of waiters) wake()
  }
}

function totalLength(buffers: readonly Buffer[]): number {
  let bytes = 0
  for (const buffer of buffers) bytes += buffer.length
  return bytes
}

/** What FileHandle's own calls answer on a closed handle. */
function closedHandleError(): Error {
  return Object.assign(new Error('file closed'), { code: 'EBADF' })
}

function toFileStat(stats: Stats): FileStat {
  return {
    size: stats.size,
    mtimeMs: stats.mtimeMs,
    isDirectory: stats.isDirectory(),
    isFile: stats.isFile(),
  }
}

export class NodeFileSystem implements FileSystem {
  /** Shared by every file of this file system: a stalling disk stalls all of them. */
  readonly syncAppends: SyncAppendPolicy

  constructor(syncAppends = new SyncAppendPolicy(DEFAULT_SYNC_APPEND_OPTIONS, () => performance.now())) {
    this.syncAppends = syncAppends
  }

  async open(path: string, flags: OpenFlags): Promise<FileHandle> {
    return new NodeFileHandle(await fsp.open(path, flags), this.syncAppends)
  }
  syncAppendStalls(): number {
    return this.syncAppends.stalls
  }
  rename(from: string, to: string): Promise<void> {
    return fsp.rename(from, to)
  }
  unlink(path: string): Promise<void> {
    return fsp.unlink(path)
  }
  async mkdir(path: string): Promise<boolean> {
    // The first directory it made, undefined when `path` existed: one mkdir syscall either way.
    return (await fsp.mkdir(path, { recursive: true })) !== undefined
  }
  rmdir(path: string): Promise<void> {
    return fsp.rm(path, { recursive: true, force: true })
  }
  readdir(path: string): Promise<string[]> {
    return fsp.readdir(path)
  }
  async stat(path: string): Promise<FileStat> {
    return toFileStat(await fsp.stat(path))
  }
  async syncDir(path: string): Promise<void> {
    const handle = await fsp.open(path, fsConstants.O_RDONLY)
    try {
      await handle.sync()
    } finally {
      await handle.close()
    }
  }
  async statfs(path: string): Promise<FileSystemSpace> {
    const stats = await fsp.statfs(path)
    return { totalBytes: stats.blocks * stats.bsize, usableBytes: stats.bavail * stats.bsize }
  }
  /** flock(2) on the file, through util-linux's flock (runtime/file-lock.ts). */
  lockExclusive(path: string): Promise<FileLock> {
    return lockFile(path)
  }
}

export const nodeFileSystem: FileSystem = new NodeFileSystem()
