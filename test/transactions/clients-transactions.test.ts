/**
 * Issue 15 compatibility, beside confluent-transactions and kafkajs-transactions: the
 * transactions of @platformatic/kafka, unchanged, against 3 brokers (RF 3, min ISR 2), read
 * back by confluent-kafka: read_committed sees exactly the committed transactions;
 * read_uncommitted sees the aborted ones too. And confluent-kafka's consume-transform-produce
 * with the group's offsets in the transaction: an abort leaves the offsets where they were
 * (kafkajs's admin reads them), a commit moves them.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { Producer as PlatformaticProducer } from '@platformatic/kafka'
import { Kafka, logLevel } from 'kafkajs'
import type { Cluster } from '../../src/server/cluster.js'
import { polyfillPromiseWithResolvers, startCluster } from '../helpers/cluster.js'
import { confluent, confluentConsume, confluentProduce } from '../helpers/compat-clients.js'

let cluster: Cluster

before(async () => {
  cluster = await startCluster({
    brokers: 3,
    port: 0,
    properties: {
      'transaction.state.log.num.partitions': 5,
      'offsets.topic.num.partitions': 5,
      'group.initial.rebalance.delay.ms': 0,
    },
  })
})
after(async () => {
  await cluster?.stop()
})

/** 2 partitions, RF 3, min ISR 2: the reliability recipe. */
async function createTopic(topic: string): Promise<void> {
  const kafka = new Kafka({ brokers: cluster.bootstrapServers.split(','), logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  try {
    const created = await admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic,
          numPartitions: 2,
          replicationFactor: 3,
          configEntries: [{ name: 'min.insync.replicas', value: '2' }],
        },
      ],
    })
    assert.equal(created, true)
  } finally {
    await admin.disconnect()
  }
}

function values(records: readonly { value: string | null }[]): string[] {
  return records.map((r) => r.value ?? '')
}

async function readBack(topic: string, partitions: number, isolation: 'read_committed' | 'read_uncommitted') {
  const assign: [number, number][] = []
  for (let p = 0; p < partitions; p++) assign.push([p, 0])
  const result = await confluentConsume(cluster.bootstrapServers, topic, assign, {
    config: { 'isolation.level': isolation },
  })
  assert.deepEqual(result.errors, [])
  assert.equal(result.timedOut, false, 'the consumer reached the end of every partition')
  return result.records
}

test('@platformatic/kafka transactions: commit and abort, read back by confluent-kafka', async () => {
  polyfillPromiseWithResolvers()
  const topic = 'txn-platformatic'
  await createTopic(topic)
  const producer = new PlatformaticProducer({
    clientId: 'tidelog-txn',
    bootstrapBrokers: cluster.bootstrapServers.split(','),
    idempotent: true,
    transactionalId: 'platformatic-txn',
    autocreateTopics: false,
  })
  try {
    for (const [name, commit] of [
      ['x', true],
      ['y', false],
      ['z', true],
    ] as const) {
      const transaction = await producer.beginTransaction()
      await transaction.send({
        messages: Array.from({ length: 6 }, (_, i) => ({
          topic,
          partition: i % 2,
          key: Buffer.from(`k${i}`),
          value: Buffer.from(`${name}-${i}`),
        })),
      })
      if (commit) await transaction.commit()
      else await transaction.abort()
    }
  } finally {
    await producer.close()
  }
  const committed = values(await readBack(topic, 2, 'read_committed')).sort()
  const expected = ['x', 'z'].flatMap((name) => Array.from({ length: 6 }, (_, i) => `${name}-${i}`)).sort()
  assert.deepEqual(committed, expected)
  assert.equal((await readBack(topic, 2, 'read_uncommitted')).length, 18)
})

interface TransformResult {
  consumed: number
  produced: number
  error: { name: string; str: string } | null
}

test('consume-transform-produce (confluent-kafka): an abort leaves the group offsets, a commit moves them', async () => {
  const input = 'ctp-input'
  const output = 'ctp-output'
  const group = 'ctp-group'
  await createTopic(input)
  await createTopic(output)
  const produced = await confluentProduce(
    cluster.bootstrapServers,
    input,
    Array.from({ length: 8 }, (_, i) => ({ key: `k${i}`, value: `in-${i}`, partition: i % 2 })),
  )
  assert.equal(produced.undelivered, 0)

  const kafka = new Kafka({ brokers: cluster.bootstrapServers.split(','), logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  const groupOffsets = async () => {
    const [entry] = await admin.fetchOffsets({ groupId: group, topics: [input] })
    return entry.partitions.map((p) => Number(p.offset)).sort()
  }
  try {
    const spec = {
      bootstrap: cluster.bootstrapServers,
      input,
      output,
      group,
      transactionalId: 'ctp',
      count: 8,
    }
    const aborted = await confluent<TransformResult>('transform', { ...spec, commit: false })
    assert.equal(aborted.error, null)
    assert.equal(aborted.consumed, 8)
    assert.deepEqual(await groupOffsets(), [-1, -1], 'an aborted transaction commits no offsets')
    assert.equal((await readBack(output, 2, 'read_committed')).length, 0)

    const committed = await confluent<TransformResult>('transform', { ...spec, commit: true })
    assert.equal(committed.error, null)
    assert.equal(committed.consumed, 8, 'the aborted offsets were not used: all 8 are read again')
    assert.deepEqual(await groupOffsets(), [4, 4], 'the committed transaction moved the offsets')
    const out = values(await readBack(output, 2, 'read_committed')).sort()
    assert.deepEqual(out, Array.from({ length: 8 }, (_, i) => `IN-${i}`).sort())
  } finally {
    await admin.disconnect()
  }
})
