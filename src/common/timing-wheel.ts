/**
 * One hierarchical timing wheel for the many short-lived timers a broker arms per waiting
 * request or per partition (Kafka's TimingWheel and SystemTimer): a wheel of `wheelSize`
 * buckets of `tickMs` each, an overflow wheel of buckets `wheelSize` times wider above it
 * (made when first needed), and one timer of the underlying Clock armed for the earliest
 * bucket. Adding and cancelling are O(1) (a doubly linked list per bucket); a bucket of an
 * upper wheel, when due, hands its entries down to the finer wheels.
 *
 * Guarantees, measured on the underlying clock's monotonic time:
 * - a callback never runs before its delay has passed: deadlines are rounded up to a tick
 *   (Kafka rounds down, so its timers may fire up to a tick early);
 * - it runs at most one tick after its deadline, plus however late the underlying timer is;
 * - cancel is exact: a cancelled callback never runs, even in the batch being fired;
 * - callbacks due together run in deadline order, equal deadlines in the order they were
 *   set, so a simulated clock drives the wheel deterministically;
 * - a callback never runs inside `setTimeout` (a delay of 0 runs on the next underlying
 *   timer), as callers may cancel the handle from the callback.
 */
import { assert } from './assert.js'
import type { Clock, TimerHandle } from './clock.js'

export interface TimingWheelOptions {
  /** Width of a bucket of the finest wheel: how late a timer may fire. Kafka's is 1 ms. */
  readonly tickMs?: number
  /** Buckets per wheel (Kafka's: 20). */
  readonly wheelSize?: number
}

const TICK_MS_DEFAULT = 1
const WHEEL_SIZE_DEFAULT = 20
/** Wheels above the finest: 20^12 ms is beyond any finite delay a broker sets. */
const LEVELS_MAX = 12

class Entry implements TimerHandle {
  bucket: Bucket | null = null
  cancelled = false
  prev: Entry | null = null
  next: Entry | null = null

  constructor(
    readonly deadlineMs: number,
    readonly callback: () => void,
    readonly sequence: number,
  ) {}

  cancel(): void {
    this.cancelled = true
    this.bucket?.remove(this)
  }
}

class Bucket {
  /** Start of the time span this bucket holds now; -1 while it is in no queue. */
  expirationMs = -1
  private head: Entry | null = null
  private tail: Entry | null = null
  size = 0

  add(entry: Entry): void {
    assert(entry.bucket === null, 'a timer entry is in one bucket at most')
    entry.bucket = this
    entry.prev = this.tail
    if (this.tail === null) this.head = entry
    else this.tail.next = entry
    this.tail = entry
    this.size++
  }

  remove(entry: Entry): void {
    assert(entry.bucket === this, 'a timer entry is removed from its own bucket')
    if (entry.prev === null) this.head = entry.next
    else entry.prev.next = entry.next
    if (entry.next === null) this.tail = entry.prev
    else entry.next.prev = entry.prev
    entry.bucket = entry.prev = entry.next = null
    this.size--
  }

  /** Empties the bucket, handing each entry (in insertion order) to `reinsert`. */
  flush(reinsert: (entry: Entry) => void): void {
    this.expirationMs = -1
    for (let entry = this.head; entry !== null; entry = this.head) {
      this.remove(entry)
      reinsert(entry)
    }
    assert(this.size === 0 && this.tail === null, 'a flushed bucket is empty')
  }
}

/** A bucket in the queue at the expiration it had when queued (ties in queueing order). */
interface Queued {
  readonly bucket: Bucket
  readonly expirationMs: number
  readonly sequence: number
}

/** One level: buckets of `tickMs`, spanning `tickMs * wheelSize` from `currentTimeMs`. */
class Wheel {
  private readonly intervalMs: number
  private readonly buckets: Bucket[]
  private overflow: Wheel | null = null
  /** A multiple of tickMs: the start of the tick this wheel is in. */
  private currentTimeMs: number

  constructor(
    private readonly tickMs: number,
    private readonly wheelSize: number,
    startMs: number,
    private readonly level: number,
    private readonly onBucketQueued: (bucket: Bucket) => void,
  ) {
    this.intervalMs = tickMs * wheelSize
    this.currentTimeMs = startMs - (startMs % tickMs)
    this.buckets = Array.from({ length: wheelSize }, () => new Bucket())
  }

  /** Puts `entry` in its bucket; false when it is already due (the caller runs it). */
  add(entry: Entry): boolean {
    const deadlineMs = entry.deadlineMs
    if (deadlineMs < this.currentTimeMs + this.tickMs) return false
    if (deadlineMs < this.currentTimeMs + this.intervalMs) {
      const virtualId = Math.floor(deadlineMs / this.tickMs)
      const bucket = this.buckets[virtualId % this.wheelSize]
      const expirationMs = virtualId * this.tickMs
      // A bucket is reused only once flushed: time never passes a queued bucket unflushed.
      assert(
        bucket.expirationMs === -1 || bucket.expirationMs === expirationMs,
        () => `bucket of ${bucket.expirationMs} ms reused for ${expirationMs} ms`,
      )
      bucket.add(entry)
      if (bucket.expirationMs !== expirationMs) {
        bucket.expirationMs = expirationMs
        this.onBucketQueued(bucket)
      }
      return true
    }
    assert(this.level < LEVELS_MAX, () => `timer deadline ${deadlineMs} ms is beyond the wheels`)
    this.overflow ??= new Wheel(
      this.intervalMs,
      this.wheelSize,
      this.currentTimeMs,
      this.level + 1,
      this.onBucketQueued,
    )
    return this.overflow.add(entry)
  }

  advanceTo(timeMs: number): void {
    if (timeMs < this.currentTimeMs + this.tickMs) return
    this.currentTimeMs = timeMs - (timeMs % this.tickMs)
    this.overflow?.advanceTo(this.currentTimeMs)
  }
}

/**
 * A Clock whose timers share one timing wheel and one timer of `clock`: time is read from
 * `clock`, and `setTimeout` adds to the wheel. Pass it where many timers are set and most
 * are cancelled (delayed fetches and produces, acquisition locks).
 */
export class TimingWheelClock implements Clock {
  private readonly tickMs: number
  private readonly wheel: Wheel
  /** Queued buckets by expiration (a min-heap; bounded by the buckets of all wheels). */
  private readonly queue: Queued[] = []
  /** Entries due on the next underlying timer (set with a delay of at most a tick). */
  private readonly dueBucket = new Bucket()
  private armed: { handle: TimerHandle; atMs: number } | null = null
  private sequence = 0
  private firing = false

  constructor(
    private readonly clock: Clock,
    options: TimingWheelOptions = {},
  ) {
    this.tickMs = options.tickMs ?? TICK_MS_DEFAULT
    const wheelSize = options.wheelSize ?? WHEEL_SIZE_DEFAULT
    assert(Number.isInteger(this.tickMs) && this.tickMs >= 1, () => `tickMs ${this.tickMs}`)
    assert(Number.isInteger(wheelSize) && wheelSize >= 2, () => `wheelSize ${wheelSize}`)
    const startMs = Math.floor(clock.monotonicMs())
    this.wheel = new Wheel(this.tickMs, wheelSize, startMs, 0, (bucket) => this.enqueue(bucket))
  }

  nowMs(): number {
    return this.clock.nowMs()
  }

  monotonicMs(): number {
    return this.clock.monotonicMs()
  }

  setTimeout(callback: () => void, delayMs: number): TimerHandle {
    assert(Number.isFinite(delayMs), () => `delay ${delayMs}`)
    const nowMs = this.clock.monotonicMs()
    const deadlineMs = Math.ceil((nowMs + Math.max(0, delayMs)) / this.tickMs) * this.tickMs
    const entry = new Entry(deadlineMs, callback, this.sequence++)
    // Time moves to now only when no bucket is overdue: passing one unflushed would let a
    // new deadline share its slot.
    if (this.earliestMs() > nowMs) this.wheel.advanceTo(Math.floor(nowMs))
    if (!this.wheel.add(entry)) {
      this.dueBucket.add(entry)
      if (this.dueBucket.expirationMs === -1) {
        this.dueBucket.expirationMs = Math.floor(nowMs)
        this.enqueue(this.dueBucket)
      }
    }
    return entry
  }

  /** Timers set and neither run nor cancelled (a sum over the queued buckets). */
  get pendingTimers(): number {
    let pending = 0
    for (const queued of this.queue) pending += queued.bucket.size
    return pending
  }

  private enqueue(bucket: Bucket): void {
    this.push({ bucket, expirationMs: bucket.expirationMs, sequence: this.sequence++ })
    if (!this.firing) this.arm()
  }

  /**
   * Expiration of the earliest queued bucket, or Infinity. A bucket its cancels emptied is
   * dropped on the way (as a flush would), so that cancelled timers cost no wake-up.
   */
  private earliestMs(): number {
    for (;;) {
      const top = this.queue[0]
      if (top === undefined) return Number.POSITIVE_INFINITY
      if (top.bucket.size > 0) return top.expirationMs
      this.pop()
      top.bucket.expirationMs = -1
    }
  }

  /** One underlying timer, for the earliest bucket; none while the wheel is empty. */
  private arm(): void {
    const atMs = this.earliestMs()
    if (this.armed !== null && this.armed.atMs === atMs) return
    this.armed?.handle.cancel()
    this.armed = null
    if (atMs === Number.POSITIVE_INFINITY) return
    const delayMs = Math.max(0, atMs - this.clock.monotonicMs())
    this.armed = { atMs, handle: this.clock.setTimeout(() => this.onTimer(), delayMs) }
  }

  private onTimer(): void {
    this.armed = null
    const nowMs = this.clock.monotonicMs()
    const due: Entry[] = []
    this.firing = true
    try {
      for (let atMs = this.earliestMs(); atMs <= nowMs; atMs = this.earliestMs()) {
        const { bucket } = this.pop()!
        this.wheel.advanceTo(atMs)
        bucket.flush((entry) => {
          if (!this.wheel.add(entry)) due.push(entry)
        })
      }
      if (this.earliestMs() > nowMs) this.wheel.advanceTo(Math.floor(nowMs))
    } finally {
      this.firing = false
    }
    due.sort((a, b) => a.deadlineMs - b.deadlineMs || a.sequence - b.sequence)
    this.arm()
    this.run(due)
  }

  /**
   * Hands `due` to the clock, in order, each as a timer of its own with no delay: as Node
   * does between timers (and the simulator between events), the promise jobs a callback
   * starts run before the next callback. Only the timers that fire cost a clock timer;
   * one cancelled meanwhile does not run.
   */
  private run(due: readonly Entry[]): void {
    for (const entry of due) {
      this.clock.setTimeout(() => {
        if (entry.cancelled) return
        entry.cancelled = true
        assert(entry.deadlineMs <= this.clock.monotonicMs(), 'a timer fires no earlier than its deadline')
        entry.callback()
      }, 0)
    }
  }

  private push(item: Queued): void {
    const heap = this.queue
    heap.push(item)
    let i = heap.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!earlier(heap[i], heap[parent])) break
      ;[heap[i], heap[parent]] = [heap[parent], heap[i]]
      i = parent
    }
  }

  private pop(): Queued | undefined {
    const heap = this.queue
    const top = heap[0]
    const last = heap.pop()
    if (top === undefined || last === undefined || heap.length === 0) return top
    heap[0] = last
    for (let i = 0; ; ) {
      const l = 2 * i + 1
      const r = l + 1
      let m = i
      if (l < heap.length && earlier(heap[l], heap[m])) m = l
      if (r < heap.length && earlier(heap[r], heap[m])) m = r
      if (m === i) break
      ;[heap[i], heap[m]] = [heap[m], heap[i]]
      i = m
    }
    return top
  }
}

function earlier(a: Queued, b: Queued): boolean {
  return a.expirationMs < b.expirationMs || (a.expirationMs === b.expirationMs && a.sequence < b.sequence)
}
