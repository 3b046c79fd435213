/**
 * RF 1 consume with librdkafka, per fetch: where a large fetch's time goes (issue 34: tidelog
 * 863 MB/s against Kafka's 1,051 at 10 MiB partition fetches, 1,146 against 1,094 at
 * librdkafka's defaults).
 *
 * One `tidelog broker` on a private etcd (as bench:report's RF 1 rows), 4 partitions, records
 * of 1 KiB produced once; then consumes of all of them with librdkafka's default fetch sizes
 * and with rdkafka-perf's 10 MiB partition fetches, in turns. For each consume it prints MB/s,
 * the broker's CPU milliseconds per MB and minor page faults (/proc), the consumer's CPU and
 * faults (GNU time, when installed), and from librdkafka's protocol debug log the median
 * answer size and round trip of its Fetch requests (request sent to answer read). `--kafka`
 * runs the same against Apache Kafka 4.4 (one KRaft node, Kafka's JVM settings).
 *
 *   node dist/bench/consume-fetch.bench.js [--records N] [--rounds N] [--kafka]
 *
 * The machine is shared: CPU per MB is the figure to compare, wall MB/s and round trips move
 * with the load average (printed).
 */
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { withEtcdCluster } from '../test/helpers/broker-process.js'
import { startKafkaReference } from '../test/helpers/kafka-reference.js'
import { perf, perfBinary } from './load-generator.js'
import { processStats } from './process-stats.js'
import { KAFKA_JVM, kafkaAvailable, kafkaNodePids } from './reference-kafka.js'

const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '500000' },
    rounds: { type: 'string', default: '3' },
    kafka: { type: 'boolean', default: false },
  },
})
const records = Number(values.records)
const rounds = Number(values.rounds)
const RECORD_BYTES = 1024
const GNU_TIME = '/usr/bin/time'

/** As bench:report's rows: librdkafka's own fetch sizes, and rdkafka-perf's (10 MiB a partition). */
const FETCH_SIZES: [string, string[]][] = [
  ['librdkafka defaults', ['max.partition.fetch.bytes=1048576', 'queued.max.messages.kbytes=65536']],
  ['10 MiB partition fetches', []],
]

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? Number.NaN : s[Math.floor(s.length / 2)]
}

function minorFaults(pids: readonly number[]): number {
  let faults = 0
  for (const pid of pids) {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    faults += Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[7])
  }
  return faults
}

interface Consumed {
  mbPerSec: number
  consumerCpuSeconds: number
  consumerFaults: number
  fetchBytes: number
  fetchRttMs: number
}

/** One consume of every record with librdkafka's protocol log on; stderr holds the Fetch lines. */
function consume(binary: string, bootstrap: string, topic: string, conf: string[]): Promise<Consumed> {
  const args = ['consume', bootstrap, topic, '4', String(records), ...conf, 'debug=protocol']
  const timed = existsSync(GNU_TIME)
  const child = timed ? spawn(GNU_TIME, ['-f', 'GNUTIME %U %S %R', binary, ...args]) : spawn(binary, args)
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`rdkafka-perf consume exited ${code}: ${stderr.slice(-500)}`))
      const sizes: number[] = []
      const rtts: number[] = []
      const answer = /Received FetchResponse \(v\d+, (\d+) bytes, CorrId \d+, rtt ([\d.]+)ms\)/
      for (const line of stderr.split('\n')) {
        const m = answer.exec(line)
        // Empty answers at the end (long polls) would only dilute the medians.
        if (m !== null && Number(m[1]) > 64 * 1024) {
          sizes.push(Number(m[1]))
          rtts.push(Number(m[2]))
        }
      }
      const time = /GNUTIME ([\d.]+) ([\d.]+) (\d+)/.exec(stderr)
      resolve({
        mbPerSec: JSON.parse(stdout.trim().split('\n').at(-1)!).mbPerSec,
        consumerCpuSeconds: time === null ? Number.NaN : Number(time[1]) + Number(time[2]),
        consumerFaults: time === null ? Number.NaN : Number(time[3]),
        fetchBytes: median(sizes),
        fetchRttMs: median(rtts),
      })
    })
  })
}

async function measure(system: string, bootstrap: string, pids: () => number[]): Promise<void> {
  const binary = perfBinary()
  const topic = 'consume-fetch'
  await perf(binary, ['produce', bootstrap, topic, '1000', String(RECORD_BYTES), '1', '0', '5'])
  await perf(binary, ['produce', bootstrap, topic, String(records), String(RECORD_BYTES), '1', '0', '5'])
  const mb = (records * RECORD_BYTES) / 1e6
  for (let round = 0; round < rounds; round++) {
    for (const [name, conf] of round % 2 === 0 ? FETCH_SIZES : FETCH_SIZES.toReversed()) {
      const cpuBefore = processStats(pids()).cpuSeconds
      const faultsBefore = minorFaults(pids())
      const c = await consume(binary, bootstrap, topic, conf)
      const brokerMsPerMb = ((processStats(pids()).cpuSeconds - cpuBefore) * 1000) / mb
      const brokerFaults = minorFaults(pids()) - faultsBefore
      console.log(
        `${system.padEnd(7)} ${name.padEnd(24)} ${String(c.mbPerSec).padStart(7)} MB/s | broker ${brokerMsPerMb.toFixed(2)} ms CPU/MB, ` +
          `${brokerFaults} faults | consumer ${((c.consumerCpuSeconds * 1000) / mb).toFixed(2)} ms CPU/MB, ` +
          `${c.consumerFaults} faults | fetch answer ${(c.fetchBytes / 1e6).toFixed(1)} MB, rtt ${c.fetchRttMs} ms | load ${loadavg()[0].toFixed(1)}`,
      )
    }
  }
}

console.log(
  `${records} records of ${RECORD_BYTES} B, 4 partitions, ${rounds} rounds; load ${loadavg()[0].toFixed(1)}`,
)
await withEtcdCluster(
  { brokers: 1, properties: { 'default.replication.factor': 1, 'num.partitions': 4 } },
  (cluster) => measure('tidelog', cluster.liveBootstrap, () => cluster.brokers.map((b) => b.current.pid)),
)
if (values.kafka) {
  const available = await kafkaAvailable(false)
  if ('missing' in available) console.log(`Kafka left out: ${available.missing}`)
  else {
    Object.assign(process.env, KAFKA_JVM)
    const kafka = await startKafkaReference({ nodes: 1, properties: { 'num.partitions': 4 } })
    try {
      await measure('Kafka', kafka.bootstrap, () => kafkaNodePids(kafka, [1]))
    } finally {
      await kafka.stop()
    }
  }
}
