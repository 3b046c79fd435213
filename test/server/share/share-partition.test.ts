/**
 * SharePartition (KIP-932) on its own, time from a manual clock: acquisition and its lock,
 * ACCEPT / RELEASE / REJECT / RENEW, the delivery count limit, the start offset moving past
 * finished records, and the errors for offsets a member does not hold.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ErrorCode } from '../../../src/protocol/error-codes.js'
import {
  AcknowledgeType,
  type FetchedBatch,
  RecordState,
  SharePartition,
  validateAcknowledgementBatches,
} from '../../../src/server/share/share-partition.js'
import { ManualClock } from '../../helpers/manual-clock.js'

const LOCK_MS = 30_000
const config = { recordLockDurationMs: LOCK_MS, deliveryCountLimit: 3, maxInFlightRecords: 100 }

function batch(baseOffset: number, lastOffset: number, isControl = false): FetchedBatch {
  return { baseOffset, lastOffset, isControl }
}

function make(startOffset = 0) {
  const clock = new ManualClock()
  return { clock, sp: new SharePartition(config, clock, startOffset) }
}

/** Acquires what the partition would read at its next fetch offset, up to `lastOffset`. */
function fetchFor(sp: SharePartition, member: string, lastOffset: number, maxRecords = 500) {
  return sp.acquire(member, [batch(sp.nextFetchOffset(), lastOffset)], maxRecords, 'batch_optimized')
}

describe('SharePartition', () => {
  it('acquires new records once, with delivery count 1, and not again while they are locked', () => {
    const { sp } = make(5)
    assert.deepEqual(sp.acquire('a', [batch(0, 9)], 500, 'batch_optimized'), [
      { firstOffset: 5, lastOffset: 9, deliveryCount: 1 },
    ])
    assert.equal(sp.nextFetchOffset(), 10)
    assert.deepEqual(sp.acquire('b', [batch(5, 9)], 500, 'batch_optimized'), [])
    assert.equal(sp.startOffset, 5)
    assert.equal(sp.endOffset, 10)
  })

  it('ACCEPT acknowledges and moves the start offset past the accepted records', () => {
    const { sp } = make()
    fetchFor(sp, 'a', 4)
    const code = sp.acknowledge('a', [
      { firstOffset: 0, lastOffset: 2, acknowledgeTypes: [AcknowledgeType.ACCEPT] },
    ])
    assert.equal(code, ErrorCode.NONE)
    assert.equal(sp.startOffset, 3)
    assert.equal(sp.stateOf(3)?.state, RecordState.ACQUIRED)
    // An accepted record is never acquired again.
    assert.deepEqual(sp.acquire('b', [batch(0, 4)], 500, 'batch_optimized'), [])
  })

  it('RELEASE makes a record available to another member, its delivery count going up', () => {
    const { sp } = make()
    fetchFor(sp, 'a', 2)
    sp.acknowledge('a', [
      {
        firstOffset: 0,
        lastOffset: 2,
        acknowledgeTypes: [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.ACCEPT],
      },
    ])
    assert.equal(sp.startOffset, 1)
    assert.equal(sp.nextFetchOffset(), 1)
    assert.deepEqual(sp.acquire('b', [batch(0, 2)], 500, 'batch_optimized'), [
      { firstOffset: 1, lastOffset: 1, deliveryCount: 2 },
    ])
  })

  it('REJECT archives a record: it is never delivered again', () => {
    const { sp } = make()
    fetchFor(sp, 'a', 1)
    sp.acknowledge('a', [{ firstOffset: 0, lastOffset: 0, acknowledgeTypes: [AcknowledgeType.REJECT] }])
    assert.equal(sp.stateOf(0), undefined, 'below the start offset: done')
    assert.equal(sp.startOffset, 1)
    sp.acknowledge('a', [{ firstOffset: 1, lastOffset: 1, acknowledgeTypes: [AcknowledgeType.RELEASE] }])
    assert.deepEqual(sp.acquire('b', [batch(0, 1)], 500, 'batch_optimized'), [
      { firstOffset: 1, lastOffset: 1, deliveryCount: 2 },
    ])
  })

  it('archives a record released at the delivery count limit', () => {
    const { sp } = make()
    for (let delivery = 1; delivery <= config.deliveryCountLimit; delivery++) {
      assert.deepEqual(fetchFor(sp, 'a', 0), [{ firstOffset: 0, lastOffset: 0, deliveryCount: delivery }])
      sp.acknowledge('a', [{ firstOffset: 0, lastOffset: 0, acknowledgeTypes: [AcknowledgeType.RELEASE] }])
    }
    assert.equal(sp.startOffset, 1, 'archived after the third delivery')
    assert.deepEqual(sp.acquire('a', [batch(0, 0)], 500, 'batch_optimized'), [])
  })

  it('releases records whose lock expired, and archives them at the limit', () => {
    const { sp, clock } = make()
    fetchFor(sp, 'a', 1)
    clock.advance(LOCK_MS - 1)
    assert.equal(sp.stateOf(0)?.state, RecordState.ACQUIRED)
    assert.equal(sp.acquisitionLockTimeouts, 0)
    clock.advance(1)
    assert.equal(sp.stateOf(0)?.state, RecordState.AVAILABLE)
    assert.equal(sp.stateOf(0)?.memberId, '')
    assert.equal(sp.acquisitionLockTimeouts, 1, 'counted for AcquisitionLockTimeoutPerSec')
    // The member's late acknowledgement is refused: it no longer holds the record.
    const late = sp.acknowledge('a', [
      { firstOffset: 0, lastOffset: 1, acknowledgeTypes: [AcknowledgeType.ACCEPT] },
    ])
    assert.equal(late, ErrorCode.INVALID_RECORD_STATE)
    for (let delivery = 2; delivery <= config.deliveryCountLimit; delivery++) {
      assert.deepEqual(fetchFor(sp, 'b', 1), [{ firstOffset: 0, lastOffset: 1, deliveryCount: delivery }])
      clock.advance(LOCK_MS)
    }
    assert.equal(sp.startOffset, 2, 'both archived once their last lock expired')
    assert.equal(clock.pendingTimers, 0)
  })

  it('RENEW starts the lock over', () => {
    const { sp, clock } = make()
    fetchFor(sp, 'a', 0)
    clock.advance(LOCK_MS - 10)
    assert.equal(
      sp.acknowledge('a', [{ firstOffset: 0, lastOffset: 0, acknowledgeTypes: [AcknowledgeType.RENEW] }]),
      0,
    )
    clock.advance(LOCK_MS - 10)
    assert.equal(
      sp.stateOf(0)?.state,
      RecordState.ACQUIRED,
      'the first lock ran out, the renewed one did not',
    )
    clock.advance(10)
    assert.equal(sp.stateOf(0)?.state, RecordState.AVAILABLE)
  })

  it('refuses acknowledgements of offsets not acquired, or held by another member, changing nothing', () => {
    const { sp } = make()
    fetchFor(sp, 'a', 2)
    const accept = (first: number, last: number) => [
      { firstOffset: first, lastOffset: last, acknowledgeTypes: [1] },
    ]
    assert.equal(sp.acknowledge('b', accept(0, 0)), ErrorCode.INVALID_RECORD_STATE)
    assert.equal(
      sp.acknowledge('a', accept(2, 3)),
      ErrorCode.INVALID_RECORD_STATE,
      'offset 3 was never delivered',
    )
    assert.equal(sp.stateOf(2)?.state, RecordState.ACQUIRED, 'all or nothing')
    assert.equal(sp.acknowledge('a', accept(1, 2)), ErrorCode.NONE)
    assert.equal(
      sp.acknowledge('a', accept(1, 1)),
      ErrorCode.INVALID_RECORD_STATE,
      'acknowledged, still in flight',
    )
    assert.equal(sp.acknowledge('a', accept(0, 0)), ErrorCode.NONE)
    assert.equal(sp.startOffset, 3)
    // Below the start offset: done already, passed over as Kafka 4.4 does.
    assert.equal(sp.acknowledge('a', accept(0, 0)), ErrorCode.NONE)
  })

  it('refuses a batch starting past every acquired offset with INVALID_REQUEST while some are in flight', () => {
    const { sp } = make()
    const accept = (first: number, last: number) => [
      { firstOffset: first, lastOffset: last, acknowledgeTypes: [AcknowledgeType.ACCEPT] },
    ]
    // Nothing in flight: Kafka finds no batch at all (INVALID_RECORD_STATE).
    assert.equal(sp.acknowledge('a', accept(0, 0)), ErrorCode.INVALID_RECORD_STATE)
    fetchFor(sp, 'a', 2)
    assert.equal(sp.acknowledge('a', accept(10, 12)), ErrorCode.INVALID_REQUEST)
    assert.equal(sp.acknowledge('a', accept(3, 3)), ErrorCode.INVALID_REQUEST)
    // A batch reaching past the end from inside: the offsets beyond were never delivered.
    assert.equal(sp.acknowledge('a', accept(2, 3)), ErrorCode.INVALID_RECORD_STATE)
    // One refused batch of two: all or nothing.
    assert.equal(sp.acknowledge('a', [...accept(0, 0), ...accept(5, 5)]), ErrorCode.INVALID_REQUEST)
    assert.equal(sp.stateOf(0)?.state, RecordState.ACQUIRED)
  })

  it('releases what a member holds when its session ends', () => {
    const { sp } = make()
    fetchFor(sp, 'a', 1)
    assert.equal(sp.releaseAcquiredRecords('b'), 0)
    assert.equal(sp.releaseAcquiredRecords('a'), 2)
    assert.deepEqual(fetchFor(sp, 'b', 1), [{ firstOffset: 0, lastOffset: 1, deliveryCount: 2 }])
  })

  it('keeps to the record limit in record_limit mode, and to batch boundaries otherwise', () => {
    const strict = make().sp
    assert.deepEqual(strict.acquire('a', [batch(0, 4), batch(5, 9)], 3, 'record_limit'), [
      { firstOffset: 0, lastOffset: 2, deliveryCount: 1 },
    ])
    const optimized = make().sp
    assert.deepEqual(optimized.acquire('a', [batch(0, 4), batch(5, 9)], 3, 'batch_optimized'), [
      { firstOffset: 0, lastOffset: 4, deliveryCount: 1 },
    ])
  })

  it('never has more than maxInFlightRecords in flight', () => {
    const clock = new ManualClock()
    const sp = new SharePartition({ ...config, maxInFlightRecords: 4 }, clock, 0)
    assert.deepEqual(sp.acquire('a', [batch(0, 9)], 500, 'batch_optimized'), [
      { firstOffset: 0, lastOffset: 3, deliveryCount: 1 },
    ])
    assert.equal(sp.canAcquire(), false)
    sp.acknowledge('a', [{ firstOffset: 0, lastOffset: 1, acknowledgeTypes: [AcknowledgeType.ACCEPT] }])
    assert.equal(sp.canAcquire(), true)
    assert.deepEqual(sp.acquire('a', [batch(4, 9)], 500, 'batch_optimized'), [
      { firstOffset: 4, lastOffset: 5, deliveryCount: 1 },
    ])
  })

  it('archives control batches and offsets missing from the log instead of delivering them', () => {
    const { sp } = make()
    assert.deepEqual(sp.acquire('a', [batch(0, 1), batch(2, 2, true), batch(5, 6)], 500, 'batch_optimized'), [
      { firstOffset: 0, lastOffset: 1, deliveryCount: 1 },
      { firstOffset: 5, lastOffset: 6, deliveryCount: 1 },
    ])
    sp.acknowledge('a', [{ firstOffset: 0, lastOffset: 1, acknowledgeTypes: [AcknowledgeType.ACCEPT] }])
    assert.equal(sp.startOffset, 5)
  })
})

describe('validateAcknowledgementBatches', () => {
  const ok = (types: number[], first = 0, last = 0) => ({
    firstOffset: first,
    lastOffset: last,
    acknowledgeTypes: types,
  })
  it('answers INVALID_REQUEST for malformed batches, as Kafka', () => {
    assert.equal(validateAcknowledgementBatches([ok([1]), ok([2], 1, 3)], false), ErrorCode.NONE)
    assert.equal(validateAcknowledgementBatches([ok([1], 3, 2)], false), ErrorCode.INVALID_REQUEST)
    assert.equal(
      validateAcknowledgementBatches([ok([1], 0, 3), ok([1], 3, 4)], false),
      ErrorCode.INVALID_REQUEST,
    )
    assert.equal(validateAcknowledgementBatches([ok([])], false), ErrorCode.INVALID_REQUEST)
    assert.equal(validateAcknowledgementBatches([ok([1, 1], 0, 2)], false), ErrorCode.INVALID_REQUEST)
    assert.equal(validateAcknowledgementBatches([ok([5])], true), ErrorCode.INVALID_REQUEST)
    assert.equal(validateAcknowledgementBatches([ok([4])], false), ErrorCode.INVALID_REQUEST)
    assert.equal(validateAcknowledgementBatches([ok([4])], true), ErrorCode.NONE)
  })
})
