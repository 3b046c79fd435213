/**
 * The source's reliability recipe from the producer's side: acks=all, retries, RF 3,
 * min.insync.replicas 2. On a 3-broker in-process cluster a sync producer (await each
 * send) and an async producer (sends in flight, callbacks) write while the leader of
 * partition 0 makes a controlled shutdown mid-stream. Every acknowledged record must be
 * readable afterwards, in send order per partition for the sync producer; duplicates are
 * possible without idempotence and are counted, not failed.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { Producer } from '../../src/client/producer.js'
import type { Cluster } from '../../src/server/cluster.js'
import { SESSION_TIMEOUT_MS } from '../helpers/broker-process.js'
import { startCluster } from '../helpers/cluster.js'
import { waitUntil } from '../helpers/wait.js'
import { readAll, text } from './helpers.js'

const TOPIC = 'reliable'
const SYNC_RECORDS = 300
const ASYNC_RECORDS = 3000
const STOP_AFTER_SYNC_ACKS = 100

async function waitForFullIsr(admin: Admin, timeoutMs = 20000): Promise<void> {
  // describeTopics may fail while a leader moves: the wait polls again and, at its deadline,
  // reports the last failure or the last ISRs seen.
  await waitUntil(
    'every partition led with an ISR of 3',
    timeoutMs,
    async () => {
      const [topic] = await admin.describeTopics([TOPIC])
      assert.ok(topic, `${TOPIC} not described`)
      assert.deepEqual(
        topic.partitions
          .map((p) => ({ partition: p.partition, led: p.leader >= 0, isr: p.isr.length }))
          .sort((a, b) => a.partition - b.partition),
        [0, 1, 2].map((partition) => ({ partition, led: true, isr: 3 })),
      )
      return true
    },
    100,
  )
}

async function syncStream(producer: Producer, onAck: (count: number) => void): Promise<string[]> {
  const acked: string[] = []
  for (let i = 0; i < SYNC_RECORDS; i++) {
    const value = `sync-${i}`
    await producer.send({ topic: TOPIC, key: `key-${i % 30}`, value })
    acked.push(value)
    onAck(acked.length)
  }
  return acked
}

async function asyncStream(producer: Producer): Promise<{ acked: string[]; failed: string[] }> {
  const acked: string[] = []
  const failed: string[] = []
  const pending: Promise<unknown>[] = []
  for (let i = 0; i < ASYNC_RECORDS; i++) {
    const value = `async-${i}`
    pending.push(
      producer.send({ topic: TOPIC, value }).then(
        () => acked.push(value),
        () => failed.push(value),
      ),
    )
    // A steady stream rather than one burst, so sends straddle the leader change.
    if (i % 50 === 49) await new Promise((resolve) => setTimeout(resolve, 10))
  }
  await producer.flush()
  await Promise.all(pending)
  return { acked, failed }
}

test('sync and async sends lose nothing with acks=all and retries while a leader shuts down', {
  timeout: 180000,
}, async (t) => {
  const cluster: Cluster = await startCluster({
    brokers: 3,
    port: 0,
    properties: { 'broker.session.timeout.ms': SESSION_TIMEOUT_MS },
  })
  try {
    const bootstrap = cluster.bootstrapServers
    const admin = new Admin({ bootstrapServers: bootstrap })
    await admin.createTopics([
      { topic: TOPIC, numPartitions: 3, replicationFactor: 3, configs: { 'min.insync.replicas': '2' } },
    ])
    await waitForFullIsr(admin)
    const leader0 = (await admin.describeTopics([TOPIC]))[0].partitions[0].leader
    admin.close()
    const victim = cluster.brokers.find((b) => b.nodeId === leader0)!
    const options = {
      bootstrapServers: bootstrap,
      acks: 'all' as const,
      retryBackoffMs: 50,
      deliveryTimeoutMs: 60000,
      requestTimeoutMs: 10000,
    }
    const syncProducer = new Producer({ ...options, producerType: 'sync' })
    const asyncProducer = new Producer({ ...options, lingerMs: 5 })
    let stopping: Promise<void> | null = null
    let stoppedAt = -1
    const [syncAcked, asyncResult] = await Promise.all([
      syncStream(syncProducer, (count) => {
        if (count !== STOP_AFTER_SYNC_ACKS) return
        stoppedAt = Date.now()
        stopping = victim.stop()
      }),
      asyncStream(asyncProducer),
    ])
    await stopping
    const retries = syncProducer.metrics().retries + asyncProducer.metrics().retries
    await syncProducer.close()
    await asyncProducer.close()
    assert.ok(stoppedAt > 0, 'the leader was stopped mid-stream')
    assert.deepEqual(asyncResult.failed, [], 'no async send failed: retries covered the leader change')

    const records = await readAll(bootstrap, TOPIC)
    const stored = records.map((r) => text(r.value)!)
    const storedSet = new Set(stored)
    const lost = [...syncAcked, ...asyncResult.acked].filter((v) => !storedSet.has(v))
    assert.deepEqual(lost, [], 'every acknowledged record is readable')
    // Sync style sends one record at a time: per partition, stored order is send order.
    for (const p of [0, 1, 2]) {
      const order = records
        .filter((r) => r.partition === p && text(r.value)!.startsWith('sync-'))
        .map((r) => Number(text(r.value)!.slice(5)))
      const firstSeen = order.filter((n, i) => order.indexOf(n) === i)
      assert.deepEqual(
        firstSeen,
        [...firstSeen].sort((a, b) => a - b),
        `partition ${p} keeps send order`,
      )
    }
    const duplicates = stored.length - storedSet.size
    t.diagnostic(
      `leader ${leader0} stopped after ${STOP_AFTER_SYNC_ACKS} sync acks; ${stored.length} records stored, ${retries} batch retries, ${duplicates} duplicate(s) from retries`,
    )
  } finally {
    await cluster.stop()
  }
})
