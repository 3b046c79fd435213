/**
 * Loaded into a broker with `node --import` by bench/memory.bench.ts --breakdown: writes
 * process.memoryUsage() and V8's heap spaces to MEMORY_PROBE_DIR/PID.json every half second,
 * for the bench to read beside /proc. A file MEMORY_PROBE_DIR/PID.gc asks for a full garbage
 * collection first (the broker runs with --expose-gc then), PID.snapshot for a heap snapshot
 * written to PID.heapsnapshot: what is garbage not yet collected, and what is held.
 * (The broker runs from dist/bundle, so importing its modules here would give other
 * instances than its own.)
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs'
import { getHeapSpaceStatistics, writeHeapSnapshot } from 'node:v8'

const dir = process.env.MEMORY_PROBE_DIR
const PROBE_INTERVAL_MS = 500
if (dir) {
  const file = (suffix) => `${dir}/${process.pid}.${suffix}`
  setInterval(() => {
    if (existsSync(file('gc')) && typeof globalThis.gc === 'function') {
      rmSync(file('gc'))
      globalThis.gc()
    }
    if (existsSync(file('snapshot'))) {
      rmSync(file('snapshot'))
      writeHeapSnapshot(file('heapsnapshot'))
    }
    const spaces = Object.fromEntries(
      getHeapSpaceStatistics().map((s) => [s.space_name, s.physical_space_size]),
    )
    writeFileSync(
      file('json'),
      JSON.stringify({ at: Date.now(), memoryUsage: process.memoryUsage(), spaces }),
    )
  }, PROBE_INTERVAL_MS).unref()
}
