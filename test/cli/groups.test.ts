/**
 * `tidelog groups describe` and `tidelog groups reset-offsets`, run as the real binary
 * (`node bin/tidelog.js`, built in dist/) against an in-process broker with a kafkajs
 * consumer group: members, assignments, committed offsets, log end offsets and lag;
 * reset-offsets dry runs by default, commits with --execute, refuses while the group has
 * active members, and a consumer of the group resumes where the reset put it.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Admin } from '../../src/client/admin.js'
import { createTopics } from '../client/helpers.js'
import {
  FAST_GROUP_PROPERTIES,
  produce,
  startConsumer,
  type TrackedConsumer,
  waitFor,
} from '../groups/helpers.js'
import { tidelogBin } from '../helpers/broker-process.js'
import { type RunResult, run, withBroker } from '../helpers/cluster.js'

const GROUP = 'billing'
const TOPIC = 'orders'

function tidelog(args: readonly string[]): Promise<RunResult> {
  return run(process.execPath, [tidelogBin(), ...args], { timeoutMs: 30000 })
}

function ok(result: RunResult, what: string): string {
  assert.equal(result.code, 0, `${what}: exit ${result.code}\n${result.stderr}`)
  return result.stdout
}

interface DescribedJson {
  state: string
  members: { memberId: string; clientId: string; assignment: { topic: string; partition: number }[] }[]
  offsets: {
    partition: number
    currentOffset: number | null
    logEndOffset: number
    lag: number | null
    clientId: string | null
  }[]
}

/** The lines of the partition table of `groups describe` (after its header row). */
function offsetRows(text: string): string[][] {
  const lines = text.trimEnd().split('\n')
  const header = lines.findIndex((l) => l.startsWith('TOPIC'))
  assert.ok(header > 0, `no partition table in:\n${text}`)
  return lines.slice(header + 1).map((l) => l.split(/ {2,}/))
}

test('groups describe shows members, assignments and lag; reset-offsets dry-runs, executes, and refuses while the group is active', {
  timeout: 120000,
}, async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      const b = ['--bootstrap-server', bootstrap]
      await createTopics(bootstrap, [{ topic: TOPIC, partitions: 3 }])
      await produce(bootstrap, TOPIC, 3, 10, 'first')
      const consumers: TrackedConsumer[] = []
      try {
        for (const name of ['app-1', 'app-2'])
          consumers.push(await startConsumer(bootstrap, GROUP, TOPIC, name, { sessionTimeout: 6000 }))
        let described: DescribedJson | undefined
        await waitFor('a stable group with everything committed', 30000, async () => {
          const result = await tidelog(['groups', 'describe', '--group', GROUP, '--json', ...b])
          described = JSON.parse(ok(result, 'describe --json')) as DescribedJson
          return (
            described.state === 'Stable' &&
            described.members.length === 2 &&
            described.members.every((m) => m.assignment.length > 0) &&
            described.offsets.length === 3 &&
            described.offsets.every((o) => o.currentOffset === 10 && o.lag === 0 && o.clientId !== null)
          )
        })
        const assigned = described!.members.flatMap((m) => m.assignment.map((tp) => tp.partition))
        assert.deepEqual(
          assigned.sort((x, y) => x - y),
          [0, 1, 2],
        )

        const text = ok(await tidelog(['groups', 'describe', '--group', GROUP, ...b]), 'describe')
        assert.match(
          text,
          /^Group: billing {2}State: Stable {2}Protocol: consumer\/\S+ {2}Coordinator: 0 {2}Members: 2$/m,
        )
        assert.match(text, /^MEMBER-ID +CLIENT-ID +HOST +INSTANCE-ID +ASSIGNMENT$/m)
        for (const name of ['app-1', 'app-2'])
          assert.match(text, new RegExp(`^${name}-\\S+ +${name} +\\S+ +- +orders: \\d(,\\d)*$`, 'm'))
        const rows = offsetRows(text)
        assert.equal(rows.length, 3)
        for (const [p, row] of rows.entries()) {
          assert.deepEqual(row.slice(0, 5), [TOPIC, String(p), '10', '10', '0'])
          assert.match(row[6], /^app-[12]$/)
        }

        const refused = await tidelog([
          'groups',
          'reset-offsets',
          '--group',
          GROUP,
          '--topic',
          TOPIC,
          '--to-earliest',
          '--execute',
          ...b,
        ])
        assert.equal(refused.code, 1)
        assert.match(refused.stderr, /only be reset while group 'billing' is inactive, but it is Stable/)
        // The coordinator refuses too (a member may join between the check and the commit).
        const admin = new Admin({ bootstrapServers: bootstrap })
        try {
          await assert.rejects(
            admin.alterGroupOffsets(GROUP, [{ topic: TOPIC, partition: 0, offset: 0 }]),
            /UNKNOWN_MEMBER_ID/,
          )
        } finally {
          admin.close()
        }
      } finally {
        for (const c of consumers.splice(0)) await c.consumer.disconnect()
      }

      // The group is empty now; 5 more records per partition, written after `cut`, make a lag of 5.
      await sleep(50)
      const cut = new Date()
      await sleep(50)
      await produce(bootstrap, TOPIC, 3, 5, 'second')
      const idle = ok(await tidelog(['groups', 'describe', '--group', GROUP, ...b]), 'describe empty')
      assert.match(idle, /State: Empty .*Members: 0$/m)
      assert.doesNotMatch(idle, /^MEMBER-ID/m, 'no members table')
      assert.deepEqual(
        offsetRows(idle).map((r) => r.join(' ')),
        ['orders 0 10 15 5 - -', 'orders 1 10 15 5 - -', 'orders 2 10 15 5 - -'],
      )

      const reset = (...args: string[]) =>
        tidelog(['groups', 'reset-offsets', '--group', GROUP, '--topic', TOPIC, ...args, ...b])
      const dry = ok(await reset('--to-earliest'), 'dry run')
      assert.match(dry, /^GROUP +TOPIC +PARTITION +CURRENT-OFFSET +NEW-OFFSET$/m)
      assert.match(dry, /^billing +orders +0 +10 +0$/m)
      assert.match(dry, /Dry run: nothing was committed/)
      const committedNow = async () =>
        (
          JSON.parse(
            ok(await tidelog(['groups', 'describe', '--group', GROUP, '--json', ...b]), 'describe'),
          ) as DescribedJson
        ).offsets.map((o) => o.currentOffset)
      assert.deepEqual(await committedNow(), [10, 10, 10], 'a dry run commits nothing')

      const byTime = JSON.parse(ok(await reset('--to-datetime', cut.toISOString(), '--json'), 'to-datetime'))
      assert.deepEqual(
        byTime.offsets.map((o: { newOffset: number }) => o.newOffset),
        [10, 10, 10],
        'the first record at or after the time',
      )
      assert.equal(byTime.executed, false)
      const clamped = JSON.parse(ok(await reset('--to-offset', '999', '--json'), 'to-offset 999'))
      assert.deepEqual(
        clamped.offsets.map((o: { newOffset: number }) => o.newOffset),
        [15, 15, 15],
        'clamped to the log end',
      )

      const executed = ok(await reset('--to-offset', '12', '--execute'), 'execute')
      assert.match(executed, /^billing +orders +1 +10 +12$/m)
      assert.match(executed, /Reset the offsets of group billing on orders \(3 partitions\)/)
      assert.deepEqual(await committedNow(), [12, 12, 12])
      assert.deepEqual(
        offsetRows(ok(await tidelog(['groups', 'describe', '--group', GROUP, ...b]), 'describe')).map((r) =>
          r.slice(2, 5).join(' '),
        ),
        ['12 15 3', '12 15 3', '12 15 3'],
      )

      // A consumer of the group resumes where the reset put it.
      const resumed = await startConsumer(bootstrap, GROUP, TOPIC, 'app-3')
      try {
        await waitFor('records 12..14 consumed', 30000, () => resumed.consumed.length >= 9)
        await sleep(500)
        assert.deepEqual([...resumed.consumed].sort(), [
          '0:12',
          '0:13',
          '0:14',
          '1:12',
          '1:13',
          '1:14',
          '2:12',
          '2:13',
          '2:14',
        ])
      } finally {
        await resumed.consumer.disconnect()
      }
      ok(await reset('--to-earliest', '--execute'), 'to-earliest')
      assert.deepEqual(await committedNow(), [0, 0, 0])

      for (const args of [
        [],
        ['--to-earliest', '--to-latest'],
        ['--to-datetime', 'yesterday'],
        ['--to-offset', '-3'],
      ]) {
        const usage = await reset(...args)
        assert.equal(usage.code, 2, `${args.join(' ')}: ${usage.stderr}`)
      }
      assert.equal((await tidelog(['groups', 'describe', ...b])).code, 2, 'describe needs --group')
      const missing = await tidelog(['groups', 'describe', '--group', 'nope', ...b])
      assert.equal(missing.code, 1)
      assert.match(missing.stderr, /consumer group 'nope' does not exist/)
    },
    { port: 0, properties: { ...FAST_GROUP_PROPERTIES, 'offsets.topic.num.partitions': 1 } },
  )
})
