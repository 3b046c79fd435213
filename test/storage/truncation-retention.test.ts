import assert from 'node:assert/strict'
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import type { Clock } from '../../src/common/clock.js'
import type { LeaderEpoch, Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { isStorageError } from '../../src/storage/errors.js'
import { fromProperties } from '../../src/storage/log-config.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { ManualClock, readAll, simpleBatch, waitFor, withTempDir } from './helpers.js'

const small = fromProperties({ 'segment.bytes': 1024, 'index.interval.bytes': 100 })

async function filled(dir: string, batches: number, config = small, clock?: Clock) {
  const log = await UnifiedLog.open({ fs: nodeFileSystem, dir: join(dir, 't-0'), config, clock })
  for (let i = 0; i < batches; i++) {
    await log.append(simpleBatch(2, 40, i, { baseTimestamp: 1_000_000 + i * 1000 }), {
      assignOffsets: true,
      leaderEpoch: Math.floor(i / 10) as LeaderEpoch,
    })
  }
  return log
}

describe('truncation', () => {
  it('truncateTo drops later segments, cuts at a batch boundary and fixes the epoch cache', async () => {
    await withTempDir(async (dir) => {
      const log = await filled(dir, 40)
      log.updateHighWatermark(log.logEndOffset)
      assert.ok(log.numberOfSegments >= 4)
      assert.equal(await log.truncateTo(31 as Offset), true) // offset 31 is the second record of batch [30, 31]
      assert.equal(log.logEndOffset, 30)
      assert.equal(log.highWatermark, 30)
      assert.ok(log.recoveryPoint <= 30)
      const batches = await readAll(log)
      assert.equal(batches.length, 15)
      assert.deepEqual(log.leaderEpochCache.entries(), [
        { epoch: 0, startOffset: 0 },
        { epoch: 1, startOffset: 20 },
      ])
      const files = (await readdir(join(dir, 't-0'))).filter((f) => f.endsWith('.log'))
      assert.equal(files.length, log.numberOfSegments)
      assert.equal(await log.truncateTo(100 as Offset), false)
      const next = await log.append(simpleBatch(1), { assignOffsets: true, leaderEpoch: 5 as LeaderEpoch })
      assert.equal(next.firstOffset, 30)
      await log.close()
      const reopened = await UnifiedLog.open({ fs: nodeFileSystem, dir: join(dir, 't-0'), config: small })
      assert.equal(reopened.logEndOffset, 31)
      assert.equal((await readAll(reopened)).length, 16)
      await reopened.close()
    })
  })

  it('truncateTo below the first segment restarts the log there', async () => {
    await withTempDir(async (dir) => {
      const log = await filled(dir, 5)
      await log.truncateFullyAndStartAt(100 as Offset)
      assert.equal(log.logStartOffset, 100)
      assert.equal(log.logEndOffset, 100)
      await log.append(simpleBatch(3, 10, 0, { baseOffset: 100 }), { assignOffsets: false })
      assert.equal(await log.truncateTo(50 as Offset), true)
      assert.deepEqual([log.logStartOffset, log.logEndOffset, log.numberOfSegments], [50, 50, 1])
      assert.deepEqual(log.segmentBaseOffsets, [50])
      await log.close()
    })
  })

  it('truncateFullyAndStartAt empties the log and its epoch cache', async () => {
    await withTempDir(async (dir) => {
      const log = await filled(dir, 30)
      await log.truncateFullyAndStartAt(1000 as Offset)
      assert.deepEqual([log.logStartOffset, log.logEndOffset, log.highWatermark], [1000, 1000, 1000])
      assert.deepEqual(log.leaderEpochCache.entries(), [])
      const files = (await readdir(join(dir, 't-0'))).filter((f) => f.endsWith('.log'))
      assert.deepEqual(files, ['00000000000000001000.log'])
      const info = await log.append(simpleBatch(2), { assignOffsets: true })
      assert.equal(info.firstOffset, 1000)
      await log.close()
    })
  })
})

describe('deleteRecordsBefore and retention', () => {
  it('deleteRecordsBefore moves the log start offset, bounded by the high watermark; -1 means the high watermark', async () => {
    await withTempDir(async (dir) => {
      const log = await filled(dir, 30)
      log.updateHighWatermark(40 as Offset)
      assert.equal(await log.deleteRecordsBefore(25 as Offset), 25)
      await assert.rejects(log.read(24 as Offset, { maxBytes: 100 }), (e) =>
        isStorageError(e, 'OFFSET_OUT_OF_RANGE'),
      )
      const first = await log.read(25 as Offset, { maxBytes: 1 })
      assert.equal(first.firstOffset, 24) // the whole batch holding 25
      await assert.rejects(log.deleteRecordsBefore(41 as Offset), (e) =>
        isStorageError(e, 'OFFSET_OUT_OF_RANGE'),
      )
      assert.equal(await log.deleteRecordsBefore(10 as Offset), 25) // never moves back
      assert.equal(await log.deleteRecordsBefore(-1 as Offset), 40)
      const segmentsBefore = log.numberOfSegments
      const deleted = await log.deleteOldSegments()
      assert.ok(deleted > 0)
      assert.equal(log.numberOfSegments, segmentsBefore - deleted)
      assert.ok(log.segmentBaseOffsets[0] <= 40)
      assert.equal(log.logStartOffset, 40)
      await log.close()
    })
  })

  it('retention.bytes deletes the oldest segments but never the active one', async () => {
    await withTempDir(async (dir) => {
      const log = await filled(dir, 40, fromProperties({ 'retention.bytes': 2048 }, small))
      log.updateHighWatermark(log.logEndOffset)
      await log.deleteOldSegments()
      assert.ok(log.size <= 2048 + 1024, `size ${log.size}`)
      assert.equal(log.logStartOffset, log.segmentBaseOffsets[0])
      assert.equal((await readAll(log)).at(-1)!.lastOffset, 79)
      const tiny = fromProperties({ 'retention.bytes': 0 }, small)
      log.updateConfig(tiny)
      await log.deleteOldSegments()
      assert.equal(log.numberOfSegments, 1)
      await log.close()
    })
  })

  it('retention.ms deletes segments whose newest timestamp is too old, and only below the high watermark', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock(1_000_000)
      const log = await filled(dir, 40, fromProperties({ 'retention.ms': 10_000 }, small), clock)
      clock.now = 1_000_000 + 25_000 // batches with timestamps < 1_015_000 are too old
      assert.equal(await log.deleteOldSegments(), 0, 'nothing below a high watermark of 0')
      log.updateHighWatermark(log.logEndOffset)
      const deleted = await log.deleteOldSegments()
      assert.ok(deleted > 0)
      const first = (await readAll(log))[0]
      // the first kept segment holds a batch newer than the limit
      assert.ok(first.baseOffset <= 30, `first kept ${first.baseOffset}`)
      assert.equal(log.logStartOffset, first.baseOffset)
      await log.close()
    })
  })
})

describe('flush', () => {
  it('flush.messages fsyncs as appends complete: the recovery point follows the log end', async () => {
    await withTempDir(async (dir) => {
      const log = await filled(dir, 3, fromProperties({ 'flush.messages': 1 }))
      assert.equal(log.recoveryPoint, log.logEndOffset)
      await log.close()
    })
  })

  it('without flush settings only flush(), roll and close move the recovery point', async () => {
    await withTempDir(async (dir) => {
      const log = await filled(dir, 3, fromProperties({}))
      assert.equal(log.recoveryPoint, 0)
      await log.flush()
      assert.equal(log.recoveryPoint, 6)
      await log.append(simpleBatch(1), { assignOffsets: true })
      await log.roll()
      assert.equal(log.recoveryPoint, 7)
      await log.close()
    })
  })

  it('flush.ms fsyncs on the injected clock', async () => {
    await withTempDir(async (dir) => {
      const clock = new ManualClock()
      const log = await filled(dir, 3, fromProperties({ 'flush.ms': 500 }), clock)
      assert.equal(log.recoveryPoint, 0)
      clock.advance(499)
      await new Promise((r) => setImmediate(r))
      assert.equal(log.recoveryPoint, 0)
      clock.advance(1)
      await waitFor(() => log.recoveryPoint !== 0)
      assert.equal(log.recoveryPoint, 6)
      assert.equal(log.lastFlushTimeMs, clock.now)
      await log.close()
    })
  })
})
