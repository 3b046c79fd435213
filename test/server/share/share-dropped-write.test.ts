/**
 * A share-partition dropped while its last write is still on its way (simulator seed 202
 * --share, src/sim/README.md "Bugs found"), built step by step instead of reached by a seed's
 * timing: the member's session is opened again while a write is held (its end waits for that
 * write), it acquires and ACCEPTs more under the new session and closes it, the ACCEPT's write
 * is held in turn (retried at a moved share coordinator) past the record lock, and the first
 * write's end drops the share-partition with the ACCEPT still pending. A new fetch makes the
 * share-partition again on the same leader epoch, so the coordinator would not fence the old
 * write: the new one's state read must wait for it, or the accepted records come back with
 * delivery count 1. The second test plants the bug (share-read-before-dropped-write) and
 * checks that this scenario shows it, so the first cannot pass for want of reaching it.
 */

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ShareCoordinatorShard } from '../../../src/coordinator/share/share-coordinator-shard.js'
import { ErrorCode } from '../../../src/protocol/error-codes.js'
import type { Partition } from '../../../src/replication/partition.js'
import { AcknowledgeType } from '../../../src/server/share/share-partition.js'
import {
  SharePartitionManager,
  type SharePersister,
} from '../../../src/server/share/share-partition-manager.js'
import {
  FINAL_SHARE_SESSION_EPOCH,
  INITIAL_SHARE_SESSION_EPOCH,
  shareSessionPartitionKey,
} from '../../../src/server/share/share-session-cache.js'
import { plantShareReadBeforeDroppedWrite } from '../../../src/sim/mutations-share.js'
import { ManualClock } from '../../helpers/manual-clock.js'

const LOCK_MS = 30_000
const TP = { topic: 't', topicId: 'dG9waWMtaWQtMDAwMDAwMA', partition: 0 }
/** Two batches of five records, so that one acquisition of at most five takes one batch. */
const BATCHES = [
  { baseOffset: 0, lastOffset: 4, isControl: false },
  { baseOffset: 5, lastOffset: 9, isControl: false },
]

/** The share coordinator's shard as the persister, each write held until the test lets it go. */
function heldPersister(shard: ShareCoordinatorShard) {
  const held: (() => void)[] = []
  const apply = <T>(op: {
    records: readonly Parameters<ShareCoordinatorShard['apply']>[0][]
    response: T
  }) => {
    for (const record of op.records) shard.apply(record)
    return op.response
  }
  const persister: SharePersister = {
    readState: async (key, leaderEpoch) => apply(shard.readState(key, leaderEpoch)),
    writeState: async (key, write) => {
      await new Promise<void>((resolve) => held.push(resolve))
      return apply(shard.writeState(key, write, 0))
    },
    initializeState: async (key, stateEpoch, startOffset) =>
      apply(shard.initializeState(key, stateEpoch, startOffset, 0)),
    deleteState: async (key) => apply(shard.deleteState(key)),
    readSummary: async (key) => shard.readSummary(key),
  }
  return { persister, held }
}

/** Lets every promise job and timer-free continuation run. */
const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
}

const ranges = (acquired: { firstOffset: number; lastOffset: number; deliveryCount: number }[]) =>
  acquired.map((r) => `${r.firstOffset}-${r.lastOffset}x${r.deliveryCount}`)

/**
 * Runs the scenario; returns whether the new share-partition's state read waited for the
 * dropped one's ACCEPT write, what the next member acquires from it, and the ACCEPT's answer.
 */
async function droppedWhileAcceptInFlight() {
  const shard = new ShareCoordinatorShard(500)
  const { persister, held } = heldPersister(shard)
  const partition = {
    isLeader: true,
    id: { topicId: TP.topicId },
    leaderEpoch: 3,
    highWatermark: 10,
    log: { logStartOffset: 0 },
  }
  const clock = new ManualClock()
  const manager = new SharePartitionManager(
    {
      recordLockDurationMs: LOCK_MS,
      deliveryCountLimit: 5,
      maxInFlightRecords: 100,
      autoOffsetReset: 'earliest',
    },
    clock,
    { getPartition: () => partition as unknown as Partition },
    () => ({}),
    persister,
  )
  const openSession = (memberId: string) => {
    const step = manager.sessions.begin('g', memberId, INITIAL_SHARE_SESSION_EPOCH, false, (old) =>
      manager.releaseSession(old),
    )
    if (step.kind !== 'open') throw new Error(`session not opened: ${JSON.stringify(step)}`)
    step.session.partitions.set(shareSessionPartitionKey(TP.topicId, TP.partition), TP)
    return step.session
  }
  const shareOf = async () => {
    const found = await manager.sharePartition('g', TP)
    assert.ok(typeof found !== 'number', `no share-partition: ${String(found)}`)
    return found.share
  }

  // Session 1: m takes 0-4 and releases them; that write is held (the first write in flight).
  openSession('m')
  const first = await shareOf()
  assert.deepEqual(ranges(first.acquire('m', BATCHES, 5, 'batch_optimized')), ['0-4x1'])
  const releasing = manager.acknowledge('g', 'm', TP, [
    { firstOffset: 0, lastOffset: 4, acknowledgeTypes: [AcknowledgeType.RELEASE] },
  ])
  await settle()
  assert.equal(held.length, 1, 'the release is on its way')
  // m opens its session again: session 1 ends, holding nothing; its end waits for that write.
  const second = openSession('m')
  assert.deepEqual(ranges(first.acquire('m', BATCHES, 5, 'batch_optimized')), ['5-9x1'])
  const accepting = manager.acknowledge('g', 'm', TP, [
    { firstOffset: 5, lastOffset: 9, acknowledgeTypes: [AcknowledgeType.ACCEPT] },
  ])
  // Session 2 closes; the ACCEPT's write, queued behind the first, outlasts the record lock.
  const closing = manager.sessions.begin('g', 'm', FINAL_SHARE_SESSION_EPOCH, false, () => undefined)
  assert.equal(closing.kind, 'close')
  manager.releaseSession(second)
  clock.advance(LOCK_MS)
  // The first write lands: session 1's end drops the share-partition, the ACCEPT still held.
  held.splice(0, 1)[0]()
  assert.equal(await releasing, ErrorCode.NONE)
  await settle()
  assert.equal(manager.size, 0, 'dropped with no session and no lock left')
  assert.equal(held.length, 1, "the ACCEPT's write is on its way")

  // The next member's fetch makes the share-partition again on the same leader epoch.
  openSession('m2')
  let readDone = false
  const again = shareOf().then((share) => {
    readDone = true
    return share
  })
  await settle()
  const readWaited = !readDone
  held.splice(0, 1)[0]()
  const acceptCode = await accepting
  const remade = await again
  const acquired = ranges(remade.acquire('m2', BATCHES, 100, 'batch_optimized'))
  return { readWaited, acquired, acceptCode }
}

describe('a share-partition dropped while its ACCEPT is written', () => {
  it('is made again from a state read after that write (~10 ms)', async () => {
    const outcome = await droppedWhileAcceptInFlight()
    assert.equal(outcome.acceptCode, ErrorCode.NONE, 'the ACCEPT was answered as done')
    // 0-4 were released (a second delivery); 5-9, accepted, never again.
    assert.deepEqual(outcome.acquired, ['0-4x2'])
    assert.ok(outcome.readWaited, "the state read waited for the dropped share-partition's write")
  })

  it('with the wait planted away (share-read-before-dropped-write), the accepted records come back', async () => {
    const logged: string[] = []
    const undo = plantShareReadBeforeDroppedWrite((line) => logged.push(line))
    try {
      const outcome = await droppedWhileAcceptInFlight()
      assert.equal(outcome.acceptCode, ErrorCode.NONE)
      assert.equal(outcome.readWaited, false)
      assert.deepEqual(outcome.acquired, ['0-4x2', '5-9x1'], 'ACCEPTed 5-9 delivered again')
    } finally {
      undo()
    }
    assert.deepEqual(logged, ["MUTATION: a dropped share-partition's last write not waited for"])
  })
})
