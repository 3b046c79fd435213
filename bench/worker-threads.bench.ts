/**
 * Issue 34 item 3: `tidelog start --brokers 3` with its brokers on one event loop against
 * the same with `--worker-threads` (an event loop, and so up to a core, per broker). For
 * each mode, a fresh `tidelog start` process (so this process's own work is not the
 * brokers'), librdkafka's load generator (bench/native/rdkafka-perf.c) in a process of its
 * own, and RF 3, min.insync.replicas=2, acks=all, 1 KiB records:
 *
 * - throughput: `--records` as fast as the producer goes, with the CPU the broker process
 *   used meanwhile (cores = CPU seconds / wall seconds, all its threads);
 * - latency: `--rate` records/s for 10 s, delivery latency p50/p99/p99.9.
 *
 *   npm run bench:worker-threads -- [--records 200000] [--rate 2000] [--rounds 1]
 *
 * Rounds alternate the modes (one-thread, worker-threads, one-thread, ...), so a machine whose
 * load changes meanwhile weighs on both alike; each row is the median of the rounds.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { spawnTidelog } from '../test/helpers/broker-process.js'
import { waitForIsrAt } from './cluster-probes.js'
import { perf, perfBinary } from './load-generator.js'
import { processStats } from './process-stats.js'

const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '200000' },
    rate: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '1' },
  },
})
const records = Number(values.records)
const rate = Number(values.rate)
const rounds = Number(values.rounds)

type Mode = 'one-thread' | 'worker-threads'

interface Figures {
  readonly mbPerSec: number
  readonly recordsPerSec: number
  /** CPU seconds of the broker process per wall second of the throughput run. */
  readonly cores: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly p999Ms: number
}

async function measure(binary: string, mode: Mode): Promise<Figures> {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-bench-workers-'))
  const child = spawnTidelog(
    [
      'start',
      '--brokers',
      '3',
      ...(mode === 'worker-threads' ? ['--worker-threads'] : []),
      '--port',
      '0',
      '--http-port',
      '-1',
      '--schema-registry-port',
      '-1',
      '--data-dir',
      dataDir,
      '--set',
      'default.replication.factor=3',
      '--set',
      'min.insync.replicas=2',
      '--set',
      'num.partitions=4',
      '--set',
      'replica.lag.time.max.ms=30000',
    ],
    { TIDELOG_LOG_LEVEL: 'warn' },
  )
  try {
    const { line } = await child.waitForLine(/^bootstrap servers: /, 60_000)
    const bootstrap = line.slice('bootstrap servers: '.length).trim()
    await perf(binary, ['produce', bootstrap, 'throughput', '1000', '1024', '-1', '0', '5'])
    await waitForIsrAt(bootstrap, 'throughput', 3)
    const before = processStats([child.pid])
    const startedMs = performance.now()
    const burst = await perf(binary, [
      'produce',
      bootstrap,
      'throughput',
      String(records),
      '1024',
      '-1',
      '0',
      '5',
    ])
    const wallSeconds = (performance.now() - startedMs) / 1000
    const cpuSeconds = processStats([child.pid]).cpuSeconds - before.cpuSeconds
    await perf(binary, ['produce', bootstrap, 'steady', '1000', '1024', '-1', '0', '0'])
    await waitForIsrAt(bootstrap, 'steady', 3)
    const steady = await perf(binary, [
      'produce',
      bootstrap,
      'steady',
      String(rate * 10),
      '1024',
      '-1',
      String(rate),
      '0',
    ])
    return {
      mbPerSec: burst.mbPerSec,
      recordsPerSec: burst.recordsPerSec,
      cores: cpuSeconds / wallSeconds,
      p50Ms: steady.p50Ms,
      p99Ms: steady.p99Ms,
      p999Ms: steady.p999Ms,
    }
  } finally {
    await child.terminate(30_000)
    await rm(dataDir, { recursive: true, force: true })
  }
}

function median(numbers: readonly number[]): number {
  const sorted = [...numbers].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

async function main(): Promise<void> {
  const binary = perfBinary()
  const modes: Mode[] = ['one-thread', 'worker-threads']
  const results = new Map<Mode, Figures[]>(modes.map((mode) => [mode, []]))
  const loadBefore = loadavg()[0]
  for (let round = 0; round < rounds; round++)
    for (const mode of modes) results.get(mode)!.push(await measure(binary, mode))
  console.log(
    `tidelog start --brokers 3, RF 3, min.insync.replicas=2, acks=all, 1 KiB records; ` +
      `${availableParallelism()} cores, load average ${loadBefore.toFixed(1)} before, ${loadavg()[0].toFixed(1)} after; ` +
      `median of ${rounds} round(s)\n`,
  )
  console.log(
    `${'mode'.padEnd(16)} ${'MB/s'.padStart(8)} ${'records/s'.padStart(10)} ${'cores'.padStart(6)}   ` +
      `${rate.toLocaleString('en')}/s p50/p99/p99.9 (ms)`,
  )
  for (const mode of modes) {
    const runs = results.get(mode)!
    const of = (key: keyof Figures): number => median(runs.map((run) => run[key]))
    console.log(
      `${mode.padEnd(16)} ${of('mbPerSec').toFixed(1).padStart(8)} ${Math.round(of('recordsPerSec')).toString().padStart(10)} ` +
        `${of('cores').toFixed(2).padStart(6)}   ${of('p50Ms').toFixed(1)}/${of('p99Ms').toFixed(1)}/${of('p999Ms').toFixed(1)}`,
    )
  }
  // Every round as measured: how far apart the rounds are says how much the medians mean.
  console.log('\nrounds (MB/s, cores, p99 ms):')
  for (const mode of modes)
    console.log(
      `${mode.padEnd(16)} ${results
        .get(mode)!
        .map((run) => `${run.mbPerSec.toFixed(1)}, ${run.cores.toFixed(2)}, ${run.p99Ms.toFixed(0)}`)
        .join(' | ')}`,
    )
}

await main()
