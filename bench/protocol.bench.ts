/**
 * Codec throughput: a Produce request (1 topic, 8 partitions, 16 KiB of record bytes each) encoded
 * and decoded in a loop at v7 (classic) and v9 (flexible), plus CRC-32C over 16 KiB and 1 MiB.
 *
 *   npx tsc -p tsconfig.json --outDir .build/codec && node .build/codec/bench/protocol.bench.js
 */
import { randomBytes } from 'node:crypto'
import { crc32c } from '../src/protocol/crc32c.js'
import type { ProduceRequest } from '../src/protocol/generated/index.js'
import { decodeProduceRequest, encodeProduceRequest } from '../src/protocol/generated/produce-request.js'
import { Reader, Writer, ZERO_UUID } from '../src/protocol/primitives.js'

const RUN_MS = 2000
const PARTITIONS = 8
const RECORD_BYTES = 16 * 1024
const MB = 1024 * 1024

interface Row {
  case: string
  'MB/s': string
  'ops/s': string
  'µs/op': string
}

/** Runs `op` (which handles `bytesPerOp` bytes) for about RUN_MS after a short warm-up. */
function measure(name: string, bytesPerOp: number, op: () => void): Row {
  const warmUntil = performance.now() + 200
  while (performance.now() < warmUntil) op()
  let ops = 0
  const start = performance.now()
  let now = start
  while (now - start < RUN_MS) {
    for (let i = 0; i < 16; i++) op()
    ops += 16
    now = performance.now()
  }
  const seconds = (now - start) / 1000
  return {
    case: name,
    'MB/s': ((ops * bytesPerOp) / MB / seconds).toFixed(0),
    'ops/s': (ops / seconds).toFixed(0),
    'µs/op': ((seconds * 1e6) / ops).toFixed(2),
  }
}

function produceRequest(): ProduceRequest {
  return {
    transactionalId: null,
    acks: -1,
    timeoutMs: 30000,
    topicData: [
      {
        name: 'bench-topic',
        topicId: ZERO_UUID,
        partitionData: Array.from({ length: PARTITIONS }, (_, index) => ({
          index,
          records: randomBytes(RECORD_BYTES),
        })),
      },
    ],
  }
}

function produceRows(version: number): Row[] {
  const request = produceRequest()
  const w0 = new Writer()
  encodeProduceRequest(w0, version, request)
  const frame = w0.toBuffer()
  const label = `Produce v${version} (${PARTITIONS} × 16 KiB)`
  let sink = 0
  const rows = [
    measure(`${label} encode`, frame.length, () => {
      const w = new Writer()
      encodeProduceRequest(w, version, request)
      sink += w.toChunks().length
    }),
    measure(`${label} decode`, frame.length, () => {
      const m = decodeProduceRequest(new Reader(frame), version)
      sink += m.topicData.length
    }),
    measure(`${label} decode+encode`, frame.length, () => {
      const m = decodeProduceRequest(new Reader(frame), version)
      const w = new Writer()
      encodeProduceRequest(w, version, m)
      sink += w.toChunks().length
    }),
  ]
  if (sink === 0) throw new Error('benchmark loop did not run')
  return rows
}

function crcRows(): Row[] {
  let sink = 0
  const rows = [16 * 1024, MB].map((size) => {
    const buf = randomBytes(size)
    return measure(`crc32c ${size >= MB ? `${size / MB} MiB` : `${size / 1024} KiB`}`, size, () => {
      sink = (sink + crc32c(buf)) % 0x7fffffff
    })
  })
  if (Number.isNaN(sink)) throw new Error('unreachable')
  return rows
}

function main(): void {
  console.log(`tidelog protocol bench: Node ${process.version}, ${RUN_MS} ms per case`)
  console.table([...produceRows(7), ...produceRows(9), ...crcRows()])
  console.log(
    'MB/s counts the whole request frame. Record bytes are never copied: decode returns views of the\n' +
      'input and encode appends them by reference (Writer chunks for writev), so codec cost is per\n' +
      'field, not per byte; the CRC-32C rows are the per-byte cost a broker pays to validate batches.',
  )
}

main()
