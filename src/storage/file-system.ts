/**
 * The disk as an injected dependency. Storage code never imports node:fs: it receives a
 * FileSystem, so a deterministic simulation can later swap in a fake disk with torn writes,
 * lost fsyncs and failing syscalls. NodeFileSystem is the only implementation on real files.
 *
 * Errors: implementations reject with an Error carrying a Node-style `code`
 * ('ENOENT', 'EEXIST', 'EIO', ...), so callers can tell "missing" from "broken".
 */
import { constants as fsConstants, type Stats } from 'node:fs'
import * as fsp from 'node:fs/promises'
import { dirname } from 'node:path'

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
  /** Creates the directory and its parents; no error if it exists. */
  mkdir(path: string): Promise<void>
  /** Removes a directory and everything below it. */
  rmdir(path: string): Promise<void>
  readdir(path: string): Promise<string[]>
  stat(path: string): Promise<FileStat>
  /** fsync of a directory, so a rename or create in it survives a power loss. */
  syncDir(path: string): Promise<void>
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

class NodeFileHandle implements FileHandle {
  constructor(private readonly handle: fsp.FileHandle) {}

  async read(buffer: Buffer, offset: number, length: number, position: number): Promise<number> {
    const { bytesRead } = await this.handle.read(buffer, offset, length, position)
    return bytesRead
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

  async writev(buffers: readonly Buffer[], position: number): Promise<number> {
    // libuv splits at IOV_MAX and retries partial writes itself (uv__fs_write_all).
    const { bytesWritten } = await this.handle.writev(buffers as Buffer[], position)
    return bytesWritten
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
    return this.handle.close()
  }
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
  async open(path: string, flags: OpenFlags): Promise<FileHandle> {
    return new NodeFileHandle(await fsp.open(path, flags))
  }
  rename(from: string, to: string): Promise<void> {
    return fsp.rename(from, to)
  }
  unlink(path: string): Promise<void> {
    return fsp.unlink(path)
  }
  async mkdir(path: string): Promise<void> {
    await fsp.mkdir(path, { recursive: true })
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
}

export const nodeFileSystem: FileSystem = new NodeFileSystem()
