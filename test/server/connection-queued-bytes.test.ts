import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import type { ByteStream } from '../../src/common/network.js'
import { ApiKey, loadApiCodecs } from '../../src/protocol/generated/index.js'
import { Connection } from '../../src/server/connection.js'
import type { RequestContext } from '../../src/server/request-context.js'
import { RequestMemoryPool } from '../../src/server/request-memory-pool.js'
import { heldProduceHandlers, produceFrame } from '../helpers/held-produce.js'

/** A stream whose reading state the test reads, and into which it pushes bytes as a socket would. */
class FakeStream implements ByteStream {
  readonly remoteAddress = '127.0.0.1:1'
  readonly writableNeedDrain = false
  paused = false
  written = 0
  private dataListener: ((chunk: Buffer) => void) | null = null
  write(): void {
    this.written++
  }
  pause(): void {
    this.paused = true
  }
  resume(): void {
    this.paused = false
  }
  onData(listener: (chunk: Buffer) => void): void {
    this.dataListener = listener
  }
  onDrain(): void {}
  onClose(): void {}
  destroy(): void {}
  /** Delivers `chunk` as one read; a paused socket would not read, so neither does this. */
  push(chunk: Buffer): void {
    assert.equal(this.paused, false, 'data pushed into a paused stream')
    this.dataListener?.(chunk)
  }
}

/** A connection whose produce requests are answered only when the test says so. */
function setUp(maxQueuedRequestBytes: number | undefined, requestMemoryPool?: RequestMemoryPool) {
  const { handlers, answers } = heldProduceHandlers()
  const stream = new FakeStream()
  new Connection({
    id: 1,
    stream,
    handlers,
    socketRequestMaxBytes: 100 * 1024 * 1024,
    maxQueuedRequests: 500,
    ...(maxQueuedRequestBytes === undefined ? {} : { maxQueuedRequestBytes }),
    ...(requestMemoryPool === undefined ? {} : { requestMemoryPool }),
    logger: silentLogger,
    onFatal: (error) => assert.fail(error),
    onClose: () => {},
    makeContext: () => ({}) as RequestContext,
  })
  return { stream, answers }
}

describe('a connection bounds the bytes of requests it holds unanswered', async () => {
  await loadApiCodecs([ApiKey.Produce])
  const KiB = 1024

  it('stops reading once the requests read and not yet answered reach the bound, and reads again after answers', async () => {
    const { stream, answers } = setUp(256 * KiB)
    stream.push(produceFrame(1, 100 * KiB))
    stream.push(produceFrame(2, 100 * KiB))
    assert.equal(stream.paused, false, '200 KiB held: under the bound')
    stream.push(produceFrame(3, 100 * KiB))
    assert.equal(stream.paused, true, '300 KiB held: reading stops')
    assert.equal(answers.length, 3)
    answers[0]()
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(stream.paused, false, 'the first answer leaves 200 KiB held: reading goes on')
    assert.equal(stream.written, 1)
  })

  it('always reads one request, however large', async () => {
    const { stream, answers } = setUp(64 * KiB)
    stream.push(produceFrame(1, 1024 * KiB))
    assert.equal(stream.paused, true)
    answers[0]()
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(stream.paused, false)
  })

  it('without a bound, only the count of requests stops reading', () => {
    const { stream } = setUp(undefined)
    for (let i = 0; i < 20; i++) stream.push(produceFrame(i, 100 * KiB))
    assert.equal(stream.paused, false)
  })

  it('queued.max.request.bytes stops every connection once the broker holds that many, and frees them as answers go', async () => {
    const pool = new RequestMemoryPool(256 * KiB)
    const a = setUp(undefined, pool)
    const b = setUp(undefined, pool)
    a.stream.push(produceFrame(1, 200 * KiB))
    assert.equal(a.stream.paused, false)
    b.stream.push(produceFrame(2, 100 * KiB))
    assert.equal(a.stream.paused, false, 'a was under the bound when it read; it learns at its next request')
    assert.equal(b.stream.paused, true, '300 KiB held by the broker: b stops')
    a.stream.push(produceFrame(3, 1 * KiB))
    assert.equal(a.stream.paused, true)
    a.answers[0]()
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(b.stream.paused, false, "a's answer freed room: b, which waited on the pool, reads again")
    assert.equal(a.stream.paused, false)
    assert.ok(pool.usedBytes < 256 * KiB && pool.usedBytes > 100 * KiB, `${pool.usedBytes} bytes held`)
  })

  it('a connection holding nothing reads again even while the broker is full', async () => {
    const pool = new RequestMemoryPool(64 * KiB)
    const a = setUp(undefined, pool)
    const b = setUp(undefined, pool)
    a.stream.push(produceFrame(1, 100 * KiB))
    b.stream.push(produceFrame(2, 100 * KiB))
    assert.equal(b.stream.paused, true)
    b.answers[0]()
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(pool.usedBytes >= 64 * KiB, true, "a's request still fills the pool")
    assert.equal(b.stream.paused, false, 'b holds nothing: it may read one request')
  })
})
