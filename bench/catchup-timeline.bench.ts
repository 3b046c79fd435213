import { loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { type EtcdCluster, withEtcdCluster } from '../test/helpers/broker-process.js'
import { partitionSizes, waitForIsr } from './cluster-probes.js'
import { perf, perfBinary } from './load-generator.js'

const { values } = parseArgs({
  options: {
    mb: { type: 'string', default: '96' },
    rounds: { type: 'string', default: '1' },
    /** Print every line, not only the first of each stage. */
    verbose: { type: 'boolean', default: false },
  },
})
const catchupMiB = Number(values.mb)

const sum = (sizes: Map<number, bigint>): number => Number([...sizes.values()].reduce((a, b) => a + b, 0n))

async function round(binary: string, cluster: EtcdCluster, topic: string): Promise<void> {
  await perf(binary, ['produce', cluster.liveBootstrap, topic, '100', '1024', '-1', '0', '5'])
  await waitForIsr(cluster, topic, 3)
  const follower = cluster.brokers[2]
  await follower.stop()
  const count = Math.ceil((catchupMiB * 1024 * 1024) / 1024)
  await perf(binary, ['produce', cluster.liveBootstrap, topic, String(count), '1024', '1', '0', '5'])
  const leaderSizes = new Map<number, bigint>()
  for (const broker of cluster.brokers.slice(0, 2))
    for (const [p, size] of await partitionSizes(broker.address, topic))
      if (size > (leaderSizes.get(p) ?? 0n)) leaderSizes.set(p, size)
  const load = loadavg()[0]
  const spawnEpochMs = Date.now()
  const start = performance.now()
  await follower.start()
  const listeningMs = performance.now() - start
  const polls: [number, number][] = []
  let firstSize = -1
  for (;;) {
    const sizes = await partitionSizes(follower.address, topic)
    const at = performance.now() - start
    if (firstSize < 0) firstSize = sum(sizes)
    polls.push([at, sum(sizes) - firstSize])
    if ([...leaderSizes].every(([p, size]) => (sizes.get(p) ?? 0n) >= size)) break
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const endMs = performance.now() - start
  const bytes = count * 1024
  console.log(
    `\n${topic}: ${catchupMiB} MiB, load ${load.toFixed(2)}; helper saw "listening on" + accept at ${listeningMs.toFixed(0)} ms, caught up at ${endMs.toFixed(0)} ms: ` +
      `${(bytes / (endMs / 1000) / 1e6).toFixed(1)} MB/s from start, ${(bytes / ((endMs - listeningMs) / 1000) / 1e6).toFixed(1)} from listening`,
  )
  const seen = new Set<string>()
  let fetchedBytes = 0
  for (const line of follower.current.lines) {
    let name: string
    let at: number
    const mark = /^MARK (\S+) (\d+)$/.exec(line)
    if (mark) {
      name = mark[1]
      at = Number(mark[2]) - spawnEpochMs
      const fetched = /^fetched(\d+):(\d+)$/.exec(name)
      if (fetched) {
        fetchedBytes += Number(fetched[2])
        name = `fetched${fetched[1]} (total ${(fetchedBytes / 1048576).toFixed(1)} MiB)`
      }
    } else if (line.startsWith('{')) {
      const parsed = JSON.parse(line) as { time?: number; msg?: string }
      if (parsed.time === undefined) continue
      name = `log: ${parsed.msg}`
      at = parsed.time - spawnEpochMs
    } else continue
    const stage = name.replace(/\d+.*$/, '')
    if (!values.verbose && seen.has(stage) && !name.startsWith('fetched')) continue
    seen.add(stage)
    console.log(`${at.toFixed(0).padStart(6)} ms  ${name}`)
  }
  const step = Math.max(1, Math.floor(polls.length / 15))
  for (let i = 0; i < polls.length; i += step)
    console.log(
      `${polls[i][0].toFixed(0).padStart(6)} ms  poll: ${(polls[i][1] / 1048576).toFixed(1)} MiB new`,
    )
  console.log(`${endMs.toFixed(0).padStart(6)} ms  poll: caught up (${polls.length} polls)`)
  // A clean stop, so a --cpu-prof of this run (TIDELOG_BROKER_NODE_FLAGS) is written; the next round restarts it.
  await follower.stop()
  await follower.start()
}

const binary = perfBinary()
await withEtcdCluster(
  {
    brokers: 3,
    properties: {
      'default.replication.factor': 3,
      'min.insync.replicas': 2,
      'num.partitions': 4,
      'replica.lag.time.max.ms': 30000,
    },
  },
  async (cluster) => {
    for (let i = 1; i <= Number(values.rounds); i++) await round(binary, cluster, `catchup-${i}`)
    // Clean stops, so that every broker's --cpu-prof (TIDELOG_BROKER_NODE_FLAGS) is written.
    for (const broker of cluster.brokers) await broker.stop()
  },
)
