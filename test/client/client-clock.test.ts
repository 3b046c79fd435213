/**
 * The client's injected time and randomness without a broker: the manual clock helper
 * itself, buffer.memory waits bounded by max.block.ms on the clock, the one retry backoff
 * (KIP-580 bounds, ±20 % jitter from the client's Random), and a shared client's clock.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { KafkaClient } from '../../src/client/client.js'
import { Consumer } from '../../src/client/consumer.js'
import { MemoryPool } from '../../src/client/memory-pool.js'
import { Producer } from '../../src/client/producer.js'
import { type Random, systemRandom } from '../../src/common/random.js'
import { ManualClock } from '../helpers/manual-clock.js'

const bootstrapServers = '127.0.0.1:1'

function fixedRandom(value: number): Random {
  return { ...systemRandom, next: () => value }
}

describe('ManualClock', () => {
  it('runs due timers in due order, each at its own time, including timers set on the way', () => {
    const clock = new ManualClock()
    const ran: string[] = []
    clock.setTimeout(() => ran.push(`b@${clock.monotonicMs()}`), 20)
    clock.setTimeout(() => {
      ran.push(`a@${clock.monotonicMs()}`)
      clock.setTimeout(() => ran.push(`a2@${clock.monotonicMs()}`), 5)
    }, 10)
    clock.setTimeout(() => ran.push(`b'@${clock.monotonicMs()}`), 20)
    const cancelled = clock.setTimeout(() => ran.push('cancelled'), 15)
    cancelled.cancel()
    clock.setTimeout(() => ran.push('later'), 31)
    clock.advance(30)
    assert.deepEqual(ran, ['a@10', 'a2@15', 'b@20', "b'@20"])
    assert.equal(clock.monotonicMs(), 30)
    assert.equal(clock.nowMs() - clock.monotonicMs(), 1_700_000_000_000)
    assert.equal(clock.pendingTimers, 1)
  })
})

describe('buffer.memory on the clock', () => {
  it('a send that does not fit waits max.block.ms of clock time, then fails; released memory goes first come first served', async () => {
    const clock = new ManualClock()
    const pool = new MemoryPool(100, 1000, clock)
    assert.equal(pool.tryReserve(80), true)
    const order: string[] = []
    const first = pool.reserve(50).then(() => order.push('first'))
    clock.advance(500)
    const second = pool.reserve(10).then(() => order.push('second'))
    assert.equal(pool.waiting, 2, 'the small one waits behind the first (FIFO)')
    clock.advance(499)
    await Promise.resolve()
    assert.deepEqual(order, [])
    pool.release(80)
    await Promise.all([first, second])
    assert.deepEqual(order, ['first', 'second'])
    const late = pool.reserve(100)
    const failed = assert.rejects(late, { code: 'ERR_MAX_BLOCK_TIMEOUT' })
    clock.advance(999)
    assert.equal(pool.waiting, 1, 'still waiting 1 ms before max.block.ms')
    clock.advance(1)
    await failed
    assert.equal(pool.waiting, 0)
  })
})

describe('retry backoff', () => {
  it('retry.backoff.ms doubling up to retry.backoff.max.ms, jitter ±20 % from the client random', () => {
    const low = new KafkaClient({
      bootstrapServers,
      retryBackoffMs: 100,
      retryBackoffMaxMs: 1000,
      random: fixedRandom(0),
    })
    const high = new KafkaClient({
      bootstrapServers,
      retryBackoffMs: 100,
      retryBackoffMaxMs: 1000,
      random: fixedRandom(0.999999),
    })
    const mid = new KafkaClient({
      bootstrapServers,
      retryBackoffMs: 100,
      retryBackoffMaxMs: 1000,
      random: fixedRandom(0.5),
    })
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6].map((attempt) => mid.backoff.delayMs(attempt)),
      [100, 200, 400, 800, 1000, 1000],
    )
    assert.deepEqual(
      [1, 2, 3].map((attempt) => low.backoff.delayMs(attempt)),
      [80, 160, 320],
    )
    assert.deepEqual(
      [1, 2, 5].map((attempt) => high.backoff.delayMs(attempt)),
      [120, 240, 1000],
      'never above retry.backoff.max.ms',
    )
  })

  it('retry.backoff.ms above retry.backoff.max.ms is a static backoff at the maximum (Kafka)', () => {
    const client = new KafkaClient({
      bootstrapServers,
      retryBackoffMs: 5000,
      retryBackoffMaxMs: 1000,
      random: fixedRandom(0.5),
    })
    assert.deepEqual(
      [1, 2, 3].map((attempt) => client.backoff.delayMs(attempt)),
      [1000, 1000, 1000],
    )
  })
})

describe('a shared client brings its clock', () => {
  it('producer and consumer use the shared client clock; a different one beside it is refused', () => {
    const clock = new ManualClock()
    const client = new KafkaClient({ bootstrapServers, clock })
    assert.equal(new Producer({ client }).client.clock, clock)
    assert.equal(new Producer({ client, clock }).client.clock, clock)
    assert.throws(() => new Producer({ client, clock: new ManualClock() }), {
      code: 'ERR_INVALID_ARGUMENT',
      message: /clock differs from the shared client's/,
    })
    assert.throws(() => new Consumer({ client, random: fixedRandom(0) }), {
      code: 'ERR_INVALID_ARGUMENT',
      message: /random differs/,
    })
    assert.throws(() => new Producer({ client, defer: (callback) => callback() }), {
      code: 'ERR_INVALID_ARGUMENT',
      message: /defer differs/,
    })
    assert.throws(() => new Producer({}), {
      code: 'ERR_INVALID_ARGUMENT',
      message: /bootstrapServers or client/,
    })
    client.close()
  })
})

describe("the producer's drain", () => {
  it("runs through the injected defer, not on Node's event loop (a simulation runs it in simulated time)", async () => {
    const clock = new ManualClock()
    const deferred: (() => void)[] = []
    const producer = new Producer({
      bootstrapServers,
      clock,
      lingerMs: 0,
      deliveryTimeoutMs: 1000,
      requestTimeoutMs: 500,
      defer: (callback) => deferred.push(callback),
    })
    const sent = producer.send({ topic: 't', partition: 0, value: 'v' })
    // A flush drains at once; with the injected defer, only once the caller runs it.
    const flushed = producer.flush()
    await new Promise((resolve) => setImmediate(resolve))
    assert.ok(deferred.length > 0, 'the drain was not deferred through the injected function')
    for (const run of deferred.splice(0)) run()
    await assert.rejects(clock.runUntil(sent))
    for (const run of deferred.splice(0)) run()
    await flushed
    await producer.close()
  })
})

describe('a closed producer', () => {
  it('leaves no timer behind while metadata cannot be fetched (the sender stops with it)', async () => {
    const clock = new ManualClock()
    const producer = new Producer({ bootstrapServers, clock, deliveryTimeoutMs: 1000, requestTimeoutMs: 500 })
    await assert.rejects(clock.runUntil(producer.send({ topic: 't', value: 'v' })))
    await producer.close()
    // Before the fix the sender's failed metadata refresh re-armed its wake-up every
    // retry.backoff.ms forever, keeping the process alive.
    await clock.runFor(2000)
    assert.equal(clock.pendingTimers, 0)
  })
})
