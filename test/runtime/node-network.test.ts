import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createServer, type Server, type Socket } from 'node:net'
import { after, before, describe, it } from 'node:test'
import type { ByteStream } from '../../src/common/network.js'
import { FrameError } from '../../src/protocol/frame-decoder.js'
import { nodeNetwork } from '../../src/runtime/node-network.js'

/** A frame as Kafka sends it: 4-byte size, then the bytes. */
function framed(body: Buffer): Buffer {
  const size = Buffer.alloc(4)
  size.writeInt32BE(body.length)
  return Buffer.concat([size, body])
}

/** Writes `bytes` in pieces of random sizes, each its own write, so reads see arbitrary splits. */
async function writeInPieces(socket: Socket, bytes: Buffer): Promise<void> {
  let at = 0
  while (at < bytes.length) {
    const piece = Math.min(bytes.length - at, 1 + Math.floor(Math.random() * 200_000))
    const more = socket.write(bytes.subarray(at, at + piece))
    at += piece
    if (!more) await new Promise((resolve) => socket.once('drain', resolve))
    if (Math.random() < 0.3) await new Promise((resolve) => setImmediate(resolve))
  }
}

describe('nodeNetwork.connect', () => {
  let server: Server
  let port: number
  /** What the server does with each accepted socket (set per test). */
  let onAccept: (socket: Socket) => void = () => {}

  before(async () => {
    server = createServer((socket) => onAccept(socket))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    port = (server.address() as { port: number }).port
  })
  after(() => new Promise<void>((resolve) => server.close(() => resolve())))

  function collectFrames(stream: ByteStream, count: number, maxFrameBytes = 64 << 20): Promise<Buffer[]> {
    return new Promise((resolve, reject) => {
      const frames: Buffer[] = []
      stream.readFrames!(
        maxFrameBytes,
        (frame) => {
          frames.push(frame)
          if (frames.length === count) resolve(frames)
        },
        reject,
      )
    })
  }

  it('reads frames of every size, split anywhere, large ones into buffers of their own size', async () => {
    const bodies = [1, 0, 70_000, 5 << 20, 3, 65_532, 65_533, 2 << 20, 17].map((n) => randomBytes(n))
    onAccept = (socket) => void writeInPieces(socket, Buffer.concat(bodies.map(framed)))
    const stream = await nodeNetwork.connect('127.0.0.1', port)
    try {
      const frames = await collectFrames(stream, bodies.length)
      assert.deepEqual(
        frames.map((f) => f.length),
        bodies.map((b) => b.length),
      )
      for (const [i, frame] of frames.entries()) assert.ok(frame.equals(bodies[i]), `frame ${i} differs`)
      const large = frames[3]
      assert.equal(large.byteOffset, 0)
      assert.equal(
        large.buffer.byteLength,
        large.length,
        'a large frame is read in place, not joined from chunks',
      )
    } finally {
      stream.destroy()
    }
  })

  it('keeps bytes that arrive before readFrames, in order', async () => {
    const bodies = [randomBytes(10), randomBytes(300_000), randomBytes(5)]
    onAccept = (socket) => socket.write(Buffer.concat(bodies.map(framed)))
    const stream = await nodeNetwork.connect('127.0.0.1', port)
    try {
      await new Promise((resolve) => setTimeout(resolve, 50)) // the server's bytes are read by now
      const frames = await collectFrames(stream, bodies.length)
      for (const [i, frame] of frames.entries()) assert.ok(frame.equals(bodies[i]), `frame ${i} differs`)
    } finally {
      stream.destroy()
    }
  })

  it('reports a frame above the bound as a FrameError and delivers nothing after it', async () => {
    onAccept = (socket) => socket.write(Buffer.concat([framed(randomBytes(8)), framed(randomBytes(2048))]))
    const stream = await nodeNetwork.connect('127.0.0.1', port)
    try {
      const frames: Buffer[] = []
      const error = await new Promise<unknown>((resolve) =>
        stream.readFrames!(1024, (frame) => frames.push(frame), resolve),
      )
      assert.ok(error instanceof FrameError, String(error))
      assert.deepEqual(
        frames.map((f) => f.length),
        [8],
      )
    } finally {
      stream.destroy()
    }
  })

  it('passes a throw of onFrame to onError instead of into the socket', async () => {
    onAccept = (socket) => socket.write(Buffer.concat([framed(randomBytes(8)), framed(randomBytes(8))]))
    const stream = await nodeNetwork.connect('127.0.0.1', port)
    try {
      let calls = 0
      const error = await new Promise<unknown>((resolve) =>
        stream.readFrames!(
          1024,
          () => {
            calls++
            throw new Error('boom')
          },
          resolve,
        ),
      )
      assert.equal((error as Error).message, 'boom')
      await new Promise((resolve) => setTimeout(resolve, 20))
      assert.equal(calls, 1)
    } finally {
      stream.destroy()
    }
  })

  it('still delivers raw chunks through onData, the early ones too', async () => {
    const bytes = randomBytes(3 << 20)
    onAccept = (socket) => void writeInPieces(socket, bytes).then(() => socket.end())
    const stream = await nodeNetwork.connect('127.0.0.1', port)
    try {
      await new Promise((resolve) => setTimeout(resolve, 20))
      const chunks: Buffer[] = []
      await new Promise<void>((resolve) => {
        stream.onData((chunk) => chunks.push(chunk))
        stream.onClose(() => resolve())
      })
      assert.ok(Buffer.concat(chunks).equals(bytes))
      assert.throws(
        () =>
          stream.readFrames!(
            1024,
            () => {},
            () => {},
          ),
        /already read/,
      )
    } finally {
      stream.destroy()
    }
  })
})
