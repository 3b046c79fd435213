/**
 * A share-partition's state through the share coordinator (share-partition-manager.ts over a
 * ShareCoordinatorShard standing in for the persister), with a fake partition and a manual
 * clock: no state until an acknowledgement or a released lock writes it, as Kafka; a new
 * leader (a higher leader epoch) resumes the persisted state, accepted records never again,
 * released ones with their delivery counts going on; the previous leader's writes fenced
 * (FENCED_LEADER_EPOCH) and an altered state fencing the leader that held the old one
 * (FENCED_STATE_EPOCH); the shard's records replayed give the same state.
 */

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { toOffset, toProducerId } from '../../../src/common/types.js'
import {
  ShareCoordinatorShard,
  type ShareOperation,
} from '../../../src/coordinator/share/share-coordinator-shard.js'
import {
  SHARE_STATE_SERDE,
  type ShareStateRecord,
} from '../../../src/coordinator/share/share-state-records.js'
import { ErrorCode } from '../../../src/protocol/error-codes.js'
import type { Partition } from '../../../src/replication/partition.js'
import { AcknowledgeType, RecordState } from '../../../src/server/share/share-partition.js'
import {
  SharePartitionManager,
  type SharePersister,
} from '../../../src/server/share/share-partition-manager.js'
import { ManualClock } from '../../helpers/manual-clock.js'

const LOCK_MS = 30_000
const TP = { topic: 't', topicId: 'dG9waWMtaWQtMDAwMDAwMA', partition: 0 }
const KEY = { groupId: 'g', topicId: TP.topicId, partition: 0 }
const ALL = [{ baseOffset: 0, lastOffset: 9, isControl: false }]

/** The shard as the persister, every record also kept as its bytes (the log). */
function shardPersister(
  shard: ShareCoordinatorShard,
  log: { key: Buffer; value: Buffer | null }[],
): SharePersister {
  const run = <T>(op: ShareOperation<T>): Promise<T> => {
    for (const record of op.records) {
      log.push(SHARE_STATE_SERDE.serialize(record))
      shard.apply(record)
    }
    return Promise.resolve(op.response)
  }
  return {
    readState: (key, leaderEpoch) => run(shard.readState(key, leaderEpoch)),
    writeState: (key, write) => run(shard.writeState(key, write, 0)),
    initializeState: (key, stateEpoch, startOffset) =>
      run(shard.initializeState(key, stateEpoch, startOffset, 0)),
    deleteState: (key) => run(shard.deleteState(key)),
    readSummary: (key) => Promise.resolve(shard.readSummary(key)),
  }
}

function make() {
  const shard = new ShareCoordinatorShard(500)
  const log: { key: Buffer; value: Buffer | null }[] = []
  const persister = shardPersister(shard, log)
  const partition = {
    isLeader: true,
    id: { topicId: TP.topicId },
    leaderEpoch: 3,
    highWatermark: 10,
    log: { logStartOffset: 0 },
  }
  const leader = () => {
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
    return { clock, manager }
  }
  return { shard, log, partition, leader }
}

const summary = (shard: ShareCoordinatorShard) => {
  const s = shard.readSummary(KEY)
  return `${s.startOffset} ${s.leaderEpoch} ${s.deliveryCompleteCount}`
}

async function shareOf(manager: SharePartitionManager) {
  const found = await manager.sharePartition('g', TP)
  assert.ok(typeof found !== 'number', `no share-partition: ${String(found)}`)
  return found.share
}

const ranges = (acquired: { firstOffset: number; lastOffset: number; deliveryCount: number }[]) =>
  acquired.map((r) => `${r.firstOffset}-${r.lastOffset}x${r.deliveryCount}`)

describe('share-partition state on the share coordinator', () => {
  it('is written first by an acknowledgement: SPSO and the done records above it', async () => {
    const { shard, leader } = make()
    const { manager } = leader()
    const share = await shareOf(manager)
    share.acquire('m', ALL, 500, 'batch_optimized')
    assert.equal(summary(shard), '-1 -1 -1', 'a fetch alone writes nothing')
    const code = await manager.acknowledge('g', 'm', TP, [
      { firstOffset: 0, lastOffset: 1, acknowledgeTypes: [AcknowledgeType.ACCEPT] },
      { firstOffset: 4, lastOffset: 5, acknowledgeTypes: [AcknowledgeType.REJECT] },
    ])
    assert.equal(code, ErrorCode.NONE)
    assert.equal(summary(shard), '2 3 2')
  })

  it('is written when a lock expires', async () => {
    const { shard, leader } = make()
    const { clock, manager } = leader()
    ;(await shareOf(manager)).acquire('m', ALL, 500, 'batch_optimized')
    clock.advance(LOCK_MS)
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(summary(shard), '0 3 0')
    assert.deepEqual(shard.stateOf(KEY)?.stateBatches, [
      { firstOffset: 0, lastOffset: 9, deliveryState: 0, deliveryCount: 1 },
    ])
  })

  it('is resumed by a new leader; the old leader is fenced', async () => {
    const { shard, partition, leader } = make()
    const old = leader().manager
    ;(await shareOf(old)).acquire('m', ALL, 500, 'batch_optimized')
    assert.equal(
      await old.acknowledge('g', 'm', TP, [
        {
          firstOffset: 0,
          lastOffset: 4,
          acknowledgeTypes: [
            AcknowledgeType.ACCEPT,
            AcknowledgeType.ACCEPT,
            AcknowledgeType.RELEASE,
            AcknowledgeType.RELEASE,
            AcknowledgeType.REJECT,
          ],
        },
      ]),
      ErrorCode.NONE,
    )
    // The leadership moves: epoch 4 on another broker (another manager, the same coordinator).
    partition.leaderEpoch = 4
    const next = leader().manager
    const resumed = await shareOf(next)
    assert.equal(resumed.startOffset, 2)
    // 0-1 accepted: never again; 2-3 released: a second delivery; 4 rejected; 5-9 were only
    // acquired (not written, as Kafka): delivered as new.
    assert.deepEqual(ranges(resumed.acquire('m2', ALL, 500, 'batch_optimized')), ['2-3x2', '5-9x1'])
    assert.equal(shard.stateOf(KEY)?.leaderEpoch, 4, 'the read recorded the new leader epoch')
    // The old leader (epoch 3, its state still in memory) cannot write any more.
    partition.leaderEpoch = 3
    assert.equal(
      await old.acknowledge('g', 'm', TP, [
        { firstOffset: 5, lastOffset: 9, acknowledgeTypes: [AcknowledgeType.ACCEPT] },
      ]),
      ErrorCode.FENCED_LEADER_EPOCH,
    )
    assert.equal(old.size, 0, 'a fenced share-partition is dropped')
    assert.equal(shard.stateOf(KEY)?.startOffset, 2)
  })

  it('fences a leader holding the state from before an alter (a new state epoch)', async () => {
    const { shard, leader } = make()
    const { manager } = leader()
    ;(await shareOf(manager)).acquire('m', ALL, 500, 'batch_optimized')
    await manager.acknowledge('g', 'm', TP, [
      { firstOffset: 0, lastOffset: 0, acknowledgeTypes: [AcknowledgeType.ACCEPT] },
    ])
    const before = shard.readSummary(KEY)
    const init = shard.initializeState(KEY, before.stateEpoch + 1, 7, 0)
    assert.equal(init.response, ErrorCode.NONE)
    for (const record of init.records) shard.apply(record)
    assert.equal(
      await manager.acknowledge('g', 'm', TP, [
        { firstOffset: 1, lastOffset: 1, acknowledgeTypes: [AcknowledgeType.ACCEPT] },
      ]),
      ErrorCode.FENCED_STATE_EPOCH,
    )
    assert.equal((await shareOf(manager)).nextFetchOffset(), 7, 'made again from the altered state')
    // An initialize of an older state epoch is refused too.
    assert.equal(shard.initializeState(KEY, before.stateEpoch, 0, 0).response, ErrorCode.FENCED_STATE_EPOCH)
  })

  it('replays from its records to the same state, snapshots every N updates', async () => {
    const shard = new ShareCoordinatorShard(2)
    const kinds: string[] = []
    const log: ShareStateRecord[] = []
    const write = (startOffset: number, first: number, last: number, state: number, count: number) => {
      const op = shard.writeState(
        KEY,
        {
          stateEpoch: 0,
          leaderEpoch: 1,
          startOffset,
          deliveryCompleteCount: 0,
          stateBatches: [
            { firstOffset: first, lastOffset: last, deliveryState: state, deliveryCount: count },
          ],
        },
        0,
      )
      assert.equal(op.response, ErrorCode.NONE)
      for (const record of op.records) {
        kinds.push(record.kind)
        const bytes = SHARE_STATE_SERDE.serialize(record)
        const decoded = SHARE_STATE_SERDE.deserialize(bytes.key, bytes.value)
        assert.ok(decoded)
        log.push(decoded)
        shard.apply(record)
      }
    }
    write(0, 0, 9, 0, 1)
    write(0, 3, 4, 2, 1)
    write(2, 5, 5, 4, 2)
    write(2, 6, 6, 0, 3)
    write(3, 7, 7, 2, 1)
    assert.deepEqual(kinds, ['snapshot', 'update', 'update', 'snapshot', 'update'])
    const replayed = new ShareCoordinatorShard(2)
    replayed.replay({
      baseOffset: toOffset(0),
      producerId: toProducerId(-1n),
      producerEpoch: -1,
      isTransactional: false,
      records: log,
    })
    assert.deepEqual(replayed.stateOf(KEY), shard.stateOf(KEY))
    assert.deepEqual(shard.stateOf(KEY)?.stateBatches, [
      { firstOffset: 3, lastOffset: 4, deliveryState: 2, deliveryCount: 1 },
      { firstOffset: 5, lastOffset: 5, deliveryState: 4, deliveryCount: 2 },
      { firstOffset: 6, lastOffset: 6, deliveryState: 0, deliveryCount: 3 },
      { firstOffset: 7, lastOffset: 7, deliveryState: 2, deliveryCount: 1 },
      { firstOffset: 8, lastOffset: 9, deliveryState: 0, deliveryCount: 1 },
    ])
    // A delete's tombstones replay to nothing.
    const deleted = shard.deleteState(KEY)
    replayed.replay({
      baseOffset: toOffset(9),
      producerId: toProducerId(-1n),
      producerEpoch: -1,
      isTransactional: false,
      records: deleted.records,
    })
    assert.equal(replayed.stateOf(KEY), undefined)
    assert.equal(replayed.readSummary(KEY).startOffset, -1)
  })

  it('refuses a read or write from an older leader epoch', () => {
    const shard = new ShareCoordinatorShard(500)
    for (const record of shard.readState(KEY, 5).records) shard.apply(record)
    const write = {
      stateEpoch: 0,
      leaderEpoch: 5,
      startOffset: 0,
      deliveryCompleteCount: 0,
      stateBatches: [],
    }
    for (const record of shard.writeState(KEY, write, 0).records) shard.apply(record)
    assert.equal(shard.readState(KEY, 4).response.errorCode, ErrorCode.FENCED_LEADER_EPOCH)
    assert.equal(
      shard.writeState(KEY, { ...write, leaderEpoch: 4 }, 0).response,
      ErrorCode.FENCED_LEADER_EPOCH,
    )
    assert.equal(shard.writeState(KEY, { ...write, leaderEpoch: 6 }, 0).response, ErrorCode.NONE)
  })
})

/**
 * The share coordinator unreachable (the persister's retries spent: COORDINATOR_NOT_AVAILABLE),
 * or a write held on its way: a failed write rolls the acknowledgement back, as Kafka's
 * SharePartition does (rollbackOrProcessStateUpdates).
 */
describe('a failed share-state write', () => {
  function makeFlaky() {
    const shard = new ShareCoordinatorShard(500)
    const inner = shardPersister(shard, [])
    const control = { down: false, held: [] as (() => void)[], hold: false }
    const persister: SharePersister = {
      ...inner,
      writeState: async (key, write) => {
        if (control.hold) await new Promise<void>((resolve) => control.held.push(resolve))
        if (control.down) return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return inner.writeState(key, write)
      },
    }
    const partition = { isLeader: true, id: { topicId: TP.topicId }, leaderEpoch: 3, highWatermark: 10 }
    const clock = new ManualClock()
    const manager = new SharePartitionManager(
      {
        recordLockDurationMs: LOCK_MS,
        deliveryCountLimit: 5,
        maxInFlightRecords: 100,
        autoOffsetReset: 'earliest',
      },
      clock,
      { getPartition: () => ({ ...partition, log: { logStartOffset: 0 } }) as unknown as Partition },
      () => ({}),
      persister,
    )
    return { shard, control, clock, manager }
  }
  const ack = (first: number, last: number, type: number) => [
    { firstOffset: first, lastOffset: last, acknowledgeTypes: [type] },
  ]

  it('answers the error and gives the records back to their member', async () => {
    const { shard, control, manager } = makeFlaky()
    const share = await shareOf(manager)
    assert.deepEqual(ranges(share.acquire('m', ALL, 500, 'batch_optimized')), ['0-9x1'])
    control.down = true
    const code = await manager.acknowledge('g', 'm', TP, ack(0, 3, AcknowledgeType.ACCEPT))
    assert.equal(code, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert.equal(share.startOffset, 0, 'SPSO did not move')
    assert.deepEqual(share.stateOf(0), { state: RecordState.ACQUIRED, deliveryCount: 1, memberId: 'm' })
    assert.equal(summary(shard), '-1 -1 -1', 'nothing written')
    assert.deepEqual(ranges(share.acquire('m2', ALL, 500, 'batch_optimized')), [], 'still locked')
    control.down = false
    // The member's retry succeeds: the records were still its own.
    assert.equal(await manager.acknowledge('g', 'm', TP, ack(0, 3, AcknowledgeType.ACCEPT)), ErrorCode.NONE)
    assert.equal(share.startOffset, 4)
    assert.equal(summary(shard), '4 3 0')
  })

  it('keeps records in transition from everyone until the write ends; a lock that ran out meanwhile releases them', async () => {
    const { shard, control, clock, manager } = makeFlaky()
    const share = await shareOf(manager)
    share.acquire('m', ALL, 500, 'batch_optimized')
    control.hold = true
    control.down = true
    const pending = manager.acknowledge('g', 'm', TP, ack(0, 4, AcknowledgeType.RELEASE))
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(share.nextFetchOffset(), 10, 'released records wait for their write')
    assert.deepEqual(ranges(share.acquire('m2', ALL, 500, 'batch_optimized')), [])
    assert.equal(
      await manager.acknowledge('g', 'm', TP, ack(0, 0, AcknowledgeType.ACCEPT)),
      ErrorCode.INVALID_RECORD_STATE,
      'nor acknowledged again',
    )
    // Every lock runs out while the write is held: 5-9 are released at once, 0-4 at the rollback.
    clock.advance(LOCK_MS)
    assert.deepEqual(share.stateOf(5), { state: RecordState.AVAILABLE, deliveryCount: 1, memberId: '' })
    assert.equal(share.stateOf(0)?.state, RecordState.AVAILABLE, 'in transition (AVAILABLE if written)')
    control.hold = false
    for (const release of control.held.splice(0)) release()
    assert.equal(await pending, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    control.down = false
    assert.deepEqual(ranges(share.acquire('m2', ALL, 500, 'batch_optimized')), ['0-9x2'])
    assert.equal(summary(shard), '-1 -1 -1', 'no write got through')
    assert.equal(await manager.acknowledge('g', 'm2', TP, ack(0, 9, AcknowledgeType.ACCEPT)), ErrorCode.NONE)
    assert.equal(summary(shard), '10 3 0')
  })
})
