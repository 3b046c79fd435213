import { parseArgs } from 'node:util'
import { type EtcdCluster, withEtcdCluster } from '../test/helpers/broker-process.js'
import { partitionSizes, waitForIsr } from './cluster-probes.js'
import { perf, perfBinary } from './load-generator.js'

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
