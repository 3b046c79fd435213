/**
 * Record batch throughput:
 * - validateRecordBatch (header checks + CRC-32C) on 16 KiB and 1 MiB batches, and the other
 *   in-place operations of the produce path (assignOffsets, setLogAppendTime);
 * - encode and decode of 1 KiB records, per codec (16 records = one 16 KiB batch);
 * - compress and decompress of 1 MiB of semi-compressible (JSON-like) data, per codec.
 * Async operations run one at a time (latency-bound, no thread-pool parallelism).
 *
 *   npx tsc -p tsconfig.json --outDir .build/batch && node .build/batch/bench/record-batch.bench.js
 */
import { CompressionType } from '../src/protocol/batch-header.js'
import {
  compress,
  compressSync,
  decompress,
  decompressSync,
  hasSyncCodec,
} from '../src/protocol/compression.js'
import {
  assignOffsets,
  decodeRecordBatch,
  decodeRecordBatchSync,
  encodeRecordBatch,
  encodeRecordBatchSync,
  type RecordInput,
  setLogAppendTime,
  validateRecordBatch,
} from '../src/protocol/record-batch.js'

const RUN_MS = 1000
const WARM_MS = 150
const MB = 1024 * 1024
const KIB = 1024
const T0 = 1_700_000_000_000
const CODECS = [
  CompressionType.None,
  CompressionType.Gzip,
  CompressionType.Snappy,
  CompressionType.Lz4,
  CompressionType.Zstd,
] as const

interface Row {
  case: string
  'MB/s': string
  'records/s': string
  'ops/s': string
  'µs/op': string
}

interface Sample {
  ops: number
  seconds: number
}

function row(name: string, sample: Sample, bytesPerOp: number, recordsPerOp = 0): Row {
  const { ops, seconds } = sample
  return {
    case: name,
    'MB/s': bytesPerOp === 0 ? '' : ((ops * bytesPerOp) / MB / seconds).toFixed(0),
    'records/s': recordsPerOp === 0 ? '' : Math.round((ops * recordsPerOp) / seconds).toLocaleString('en'),
    'ops/s': Math.round(ops / seconds).toLocaleString('en'),
    'µs/op': ((seconds * 1e6) / ops).toFixed(1),
  }
}

function measureSync(op: () => void): Sample {
  const warmUntil = performance.now() + WARM_MS
  while (performance.now() < warmUntil) op()
  let ops = 0
  const start = performance.now()
  let now = start
  while (now - start < RUN_MS) {
    for (let i = 0; i < 8; i++) op()
    ops += 8
    now = performance.now()
  }
  return { ops, seconds: (now - start) / 1000 }
}

async function measureAsync(op: () => Promise<unknown>): Promise<Sample> {
  const warmUntil = performance.now() + WARM_MS
  while (performance.now() < warmUntil) await op()
  let ops = 0
  const start = performance.now()
  let now = start
  while (now - start < RUN_MS) {
    await op()
    ops++
    now = performance.now()
  }
  return { ops, seconds: (now - start) / 1000 }
}

const WORDS = ['order', 'customer', 'amount', 'status', 'shipped', 'pending', 'id', 'ts', 'eur', 'sku']

/** JSON-like text: repeated field names, random numbers; deterministic. */
function semiCompressible(bytes: number, seed: number): Buffer {
  const out = Buffer.allocUnsafe(bytes)
  let state = seed
  const next = (): number => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0
    return state >>> 8
  }
  for (let at = 0; at < bytes; ) at += out.write(`"${WORDS[next() % WORDS.length]}":${next() % 100000},`, at)
  return out
}

function records(count: number, valueBytes: number): RecordInput[] {
  return Array.from({ length: count }, (_, i) => ({
    key: Buffer.from(`key-${i}`),
    value: semiCompressible(valueBytes, i + 1),
    headers: [{ key: 'source', value: Buffer.from('bench') }],
    timestamp: T0 + i,
  }))
}

function validationRows(): Row[] {
  const rows: Row[] = []
  for (const [label, count] of [
    ['16 KiB', 16],
    ['1 MiB', 1024],
  ] as const) {
    const batch = encodeRecordBatchSync({ records: records(count, KIB - 40) })
    rows.push(
      row(
        `validateRecordBatch ${label}`,
        measureSync(() => validateRecordBatch(batch, 0)),
        batch.length,
      ),
    )
    let offset = 0
    // O(1): writes 8 bytes whatever the batch size, so no MB/s
    const assign = measureSync(() => (offset = assignOffsets(batch, 0, offset)))
    rows.push(row(`assignOffsets ${label}`, assign, 0))
    rows.push(
      row(
        `setLogAppendTime ${label}`,
        measureSync(() => setLogAppendTime(batch, 0, T0)),
        batch.length,
      ),
    )
  }
  return rows
}

async function recordRows(): Promise<Row[]> {
  const rows: Row[] = []
  const input = records(16, KIB)
  const rawBytes = 16 * KIB
  for (const compression of CODECS) {
    const name = CompressionType[compression]
    const opts = { records: input, compression }
    const batch = await encodeRecordBatch(opts)
    if (hasSyncCodec(compression)) {
      rows.push(
        row(
          `encode ${name} (sync)`,
          measureSync(() => encodeRecordBatchSync(opts)),
          rawBytes,
          16,
        ),
      )
      rows.push(
        row(
          `decode ${name} (sync)`,
          measureSync(() => decodeRecordBatchSync(batch)),
          rawBytes,
          16,
        ),
      )
    }
    if (compression !== CompressionType.None) {
      rows.push(
        row(`encode ${name} (async)`, await measureAsync(() => encodeRecordBatch(opts)), rawBytes, 16),
      )
      rows.push(
        row(`decode ${name} (async)`, await measureAsync(() => decodeRecordBatch(batch)), rawBytes, 16),
      )
    }
  }
  return rows
}

async function codecRows(): Promise<{ rows: Row[]; ratios: string[] }> {
  const rows: Row[] = []
  const ratios: string[] = []
  const data = semiCompressible(MB, 42)
  for (const compression of CODECS.filter((c) => c !== CompressionType.None)) {
    const name = CompressionType[compression]
    const packed = await compress(compression, data)
    ratios.push(`${name} ${(data.length / packed.length).toFixed(2)}x`)
    rows.push(row(`compress ${name} (async)`, await measureAsync(() => compress(compression, data)), MB))
    rows.push(
      row(`decompress ${name} (async)`, await measureAsync(() => decompress(compression, packed)), MB),
    )
    if (hasSyncCodec(compression)) {
      rows.push(
        row(
          `compress ${name} (sync)`,
          measureSync(() => compressSync(compression, data)),
          MB,
        ),
      )
      rows.push(
        row(
          `decompress ${name} (sync)`,
          measureSync(() => decompressSync(compression, packed)),
          MB,
        ),
      )
    }
  }
  return { rows, ratios }
}

async function main(): Promise<void> {
  console.log(`record batches: node ${process.version}, ${RUN_MS} ms per case`)
  console.log('\nValidation and in-place rewrites (uncompressed batches of 1 KiB records):')
  console.table(validationRows())
  console.log('\nEncode / decode, 16 records of 1 KiB per batch (MB/s of uncompressed record values):')
  console.table(await recordRows())
  const codecs = await codecRows()
  console.log(`\nCodecs on 1 MiB of JSON-like data (ratios: ${codecs.ratios.join(', ')}):`)
  console.table(codecs.rows)
}

await main()
