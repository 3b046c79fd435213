/**
 * Loaded into a broker with `node --import` by bench/scale-deployed.bench.ts --idle-cpu-prof:
 * profiles one window of the broker's life chosen by the bench. A file PROFILE_PROBE_DIR/PID.start
 * starts V8's sampling profiler, PID.stop stops it and writes PID.cpuprofile (Chrome DevTools)
 * and PID.gc.json: the window's garbage collections by kind (count, milliseconds; a forced one
 * is a gc() call, the broker's memory reclaimer's), which the profile shows only in part (V8's
 * helper threads do much of a collection's work), and with PROFILE_PROBE_HEAP=1 PID.heapprofile.
 * `--cpu-prof` would profile the whole run, creation included, and only at a clean exit.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'
import { constants, PerformanceObserver } from 'node:perf_hooks'

const dir = process.env.PROFILE_PROBE_DIR
const POLL_INTERVAL_MS = 250
const SAMPLING_INTERVAL_US = 1000
/**
 * PROFILE_PROBE_HEAP=1: also V8's sampling heap profiler over the window, garbage included
 * (PID.heapprofile): what allocates, for the collections the window shows.
 */
const heap = process.env.PROFILE_PROBE_HEAP === '1'
const HEAP_SAMPLING = {
  samplingInterval: 8192,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
}
if (dir) {
  const file = (suffix) => `${dir}/${process.pid}.${suffix}`
  const session = new Session()
  session.connect()
  const post = (method, params = {}) =>
    new Promise((resolve, reject) =>
      session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))),
    )
  let busy = false
  const KINDS = {
    [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
    [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
    [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
    [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
  }
  let collections = {}
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const forced = (entry.detail?.flags ?? 0) & constants.NODE_PERFORMANCE_GC_FLAGS_FORCED
      const kind = `${KINDS[entry.detail?.kind] ?? 'other'}${forced ? ' (forced)' : ''}`
      const seen = (collections[kind] ??= { count: 0, ms: 0 })
      seen.count++
      seen.ms += entry.duration
    }
  })
  setInterval(() => {
    if (busy) return
    if (existsSync(file('start'))) {
      rmSync(file('start'))
      busy = true
      collections = {}
      observer.observe({ entryTypes: ['gc'] })
      post('Profiler.enable')
        .then(() => post('Profiler.setSamplingInterval', { interval: SAMPLING_INTERVAL_US }))
        .then(() => post('Profiler.start'))
        .then(() => (heap ? post('HeapProfiler.startSampling', HEAP_SAMPLING) : undefined))
        .finally(() => {
          busy = false
        })
    } else if (existsSync(file('stop'))) {
      rmSync(file('stop'))
      busy = true
      observer.disconnect()
      writeFileSync(file('gc.json'), JSON.stringify(collections))
      // The heap profile first: the bench waits for PID.cpuprofile, then may kill the broker.
      Promise.resolve(heap ? post('HeapProfiler.stopSampling') : undefined)
        .then((sampled) => sampled && writeFileSync(file('heapprofile'), JSON.stringify(sampled.profile)))
        .then(() => post('Profiler.stop'))
        .then(({ profile }) => writeFileSync(file('cpuprofile'), JSON.stringify(profile)))
        .finally(() => {
          busy = false
        })
    }
  }, POLL_INTERVAL_MS).unref()
}
