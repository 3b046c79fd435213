/**
 * Kafka's .index: 8-byte entries (offset relative to the segment's base offset int32, byte
 * position in the .log int32), one per index.interval.bytes of log data. An entry maps the
 * last offset of a batch to the position where that batch starts, so a lookup lands on a
 * batch at or before the target and a short scan finds the target's batch.
 */
import { assert } from '../common/assert.js'
import type { FileSystem } from '../common/file-system.js'
import type { Offset } from '../common/types.js'
import { AbstractIndex, grownCapacity } from './abstract-index.js'

export const OFFSET_INDEX_ENTRY_BYTES = 8

export interface OffsetPosition {
  readonly offset: Offset
  readonly position: number
}

/**
 * Shared by every index holding no entries: an empty typed array is an object and an
 * ArrayBuffer of its own (about 150 bytes), and an index of each kind exists per segment,
 * loaded or not, on every replica. Never written (nothing fits), replaced on growth.
 */
const NO_INT32_ENTRIES = new Int32Array(0)

export class OffsetIndex extends AbstractIndex {
  private relativeOffsets = NO_INT32_ENTRIES
  private positions = NO_INT32_ENTRIES

  constructor(fs: FileSystem, path: string, baseOffset: Offset, maxIndexBytes: number) {
    super(fs, path, baseOffset, maxIndexBytes, OFFSET_INDEX_ENTRY_BYTES)
  }

  get lastOffset(): Offset {
    return this.entryCount === 0 ? this.baseOffset : this.absolute(this.relativeOffsets[this.entryCount - 1])
  }

  entry(n: number): OffsetPosition {
    assert(n >= 0 && n < this.entryCount, () => `offset index entry ${n} of ${this.entryCount}`)
    return { offset: this.absolute(this.relativeOffsets[n]), position: this.positions[n] }
  }

  append(offset: Offset, position: number): void {
    assert(!this.isFull, () => `offset index ${this.path} is full`)
    const relative = offset - this.baseOffset
    assert(
      relative >= 0 && relative <= 0x7fffffff,
      () => `offset ${offset} not relative to ${this.baseOffset}`,
    )
    if (this.entryCount > 0) {
      assert(offset > this.lastOffset, () => `index offset ${offset} after ${this.lastOffset}`)
      assert(
        position > this.positions[this.entryCount - 1],
        () => `index position ${position} not increasing`,
      )
    }
    this.ensureCapacity(this.entryCount + 1)
    this.relativeOffsets[this.entryCount] = relative
    this.positions[this.entryCount] = position
    this.entryCount++
  }

  /** The entry with the largest offset <= target, or (baseOffset, 0). */
  lookup(targetOffset: Offset): OffsetPosition {
    const n = this.largestLowerBound(targetOffset - this.baseOffset, (i) => this.relativeOffsets[i])
    return n < 0 ? { offset: this.baseOffset, position: 0 } : this.entry(n)
  }

  /** Removes entries for offsets >= `offset` (Kafka's OffsetIndex.truncateTo). */
  async truncateTo(offset: Offset, preallocate: boolean): Promise<void> {
    const keep = this.smallestUpperBound(offset - this.baseOffset, (i) => this.relativeOffsets[i])
    await this.truncateToEntries(keep, preallocate)
  }

  protected encode(entry: number, buf: Buffer, at: number): void {
    buf.writeInt32BE(this.relativeOffsets[entry], at)
    buf.writeInt32BE(this.positions[entry], at + 4)
  }

  protected decode(buf: Buffer, at: number, entry: number): void {
    this.relativeOffsets[entry] = buf.readInt32BE(at)
    this.positions[entry] = buf.readInt32BE(at + 4)
  }

  protected releaseEntries(): void {
    this.relativeOffsets = NO_INT32_ENTRIES
    this.positions = NO_INT32_ENTRIES
  }

  protected ensureCapacity(entries: number): void {
    const capacity = grownCapacity(this.relativeOffsets.length, entries, this.maxEntries)
    if (capacity === this.relativeOffsets.length) return
    const offsets = new Int32Array(capacity)
    offsets.set(this.relativeOffsets.subarray(0, this.entryCount))
    const positions = new Int32Array(capacity)
    positions.set(this.positions.subarray(0, this.entryCount))
    this.relativeOffsets = offsets
    this.positions = positions
  }

  protected findProblem(logSizeBytes: number): string | undefined {
    for (let i = 0; i < this.entryCount; i++) {
      const relative = this.relativeOffsets[i]
      const position = this.positions[i]
      if (relative < 0 || position < 0) return `entry ${i} is negative`
      if (position >= logSizeBytes)
        return `entry ${i} points to ${position}, past the log's ${logSizeBytes} bytes`
      if (i > 0 && (relative <= this.relativeOffsets[i - 1] || position <= this.positions[i - 1])) {
        return `entry ${i} does not increase`
      }
    }
    return undefined
  }
}
