/**
 * The timers brokers arm (issue 38 item 2, "per-partition timers replaced by one wheel"):
 * three brokers in this process, one topic of --partitions partitions at RF --rf, then
 *   - idle:       --idle-ms with nothing produced: timers live, set and fired per second,
 *                 and the process's CPU (the brokers only: no client is open);
 *   - long polls: --consumers raw connections, each looping a consumer Fetch of one empty
 *                 partition (at its leader) with fetch.max.wait.ms --poll-ms and minBytes 1,
 *                 for --polls-ms: live timers, CPU (brokers and these clients) and how much
 *                 later than --poll-ms each empty answer came.
 * Every timer the brokers set goes through the system Clock (src/common/clock.ts), which
 * this bench wraps to count them; with --sites each is also attributed to the first
 * frame of src/ that set it (a stack per timer: slower, so CPU figures are for runs
 * without it). Wheels' own timers are read from each broker's timingWheel when it has one.
 *
 *   node --expose-gc dist/bench/timers.bench.js [--partitions 10000] [--rf 3]
 *     [--idle-ms 30000] [--consumers 1000] [--poll-ms 500] [--polls-ms 20000] [--sites]
 *   node --expose-gc dist/bench/timers.bench.js --micro
 * --micro: no cluster; the cost of a timer set and cancelled, and the heap of a pending one,
 * on the system clock and on a TimingWheelClock over it.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Admin } from '../src/client/admin.js'
import { type Clock, systemClock, type TimerHandle } from '../src/common/clock.js'
import { silentLogger } from '../src/common/logger.js'
import { TimingWheelClock } from '../src/common/timing-wheel.js'
import { ApiKey } from '../src/protocol/generated/index.js'
import { ZERO_UUID } from '../src/protocol/primitives.js'
import { BrokerClient } from '../src/replication/broker-client.js'
import { nodeNetwork } from '../src/runtime/node-network.js'
import type { Broker } from '../src/server/broker.js'
import { type Cluster, startCluster } from '../src/server/cluster.js'

const { values } = parseArgs({
  options: {
    partitions: { type: 'string', default: '10000' },
    rf: { type: 'string', default: '3' },
    'idle-ms': { type: 'string', default: '30000' },
    consumers: { type: 'string', default: '1000' },
    'poll-ms': { type: 'string', default: '500' },
    'polls-ms': { type: 'string', default: '20000' },
    'served-timeout-ms': { type: 'string', default: '600000' },
    sites: { type: 'boolean', default: false },
    micro: { type: 'boolean', default: false },
  },
})
const partitions = Number(values.partitions)
const replicationFactor = Number(values.rf)
const idleMs = Number(values['idle-ms'])
const consumerCount = Number(values.consumers)
const pollMs = Number(values['poll-ms'])
const pollsMs = Number(values['polls-ms'])
const TOPIC = 'timers'
const BROKERS = 3

/** Counts of the system clock's timers, total and (with --sites) by the src/ frame that set them. */
const counts = { live: 0, set: 0, fired: 0, cancelled: 0, bySite: new Map<string, number>() }
const originalSetTimeout = systemClock.setTimeout
systemClock.setTimeout = (callback: () => void, delayMs: number): TimerHandle => {
  const site = values.sites ? siteOf(new Error().stack ?? '') : ''
  counts.live++
  counts.set++
  if (values.sites) counts.bySite.set(site, (counts.bySite.get(site) ?? 0) + 1)
  let done = false
  const finish = (): void => {
    if (done) return
    done = true
    counts.live--
    if (values.sites) counts.bySite.set(site, (counts.bySite.get(site) ?? 0) - 1)
  }
  const handle = originalSetTimeout(() => {
    counts.fired++
    finish()
    callback()
  }, delayMs)
  return {
    cancel: () => {
      if (!done) counts.cancelled++
      finish()
      handle.cancel()
    },
  }
}

function siteOf(stack: string): string {
  const frames = stack.split('\n').slice(1)
  const frame = frames.find(
    (f) => f.includes('/src/') && !f.includes('/common/clock.') && !f.includes('timers.bench'),
  )
  const match = frame?.match(/\/src\/([^:)]+):(\d+)/)
  return match ? `${match[1]}:${match[2]}` : 'other'
}

function wheelTimers(cluster: Cluster): number | undefined {
  let sum: number | undefined
  for (const broker of cluster.brokers) {
    const wheel = (broker as Broker & { timingWheel?: { pendingTimers: number } }).timingWheel
    if (wheel !== undefined) sum = (sum ?? 0) + wheel.pendingTimers
  }
  return sum
}

function load(): string {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')
}

/** Live timers sampled every 100 ms over `ms`, with the set/fired rates and the CPU share. */
async function observe(label: string, cluster: Cluster, ms: number): Promise<void> {
  const start = { ...counts, cpu: process.cpuUsage(), at: performance.now() }
  let maxLive = 0
  let liveSum = 0
  let samples = 0
  let maxWheel = 0
  while (performance.now() - start.at < ms) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    maxLive = Math.max(maxLive, counts.live)
    liveSum += counts.live
    samples++
    maxWheel = Math.max(maxWheel, wheelTimers(cluster) ?? 0)
  }
  const seconds = (performance.now() - start.at) / 1000
  const cpu = process.cpuUsage(start.cpu)
  const cpuShare = (cpu.user + cpu.system) / 1e6 / seconds
  console.log(
    `${label}: clock timers live mean ${(liveSum / samples).toFixed(0)} max ${maxLive}; ` +
      `set ${((counts.set - start.set) / seconds).toFixed(0)}/s, fired ${((counts.fired - start.fired) / seconds).toFixed(0)}/s, ` +
      `cancelled ${((counts.cancelled - start.cancelled) / seconds).toFixed(0)}/s; ` +
      `wheel entries max ${wheelTimers(cluster) === undefined ? 'n/a (no wheel)' : maxWheel}; ` +
      `CPU ${(cpuShare * 100).toFixed(1)}% of a core (${((cpuShare * 100) / BROKERS).toFixed(2)}% per broker); ` +
      `load ${load()}`,
  )
  if (values.sites) {
    const sites = [...counts.bySite].filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1])
    for (const [site, n] of sites.slice(0, 15)) console.log(`    ${n} live at ${site}`)
  }
}

async function waitInSync(admin: Admin, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const [topic] = await admin.describeTopics([TOPIC])
    const synced = topic.partitions.filter(
      (p) => p.errorCode === 0 && p.isr.length === replicationFactor,
    ).length
    if (topic.partitions.length === partitions && synced === partitions) return
    if (performance.now() > deadline) throw new Error(`${synced} of ${partitions} partitions in sync`)
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
}

/** One consumer's loop of empty long polls; pushes how much later than pollMs each came back. */
async function longPolls(
  client: BrokerClient,
  partition: number,
  untilMs: number,
  lateMs: number[],
): Promise<void> {
  while (performance.now() < untilMs) {
    const started = performance.now()
    await client.request(ApiKey.Fetch, 11, {
      replicaId: -1,
      maxWaitMs: pollMs,
      minBytes: 1,
      maxBytes: 1 << 20,
      isolationLevel: 0,
      sessionId: 0,
      sessionEpoch: -1,
      topics: [
        {
          topic: TOPIC,
          topicId: ZERO_UUID,
          partitions: [
            {
              partition,
              currentLeaderEpoch: -1,
              fetchOffset: 0n,
              lastFetchedEpoch: -1,
              logStartOffset: -1n,
              partitionMaxBytes: 1 << 20,
            },
          ],
        },
      ],
      forgottenTopicsData: [],
      rackId: '',
    })
    lateMs.push(performance.now() - started - pollMs)
  }
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]
}

const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined)

/** CPU ns per set+cancel (delays 500-1,500 ms, as long polls), heap bytes per pending timer. */
function micro(label: string, clock: Clock): void {
  const count = 200_000
  const handles: TimerHandle[] = new Array(count)
  for (let round = 0; round < 3; round++) {
    // CPU time, not wall time: on a loaded machine the wall clock counts other processes.
    const started = process.cpuUsage()
    for (let i = 0; i < count; i++) handles[i] = clock.setTimeout(noop, 500 + (i % 1000))
    for (let i = 0; i < count; i++) handles[i].cancel()
    const cpu = process.cpuUsage(started)
    const ns = ((cpu.user + cpu.system) * 1000) / count
    if (round === 2) console.log(`${label}: set + cancel ${ns.toFixed(0)} ns of CPU; load ${load()}`)
  }
  handles.fill(undefined as unknown as TimerHandle)
  gc()
  const heapBefore = process.memoryUsage().heapUsed
  for (let i = 0; i < count; i++) handles[i] = clock.setTimeout(noop, 500 + (i % 1000))
  gc()
  const heapPending = process.memoryUsage().heapUsed
  for (let i = 0; i < count; i++) handles[i].cancel()
  console.log(`${label}: ${((heapPending - heapBefore) / count).toFixed(0)} heap bytes per pending timer`)
}

function noop(): void {}

async function main(): Promise<void> {
  if (values.micro) {
    const raw: Clock = { ...systemClock, setTimeout: originalSetTimeout }
    micro('system clock', raw)
    micro('timing wheel', new TimingWheelClock(raw))
    micro('system clock', raw)
    micro('timing wheel', new TimingWheelClock(raw))
    return
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'tidelog-timers-'))
  console.log(
    `timers: ${BROKERS} brokers in one process, ${partitions} partitions RF ${replicationFactor}; load ${load()}`,
  )
  const cluster = await startCluster({
    brokers: BROKERS,
    port: 0,
    dataDir,
    logger: silentLogger,
    properties: { 'offsets.topic.replication.factor': 3, 'transaction.state.log.replication.factor': 3 },
  })
  const admin = new Admin({ bootstrapServers: cluster.bootstrapServers, requestTimeoutMs: 120000 })
  try {
    await observe('empty cluster, 5 s', cluster, 5000)
    const started = performance.now()
    try {
      await admin.createTopics([{ topic: TOPIC, numPartitions: partitions, replicationFactor }])
    } catch (error) {
      // On a loaded machine the leaders may take longer than the request to serve them all:
      // the topic exists, and waitInSync waits for them.
      if ((error as { errorName?: string }).errorName !== 'REQUEST_TIMED_OUT') throw error
    }
    await waitInSync(admin, Number(values['served-timeout-ms']))
    console.log(
      `created and in sync in ${((performance.now() - started) / 1000).toFixed(1)} s; load ${load()}`,
    )
    if (idleMs > 0) await observe(`idle ${idleMs / 1000} s`, cluster, idleMs)
    if (consumerCount > 0) {
      const clients: BrokerClient[] = []
      const polls: Promise<void>[] = []
      const lateMs: number[] = []
      const untilMs = performance.now() + pollsMs
      for (let i = 0; i < consumerCount; i++) {
        const partition = i % partitions
        const leader = cluster.brokers.find((b) => b.replicaManager.getPartition(TOPIC, partition)?.isLeader)
        if (leader === undefined) throw new Error(`no leader for partition ${partition}`)
        const client = new BrokerClient('127.0.0.1', leader.port, `poller-${i}`, nodeNetwork)
        clients.push(client)
        polls.push(longPolls(client, partition, untilMs, lateMs))
      }
      await observe(
        `${consumerCount} consumers long-polling (${pollMs} ms), ${pollsMs / 1000} s`,
        cluster,
        pollsMs,
      )
      await Promise.all(polls)
      for (const client of clients) client.close()
      lateMs.sort((a, b) => a - b)
      console.log(
        `  ${lateMs.length} empty long polls answered after fetch.max.wait.ms plus: ` +
          `min ${lateMs[0].toFixed(1)} p50 ${percentile(lateMs, 50).toFixed(1)} p99 ${percentile(lateMs, 99).toFixed(1)} ` +
          `max ${lateMs[lateMs.length - 1].toFixed(1)} ms`,
      )
    }
  } finally {
    await admin.close()
    await cluster.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
