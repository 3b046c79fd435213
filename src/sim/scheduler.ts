/**
 * Simulated time: one queue of events ordered by (time, sequence). `step()` runs the next
 * event, then lets the microtask queue drain (a macrotask turn of the real event loop, in
 * which nothing else is scheduled: the code under test has no real timers, sockets or
 * files), so every promise chain an event started has settled before the next event.
 *
 * Each broker incarnation gets its own `Clock` view (`ProcessClock`): when the process is
 * killed its pending timers are dropped, as a crashed process's timers would be.
 */
import { setImmediate as realSetImmediate } from 'node:timers'
import { assert } from '../common/assert.js'
import type { Clock, TimerHandle } from '../common/clock.js'

interface SimEvent {
  readonly timeMs: number
  readonly sequence: number
  readonly run: () => void
  cancelled: boolean
}

/** Wall clock at simulated time 0 (record timestamps). Fixed, so runs replay byte for byte. */
const EPOCH_MS = 1_767_225_600_000

/** Bound on events per drain: a microtask loop that never yields is a bug in the simulator or the code. */
const EVENTS_MAX = 50_000_000

export class SimScheduler implements Clock {
  private heap: SimEvent[] = []
  private sequence = 0
  private timeMs = 0
  eventsRun = 0

  nowMs(): number {
    return EPOCH_MS + this.timeMs
  }

  monotonicMs(): number {
    return this.timeMs
  }

  get now(): number {
    return this.timeMs
  }

  setTimeout(callback: () => void, delayMs: number): TimerHandle {
    const event = this.schedule(delayMs, callback)
    return {
      cancel: () => {
        event.cancelled = true
      },
    }
  }

  schedule(delayMs: number, run: () => void): SimEvent {
    assert(Number.isFinite(delayMs), () => `delay ${delayMs}`)
    const event: SimEvent = {
      timeMs: this.timeMs + Math.max(0, Math.floor(delayMs)),
      sequence: this.sequence++,
      run,
      cancelled: false,
    }
    this.push(event)
    return event
  }

  /** Time of the next live event, or undefined when none is queued. */
  peekTime(): number | undefined {
    while (this.heap.length > 0 && this.heap[0].cancelled) this.pop()
    return this.heap[0]?.timeMs
  }

  /** Moves time forward to `timeMs` when nothing is due before then. */
  advanceTo(timeMs: number): void {
    const next = this.peekTime()
    assert(next === undefined || next >= timeMs, 'advancing past a due event')
    if (timeMs > this.timeMs) this.timeMs = timeMs
  }

  /** Runs the next event and drains the microtasks it caused; false when the queue is empty. */
  async step(): Promise<boolean> {
    let event: SimEvent | undefined
    do event = this.pop()
    while (event?.cancelled)
    if (!event) return false
    assert(event.timeMs >= this.timeMs, 'time went backwards')
    this.timeMs = event.timeMs
    this.eventsRun++
    assert(this.eventsRun < EVENTS_MAX, 'event budget exhausted')
    event.run()
    await drainMicrotasks()
    return true
  }

  private push(event: SimEvent): void {
    const heap = this.heap
    heap.push(event)
    let i = heap.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!before(heap[i], heap[parent])) break
      ;[heap[i], heap[parent]] = [heap[parent], heap[i]]
      i = parent
    }
  }

  private pop(): SimEvent | undefined {
    const heap = this.heap
    if (heap.length === 0) return undefined
    const top = heap[0]
    const last = heap.pop()!
    if (heap.length > 0) {
      heap[0] = last
      let i = 0
      for (;;) {
        const l = 2 * i + 1
        const r = l + 1
        let m = i
        if (l < heap.length && before(heap[l], heap[m])) m = l
        if (r < heap.length && before(heap[r], heap[m])) m = r
        if (m === i) break
        ;[heap[i], heap[m]] = [heap[m], heap[i]]
        i = m
      }
    }
    return top
  }
}

function before(a: SimEvent, b: SimEvent): boolean {
  return a.timeMs < b.timeMs || (a.timeMs === b.timeMs && a.sequence < b.sequence)
}

/** Lets every queued microtask (and those they queue) run: one real macrotask turn. */
export function drainMicrotasks(): Promise<void> {
  return new Promise((resolve) => realSetImmediate(resolve))
}

/** The clock one broker process sees; `kill()` drops its pending timers and refuses new ones. */
export class ProcessClock implements Clock {
  private alive = true

  constructor(private readonly scheduler: SimScheduler) {}

  nowMs(): number {
    return this.scheduler.nowMs()
  }

  monotonicMs(): number {
    return this.scheduler.monotonicMs()
  }

  setTimeout(callback: () => void, delayMs: number): TimerHandle {
    if (!this.alive) return { cancel: () => undefined }
    return this.scheduler.setTimeout(() => {
      if (this.alive) callback()
    }, delayMs)
  }

  kill(): void {
    this.alive = false
  }

  get isAlive(): boolean {
    return this.alive
  }
}
