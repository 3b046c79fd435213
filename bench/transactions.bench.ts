/**
 * Transactional produce against non-transactional produce, kafkajs on an in-process
 * 3-broker cluster (RF 3, min ISR 2): each round sends 100 records of 1 KiB in one send;
 * transactional rounds wrap it in a transaction and commit. Prints records/s of both, their
 * ratio (issue 15 asks for at least 0.5) and the commit latency p50/p99. In-process
 * brokers share one event loop with the client, so absolute figures include its contention.
 *
 * kafkajs sends a transaction's batches one broker at a time, each after its own
 * AddPartitionsToTxn (and FindCoordinator), where a plain send goes to all brokers at once:
 * with several partitions that client-side sequencing is much of the difference.
 *
 *   node dist/bench/transactions.bench.js [--seconds 10] [--records 100] [--record-size 1024] [--partitions 3]
 */
import { parseArgs } from 'node:util'
import { Kafka, logLevel, type Producer } from 'kafkajs'
import { silentLogger } from '../src/common/logger.js'
import { startCluster } from '../src/server/cluster.js'

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    records: { type: 'string', default: '100' },
    'record-size': { type: 'string', default: '1024' },
    partitions: { type: 'string', default: '3' },
  },
})
const seconds = Number(values.seconds)
const recordsPerRound = Number(values.records)
const recordSize = Number(values['record-size'])
const partitions = Number(values.partitions)
const TOPIC = 'bench-txn'

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

async function rounds(
  producer: Producer,
  transactional: boolean,
): Promise<{ recordsPerSecond: number; commitMs: number[] }> {
  const value = Buffer.alloc(recordSize, 'x')
  const messages = Array.from({ length: recordsPerRound }, (_, i) => ({ key: String(i), value }))
  const commitMs: number[] = []
  let records = 0
  const started = performance.now()
  const deadline = started + seconds * 1000
  while (performance.now() < deadline) {
    if (transactional) {
      const txn = await producer.transaction()
      await txn.send({ topic: TOPIC, messages })
      const before = performance.now()
      await txn.commit()
      commitMs.push(performance.now() - before)
    } else {
      await producer.send({ topic: TOPIC, messages })
    }
    records += recordsPerRound
  }
  return { recordsPerSecond: records / ((performance.now() - started) / 1000), commitMs }
}

const cluster = await startCluster({
  brokers: 3,
  port: 0,
  logger: silentLogger,
  properties: { 'transaction.state.log.num.partitions': 5, 'offsets.topic.replication.factor': 3 },
})
try {
  const kafka = new Kafka({
    clientId: 'bench-txn',
    brokers: cluster.bootstrapServers.split(','),
    logLevel: logLevel.NOTHING,
  })
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({
    topics: [
      {
        topic: TOPIC,
        numPartitions: 3,
        replicationFactor: 3,
        configEntries: [{ name: 'min.insync.replicas', value: '2' }],
      },
    ],
    waitForLeaders: true,
  })
  await admin.disconnect()

  const plain = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await plain.connect()
  await rounds(plain, false) // warm-up
  const baseline = await rounds(plain, false)
  await plain.disconnect()

  const transactional = kafka.producer({
    transactionalId: 'bench-txn',
    idempotent: true,
    maxInFlightRequests: 1,
  })
  await transactional.connect()
  const txn = await rounds(transactional, true)
  await transactional.disconnect()

  const sorted = [...txn.commitMs].sort((a, b) => a - b)
  console.log(
    `records per round: ${recordsPerRound} x ${recordSize} B, ${partitions} partitions, ${seconds} s per mode`,
  )
  console.log(`non-transactional: ${Math.round(baseline.recordsPerSecond)} records/s`)
  console.log(
    `transactional:     ${Math.round(txn.recordsPerSecond)} records/s (${txn.commitMs.length} commits)`,
  )
  console.log(
    `ratio:             ${(txn.recordsPerSecond / baseline.recordsPerSecond).toFixed(2)} (issue 15: >= 0.5)`,
  )
  console.log(
    `commit latency:    p50 ${percentile(sorted, 50).toFixed(1)} ms, p99 ${percentile(sorted, 99).toFixed(1)} ms`,
  )
} finally {
  await cluster.stop()
}
