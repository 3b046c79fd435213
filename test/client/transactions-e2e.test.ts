/**
 * tidelog's transactional producer end to end on a real broker (issue 15 items 5 and 6),
 * read back by another client: kafkajs 2.2.4 with readUncommitted false sees the committed
 * transactions only, in order, once each, and with readUncommitted true the aborted ones
 * too. Consume-transform-produce with the group's offsets in the transaction
 * (sendOffsetsToTransaction): after an abort the group's offsets did not move, after a
 * commit they did (kafkajs admin.fetchOffsets), and tidelog's own consumer with
 * read_committed reads only the committed output. A zombie (same transactional id, older
 * epoch) is fenced with ProducerFencedError and none of its records become visible.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { Admin } from '../../src/client/admin.js'
import { Consumer, type ConsumerRecord } from '../../src/client/consumer.js'
import { Producer } from '../../src/client/producer.js'
import { withBroker } from '../helpers/cluster.js'
import { createTopics } from './helpers.js'

const BROKER_PROPERTIES = {
  'transaction.state.log.replication.factor': 1,
  'transaction.state.log.min.isr': 1,
  'transaction.state.log.num.partitions': 3,
  'offsets.topic.num.partitions': 3,
  'group.initial.rebalance.delay.ms': 0,
}

/**
 * The group's committed offset of `topic`-0 as kafkajs' admin.fetchOffsets answers it, once
 * no transaction holds an offset of it pending: EndTxn answers before the markers are
 * written (as Kafka's coordinator does), so right after a commit the offset may still be
 * pending; tidelog's admin with requireStable waits that out (UNSTABLE_OFFSET_COMMIT).
 */
async function stableOffset(
  bootstrap: string,
  kafkaAdmin: ReturnType<Kafka['admin']>,
  groupId: string,
  topic: string,
): Promise<string> {
  const admin = new Admin({ bootstrapServers: bootstrap })
  try {
    await admin.listGroupOffsets(groupId, [topic], { requireStable: true })
  } finally {
    admin.close()
  }
  const [entry] = await kafkaAdmin.fetchOffsets({ groupId, topics: [topic] })
  return entry.partitions[0].offset
}

function transactional(bootstrap: string, transactionalId: string): Producer {
  return new Producer({ bootstrapServers: bootstrap, transactionalId, lingerMs: 0, maxBlockMs: 20000 })
}

/** Every value kafkajs reads from the topic's beginning, once `expected` arrived and a quiet second passed. */
async function kafkajsValues(
  bootstrap: string,
  topic: string,
  readUncommitted: boolean,
  expected: number,
): Promise<string[]> {
  const kafka = new Kafka({ clientId: 'txn-reader', brokers: [bootstrap], logLevel: logLevel.NOTHING })
  const consumer = kafka.consumer({
    groupId: `reader-${topic}-${readUncommitted}-${process.hrtime.bigint()}`,
    readUncommitted,
    maxWaitTimeInMs: 100,
  })
  const values: string[] = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    let lastAt = Date.now()
    await consumer.run({
      eachMessage: async ({ message }) => {
        values.push(message.value?.toString() ?? '')
        lastAt = Date.now()
      },
    })
    const deadline = Date.now() + 30000
    while (Date.now() < deadline && (values.length < expected || Date.now() - lastAt < 1000))
      await new Promise((resolve) => setTimeout(resolve, 100))
  } finally {
    await consumer.disconnect()
  }
  return values
}

test('committed transactions are visible to a read_committed kafkajs consumer, aborted ones only to read_uncommitted', {
  timeout: 120000,
}, async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'txn-out', partitions: 2 }])
      const producer = transactional(bootstrap, 'e2e-commit-abort')
      try {
        await producer.initTransactions()
        producer.beginTransaction()
        for (let i = 0; i < 5; i++) await producer.send({ topic: 'txn-out', partition: 0, value: `c1-${i}` })
        await producer.send({ topic: 'txn-out', partition: 1, value: 'c1-p1' })
        await producer.commitTransaction()
        producer.beginTransaction()
        for (let i = 0; i < 3; i++) await producer.send({ topic: 'txn-out', partition: 0, value: `a-${i}` })
        await producer.send({ topic: 'txn-out', partition: 1, value: 'a-p1' })
        await producer.abortTransaction()
        producer.beginTransaction()
        await producer.send({ topic: 'txn-out', partition: 0, value: 'c2-0' })
        await producer.commitTransaction()
      } finally {
        await producer.close()
      }
      const committed = await kafkajsValues(bootstrap, 'txn-out', false, 7)
      assert.deepEqual(
        committed.filter((v) => !v.endsWith('p1')),
        ['c1-0', 'c1-1', 'c1-2', 'c1-3', 'c1-4', 'c2-0'],
      )
      assert.deepEqual(
        committed.filter((v) => v.endsWith('p1')),
        ['c1-p1'],
      )
      const everything = await kafkajsValues(bootstrap, 'txn-out', true, 11)
      assert.equal(everything.length, 11)
      assert.ok(everything.includes('a-0') && everything.includes('a-p1'))

      // tidelog's own consumer agrees in both isolation levels.
      for (const [isolationLevel, count] of [
        ['read_committed', 7],
        ['read_uncommitted', 11],
      ] as const) {
        const consumer = new Consumer({ bootstrapServers: bootstrap, isolationLevel, fetchMaxWaitMs: 100 })
        try {
          consumer.assign([
            { topic: 'txn-out', partition: 0 },
            { topic: 'txn-out', partition: 1 },
          ])
          consumer.seekToBeginning()
          const seen: string[] = []
          const deadline = Date.now() + 20000
          while (seen.length < count && Date.now() < deadline)
            for (const r of await consumer.poll(500)) seen.push(r.value?.toString() ?? '')
          assert.equal(seen.length, count, `${isolationLevel}: ${seen.join(',')}`)
          if (isolationLevel === 'read_committed') assert.ok(!seen.some((v) => v.startsWith('a-')))
        } finally {
          await consumer.close()
        }
      }
    },
    { properties: BROKER_PROPERTIES },
  )
})

test('consume-transform-produce: offsets sent in an aborted transaction do not move the group, in a committed one they do', {
  timeout: 120000,
}, async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'ctp-in' }, { topic: 'ctp-out' }])
      const plain = new Producer({ bootstrapServers: bootstrap, lingerMs: 0 })
      for (let i = 0; i < 6; i++) await plain.send({ topic: 'ctp-in', value: `in-${i}` })
      await plain.close()

      const kafka = new Kafka({ clientId: 'ctp-admin', brokers: [bootstrap], logLevel: logLevel.NOTHING })
      const admin = kafka.admin()
      await admin.connect()
      const groupOffset = (): Promise<string> => stableOffset(bootstrap, admin, 'ctp', 'ctp-in')
      const input = new Consumer({ bootstrapServers: bootstrap, fetchMaxWaitMs: 100 })
      const producer = transactional(bootstrap, 'e2e-ctp')
      const tidelogAdmin = new Admin({ bootstrapServers: bootstrap })
      try {
        input.assign([{ topic: 'ctp-in', partition: 0 }])
        input.seekToBeginning()
        const records: ConsumerRecord[] = []
        const deadline = Date.now() + 20000
        while (records.length < 6 && Date.now() < deadline) records.push(...(await input.poll(500)))
        assert.equal(records.length, 6)
        await producer.initTransactions()

        const transform = async (batch: typeof records, commit: boolean): Promise<void> => {
          producer.beginTransaction()
          for (const r of batch)
            await producer.send({ topic: 'ctp-out', value: `out(${r.value?.toString()})` })
          const before = await groupOffset()
          await producer.sendOffsetsToTransaction(
            [{ topic: 'ctp-in', partition: 0, offset: batch.at(-1)!.offset + 1 }],
            'ctp',
          )
          // Pending in the open transaction: tidelog's admin (requireStable false, as
          // Java's) still answers the committed offset rather than waiting.
          const pending = await tidelogAdmin.listGroupOffsets('ctp', ['ctp-in'])
          assert.deepEqual(
            pending.map((o) => String(o.offset)),
            before === '-1' ? [] : [before],
          )
          if (commit) await producer.commitTransaction()
          else await producer.abortTransaction()
        }
        await transform(records.slice(0, 3), false)
        assert.equal(await groupOffset(), '-1', 'an aborted transaction leaves the group where it was')
        await transform(records.slice(0, 3), true)
        assert.equal(await groupOffset(), '3')
        await transform(records.slice(3), false)
        assert.equal(await groupOffset(), '3')
        await transform(records.slice(3), true)
        assert.equal(await groupOffset(), '6')
      } finally {
        await admin.disconnect()
        tidelogAdmin.close()
        await input.close()
        await producer.close()
      }
      const out = await kafkajsValues(bootstrap, 'ctp-out', false, 6)
      assert.deepEqual(
        out,
        Array.from({ length: 6 }, (_, i) => `out(in-${i})`),
      )
    },
    { properties: BROKER_PROPERTIES },
  )
})

test('a zombie producer (same transactional id, older epoch) is fenced and writes nothing visible', {
  timeout: 120000,
}, async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'zombie-out' }])
      const zombie = transactional(bootstrap, 'e2e-zombie')
      const successor = transactional(bootstrap, 'e2e-zombie')
      try {
        await zombie.initTransactions()
        zombie.beginTransaction()
        await zombie.send({ topic: 'zombie-out', value: 'zombie-before' })
        // The successor's InitProducerId bumps the epoch and aborts the zombie's open transaction.
        await successor.initTransactions()
        await assert.rejects(
          (async () => {
            await zombie.send({ topic: 'zombie-out', value: 'zombie-after' })
            await zombie.commitTransaction()
          })(),
          { name: 'ProducerFencedError' },
        )
        successor.beginTransaction()
        await successor.send({ topic: 'zombie-out', value: 'successor' })
        await successor.commitTransaction()
      } finally {
        await zombie.close().catch(() => undefined)
        await successor.close()
      }
      assert.deepEqual(await kafkajsValues(bootstrap, 'zombie-out', false, 1), ['successor'])
    },
    { properties: BROKER_PROPERTIES },
  )
})

test('kafkajs sendOffsets (TxnOffsetCommit v0-2, no group metadata): aborted offsets stay invisible, committed ones move the group', {
  timeout: 120000,
}, async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'kjs-in' }, { topic: 'kjs-out' }])
      const kafka = new Kafka({ clientId: 'kjs-txn', brokers: [bootstrap], logLevel: logLevel.NOTHING })
      const admin = kafka.admin()
      const producer = kafka.producer({
        transactionalId: 'kjs-ctp',
        idempotent: true,
        maxInFlightRequests: 1,
      })
      await admin.connect()
      await producer.connect()
      try {
        const groupOffset = (): Promise<string> => stableOffset(bootstrap, admin, 'kjs-group', 'kjs-in')
        const aborted = await producer.transaction()
        await aborted.send({ topic: 'kjs-out', messages: [{ value: 'aborted' }] })
        await aborted.sendOffsets({
          consumerGroupId: 'kjs-group',
          topics: [{ topic: 'kjs-in', partitions: [{ partition: 0, offset: '5' }] }],
        })
        await aborted.abort()
        assert.equal(await groupOffset(), '-1')
        const committed = await producer.transaction()
        await committed.send({ topic: 'kjs-out', messages: [{ value: 'committed' }] })
        await committed.sendOffsets({
          consumerGroupId: 'kjs-group',
          topics: [{ topic: 'kjs-in', partitions: [{ partition: 0, offset: '7' }] }],
        })
        await committed.commit()
        assert.equal(await groupOffset(), '7')
      } finally {
        await producer.disconnect()
        await admin.disconnect()
      }
      assert.deepEqual(await kafkajsValues(bootstrap, 'kjs-out', false, 1), ['committed'])
    },
    { properties: BROKER_PROPERTIES },
  )
})

test("KIP-447: offsets sent with a group member's metadata commit; once the member left the group the same metadata is refused", {
  timeout: 120000,
}, async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'k447-in' }, { topic: 'k447-out' }])
      const plain = new Producer({ bootstrapServers: bootstrap, lingerMs: 0 })
      for (let i = 0; i < 4; i++) await plain.send({ topic: 'k447-in', value: `in-${i}` })
      await plain.close()
      const member = new Consumer({
        bootstrapServers: bootstrap,
        groupId: 'k447',
        enableAutoCommit: false,
        autoOffsetReset: 'earliest',
        fetchMaxWaitMs: 100,
      })
      const producer = transactional(bootstrap, 'e2e-k447')
      const kafka = new Kafka({ clientId: 'k447-admin', brokers: [bootstrap], logLevel: logLevel.NOTHING })
      const admin = kafka.admin()
      await admin.connect()
      try {
        member.subscribe(['k447-in'])
        const records: ConsumerRecord[] = []
        const deadline = Date.now() + 30000
        while (records.length < 4 && Date.now() < deadline) records.push(...(await member.poll(500)))
        assert.equal(records.length, 4)
        const metadata = member.groupMetadata()
        assert.ok(metadata.generationId > 0 && metadata.memberId !== '')
        await producer.initTransactions()
        producer.beginTransaction()
        await producer.send({ topic: 'k447-out', value: 'first' })
        await producer.sendOffsetsToTransaction([{ topic: 'k447-in', partition: 0, offset: 2 }], metadata)
        await producer.commitTransaction()
        assert.equal(await stableOffset(bootstrap, admin, 'k447', 'k447-in'), '2')

        await member.close()
        producer.beginTransaction()
        await producer.send({ topic: 'k447-out', value: 'zombie' })
        await assert.rejects(
          producer.sendOffsetsToTransaction([{ topic: 'k447-in', partition: 0, offset: 4 }], metadata),
          { code: 'ERR_KAFKA_UNKNOWN_MEMBER_ID' },
        )
        await assert.rejects(producer.commitTransaction(), { name: 'TransactionAbortableError' })
        await producer.abortTransaction()
        assert.equal(await stableOffset(bootstrap, admin, 'k447', 'k447-in'), '2')
      } finally {
        await admin.disconnect()
        await member.close().catch(() => undefined)
        await producer.close()
      }
      assert.deepEqual(await kafkajsValues(bootstrap, 'k447-out', false, 1), ['first'])
    },
    { properties: BROKER_PROPERTIES },
  )
})
