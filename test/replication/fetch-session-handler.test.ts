/**
 * The replica fetcher's side of a KIP-227 fetch session: full, then incremental with only
 * the changed partitions and the removed ones forgotten, and back to full (closing the
 * session) after a session error, any other top-level error or a failed fetch.
 */

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { FIRST_OFFSET, toOffset } from '../../src/common/types.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import {
  FetchSessionHandler,
  type SessionEntry,
  type SessionPartitionData,
} from '../../src/replication/fetch-session-handler.js'

const data = (fetchOffset: number, overrides: Partial<SessionPartitionData> = {}): SessionPartitionData => ({
  fetchOffset: toOffset(fetchOffset),
  logStartOffset: FIRST_OFFSET,
  currentLeaderEpoch: 3,
  partitionMaxBytes: 1048576,
  ...overrides,
})

function next(entries: Record<number, SessionPartitionData>): Map<string, SessionEntry<string>> {
  const map = new Map<string, SessionEntry<string>>()
  for (const [partition, d] of Object.entries(entries))
    map.set(`t-${partition}`, {
      topic: 't',
      topicId: 'id-t',
      partition: Number(partition),
      data: d,
      handle: `h${partition}`,
    })
  return map
}

const sent = (entries: readonly SessionEntry<string>[]) => entries.map((e) => e.partition).sort()

test('full fetch opens the session; incremental ones carry only changes and forgotten partitions', () => {
  const handler = new FetchSessionHandler<string>()
  const first = handler.build(next({ 0: data(10), 1: data(20), 2: data(30) }))
  assert.deepEqual([first.sessionId, first.sessionEpoch, first.full], [0, 0, true])
  assert.deepEqual(sent(first.toSend), [0, 1, 2])
  assert.equal(handler.handleResponse(ErrorCode.NONE, 77), true)
  assert.equal(handler.id, 77)

  // Nothing changed: an empty incremental fetch at epoch 1.
  const idle = handler.build(next({ 0: data(10), 1: data(20), 2: data(30) }))
  assert.deepEqual([idle.sessionId, idle.sessionEpoch, idle.full], [77, 1, false])
  assert.deepEqual([idle.toSend.length, idle.toForget.length], [0, 0])
  assert.equal(handler.handleResponse(ErrorCode.NONE, 77), true)

  // Partition 1 moved, 2 removed, 3 added, 0's leader epoch changed.
  const changed = handler.build(next({ 0: data(10, { currentLeaderEpoch: 4 }), 1: data(25), 3: data(0) }))
  assert.deepEqual([changed.sessionEpoch, changed.full], [2, false])
  assert.deepEqual(sent(changed.toSend), [0, 1, 3])
  assert.deepEqual(sent(changed.toForget), [2])
  assert.equal(handler.handleResponse(ErrorCode.NONE, 77), true)

  // The log start moving is a change too; a partition forgotten once is not forgotten again.
  const again = handler.build(
    next({
      0: data(10, { currentLeaderEpoch: 4 }),
      1: data(25, { logStartOffset: toOffset(5) }),
      3: data(0),
    }),
  )
  assert.deepEqual(sent(again.toSend), [1])
  assert.deepEqual(again.toForget, [])
  assert.equal(again.sessionEpoch, 3)
})

test('with the changed keys named, an incremental fetch diffs those only, as a full diff would', () => {
  const handler = new FetchSessionHandler<string>()
  const ready = next({ 0: data(10), 1: data(20), 2: data(30) })
  handler.build(ready, ['t-0', 't-1', 't-2'])
  handler.handleResponse(ErrorCode.NONE, 9)
  const idle = handler.build(ready, [])
  assert.deepEqual([idle.toSend.length, idle.toForget.length, idle.sessionEpoch], [0, 0, 1])
  handler.handleResponse(ErrorCode.NONE, 9)
  // 1 moved, 2 removed, 3 added; a key named that did not change (0, same entry) is not sent.
  const moved = next({ 1: data(25), 3: data(0) })
  ready.set('t-1', moved.get('t-1')!)
  ready.set('t-3', moved.get('t-3')!)
  ready.delete('t-2')
  const changed = handler.build(ready, ['t-0', 't-1', 't-2', 't-3', 't-3'])
  assert.deepEqual(sent(changed.toSend), [1, 3])
  assert.deepEqual(sent(changed.toForget), [2])
  handler.handleResponse(ErrorCode.NONE, 9)
  // After an error the next fetch is full whatever is named.
  handler.handleError()
  const full = handler.build(ready, [])
  assert.deepEqual([full.full, sent(full.toSend)], [true, [0, 1, 3]])
  handler.handleResponse(ErrorCode.NONE, 9)
  // Only the named keys are looked at (what makes an idle round O(changes)): the caller
  // must name every change, and one it does not name is not seen.
  ready.set('t-0', next({ 0: data(99) }).get('t-0')!)
  assert.deepEqual(handler.build(ready, []).toSend, [])
})

test('the handle of an unchanged partition follows the latest build', () => {
  const handler = new FetchSessionHandler<string>()
  handler.build(next({ 0: data(10) }))
  handler.handleResponse(ErrorCode.NONE, 5)
  const entries = next({ 0: data(10) })
  const replaced = { ...entries.get('t-0')!, handle: 'new' }
  handler.build(new Map([['t-0', replaced]]))
  assert.equal(handler.entry('t-0')?.handle, 'new')
})

test('session errors, other top-level errors and failed fetches make the next fetch full', () => {
  const partitions = { 0: data(10), 1: data(20) }
  const handler = new FetchSessionHandler<string>()
  handler.build(next(partitions))
  handler.handleResponse(ErrorCode.NONE, 9)
  handler.build(next(partitions))

  // Out of step: the leader no longer knows this epoch. The next fetch closes session 9
  // (its id with epoch 0) while opening a new one, and carries every partition.
  assert.equal(handler.handleResponse(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 9), false)
  let fetch = handler.build(next(partitions))
  assert.deepEqual([fetch.sessionId, fetch.sessionEpoch, fetch.full], [9, 0, true])
  assert.deepEqual(sent(fetch.toSend), [0, 1])
  handler.handleResponse(ErrorCode.NONE, 11)

  // Evicted: there is nothing to close, so the new session is asked for with id 0.
  handler.build(next(partitions))
  assert.equal(handler.handleResponse(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0), false)
  fetch = handler.build(next(partitions))
  assert.deepEqual([fetch.sessionId, fetch.sessionEpoch, fetch.full], [0, 0, true])
  handler.handleResponse(ErrorCode.NONE, 12)

  // Any other top-level error (here an authorization failure) also starts over.
  handler.build(next(partitions))
  assert.equal(handler.handleResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 0), false)
  fetch = handler.build(next(partitions))
  assert.deepEqual([fetch.sessionId, fetch.sessionEpoch, fetch.full], [12, 0, true])
  handler.handleResponse(ErrorCode.NONE, 13)

  // No answer (connection lost, timed out, cut short): the leader may have moved the epoch on.
  fetch = handler.build(next({ 0: data(11), 1: data(20) }))
  assert.equal(fetch.full, false)
  handler.handleError()
  fetch = handler.build(next({ 0: data(11), 1: data(20) }))
  assert.deepEqual([fetch.sessionId, fetch.sessionEpoch, fetch.full], [13, 0, true])
  assert.deepEqual(sent(fetch.toSend), [0, 1])
})

test('a leader without a free slot answers session id 0: every fetch stays full and asks again', () => {
  const handler = new FetchSessionHandler<string>()
  handler.build(next({ 0: data(1) }))
  assert.equal(handler.handleResponse(ErrorCode.NONE, 0), true)
  const fetch = handler.build(next({ 0: data(1) }))
  assert.deepEqual([fetch.sessionId, fetch.sessionEpoch, fetch.full], [0, 0, true])
  assert.deepEqual(sent(fetch.toSend), [0])
})

test('a leader that closes the session in an incremental answer makes the next fetch full', () => {
  const handler = new FetchSessionHandler<string>()
  handler.build(next({ 0: data(1) }))
  handler.handleResponse(ErrorCode.NONE, 4)
  handler.build(next({ 0: data(1) }))
  assert.equal(handler.handleResponse(ErrorCode.NONE, 0), true)
  const fetch = handler.build(next({ 0: data(1) }))
  assert.deepEqual([fetch.sessionId, fetch.sessionEpoch, fetch.full], [0, 0, true])
})
