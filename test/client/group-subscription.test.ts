/**
 * Pattern subscriptions and unsubscribe() on tidelog's consumer against a real broker: a
 * RegExp subscription takes the topics whose whole name matches (never internal ones),
 * picks up a matching topic created later at the next metadata.max.age.ms, and
 * unsubscribe() revokes, commits and leaves the group, after which the consumer can assign
 * or subscribe again.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Admin } from '../../src/client/admin.js'
import { Consumer, type ConsumerOptions, type ConsumerRecord } from '../../src/client/consumer.js'
import { Producer } from '../../src/client/producer.js'
import { createTopics, text, withBroker } from './helpers.js'

const GROUP_PROPERTIES = {
  'group.initial.rebalance.delay.ms': 0,
  'group.min.session.timeout.ms': 1000,
  'offsets.topic.num.partitions': 3,
}

const MEMBER: Partial<ConsumerOptions> = {
  sessionTimeoutMs: 6000,
  heartbeatIntervalMs: 200,
  rebalanceTimeoutMs: 10000,
  autoOffsetReset: 'earliest',
  fetchMaxWaitMs: 100,
  autoCommitIntervalMs: 200,
  metadataMaxAgeMs: 500,
}

async function produce(bootstrap: string, records: { topic: string; partition: number; value: string }[]) {
  const producer = new Producer({ bootstrapServers: bootstrap, lingerMs: 0 })
  try {
    await Promise.all(records.map((r) => producer.send(r)))
  } finally {
    await producer.close()
  }
}

/** Polls until `condition` holds over everything received, or fails after `timeoutMs`. */
async function pollUntil(
  consumer: Consumer,
  received: ConsumerRecord[],
  what: string,
  timeoutMs: number,
  condition: () => boolean,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    received.push(...(await consumer.poll(100)))
  }
}

const names = (consumer: Consumer) =>
  consumer
    .assignment()
    .map((tp) => `${tp.topic}-${tp.partition}`)
    .sort()

for (const strategy of ['range', 'cooperative-sticky'] as const) {
  test(`${strategy}: a RegExp subscription takes matching topics, a new matching topic later, never internal or partial matches`, async () => {
    await withBroker(
      async (cluster) => {
        const bootstrap = cluster.bootstrapServers
        await createTopics(bootstrap, [
          { topic: 'pat-a', partitions: 2 },
          { topic: 'other', partitions: 1 },
          { topic: 'xpat-z', partitions: 1 },
        ])
        await produce(bootstrap, [
          { topic: 'pat-a', partition: 0, value: 'a0' },
          { topic: 'pat-a', partition: 1, value: 'a1' },
          { topic: 'other', partition: 0, value: 'o0' },
          { topic: 'xpat-z', partition: 0, value: 'x0' },
        ])
        const revoked: string[][] = []
        const consumer = new Consumer({
          bootstrapServers: bootstrap,
          groupId: `grp-pat-${strategy}`,
          ...MEMBER,
          partitionAssignmentStrategy: [strategy],
          onPartitionsRevoked: (tps) => {
            revoked.push(tps.map((tp) => `${tp.topic}-${tp.partition}`).sort())
          },
        })
        const received: ConsumerRecord[] = []
        const values = () => received.map((r) => text(r.value)).sort()
        try {
          // Naming an internal topic does not make it match; nor does a partial match (xpat-z).
          consumer.subscribe(/pat-.*|__consumer_offsets/)
          await pollUntil(consumer, received, 'pat-a records', 15000, () => received.length >= 2)
          assert.deepEqual(names(consumer), ['pat-a-0', 'pat-a-1'])
          assert.deepEqual(consumer.subscription(), ['pat-a'])
          assert.deepEqual(values(), ['a0', 'a1'])
          // A matching topic created now joins the subscription at the next metadata check.
          await createTopics(bootstrap, [{ topic: 'pat-b', partitions: 2 }])
          await produce(bootstrap, [
            { topic: 'pat-b', partition: 0, value: 'b0' },
            { topic: 'pat-b', partition: 1, value: 'b1' },
            { topic: 'pat-a', partition: 0, value: 'a2' },
          ])
          await pollUntil(consumer, received, 'pat-b records', 20000, () => received.length >= 5)
          await sleep(300)
          received.push(...(await consumer.poll(200)))
          assert.deepEqual(names(consumer), ['pat-a-0', 'pat-a-1', 'pat-b-0', 'pat-b-1'])
          assert.deepEqual(consumer.subscription(), ['pat-a', 'pat-b'])
          assert.deepEqual(
            values(),
            ['a0', 'a1', 'a2', 'b0', 'b1'],
            'each record once, nothing from other topics',
          )
          if (strategy === 'cooperative-sticky')
            assert.deepEqual(revoked, [], 'cooperative: nothing revoked to add pat-b')
          else assert.deepEqual(revoked, [['pat-a-0', 'pat-a-1']], 'eager: all revoked before the rejoin')
        } finally {
          await consumer.close()
        }
      },
      { properties: GROUP_PROPERTIES },
    )
  })
}

test('unsubscribe() commits, revokes and leaves; the consumer can then assign, and subscribe again', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'uns', partitions: 2 }])
      await produce(bootstrap, [
        { topic: 'uns', partition: 0, value: 'u0' },
        { topic: 'uns', partition: 1, value: 'u1' },
      ])
      const revoked: string[][] = []
      const consumer = new Consumer({
        bootstrapServers: bootstrap,
        groupId: 'grp-uns',
        ...MEMBER,
        onPartitionsRevoked: (tps) => {
          revoked.push(tps.map((tp) => `${tp.topic}-${tp.partition}`).sort())
        },
      })
      const admin = new Admin({ bootstrapServers: bootstrap })
      const received: ConsumerRecord[] = []
      try {
        consumer.subscribe(['uns'])
        await pollUntil(consumer, received, 'records', 15000, () => received.length >= 2)
        const [before] = await admin.describeGroups(['grp-uns'])
        assert.equal(before.members.length, 1)
        const memberId = consumer.groupMetadata().memberId
        await consumer.unsubscribe()
        assert.deepEqual(consumer.assignment(), [])
        assert.deepEqual(consumer.subscription(), [])
        assert.deepEqual(revoked, [['uns-0', 'uns-1']])
        assert.equal(consumer.groupMetadata().memberId, '')
        // It left at once (LeaveGroup), not after the session timeout, and committed first.
        const [after] = await admin.describeGroups(['grp-uns'])
        assert.equal(after.state, 'Empty')
        assert.deepEqual(after.members, [])
        const offsets = await admin.listGroupOffsets('grp-uns')
        assert.deepEqual(offsets.map((o) => `${o.partition}:${o.offset}`).sort(), ['0:1', '1:1'])
        assert.deepEqual(await consumer.poll(300), [], 'nothing assigned, nothing fetched')
        // assign() is allowed now, and starts at the group's committed offsets.
        await produce(bootstrap, [{ topic: 'uns', partition: 0, value: 'u2' }])
        consumer.assign([{ topic: 'uns', partition: 0 }])
        const assigned: ConsumerRecord[] = []
        await pollUntil(consumer, assigned, 'assigned record', 10000, () => assigned.length >= 1)
        assert.deepEqual(
          assigned.map((r) => text(r.value)),
          ['u2'],
        )
        // And subscribe again: a new member (new member id) of the group.
        await consumer.unsubscribe()
        assert.deepEqual(consumer.assignment(), [])
        consumer.subscribe(['uns'])
        await pollUntil(consumer, [], 'rejoined', 15000, () => consumer.assignment().length === 2)
        assert.notEqual(consumer.groupMetadata().memberId, memberId)
        assert.notEqual(consumer.groupMetadata().memberId, '')
      } finally {
        admin.close()
        await consumer.close()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})
