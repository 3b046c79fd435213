/**
 * Issue 34 item 3: brokers in worker threads, one event loop each. tidelog/testing's
 * `workerThreads: true` cluster takes a kill -9 of a partition leader through the fault API
 * under an acks=all kafkajs producer, and a kafkajs consumer reads every acknowledged record
 * back after the restart; isolate, pause, cut and powerLoss do what they do in one thread; `tidelog start --brokers 3 --worker-threads` serves a produce and
 * a consume and exits 0 on SIGTERM (no thread left behind keeps the process).
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { AckedProducer } from '../helpers/acked-producer.js'
import { toBrokerId } from '../helpers/broker-ids.js'
import { spawnTidelog, waitFor } from '../helpers/broker-process.js'
import { startCluster, type TestCluster } from '../helpers/testing.js'

const TOPIC = 'acked'
const PARTITIONS = [0, 1, 2]

function kafka(bootstrap: string, clientId: string): Kafka {
  return new Kafka({
    clientId,
    brokers: bootstrap.split(','),
    logLevel: logLevel.NOTHING,
    requestTimeout: 5000,
    connectionTimeout: 3000,
    retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 },
  })
}

/** Reads `topic` from the beginning with a kafkajs consumer until `expected` values were all seen. */
async function consumeUntilSeen(
  bootstrap: string,
  topic: string,
  expected: ReadonlySet<string>,
  timeoutMs: number,
): Promise<Set<string>> {
  const seen = new Set<string>()
  const consumer = kafka(bootstrap, 'worker-threads-reader').consumer({
    groupId: `reader-${topic}`,
    sessionTimeout: 10_000,
    heartbeatInterval: 500,
  })
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({
      eachMessage: async ({ message }) => {
        seen.add(message.value?.toString() ?? '')
      },
    })
    await waitFor(
      `every acknowledged record of ${topic} read back`,
      () => ([...expected].every((value) => seen.has(value)) ? true : undefined),
      timeoutMs,
      100,
    ).catch(() => undefined)
  } finally {
    await consumer.disconnect()
  }
  return seen
}

describe('tidelog/testing with workerThreads', () => {
  let cluster: TestCluster
  before(async () => {
    cluster = await startCluster({
      brokers: 3,
      workerThreads: true,
      properties: { 'offsets.topic.num.partitions': 1 },
      topics: [{ name: TOPIC, partitions: 3, replicationFactor: 3, configs: { 'min.insync.replicas': 2 } }],
    })
  })
  after(() => cluster.stop())

  test('a leader killed and restarted under acks=all loses no acknowledged record', async () => {
    assert.throws(() => cluster.broker(0), /worker thread/)
    const producer = new AckedProducer(cluster.bootstrapServers, TOPIC, PARTITIONS, 'worker-threads')
    try {
      await waitFor('60 records acknowledged', () => (producer.acked.size >= 60 ? true : undefined), 30_000)
      const victim = cluster.leaderOf(TOPIC, 0)
      const killedAtMs = performance.now()
      cluster.kill(victim)
      assert.equal(cluster.isRunning(victim), false)
      // Another broker takes over partition 0 once the victim's session expires.
      await waitFor(
        'acks on every partition after the kill',
        () => (producer.notAckedSince(killedAtMs).length === 0 ? true : undefined),
        30_000,
      )
      assert.notEqual(cluster.leaderOf(TOPIC, 0), victim)
      await cluster.restart(victim)
      await cluster.waitForIsr(TOPIC, { timeoutMs: 30_000 })
      const restartedAtMs = performance.now()
      await waitFor(
        'acks on every partition after the restart',
        () => (producer.notAckedSince(restartedAtMs).length === 0 ? true : undefined),
        30_000,
      )
    } finally {
      await producer.stop()
    }
    assert.equal(producer.failed, 0, 'kafkajs retried every send to success')
    const acked = new Set(producer.acked.keys())
    const seen = await consumeUntilSeen(cluster.bootstrapServers, TOPIC, acked, 30_000)
    const lost = [...acked].filter((value) => !seen.has(value))
    assert.deepEqual(lost.slice(0, 10), [], `${lost.length} of ${acked.size} acknowledged records lost`)
  })

  test('isolate: the isolated leader leaves the ISR; heal: the ISR is full again', async () => {
    const victim = cluster.leaderOf(TOPIC, 1)
    cluster.isolate(victim)
    await waitFor(
      `broker ${victim} out of the ISR of ${TOPIC}-1`,
      () => (cluster.partitionState(TOPIC, 1).isr.includes(toBrokerId(victim)) ? undefined : true),
      20_000,
    )
    cluster.heal()
    await cluster.waitForIsr(TOPIC, { timeoutMs: 30_000 })
  })

  test('pause: a paused leader loses its leadership after its session; resume: back in sync', async () => {
    const victim = cluster.leaderOf(TOPIC, 2)
    cluster.pause(victim)
    await waitFor(
      `leadership of ${TOPIC}-2 off broker ${victim}`,
      () => (cluster.leaderOf(TOPIC, 2) === victim ? undefined : true),
      20_000,
    )
    cluster.resume(victim)
    await cluster.waitForIsr(TOPIC, { timeoutMs: 30_000 })
  })

  test('cut clients off a leader: a send fails; heal: a new client succeeds', async () => {
    const leader = cluster.leaderOf(TOPIC, 0)
    const producer = new Kafka({
      clientId: 'cut',
      brokers: [cluster.bootstrapServers.split(',')[leader]],
      logLevel: logLevel.NOTHING,
      requestTimeout: 1000,
      retry: { retries: 0 },
    }).producer()
    await producer.connect()
    cluster.cut(leader, 'client')
    await assert.rejects(
      producer.send({ topic: TOPIC, acks: -1, messages: [{ partition: 0, value: 'cut' }] }),
    )
    cluster.heal()
    await producer.disconnect()
    const healed = kafka(cluster.bootstrapServers, 'healed').producer()
    await healed.connect()
    const [r] = await healed.send({ topic: TOPIC, acks: -1, messages: [{ partition: 0, value: 'healed' }] })
    assert.equal(r.errorCode, 0)
    await healed.disconnect()
  })

  test('powerLoss of a follower: its unflushed bytes are gone; it restarts and catches up', async () => {
    const leader = cluster.leaderOf(TOPIC, 0)
    const victim = cluster.partitionState(TOPIC, 0).isr.find((id) => id !== leader)!
    const lost = await cluster.powerLoss(victim)
    assert.ok(lost.files > 0, 'the follower had written bytes it never fsynced')
    await cluster.restart(victim)
    await cluster.waitForIsr(TOPIC, { timeoutMs: 30_000 })
  })
})

test('tidelog start --brokers 3 --worker-threads serves acks=all and exits 0 on SIGTERM', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-workers-'))
  const child = spawnTidelog(
    [
      'start',
      '--brokers',
      '3',
      '--worker-threads',
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
      'group.initial.rebalance.delay.ms=0',
    ],
    { TIDELOG_LOG_LEVEL: 'warn' },
  )
  try {
    const t0 = performance.now()
    const { line } = await child.waitForLine(/^bootstrap servers: /, 30_000)
    console.log(`# started in ${(performance.now() - t0).toFixed(0)} ms`)
    const bootstrap = line.slice('bootstrap servers: '.length).trim()
    assert.equal(bootstrap.split(',').length, 3)
    const client = kafka(bootstrap, 'worker-threads-cli')
    const admin = client.admin()
    await admin.connect()
    await admin.createTopics({
      topics: [{ topic: 'cli', numPartitions: 2, replicationFactor: 3 }],
      waitForLeaders: true,
    })
    await admin.disconnect()
    const producer = client.producer({ allowAutoTopicCreation: false })
    await producer.connect()
    const values = Array.from({ length: 20 }, (_, i) => `v${i}`)
    await producer.send({ topic: 'cli', acks: -1, messages: values.map((value) => ({ value })) })
    await producer.disconnect()
    const seen = await consumeUntilSeen(bootstrap, 'cli', new Set(values), 30_000)
    assert.deepEqual(
      values.filter((value) => !seen.has(value)),
      [],
    )
    console.log(`# read back after ${(performance.now() - t0).toFixed(0)} ms`)
    child.signal('SIGTERM')
    const exit = await Promise.race([
      child.exited,
      new Promise<null>((resolve) => setTimeout(() => resolve(null), 30_000).unref()),
    ])
    assert.deepEqual(exit, { code: 0, signal: null }, `tidelog start did not exit cleanly:\n${child.tail()}`)
  } finally {
    await child.terminate()
    await rm(dataDir, { recursive: true, force: true })
  }
})
