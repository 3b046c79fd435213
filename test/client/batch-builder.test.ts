/**
 * The producer's incremental batch encoding (RecordBatchBuilder, records written as they
 * are appended) gives the same bytes as encodeRecordBatch for the same records, with every
 * codec, keys, null values, headers, many chunks and producer stamps; a re-stamped build
 * rewrites only the header and CRC; ProducerBatch's split reads its records back.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import {
  CALLBACK,
  ProducerBatch,
  type RecordMetadata,
  recordSizeUpperBound,
} from '../../src/client/producer-batch.js'
import { CompressionType } from '../../src/protocol/batch-header.js'
import {
  decodeRecordBatch,
  encodeRecordBatch,
  RecordBatchBuilder,
  type RecordBatchStamp,
  type RecordInput,
  validateRecordBatch,
} from '../../src/protocol/record-batch.js'

const CODECS = [
  CompressionType.None,
  CompressionType.Gzip,
  CompressionType.Snappy,
  CompressionType.Lz4,
  CompressionType.Zstd,
]

const bytes = (maxLength: number) => fc.uint8Array({ maxLength }).map((a) => Buffer.from(a))

const recordArb: fc.Arbitrary<RecordInput> = fc.record({
  key: fc.option(bytes(40), { nil: null }),
  value: fc.option(bytes(3000), { nil: null }),
  headers: fc.array(
    fc.record({ key: fc.string({ maxLength: 12 }), value: fc.option(bytes(20), { nil: null }) }),
    {
      maxLength: 3,
    },
  ),
  timestamp: fc.integer({ min: 1_600_000_000_000, max: 1_800_000_000_000 }),
})

const stampArb: fc.Arbitrary<RecordBatchStamp> = fc.oneof(
  fc.constant({}),
  fc.record({
    producerId: fc.bigInt({ min: 0n, max: 2n ** 62n }),
    producerEpoch: fc.integer({ min: 0, max: 0x7fff }),
    baseSequence: fc.integer({ min: 0, max: 0x7fffffff }),
  }),
)

function concat(built: Buffer | Buffer[]): Buffer {
  return Buffer.isBuffer(built) ? built : Buffer.concat(built)
}

async function expected(records: RecordInput[], compression: CompressionType, stamp: RecordBatchStamp) {
  return encodeRecordBatch({ records, compression, defaultTimestamp: 1_700_000_000_000, ...stamp })
}

function builderWith(records: RecordInput[], compression: CompressionType, expectedBytes: number) {
  const builder = new RecordBatchBuilder({ compression, expectedBytes, defaultTimestamp: 1_700_000_000_000 })
  for (const r of records) builder.append(r.timestamp!, r.key ?? null, r.value, r.headers)
  return builder
}

describe('RecordBatchBuilder', () => {
  it('equals encodeRecordBatch for random records, every codec, any chunking and stamp', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(recordArb, { maxLength: 40 }),
        fc.constantFrom(...CODECS),
        fc.integer({ min: 0, max: 20000 }),
        stampArb,
        async (records, compression, expectedBytes, stamp) => {
          const builder = builderWith(records, compression, expectedBytes)
          const built = concat(await builder.buildAsync(stamp))
          assert.deepEqual(built, await expected(records, compression, stamp))
          if (compression !== CompressionType.Zstd) {
            assert.deepEqual(concat(builderWith(records, compression, expectedBytes).build(stamp)), built)
          }
        },
      ),
      { numRuns: 150 },
    )
  })

  it('builds 1 KiB records into several chunks whose bytes validate and decode', async () => {
    const value = Buffer.alloc(1024, 7)
    const records: RecordInput[] = Array.from({ length: 300 }, (_, i) => ({
      key: i % 3 === 0 ? null : Buffer.from(`k${i}`),
      value: i % 50 === 0 ? null : value,
      headers: i % 7 === 0 ? [{ key: 'h', value: Buffer.from('v') }] : [],
      timestamp: 1_700_000_000_000 + i,
    }))
    const builder = builderWith(records, CompressionType.None, 16384)
    const built = builder.build({ producerId: 9n, producerEpoch: 1, baseSequence: 5 })
    assert.ok(Array.isArray(built) && built.length > 1, 'several chunks')
    const whole = concat(built)
    assert.equal(whole.length, builder.sizeInBytes)
    assert.deepEqual(
      whole,
      await expected(records, CompressionType.None, { producerId: 9n, producerEpoch: 1, baseSequence: 5 }),
    )
    assert.equal(validateRecordBatch(whole).ok, true)
    const decoded = await decodeRecordBatch(whole)
    assert.equal(decoded.records.length, 300)
    assert.equal(decoded.baseSequence, 5)
  })

  it('a re-stamped build keeps the records and rewrites the header and CRC', async () => {
    for (const compression of CODECS) {
      const records: RecordInput[] = Array.from({ length: 20 }, (_, i) => ({
        value: Buffer.from(`value-${i}`.repeat(30)),
        timestamp: 1_700_000_000_000 + (i % 4),
      }))
      const builder = builderWith(records, compression, 1024)
      const first = concat(await builder.buildAsync({ producerId: 1n, producerEpoch: 0, baseSequence: 10 }))
      assert.deepEqual(
        first,
        await expected(records, compression, { producerId: 1n, producerEpoch: 0, baseSequence: 10 }),
      )
      const again = concat(await builder.buildAsync({ producerId: 2n, producerEpoch: 0, baseSequence: 0 }))
      assert.deepEqual(
        again,
        await expected(records, compression, { producerId: 2n, producerEpoch: 0, baseSequence: 0 }),
      )
    }
  })

  it('varint and varlong sizes at every length boundary decode back (checked by the decoder, not the encoder)', async () => {
    // encodeRecordBatch shares the builder's varint helpers, so the comparison above would
    // not catch a sizing error in both; the decoder reads varints with code of its own.
    const base = 1_700_000_000_000
    const deltas = [
      0,
      1,
      63,
      64,
      65,
      8191,
      8192,
      2 ** 20,
      2 ** 30 - 1,
      2 ** 30,
      2 ** 31 - 1,
      2 ** 31,
      2 ** 32,
      2 ** 40,
    ]
    const timestamps = [base, ...deltas.map((d) => base + d), ...deltas.map((d) => base - d)]
    const lengths = [0, 1, 63, 64, 127, 128, 8191, 8192, 16383, 16384]
    const records: RecordInput[] = []
    for (let i = 0; i < timestamps.length; i++) {
      const keyLength = lengths[i % lengths.length]
      const valueLength = lengths[(i * 7 + 3) % lengths.length]
      records.push({
        key: i % 5 === 0 ? null : Buffer.alloc(keyLength, i),
        value: i % 6 === 1 ? null : Buffer.alloc(valueLength, i + 1),
        timestamp: timestamps[i],
      })
    }
    const builder = builderWith(records, CompressionType.None, 1024)
    const whole = concat(builder.build())
    assert.equal(whole.length, builder.sizeInBytes)
    assert.equal(validateRecordBatch(whole).ok, true)
    const decoded = await decodeRecordBatch(whole)
    assert.equal(decoded.records.length, records.length)
    for (let i = 0; i < records.length; i++) {
      assert.equal(decoded.records[i].offset, i)
      assert.equal(decoded.records[i].timestamp, records[i].timestamp)
      assert.deepEqual(decoded.records[i].key, records[i].key)
      assert.deepEqual(decoded.records[i].value, records[i].value)
    }
  })
  it('an empty batch is a header only, as encodeRecordBatch writes it', async () => {
    for (const compression of CODECS) {
      const built = concat(await builderWith([], compression, 100).buildAsync())
      assert.deepEqual(built, await expected([], compression, {}))
    }
  })
})

describe('ProducerBatch', () => {
  it('encodes as records are appended; a second encode returns the same bytes; split keeps records and order', async () => {
    const encoding = { compression: CompressionType.Lz4, batchSize: 16384 }
    const batch = new ProducerBatch('t', 0, 1_700_000_000_000, 1_700_000_100_000, encoding)
    const records: RecordInput[] = Array.from({ length: 5 }, (_, i) => ({
      key: i === 2 ? null : Buffer.from(`key-${i}`),
      value: i === 3 ? null : Buffer.from(`value-${i}`),
      headers: i === 1 ? [{ key: 'trace', value: Buffer.from('x') }] : [],
      timestamp: 1_700_000_000_000 + i,
    }))
    const outcomes: number[] = []
    for (const [i, r] of records.entries()) {
      batch.append(
        r,
        recordSizeUpperBound(r),
        (m: RecordMetadata) => outcomes.push(m.offset * 100 + i),
        (e) => assert.fail(e),
      )
    }
    const encoded = concat(await batch.encode())
    assert.deepEqual(encoded, await expected(records, CompressionType.Lz4, {}))
    assert.equal(await batch.encode(), await batch.encode(), 'cached')
    const [a, b] = batch.split(encoding)
    assert.equal(a.recordCount, 3)
    assert.equal(b.recordCount, 2)
    assert.deepEqual(concat(await a.encode()), await expected(records.slice(0, 3), CompressionType.Lz4, {}))
    assert.deepEqual(concat(await b.encode()), await expected(records.slice(3), CompressionType.Lz4, {}))
    a.complete(10, -1)
    b.complete(20, -1)
    assert.deepEqual(outcomes, [1000, 1101, 1202, 2003, 2104])
  })

  it("each record's metadata has its own CreateTime, through runs of equal timestamps, a split and LogAppendTime", async () => {
    const encoding = { compression: CompressionType.None, batchSize: 16384 }
    const t = 1_700_000_000_000
    // Runs of equal timestamps, a step back and single records, at both ends too.
    const timestamps = [t, t, t + 1, t + 1, t + 1, t - 3, t, t, t + 9, t + 2]
    const append = (batch: ProducerBatch, settled: (RecordMetadata | undefined)[]) => {
      for (const [i, timestamp] of timestamps.entries()) {
        const record = { key: null, value: Buffer.from(`v${i}`), timestamp }
        // Callbacks and promise resolutions mixed, as produce() and send() on one producer.
        if (i % 3 === 0) {
          const callback = (error: unknown, m?: RecordMetadata) => {
            assert.equal(error, null)
            settled[i] = m
          }
          batch.append(record, recordSizeUpperBound(record), callback, CALLBACK)
        } else {
          batch.append(
            record,
            recordSizeUpperBound(record),
            (m: RecordMetadata) => (settled[i] = m),
            assert.fail,
          )
        }
      }
    }
    const whole = new ProducerBatch('t', 3, 0, 1000, encoding)
    const settled: (RecordMetadata | undefined)[] = []
    append(whole, settled)
    whole.complete(100, -1)
    assert.deepEqual(
      settled.map((m) => [m?.offset, m?.timestamp]),
      timestamps.map((ts, i) => [100 + i, ts]),
    )
    const logAppend = new ProducerBatch('t', 3, 0, 1000, encoding)
    const stamped: (RecordMetadata | undefined)[] = []
    append(logAppend, stamped)
    logAppend.complete(0, t + 500)
    assert.ok(stamped.every((m) => m?.timestamp === t + 500))
    const before = new ProducerBatch('t', 3, 0, 1000, encoding)
    const halves: (RecordMetadata | undefined)[] = []
    append(before, halves)
    const [a, b] = before.split(encoding)
    a.complete(10, -1)
    b.complete(20, -1)
    assert.deepEqual(
      halves.map((m) => [m?.offset, m?.timestamp]),
      timestamps.map((ts, i) => [i < 5 ? 10 + i : 20 + i - 5, ts]),
    )
  })
})
