/**
 * Issue 15, checked with a real client: kafkajs `producer.transaction()` against three
 * in-process brokers (RF 3, min ISR 2, __transaction_state on all three). Committed
 * transactions are read back by kafkajs consumers with read_committed, in order and once
 * each, aborted ones absent (and present for read_uncommitted); a second producer with the
 * same transactional id fences the first, which then writes nothing at all.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type Consumer, Kafka, logLevel, type Producer } from 'kafkajs'
import type { Cluster } from '../../src/server/cluster.js'
import { startCluster } from '../helpers/cluster.js'

const TOPIC = 'txn-kafkajs'
const PARTITIONS = 3

interface Seen {
  readonly partition: number
  readonly offset: bigint
  readonly value: string
}

async function consumeAll(
  kafka: Kafka,
  groupId: string,
  readUncommitted: boolean,
  until: (seen: Seen[]) => boolean,
) {
  const consumer: Consumer = kafka.consumer({ groupId, readUncommitted, maxWaitTimeInMs: 200 })
  const seen: Seen[] = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topic: TOPIC, fromBeginning: true })
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        seen.push({ partition, offset: BigInt(message.offset), value: message.value?.toString() ?? '' })
      },
    })
    const deadline = Date.now() + 30_000
    while (!until(seen) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
    // A little longer, so a record that should not be there has its chance to show up.
    await new Promise((resolve) => setTimeout(resolve, 1000))
  } finally {
    await consumer.disconnect()
  }
  return seen
}

describe('kafkajs transactions on 3 brokers', () => {
  let cluster: Cluster
  let kafka: Kafka
  before(async () => {
    cluster = await startCluster({
      brokers: 3,
      port: 0,
      properties: {
        'transaction.state.log.num.partitions': 5,
        'offsets.topic.num.partitions': 5,
        'offsets.topic.replication.factor': 3,
        'broker.session.timeout.ms': 3000,
        'group.initial.rebalance.delay.ms': 0,
      },
    })
    kafka = new Kafka({
      clientId: 'txn-kafkajs',
      brokers: cluster.bootstrapServers.split(','),
      logLevel: logLevel.NOTHING,
      retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 },
    })
    const admin = kafka.admin()
    await admin.connect()
    try {
      await admin.createTopics({
        topics: [
          {
            topic: TOPIC,
            numPartitions: PARTITIONS,
            replicationFactor: 3,
            configEntries: [{ name: 'min.insync.replicas', value: '2' }],
          },
        ],
        waitForLeaders: true,
      })
    } finally {
      await admin.disconnect()
    }
  })
  after(async () => {
    await cluster?.stop()
  })

  it('commit and abort: read_committed sees only committed records, in order, once each', async () => {
    const producer: Producer = kafka.producer({
      transactionalId: 'kjs-tx',
      idempotent: true,
      maxInFlightRequests: 1,
    })
    await producer.connect()
    const committed: string[] = []
    try {
      const rounds: ['commit' | 'abort', string][] = [
        ['commit', 'c1'],
        ['abort', 'a1'],
        ['commit', 'c2'],
        ['abort', 'a2'],
      ]
      for (const [outcome, tag] of rounds) {
        const txn = await producer.transaction()
        for (let i = 0; i < 6; i++) {
          const value = `${tag}-${i}`
          await txn.send({ topic: TOPIC, messages: [{ partition: i % PARTITIONS, value }] })
          if (outcome === 'commit') committed.push(value)
        }
        if (outcome === 'commit') await txn.commit()
        else await txn.abort()
      }
    } finally {
      await producer.disconnect()
    }

    const readCommitted = await consumeAll(
      kafka,
      'g-read-committed',
      false,
      (seen) => seen.length >= committed.length,
    )
    assert.deepEqual(
      readCommitted.map((s) => s.value).sort(),
      [...committed].sort(),
      'committed records, once each',
    )
    for (let p = 0; p < PARTITIONS; p++) {
      const inPartition = readCommitted.filter((s) => s.partition === p).map((s) => s.value)
      assert.deepEqual(
        inPartition,
        committed.filter((_, i) => (i % 6) % PARTITIONS === p),
        `order in partition ${p}`,
      )
    }
    const readUncommitted = await consumeAll(kafka, 'g-read-uncommitted', true, (seen) => seen.length >= 24)
    assert.equal(readUncommitted.length, 24, 'aborted records are in the log for read_uncommitted')
    assert.ok(readUncommitted.some((s) => s.value.startsWith('a1-')))
  })

  it('a zombie with the same transactional id and an older epoch is fenced and writes nothing', async () => {
    const zombie = kafka.producer({ transactionalId: 'kjs-zombie', idempotent: true, maxInFlightRequests: 1 })
    const successor = kafka.producer({
      transactionalId: 'kjs-zombie',
      idempotent: true,
      maxInFlightRequests: 1,
    })
    await zombie.connect()
    try {
      const open = await zombie.transaction()
      await open.send({ topic: TOPIC, messages: [{ partition: 0, value: 'zombie-open' }] })
      // The successor's InitProducerId aborts the zombie's open transaction and bumps the epoch.
      await successor.connect()
      const txn = await successor.transaction()
      await txn.send({ topic: TOPIC, messages: [{ partition: 1, value: 'successor-1' }] })
      await txn.commit()
      await assert.rejects(
        async () => {
          await open.send({ topic: TOPIC, messages: [{ partition: 2, value: 'zombie-late' }] })
          await open.commit()
        },
        (error: Error) => /fenced|epoch/i.test(`${error.name} ${error.message}`),
      )
      await assert.rejects(async () => {
        const again = await zombie.transaction()
        await again.send({ topic: TOPIC, messages: [{ partition: 2, value: 'zombie-again' }] })
        await again.commit()
      })
    } finally {
      await zombie.disconnect().catch(() => undefined)
      await successor.disconnect()
    }
    const all = await consumeAll(kafka, 'g-zombie-uncommitted', true, (seen) =>
      seen.some((s) => s.value === 'successor-1'),
    )
    const values = all.map((s) => s.value)
    assert.ok(values.includes('successor-1'))
    assert.ok(
      !values.includes('zombie-late') && !values.includes('zombie-again'),
      'the fenced zombie wrote nothing',
    )
    const visible = await consumeAll(kafka, 'g-zombie-committed', false, (seen) =>
      seen.some((s) => s.value === 'successor-1'),
    )
    assert.ok(!visible.some((s) => s.value.startsWith('zombie')), 'the aborted open transaction is not read')
  })
})
