/**
 * Issue 33 items 2 and 7: a share group's own configs in the share-partition manager
 * (share-partition-manager.ts), with a fake partition and a manual clock:
 * share.auto.offset.reset picks where the group's share-partitions start, and
 * share.record.lock.duration.ms how long its locks last, read at each acquisition (a
 * change applies to the next lock); groups without them use the broker's values.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { Partition } from '../../../src/replication/partition.js'
import {
  type ShareGroupOverrides,
  SharePartitionManager,
} from '../../../src/server/share/share-partition-manager.js'
import { ManualClock } from '../../helpers/manual-clock.js'

const BROKER_LOCK_MS = 30_000
const TP = { topic: 't', topicId: 'dG9waWMtaWQtMDAwMDAwMA', partition: 0 }
const BATCH = [{ baseOffset: 0, lastOffset: 9, isControl: false }]

function make(overrides: Map<string, ShareGroupOverrides>) {
  const clock = new ManualClock()
  const partition = {
    isLeader: true,
    id: { topicId: TP.topicId },
    leaderEpoch: 3,
    highWatermark: 10,
    log: { logStartOffset: 0 },
  }
  const manager = new SharePartitionManager(
    {
      recordLockDurationMs: BROKER_LOCK_MS,
      deliveryCountLimit: 10,
      maxInFlightRecords: 100,
      autoOffsetReset: 'latest',
    },
    clock,
    { getPartition: () => partition as unknown as Partition },
    (groupId) => overrides.get(groupId) ?? {},
  )
  return { clock, manager }
}

async function shareOf(manager: SharePartitionManager, groupId: string) {
  const found = await manager.sharePartition(groupId, TP)
  assert.ok(typeof found !== 'number')
  return found.share
}

/** What `memberId` of `groupId` acquires of offsets 0-9 now, as first-last. */
async function acquire(manager: SharePartitionManager, groupId: string, memberId: string): Promise<string[]> {
  return (await shareOf(manager, groupId))
    .acquire(memberId, BATCH, 500, 'batch_optimized')
    .map((r) => `${r.firstOffset}-${r.lastOffset}`)
}

describe("a share group's own configs", () => {
  it('start its share-partitions at its share.auto.offset.reset', async () => {
    const { manager } = make(new Map([['early', { autoOffsetReset: 'earliest' }]]))
    // The broker's latest: the high watermark, nothing of 0-9.
    assert.deepEqual(await acquire(manager, 'plain', 'm'), [])
    assert.deepEqual(await acquire(manager, 'early', 'm'), ['0-9'])
  })

  it('hold locks for its share.record.lock.duration.ms, read at each acquisition', async () => {
    const overrides = new Map<string, ShareGroupOverrides>([
      ['short', { autoOffsetReset: 'earliest', recordLockDurationMs: 15_000 }],
      ['broker', { autoOffsetReset: 'earliest' }],
    ])
    const { clock, manager } = make(overrides)
    assert.equal(manager.recordLockDurationMs('short'), 15_000)
    assert.equal(manager.recordLockDurationMs('broker'), BROKER_LOCK_MS)
    assert.deepEqual(await acquire(manager, 'short', 'm1'), ['0-9'])
    assert.deepEqual(await acquire(manager, 'broker', 'm1'), ['0-9'])
    clock.advance(15_000)
    // The short locks expired: another member gets the records; the broker-long ones hold.
    assert.deepEqual(await acquire(manager, 'short', 'm2'), ['0-9'])
    assert.deepEqual(await acquire(manager, 'broker', 'm2'), [])
    // A changed config applies to the next lock of the same share-partition.
    overrides.set('short', { autoOffsetReset: 'earliest', recordLockDurationMs: 40_000 })
    clock.advance(15_000)
    assert.deepEqual(await acquire(manager, 'short', 'm3'), ['0-9'])
    clock.advance(30_000)
    assert.deepEqual(await acquire(manager, 'short', 'm4'), [], 'the 40 s lock of m3 holds after 30 s')
    clock.advance(10_000)
    assert.deepEqual(await acquire(manager, 'short', 'm4'), ['0-9'])
  })
})

describe("a share group's delivery count limit and record locks", () => {
  /** Acquires 0-9 as `memberId` and releases them all; the ranges acquired as first-last×count. */
  async function acquireAndRelease(manager: SharePartitionManager, groupId: string, memberId: string) {
    const share = await shareOf(manager, groupId)
    const ranges = share.acquire(memberId, BATCH, 500, 'batch_optimized')
    for (const r of ranges)
      share.acknowledge(memberId, [
        { firstOffset: r.firstOffset, lastOffset: r.lastOffset, acknowledgeTypes: [2] },
      ])
    return ranges.map((r) => `${r.firstOffset}-${r.lastOffset}x${r.deliveryCount}`)
  }

  it('archive at its share.delivery.count.limit, read at each release', async () => {
    const overrides = new Map<string, ShareGroupOverrides>([
      ['two', { autoOffsetReset: 'earliest', deliveryCountLimit: 2 }],
      ['broker', { autoOffsetReset: 'earliest' }],
    ])
    const { manager } = make(overrides)
    assert.deepEqual(await acquireAndRelease(manager, 'two', 'm'), ['0-9x1'])
    assert.deepEqual(await acquireAndRelease(manager, 'two', 'm'), ['0-9x2'])
    assert.deepEqual(await acquireAndRelease(manager, 'two', 'm'), [], 'archived after 2 deliveries')
    // The broker's limit (10) lets the other group's records come back.
    for (let count = 1; count <= 3; count++)
      assert.deepEqual(await acquireAndRelease(manager, 'broker', 'm'), [`0-9x${count}`])
    // Lowered while the records are out: the next release archives them (Kafka's dynamic limit).
    overrides.set('broker', { autoOffsetReset: 'earliest', deliveryCountLimit: 4 })
    assert.deepEqual(await acquireAndRelease(manager, 'broker', 'm'), ['0-9x4'])
    assert.deepEqual(await acquireAndRelease(manager, 'broker', 'm'), [])
  })

  it('keep at most its share.partition.max.record.locks records in flight', async () => {
    const overrides = new Map<string, ShareGroupOverrides>([
      ['few', { autoOffsetReset: 'earliest', maxInFlightRecords: 4 }],
      ['broker', { autoOffsetReset: 'earliest' }],
    ])
    const { manager } = make(overrides)
    assert.deepEqual(await acquire(manager, 'few', 'm1'), ['0-3'])
    assert.deepEqual(await acquire(manager, 'few', 'm2'), [], 'four in flight: no room')
    assert.deepEqual(await acquire(manager, 'broker', 'm1'), ['0-9'])
    overrides.set('few', { autoOffsetReset: 'earliest', maxInFlightRecords: 6 })
    assert.deepEqual(await acquire(manager, 'few', 'm2'), ['4-5'], 'raised: two more')
  })
})
