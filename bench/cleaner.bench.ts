/**
 * Log cleaner benchmark: a compacted log of 1 KiB records (16 per batch) whose keys are
 * drawn from 10% as many unique keys as records, in 32 MiB segments; one forced clean of
 * everything below the active segment. Prints the cleaning throughput (bytes of the
 * cleaned range per second), what is left, and the longest event-loop stall during the
 * clean (the cleaner works in slices so produce and fetch keep being served).
 *
 *   npm run bench:cleaner                       (256 MiB, uncompressed then lz4 and gzip)
 *   CLEANER_BENCH_MB=64 node dist/bench/cleaner.bench.js
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { monitorEventLoopDelay, performance } from 'node:perf_hooks'
import { systemClock } from '../src/common/clock.js'
import { silentLogger } from '../src/common/logger.js'
import type { LeaderEpoch } from '../src/common/types.js'
import { CompressionType } from '../src/protocol/batch-header.js'
import { encodeRecordBatch } from '../src/protocol/record-batch.js'
import { nodeFileSystem } from '../src/runtime/node-file-system.js'
import { cleanLog } from '../src/storage/log-cleaner.js'
import { fromProperties } from '../src/storage/log-config.js'
import { UnifiedLog } from '../src/storage/unified-log.js'

const MIB = 1024 * 1024
const RECORD_VALUE_BYTES = 1024
const RECORDS_PER_BATCH = 16
const UNIQUE_KEY_FRACTION = 0.1
const TOTAL_MB = Number(process.env['CLEANER_BENCH_MB'] ?? 256)
/** Compressed runs write fewer bytes per record; they are sized by records, at a quarter of the total. */
const COMPRESSED_FRACTION = 0.25

/** A deterministic generator (xorshift32), so every run cleans the same log. */
function random(seed: number): () => number {
  let x = seed
  return () => {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return (x >>> 0) / 2 ** 32
  }
}

async function run(name: string, compression: CompressionType, totalBytes: number): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'tidelog-cleaner-bench-'))
  try {
    const config = fromProperties({
      'cleanup.policy': 'compact',
      'segment.bytes': 32 * MIB,
      'max.message.bytes': 4 * MIB,
      'retention.ms': -1,
    })
    const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config })
    const records = Math.floor(totalBytes / RECORD_VALUE_BYTES)
    const uniqueKeys = Math.max(1, Math.floor(records * UNIQUE_KEY_FRACTION))
    const next = random(12345)
    // Half random bytes, half zeros: about 2:1 for the codecs.
    const noise = Buffer.alloc(64 * 1024)
    for (let i = 0; i < noise.length; i++) noise[i] = Math.floor(next() * 256)
    const writeStart = performance.now()
    for (let written = 0; written < records; written += RECORDS_PER_BATCH) {
      const batchRecords = []
      for (let i = 0; i < RECORDS_PER_BATCH; i++) {
        const value = Buffer.alloc(RECORD_VALUE_BYTES)
        const from = Math.floor(next() * (noise.length - RECORD_VALUE_BYTES))
        noise.copy(value, 0, from, from + RECORD_VALUE_BYTES / 2)
        batchRecords.push({
          key: Buffer.from(`key-${Math.floor(next() * uniqueKeys)}`),
          value,
          timestamp: Date.now(),
        })
      }
      const batch = await encodeRecordBatch({ records: batchRecords, compression })
      await log.append(batch, { assignOffsets: true, leaderEpoch: 0 as LeaderEpoch })
    }
    await log.roll()
    log.updateHighWatermark(log.logEndOffset)
    const writeSeconds = (performance.now() - writeStart) / 1000
    const sizeBefore = log.size

    const delay = monitorEventLoopDelay({ resolution: 1 })
    delay.enable()
    const cpuBefore = process.cpuUsage()
    const start = performance.now()
    const stats = await cleanLog(log, systemClock, silentLogger, { force: true })
    const seconds = (performance.now() - start) / 1000
    const cpu = process.cpuUsage(cpuBefore)
    delay.disable()
    if (!stats.cleaned) throw new Error(`${name}: nothing was cleaned`)
    // The bytes of the cleaned range (read twice: the map pass, then the rewrite).
    const cleanedMB = stats.bytesRead / MIB
    console.log(
      [
        `${name.padEnd(14)}`,
        `log ${(sizeBefore / MIB).toFixed(0)} MiB (${records} records, ${uniqueKeys} keys, written in ${writeSeconds.toFixed(1)} s)`,
        `cleaned ${cleanedMB.toFixed(0)} MiB in ${seconds.toFixed(2)} s = ${(cleanedMB / seconds).toFixed(0)} MB/s`,
        `cpu ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s`,
        `left ${(log.size / MIB).toFixed(1)} MiB, ${stats.recordsRetained} records, ${stats.segmentsBefore} -> ${stats.segmentsAfter} segments`,
        `event loop stall max ${(delay.max / 1e6).toFixed(1)} ms, p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms`,
      ].join('\n  '),
    )
    await log.close()
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

async function main(): Promise<void> {
  console.log(
    `log cleaner: 1 KiB records, ${RECORDS_PER_BATCH} per batch, ${UNIQUE_KEY_FRACTION * 100}% unique keys`,
  )
  await run('uncompressed', CompressionType.None, TOTAL_MB * MIB)
  await run('lz4', CompressionType.Lz4, TOTAL_MB * MIB * COMPRESSED_FRACTION)
  await run('gzip', CompressionType.Gzip, TOTAL_MB * MIB * COMPRESSED_FRACTION)
}

main().catch((err: unknown) => {
  console.error(err)
  process.exit(1)
})
