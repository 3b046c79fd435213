/**
 * tidelog/testing as a user's test suite would use it: only `startCluster` and kafkajs.
 * The fault API's kill, pause, isolate, cut, powerLoss and disk faults each do to the
 * cluster what they promise, and a leader killed during a send loop loses no
 * acknowledged record.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kafka, logLevel } from 'kafkajs'
import { startCluster, type TestCluster } from '../../src/testing/index.js'
import { allowErrorLogs, guardedLogger } from '../helpers/log-guard.js'

function kafka(cluster: TestCluster): Kafka {
  return new Kafka({
    clientId: 'testing-api',
    brokers: cluster.bootstrapServers.split(','),
    logLevel: logLevel.NOTHING,
    requestTimeout: 3000,
    connectionTimeout: 1000,
    retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 },
  })
}

/** Every record of `topic`-`partition` from the beginning to the high watermark, as [offset, value]. */
async function readPartition(client: Kafka, topic: string, partition: number): Promise<[number, string][]> {
  const admin = client.admin()
  await admin.connect()
  const [end] = (await admin.fetchTopicOffsets(topic)).filter((p) => p.partition === partition)
  await admin.disconnect()
  const high = Number(end.high)
  const records: [number, string][] = []
  if (high === 0) return records
  const consumer = client.consumer({ groupId: `reader-${Date.now()}-${Math.random()}` })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`read ${records.length} of ${high} records`)), 30_000)
    consumer
      .run({
        eachMessage: async ({ partition: p, message }) => {
          if (p !== partition) return
          records.push([Number(message.offset), message.value?.toString() ?? ''])
          if (Number(message.offset) >= high - 1) {
            clearTimeout(timer)
            resolve()
          }
        },
      })
      .catch(reject)
  })
  await consumer.disconnect()
  return records
}

describe('tidelog/testing', () => {
  test('startCluster: 3 brokers with an RF 3 topic whose leaders serve at once; acks=all writes land', async () => {
    const started = performance.now()
    const cluster = await startCluster({
      // The log guard's logger: an unexpected error line of a broker fails the test.
      logger: guardedLogger('tidelog/testing broker'),
      brokers: 3,
      topics: [{ name: 'ready', partitions: 3, replicationFactor: 3, configs: { 'min.insync.replicas': 2 } }],
    })
    const startupMs = performance.now() - started
    try {
      console.log(`# startCluster with an RF 3 topic: ${startupMs.toFixed(0)} ms`)
      const producer = kafka(cluster).producer({ allowAutoTopicCreation: false })
      await producer.connect()
      const [result] = await producer.send({ topic: 'ready', acks: -1, messages: [{ value: 'first' }] })
      assert.equal(result.errorCode, 0)
      await producer.disconnect()
      await cluster.waitForIsr('ready')
      for (let p = 0; p < 3; p++) assert.ok(cluster.leaderOf('ready', p) >= 0)
    } finally {
      await cluster.stop()
    }
  })

  describe('faults', () => {
    let cluster: TestCluster
    before(async () => {
      cluster = await startCluster({
        // The log guard's logger: an unexpected error line of a broker fails the test.
        logger: guardedLogger('tidelog/testing broker'),
        brokers: 3,
        topics: [
          { name: 'loop', partitions: 1, replicationFactor: 3, configs: { 'min.insync.replicas': 2 } },
        ],
      })
      await cluster.waitForIsr('loop')
    })
    after(() => cluster.stop())

    test('a leader killed during a send loop: every acknowledged record is in the log exactly once', async () => {
      const client = kafka(cluster)
      const producer = client.producer({ idempotent: true, maxInFlightRequests: 1 })
      await producer.connect()
      const acked = new Map<string, number>()
      let stop = false
      const loop = (async () => {
        for (let i = 0; !stop; i++) {
          const value = `v${i}`
          try {
            const [r] = await producer.send({ topic: 'loop', acks: -1, messages: [{ value }] })
            acked.set(value, Number(r.baseOffset))
          } catch {
            // Not acknowledged: it may or may not be in the log; only acknowledged ones are checked.
          }
        }
      })()
      await sleep(500)
      const victim = cluster.leaderOf('loop', 0)
      cluster.kill(victim)
      const deadline = Date.now() + 15_000
      while (cluster.leaderOf('loop', 0) === victim || cluster.leaderOf('loop', 0) < 0) {
        assert.ok(Date.now() < deadline, 'no new leader within 15 s of the kill')
        await sleep(50)
      }
      const before = acked.size
      await sleep(1500)
      stop = true
      await loop
      await producer.disconnect()
      assert.ok(acked.size > before, 'writes were acknowledged by the new leader')
      await cluster.restart(victim)
      await cluster.waitForIsr('loop')
      const records = await readPartition(client, 'loop', 0)
      const seen = new Map<string, number[]>()
      for (const [offset, value] of records) seen.set(value, [...(seen.get(value) ?? []), offset])
      for (const [value, offset] of acked) {
        assert.deepEqual(
          seen.get(value),
          [offset],
          `${value}, acknowledged at ${offset}, is there once, there`,
        )
      }
      console.log(
        `# ${acked.size} acknowledged, killed leader ${victim}, ${records.length} records in the log`,
      )
    })

    test('pause: a paused broker stops leading after its session; resume brings it back in sync', async () => {
      const victim = cluster.leaderOf('loop', 0)
      cluster.pause(victim)
      const deadline = Date.now() + 15_000
      while (cluster.leaderOf('loop', 0) === victim) {
        assert.ok(Date.now() < deadline, 'leadership did not move off the paused broker')
        await sleep(50)
      }
      cluster.resume(victim)
      await cluster.waitForIsr('loop', { timeoutMs: 30_000 })
    })

    test('isolate and heal: an isolated leader loses its leadership; after heal the ISR is full again', async () => {
      const victim = cluster.leaderOf('loop', 0)
      cluster.isolate(victim)
      const deadline = Date.now() + 20_000
      while (!cluster.partitionState('loop', 0).isr.every((id) => id !== victim)) {
        assert.ok(Date.now() < deadline, 'the isolated broker stayed in the ISR')
        await sleep(50)
      }
      cluster.heal()
      await cluster.waitForIsr('loop', { timeoutMs: 30_000 })
    })

    test('cut clients off a leader: a producer with a short timeout fails; heal: it succeeds', async () => {
      const leader = cluster.leaderOf('loop', 0)
      const producer = new Kafka({
        clientId: 'cut',
        brokers: [cluster.bootstrapServers.split(',')[leader]],
        logLevel: logLevel.NOTHING,
        requestTimeout: 1000,
        retry: { retries: 0 },
      }).producer()
      await producer.connect()
      cluster.cut(leader, 'client')
      await assert.rejects(producer.send({ topic: 'loop', acks: -1, messages: [{ value: 'cut' }] }))
      cluster.heal()
      await producer.disconnect()
      // A new client once healed (kafkajs keeps state of the timed-out connection otherwise).
      const healed = kafka(cluster).producer()
      await healed.connect()
      const [r] = await healed.send({ topic: 'loop', acks: -1, messages: [{ value: 'healed' }] })
      assert.equal(r.errorCode, 0)
      await healed.disconnect()
    })

    test('diskFull: the broker takes its log dir offline and stops; its leaderships move; it restarts', async () => {
      // The full disk is the point: the broker logs its log dir offline and stops.
      allowErrorLogs(/ENOSPC: no space left on device/, /every log dir is offline/)
      const victim = cluster.leaderOf('loop', 0)
      cluster.diskFull(victim)
      const producer = kafka(cluster).producer({ idempotent: true, maxInFlightRequests: 1 })
      await producer.connect()
      await producer.send({ topic: 'loop', acks: -1, messages: [{ value: 'after-full' }] })
      await producer.disconnect()
      const broker = cluster.broker(victim)
      await Promise.race([
        broker.whenStopped(),
        sleep(15_000).then(() => assert.fail('the broker with a full disk did not stop')),
      ])
      assert.notEqual(cluster.leaderOf('loop', 0), victim)
      await cluster.stopBroker(victim)
      await cluster.restart(victim)
      await cluster.waitForIsr('loop', { timeoutMs: 30_000 })
    })

    test('powerLoss: unflushed bytes are gone, the broker recovers and catches up from the leader', async () => {
      const victim = cluster.partitionState('loop', 0).isr.find((id) => id !== cluster.leaderOf('loop', 0))!
      const lost = await cluster.powerLoss(victim)
      assert.ok(lost.files > 0, 'the follower had written bytes it never fsynced')
      await cluster.restart(victim)
      await cluster.waitForIsr('loop', { timeoutMs: 30_000 })
    })

    test('slowDisk: a leader with a slow disk still answers, only later', async () => {
      const leader = cluster.leaderOf('loop', 0)
      cluster.slowDisk(leader, 50)
      const producer = kafka(cluster).producer()
      await producer.connect()
      const started = performance.now()
      const [r] = await producer.send({ topic: 'loop', acks: 1, messages: [{ value: 'slow' }] })
      const tookMs = performance.now() - started
      cluster.slowDisk(leader, 0)
      await producer.disconnect()
      assert.equal(r.errorCode, 0)
      assert.ok(tookMs >= 50, `the write took ${tookMs.toFixed(0)} ms with 50 ms per disk operation`)
    })
  })
})
