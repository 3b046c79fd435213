/**
 * The cost of metrics on the produce path, measured in one run: two `tidelog start`
 * processes, one with the HTTP listener and metrics on and one with them off
 * (--http-port -1), driven in alternating rounds by the native librdkafka load generator
 * (bench/native/rdkafka-perf.c; 1 KiB records, acks=1, batching). While the metrics broker
 * is loaded, /metrics is scraped every second (15 x Prometheus's default rate).
 *
 * Prints per round the records/s and the broker process's CPU time per record (from
 * /proc/PID/stat). On a machine shared with other work, throughput swings by tens of
 * percent between rounds, so each round runs the two brokers back to back (in alternating
 * order) and the verdict is the median of the rounds' on/off ratios, which drift between
 * rounds cancels out of; a first, uncounted round warms both brokers' JIT up.
 *
 *   node dist/bench/metrics.bench.js [--records N] [--rounds R]
 */
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs, promisify } from 'node:util'
import { Registry } from 'prom-client'
import { silentLogger } from '../src/common/logger.js'
import { RequestMetrics } from '../src/ops/request-observer.js'
import { waitForPort } from './wait-for-port.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '1000000' },
    rounds: { type: 'string', default: '6' },
  },
})
const records = Number(values.records)
const rounds = Number(values.rounds)

function perfBinary(): string {
  const out = join(root, '.build', 'rdkafka-perf')
  mkdirSync(dirname(out), { recursive: true })
  execFileSync('cc', ['-O2', '-o', out, join(root, 'bench', 'native', 'rdkafka-perf.c'), '-lrdkafka'])
  return out
}

async function produce(binary: string, bootstrap: string, topic: string): Promise<number> {
  const { stdout } = await promisify(execFile)(
    binary,
    ['produce', bootstrap, topic, String(records), '1024', '1', '0', '5'],
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

async function startTidelog(dataDir: string, metrics: boolean): Promise<BrokerProcess> {
  const port = await freePort()
  const httpPort = metrics ? await freePort() : -1
  const child = spawn(
    process.execPath,
    [
      join(root, 'bin', 'tidelog.js'),
      'start',
      '--port',
      String(port),
      `--http-port=${httpPort}`,
      '--data-dir',
      dataDir,
      '--set',
      'num.partitions=4',
    ],
    { stdio: 'ignore', env: { ...process.env, TIDELOG_LOG_LEVEL: 'warn' } },
  )
  // Whatever ends this process (an error, a closed stdout) ends the broker too.
  process.once('exit', () => child.kill('SIGKILL'))
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

type PerMode = { off: number[]; on: number[] }

function printVerdict(results: PerMode, cpuPerRecordUs: PerMode, scrapeMs: readonly number[]): void {
  const pairs = results.on.map((_, i) => i)
  const throughputRatio = median(pairs.map((i) => results.on[i] / results.off[i]))
  const cpuRatio = median(pairs.map((i) => cpuPerRecordUs.on[i] / cpuPerRecordUs.off[i]))
  console.log(
    `\nmedian metrics off ${median(results.off).toFixed(0).padStart(9)} records/s ${median(cpuPerRecordUs.off).toFixed(2).padStart(7)} µs CPU/record`,
  )
  console.log(
    `median metrics on  ${median(results.on).toFixed(0).padStart(9)} records/s ${median(cpuPerRecordUs.on).toFixed(2).padStart(7)} µs CPU/record`,
  )
  console.log(
    `${scrapeMs.length} scrapes of /metrics, median ${median(scrapeMs).toFixed(1)} ms, max ${Math.max(...scrapeMs).toFixed(1)} ms`,
  )
  console.log(
    `median of the rounds' on/off ratios: throughput ${percent(throughputRatio)}, CPU per record ${percent(cpuRatio)}   target: within 3%`,
  )
}

async function main(): Promise<void> {
  console.log(
    `request observer: ${(observerCostNs() / 1000).toFixed(2)} µs per produce request (4 partitions)\n`,
  )
  const binary = perfBinary()
  const dataDir = mkdtempSync(join(tmpdir(), 'tidelog-metrics-bench-'))
  const off = await startTidelog(join(dataDir, 'off'), false)
  const on = await startTidelog(join(dataDir, 'on'), true)
  console.log(
    `${records} records of 1 KiB per round, acks=1; metrics scraped every 1 s from ${on.metricsUrl}\n`,
  )
  const results = { off: [] as number[], on: [] as number[] }
  const cpuPerRecordUs = { off: [] as number[], on: [] as number[] }
  const scrapeMs: number[] = []
  try {
    // Round 0 warms both brokers up and is not counted.
    for (let round = 0; round <= rounds; round++) {
      // Alternate which goes first, so drift on a shared machine hits both alike.
      const order: ('off' | 'on')[] = round % 2 === 0 ? ['off', 'on'] : ['on', 'off']
      for (const which of order) {
        const broker = which === 'on' ? on : off
        const stopScraping = broker.metricsUrl ? scrapeEverySecond(broker.metricsUrl, scrapeMs) : () => {}
        const cpuBefore = cpuSeconds(broker.child.pid!)
        const recordsPerSec = await produce(binary, broker.bootstrap, `bench-${round}`)
        const cpuUs = ((cpuSeconds(broker.child.pid!) - cpuBefore) / records) * 1e6
        stopScraping()
        const label = round === 0 ? 'warm-up' : `round ${round}`
        console.log(
          `${label.padEnd(8)} metrics ${which.padEnd(3)} ${recordsPerSec.toFixed(0).padStart(9)} records/s ${cpuUs.toFixed(2).padStart(7)} µs CPU/record`,
        )
        if (round === 0) continue
        results[which].push(recordsPerSec)
        cpuPerRecordUs[which].push(cpuUs)
      }
    }
    printVerdict(results, cpuPerRecordUs, scrapeMs)
  } finally {
    await stopTidelog(on)
    await stopTidelog(off)
    rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
