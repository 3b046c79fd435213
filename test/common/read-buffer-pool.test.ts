/**
 * The read buffer pool lends large buffers and reuses only those given back: a buffer never
 * released is never handed out again, small reads are not pooled, and what it keeps is bounded.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { POOLED_READ_MIN_BYTES, ReadBufferPool } from '../../src/common/read-buffer-pool.js'

const MIB = 1024 * 1024

test('a released buffer is lent again for a read of about its size', () => {
  const pool = new ReadBufferPool(64 * MIB)
  const first = pool.acquire(10 * MIB + 4096)
  assert.equal(first.length, 10 * MIB + 4096)
  // The records a fetch answers are subarrays of the read: they identify the buffer.
  pool.release([first.subarray(100, 5000), first.subarray(5000, 9000)])
  assert.ok(pool.retainedBytes >= 10 * MIB + 4096)
  const second = pool.acquire(10 * MIB + 2048)
  assert.equal(second.buffer, first.buffer)
  assert.equal(second.length, 10 * MIB + 2048)
  assert.equal(pool.retainedBytes, 0)
})

test('a buffer not released is never lent twice', () => {
  const pool = new ReadBufferPool(64 * MIB)
  const kept = pool.acquire(MIB)
  const other = pool.acquire(MIB)
  assert.notEqual(other.buffer, kept.buffer)
  pool.release([other])
  const third = pool.acquire(MIB)
  assert.equal(third.buffer, other.buffer)
  assert.notEqual(third.buffer, kept.buffer)
  // Releasing a buffer twice (two chunks of one read, or a second write) returns it once.
  pool.release([third, third.subarray(10)])
  pool.release([third])
  assert.equal(pool.retainedBytes, third.buffer.byteLength)
})

test('small reads and foreign buffers are not pooled', () => {
  const pool = new ReadBufferPool(64 * MIB)
  const small = pool.acquire(POOLED_READ_MIN_BYTES - 1)
  const foreign = Buffer.allocUnsafe(2 * MIB)
  assert.equal(pool.holdsAny([small, foreign]), false)
  pool.release([small, foreign])
  assert.equal(pool.retainedBytes, 0)
  const large = pool.acquire(POOLED_READ_MIN_BYTES)
  assert.equal(pool.holdsAny([small, large.subarray(1)]), true)
})

test('a much larger free buffer is not used for a small read, and what is kept is bounded', () => {
  const pool = new ReadBufferPool(24 * MIB)
  const big = pool.acquire(16 * MIB)
  pool.release([big])
  const smaller = pool.acquire(MIB)
  assert.notEqual(smaller.buffer, big.buffer)
  const more = [pool.acquire(10 * MIB), pool.acquire(10 * MIB)]
  pool.release(more)
  assert.ok(pool.retainedBytes <= 24 * MIB, `${pool.retainedBytes} retained`)
})

test('free buffers are given back once a trim interval passes without a pooled read', () => {
  const pool = new ReadBufferPool(64 * MIB)
  const burst = [pool.acquire(10 * MIB), pool.acquire(10 * MIB), pool.acquire(4 * MIB)]
  pool.release(burst)
  assert.ok(pool.retainedBytes >= 24 * MIB)
  // The interval of the burst itself: the pool was in use, so it keeps its buffers.
  assert.equal(pool.trimIfIdle(), 0)
  assert.ok(pool.retainedBytes >= 24 * MIB)
  // A whole interval with no pooled read: everything goes.
  assert.ok(pool.trimIfIdle() >= 24 * MIB)
  assert.equal(pool.retainedBytes, 0)
  // Small reads are not pool use: they do not keep a later burst's buffers alive.
  pool.release([pool.acquire(2 * MIB)])
  pool.trimIfIdle()
  pool.acquire(POOLED_READ_MIN_BYTES - 1)
  assert.ok(pool.trimIfIdle() >= 2 * MIB)
  assert.equal(pool.retainedBytes, 0)
})

test("a fetch's two read sizes, its limit and the limit plus an index interval, share buffers", () => {
  // LogSegment reads a partition's fetch either as exactly its limit or, from the batch before
  // the one asked for, as the limit plus an index interval and a batch header: a buffer made
  // for one of them must serve the other, or a 10 MiB fetch allocates fresh buffers each time.
  const pool = new ReadBufferPool(64 * MIB)
  const exact = pool.acquire(10 * MIB)
  pool.release([exact])
  const longer = pool.acquire(10 * MIB + 4096 + 61)
  assert.equal(longer.buffer, exact.buffer)
  pool.release([longer])
  assert.equal(pool.acquire(10 * MIB).buffer, exact.buffer)
})
