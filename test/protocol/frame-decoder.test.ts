import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { FrameDecoder, FrameError, FrameReader } from '../../src/protocol/frame-decoder.js'

function framed(payloads: readonly Buffer[]): Buffer {
  return Buffer.concat(
    payloads.flatMap((p) => {
      const size = Buffer.alloc(4)
      size.writeInt32BE(p.length)
      return [size, p]
    }),
  )
}

test('any split of a byte stream into chunks yields exactly the frames sent', () => {
  fc.assert(
    fc.property(
      fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 12 }),
      fc.array(fc.nat(), { maxLength: 20 }),
      (payloads, cuts) => {
        const frames = payloads.map((p) => Buffer.from(p))
        const stream = framed(frames)
        const points = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b)
        const decoder = new FrameDecoder(1024)
        const got: Buffer[] = []
        let from = 0
        for (const point of [...points, stream.length]) {
          // Copy each chunk so frames returned as views must not depend on later chunks.
          decoder.push(Buffer.from(stream.subarray(from, point)), (frame) => got.push(Buffer.from(frame)))
          from = point
        }
        assert.deepEqual(got, frames)
        assert.equal(decoder.bufferedBytes, 0)
      },
    ),
    { numRuns: 500, seed: 7 },
  )
})

test('sizes above the limit or negative are framing errors, even when split', () => {
  const decoder = new FrameDecoder(100)
  assert.throws(() => decoder.push(Buffer.from([0, 0, 0, 101]), () => {}), FrameError)
  const split = new FrameDecoder(100)
  split.push(Buffer.from([0xff, 0xff]), () => {})
  assert.throws(() => split.push(Buffer.from([0xff, 0xfe]), () => {}), FrameError)
})

/** Plays a socket: each read copies at most `size` bytes of the stream into the reader's next buffer. */
function readAll(reader: FrameReader, stream: Buffer, readSizes: readonly number[]): Buffer[] {
  const got: Buffer[] = []
  let at = 0
  for (let i = 0; at < stream.length; i++) {
    const into = reader.nextBuffer()
    assert.ok(into.length > 0, 'the reader always offers room to read into')
    const size = Math.max(1, readSizes.length === 0 ? into.length : readSizes[i % readSizes.length])
    const bytes = stream.copy(into, 0, at, Math.min(stream.length, at + size))
    at += bytes
    reader.onRead(bytes, (frame) => got.push(frame))
  }
  return got
}

test('FrameReader: any sequence of read sizes yields exactly the frames sent, each its own bytes', () => {
  fc.assert(
    fc.property(
      fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 12 }),
      fc.array(fc.integer({ min: 1, max: 400 }), { maxLength: 20 }),
      (payloads, readSizes) => {
        const frames = payloads.map((p) => Buffer.from(p))
        // A 64-byte scratch buffer: frames both smaller and larger than it, split anywhere.
        const reader = new FrameReader(1024, 64)
        const got = readAll(reader, framed(frames), readSizes)
        // Compared after every read: a frame that still pointed into the scratch buffer would have changed.
        assert.deepEqual(got, frames)
        assert.equal(reader.bufferedBytes, 0)
      },
    ),
    { numRuns: 500, seed: 11 },
  )
})

test('FrameReader: a frame larger than the scratch buffer is read in place, into the buffer it is handed out as', () => {
  const payload = Buffer.alloc(1000, 7)
  const reader = new FrameReader(4096, 64)
  const stream = framed([payload, Buffer.from('tail')])
  const targets = new Set<ArrayBufferLike>()
  let at = 0
  const got: Buffer[] = []
  while (at < stream.length) {
    const into = reader.nextBuffer()
    targets.add(into.buffer)
    const bytes = stream.copy(into, 0, at, Math.min(stream.length, at + 100))
    at += bytes
    reader.onRead(bytes, (frame) => got.push(frame))
  }
  assert.deepEqual(got, [payload, Buffer.from('tail')])
  assert.ok(targets.has(got[0].buffer), 'later reads of the large frame went straight into its buffer')
  assert.equal(got[0].byteLength, 1000)
})

test('FrameReader: sizes above the limit or negative are framing errors, even when split', () => {
  const reader = new FrameReader(100, 64)
  Buffer.from([0, 0, 0, 101]).copy(reader.nextBuffer())
  assert.throws(() => reader.onRead(4, () => {}), FrameError)
  const split = new FrameReader(100, 64)
  Buffer.from([0xff, 0xff]).copy(split.nextBuffer())
  split.onRead(2, () => {})
  Buffer.from([0xff, 0xfe]).copy(split.nextBuffer())
  assert.throws(() => split.onRead(2, () => {}), FrameError)
})
