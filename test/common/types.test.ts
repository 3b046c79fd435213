import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { InvariantError } from '../../src/common/assert.js'
import {
  isOffset,
  maxOffset,
  minOffset,
  NO_OFFSET,
  offsetAfter,
  toBrokerId,
  toLeaderEpoch,
  toOffset,
  toPartitionEpoch,
  toProducerId,
} from '../../src/common/types.js'

describe('branded number types', () => {
  it('accept safe integers from -1 (Kafka\'s "none") as offsets, nothing else', () => {
    assert.equal(toOffset(0), 0)
    assert.equal(toOffset(NO_OFFSET), -1)
    assert.equal(toOffset(2 ** 53 - 1), 2 ** 53 - 1)
    for (const bad of [-2, 1.5, 2 ** 53, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(() => toOffset(bad), InvariantError, String(bad))
      assert.equal(isOffset(bad), false)
    }
  })

  it('keep the brand through min and max', () => {
    const a = toOffset(3)
    const b = toOffset(9)
    assert.equal(minOffset(a, b), 3)
    assert.equal(maxOffset(a, b), 9)
  })

  it("add a record's offset delta to its batch's base offset", () => {
    assert.equal(offsetAfter(toOffset(100), 0), 100)
    assert.equal(offsetAfter(toOffset(100), 41), 141)
  })

  it('bound epochs and broker ids to int32 and producer ids to int64', () => {
    assert.equal(toLeaderEpoch(2 ** 31 - 1), 2 ** 31 - 1)
    assert.throws(() => toLeaderEpoch(2 ** 31), InvariantError)
    assert.throws(() => toPartitionEpoch(-2), InvariantError)
    assert.equal(toBrokerId(-1), -1)
    assert.throws(() => toBrokerId(0.5), InvariantError)
    assert.equal(toProducerId(2n ** 63n - 1n), 2n ** 63n - 1n)
    assert.throws(() => toProducerId(2n ** 63n), InvariantError)
    assert.throws(() => toProducerId(-2n), InvariantError)
  })
})
