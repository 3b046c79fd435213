/**
 * Broker incarnations (issue 20, item 3): the time from kill -9 of a broker and its
 * immediate restart to every partition back at its full ISR, with Kafka's default
 * broker.session.timeout.ms (9000). Goal: within 2 s of the restart.
 * `npm run build && node dist/bench/restart-isr.bench.js [--runs N]`.
 */
import { parseArgs } from 'node:util'
import { Kafka, logLevel } from 'kafkajs'
import { startCluster } from '../src/testing/index.js'

const { values } = parseArgs({ options: { runs: { type: 'string', default: '3' } } })
const runs = Number(values.runs)
const TOPIC = 'restart'
const PARTITIONS = 6
const toRestartMs: number[] = []
const toIsrMs: number[] = []
const cluster = await startCluster({
  brokers: 3,
  properties: { 'broker.session.timeout.ms': 9000 },
  topics: [
    { name: TOPIC, partitions: PARTITIONS, replicationFactor: 3, configs: { 'min.insync.replicas': 2 } },
  ],
})
const producer = new Kafka({
  clientId: 'bench',
  brokers: cluster.bootstrapServers.split(','),
  logLevel: logLevel.NOTHING,
}).producer()
try {
  await producer.connect()
  for (let run = 0; run < runs; run++) {
    const messages = Array.from({ length: 200 }, (_, i) => ({ value: `run ${run} record ${i}` }))
    await producer.send({ topic: TOPIC, acks: -1, messages })
    const victim = cluster.leaderOf(TOPIC, run % PARTITIONS)
    const killedAt = performance.now()
    cluster.kill(victim)
    await cluster.restart(victim)
    const restartedAt = performance.now()
    await cluster.waitForIsr(TOPIC, { timeoutMs: 60_000 })
    const inSyncAt = performance.now()
    toRestartMs.push(restartedAt - killedAt)
    toIsrMs.push(inSyncAt - killedAt)
    console.log(
      `run ${run}: broker ${victim} killed; restart() returned after ${(restartedAt - killedAt).toFixed(0)} ms, ` +
        `full ISR ${(inSyncAt - killedAt).toFixed(0)} ms after the kill`,
    )
  }
} finally {
  await producer.disconnect()
  await cluster.stop()
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
console.log(
  `kill -9 + immediate restart, broker.session.timeout.ms 9000, ${runs} runs: ` +
    `restart() median ${median(toRestartMs).toFixed(0)} ms, full ISR median ${median(toIsrMs).toFixed(0)} ms ` +
    `(max ${Math.max(...toIsrMs).toFixed(0)} ms)`,
)
