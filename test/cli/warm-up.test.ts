/**
 * The process warm-up (src/cli/warm-up.ts, tidelog.warmup.records): it runs the shipped
 * leader and follower append paths the number of times asked, stops early when the
 * process stops, and `tidelog start` runs it after start when the property asks for it.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { warmUp } from '../../src/cli/warm-up.js'
import { Partition } from '../../src/replication/partition.js'
import { spawnTidelog } from '../helpers/broker-process.js'

/** Counts calls of two Partition methods while `body` runs (the leader's and the follower's append). */
async function countingAppends<T>(
  body: (counts: { leader: number; follower: number }) => Promise<T>,
): Promise<{ result: T; leader: number; follower: number }> {
  const proto = Partition.prototype as unknown as Record<string, (...args: unknown[]) => unknown>
  const leaderAppend = proto.appendRecordsToLeader
  const followerAppend = proto.appendAsFollower
  const counts = { leader: 0, follower: 0 }
  proto.appendRecordsToLeader = function (this: Partition, ...args: unknown[]) {
    counts.leader++
    return leaderAppend.apply(this, args)
  }
  proto.appendAsFollower = function (this: Partition, ...args: unknown[]) {
    counts.follower++
    return followerAppend.apply(this, args)
  }
  try {
    const result = await body(counts)
    return { result, ...counts }
  } finally {
    proto.appendRecordsToLeader = leaderAppend
    proto.appendAsFollower = followerAppend
  }
}

test('the warm-up sends its records through a leader and a follower of a private cluster', {
  timeout: 60000,
}, async () => {
  const { result, leader, follower } = await countingAppends(() => warmUp(200, () => performance.now()))
  assert.equal(result.records, 200)
  // One single-record request at a time: one leader append each.
  assert.equal(leader, 200)
  // acks=all at RF 2 and min.insync.replicas 2: nothing is acknowledged before the follower has it.
  assert.ok(follower >= 1, `follower appends: ${follower}`)
})

test('a warm-up of 0 records starts nothing; an aborted one stops early', { timeout: 60000 }, async () => {
  const none = await countingAppends(() => warmUp(0, () => performance.now()))
  assert.deepEqual([none.result.records, none.leader], [0, 0])
  const abort = new AbortController()
  const stopped = await countingAppends(async (counts) => {
    let finished = false
    const done = warmUp(100_000, () => performance.now(), abort.signal).finally(() => {
      finished = true
    })
    while (counts.leader < 20 && !finished) await new Promise((resolve) => setTimeout(resolve, 5))
    abort.abort()
    return await done
  })
  assert.ok(
    stopped.result.records >= 20 && stopped.result.records < 100_000,
    `sent ${stopped.result.records}`,
  )
  assert.equal(stopped.leader, stopped.result.records)
})

test('tidelog start runs the warm-up that tidelog.warmup.records asks for', { timeout: 60000 }, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-warm-up-'))
  const child = spawnTidelog(
    [
      'start',
      '--port',
      '0',
      '--http-port=-1',
      '--schema-registry-port=-1',
      '--data-dir',
      dataDir,
      '--set',
      'tidelog.warmup.records=50',
    ],
    {},
    'tidelog start',
  )
  try {
    const { line } = await child.waitForLine(/"msg":"warm-up done"/, 45000)
    assert.equal((JSON.parse(line) as { records: number }).records, 50)
    child.signal('SIGTERM')
    assert.equal((await child.exited).code, 0, child.tail())
  } finally {
    await child.terminate()
    await rm(dataDir, { recursive: true, force: true })
  }
})
