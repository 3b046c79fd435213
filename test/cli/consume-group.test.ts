/**
 * `tidelog consume --group G`, run as the real binary (async spawn: the broker lives in this
 * process, so a blocking exec would stall it) against an in-process broker: it joins the
 * group, reads from the committed offsets (else per --from-beginning), commits exactly what
 * it printed on exit (--max-messages, Ctrl-C), and `tidelog groups describe` shows the member
 * and the committed offsets.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Admin } from '../../src/client/admin.js'
import { Producer } from '../../src/client/producer.js'
import { createTopics, withBroker } from '../client/helpers.js'
import { tidelogBin } from '../helpers/broker-process.js'

const GROUP_PROPERTIES = {
  'group.initial.rebalance.delay.ms': 0,
  'offsets.topic.num.partitions': 3,
}

interface Running {
  readonly child: ChildProcess
  stdout: string
  stderr: string
  readonly exited: Promise<number | null>
}

function start(args: readonly string[]): Running {
  const child = spawn(process.execPath, [tidelogBin(), ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  const running: Running = {
    child,
    stdout: '',
    stderr: '',
    exited: new Promise((resolve) => child.on('exit', (code) => resolve(code))),
  }
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    running.stdout += chunk
  })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    running.stderr += chunk
  })
  return running
}

/** Runs to completion; kills it after `timeoutMs`. */
async function tidelog(args: readonly string[], timeoutMs = 30000) {
  const running = start(args)
  const timer = setTimeout(() => running.child.kill('SIGKILL'), timeoutMs)
  const code = await running.exited
  clearTimeout(timer)
  return { code, stdout: running.stdout, stderr: running.stderr }
}

const lines = (text: string) => text.split('\n').filter((l) => l !== '')

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
        values.push(`${tag}-${p}-${i}`)
        sends.push(producer.send({ topic, partition: p, value: `${tag}-${p}-${i}` }))
      }
    await Promise.all(sends)
  } finally {
    await producer.close()
  }
  return values
}

async function committedTotal(bootstrap: string, groupId: string): Promise<number> {
  const admin = new Admin({ bootstrapServers: bootstrap })
  try {
    const offsets = await admin.listGroupOffsets(groupId)
    return offsets.reduce((sum, o) => sum + Math.max(o.offset, 0), 0)
  } finally {
    admin.close()
  }
}

test('consume --group: --max-messages commits what was printed; the next run resumes there', {
  timeout: 120000,
}, async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      const b = ['--bootstrap-server', bootstrap]
      await createTopics(bootstrap, [{ topic: 'cg', partitions: 3 }])
      const all = await produce(bootstrap, 'cg', 3, 5, 'v')
      const first = await tidelog([
        'consume',
        '--topic',
        'cg',
        '--group',
        'cli-g',
        '--from-beginning',
        '--max-messages',
        '10',
        ...b,
      ])
      assert.equal(first.code, 0, first.stderr)
      assert.equal(lines(first.stdout).length, 10)
      assert.match(first.stderr, /Processed a total of 10 messages/)
      assert.equal(await committedTotal(bootstrap, 'cli-g'), 10, 'committed exactly the printed records')

      const described = await tidelog(['groups', 'describe', '--group', 'cli-g', '--json', ...b])
      assert.equal(described.code, 0, described.stderr)
      const group = JSON.parse(described.stdout) as {
        state: string
        offsets: { partition: number; currentOffset: number | null; lag: number | null }[]
      }
      assert.equal(group.state, 'Empty')
      assert.equal(
        group.offsets.reduce((sum, o) => sum + (o.currentOffset ?? 0), 0),
        10,
      )
      assert.equal(
        group.offsets.reduce((sum, o) => sum + (o.lag ?? 0), 0),
        5,
      )

      // No --from-beginning: the committed offsets decide where to start.
      const second = await tidelog([
        'consume',
        '--topic',
        'cg',
        '--group',
        'cli-g',
        '--timeout-ms',
        '2500',
        ...b,
      ])
      assert.equal(second.code, 0, second.stderr)
      assert.deepEqual([...lines(first.stdout), ...lines(second.stdout)].sort(), [...all].sort())
      assert.equal(await committedTotal(bootstrap, 'cli-g'), 15)

      // --exit-at-end in a group: the ends of the partitions it was given, as of then.
      const caughtUp = await tidelog(['consume', '--topic', 'cg', '--group', 'cli-g', '-e', ...b])
      assert.equal(caughtUp.code, 0, caughtUp.stderr)
      assert.match(caughtUp.stderr, /Processed a total of 0 messages/)
      const fresh = await tidelog([
        'consume',
        '--topic',
        'cg',
        '--group',
        'cli-e',
        '--from-beginning',
        '-e',
        ...b,
      ])
      assert.equal(fresh.code, 0, fresh.stderr)
      assert.deepEqual(lines(fresh.stdout).sort(), [...all].sort())
      assert.equal(await committedTotal(bootstrap, 'cli-e'), 15)
    },
    { properties: GROUP_PROPERTIES },
  )
})

test('consume --group: a running member shows in groups describe; Ctrl-C commits and leaves', {
  timeout: 120000,
}, async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      const b = ['--bootstrap-server', bootstrap]
      await createTopics(bootstrap, [{ topic: 'ci', partitions: 3 }])
      const all = await produce(bootstrap, 'ci', 3, 4, 'w')
      const member = start(['consume', '--topic', 'ci', '--group', 'cli-int', '--from-beginning', ...b])
      try {
        const deadline = Date.now() + 30000
        while (lines(member.stdout).length < all.length && Date.now() < deadline) await sleep(50)
        assert.deepEqual(lines(member.stdout).sort(), [...all].sort(), member.stderr)

        const described = await tidelog(['groups', 'describe', '--group', 'cli-int', '--json', ...b])
        assert.equal(described.code, 0, described.stderr)
        const group = JSON.parse(described.stdout) as {
          state: string
          protocol: string
          members: { clientId: string; assignment: { partition: number }[] }[]
        }
        assert.equal(group.state, 'Stable')
        assert.equal(group.protocol, 'range')
        assert.equal(group.members.length, 1)
        assert.equal(group.members[0].clientId, 'tidelog-console-consumer')
        assert.deepEqual(group.members[0].assignment.map((tp) => tp.partition).sort(), [0, 1, 2])
      } finally {
        member.child.kill('SIGINT')
      }
      assert.equal(await member.exited, 0, member.stderr)
      assert.match(member.stderr, /Processed a total of 12 messages/)
      assert.equal(await committedTotal(bootstrap, 'cli-int'), 12, 'committed on exit')
      const admin = new Admin({ bootstrapServers: bootstrap })
      try {
        const [after] = await admin.describeGroups(['cli-int'])
        assert.equal(after.state, 'Empty', 'the member left the group (LeaveGroup)')
      } finally {
        admin.close()
      }
    },
    { properties: GROUP_PROPERTIES },
  )
})
