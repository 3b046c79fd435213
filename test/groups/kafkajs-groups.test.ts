/**
 * kafkajs consumer groups against one broker: balanced assignment, rebalance on leave and
 * on session expiry, committed offsets surviving consumer and broker restarts.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { startBroker, withBroker } from '../helpers/cluster.js'
import { assertConsumedAtLeastOnce, assertConsumedOnce, consumedAll } from '../helpers/consumed.js'
import { createTopic } from '../helpers/topics.js'
import {
  assignedPartitions,
  FAST_GROUP_PROPERTIES,
  kafka,
  produce,
  startConsumer,
  type TrackedConsumer,
  waitFor,
} from './helpers.js'

const TOPIC = 'orders'

async function stopAll(consumers: readonly TrackedConsumer[]): Promise<void> {
  for (const c of consumers) await c.consumer.disconnect().catch(() => undefined)
}

test('kafkajs: 3 members on 6 partitions get 2 each, a leaver is rebalanced away, nothing left unconsumed', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopic(cluster, TOPIC, { partitions: 6 })
      const produced = await produce(bootstrap, TOPIC, 6, 5, 'a')
      const consumers: TrackedConsumer[] = []
      try {
        for (let i = 0; i < 3; i++) consumers.push(await startConsumer(bootstrap, 'g1', TOPIC, `c${i}`))
        await waitFor(
          '2 partitions each',
          20000,
          () =>
            consumers.every((c) => c.assignment.length === 2) &&
            assignedPartitions(consumers).join() === '0,1,2,3,4,5',
        )
        await waitFor('all consumed', 20000, () =>
          consumedAll(
            consumers.flatMap((c) => c.values),
            produced,
          ),
        )
        // One member leaves: the other two take over all six partitions.
        await consumers[2].consumer.disconnect()
        const rest = consumers.slice(0, 2)
        await waitFor('3 partitions each', 20000, () => assignedPartitions(rest).join() === '0,1,2,3,4,5')
        const more = await produce(bootstrap, TOPIC, 6, 2, 'b')
        await waitFor('new records consumed', 20000, () =>
          consumedAll(
            rest.flatMap((c) => c.values),
            more,
          ),
        )
        // The first records at least once: the members join one after another, so partitions
        // move while they are read, and kafkajs commits on its 200 ms interval, so a moved
        // partition may be reread from its last commit. The duplicates are printed.
        assertConsumedAtLeastOnce(
          consumers.flatMap((c) => c.values).filter((v) => !more.includes(v)),
          produced,
          'kafkajs members, first records',
        )
        // The new records exactly once: produced after the group settled, no rebalance while
        // they are read.
        assertConsumedOnce(
          rest.flatMap((c) => c.values).filter((v) => more.includes(v)),
          more,
          'kafkajs members, records produced after the leaver left',
        )
      } finally {
        await stopAll(consumers)
      }
    },
    { port: 0, properties: FAST_GROUP_PROPERTIES },
  )
})

test('kafkajs: a killed member (no LeaveGroup) is removed after its session timeout', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopic(cluster, TOPIC, { partitions: 6 })
      const consumers: TrackedConsumer[] = []
      try {
        const victim = spawnMember(bootstrap, 'g2', TOPIC, 3000)
        for (let i = 0; i < 2; i++)
          consumers.push(await startConsumer(bootstrap, 'g2', TOPIC, `c${i}`, { sessionTimeout: 3000 }))
        await waitFor(
          'balanced',
          30000,
          () => victim.assignment.length === 2 && consumers.every((c) => c.assignment.length === 2),
        )
        assert.equal(cluster.brokers[0].groupCoordinator.describeGroup('g2').members.length, 3)
        victim.child.kill('SIGKILL')
        const rest = consumers
        const started = Date.now()
        await waitFor(
          'survivors own all partitions',
          20000,
          () => assignedPartitions(rest).join() === '0,1,2,3,4,5',
        )
        assert.ok(Date.now() - started >= 1000, 'rebalanced before the session could expire')
        const produced = await produce(bootstrap, TOPIC, 6, 3, 'k')
        await waitFor('consumed after kill', 20000, () =>
          produced.every((v) => rest.some((c) => c.values.includes(v))),
        )
      } finally {
        await stopAll(consumers)
      }
    },
    { port: 0, properties: FAST_GROUP_PROPERTIES },
  )
})

/** A member in a child process, killed with SIGKILL: it never sends LeaveGroup. */
interface ChildMember {
  assignment: number[]
  readonly values: string[]
  readonly child: ChildProcess
}

function spawnMember(
  bootstrap: string,
  groupId: string,
  topic: string,
  sessionTimeoutMs: number,
): ChildMember {
  const script = fileURLToPath(new URL('./member-process.js', import.meta.url))
  const child = spawn(process.execPath, [script, bootstrap, groupId, topic, String(sessionTimeoutMs)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const member: ChildMember = { assignment: [], values: [], child }
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const event = JSON.parse(line) as { assignment?: number[]; value?: string }
    if (event.assignment) member.assignment = event.assignment
    if (event.value !== undefined) member.values.push(event.value)
  })
  return member
}

test('kafkajs: committed offsets survive a consumer restart and a broker restart', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-groups-'))
  try {
    let cluster = await startBroker({ port: 0, dataDir, properties: FAST_GROUP_PROPERTIES })
    let bootstrap = cluster.bootstrapServers
    await createTopic(cluster, TOPIC, { partitions: 3 })
    const first = await produce(bootstrap, TOPIC, 3, 4, 'one')
    let c = await startConsumer(bootstrap, 'g3', TOPIC, 'c0')
    await waitFor('first batch', 20000, () => c.values.length === first.length)
    await c.consumer.disconnect() // commits on the way out
    const second = await produce(bootstrap, TOPIC, 3, 2, 'two')
    c = await startConsumer(bootstrap, 'g3', TOPIC, 'c1')
    await waitFor('second batch', 20000, () => c.values.length === second.length)
    assert.deepEqual(
      [...c.values].sort(),
      [...second].sort(),
      'a restarted consumer resumes after its commits',
    )
    await c.consumer.disconnect()
    const offsetsBefore = await kafka(bootstrap)
      .admin()
      .fetchOffsets({ groupId: 'g3', topics: [TOPIC] })
    await cluster.stop()
    cluster = await startBroker({ port: 0, dataDir, properties: FAST_GROUP_PROPERTIES })
    bootstrap = cluster.bootstrapServers
    try {
      const admin = kafka(bootstrap).admin()
      await admin.connect()
      const offsetsAfter = await admin.fetchOffsets({ groupId: 'g3', topics: [TOPIC] })
      await admin.disconnect()
      assert.deepEqual(offsetsAfter, offsetsBefore)
      const third = await produce(bootstrap, TOPIC, 3, 1, 'three')
      c = await startConsumer(bootstrap, 'g3', TOPIC, 'c2')
      await waitFor('third batch', 20000, () => c.values.length === third.length)
      assert.deepEqual(
        [...c.values].sort(),
        [...third].sort(),
        'resumes from committed offsets after a broker restart',
      )
      await c.consumer.disconnect()
    } finally {
      await cluster.stop()
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true })
  }
})
