/**
 * Static membership (KIP-345) with librdkafka (python3-confluent-kafka): three members with
 * a group.instance.id share six partitions; one closes (a static member sends no
 * LeaveGroup) and a new process with the same group.instance.id rejoins within the session
 * timeout. It gets its old partitions back under a new member id, without a rebalance: the
 * other two members see no revocation, and every record is consumed. The returning member
 * is the group leader, and librdkafka 2.0's JoinGroup (v5) cannot skip assignment (KIP-814).
 */

import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { test } from 'node:test'
import { withBroker } from '../helpers/cluster.js'
import { PYTHON, repoRoot } from '../helpers/compat-clients.js'
import { createTopic } from '../helpers/topics.js'
import { FAST_GROUP_PROPERTIES, produce, waitFor } from './helpers.js'

const SCRIPT = join(repoRoot(), 'test', 'groups', 'python', 'static_member.py')

interface StaticMember {
  readonly instance: string
  assignment: number[]
  readonly revocations: number[][]
  readonly values: string[]
  readonly errors: string[]
  readonly exited: Promise<number | null>
  /** Closes the member now rather than at the end of its seconds. */
  readonly close: () => void
}

function member(
  bootstrap: string,
  group: string,
  topic: string,
  instance: string,
  seconds: number,
): StaticMember {
  const child = spawn(PYTHON, [SCRIPT, bootstrap, group, topic, instance, String(seconds)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const m: StaticMember = {
    instance,
    assignment: [],
    revocations: [],
    values: [],
    errors: [],
    exited: new Promise((resolve) => child.on('exit', (code) => resolve(code))),
    close: () => child.stdin!.end(),
  }
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const event = JSON.parse(line) as {
      assigned?: number[]
      revoked?: number[]
      value?: string
      error?: string
    }
    if (process.env.GROUPS_DEBUG) console.log(instance, line)
    if (event.assigned) m.assignment = event.assigned
    if (event.revoked) {
      m.revocations.push(event.revoked)
      m.assignment = []
    }
    if (event.value !== undefined) m.values.push(event.value)
    if (event.error) m.errors.push(event.error)
  })
  return m
}

test('librdkafka: a static member that closes and rejoins gets its partitions back, the others see no revocation', async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopic(cluster, 'static-topic', { partitions: 6 })
      const first = await produce(bootstrap, 'static-topic', 6, 3, 'first')
      // The member that returns joins first, so it is the group leader: the harder case (a
      // returning leader that cannot skip assignment must not make the group rebalance).
      const leaver = member(bootstrap, 'static-group', 'static-topic', 'returner', 14)
      await waitFor('the first member owns all 6', 30000, () => leaver.assignment.length === 6)
      const stayers = [
        member(bootstrap, 'static-group', 'static-topic', 'stayer-a', 40),
        member(bootstrap, 'static-group', 'static-topic', 'stayer-b', 40),
      ]
      const all = [...stayers, leaver]
      await waitFor('2 partitions each', 30000, () => all.every((m) => m.assignment.length === 2))
      await waitFor(
        'first consumed',
        30000,
        () => new Set(all.flatMap((m) => m.values)).size === first.length,
      )
      const stable = stayers.map((m) => m.revocations.length)
      const owned = [...leaver.assignment]
      leaver.close()
      assert.equal(await leaver.exited, 0)
      const returner = member(bootstrap, 'static-group', 'static-topic', 'returner', 20)
      await waitFor('the returning member is assigned', 20000, () => returner.assignment.length > 0)
      assert.deepEqual(returner.assignment, owned, 'its old partitions, without a rebalance')
      const second = await produce(bootstrap, 'static-topic', 6, 2, 'second')
      await waitFor('second consumed', 30000, () =>
        second.every((v) => [...stayers, returner].some((m) => m.values.includes(v))),
      )
      assert.deepEqual(
        stayers.map((m) => m.revocations.length),
        stable,
        `no revocation for the other members (revocations: ${JSON.stringify(stayers.map((m) => m.revocations))})`,
      )
      for (const m of [...stayers, returner]) assert.deepEqual(m.errors, [], `${m.instance}: no errors`)
      for (const m of [...stayers, returner]) m.close()
      assert.deepEqual(
        await Promise.all([...stayers, returner].map((m) => m.exited)),
        [0, 0, 0],
        'every member closed cleanly',
      )
    },
    { port: 0, properties: FAST_GROUP_PROPERTIES },
  )
})
