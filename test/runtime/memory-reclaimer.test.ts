/**
 * A broker process's memory goes back down once load stops (issue 34): the read buffer
 * pool is emptied after an interval without pooled reads, and one full garbage collection
 * runs once the event loop is idle and ArrayBuffers grew, never while it is busy.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ReadBufferPool } from '../../src/common/read-buffer-pool.js'
import {
  COLLECT_ABOVE_BYTES_DEFAULT,
  MemoryReclaimer,
  nodeProcessMemory,
  type ProcessMemory,
} from '../../src/runtime/memory-reclaimer.js'
import { ManualClock } from '../helpers/manual-clock.js'

const MIB = 1024 * 1024
const INTERVAL_MS = 5000

/** A process whose busy fraction and ArrayBuffer bytes the test sets, counting collections. */
class FakeMemory implements ProcessMemory {
  busyFraction = 0
  arrayBuffers = 0
  garbageBytes = 0
  collections = 0
  busyFractionSinceLastCall(): number {
    return this.busyFraction
  }
  heldBytes(): number {
    return this.arrayBuffers
  }
  collectGarbage(): void {
    this.collections++
    this.arrayBuffers -= this.garbageBytes
    this.garbageBytes = 0
  }
}

/** A burst of large reads through the pool, leaving `garbageBytes` of dead Buffers behind. */
function burst(pool: ReadBufferPool, memory: FakeMemory, garbageBytes: number): void {
  const reads = [pool.acquire(10 * MIB), pool.acquire(10 * MIB), pool.acquire(10 * MIB)]
  pool.release(reads)
  memory.arrayBuffers += garbageBytes
  memory.garbageBytes += garbageBytes
}

test('after a burst the pool is emptied and garbage collected once the loop is idle', () => {
  const clock = new ManualClock()
  const pool = new ReadBufferPool()
  const memory = new FakeMemory()
  const reclaimer = new MemoryReclaimer({ clock, memory, pool, intervalMs: INTERVAL_MS })
  reclaimer.start()
  memory.busyFraction = 0.9
  burst(pool, memory, 100 * MIB)
  clock.advance(INTERVAL_MS)
  assert.ok(pool.retainedBytes >= 30 * MIB, 'kept while reads go on')
  assert.equal(memory.collections, 0, 'no forced pause under load')
  memory.busyFraction = 0.01
  clock.advance(INTERVAL_MS)
  assert.equal(pool.retainedBytes, 0)
  assert.equal(memory.collections, 1)
  assert.equal(memory.arrayBuffers, 0)
  // Idle on: nothing more to do, and no collection every interval.
  clock.advance(10 * INTERVAL_MS)
  assert.equal(memory.collections, 1)
  reclaimer.stop()
  assert.equal(clock.pendingTimers, 0)
})

test('a busy loop is never paused for a collection, however much ArrayBuffers grow', () => {
  const clock = new ManualClock()
  const pool = new ReadBufferPool()
  const memory = new FakeMemory()
  const reclaimer = new MemoryReclaimer({ clock, memory, pool, intervalMs: INTERVAL_MS })
  reclaimer.start()
  memory.busyFraction = 0.5
  for (let i = 0; i < 10; i++) {
    burst(pool, memory, 50 * MIB)
    clock.advance(INTERVAL_MS)
  }
  assert.equal(memory.collections, 0)
  // Idle: the pool unused for an interval is emptied, and that is collected once.
  memory.busyFraction = 0
  clock.advance(INTERVAL_MS)
  assert.equal(memory.collections, 1)
  // Growth under the threshold with the pool already empty is left to V8.
  memory.arrayBuffers += COLLECT_ABOVE_BYTES_DEFAULT / 2
  clock.advance(4 * INTERVAL_MS)
  assert.equal(memory.collections, 1)
  reclaimer.stop()
})

test("Node's process memory: a collection frees the dead Buffers of a burst", async () => {
  const memory = nodeProcessMemory()
  const buffers: Buffer[] = []
  // Written to, so that their memory is resident; under V8's 64 MiB of external growth
  // that starts a collection of its own.
  for (let i = 0; i < 32; i++) buffers.push(Buffer.allocUnsafeSlow(MIB).fill(1))
  const heldBytes = memory.heldBytes()
  assert.ok(heldBytes >= 32 * MIB, `${heldBytes} bytes held`)
  buffers.length = 0
  memory.collectGarbage()
  // V8 frees ArrayBuffers' memory on a sweeper task after the collection.
  for (let waitedMs = 0; waitedMs < 5000 && memory.heldBytes() > heldBytes - 24 * MIB; waitedMs += 20)
    await new Promise((resolve) => setTimeout(resolve, 20))
  assert.ok(memory.heldBytes() <= heldBytes - 24 * MIB, `${memory.heldBytes()} bytes left`)
  const busy = memory.busyFractionSinceLastCall()
  assert.ok(busy >= 0 && busy <= 1, `busy fraction ${busy}`)
})

test('what the process allocated before the first look is no burst: V8 is left to reduce it', () => {
  const clock = new ManualClock()
  const memory = new FakeMemory()
  const reclaimer = new MemoryReclaimer({
    clock,
    memory,
    pool: new ReadBufferPool(),
    intervalMs: INTERVAL_MS,
  })
  memory.arrayBuffers = 40 * MIB
  reclaimer.start()
  clock.advance(3 * INTERVAL_MS)
  assert.equal(memory.collections, 0)
  memory.arrayBuffers += 2 * COLLECT_ABOVE_BYTES_DEFAULT
  clock.advance(INTERVAL_MS)
  assert.equal(memory.collections, 1)
  reclaimer.stop()
})
