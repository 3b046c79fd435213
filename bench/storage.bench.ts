/**
 * Storage benchmark: append throughput for 1 KiB records in 16 KiB and 1 MiB batches, with
 * and without an fsync per append (flush.messages=1), one append in flight or 32; then a
 * sequential read of the log; then `dd ... conv=fdatasync` on the same disk for reference.
 *
 *   node .build/storage/bench/storage.bench.js            (about 1 GiB per no-fsync run)
 *   STORAGE_BENCH_MB=256 node .build/storage/bench/storage.bench.js
 */
import { execFileSync } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import type { LeaderEpoch } from '../src/common/types.js'
import { nodeFileSystem } from '../src/runtime/node-file-system.js'
import { fromProperties } from '../src/storage/log-config.js'
import { UnifiedLog } from '../src/storage/unified-log.js'
import { simpleBatch } from '../test/storage/helpers.js'

const MIB = 1024 * 1024
const RECORD_VALUE_BYTES = 1024
const TOTAL_MB = Number(process.env['STORAGE_BENCH_MB'] ?? 1024)
/** fsync runs are bounded in bytes too: one fsync per append is slow by design. */
const FSYNC_MB = Math.min(TOTAL_MB, Number(process.env['STORAGE_BENCH_FSYNC_MB'] ?? 128))
const IN_FLIGHT_POOL = 64

interface Result {
  readonly name: string
  readonly bytes: number
  readonly records: number
  readonly seconds: number
  readonly appends: number
}

function batchPool(recordsPerBatch: number): Buffer[] {
  return Array.from({ length: IN_FLIGHT_POOL }, (_, i) => simpleBatch(recordsPerBatch, RECORD_VALUE_BYTES, i))
}

async function appendRun(
  dir: string,
  name: string,
  recordsPerBatch: number,
  fsync: boolean,
  inFlight: number,
  totalBytes: number,
): Promise<{ result: Result; log: UnifiedLog }> {
  const config = fromProperties({
    'max.message.bytes': 4 * MIB,
    'retention.ms': -1,
    ...(fsync ? { 'flush.messages': 1 } : {}),
  })
  const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config })
  const pool = batchPool(recordsPerBatch)
  const batchBytes = pool[0].length
  const appends = Math.max(inFlight, Math.floor(totalBytes / batchBytes))
  let next = 0
  const start = performance.now()
  const worker = async () => {
    while (next < appends) {
      const buffer = pool[next++ % IN_FLIGHT_POOL]
      await log.append(buffer, { assignOffsets: true, leaderEpoch: 0 as LeaderEpoch })
    }
  }
  await Promise.all(Array.from({ length: inFlight }, worker))
  const seconds = (performance.now() - start) / 1000
  const result = { name, bytes: appends * batchBytes, records: appends * recordsPerBatch, seconds, appends }
  return { result, log }
}

async function readRun(log: UnifiedLog): Promise<Result> {
  let offset = log.logStartOffset
  let bytes = 0
  let reads = 0
  const start = performance.now()
  while (offset < log.logEndOffset) {
    const data = await log.read(offset, { maxBytes: MIB, maxOffset: log.logEndOffset })
    bytes += data.sizeInBytes
    offset = data.nextOffset
    reads++
  }
  const seconds = (performance.now() - start) / 1000
  return { name: 'sequential read, 1 MiB fetches', bytes, records: log.logEndOffset, seconds, appends: reads }
}

function ddRun(dir: string): Result {
  const path = join(dir, 'dd.bin')
  const count = Math.max(1, TOTAL_MB)
  const start = performance.now()
  execFileSync('dd', ['if=/dev/zero', `of=${path}`, 'bs=1M', `count=${count}`, 'conv=fdatasync'], {
    stdio: 'pipe',
  })
  const seconds = (performance.now() - start) / 1000
  return {
    name: `dd bs=1M count=${count} conv=fdatasync`,
    bytes: count * MIB,
    records: 0,
    seconds,
    appends: count,
  }
}

function mbPerSecond(r: Result): number {
  return r.bytes / MIB / r.seconds
}

function printTable(results: readonly Result[], dd: Result): void {
  const header = ['benchmark', 'MiB', 'seconds', 'MiB/s', 'records/s', 'ops/s', 'vs dd']
  const rows = results.map((r) => [
    r.name,
    (r.bytes / MIB).toFixed(0),
    r.seconds.toFixed(2),
    mbPerSecond(r).toFixed(1),
    r.records > 0 ? Math.round(r.records / r.seconds).toLocaleString('en-US') : '-',
    Math.round(r.appends / r.seconds).toLocaleString('en-US'),
    (mbPerSecond(r) / mbPerSecond(dd)).toFixed(2),
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)))
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ')
  console.log(line(header))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const row of rows) console.log(line(row))
}

async function main(): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'tidelog-bench-'))
  const results: Result[] = []
  try {
    const cases: [string, number, boolean, number, number][] = [
      ['append 16 KiB batches, no fsync, 1 in flight', 16, false, 1, TOTAL_MB],
      ['append 16 KiB batches, no fsync, 32 in flight', 16, false, 32, TOTAL_MB],
      ['append 1 MiB batches, no fsync, 1 in flight', 1024, false, 1, TOTAL_MB],
      ['append 1 MiB batches, no fsync, 32 in flight', 1024, false, 32, TOTAL_MB],
      ['append 16 KiB batches, fsync each, 1 in flight', 16, true, 1, Math.min(FSYNC_MB, 32)],
      ['append 16 KiB batches, fsync each, 32 in flight', 16, true, 32, FSYNC_MB],
      ['append 1 MiB batches, fsync each, 1 in flight', 1024, true, 1, FSYNC_MB],
      ['append 1 MiB batches, fsync each, 32 in flight', 1024, true, 32, FSYNC_MB],
    ]
    let readResult: Result | undefined
    for (const [i, [name, records, fsync, inFlight, mb]] of cases.entries()) {
      const dir = join(root, `bench-${i}`)
      const { result, log } = await appendRun(dir, name, records, fsync, inFlight, mb * MIB)
      results.push(result)
      if (i === 2) readResult = await readRun(log)
      await log.close()
      await rm(dir, { recursive: true, force: true })
    }
    if (readResult !== undefined) results.push(readResult)
    const dd = ddRun(root)
    results.push(dd)
    console.log(
      `\ntidelog storage benchmark: 1 KiB records, ${TOTAL_MB} MiB per no-fsync run, temp dir ${root}`,
    )
    console.log('(the read follows the 1 MiB no-fsync write, so it is served mostly from the page cache)\n')
    printTable(results, dd)
  } finally {
    await rm(root, { recursive: true, force: true })
  }
}

main().catch((err: unknown) => {
  console.error(err)
  process.exitCode = 1
})
