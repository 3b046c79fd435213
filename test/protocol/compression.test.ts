import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { describe, it } from 'node:test'
import zlib from 'node:zlib'
import fc from 'fast-check'
import * as lz4 from 'lz4-napi'
import * as snappy from 'snappy'
import { TidelogError } from '../../src/common/errors.js'
import { CompressionType } from '../../src/protocol/batch-header.js'
import {
  CorruptRecordError,
  compress,
  compressSync,
  decompress,
  decompressSync,
  hasSyncCodec,
  isXerialSnappy,
  withFixedLz4HeaderChecksum,
  xxh32Short,
} from '../../src/protocol/compression.js'

const CODECS = [
  CompressionType.None,
  CompressionType.Gzip,
  CompressionType.Snappy,
  CompressionType.Lz4,
  CompressionType.Zstd,
] as const
const COMPRESSING = CODECS.filter((type) => type !== CompressionType.None)

const WORDS = ['order', 'customer', 'amount', 'status', 'shipped', 'pending', 'id', 'ts', 'eur', 'sku']

/** JSON-ish text: repeated words and random digits, roughly 2-4x compressible, deterministic. */
function semiCompressible(bytes: number, seed = 1): Buffer {
  const out = Buffer.allocUnsafe(bytes)
  let state = seed
  const next = (): number => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0
    return state >>> 8
  }
  for (let at = 0; at < bytes; ) {
    at += out.write(`"${WORDS[next() % WORDS.length]}":${next() % 100000},`, at)
  }
  return out
}

async function assertCorrupt(promise: Promise<unknown>): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof CorruptRecordError, `expected CorruptRecordError, got ${String(error)}`)
    assert.equal(error.code, 'ERR_CORRUPT_RECORD')
    return true
  })
}

/** The reference tool's path; a missing tool fails the test (scripts/test.sh installs lz4 and zstd). */
function requireTool(path: string): string {
  if (!existsSync(path))
    throw new Error(`${path} is missing: install it (Debian packages lz4 and zstd; scripts/test.sh does)`)
  return path
}

describe('compression round trips', () => {
  for (const type of CODECS) {
    const name = CompressionType[type]
    it(`${name}: async round trip of empty, small and 1 MiB inputs`, async () => {
      for (const input of [Buffer.alloc(0), Buffer.from('hello kafka'), semiCompressible(1 << 20)]) {
        const packed = await compress(type, input)
        assert.deepEqual(await decompress(type, packed), input)
      }
    })

    if (hasSyncCodec(type)) {
      it(`${name}: sync and async produce the same bytes and read each other`, async () => {
        const input = semiCompressible(100_000, 7)
        const asyncPacked = await compress(type, input)
        const syncPacked = compressSync(type, input)
        assert.deepEqual(syncPacked, asyncPacked)
        assert.deepEqual(decompressSync(type, asyncPacked), input)
      })
    }
  }

  it('round trips random inputs with every codec (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 5000 }),
        fc.constantFrom(...CODECS),
        async (bytes, type) => {
          const input = Buffer.from(bytes)
          assert.deepEqual(await decompress(type, await compress(type, input)), input)
        },
      ),
      { numRuns: 200 },
    )
  })

  it('compresses semi-compressible data with every codec', async () => {
    const input = semiCompressible(1 << 16)
    for (const type of COMPRESSING) {
      const packed = await compress(type, input)
      assert.ok(packed.length < input.length, `${CompressionType[type]} did not shrink the input`)
    }
  })

  it('honours gzip and zstd levels', async () => {
    const input = semiCompressible(1 << 18)
    assert.ok(
      (await compress(CompressionType.Gzip, input, 9)).length <=
        (await compress(CompressionType.Gzip, input, 1)).length,
    )
    assert.ok(
      (await compress(CompressionType.Zstd, input, 19)).length <=
        (await compress(CompressionType.Zstd, input, 1)).length,
    )
  })

  it('refuses synchronous zstd as a programmer error', () => {
    assert.equal(hasSyncCodec(CompressionType.Zstd), false)
    assert.throws(() => compressSync(CompressionType.Zstd, Buffer.from('x')), { name: 'InvariantError' })
    assert.throws(() => decompressSync(CompressionType.Zstd, Buffer.from('x')), { name: 'InvariantError' })
  })
})

describe('snappy framing', () => {
  it('writes xerial framing with 32 KiB chunks, as the Java client does', async () => {
    const input = semiCompressible(100_000)
    const packed = await compress(CompressionType.Snappy, input)
    assert.ok(isXerialSnappy(packed))
    assert.deepEqual(packed.subarray(0, 16), Buffer.from('82534e41505059000000000100000001', 'hex'))
    // 100000 bytes = 4 chunks of at most 32 KiB
    let at = 16
    let chunks = 0
    while (at < packed.length) {
      const length = packed.readInt32BE(at)
      assert.ok(snappy.uncompressSync(packed.subarray(at + 4, at + 4 + length)).length <= 32 * 1024)
      at += 4 + length
      chunks++
    }
    assert.equal(chunks, 4)
  })

  it('reads raw snappy blocks (librdkafka style)', async () => {
    const input = semiCompressible(70_000)
    const raw = snappy.compressSync(input)
    assert.equal(isXerialSnappy(raw), false)
    assert.deepEqual(await decompress(CompressionType.Snappy, raw), input)
    assert.deepEqual(decompressSync(CompressionType.Snappy, raw), input)
  })

  it('reads hand-built xerial streams, concatenated streams included', async () => {
    const a = Buffer.from('first stream '.repeat(50))
    const b = Buffer.from('second stream '.repeat(50))
    const stream = (data: Buffer): Buffer => {
      const block = snappy.compressSync(data)
      const length = Buffer.alloc(4)
      length.writeInt32BE(block.length)
      return Buffer.concat([Buffer.from('82534e41505059000000000100000001', 'hex'), length, block])
    }
    assert.deepEqual(await decompress(CompressionType.Snappy, stream(a)), a)
    assert.deepEqual(
      await decompress(CompressionType.Snappy, Buffer.concat([stream(a), stream(b)])),
      Buffer.concat([a, b]),
    )
  })

  it('reports a truncated or overlong xerial chunk as corrupt', async () => {
    const packed = await compress(CompressionType.Snappy, semiCompressible(50_000))
    await assertCorrupt(decompress(CompressionType.Snappy, packed.subarray(0, packed.length - 5)))
    await assertCorrupt(decompress(CompressionType.Snappy, packed.subarray(0, 18)))
    const overlong = Buffer.from(packed)
    overlong.writeInt32BE(0x7fff0000, 16)
    await assertCorrupt(decompress(CompressionType.Snappy, overlong))
  })
})

describe('lz4 frames', () => {
  it('writes the LZ4 frame format with independent blocks and no content checksum', async () => {
    const packed = await compress(CompressionType.Lz4, semiCompressible(10_000))
    assert.equal(packed.readUInt32LE(0), 0x184d2204)
    assert.equal(packed[4], 0x60) // version 01, block independence, no checksums, no content size
    assert.equal(packed[5], 0x40) // 64 KiB maximum block size for small inputs
    const large = await compress(CompressionType.Lz4, semiCompressible(300_000))
    assert.ok([0x40, 0x50, 0x60, 0x70].includes(large[5]), 'a block size Kafka reads (64 KiB to 4 MiB)')
  })

  it('refuses a frame cut at a block boundary or before its EndMark (lz4-napi would return less)', async () => {
    const input = semiCompressible(300_000, 9)
    const frames = [await compress(CompressionType.Lz4, input)]
    // 64 KiB blocks, so the frame has several block boundaries to cut at
    frames.push(
      execFileSync(requireTool('/usr/bin/lz4'), ['-c', '-B4', '-BI'], {
        input,
        stdio: ['pipe', 'pipe', 'ignore'],
      }),
    )
    for (const frame of frames) {
      const boundaries = [7]
      for (let at = 7; frame.readUInt32LE(at) !== 0; at += 4 + (frame.readUInt32LE(at) & 0x7fffffff)) {
        boundaries.push(at + 4 + (frame.readUInt32LE(at) & 0x7fffffff))
      }
      for (const cut of boundaries) {
        await assertCorrupt(decompress(CompressionType.Lz4, frame.subarray(0, cut)))
        assert.throws(() => decompressSync(CompressionType.Lz4, frame.subarray(0, cut)), CorruptRecordError)
      }
    }
  })

  it('xxh32 matches the reference vectors and lz4 frame header checksums', () => {
    assert.equal(xxh32Short(Buffer.alloc(0), 0, 0), 0x02cc5d05)
    assert.equal(xxh32Short(Buffer.from('a'), 0, 1), 0x550d7456)
    assert.equal(xxh32Short(Buffer.from('abc'), 0, 3), 0x32d153ff)
    for (const options of [{}, { contentChecksum: true }, { blockChecksums: true }]) {
      const frame = lz4.compressFrameSync(Buffer.from('some data'), options)
      assert.equal((xxh32Short(frame, 4, 2) >>> 8) & 0xff, frame[6])
    }
  })

  it('decodes magic-0 frames with the KAFKA-3160 header checksum only when asked', async () => {
    const input = semiCompressible(20_000)
    const frame = Buffer.from(lz4.compressFrameSync(input))
    // The pre-0.10 Java client hashed the 4 magic bytes together with FLG and BD.
    frame[6] = (xxh32Short(frame, 0, 6) >>> 8) & 0xff
    assert.notEqual(
      frame[6],
      (xxh32Short(frame, 4, 2) >>> 8) & 0xff,
      'pick data where the two checksums differ',
    )
    await assertCorrupt(decompress(CompressionType.Lz4, frame))
    assert.deepEqual(await decompress(CompressionType.Lz4, frame, { ignoreLz4HeaderChecksum: true }), input)
    assert.deepEqual(decompressSync(CompressionType.Lz4, frame, { ignoreLz4HeaderChecksum: true }), input)
    assert.equal(frame[6], (xxh32Short(frame, 0, 6) >>> 8) & 0xff, 'the input buffer is left alone')
    assert.deepEqual(withFixedLz4HeaderChecksum(Buffer.from('short')), Buffer.from('short'))
  })

  it('reads frames from the reference lz4 tool (content size, content checksum, linked blocks)', async () => {
    const input = semiCompressible(300_000, 3)
    for (const flags of [[], ['--content-size'], ['-BD'], ['--no-frame-crc', '-B4']]) {
      const frame = execFileSync(requireTool('/usr/bin/lz4'), ['-c', ...flags], {
        input,
        stdio: ['pipe', 'pipe', 'ignore'],
      })
      assert.deepEqual(await decompress(CompressionType.Lz4, frame), input, `lz4 ${flags.join(' ')}`)
      assert.deepEqual(
        await decompress(CompressionType.Lz4, frame, { ignoreLz4HeaderChecksum: true }),
        input,
        `lz4 ${flags.join(' ')} with the header checksum recomputed`,
      )
    }
  })
})

describe('zstd frames', () => {
  it('reads streamed frames without a content size and concatenated frames (zstd tool)', async () => {
    const input = semiCompressible(200_000, 5)
    const frame = execFileSync(requireTool('/usr/bin/zstd'), ['-c', '-q'], {
      input,
      stdio: ['pipe', 'pipe', 'ignore'],
    })
    assert.deepEqual(await decompress(CompressionType.Zstd, frame), input)
    assert.deepEqual(
      await decompress(CompressionType.Zstd, Buffer.concat([frame, frame])),
      Buffer.concat([input, input]),
    )
  })
})

describe('corrupt compressed data', () => {
  for (const type of COMPRESSING) {
    const name = CompressionType[type]
    it(`${name}: garbage, truncation and bit flips give CorruptRecordError, never a crash`, async () => {
      const packed = await compress(type, semiCompressible(50_000))
      await assertCorrupt(decompress(type, Buffer.from('definitely not compressed data')))
      await assertCorrupt(decompress(type, packed.subarray(0, Math.floor(packed.length / 2))))
      for (let i = 0; i < 200; i++) {
        const flipped = Buffer.from(packed)
        flipped[(i * 7919) % flipped.length] ^= 1 << (i % 8)
        try {
          await decompress(type, flipped)
        } catch (error) {
          // Some flips still decode (snappy and lz4 have no checksum); the rest must be typed.
          assert.ok(error instanceof CorruptRecordError, `${name}: ${String(error)}`)
        }
      }
      if (hasSyncCodec(type)) {
        assert.throws(() => decompressSync(type, packed.subarray(0, 10)), CorruptRecordError)
      }
    })
  }

  it('decodes random garbage with every codec without crashing (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 300 }),
        fc.constantFrom(...COMPRESSING),
        async (bytes, type) => {
          try {
            await decompress(type, Buffer.from(bytes))
          } catch (error) {
            assert.ok(error instanceof TidelogError && error.code === 'ERR_CORRUPT_RECORD', String(error))
          }
        },
      ),
      { numRuns: 300 },
    )
  })

  it('refuses an unknown codec id as corrupt', async () => {
    await assertCorrupt(decompress(6 as CompressionType, Buffer.from('x')))
  })

  it('stops decompression bombs at maxOutputBytes', async () => {
    const zeros = Buffer.alloc(8 << 20)
    const options = { maxOutputBytes: 1 << 20 }
    await assertCorrupt(decompress(CompressionType.Gzip, zlib.gzipSync(zeros), options))
    assert.throws(
      () => decompressSync(CompressionType.Gzip, zlib.gzipSync(zeros), options),
      CorruptRecordError,
    )
    await assertCorrupt(decompress(CompressionType.Snappy, snappy.compressSync(zeros), options))
    await assertCorrupt(
      decompress(CompressionType.Snappy, await compress(CompressionType.Snappy, zeros), options),
    )
    await assertCorrupt(decompress(CompressionType.Lz4, lz4.compressFrameSync(zeros), options))
    await assertCorrupt(
      decompress(CompressionType.Zstd, await compress(CompressionType.Zstd, zeros), options),
    )
  })
})
