/**
 * Issue 41 through `tidelog/testing`: after `kill` (kill -9) or `powerLoss` and `restart`,
 * every record acknowledged with acks=all is read back by a consumer, exactly once and in
 * order, and ListOffsets latest counts them, before anything new is produced. Before
 * d7a6978 a restarted leader applied its own registration while it held no store session,
 * left its high watermark at the last checkpoint (written every 5 s), and with an ISR of
 * itself alone nothing raised it until the next produce: ListOffsets answered the
 * checkpoint and consumers read nothing past it. Each test produces and kills within a
 * second or two, so most of what was acknowledged postdates the last checkpoint.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kafka, logLevel } from 'kafkajs'
import { startCluster, type TestCluster } from '../helpers/testing.js'

const TOPIC = 'acked'
const RECORDS = 200
const BATCH = 10

function kafka(cluster: TestCluster): Kafka {
  return new Kafka({
    clientId: 'kill-restart',
    brokers: cluster.bootstrapServers.split(','),
    logLevel: logLevel.NOTHING,
    requestTimeout: 3000,
    connectionTimeout: 1000,
    retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 },
  })
}

/** One small __consumer_offsets partition: the reading consumer's group needs nothing more. */
const PROPERTIES = { 'offsets.topic.num.partitions': 1 }

/** Produces RECORDS records with acks=all in batches; returns their values in acknowledged order. */
async function produceAcked(cluster: TestCluster): Promise<string[]> {
  const producer = kafka(cluster).producer({ allowAutoTopicCreation: false, maxInFlightRequests: 1 })
  await producer.connect()
  const acked: string[] = []
  try {
    for (let i = 0; i < RECORDS; i += BATCH) {
      const values = Array.from({ length: BATCH }, (_, j) => `r${i + j}`)
      const [result] = await producer.send({
        topic: TOPIC,
        acks: -1,
        messages: values.map((value) => ({ value })),
      })
      assert.equal(result.errorCode, 0)
      assert.equal(Number(result.baseOffset), i, 'each batch lands right after the previous one')
      acked.push(...values)
    }
  } finally {
    await producer.disconnect()
  }
  return acked
}

/**
 * ListOffsets latest of partition 0 (kafkajs' fetchTopicOffsets: the high watermark). A new
 * leader answers OFFSET_NOT_AVAILABLE (retriable) until its HW reaches where its leadership
 * began (KIP-207); kafkajs' admin gives up on it at once, so it is retried here, as a
 * consumer resolving its offsets does.
 */
async function latestOffset(cluster: TestCluster): Promise<number> {
  const admin = kafka(cluster).admin()
  await admin.connect()
  try {
    const deadline = Date.now() + 20_000
    for (;;) {
      try {
        const [p0] = (await admin.fetchTopicOffsets(TOPIC)).filter((p) => p.partition === 0)
        return Number(p0.high)
      } catch (error) {
        if ((error as { retriable?: boolean }).retriable !== true || Date.now() > deadline) throw error
        await sleep(100)
      }
    }
  } finally {
    await admin.disconnect()
  }
}

/**
 * What a consumer reads of partition 0 from the beginning: every record up to `expected`
 * (or what came within 20 s), then half a second more for anything read twice.
 */
async function readBack(cluster: TestCluster, expected: number): Promise<[number, string][]> {
  const consumer = kafka(cluster).consumer({
    groupId: `reader-${Date.now()}-${Math.random()}`,
    maxWaitTimeInMs: 200,
  })
  const records: [number, string][] = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topic: TOPIC, fromBeginning: true })
    let reached: () => void = () => undefined
    const all = new Promise<void>((resolve) => {
      reached = resolve
    })
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        if (partition !== 0) return
        records.push([Number(message.offset), message.value?.toString() ?? ''])
        if (records.length >= expected) reached()
      },
    })
    await Promise.race([all, sleep(20_000)])
    await sleep(500)
  } finally {
    await consumer.disconnect()
  }
  return records
}

/** The restarted cluster serves every acknowledged record, before anything new is produced. */
async function assertAllReadable(
  cluster: TestCluster,
  acked: readonly string[],
  what: string,
): Promise<void> {
  const latest = await latestOffset(cluster)
  const records = await readBack(cluster, acked.length)
  assert.equal(
    latest,
    acked.length,
    `${what}: ListOffsets latest counts the ${acked.length} acknowledged records`,
  )
  assert.deepEqual(
    records,
    acked.map((value, offset) => [offset, value]),
    `${what}: a consumer reads the ${acked.length} acknowledged records once each, in order (it read ${records.length})`,
  )
}

async function withCluster(
  brokers: number,
  configs: Readonly<Record<string, string | number>>,
  body: (cluster: TestCluster) => Promise<void>,
): Promise<void> {
  const cluster = await startCluster({
    brokers,
    properties: PROPERTIES,
    topics: [{ name: TOPIC, partitions: 1, replicationFactor: Math.min(3, brokers), configs }],
  })
  try {
    await cluster.waitForIsr(TOPIC)
    await body(cluster)
  } finally {
    await cluster.stop()
  }
}

describe('tidelog/testing: acknowledged records readable after kill or powerLoss and restart', () => {
  test('1 broker, RF 1: killed and restarted, it serves every acknowledged record before the next produce', async () => {
    await withCluster(1, {}, async (cluster) => {
      const acked = await produceAcked(cluster)
      cluster.kill(0)
      await cluster.restart(0)
      await assertAllReadable(cluster, acked, 'kill and restart of the only broker')
    })
  })

  test('1 broker, RF 1, every record fsynced: after a power loss and restart it serves every acknowledged record', async () => {
    // flush.messages=1: an acknowledged record is on disk, so the power loss keeps it (without
    // it the broker's page cache, every acknowledged record with it, is lost: outside the model).
    await withCluster(1, { 'flush.messages': 1 }, async (cluster) => {
      const acked = await produceAcked(cluster)
      await cluster.powerLoss(0)
      await cluster.restart(0)
      await assertAllReadable(cluster, acked, 'power loss and restart of the only broker')
    })
  })

  test('3 brokers, RF 3: the leader killed and restarted at once; every acknowledged record is served', async () => {
    await withCluster(3, {}, async (cluster) => {
      const acked = await produceAcked(cluster)
      const leader = cluster.leaderOf(TOPIC, 0)
      cluster.kill(leader)
      await cluster.restart(leader)
      await assertAllReadable(cluster, acked, `kill and restart of leader ${leader}`)
    })
  })

  test('3 brokers, RF 3: the leader lost power and restarted at once; every acknowledged record is served', async () => {
    await withCluster(3, {}, async (cluster) => {
      const acked = await produceAcked(cluster)
      const leader = cluster.leaderOf(TOPIC, 0)
      await cluster.powerLoss(leader)
      await cluster.restart(leader)
      await assertAllReadable(cluster, acked, `power loss and restart of leader ${leader}`)
    })
  })

  test('3 brokers, RF 3, min.insync.replicas 1, an ISR of the leader alone: the leader killed and restarted serves every acknowledged record', async () => {
    // The followers are down (the ISR shrinks to the leader), the leader acknowledges, is
    // killed and restarted: it leads again alone, and no follower's fetch comes to raise its
    // high watermark (the followers stay down until the records were read).
    await withCluster(3, { 'min.insync.replicas': 1 }, async (cluster) => {
      const leader = cluster.leaderOf(TOPIC, 0)
      const followers = cluster.brokerIds.filter((id) => id !== leader)
      for (const id of followers) cluster.kill(id)
      const deadline = Date.now() + 20_000
      while (cluster.partitionState(TOPIC, 0).isr.join() !== String(leader)) {
        assert.ok(Date.now() < deadline, 'the ISR did not shrink to the leader within 20 s')
        await sleep(50)
      }
      const acked = await produceAcked(cluster)
      cluster.kill(leader)
      await cluster.restart(leader)
      assert.equal(cluster.leaderOf(TOPIC, 0), leader, 'the restarted broker, the only ISR member, leads')
      await assertAllReadable(cluster, acked, `kill and restart of leader ${leader}, alone in the ISR`)
      for (const id of followers) await cluster.restart(id)
      await cluster.waitForIsr(TOPIC, { timeoutMs: 30_000 })
    })
  })
})
