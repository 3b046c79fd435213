/**
 * KIP-848 with a real client: librdkafka 2.15.1 (scripts/build-librdkafka.sh) under Debian's
 * python3-confluent-kafka with `group.protocol=consumer`. Three members share six
 * partitions through ConsumerGroupHeartbeat and the uniform server assignor; one closes
 * (leaves with epoch -1) and the other two take its partitions over, only after it revoked
 * them; every produced record is consumed. ListGroups v5 and ConsumerGroupDescribe show the
 * group as a consumer-protocol group. Fails (never skips) when the modern library is missing.
 */
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { test } from 'node:test'
import {
  ApiKey,
  type ConsumerGroupDescribeResponse,
  type ListGroupsResponse,
} from '../../src/protocol/generated/index.js'
import { withBroker } from '../helpers/cluster.js'
import { repoRoot } from '../helpers/compat-clients.js'
import { assertConsumedAtLeastOnce, consumedAll } from '../helpers/consumed.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { createTopic } from '../helpers/topics.js'
import { FAST_GROUP_PROPERTIES, produce, waitFor } from './helpers.js'

const PYTHON = '/usr/bin/python3'
const SCRIPT = join(repoRoot(), 'test', 'groups', 'python', 'kip848_member.py')

/** Builds (once, cached in .build/librdkafka) and returns the directory of librdkafka.so.1. */
function modernLibrdkafka(): string {
  const built = spawnSync(join(repoRoot(), 'scripts', 'build-librdkafka.sh'), { encoding: 'utf8' })
  assert.equal(built.status, 0, `scripts/build-librdkafka.sh failed: ${built.stderr}`)
  return built.stdout.trim().split('\n').at(-1) ?? ''
}

interface Member {
  libversion: string
  assignment: number[]
  readonly values: string[]
  readonly errors: string[]
  readonly stopFile: string
  readonly exited: Promise<number | null>
  readonly kill: () => void
}

/**
 * Asks every member to close, then kills those still running after `graceMs`: a member
 * whose broker is already gone (a failed test) would block in close() and hide the failure.
 */
async function stopMembers(members: readonly Member[], graceMs = 10000): Promise<void> {
  for (const m of members) writeFileSync(m.stopFile, '')
  const timer = setTimeout(() => {
    for (const m of members) m.kill()
  }, graceMs)
  await Promise.all(members.map((m) => m.exited))
  clearTimeout(timer)
}

function member(
  libDir: string,
  bootstrap: string,
  group: string,
  topic: string,
  dir: string,
  name: string,
  protocol: 'consumer' | 'classic' = 'consumer',
): Member {
  const stopFile = join(dir, `${name}.stop`)
  const child = spawn(PYTHON, [SCRIPT, bootstrap, group, topic, stopFile, protocol], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, LD_LIBRARY_PATH: libDir },
  })
  const m: Member = {
    libversion: '',
    assignment: [],
    values: [],
    errors: [],
    stopFile,
    exited: new Promise((resolve) => child.on('exit', (code) => resolve(code))),
    kill: () => child.kill('SIGKILL'),
  }
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const event = JSON.parse(line) as {
      libversion?: string
      assignment?: number[]
      value?: string
      error?: string
    }
    if (process.env.GROUPS_DEBUG) console.log(name, line)
    if (event.libversion !== undefined) m.libversion = event.libversion
    if (event.assignment) m.assignment = event.assignment
    if (event.value !== undefined) m.values.push(event.value)
    if (event.error) m.errors.push(event.error)
  })
  return m
}

test('librdkafka 2.15 group.protocol=consumer: 3 members share 6 partitions, one leaves, the others take over, nothing lost', async () => {
  const libDir = modernLibrdkafka()
  const dir = mkdtempSync(join(tmpdir(), 'tidelog-kip848-'))
  const members: Member[] = []
  try {
    await withBroker(
      async (cluster) => {
        const bootstrap = cluster.bootstrapServers
        const topic = 'kip848-topic'
        await createTopic(cluster, topic, { partitions: 6 })
        const first = await produce(bootstrap, topic, 6, 4, 'first')
        for (const name of ['a', 'b', 'c'])
          members.push(member(libDir, bootstrap, 'kip848', topic, dir, name))
        await waitFor('the modern librdkafka loaded', 20000, () => members.every((m) => m.libversion !== ''))
        for (const m of members)
          assert.equal(m.libversion, '2.15.1', 'LD_LIBRARY_PATH must load librdkafka 2.15.1')
        await waitFor('2 partitions each', 60000, () => members.every((m) => m.assignment.length === 2))
        assert.deepEqual(members.flatMap((m) => m.assignment).sort(), [0, 1, 2, 3, 4, 5])
        await waitFor('first records consumed', 30000, () =>
          consumedAll(
            members.flatMap((m) => m.values),
            first,
          ),
        )

        const raw = await RawClient.connect(cluster.brokers[0].port)
        try {
          const listed = await rawCall<ListGroupsResponse>(raw, ApiKey.ListGroups, 5, {})
          const group = listed.groups.find((g) => g.groupId === 'kip848')
          assert.equal(group?.groupType, 'consumer')
          assert.equal(group?.protocolType, 'consumer')
          const described = await rawCall<ConsumerGroupDescribeResponse>(
            raw,
            ApiKey.ConsumerGroupDescribe,
            0,
            {
              groupIds: ['kip848'],
            },
          )
          const d = described.groups[0]
          assert.equal(d.errorCode, 0)
          assert.equal(d.assignorName, 'uniform')
          assert.equal(d.members.length, 3)
          assert.ok(
            d.groupEpoch >= 1 && d.assignmentEpoch === d.groupEpoch,
            `epochs ${d.groupEpoch}/${d.assignmentEpoch}`,
          )
        } finally {
          raw.close()
        }

        const [leaver, ...stayers] = members
        writeFileSync(leaver.stopFile, '')
        assert.equal(await leaver.exited, 0)
        await waitFor(
          'the two others own all 6',
          60000,
          () =>
            stayers.every((m) => m.assignment.length === 3) &&
            stayers
              .flatMap((m) => m.assignment)
              .sort()
              .join() === '0,1,2,3,4,5',
        )
        const second = await produce(bootstrap, topic, 6, 4, 'second')
        await waitFor('second records consumed by the stayers', 30000, () =>
          consumedAll(
            stayers.flatMap((m) => m.values),
            second,
          ),
        )
        // At least once: every produced record was consumed, nothing else was. The members
        // start together, so partitions move while the first records are read, and librdkafka
        // commits what was read on its auto-commit interval: a moved partition may be reread
        // from its last commit. The duplicates are printed.
        assertConsumedAtLeastOnce(
          members.flatMap((m) => m.values),
          [...first, ...second],
          'librdkafka KIP-848 members',
        )
        for (const m of members) assert.deepEqual(m.errors, [], 'no client errors')
        for (const m of stayers) writeFileSync(m.stopFile, '')
        for (const m of stayers) assert.equal(await m.exited, 0)
      },
      {
        port: 0,
        properties: {
          ...FAST_GROUP_PROPERTIES,
          'group.consumer.heartbeat.interval.ms': 500,
          'group.consumer.session.timeout.ms': 10000,
        },
      },
    )
  } finally {
    await stopMembers(members)
    rmSync(dir, { recursive: true, force: true })
  }
})

test('librdkafka 2.15: a classic group whose members all left continues under group.protocol=consumer from its committed offsets', async () => {
  const libDir = modernLibrdkafka()
  const dir = mkdtempSync(join(tmpdir(), 'tidelog-kip848-'))
  const members: Member[] = []
  try {
    await withBroker(
      async (cluster) => {
        const bootstrap = cluster.bootstrapServers
        const topic = 'kip848-migrate'
        await createTopic(cluster, topic, { partitions: 4 })
        const first = await produce(bootstrap, topic, 4, 3, 'first')
        const classic = ['c1', 'c2'].map((name) =>
          member(libDir, bootstrap, 'migrating', topic, dir, name, 'classic'),
        )
        members.push(...classic)
        await waitFor('classic members consumed the first records', 60000, () =>
          consumedAll(
            classic.flatMap((m) => m.values),
            first,
          ),
        )
        // close() commits the final offsets and leaves (LeaveGroup): the classic group is empty.
        for (const m of classic) writeFileSync(m.stopFile, '')
        for (const m of classic) assert.equal(await m.exited, 0)
        const upgraded = ['k1', 'k2'].map((name) => member(libDir, bootstrap, 'migrating', topic, dir, name))
        members.push(...upgraded)
        await waitFor('2 partitions each under the consumer protocol', 60000, () =>
          upgraded.every((m) => m.assignment.length === 2),
        )
        const second = await produce(bootstrap, topic, 4, 3, 'second')
        await waitFor('second records consumed', 30000, () =>
          consumedAll(
            upgraded.flatMap((m) => m.values),
            second,
          ),
        )
        assert.deepEqual(
          upgraded.flatMap((m) => m.values).sort(),
          [...second].sort(),
          "the consumer-protocol members resumed from the classic members' committed offsets",
        )
        for (const m of members) assert.deepEqual(m.errors, [], 'no client errors')
        const listed = cluster.brokers[0].groupCoordinator
          .listGroups()
          .groups.find((g) => g.groupId === 'migrating')
        assert.equal(listed?.type, 'consumer')
        // Closed while the broker still runs: close() leaves the group (heartbeat with epoch -1).
        await stopMembers(upgraded)
      },
      { port: 0, properties: { ...FAST_GROUP_PROPERTIES, 'group.consumer.heartbeat.interval.ms': 500 } },
    )
  } finally {
    await stopMembers(members)
    rmSync(dir, { recursive: true, force: true })
  }
})
