/**
 * `npm run bench:many-clients`: issue 38's "many clients" on the deployment the README
 * documents (three `tidelog broker` processes on a default etcd) and on Apache Kafka 4.4
 * (three KRaft nodes) in the same run, one system after the other:
 *   - groups:    --groups consumer groups of --members members each, all joining at once, on
 *                a 6-partition RF 3 topic, with the classic protocol and with KIP-848's
 *                (`--protocols classic,consumer`): until every group is balanced (every
 *                partition held once, each member holding its share); per group the time from the start until then
 *                (p50, p99, max), the groups that never got there within --timeout-ms, the
 *                errors the members' polls threw, and the brokers' RSS growth and CPU (one
 *                group joins first, untimed, so that `__consumer_offsets` exists)
 *   - producers: --producers idempotent producers (acks=all) started at once, each sending
 *                --records-per-producer records of 100 bytes: the time to each producer's
 *                first acknowledged record (p50, p99, max), sends refused, brokers' RSS
 *                growth and CPU
 * Every member and producer is tidelog's own client in this process: the bench measures the
 * brokers, not the client (the compatibility suites cover the other clients).
 *
 *   node dist/bench/many-clients.bench.js [--groups 1000] [--members 3]
 *     [--protocols classic,consumer] [--producers 1000] [--records-per-producer 10]
 *     [--systems tidelog,kafka] [--timeout-ms 300000] [--no-kafka]
 */
import { loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { Admin } from '../src/client/admin.js'
import { Consumer } from '../src/client/consumer.js'
import { Producer } from '../src/client/producer.js'
import { type DeployedCluster, withKafkaProcesses, withTidelogProcesses } from './deployed-cluster.js'
import { processStats } from './process-stats.js'
import { kafkaAvailable } from './reference-kafka.js'

const { values } = parseArgs({
  options: {
    groups: { type: 'string', default: '1000' },
    members: { type: 'string', default: '3' },
    protocols: { type: 'string', default: 'classic,consumer' },
    producers: { type: 'string', default: '1000' },
    'records-per-producer': { type: 'string', default: '10' },
    systems: { type: 'string', default: 'tidelog,kafka' },
    'timeout-ms': { type: 'string', default: '300000' },
    'no-kafka': { type: 'boolean', default: false },
  },
})

const GROUP_COUNT = Number(values.groups)
const MEMBERS_PER_GROUP = Number(values.members)
const PROTOCOLS = values.protocols.split(',').filter((p) => p !== '') as ('classic' | 'consumer')[]
const PRODUCER_COUNT = Number(values.producers)
const RECORDS_PER_PRODUCER = Number(values['records-per-producer'])
const TIMEOUT_MS = Number(values['timeout-ms'])
const TOPIC_PARTITIONS = 6
const RECORD_VALUE = Buffer.alloc(100, 'x')

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
const load = (): string => loadavg()[0].toFixed(1)

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

function spread(samplesMs: number[]): string {
  const sorted = [...samplesMs].sort((a, b) => a - b)
  const f = (ms: number): string => (ms / 1000).toFixed(2)
  return `p50 ${f(percentile(sorted, 50))} s, p99 ${f(percentile(sorted, 99))} s, max ${f(sorted.at(-1) ?? Number.NaN)} s`
}

interface Row {
  readonly system: string
  readonly measure: string
  readonly figure: string
}

/** The brokers' largest RSS and total CPU seconds, read from /proc. */
function brokerStats(cluster: DeployedCluster): { rssMiB: number; cpuSeconds: number } {
  const pids = cluster.nodeIds.map((id) => cluster.brokerPid(id)).filter((pid): pid is number => pid !== null)
  const stats = processStats(pids)
  return { rssMiB: stats.maxRssBytes / 2 ** 20, cpuSeconds: stats.cpuSeconds }
}

function describeCost(
  before: { rssMiB: number; cpuSeconds: number },
  after: { rssMiB: number; cpuSeconds: number },
) {
  return `largest broker RSS ${before.rssMiB.toFixed(0)} -> ${after.rssMiB.toFixed(0)} MiB, brokers' CPU ${(after.cpuSeconds - before.cpuSeconds).toFixed(1)} s`
}

async function createTopic(bootstrap: string[], topic: string): Promise<void> {
  const admin = new Admin({ bootstrapServers: bootstrap })
  try {
    await admin.createTopics([{ topic, numPartitions: TOPIC_PARTITIONS, replicationFactor: 3 }])
  } finally {
    await admin.close()
  }
}

/**
 * Whether the group is balanced: every partition held exactly once and each member holding
 * its share (6 partitions, 3 members: 2 each). Only "every partition held" would count a group
 * whose first member took all six before the others were assigned, which is what an assignment
 * interval (KIP-1263) leaves for its first second, and not what users wait for.
 */
function groupComplete(members: readonly Consumer[]): boolean {
  const counts = members.map((m) => m.assignment().length)
  const held = members.flatMap((m) => m.assignment().map((tp) => tp.partition))
  const fewest = Math.floor(TOPIC_PARTITIONS / members.length)
  return (
    held.length === TOPIC_PARTITIONS &&
    new Set(held).size === TOPIC_PARTITIONS &&
    counts.every((n) => n >= fewest && n <= fewest + 1)
  )
}

async function measureGroups(
  cluster: DeployedCluster,
  bootstrap: string[],
  protocol: 'classic' | 'consumer',
) {
  const topic = `mc-groups-${protocol}`
  await createTopic(bootstrap, topic)
  const before = brokerStats(cluster)
  const startMs = performance.now()
  const groups: Consumer[][] = []
  for (let g = 0; g < GROUP_COUNT; g++) {
    const members: Consumer[] = []
    for (let m = 0; m < MEMBERS_PER_GROUP; m++) {
      const consumer = new Consumer({
        bootstrapServers: bootstrap,
        groupId: `mc-${protocol}-${g}`,
        groupProtocol: protocol,
        enableAutoCommit: false,
        fetchMaxWaitMs: 500,
      })
      consumer.subscribe([topic])
      members.push(consumer)
    }
    groups.push(members)
  }
  const stableAfterMs: (number | null)[] = groups.map(() => null)
  const errors = new Map<string, number>()
  let running = true
  // Each member checks its group after every poll: a separate watcher's timer would wait
  // behind 3,000 poll loops in this one process and see every group at once.
  const pollLoops = groups.flatMap((members, g) =>
    members.map(async (consumer) => {
      while (running) {
        try {
          await consumer.poll(200)
        } catch (error) {
          const name = (error as Error).name ?? 'Error'
          errors.set(name, (errors.get(name) ?? 0) + 1)
          await sleep(100)
        }
        if (stableAfterMs[g] === null && groupComplete(members))
          stableAfterMs[g] = performance.now() - startMs
      }
    }),
  )
  const deadline = startMs + TIMEOUT_MS
  while (performance.now() < deadline && stableAfterMs.some((t) => t === null)) await sleep(100)
  const after = brokerStats(cluster)
  running = false
  const closeStartMs = performance.now()
  await Promise.all(pollLoops)
  await Promise.all(groups.flat().map((c) => c.close().catch(() => undefined)))
  const closeMs = performance.now() - closeStartMs
  const stable = stableAfterMs.filter((t): t is number => t !== null)
  const refused = [...errors].map(([name, n]) => `${name} ${n}`).join(', ') || 'none'
  return [
    {
      measure: `${GROUP_COUNT} ${protocol} groups of ${MEMBERS_PER_GROUP} joining at once: balanced`,
      figure: `${stable.length}/${GROUP_COUNT} groups (${spread(stable)}; load ${load()})`,
    },
    { measure: `${protocol} groups: errors thrown by polls`, figure: refused },
    {
      measure: `${protocol} groups: cost`,
      figure: `${describeCost(before, after)}; all closed in ${(closeMs / 1000).toFixed(1)} s`,
    },
  ]
}

async function measureProducers(cluster: DeployedCluster, bootstrap: string[]) {
  const topic = 'mc-produce'
  await createTopic(bootstrap, topic)
  const before = brokerStats(cluster)
  const startMs = performance.now()
  const firstAckMs: number[] = []
  let refused = 0
  const reasons = new Map<string, number>()
  const producers = Array.from(
    { length: PRODUCER_COUNT },
    () => new Producer({ bootstrapServers: bootstrap, enableIdempotence: true, acks: 'all' }),
  )
  await Promise.all(
    producers.map(async (producer, p) => {
      for (let r = 0; r < RECORDS_PER_PRODUCER; r++) {
        try {
          await producer.send({ topic, key: Buffer.from(`p${p}`), value: RECORD_VALUE })
          if (r === 0) firstAckMs.push(performance.now() - startMs)
        } catch (error) {
          refused++
          const name = (error as Error).name ?? 'Error'
          reasons.set(name, (reasons.get(name) ?? 0) + 1)
        }
      }
    }),
  )
  const totalMs = performance.now() - startMs
  const after = brokerStats(cluster)
  await Promise.all(producers.map((p) => p.close().catch(() => undefined)))
  const why = [...reasons].map(([name, n]) => `${name} ${n}`).join(', ')
  return [
    {
      measure: `${PRODUCER_COUNT} idempotent producers started at once: first record acknowledged`,
      figure: `${firstAckMs.length}/${PRODUCER_COUNT} producers (${spread(firstAckMs)}; load ${load()})`,
    },
    {
      measure: `idempotent producers: ${PRODUCER_COUNT * RECORDS_PER_PRODUCER} records, acks=all`,
      figure: `${refused} refused${why === '' ? '' : ` (${why})`}, all sent in ${(totalMs / 1000).toFixed(1)} s`,
    },
    { measure: 'idempotent producers: cost', figure: describeCost(before, after) },
  ]
}

/**
 * One group joined and gone before anything is timed, so that `__consumer_offsets` exists
 * (its creation, 50 partitions at RF 3, would otherwise count in the first groups' joins).
 */
async function warmUp(bootstrap: string[]): Promise<void> {
  const topic = 'mc-warm-up'
  await createTopic(bootstrap, topic)
  const consumer = new Consumer({
    bootstrapServers: bootstrap,
    groupId: 'mc-warm-up',
    enableAutoCommit: false,
  })
  consumer.subscribe([topic])
  const deadline = performance.now() + TIMEOUT_MS
  while (consumer.assignment().length === 0) {
    if (performance.now() > deadline) throw new Error('the warm-up group never got its partitions')
    await consumer.poll(200)
  }
  await consumer.close()
}

async function measure(cluster: DeployedCluster): Promise<Row[]> {
  const bootstrap = cluster.nodeIds.map((id) => cluster.address(id))
  const rows: { measure: string; figure: string }[] = []
  await warmUp(bootstrap)
  for (const protocol of PROTOCOLS) {
    console.log(
      `${cluster.system}: ${GROUP_COUNT} ${protocol} groups of ${MEMBERS_PER_GROUP} (load ${load()})`,
    )
    rows.push(...(await measureGroups(cluster, bootstrap, protocol)))
  }
  if (PRODUCER_COUNT > 0) {
    console.log(`${cluster.system}: ${PRODUCER_COUNT} idempotent producers (load ${load()})`)
    rows.push(...(await measureProducers(cluster, bootstrap)))
  }
  for (const row of rows) console.log(`  ${row.measure}: ${row.figure}`)
  return rows.map((row) => ({ system: cluster.system, ...row }))
}

async function main(): Promise<void> {
  const systems = values.systems.split(',')
  const rows: Row[] = []
  if (systems.includes('tidelog')) rows.push(...(await withTidelogProcesses(measure)))
  if (systems.includes('kafka')) {
    const kafka = await kafkaAvailable(values['no-kafka'])
    if ('missing' in kafka) console.log(`Kafka not measured: ${kafka.missing}`)
    else rows.push(...(await withKafkaProcesses(measure)))
  }
  console.log('\n| system | measure | figure |\n| --- | --- | --- |')
  for (const row of rows) console.log(`| ${row.system} | ${row.measure} | ${row.figure} |`)
}

await main()
