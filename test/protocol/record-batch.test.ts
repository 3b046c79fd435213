import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { describe, it } from 'node:test'
import zlib from 'node:zlib'
import fc from 'fast-check'
import * as lz4 from 'lz4-napi'
import { TidelogError } from '../../src/common/errors.js'
import {
  ATTRIBUTES_OFFSET,
  CompressionType,
  CRC_OFFSET,
  MAGIC_OFFSET,
  RECORD_BATCH_OVERHEAD,
  TimestampType,
} from '../../src/protocol/batch-header.js'
import { compress, xxh32Short } from '../../src/protocol/compression.js'
import { crc32c } from '../../src/protocol/crc32c.js'
import {
  assignOffsets,
  CorruptRecordError,
  convertLegacyToV2,
  decodeLegacyMessageSet,
  decodeRecordBatch,
  decodeRecordBatchSync,
  decodeRecords,
  type EncodeRecordBatchOptions,
  encodeRecordBatch,
  encodeRecordBatchSync,
  InvalidRecordError,
  isLegacyMagic,
  type RecordInput,
  readBatchHeader,
  setLogAppendTime,
  splitBatches,
  validateRecordBatch,
} from '../../src/protocol/record-batch.js'
import { KafkaError } from '../../src/replication/kafka-error.js'
import { checkProducerBatches } from '../../src/replication/producer-batch-checks.js'

const require = createRequire(import.meta.url)

const CODECS = [
  CompressionType.None,
  CompressionType.Gzip,
  CompressionType.Snappy,
  CompressionType.Lz4,
  CompressionType.Zstd,
] as const
const T0 = 1_700_000_000_000

function sampleRecords(count: number, valueBytes = 20): RecordInput[] {
  const records: RecordInput[] = []
  for (let i = 0; i < count; i++) {
    records.push({
      key: i % 3 === 0 ? null : Buffer.from(`key-${i}`),
      value: i % 5 === 4 ? null : Buffer.alloc(valueBytes, `value-${i}|`),
      headers:
        i % 2 === 0
          ? []
          : [
              { key: 'trace-id', value: Buffer.from(`t${i}`) },
              { key: 'ünïcode', value: null },
              { key: 'trace-id', value: Buffer.from('duplicate keys are allowed') },
            ],
      // not monotonic: deltas may be negative
      timestamp: T0 + ((i * 37) % 11) - 5,
    })
  }
  return records
}

function assertRecordsMatch(
  decoded: Awaited<ReturnType<typeof decodeRecordBatch>>,
  input: RecordInput[],
  baseOffset: number,
): void {
  assert.equal(decoded.records.length, input.length)
  decoded.records.forEach((record, i) => {
    assert.equal(record.offset, baseOffset + (input[i].offsetDelta ?? i))
    assert.equal(record.timestamp, input[i].timestamp)
    assert.deepEqual(record.key, input[i].key ?? null)
    assert.deepEqual(record.value, input[i].value)
    const headers = (input[i].headers ?? []).map((h) => ({ key: h.key, value: h.value }))
    assert.deepEqual(record.headers, headers)
  })
}

function assertRejectsTyped(promise: Promise<unknown>): Promise<void> {
  return assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof TidelogError, `expected a TidelogError, got ${String(error)}`)
    assert.ok(error.code === 'ERR_CORRUPT_RECORD' || error.code === 'ERR_INVALID_RECORD', error.code)
    return true
  })
}

/** Rewrites the CRC after a test has tampered with the batch, to get past validation. */
function fixCrc(batch: Buffer): void {
  batch.writeUInt32BE(crc32c(batch.subarray(ATTRIBUTES_OFFSET)), CRC_OFFSET)
}

describe('encode and decode round trips', () => {
  for (const compression of CODECS) {
    it(`${CompressionType[compression]}: records with null keys and values, headers and timestamps`, async () => {
      const records = sampleRecords(25)
      const batch = await encodeRecordBatch({ records, compression, baseOffset: 1000 })
      assert.equal(validateRecordBatch(batch).ok, true)
      assert.doesNotThrow(() => checkProducerBatches(batch, 'client'))
      const decoded = await decodeRecordBatch(batch)
      assert.equal(decoded.compression, compression)
      assert.equal(decoded.magic, 2)
      assert.equal(decoded.sizeInBytes, batch.length)
      assert.equal(decoded.recordsCount, 25)
      assert.equal(decoded.lastOffsetDelta, 24)
      assert.equal(decoded.baseTimestamp, records[0].timestamp)
      assert.equal(decoded.maxTimestamp, Math.max(...records.map((r) => r.timestamp as number)))
      assert.equal(decoded.partitionLeaderEpoch, -1)
      assert.equal(decoded.producerId, -1n)
      assert.equal(decoded.producerEpoch, -1)
      assert.equal(decoded.baseSequence, -1)
      assert.equal(decoded.timestampType, TimestampType.CreateTime)
      assertRecordsMatch(decoded, records, 1000)
    })

    it(`${CompressionType[compression]}: a 1 MiB value`, async () => {
      const big = Buffer.alloc(1 << 20)
      for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff
      const records = [
        { key: Buffer.from('k'), value: big, timestamp: T0 },
        { value: Buffer.from('small'), timestamp: T0 },
      ]
      const decoded = await decodeRecordBatch(await encodeRecordBatch({ records, compression }))
      assertRecordsMatch(decoded, records, 0)
    })

    it(`${CompressionType[compression]}: an empty batch has no records section`, async () => {
      const batch = await encodeRecordBatch({ records: [], compression, defaultTimestamp: T0 })
      assert.equal(batch.length, RECORD_BATCH_OVERHEAD)
      const decoded = await decodeRecordBatch(batch)
      assert.equal(decoded.records.length, 0)
      assert.equal(decoded.baseTimestamp, T0)
      assert.equal(decoded.maxTimestamp, -1)
      assert.equal(validateRecordBatch(batch).ok, true)
      assert.throws(() => checkProducerBatches(batch, 'client'), KafkaError, 'a produced batch needs records')
    })
  }

  it('sync and async encoders produce identical bytes for every sync codec', async () => {
    for (const compression of [
      CompressionType.None,
      CompressionType.Gzip,
      CompressionType.Snappy,
      CompressionType.Lz4,
    ]) {
      const opts = { records: sampleRecords(40), compression }
      const syncBatch = encodeRecordBatchSync(opts)
      assert.deepEqual(syncBatch, await encodeRecordBatch(opts))
      assert.deepEqual(decodeRecordBatchSync(syncBatch), await decodeRecordBatch(syncBatch))
    }
    const zstdBatch = await encodeRecordBatch({
      records: sampleRecords(3),
      compression: CompressionType.Zstd,
    })
    assert.throws(() => decodeRecordBatchSync(zstdBatch), InvalidRecordError)
  })

  it('keeps producer, transactional and control fields', async () => {
    const opts: EncodeRecordBatchOptions = {
      records: [{ key: Buffer.from([0, 0, 0, 1]), value: Buffer.from([0, 0, 0, 0, 0, 7]), timestamp: T0 }],
      baseOffset: 2 ** 40,
      partitionLeaderEpoch: 17,
      producerId: 123_456_789_012n,
      producerEpoch: 3,
      baseSequence: 42,
      isTransactional: true,
      isControl: true,
    }
    const decoded = await decodeRecordBatch(await encodeRecordBatch(opts))
    assert.equal(decoded.baseOffset, 2 ** 40)
    assert.equal(decoded.records[0].offset, 2 ** 40)
    assert.equal(decoded.partitionLeaderEpoch, 17)
    assert.equal(decoded.producerId, 123_456_789_012n)
    assert.equal(decoded.producerEpoch, 3)
    assert.equal(decoded.baseSequence, 42)
    assert.equal(decoded.isTransactional, true)
    assert.equal(decoded.isControl, true)
    assert.equal(decoded.attributes, 0x30)
  })

  it('keeps the offset gaps and range of a compacted batch', async () => {
    const records = [
      { value: Buffer.from('a'), offsetDelta: 0, timestamp: T0 },
      { value: Buffer.from('b'), offsetDelta: 5, timestamp: T0 + 1 },
      { value: Buffer.from('c'), offsetDelta: 9, timestamp: T0 + 2 },
    ]
    const batch = await encodeRecordBatch({ records, baseOffset: 100, lastOffsetDelta: 12 })
    const decoded = await decodeRecordBatch(batch)
    assert.deepEqual(
      decoded.records.map((r) => r.offset),
      [100, 105, 109],
    )
    assert.equal(decoded.lastOffsetDelta, 12)
    assert.equal(validateRecordBatch(batch).ok, true)
    assert.throws(() => checkProducerBatches(batch, 'client'), KafkaError, 'a producer sends no offset gaps')
  })

  it('uses defaultTimestamp for records without one and refuses out-of-order offset deltas', async () => {
    const decoded = await decodeRecordBatch(
      encodeRecordBatchSync({ records: [{ value: null }], defaultTimestamp: T0 }),
    )
    assert.equal(decoded.records[0].timestamp, T0)
    assert.throws(() => encodeRecordBatchSync({ records: [{ value: null }] }), { name: 'InvariantError' })
    const unordered = [
      { value: null, offsetDelta: 2, timestamp: T0 },
      { value: null, offsetDelta: 2, timestamp: T0 },
    ]
    assert.throws(() => encodeRecordBatchSync({ records: unordered }), { name: 'InvariantError' })
  })

  it('round trips random batches (property)', async () => {
    await fc.assert(
      fc.asyncProperty(arbitraryBatchOptions(), async (opts) => {
        const decoded = await decodeRecordBatch(await encodeRecordBatch(opts))
        assertRecordsMatch(decoded, opts.records as RecordInput[], opts.baseOffset ?? 0)
      }),
      { numRuns: 150 },
    )
  })
})

function arbitraryBatchOptions(): fc.Arbitrary<EncodeRecordBatchOptions> {
  const bytes = (maxLength: number) => fc.uint8Array({ maxLength }).map((a) => Buffer.from(a))
  const header = fc.record({ key: fc.string({ maxLength: 10 }), value: fc.option(bytes(10), { nil: null }) })
  const record = fc.record({
    key: fc.option(bytes(30), { nil: null }),
    value: fc.option(bytes(200), { nil: null }),
    headers: fc.array(header, { maxLength: 3 }),
    timestamp: fc.integer({ min: T0 - 1_000_000, max: T0 + 1_000_000 }),
  })
  return fc.record({
    records: fc.array(record, { minLength: 1, maxLength: 8 }),
    compression: fc.constantFrom(...CODECS),
    baseOffset: fc.integer({ min: 0, max: 2 ** 50 }),
  })
}

describe('validateRecordBatch', () => {
  it('detects every single-bit flip of a batch, except in the fields the CRC leaves out', async () => {
    const batch = await encodeRecordBatch({ records: sampleRecords(4), compression: CompressionType.Gzip })
    for (let bit = 0; bit < batch.length * 8; bit++) {
      const byte = bit >> 3
      batch[byte] ^= 1 << (bit & 7)
      const result = validateRecordBatch(batch)
      batch[byte] ^= 1 << (bit & 7)
      const uncovered = byte < 8 || (byte >= 12 && byte < 16) // baseOffset, partitionLeaderEpoch
      if (uncovered) {
        assert.equal(result.ok, true, `bit ${bit}`)
        continue
      }
      assert.equal(result.ok, false, `bit ${bit} went unnoticed`)
      if (byte === MAGIC_OFFSET) assert.equal(result.reason, 'unsupported-magic')
      if (byte >= CRC_OFFSET) assert.equal(result.reason, 'corrupt', `bit ${bit}`)
    }
  })

  it('detects a single-bit flip in the CRC-covered bytes of random batches (property)', async () => {
    await fc.assert(
      fc.asyncProperty(arbitraryBatchOptions(), fc.nat(), async (opts, seed) => {
        const batch = await encodeRecordBatch(opts)
        const covered = batch.length - CRC_OFFSET
        const bit = CRC_OFFSET * 8 + (seed % (covered * 8))
        batch[bit >> 3] ^= 1 << (bit & 7)
        const result = validateRecordBatch(batch)
        assert.equal(result.ok, false)
        assert.equal(result.reason, 'corrupt')
      }),
      { numRuns: 300 },
    )
  })

  it('reports truncation at every byte as invalid or partial, never a throw', async () => {
    const first = await encodeRecordBatch({ records: sampleRecords(3), compression: CompressionType.Lz4 })
    const second = await encodeRecordBatch({ records: sampleRecords(5), baseOffset: 3 })
    for (let length = 0; length < second.length; length++) {
      const cut = second.subarray(0, length)
      const result = validateRecordBatch(cut)
      assert.equal(result.ok, false)
      assert.equal(result.reason, 'invalid', `length ${length}`)
      await assertRejectsTyped(decodeRecordBatch(cut))
      const blob = Buffer.concat([first, cut])
      const split = splitBatches(blob)
      assert.equal(split.batches.length, 1)
      assert.equal(split.validBytes, first.length)
      if (length === 0) {
        assert.deepEqual(split.tail, { kind: 'complete' })
      } else {
        assert.equal(split.tail.kind, 'partial', `length ${length}`)
        assert.equal(split.tail.kind === 'partial' && split.tail.availableBytes, length)
      }
    }
  })

  it('refuses impossible lengths, legacy magic, unknown codecs and inconsistent counts', async () => {
    const good = await encodeRecordBatch({ records: sampleRecords(3) })
    const short = Buffer.from(good)
    short.writeInt32BE(20, 8)
    assert.deepEqual(pick(validateRecordBatch(short)), { ok: false, reason: 'invalid' })
    const legacy = Buffer.from(good)
    legacy[MAGIC_OFFSET] = 1
    assert.deepEqual(pick(validateRecordBatch(legacy)), { ok: false, reason: 'unsupported-magic' })
    const codec = Buffer.from(good)
    codec.writeInt16BE(6, ATTRIBUTES_OFFSET)
    fixCrc(codec)
    assert.deepEqual(pick(validateRecordBatch(codec)), { ok: false, reason: 'invalid' })
    const count = Buffer.from(good)
    count.writeInt32BE(4, 57)
    fixCrc(count)
    assert.deepEqual(pick(validateRecordBatch(count)), { ok: false, reason: 'invalid' })
    count.writeInt32BE(-1, 57)
    fixCrc(count)
    assert.deepEqual(pick(validateRecordBatch(count)), { ok: false, reason: 'invalid' })
    const control = await encodeRecordBatch({ records: sampleRecords(1), isControl: true })
    assert.equal(validateRecordBatch(control).ok, true)
    assert.throws(() => checkProducerBatches(control, 'client'), KafkaError, 'no control batch from a client')
  })

  it('validates a batch in the middle of a larger buffer', async () => {
    const batch = await encodeRecordBatch({ records: sampleRecords(2) })
    const blob = Buffer.concat([Buffer.alloc(33, 9), batch, Buffer.alloc(5)])
    const result = validateRecordBatch(blob, 33)
    assert.equal(result.ok, true)
    assert.equal(result.ok && result.sizeInBytes, batch.length)
    assert.equal(result.ok && result.header.recordsCount, 2)
  })
})

function pick(result: ReturnType<typeof validateRecordBatch>): { ok: boolean; reason?: string } {
  return result.ok ? { ok: true } : { ok: false, reason: result.reason }
}

describe('decoding bad bytes behind a valid CRC', () => {
  for (const compression of CODECS) {
    it(`${CompressionType[compression]}: garbage records give CorruptRecordError, never a crash`, async () => {
      const batch = await encodeRecordBatch({ records: sampleRecords(6), compression })
      for (
        let i = RECORD_BATCH_OVERHEAD;
        i < batch.length;
        i += Math.max(1, (batch.length - RECORD_BATCH_OVERHEAD) >> 5)
      ) {
        const bad = Buffer.from(batch)
        bad[i] ^= 0xff
        fixCrc(bad)
        try {
          await decodeRecordBatch(bad)
        } catch (error) {
          assert.ok(error instanceof CorruptRecordError || error instanceof InvalidRecordError, String(error))
        }
      }
      const wrongCount = Buffer.from(batch)
      wrongCount.writeInt32BE(5, 57)
      fixCrc(wrongCount)
      await assert.rejects(decodeRecordBatch(wrongCount), CorruptRecordError)
    })
  }

  it('decodes random record sections without crashing (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 200 }),
        fc.integer({ min: 0, max: 30 }),
        fc.constantFrom(...CODECS),
        async (section, count, compression) => {
          const batch = Buffer.concat([
            await encodeRecordBatch({ records: [], compression, defaultTimestamp: T0 }),
            section,
          ])
          batch.writeInt32BE(batch.length - 12, 8)
          batch.writeInt32BE(count, 57)
          batch.writeInt32BE(Math.max(count - 1, 0), 23)
          fixCrc(batch)
          try {
            await decodeRecordBatch(batch)
          } catch (error) {
            assert.ok(error instanceof TidelogError, String(error))
          }
        },
      ),
      { numRuns: 500 },
    )
  })

  it('refuses a record whose declared length disagrees with its fields', async () => {
    const batch = encodeRecordBatchSync({ records: [{ value: Buffer.from('abc'), timestamp: T0 }] })
    const data = Buffer.from(batch.subarray(RECORD_BATCH_OVERHEAD))
    data[0] += 2 // zigzag length + 1
    assert.throws(() => decodeRecords(Buffer.concat([data, Buffer.alloc(1)]), 1), CorruptRecordError)
  })
})

describe('in-place rewrites', () => {
  it('assignOffsets rewrites the base offset without touching the CRC', async () => {
    const batch = await encodeRecordBatch({ records: sampleRecords(7), compression: CompressionType.Snappy })
    const crc = batch.readUInt32BE(CRC_OFFSET)
    const blob = Buffer.concat([Buffer.alloc(10), batch])
    assert.equal(assignOffsets(blob, 10, 5_000_000_000), 5_000_000_007)
    assert.equal(blob.readUInt32BE(10 + CRC_OFFSET), crc)
    assert.equal(validateRecordBatch(blob, 10).ok, true)
    const decoded = await decodeRecordBatch(blob, 10)
    assert.deepEqual(
      decoded.records.map((r) => r.offset),
      [0, 1, 2, 3, 4, 5, 6].map((d) => 5_000_000_000 + d),
    )
  })

  it('setLogAppendTime sets the type bit and maxTimestamp, keeps other flags and fixes the CRC', async () => {
    const batch = await encodeRecordBatch({
      records: sampleRecords(4),
      compression: CompressionType.Zstd,
      isTransactional: true,
    })
    setLogAppendTime(batch, 0, T0 + 99_999)
    assert.equal(validateRecordBatch(batch).ok, true)
    const decoded = await decodeRecordBatch(batch)
    assert.equal(decoded.timestampType, TimestampType.LogAppendTime)
    assert.equal(decoded.maxTimestamp, T0 + 99_999)
    assert.equal(decoded.isTransactional, true)
    assert.equal(decoded.compression, CompressionType.Zstd)
    assert.ok(decoded.records.every((r) => r.timestamp === T0 + 99_999))
  })

  it('refuses rewrites of non-v2 bytes as programmer errors', () => {
    const legacy = Buffer.alloc(RECORD_BATCH_OVERHEAD)
    assert.throws(() => assignOffsets(legacy, 0, 1), { name: 'InvariantError' })
    assert.throws(() => setLogAppendTime(legacy, 0, T0), { name: 'InvariantError' })
  })
})

describe('splitBatches', () => {
  it('splits concatenated batches and reports a complete blob', async () => {
    const batches = await Promise.all(
      CODECS.map((compression, i) => encodeRecordBatch({ records: sampleRecords(i + 1), compression })),
    )
    const blob = Buffer.concat(batches)
    const split = splitBatches(blob)
    assert.deepEqual(split.tail, { kind: 'complete' })
    assert.equal(split.validBytes, blob.length)
    let at = 0
    split.batches.forEach((span, i) => {
      assert.deepEqual(span, { at, sizeInBytes: batches[i].length, magic: 2 })
      assert.equal(validateRecordBatch(blob, span.at).ok, true)
      at += span.sizeInBytes
    })
    assert.deepEqual(splitBatches(Buffer.alloc(0)), {
      batches: [],
      validBytes: 0,
      tail: { kind: 'complete' },
    })
  })

  it('stops at an impossible length and reports where', async () => {
    const batch = await encodeRecordBatch({ records: sampleRecords(1) })
    const bad = Buffer.alloc(RECORD_BATCH_OVERHEAD)
    bad.writeInt32BE(3, 8)
    const split = splitBatches(Buffer.concat([batch, bad, batch]))
    assert.equal(split.batches.length, 1)
    assert.equal(split.tail.kind, 'invalid')
    assert.equal(split.tail.kind === 'invalid' && split.tail.at, batch.length)
  })
})

// ---- legacy message sets, built by hand from Kafka's documented format ------------------------

interface LegacySpec {
  magic: 0 | 1
  attributes?: number
  timestamp?: number
  key: Buffer | null
  value: Buffer | null
}

function nullableBytes(value: Buffer | null): Buffer {
  const length = Buffer.alloc(4)
  length.writeInt32BE(value === null ? -1 : value.length)
  return value === null ? length : Buffer.concat([length, value])
}

/** crc uint32 | magic | attributes | [timestamp] | key | value, CRC-32 (IEEE) from node:zlib. */
function legacyMessage(spec: LegacySpec): Buffer {
  const head = Buffer.alloc(spec.magic === 1 ? 10 : 2)
  head.writeInt8(spec.magic, 0)
  head.writeInt8(spec.attributes ?? 0, 1)
  if (spec.magic === 1) head.writeBigInt64BE(BigInt(spec.timestamp ?? -1), 2)
  const body = Buffer.concat([head, nullableBytes(spec.key), nullableBytes(spec.value)])
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(zlib.crc32(body))
  return Buffer.concat([crc, body])
}

function legacyEntry(offset: number, message: Buffer): Buffer {
  const head = Buffer.alloc(12)
  head.writeBigInt64BE(BigInt(offset), 0)
  head.writeInt32BE(message.length, 8)
  return Buffer.concat([head, message])
}

function legacySet(magic: 0 | 1, count: number, firstOffset = 0): Buffer {
  const entries: Buffer[] = []
  for (let i = 0; i < count; i++) {
    const key = i % 2 === 0 ? Buffer.from(`k${i}`) : null
    const value = i === 2 ? null : Buffer.from(`legacy value ${i}`)
    entries.push(legacyEntry(firstOffset + i, legacyMessage({ magic, timestamp: T0 + i, key, value })))
  }
  return Buffer.concat(entries)
}

async function wrapper(
  magic: 0 | 1,
  codec: CompressionType,
  inner: Buffer,
  offset: number,
  attributes = 0,
): Promise<Buffer> {
  const value = await compress(codec, inner)
  return legacyEntry(
    offset,
    legacyMessage({ magic, attributes: codec | attributes, timestamp: T0 + 500, key: null, value }),
  )
}

describe('legacy message sets', () => {
  it('decodes plain v0 and v1 sets and converts them to v2', async () => {
    for (const magic of [0, 1] as const) {
      const set = legacySet(magic, 4)
      assert.equal(isLegacyMagic(set), true)
      const decoded = await decodeLegacyMessageSet(set)
      assert.equal(decoded.partialBytes, 0)
      assert.equal(decoded.compression, CompressionType.None)
      assert.deepEqual(
        decoded.messages.map((m) => m.offset),
        [0, 1, 2, 3],
      )
      assert.deepEqual(
        decoded.messages.map((m) => m.timestamp),
        magic === 1 ? [T0, T0 + 1, T0 + 2, T0 + 3] : [-1, -1, -1, -1],
      )
      assert.equal(decoded.messages[2].value, null)
      assert.equal(decoded.messages[1].key, null)
      assert.deepEqual(decoded.messages[0].key, Buffer.from('k0'))

      const v2 = await convertLegacyToV2(set, { baseOffset: 50 })
      assert.equal(isLegacyMagic(v2), false)
      assert.equal(validateRecordBatch(v2).ok, true)
      assert.doesNotThrow(() => checkProducerBatches(v2, 'client'))
      const batch = await decodeRecordBatch(v2)
      assert.deepEqual(
        batch.records.map((r) => r.offset),
        [50, 51, 52, 53],
      )
      assert.deepEqual(
        batch.records.map((r) => r.value),
        decoded.messages.map((m) => m.value),
      )
      assert.deepEqual(
        batch.records.map((r) => r.key),
        decoded.messages.map((m) => m.key),
      )
      assert.deepEqual(
        batch.records.map((r) => r.timestamp),
        decoded.messages.map((m) => m.timestamp),
      )
    }
  })

  for (const codec of [CompressionType.Gzip, CompressionType.Snappy, CompressionType.Lz4]) {
    it(`expands ${CompressionType[codec]} wrappers (v0 absolute, v1 relative inner offsets) and keeps the codec`, async () => {
      const v0 = await decodeLegacyMessageSet(await wrapper(0, codec, legacySet(0, 3, 10), 12))
      assert.deepEqual(
        v0.messages.map((m) => m.offset),
        [10, 11, 12],
      )
      assert.equal(v0.compression, codec)
      // magic 1: inner offsets 0..2 are relative; the wrapper holds the last absolute offset
      const v1 = await decodeLegacyMessageSet(await wrapper(1, codec, legacySet(1, 3), 102))
      assert.deepEqual(
        v1.messages.map((m) => m.offset),
        [100, 101, 102],
      )
      assert.deepEqual(
        v1.messages.map((m) => m.timestamp),
        [T0, T0 + 1, T0 + 2],
      )
      const converted = await decodeRecordBatch(
        await convertLegacyToV2(await wrapper(1, codec, legacySet(1, 3), 2)),
      )
      assert.equal(converted.compression, codec)
      assert.deepEqual(
        converted.records.map((r) => r.value),
        v1.messages.map((m) => m.value),
      )
    })
  }

  it('gives inner messages of a LogAppendTime wrapper the wrapper timestamp', async () => {
    const decoded = await decodeLegacyMessageSet(
      await wrapper(1, CompressionType.Gzip, legacySet(1, 2), 1, 0x08),
    )
    assert.deepEqual(
      decoded.messages.map((m) => m.timestamp),
      [T0 + 500, T0 + 500],
    )
    assert.ok(decoded.messages.every((m) => m.timestampType === TimestampType.LogAppendTime))
  })

  it('reads magic-0 lz4 wrappers with the broken KAFKA-3160 header checksum', async () => {
    const frame = Buffer.from(lz4.compressFrameSync(legacySet(0, 3)))
    frame[6] = (xxh32Short(frame, 0, 6) >>> 8) & 0xff // hashed with the magic number, as 0.8-0.9 clients did
    const entry = legacyEntry(
      2,
      legacyMessage({ magic: 0, attributes: CompressionType.Lz4, key: null, value: frame }),
    )
    const decoded = await decodeLegacyMessageSet(entry)
    assert.equal(decoded.messages.length, 3)
    // The same frame in a magic-1 wrapper must have a correct checksum.
    const v1 = legacyEntry(
      2,
      legacyMessage({ magic: 1, attributes: CompressionType.Lz4, timestamp: T0, key: null, value: frame }),
    )
    await assert.rejects(decodeLegacyMessageSet(v1), CorruptRecordError)
  })

  it('reports a trailing partial message, and refuses to convert it', async () => {
    const set = legacySet(1, 3)
    const cut = set.subarray(0, set.length - 4)
    const decoded = await decodeLegacyMessageSet(cut)
    assert.equal(decoded.messages.length, 2)
    assert.equal(decoded.partialBytes, cut.length - decoded.validBytes)
    assert.ok(decoded.partialBytes > 0)
    await assert.rejects(convertLegacyToV2(cut), CorruptRecordError)
    assert.equal((await convertLegacyToV2(Buffer.alloc(0))).length, 0)
  })

  it('refuses bad CRCs, nested compression, zstd, mixed magic and null wrapper values', async () => {
    // Offsets and sizes sit outside the CRC (as in Kafka): flip bytes of the messages only.
    const set = legacySet(0, 2)
    for (const span of splitBatches(set).batches) {
      for (let i = span.at + 12; i < span.at + span.sizeInBytes; i++) {
        const bad = Buffer.from(set)
        bad[i] ^= 0x10
        await assertRejectsTyped(decodeLegacyMessageSet(bad))
      }
    }
    const nested = await wrapper(
      1,
      CompressionType.Gzip,
      await wrapper(1, CompressionType.Gzip, legacySet(1, 1), 0),
      0,
    )
    await assert.rejects(decodeLegacyMessageSet(nested), InvalidRecordError)
    const zstd = legacyEntry(
      0,
      legacyMessage({ magic: 1, attributes: CompressionType.Zstd, key: null, value: Buffer.from('x') }),
    )
    await assert.rejects(decodeLegacyMessageSet(zstd), InvalidRecordError)
    await assert.rejects(
      decodeLegacyMessageSet(await wrapper(1, CompressionType.Gzip, legacySet(0, 2), 1)),
      InvalidRecordError,
    )
    const nullValue = legacyEntry(
      0,
      legacyMessage({ magic: 0, attributes: CompressionType.Gzip, key: null, value: null }),
    )
    await assert.rejects(decodeLegacyMessageSet(nullValue), InvalidRecordError)
    const corruptGzip = legacyEntry(
      0,
      legacyMessage({
        magic: 0,
        attributes: CompressionType.Gzip,
        key: null,
        value: Buffer.from('not gzip'),
      }),
    )
    await assert.rejects(decodeLegacyMessageSet(corruptGzip), CorruptRecordError)
    const v2 = await encodeRecordBatch({ records: sampleRecords(1) })
    await assert.rejects(decodeLegacyMessageSet(Buffer.concat([set, v2])), InvalidRecordError)
  })

  it('splitBatches walks legacy entries too', () => {
    const split = splitBatches(legacySet(1, 3))
    assert.deepEqual(
      split.batches.map((b) => b.magic),
      [1, 1, 1],
    )
    assert.deepEqual(split.tail, { kind: 'complete' })
  })
})

// ---- cross-checks with kafkajs's own encoders and decoders --------------------------------------

interface KafkajsEncoder {
  buffer: Buffer
}
const kafkajs = {
  RecordBatch: require('kafkajs/src/protocol/recordBatch/v0').RecordBatch as (
    opts: object,
  ) => Promise<KafkajsEncoder>,
  Record: require('kafkajs/src/protocol/recordBatch/record/v0') as (opts: object) => KafkajsEncoder,
  decodeBatch: require('kafkajs/src/protocol/recordBatch/v0/decoder') as (
    decoder: object,
  ) => Promise<KafkajsBatch>,
  Decoder: require('kafkajs/src/protocol/decoder') as new (buf: Buffer) => object,
  Long: require('kafkajs/src/utils/long') as { fromValue(v: number | string): object },
  MessageSet: require('kafkajs/src/protocol/messageSet') as (opts: object) => KafkajsEncoder,
  decodeMessageSet: require('kafkajs/src/protocol/messageSet/decoder') as (
    decoder: object,
    size: number,
  ) => Promise<KafkajsMessage[]>,
  gzip: require('kafkajs/src/protocol/message/compression/gzip') as {
    compress(encoder: KafkajsEncoder): Promise<Buffer>
  },
}

interface KafkajsBatch {
  firstOffset: string
  maxTimestamp: string
  inTransaction: boolean
  records: {
    offset: string
    timestamp: string
    key: Buffer | null
    value: Buffer | null
    headers: Record<string, Buffer>
  }[]
}
interface KafkajsMessage {
  offset: string
  key: Buffer | null
  value: Buffer | null
  timestamp?: string
}

/** Records kafkajs can express: unique header keys, no null header values. */
function kafkajsFriendlyRecords(count: number): RecordInput[] {
  return Array.from({ length: count }, (_, i) => ({
    key: i % 3 === 0 ? null : Buffer.from(`key-${i}`),
    value: Buffer.from(`value ${i} `.repeat(i + 1)),
    headers:
      i % 2 === 0
        ? []
        : [
            { key: 'a', value: Buffer.from(`h${i}`) },
            { key: 'b', value: Buffer.alloc(0) },
          ],
    timestamp: T0 + i * 3 - 4,
  }))
}

async function kafkajsEncode(
  records: RecordInput[],
  compression: CompressionType,
  transactional: boolean,
): Promise<Buffer> {
  const first = records[0].timestamp as number
  const encoded = await kafkajs.RecordBatch({
    compression,
    firstOffset: kafkajs.Long.fromValue(0),
    firstTimestamp: first,
    maxTimestamp: Math.max(...records.map((r) => r.timestamp as number)),
    partitionLeaderEpoch: 0,
    lastOffsetDelta: records.length - 1,
    transactional,
    producerId: kafkajs.Long.fromValue(4242),
    producerEpoch: 2,
    firstSequence: 7,
    records: records.map((r, i) =>
      kafkajs.Record({
        offsetDelta: i,
        timestampDelta: (r.timestamp as number) - first,
        key: r.key,
        value: r.value,
        headers: Object.fromEntries((r.headers ?? []).map((h) => [h.key, h.value])),
      }),
    ),
  })
  return encoded.buffer
}

describe('cross-check with kafkajs', () => {
  for (const compression of [CompressionType.None, CompressionType.Gzip]) {
    const name = CompressionType[compression]
    it(`${name}: kafkajs and tidelog encode the same batch byte for byte`, async () => {
      for (const transactional of [false, true]) {
        const records = kafkajsFriendlyRecords(9)
        const theirs = await kafkajsEncode(records, compression, transactional)
        const ours = await encodeRecordBatch({
          records,
          compression,
          partitionLeaderEpoch: 0,
          producerId: 4242n,
          producerEpoch: 2,
          baseSequence: 7,
          isTransactional: transactional,
        })
        assert.deepEqual(ours, theirs)
      }
    })

    it(`${name}: tidelog decodes kafkajs batches`, async () => {
      const records = kafkajsFriendlyRecords(12)
      const theirs = await kafkajsEncode(records, compression, true)
      assert.equal(validateRecordBatch(theirs).ok, true)
      assert.doesNotThrow(() => checkProducerBatches(theirs, 'client'))
      const decoded = await decodeRecordBatch(theirs)
      assert.equal(decoded.producerId, 4242n)
      assert.equal(decoded.isTransactional, true)
      assertRecordsMatch(decoded, records, 0)
    })

    it(`${name}: kafkajs decodes tidelog batches`, async () => {
      const records = kafkajsFriendlyRecords(12)
      const ours = await encodeRecordBatch({ records, compression, baseOffset: 77 })
      const theirs = await kafkajs.decodeBatch(new kafkajs.Decoder(ours))
      assert.equal(theirs.firstOffset, '77')
      assert.equal(theirs.records.length, records.length)
      theirs.records.forEach((record, i) => {
        assert.equal(record.offset, String(77 + i))
        assert.equal(record.timestamp, String(records[i].timestamp))
        assert.deepEqual(record.key, records[i].key)
        assert.deepEqual(record.value, records[i].value)
        assert.deepEqual(
          record.headers,
          Object.fromEntries((records[i].headers ?? []).map((h) => [h.key, h.value])),
        )
      })
    })
  }

  it('reads legacy v0/v1 message sets written by kafkajs (plain and gzip) and kafkajs reads ours', async () => {
    const entries = [0, 1, 2].map((i) => ({ key: `k${i}`, value: `legacy ${i}`, timestamp: T0 + i }))
    for (const messageVersion of [0, 1]) {
      const plain = kafkajs.MessageSet({ messageVersion, entries }).buffer
      const decoded = await decodeLegacyMessageSet(plain)
      assert.deepEqual(
        decoded.messages.map((m) => m.value?.toString()),
        ['legacy 0', 'legacy 1', 'legacy 2'],
      )
      const theirs = await kafkajs.decodeMessageSet(new kafkajs.Decoder(plain), plain.length)
      assert.deepEqual(
        theirs.map((m) => m.value?.toString()),
        ['legacy 0', 'legacy 1', 'legacy 2'],
      )
    }
    // kafkajs produce v2: a gzip wrapper (magic 1) around a relative-offset inner set
    const inner = kafkajs.MessageSet({ messageVersion: 1, compression: CompressionType.Gzip, entries })
    const value = await kafkajs.gzip.compress(inner)
    const wrapped = kafkajs.MessageSet({
      messageVersion: 1,
      entries: [{ compression: CompressionType.Gzip, timestamp: T0, value }],
    }).buffer
    const decoded = await decodeLegacyMessageSet(wrapped)
    assert.equal(decoded.compression, CompressionType.Gzip)
    assert.deepEqual(
      decoded.messages.map((m) => m.key?.toString()),
      ['k0', 'k1', 'k2'],
    )
    assert.deepEqual(
      decoded.messages.map((m) => m.timestamp),
      [T0, T0 + 1, T0 + 2],
    )
    // and our own hand-built gzip wrapper reads the same in kafkajs
    const ours = await wrapper(1, CompressionType.Gzip, legacySet(1, 3), 2)
    const theirs = await kafkajs.decodeMessageSet(new kafkajs.Decoder(ours), ours.length)
    const ourView = await decodeLegacyMessageSet(ours)
    assert.deepEqual(
      theirs.map((m) => m.value),
      ourView.messages.map((m) => m.value),
    )
    assert.deepEqual(
      theirs.map((m) => Number(m.offset)),
      ourView.messages.map((m) => m.offset),
    )
  })

  it('readBatchHeader agrees with the kafkajs header decoder', async () => {
    const theirs = await kafkajsEncode(kafkajsFriendlyRecords(3), CompressionType.None, false)
    const header = readBatchHeader(theirs)
    const decoded = await kafkajs.decodeBatch(new kafkajs.Decoder(theirs))
    assert.equal(String(header.baseOffset), decoded.firstOffset)
    assert.equal(String(header.maxTimestamp), decoded.maxTimestamp)
  })
})
