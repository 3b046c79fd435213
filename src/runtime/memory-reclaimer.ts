/**
 * Gives a broker process's memory back once load stops (issue 34: "a broker's memory returns
 * near its idle figure when load stops").
 *
 * What held it, measured on `tidelog broker` processes after the RF 3 acks=all throughput run
 * (bench/memory.bench.ts --breakdown): of 250 MiB resident, 45 MiB are the node binary's
 * pages and 37 MiB the idle anonymous memory; the rest is ArrayBuffers (27-118 MiB: fetch
 * answers, produce requests, the read buffer pool), glibc's heap where they live, and a new
 * space grown to 30 MiB. Most of
 * those ArrayBuffers are garbage already, but an idle broker allocates too little for V8 to
 * collect again, and the start-up heap policy (cli/heap-policy.ts) lets the heap grow 5x
 * between full collections, so they stayed: 10 s later the figure had not moved. One full
 * collection then freed about 100 MiB of resident memory.
 *
 * So every `intervalMs` this trims the read buffer pool if it was not used meanwhile and,
 * when the event loop was nearly idle over the interval and V8's heap and ArrayBuffers grew
 * by more than `collectAboveBytes` since the last collection, runs one full collection,
 * which also shrinks the new space back to 1 MiB. A collection pauses the loop (12-26 ms
 * measured for a broker's ~20 MiB live heap on a loaded machine), which is why it waits for
 * an idle loop: under load V8 collects on its own and a forced pause would show in latency.
 * What it cannot give back is glibc's: freed memory amid its heap stays resident
 * (docs/notes/performance.md, "Memory of a broker process").
 */

import { performance } from 'node:perf_hooks'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { assert } from '../common/assert.js'
import type { Clock, TimerHandle } from '../common/clock.js'
import { readBufferPool } from '../common/read-buffer-pool.js'

/** What the reclaimer reads and does to the process: Node's in `nodeProcessMemory`, fakes in tests. */
export interface ProcessMemory {
  /** The fraction of the time since the previous call that the event loop was busy (0 to 1). */
  busyFractionSinceLastCall(): number
  /** Bytes of V8's heap (its spaces as sized now) and of ArrayBuffers (Buffers' memory, outside it). */
  heldBytes(): number
  /** A full garbage collection, now. */
  collectGarbage(): void
}

/** The pool's part the reclaimer uses (common/read-buffer-pool.ts). */
export interface TrimmablePool {
  trimIfIdle(): number
}

export interface MemoryReclaimerOptions {
  readonly clock: Clock
  readonly memory: ProcessMemory
  readonly pool: TrimmablePool
  /** How often it looks; also how long the pool must go unused before it is trimmed. */
  readonly intervalMs?: number
  /** The event loop counts as idle below this busy fraction (a broker at rest: heartbeats, fetch long-polls). */
  readonly idleBusyFractionMax?: number
  /** Growth of V8's heap and ArrayBuffers since the last collection that is worth one. */
  readonly collectAboveBytes?: number
}

export const MEMORY_RECLAIM_INTERVAL_MS_DEFAULT = 5000
export const IDLE_BUSY_FRACTION_MAX_DEFAULT = 0.05
export const COLLECT_ABOVE_BYTES_DEFAULT = 8 * 1024 * 1024

export interface ReclaimOutcome {
  readonly trimmedBytes: number
  readonly collected: boolean
}

export class MemoryReclaimer {
  private timer: TimerHandle | null = null
  private readonly intervalMs: number
  private readonly idleBusyFractionMax: number
  private readonly collectAboveBytes: number
  /**
   * Held bytes right after the last collection, or at the first look: not at start, since
   * what a broker allocates to start is no burst, and collecting it pre-empted V8's own
   * memory-reducing collection of an idle broker (measured: 77.5 MiB against 72.4).
   */
  private baselineBytes: number | null = null

  constructor(private readonly options: MemoryReclaimerOptions) {
    this.intervalMs = options.intervalMs ?? MEMORY_RECLAIM_INTERVAL_MS_DEFAULT
    this.idleBusyFractionMax = options.idleBusyFractionMax ?? IDLE_BUSY_FRACTION_MAX_DEFAULT
    this.collectAboveBytes = options.collectAboveBytes ?? COLLECT_ABOVE_BYTES_DEFAULT
    assert(this.intervalMs > 0, () => `bad memory reclaim interval ${this.intervalMs}`)
    assert(this.collectAboveBytes >= 0, () => `bad collect threshold ${this.collectAboveBytes}`)
  }

  start(): void {
    assert(this.timer === null, 'memory reclaimer started twice')
    this.options.memory.busyFractionSinceLastCall()
    this.schedule()
  }

  stop(): void {
    this.timer?.cancel()
    this.timer = null
  }

  /** One look: what the timer runs, exposed for tests. */
  tick(): ReclaimOutcome {
    const { memory, pool } = this.options
    const trimmedBytes = pool.trimIfIdle()
    const idle = memory.busyFractionSinceLastCall() <= this.idleBusyFractionMax
    const heldBytes = memory.heldBytes()
    this.baselineBytes ??= heldBytes
    const grownBytes = heldBytes - this.baselineBytes
    const collected = idle && (grownBytes > this.collectAboveBytes || trimmedBytes > 0)
    if (collected) memory.collectGarbage()
    // After a collection the level it left is the new baseline; a level that fell (V8
    // collected on its own) lowers it too, so growth is counted from the lowest seen.
    const nowBytes = memory.heldBytes()
    if (collected || nowBytes < this.baselineBytes) this.baselineBytes = nowBytes
    return { trimmedBytes, collected }
  }

  private schedule(): void {
    this.timer = this.options.clock.setTimeout(() => {
      this.tick()
      this.schedule()
    }, this.intervalMs)
  }
}

let gcFunction: (() => void) | null = null

/**
 * V8's `gc()`, which Node gives only with --expose-gc: a flag a shebang cannot pass
 * everywhere (cli/heap-policy.ts). Set at run time it applies to contexts created after,
 * so a new context hands the function over; the flag is turned off again after.
 */
function gc(): () => void {
  if (gcFunction === null) {
    setFlagsFromString('--expose-gc')
    gcFunction = runInNewContext('gc') as () => void
    setFlagsFromString('--no-expose-gc')
  }
  return gcFunction
}

/** Node's process: event loop utilization, process.memoryUsage() and V8's gc. */
export function nodeProcessMemory(): ProcessMemory {
  let last = performance.eventLoopUtilization()
  return {
    busyFractionSinceLastCall() {
      const now = performance.eventLoopUtilization()
      const utilization = performance.eventLoopUtilization(now, last).utilization
      last = now
      return utilization
    },
    heldBytes() {
      const usage = process.memoryUsage()
      return usage.heapTotal + usage.arrayBuffers
    },
    collectGarbage: () => gc()(),
  }
}

/**
 * The reclaimer of a `tidelog start` or `tidelog broker` process, on the process's read
 * buffer pool, until the process ends (its timer is unref'd). Brokers in worker threads
 * have pools of their own, which this does not see.
 */
export function startMemoryReclaimer(clock: Clock): MemoryReclaimer {
  const reclaimer = new MemoryReclaimer({ clock, memory: nodeProcessMemory(), pool: readBufferPool })
  reclaimer.start()
  return reclaimer
}
