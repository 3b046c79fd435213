/**
 * Restart cost after kill -9 against a clean restart (issue 41, item 3): one broker
 * (`bin/tidelog.js start`, a temp data dir, a free port) whose data is one topic of N
 * partitions of which only a few hold records (--written: how many are written before each
 * restart, `all` for every one). For each N it
 *   1. starts the broker, creates the topic, produces to a few partitions, stops it (SIGTERM);
 *   2. restarts it: the clean restart, measured; produces a little more to a few
 *      partitions (unflushed: past their recovery point) and kills it (SIGKILL);
 *   3. restarts it: the restart after kill -9, measured; produces a little more and
 *      stops it (SIGTERM), and so on from 2.
 * Measured per restart: spawn to the port accepting a connection (listening), to a
 * ListOffsets of every partition answered without error (serving), the peak resident
 * memory until then (VmHWM), the resident memory and the open descriptors (/proc/PID/fd)
 * --settle-ms after serving, and the "rebuilding index" warnings the broker logged. Goal:
 * kill -9 within 1.5x of clean. --node-args passes flags to the broker's node (e.g.
 * `--cpu-prof --cpu-prof-dir=DIR`: a profile per broker, written at its SIGTERM).
 *
 *   npm run bench:recovery -- [--partitions 50,500,5000] [--runs N] [--settle-ms MS] [--keep]
 *     [--written N|all] ['--node-args=--cpu-prof --cpu-prof-dir=DIR']
 *
 * Restarts alternate (clean, kill -9, clean, ...) --runs times each (default 3), and the
 * table shows medians: the machine is noisy.
 *
 * Linux only (/proc). --keep leaves the data directories for a look.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Kafka, logLevel } from 'kafkajs'
import { Admin } from '../src/client/admin.js'
import { CLEAN_SHUTDOWN_FILE } from '../src/storage/log-manager.js'
import { tidelogLaunch } from '../test/helpers/broker-process.js'
import { freePort, waitForPort } from './wait-for-port.js'

const { values } = parseArgs({
  options: {
    partitions: { type: 'string', default: '50,500,5000' },
    'settle-ms': { type: 'string', default: '3000' },
    runs: { type: 'string', default: '3' },
    keep: { type: 'boolean', default: false },
    written: { type: 'string', default: '3' },
    'node-args': { type: 'string', default: '' },
  },
})
const sizes = values.partitions.split(',').map((s) => Number(s.trim()))
for (const n of sizes) if (!Number.isInteger(n) || n < 1) throw new Error(`bad --partitions entry ${n}`)
const settleMs = Number(values['settle-ms'])
const runs = Number(values.runs)
if (!Number.isInteger(runs) || runs < 1) throw new Error(`bad --runs ${values.runs}`)
const TOPIC = 'recovery'
/** Partitions written before each restart: by default "few were written since the last flush". */
const writtenArg = values.written.trim()
if (writtenArg !== 'all' && !(Number.isInteger(Number(writtenArg)) && Number(writtenArg) >= 0))
  throw new Error(`bad --written ${values.written}: a count or 'all'`)
/** Extra node flags for the broker (e.g. --cpu-prof), split on spaces. */
const brokerNodeArgs = values['node-args'].split(' ').filter((arg) => arg !== '')
const RECORDS_PER_PARTITION = 20
const STARTUP_TIMEOUT_MS = 300_000

interface Broker {
  readonly child: ChildProcess
  readonly port: number
  readonly spawnedAt: number
  readonly exited: Promise<unknown>
  /** Warnings the broker logged that it rebuilt an index. */
  rebuiltIndexes: number
}

interface Restart {
  listeningMs: number
  servingMs: number
  peakRssMiB: number
  settledRssMiB: number
  /** Descriptors the broker held --settle-ms after serving (/proc/PID/fd). */
  descriptors: number
  rebuiltIndexes: number
}

function procStatusMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return match ? Number(match[1]) / 1024 : Number.NaN
}

function startBroker(dataDir: string, port: number): Broker {
  const spawnedAt = performance.now()
  const launch = tidelogLaunch(brokerNodeArgs, { ...process.env, TIDELOG_LOG_LEVEL: 'warn' })
  const [command, ...launchArgs] = launch.argv
  const child = spawn(
    command,
    [
      ...launchArgs,
      'start',
      '--port',
      String(port),
      '--data-dir',
      dataDir,
      '--http-port=-1',
      // A SIGTERM must end in a clean shutdown, however slow the machine.
      '--set',
      `tidelog.shutdown.timeout.ms=${STARTUP_TIMEOUT_MS}`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: launch.env },
  )
  const broker: Broker = {
    child,
    port,
    spawnedAt,
    exited: new Promise((resolve) => child.once('exit', resolve)),
    rebuiltIndexes: 0,
  }
  let pending = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk
    const lines = pending.split('\n')
    pending = lines.pop()!
    for (const line of lines) if (line.includes('rebuilding index')) broker.rebuiltIndexes++
  })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => process.stderr.write(chunk))
  return broker
}

function admin(port: number): Admin {
  // 5,000 partitions on a loaded machine take longer than the default 30 s to create.
  return new Admin({
    bootstrapServers: `127.0.0.1:${port}`,
    requestTimeoutMs: STARTUP_TIMEOUT_MS,
    operationTimeoutMs: STARTUP_TIMEOUT_MS,
  })
}

/** Resolves once a ListOffsets of every partition is answered, all without error. */
async function waitServing(port: number, partitions: number): Promise<void> {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS
  const queries = Array.from({ length: partitions }, (_, partition) => ({
    topic: TOPIC,
    partition,
    spec: 'latest' as const,
  }))
  for (;;) {
    const client = admin(port)
    try {
      const listed = await client.listOffsets(queries)
      if (listed.length === partitions) return
    } catch (err) {
      if (Date.now() > deadline) throw new Error('the broker never served ListOffsets', { cause: err })
    } finally {
      client.close()
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

async function measureRestart(
  dataDir: string,
  partitions: number,
): Promise<{ broker: Broker; restart: Restart }> {
  const broker = startBroker(dataDir, await freePort())
  await waitForPort(broker.port, Date.now() + STARTUP_TIMEOUT_MS)
  const listeningMs = performance.now() - broker.spawnedAt
  await waitServing(broker.port, partitions)
  const servingMs = performance.now() - broker.spawnedAt
  await new Promise((resolve) => setTimeout(resolve, settleMs))
  const pid = broker.child.pid!
  const restart = {
    listeningMs,
    servingMs,
    peakRssMiB: procStatusMiB(pid, 'VmHWM'),
    settledRssMiB: procStatusMiB(pid, 'VmRSS'),
    descriptors: readdirSync(`/proc/${pid}/fd`).length,
    rebuiltIndexes: broker.rebuiltIndexes,
  }
  return { broker, restart }
}

function writtenPartitions(partitions: number): number {
  return writtenArg === 'all' ? partitions : Math.min(Number(writtenArg), partitions)
}

/** A few records to each of the first --written partitions, acks=all, in sends of up to 1,000 partitions. */
async function produce(port: number, partitions: number, round: number): Promise<void> {
  const producer = new Kafka({ brokers: [`127.0.0.1:${port}`], logLevel: logLevel.NOTHING }).producer()
  await producer.connect()
  try {
    const written = writtenPartitions(partitions)
    for (let first = 0; first < written; first += 1000) {
      const messages = []
      for (let partition = first; partition < Math.min(first + 1000, written); partition++)
        for (let i = 0; i < RECORDS_PER_PARTITION; i++)
          messages.push({ partition, value: `round ${round} partition ${partition} record ${i}` })
      await producer.send({ topic: TOPIC, acks: -1, messages })
    }
  } finally {
    await producer.disconnect()
  }
}

async function stop(broker: Broker, signal: 'SIGTERM' | 'SIGKILL', dataDir: string): Promise<void> {
  broker.child.kill(signal)
  await broker.exited
  // What the next restart measures depends on it: a "clean" one after a failed shutdown is not.
  const marker = existsSync(join(dataDir, CLEAN_SHUTDOWN_FILE))
  if (marker !== (signal === 'SIGTERM'))
    throw new Error(`after ${signal} the clean-shutdown marker is ${marker ? 'there' : 'missing'}`)
}

/**
 * Restarts alternate, `runs` of each: clean restart, produce, SIGKILL; restart after
 * kill -9, produce, SIGTERM; so the same machine load hits both kinds.
 */
async function benchSize(partitions: number): Promise<{ clean: Restart[]; killed: Restart[] }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tidelog-recovery-'))
  const clean: Restart[] = []
  const killed: Restart[] = []
  try {
    const first = startBroker(dataDir, await freePort())
    try {
      await waitForPort(first.port, Date.now() + STARTUP_TIMEOUT_MS)
      const client = admin(first.port)
      try {
        await client.createTopics([{ topic: TOPIC, numPartitions: partitions, replicationFactor: 1 }])
      } catch (err) {
        // A retry of a create that had succeeded but answered late.
        if ((err as { errorName?: string }).errorName !== 'TOPIC_ALREADY_EXISTS') throw err
      } finally {
        client.close()
      }
      await waitServing(first.port, partitions)
      await produce(first.port, partitions, 0)
    } finally {
      await stop(first, 'SIGTERM', dataDir)
    }
    for (let run = 0; run < runs; run++) {
      for (const [signal, into] of [
        ['SIGKILL', clean],
        ['SIGTERM', killed],
      ] as const) {
        const { broker, restart } = await measureRestart(dataDir, partitions)
        into.push(restart)
        try {
          await produce(broker.port, partitions, clean.length + killed.length)
        } finally {
          await stop(broker, signal, dataDir)
        }
      }
    }
    return { clean, killed }
  } finally {
    if (values.keep) console.log(`data dir kept: ${dataDir}`)
    else rmSync(dataDir, { recursive: true, force: true })
  }
}

function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** The median of each figure over the runs. */
function medianRestart(restarts: readonly Restart[]): Restart {
  const of = (pick: (r: Restart) => number) => median(restarts.map(pick))
  return {
    listeningMs: of((r) => r.listeningMs),
    servingMs: of((r) => r.servingMs),
    peakRssMiB: of((r) => r.peakRssMiB),
    settledRssMiB: of((r) => r.settledRssMiB),
    descriptors: of((r) => r.descriptors),
    rebuiltIndexes: Math.max(...restarts.map((r) => r.rebuiltIndexes)),
  }
}

function cells(r: Restart): string[] {
  return [
    r.listeningMs.toFixed(0),
    r.servingMs.toFixed(0),
    r.peakRssMiB.toFixed(0),
    r.settledRssMiB.toFixed(0),
    String(r.descriptors),
    String(r.rebuiltIndexes),
  ]
}

function printRow(columns: readonly string[]): void {
  const widths = [11, 12, 13, 11, 14, 16, 6, 9]
  console.log(columns.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' '))
}

const results: { partitions: number; clean: Restart; killed: Restart }[] = []
for (const partitions of sizes) {
  const { clean, killed } = await benchSize(partitions)
  for (const [kind, restarts] of [
    ['clean', clean],
    ['kill -9', killed],
  ] as const) {
    const each = restarts.map((r) => `${r.listeningMs.toFixed(0)}/${r.servingMs.toFixed(0)}`).join(' ')
    console.log(`${partitions} partitions, ${kind}: listening/serving ms per run ${each}`)
  }
  results.push({ partitions, clean: medianRestart(clean), killed: medianRestart(killed) })
}
console.log(
  `restart of one broker, one topic, ${writtenArg} partitions written before each restart; ` +
    `medians of ${runs} runs; RSS after and fds: ${settleMs} ms after serving; rebuilt: most index rebuilds logged`,
)
printRow([
  'partitions',
  'restart',
  'listening ms',
  'serving ms',
  'peak RSS MiB',
  'RSS after MiB',
  'fds',
  'rebuilt',
])
for (const { partitions, clean, killed } of results) {
  printRow([String(partitions), 'clean', ...cells(clean)])
  printRow(['', 'kill -9', ...cells(killed)])
  const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`
  printRow([
    '',
    'ratio',
    ratio(killed.listeningMs, clean.listeningMs),
    ratio(killed.servingMs, clean.servingMs),
    ratio(killed.peakRssMiB, clean.peakRssMiB),
    ratio(killed.settledRssMiB, clean.settledRssMiB),
    '',
    '',
  ])
}
