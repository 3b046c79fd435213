/**
 * The share-partition manager's state for the share group offsets APIs
 * (share-partition-manager.ts: stateSummary, initializeState, deleteState) with a fake
 * partition and a manual clock: no start offset until the state is first written (an
 * acknowledgement, a released lock, an alter), as Kafka; the records done above SPSO; an
 * alter starting over; a delete forgetting; NOT_LEADER_OR_FOLLOWER off the leader.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ErrorCode } from '../../../src/protocol/error-codes.js'
import type { Partition } from '../../../src/replication/partition.js'
import { AcknowledgeType } from '../../../src/server/share/share-partition.js'
import { SharePartitionManager } from '../../../src/server/share/share-partition-manager.js'
import { ManualClock } from '../../helpers/manual-clock.js'

const LOCK_MS = 30_000
const TP = { topic: 't', topicId: 'dG9waWMtaWQtMDAwMDAwMA', partition: 0 }

function make() {
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
      recordLockDurationMs: LOCK_MS,
      deliveryCountLimit: 3,
      maxInFlightRecords: 100,
      autoOffsetReset: 'earliest',
    },
    clock,
    { getPartition: () => partition as unknown as Partition },
  )
  return { clock, partition, manager }
}

const summary = (manager: SharePartitionManager) => {
  const s = manager.stateSummary('g', TP)
  return `${s.errorCode} ${s.startOffset} ${s.leaderEpoch} ${s.deliveryCompleteCount} ${s.highWatermark}`
}

describe('share-partition state for the share group offsets APIs', () => {
  it('shows no start offset until an acknowledgement writes the state, then SPSO and the done records', () => {
    const { manager } = make()
    assert.equal(summary(manager), '0 -1 -1 -1 -1')
    const found = manager.sharePartition('g', TP)
    assert.ok(typeof found !== 'number')
    found.share.acquire('m', [{ baseOffset: 0, lastOffset: 9, isControl: false }], 500, 'batch_optimized')
    // Acquired, nothing acknowledged: Kafka has written nothing yet.
    assert.equal(summary(manager), '0 -1 -1 -1 -1')
    const code = manager.acknowledge('g', 'm', TP, [
      { firstOffset: 0, lastOffset: 1, acknowledgeTypes: [AcknowledgeType.ACCEPT] },
      { firstOffset: 4, lastOffset: 5, acknowledgeTypes: [AcknowledgeType.REJECT] },
    ])
    assert.equal(code, ErrorCode.NONE)
    // SPSO 2; 4 and 5 done above it; lag would be 10 - 2 - 2.
    assert.equal(summary(manager), '0 2 3 2 10')
  })

  it('writes the state when a lock expires and releases records', () => {
    const { clock, manager } = make()
    const found = manager.sharePartition('g', TP)
    assert.ok(typeof found !== 'number')
    found.share.acquire('m', [{ baseOffset: 0, lastOffset: 9, isControl: false }], 500, 'batch_optimized')
    clock.advance(LOCK_MS)
    assert.equal(summary(manager), '0 0 3 0 10')
  })

  it('starts over at an altered offset, and forgets on delete', () => {
    const { manager } = make()
    const found = manager.sharePartition('g', TP)
    assert.ok(typeof found !== 'number')
    found.share.acquire('m', [{ baseOffset: 0, lastOffset: 9, isControl: false }], 500, 'batch_optimized')
    assert.equal(manager.initializeState('g', TP, 7), ErrorCode.NONE)
    assert.equal(summary(manager), '0 7 3 0 10')
    // The old share-partition (and the member's records there) is gone: 7 is next.
    const again = manager.sharePartition('g', TP)
    assert.ok(typeof again !== 'number')
    assert.equal(again.share.nextFetchOffset(), 7)
    assert.equal(manager.deleteState('g', TP), ErrorCode.NONE)
    assert.equal(summary(manager), '0 -1 -1 -1 -1')
    assert.equal(manager.size, 0)
  })

  it('answers NOT_LEADER_OR_FOLLOWER off the leader', () => {
    const { partition, manager } = make()
    partition.isLeader = false
    assert.equal(manager.stateSummary('g', TP).errorCode, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert.equal(manager.initializeState('g', TP, 1), ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert.equal(manager.deleteState('g', TP), ErrorCode.NOT_LEADER_OR_FOLLOWER)
  })
})
