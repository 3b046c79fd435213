/**
 * One partition of a coordinator's internal topic in memory, as the coordinator runtime
 * sees a Partition: batches read back by offset for loading, and acks=all appends written
 * at once but answered only when the test commits them (the high watermark passes them) or
 * fails them. Leadership and the leader epoch are the test's to change; `readGate` holds
 * loading back while set.
 */
import { type Offset, toOffset } from '../../src/common/types.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'

/** Where a v2 batch header keeps its record count. */
const RECORDS_COUNT_OFFSET = 57

export interface ToyAppendResult {
  errorCode: number
  baseOffset: Offset
  logAppendTimeMs: number
  logStartOffset: Offset
}

export class ToyPartition {
  readonly batches: Buffer[] = []
  logEndOffset = 0
  readonly logStartOffset = 0
  isLeader = true
  leaderEpoch = 1
  readGate: Promise<void> | null = null
  readonly inFlight: { resolve: () => void; fail: (error: Error) => void }[] = []
  readonly partition = 0

  get log() {
    return this
  }

  /** Writes a batch at the log end (its base offset rewritten) and returns that offset. */
  write(records: Buffer): number {
    const batch = Buffer.from(records)
    const baseOffset = this.logEndOffset
    batch.writeBigInt64BE(BigInt(baseOffset), 0)
    this.batches.push(batch)
    this.logEndOffset += batch.readInt32BE(RECORDS_COUNT_OFFSET)
    return baseOffset
  }

  async read(offset: number, options: { maxOffset: number }) {
    if (this.readGate) await this.readGate
    const records = this.batches.filter((b) => {
      const base = Number(b.readBigInt64BE(0))
      return base >= offset && base < options.maxOffset
    })
    const nextOffset = Math.min(this.logEndOffset, options.maxOffset)
    return { records, sizeInBytes: records.reduce((n, b) => n + b.length, 0), nextOffset }
  }

  /** An acks=all append: written at once, answered when the test commits it (the HW passes it). */
  append(records: Buffer): Promise<ToyAppendResult> {
    return new Promise<ToyAppendResult>((resolve, reject) => {
      const baseOffset = toOffset(this.write(records))
      this.inFlight.push({
        resolve: () =>
          resolve({
            errorCode: ErrorCode.NONE,
            baseOffset,
            logAppendTimeMs: -1,
            logStartOffset: toOffset(0),
          }),
        fail: reject,
      })
    })
  }

  /** Appends written and not yet answered. */
  get pending(): number {
    return this.inFlight.length
  }

  commitAll(): void {
    for (const w of this.inFlight.splice(0)) w.resolve()
  }
}
