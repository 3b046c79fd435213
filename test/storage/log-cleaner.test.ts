/**
 * Log compaction: what survives a clean (the last record per key below the cleanable end,
 * at its original offset), tombstone expiry on the injected clock, compressed batches,
 * producer state, crash safety of the swap at every file-system step, reads during a swap,
 * the LogManager's scheduled cleaner, and a random model test.
 */
import assert from 'node:assert/strict'
import { cp, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { pino } from 'pino'
import type { FileHandle, FileSystem, OpenFlags } from '../../src/common/file-system.js'
import { silentLogger } from '../../src/common/logger.js'
import type { LeaderEpoch, Offset } from '../../src/common/types.js'
import { CompressionType } from '../../src/protocol/batch-header.js'
import { decodeRecordBatch, encodeRecordBatch, readBatchHeader } from '../../src/protocol/record-batch.js'
import { ProducerStateManager } from '../../src/replication/producer-state.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { cleanLog, LogCleaner } from '../../src/storage/log-cleaner.js'
import { fromProperties, type LogConfig } from '../../src/storage/log-config.js'
import { CLEANER_OFFSET_CHECKPOINT_FILE, LogManager } from '../../src/storage/log-manager.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { waitUntil } from '../helpers/wait.js'
import { crcIsValid, ManualClock, makeTempDir, readAll, removeDir, withTempDir } from './helpers.js'

const T0 = 1_700_000_000_000

function compactConfig(extra: Record<string, string | number> = {}): LogConfig {
  return fromProperties({
    'cleanup.policy': 'compact',
    'segment.bytes': 2048,
    'index.interval.bytes': 256,
    ...extra,
  })
}

interface Put {
  readonly key: string | null
  /** null: a tombstone. */
  readonly value: string | null
}

interface BatchOptions {
  readonly compression?: CompressionType
  readonly producerId?: bigint
  readonly producerEpoch?: number
  readonly baseSequence?: number
  readonly timestamp?: number
}

function batchOf(puts: readonly Put[], options: BatchOptions = {}): Promise<Buffer> {
  return encodeRecordBatch({
    records: puts.map((p, i) => ({
      key: p.key === null ? null : Buffer.from(p.key),
      value: p.value === null ? null : Buffer.from(p.value),
      timestamp: (options.timestamp ?? T0) + i,
    })),
    compression: options.compression ?? CompressionType.None,
    producerId: options.producerId,
    producerEpoch: options.producerEpoch,
    baseSequence: options.baseSequence,
  })
}

interface RecordView {
  readonly offset: number
  readonly key: string | null
  readonly value: string | null
}

/** Every record of the log in offset order, decoded. */
async function recordsOf(log: UnifiedLog): Promise<RecordView[]> {
  const out: RecordView[] = []
  for (const batch of await readAll(log)) {
    assert.ok(crcIsValid(batch.bytes), `CRC of batch ${batch.baseOffset}`)
    const decoded = await decodeRecordBatch(batch.bytes)
    for (const r of decoded.records) {
      out.push({
        offset: r.offset,
        key: r.key === null ? null : r.key.toString(),
        value: r.value === null ? null : r.value.toString(),
      })
    }
  }
  for (let i = 1; i < out.length; i++) assert.ok(out[i].offset > out[i - 1].offset, 'offsets increase')
  return out
}

/** The key -> value view a consumer rebuilding state from the log gets. */
function viewOf(records: readonly RecordView[]): Map<string, string> {
  const view = new Map<string, string>()
  for (const r of records) {
    if (r.key === null) continue
    if (r.value === null) view.delete(r.key)
    else view.set(r.key, r.value)
  }
  return view
}

async function openCompacted(
  dir: string,
  config = compactConfig(),
  clock = new ManualClock(T0),
  fs: FileSystem = nodeFileSystem,
  cleaner?: LogCleaner,
): Promise<UnifiedLog> {
  // As LogManager wires it: a truncation lowers the cleaner's checkpoint at once.
  const onTruncated = cleaner && (async (end: Offset) => void cleaner.noteTruncation(dir, end))
  return UnifiedLog.open({ dir, config, clock, fs, onTruncated })
}

/** Appends `rounds` overwrites of `keys` keys, one batch per `perBatch` records; returns the log end. */
async function writeOverwrites(
  log: UnifiedLog,
  keys: number,
  rounds: number,
  options: BatchOptions & { perBatch?: number } = {},
): Promise<void> {
  const perBatch = options.perBatch ?? 5
  let pending: Put[] = []
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < keys; k++) {
      pending.push({ key: `key-${k}`, value: `value-${k}-${round}-${'x'.repeat(20)}` })
      if (pending.length === perBatch) {
        await log.append(await batchOf(pending, options), {
          assignOffsets: true,
          leaderEpoch: 0 as LeaderEpoch,
        })
        pending = []
      }
    }
  }
  if (pending.length > 0)
    await log.append(await batchOf(pending, options), { assignOffsets: true, leaderEpoch: 0 as LeaderEpoch })
  log.updateHighWatermark(log.logEndOffset)
}

function cleanNow(log: UnifiedLog, clock: ManualClock, extra: Parameters<typeof cleanLog>[3] = {}) {
  return cleanLog(log, clock, silentLogger, { force: true, ...extra })
}

/** Checks that below `end` each key appears once, at an offset and with a value it had before. */
function assertCompacted(before: readonly RecordView[], after: readonly RecordView[], end: number): void {
  const original = new Map(before.map((r) => [r.offset, r]))
  const seen = new Set<string>()
  for (const r of after) {
    assert.deepEqual(r, original.get(r.offset), `record at ${r.offset} kept as written`)
    if (r.offset >= end || r.key === null) continue
    assert.ok(!seen.has(r.key), `key ${r.key} appears twice below ${end}`)
    seen.add(r.key)
  }
  assert.deepEqual(viewOf(after), viewOf(before))
  // Everything at or above the end is untouched.
  assert.deepEqual(
    after.filter((r) => r.offset >= end),
    before.filter((r) => r.offset >= end),
  )
}

describe('log cleaner', () => {
  it('keeps only the last value per key below the cleanable end, at its original offset', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const log = await openCompacted(dir, compactConfig(), clock)
      await writeOverwrites(log, 10, 30)
      const before = await recordsOf(log)
      const sizeBefore = log.size
      const segmentsBefore = log.numberOfSegments
      const stats = await cleanNow(log, clock)
      assert.ok(stats.cleaned)
      assert.equal(stats.endOffset, log.activeSegment.baseOffset)
      const after = await recordsOf(log)
      assertCompacted(before, after, stats.endOffset)
      assert.ok(after.length < before.length / 5, `${after.length} of ${before.length} records left`)
      assert.ok(log.size < sizeBefore / 3, `size ${log.size} of ${sizeBefore}`)
      // Full segments are cleaned one by one; the next clean groups the small cleaned ones.
      assert.equal(log.numberOfSegments, segmentsBefore)
      const second = await cleanNow(log, clock, { firstDirtyOffset: stats.endOffset })
      assert.ok(second.cleaned)
      assert.ok(log.numberOfSegments <= 3, `${log.numberOfSegments} segments of ${segmentsBefore}`)
      assert.deepEqual(await recordsOf(log), after)
      // The log goes on taking appends after the cleaned segments, and survives a reopen.
      await writeOverwrites(log, 3, 1)
      const expected = await recordsOf(log)
      await log.close()
      const reopened = await openCompacted(dir, compactConfig(), clock)
      assert.deepEqual(await recordsOf(reopened), expected)
      await reopened.close()
      const reopenedUnclean = await UnifiedLog.open({
        fs: nodeFileSystem,
        dir,
        config: compactConfig(),
        clock,
        hadCleanShutdown: false,
      })
      assert.deepEqual(await recordsOf(reopenedUnclean), expected)
      await reopenedUnclean.close()
    })
  })

  it('never cleans at or above the cleanable end offset (the high watermark)', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const log = await openCompacted(dir, compactConfig(), clock)
      await writeOverwrites(log, 10, 30)
      const middle = log.segmentBaseOffsets[Math.floor(log.numberOfSegments / 2)]
      const highWatermark = middle + 3 // inside a segment: that segment stays dirty
      log.updateHighWatermark(highWatermark as Offset)
      const before = await recordsOf(log)
      const bytesAbove = (await readAll(log, middle)).map((b) => b.bytes.toString('hex'))
      const stats = await cleanNow(log, clock)
      assert.ok(stats.cleaned)
      assert.ok(stats.endOffset <= highWatermark)
      assert.equal(stats.endOffset, middle)
      const after = await recordsOf(log)
      assertCompacted(before, after, stats.endOffset)
      assert.deepEqual(
        (await readAll(log, middle)).map((b) => b.bytes.toString('hex')),
        bytesAbove,
        'batches from the high watermark segment on are byte for byte the same',
      )
      // A second clean from the checkpoint with the high watermark at the end finishes the job.
      log.updateHighWatermark(log.logEndOffset)
      const second = await cleanNow(log, clock, { firstDirtyOffset: stats.endOffset })
      assert.ok(second.cleaned)
      assertCompacted(before, await recordsOf(log), second.endOffset)
      await log.close()
    })
  })

  it('respects min.cleanable.dirty.ratio and min.compaction.lag.ms unless forced', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0 + 1000)
      const config = compactConfig({ 'min.compaction.lag.ms': 60_000 })
      const log = await openCompacted(dir, config, clock)
      await writeOverwrites(log, 10, 20)
      // Records are stamped T0..: younger than the lag, so nothing is cleanable yet.
      assert.equal((await cleanNow(log, clock)).cleaned, false)
      clock.advance(120_000)
      const first = await cleanLog(log, clock, silentLogger, {})
      assert.ok(first.cleaned, 'all dirty: ratio 1')
      // Freshly cleaned: the dirty ratio is 0 until new overwrites come.
      const again = await cleanLog(log, clock, silentLogger, { firstDirtyOffset: first.endOffset })
      assert.equal(again.cleaned, false)
      await log.close()
    })
  })

  it('keeps tombstones for delete.retention.ms after the clean that first saw them, then removes them', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const config = compactConfig({ 'delete.retention.ms': 10_000 })
      const log = await openCompacted(dir, config, clock)
      await log.append(
        await batchOf([
          { key: 'gone', value: 'v1' },
          { key: 'kept', value: 'v1' },
        ]),
        {
          assignOffsets: true,
        },
      )
      await log.append(await batchOf([{ key: 'gone', value: null }]), { assignOffsets: true })
      await writeOverwrites(log, 5, 20)
      const stats = await cleanNow(log, clock)
      assert.ok(stats.cleaned)
      assert.equal(stats.nextDeleteHorizonMs, T0 + 10_000)
      let records = await recordsOf(log)
      assert.deepEqual(
        records.filter((r) => r.key === 'gone'),
        [{ offset: 2, key: 'gone', value: null }],
        'the tombstone alone is left for its key',
      )
      const tombstoneBatch = (await readAll(log)).find((b) => b.baseOffset === 2)!
      const header = readBatchHeader(tombstoneBatch.bytes)
      assert.equal(header.attributes & 0x40, 0x40, 'delete horizon flag')
      assert.equal(header.baseTimestamp, T0 + 10_000, 'delete horizon in baseTimestamp')
      clock.advance(9_999)
      await cleanNow(log, clock, { firstDirtyOffset: stats.endOffset })
      records = await recordsOf(log)
      assert.equal(records.filter((r) => r.key === 'gone').length, 1, 'kept until the horizon')
      clock.advance(1)
      await cleanNow(log, clock, { firstDirtyOffset: stats.endOffset })
      records = await recordsOf(log)
      assert.deepEqual(
        records.filter((r) => r.key === 'gone'),
        [],
      )
      assert.deepEqual(
        records.filter((r) => r.key === 'kept'),
        [{ offset: 1, key: 'kept', value: 'v1' }],
      )
      await log.close()
    })
  })

  for (const compression of [
    CompressionType.Gzip,
    CompressionType.Snappy,
    CompressionType.Lz4,
    CompressionType.Zstd,
  ]) {
    it(`cleans ${CompressionType[compression]} batches and keeps their codec`, async () => {
      await withTempDir(async (dir) => {
        const clock = new ManualClock(T0)
        const log = await openCompacted(dir, compactConfig({ 'segment.bytes': 1024 }), clock)
        await writeOverwrites(log, 7, 30, { compression, perBatch: 6 })
        const before = await recordsOf(log)
        const stats = await cleanNow(log, clock)
        assert.ok(stats.cleaned)
        const after = await recordsOf(log)
        assertCompacted(before, after, stats.endOffset)
        for (const batch of await readAll(log)) {
          const header = readBatchHeader(batch.bytes)
          // An empty batch has no records section, so no codec (librdkafka loops on one that claims gzip).
          assert.equal(header.compression, header.recordsCount > 0 ? compression : CompressionType.None)
        }
        await log.close()
      })
    })
  }

  it("keeps each producer's last batch (as an empty batch) with its producer fields", async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const log = await openCompacted(dir, compactConfig(), clock)
      const producerBatch = await batchOf(
        [
          { key: 'a', value: 'p1' },
          { key: 'b', value: 'p1' },
          { key: 'c', value: 'p1' },
        ],
        { producerId: 7n, producerEpoch: 3, baseSequence: 40 },
      )
      await log.append(producerBatch, { assignOffsets: true })
      const earlier = await batchOf([{ key: 'a', value: 'p0' }], {
        producerId: 8n,
        producerEpoch: 0,
        baseSequence: 0,
      })
      await log.append(earlier, { assignOffsets: true })
      const later = await batchOf([{ key: 'a', value: 'p2' }], {
        producerId: 8n,
        producerEpoch: 0,
        baseSequence: 1,
      })
      await log.append(later, { assignOffsets: true })
      // Overwrite every key, many times, so all of the producers' records go.
      await writeOverwrites(log, 3, 1)
      for (let i = 0; i < 30; i++) {
        await log.append(
          await batchOf([
            { key: 'a', value: `o${i}` },
            { key: 'b', value: `o${i}` },
            { key: 'c', value: `o${i}` },
          ]),
          { assignOffsets: true },
        )
      }
      log.updateHighWatermark(log.logEndOffset)
      const stats = await cleanNow(log, clock)
      assert.ok(stats.cleaned)
      const batches = (await readAll(log)).map((b) => readBatchHeader(b.bytes))
      const p7 = batches.filter((b) => b.producerId === 7n)
      assert.equal(p7.length, 1)
      assert.deepEqual(
        {
          baseOffset: p7[0].baseOffset,
          lastOffsetDelta: p7[0].lastOffsetDelta,
          recordsCount: p7[0].recordsCount,
          producerEpoch: p7[0].producerEpoch,
          baseSequence: p7[0].baseSequence,
        },
        { baseOffset: 0, lastOffsetDelta: 2, recordsCount: 0, producerEpoch: 3, baseSequence: 40 },
      )
      const p8 = batches.filter((b) => b.producerId === 8n)
      assert.deepEqual(
        p8.map((b) => [b.baseOffset, b.baseSequence, b.recordsCount]),
        [[4, 1, 0]],
        "only producer 8's last batch stays",
      )
      // Once the producers expire (producer.id.expiration.ms), their empty batches go too.
      clock.advance(2 * 86_400_000)
      assert.ok((await cleanNow(log, clock, { firstDirtyOffset: stats.endOffset })).cleaned)
      const left = (await readAll(log)).map((b) => readBatchHeader(b.bytes))
      assert.deepEqual(
        left.filter((b) => b.producerId >= 0n),
        [],
      )
      await log.close()
    })
  })

  it('producer state rebuilt from a cleaned log still answers a retry of the last batch with its offsets', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const attach = async (log: UnifiedLog) =>
        log.attachProducerState(
          new ProducerStateManager(log, { clock, logger: silentLogger, producerIdExpirationMs: 86_400_000 }),
        )
      const log = await openCompacted(dir, compactConfig(), clock)
      await attach(log)
      const idempotent = (sequence: number, value: string) =>
        batchOf(
          [
            { key: 'p', value },
            { key: 'q', value },
          ],
          { producerId: 42n, producerEpoch: 1, baseSequence: sequence },
        )
      await log.append(await idempotent(0, 'a'), { assignOffsets: true })
      const last = await log.append(await idempotent(2, 'b'), { assignOffsets: true })
      for (let i = 0; i < 40; i++) {
        await log.append(
          await batchOf([
            { key: 'p', value: `o${i}` },
            { key: 'q', value: `o${i}` },
          ]),
          { assignOffsets: true },
        )
      }
      log.updateHighWatermark(log.logEndOffset)
      assert.ok((await cleanNow(log, clock)).cleaned)
      await log.close()
      // Reopen without snapshots: the state comes from replaying the cleaned log.
      for (const name of await readdir(dir))
        if (name.endsWith('.snapshot')) await nodeFileSystem.unlink(join(dir, name))
      const reopened = await openCompacted(dir, compactConfig(), clock)
      await attach(reopened)
      const retry = await reopened.append(await idempotent(2, 'b'), { assignOffsets: true })
      assert.deepEqual([retry.firstOffset, retry.lastOffset], [last.firstOffset, last.lastOffset])
      const next = await reopened.append(await idempotent(4, 'c'), { assignOffsets: true })
      assert.equal(next.firstOffset, reopened.logEndOffset - 2, 'the next sequence is taken')
      await assert.rejects(
        reopened.append(await idempotent(9, 'd'), { assignOffsets: true }),
        /OUT_OF_ORDER|sequence/i,
      )
      await reopened.close()
    })
  })

  it('keeps control batches, drops keyless records, and a follower copies the cleaned log with its gaps', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const leader = await openCompacted(join(dir, 'leader-0'), compactConfig(), clock)
      const control = await encodeRecordBatch({
        records: [{ key: Buffer.from([0, 0, 0, 1]), value: Buffer.from([0, 0, 0, 0, 0, 0]), timestamp: T0 }],
        baseOffset: 1,
        isControl: true,
        isTransactional: true,
        producerId: 5n,
        producerEpoch: 0,
      })
      // As a follower would store it: keys are only enforced on produce.
      await leader.append(await batchOf([{ key: null, value: 'keyless' }]), { assignOffsets: false })
      await leader.append(control, { assignOffsets: false })
      await writeOverwrites(leader, 8, 25)
      const stats = await cleanNow(leader, clock)
      assert.ok(stats.cleaned)
      const headers = (await readAll(leader)).map((b) => readBatchHeader(b.bytes))
      assert.equal(headers[0].isControl, true, 'the control batch stays, first')
      assert.equal(headers[0].baseOffset, 1)
      const records = await recordsOf(leader)
      assert.ok(!records.some((r) => r.key === null), 'the keyless record is gone')
      // A follower starting from scratch appends what the leader serves, gaps and all.
      const follower = await openCompacted(join(dir, 'follower-0'), compactConfig(), clock)
      let offset = 0
      while (offset < leader.logEndOffset) {
        const data = await leader.read(offset as Offset, { maxBytes: 1500 })
        await follower.append(Buffer.concat(data.records), { assignOffsets: false })
        offset = data.nextOffset
      }
      assert.equal(follower.logEndOffset, leader.logEndOffset)
      assert.deepEqual(
        (await readAll(follower)).map((b) => b.bytes.toString('hex')),
        (await readAll(leader)).map((b) => b.bytes.toString('hex')),
      )
      await follower.close()
      const reopened = await UnifiedLog.open({
        fs: nodeFileSystem,
        dir: join(dir, 'follower-0'),
        config: compactConfig(),
        clock,
      })
      assert.equal(reopened.logEndOffset, leader.logEndOffset, 'recovery accepts the gaps')
      await reopened.close()
      await leader.close()
    })
  })

  it('compact,delete: retention still deletes old segments, and cleaning leaves the rest compacted', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const config = compactConfig({ 'cleanup.policy': 'compact,delete', 'retention.ms': 60_000 })
      const log = await openCompacted(dir, config, clock)
      await writeOverwrites(log, 10, 20, { timestamp: T0 - 120_000 })
      await writeOverwrites(log, 10, 20, { timestamp: T0 })
      const before = await recordsOf(log)
      assert.ok((await cleanNow(log, clock)).cleaned)
      const deleted = await log.deleteOldSegments()
      assert.ok(deleted > 0, 'the old segments go by retention.ms')
      const after = await recordsOf(log)
      assert.ok(after[0].offset > 0)
      assert.deepEqual(viewOf(after), viewOf(before))
      await log.close()
    })
  })

  it('a log compacted once and then switched to delete keeps its gaps through recovery (wasCompacted)', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const log = await openCompacted(dir, compactConfig(), clock)
      await writeOverwrites(log, 10, 30)
      assert.ok((await cleanNow(log, clock)).cleaned)
      const after = await recordsOf(log)
      await log.close()
      const deleteConfig = fromProperties({ 'segment.bytes': 2048 })
      const reopened = await UnifiedLog.open({
        fs: nodeFileSystem,
        dir,
        config: deleteConfig,
        clock,
        hadCleanShutdown: false,
        recoveryPoint: 0 as Offset,
        wasCompacted: true,
      })
      assert.deepEqual(await recordsOf(reopened), after)
      await reopened.close()
    })
  })

  it('truncating into a gap left by compaction ends the log at the target, not at the next batch (model seed 1897428293)', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const log = await openCompacted(dir, compactConfig(), clock)
      await writeOverwrites(log, 10, 30)
      assert.ok((await cleanNow(log, clock)).cleaned)
      const firstBatch = (await readAll(log))[0]
      assert.ok(firstBatch.baseOffset > 0, 'the cleaned log starts with a gap')
      await log.truncateTo(0 as Offset)
      assert.equal(log.logEndOffset, 0)
      assert.deepEqual(await readAll(log), [])
      await log.append(await batchOf([{ key: 'a', value: 'b' }]), { assignOffsets: true })
      assert.deepEqual(await recordsOf(log), [{ offset: 0, key: 'a', value: 'b' }])
      await log.close()
    })
  })

  /**
   * The shrunk counterexample of the model test (seed 376299867): one key, so the clean
   * keeps only offset 4 of segment [0, 5); after a reopen (high watermark 0) the follower
   * truncates to 1, which cuts that batch and holds nothing below it.
   */
  async function compactedToOneBatchThenReopened(dir: string, clock: ManualClock): Promise<UnifiedLog> {
    const config = compactConfig({ 'segment.bytes': 400, 'delete.retention.ms': 1000 })
    const put = async (log: UnifiedLog, value: string | null) =>
      log.append(await batchOf([{ key: 'k0', value }], { timestamp: clock.now }), { assignOffsets: true })
    let log = await openCompacted(dir, config, clock)
    await log.truncateTo(0 as Offset)
    for (const value of [null, 'v0', 'v0']) await put(log, value)
    await log.close()
    log = await openCompacted(dir, config, clock)
    for (const value of ['v0', 'v0', 'v0', null, null, 'v0']) await put(log, value)
    log.updateHighWatermark(log.logEndOffset)
    assert.equal((await new LogCleaner({ clock, logger: silentLogger }).cleanLogs([log])).length, 1)
    await put(log, 'v0')
    await put(log, 'v0')
    await log.close()
    log = await openCompacted(dir, config, clock)
    assert.deepEqual(log.segmentBaseOffsets, [0, 5, 10])
    assert.equal(log.logEndOffset, 11)
    assert.equal(log.highWatermark, 0)
    assert.equal((await readAll(log))[0].baseOffset, 4, 'compaction left offsets 0-3 empty')
    return log
  }

  it('truncating to inside a gap left by compaction ends the log after the last batch kept, where reads can reach (model seed 376299867)', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      let log = await compactedToOneBatchThenReopened(dir, clock)
      await log.truncateTo(1 as Offset)
      // Not 1: offset 0 is held by no batch, so a read there could never progress to the log end.
      assert.equal(log.logEndOffset, 0)
      assert.equal(log.highWatermark, 0)
      assert.deepEqual(log.segmentBaseOffsets, [0])
      assert.deepEqual(await readAll(log), [])
      await log.append(await batchOf([{ key: 'a', value: 'b' }]), { assignOffsets: true })
      assert.deepEqual(await recordsOf(log), [{ offset: 0, key: 'a', value: 'b' }])
      await log.close()
      log = await openCompacted(dir, compactConfig({ 'segment.bytes': 400 }), clock)
      assert.equal(log.logEndOffset, 1, 'a reopen agrees')
      assert.deepEqual(await recordsOf(log), [{ offset: 0, key: 'a', value: 'b' }])
      await log.close()
    })
  })

  it('truncating into a compaction gap never ends the log below its log start offset', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const log = await compactedToOneBatchThenReopened(dir, clock)
      log.updateHighWatermark(log.logEndOffset)
      assert.equal(await log.deleteRecordsBefore(2 as Offset), 2)
      await log.truncateTo(3 as Offset)
      // The last batch kept ends at 0, but records below 2 were deleted: the log is empty at 2.
      assert.equal(log.logStartOffset, 2)
      assert.equal(log.logEndOffset, 2)
      assert.deepEqual(await readAll(log), [])
      await log.append(await batchOf([{ key: 'a', value: 'b' }]), { assignOffsets: true })
      assert.deepEqual(await recordsOf(log), [{ offset: 2, key: 'a', value: 'b' }])
      await log.close()
    })
  })

  it('the LogCleaner also cleans below the dirty ratio when max.compaction.lag.ms or a tombstone horizon passes', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const config = compactConfig({
        'min.cleanable.dirty.ratio': '0.99',
        'max.compaction.lag.ms': 60_000,
        'delete.retention.ms': 30_000,
      })
      const cleaner = new LogCleaner({ clock, logger: silentLogger })
      const log = await openCompacted(dir, config, clock)
      await log.append(await batchOf([{ key: 'gone', value: null }]), { assignOffsets: true })
      await writeOverwrites(log, 10, 30)
      assert.equal((await cleaner.cleanLogs([log])).length, 1, 'all dirty: ratio 1')
      assert.equal((await recordsOf(log)).filter((r) => r.key === 'gone').length, 1)
      // A little dirty data: far below the ratio.
      await writeOverwrites(log, 10, 6, { timestamp: clock.now })
      assert.equal((await cleaner.cleanLogs([log])).length, 0)
      clock.advance(30_000)
      assert.equal((await cleaner.cleanLogs([log])).length, 1, 'the tombstone horizon passed')
      assert.equal((await recordsOf(log)).filter((r) => r.key === 'gone').length, 0)
      await writeOverwrites(log, 10, 6, { timestamp: clock.now })
      assert.equal((await cleaner.cleanLogs([log])).length, 0)
      clock.advance(60_001)
      assert.equal((await cleaner.cleanLogs([log])).length, 1, 'max.compaction.lag.ms passed')
      await log.close()
    })
  })

  it('a checkpoint above the log end is not trusted: the log is cleaned again from its start, with a warning (Kafka LogCleanerManager)', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const warnings: { msg: string }[] = []
      const logger = pino(
        { level: 'warn' },
        { write: (line: string) => void warnings.push(JSON.parse(line)) },
      )
      const cleaner = new LogCleaner({ clock, logger })
      // Opened without the truncation hook: the cleaner is not told of the truncation below.
      let log = await openCompacted(dir, compactConfig(), clock)
      await writeOverwrites(log, 10, 30)
      assert.equal((await cleaner.cleanLogs([log])).length, 1)
      const checkpoint = cleaner.checkpoints.get(dir)
      assert.ok(checkpoint !== undefined && checkpoint > 40, `checkpoint ${checkpoint}`)
      assert.equal(await log.truncateTo((checkpoint - 1) as Offset), true)
      // A reopen forgets the truncation the log itself noted for the cleaner.
      await log.close()
      log = await openCompacted(dir, compactConfig(), clock)
      assert.ok(log.logEndOffset < checkpoint, `log end ${log.logEndOffset}, checkpoint ${checkpoint}`)
      assert.equal(cleaner.firstDirtyOffset(log), log.logStartOffset)
      assert.deepEqual(
        warnings.map((w) => w.msg),
        ['cleaner checkpoint above the log end: cleaning the log again from its start'],
      )
      // The same rule for a checkpoint read back at start-up.
      const restarted = new LogCleaner({ clock, logger })
      restarted.restoreFirstDirtyOffset(log, checkpoint)
      assert.equal(restarted.checkpoints.has(dir), false)
      restarted.restoreFirstDirtyOffset(log, log.logEndOffset)
      assert.equal(restarted.checkpoints.get(dir), log.logEndOffset)
      assert.equal(warnings.length, 2)
      await log.close()
    })
  })

  it('reads running while segments are swapped never fail and always see valid batches', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const log = await openCompacted(dir, compactConfig({ 'segment.bytes': 4096 }), clock)
      await writeOverwrites(log, 20, 60)
      const before = await recordsOf(log)
      let done = false
      let reads = 0
      const reader = (async () => {
        let offset = 0
        while (!done) {
          if (offset >= log.logEndOffset) offset = 0
          const data = await log.read(offset as Offset, { maxBytes: 3000 })
          for (const chunk of data.records) {
            for (let at = 0; at < chunk.length; ) {
              const size = 12 + chunk.readInt32BE(at + 8)
              assert.ok(crcIsValid(chunk.subarray(at, at + size)))
              at += size
            }
          }
          reads++
          offset = data.nextOffset
          // ListOffsets by time walks the segments too.
          assert.ok((await log.offsetForTimestamp(T0)) !== undefined)
          assert.ok((await log.latestTimestamp()) !== undefined)
          await new Promise((resolve) => setImmediate(resolve))
        }
      })()
      const stats = await cleanNow(log, clock)
      done = true
      await reader
      assert.ok(stats.cleaned)
      assert.ok(reads > 0)
      assertCompacted(before, await recordsOf(log), stats.endOffset)
      await log.close()
    })
  })

  it('the LogManager cleans compacted logs on its schedule and checkpoints the first dirty offset', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const topicConfig = (topic: string) =>
        topic === 'plain' ? fromProperties({ 'segment.bytes': 2048 }) : undefined
      const manager = await LogManager.open({
        fs: nodeFileSystem,
        logDirs: [dir],
        clock,
        defaultConfig: compactConfig(),
        topicConfig,
        cleanerEnable: true,
        cleanerBackoffMs: 1000,
      })
      manager.startup()
      const log = await manager.getOrCreateLog({ topic: 'offsets', partition: 0 })
      const plain = await manager.getOrCreateLog({ topic: 'plain', partition: 0 })
      await writeOverwrites(log, 10, 30)
      await writeOverwrites(plain, 10, 30)
      const sizeBefore = log.size
      const plainSize = plain.size
      clock.advance(1000)
      await waitUntil('the cleaner to shrink the log', 10_000, () => log.size < sizeBefore, 5)
      assert.equal(plain.size, plainSize, 'a delete-policy log is not cleaned')
      await manager.cleanLogs() // waits for the scheduled pass, then finds nothing left
      await manager.shutdown()
      const checkpoint = await readdir(dir)
      assert.ok(checkpoint.includes(CLEANER_OFFSET_CHECKPOINT_FILE))
      const reopened = await LogManager.open({
        fs: nodeFileSystem,
        logDirs: [dir],
        clock,
        defaultConfig: compactConfig(),
        topicConfig,
        cleanerEnable: true,
      })
      const again = reopened.getLog({ topic: 'offsets', partition: 0 })!
      again.updateHighWatermark(again.logEndOffset)
      assert.equal(await reopened.cleanLogs(), 0, 'nothing dirty after the checkpoint')
      await reopened.shutdown()
    })
  })
})

// ---- crash safety ----

/** The real file system until operation number `failAt`; from then on every operation fails (the process died). */
class CrashingFileSystem implements FileSystem {
  operations = 0
  crashed = false

  constructor(public failAt: number) {}

  /** From now on, crash at the `failAt`-th operation. */
  arm(failAt: number): void {
    this.operations = 0
    this.failAt = failAt
  }

  private step(what: string): void {
    this.operations++
    if (this.operations >= this.failAt) this.crashed = true
    if (this.crashed) throw Object.assign(new Error(`simulated crash at ${what}`), { code: 'EIO' })
  }

  async open(path: string, flags: OpenFlags): Promise<FileHandle> {
    this.step(`open ${path}`)
    const handle = await nodeFileSystem.open(path, flags)
    const fs = this
    return {
      read: (b, o, l, p) => handle.read(b, o, l, p),
      async write(buffer, position) {
        fs.step('write')
        return handle.write(buffer, position)
      },
      async writev(buffers, position) {
        fs.step('writev')
        return handle.writev(buffers, position)
      },
      async sync() {
        fs.step('sync')
        return handle.sync()
      },
      async truncate(length) {
        fs.step('truncate')
        return handle.truncate(length)
      },
      stat: () => handle.stat(),
      close: () => handle.close(),
    }
  }
  async rename(from: string, to: string): Promise<void> {
    this.step(`rename ${from}`)
    return nodeFileSystem.rename(from, to)
  }
  async unlink(path: string): Promise<void> {
    this.step(`unlink ${path}`)
    return nodeFileSystem.unlink(path)
  }
  mkdir(path: string): Promise<boolean> {
    return nodeFileSystem.mkdir(path)
  }
  rmdir(path: string): Promise<void> {
    return nodeFileSystem.rmdir(path)
  }
  readdir(path: string): Promise<string[]> {
    return nodeFileSystem.readdir(path)
  }
  stat(path: string) {
    return nodeFileSystem.stat(path)
  }
  async syncDir(path: string): Promise<void> {
    this.step(`syncDir ${path}`)
    return nodeFileSystem.syncDir(path)
  }

  statfs(path: string) {
    return nodeFileSystem.statfs(path)
  }
  lockExclusive(path: string) {
    return nodeFileSystem.lockExclusive(path)
  }
}

describe('log cleaner crash safety', () => {
  it('a crash at any file operation of a clean leaves the old or the new log, never a mix or a loss', async () => {
    const root = await makeTempDir('tidelog-cleaner-crash-')
    try {
      const source = join(root, 'source-0')
      const clock = new ManualClock(T0)
      const config = compactConfig({ 'segment.bytes': 1500, 'delete.retention.ms': 0 })
      const log = await openCompacted(source, config, clock)
      await writeOverwrites(log, 6, 25)
      await log.append(await batchOf([{ key: 'key-1', value: null }]), { assignOffsets: true })
      await writeOverwrites(log, 2, 6)
      await log.close()

      // The reference outcomes: before, and after one complete clean.
      const reference = join(root, 'reference-0')
      await cp(source, reference, { recursive: true })
      const refLog = await openCompacted(reference, config, clock)
      refLog.updateHighWatermark(refLog.logEndOffset)
      const before = await recordsOf(refLog)
      const counting = new CrashingFileSystem(Infinity)
      await cp(source, join(root, 'counted-0'), { recursive: true })
      const counted = await openCompacted(join(root, 'counted-0'), config, clock, counting)
      counted.updateHighWatermark(counted.logEndOffset)
      counting.arm(Infinity)
      assert.ok((await cleanNow(counted, clock)).cleaned)
      const totalOps = counting.operations
      const after = await recordsOf(counted)
      await counted.close()
      await refLog.close()
      assert.notDeepEqual(after, before)
      assert.ok(totalOps > 10, `${totalOps} file operations`)

      const outcomes = { old: 0, new: 0, someGroupsSwapped: 0 }
      for (let failAt = 1; failAt <= totalOps + 1; failAt++) {
        const dir = join(root, `crash${failAt}-0`)
        await cp(source, dir, { recursive: true })
        const fs = new CrashingFileSystem(Infinity)
        const crashing = await openCompacted(dir, config, clock, fs)
        crashing.updateHighWatermark(crashing.logEndOffset)
        fs.arm(failAt)
        await cleanNow(crashing, clock).catch(() => undefined)
        // Wait for anything queued, then drop the handles as a dead process would.
        await crashing.read(0 as Offset, { maxBytes: 1 }).catch(() => undefined)
        await crashing.closeHandlers()
        const reopened = await UnifiedLog.open({
          fs: nodeFileSystem,
          dir,
          config,
          clock,
          hadCleanShutdown: false,
        })
        const records = await recordsOf(reopened)
        // Each group of segments is swapped atomically: every record is one of the old
        // log's, at its offset, and every record the complete clean keeps is there.
        const original = new Set(before.map((r) => JSON.stringify(r)))
        const present = new Set(records.map((r) => JSON.stringify(r)))
        for (const r of present) assert.ok(original.has(r), `crash ${failAt}: unknown record ${r}`)
        for (const r of after)
          assert.ok(present.has(JSON.stringify(r)), `crash ${failAt}: lost ${JSON.stringify(r)}`)
        assert.deepEqual(viewOf(records), viewOf(before), `crash ${failAt}: the key -> value view changed`)
        if (records.length === before.length) outcomes.old++
        else if (records.length === after.length) outcomes.new++
        else outcomes.someGroupsSwapped++
        const files = await readdir(dir)
        assert.deepEqual(
          files.filter((f) => /\.(cleaned|swap|deleted)$/.test(f)),
          [],
          `leftovers after crash ${failAt}`,
        )
        // The recovered log is usable.
        await reopened.append(await batchOf([{ key: 'z', value: 'z' }]), { assignOffsets: true })
        await reopened.close()
        await removeDir(dir)
      }
      assert.ok(outcomes.old > 0 && outcomes.new > 0, JSON.stringify(outcomes))
    } finally {
      await removeDir(root)
    }
  })

  it('recovery completes a leftover .swap and drops leftover .cleaned files', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const config = compactConfig()
      const log = await openCompacted(dir, config, clock)
      await writeOverwrites(log, 5, 30)
      const before = await recordsOf(log)
      const groupBase = log.segmentBaseOffsets[0]
      // Build a cleaned segment by hand: what a crash right after the .swap rename leaves.
      const stats = await cleanNow(log, clock)
      const after = await recordsOf(log)
      await log.close()
      assert.ok(stats.cleaned)
      assert.notDeepEqual(after, before)
      // A stray .cleaned segment (a clean that had not begun its swap) is ignored and removed.
      const prefix = String(groupBase).padStart(20, '0')
      await cp(join(dir, `${prefix}.log`), join(dir, `${prefix}.log.cleaned`))
      const reopened = await UnifiedLog.open({
        fs: nodeFileSystem,
        dir,
        config,
        clock,
        hadCleanShutdown: false,
      })
      assert.deepEqual(await recordsOf(reopened), after)
      assert.ok(!(await readdir(dir)).some((f) => f.endsWith('.cleaned')))
      await reopened.close()
    })
  })
})

// ---- model test ----

type Op =
  | { kind: 'put'; key: number; value: number }
  | { kind: 'delete'; key: number }
  | { kind: 'clean'; advanceMs: number }
  | { kind: 'reopen' }
  | { kind: 'cleanWhileAppending'; keys: number[] }
  | { kind: 'truncate'; fraction: number }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({ kind: fc.constant('put' as const), key: fc.nat(15), value: fc.nat(1000) }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), key: fc.nat(15) }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('clean' as const), advanceMs: fc.constantFrom(0, 500, 5000) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('reopen' as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('cleanWhileAppending' as const),
      keys: fc.array(fc.nat(15), { minLength: 1, maxLength: 6 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('truncate' as const),
      fraction: fc.double({ min: 0, max: 1, noNaN: true }),
    }),
  },
)

/**
 * The model test explores new cases on every run (a found bug is then kept as a regression
 * test above, with its seed). TIDELOG_CLEANER_MODEL_SEED replays one. The seed is printed
 * first and shrinking is capped, so a failure in CI can be replayed even when shrinking a
 * 150-operation case would outlast the test's timeout (it once did).
 */
const MODEL_SEED = Number(process.env.TIDELOG_CLEANER_MODEL_SEED ?? Math.floor(Math.random() * 2 ** 31))
const MODEL_TIME_LIMIT_MS = 120_000

/** The model property; `counts` adds up what the runs did, to check they did something. */
function cleanerModel(counts: { cleans: number; tombstonesRemoved: number }) {
  return fc.asyncProperty(
    fc.array(opArb, { minLength: 30, maxLength: 150, size: 'max' }),
    fc.boolean(),
    async (ops, gzip) => {
      const dir = await makeTempDir('tidelog-cleaner-model-')
      const clock = new ManualClock(T0)
      const config = compactConfig({ 'segment.bytes': 400, 'delete.retention.ms': 1000 })
      const cleaner = new LogCleaner({ clock, logger: silentLogger })
      let log = await openCompacted(dir, config, clock, nodeFileSystem, cleaner)
      const model = new Map<string, string>()
      let lastOp = ''
      try {
        for (const [opIndex, op] of ops.entries()) {
          lastOp = `${opIndex} ${JSON.stringify(op)} lso ${log.logStartOffset} leo ${log.logEndOffset} hw ${log.highWatermark} segs ${log.segmentBaseOffsets}`
          if (op.kind === 'put' || op.kind === 'delete') {
            const key = `k${op.key}`
            const value = op.kind === 'put' ? `v${op.value}` : null
            const compression = gzip ? CompressionType.Gzip : CompressionType.None
            await log.append(await batchOf([{ key, value }], { compression, timestamp: clock.now }), {
              assignOffsets: true,
            })
            if (value === null) model.delete(key)
            else model.set(key, value)
          } else if (op.kind === 'clean') {
            clock.advance(op.advanceMs)
            log.updateHighWatermark(log.logEndOffset)
            const tombstonesBefore = (await recordsOf(log)).filter((r) => r.value === null).length
            counts.cleans += (await cleaner.cleanLogs([log])).length
            const tombstonesAfter = (await recordsOf(log)).filter((r) => r.value === null).length
            counts.tombstonesRemoved += Math.max(0, tombstonesBefore - tombstonesAfter)
          } else if (op.kind === 'cleanWhileAppending') {
            // Appends queue behind and around the swap; the clean must not lose or reorder them.
            log.updateHighWatermark(log.logEndOffset)
            const cleaning = cleaner.cleanLogs([log])
            for (const [i, k] of op.keys.entries()) {
              const key = `k${k}`
              const value = `w${i}`
              await log.append(await batchOf([{ key, value }], { timestamp: clock.now }), {
                assignOffsets: true,
              })
              model.set(key, value)
            }
            counts.cleans += (await cleaning).length
          } else if (op.kind === 'truncate') {
            // A follower cutting what is above its high watermark (never what was cleaned).
            const before = await recordsOf(log)
            const hw = log.highWatermark
            await log.truncateTo((hw + Math.floor((log.logEndOffset - hw) * op.fraction)) as Offset)
            const kept = viewOf(before.filter((r) => r.offset < log.logEndOffset))
            model.clear()
            for (const [k, v] of kept) model.set(k, v)
          } else {
            await log.close()
            log = await openCompacted(dir, config, clock, nodeFileSystem, cleaner)
          }
          assert.deepEqual(viewOf(await recordsOf(log)), model)
        }
      } catch (err) {
        console.error('model test failed at', lastOp, err)
        throw err
      } finally {
        await log.close().catch(() => undefined)
        await removeDir(dir)
      }
    },
  )
}

describe('log cleaner model', () => {
  it('random puts, deletes, cleans and reopens: the key -> value view equals a Map model', async () => {
    console.log(`log cleaner model seed ${MODEL_SEED} (replay: TIDELOG_CLEANER_MODEL_SEED=${MODEL_SEED})`)
    const counts = { cleans: 0, tombstonesRemoved: 0 }
    await fc.assert(cleanerModel(counts), {
      numRuns: 30,
      seed: MODEL_SEED,
      interruptAfterTimeLimit: MODEL_TIME_LIMIT_MS,
    })
    assert.ok(counts.cleans > 20, `${counts.cleans} cleans`)
    assert.ok(counts.tombstonesRemoved > 0, 'some tombstones expired and went')
  })

  it('a truncation, then a reopen before the next clean, does not leave the cleaner checkpoint above the log end (model seed 777001, case 458)', async () => {
    // Found in CI: truncations to the high watermark, reopens, then appends below the old
    // checkpoint; those batches counted as cleaned, so a key's value outlived its tombstone
    // (k13 => v354 back after a clean). Fails without the onTruncated hook.
    await fc.assert(cleanerModel({ cleans: 0, tombstonesRemoved: 0 }), {
      numRuns: 1,
      seed: 777001,
      path: '458',
      endOnFailure: true,
    })
  })
})
