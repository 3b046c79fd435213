/**
 * The FileSystem on real files (node:fs): what the CLI and startBroker() hand the broker.
 */
import { constants as fsConstants, type Stats } from 'node:fs'
import * as fsp from 'node:fs/promises'
import type { FileHandle, FileStat, FileSystem, FileSystemSpace, OpenFlags } from '../common/file-system.js'

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
  async statfs(path: string): Promise<FileSystemSpace> {
    const stats = await fsp.statfs(path)
    return { totalBytes: stats.blocks * stats.bsize, usableBytes: stats.bavail * stats.bsize }
  }
}

export const nodeFileSystem: FileSystem = new NodeFileSystem()
