/**
 * The leader's fetch session cache when full (max.incremental.fetch.session.cache.slots):
 * as Kafka's, a stale session gives way to anyone, a consumer never evicts a live
 * follower's session, a follower evicts a consumer's, and otherwise more partitions win.
 */

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { FIRST_OFFSET } from '../../src/common/types.js'
import {
  FetchSessionCache,
  MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
  sessionKey,
} from '../../src/server/fetch-session-cache.js'

function idsFrom(start: number): () => number {
  let next = start
  return () => next++
}

const follower = (partitionCount: number) => ({ privileged: true, partitionCount })
const consumer = (partitionCount: number) => ({ privileged: false, partitionCount })

function open(
  cache: FetchSessionCache,
  nowMs: number,
  requester: { privileged: boolean; partitionCount: number },
) {
  const decision = cache.begin(0, 0, nowMs, requester)
  assert.equal(decision.kind, 'full')
  const session = decision.session
  for (let p = 0; p < requester.partitionCount; p++)
    session?.partitions.set(sessionKey('t', p), {
      topic: 't',
      topicId: 'id',
      partition: p,
      fetchOffset: FIRST_OFFSET,
      partitionMaxBytes: 1,
      currentLeaderEpoch: 0,
      lastHighWatermark: FIRST_OFFSET,
      lastLogStartOffset: FIRST_OFFSET,
      lastLastStableOffset: FIRST_OFFSET,
    })
  return session
}

test('consumers never evict a live follower session; followers evict consumers', () => {
  const cache = new FetchSessionCache(2, idsFrom(1))
  const a = open(cache, 0, follower(3000))
  const b = open(cache, 0, follower(3000))
  assert.ok(a && b)
  // Full of followers: a consumer, however large, gets no session (a sessionless fetch).
  assert.equal(open(cache, 10, consumer(100000)), null)
  assert.equal(cache.begin(a.id, 1, 20, follower(0)).kind, 'incremental')
  assert.equal(cache.begin(b.id, 1, 20, follower(0)).kind, 'incremental')

  const withConsumer = new FetchSessionCache(2, idsFrom(100))
  const f = open(withConsumer, 0, follower(5))
  const c = open(withConsumer, 0, consumer(5000))
  assert.ok(f && c)
  const g = open(withConsumer, 1, follower(1))
  assert.ok(g, 'a follower takes a consumer slot')
  assert.throws(() => withConsumer.begin(c.id, 1, 2, consumer(0)), /not found/)
  assert.equal(withConsumer.begin(f.id, 1, 2, follower(0)).kind, 'incremental')
})

test('among equals more partitions win; a stale session gives way to anyone', () => {
  const cache = new FetchSessionCache(2, idsFrom(1))
  const small = open(cache, 0, consumer(2))
  const big = open(cache, 0, consumer(50))
  assert.ok(small && big)
  assert.equal(open(cache, 1, consumer(1)), null, 'fewer partitions than any: no session')
  const mid = open(cache, 1, consumer(10))
  assert.ok(mid)
  assert.throws(() => cache.begin(small.id, 1, 2, consumer(0)), /not found/)

  // The follower session stale past the eviction time gives way even to a small consumer.
  const followers = new FetchSessionCache(1, idsFrom(1))
  const f = open(followers, 0, follower(3000))
  assert.ok(f)
  assert.equal(open(followers, MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, consumer(1)), null)
  assert.ok(open(followers, MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS + 1, consumer(1)))
})
