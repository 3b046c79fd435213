/**
 * Three-broker benchmark (issue 6's targets): RF=3, min.insync.replicas=2, 1 KiB records,
 * driven by the native librdkafka load generator. Brokers run in this process (they share
 * the 2 cores with the client, as in the targets). Prints:
 *   - produce throughput for acks=1 and acks=all
 *   - produce latency p50/p99/p99.9 at a steady 2,000 records/s for acks=1 and acks=all
 *   - follower catch-up speed: a stopped follower restarts behind by --catchup-mb MiB
 *
 *   node dist/bench/cluster.bench.js [--records N] [--catchup-mb M]
 */
import { execFile, execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs, promisify } from 'node:util'
import { systemClock } from '../src/common/clock.js'
import { createLogger } from '../src/common/logger.js'
import { EmbeddedStore } from '../src/metadata/store/embedded-store.js'
import { Broker } from '../src/server/broker.js'
import { brokerConfigFromProperties } from '../src/server/broker-config.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '500000' },
    'catchup-mb': { type: 'string', default: '256' },
  },
})
const records = Number(values.records)
const catchupMiB = Number(values['catchup-mb'])

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

async function startBroker(store: EmbeddedStore, dataDir: string, nodeId: number): Promise<Broker> {
  const properties = new Map([
    ['node.id', String(nodeId)],
    ['listeners', 'PLAINTEXT://127.0.0.1:0'],
    ['log.dirs', join(dataDir, `broker-${nodeId}`)],
    ['default.replication.factor', '3'],
    ['min.insync.replicas', '2'],
    ['num.partitions', '4'],
    ['replica.lag.time.max.ms', '30000'],
  ])
  const logger = createLogger(`broker-${nodeId}`, process.env['TIDELOG_LOG_LEVEL'] ?? 'warn')
  return Broker.start(brokerConfigFromProperties(properties), { store, logger })
}

async function waitForIsr(brokers: readonly Broker[], topic: string, size: number): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const t = brokers[0].metadataImage().topics.get(topic)
    if (t?.partitions.every((p) => p.isr.length >= size)) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`ISR of ${topic} never reached ${size}`)
}

async function main(): Promise<void> {
  const binary = perfBinary()
  const dataDir = mkdtempSync(join(tmpdir(), 'tidelog-cluster-bench-'))
  const store = await EmbeddedStore.open({ clock: systemClock })
  const brokers: Broker[] = []
  try {
    for (let id = 0; id < 3; id++) brokers.push(await startBroker(store, dataDir, id))
    const bootstrap = brokers.map((b) => b.bootstrapServers).join(',')
    console.log(`3 brokers at ${bootstrap}; RF=3, min.insync.replicas=2; ${records} records of 1 KiB\n`)
    console.log(`${'measure'.padEnd(50)} ${'value'.padStart(22)}   target`)
    for (const acks of ['1', '-1']) {
      const topic = `throughput${acks}`
      await perf(binary, ['produce', bootstrap, topic, '1000', '1024', acks, '0', '5'])
      await waitForIsr(brokers, topic, 3)
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
      row(
        `produce acks=${acks === '-1' ? 'all' : acks} (MB/s, records/s)`,
        `${result.mbPerSec} / ${result.recordsPerSec}`,
        acks === '-1' ? '>= 150 MB/s' : '',
      )
    }
    for (const acks of ['1', '-1']) {
      const topic = `steady${acks}`
      await perf(binary, ['produce', bootstrap, topic, '1000', '1024', acks, '0', '0'])
      await waitForIsr(brokers, topic, 3)
      const steady = await perf(binary, ['produce', bootstrap, topic, '20000', '1024', acks, '2000', '0'])
      row(
        `2,000/s acks=${acks === '-1' ? 'all' : acks} p50/p99/p99.9 (ms)`,
        `${steady.p50Ms}/${steady.p99Ms}/${steady.p999Ms}`,
        acks === '-1' ? 'p99 < 2 ms' : '',
      )
    }
    await measureCatchUp(binary, store, dataDir, brokers)
  } finally {
    for (const broker of brokers) await broker.stop()
    await store.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/** Stops broker 2, writes `catchupMiB` to the others, restarts it and times its catch-up. */
async function measureCatchUp(
  binary: string,
  store: EmbeddedStore,
  dataDir: string,
  brokers: Broker[],
): Promise<void> {
  const topic = 'catchup'
  const bootstrap = brokers.map((b) => b.bootstrapServers).join(',')
  await perf(binary, ['produce', bootstrap, topic, '100', '1024', '-1', '0', '5'])
  await waitForIsr(brokers, topic, 3)
  await brokers[2].stop()
  const count = Math.ceil((catchupMiB * 1024 * 1024) / 1024)
  await perf(binary, [
    'produce',
    brokers
      .slice(0, 2)
      .map((b) => b.bootstrapServers)
      .join(','),
    topic,
    String(count),
    '1024',
    '1',
    '0',
    '5',
  ])
  const target = brokers[0]
    .metadataImage()
    .topics.get(topic)!
    .partitions.map((p) => {
      const leader = brokers.find((b) => b.nodeId === p.leader)!
      return leader.replicaManager.getPartition(topic, p.partition)!.log.logEndOffset
    })
  const start = performance.now()
  brokers[2] = await startBroker(store, dataDir, 2)
  for (;;) {
    const caughtUp = target.every(
      (end, partition) =>
        (brokers[2].replicaManager.getPartition(topic, partition)?.log.logEndOffset ?? 0) >= end,
    )
    if (caughtUp) break
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  const seconds = (performance.now() - start) / 1000
  row(
    `follower catch-up after ${catchupMiB} MiB behind (MB/s)`,
    ((count * 1024) / seconds / 1e6).toFixed(1),
    '>= 200',
  )
}

await main()
