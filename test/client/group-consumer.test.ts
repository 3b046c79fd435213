/**
 * tidelog's consumer as a consumer-group member against a real broker: partitions shared
 * across members, taken over when one leaves, committed offsets surviving a restart, commits
 * refused with a typed error once the generation is over, rebalance listeners, a rejoin when
 * partitions are added, and groups shared with kafkajs and confluent-kafka (librdkafka).
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kafka, type Consumer as KafkajsConsumer, logLevel, PartitionAssigners } from 'kafkajs'
import { Admin } from '../../src/client/admin.js'
import { Consumer, type ConsumerOptions, type ConsumerRecord } from '../../src/client/consumer.js'
import { CommitFailedError } from '../../src/client/group/errors.js'
import { Producer } from '../../src/client/producer.js'
import { startCluster } from '../helpers/cluster.js'
import { PYTHON } from '../helpers/compat-clients.js'
import { assertConsumedAtLeastOnce, consumedAll } from '../helpers/consumed.js'
import { waitUntil } from '../helpers/wait.js'
import { startFakeBroker } from './fake-broker.js'
import { createTopics, text, withBroker } from './helpers.js'

/** Fast group timing: no initial rebalance delay, short sessions allowed. */
const GROUP_PROPERTIES = {
  'group.initial.rebalance.delay.ms': 0,
  'group.min.session.timeout.ms': 1000,
  'offsets.topic.num.partitions': 3,
}

const FAST_MEMBER: Partial<ConsumerOptions> = {
  sessionTimeoutMs: 6000,
  heartbeatIntervalMs: 200,
  rebalanceTimeoutMs: 10000,
  autoOffsetReset: 'earliest',
  fetchMaxWaitMs: 100,
  autoCommitIntervalMs: 200,
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

/** A subscribed tidelog consumer polling in the background, recording what it got. */
class Member {
  readonly consumer: Consumer
  readonly records: ConsumerRecord[] = []
  assignedEvents: string[][] = []
  revokedEvents: string[][] = []
  private running: Promise<void> | null = null
  private stopping = false
  error: unknown = null

  constructor(bootstrap: string, groupId: string, topics: string[], options: Partial<ConsumerOptions> = {}) {
    this.consumer = new Consumer({
      bootstrapServers: bootstrap,
      groupId,
      ...FAST_MEMBER,
      onPartitionsAssigned: (tps) => {
        this.assignedEvents.push(tps.map((tp) => `${tp.topic}-${tp.partition}`))
      },
      onPartitionsRevoked: (tps) => {
        this.revokedEvents.push(tps.map((tp) => `${tp.topic}-${tp.partition}`))
      },
      ...options,
    })
    this.consumer.subscribe(topics)
  }

  start(): this {
    this.stopping = false
    this.running = (async () => {
      while (!this.stopping) {
        try {
          this.records.push(...(await this.consumer.poll(200)))
        } catch (error) {
          this.error = error
          return
        }
      }
    })()
    return this
  }

  partitions(): number[] {
    return this.consumer
      .assignment()
      .map((tp) => tp.partition)
      .sort((a, b) => a - b)
  }

  values(): string[] {
    return this.records.map((r) => text(r.value) ?? '')
  }

  /** Stops polling; closes (commit, revoke, LeaveGroup) unless `close` is false. */
  async stop(close = true): Promise<void> {
    this.stopping = true // polls end within 200 ms
    await this.running
    if (close) await this.consumer.close()
  }
}

const waitFor = waitUntil

function noErrors(members: readonly Member[]): void {
  for (const m of members) if (m.error) throw m.error
}

const sorted = (values: readonly string[]) => [...values].sort()

test('3 members of a group on 6 partitions get 2 each; every record is consumed exactly once', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'g6', partitions: 6 }])
      const produced = await produce(bootstrap, 'g6', 6, 20, 'a')
      const members = [0, 1, 2].map(() => new Member(bootstrap, 'grp-a', ['g6']).start())
      try {
        await waitFor('2 partitions each', 20000, () => {
          noErrors(members)
          return members.every((m) => m.partitions().length === 2)
        })
        assert.deepEqual(sorted(members.flatMap((m) => m.partitions().map(String))), [
          '0',
          '1',
          '2',
          '3',
          '4',
          '5',
        ])
        const more = await produce(bootstrap, 'g6', 6, 10, 'b')
        const all = [...produced, ...more]
        await waitFor('every record', 20000, () => members.flatMap((m) => m.records).length >= all.length)
        await sleep(300) // anything consumed twice would show up now
        const consumed = members.flatMap((m) => m.values())
        assert.deepEqual(sorted(consumed), sorted(all), 'each record exactly once')
        // Each member read only partitions it was assigned last (after the final rebalance).
        for (const m of members) {
          const mine = new Set(m.partitions())
          const lateRecords = m.records.filter((r) => text(r.value)?.startsWith('b-'))
          for (const r of lateRecords)
            assert.ok(mine.has(r.partition), `partition ${r.partition} read by a non-owner`)
        }
        // Auto-commit (every 200 ms here) commits the positions while the members run.
        const admin = new Admin({ bootstrapServers: bootstrap })
        try {
          await waitFor('auto-committed', 10000, async () => {
            const offsets = await admin.listGroupOffsets('grp-a')
            return offsets.length === 6 && offsets.every((o) => o.offset === 30)
          })
        } finally {
          admin.close()
        }
        const meta = members.map((m) => m.consumer.groupMetadata())
        assert.equal(new Set(meta.map((g) => g.generationId)).size, 1, 'one generation')
        assert.equal(new Set(meta.map((g) => g.memberId)).size, 3)
      } finally {
        for (const m of members) await m.stop()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})

test('a member that closes commits and leaves: the others take over its partitions, nothing is lost or read twice', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'gl', partitions: 6 }])
      const first = await produce(bootstrap, 'gl', 6, 10, 'a')
      const members = [0, 1, 2].map(() => new Member(bootstrap, 'grp-leave', ['gl']).start())
      const [quitter, ...stayers] = members
      try {
        await waitFor('2 partitions each', 20000, () => {
          noErrors(members)
          return members.every((m) => m.partitions().length === 2)
        })
        await waitFor('first batch', 20000, () => members.flatMap((m) => m.records).length >= first.length)
        const given = quitter.partitions()
        await quitter.stop() // close: commit, onPartitionsRevoked, LeaveGroup
        assert.deepEqual(
          quitter.revokedEvents.at(-1),
          given.map((p) => `gl-${p}`),
        )
        await waitFor('stayers own all 6', 20000, () => {
          noErrors(stayers)
          return sorted(stayers.flatMap((m) => m.partitions().map(String))).join() === '0,1,2,3,4,5'
        })
        const second = await produce(bootstrap, 'gl', 6, 10, 'b')
        const all = [...first, ...second]
        await waitFor('everything', 20000, () => members.flatMap((m) => m.records).length >= all.length)
        await sleep(300)
        assert.deepEqual(sorted(members.flatMap((m) => m.values())), sorted(all), 'each record exactly once')
        for (const m of stayers) assert.equal(m.partitions().length, 3)
      } finally {
        for (const m of stayers) await m.stop()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})

test('a member closed with abandon (a crash) neither commits nor leaves: after its session the others re-read from its last commit', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'gx', partitions: 4 }])
      const first = await produce(bootstrap, 'gx', 4, 5, 'a')
      // Auto-commit on, but never due in the test: only close() could commit its positions.
      const crasher = new Member(bootstrap, 'grp-crash', ['gx'], { autoCommitIntervalMs: 600000 }).start()
      const stayer = new Member(bootstrap, 'grp-crash', ['gx'], { autoCommitIntervalMs: 600000 }).start()
      try {
        await waitFor('2 partitions each', 20000, () => {
          noErrors([crasher, stayer])
          return crasher.partitions().length === 2 && stayer.partitions().length === 2
        })
        await waitFor(
          'first batch',
          20000,
          () => crasher.records.length + stayer.records.length >= first.length,
        )
        await stayer.consumer.commit()
        await crasher.consumer.commit()
        const crashed = crasher.partitions()
        const second = await produce(bootstrap, 'gx', 4, 5, 'b')
        await waitFor('second batch', 20000, () => crasher.records.length + stayer.records.length >= 40)
        const revocations = crasher.revokedEvents.length
        await crasher.stop(false)
        await crasher.consumer.close({ abandon: true })
        assert.equal(crasher.revokedEvents.length, revocations, 'no revocation callback')
        await waitFor('the stayer owns all 4 after the crashed member expired', 30000, () => {
          noErrors([stayer])
          return stayer.partitions().length === 4
        })
        // The crashed member's second-batch records again: its uncommitted reads, from its last commit.
        const again = second.filter((v) => crashed.some((p) => v.startsWith(`b-${p}-`)))
        await waitFor('re-read', 20000, () => again.every((v) => stayer.values().includes(v)))
        assert.ok(
          !stayer.values().some((v) => crashed.some((p) => v.startsWith(`a-${p}-`))),
          'nothing from before its commit',
        )
      } finally {
        await stayer.stop()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})

test('committed offsets survive a restart: a new member resumes after the last commit', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'gc', partitions: 3 }])
      const first = await produce(bootstrap, 'gc', 3, 5, 'a')
      const a = new Member(bootstrap, 'grp-commit', ['gc'], { enableAutoCommit: false }).start()
      await waitFor('first batch', 20000, () => {
        noErrors([a])
        return a.records.length >= first.length
      })
      await a.stop(false)
      await a.consumer.commit() // the consumed positions: 5 on each partition
      const tps = [0, 1, 2].map((partition) => ({ topic: 'gc', partition }))
      assert.deepEqual([...(await a.consumer.committed(tps)).values()], [5, 5, 5])
      // Explicit offsets: partition 2 is rewound to 3 (records 3 and 4 are read again).
      await a.consumer.commit([{ topic: 'gc', partition: 2, offset: 3, metadata: 'rewind' }])
      await a.consumer.close() // no auto-commit: the explicit offsets stay
      const second = await produce(bootstrap, 'gc', 3, 4, 'b')
      const b = new Member(bootstrap, 'grp-commit', ['gc'], { autoOffsetReset: 'earliest' }).start()
      try {
        await waitFor('resumed', 20000, () => {
          noErrors([b])
          return b.records.length >= second.length + 2
        })
        await sleep(300)
        assert.deepEqual(sorted(b.values()), sorted([...second, 'a-2-3', 'a-2-4']))
        assert.deepEqual(b.assignedEvents, [['gc-0', 'gc-1', 'gc-2']])
      } finally {
        await b.stop()
      }
      // b closed with auto-commit: everything is committed now.
      const admin = new Admin({ bootstrapServers: bootstrap })
      try {
        const offsets = await admin.listGroupOffsets('grp-commit')
        assert.deepEqual(
          offsets.map((o) => [o.partition, o.offset]),
          [
            [0, 9],
            [1, 9],
            [2, 9],
          ],
        )
      } finally {
        admin.close()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})

test('assign mode with a groupId: commits outside group management, and a new consumer starts at them', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'ga', partitions: 2 }])
      const values = await produce(bootstrap, 'ga', 2, 5, 'a')
      const tps = [0, 1].map((partition) => ({ topic: 'ga', partition }))
      const first = new Consumer({ bootstrapServers: bootstrap, groupId: 'grp-assign', ...FAST_MEMBER })
      first.assign(tps)
      const got: ConsumerRecord[] = []
      const deadline = Date.now() + 20000
      while (got.length < values.length && Date.now() < deadline) got.push(...(await first.poll(200)))
      assert.equal(got.length, values.length)
      await first.commit([{ topic: 'ga', partition: 0, offset: 3 }])
      await first.close() // auto-commit on close: partition 1 at 5 (partition 0 is at 5 too)
      const admin = new Admin({ bootstrapServers: bootstrap })
      try {
        assert.deepEqual(
          (await admin.listGroupOffsets('grp-assign')).map((o) => o.offset),
          [5, 5],
        )
        await admin.alterGroupOffsets('grp-assign', [{ topic: 'ga', partition: 0, offset: 3 }])
      } finally {
        admin.close()
      }
      const second = new Consumer({
        bootstrapServers: bootstrap,
        groupId: 'grp-assign',
        ...FAST_MEMBER,
        autoOffsetReset: 'latest',
      })
      try {
        second.assign(tps)
        const more: ConsumerRecord[] = []
        const until = Date.now() + 20000
        while (more.length < 2 && Date.now() < until) more.push(...(await second.poll(200)))
        await sleep(300)
        more.push(...(await second.poll(100)))
        assert.deepEqual(
          more.map((r) => text(r.value)),
          ['a-0-3', 'a-0-4'],
        )
      } finally {
        await second.close()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})

test('against a broker without the group APIs, subscribe fails at the first poll with ERR_GROUPS_NOT_SUPPORTED', async () => {
  const fake = await startFakeBroker()
  const consumer = new Consumer({ bootstrapServers: fake.bootstrap, groupId: 'g', ...FAST_MEMBER })
  try {
    consumer.subscribe(['t'])
    await assert.rejects(consumer.poll(2000), { code: 'ERR_GROUPS_NOT_SUPPORTED' })
  } finally {
    await consumer.close()
    await fake.close()
  }
})

test('a commit from a member the group dropped fails with a typed error; its next poll rejoins', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'gx', partitions: 2 }])
      await produce(bootstrap, 'gx', 2, 3, 'a')
      // A stops polling; its rebalance timeout is short, its heartbeats rare.
      const a = new Member(bootstrap, 'grp-x', ['gx'], {
        enableAutoCommit: false,
        rebalanceTimeoutMs: 1500,
        heartbeatIntervalMs: 4000,
      }).start()
      await waitFor('a has both', 20000, () => a.partitions().length === 2 && a.records.length === 6)
      await a.stop(false)
      // The group's rebalance timeout is its members' largest: short for b too.
      const b = new Member(bootstrap, 'grp-x', ['gx'], { rebalanceTimeoutMs: 1500 }).start()
      try {
        // A does not rejoin within the rebalance timeout: the coordinator drops it.
        await waitFor('b has both', 20000, () => {
          noErrors([b])
          return b.partitions().length === 2
        })
        const failure = await a.consumer.commit().then(
          () => null,
          (error: unknown) => error,
        )
        assert.ok(failure instanceof CommitFailedError, `expected CommitFailedError, got ${String(failure)}`)
        assert.equal(failure.code, 'ERR_KAFKA_UNKNOWN_MEMBER_ID')
        assert.equal(failure.errorCode, 25)
        // Polling again rejoins as a new member: the partitions are shared again.
        a.start()
        await waitFor('1 each', 20000, () => {
          noErrors([a, b])
          return a.partitions().length === 1 && b.partitions().length === 1
        })
      } finally {
        await a.stop()
        await b.stop()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})

test('the leader rebalances when a subscribed topic gains partitions', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'gp', partitions: 2 }])
      const members = [0, 1].map(() =>
        new Member(bootstrap, 'grp-p', ['gp'], { metadataMaxAgeMs: 300 }).start(),
      )
      const admin = new Admin({ bootstrapServers: bootstrap })
      try {
        await waitFor('1 each', 20000, () => {
          noErrors(members)
          return members.every((m) => m.partitions().length === 1)
        })
        await admin.createPartitions([{ topic: 'gp', count: 4 }])
        await waitFor('2 each', 20000, () => {
          noErrors(members)
          return members.every((m) => m.partitions().length === 2)
        })
        const values = await produce(bootstrap, 'gp', 4, 3, 'n')
        await waitFor('all', 20000, () => members.flatMap((m) => m.records).length >= values.length)
        assert.deepEqual(sorted(members.flatMap((m) => m.values())), sorted(values))
      } finally {
        admin.close()
        for (const m of members) await m.stop()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})

test('static members (group.instance.id) get their partitions back without a rebalance; a duplicate is fenced', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'gs', partitions: 4 }])
      const a = new Member(bootstrap, 'grp-s', ['gs'], { groupInstanceId: 'i-a' }).start()
      const b = new Member(bootstrap, 'grp-s', ['gs'], { groupInstanceId: 'i-b' }).start()
      let a2: Member | null = null
      let a3: Member | null = null
      try {
        await waitFor('2 each', 20000, () => {
          noErrors([a, b])
          return a.partitions().length === 2 && b.partitions().length === 2
        })
        const before = a.partitions()
        const generation = b.consumer.groupMetadata().generationId
        const bRevocations = b.revokedEvents.length
        await a.stop() // a static member does not send LeaveGroup
        a2 = new Member(bootstrap, 'grp-s', ['gs'], { groupInstanceId: 'i-a' }).start()
        await waitFor('a2 has a’s partitions', 20000, () => {
          noErrors([a2!, b])
          return a2!.partitions().length === 2
        })
        assert.deepEqual(a2.partitions(), before)
        assert.equal(a2.consumer.groupMetadata().generationId, generation, 'no new generation')
        assert.equal(b.revokedEvents.length, bRevocations, 'b kept its partitions')
        // A second live member with the same instance id fences the first.
        a3 = new Member(bootstrap, 'grp-s', ['gs'], { groupInstanceId: 'i-a' }).start()
        await waitFor('a2 fenced', 20000, () => a2!.error !== null)
        assert.equal((a2.error as { code?: string }).code, 'ERR_KAFKA_FENCED_INSTANCE_ID')
      } finally {
        await a2?.stop()
        await a3?.stop()
        await b.stop()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})

test('a member that stops polling for max.poll.interval.ms leaves; the others take its partitions', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'gm', partitions: 2 }])
      const slow = new Member(bootstrap, 'grp-m', ['gm'], { maxPollIntervalMs: 1500 }).start()
      const other = new Member(bootstrap, 'grp-m', ['gm']).start()
      try {
        await waitFor('1 each', 20000, () => {
          noErrors([slow, other])
          return slow.partitions().length === 1 && other.partitions().length === 1
        })
        await slow.stop(false) // alive (heartbeats) but not polling
        await waitFor('other has both', 20000, () => {
          noErrors([other])
          return other.partitions().length === 2
        })
        assert.equal(slow.consumer.groupMetadata().memberId, '', 'the slow member left')
      } finally {
        await slow.consumer.close()
        await other.stop()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})

test('the coordinator stops: members find the new one, keep consuming and commit there', {
  timeout: 120000,
}, async () => {
  const cluster = await startCluster({
    brokers: 3,
    port: 0,
    properties: {
      ...GROUP_PROPERTIES,
      'broker.session.timeout.ms': 3000,
      'offsets.topic.replication.factor': 3,
      'default.replication.factor': 3,
    },
  })
  const members: Member[] = []
  const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
  try {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'gf', partitions: 3, replicationFactor: 3 }])
    const first = await produce(bootstrap, 'gf', 3, 5, 'a')
    members.push(...[0, 1].map(() => new Member(bootstrap, 'grp-f', ['gf']).start()))
    await waitFor('first consumed', 30000, () => {
      noErrors(members)
      return consumedAll(
        members.flatMap((m) => m.values()),
        first,
      )
    })
    const coordinator = await admin.findCoordinator('grp-f')
    const victim = cluster.brokers.find((b) => b.nodeId === coordinator)!
    await victim.stop()
    const survivors = cluster.brokers.filter((b) => b !== victim).map((b) => b.bootstrapServers)
    const second = await produce(survivors.join(','), 'gf', 3, 5, 'b')
    const all = [...first, ...second]
    await waitFor('second consumed', 60000, () => {
      noErrors(members)
      return consumedAll(
        members.flatMap((m) => m.values()),
        all,
      )
    })
    // At least once: while the coordinator is gone the members' commits fail, and a member
    // that must rejoin at the new one may have its partitions moved and reread from the
    // last commit that got through. The duplicates are printed.
    assertConsumedAtLeastOnce(
      members.flatMap((m) => m.values()),
      all,
      'members across a coordinator stop',
    )
    const survivorAdmin = new Admin({ bootstrapServers: survivors.join(',') })
    try {
      assert.notEqual(await survivorAdmin.findCoordinator('grp-f'), coordinator)
      await waitFor('committed at the new coordinator', 30000, async () => {
        const offsets = await survivorAdmin.listGroupOffsets('grp-f')
        return offsets.length === 3 && offsets.every((o) => o.offset === 10)
      })
    } finally {
      survivorAdmin.close()
    }
  } finally {
    admin.close()
    for (const m of members) await m.stop()
    await cluster.stop()
  }
})

// ---------------------------------------------------------------------------- kafkajs

/**
 * kafkajs names its round-robin assignor "RoundRobinAssigner", Java and tidelog
 * "roundrobin": with their defaults they share no protocol and cannot be in one group
 * (INCONSISTENT_GROUP_PROTOCOL). kafkajs takes custom assigners, so its own round robin
 * offered under Java's name shares a group with tidelog's.
 */
function kafkajsMember(bootstrap: string, groupId: string, topic: string, assignerName: string | null) {
  const kafka = new Kafka({
    clientId: 'kafkajs-member',
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
    retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 },
  })
  const roundRobin = PartitionAssigners.roundRobin
  const consumer: KafkajsConsumer = kafka.consumer({
    groupId,
    sessionTimeout: 6000,
    heartbeatInterval: 300,
    rebalanceTimeout: 10000,
    maxWaitTimeInMs: 300,
    ...(assignerName
      ? { partitionAssigners: [(config) => ({ ...roundRobin(config), name: assignerName })] }
      : {}),
  })
  const state = { consumer, kafka, assignment: [] as number[], values: [] as string[] }
  consumer.on(consumer.events.GROUP_JOIN, (event) => {
    state.assignment = [...(event.payload.memberAssignment[topic] ?? [])].sort((a, b) => a - b)
  })
  return {
    state,
    async start() {
      await consumer.connect()
      await consumer.subscribe({ topic, fromBeginning: true })
      await consumer.run({
        autoCommitInterval: 200,
        eachMessage: async ({ message }) => {
          state.values.push(message.value?.toString() ?? '')
        },
      })
    },
  }
}

test('kafkajs and tidelog share a group through a common protocol name (roundrobin); tidelog commits are what kafkajs admin reads', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'gj', partitions: 4 }])
      const js = kafkajsMember(bootstrap, 'grp-js', 'gj', 'roundrobin')
      const tide = new Member(bootstrap, 'grp-js', ['gj'], { partitionAssignmentStrategy: ['roundrobin'] })
      await js.start()
      tide.start()
      const admin = js.state.kafka.admin()
      try {
        await waitFor('2 partitions each', 30000, () => {
          noErrors([tide])
          return tide.partitions().length === 2 && js.state.assignment.length === 2
        })
        assert.deepEqual(sorted([...tide.partitions(), ...js.state.assignment].map(String)), [
          '0',
          '1',
          '2',
          '3',
        ])
        const values = await produce(bootstrap, 'gj', 4, 10, 'm')
        await waitFor(
          'all consumed',
          30000,
          () => tide.records.length + js.state.values.length >= values.length,
        )
        await sleep(300)
        assert.deepEqual(sorted([...tide.values(), ...js.state.values]), sorted(values), 'each record once')
        assert.ok(tide.records.length > 0 && js.state.values.length > 0)

        await tide.consumer.commit()
        await admin.connect()
        const fetched = await admin.fetchOffsets({ groupId: 'grp-js', topics: ['gj'] })
        const byPartition = new Map(fetched[0].partitions.map((p) => [p.partition, p.offset]))
        for (const p of tide.partitions()) assert.equal(byPartition.get(p), '10', `partition ${p}`)
        const {
          groups: [description],
        } = await admin.describeGroups(['grp-js'])
        assert.equal(description.protocol, 'roundrobin')
        assert.equal(description.members.length, 2)

        // tidelog's default (range) is not offered by this group's members: a clear error.
        const stranger = new Consumer({ bootstrapServers: bootstrap, groupId: 'grp-js', ...FAST_MEMBER })
        stranger.subscribe(['gj'])
        await assert.rejects(
          async () => {
            for (let i = 0; i < 50; i++) await stranger.poll(200)
          },
          { code: 'ERR_KAFKA_INCONSISTENT_GROUP_PROTOCOL', errorCode: 23 },
        )
        await stranger.close()
      } finally {
        await admin.disconnect()
        await js.state.consumer.disconnect()
        await tide.stop()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})

// ------------------------------------------------------------------- confluent-kafka

/** A confluent-kafka (librdkafka) group member with range assignment, printing JSON lines. */
const CK_MEMBER = `
import json, sys, time
from confluent_kafka import Consumer
bootstrap, group, topic, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
c = Consumer({'bootstrap.servers': bootstrap, 'group.id': group, 'auto.offset.reset': 'earliest',
              'session.timeout.ms': 6000, 'heartbeat.interval.ms': 300, 'auto.commit.interval.ms': 200,
              'partition.assignment.strategy': 'range'})
def on_assign(consumer, partitions):
    print(json.dumps({'assignment': sorted(p.partition for p in partitions)}), flush=True)
def on_revoke(consumer, partitions):
    print(json.dumps({'assignment': []}), flush=True)
c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
deadline = time.time() + seconds
while time.time() < deadline:
    m = c.poll(0.2)
    if m is None:
        continue
    if m.error():
        print(json.dumps({'error': str(m.error())}), flush=True)
        continue
    print(json.dumps({'value': m.value().decode()}), flush=True)
c.close()
`

test('confluent-kafka (librdkafka) and tidelog share a group with range assignment', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'gk', partitions: 6 }])
      const child = spawn(PYTHON, ['-c', CK_MEMBER, bootstrap, 'grp-ck', 'gk', '25'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
      const ck = { assignment: [] as number[], values: [] as string[], errors: [] as string[] }
      createInterface({ input: child.stdout! }).on('line', (line) => {
        const event = JSON.parse(line) as { assignment?: number[]; value?: string; error?: string }
        if (event.assignment) ck.assignment = event.assignment
        if (event.value !== undefined) ck.values.push(event.value)
        if (event.error) ck.errors.push(event.error)
      })
      const tide = new Member(bootstrap, 'grp-ck', ['gk']).start()
      try {
        await waitFor('3 partitions each', 30000, () => {
          noErrors([tide])
          return tide.partitions().length === 3 && ck.assignment.length === 3
        })
        assert.deepEqual(sorted([...tide.partitions(), ...ck.assignment].map(String)), [
          '0',
          '1',
          '2',
          '3',
          '4',
          '5',
        ])
        // Range over 6 partitions and 2 members: one gets 0-2, the other 3-5.
        const ranges = [tide.partitions().join(), ck.assignment.join()].sort()
        assert.deepEqual(ranges, ['0,1,2', '3,4,5'])
        const values = await produce(bootstrap, 'gk', 6, 5, 'r')
        await waitFor('all consumed', 30000, () => tide.records.length + ck.values.length >= values.length)
        await sleep(300)
        assert.deepEqual(sorted([...tide.values(), ...ck.values]), sorted(values), 'each record once')
        assert.deepEqual(ck.errors, [])
      } finally {
        await tide.stop()
        child.kill('SIGTERM')
        await exited
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})
