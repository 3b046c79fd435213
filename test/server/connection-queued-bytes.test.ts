import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import type { ByteStream } from '../../src/common/network.js'
import { encodeRequestFrame } from '../../src/protocol/frame-encoder.js'
import { ApiKey, loadApiCodecs } from '../../src/protocol/generated/index.js'
import { Connection } from '../../src/server/connection.js'
import { HandlerRegistry } from '../../src/server/handlers/registry.js'
import type { RequestContext } from '../../src/server/request-context.js'

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

const produceFrame = (correlationId: number, recordBytes: number): Buffer =>
  Buffer.concat(
    encodeRequestFrame(ApiKey.Produce, 9, correlationId, 'test', {
      transactionalId: null,
      acks: -1,
      timeoutMs: 30_000,
      topicData: [
        { name: 't', topicId: '', partitionData: [{ index: 0, records: Buffer.alloc(recordBytes) }] },
      ],
    }),
  )

/** A connection whose produce requests are answered only when the test says so. */
function setUp(maxQueuedRequestBytes: number | undefined) {
  const answers: (() => void)[] = []
  const handlers = new HandlerRegistry([
    {
      apiKey: ApiKey.Produce,
      minVersion: 0,
      maxVersion: 12,
      handle: () =>
        new Promise((resolve) =>
          answers.push(() => resolve({ responses: [], throttleTimeMs: 0, nodeEndpoints: [] })),
        ),
    },
  ])
  const stream = new FakeStream()
  new Connection({
    id: 1,
    stream,
    handlers,
    socketRequestMaxBytes: 100 * 1024 * 1024,
    maxQueuedRequests: 500,
    ...(maxQueuedRequestBytes === undefined ? {} : { maxQueuedRequestBytes }),
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
})
