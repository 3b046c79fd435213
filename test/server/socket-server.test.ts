/**
 * SocketServer's idle sweep (Kafka's connections.max.idle.ms): a connection that read and
 * wrote nothing and had nothing in flight for that long is closed, never earlier; one with a
 * request in flight (a long poll, a produce waiting for acks=all) is not idle.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import type { ByteStream, Network } from '../../src/common/network.js'
import { ApiKey, loadApiCodecs } from '../../src/protocol/generated/index.js'
import type { RequestContext } from '../../src/server/request-context.js'
import { SocketServer } from '../../src/server/socket-server.js'
import { heldProduceHandlers, produceFrame } from '../helpers/held-produce.js'
import { ManualClock } from '../helpers/manual-clock.js'

class FakeStream implements ByteStream {
  readonly remoteAddress = '127.0.0.1:1'
  readonly writableNeedDrain = false
  destroyed = false
  private dataListener: ((chunk: Buffer) => void) | null = null
  private closeListener: ((error: Error | null) => void) | null = null
  write(): void {}
  pause(): void {}
  resume(): void {}
  onData(listener: (chunk: Buffer) => void): void {
    this.dataListener = listener
  }
  onDrain(): void {}
  onClose(listener: (error: Error | null) => void): void {
    this.closeListener = listener
  }
  destroy(): void {
    if (this.destroyed) return
    this.destroyed = true
    this.closeListener?.(null)
  }
  push(chunk: Buffer): void {
    this.dataListener?.(chunk)
  }
}

/** A SocketServer on a fake network whose produce requests are answered when the test says. */
async function setUp(maxIdleMs: number) {
  const clock = new ManualClock()
  let accept: ((stream: ByteStream) => void) | null = null
  const network: Network = {
    listen: async (_host, _port, onConnection) => {
      accept = onConnection
      return { port: 9092, close: async () => {} }
    },
    connect: () => Promise.reject(new Error('not dialled')),
  }
  const { handlers, answers } = heldProduceHandlers()
  const server = new SocketServer(
    network,
    {
      handlers,
      socketRequestMaxBytes: 1 << 20,
      maxQueuedRequests: 500,
      logger: silentLogger,
      onFatal: (error) => assert.fail(error),
      makeContext: () => ({}) as RequestContext,
    },
    silentLogger,
    undefined,
    { maxIdleMs, clock },
  )
  await server.listen('127.0.0.1', 0)
  const connect = (): FakeStream => {
    const stream = new FakeStream()
    accept!(stream)
    return stream
  }
  return { clock, server, connect, answers }
}

const settle = () => new Promise((resolve) => setImmediate(resolve))

describe('connections.max.idle.ms', async () => {
  await loadApiCodecs([ApiKey.Produce])

  it('closes a connection idle that long, never earlier; one that keeps talking stays', async () => {
    const { clock, server, connect } = await setUp(1000)
    const quiet = connect()
    const talking = connect()
    for (let t = 0; t < 999; t += 37) {
      clock.advance(37)
      talking.push(Buffer.alloc(0))
    }
    assert.equal(quiet.destroyed, false, 'idle 999 ms of 1000: open')
    clock.advance(1)
    assert.equal(quiet.destroyed, true, 'idle 1000 ms: closed (within a sweep interval)')
    for (let t = 0; t < 3000; t += 37) {
      clock.advance(37)
      talking.push(Buffer.alloc(0))
    }
    assert.equal(talking.destroyed, false, 'a connection that reads is not idle')
    assert.equal(server.connectionCount, 1)
    await server.close()
    assert.equal(clock.pendingTimers, 0, 'no sweep left armed after close')
  })

  it('a connection waiting for an answer is not idle; once answered, its idle time starts', async () => {
    const { clock, server, connect, answers } = await setUp(1000)
    const waiting = connect()
    waiting.push(produceFrame(1))
    assert.equal(answers.length, 1)
    clock.advance(5000)
    assert.equal(waiting.destroyed, false, 'a produce in flight for 5 s: not idle')
    answers[0]()
    await settle()
    clock.advance(999)
    assert.equal(waiting.destroyed, false, 'answered 999 ms ago: open')
    clock.advance(200)
    assert.equal(waiting.destroyed, true, 'answered over 1000 ms ago: closed')
    await server.close()
  })

  it('<= 0 turns it off: nothing is swept, no timer armed', async () => {
    const { clock, server, connect } = await setUp(-1)
    const quiet = connect()
    assert.equal(clock.pendingTimers, 0)
    clock.advance(10_000_000)
    assert.equal(quiet.destroyed, false)
    await server.close()
  })
})
