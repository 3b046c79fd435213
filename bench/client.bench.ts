/**
 * tidelog's client beside librdkafka on the same workloads, against one broker and against
 * three (RF 3, min.insync.replicas 2), brokers in this process as in bench/broker.bench.ts
 * and bench/cluster.bench.ts. Each client runs as its own process: the native load
 * generator (bench/native/rdkafka-perf.c) and `tidelog bench` (bin/tidelog.js, built).
 * Prints, per workload, records/s, MB/s and delivery latency p50/p99/p99.9 for both, and
 * the tidelog client's own CPU, so its overhead is visible.
 *
 * With --repeat N each workload runs N times, the two clients alternating (which goes first
 * flips each round) so a loaded machine hurts both alike, and the medians are printed.
 * CPU per record is user + system time over records, in microseconds.
 *
 *   npm run build && node dist/bench/client.bench.js [--records N] [--steady-records N]
 *     [--repeat N] [--brokers 1|3|both] [--max-rate-only]
 */
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs, promisify } from 'node:util'
import { type Cluster, startCluster } from '../src/server/cluster.js'
import { perfBinary } from './load-generator.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '300000' },
    'steady-records': { type: 'string', default: '20000' },
    repeat: { type: 'string', default: '1' },
    brokers: { type: 'string', default: 'both' },
    'max-rate-only': { type: 'boolean', default: false },
  },
})
const repeat = Number(values.repeat)
if (!Number.isInteger(repeat) || repeat < 1)
  throw new Error(`--repeat must be a positive integer, got ${values.repeat}`)
if (!['1', '3', 'both'].includes(values.brokers))
  throw new Error(`--brokers must be 1, 3 or both, got ${values.brokers}`)
const records = Number(values.records)
const steadyRecords = Number(values['steady-records'])
const run = promisify(execFile)

interface Figures {
  recordsPerSec: number
  mbPerSec: number
  p50Ms?: number
  p99Ms?: number
  p999Ms?: number
  cpuPct?: number
  cpuUsPerRecord?: number
}

/** GNU time, when installed, gives the native client's CPU (user + system) beside ours. */
const GNU_TIME = '/usr/bin/time'

async function rdkafka(binary: string, args: string[]): Promise<Figures> {
  const timed = existsSync(GNU_TIME)
  const { stdout, stderr } = timed
    ? await run(GNU_TIME, ['-f', 'CPU %U %S', binary, ...args], { encoding: 'utf8', maxBuffer: 1 << 20 })
    : await run(binary, args, { encoding: 'utf8', maxBuffer: 1 << 20 })
  const figures = JSON.parse(stdout.trim().split('\n').at(-1)!) as Figures & { seconds?: number }
  // rdkafka-perf counts 10^6-byte MB; tidelog bench (as kafka-producer-perf-test) 2^20.
  figures.mbPerSec = (figures.mbPerSec * 1e6) / 1048576
  const cpu = /CPU ([\d.]+) ([\d.]+)/.exec(stderr)
  if (cpu && figures.seconds) {
    // Over the whole process (start-up and warm-up included), so slightly high.
    figures.cpuPct = Math.round(((Number(cpu[1]) + Number(cpu[2])) / figures.seconds) * 100)
    if (figures.recordsPerSec > 0)
      figures.cpuUsPerRecord =
        ((Number(cpu[1]) + Number(cpu[2])) * 1e6) / (figures.recordsPerSec * figures.seconds)
  }
  return figures
}

async function tidelog(args: string[]): Promise<Figures> {
  const { stdout } = await run(
    process.execPath,
    [join(root, 'bin', 'tidelog.js'), 'bench', ...args, '--json', '--interval-ms', '60000'],
    {
      encoding: 'utf8',
      maxBuffer: 1 << 20,
    },
  )
  const r = JSON.parse(stdout)
  return {
    recordsPerSec: r.recordsPerSec,
    mbPerSec: r.mbPerSec,
    p50Ms: r.latencyMs?.p50,
    p99Ms: r.latencyMs?.p99,
    p999Ms: r.latencyMs?.p999,
    cpuPct: r.cpu.percentOfOneCore,
    cpuUsPerRecord: r.records > 0 ? ((r.cpu.userMs + r.cpu.systemMs) * 1000) / r.records : undefined,
  }
}

function cell(f: Figures): string {
  const latency = f.p50Ms === undefined ? '' : `  ${f.p50Ms}/${f.p99Ms}/${f.p999Ms} ms`
  const cpu =
    f.cpuPct === undefined
      ? ''
      : `  cpu ${f.cpuPct}%${f.cpuUsPerRecord === undefined ? '' : ` ${f.cpuUsPerRecord.toFixed(2)} us/rec`}`
  return `${Math.round(f.recordsPerSec)} rec/s ${Number(f.mbPerSec).toFixed(1)} MB/s${latency}${cpu}`
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** Each figure's median over the runs (figure by figure, so not one run's row). */
function medianFigures(runs: Figures[]): Figures {
  const of = (key: keyof Figures): number | undefined => {
    const present = runs.map((r) => r[key]).filter((v): v is number => v !== undefined)
    return present.length === 0 ? undefined : Number(median(present).toFixed(3))
  }
  return {
    recordsPerSec: of('recordsPerSec')!,
    mbPerSec: of('mbPerSec')!,
    p50Ms: of('p50Ms'),
    p99Ms: of('p99Ms'),
    p999Ms: of('p999Ms'),
    cpuPct: of('cpuPct'),
    cpuUsPerRecord: of('cpuUsPerRecord'),
  }
}

function row(name: string, native: Figures, ours: Figures): void {
  const ratio = native.mbPerSec > 0 ? `  (${(ours.mbPerSec / native.mbPerSec).toFixed(2)}x` : '  ('
  const cpuRatio =
    native.cpuUsPerRecord && ours.cpuUsPerRecord
      ? `, cpu/rec ${(ours.cpuUsPerRecord / native.cpuUsPerRecord).toFixed(2)}x)`
      : ')'
  console.log(`${name.padEnd(34)} ${cell(native).padEnd(58)} ${cell(ours)}${ratio}${cpuRatio}`)
}

/** Runs both clients `repeat` times, alternating which goes first, and prints the medians. */
async function compare(
  name: string,
  native: (round: number) => Promise<Figures>,
  ours: (round: number) => Promise<Figures>,
): Promise<void> {
  const nativeRuns: Figures[] = []
  const ourRuns: Figures[] = []
  for (let round = 0; round < repeat; round++) {
    if (round % 2 === 0) {
      nativeRuns.push(await native(round))
      ourRuns.push(await ours(round))
    } else {
      ourRuns.push(await ours(round))
      nativeRuns.push(await native(round))
    }
    if (repeat > 1) console.log(`  run ${round + 1}: ${cell(nativeRuns.at(-1)!)} | ${cell(ourRuns.at(-1)!)}`)
  }
  row(name, medianFigures(nativeRuns), medianFigures(ourRuns))
}

async function workloads(binary: string, label: string, cluster: Cluster, brokers: number): Promise<void> {
  const b = cluster.bootstrapServers
  const common = (lingerMs: number) => [
    '--bootstrap-server',
    b,
    '--record-size',
    '1024',
    '--partitions',
    '4',
    '--batch-size',
    '1000000',
    '--linger-ms',
    String(lingerMs),
  ]
  const rf = brokers === 3 ? ['--replication-factor', '3'] : []
  console.log(`\n${label}: ${b}`)
  console.log(
    `${'workload'.padEnd(34)} ${'librdkafka (rdkafka-perf)'.padEnd(44)} tidelog client (tidelog bench)`,
  )
  const acksModes = values['max-rate-only'] ? ['1'] : ['1', 'all']
  for (const acks of acksModes) {
    const rdAcks = acks === 'all' ? '-1' : acks
    await compare(
      `produce 1 KiB max rate acks=${acks}`,
      (round) =>
        rdkafka(binary, ['produce', b, `rd-max-${acks}-${round}`, String(records), '1024', rdAcks, '0', '5']),
      (round) =>
        tidelog([
          'produce',
          '--topic',
          `tl-max-${acks}-${round}`,
          '--num-records',
          String(records),
          '--acks',
          acks,
          ...common(5),
          ...rf,
        ]),
    )
  }
  if (!values['max-rate-only']) {
    for (const acks of ['1', 'all']) {
      const rdAcks = acks === 'all' ? '-1' : acks
      await compare(
        `produce at 2,000/s acks=${acks}`,
        (round) =>
          rdkafka(binary, [
            'produce',
            b,
            `rd-steady-${acks}-${round}`,
            String(steadyRecords),
            '1024',
            rdAcks,
            '2000',
            '0',
          ]),
        (round) =>
          tidelog([
            'produce',
            '--topic',
            `tl-steady-${acks}-${round}`,
            '--num-records',
            String(steadyRecords),
            '--throughput',
            '2000',
            '--acks',
            acks,
            ...common(0),
            ...rf,
          ]),
      )
    }
  }
  // Both consumers read the same records: those rdkafka-perf wrote at max rate, acks=1.
  await compare(
    'consume 1 KiB',
    (round) => rdkafka(binary, ['consume', b, `rd-max-1-${round}`, '4', String(records)]),
    (round) =>
      tidelog([
        'consume',
        '--topic',
        `rd-max-1-${round}`,
        '--num-records',
        String(records),
        '--bootstrap-server',
        b,
      ]),
  )
}

async function main(): Promise<void> {
  if (!existsSync(join(root, 'dist', 'src', 'cli', 'main.js'))) throw new Error('run npm run build first')
  const binary = perfBinary()
  console.log(
    `${records} records of 1 KiB per max-rate run, ${steadyRecords} at 2,000/s; latency p50/p99/p99.9 is send to acknowledgement`,
  )
  if (values.brokers !== '3') {
    const one = await startCluster({ brokers: 1, port: 0, properties: { 'num.partitions': 4 } })
    try {
      await workloads(binary, '1 broker', one, 1)
    } finally {
      await one.stop()
    }
  }
  if (values.brokers === '1') return
  const three = await startCluster({
    brokers: 3,
    port: 0,
    properties: { 'num.partitions': 4, 'default.replication.factor': 3, 'min.insync.replicas': 2 },
  })
  try {
    await workloads(binary, '3 brokers, RF 3, min.insync.replicas 2', three, 3)
  } finally {
    await three.stop()
  }
}

if (!existsSync('/usr/include/librdkafka/rdkafka.h')) {
  console.error('bench needs librdkafka-dev (apt-get install librdkafka-dev) and a C compiler')
  process.exit(1)
}
await main()
