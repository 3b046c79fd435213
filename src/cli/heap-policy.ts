/**
 * How fast a broker process's V8 heap may grow, set by `tidelog start` and `tidelog broker`
 * for their whole process (an application embedding brokers keeps its own heap settings).
 *
 * V8 sets the old generation's next limit to the live heap times a growing factor it adapts
 * between 1.1 and 4. A broker's live heap is small (its data is in Buffers: about 12 MB
 * idle), and under produce load that made a full GC follow every 14 MB or so produced:
 * 56-83 Mark-Compacts per million 1 KiB records, each freeing under 1 MB, 15% of the busy
 * time (docs/notes/performance.md). A fixed factor of 5 while the heap is small leaves 0-1, and
 * about 1.7x less CPU per record. `--initial-heap-size=64` does the same from the command
 * line, but a shebang cannot pass it everywhere (BusyBox's env has no -S) and V8 reads the
 * heap's size flags only at start; it reads the growing factor at every limit it computes.
 * Above SMALL_HEAP_BYTES V8's own factor is back, so a large heap is not let grow 5x.
 */
import { getHeapStatistics, setFlagsFromString } from 'node:v8'

const SMALL_HEAP_BYTES = 64 * 1024 * 1024
const SMALL_HEAP_GROWING_PERCENT = 400
const CHECK_INTERVAL_MS = 5000

/** Applies the policy now and every few seconds, on an unref'd timer; returns its stop. */
export function startHeapPolicy(): () => void {
  let fixedFactor: boolean | null = null
  const apply = (): void => {
    const small = getHeapStatistics().used_heap_size < SMALL_HEAP_BYTES
    if (small === fixedFactor) return
    fixedFactor = small
    // 0 restores V8's adaptive factor.
    setFlagsFromString(`--heap-growing-percent=${small ? SMALL_HEAP_GROWING_PERCENT : 0}`)
  }
  apply()
  const timer = setInterval(apply, CHECK_INTERVAL_MS)
  timer.unref()
  return () => clearInterval(timer)
}
