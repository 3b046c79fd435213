/**
 * tidelog's consumer with `groupProtocol: 'consumer'` (KIP-848) against a real broker: three
 * members share six partitions through ConsumerGroupHeartbeat, one closes and the other two
 * take its partitions over (each handed over only after its revocation), every record is
 * consumed, committed offsets carry the member epoch, and a regex subscription is resolved
 * by the broker. Classic-only options are refused with the consumer protocol.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Consumer, type ConsumerOptions } from '../../src/client/consumer.js'
import { InvalidArgumentError } from '../../src/client/errors.js'
import { Producer } from '../../src/client/producer.js'
import { assertConsumedOnce, consumedAll } from '../helpers/consumed.js'
import { waitUntil } from '../helpers/wait.js'
import { createTopics, text, withBroker } from './helpers.js'

const PROPERTIES = {
  'group.initial.rebalance.delay.ms': 0,
  'offsets.topic.num.partitions': 3,
  'group.consumer.heartbeat.interval.ms': 200,
  'group.consumer.session.timeout.ms': 10000,
}

class Member {
  readonly consumer: Consumer
  readonly values: string[] = []
  readonly assigned: number[][] = []
  readonly revoked: number[][] = []
  error: unknown = null
  private running: Promise<void> | null = null
  private stopping = false

  constructor(
    bootstrap: string,
    groupId: string,
    topics: string[] | RegExp,
    options: Partial<ConsumerOptions> = {},
  ) {
    this.consumer = new Consumer({
      bootstrapServers: bootstrap,
      groupId,
      groupProtocol: 'consumer',
      autoOffsetReset: 'earliest',
      fetchMaxWaitMs: 100,
      autoCommitIntervalMs: 200,
      ...options,
      onPartitionsAssigned: (tps) => {
        this.assigned.push(tps.map((tp) => tp.partition).sort((a, b) => a - b))
      },
      onPartitionsRevoked: (tps) => {
        this.revoked.push(tps.map((tp) => tp.partition).sort((a, b) => a - b))
      },
    })
    this.consumer.subscribe(topics)
    const consumer = this.consumer
    this.running = (async () => {
      while (!this.stopping) {
        try {
          for (const r of await consumer.poll(100)) this.values.push(text(r.value) ?? '')
        } catch (error) {
          this.error = error
          return
        }
      }
    })()
  }

  partitions(): number[] {
    return this.consumer
      .assignment()
      .map((tp) => tp.partition)
      .sort((a, b) => a - b)
  }

  async close(options: { abandon?: boolean } = {}): Promise<void> {
    this.stopping = true
    await this.running
    await this.consumer.close(options)
  }
}

async function waitFor(
  what: string,
  timeoutMs: number,
  condition: () => boolean,
  members: readonly Member[],
) {
  // A member's error ends the wait at once: it will not clear.
  let failed: unknown = null
  await waitUntil(what, timeoutMs, () => {
    failed = members.find((m) => m.error)?.error ?? null
    return failed !== null || condition()
  })
  if (failed !== null) throw failed
}

async function produce(
  bootstrap: string,
  topic: string,
  partitions: number,
  perPartition: number,
  tag: string,
) {
  const producer = new Producer({ bootstrapServers: bootstrap, lingerMs: 0 })
  const values: string[] = []
  try {
    const sends: Promise<unknown>[] = []
    for (let p = 0; p < partitions; p++)
      for (let i = 0; i < perPartition; i++) {
        const value = `${tag}-${p}-${i}`
        values.push(value)
        sends.push(producer.send({ topic, partition: p, value }))
      }
    await Promise.all(sends)
  } finally {
    await producer.close()
  }
  return values
}

test("groupProtocol 'consumer': 3 members share 6 partitions, one closes, the others take over, nothing lost", async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'kip848-client', partitions: 6 }])
      const first = await produce(bootstrap, 'kip848-client', 6, 5, 'first')
      const members = [0, 1, 2].map(() => new Member(bootstrap, 'kip848-client-group', ['kip848-client']))
      try {
        await waitFor(
          '2 partitions each',
          30000,
          () => members.every((m) => m.partitions().length === 2),
          members,
        )
        assert.deepEqual(members.flatMap((m) => m.partitions()).sort(), [0, 1, 2, 3, 4, 5])
        await waitFor(
          'first consumed',
          30000,
          () =>
            consumedAll(
              members.flatMap((m) => m.values),
              first,
            ),
          members,
        )
        const epoch = members[0].consumer.groupMetadata().generationId
        assert.ok(epoch >= 1, `member epoch ${epoch}`)
        const [leaver, ...stayers] = members
        await leaver.close()
        await waitFor(
          '3 partitions each for the stayers',
          30000,
          () => stayers.every((m) => m.partitions().length === 3),
          stayers,
        )
        assert.deepEqual(stayers.flatMap((m) => m.partitions()).sort(), [0, 1, 2, 3, 4, 5])
        const second = await produce(bootstrap, 'kip848-client', 6, 5, 'second')
        await waitFor(
          'second consumed',
          30000,
          () =>
            consumedAll(
              stayers.flatMap((m) => m.values),
              second,
            ),
          stayers,
        )
        // The client commits what it read before acknowledging a revocation and on close, so
        // the partitions that moved (as members joined, and from the leaver) are not reread.
        assertConsumedOnce(
          members.flatMap((m) => m.values),
          [...first, ...second],
          'KIP-848 members',
        )
        // The listeners heard the deltas: the leaver's partitions were added to the stayers.
        const leaverHad = leaver.assigned.flat().sort()
        assert.deepEqual(leaver.revoked.flat().sort(), leaverHad, 'the leaver revoked what it had on close')
        for (const p of leaverHad)
          assert.ok(
            stayers.some((m) => m.assigned.flat().includes(p)),
            `partition ${p} reassigned`,
          )
        for (const m of stayers) await m.consumer.commit()
        if (process.env.GROUPS_DEBUG)
          for (const m of stayers)
            console.log(m.partitions(), m.consumer.lastAutoCommitError, m.assigned, m.revoked)
        const committed = await stayers[0].consumer.committed(
          [0, 1, 2, 3, 4, 5].map((partition) => ({ topic: 'kip848-client', partition })),
        )
        assert.deepEqual(
          [...committed].sort(),
          [0, 1, 2, 3, 4, 5].map((p) => [`kip848-client/${p}`, 10]).sort(),
        )
        for (const m of members) assert.equal(m.error, null)
      } finally {
        for (const m of members) await m.close().catch(() => undefined)
      }
    },
    { port: 0, properties: PROPERTIES },
  )
})

test("groupProtocol 'consumer': a member closed with abandon (a crash) does not commit or leave; after its session the other re-reads from its last commit", async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'kip848-crash', partitions: 4 }])
      const first = await produce(bootstrap, 'kip848-crash', 4, 5, 'a')
      // Auto-commit on but never due: only close() could commit the crasher's positions.
      const options = { autoCommitIntervalMs: 600000 }
      const crasher = new Member(bootstrap, 'kip848-crash-group', ['kip848-crash'], options)
      const stayer = new Member(bootstrap, 'kip848-crash-group', ['kip848-crash'], options)
      const members = [crasher, stayer]
      try {
        await waitFor(
          '2 partitions each',
          30000,
          () => members.every((m) => m.partitions().length === 2),
          members,
        )
        await waitFor(
          'first consumed',
          30000,
          () => consumedAll([...crasher.values, ...stayer.values], first),
          members,
        )
        for (const m of members) await m.consumer.commit()
        const crashed = crasher.partitions()
        const second = await produce(bootstrap, 'kip848-crash', 4, 5, 'b')
        await waitFor(
          'second consumed',
          30000,
          () => consumedAll([...crasher.values, ...stayer.values], second),
          members,
        )
        const revocations = crasher.revoked.length
        await crasher.close({ abandon: true })
        assert.equal(crasher.revoked.length, revocations, 'no revocation callback')
        await waitFor(
          'the stayer owns all 4 after the session timeout',
          40000,
          () => stayer.partitions().length === 4,
          [stayer],
        )
        const again = second.filter((v) => crashed.some((p) => v.startsWith(`b-${p}-`)))
        await waitFor('re-read', 30000, () => again.every((v) => stayer.values.includes(v)), [stayer])
        assert.ok(
          !stayer.values.some((v) => crashed.some((p) => v.startsWith(`a-${p}-`))),
          'nothing from before its commit',
        )
      } finally {
        await stayer.close().catch(() => undefined)
      }
    },
    { port: 0, properties: PROPERTIES },
  )
})

test("groupProtocol 'consumer': a RegExp subscription is resolved by the broker", async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [
        { topic: 'metrics-a', partitions: 1 },
        { topic: 'metrics-b', partitions: 1 },
        { topic: 'other', partitions: 1 },
      ])
      const a = await produce(bootstrap, 'metrics-a', 1, 2, 'a')
      const b = await produce(bootstrap, 'metrics-b', 1, 2, 'b')
      await produce(bootstrap, 'other', 1, 2, 'o')
      const member = new Member(bootstrap, 'kip848-regex', /metrics-.*/)
      try {
        await waitFor('both metrics topics consumed', 30000, () => member.values.length === 4, [member])
        assert.deepEqual(member.values.sort(), [...a, ...b].sort())
        assert.deepEqual(member.consumer.subscription(), ['metrics-a', 'metrics-b'])
      } finally {
        await member.close()
      }
    },
    { port: 0, properties: PROPERTIES },
  )
})

test("groupProtocol 'consumer' refuses the classic protocol's own options", () => {
  for (const extra of [
    { sessionTimeoutMs: 10000 },
    { heartbeatIntervalMs: 100 },
    { partitionAssignmentStrategy: ['range' as const] },
  ])
    assert.throws(
      () =>
        new Consumer({ bootstrapServers: '127.0.0.1:1', groupId: 'g', groupProtocol: 'consumer', ...extra }),
      InvalidArgumentError,
    )
  assert.throws(
    () =>
      new Consumer({ bootstrapServers: '127.0.0.1:1', groupId: 'g', groupProtocol: 'other' as 'consumer' }),
    InvalidArgumentError,
  )
})
