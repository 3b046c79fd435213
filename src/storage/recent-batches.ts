/**
 * The last batches written to a log, kept in memory (bounded in bytes) so that followers
 * and consumers reading at the log end (the steady state of replication) are answered
 * without a file read: Kafka relies on the page cache for this, but a read here is a
 * syscall on libuv's thread pool and a promise hop for every fetch of a just-written batch.
 *
 * It holds a suffix of the log's bytes: every write group is added in order once its write
 * completed, and anything that rewrites the log (truncation, the cleaner's swap, a full
 * restart) clears it. A read it cannot answer whole goes to the segments.
 */
import { assert } from '../common/assert.js'
import type { Offset } from '../common/types.js'
import type { AppendedBatch } from './log-segment.js'

/** Per log: enough for the few fetches in flight at the log end; bounded for many partitions. */
export const RECENT_BATCHES_MAX_BYTES_DEFAULT = 256 * 1024

interface Entry {
  readonly baseOffset: Offset
  readonly lastOffset: Offset
  readonly bytes: Buffer
}

export interface RecentRead {
  readonly records: Buffer[]
  readonly sizeInBytes: number
  readonly firstOffset: Offset
  readonly nextOffset: Offset
}

export class RecentBatches {
  private entries: Entry[] = []
  /** Index of the oldest live entry (older ones are dropped lazily, by compaction of the array). */
  private head = 0
  private bytes = 0

  constructor(private readonly maxBytes: number) {
    assert(Number.isInteger(maxBytes) && maxBytes >= 0, () => `bad recent-batches bound ${maxBytes}`)
  }

  get sizeInBytes(): number {
    return this.bytes
  }

  /**
   * Adds a completed write: `buffers` as written, holding `batches` in order. Copied into
   * one buffer, so a request's frame (a slice of a larger socket read) is not kept alive.
   */
  add(buffers: readonly Buffer[], batches: readonly AppendedBatch[]): void {
    if (this.maxBytes === 0 || batches.length === 0) return
    let total = 0
    for (const batch of batches) total += batch.sizeInBytes
    if (total > this.maxBytes) {
      this.clear() // larger than the bound: the next reads go to the disk anyway
      return
    }
    const joined = Buffer.concat(buffers as Buffer[])
    assert(
      joined.length === total,
      () => `write group of ${joined.length} bytes holds ${total} bytes of batches`,
    )
    let position = 0
    for (const batch of batches) {
      this.entries.push({
        baseOffset: batch.baseOffset,
        lastOffset: batch.lastOffset,
        bytes: joined.subarray(position, position + batch.sizeInBytes),
      })
      position += batch.sizeInBytes
    }
    this.bytes += total
    while (this.bytes > this.maxBytes) this.bytes -= this.entries[this.head++].bytes.length
    if (this.head > 64 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head)
      this.head = 0
    }
  }

  clear(): void {
    this.entries = []
    this.head = 0
    this.bytes = 0
  }

  /**
   * The read LocalLog.read would return, when every batch it needs is held: whole batches
   * from the one holding `startOffset`, none whose last offset is >= `maxOffset`, at most
   * `maxBytes` unless `minOneMessage` and nothing was taken yet. Undefined otherwise.
   */
  read(
    startOffset: Offset,
    maxOffset: Offset,
    maxBytes: number,
    minOneMessage: boolean,
  ): RecentRead | undefined {
    const entries = this.entries
    // As LocalLog.read: no byte allowed is nothing read, minOneMessage or not.
    if (maxBytes <= 0)
      return { records: [], sizeInBytes: 0, firstOffset: startOffset, nextOffset: startOffset }
    if (this.head >= entries.length || entries[this.head].baseOffset > startOffset) return undefined
    // The first entry whose last offset is >= startOffset.
    let low = this.head
    let high = entries.length
    while (low < high) {
      const mid = (low + high) >>> 1
      if (entries[mid].lastOffset < startOffset) low = mid + 1
      else high = mid
    }
    if (low === entries.length) return undefined // past the last batch held: the segments decide
    const records: Buffer[] = []
    let taken = 0
    let nextOffset = startOffset
    const firstOffset = entries[low].baseOffset
    for (let i = low; i < entries.length; i++) {
      const entry = entries[i]
      if (entry.lastOffset >= maxOffset) break
      if (taken + entry.bytes.length > maxBytes && !(minOneMessage && taken === 0)) break
      records.push(entry.bytes)
      taken += entry.bytes.length
      nextOffset = (entry.lastOffset + 1) as Offset
    }
    if (taken === 0) return { records: [], sizeInBytes: 0, firstOffset: startOffset, nextOffset: startOffset }
    return { records: joinAdjacent(records), sizeInBytes: taken, firstOffset, nextOffset }
  }
}

/** Slices of one buffer that follow each other become one slice (one iovec on the socket). */
function joinAdjacent(slices: Buffer[]): Buffer[] {
  const out: Buffer[] = []
  for (const slice of slices) {
    const last = out.at(-1)
    if (
      last !== undefined &&
      last.buffer === slice.buffer &&
      last.byteOffset + last.length === slice.byteOffset
    ) {
      out[out.length - 1] = Buffer.from(last.buffer, last.byteOffset, last.length + slice.length)
    } else out.push(slice)
  }
  return out
}
