/**
 * Reusable buffers for large log reads (a fetch's records), handed back once a socket has
 * written them.
 *
 * Why: a consumer reading 500 MB allocated 500 MB of fresh Buffers, 10 MB at a time. Each
 * one is new external memory for V8 (a mark-compact about every 64 MB of it, a third of the
 * broker's main-thread time in a profile) and new pages for the kernel to fault in and zero
 * before pread copies into them. Reading into buffers that a previous fetch response already
 * used halves the broker's CPU per consumed byte (docs/notes/performance.md, "RF 1 consume").
 *
 * Safety rests on one rule: a buffer comes back only through `release`, which only a stream
 * that knows the bytes left the process calls (the TCP ByteStream, after the socket's write
 * callback). A buffer that is never released (any other reader, a read whose answer was
 * dropped, a simulated or wrapped stream) is simply garbage collected as before, so a reader
 * that keeps what it read is never overwritten. Only whole buffers from `acquire` are
 * pooled; subarrays of them are recognized by their ArrayBuffer.
 */

/** Reads smaller than this are allocated as before: they cost little and come in many sizes. */
export const POOLED_READ_MIN_BYTES = 256 * 1024
/** Pooled buffers are sized in steps of this, so that reads of nearby sizes share them. */
const SIZE_STEP_BYTES = 256 * 1024
/** Free buffers kept at most (a 4-partition fetch of 10 MB each needs about 44 MB). */
export const POOL_RETAINED_MAX_BYTES = 64 * 1024 * 1024

export class ReadBufferPool {
  private readonly free: Buffer[] = []
  private freeBytes = 0
  /** Whether a pooled-size buffer was asked for since the last `trimIfIdle`. */
  private acquiredSinceTrim = false
  /** Every buffer this pool handed out and not yet taken back, by its memory. */
  private readonly lent = new WeakMap<ArrayBufferLike, Buffer>()

  constructor(private readonly retainedMaxBytes = POOL_RETAINED_MAX_BYTES) {}

  /** Bytes held in free buffers (for tests and metrics). */
  get retainedBytes(): number {
    return this.freeBytes
  }

  /**
   * A buffer of `bytes` bytes, not zeroed (as Buffer.allocUnsafe): a free pooled one when one
   * is large enough and not much larger, else a new one.
   */
  acquire(bytes: number): Buffer {
    if (bytes < POOLED_READ_MIN_BYTES) return Buffer.allocUnsafe(bytes)
    this.acquiredSinceTrim = true
    let best = -1
    for (let i = 0; i < this.free.length; i++) {
      const length = this.free[i].length
      // A buffer more than a size step and a quarter larger would waste memory held for it.
      if (length < bytes || length > bytes + SIZE_STEP_BYTES + (bytes >>> 2)) continue
      if (best === -1 || length < this.free[best].length) best = i
    }
    let whole: Buffer
    if (best === -1) {
      // Half a step of headroom: a fetch reads either exactly its limit (10 MiB) or the limit
      // plus an index interval and a batch header (LogSegment.translateOffset's read-ahead when
      // its probe did not reach the batch). Rounded up plainly, those were two size classes
      // that could not share buffers, and a 4-partition fetch of 10 MiB each churned through
      // fresh 10 MiB buffers (13,000-65,000 page faults per 500 MB consumed, against 250-4,000
      // at 1 MiB a partition).
      whole = Buffer.allocUnsafeSlow(Math.ceil(bytes / SIZE_STEP_BYTES + 0.5) * SIZE_STEP_BYTES)
    } else {
      whole = this.free[best]
      this.free[best] = this.free[this.free.length - 1]
      this.free.pop()
      this.freeBytes -= whole.length
    }
    this.lent.set(whole.buffer, whole)
    return whole.subarray(0, bytes)
  }

  /** Whether any chunk is (part of) a buffer this pool lent. */
  holdsAny(chunks: readonly Buffer[]): boolean {
    for (const chunk of chunks) if (this.lent.has(chunk.buffer)) return true
    return false
  }

  /**
   * Takes back the pooled buffers among `chunks`: the caller guarantees nothing reads them
   * any more. Several chunks of one buffer return it once.
   */
  release(chunks: readonly Buffer[]): void {
    for (const chunk of chunks) {
      const whole = this.lent.get(chunk.buffer)
      if (whole === undefined) continue
      this.lent.delete(chunk.buffer)
      if (this.freeBytes + whole.length > this.retainedMaxBytes) continue // left to the GC
      this.free.push(whole)
      this.freeBytes += whole.length
    }
  }

  /**
   * Gives every free buffer back to the garbage collector when no pooled read happened since
   * the previous call; returns the bytes given back. Why: the pool fills to its bound in a
   * burst of large reads (a follower catching up, a consumer reading from the start) and
   * then held up to 64 MiB for the rest of the process's life, near an idle broker's whole
   * footprint (issue 34). The caller sets the idle time by how often it calls
   * (runtime/memory-reclaimer.ts), so the pool needs no clock.
   */
  trimIfIdle(): number {
    const idle = !this.acquiredSinceTrim
    this.acquiredSinceTrim = false
    if (!idle) return 0
    const trimmedBytes = this.freeBytes
    this.free.length = 0
    this.freeBytes = 0
    return trimmedBytes
  }
}

/** The process's pool: segment reads take from it, TCP connections give back to it. */
export const readBufferPool = new ReadBufferPool()
