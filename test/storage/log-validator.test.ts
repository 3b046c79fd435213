/**
 * LogValidator on its own: append-time rules on buffers, no log, no disk, no clock.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { LeaderEpoch, Offset } from '../../src/common/types.js'
import {
  ATTRIBUTES_OFFSET,
  BatchHeader,
  CRC_OFFSET,
  LAST_OFFSET_DELTA_OFFSET,
  MAGIC_OFFSET,
  RECORD_BATCH_OVERHEAD,
  TimestampType,
} from '../../src/protocol/batch-header.js'
import { crc32c } from '../../src/protocol/crc32c.js'
import { isStorageError, type StorageErrorCode } from '../../src/storage/errors.js'
import {
  type FollowerRules,
  type LeaderRules,
  NO_LOG_APPEND_TIME,
  resolveLogAppendTime,
  validateAppend,
} from '../../src/storage/log-validator.js'
import { buildBatch, crcIsValid, simpleBatch, splitBatches } from './helpers.js'

const BASE_TIMESTAMP = 1_700_000_000_000

function leader(overrides: Partial<LeaderRules> = {}): LeaderRules {
  return {
    origin: 'leader',
    nextOffset: 0 as Offset,
    latestEpoch: -1 as LeaderEpoch,
    segmentBytes: 1024 * 1024,
    maxMessageBytes: 1024 * 1024,
    leaderEpoch: undefined,
    logAppendTimeMs: NO_LOG_APPEND_TIME,
    ...overrides,
  }
}

function follower(overrides: Partial<FollowerRules> = {}): FollowerRules {
  return {
    origin: 'follower',
    nextOffset: 0 as Offset,
    latestEpoch: -1 as LeaderEpoch,
    segmentBytes: 1024 * 1024,
    offsetGapsAllowed: false,
    ...overrides,
  }
}

function refusedWith(code: StorageErrorCode): (err: unknown) => boolean {
  return (err) => {
    assert.ok(isStorageError(err, code), `expected ${code}, got ${String(err)}`)
    return true
  }
}

/** Rewrites a header field covered by the CRC and recomputes the CRC, so only the field is wrong. */
function patchLastOffsetDelta(batch: Buffer, lastOffsetDelta: number): Buffer {
  batch.writeInt32BE(lastOffsetDelta, LAST_OFFSET_DELTA_OFFSET)
  batch.writeUInt32BE(crc32c(batch.subarray(ATTRIBUTES_OFFSET)), CRC_OFFSET)
  return batch
}

describe('LogValidator: leader appends', () => {
  it('assigns consecutive offsets from the log end and stamps the leader epoch', () => {
    const buffer = Buffer.concat([simpleBatch(3, 8, 0, { baseOffset: 77 }), simpleBatch(2)])
    const validated = validateAppend(
      buffer,
      leader({ nextOffset: 10 as Offset, latestEpoch: 4 as LeaderEpoch, leaderEpoch: 5 as LeaderEpoch }),
    )
    assert.deepEqual(
      validated.batches.map((b) => [b.baseOffset, b.lastOffset]),
      [
        [10, 12],
        [13, 14],
      ],
    )
    assert.deepEqual(validated.epochStarts, [{ epoch: 5, startOffset: 10 }])
    assert.equal(validated.info.firstOffset, 10)
    assert.equal(validated.info.lastOffset, 14)
    assert.equal(validated.info.shallowCount, 2)
    assert.equal(validated.info.validBytes, buffer.length)
    const written = splitBatches([buffer])
    assert.deepEqual(
      written.map((b) => b.baseOffset),
      [10, 13],
    )
    for (const b of written) {
      assert.equal(new BatchHeader(b.bytes).partitionLeaderEpoch, 5)
      assert.ok(crcIsValid(b.bytes), 'base offset and epoch are outside the CRC')
    }
  })

  it('keeps CreateTime and reports the largest timestamp and the offset holding it', () => {
    const early = buildBatch({ baseTimestamp: BASE_TIMESTAMP, records: [{ value: null }, { value: null }] })
    const late = buildBatch({ baseTimestamp: BASE_TIMESTAMP + 500, records: [{ value: null }] })
    const last = buildBatch({ baseTimestamp: BASE_TIMESTAMP + 100, records: [{ value: null }] })
    const buffer = Buffer.concat([early, late, last])
    const validated = validateAppend(buffer, leader())
    assert.equal(validated.info.logAppendTimeMs, NO_LOG_APPEND_TIME)
    assert.equal(validated.info.maxTimestamp, BASE_TIMESTAMP + 500)
    assert.equal(validated.info.offsetOfMaxTimestamp, 2)
    assert.deepEqual(
      splitBatches([buffer]).map((b) => new BatchHeader(b.bytes).timestampType),
      [TimestampType.CreateTime, TimestampType.CreateTime, TimestampType.CreateTime],
    )
  })

  it('refuses a CreateTime beyond message.timestamp.after/before.max.ms (INVALID_TIMESTAMP), untouched', () => {
    const bounds = { nowMs: BASE_TIMESTAMP, beforeMaxMs: 60_000, afterMaxMs: 3_600_000 }
    const inRange = buildBatch({
      baseTimestamp: BASE_TIMESTAMP - 59_000,
      records: [{ value: null }, { value: null, timestampDelta: 59_000 + 3_500_000 }],
    })
    assert.equal(validateAppend(inRange, leader({ timestampBounds: bounds })).info.firstOffset, 0)
    // The second record is two hours ahead: the batch's max timestamp says so.
    const ahead = buildBatch({
      baseTimestamp: BASE_TIMESTAMP,
      records: [{ value: null }, { value: null, timestampDelta: 7_200_000 }],
    })
    const before = Buffer.from(ahead)
    assert.throws(
      () => validateAppend(ahead, leader({ timestampBounds: bounds })),
      refusedWith('INVALID_TIMESTAMP'),
    )
    assert.ok(ahead.equals(before), 'a refused append is left as received')
    const behind = buildBatch({ baseTimestamp: BASE_TIMESTAMP - 61_000, records: [{ value: null }] })
    assert.throws(
      () => validateAppend(behind, leader({ timestampBounds: bounds })),
      refusedWith('INVALID_TIMESTAMP'),
    )
    // LogAppendTime replaces the producer's timestamps: nothing to refuse.
    assert.equal(
      validateAppend(behind, leader({ timestampBounds: bounds, logAppendTimeMs: BASE_TIMESTAMP })).info
        .firstOffset,
      0,
    )
  })

  it('stamps LogAppendTime into every batch header with a valid CRC', () => {
    const appendTimeMs = BASE_TIMESTAMP + 60_000
    const buffer = Buffer.concat([simpleBatch(2), simpleBatch(3)])
    const validated = validateAppend(buffer, leader({ logAppendTimeMs: appendTimeMs }))
    assert.equal(validated.info.logAppendTimeMs, appendTimeMs)
    assert.equal(validated.info.maxTimestamp, appendTimeMs)
    assert.deepEqual(
      validated.batches.map((b) => b.maxTimestamp),
      [appendTimeMs, appendTimeMs],
    )
    for (const b of splitBatches([buffer])) {
      const header = new BatchHeader(b.bytes)
      assert.equal(header.timestampType, TimestampType.LogAppendTime)
      assert.equal(header.maxTimestamp, appendTimeMs)
      assert.ok(crcIsValid(b.bytes))
    }
  })

  it('stamps LogAppendTime on a compressed batch without touching its records', () => {
    // Codec bits say gzip: the validator must not need to decompress to stamp the header.
    const batch = buildBatch({ attributes: 1, records: [{ value: Buffer.from('opaque') }] })
    const recordsBefore = Buffer.from(batch.subarray(RECORD_BATCH_OVERHEAD))
    validateAppend(batch, leader({ logAppendTimeMs: BASE_TIMESTAMP }))
    assert.deepEqual(batch.subarray(RECORD_BATCH_OVERHEAD), recordsBefore)
    assert.equal(new BatchHeader(batch).compression, 1)
    assert.equal(new BatchHeader(batch).timestampType, TimestampType.LogAppendTime)
    assert.ok(crcIsValid(batch))
  })

  it('refuses a leader epoch older than the log', () => {
    const buffer = simpleBatch(1)
    assert.throws(
      () => validateAppend(buffer, leader({ latestEpoch: 7 as LeaderEpoch, leaderEpoch: 6 as LeaderEpoch })),
      refusedWith('INVALID_LEADER_EPOCH'),
    )
    assert.equal(Number(buffer.readBigInt64BE(0)), 0, 'a refused buffer is not patched')
  })

  it('refuses a batch larger than max.message.bytes', () => {
    const batch = simpleBatch(4, 100)
    assert.throws(
      () => validateAppend(batch, leader({ maxMessageBytes: batch.length - 1 })),
      refusedWith('MESSAGE_TOO_LARGE'),
    )
    assert.equal(validateAppend(batch, leader({ maxMessageBytes: batch.length })).info.shallowCount, 1)
  })

  it('refuses an append larger than segment.bytes', () => {
    const buffer = Buffer.concat([simpleBatch(2, 100), simpleBatch(2, 100)])
    assert.throws(
      () => validateAppend(buffer, leader({ segmentBytes: buffer.length - 1 })),
      refusedWith('RECORD_BATCH_TOO_LARGE'),
    )
    assert.throws(
      () => validateAppend(buffer, follower({ segmentBytes: buffer.length - 1 })),
      refusedWith('RECORD_BATCH_TOO_LARGE'),
    )
  })

  it('refuses a producer batch whose record count does not match its offset range', () => {
    // Offset gaps are what compaction leaves; a producer never sends them.
    const gapped = patchLastOffsetDelta(simpleBatch(2), 4)
    assert.throws(() => validateAppend(gapped, leader()), refusedWith('INVALID_RECORD'))
    const fromCompactedLeader = patchLastOffsetDelta(simpleBatch(2), 4)
    assert.equal(validateAppend(fromCompactedLeader, follower()).info.lastOffset, 4)
  })
})

describe('LogValidator: framing, CRC, magic and compression codec', () => {
  it('refuses a batch whose CRC does not match, leaving the buffer as received', () => {
    const good = simpleBatch(2)
    const corrupt = simpleBatch(3)
    corrupt[corrupt.length - 1] ^= 0xff
    const buffer = Buffer.concat([good, corrupt])
    const before = Buffer.from(buffer)
    assert.throws(
      () => validateAppend(buffer, leader({ nextOffset: 50 as Offset, leaderEpoch: 1 as LeaderEpoch })),
      (err) => {
        assert.ok(isStorageError(err, 'CORRUPT_MESSAGE'))
        assert.match(err.message, /bad-crc/)
        return true
      },
    )
    assert.deepEqual(buffer, before)
  })

  it('refuses a batch that is not magic 2', () => {
    const batch = simpleBatch(1)
    batch.writeInt8(1, MAGIC_OFFSET)
    assert.throws(
      () => validateAppend(batch, leader()),
      (err) => {
        assert.ok(isStorageError(err, 'CORRUPT_MESSAGE'))
        assert.match(err.message, /bad-magic/)
        return true
      },
    )
  })

  it('refuses a compression codec Kafka does not know', () => {
    const batch = buildBatch({ attributes: 6, records: [{ value: Buffer.from('x') }] })
    assert.throws(() => validateAppend(batch, leader()), refusedWith('CORRUPT_MESSAGE'))
    assert.throws(() => validateAppend(batch, follower()), refusedWith('CORRUPT_MESSAGE'))
  })

  it('refuses a buffer ending inside a batch', () => {
    const buffer = Buffer.concat([simpleBatch(2), simpleBatch(2).subarray(0, 30)])
    assert.throws(() => validateAppend(buffer, leader()), refusedWith('CORRUPT_MESSAGE'))
    assert.throws(() => validateAppend(buffer, follower()), refusedWith('CORRUPT_MESSAGE'))
  })

  it('answers an empty append with no offsets', () => {
    const validated = validateAppend(Buffer.alloc(0), leader({ nextOffset: 9 as Offset }))
    assert.deepEqual(validated.batches, [])
    assert.deepEqual(validated.epochStarts, [])
    assert.equal(validated.info.firstOffset, -1)
    assert.equal(validated.info.lastOffset, -1)
    assert.equal(validated.info.shallowCount, 0)
    assert.equal(validated.info.offsetOfMaxTimestamp, 9)
  })
})

describe('LogValidator: follower appends', () => {
  it('accepts batches carrying exactly the next offsets and records each new epoch', () => {
    const buffer = Buffer.concat([
      simpleBatch(2, 8, 0, { baseOffset: 5, partitionLeaderEpoch: 3 }),
      simpleBatch(1, 8, 0, { baseOffset: 7, partitionLeaderEpoch: 3 }),
      simpleBatch(2, 8, 0, { baseOffset: 8, partitionLeaderEpoch: 4 }),
    ])
    const before = Buffer.from(buffer)
    const validated = validateAppend(
      buffer,
      follower({ nextOffset: 5 as Offset, latestEpoch: 2 as LeaderEpoch }),
    )
    assert.deepEqual(validated.epochStarts, [
      { epoch: 3, startOffset: 5 },
      { epoch: 4, startOffset: 8 },
    ])
    assert.equal(validated.info.firstOffset, 5)
    assert.equal(validated.info.lastOffset, 9)
    assert.equal(validated.info.logAppendTimeMs, NO_LOG_APPEND_TIME)
    assert.deepEqual(buffer, before, 'a follower writes the leader bytes as they are')
  })

  it('refuses batches that do not continue the log', () => {
    const ahead = simpleBatch(1, 8, 0, { baseOffset: 6 })
    assert.throws(
      () => validateAppend(ahead, follower({ nextOffset: 5 as Offset })),
      refusedWith('UNEXPECTED_APPEND_OFFSET'),
    )
    const behind = simpleBatch(1, 8, 0, { baseOffset: 4 })
    assert.throws(
      () => validateAppend(behind, follower({ nextOffset: 5 as Offset })),
      refusedWith('UNEXPECTED_APPEND_OFFSET'),
    )
  })

  it('accepts offset gaps from a compacted leader but never going back', () => {
    const ahead = simpleBatch(1, 8, 0, { baseOffset: 6 })
    assert.equal(
      validateAppend(ahead, follower({ nextOffset: 5 as Offset, offsetGapsAllowed: true })).info.lastOffset,
      6,
    )
    const behind = simpleBatch(1, 8, 0, { baseOffset: 4 })
    assert.throws(
      () => validateAppend(behind, follower({ nextOffset: 5 as Offset, offsetGapsAllowed: true })),
      refusedWith('UNEXPECTED_APPEND_OFFSET'),
    )
  })

  it('refuses epochs that go back, within an append and against the log', () => {
    const backwards = Buffer.concat([
      simpleBatch(1, 8, 0, { baseOffset: 0, partitionLeaderEpoch: 5 }),
      simpleBatch(1, 8, 0, { baseOffset: 1, partitionLeaderEpoch: 4 }),
    ])
    assert.throws(() => validateAppend(backwards, follower()), refusedWith('INVALID_LEADER_EPOCH'))
    const older = simpleBatch(1, 8, 0, { baseOffset: 0, partitionLeaderEpoch: 2 })
    assert.throws(
      () => validateAppend(older, follower({ latestEpoch: 3 as LeaderEpoch })),
      refusedWith('INVALID_LEADER_EPOCH'),
    )
  })

  it('does not check max.message.bytes (the leader did)', () => {
    const batch = simpleBatch(20, 100)
    assert.equal(validateAppend(batch, follower()).info.shallowCount, 1)
  })
})

describe('LogValidator: resolveLogAppendTime', () => {
  const noClock = () => assert.fail('the clock is read only for a LogAppendTime topic')

  it('keeps CreateTime when asked (null) or when the topic uses it', () => {
    assert.equal(resolveLogAppendTime(null, TimestampType.LogAppendTime, noClock), NO_LOG_APPEND_TIME)
    assert.equal(resolveLogAppendTime(undefined, TimestampType.CreateTime, noClock), NO_LOG_APPEND_TIME)
  })

  it('uses the given time, else the clock for a LogAppendTime topic', () => {
    assert.equal(resolveLogAppendTime(1234, TimestampType.CreateTime, noClock), 1234)
    assert.equal(
      resolveLogAppendTime(undefined, TimestampType.LogAppendTime, () => 99),
      99,
    )
  })
})
