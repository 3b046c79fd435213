/**
 * `npm run bench:memory`: the report's three memory rows for tidelog alone (issue 34), with
 * what the resident set consists of, without running Kafka and JetStream beside it.
 *
 * The same load as bench/report.bench.ts's RF 3 rows: 3 `tidelog broker` processes on a
 * private etcd, RF 3, min.insync.replicas=2, 4 partitions, librdkafka's load generator with
 * 1 KiB records; a topic created 5 s before the idle figure, the steady 2,000/s runs, then
 * the acks=all throughput run. The largest broker's VmRSS is read idle, after the
 * throughput run and `--settle-ms` later, as in the report. With `--breakdown` each figure
 * also gives /proc/PID/status's RssAnon, RssFile and RssShmem, the largest mappings of
 * /proc/PID/smaps, and process.memoryUsage() and V8's heap spaces from a probe the brokers
 * load (bench/memory-probe.mjs, through TIDELOG_BROKER_NODE_FLAGS).
 *
 *   node dist/bench/memory.bench.js [--quick] [--breakdown] [--settle-ms N] [--set key=value ...]
 */
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { withEtcdCluster } from '../test/helpers/broker-process.js'
import { waitForIsrAt } from './cluster-probes.js'
import { perf, perfBinary } from './load-generator.js'
import { processStats } from './process-stats.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    breakdown: { type: 'boolean', default: false },
    /** With --breakdown: a full GC in each broker after the last figure, and the figure again. */
    gc: { type: 'boolean', default: false },
    /**
     * With --breakdown: a heap snapshot of each broker after the last figure, left in
     * --snapshot-dir. Writing one raises the broker's RSS (by 30 MiB in one run), so a --gc
     * figure after it is no figure of the broker's own: take the two in separate runs.
     */
    'snapshot-dir': { type: 'string' },
    'settle-ms': { type: 'string' },
    /** A broker property, `key=value`, over the defaults (repeatable): to compare settings. */
    set: { type: 'string', multiple: true },
  },
})
const quick = values.quick
const SIZE = {
  throughputRecords: quick ? 30_000 : 150_000,
  steadyRate: 2000,
  steadySeconds: quick ? 2 : 4,
  steadyRuns: quick ? 2 : 4,
  topicAgeMs: 5000,
  settleMs: Number(values['settle-ms'] ?? (quick ? 3000 : 10_000)),
}
const RECORD_BYTES = 1024
const MiB = 1024 * 1024
const probeDir = join(tmpdir(), `tidelog-memory-probe-${process.pid}`)
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

const produceArgs = (bootstrap: string, topic: string, count: number, rate: number, lingerMs: number) => [
  'produce',
  bootstrap,
  topic,
  String(count),
  String(RECORD_BYTES),
  '-1',
  String(rate),
  String(lingerMs),
]

const kib = (text: string, field: string): number =>
  Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? 0)
const mib = (bytes: number): string => (bytes / MiB).toFixed(1)

/** VmRSS of `pid` in bytes, 0 once it has exited. */
function rssBytes(pid: number): number {
  try {
    return kib(readFileSync(`/proc/${pid}/status`, 'utf8'), 'VmRSS') * 1024
  } catch {
    return 0
  }
}

/** Minor page faults of the processes so far (/proc/PID/stat's 10th field). */
function minorFaults(pids: number[]): number {
  let faults = 0
  for (const pid of pids) {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    faults += Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[7])
  }
  return faults
}

/** The mappings of `pid` holding the most resident memory, by file (or [heap], [anon]). */
function largestMappings(pid: number, count: number): string[] {
  const byName = new Map<string, number>()
  let name = ''
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (header) name = header[1] || '[anon]'
    else if (line.startsWith('Rss:')) byName.set(name, (byName.get(name) ?? 0) + kib(line, 'Rss') * 1024)
  }
  return [...byName]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([n, bytes]) => `${mib(bytes)} ${n}`)
}

function breakdown(pid: number): string {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const lines = [
    `  pid ${pid}: VmRSS ${mib(kib(status, 'VmRSS') * 1024)} = anon ${mib(kib(status, 'RssAnon') * 1024)}` +
      ` + file ${mib(kib(status, 'RssFile') * 1024)} + shmem ${mib(kib(status, 'RssShmem') * 1024)} MiB`,
  ]
  try {
    const probe = JSON.parse(readFileSync(join(probeDir, `${pid}.json`), 'utf8'))
    const mu = probe.memoryUsage
    lines.push(
      `  memoryUsage (${Date.now() - probe.at} ms old): rss ${mib(mu.rss)} heapTotal ${mib(mu.heapTotal)}` +
        ` heapUsed ${mib(mu.heapUsed)} external ${mib(mu.external)} arrayBuffers ${mib(mu.arrayBuffers)}` +
        ' MiB',
      `  V8 spaces (physical MiB): ${Object.entries(probe.spaces as Record<string, number>)
        .map(([space, bytes]) => `${space} ${mib(bytes)}`)
        .join(', ')}`,
    )
  } catch {
    lines.push('  (no probe output)')
  }
  lines.push(...largestMappings(pid, 8).map((m) => `    ${m}`))
  return lines.join('\n')
}

/** Waits until the probe in `pid` has written its figures after `askedMs` (it did what was asked first). */
async function probeAfter(pid: number, askedMs: number): Promise<void> {
  for (let waitedMs = 0; waitedMs < 60_000; waitedMs += 100) {
    try {
      if (JSON.parse(readFileSync(join(probeDir, `${pid}.json`), 'utf8')).at > askedMs) return
    } catch {
      // Being written: read again.
    }
    await sleep(100)
  }
  throw new Error(`the memory probe of ${pid} did not answer`)
}

function report(label: string, pids: number[]): void {
  const largest = Math.max(...pids.map(rssBytes))
  console.log(
    `| RSS of a broker, ${label} | MiB | ${mib(largest)} | load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} |`,
  )
  if (values.breakdown) for (const pid of pids) console.log(breakdown(pid))
}

async function main(): Promise<void> {
  const binary = perfBinary()
  rmSync(probeDir, { recursive: true, force: true })
  mkdirSync(probeDir, { recursive: true })
  if (values.breakdown) {
    process.env.MEMORY_PROBE_DIR = probeDir
    process.env.TIDELOG_BROKER_NODE_FLAGS = `--expose-gc --import=${join(root, 'bench', 'memory-probe.mjs')}`
  }
  const properties: Record<string, string | number> = {
    'default.replication.factor': 3,
    'min.insync.replicas': 2,
    'num.partitions': 4,
  }
  for (const setting of values.set ?? []) {
    const at = setting.indexOf('=')
    if (at < 1) throw new Error(`--set ${setting}: expected key=value`)
    properties[setting.slice(0, at)] = setting.slice(at + 1)
  }
  await withEtcdCluster({ brokers: 3, properties }, async (cluster) => {
    const pids = () => cluster.brokers.filter((b) => b.isRunning).map((b) => b.current.pid)
    const bootstrap = cluster.liveBootstrap
    const created = performance.now()
    await perf(binary, produceArgs(bootstrap, 'steady', 1, 0, 0))
    await sleep(Math.max(0, SIZE.topicAgeMs - (performance.now() - created)))
    report('idle', pids())
    for (let i = 0; i < SIZE.steadyRuns; i++)
      await perf(
        binary,
        produceArgs(bootstrap, 'steady', SIZE.steadyRate * SIZE.steadySeconds, SIZE.steadyRate, 0),
      )
    await perf(binary, produceArgs(bootstrap, 'throughput', 1000, 0, 5))
    await waitForIsrAt(bootstrap, 'throughput', 3)
    const cpuBefore = processStats(pids()).cpuSeconds
    const faultsBefore = minorFaults(pids())
    const throughput = await perf(binary, produceArgs(bootstrap, 'throughput', SIZE.throughputRecords, 0, 5))
    // CPU and page faults per MB hold on a loaded machine where the MB/s does not: what a
    // malloc setting costs (a Buffer in pages of its own is faulted in afresh).
    const cpuMs = (processStats(pids()).cpuSeconds - cpuBefore) * 1000
    const faults = minorFaults(pids()) - faultsBefore
    const mb = (SIZE.throughputRecords * RECORD_BYTES) / 1e6
    console.log(
      `throughput run: ${throughput.mbPerSec} MB/s, brokers' CPU ${(cpuMs / mb).toFixed(2)} ms and ` +
        `${Math.round(faults / mb)} minor faults per MB produced`,
    )
    report('after the throughput run', pids())
    await sleep(SIZE.settleMs)
    report(`${SIZE.settleMs / 1000} s later`, pids())
    if (values.breakdown && values['snapshot-dir'] !== undefined) {
      const asked = Date.now()
      for (const pid of pids()) writeFileSync(join(probeDir, `${pid}.snapshot`), '')
      for (const pid of pids()) await probeAfter(pid, asked)
      mkdirSync(values['snapshot-dir'], { recursive: true })
      for (const pid of pids())
        copyFileSync(
          join(probeDir, `${pid}.heapsnapshot`),
          join(values['snapshot-dir'], `${pid}.heapsnapshot`),
        )
    }
    if (values.breakdown && values.gc) {
      const asked = Date.now()
      for (const pid of pids()) writeFileSync(join(probeDir, `${pid}.gc`), '')
      for (const pid of pids()) await probeAfter(pid, asked)
      report('after a full GC', pids())
    }
  })
  rmSync(probeDir, { recursive: true, force: true })
}

await main()
