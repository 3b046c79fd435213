/**
 * Single-broker benchmark (issue 4's targets). Drives the broker with a native librdkafka
 * load generator (bench/native/rdkafka-perf.c, compiled here; needs cc and librdkafka-dev)
 * so the client is not the bottleneck, and prints:
 *   - produce throughput (1 KiB records, acks=1, batching) and consume throughput
 *   - produce latency p50/p99/p99.9 at a steady 2,000 records/s (acks=1 and acks=all)
 *   - `tidelog start` spawn-to-accepted-connection time (median of 5), in-process startBroker() time
 *   - clean restart time over a data directory of --restart-mb MiB, idle resident memory
 *
 *   node dist/bench/broker.bench.js [--records N] [--restart-mb M]
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { startBroker } from '../src/index.js'
import { tidelogLaunch } from '../test/helpers/broker-process.js'
import { perf, perfBinary } from './load-generator.js'
import { waitForPort } from './wait-for-port.js'

const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '1000000' },
    'restart-mb': { type: 'string', default: '1024' },
  },
})
const records = Number(values.records)
const restartMiB = Number(values['restart-mb'])

async function timeCliStart(dataDir: string, port: number): Promise<number> {
  const start = performance.now()
  const launch = tidelogLaunch([], { ...process.env, TIDELOG_LOG_LEVEL: 'warn' })
  const [command, ...launchArgs] = launch.argv
  const child = spawn(command, [...launchArgs, 'start', '--port', String(port), '--data-dir', dataDir], {
    stdio: 'ignore',
    env: launch.env,
  })
  await waitForPort(port, Date.now() + 10000)
  const elapsed = performance.now() - start
  child.kill('SIGTERM')
  await new Promise((resolve) => child.once('exit', resolve))
  return elapsed
}

function row(name: string, value: string, target: string): void {
  console.log(`${name.padEnd(46)} ${value.padStart(16)}   ${target}`)
}

async function main(): Promise<void> {
  const binary = perfBinary()
  const dataDir = mkdtempSync(join(tmpdir(), 'tidelog-bench-'))
  try {
    const startAt = performance.now()
    const cluster = await startBroker({ dataDir: join(dataDir, 'main'), properties: { 'num.partitions': 4 } })
    const inProcessStartMs = performance.now() - startAt
    const bootstrap = cluster.bootstrapServers
    console.log(`broker at ${bootstrap}; ${records} records of 1 KiB\n`)
    console.log(`${'measure'.padEnd(46)} ${'value'.padStart(16)}   target`)
    const produce = await perf(binary, [
      'produce',
      bootstrap,
      'throughput',
      String(records),
      '1024',
      '1',
      '0',
      '5',
    ])
    row('produce 1 KiB acks=1 (records/s)', produce.recordsPerSec.toFixed(0), '')
    row('produce 1 KiB acks=1 (MB/s)', produce.mbPerSec.toFixed(1), '>= 300 (aim 500)')
    const consume = await perf(binary, ['consume', bootstrap, 'throughput', '4', String(records)])
    row('consume (records/s)', consume.recordsPerSec.toFixed(0), '')
    row('consume (MB/s)', consume.mbPerSec.toFixed(1), '>= 600')
    for (const acks of ['1', '-1']) {
      const steady = await perf(binary, [
        'produce',
        bootstrap,
        `steady${acks}`,
        '20000',
        '1024',
        acks,
        '2000',
        '0',
      ])
      row(
        `produce at 2,000/s acks=${acks} p50/p99/p99.9 (ms)`,
        `${steady.p50Ms}/${steady.p99Ms}/${steady.p999Ms}`,
        'p99 < 1 ms',
      )
    }
    await new Promise((resolve) => setTimeout(resolve, 2000))
    global.gc?.()
    row('idle resident memory after load (MB)', (process.memoryUsage().rss / 1e6).toFixed(1), '< 80 (idle)')
    await fillForRestart(binary, bootstrap, restartMiB)
    await cluster.stop()
    const restartAt = performance.now()
    const restarted = await startBroker({ dataDir: join(dataDir, 'main') })
    const restartMs = performance.now() - restartAt
    await restarted.stop()
    row(`clean restart over ${restartMiB} MiB (ms)`, restartMs.toFixed(1), '< 500')
    row('in-process startBroker() (ms)', inProcessStartMs.toFixed(1), '< 50')
    // Median of several cold starts: one spawn on a busy machine says little (bench/startup.bench.ts
    // measures only this, more times).
    const cliMs: number[] = []
    for (let i = 0; i < 5; i++) {
      cliMs.push(await timeCliStart(join(dataDir, `cli-${i}`), 19000 + Math.floor(Math.random() * 1000)))
    }
    cliMs.sort((a, b) => a - b)
    row(
      'tidelog start: spawn to accepted connection (ms)',
      `${cliMs[2].toFixed(1)} (min ${cliMs[0].toFixed(1)})`,
      '< 150',
    )
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

async function fillForRestart(binary: string, bootstrap: string, mib: number): Promise<void> {
  const count = Math.ceil((mib * 1024 * 1024) / 1024)
  await perf(binary, ['produce', bootstrap, 'restart', String(count), '1024', '1', '0', '5'])
}

if (!existsSync('/usr/include/librdkafka/rdkafka.h')) {
  console.error('bench needs librdkafka-dev (apt-get install librdkafka-dev) and a C compiler')
  process.exit(1)
}
await main()
