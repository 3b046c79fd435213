import assert from 'node:assert/strict'
import { readdir, readFile, rename, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import type { FileSystem } from '../../src/common/file-system.js'
import type { LeaderEpoch, Offset } from '../../src/common/types.js'
import { BatchHeader, TimestampType } from '../../src/protocol/batch-header.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { isStorageError } from '../../src/storage/errors.js'
import { DEFAULT_LOG_CONFIG, fromProperties } from '../../src/storage/log-config.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { crcIsValid, readAll, simpleBatch, splitBatches, withTempDir } from './helpers.js'

const small = fromProperties({
  'segment.bytes': 4096,
  'index.interval.bytes': 256,
  'segment.index.bytes': 1200,
})

async function openLog(
  dir: string,
  config = DEFAULT_LOG_CONFIG,
  extra: Partial<Parameters<typeof UnifiedLog.open>[0]> = {},
) {
  return UnifiedLog.open({ dir: join(dir, 'topic-0'), config, ...extra, fs: extra.fs ?? nodeFileSystem })
}

describe('UnifiedLog append', () => {
  it('assigns consecutive offsets across batches of one buffer and across appends', async () => {
    await withTempDir(async (dir) => {
      const log = await openLog(dir)
      const first = await log.append(Buffer.concat([simpleBatch(3), simpleBatch(2)]), { assignOffsets: true })
      assert.equal(first.firstOffset, 0)
      assert.equal(first.lastOffset, 4)
      assert.equal(first.shallowCount, 2)
      const second = await log.append(simpleBatch(4), { assignOffsets: true, leaderEpoch: 3 as LeaderEpoch })
      assert.deepEqual([second.firstOffset, second.lastOffset], [5, 8])
      assert.equal(log.logEndOffset, 9)
      const batches = await readAll(log)
      assert.deepEqual(
        batches.map((b) => [b.baseOffset, b.lastOffset]),
        [
          [0, 2],
          [3, 4],
          [5, 8],
        ],
      )
      assert.equal(new BatchHeader(batches[2].bytes).partitionLeaderEpoch, 3)
      assert.ok(batches.every((b) => crcIsValid(b.bytes)))
      await log.close()
    })
  })

  it('coalesces appends issued in the same tick and keeps their order', async () => {
    await withTempDir(async (dir) => {
      const log = await openLog(dir)
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          log.append(simpleBatch(1 + (i % 3), 8, i), { assignOffsets: true }),
        ),
      )
      let expected = 0
      for (const r of results) {
        assert.equal(r.firstOffset, expected)
        expected = r.lastOffset + 1
      }
      assert.equal(log.logEndOffset, expected)
      assert.equal((await readAll(log)).length, 50)
      await log.close()
    })
  })

  it('stamps LogAppendTime: type bit, max timestamp and a valid CRC', async () => {
    await withTempDir(async (dir) => {
      const log = await openLog(dir)
      const info = await log.append(simpleBatch(2), { assignOffsets: true, logAppendTimeMs: 1234567 })
      assert.equal(info.logAppendTimeMs, 1234567)
      assert.equal(info.maxTimestamp, 1234567)
      const [batch] = await readAll(log)
      const header = new BatchHeader(batch.bytes)
      assert.equal(header.timestampType, TimestampType.LogAppendTime)
      assert.equal(header.maxTimestamp, 1234567)
      assert.ok(crcIsValid(batch.bytes))
      const createTime = await log.append(simpleBatch(1), { assignOffsets: true })
      assert.equal(createTime.logAppendTimeMs, -1)
      await log.close()
    })
  })

  it('uses the clock for LogAppendTime when the topic says so', async () => {
    await withTempDir(async (dir) => {
      const clock = { nowMs: () => 42_000, monotonicMs: () => 0, setTimeout: () => ({ cancel() {} }) }
      const config = fromProperties({ 'message.timestamp.type': 'LogAppendTime' })
      const log = await openLog(dir, config, { clock })
      const info = await log.append(simpleBatch(1), { assignOffsets: true })
      assert.equal(info.logAppendTimeMs, 42_000)
      await log.close()
    })
  })

  it('refuses a corrupt batch, an oversized batch, and a bad follower offset, and stays usable', async () => {
    await withTempDir(async (dir) => {
      const log = await openLog(dir, fromProperties({ 'max.message.bytes': 200 }))
      const corrupt = simpleBatch(2)
      corrupt[corrupt.length - 1] ^= 1
      await assert.rejects(log.append(corrupt, { assignOffsets: true }), (e) =>
        isStorageError(e, 'CORRUPT_MESSAGE'),
      )
      await assert.rejects(log.append(simpleBatch(20, 50), { assignOffsets: true }), (e) =>
        isStorageError(e, 'MESSAGE_TOO_LARGE'),
      )
      await assert.rejects(
        log.append(simpleBatch(1, 10, 0, { baseOffset: 5 }), { assignOffsets: false }),
        (e) => isStorageError(e, 'UNEXPECTED_APPEND_OFFSET'),
      )
      const ok = await log.append(simpleBatch(1, 10, 0, { baseOffset: 0 }), { assignOffsets: false })
      assert.equal(ok.firstOffset, 0)
      assert.equal(log.logEndOffset, 1)
      await log.close()
    })
  })

  it('follower appends record the epochs of the batches and reject epochs going back', async () => {
    await withTempDir(async (dir) => {
      const log = await openLog(dir)
      await log.append(simpleBatch(2, 10, 0, { baseOffset: 0, partitionLeaderEpoch: 1 }), {
        assignOffsets: false,
      })
      await log.append(simpleBatch(2, 10, 0, { baseOffset: 2, partitionLeaderEpoch: 4 }), {
        assignOffsets: false,
      })
      assert.deepEqual(log.leaderEpochCache.entries(), [
        { epoch: 1, startOffset: 0 },
        { epoch: 4, startOffset: 2 },
      ])
      await assert.rejects(
        log.append(simpleBatch(1, 10, 0, { baseOffset: 4, partitionLeaderEpoch: 2 }), {
          assignOffsets: false,
        }),
        (e) => isStorageError(e, 'INVALID_LEADER_EPOCH'),
      )
      assert.deepEqual(log.endOffsetForEpoch(1 as LeaderEpoch), { leaderEpoch: 1, endOffset: 2 })
      assert.deepEqual(log.endOffsetForEpoch(4 as LeaderEpoch), { leaderEpoch: 4, endOffset: 4 })
      assert.deepEqual(log.endOffsetForEpoch(2 as LeaderEpoch), { leaderEpoch: 1, endOffset: 2 })
      assert.equal(log.endOffsetForEpoch(-1 as LeaderEpoch), undefined)
      await log.close()
      const text = await readFile(join(dir, 'topic-0', 'leader-epoch-checkpoint'), 'utf8')
      assert.equal(text, '0\n2\n1 0\n4 2\n')
    })
  })
})

describe('UnifiedLog read', () => {
  it('returns whole batches bounded by maxOffset, maxBytes, and at least one batch', async () => {
    await withTempDir(async (dir) => {
      const log = await openLog(dir)
      for (let i = 0; i < 10; i++) await log.append(simpleBatch(5, 100, i), { assignOffsets: true })
      const batchBytes = simpleBatch(5, 100).length
      log.updateHighWatermark(23 as Offset)
      const upToHw = await log.read(0 as Offset, { maxBytes: 1 << 20, maxOffset: log.highWatermark })
      // the batch [20, 24] straddles the high watermark: not returned
      assert.deepEqual(
        splitBatches(upToHw.records).map((b) => b.baseOffset),
        [0, 5, 10, 15],
      )
      assert.equal(upToHw.nextOffset, 20)
      const mid = await log.read(7 as Offset, { maxBytes: batchBytes * 2 })
      assert.equal(mid.firstOffset, 5)
      assert.equal(splitBatches(mid.records).length, 2)
      const tiny = await log.read(0 as Offset, { maxBytes: 1 })
      assert.equal(splitBatches(tiny.records).length, 1)
      const none = await log.read(0 as Offset, { maxBytes: 1, minOneMessage: false })
      assert.equal(none.records.length, 0)
      const atEnd = await log.read(50 as Offset, { maxBytes: 100 })
      assert.equal(atEnd.sizeInBytes, 0)
      await assert.rejects(log.read(51 as Offset, { maxBytes: 100 }), (e) =>
        isStorageError(e, 'OFFSET_OUT_OF_RANGE'),
      )
      await log.close()
    })
  })

  it('reads across segments and through the offset index', async () => {
    await withTempDir(async (dir) => {
      const log = await openLog(dir, small)
      for (let i = 0; i < 60; i++) await log.append(simpleBatch(3, 40, i), { assignOffsets: true })
      assert.ok(log.numberOfSegments >= 3, `segments: ${log.numberOfSegments}`)
      const all = await readAll(log, 0 as Offset, 1 << 20)
      assert.equal(all.length, 60)
      for (const [i, b] of all.entries()) assert.equal(b.baseOffset, i * 3)
      for (const offset of [0, 1, 2, 3, 50, 99, 100, 150, 179]) {
        const data = await log.read(offset as Offset, { maxBytes: 1 })
        const [batch] = splitBatches(data.records)
        assert.ok(batch.baseOffset <= offset && offset <= batch.lastOffset, `offset ${offset}`)
      }
      await log.close()
    })
  })
})

/** nodeFileSystem, counting the bytes read from .log files (the reads a fetch costs the disk). */
function countingLogReads(): { fs: FileSystem; bytesRead: () => number; reads: () => number } {
  let bytes = 0
  let count = 0
  // nodeFileSystem's methods are on its prototype: delegate to it, replacing open only.
  const fs: FileSystem = Object.create(nodeFileSystem) as FileSystem
  fs.open = async (path, flags) => {
    const handle = await nodeFileSystem.open(path, flags)
    if (!path.endsWith('.log')) return handle
    return {
      read: async (buffer, offset, length, position) => {
        count++
        const n = await handle.read(buffer, offset, length, position)
        bytes += n
        return n
      },
      write: (buffer, position) => handle.write(buffer, position),
      writev: (buffers, position) => handle.writev(buffers, position),
      sync: () => handle.sync(),
      truncate: (length) => handle.truncate(length),
      stat: () => handle.stat(),
      close: () => handle.close(),
    }
  }
  return { fs, bytesRead: () => bytes, reads: () => count }
}

describe('UnifiedLog reads from disk', () => {
  it('a fetch of the first offset of a large batch does not read the batch before it', async () => {
    await withTempDir(async (dir) => {
      // 100 records of 2 KB: batches of about 200 KB, each above the 4 KiB index interval,
      // so every batch gets an index entry keyed by its last offset.
      const writer = await openLog(dir)
      for (let i = 0; i < 6; i++) await writer.append(simpleBatch(100, 2000, i), { assignOffsets: true })
      const batchBytes = simpleBatch(100, 2000).length
      await writer.close()
      const counting = countingLogReads()
      const log = await openLog(dir, DEFAULT_LOG_CONFIG, { fs: counting.fs, hadCleanShutdown: true })
      const before = counting.bytesRead()
      // A replica fetch's partitionMaxBytes (1 MiB) from batch 3's first offset.
      const data = await log.read(300 as Offset, { maxBytes: 1 << 20 })
      const batches = splitBatches(data.records)
      assert.deepEqual(
        batches.map((b) => b.baseOffset),
        [300, 400, 500],
      )
      const read = counting.bytesRead() - before
      // Batches 3-5 and at most the index interval more; batch 2 (the lookup's) costs only its header.
      assert.ok(read <= 3 * batchBytes + 4096 + 100, `read ${read} bytes for ${3 * batchBytes}`)
      await log.close()
    })
  })

  it('small batches are still found through the probe, from any offset', async () => {
    await withTempDir(async (dir) => {
      const writer = await openLog(dir)
      for (let i = 0; i < 400; i++) await writer.append(simpleBatch(3, 100, i), { assignOffsets: true })
      await writer.close()
      const log = await openLog(dir, DEFAULT_LOG_CONFIG, { hadCleanShutdown: true })
      for (const offset of [0, 1, 2, 3, 299, 300, 301, 700, 1198, 1199]) {
        const data = await log.read(offset as Offset, { maxBytes: 1 << 20 })
        const batches = splitBatches(data.records)
        assert.ok(batches[0].baseOffset <= offset && offset <= batches[0].lastOffset, `offset ${offset}`)
        assert.equal(batches.at(-1)?.lastOffset, 1199, `offset ${offset}`)
        for (let i = 1; i < batches.length; i++)
          assert.equal(batches[i].baseOffset, batches[i - 1].lastOffset + 1)
      }
      await log.close()
    })
  })
})

describe('UnifiedLog close and delete', () => {
  it('a delete that follows a close in progress waits for it (the close still writes in the directory)', async () => {
    await withTempDir(async (dir) => {
      const log = await openLog(dir)
      const written: string[] = []
      // As the producer state does: a snapshot written and renamed into the log dir on close.
      await log.attachProducerState({
        load: async () => {},
        onAppend: () => undefined,
        onRoll: async () => {},
        onTruncated: async () => {},
        onSegmentsDeleted: async () => {},
        onClose: async () => {
          await new Promise((resolve) => setTimeout(resolve, 20))
          await writeFile(join(log.dir, 'state.tmp'), 'x')
          await rename(join(log.dir, 'state.tmp'), join(log.dir, 'state'))
          written.push('state')
        },
      })
      await log.append(simpleBatch(2), { assignOffsets: true })
      const stopped = log.close()
      await log.delete()
      await stopped
      assert.deepEqual(written, ['state'], 'the close finished before the directory went')
      await assert.rejects(stat(log.dir), { code: 'ENOENT' })
    })
  })
})

describe('UnifiedLog roll, indexes and files', () => {
  it('rolls by segment.bytes with Kafka file names, preallocated then trimmed indexes', async () => {
    await withTempDir(async (dir) => {
      const log = await openLog(dir, small)
      for (let i = 0; i < 80; i++) await log.append(simpleBatch(2, 60, i), { assignOffsets: true })
      const files = (await readdir(join(dir, 'topic-0'))).sort()
      const logs = files.filter((f) => f.endsWith('.log'))
      assert.ok(logs.length >= 3)
      assert.equal(logs[0], '00000000000000000000.log')
      assert.ok(logs.every((f) => /^\d{20}\.log$/.test(f)))
      const activeIndex = join(dir, 'topic-0', `${logs.at(-1)!.slice(0, 20)}.index`)
      assert.equal(
        (await stat(activeIndex)).size,
        1200,
        'active index preallocated (rounded to 8-byte entries)',
      )
      const firstIndex = join(dir, 'topic-0', '00000000000000000000.index')
      const firstIndexSize = (await stat(firstIndex)).size
      assert.ok(
        firstIndexSize > 0 && firstIndexSize % 8 === 0 && firstIndexSize < 1200,
        `trimmed: ${firstIndexSize}`,
      )
      const timeIndexSize = (await stat(join(dir, 'topic-0', '00000000000000000000.timeindex'))).size
      assert.ok(timeIndexSize % 12 === 0 && timeIndexSize > 0)
      await log.close()
      assert.equal((await stat(activeIndex)).size % 8, 0)
      assert.ok((await stat(activeIndex)).size < 1200)
    })
  })

  it('rolls by segment.ms measured from the first batch timestamp', async () => {
    await withTempDir(async (dir) => {
      const log = await openLog(dir, fromProperties({ 'segment.ms': 1000 }))
      await log.append(simpleBatch(1, 10, 0, { baseTimestamp: 10_000 }), { assignOffsets: true })
      await log.append(simpleBatch(1, 10, 0, { baseTimestamp: 10_900 }), { assignOffsets: true })
      assert.equal(log.numberOfSegments, 1)
      await log.append(simpleBatch(1, 10, 0, { baseTimestamp: 11_001 }), { assignOffsets: true })
      assert.deepEqual(log.segmentBaseOffsets, [0, 2])
      await log.close()
    })
  })

  it('rolls when the offset index is full', async () => {
    await withTempDir(async (dir) => {
      const config = fromProperties({ 'index.interval.bytes': 0, 'segment.index.bytes': 24 })
      const log = await openLog(dir, config)
      for (let i = 0; i < 10; i++) await log.append(simpleBatch(1), { assignOffsets: true })
      assert.ok(log.numberOfSegments > 1)
      assert.equal((await readAll(log)).length, 10)
      await log.close()
    })
  })

  it('finds offsets by timestamp and the latest timestamp', async () => {
    await withTempDir(async (dir) => {
      const log = await openLog(dir, small)
      for (let i = 0; i < 30; i++) {
        await log.append(simpleBatch(4, 50, i, { baseTimestamp: 1000 + i * 100 }), { assignOffsets: true })
      }
      // batch i holds offsets 4i..4i+3 with timestamps 1000+100i .. +3
      assert.deepEqual(await log.offsetForTimestamp(0), {
        timestamp: 1000,
        offset: 0,
        leaderEpoch: undefined,
      })
      assert.deepEqual(await log.offsetForTimestamp(1502), {
        timestamp: 1502,
        offset: 22,
        leaderEpoch: undefined,
      })
      assert.deepEqual(await log.offsetForTimestamp(1504), {
        timestamp: 1600,
        offset: 24,
        leaderEpoch: undefined,
      })
      assert.equal(await log.offsetForTimestamp(99_999), undefined)
      assert.deepEqual(await log.latestTimestamp(), { timestamp: 3903, offset: 119, leaderEpoch: undefined })
      await log.close()
    })
  })
})
