/**
 * KIP-429 incremental cooperative rebalancing against a real broker: tidelog consumers with
 * the cooperative-sticky assignor keep consuming the partitions they keep while the group
 * rebalances, give up only the partitions that move (and only those reach the listeners),
 * and librdkafka (confluent-kafka, partition.assignment.strategy=cooperative-sticky) shares
 * such a group with them. Also the eager `sticky` assignor, whose stickiness travels through
 * the broker in the subscriptions' user data.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Consumer, type ConsumerOptions, type ConsumerRecord } from '../../src/client/consumer.js'
import { Producer } from '../../src/client/producer.js'
import { PYTHON } from '../helpers/compat-clients.js'
import { assertConsumedAtLeastOnce, consumedAll } from '../helpers/consumed.js'
import { waitUntil } from '../helpers/wait.js'
import { createTopics, text, withBroker } from './helpers.js'

const GROUP_PROPERTIES = {
  'group.initial.rebalance.delay.ms': 0,
  'group.min.session.timeout.ms': 1000,
  'offsets.topic.num.partitions': 3,
}

const COOPERATIVE_MEMBER: Partial<ConsumerOptions> = {
  sessionTimeoutMs: 6000,
  heartbeatIntervalMs: 200,
  rebalanceTimeoutMs: 15000,
  autoOffsetReset: 'earliest',
  fetchMaxWaitMs: 100,
  autoCommitIntervalMs: 200,
  partitionAssignmentStrategy: ['cooperative-sticky'],
}

/** Produces one record to every partition every `intervalMs` until stopped. */
class SteadyProducer {
  readonly values: string[] = []
  private readonly producer: Producer
  private running: Promise<void> | null = null
  private stopping = false

  constructor(
    bootstrap: string,
    private readonly topic: string,
    private readonly partitions: number,
    private readonly intervalMs: number,
  ) {
    this.producer = new Producer({ bootstrapServers: bootstrap, lingerMs: 0 })
  }

  start(): this {
    this.running = (async () => {
      for (let i = 0; !this.stopping; i++) {
        const sends: Promise<unknown>[] = []
        for (let p = 0; p < this.partitions; p++) {
          const value = `${p}-${i}`
          this.values.push(value)
          sends.push(this.producer.send({ topic: this.topic, partition: p, value }))
        }
        await Promise.all(sends)
        await sleep(this.intervalMs)
      }
    })()
    return this
  }

  async stop(): Promise<void> {
    if (this.stopping) return
    this.stopping = true
    await this.running
    await this.producer.close()
  }
}

/** A subscribed tidelog consumer polling in the background, recording when each record came. */
class Member {
  readonly consumer: Consumer
  readonly received: { partition: number; value: string; atMs: number }[] = []
  readonly assigned: number[][] = []
  readonly revoked: number[][] = []
  private running: Promise<void> | null = null
  private stopping = false
  error: unknown = null

  constructor(bootstrap: string, groupId: string, topic: string, options: Partial<ConsumerOptions> = {}) {
    this.consumer = new Consumer({
      bootstrapServers: bootstrap,
      groupId,
      ...COOPERATIVE_MEMBER,
      ...options,
      onPartitionsAssigned: (tps) => {
        this.assigned.push(tps.map((tp) => tp.partition).sort((a, b) => a - b))
      },
      onPartitionsRevoked: (tps) => {
        this.revoked.push(tps.map((tp) => tp.partition).sort((a, b) => a - b))
      },
    })
    this.consumer.subscribe([topic])
  }

  start(): this {
    this.stopping = false
    this.running = (async () => {
      while (!this.stopping) {
        try {
          const records: ConsumerRecord[] = await this.consumer.poll(100)
          const atMs = Date.now()
          for (const r of records)
            this.received.push({ partition: r.partition, value: text(r.value) ?? '', atMs })
        } catch (error) {
          this.error = error
          return
        }
      }
    })()
    return this
  }

  /** Stops polling (heartbeats go on: the member stays in the group but does not rejoin). */
  async pause(): Promise<void> {
    this.stopping = true
    await this.running
  }

  partitions(): number[] {
    return this.consumer
      .assignment()
      .map((tp) => tp.partition)
      .sort((a, b) => a - b)
  }

  async close(): Promise<void> {
    await this.pause()
    await this.consumer.close()
  }
}

const waitFor = waitUntil

function noErrors(members: readonly Member[]): void {
  for (const m of members) if (m.error) throw m.error
}

const sorted = (values: readonly string[]) => [...values].sort()

/** The longest time without a record of `partition` between `fromMs` and `toMs`. */
function longestGapMs(member: Member, partition: number, fromMs: number, toMs: number): number {
  const times = member.received.filter((r) => r.partition === partition && r.atMs >= fromMs && r.atMs <= toMs)
  let last = fromMs
  let gap = 0
  for (const r of times) {
    gap = Math.max(gap, r.atMs - last)
    last = r.atMs
  }
  return Math.max(gap, toMs - last)
}

test('cooperative-sticky: a third member joins; the others keep consuming what they keep and revoke one partition each', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'coop', partitions: 6 }])
      const producer = new SteadyProducer(bootstrap, 'coop', 6, 20).start()
      const a = new Member(bootstrap, 'grp-coop', 'coop').start()
      const b = new Member(bootstrap, 'grp-coop', 'coop').start()
      let c: Member | null = null
      try {
        await waitFor('3 partitions each', 20000, () => {
          noErrors([a, b])
          return a.partitions().length === 3 && b.partitions().length === 3
        })
        const aBefore = a.partitions()
        const revokedBefore = [a.revoked.length, b.revoked.length]
        // b stops polling: the rebalance c starts cannot finish until b rejoins, 3 s later.
        // An eager member would have given up everything by now; a cooperative one consumes on.
        await b.pause()
        const pausedAtMs = Date.now()
        c = new Member(bootstrap, 'grp-coop', 'coop').start()
        await sleep(3000)
        const resumedAtMs = Date.now()
        b.start()
        await waitFor('2 partitions each', 30000, () => {
          noErrors([a, b, c!])
          return [a, b, c!].every((m) => m.partitions().length === 2)
        })
        const settledAtMs = Date.now()
        assert.deepEqual(sorted([a, b, c].flatMap((m) => m.partitions().map(String))), [
          '0',
          '1',
          '2',
          '3',
          '4',
          '5',
        ])
        // a kept two of its three partitions and fetched them throughout the rebalance.
        const kept = a.partitions()
        assert.ok(
          kept.every((p) => aBefore.includes(p)),
          `a kept ${kept} of ${aBefore}`,
        )
        for (const p of kept) {
          const during = a.received.filter(
            (r) => r.partition === p && r.atMs > pausedAtMs + 500 && r.atMs < resumedAtMs,
          )
          assert.ok(during.length > 0, `a read partition ${p} while the rebalance waited for b`)
          const gapMs = longestGapMs(a, p, pausedAtMs, settledAtMs)
          assert.ok(gapMs < 1500, `a's fetches of partition ${p} stopped for ${gapMs} ms`)
        }
        // Only the moved partitions were revoked (one each); c was assigned only what it got.
        assert.deepEqual(a.revoked.slice(revokedBefore[0]).flat().length, 1, `a revoked ${a.revoked}`)
        assert.deepEqual(b.revoked.slice(revokedBefore[1]).flat().length, 1, `b revoked ${b.revoked}`)
        assert.deepEqual(sorted(c.assigned.flat().map(String)), sorted(c.partitions().map(String)))
        // Every record consumed, none twice (moved partitions are committed before they move).
        await sleep(500)
        await producer.stop()
        const produced = producer.values
        await waitFor(
          'every record',
          20000,
          () => [a, b, c!].flatMap((m) => m.received).length >= produced.length,
        )
        await sleep(300)
        const consumed = [a, b, c].flatMap((m) => m.received.map((r) => r.value))
        assert.deepEqual(sorted(consumed), sorted(produced), 'each record exactly once')
      } finally {
        await producer.stop()
        for (const m of [a, b, c]) await m?.close()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})

test('cooperative-sticky: a member whose generation is gone (poll timeout) drops its partitions at once, uncommitted', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'coopl', partitions: 4 }])
      const producer = new SteadyProducer(bootstrap, 'coopl', 4, 50).start()
      const a = new Member(bootstrap, 'grp-coopl', 'coopl', { maxPollIntervalMs: 2000 }).start()
      const b = new Member(bootstrap, 'grp-coopl', 'coopl').start()
      try {
        await waitFor('2 partitions each', 20000, () => {
          noErrors([a, b])
          return a.partitions().length === 2 && b.partitions().length === 2
        })
        const aOwned = a.partitions()
        const revokedBefore = a.revoked.length
        // a stops polling: after max.poll.interval.ms it leaves, and its generation is over.
        await a.pause()
        await waitFor('b takes all four', 20000, () => {
          noErrors([b])
          return b.partitions().length === 4
        })
        assert.deepEqual(a.partitions(), [], 'a no longer fetches partitions it lost')
        assert.equal(
          a.revoked.length,
          revokedBefore,
          'the listener runs from the next poll, not the heartbeat',
        )
        a.start()
        await waitFor('a rejoined', 20000, () => {
          noErrors([a, b])
          return a.partitions().length === 2 && b.partitions().length === 2
        })
        assert.deepEqual(
          a.revoked[revokedBefore],
          aOwned,
          'the lost partitions reach the revocation listener',
        )
      } finally {
        await producer.stop()
        for (const m of [a, b]) await m.close()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})

test('sticky (eager): a third member joins; the others keep a subset of what they had (user data through the broker)', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'stk', partitions: 6 }])
      const eager = { partitionAssignmentStrategy: ['sticky'] as const }
      const a = new Member(bootstrap, 'grp-stk', 'stk', eager).start()
      const b = new Member(bootstrap, 'grp-stk', 'stk', eager).start()
      let c: Member | null = null
      try {
        await waitFor('3 partitions each', 20000, () => {
          noErrors([a, b])
          return a.partitions().length === 3 && b.partitions().length === 3
        })
        const before = [a.partitions(), b.partitions()]
        c = new Member(bootstrap, 'grp-stk', 'stk', eager).start()
        await waitFor('2 partitions each', 20000, () => {
          noErrors([a, b, c!])
          return [a, b, c!].every((m) => m.partitions().length === 2)
        })
        assert.ok(
          a.partitions().every((p) => before[0].includes(p)),
          `a: ${before[0]} → ${a.partitions()}`,
        )
        assert.ok(
          b.partitions().every((p) => before[1].includes(p)),
          `b: ${before[1]} → ${b.partitions()}`,
        )
        // Eager: everything was revoked before the rejoin, and handed back.
        assert.deepEqual(a.revoked.at(-1), before[0])
      } finally {
        for (const m of [a, b, c]) await m?.close()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})

const CK_COOPERATIVE_MEMBER = `
import json, sys, time
from confluent_kafka import Consumer
bootstrap, group, topic, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
c = Consumer({'bootstrap.servers': bootstrap, 'group.id': group, 'auto.offset.reset': 'earliest',
              'session.timeout.ms': 6000, 'heartbeat.interval.ms': 300, 'auto.commit.interval.ms': 200,
              'partition.assignment.strategy': 'cooperative-sticky'})
def on_assign(consumer, partitions):
    print(json.dumps({'assigned': sorted(p.partition for p in partitions)}), flush=True)
def on_revoke(consumer, partitions):
    print(json.dumps({'revoked': sorted(p.partition for p in partitions)}), flush=True)
c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
deadline = time.time() + seconds
while time.time() < deadline:
    m = c.poll(0.1)
    if m is None:
        continue
    if m.error():
        print(json.dumps({'error': str(m.error())}), flush=True)
        continue
    print(json.dumps({'value': m.value().decode(), 'partition': m.partition()}), flush=True)
c.close()
`

test('confluent-kafka (librdkafka, cooperative-sticky) and tidelog members share a cooperative group', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'coopk', partitions: 6 }])
      const producer = new SteadyProducer(bootstrap, 'coopk', 6, 50).start()
      const child = spawn(PYTHON, ['-c', CK_COOPERATIVE_MEMBER, bootstrap, 'grp-coopk', 'coopk', '40'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
      const ck = {
        owned: new Set<number>(),
        revoked: [] as number[][],
        values: [] as string[],
        errors: [] as string[],
      }
      createInterface({ input: child.stdout! }).on('line', (line) => {
        const event = JSON.parse(line) as {
          assigned?: number[]
          revoked?: number[]
          value?: string
          error?: string
        }
        for (const p of event.assigned ?? []) ck.owned.add(p)
        if (event.revoked) {
          ck.revoked.push(event.revoked)
          for (const p of event.revoked) ck.owned.delete(p)
        }
        if (event.value !== undefined) ck.values.push(event.value)
        if (event.error) ck.errors.push(event.error)
      })
      const a = new Member(bootstrap, 'grp-coopk', 'coopk').start()
      let b: Member | null = null
      try {
        await waitFor('3 partitions each', 30000, () => {
          noErrors([a])
          return a.partitions().length === 3 && ck.owned.size === 3
        })
        const ckBefore = [...ck.owned]
        const ckRevokedBefore = ck.revoked.length
        b = new Member(bootstrap, 'grp-coopk', 'coopk').start()
        await waitFor('2 partitions each', 30000, () => {
          noErrors([a, b!])
          return a.partitions().length === 2 && b!.partitions().length === 2 && ck.owned.size === 2
        })
        assert.deepEqual(sorted([...a.partitions(), ...b.partitions(), ...ck.owned].map(String)), [
          '0',
          '1',
          '2',
          '3',
          '4',
          '5',
        ])
        // librdkafka gave up one partition, incrementally, and kept the other two.
        assert.deepEqual(
          ck.revoked.slice(ckRevokedBefore).flat().length,
          1,
          `librdkafka revoked ${ck.revoked}`,
        )
        assert.ok([...ck.owned].every((p) => ckBefore.includes(p)))
        await sleep(300)
        await producer.stop()
        const produced = producer.values
        await waitFor(
          'every record',
          30000,
          // Every value, not a count: a count would let a duplicate stand in for a missing one.
          () => consumedAll([...a.received, ...b!.received].map((r) => r.value).concat(ck.values), produced),
        )
        await sleep(300)
        const consumed = [...a.received, ...b.received].map((r) => r.value).concat(ck.values)
        // At least once: records are produced while partitions move, and librdkafka commits
        // what its application read every 200 ms (auto-commit), so a partition it gives up may
        // be reread from its last commit by the member that takes it. The duplicates are printed.
        assertConsumedAtLeastOnce(consumed, produced, 'cooperative group (librdkafka and tidelog)')
        assert.deepEqual(ck.errors, [])
      } finally {
        await producer.stop()
        for (const m of [a, b]) await m?.close()
        child.kill('SIGTERM')
        await exited
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})
