/**
 * `tidelog start` cold start, the figure bench/broker.bench.ts reports once, measured many
 * times (the machine is noisy): spawn of `node bin/tidelog.js start` on a free port and a
 * fresh data directory until a TCP connection to the port is accepted, alternated run by
 * run with a bare `node` that only listens (the peer: the same machine load hits both, so
 * their ratio is what the target bounds, <= 1.5x). Prints the medians and the minimum, the broker's CPU time until then (less sensitive to a busy machine than
 * wall time), and the resident memory of the last broker after it idled --idle-ms
 * with no client (VmRSS; Linux only). --settled-ms MS reads it once more MS after the
 * connection: V8's memory reducer runs about 8 s after start-up and gives back the young
 * generation the start-up grew, so a reading past it (10000) is the broker's settled size.
 *
 *   node dist/bench/startup.bench.js [--runs N] [--idle-ms MS] [--settled-ms MS] [--modules] [--bin PATH] [--compare PATH]
 *
 * --modules also counts the modules the last broker loaded (bench/module-counter.mjs as an
 * --import hook) and prints them by directory. --bin measures another copy's bin/tidelog.js
 * (e.g. a build of the previous commit), to compare both in the same conditions; --compare
 * PATH adds that other copy as a third process in every round, so both copies and the bare
 * node see the same load.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { tidelogLaunch } from '../test/helpers/broker-process.js'
import { freePort, waitForPort } from './wait-for-port.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '10' },
    'idle-ms': { type: 'string', default: '2000' },
    'settled-ms': { type: 'string', default: '0' },
    modules: { type: 'boolean', default: false },
    bin: { type: 'string' },
    compare: { type: 'string' },
  },
})
const runs = Number(values.runs)
const idleMs = Number(values['idle-ms'])
const settledMs = Number(values['settled-ms'])
if (settledMs !== 0 && !(settledMs > idleMs))
  throw new Error('--settled-ms must be 0 (off) or above --idle-ms')
const bin = values.bin ?? join(root, 'bin', 'tidelog.js')

function residentMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const match = /VmRSS:\s+(\d+) kB/.exec(status)
  return match ? Number(match[1]) / 1024 : Number.NaN
}

/** User plus system CPU time of a process so far, all threads (Linux; 10 ms resolution). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
}

interface Run {
  ms: number
  cpuMs: number
  rssMiB: number
  settledRssMiB: number
  modules: string[]
}

/** What a process that does nothing but listen costs on this machine right now. */
const bareNodeScript = "require('node:net').createServer().listen(Number(process.argv[1]), '127.0.0.1')"

/** `which`: the tidelog copy to start, or null for the bare node. */
async function startOnce(
  measureIdle: boolean,
  countModules: boolean,
  which: string | null = bin,
): Promise<Run> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tidelog-startup-'))
  const moduleLog = join(dataDir, 'modules.log')
  const port = await freePort()
  const nodeArgs = countModules ? ['--import', join(root, 'bench', 'module-counter.mjs')] : []
  const env = { ...process.env, TIDELOG_LOG_LEVEL: 'warn', TIDELOG_MODULE_LOG: moduleLog }
  // tidelog as `npx tidelog` starts it: through its launcher lines (a shell's exec) when it has them.
  const launch =
    which === null
      ? { argv: [process.execPath, '-e', bareNodeScript, String(port)], env }
      : tidelogLaunch(nodeArgs, env, which)
  const [command, ...launchArgs] = launch.argv
  const args =
    which === null
      ? launchArgs
      : [...launchArgs, 'start', '--port', String(port), '--data-dir', join(dataDir, 'data')]
  const start = performance.now()
  const child = spawn(command, args, { stdio: 'ignore', env: launch.env })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  try {
    await waitForPort(port, Date.now() + 10000)
    const ms = performance.now() - start
    const cpu = cpuMs(child.pid!)
    let rssMiB = Number.NaN
    let settledRssMiB = Number.NaN
    if (measureIdle) {
      await new Promise((resolve) => setTimeout(resolve, idleMs))
      rssMiB = residentMiB(child.pid!)
      if (settledMs > 0) {
        await new Promise((resolve) => setTimeout(resolve, settledMs - idleMs))
        settledRssMiB = residentMiB(child.pid!)
      }
    }
    const modules = countModules
      ? [...new Set(readFileSync(moduleLog, 'utf8').split('\n').filter(Boolean))]
      : []
    return { ms, cpuMs: cpu, rssMiB, settledRssMiB, modules }
  } finally {
    child.kill('SIGTERM')
    await exited
    rmSync(dataDir, { recursive: true, force: true })
  }
}

function settled(run: Run): string {
  return settledMs > 0 ? `, ${run.settledRssMiB.toFixed(1)} MiB after ${settledMs} ms` : ''
}

function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

async function main(): Promise<void> {
  await startOnce(false, false) // warm the page cache
  await startOnce(false, false, null)
  if (values.compare) await startOnce(false, false, values.compare)
  const compareTimes: number[] = []
  const compareCpuTimes: number[] = []
  const bareCpuTimes: number[] = []
  const times: number[] = []
  const cpuTimes: number[] = []
  const bareTimes: number[] = []
  const ratios: number[] = []
  for (let i = 0; i < runs; i++) {
    const run = await startOnce(false, false)
    const bareRun = await startOnce(false, false, null)
    bareCpuTimes.push(bareRun.cpuMs)
    if (values.compare) {
      const compareRun = await startOnce(false, false, values.compare)
      compareTimes.push(compareRun.ms)
      compareCpuTimes.push(compareRun.cpuMs)
    }
    times.push(run.ms)
    cpuTimes.push(run.cpuMs)
    bareTimes.push(bareRun.ms)
    ratios.push(run.ms / bareRun.ms)
  }
  const idle = await startOnce(true, false)
  const bareIdle = await startOnce(true, false, null)
  console.log(`tidelog start: spawn to accepted connection, ${runs} runs alternated with a bare node`)
  console.log(`  tidelog   median ${median(times).toFixed(1)} ms   min ${Math.min(...times).toFixed(1)} ms`)
  console.log(
    `  bare node median ${median(bareTimes).toFixed(1)} ms   min ${Math.min(...bareTimes).toFixed(1)} ms`,
  )
  console.log(
    `  ratio of medians ${(median(times) / median(bareTimes)).toFixed(2)}x   median of pair ratios ${median(ratios).toFixed(2)}x   (<= 1.5)`,
  )
  if (values.compare) {
    const compareIdle = await startOnce(true, false, values.compare)
    console.log(
      `  compared copy (${values.compare}) median ${median(compareTimes).toFixed(1)} ms, ${(median(compareTimes) / median(bareTimes)).toFixed(2)}x; CPU median ${median(compareCpuTimes).toFixed(0)} ms; idle RSS ${compareIdle.rssMiB.toFixed(1)} MiB${settled(compareIdle)}`,
    )
  }
  console.log(`  tidelog runs:   ${times.map((t) => t.toFixed(0)).join(' ')}`)
  console.log(`  bare node runs: ${bareTimes.map((t) => t.toFixed(0)).join(' ')}`)
  const meanCpuMs = cpuTimes.reduce((a, b) => a + b, 0) / cpuTimes.length
  console.log(
    `  CPU time until then (user+sys, all threads): tidelog mean ${meanCpuMs.toFixed(0)} ms, median ${median(cpuTimes).toFixed(0)} ms; bare node median ${median(bareCpuTimes).toFixed(0)} ms`,
  )
  console.log(
    `idle resident memory after ${idleMs} ms: ${idle.rssMiB.toFixed(1)} MiB (< 60)   bare node ${bareIdle.rssMiB.toFixed(1)} MiB`,
  )
  if (settledMs > 0) {
    console.log(
      `resident memory ${settledMs} ms after the connection: ${idle.settledRssMiB.toFixed(1)} MiB   bare node ${bareIdle.settledRssMiB.toFixed(1)} MiB`,
    )
  }
  if (values.modules) {
    const { modules } = await startOnce(false, true)
    const byDir = new Map<string, number>()
    for (const url of modules) {
      const where = url.startsWith('node:')
        ? 'node:'
        : url
            .replace(/^file:\/\/.*?\/(dist\/src\/|dist\/bundle\/|node_modules\/)/, '$1')
            .replace(/\/[^/]*$/, '')
      byDir.set(where, (byDir.get(where) ?? 0) + 1)
    }
    console.log(`modules loaded by the broker: ${modules.length}`)
    for (const [dir, count] of [...byDir].sort((a, b) => b[1] - a[1])) {
      console.log(`  ${String(count).padStart(4)}  ${dir}`)
    }
  }
}

await main()
