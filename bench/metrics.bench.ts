/**
 * The cost of metrics on the produce path, measured in one run: `tidelog start` with the
 * HTTP listener and metrics on, and with them off (--http-port -1), driven by the native
 * librdkafka load generator (bench/native/rdkafka-perf.c; 1 KiB records, acks=1,
 * batching). While the metrics broker is loaded, /metrics is scraped every second (15 x
 * Prometheus's common 15 s interval).
 *
 * Two processes started the same way differ by 5-15% in throughput and CPU per record on
 * this 2-core VM (JIT decisions, where their threads land), which is more than the effect
 * measured. So every round starts a fresh broker of each kind, one after the other in
 * alternating order, warms it up with --warmup-records, measures --records, and stops it;
 * the verdict is the median of the rounds' on/off ratios with a bootstrap 90% interval,
 * judged at its costly end.
 * Drift and process luck average out over rounds instead of settling on one side.
 *
 * A second figure does not depend on the machine's noise: one more metrics broker runs the
 * same load (4 x --records) under the CPU profiler, and the share of its busy CPU spent in metrics code
 * (src/ops, prom-client, the HTTP server, perf_hooks; module loading excluded) is printed.
 *
 *   node dist/bench/metrics.bench.js [--records N] [--warmup-records N] [--rounds R] [--no-profile]
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs, promisify } from 'node:util'
import { Registry } from 'prom-client'
import { silentLogger } from '../src/common/logger.js'
import { RequestMetrics } from '../src/ops/request-observer.js'
import { tidelogLaunch } from '../test/helpers/broker-process.js'
import { perfBinary } from './load-generator.js'
import { waitForPort } from './wait-for-port.js'

const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '500000' },
    'warmup-records': { type: 'string', default: '200000' },
    rounds: { type: 'string', default: '10' },
    'no-profile': { type: 'boolean', default: false },
  },
})
const records = Number(values.records)
const warmupRecords = Number(values['warmup-records'])
const rounds = Number(values.rounds)

async function produce(binary: string, bootstrap: string, topic: string, count: number): Promise<number> {
  const { stdout } = await promisify(execFile)(
    binary,
    ['produce', bootstrap, topic, String(count), '1024', '1', '0', '5'],
    { encoding: 'utf8', maxBuffer: 1 << 20 },
  )
  return (JSON.parse(stdout.trim().split('\n').at(-1)!) as { recordsPerSec: number }).recordsPerSec
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
    server.on('error', reject)
  })
}

/** CPU seconds (user + system) the process has used so far. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100 // utime, stime in clock ticks (USER_HZ = 100)
}

interface BrokerProcess {
  readonly child: ChildProcess
  readonly bootstrap: string
  readonly metricsUrl: string | null
}

async function startTidelog(dataDir: string, metrics: boolean, profileDir?: string): Promise<BrokerProcess> {
  const port = await freePort()
  const httpPort = metrics ? await freePort() : -1
  const launch = tidelogLaunch(profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [], {
    ...process.env,
    TIDELOG_LOG_LEVEL: 'warn',
  })
  const [command, ...launchArgs] = launch.argv
  const child = spawn(
    command,
    [
      ...launchArgs,
      'start',
      '--port',
      String(port),
      `--http-port=${httpPort}`,
      '--data-dir',
      dataDir,
      '--set',
      'num.partitions=4',
    ],
    { stdio: 'ignore', env: launch.env },
  )
  // Whatever ends this process (an error, a closed stdout) ends the broker too.
  const kill = (): void => {
    child.kill('SIGKILL')
  }
  process.once('exit', kill)
  child.once('exit', () => process.off('exit', kill))
  await waitForPort(port, Date.now() + 15000)
  if (metrics) await waitForPort(httpPort, Date.now() + 15000)
  return {
    child,
    bootstrap: `127.0.0.1:${port}`,
    metricsUrl: metrics ? `http://127.0.0.1:${httpPort}/metrics` : null,
  }
}

async function stopTidelog(broker: BrokerProcess): Promise<void> {
  broker.child.kill('SIGTERM')
  await new Promise((resolve) => broker.child.once('exit', resolve))
}

/**
 * What the request observer adds to one produce request (4 partitions of one 100-record
 * batch each), in a loop: the figure the process comparison cannot resolve on a busy machine.
 */
function observerCostNs(): number {
  const metrics = new RequestMetrics({
    registry: new Registry(),
    logger: silentLogger,
    slowRequestMs: -1,
    topicName: () => undefined,
  })
  const batch = Buffer.alloc(16 * 1024)
  batch.writeInt32BE(batch.length - 12, 8)
  batch[16] = 2
  batch.writeInt32BE(100, 57)
  const partitions = [0, 1, 2, 3]
  const request = {
    topicData: [{ name: 't', partitionData: partitions.map((index) => ({ index, records: batch })) }],
  }
  const response = {
    responses: [{ name: 't', partitionResponses: partitions.map((index) => ({ index, errorCode: 0 })) }],
  }
  const iterations = 200_000
  const startedMs = performance.now()
  for (let i = 0; i < iterations; i++) {
    const observation = metrics.onRequest(0, 9, '127.0.0.1:1')
    observation.onHandlerStart(request, 'bench')
    observation.onResponse(response)
    observation.onSent()
  }
  const ns = ((performance.now() - startedMs) * 1e6) / iterations
  if (metrics.messagesIn.value('t') !== iterations * 400) throw new Error('observer miscounted')
  return ns
}

/** Scrapes now and every second until the returned function is called; records each scrape's ms. */
function scrapeEverySecond(url: string, scrapeMs: number[]): () => void {
  const scrape = (): void => {
    const startedMs = performance.now()
    fetch(url)
      .then((response) => response.text())
      .then(() => scrapeMs.push(performance.now() - startedMs))
      .catch((error: unknown) => console.error('scrape failed', error))
  }
  // Once at the start too: a round shorter than the interval is scraped all the same.
  scrape()
  const timer = setInterval(scrape, 1000)
  return () => clearInterval(timer)
}

function percent(ratio: number): string {
  const delta = (ratio - 1) * 100
  return `${delta >= 0 ? '+' : ''}${delta.toFixed(1)}%`
}

/** A bootstrap 90% interval of the median, seeded so a run's output is reproducible. */
function medianInterval(values: readonly number[]): [number, number] {
  let seed = 0x9e3779b9
  const nextIndex = (): number => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0
    return seed % values.length
  }
  const medians: number[] = []
  for (let i = 0; i < 2000; i++) medians.push(median(values.map(() => values[nextIndex()])))
  medians.sort((a, b) => a - b)
  return [medians[Math.floor(medians.length * 0.05)], medians[Math.floor(medians.length * 0.95)]]
}

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string }
  readonly children?: readonly number[]
}

const METRICS_CODE = /\/src\/ops\/|\/prom-client\/|^node:_http|^node:perf_hooks|internal\/perf\//
const MODULE_LOADING = /^node:internal\/modules\//

/**
 * The share of the profiled process's busy time (idle excluded) whose stack holds metrics
 * code, leaving out stacks that are loading modules (prom-client's one-time import).
 */
function metricsShareOfBusy(profileDir: string): { busyMs: number; metricsMs: number } {
  const file = readdirSync(profileDir).find((name) => name.endsWith('.cpuprofile'))
  if (!file) throw new Error(`no CPU profile written in ${profileDir}`)
  const profile = JSON.parse(readFileSync(join(profileDir, file), 'utf8')) as {
    nodes: ProfileNode[]
    samples: number[]
    timeDeltas: number[]
  }
  const parentOf = new Map<number, ProfileNode>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node)
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const kindOf = new Map<number, 'idle' | 'metrics' | 'loading' | 'other'>()
  const classify = (node: ProfileNode): 'idle' | 'metrics' | 'loading' | 'other' => {
    if (node.callFrame.functionName === '(idle)') return 'idle'
    let metrics = false
    for (let at: ProfileNode | undefined = node; at; at = parentOf.get(at.id)) {
      if (MODULE_LOADING.test(at.callFrame.url)) return 'loading'
      if (METRICS_CODE.test(at.callFrame.url)) metrics = true
    }
    return metrics ? 'metrics' : 'other'
  }
  let busyUs = 0
  let metricsUs = 0
  profile.samples.forEach((id, i) => {
    let kind = kindOf.get(id)
    if (!kind) {
      kind = classify(byId.get(id)!)
      kindOf.set(id, kind)
    }
    const us = profile.timeDeltas[i] ?? 0
    if (kind === 'idle') return
    busyUs += us
    if (kind === 'metrics') metricsUs += us
  })
  return { busyMs: busyUs / 1000, metricsMs: metricsUs / 1000 }
}

type Mode = 'off' | 'on'

/**
 * The profiled run measures this many times --records: its share covers the whole process,
 * start-up and the first scrape's registry set-up included, which a longer run dilutes.
 */
const PROFILED_RECORDS_FACTOR = 4

interface Measured {
  readonly recordsPerSec: number
  readonly cpuPerRecordUs: number
}

/** Starts a fresh broker, warms it up, measures one produce run with scrapes if on, stops it. */
async function measure(
  binary: string,
  dataDir: string,
  mode: Mode,
  scrapeMs: number[],
  profileDir?: string,
): Promise<Measured> {
  const broker = await startTidelog(dataDir, mode === 'on', profileDir)
  // Scraped from the warm-up on, as Prometheus would: the first scrape imports prom-client
  // (a one-time 50 ms), which does not belong in the measured window.
  const stopScraping = broker.metricsUrl ? scrapeEverySecond(broker.metricsUrl, scrapeMs) : () => {}
  try {
    await produce(binary, broker.bootstrap, 'warm-up', warmupRecords)
    const cpuBefore = cpuSeconds(broker.child.pid!)
    const count = profileDir ? records * PROFILED_RECORDS_FACTOR : records
    const recordsPerSec = await produce(binary, broker.bootstrap, 'measured', count)
    const cpuPerRecordUs = ((cpuSeconds(broker.child.pid!) - cpuBefore) / count) * 1e6
    return { recordsPerSec, cpuPerRecordUs }
  } finally {
    stopScraping()
    await stopTidelog(broker)
    // A round writes about 0.7 GB; ten rounds of two brokers would fill a small disk.
    if (!profileDir) rmSync(dataDir, { recursive: true, force: true })
  }
}

/**
 * The verdict is one-sided, as for any cost: metrics are within 3% when the interval's
 * costly end is (throughput at least 97% of off, CPU per record at most 103%); a run in
 * which metrics on looked faster says nothing more about the cost than one that did not.
 */
function printRatio(label: 'throughput' | 'CPU per record', ratios: readonly number[]): void {
  const [low, high] = medianInterval(ratios)
  const [worst, best] = label === 'throughput' ? [1 - low, 1 - high] : [high - 1, low - 1]
  const verdict =
    worst <= 0.03 ? 'within 3%' : best > 0.03 ? 'NOT within 3%' : 'not resolved to 3% by this run'
  console.log(
    `${label.padEnd(15)} on/off median ${percent(median(ratios)).padStart(6)}, 90% interval ${percent(low)} .. ${percent(high)}: ${verdict}`,
  )
}

async function main(): Promise<void> {
  console.log(
    `request observer: ${(observerCostNs() / 1000).toFixed(2)} µs per produce request (4 partitions)\n`,
  )
  const binary = perfBinary()
  const dataDir = mkdtempSync(join(tmpdir(), 'tidelog-metrics-bench-'))
  console.log(
    `${rounds} rounds; each starts a fresh broker of each kind, produces ${warmupRecords} records to warm it up, then measures ${records} records of 1 KiB (acks=1); /metrics scraped every 1 s\n`,
  )
  const results: Record<Mode, Measured[]> = { off: [], on: [] }
  const scrapeMs: number[] = []
  try {
    for (let round = 1; round <= rounds; round++) {
      // Alternate which goes first, so drift on a shared machine hits both alike.
      const order: Mode[] = round % 2 === 1 ? ['off', 'on'] : ['on', 'off']
      for (const mode of order) {
        const result = await measure(binary, join(dataDir, `${round}-${mode}`), mode, scrapeMs)
        results[mode].push(result)
        console.log(
          `round ${String(round).padEnd(3)} metrics ${mode.padEnd(3)} ${result.recordsPerSec.toFixed(0).padStart(9)} records/s ${result.cpuPerRecordUs.toFixed(2).padStart(7)} µs CPU/record`,
        )
      }
    }
    console.log('')
    for (const mode of ['off', 'on'] as const) {
      console.log(
        `median metrics ${mode.padEnd(3)} ${median(results[mode].map((r) => r.recordsPerSec))
          .toFixed(0)
          .padStart(9)} records/s ${median(results[mode].map((r) => r.cpuPerRecordUs))
          .toFixed(2)
          .padStart(7)} µs CPU/record`,
      )
    }
    console.log(
      `${scrapeMs.length} scrapes of /metrics, median ${median(scrapeMs).toFixed(1)} ms, max ${Math.max(...scrapeMs).toFixed(1)} ms\n`,
    )
    const ratios = (pick: (r: Measured) => number) => results.on.map((r, i) => pick(r) / pick(results.off[i]))
    printRatio(
      'throughput',
      ratios((r) => r.recordsPerSec),
    )
    printRatio(
      'CPU per record',
      ratios((r) => r.cpuPerRecordUs),
    )
    if (!values['no-profile']) {
      const profileDir = join(dataDir, 'profile')
      await measure(binary, join(dataDir, 'profiled'), 'on', [], profileDir)
      const { busyMs, metricsMs } = metricsShareOfBusy(profileDir)
      console.log(
        `profiled metrics broker: ${metricsMs.toFixed(0)} ms of ${busyMs.toFixed(0)} ms busy CPU in metrics code = ${((100 * metricsMs) / busyMs).toFixed(2)}% (target: within 3%)`,
      )
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
