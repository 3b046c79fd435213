/**
 * Issue 15 with @platformatic/kafka: beginTransaction, send, commit and abort against three
 * in-process brokers, read back by @platformatic/kafka consumers: read_committed
 * (isolationLevel 1) sees the committed records once each, in order per partition, none of
 * the aborted ones; read_uncommitted (0) sees both.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Consumer, Producer, stringDeserializers, stringSerializers } from '@platformatic/kafka'
import type { Cluster } from '../../src/server/cluster.js'
import { startCluster } from '../helpers/cluster.js'

const TOPIC = 'txn-platformatic'
const PARTITIONS = 3

async function readAll(bootstrap: string[], isolationLevel: number, expected: number) {
  const consumer = new Consumer({
    clientId: `plt-${isolationLevel}`,
    groupId: `plt-read-${isolationLevel}`,
    bootstrapBrokers: bootstrap,
    deserializers: stringDeserializers,
    maxWaitTime: 200,
  })
  const seen: { partition: number; value: string }[] = []
  try {
    const stream = await consumer.consume({ topics: [TOPIC], mode: 'earliest', isolationLevel })
    stream.on('data', (message) => seen.push({ partition: message.partition, value: message.value }))
    const deadline = Date.now() + 30_000
    while (seen.length < expected && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 100))
    // A moment more, so a record that should not be there has its chance to show up.
    await new Promise((resolve) => setTimeout(resolve, 1000))
    await stream.close()
  } finally {
    await consumer.close(true)
  }
  return seen
}

describe('@platformatic/kafka transactions on 3 brokers', () => {
  let cluster: Cluster
  before(async () => {
    cluster = await startCluster({
      brokers: 3,
      port: 0,
      properties: {
        'transaction.state.log.num.partitions': 5,
        'offsets.topic.num.partitions': 5,
        'offsets.topic.replication.factor': 3,
        'group.initial.rebalance.delay.ms': 0,
      },
    })
    const [created] = await cluster.brokers[0].topicAdmin.createTopics(
      [{ name: TOPIC, numPartitions: PARTITIONS, replicationFactor: 3, assignments: [], configs: {} }],
      { validateOnly: false, timeoutMs: 10000 },
    )
    assert.equal(created.errorCode, 0)
  })
  after(async () => {
    await cluster?.stop()
  })

  it('commit, abort, commit: read_committed sees only the committed records', async () => {
    const bootstrap = cluster.bootstrapServers.split(',')
    const producer = new Producer({
      clientId: 'plt-txn',
      bootstrapBrokers: bootstrap,
      idempotent: true,
      transactionalId: 'plt-tx',
      serializers: stringSerializers,
    })
    const committed: string[] = []
    const aborted: string[] = []
    try {
      for (const [outcome, tag] of [
        ['commit', 'c1'],
        ['abort', 'a1'],
        ['commit', 'c2'],
      ] as const) {
        const transaction = await producer.beginTransaction()
        const messages = Array.from({ length: 6 }, (_, i) => ({
          topic: TOPIC,
          partition: i % PARTITIONS,
          value: `${tag}-${i}`,
        }))
        await transaction.send({ messages })
        const values = messages.map((m) => m.value)
        if (outcome === 'commit') {
          await transaction.commit()
          committed.push(...values)
        } else {
          await transaction.abort()
          aborted.push(...values)
        }
      }
    } finally {
      await producer.close()
    }
    const readCommitted = await readAll(bootstrap, 1, committed.length)
    assert.deepEqual(readCommitted.map((s) => s.value).sort(), [...committed].sort())
    for (let p = 0; p < PARTITIONS; p++)
      assert.deepEqual(
        readCommitted.filter((s) => s.partition === p).map((s) => s.value),
        committed.filter((_, i) => (i % 6) % PARTITIONS === p),
        `order in partition ${p}`,
      )
    const readUncommitted = await readAll(bootstrap, 0, committed.length + aborted.length)
    assert.deepEqual(readUncommitted.map((s) => s.value).sort(), [...committed, ...aborted].sort())
  })
})
