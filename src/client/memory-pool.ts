/**
 * buffer.memory as Java's BufferPool accounts it: bytes of records accepted but not yet
 * acknowledged. A send that does not fit waits, first come first served, up to
 * max.block.ms. Waiters sit in a FIFO with one timer for the oldest (all waits have the
 * same bound, so deadlines are in queue order), so a full buffer costs O(1) per send.
 */
import { assert } from '../common/assert.js'
import type { Clock, TimerHandle } from '../common/clock.js'
import { BlockTimeoutError } from './errors.js'

interface Waiter {
  readonly bytes: number
  readonly deadlineMs: number
  resolve(): void
  reject(error: Error): void
}

export class MemoryPool {
  private used = 0
  private waiters: Waiter[] = []
  private head = 0
  private timer: TimerHandle | null = null

  constructor(
    readonly capacityBytes: number,
    private readonly maxBlockMs: number,
    private readonly clock: Clock,
  ) {}

  get usedBytes(): number {
    return this.used
  }

  /** Bytes not reserved by records. */
  get availableBytes(): number {
    return Math.max(this.capacityBytes - this.used, 0)
  }

  get waiting(): number {
    return this.waiters.length - this.head
  }

  /** Takes the bytes now if they fit and nobody waits; else false. */
  tryReserve(bytes: number): boolean {
    if (this.waiting > 0 || this.used + bytes > this.capacityBytes) return false
    this.used += bytes
    return true
  }

  /** Waits for the bytes (a record larger than the pool gets it once the pool is empty). */
  reserve(bytes: number): Promise<void> {
    if (this.tryReserve(bytes)) return Promise.resolve()
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ bytes, deadlineMs: this.clock.monotonicMs() + this.maxBlockMs, resolve, reject })
      this.armTimer()
    })
  }

  release(bytes: number): void {
    this.used -= bytes
    assert(this.used >= 0, () => `memory pool went negative: ${this.used}`)
    while (this.waiting > 0) {
      const next = this.waiters[this.head]
      if (this.used > 0 && this.used + next.bytes > this.capacityBytes) break
      this.shift()
      this.used += next.bytes
      next.resolve()
    }
    if (this.waiting === 0 && this.timer) {
      this.timer.cancel()
      this.timer = null
    }
  }

  private shift(): void {
    this.head++
    // Compact now and then so the array does not grow without bound.
    if (this.head > 1024 && this.head * 2 > this.waiters.length) {
      this.waiters = this.waiters.slice(this.head)
      this.head = 0
    }
  }

  private armTimer(): void {
    if (this.timer || this.waiting === 0) return
    const delay = Math.max(this.waiters[this.head].deadlineMs - this.clock.monotonicMs(), 0)
    this.timer = this.clock.setTimeout(() => {
      this.timer = null
      this.expire()
    }, delay)
  }

  private expire(): void {
    const now = this.clock.monotonicMs()
    while (this.waiting > 0 && this.waiters[this.head].deadlineMs <= now) {
      const waiter = this.waiters[this.head]
      this.shift()
      waiter.reject(
        new BlockTimeoutError(
          `no buffer.memory for ${waiter.bytes} bytes within max.block.ms (${this.maxBlockMs} ms)`,
        ),
      )
    }
    this.armTimer()
  }
}

/**
 * Free batch buffers kept for reuse, as Java's BufferPool keeps batch.size buffers: a
 * buffer of 4 KiB or more from Buffer.allocUnsafe is an ArrayBuffer of its own, costly to
 * allocate and to collect, and a producer at full speed goes through thousands a second.
 * Buffers come back only when no request can still read them (their batch settled). As in
 * Java, free buffers and the bytes of records waiting share buffer.memory: a buffer is kept
 * only while both fit in it (`roomBytes` says how much is not taken by records).
 */
export class BatchBufferPool {
  /** Free buffers by exact size. */
  private readonly free = new Map<number, Buffer[]>()
  private freeBytes = 0

  constructor(private readonly roomBytes: () => number) {}

  /** Smaller buffers come from Node's shared slab: nothing to gain by keeping them. */
  static readonly MIN_POOLED_BYTES = 4096

  get idleBytes(): number {
    return this.freeBytes
  }

  /** Drops every free buffer (the producer closed). */
  clear(): void {
    this.free.clear()
    this.freeBytes = 0
  }

  allocate(bytes: number): Buffer {
    const list = this.free.get(bytes)
    const reused = list?.pop()
    if (reused !== undefined) {
      this.freeBytes -= reused.length
      return reused
    }
    return Buffer.allocUnsafe(bytes)
  }

  release(buffers: readonly Buffer[]): void {
    const room = this.roomBytes()
    for (const buffer of buffers) {
      if (buffer.length < BatchBufferPool.MIN_POOLED_BYTES) continue
      if (this.freeBytes + buffer.length > room) return
      let list = this.free.get(buffer.length)
      if (!list) {
        list = []
        this.free.set(buffer.length, list)
      }
      list.push(buffer)
      this.freeBytes += buffer.length
    }
  }
}
