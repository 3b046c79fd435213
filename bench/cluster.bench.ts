/**
 * Three-broker benchmark (issue 6's targets): RF=3, min.insync.replicas=2, 1 KiB records,
 * driven by the native librdkafka load generator, against three `tidelog broker` processes
 * on a private etcd (needs Debian's etcd-server, librdkafka-dev and cc). Brokers and client
 * share this machine's cores, as in the targets. Prints:
 *   - produce throughput for acks=1 and acks=all
 *   - produce latency p50/p99/p99.9 at a steady 2,000 records/s for acks=1 and acks=all
 *   - follower catch-up speed: a stopped follower restarts behind by --catchup-mb MiB
 *
 *   node dist/bench/cluster.bench.js [--records N] [--catchup-mb M]
 */

import { execFile, execFileSync } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs, promisify } from 'node:util'
import type { DescribeLogDirsResponse } from '../src/protocol/generated/describe-log-dirs-response.js'
import { ApiKey } from '../src/protocol/generated/index.js'
import { BrokerClient } from '../src/replication/broker-client.js'
import { nodeNetwork } from '../src/runtime/node-network.js'
import { type EtcdCluster, withEtcdCluster } from '../test/helpers/broker-process.js'
import { kcatMetadata } from '../test/helpers/metadata-view.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '500000' },
    'catchup-mb': { type: 'string', default: '256' },
    /** Steady rates (records/s) for the latency rows, comma-separated. */
    rates: { type: 'string', default: '2000' },
    /** Skip the follower catch-up measurement (0 MiB). */
    'skip-catchup': { type: 'boolean', default: false },
    /** Extra broker properties, k=v (repeatable). */
    set: { type: 'string', multiple: true, default: [] },
  },
})
const records = Number(values.records)
const catchupMiB = Number(values['catchup-mb'])
const steadyRates = values.rates.split(',').filter(Boolean).map(Number)

function perfBinary(): string {
  const out = join(root, '.build', 'rdkafka-perf')
  mkdirSync(dirname(out), { recursive: true })
  execFileSync('cc', ['-O2', '-o', out, join(root, 'bench', 'native', 'rdkafka-perf.c'), '-lrdkafka'])
  return out
}

async function perf(binary: string, args: string[]): Promise<Record<string, number>> {
  const { stdout } = await promisify(execFile)(binary, args, { encoding: 'utf8', maxBuffer: 1 << 20 })
  return JSON.parse(stdout.trim().split('\n').at(-1)!)
}

function row(name: string, value: string, target: string): void {
  console.log(`${name.padEnd(50)} ${value.padStart(22)}   ${target}`)
}

const BROKER_PROPERTIES: Record<string, string | number> = {
  'default.replication.factor': 3,
  'min.insync.replicas': 2,
  'num.partitions': 4,
  'replica.lag.time.max.ms': 30000,
  ...Object.fromEntries(
    values.set.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  ),
}

/** Total partition bytes per partition of `topic` on one broker, from DescribeLogDirs. */
async function partitionSizes(address: string, topic: string): Promise<Map<number, bigint>> {
  const [host, port] = address.split(':')
  const client = new BrokerClient(host, Number(port), 'tidelog-bench', nodeNetwork)
  try {
    const response = await client.request<DescribeLogDirsResponse>(ApiKey.DescribeLogDirs, 1, {
      topics: [{ topic, partitions: [0, 1, 2, 3] }],
    })
    const sizes = new Map<number, bigint>()
    for (const dir of response.results)
      for (const t of dir.topics) for (const p of t.partitions) sizes.set(p.partitionIndex, p.partitionSize)
    return sizes
  } finally {
    client.close()
  }
}

async function waitForIsr(cluster: EtcdCluster, topic: string, size: number): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const view = await kcatMetadata(cluster.liveBootstrap, topic)
    const partitions = view.topics.get(topic)
    if (partitions && partitions.length > 0 && partitions.every((p) => p.isr.length >= size)) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`ISR of ${topic} never reached ${size}`)
}

async function main(): Promise<void> {
  const binary = perfBinary()
  await withEtcdCluster({ brokers: 3, properties: BROKER_PROPERTIES }, async (cluster) => {
    const bootstrap = cluster.liveBootstrap
    console.log(
      `3 broker processes on etcd at ${bootstrap}; RF=3, min.insync.replicas=2; ${records} records of 1 KiB\n`,
    )
    console.log(`${'measure'.padEnd(50)} ${'value'.padStart(22)}   target`)
    for (const acks of ['1', '-1']) {
      const topic = `throughput${acks}`
      await perf(binary, ['produce', bootstrap, topic, '1000', '1024', acks, '0', '5'])
      await waitForIsr(cluster, topic, 3)
      const result = await perf(binary, [
        'produce',
        bootstrap,
        topic,
        String(records),
        '1024',
        acks,
        '0',
        '5',
      ])
      const name = `produce acks=${acks === '-1' ? 'all' : acks} (MB/s, records/s)`
      row(name, `${result.mbPerSec} / ${result.recordsPerSec}`, acks === '-1' ? '>= 150 MB/s' : '')
    }
    for (const rate of steadyRates) {
      for (const acks of ['1', '-1']) {
        const topic = `steady${acks}-${rate}`
        await perf(binary, ['produce', bootstrap, topic, '1000', '1024', acks, '0', '0'])
        await waitForIsr(cluster, topic, 3)
        const steady = await perf(binary, [
          'produce',
          bootstrap,
          topic,
          String(rate * 10),
          '1024',
          acks,
          String(rate),
          '0',
        ])
        row(
          `${rate.toLocaleString('en')}/s acks=${acks === '-1' ? 'all' : acks} p50/p99/p99.9 (ms)`,
          `${steady.p50Ms}/${steady.p99Ms}/${steady.p999Ms}`,
          acks === '-1' ? 'p99 < 5 ms' : '',
        )
      }
    }
    if (!values['skip-catchup']) await measureCatchUp(binary, cluster)
  })
}

/** Stops one broker, writes `catchupMiB` to the others, restarts it and times its catch-up. */
async function measureCatchUp(binary: string, cluster: EtcdCluster): Promise<void> {
  const topic = 'catchup'
  await perf(binary, ['produce', cluster.liveBootstrap, topic, '100', '1024', '-1', '0', '5'])
  await waitForIsr(cluster, topic, 3)
  const follower = cluster.brokers[2]
  await follower.stop()
  const count = Math.ceil((catchupMiB * 1024 * 1024) / 1024)
  await perf(binary, ['produce', cluster.liveBootstrap, topic, String(count), '1024', '1', '0', '5'])
  const leaderSizes = new Map<number, bigint>()
  for (const broker of cluster.brokers.slice(0, 2)) {
    for (const [p, size] of await partitionSizes(broker.address, topic)) {
      if (size > (leaderSizes.get(p) ?? 0n)) leaderSizes.set(p, size)
    }
  }
  const start = performance.now()
  await follower.start()
  for (;;) {
    const sizes = await partitionSizes(follower.address, topic)
    if ([...leaderSizes].every(([p, size]) => (sizes.get(p) ?? 0n) >= size)) break
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const seconds = (performance.now() - start) / 1000
  row(
    `follower restart + catch-up, ${catchupMiB} MiB behind (MB/s)`,
    ((count * 1024) / seconds / 1e6).toFixed(1),
    '>= 200 (includes process start)',
  )
}

await main()
