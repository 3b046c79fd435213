import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { FrameDecoder, FrameError } from '../../src/protocol/frame-decoder.js'

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
