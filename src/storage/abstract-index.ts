/**
 * A sparse index file in Kafka's format: fixed-size big-endian entries, no header, the file
 * preallocated to segment.index.bytes while its segment is active and trimmed to its
 * entries when the segment rolls or the log closes (Kafka's AbstractIndex).
 *
 * Kafka maps the file into memory; Node cannot, so entries live in typed arrays and are
 * written to the file in one pwrite when they must be on disk (roll, close). The active
 * segment's indexes need not be durable before that: an unclean shutdown rebuilds them,
 * because recovery always rescans the segment holding the recovery point.
 *
 * Loading reads the file in chunks of LOAD_CHUNK_BYTES. A file of the preallocated size
 * (an active segment's, found so after a kill -9) holds its entries and then zeros: its
 * entries end at the first empty (all-zero) slot, and the zeros after it, up to
 * segment.index.bytes (10 MiB by default) per file, are never read into memory; nonzero
 * bytes in the chunk after that slot make the index corrupt. No real entry is all zeros
 * save a first time entry of timestamp 0 at the base offset, which such a file then reads
 * as corrupt when entries follow, or loses when it is the only one (the segment's max
 * timestamp then comes from the file's mtime, as for a segment without timestamps). A
 * trimmed file's length says how many entries it holds, as in Kafka.
 */
import { assert } from '../common/assert.js'
import type { FileHandle, FileSystem } from '../common/file-system.js'
import type { Offset } from '../common/types.js'

/** Bytes of an index file read at a time while loading it. */
export const LOAD_CHUNK_BYTES = 64 * 1024
const ZEROS = Buffer.alloc(LOAD_CHUNK_BYTES)

export abstract class AbstractIndex {
  protected entryCount = 0
  private persistedEntries = 0
  private fileLengthBytes = 0
  /**
   * The file holds only zeros past its persisted entries (as created, trimmed or loaded
   * sound): a rebuild of an index with no entry on disk then need not rewrite the file.
   */
  private zeroPastPersisted = false
  private handle: FileHandle | undefined
  /**
   * The file is not made yet (createLazily): made by the first write that must reach the
   * disk (a persist, trim or truncation), while a rename or delete before that has nothing
   * to move. Pending while the file is being opened.
   */
  private deferredFile: boolean | Promise<void> = false

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
  /** Drops the entry arrays, whatever their capacity (entryCount is 0). */
  protected abstract releaseEntries(): void
  /** Why the loaded entries cannot be trusted, or undefined if they look sound. */
  protected abstract findProblem(logSizeBytes: number): string | undefined

  /** Creates an empty file (replacing any), preallocated as for an active segment. */
  async create(preallocate: boolean): Promise<void> {
    this.deferredFile = false
    this.handle = await this.fs.open(this.filePath, 'w+')
    this.fileLengthBytes = 0
    this.entryCount = 0
    this.persistedEntries = 0
    this.zeroPastPersisted = true
    if (preallocate) await this.resizeFile(this.maxEntries * this.entryBytes)
  }

  /**
   * An empty index whose file is made only when something must reach the disk (Kafka's
   * LazyIndex): for the first segment of a log whose directory was just made, so no file
   * of that name can exist. Nothing is lost meanwhile: an active segment's entries are
   * written at roll or close, and after a crash recovery rebuilds its indexes (a missing
   * index reads as one to rebuild, as before). Unlike create(), no preallocation: the file
   * is made at its final length when the segment rolls or closes.
   */
  createLazily(): void {
    assert(this.handle === undefined && this.entryCount === 0, () => `index ${this.filePath} already open`)
    this.fileLengthBytes = 0
    this.persistedEntries = 0
    this.zeroPastPersisted = true
    this.deferredFile = true
  }

  /** Whether the file is still to be made (createLazily, nothing written yet). */
  get isFileDeferred(): boolean {
    return this.deferredFile !== false
  }

  /**
   * Opens and loads an existing file. Returns a reason when it is missing or fails the
   * sanity checks (length not a multiple of the entry size, entries out of order, pointing
   * past the log, entries after an empty slot); the caller then rebuilds it from the log.
   * Reads the entries and at most one chunk past them (see the file's head).
   */
  async load(logSizeBytes: number): Promise<string | undefined> {
    assert(this.entryCount === 0, () => `index ${this.filePath} loaded twice`)
    let sizeBytes: number
    try {
      this.handle = await this.fs.open(this.filePath, 'r+')
      sizeBytes = (await this.handle.stat()).size
    } catch (err) {
      if ((err as { code?: string }).code !== 'ENOENT') throw err
      // An empty segment closed before its first write leaves no index files (LogSegment.close):
      // nothing to index, the file is made at its first write as for a new log.
      if (logSizeBytes > 0) return 'missing'
      this.handle = undefined
      this.createLazily()
      return undefined
    }
    this.fileLengthBytes = sizeBytes
    if (sizeBytes % this.entryBytes !== 0)
      return `length ${sizeBytes} is not a multiple of ${this.entryBytes}`
    const slots = sizeBytes / this.entryBytes
    if (slots > this.maxEntries) return `${slots} entries exceed the maximum ${this.maxEntries}`
    const problem = await this.readEntries(this.handle, slots)
    this.persistedEntries = this.entryCount
    this.zeroPastPersisted = problem === undefined
    return problem ?? this.findProblem(logSizeBytes)
  }

  /**
   * Decodes the file's entries: all `slots` of a file trimmed to its entries (its length
   * says how many, as in Kafka), and of a preallocated one those before its first empty
   * slot; a reason when entries follow that slot.
   */
  private async readEntries(handle: FileHandle, slots: number): Promise<string | undefined> {
    const preallocated = slots === this.maxEntries
    if (!preallocated) this.ensureCapacity(slots)
    const chunkSlots = Math.floor(LOAD_CHUNK_BYTES / this.entryBytes)
    assert(chunkSlots > 0, () => `index entries of ${this.entryBytes} bytes exceed a load chunk`)
    const chunk = Buffer.allocUnsafe(Math.min(slots, chunkSlots) * this.entryBytes)
    for (let first = 0; first < slots; first += chunkSlots) {
      const count = Math.min(chunkSlots, slots - first)
      const bytes = count * this.entryBytes
      const read = await readFully(handle, chunk, bytes, first * this.entryBytes)
      if (read < bytes)
        return `file ended at byte ${first * this.entryBytes + read} of ${slots * this.entryBytes}`
      let used = count
      if (preallocated) {
        used = 0
        while (used < count && !isZero(chunk, used * this.entryBytes, (used + 1) * this.entryBytes)) used++
      }
      this.ensureCapacity(this.entryCount + used)
      for (let i = 0; i < used; i++) this.decode(chunk, i * this.entryBytes, this.entryCount + i)
      this.entryCount += used
      if (used === count) continue
      if (!isZero(chunk, (used + 1) * this.entryBytes, bytes))
        return `entry ${first + used} is empty but entries follow it`
      return undefined
    }
    return undefined
  }

  /** Forgets all entries and empties the file (before a rebuild). */
  async reset(preallocate: boolean): Promise<void> {
    if (this.deferredFile === true) {
      this.entryCount = 0
      this.releaseEntries()
      return
    }
    if (this.handle === undefined) {
      await this.create(preallocate)
      return
    }
    // An active segment's index found after kill -9 holds no entry, only zeros: left as it is.
    const fileEmpty = this.persistedEntries === 0 && this.zeroPastPersisted
    this.entryCount = 0
    this.persistedEntries = 0
    // The arrays of a large index would otherwise stay allocated through the rebuild and after it.
    this.releaseEntries()
    if (!fileEmpty) await this.resizeFile(0)
    this.zeroPastPersisted = true
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
    this.zeroPastPersisted = true
    if (preallocate && this.deferredFile !== true) await this.resizeFile(this.maxEntries * this.entryBytes)
  }

  /** Writes the entries not yet in the file, in one pwrite. */
  async persist(): Promise<void> {
    if (this.persistedEntries === this.entryCount && this.deferredFile === false) {
      this.requireHandle()
      return
    }
    const handle = await this.fileHandle()
    if (this.persistedEntries === this.entryCount) return
    const from = this.persistedEntries
    const buf = Buffer.allocUnsafe((this.entryCount - from) * this.entryBytes)
    for (let i = from; i < this.entryCount; i++) this.encode(i, buf, (i - from) * this.entryBytes)
    await handle.write(buf, from * this.entryBytes)
    this.persistedEntries = this.entryCount
    this.fileLengthBytes = Math.max(this.fileLengthBytes, this.entryCount * this.entryBytes)
  }

  /** Whether the file is longer than its entries (preallocated, or left so by a crash). */
  get hasUnusedFileSpace(): boolean {
    return this.fileLengthBytes > this.entryCount * this.entryBytes
  }

  /** Asserts the sanity checks load() makes: for entries this process built itself (a rebuild). */
  checkInvariants(logSizeBytes: number): void {
    const problem = this.findProblem(logSizeBytes)
    assert(problem === undefined, () => `index ${this.filePath}: ${problem}`)
  }

  /**
   * Persists and cuts the preallocated tail: the segment is no longer written (roll, close).
   * A deferred file is made now, at its final length: a clean restart expects it.
   */
  async trimToValidSize(): Promise<void> {
    await this.fileHandle()
    await this.persist()
    await this.resizeFile(this.entryCount * this.entryBytes)
  }

  /** Grows the file back to its maximum for a segment that becomes active again. */
  async preallocate(): Promise<void> {
    if (this.deferredFile === true) return
    await this.resizeFile(Math.max(this.fileLengthBytes, this.maxEntries * this.entryBytes))
  }

  async sync(): Promise<void> {
    // A file never made holds nothing to make durable.
    if (this.deferredFile === true) return
    await (await this.fileHandle()).sync()
  }

  async close(): Promise<void> {
    if (this.deferredFile !== false) await this.deferredFile
    const handle = this.handle
    this.handle = undefined
    if (handle !== undefined) await handle.close()
  }

  async renameTo(path: string): Promise<void> {
    if (this.deferredFile === true) {
      this.filePath = path
      return
    }
    await this.fs.rename(this.filePath, path)
    this.filePath = path
  }

  async deleteFile(): Promise<void> {
    await this.close()
    if (this.deferredFile === true) return
    try {
      await this.fs.unlink(this.filePath)
    } catch (err) {
      if ((err as { code?: string }).code !== 'ENOENT') throw err
    }
  }

  private async resizeFile(lengthBytes: number): Promise<void> {
    if (lengthBytes === this.fileLengthBytes) return
    await (await this.fileHandle()).truncate(lengthBytes)
    this.fileLengthBytes = lengthBytes
  }

  /** The open file, made first if it was deferred (createLazily). */
  private async fileHandle(): Promise<FileHandle> {
    if (this.deferredFile === true) {
      this.deferredFile = this.fs.open(this.filePath, 'w+').then((handle) => {
        this.handle = handle
        this.deferredFile = false
      })
    }
    if (this.deferredFile !== false) await this.deferredFile
    return this.requireHandle()
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

/** Reads up to `length` bytes at `position` into `buffer`; fewer only at the end of the file. */
async function readFully(
  handle: FileHandle,
  buffer: Buffer,
  length: number,
  position: number,
): Promise<number> {
  let filled = 0
  while (filled < length) {
    const n = await handle.read(buffer, filled, length - filled, position + filled)
    if (n === 0) break
    filled += n
  }
  return filled
}

/** Whether buf[from, to) holds only zero bytes (to - from <= LOAD_CHUNK_BYTES). */
function isZero(buf: Buffer, from: number, to: number): boolean {
  return buf.compare(ZEROS, 0, to - from, from, to) === 0
}
