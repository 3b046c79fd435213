/**
 * tidelog/testing start-up: from startCluster() to a 3-broker cluster with an RF 3 topic
 * (min.insync.replicas 2) that has accepted one acks=all write, and to stop(). Goal: under
 * 300 ms in-process. `npm run bench:testing [-- --runs N]`.
 */
import { parseArgs } from 'node:util'
import { Kafka, logLevel } from 'kafkajs'
import { startCluster } from '../src/testing/index.js'

const { values } = parseArgs({ options: { runs: { type: 'string', default: '10' } } })
const runs = Number(values.runs)
const startMs: number[] = []
const writeMs: number[] = []
const stopMs: number[] = []
for (let run = 0; run < runs; run++) {
  const t0 = performance.now()
  const cluster = await startCluster({
    brokers: 3,
    topics: [{ name: 'bench', partitions: 3, replicationFactor: 3, configs: { 'min.insync.replicas': 2 } }],
  })
  const t1 = performance.now()
  const producer = new Kafka({
    clientId: 'bench',
    brokers: cluster.bootstrapServers.split(','),
    logLevel: logLevel.NOTHING,
  }).producer()
  await producer.connect()
  await producer.send({ topic: 'bench', acks: -1, messages: [{ value: 'x' }] })
  const t2 = performance.now()
  await producer.disconnect()
  const t3 = performance.now()
  await cluster.stop()
  const t4 = performance.now()
  startMs.push(t1 - t0)
  writeMs.push(t2 - t0)
  stopMs.push(t4 - t3)
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const min = (xs: number[]): number => Math.min(...xs)
const fmt = (xs: number[]): string => `median ${median(xs).toFixed(0)} ms, min ${min(xs).toFixed(0)} ms`
console.log(`startCluster (3 brokers, RF 3 topic served), ${runs} runs: ${fmt(startMs)}`)
console.log(`  to the first acks=all write acknowledged (kafkajs connect included): ${fmt(writeMs)}`)
console.log(`  stop(): ${fmt(stopMs)}`)
console.log(`  RSS after the runs: ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB`)
