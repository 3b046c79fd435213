/** Consumption counted, not collected in a Set: a record read twice is seen (consumed.ts). */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  assertConsumedAtLeastOnce,
  assertConsumedOnce,
  consumedAll,
  countConsumed,
  duplicatesOf,
} from './consumed.js'

test('a duplicate fails assertConsumedOnce, where a Set of the values would have hidden it', () => {
  const produced = ['a', 'b', 'c']
  const consumed = ['a', 'b', 'b', 'c']
  assert.equal(new Set(consumed).size, produced.length, 'the Set the tests used saw nothing wrong')
  assert.throws(
    () => assertConsumedOnce(consumed, produced, 'group'),
    /group: records consumed more than once/,
  )
  assert.deepEqual(duplicatesOf(countConsumed(consumed)), [['b', 2]])
  assertConsumedOnce(['c', 'a', 'b'], produced, 'group')
})

test('at least once tolerates and counts duplicates, but not a missing or a foreign record', () => {
  assert.equal(assertConsumedAtLeastOnce(['a', 'b', 'b', 'b', 'c'], ['a', 'b', 'c'], 'group'), 2)
  assert.throws(
    () => assertConsumedAtLeastOnce(['a', 'b'], ['a', 'b', 'c'], 'group'),
    /every record consumed/,
  )
  assert.throws(
    () => assertConsumedAtLeastOnce(['a', 'b', 'c', 'x'], ['a', 'b', 'c'], 'group'),
    /nothing else/,
  )
  assert.ok(consumedAll(['c', 'b', 'a', 'a'], ['a', 'b', 'c']))
  assert.ok(!consumedAll(['a', 'a', 'a'], ['a', 'b']))
})
