/**
 * The disk as an injected dependency. Core code never imports node:fs: it receives a
 * FileSystem, so the deterministic simulation can swap in a disk with torn writes, lost
 * fsyncs and failing syscalls. runtime/node-file-system.ts is the implementation on real files.
 *
 * Errors: implementations reject with an Error carrying a Node-style `code`
 * ('ENOENT', 'EEXIST', 'EIO', ...), so callers can tell "missing" from "broken".
 */
import { dirname, join } from 'node:path'
import { TidelogError } from './errors.js'

/** 'r' read only; 'r+' read/write, must exist; 'w+' read/write, create or truncate; 'wx+' create, must not exist. */
export type OpenFlags = 'r' | 'r+' | 'w+' | 'wx+'

export interface FileStat {
  readonly size: number
  readonly mtimeMs: number
  readonly isDirectory: boolean
  readonly isFile: boolean
}

/** An open file. All I/O is positional: there is no shared file cursor to race on. */
export interface FileHandle {
  /** Reads up to `length` bytes at `position` into `buffer[offset..]`; resolves to the bytes read (0 at EOF). */
  read(buffer: Buffer, offset: number, length: number, position: number): Promise<number>
  /** Writes all of `buffer` at `position`; resolves to the bytes written. */
  write(buffer: Buffer, position: number): Promise<number>
  /** Writes the buffers back to back at `position` in as few syscalls as the OS allows. */
  writev(buffers: readonly Buffer[], position: number): Promise<number>
  /** fsync: data and metadata reach stable storage. */
  sync(): Promise<void>
  truncate(length: number): Promise<void>
  stat(): Promise<FileStat>
  close(): Promise<void>
}

export interface FileSystem {
  open(path: string, flags: OpenFlags): Promise<FileHandle>
  rename(from: string, to: string): Promise<void>
  unlink(path: string): Promise<void>
  /**
   * Creates the directory and its parents; no error if it exists. True when this call made
   * `path` itself, so it is empty: a new log skips reading what cannot be there yet.
   */
  mkdir(path: string): Promise<boolean>
  /** Removes a directory and everything below it. */
  rmdir(path: string): Promise<void>
  readdir(path: string): Promise<string[]>
  stat(path: string): Promise<FileStat>
  /** fsync of a directory, so a rename or create in it survives a power loss. */
  syncDir(path: string): Promise<void>
  /** Size and free space of the file system holding `path` (DescribeLogDirs). */
  statfs(path: string): Promise<FileSystemSpace>
  /**
   * Takes an exclusive lock on `path` (created empty if missing) without waiting, held until
   * released or until the process ends, however it ends: the OS releases it after a kill -9.
   * Two holders are refused whether they are two processes or two owners in one process.
   * Rejects with code 'EWOULDBLOCK' while another holds it.
   */
  lockExclusive(path: string): Promise<FileLock>
  /**
   * Synchronous appends that took long enough to send appends back to the thread pool for a
   * while (runtime/sync-append-policy.ts); absent where appends are never synchronous.
   */
  syncAppendStalls?(): number
}

export interface FileSystemSpace {
  readonly totalBytes: number
  readonly usableBytes: number
}

/** A lock from FileSystem.lockExclusive. */
export interface FileLock {
  readonly path: string
  /** Releases the lock (the file stays); a second call does nothing. */
  release(): Promise<void>
}

export function isNotFound(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'ENOENT'
}

export async function exists(fs: FileSystem, path: string): Promise<boolean> {
  try {
    await fs.stat(path)
    return true
  } catch (err) {
    if (isNotFound(err)) return false
    throw err
  }
}

/** Reads a whole (small) file: checkpoints and indexes. */
export async function readWholeFile(fs: FileSystem, path: string): Promise<Buffer> {
  const handle = await fs.open(path, 'r')
  try {
    const { size } = await handle.stat()
    const buffer = Buffer.allocUnsafe(size)
    let filled = 0
    while (filled < size) {
      const n = await handle.read(buffer, filled, size - filled, filled)
      if (n === 0) break
      filled += n
    }
    return buffer.subarray(0, filled)
  } finally {
    await handle.close()
  }
}

/**
 * Replaces `path` with `content` so that a crash leaves either the old or the new file:
 * write a temp file, fsync it, rename over the target, fsync the directory (Kafka's
 * CheckpointFile + Utils.atomicMoveWithFallback).
 */
export async function writeFileAtomically(fs: FileSystem, path: string, content: Buffer): Promise<void> {
  const tmpPath = `${path}.tmp`
  const handle = await fs.open(tmpPath, 'w+')
  try {
    await handle.write(content, 0)
    await handle.sync()
  } finally {
    await handle.close()
  }
  await fs.rename(tmpPath, path)
  await fs.syncDir(dirname(path))
}

/** The lock file of a log directory, as Kafka names it. */
export const DIRECTORY_LOCK_FILE = '.lock'

/** A directory another owner (process, or broker in this process) holds the lock of. */
export class DirectoryLockedError extends TidelogError {
  constructor(
    readonly dir: string,
    readonly lockFile: string,
    cause?: unknown,
  ) {
    super(
      'ERR_DIRECTORY_LOCKED',
      `Failed to acquire lock on file ${lockFile} in ${dir}. ` +
        'A tidelog broker in another process or in this one is using this directory.',
      { cause },
    )
    this.name = 'DirectoryLockedError'
  }
}

/**
 * Creates `dir` if missing and takes the exclusive lock of `lockFile` in it (Kafka's
 * LogManager.lockLogDirs): called before anything in the directory is read. Rejects with a
 * DirectoryLockedError while another owner holds it.
 */
export async function lockDirectory(
  fs: FileSystem,
  dir: string,
  lockFile: string = DIRECTORY_LOCK_FILE,
): Promise<FileLock> {
  await fs.mkdir(dir)
  try {
    return await fs.lockExclusive(join(dir, lockFile))
  } catch (err) {
    if (isLockHeld(err)) throw new DirectoryLockedError(dir, lockFile, err)
    throw err
  }
}

/** The lock exists and another owner holds it (FileSystem.lockExclusive). */
export function isLockHeld(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'EWOULDBLOCK'
}
