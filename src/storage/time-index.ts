/**
 * Kafka's .timeindex: 12-byte entries (timestamp int64, offset relative to the segment's
 * base offset int32). An entry is added with each offset-index entry when the segment's
 * max timestamp grew, and once more when the segment stops being active, so the last entry
 * always holds the segment's largest timestamp.
 */
import { assert } from '../common/assert.js'
import type { FileSystem } from '../common/file-system.js'
import type { Offset } from '../common/types.js'
import { AbstractIndex, grownCapacity } from './abstract-index.js'
import { readInt64, writeInt64 } from './record-batch-check.js'

export const TIME_INDEX_ENTRY_BYTES = 12
/** Kafka's RecordBatch.NO_TIMESTAMP. */
export const NO_TIMESTAMP = -1

export interface TimestampOffset {
  readonly timestamp: number
  readonly offset: Offset
}

/**
 * Shared by every index holding no entries: an empty typed array is an object and an
 * ArrayBuffer of its own (about 150 bytes), and an index of each kind exists per segment,
 * loaded or not, on every replica. Never written (nothing fits), replaced on growth.
 */
const NO_INT32_ENTRIES = new Int32Array(0)
const NO_FLOAT64_ENTRIES = new Float64Array(0)

export class TimeIndex extends AbstractIndex {
  private timestamps = NO_FLOAT64_ENTRIES
  private relativeOffsets = NO_INT32_ENTRIES

  constructor(fs: FileSystem, path: string, baseOffset: Offset, maxIndexBytes: number) {
    super(fs, path, baseOffset, maxIndexBytes, TIME_INDEX_ENTRY_BYTES)
  }

  /** One slot is kept for the entry added when the segment becomes inactive (as Kafka). */
  override get isFull(): boolean {
    return this.entryCount >= this.maxEntries - 1
  }

  get lastEntry(): TimestampOffset {
    return this.entryCount === 0
      ? { timestamp: NO_TIMESTAMP, offset: this.baseOffset }
      : this.entry(this.entryCount - 1)
  }

  entry(n: number): TimestampOffset {
    assert(n >= 0 && n < this.entryCount, () => `time index entry ${n} of ${this.entryCount}`)
    return { timestamp: this.timestamps[n], offset: this.absolute(this.relativeOffsets[n]) }
  }

  /** Appends when `timestamp` is larger than the last entry's (Kafka's TimeIndex.maybeAppend). */
  maybeAppend(timestamp: number, offset: Offset, skipFullCheck = false): void {
    if (!skipFullCheck) assert(!this.isFull, () => `time index ${this.path} is full`)
    const last = this.lastEntry
    if (timestamp <= last.timestamp) return
    assert(
      offset >= last.offset || this.entryCount === 0,
      () => `time index offset ${offset} before ${last.offset}`,
    )
    const relative = offset - this.baseOffset
    assert(
      relative >= 0 && relative <= 0x7fffffff,
      () => `offset ${offset} not relative to ${this.baseOffset}`,
    )
    if (this.entryCount >= this.maxEntries) return
    this.ensureCapacity(this.entryCount + 1)
    this.timestamps[this.entryCount] = timestamp
    this.relativeOffsets[this.entryCount] = relative
    this.entryCount++
  }

  /** The entry with the largest timestamp <= target, or (NO_TIMESTAMP, baseOffset). */
  lookup(targetTimestamp: number): TimestampOffset {
    const n = this.largestLowerBound(targetTimestamp, (i) => this.timestamps[i])
    return n < 0 ? { timestamp: NO_TIMESTAMP, offset: this.baseOffset } : this.entry(n)
  }

  /** Removes entries for offsets >= `offset`. */
  async truncateTo(offset: Offset, preallocate: boolean): Promise<void> {
    const keep = this.smallestUpperBound(offset - this.baseOffset, (i) => this.relativeOffsets[i])
    await this.truncateToEntries(keep, preallocate)
  }

  protected encode(entry: number, buf: Buffer, at: number): void {
    writeInt64(buf, at, this.timestamps[entry])
    buf.writeInt32BE(this.relativeOffsets[entry], at + 8)
  }

  protected decode(buf: Buffer, at: number, entry: number): void {
    this.timestamps[entry] = readInt64(buf, at)
    this.relativeOffsets[entry] = buf.readInt32BE(at + 8)
  }

  protected releaseEntries(): void {
    this.timestamps = NO_FLOAT64_ENTRIES
    this.relativeOffsets = NO_INT32_ENTRIES
  }

  protected ensureCapacity(entries: number): void {
    const capacity = grownCapacity(this.timestamps.length, entries, this.maxEntries)
    if (capacity === this.timestamps.length) return
    const timestamps = new Float64Array(capacity)
    timestamps.set(this.timestamps.subarray(0, this.entryCount))
    const offsets = new Int32Array(capacity)
    offsets.set(this.relativeOffsets.subarray(0, this.entryCount))
    this.timestamps = timestamps
    this.relativeOffsets = offsets
  }

  protected findProblem(): string | undefined {
    for (let i = 0; i < this.entryCount; i++) {
      if (this.relativeOffsets[i] < 0) return `entry ${i} has a negative offset`
      if (i > 0 && this.timestamps[i] <= this.timestamps[i - 1])
        return `entry ${i} timestamp does not increase`
      if (i > 0 && this.relativeOffsets[i] < this.relativeOffsets[i - 1]) return `entry ${i} offset decreases`
    }
    return undefined
  }
}
