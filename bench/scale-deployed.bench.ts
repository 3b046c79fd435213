/**
 * `npm run bench:scale`: issue 38's targets measured on the deployment the README documents,
 * three `tidelog broker` processes on a default etcd, and on Apache Kafka 4.4 (three KRaft
 * combined nodes, scripts/kafka-reference.sh, Kafka's JVM settings) in the same run, one
 * system after the other, by the same requests and steps (bench/scale-probes.ts):
 *   - create:      CreateTopics of --partitions at RF 3 (above --batch-partitions, 5,000, that
 *                  many, then CreatePartitions by as many: Kafka refuses one operation of
 *                  over 10,000 records) until every partition is led, every
 *                  replica in the ISR, every leader answers ListOffsets for it and every
 *                  broker's DescribeLogDirs lists its replicas
 *   - metadata:    Metadata for every topic, p50/p99 of --metadata-samples requests
 *   - idle:        CPU of each broker process over --idle-ms (10 s) with nothing produced
 *                  (/proc/PID/stat), and of its threads by name (main: the event loop);
 *                  --idle-windows N measures N windows one after the other (the first one
 *                  right after the creation holds its one-off work: first checkpoints, the
 *                  collections of its garbage); --idle-cpu-prof DIR writes each broker's CPU
 *                  profile of each window to DIR/PID.cpuprofile (bench/profile-probe.mjs;
 *                  with several windows, DIR/PID.wN.cpuprofile)
 *   - memory:      RSS growth of each broker process from before the creation to after the
 *                  idle section, per replica it hosts
 *   - produce:     librdkafka's load generator (bench/native/rdkafka-perf.c): --records of
 *                  1 KiB at --acks spread over every partition, then over a 6-partition topic
 *   - connections: --connections idle connections to one broker (ApiVersions sent): its RSS
 *                  growth per connection
 *   - kill:        kill -9 of a broker (not the one Metadata names controller) leading about a
 *                  third: until every partition is led by a live broker that serves it
 *   - restart:     that broker started again, until the topic is fully in sync as after create
 *   - shutdown:    SIGTERM (controlled shutdown) of another broker until its process exits
 * The in-process bench (three brokers in one process) is `npm run bench:scale:in-process`.
 *
 *   node dist/bench/scale-deployed.bench.js [--partitions 10000] [--systems tidelog,kafka]
 *     [--sections create,metadata,idle,memory,produce,connections,kill,restart,shutdown]
 *     [--records 100000] [--acks 1] [--connections 1000] [--metadata-samples 50]
 *     [--wait-timeout-ms 900000] [--batch-partitions 5000] [--no-kafka]
 *     [--idle-ms 10000] [--idle-windows 1] [--idle-cpu-prof DIR]
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { KAFKA_REFERENCE_VERSION } from '../test/helpers/kafka-reference.js'
import {
  type DeployedCluster,
  type System,
  withKafkaProcesses,
  withTidelogProcesses,
} from './deployed-cluster.js'
import { idleConnectionsRssBytes } from './idle-connections.js'
import { perf, perfBinary } from './load-generator.js'
import { processStats, threadCpuSecondsByName } from './process-stats.js'
import { kafkaAvailable } from './reference-kafka.js'
import { describeProgress, isComplete, ScaleProbes, type TopicProgress } from './scale-probes.js'

const ALL_SECTIONS = 'create,metadata,idle,memory,produce,connections,kill,restart,shutdown'
const { values } = parseArgs({
  options: {
    partitions: { type: 'string', default: '10000' },
    systems: { type: 'string', default: 'tidelog,kafka' },
    sections: { type: 'string', default: ALL_SECTIONS },
    records: { type: 'string', default: '100000' },
    acks: { type: 'string', default: '1' },
    connections: { type: 'string', default: '1000' },
    'metadata-samples': { type: 'string', default: '50' },
    'wait-timeout-ms': { type: 'string', default: '900000' },
    'batch-partitions': { type: 'string', default: '5000' },
    'idle-ms': { type: 'string', default: '10000' },
    'idle-windows': { type: 'string', default: '1' },
    'idle-cpu-prof': { type: 'string' },
    'no-kafka': { type: 'boolean', default: false },
  },
})

function positive(
  name:
    | 'partitions'
    | 'records'
    | 'connections'
    | 'metadata-samples'
    | 'wait-timeout-ms'
    | 'batch-partitions'
    | 'idle-ms'
    | 'idle-windows',
): number {
  const n = Number(values[name])
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`--${name} must be a positive integer, got ${values[name]}`)
  return n
}
const partitions = positive('partitions')
const records = positive('records')
const connectionCount = positive('connections')
const metadataSamples = positive('metadata-samples')
const waitTimeoutMs = positive('wait-timeout-ms')
const batchPartitions = positive('batch-partitions')
const idleMs = positive('idle-ms')
const idleWindows = positive('idle-windows')
const profileDir = values['idle-cpu-prof'] === undefined ? undefined : resolve(values['idle-cpu-prof'])
if (profileDir !== undefined) {
  mkdirSync(profileDir, { recursive: true })
  const probe = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bench', 'profile-probe.mjs')
  // Read by the broker spawner (test/helpers/broker-process.ts) for every tidelog broker.
  process.env.TIDELOG_BROKER_NODE_FLAGS = `--import=${probe}`
  process.env.PROFILE_PROBE_DIR = profileDir
}
const sections = new Set(values.sections.split(',').filter(Boolean))
for (const s of sections) if (!ALL_SECTIONS.split(',').includes(s)) throw new Error(`unknown section ${s}`)
const TOPIC = 'scale'
const SIX = 'six'
const RECORD_BYTES = 1024
const PROGRESS_EVERY_MS = 10_000
const PROFILE_WRITE_WAIT_MS = 30_000
/** A produce run takes seconds to a minute here; longer is a hang. */
const PRODUCE_TIMEOUT_MS = 300_000

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
const load = (): string => loadavg()[0].toFixed(1)

// ---- results ---------------------------------------------------------------------------

interface Row {
  readonly measure: string
  readonly unit: string
  readonly target: string
  readonly figures: Partial<Record<System, number>>
  readonly notes: Partial<Record<System, string>>
}
const rows: Row[] = []
const notes: string[] = []

function record(
  measure: string,
  unit: string,
  target: string,
  system: System,
  value: number,
  note = '',
): void {
  let row = rows.find((r) => r.measure === measure)
  if (!row) {
    row = { measure, unit, target, figures: {}, notes: {} }
    rows.push(row)
  }
  row.figures[system] = value
  if (note) row.notes[system] = note
  console.log(`  ${system}: ${measure}: ${fmt(value)} ${unit}${note ? ` (${note})` : ''} [load ${load()}]`)
}

const fmt = (x: number | undefined): string =>
  x === undefined || Number.isNaN(x) ? 'n/a' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2)

// ---- steps -----------------------------------------------------------------------------

/** Polls `done` every 250 ms until it holds; the elapsed ms. Progress is printed every 10 s. */
async function timeUntil<T>(
  what: string,
  startedAt: number,
  probe: () => Promise<T>,
  done: (value: T) => boolean,
  describe: (value: T) => string,
): Promise<number> {
  let printedAt = performance.now()
  for (;;) {
    const value = await probe()
    const now = performance.now()
    if (done(value)) return now - startedAt
    if (now - startedAt > waitTimeoutMs)
      throw new Error(`${what}: not done after ${waitTimeoutMs} ms: ${describe(value)}`)
    if (now - printedAt >= PROGRESS_EVERY_MS) {
      console.log(
        `    ${what} ${((now - startedAt) / 1000).toFixed(0)} s: ${describe(value)} [load ${load()}]`,
      )
      printedAt = now
    }
    await sleep(250)
  }
}

const untilComplete = (probes: ScaleProbes, what: string, topic: string, count: number, startedAt: number) =>
  timeUntil<TopicProgress>(what, startedAt, () => probes.progress(topic, count), isComplete, describeProgress)

const rssOf = (cluster: DeployedCluster, id: number): number => {
  const pid = cluster.brokerPid(id)
  return pid === null ? 0 : processStats([pid]).maxRssBytes
}

/** When the last creation was complete (performance.now()), for the idle windows' notes. */
let createdAt: number | null = null

async function create(cluster: DeployedCluster, probes: ScaleProbes): Promise<void> {
  const startedAt = performance.now()
  // Kafka's controller refuses an operation of more than 10,000 records (POLICY_VIOLATION,
  // "excessively large batch operation"): a topic of 10,000 partitions is created in steps.
  await probes.createTopic(TOPIC, Math.min(partitions, batchPartitions), waitTimeoutMs)
  for (let count = batchPartitions; count < partitions; count += batchPartitions)
    await probes.createPartitions(TOPIC, Math.min(partitions, count + batchPartitions), waitTimeoutMs)
  const answeredMs = performance.now() - startedAt
  const ms = await untilComplete(probes, 'create', TOPIC, partitions, startedAt)
  createdAt = performance.now()
  record(
    `CreateTopics ${partitions} partitions RF 3 until all served and in sync`,
    's',
    partitions >= 33_000 ? '<= Kafka, <= 30 s' : '<= Kafka',
    cluster.system,
    ms / 1000,
    `${Math.ceil(partitions / batchPartitions)} requests answered after ${(answeredMs / 1000).toFixed(1)} s`,
  )
}

function percentile(sortedMs: readonly number[], p: number): number {
  return sortedMs[Math.min(sortedMs.length - 1, Math.floor((sortedMs.length * p) / 100))]
}

async function metadata(cluster: DeployedCluster, probes: ScaleProbes): Promise<void> {
  const ms: number[] = []
  let seen = 0
  for (let i = 0; i < metadataSamples; i++) {
    // Round robin over the brokers, as clients spread their metadata requests.
    const nodeId = cluster.nodeIds[i % cluster.nodeIds.length]
    const startedAt = performance.now()
    const response = await probes.metadata(null, nodeId)
    ms.push(performance.now() - startedAt)
    seen = response.topics.reduce((sum, t) => sum + t.partitions.length, 0)
  }
  ms.sort((a, b) => a - b)
  const note = `${metadataSamples} requests, ${seen} partitions in the answer`
  record('Metadata for every topic: p50', 'ms', '', cluster.system, percentile(ms, 50), note)
  record('Metadata for every topic: p99', 'ms', '<= 100 ms', cluster.system, percentile(ms, 99))
}

async function idle(cluster: DeployedCluster): Promise<void> {
  for (let window = 1; window <= idleWindows; window++) await idleWindow(cluster, window)
}

/** Each thread kind's share of a core over the window, busiest first: "main 2.1, V8 DefaultWorke 1.4". */
function threadShares(before: Map<string, number>, after: Map<string, number>, seconds: number): string {
  return [...after]
    .map(([name, s]) => [name, (100 * (s - (before.get(name) ?? 0))) / seconds] as const)
    .filter(([, percent]) => percent >= 0.05)
    .sort((a, b) => b[1] - a[1])
    .map(([name, percent]) => `${name} ${percent.toFixed(1)}`)
    .join(', ')
}

async function idleWindow(cluster: DeployedCluster, window: number): Promise<void> {
  const pids = cluster.nodeIds.map((id) => cluster.brokerPid(id) ?? -1)
  const before = pids.map((pid) => processStats([pid]).cpuSeconds)
  const threadsBefore = pids.map((pid) => threadCpuSecondsByName(pid))
  const store = processStats(cluster.storePids()).cpuSeconds
  const startedAt = performance.now()
  const sinceCreated =
    createdAt === null ? '' : `, from ${((startedAt - createdAt) / 1000).toFixed(0)} s after the creation`
  const profiled = profileDir !== undefined && cluster.system === 'tidelog'
  if (profiled) for (const pid of pids) writeFileSync(join(profileDir, `${pid}.start`), '')
  await sleep(idleMs)
  if (profiled) for (const pid of pids) writeFileSync(join(profileDir, `${pid}.stop`), '')
  const seconds = (performance.now() - startedAt) / 1000
  const cores = pids.map((pid, i) => (processStats([pid]).cpuSeconds - before[i]) / seconds)
  const threads = pids.map((pid, i) => threadShares(threadsBefore[i], threadCpuSecondsByName(pid), seconds))
  const storeCores = (processStats(cluster.storePids()).cpuSeconds - store) / seconds
  record(
    `idle CPU of a broker process (the busiest)${idleWindows > 1 ? `, window ${window}` : ''}`,
    '% core',
    '<= 2%',
    cluster.system,
    100 * Math.max(...cores),
    `over ${seconds.toFixed(0)} s${sinceCreated}, each: ${cores.map((c) => (100 * c).toFixed(1)).join(', ')}%` +
      (cluster.storePids().length > 0 ? `; etcd ${(100 * storeCores).toFixed(1)}%` : ''),
  )
  for (const [i, pid] of pids.entries()) console.log(`  threads of ${pid}, % core: ${threads[i]}`)
  if (!profiled) return
  // The probes write their profiles within a poll or two; the next sections may kill a broker.
  const file = (pid: number, suffix: string) => join(profileDir, `${pid}.${suffix}`)
  const written = () => pids.every((pid) => existsSync(file(pid, 'cpuprofile')))
  for (let waitedMs = 0; !written() && waitedMs < PROFILE_WRITE_WAIT_MS; waitedMs += 250) await sleep(250)
  console.log(
    `  idle CPU profiles (${written() ? 'written' : 'NOT all written'}): ${profileDir}/PID.${idleWindows > 1 ? `w${window}.` : ''}cpuprofile`,
  )
  for (const pid of pids) {
    const gc = file(pid, 'gc.json')
    if (existsSync(gc))
      console.log(`  garbage collections of ${pid} in the window: ${readFileSync(gc, 'utf8')}`)
    if (idleWindows === 1) continue
    // The probe writes the same names for every window.
    for (const suffix of ['cpuprofile', 'gc.json', 'heapprofile'])
      if (existsSync(file(pid, suffix))) renameSync(file(pid, suffix), file(pid, `w${window}.${suffix}`))
  }
}

function memory(cluster: DeployedCluster, rssBefore: readonly number[]): void {
  // RF 3 on 3 brokers: each hosts one replica of every partition.
  const perReplica = cluster.nodeIds.map((id, i) => (rssOf(cluster, id) - rssBefore[i]) / partitions / 1024)
  record(
    'RSS growth per replica (the largest broker)',
    'KiB',
    '<= 10 KiB',
    cluster.system,
    Math.max(...perReplica),
    `each: ${perReplica.map((k) => k.toFixed(1)).join(', ')} KiB; RSS now ${cluster.nodeIds
      .map((id) => (rssOf(cluster, id) / 1048576).toFixed(0))
      .join(', ')} MiB`,
  )
}

async function produce(cluster: DeployedCluster, probes: ScaleProbes): Promise<void> {
  const binary = perfBinary()
  const bootstrap = cluster.nodeIds.map((id) => cluster.address(id)).join(',')
  await probes.createTopic(SIX, 6, 60_000)
  await untilComplete(probes, 'six partitions', SIX, 6, performance.now())
  const args = (topic: string) => [
    'produce',
    bootstrap,
    topic,
    String(records),
    String(RECORD_BYTES),
    values.acks,
    '0',
    '5',
  ]
  const spread = await perf(binary, args(TOPIC), PRODUCE_TIMEOUT_MS)
  const six = await perf(binary, args(SIX), PRODUCE_TIMEOUT_MS)
  const what = `${records} records of 1 KiB, acks=${values.acks}, librdkafka`
  record(
    `produce over ${partitions} partitions`,
    'MB/s',
    '',
    cluster.system,
    spread.mbPerSec,
    `${what}, p99 ${spread.p99Ms} ms`,
  )
  record('produce over 6 partitions', 'MB/s', '', cluster.system, six.mbPerSec, `p99 ${six.p99Ms} ms`)
  record(
    'produce spread / on 6 partitions',
    '%',
    '>= 80%',
    cluster.system,
    (100 * spread.mbPerSec) / six.mbPerSec,
  )
}

async function connections(cluster: DeployedCluster): Promise<void> {
  const nodeId = cluster.nodeIds[0]
  const [host, port] = cluster.address(nodeId).split(':')
  const grownBytes = await idleConnectionsRssBytes(host, Number(port), connectionCount, () =>
    rssOf(cluster, nodeId),
  )
  record(
    `RSS per idle connection (${connectionCount} to one broker)`,
    'KiB',
    'printed',
    cluster.system,
    grownBytes / connectionCount / 1024,
  )
}

/** The broker Metadata does not name controller that leads the most partitions of the topic. */
async function victimOf(probes: ScaleProbes, cluster: DeployedCluster): Promise<{ id: number; led: number }> {
  const { controllerId, partitions: all } = await probes.partitionsOf(TOPIC)
  const candidates = cluster.nodeIds.filter((id) => id !== controllerId && cluster.isRunning(id))
  const ledBy = (id: number) => all.filter((p) => p.leaderId === id).length
  const id = candidates.reduce((best, id) => (ledBy(id) > ledBy(best) ? id : best), candidates[0])
  return { id, led: ledBy(id) }
}

async function kill(cluster: DeployedCluster, probes: ScaleProbes): Promise<number> {
  const victim = await victimOf(probes, cluster)
  const startedAt = performance.now()
  await cluster.kill(victim.id)
  const ms = await timeUntil(
    'failover',
    startedAt,
    () => probes.ledAndServed(TOPIC, partitions),
    (done) => done,
    () => 'not every partition led and served',
  )
  record(
    'kill -9 of a broker: every partition led and served again',
    's',
    `<= ${(cluster.sessionTimeoutMs + 2000) / 1000} s`,
    cluster.system,
    ms / 1000,
    `broker ${victim.id} led ${victim.led}; broker.session.timeout.ms ${cluster.sessionTimeoutMs}`,
  )
  return victim.id
}

async function restart(cluster: DeployedCluster, probes: ScaleProbes, nodeId: number): Promise<void> {
  const startedAt = performance.now()
  await cluster.start(nodeId)
  const listeningMs = performance.now() - startedAt
  const ms = await untilComplete(probes, 'restart', TOPIC, partitions, startedAt)
  record(
    'restart of the killed broker until all in sync',
    's',
    '<= Kafka',
    cluster.system,
    ms / 1000,
    `accepting connections after ${(listeningMs / 1000).toFixed(1)} s`,
  )
}

async function shutdown(cluster: DeployedCluster, probes: ScaleProbes): Promise<void> {
  const victim = await victimOf(probes, cluster)
  const startedAt = performance.now()
  await cluster.terminate(victim.id)
  record(
    'controlled shutdown (SIGTERM until exit)',
    's',
    '<= 10 s',
    cluster.system,
    (performance.now() - startedAt) / 1000,
    `broker ${victim.id}, leading ${victim.led}`,
  )
}

async function measure(cluster: DeployedCluster): Promise<void> {
  const probes = new ScaleProbes(cluster)
  try {
    const rssBefore = cluster.nodeIds.map((id) => rssOf(cluster, id))
    const steps: [string, () => Promise<void>][] = [
      ['create', () => create(cluster, probes)],
      ['metadata', () => metadata(cluster, probes)],
      ['idle', () => idle(cluster)],
      ['memory', async () => memory(cluster, rssBefore)],
      ['produce', () => produce(cluster, probes)],
      ['connections', () => connections(cluster)],
    ]
    for (const [name, step] of steps) {
      if (!sections.has(name)) continue
      console.log(`${cluster.system}: ${name} [load ${load()}]`)
      await step()
    }
    let killed: number | null = null
    if (sections.has('kill')) killed = await kill(cluster, probes)
    if (sections.has('restart') && killed !== null) await restart(cluster, probes, killed)
    if (sections.has('shutdown')) await shutdown(cluster, probes)
  } finally {
    probes.close()
  }
}

/** One system's run; a failure is noted and the table keeps what was measured before it. */
async function runSystem(system: System): Promise<void> {
  const startedAt = performance.now()
  console.log(`${system}: starting three broker processes [load ${load()}]`)
  try {
    await (system === 'tidelog' ? withTidelogProcesses(measure) : withKafkaProcesses(measure))
  } catch (error) {
    const why = error instanceof Error ? error.message.split('\n')[0] : String(error)
    console.log(`${system} failed: ${why}`)
    notes.push(`${system}: stopped by an error (${why}); its later rows are missing.`)
  }
  notes.push(
    `${system}: ${((performance.now() - startedAt) / 1000).toFixed(0)} s in all, load average (1 min) ${load()} at its end.`,
  )
}

function ratio(row: Row): string {
  const t = row.figures.tidelog
  const k = row.figures.Kafka
  if (t === undefined || k === undefined || k === 0) return '-'
  return `${(t / k).toFixed(2)}x`
}

function table(started: Date, loadAtStart: number): string {
  const cell = (row: Row, s: System) => `${fmt(row.figures[s])}${row.notes[s] ? ` (${row.notes[s]})` : ''}`
  return [
    `bench:scale ${started.toISOString()}: ${partitions} partitions RF 3, three broker processes per system, ` +
      `Node ${process.version}, ${availableParallelism()} cores shared with other work; load average (1 min) ` +
      `${loadAtStart.toFixed(1)} at the start, ${load()} at the end.`,
    '',
    `| measure | unit | tidelog (3 processes, etcd) | Kafka ${KAFKA_REFERENCE_VERSION} (3 KRaft nodes) | tidelog / Kafka | target |`,
    '| --- | --- | --- | --- | --- | --- |',
    ...rows.map(
      (r) =>
        `| ${r.measure} | ${r.unit} | ${cell(r, 'tidelog')} | ${cell(r, 'Kafka')} | ${ratio(r)} | ${r.target} |`,
    ),
    '',
    ...notes.map((n) => `- ${n}`),
  ].join('\n')
}

/** A process limit of this machine, from /proc (undefined where it cannot be read). */
function procLimit(file: string, pattern: RegExp): number | undefined {
  try {
    const found = pattern.exec(readFileSync(file, 'utf8'))
    return found === null ? undefined : Number(found[1])
  } catch {
    return undefined
  }
}

/**
 * Why Kafka cannot hold `partitions` at RF 3 on three nodes of this machine, if it cannot.
 * Every node has a replica of each partition, and Kafka keeps one descriptor open per
 * segment and two mappings (offset and time index) per segment: at 33,000 partitions and
 * the 20,000 descriptors this machine allows, all three nodes died of "Too many open files"
 * 3 minutes into the creation (2026-12-07), where tidelog's descriptors are bounded by
 * log.segment.open.files.max. The headroom is the JVM's own descriptors and mappings.
 */
function kafkaLimitsShortfall(partitions: number): string | undefined {
  const headroom = 2_000
  const openFiles = procLimit('/proc/self/limits', /^Max open files\s+(\d+)/m)
  const mapCount = procLimit('/proc/sys/vm/max_map_count', /^(\d+)/)
  const short: string[] = []
  if (openFiles !== undefined && openFiles < partitions + headroom)
    short.push(`${partitions + headroom} open files per node, this machine allows ${openFiles} (ulimit -n)`)
  if (mapCount !== undefined && mapCount < 2 * partitions + headroom)
    short.push(`${2 * partitions + headroom} memory mappings per node, vm.max_map_count is ${mapCount}`)
  if (short.length === 0) return undefined
  return `${partitions} partitions at RF 3 need about ${short.join(' and ')}: Kafka keeps a descriptor and two index mappings per segment; raise the limits to compare`
}

async function main(): Promise<void> {
  const started = new Date()
  const loadAtStart = loadavg()[0]
  // In the order given: each system runs alone on the machine, after the other has stopped.
  for (const system of values.systems.split(',').filter(Boolean)) {
    if (system === 'tidelog') await runSystem('tidelog')
    else if (system === 'kafka') {
      const kafka = await kafkaAvailable(values['no-kafka'])
      const limits = kafkaLimitsShortfall(Number(values.partitions))
      if (!('ok' in kafka)) notes.push(`Kafka: not in this run: ${kafka.missing}.`)
      else if (limits !== undefined) {
        notes.push(`Kafka: not in this run: ${limits}.`)
        console.log(`Kafka: not run: ${limits}`)
      } else await runSystem('Kafka')
    } else throw new Error(`unknown system ${system}`)
  }
  console.log(`\n${table(started, loadAtStart)}`)
}

await main()
