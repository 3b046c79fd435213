/**
 * How tidelog's cost grows with partitions, connections and groups (issue 19's Scale
 * target). The brokers run in this process (startCluster), so memory and descriptors are
 * this process's: RSS and heap from process.memoryUsage() after a GC, descriptors from
 * /proc/self/fd. Sections, each printed as a table row:
 *   - create:      CreateTopics of --partitions partitions (RF --rf) until every leader serves them
 *   - metadata:    Metadata latency (p50/p99) of the topic, from tidelog's Admin
 *   - idle:        CPU the brokers use over 10 s with nothing produced (replica fetch rounds)
 *   - produce:     --records records of --record-bytes spread over every partition, by
 *                  librdkafka's load generator (bench/native/rdkafka-perf.c, acks=1)
 *   - restart:     stop (clean shutdown) and start again on the same data: stop time,
 *                  start-up time until every partition is served
 *   - connections: --connections raw client connections that each sent ApiVersions:
 *                  memory per connection, Metadata latency while they are open
 *   - groups:      --groups consumer groups (one kafkajs member each) joining at once:
 *                  time until every group is stable
 *
 *   node --expose-gc dist/bench/scale.bench.js [--partitions 10000] [--brokers 1] [--rf 1]
 *     [--sections create,metadata,idle,produce,restart,connections,groups] [--records 200000]
 *     [--connections 1000] [--groups 200] [--served-timeout-ms 50000] [--set key=value ...]
 *     [--idle-cpu-prof FILE]
 *
 * --served-timeout-ms: how long past CreateTopics' answer to wait for every partition to be
 * served before giving up.
 */
import { execFile, execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'
import type { Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs, promisify } from 'node:util'
import { Kafka, logLevel } from 'kafkajs'
import { Admin } from '../src/client/admin.js'
import { silentLogger } from '../src/common/logger.js'
import { type Cluster, startCluster } from '../src/server/cluster.js'
import { openApiVersionsConnections } from './idle-connections.js'

/** The followers' fetch requests and the partition entries they carried, summed over the brokers. */
function fetchCounters(cluster: Cluster): {
  requests: number
  full: number
  partitions: number
  cut: number
  refused: number
  firstFetches: number
  firstFetchWaitMsTotal: number
  firstFetchWaitMsMax: number
} {
  let requests = 0
  let full = 0
  let partitionsSent = 0
  let cut = 0
  let refused = 0
  let firstFetches = 0
  let firstFetchWaitMsTotal = 0
  let firstFetchWaitMsMax = 0
  for (const broker of cluster.brokers) {
    const stats = broker.replicaManager.fetcherStats
    requests += stats.fetchRequests
    full += stats.fullFetches
    partitionsSent += stats.fetchPartitionsSent
    cut += stats.pollsCut
    refused += stats.sessionsRefused
    firstFetches += stats.firstFetches
    firstFetchWaitMsTotal += stats.firstFetchWaitMsTotal
    firstFetchWaitMsMax = Math.max(firstFetchWaitMsMax, stats.firstFetchWaitMsMax)
  }
  return {
    requests,
    full,
    partitions: partitionsSent,
    cut,
    refused,
    firstFetches,
    firstFetchWaitMsTotal,
    firstFetchWaitMsMax,
  }
}

/** --idle-cpu-prof FILE: a CPU profile (.cpuprofile, for Chrome DevTools) of the idle section only. */
async function startProfile(): Promise<{ stop(path: string): Promise<void> }> {
  const session = new Session()
  session.connect()
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) =>
      session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result))),
    )
  await post('Profiler.enable')
  await post('Profiler.setSamplingInterval', { interval: 1000 })
  await post('Profiler.start')
  return {
    async stop(path) {
      const { profile } = (await post('Profiler.stop')) as { profile: unknown }
      writeFileSync(path, JSON.stringify(profile))
      session.disconnect()
    },
  }
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const { values } = parseArgs({
  options: {
    partitions: { type: 'string', default: '10000' },
    brokers: { type: 'string', default: '1' },
    rf: { type: 'string', default: '1' },
    sections: { type: 'string', default: 'create,metadata,idle,produce,restart,connections,groups' },
    records: { type: 'string', default: '200000' },
    'record-bytes': { type: 'string', default: '1024' },
    connections: { type: 'string', default: '1000' },
    groups: { type: 'string', default: '200' },
    'served-timeout-ms': { type: 'string', default: '50000' },
    set: { type: 'string', multiple: true, default: [] },
    'idle-cpu-prof': { type: 'string' },
    trace: { type: 'boolean', default: false },
  },
})
const partitions = positive('partitions')
const brokerCount = positive('brokers')
const replicationFactor = positive('rf')
const records = positive('records')
const recordBytes = positive('record-bytes')
const connectionCount = positive('connections')
const groupCount = positive('groups')
const servedTimeoutMs = positive('served-timeout-ms')
const sections = new Set(values.sections.split(',').filter(Boolean))
const TOPIC = 'scale'

function positive(name: keyof typeof values): number {
  const n = Number(values[name])
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`--${name} must be a positive integer, got ${values[name]}`)
  return n
}

const gc = (globalThis as { gc?: () => void }).gc

interface Memory {
  readonly rssBytes: number
  readonly heapBytes: number
  readonly descriptors: number
}

function memory(): Memory {
  gc?.()
  const { rss, heapUsed } = process.memoryUsage()
  return { rssBytes: rss, heapBytes: heapUsed, descriptors: readdirSync('/proc/self/fd').length }
}

function row(name: string, value: string, note = ''): void {
  console.log(`${name.padEnd(44)} ${value.padStart(28)}   ${note}`)
}

const mib = (bytes: number) => `${(bytes / 1048576).toFixed(0)} MiB`

function percentile(sortedMs: number[], p: number): number {
  return sortedMs[Math.min(sortedMs.length - 1, Math.floor((sortedMs.length * p) / 100))]
}

async function metadataLatency(admin: Admin, samples: number): Promise<string> {
  const ms: number[] = []
  for (let i = 0; i < samples; i++) {
    const started = performance.now()
    const [topic] = await admin.describeTopics([TOPIC])
    ms.push(performance.now() - started)
    if (sections.has('create') && topic.partitions.length !== partitions)
      throw new Error(`metadata shows ${topic.partitions.length} partitions`)
  }
  ms.sort((a, b) => a - b)
  return `p50 ${percentile(ms, 50).toFixed(1)} / p99 ${percentile(ms, 99).toFixed(1)} ms`
}

/** Waits until every partition has a serving leader; throws with the count served after `timeoutMs`. */
async function waitAllServed(
  admin: Admin,
  timeoutMs = servedTimeoutMs,
  progress?: (served: number) => void,
): Promise<void> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const [topic] = await admin.describeTopics([TOPIC])
    const served = topic.partitions.filter((p) => p.errorCode === 0).length
    if (topic.partitions.length === partitions && served === partitions) return
    if (progress !== undefined) progress(served)
    if (performance.now() > deadline) {
      const errors = new Map<number, number>()
      for (const p of topic.partitions) errors.set(p.errorCode, (errors.get(p.errorCode) ?? 0) + 1)
      throw new Error(
        `after ${timeoutMs} ms ${served} of ${partitions} partitions are served (error codes: ${JSON.stringify([...errors])})`,
      )
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

function perfBinary(): string {
  const out = join(root, '.build', 'rdkafka-perf')
  mkdirSync(dirname(out), { recursive: true })
  execFileSync('cc', ['-O2', '-o', out, join(root, 'bench', 'native', 'rdkafka-perf.c'), '-lrdkafka'])
  return out
}

async function start(dataDir: string): Promise<{ cluster: Cluster; ms: number }> {
  const started = performance.now()
  const cluster = await startCluster({
    brokers: brokerCount,
    port: 0,
    dataDir,
    logger: silentLogger,
    properties: {
      'offsets.topic.replication.factor': Math.min(brokerCount, 3),
      'transaction.state.log.replication.factor': Math.min(brokerCount, 3),
      ...Object.fromEntries(
        values.set.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
      ),
    },
  })
  return { cluster, ms: performance.now() - started }
}

async function connections(cluster: Cluster, admin: Admin): Promise<void> {
  const [host, port] = cluster.brokers[0].bootstrapServers.split(':')
  const before = memory()
  const sockets: Socket[] = []
  const started = performance.now()
  await openApiVersionsConnections(host, Number(port), connectionCount, sockets)
  const openMs = performance.now() - started
  const after = memory()
  row(`${connectionCount} connections: opened`, `${openMs.toFixed(0)} ms`)
  // Both ends are in this process: the figure holds the client socket too (an upper bound).
  row(
    '  memory per connection (RSS / heap)',
    `${((after.rssBytes - before.rssBytes) / connectionCount / 1024).toFixed(1)} / ${((after.heapBytes - before.heapBytes) / connectionCount / 1024).toFixed(1)} KiB`,
    'both ends in this process',
  )
  row('  Metadata latency while open', await metadataLatency(admin, 20))
  for (const socket of sockets) socket.destroy()
}

async function groups(cluster: Cluster): Promise<void> {
  const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
  await admin.createTopics([
    { topic: 'groups', numPartitions: 4, replicationFactor: Math.min(3, brokerCount) },
  ])
  admin.close()
  const kafka = new Kafka({ brokers: cluster.bootstrapServers.split(','), logLevel: logLevel.NOTHING })
  const consumers = Array.from({ length: groupCount }, (_, i) =>
    kafka.consumer({ groupId: `scale-group-${i}`, sessionTimeout: 30000, rebalanceTimeout: 30000 }),
  )
  const before = memory()
  const started = performance.now()
  let joined = 0
  const allJoined = new Promise<void>((resolve) => {
    for (const consumer of consumers)
      consumer.on(consumer.events.GROUP_JOIN, () => {
        if (++joined === groupCount) resolve()
      })
  })
  await Promise.all(
    consumers.map(async (consumer) => {
      await consumer.connect()
      await consumer.subscribe({ topics: ['groups'] })
      await consumer.run({ eachMessage: async () => {} })
    }),
  )
  const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 40000).unref())
  const outcome = await Promise.race([allJoined, timeout])
  const ms = performance.now() - started
  const after = memory()
  row(
    `${groupCount} groups joining at once: all stable`,
    outcome === 'timeout' ? `${joined} of ${groupCount} in 40 s` : `${ms.toFixed(0)} ms`,
    `RSS +${mib(after.rssBytes - before.rssBytes)} with ${groupCount} kafkajs clients`,
  )
  await Promise.all(consumers.map((consumer) => consumer.disconnect()))
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tidelog-scale-'))
  console.log(
    `scale: ${brokerCount} broker(s) in one process, ${partitions} partitions RF ${replicationFactor}, ` +
      `settings: ${values.set.join(' ') || 'defaults'}`,
  )
  let { cluster, ms: startMs } = await start(dataDir)
  try {
    const idle = memory()
    row('start-up (empty)', `${startMs.toFixed(0)} ms`, `RSS ${mib(idle.rssBytes)}, ${idle.descriptors} fds`)
    const admin = new Admin({ bootstrapServers: cluster.bootstrapServers, requestTimeoutMs: 120000 })
    if (sections.has('create')) {
      const fetchesAtStart = fetchCounters(cluster)
      const started = performance.now()
      // --trace: every 2 s, the partitions served so far, the CPU and the replica fetches.
      let served = 0
      let lastTrace = { ms: started, cpu: process.cpuUsage(), fetches: fetchesAtStart }
      const tracer = !values.trace
        ? undefined
        : setInterval(() => {
            const ms = performance.now()
            const cpu = process.cpuUsage(lastTrace.cpu)
            const f = fetchCounters(cluster)
            const was = lastTrace.fetches
            console.log(
              `  trace ${((ms - started) / 1000).toFixed(1)} s: ${served} served, ` +
                `${((cpu.user + cpu.system) / 1000 / (ms - lastTrace.ms)).toFixed(2)} core, ` +
                `${f.requests - was.requests} fetches (${f.full - was.full} full, ${f.cut - was.cut} polls cut, ` +
                `${f.refused - was.refused} without session) carrying ${f.partitions - was.partitions}`,
            )
            lastTrace = { ms, cpu: process.cpuUsage(), fetches: f }
          }, 2000)
      await admin
        .createTopics([{ topic: TOPIC, numPartitions: partitions, replicationFactor }])
        .catch((error) => {
          // Past the request's 30 s the answer is REQUEST_TIMED_OUT: then wait for the leaders here.
          if ((error as { errorCode?: number }).errorCode !== 7) throw error
        })
      await waitAllServed(admin, servedTimeoutMs, (count) => {
        served = count
      }).finally(() => clearInterval(tracer))
      const createMs = performance.now() - started
      const loaded = memory()
      const replicas = partitions * replicationFactor
      const fetches = fetchCounters(cluster)
      row(
        `CreateTopics ${partitions} partitions, all served`,
        `${createMs.toFixed(0)} ms`,
        `${fetches.requests - fetchesAtStart.requests} replica fetches (${fetches.full - fetchesAtStart.full} full, ` +
          `${fetches.cut - fetchesAtStart.cut} long polls cut) carrying ${fetches.partitions - fetchesAtStart.partitions} partitions`,
      )
      const firstFetches = fetches.firstFetches - fetchesAtStart.firstFetches
      row(
        '  partition followed until a fetch carries it',
        `${((fetches.firstFetchWaitMsTotal - fetchesAtStart.firstFetchWaitMsTotal) / Math.max(1, firstFetches)).toFixed(0)} ms mean`,
        `max ${fetches.firstFetchWaitMsMax.toFixed(0)} ms over ${firstFetches} follower replicas`,
      )
      row(
        '  memory per partition replica (RSS / heap)',
        `${((loaded.rssBytes - idle.rssBytes) / replicas / 1024).toFixed(1)} / ${((loaded.heapBytes - idle.heapBytes) / replicas / 1024).toFixed(1)} KiB`,
        `RSS ${mib(loaded.rssBytes)}, heap ${mib(loaded.heapBytes)}`,
      )
      row(
        '  open descriptors',
        `${loaded.descriptors}`,
        `${(loaded.descriptors / replicas).toFixed(2)} per replica`,
      )
    }
    if (sections.has('metadata'))
      row(`Metadata of ${partitions} partitions`, await metadataLatency(admin, 30))
    if (sections.has('idle')) {
      // Nothing produced or consumed: what the brokers spend keeping replicas in step (the
      // followers' fetch rounds, at least one per replica.fetch.wait.max.ms per fetcher).
      const profiler = values['idle-cpu-prof'] === undefined ? null : await startProfile()
      const fetchesBefore = fetchCounters(cluster)
      const before = process.cpuUsage()
      const started = performance.now()
      await new Promise((resolve) => setTimeout(resolve, 10000))
      const used = process.cpuUsage(before)
      const seconds = (performance.now() - started) / 1000
      const fetchesAfter = fetchCounters(cluster)
      if (profiler) await profiler.stop(values['idle-cpu-prof']!)
      row(
        `idle CPU with ${partitions} partitions`,
        `${((used.user + used.system) / 1e6 / seconds).toFixed(2)} core-s/s`,
        `over 10 s, this process (every broker): ${((fetchesAfter.requests - fetchesBefore.requests) / seconds).toFixed(1)} replica fetches/s carrying ${((fetchesAfter.partitions - fetchesBefore.partitions) / seconds).toFixed(0)} partitions/s`,
      )
    }
    if (sections.has('produce')) {
      const binary = perfBinary()
      const { stdout } = await promisify(execFile)(
        binary,
        ['produce', cluster.bootstrapServers, TOPIC, String(records), String(recordBytes), '1', '0', '5'],
        { encoding: 'utf8', maxBuffer: 1 << 20, timeout: 90000 },
      )
      const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, number>
      const after = memory()
      row(
        `produce spread over ${partitions} partitions`,
        `${result.recordsPerSec} rec/s, ${result.mbPerSec} MB/s`,
        `librdkafka acks=1, p99 ${result.p99Ms} ms, ${after.descriptors} fds after`,
      )
    }
    admin.close()
    if (sections.has('restart')) {
      const stopStarted = performance.now()
      await cluster.stop()
      row('clean shutdown', `${(performance.now() - stopStarted).toFixed(0)} ms`)
      const restartStarted = performance.now()
      ;({ cluster, ms: startMs } = await start(dataDir))
      // startCluster resolves once the brokers listen; leaders may still be applying the
      // metadata (opening logs), so serving is waited for as after CreateTopics.
      if (sections.has('create')) {
        const restartAdmin = new Admin({
          bootstrapServers: cluster.bootstrapServers,
          requestTimeoutMs: 120000,
        })
        await waitAllServed(restartAdmin).finally(() => restartAdmin.close())
      }
      const restarted = memory()
      row('restart: brokers listening', `${startMs.toFixed(0)} ms`)
      row(
        'restart until every partition is served',
        `${(performance.now() - restartStarted).toFixed(0)} ms`,
        `RSS ${mib(restarted.rssBytes)}, heap ${mib(restarted.heapBytes)}, ${restarted.descriptors} fds`,
      )
    }
    if (sections.has('connections')) {
      const connAdmin = new Admin({ bootstrapServers: cluster.bootstrapServers, requestTimeoutMs: 120000 })
      await connections(cluster, connAdmin)
      connAdmin.close()
    }
    if (sections.has('groups')) await groups(cluster)
  } finally {
    const stopStarted = performance.now()
    await cluster.stop()
    row('final shutdown', `${(performance.now() - stopStarted).toFixed(0)} ms`)
    rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
