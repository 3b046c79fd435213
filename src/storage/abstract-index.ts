/**
 * A sparse index file in Kafka's format: fixed-size big-endian entries, no header, the file
 * preallocated to segment.index.bytes while its segment is active and trimmed to its
 * entries when the segment rolls or the log closes (Kafka's AbstractIndex).
 *
 * Kafka maps the file into memory; Node cannot, so entries live in typed arrays and are
 * written to the file in one pwrite when they must be on disk (roll, close). The active
 * segment's indexes need not be durable before that: an unclean shutdown rebuilds them,
 * because recovery always rescans the segment holding the recovery point.
 */
import { assert } from '../common/assert.js'
import type { FileHandle, FileSystem } from '../common/file-system.js'
import type { Offset } from '../common/types.js'

export abstract class AbstractIndex {
  protected entryCount = 0
  private persistedEntries = 0
  private fileLengthBytes = 0
  private handle: FileHandle | undefined

  constructor(
    protected readonly fs: FileSystem,
    private filePath: string,
    readonly baseOffset: Offset,
    readonly maxIndexBytes: number,
    readonly entryBytes: number,
  ) {
    assert(maxIndexBytes >= entryBytes, () => `index of ${maxIndexBytes} bytes holds no entry`)
  }

  /** The offset `relative` to this index's segment. */
  protected absolute(relative: number): Offset {
    return (this.baseOffset + relative) as Offset
  }

  get path(): string {
    return this.filePath
  }
  get entries(): number {
    return this.entryCount
  }
  get maxEntries(): number {
    return Math.floor(this.maxIndexBytes / this.entryBytes)
  }
  get isFull(): boolean {
    return this.entryCount >= this.maxEntries
  }
  get sizeInBytes(): number {
    return this.entryCount * this.entryBytes
  }

  protected abstract encode(entry: number, buf: Buffer, at: number): void
  protected abstract decode(buf: Buffer, at: number, entry: number): void
  protected abstract ensureCapacity(entries: number): void
  /** Why the loaded entries cannot be trusted, or undefined if they look sound. */
  protected abstract findProblem(logSizeBytes: number): string | undefined

  /** Creates an empty file (replacing any), preallocated as for an active segment. */
  async create(preallocate: boolean): Promise<void> {
    this.handle = await this.fs.open(this.filePath, 'w+')
    this.fileLengthBytes = 0
    this.entryCount = 0
    this.persistedEntries = 0
    if (preallocate) await this.resizeFile(this.maxEntries * this.entryBytes)
  }

  /**
   * Opens and loads an existing file. Returns a reason when it is missing or fails the
   * sanity checks (length not a multiple of the entry size, entries out of order, pointing
   * past the log); the caller then rebuilds it from the log.
   */
  async load(logSizeBytes: number): Promise<string | undefined> {
    let bytes: Buffer
    try {
      this.handle = await this.fs.open(this.filePath, 'r+')
      bytes = await this.readAll(this.handle)
    } catch (err) {
      if ((err as { code?: string }).code === 'ENOENT') return 'missing'
      throw err
    }
    this.fileLengthBytes = bytes.length
    if (bytes.length % this.entryBytes !== 0)
      return `length ${bytes.length} is not a multiple of ${this.entryBytes}`
    const entries = bytes.length / this.entryBytes
    if (entries > this.maxEntries) return `${entries} entries exceed the maximum ${this.maxEntries}`
    this.ensureCapacity(entries)
    for (let i = 0; i < entries; i++) this.decode(bytes, i * this.entryBytes, i)
    this.entryCount = entries
    this.persistedEntries = entries
    return this.findProblem(logSizeBytes)
  }

  private async readAll(handle: FileHandle): Promise<Buffer> {
    const { size } = await handle.stat()
    const buffer = Buffer.alloc(size)
    let filled = 0
    while (filled < size) {
      const n = await handle.read(buffer, filled, size - filled, filled)
      if (n === 0) break
      filled += n
    }
    return buffer.subarray(0, filled)
  }

  /** Forgets all entries and empties the file (before a rebuild). */
  async reset(preallocate: boolean): Promise<void> {
    if (this.handle === undefined) {
      await this.create(preallocate)
      return
    }
    this.entryCount = 0
    this.persistedEntries = 0
    await this.resizeFile(0)
    if (preallocate) await this.resizeFile(this.maxEntries * this.entryBytes)
  }

  /** Drops entries from `entries` on; the file's stale tail is zeroed so it cannot be reloaded. */
  protected async truncateToEntries(entries: number, preallocate: boolean): Promise<void> {
    assert(
      entries >= 0 && entries <= this.entryCount,
      () => `cannot truncate ${this.entryCount} entries to ${entries}`,
    )
    if (entries === this.entryCount) return
    this.entryCount = entries
    this.persistedEntries = Math.min(this.persistedEntries, entries)
    await this.resizeFile(this.persistedEntries * this.entryBytes)
    if (preallocate) await this.resizeFile(this.maxEntries * this.entryBytes)
  }

  /** Writes the entries not yet in the file, in one pwrite. */
  async persist(): Promise<void> {
    const handle = this.requireHandle()
    if (this.persistedEntries === this.entryCount) return
    const from = this.persistedEntries
    const buf = Buffer.allocUnsafe((this.entryCount - from) * this.entryBytes)
    for (let i = from; i < this.entryCount; i++) this.encode(i, buf, (i - from) * this.entryBytes)
    await handle.write(buf, from * this.entryBytes)
    this.persistedEntries = this.entryCount
    this.fileLengthBytes = Math.max(this.fileLengthBytes, this.entryCount * this.entryBytes)
  }

  /** Persists and cuts the preallocated tail: the segment is no longer written (roll, close). */
  async trimToValidSize(): Promise<void> {
    await this.persist()
    await this.resizeFile(this.entryCount * this.entryBytes)
  }

  /** Grows the file back to its maximum for a segment that becomes active again. */
  async preallocate(): Promise<void> {
    await this.resizeFile(Math.max(this.fileLengthBytes, this.maxEntries * this.entryBytes))
  }

  async sync(): Promise<void> {
    await this.requireHandle().sync()
  }

  async close(): Promise<void> {
    const handle = this.handle
    this.handle = undefined
    if (handle !== undefined) await handle.close()
  }

  async renameTo(path: string): Promise<void> {
    await this.fs.rename(this.filePath, path)
    this.filePath = path
  }

  async deleteFile(): Promise<void> {
    await this.close()
    try {
      await this.fs.unlink(this.filePath)
    } catch (err) {
      if ((err as { code?: string }).code !== 'ENOENT') throw err
    }
  }

  private async resizeFile(lengthBytes: number): Promise<void> {
    if (lengthBytes === this.fileLengthBytes) return
    await this.requireHandle().truncate(lengthBytes)
    this.fileLengthBytes = lengthBytes
  }

  private requireHandle(): FileHandle {
    assert(this.handle !== undefined, () => `index ${this.filePath} is not open`)
    return this.handle
  }

  /** Index of the last entry whose key is <= target (keys ascending), or -1. */
  protected largestLowerBound(target: number, keyAt: (entry: number) => number): number {
    let lo = 0
    let hi = this.entryCount - 1
    let found = -1
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1
      if (keyAt(mid) <= target) {
        found = mid
        lo = mid + 1
      } else {
        hi = mid - 1
      }
    }
    return found
  }

  /** Index of the first entry whose key is >= target (keys ascending), or entries. */
  protected smallestUpperBound(target: number, keyAt: (entry: number) => number): number {
    let lo = 0
    let hi = this.entryCount
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (keyAt(mid) < target) lo = mid + 1
      else hi = mid
    }
    return lo
  }
}

/** Room for `needed` entries, growing geometrically up to the index's maximum. */
export function grownCapacity(current: number, needed: number, maxEntries: number): number {
  if (needed <= current) return current
  return Math.min(Math.max(needed, current * 2, 64), Math.max(maxEntries, needed))
}
