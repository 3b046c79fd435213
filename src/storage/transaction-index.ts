/**
 * A segment's aborted-transaction index, `<baseOffset>.txnindex` (Kafka's TransactionIndex):
 * one entry per ABORT marker written in the segment, in marker order, 34 bytes each:
 *
 *   version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 |
 *   lastStableOffset int64
 *
 * firstOffset is the transaction's first offset (maybe in an earlier segment), lastOffset
 * the marker's, lastStableOffset the partition's LSO once the transaction ended: a fetch
 * collecting the aborted transactions of a range stops at the first entry whose LSO is
 * past the range, since every transaction that started in the range ended before it.
 *
 * The file is created with its first entry (most segments have none) and held in memory
 * too, so a read_committed fetch never reads it from disk.
 */
import { TidelogError } from '../common/errors.js'
import { type FileHandle, type FileSystem, isNotFound, readWholeFile } from '../common/file-system.js'
import { isOffset, isProducerId, type Offset, type ProducerId } from '../common/types.js'

export const TXN_INDEX_FILE_SUFFIX = '.txnindex'
const ENTRY_VERSION = 0
export const TXN_INDEX_ENTRY_BYTES = 2 + 8 + 8 + 8 + 8

export interface AbortedTxn {
  readonly producerId: ProducerId
  readonly firstOffset: Offset
  readonly lastOffset: Offset
  readonly lastStableOffset: Offset
}

export interface AbortedTxnSearch {
  readonly abortedTransactions: AbortedTxn[]
  /** An entry's LSO passed the range's end: later segments need not be searched. */
  readonly isComplete: boolean
}

export class TransactionIndex {
  private entries: AbortedTxn[] = []
  private handle: Promise<FileHandle> | undefined
  private closed = false

  constructor(
    private readonly fs: FileSystem,
    private pathValue: string,
  ) {}

  get path(): string {
    return this.pathValue
  }

  get allEntries(): readonly AbortedTxn[] {
    return this.entries
  }

  /** The last entry's marker offset, or -1 when empty. */
  get lastOffset(): number {
    return this.entries.at(-1)?.lastOffset ?? -1
  }

  /** Reads the file if there is one. */
  async load(): Promise<void> {
    let buf: Buffer
    try {
      buf = await readWholeFile(this.fs, this.pathValue)
    } catch (err) {
      if (isNotFound(err)) return
      throw err
    }
    // A torn or garbled tail (a crash mid-write) is cut at the last whole, well-formed entry.
    const entries: AbortedTxn[] = []
    let at = 0
    for (; at + TXN_INDEX_ENTRY_BYTES <= buf.length; at += TXN_INDEX_ENTRY_BYTES) {
      if (buf.readInt16BE(at) !== ENTRY_VERSION) break
      const producerId = buf.readBigInt64BE(at + 2)
      const firstOffset = Number(buf.readBigInt64BE(at + 10))
      const lastOffset = Number(buf.readBigInt64BE(at + 18))
      const lastStableOffset = Number(buf.readBigInt64BE(at + 26))
      // An entry whose fields are out of range is garbled as well: the tail is cut there.
      if (
        !isProducerId(producerId) ||
        !isOffset(firstOffset) ||
        !isOffset(lastOffset) ||
        !isOffset(lastStableOffset)
      )
        break
      entries.push({ producerId, firstOffset, lastOffset, lastStableOffset })
    }
    this.entries = entries
    if (at !== buf.length) await this.rewrite()
  }

  /** Adds an entry; markers only move forward, so its offset must pass the last one. */
  async append(entry: AbortedTxn): Promise<void> {
    if (entry.lastOffset <= this.lastOffset) {
      throw new TidelogError(
        'INVALID_OFFSET',
        `aborted transaction at ${entry.lastOffset} is not after ${this.lastOffset} in ${this.pathValue}`,
      )
    }
    // In memory before the first await: a read_committed fetch that can see the marker must
    // also see the entry, or the consumer keeps the aborted records (issue 35, netfault jepsen).
    const position = this.entries.length * TXN_INDEX_ENTRY_BYTES
    this.entries.push(entry)
    const handle = await this.openHandle()
    await handle.write(encodeEntry(entry), position)
  }

  /**
   * Appends the entries of markers about to be written, all in memory before this returns
   * (the writes go on): called before the markers are readable. When one entry's write
   * awaited the disk first, followers fetched the markers, the LSO passed them and a
   * read_committed fetch got an aborted transaction's records without its entry (found by
   * the netfault jepsen workload). The promise is marked handled: a caller whose log
   * append failed need not await it.
   */
  appendAll(entries: readonly AbortedTxn[]): Promise<void> {
    const written = Promise.all(entries.map((entry) => this.append(entry))).then(() => undefined)
    written.catch(() => {})
    return written
  }

  /**
   * Restores an entry a crash lost (recovery only): in marker order, even before the last
   * one, so the file is rewritten when it goes in the middle.
   */
  async restore(entry: AbortedTxn): Promise<void> {
    if (this.has(entry.lastOffset)) return
    if (entry.lastOffset > this.lastOffset) {
      await this.append(entry)
      return
    }
    this.entries = [...this.entries, entry].sort((a, b) => a.lastOffset - b.lastOffset)
    await this.rewrite()
  }

  /** True when an entry for the marker at `lastOffset` is present. */
  has(lastOffset: Offset): boolean {
    return this.entries.some((e) => e.lastOffset === lastOffset)
  }

  /** Drops the entries whose marker is at or after `offset` (the log was cut there). */
  async truncateTo(offset: Offset): Promise<void> {
    const kept = this.entries.filter((e) => e.lastOffset < offset)
    if (kept.length === this.entries.length) return
    this.entries = kept
    await this.rewrite()
  }

  /** Kafka's collectAbortedTxns: the entries overlapping [fetchOffset, upperBoundOffset). */
  collect(fetchOffset: Offset, upperBoundOffset: Offset): AbortedTxnSearch {
    const abortedTransactions: AbortedTxn[] = []
    for (const entry of this.entries) {
      if (entry.lastOffset >= fetchOffset && entry.firstOffset < upperBoundOffset)
        abortedTransactions.push(entry)
      if (entry.lastStableOffset >= upperBoundOffset) return { abortedTransactions, isComplete: true }
    }
    return { abortedTransactions, isComplete: false }
  }

  async sync(): Promise<void> {
    await (await this.handle)?.sync()
  }

  async renameTo(path: string): Promise<void> {
    const from = this.pathValue
    this.pathValue = path
    try {
      await this.fs.rename(from, path)
    } catch (err) {
      if (!isNotFound(err)) throw err
    }
  }

  async close(): Promise<void> {
    this.closed = true
    const handle = this.handle
    this.handle = undefined
    await (await handle)?.close()
  }

  async deleteFile(): Promise<void> {
    await this.close()
    try {
      await this.fs.unlink(this.pathValue)
    } catch (err) {
      if (!isNotFound(err)) throw err
    }
  }

  /**
   * One open for every caller: appendAll's writes start together, and two opens of a new
   * file raced, the second `w+` truncating the entry the first had written (seen in CI: an
   * index reread with a zeroed first entry).
   */
  private openHandle(): Promise<FileHandle> {
    if (this.closed) return Promise.reject(new TidelogError('LOG_CLOSED', `${this.pathValue} is closed`))
    if (this.handle === undefined) {
      const opening = this.openFile()
      this.handle = opening
      // A failed open is not kept: the next write tries again.
      opening.catch(() => {
        if (this.handle === opening) this.handle = undefined
      })
    }
    return this.handle
  }

  private async openFile(): Promise<FileHandle> {
    try {
      return await this.fs.open(this.pathValue, 'r+')
    } catch (err) {
      if (!isNotFound(err)) throw err
      return await this.fs.open(this.pathValue, 'w+')
    }
  }

  private async rewrite(): Promise<void> {
    const handle = await this.openHandle()
    const buf = Buffer.concat(this.entries.map(encodeEntry))
    await handle.truncate(0)
    if (buf.length > 0) await handle.write(buf, 0)
    await handle.sync()
  }
}

function encodeEntry(entry: AbortedTxn): Buffer {
  const buf = Buffer.alloc(TXN_INDEX_ENTRY_BYTES)
  buf.writeInt16BE(ENTRY_VERSION, 0)
  buf.writeBigInt64BE(entry.producerId, 2)
  buf.writeBigInt64BE(BigInt(entry.firstOffset), 10)
  buf.writeBigInt64BE(BigInt(entry.lastOffset), 18)
  buf.writeBigInt64BE(BigInt(entry.lastStableOffset), 26)
  return buf
}
