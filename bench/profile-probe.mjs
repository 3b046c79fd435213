/**
 * Loaded into a broker with `node --import` by bench/scale-deployed.bench.ts --idle-cpu-prof:
 * profiles one window of the broker's life chosen by the bench. A file PROFILE_PROBE_DIR/PID.start
 * starts V8's sampling profiler, PID.stop stops it and writes PID.cpuprofile (Chrome DevTools).
 * `--cpu-prof` would profile the whole run, creation included, and only at a clean exit.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'

const dir = process.env.PROFILE_PROBE_DIR
const POLL_INTERVAL_MS = 250
const SAMPLING_INTERVAL_US = 1000
if (dir) {
  const file = (suffix) => `${dir}/${process.pid}.${suffix}`
  const session = new Session()
  session.connect()
  const post = (method, params = {}) =>
    new Promise((resolve, reject) =>
      session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))),
    )
  let busy = false
  setInterval(() => {
    if (busy) return
    if (existsSync(file('start'))) {
      rmSync(file('start'))
      busy = true
      post('Profiler.enable')
        .then(() => post('Profiler.setSamplingInterval', { interval: SAMPLING_INTERVAL_US }))
        .then(() => post('Profiler.start'))
        .finally(() => {
          busy = false
        })
    } else if (existsSync(file('stop'))) {
      rmSync(file('stop'))
      busy = true
      post('Profiler.stop')
        .then(({ profile }) => writeFileSync(file('cpuprofile'), JSON.stringify(profile)))
        .finally(() => {
          busy = false
        })
    }
  }, POLL_INTERVAL_MS).unref()
}
