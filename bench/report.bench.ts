/**
 * `npm run bench:report`: issue 19's replicated-path and RF 1 suite, tidelog beside Apache
 * Kafka 4.4 and NATS JetStream measured in the same run (issue 34), written to
 * docs/bench/report.md and docs/bench/report.svg, each figure also as a ratio to Kafka's.
 *
 *   - RF 3, acks=all, min.insync.replicas=2, 1 KiB records, librdkafka's load generator
 *     (bench/native/rdkafka-perf.c): p50/p99 at a steady 2,000 records/s in runs one after
 *     another on a topic created 5 s earlier (the slow start), throughput, then a restarted
 *     follower's catch-up. tidelog: 3 `tidelog broker` processes on a private etcd. Kafka:
 *     3 KRaft combined nodes (scripts/kafka-reference.sh) with Kafka's own JVM settings
 *     (-Xmx1G -Xms1G, G1), defaults apart from ports and data dirs. JetStream R3: 3
 *     `nats-server` processes, file storage, driven by bench/native/nats-perf.go.
 *   - RF 1, one broker process: librdkafka produce and consume MB/s, p50/p99 at 2,000/s;
 *     JetStream R1 publishes only (nats-perf has no consumer).
 *   - Each system's memory (the largest broker process's RSS idle, after the throughput run
 *     and 10 s after it) and CPU (seconds per MB in the throughput run, microseconds per
 *     record at 2,000/s with linger.ms 0, each record about one produce request), counted
 *     over every process of the system (tidelog's etcd too; Kafka's controllers are in its
 *     nodes).
 *   - Start to the first acks=all write answered: `tidelog start` (embedded store) and one
 *     Kafka node (its storage format included: Kafka needs it before a first start).
 *
 * Each measurement is repeated (--repeat, default 2; 1 with --quick) and its median kept.
 * A peer is skipped, and the report says so, when it cannot run here: JetStream without
 * `nats-server` or `go` (with Debian's golang-github-nats-io-go-nats-dev), Kafka without
 * Java 17 and Maven (scripts/kafka-reference.sh install).
 *
 *   node dist/bench/report.bench.js [--quick] [--repeat N] [--out DIR] [--no-kafka]
 *     [--latency-only] [--consume-only] [--no-jetstream] [--no-worker-threads]
 *
 * tidelog's worker-thread mode (`tidelog start --brokers 3 --worker-threads`, issue 34 item 3)
 * has a column of its own for the RF 3 and CPU rows.
 *
 * `--latency-only` runs just the paced RF 3 acks=all runs (the slow start and the steady
 * runs), each round on a fresh cluster, and prints them without writing the report files:
 * the quick way to measure the first seconds after CreateTopics, several rounds at a time.
 * `--consume-only` runs just the RF 1 produce and consume rows of tidelog and Kafka (which
 * goes first alternates from round to round) and prints them without writing the report files.
 */
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs, promisify } from 'node:util'
import {
  accepts,
  type EtcdCluster,
  freePort,
  spawnTidelog,
  withEtcdCluster,
} from '../test/helpers/broker-process.js'
import {
  KAFKA_REFERENCE_VERSION,
  type KafkaReference,
  startKafkaReference,
} from '../test/helpers/kafka-reference.js'
import { partitionSizes, waitForIsrAt } from './cluster-probes.js'
import { perfBinary } from './load-generator.js'
import { describePageCost, freshPageSystemSecondsPerGiB } from './page-cost.js'
import { processStats, threadCpuSeconds } from './process-stats.js'
import { have, KAFKA_JVM, kafkaAvailable, kafkaNodePids } from './reference-kafka.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    repeat: { type: 'string' },
    out: { type: 'string', default: join(root, 'docs', 'bench') },
    /** MiB written past the stopped follower (default 256, 24 with --quick). */
    'catchup-mib': { type: 'string' },
    /** Leave Apache Kafka out (a machine without Java 17 and Maven). */
    'no-kafka': { type: 'boolean', default: false },
    /** Leave JetStream out. */
    'no-jetstream': { type: 'boolean', default: false },
    /** Leave out tidelog's worker-thread mode (`tidelog start --brokers 3 --worker-threads`). */
    'no-worker-threads': { type: 'boolean', default: false },
    /** Only the paced RF 3 runs (run 1 after CreateTopics, then the steady ones); no report files. */
    'latency-only': { type: 'boolean', default: false },
    /** Only the RF 1 produce and consume rows, tidelog and Kafka; no report files. */
    'consume-only': { type: 'boolean', default: false },
    /**
     * Records sent at the steady rate to another topic before the steady topic is created:
     * brokers whose code has run the produce path, to tell warm-up from a new partition's cost.
     */
    'warm-records': { type: 'string', default: '0' },
  },
})
const quick = values.quick
const latencyOnly = values['latency-only']
const consumeOnly = values['consume-only']
const repeat = Number(values.repeat ?? (quick ? 1 : 2))
const SIZE = {
  throughputRecords: quick ? 30_000 : 150_000,
  steadyRate: 2000,
  steadySeconds: quick ? 2 : 4,
  steadyRuns: quick ? 2 : 4,
  // 256 MiB as in bench:cluster, where issue 19's "about 85 MB/s" was measured: at 96 MiB
  // the follower's 300-500 ms of process start before its first fetch leave too little
  // time for 200 MB/s whatever the transfer rate (96 MiB at 200 MB/s is 503 ms in all).
  catchUpMiB: Number(values['catchup-mib'] ?? (quick ? 24 : 256)),
  // 500,000 records (about 0.5-1 s to consume): over 250,000 the consume figure was mostly how
  // the machine scheduled two processes in a third of a second (docs/notes/performance.md).
  rf1Records: quick ? 50_000 : 500_000,
  topicAgeMs: 5000,
  /** How long after the throughput run memory is read again (does it return?). */
  settleMs: quick ? 3000 : 10_000,
}
const RECORD_BYTES = 1024
/**
 * librdkafka's defaults for a consumer's fetches (`kcat -X dump`: fetch.message.max.bytes,
 * alias max.partition.fetch.bytes, 1 MiB; queued.max.messages.kbytes 64 MiB), set over
 * rdkafka-perf's larger ones.
 */
const LIBRDKAFKA_DEFAULT_FETCH = ['max.partition.fetch.bytes=1048576', 'queued.max.messages.kbytes=65536']

type PerfResult = Record<string, number>
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  if (s.length === 0) return Number.NaN
  const middle = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? s[middle] : (s[middle - 1] + s[middle]) / 2
}

/** The JetStream publisher, or why there is none. */
function natsPerf(): { binary: string } | { missing: string } {
  if (!have('nats-server')) return { missing: 'nats-server is not installed (Debian: nats-server)' }
  if (!have('go')) return { missing: 'go is not installed (Debian: golang-go)' }
  const gopath = '/usr/share/gocode'
  if (!existsSync(join(gopath, 'src', 'github.com', 'nats-io', 'nats.go')))
    return { missing: 'the Go NATS client is not installed (Debian: golang-github-nats-io-go-nats-dev)' }
  const out = join(root, '.build', 'nats-perf')
  try {
    execFileSync('go', ['build', '-o', out, join(root, 'bench', 'native', 'nats-perf.go')], {
      env: { ...process.env, GOPATH: gopath, GO111MODULE: 'off', GOCACHE: join(tmpdir(), 'tidelog-gocache') },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
  } catch (error) {
    return {
      missing: `nats-perf.go did not build: ${String((error as { stderr?: Buffer }).stderr ?? error)}`,
    }
  }
  return { binary: out }
}

/** The longest a load generator may take: every run here takes seconds, so longer is a hang. */
const RUN_TIMEOUT_MS = 120_000

async function run(binary: string, args: string[]): Promise<PerfResult> {
  const { stdout, stderr } = await promisify(execFile)(binary, args, {
    encoding: 'utf8',
    maxBuffer: 1 << 20,
    timeout: RUN_TIMEOUT_MS,
    killSignal: 'SIGKILL',
  })
  // rdkafka-perf's per-N-deliveries timeline (RDKAFKA_PERF_TIMELINE=N), where the first seconds go.
  if (latencyOnly && process.env.RDKAFKA_PERF_TIMELINE) process.stdout.write(stderr)
  return JSON.parse(stdout.trim().split('\n').at(-1)!)
}

/**
 * Runs one round of a peer. A failed or hung peer round (nats-perf once waited 8 minutes
 * for an acknowledgement that never came) is noted in the report and its rows keep the
 * other rounds, rather than losing the other systems' figures of the whole run.
 */
async function peerRound(name: string, round: number, body: () => Promise<void>): Promise<void> {
  try {
    await body()
  } catch (error) {
    const why = error instanceof Error ? error.message.split('\n')[0] : String(error)
    console.log(`${name} round ${round} failed: ${why}`)
    notes.push(`${name} round ${round} failed (${why}); its rows are the other rounds' figures.`)
  }
}

// ---- results ---------------------------------------------------------------------------

const THREADS = 'tidelog --worker-threads' as const
const SYSTEMS = ['tidelog', THREADS, 'Kafka', 'JetStream'] as const
type System = (typeof SYSTEMS)[number]
/**
 * The measures the worker-thread mode is run for: its one process holds all three brokers
 * and the embedded store, so the per-broker RSS and the follower restart do not apply, and
 * it needs 2 brokers or more (no RF 1 rows).
 */
const THREADS_MEASURES = [/^RF 3 acks=all/, /^CPU per/]

interface Row {
  readonly measure: string
  readonly unit: string
  /** Whether a larger figure is the better one (throughput) or a smaller (latency, memory). */
  readonly higherIsBetter: boolean
  readonly figures: Record<System, number[]>
  /** Systems this row does not apply to (JetStream has no consumer row). */
  readonly without: ReadonlySet<System>
  readonly target: string
}
const rows: Row[] = []
function record(
  measure: string,
  unit: string,
  options: { target?: string; without?: readonly System[] } = {},
): Row {
  let row = rows.find((r) => r.measure === measure)
  if (!row) {
    row = {
      measure,
      unit,
      higherIsBetter: unit === 'MB/s',
      figures: { tidelog: [], [THREADS]: [], Kafka: [], JetStream: [] },
      without: new Set<System>([
        ...(options.without ?? []),
        ...(THREADS_MEASURES.some((m) => m.test(measure)) ? [] : [THREADS]),
      ]),
      target: options.target ?? '',
    }
    rows.push(row)
  }
  return row
}
const notes: string[] = []
const loadAtStart = loadavg()[0]

/** CPU and memory of one system's processes over one stretch of load. */
class Usage {
  private readonly cpuAtStart: number
  constructor(private readonly pids: () => number[]) {
    this.cpuAtStart = processStats(pids()).cpuSeconds
  }
  cpuSeconds(): number {
    return processStats(this.pids()).cpuSeconds - this.cpuAtStart
  }
}
const rssMiB = (pids: readonly number[]): number =>
  Number((processStats(pids).maxRssBytes / (1024 * 1024)).toFixed(1))

// ---- the replicated path, any Kafka-protocol system ----------------------------------------

const produceArgs = (
  bootstrap: string,
  topic: string,
  count: number,
  acks: string,
  rate: number,
  lingerMs: number,
) => ['produce', bootstrap, topic, String(count), String(RECORD_BYTES), acks, String(rate), String(lingerMs)]

/** A running Kafka-protocol cluster of 3 as the RF 3 rows need it. */
interface Rf3Cluster {
  readonly system: 'tidelog' | typeof THREADS | 'Kafka'
  readonly bootstrap: string
  /** Every process of the system (brokers, and tidelog's etcd). */
  pids(): number[]
  /** One broker process's pids (the largest RSS is read over these). */
  brokerPids(): number[]
  /** The follower that catch-up stops and restarts (none: no catch-up or per-broker RSS rows). */
  readonly follower?: {
    readonly address: string
    stop(): Promise<void>
    start(): Promise<void>
  }
  /** Each broker's output lines so far (tidelog only: V8's --trace-opt lines per run). */
  brokerLines?(): readonly string[][]
}

async function rf3Rows(perf: string, cluster: Rf3Cluster, round: number): Promise<void> {
  const { system, bootstrap } = cluster
  // Slow start: a topic created 5 s before the first steady run, as in the issue.
  const steadyTopic = `steady-${round}`
  const warmRecords = Number(values['warm-records'])
  if (warmRecords > 0)
    await run(perf, produceArgs(bootstrap, `warm-${round}`, warmRecords, '-1', SIZE.steadyRate, 0))
  const created = performance.now()
  await run(perf, produceArgs(bootstrap, steadyTopic, 1, '-1', 0, 0))
  await sleep(Math.max(0, SIZE.topicAgeMs - (performance.now() - created)))
  const rss = (measure: string, target: string): void => {
    if (cluster.follower)
      record(measure, 'MiB', { target }).figures[system].push(rssMiB(cluster.brokerPids()))
  }
  rss('RSS of a broker, idle', '<= 1/5 of Kafka')
  const steadyUsage = new Usage(() => cluster.pids())
  for (let i = 1; i <= SIZE.steadyRuns; i++) {
    const cpuBefore = threadCpuSeconds(cluster.brokerPids())
    const linesBefore = cluster.brokerLines?.().map((lines) => lines.length)
    const startedUs = process.hrtime.bigint() / 1000n
    const startedWallMs = Date.now()
    const result = await run(
      perf,
      produceArgs(bootstrap, steadyTopic, SIZE.steadyRate * SIZE.steadySeconds, '-1', SIZE.steadyRate, 0),
    )
    // Monotonic microseconds, the clock of a broker's --cpu-prof, to cut a profile per run.
    const cpuAfter = threadCpuSeconds(cluster.brokerPids())
    // With TIDELOG_BROKER_NODE_FLAGS=--trace-opt: what V8 optimized during this run, per broker.
    const optimized = cluster
      .brokerLines?.()
      .map((lines, b) =>
        lines.slice(linesBefore?.[b] ?? 0).filter((l) => l.startsWith('[completed optimizing')),
      )
    const deopts = cluster
      .brokerLines?.()
      .map((lines, b) => lines.slice(linesBefore?.[b] ?? 0).filter((l) => l.startsWith('[bailout')))
    if (latencyOnly && deopts?.some((l) => l.length > 0))
      console.log(
        `${system} run ${i}: deopts per broker ${deopts.map((l) => l.length).join(', ')}: ` +
          deopts[0]
            .map((l) =>
              /reason: ([^)]*)\).*deoptimizing[^<]*<JSFunction ([^ >]*)/.exec(l)?.slice(1).join(' in '),
            )
            .join('; '),
      )
    const invalidated = cluster
      .brokerLines?.()
      .map((lines, b) =>
        lines.slice(linesBefore?.[b] ?? 0).filter((l) => l.includes('marking dependent code')),
      )
    if (latencyOnly && invalidated?.some((l) => l.length > 0))
      console.log(
        `${system} run ${i}: optimized code dropped (dependencies) per broker ${invalidated.map((l) => l.length).join(', ')}: ` +
          invalidated[0].map((l) => /reason: ([^\]]*)/.exec(l)?.[1]).join('; '),
      )
    if (latencyOnly && optimized?.some((l) => l.length > 0))
      console.log(
        `${system} run ${i}: functions optimized per broker ${optimized.map((l) => l.length).join(', ')}: ` +
          optimized[0].map((l) => /<JSFunction ([^ >]*)/.exec(l)?.[1]).join(' '),
      )
    if (latencyOnly)
      console.log(
        `${system} run ${i}: brokers' CPU s, main threads ${(cpuAfter.main - cpuBefore.main).toFixed(2)}, ` +
          `other threads ${(cpuAfter.others - cpuBefore.others).toFixed(2)}`,
      )
    if (latencyOnly)
      console.log(
        `${system} run ${i}: p50 ${result.p50Ms} p99 ${result.p99Ms} ms, monotonic ${startedUs}-${process.hrtime.bigint() / 1000n} µs, wall ${startedWallMs}-${Date.now()} ms, load ${loadavg()[0].toFixed(1)}`,
      )
    const target = i === 1 || i === SIZE.steadyRuns ? '<= Kafka, <= JetStream' : ''
    record(`RF 3 acks=all 2,000/s run ${i}: p50`, 'ms', { target }).figures[system].push(result.p50Ms)
    record(`RF 3 acks=all 2,000/s run ${i}: p99`, 'ms', { target }).figures[system].push(result.p99Ms)
  }
  const steadyRecords = SIZE.steadyRuns * SIZE.steadyRate * SIZE.steadySeconds
  record('CPU per acks=all record at 2,000/s (all processes)', 'µs', {
    target: '<= Kafka',
    without: ['JetStream'],
  }).figures[system].push(Math.round((steadyUsage.cpuSeconds() / steadyRecords) * 1e6))
  if (latencyOnly) return
  const topic = `throughput-${round}`
  await run(perf, produceArgs(bootstrap, topic, 1000, '-1', 0, 5))
  await waitForIsrAt(bootstrap, topic, 3)
  const throughputUsage = new Usage(() => cluster.pids())
  const throughput = await run(perf, produceArgs(bootstrap, topic, SIZE.throughputRecords, '-1', 0, 5))
  record('RF 3 acks=all throughput', 'MB/s', { target: '>= 1.5x Kafka, >= 5x JetStream' }).figures[
    system
  ].push(throughput.mbPerSec)
  const mb = (SIZE.throughputRecords * RECORD_BYTES) / 1e6
  record('CPU per MB, RF 3 acks=all throughput (all processes)', 'ms', { without: ['JetStream'] }).figures[
    system
  ].push(Math.round((throughputUsage.cpuSeconds() / mb) * 1000))
  rss('RSS of a broker after the throughput run', '<= 1/5 of Kafka')
  if (!cluster.follower) return
  await sleep(SIZE.settleMs)
  rss(`RSS of a broker ${SIZE.settleMs / 1000} s later`, 'near idle')
  const caughtUp = await catchUp(perf, cluster.bootstrap, cluster.follower, `catchup-${round}`)
  record('catch-up of a restarted follower (process start included)', 'MB/s', {
    target: '>= 2x Kafka',
    without: ['JetStream'],
  }).figures[system].push(caughtUp.withStart)
  record('catch-up from the follower listening', 'MB/s', { without: ['JetStream'] }).figures[system].push(
    caughtUp.fromListening,
  )
}

/** Stops one broker, writes SIZE.catchUpMiB past it, restarts it and times its catch-up (process start included). */
async function catchUp(
  perf: string,
  bootstrap: string,
  follower: NonNullable<Rf3Cluster['follower']>,
  topic: string,
): Promise<{ withStart: number; fromListening: number }> {
  await run(perf, produceArgs(bootstrap, topic, 100, '-1', 0, 5))
  await waitForIsrAt(bootstrap, topic, 3)
  await follower.stop()
  const count = Math.ceil((SIZE.catchUpMiB * 1024 * 1024) / RECORD_BYTES)
  const others = bootstrap.split(',').filter((address) => address !== follower.address)
  await run(perf, produceArgs(others.join(','), topic, count, '1', 0, 5))
  const leaderSizes = new Map<number, bigint>()
  for (const address of others)
    for (const [p, size] of await partitionSizes(address, topic))
      if (size > (leaderSizes.get(p) ?? 0n)) leaderSizes.set(p, size)
  const start = performance.now()
  await follower.start()
  const listening = performance.now()
  for (;;) {
    const sizes = await partitionSizes(follower.address, topic).catch(() => new Map<number, bigint>())
    if ([...leaderSizes].every(([p, size]) => (sizes.get(p) ?? 0n) >= size)) break
    await sleep(20)
  }
  const end = performance.now()
  const mbPerSec = (ms: number): number => Number(((count * RECORD_BYTES) / (ms / 1000) / 1e6).toFixed(1))
  return { withStart: mbPerSec(end - start), fromListening: mbPerSec(end - listening) }
}

async function rf1Rows(
  perf: string,
  system: 'tidelog' | 'Kafka',
  bootstrap: string,
  round: number,
): Promise<void> {
  const topic = `rf1-${round}`
  await run(perf, produceArgs(bootstrap, topic, 1000, '1', 0, 5))
  const produced = await run(perf, produceArgs(bootstrap, topic, SIZE.rf1Records, '1', 0, 5))
  record('RF 1 produce (acks=1)', 'MB/s', { target: '>= 1.5x Kafka' }).figures[system].push(produced.mbPerSec)
  // Twice over the same records, in turns from round to round: with librdkafka's own fetch
  // sizes, and with rdkafka-perf's larger ones, at which the consumer's 40 MB answers are
  // allocated from fresh mmap'd pages each time and its page faults, not the broker, set
  // the figure (docs/notes/performance.md).
  const consumes: [string, string[]][] = [
    ['RF 1 consume (librdkafka default fetch sizes)', LIBRDKAFKA_DEFAULT_FETCH],
    ['RF 1 consume (10 MiB partition fetches)', []],
  ]
  for (const [name, conf] of round % 2 === 0 ? consumes : consumes.toReversed()) {
    const consumed = await run(perf, ['consume', bootstrap, topic, '4', String(SIZE.rf1Records), ...conf])
    record(name, 'MB/s', { target: '>= Kafka', without: ['JetStream'] }).figures[system].push(
      consumed.mbPerSec,
    )
  }
  if (consumeOnly) return
  const steady = await run(
    perf,
    produceArgs(bootstrap, topic, SIZE.steadyRate * SIZE.steadySeconds, '1', SIZE.steadyRate, 0),
  )
  record('RF 1 acks=1 2,000/s (settled): p50', 'ms', { target: '<= Kafka' }).figures[system].push(
    steady.p50Ms,
  )
  record('RF 1 acks=1 2,000/s (settled): p99', 'ms', { target: '<= Kafka' }).figures[system].push(
    steady.p99Ms,
  )
}

/** Waits until `port` accepts, then writes one acks=all record; returns when it is answered. */
async function firstWrite(perf: string, port: number, topic: string): Promise<void> {
  while (!(await accepts(port))) await sleep(5)
  await run(perf, produceArgs(`127.0.0.1:${port}`, topic, 1, '-1', 0, 0))
}

// ---- tidelog ---------------------------------------------------------------------------

function etcdRf3(cluster: EtcdCluster): Rf3Cluster {
  const follower = cluster.brokers[2]
  return {
    system: 'tidelog',
    bootstrap: cluster.liveBootstrap,
    pids: () => [cluster.etcd.pid, ...cluster.brokers.filter((b) => b.isRunning).map((b) => b.current.pid)],
    brokerPids: () => cluster.brokers.filter((b) => b.isRunning).map((b) => b.current.pid),
    follower: {
      address: follower.address,
      stop: async () => {
        await follower.stop()
      },
      start: () => follower.start(),
    },
    brokerLines: () => cluster.brokers.map((b) => b.current.lines),
  }
}

async function tidelogRf3(perf: string, round: number): Promise<void> {
  const properties = {
    'default.replication.factor': 3,
    'min.insync.replicas': 2,
    'num.partitions': 4,
  }
  await withEtcdCluster({ brokers: 3, properties }, async (cluster) => {
    await rf3Rows(perf, etcdRf3(cluster), round)
    // Clean stops, so that a broker's --cpu-prof (TIDELOG_BROKER_NODE_FLAGS) is written.
    if (latencyOnly) for (const broker of cluster.brokers) await broker.stop()
  })
}

/**
 * `tidelog start --brokers 3 --worker-threads` (issue 34 item 3): one process, a broker per
 * worker thread, the embedded store in the main thread. The same settings as the etcd
 * cluster's; only its RF 3 and CPU rows (THREADS_MEASURES).
 */
async function tidelogThreadsRf3(perf: string, round: number): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-bench-threads-'))
  const settings = ['default.replication.factor=3', 'min.insync.replicas=2', 'num.partitions=4']
  const child = spawnTidelog(
    [
      'start',
      '--brokers',
      '3',
      '--worker-threads',
      '--port',
      '0',
      '--http-port=-1',
      '--schema-registry-port=-1',
      '--data-dir',
      dataDir,
      ...settings.flatMap((setting) => ['--set', setting]),
    ],
    { TIDELOG_LOG_LEVEL: 'warn' },
    'tidelog start --worker-threads (bench)',
  )
  try {
    const { line } = await child.waitForLine(/^bootstrap servers: /, 60_000)
    const bootstrap = line.slice('bootstrap servers: '.length).trim()
    await rf3Rows(
      perf,
      { system: THREADS, bootstrap, pids: () => [child.pid], brokerPids: () => [child.pid] },
      round,
    )
  } finally {
    await child.terminate(30_000)
    await rm(dataDir, { recursive: true, force: true })
  }
}

async function tidelogRf1(perf: string, round: number): Promise<void> {
  const properties = { 'default.replication.factor': 1, 'num.partitions': 4 }
  await withEtcdCluster({ brokers: 1, properties }, (cluster) =>
    rf1Rows(perf, 'tidelog', cluster.liveBootstrap, round),
  )
}

/** `tidelog start` on a fresh data dir until its first acks=all write is answered. */
async function tidelogStart(perf: string): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'tidelog-bench-start-'))
  const port = await freePort()
  const startedAt = performance.now()
  const child = spawnTidelog(
    ['start', '--port', String(port), '--data-dir', dir, '--http-port=-1', '--schema-registry-port=-1'],
    {},
    'tidelog start (bench)',
  )
  try {
    await firstWrite(perf, port, 'first')
    record('start until the first acks=all write is answered', 's', {
      target: '<= 1/10 of Kafka',
      without: ['JetStream'],
    }).figures.tidelog.push(Number(((performance.now() - startedAt) / 1000).toFixed(2)))
  } finally {
    await child.terminate()
    await rm(dir, { recursive: true, force: true })
  }
}

// ---- Apache Kafka 4.4 ------------------------------------------------------------------------

const kafkaScript = join(root, 'scripts', 'kafka-reference.sh')

async function withKafka<T>(nodes: number, body: (kafka: KafkaReference) => Promise<T>): Promise<T> {
  const kafka = await startKafkaReference({
    nodes,
    properties: nodes === 3 ? { 'min.insync.replicas': 2, 'num.partitions': 4 } : { 'num.partitions': 4 },
  })
  try {
    return await body(kafka)
  } finally {
    await kafka.stop()
  }
}

async function kafkaRf3(perf: string, round: number): Promise<void> {
  await withKafka(3, async (kafka) => {
    const script = (command: string) =>
      promisify(execFile)(kafkaScript, [command, kafka.dir, '3'], { timeout: 300_000 })
    await rf3Rows(
      perf,
      {
        system: 'Kafka',
        bootstrap: kafka.bootstrap,
        pids: () => kafkaNodePids(kafka, [1, 2, 3]),
        brokerPids: () => kafkaNodePids(kafka, [1, 2, 3]),
        follower: {
          address: kafka.bootstrap.split(',')[2],
          stop: async () => {
            await script('stop-node')
          },
          start: async () => {
            await script('start-node')
          },
        },
      },
      round,
    )
  })
}

async function kafkaRf1(perf: string, round: number): Promise<void> {
  const startedAt = performance.now()
  await withKafka(1, async (kafka) => {
    if (round === 1 && !consumeOnly) {
      const port = Number(kafka.bootstrap.split(':')[1])
      await firstWrite(perf, port, 'first')
      record('start until the first acks=all write is answered', 's').figures.Kafka.push(
        Number(((performance.now() - startedAt) / 1000).toFixed(2)),
      )
    }
    await rf1Rows(perf, 'Kafka', kafka.bootstrap, round)
  })
}
// ---- NATS JetStream ----------------------------------------------------------------------

/** The nats-server processes running now (for memory and CPU rows). */
let natsPids: () => number[] = () => []

async function withNats<T>(servers: number, body: (url: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'tidelog-nats-'))
  const ports = await Promise.all(Array.from({ length: servers }, () => freePort()))
  const clusterPorts = await Promise.all(Array.from({ length: servers }, () => freePort()))
  const children: ChildProcess[] = []
  natsPids = () => children.map((c) => c.pid ?? -1)
  try {
    for (let i = 0; i < servers; i++) {
      const args = [
        '-js',
        '-sd',
        join(dir, `n${i}`),
        '-p',
        String(ports[i]),
        '-a',
        '127.0.0.1',
        '-n',
        `n${i}`,
      ]
      if (servers > 1)
        args.push(
          '--cluster_name',
          'bench',
          '-cluster',
          `nats://127.0.0.1:${clusterPorts[i]}`,
          '-routes',
          clusterPorts.map((p) => `nats://127.0.0.1:${p}`).join(','),
        )
      children.push(spawn('nats-server', args, { stdio: 'ignore' }))
    }
    for (const port of ports) for (let i = 0; i < 100 && !(await accepts(port)); i++) await sleep(50)
    return await body(ports.map((p) => `nats://127.0.0.1:${p}`).join(','))
  } finally {
    for (const child of children) child.kill('SIGTERM')
    await Promise.all(children.map((child) => new Promise((resolve) => child.once('exit', resolve))))
    await rm(dir, { recursive: true, force: true })
  }
}

async function natsR3(binary: string, round: number): Promise<void> {
  await withNats(3, async (url) => {
    const stream = `steady${round}`
    const created = performance.now()
    await run(binary, [url, stream, '1', String(RECORD_BYTES), '3', '0'])
    await sleep(Math.max(0, SIZE.topicAgeMs - (performance.now() - created)))
    record('RSS of a broker, idle', 'MiB').figures.JetStream.push(rssMiB(natsPids()))
    for (let i = 1; i <= SIZE.steadyRuns; i++) {
      const args = [url, stream, String(SIZE.steadyRate * SIZE.steadySeconds), String(RECORD_BYTES), '3']
      const result = await run(binary, [...args, String(SIZE.steadyRate)])
      record(`RF 3 acks=all 2,000/s run ${i}: p50`, 'ms').figures.JetStream.push(result.p50Ms)
      record(`RF 3 acks=all 2,000/s run ${i}: p99`, 'ms').figures.JetStream.push(result.p99Ms)
    }
    if (latencyOnly) return
    const throughput = await run(binary, [
      url,
      `tput${round}`,
      String(SIZE.throughputRecords),
      String(RECORD_BYTES),
      '3',
      '0',
    ])
    record('RF 3 acks=all throughput', 'MB/s').figures.JetStream.push(throughput.mbPerSec)
    record('RSS of a broker after the throughput run', 'MiB').figures.JetStream.push(rssMiB(natsPids()))
    await sleep(SIZE.settleMs)
    record(`RSS of a broker ${SIZE.settleMs / 1000} s later`, 'MiB').figures.JetStream.push(
      rssMiB(natsPids()),
    )
  })
}

async function natsR1(binary: string, round: number): Promise<void> {
  await withNats(1, async (url) => {
    const stream = `rf1${round}`
    const produced = await run(binary, [url, stream, String(SIZE.rf1Records), String(RECORD_BYTES), '1', '0'])
    record('RF 1 produce (acks=1)', 'MB/s').figures.JetStream.push(produced.mbPerSec)
    const steady = await run(binary, [
      url,
      stream,
      String(SIZE.steadyRate * SIZE.steadySeconds),
      String(RECORD_BYTES),
      '1',
      String(SIZE.steadyRate),
    ])
    record('RF 1 acks=1 2,000/s (settled): p50', 'ms').figures.JetStream.push(steady.p50Ms)
    record('RF 1 acks=1 2,000/s (settled): p99', 'ms').figures.JetStream.push(steady.p99Ms)
  })
}

// ---- output ------------------------------------------------------------------------------

const fmt = (x: number): string =>
  Number.isNaN(x) ? 'n/a' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2)
const runsOf = (xs: number[]): string => (xs.length > 1 ? ` (${xs.map(fmt).join(', ')})` : '')
const COLORS: Record<System, string> = {
  tidelog: '#1f77b4',
  [THREADS]: '#9467bd',
  Kafka: '#2ca02c',
  JetStream: '#ff7f0e',
}

function cell(row: Row, system: System, present: ReadonlySet<System>): string {
  if (row.without.has(system)) return '-'
  if (!present.has(system)) return 'not run'
  const xs = row.figures[system]
  return xs.length === 0 ? 'failed (see below)' : `${fmt(median(xs))}${runsOf(xs)}`
}

/** tidelog's figure as a multiple of Kafka's ("2.1x" faster or smaller is better per unit). */
function ratioToKafka(row: Row): string {
  const t = median(row.figures.tidelog)
  const k = median(row.figures.Kafka)
  if (!Number.isFinite(t) || !Number.isFinite(k) || k === 0) return '-'
  const ratio = t / k
  return `${ratio >= 0.1 ? ratio.toFixed(2) : ratio.toPrecision(2)}x`
}

function markdown(
  started: Date,
  seconds: number,
  systemNotes: string[],
  present: ReadonlySet<System>,
): string {
  const lines = [
    '# Benchmark report (generated by `npm run bench:report`)',
    '',
    `Run ${started.toISOString()} on ${process.platform}, Node ${process.version}, ${quick ? '--quick, ' : ''}` +
      `median of ${repeat} round(s); ${seconds.toFixed(0)} s in all. 1 KiB records, librdkafka's load generator ` +
      '(linger.ms 0 for the steady rows, 5 for throughput) against each Kafka-protocol system; the brokers and ' +
      'the load generators share the machine, as in issue 19. Every figure of a row was measured in the same run.',
    '',
    ...systemNotes.flatMap((note) => [note, '']),
    `Load average (1 min) at the start ${loadAtStart.toFixed(1)}, at the end ${loadavg()[0].toFixed(1)}, on ` +
      `${availableParallelism()} cores: above the core count, every figure includes other processes' load.`,
    '',
    '"tidelog / Kafka" is tidelog\'s figure divided by Kafka\'s: above 1 is better for MB/s, below 1 for the rest.',
    '',
    `| measure | unit | tidelog | ${THREADS} | Kafka ${KAFKA_REFERENCE_VERSION} | JetStream | tidelog / Kafka | target |`,
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
  ]
  for (const row of rows)
    lines.push(
      `| ${row.measure} | ${row.unit} | ${SYSTEMS.map((s) => cell(row, s, present)).join(' | ')} | ${ratioToKafka(row)} | ${row.target} |`,
    )
  lines.push('', ...notes, '', '![tidelog beside Kafka and JetStream](report.svg)', '')
  return lines.join('\n')
}

/** Panels of grouped bars: throughput (MB/s, linear), latency (ms, log scale), memory (MiB). */
function svg(): string {
  const width = 960
  const barHeight = 14
  const labelWidth = 340
  const plotWidth = width - labelWidth - 150
  const parts: string[] = []
  let y = 30
  const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
  const panel = (title: string, list: Row[], scale: (v: number) => number, unit: string): void => {
    parts.push(`<text x="10" y="${y}" font-size="15" font-weight="bold">${esc(title)}</text>`)
    y += 14
    for (const row of list) {
      const bars = SYSTEMS.filter((s) => !row.without.has(s) && row.figures[s].length > 0).map(
        (s) => [s, median(row.figures[s])] as const,
      )
      parts.push(`<text x="10" y="${y + barHeight}" font-size="12">${esc(row.measure)}</text>`)
      for (const [name, value] of bars) {
        const w = Number.isNaN(value) ? 0 : Math.max(1, scale(value) * plotWidth)
        parts.push(
          `<rect x="${labelWidth}" y="${y}" width="${w.toFixed(1)}" height="${barHeight - 2}" fill="${COLORS[name]}"><title>${esc(name)}</title></rect>`,
          `<text x="${labelWidth + w + 4}" y="${y + barHeight - 3}" font-size="11">${esc(`${name} ${fmt(value)} ${unit}`)}</text>`,
        )
        y += barHeight
      }
      y += 6 + (bars.length === 1 ? barHeight : 0)
    }
    y += 20
  }
  const maxOf = (list: Row[]): number =>
    Math.max(1, ...list.flatMap((r) => SYSTEMS.map((s) => median(r.figures[s]))).filter(Number.isFinite))
  const throughput = rows.filter((r) => r.unit === 'MB/s')
  const maxMb = maxOf(throughput)
  panel('Throughput (MB/s, higher is better)', throughput, (v) => v / maxMb, 'MB/s')
  const latency = rows.filter((r) => r.unit === 'ms' && r.measure.includes('2,000/s'))
  const maxMs = maxOf(latency)
  const floorMs = 0.05
  panel(
    'Latency at a steady 2,000 records/s (ms, log scale, lower is better)',
    latency,
    (v) => Math.max(0, Math.log10(Math.max(v, floorMs) / floorMs) / Math.log10(maxMs / floorMs)),
    'ms',
  )
  const memory = rows.filter((r) => r.unit === 'MiB')
  const maxMiB = maxOf(memory)
  panel('Memory of one broker process (MiB RSS, lower is better)', memory, (v) => v / maxMiB, 'MiB')
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y}" font-family="sans-serif">`,
    `<rect width="${width}" height="${y}" fill="white"/>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n')
}

/** `--consume-only`: tidelog's and Kafka's RF 1 rows, the first of the two alternating by round. */
async function consumeRound(perf: string, round: number, withKafka: boolean): Promise<void> {
  const turns: [string, () => Promise<void>][] = [['tidelog', () => tidelogRf1(perf, round)]]
  if (withKafka) turns.push(['Kafka', () => peerRound('Kafka RF 1', round, () => kafkaRf1(perf, round))])
  for (const [name, body] of round % 2 === 1 ? turns : turns.toReversed()) {
    console.log(`round ${round}/${repeat}: ${name} RF 1 (load ${loadavg()[0].toFixed(1)})`)
    await body()
  }
}

async function main(): Promise<void> {
  const started = new Date()
  const t0 = performance.now()
  const perf = perfBinary()
  const nats: ReturnType<typeof natsPerf> = values['no-jetstream']
    ? { missing: '--no-jetstream was given' }
    : consumeOnly
      ? { missing: 'not in --consume-only' }
      : natsPerf()
  const kafka = await kafkaAvailable(values['no-kafka'])
  Object.assign(process.env, KAFKA_JVM)
  notes.push(describePageCost(freshPageSystemSecondsPerGiB()))
  const present = new Set<System>(['tidelog'])
  const systemNotes: string[] = [
    'tidelog: 3 `tidelog broker` processes on a private etcd (RF 3), one for RF 1.',
  ]
  if (!values['no-worker-threads']) {
    present.add(THREADS)
    systemNotes.push(
      `${THREADS}: \`tidelog start --brokers 3 --worker-threads\`, one process with a broker per worker thread and ` +
        'the embedded store; its RF 3 and CPU rows only (its one process holds every broker, and it has no RF 1).',
    )
  }
  if ('ok' in kafka) {
    present.add('Kafka')
    systemNotes.push(
      `Kafka: Apache Kafka ${KAFKA_REFERENCE_VERSION} from Maven Central (scripts/kafka-reference.sh), KRaft ` +
        'combined broker/controller nodes, default settings apart from ports, data dirs, min.insync.replicas=2 ' +
        `and num.partitions=4 (as tidelog's), JVM as Kafka's scripts set it (${KAFKA_JVM.KAFKA_HEAP_OPTS}, G1).`,
    )
  } else systemNotes.push(`Kafka: not in this run: ${kafka.missing}.`)
  if ('binary' in nats) {
    present.add('JetStream')
    systemNotes.push(
      'JetStream: `nats-server` from Debian, file storage; R3 is a 3-server cluster, published to by ' +
        'bench/native/nats-perf.go with PublishAsync, every message acknowledged by the stream. JetStream has no ' +
        'consumer, CPU or catch-up row here.',
    )
  } else systemNotes.push(`JetStream: not in this run: ${nats.missing}.`)
  for (const note of systemNotes) console.log(note)
  for (let round = 1; round <= repeat; round++) {
    if (consumeOnly) {
      await consumeRound(perf, round, present.has('Kafka'))
      continue
    }
    console.log(`round ${round}/${repeat}: tidelog RF 3`)
    await tidelogRf3(perf, round)
    if (present.has(THREADS)) {
      console.log(`round ${round}/${repeat}: tidelog RF 3, --worker-threads`)
      await tidelogThreadsRf3(perf, round)
    }
    if (present.has('Kafka')) {
      console.log(`round ${round}/${repeat}: Kafka RF 3`)
      await peerRound('Kafka RF 3', round, () => kafkaRf3(perf, round))
    }
    if ('binary' in nats) {
      console.log(`round ${round}/${repeat}: JetStream R3`)
      await peerRound('JetStream R3', round, () => natsR3(nats.binary, round))
    }
    if (latencyOnly) continue
    console.log(`round ${round}/${repeat}: tidelog RF 1`)
    if (round === 1) await tidelogStart(perf)
    await tidelogRf1(perf, round)
    if (present.has('Kafka')) {
      console.log(`round ${round}/${repeat}: Kafka RF 1`)
      await peerRound('Kafka RF 1', round, () => kafkaRf1(perf, round))
    }
    if ('binary' in nats) {
      console.log(`round ${round}/${repeat}: JetStream R1`)
      await peerRound('JetStream R1', round, () => natsR1(nats.binary, round))
    }
  }
  notes.push(
    `Steady runs: ${SIZE.steadyRuns} of ${SIZE.steadySeconds} s each, one after another on one topic (stream) ` +
      `created ${SIZE.topicAgeMs / 1000} s before the first; run 1 shows the slow start.`,
    `Catch-up: a follower stopped while ${SIZE.catchUpMiB} MiB are written, timed from its process start until ` +
      "its partitions are as large as the leaders'.",
    'CPU rows count every process of the system over the stretch measured: tidelog its brokers and etcd, Kafka ' +
      'its nodes (controllers included). Memory rows give the largest broker process.',
  )
  const seconds = (performance.now() - t0) / 1000
  if (latencyOnly || consumeOnly) {
    console.log(`\n${markdown(started, seconds, systemNotes, present)}`)
    return
  }
  mkdirSync(values.out, { recursive: true })
  const md = markdown(started, seconds, systemNotes, present)
  writeFileSync(join(values.out, 'report.md'), md)
  writeFileSync(join(values.out, 'report.svg'), svg())
  console.log(`\n${md}`)
  console.log(`wrote ${join(values.out, 'report.md')} and report.svg`)
}

await main()
