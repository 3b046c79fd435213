import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import type { FileHandle, FileSystem } from '../../src/common/file-system.js'
import type { Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { DEFAULT_LOG_CONFIG } from '../../src/storage/log-config.js'
import { RecentBatches } from '../../src/storage/recent-batches.js'
import { type FetchDataInfo, UnifiedLog } from '../../src/storage/unified-log.js'
import { simpleBatch, withTempDir } from './helpers.js'

/** nodeFileSystem, counting the reads of `.log` files. */
function countingFileSystem(): { fs: FileSystem; logReads: () => number } {
  let reads = 0
  const fs: FileSystem = Object.create(nodeFileSystem)
  fs.open = async (path, flags) => {
    const handle = await nodeFileSystem.open(path, flags)
    if (!path.endsWith('.log')) return handle
    const counted: FileHandle = Object.create(handle)
    counted.read = (buffer, offset, length, position) => {
      reads++
      return handle.read(buffer, offset, length, position)
    }
    return counted
  }
  return { fs, logReads: () => reads }
}

function same(actual: FetchDataInfo, expected: FetchDataInfo, what: string): void {
  assert.deepEqual(
    {
      bytes: Buffer.concat(actual.records),
      sizeInBytes: actual.sizeInBytes,
      firstOffset: actual.firstOffset,
      nextOffset: actual.nextOffset,
    },
    {
      bytes: Buffer.concat(expected.records),
      sizeInBytes: expected.sizeInBytes,
      firstOffset: expected.firstOffset,
      nextOffset: expected.nextOffset,
    },
    what,
  )
}

describe('recent batches (reads at the log end from memory)', () => {
  it('answers a read at the log end without reading the segment file', async () => {
    await withTempDir(async (dir) => {
      const { fs, logReads } = countingFileSystem()
      const log = await UnifiedLog.open({ dir: join(dir, 'topic-0'), config: DEFAULT_LOG_CONFIG, fs })
      try {
        await log.append(simpleBatch(3, 100), { assignOffsets: true })
        const before = logReads()
        const read = await log.read(0 as Offset, { maxBytes: 1 << 20 })
        assert.equal(read.nextOffset, 3)
        assert.equal(logReads(), before, 'served from memory')
        const disabled = await UnifiedLog.open({
          dir: join(dir, 'topic-1'),
          config: DEFAULT_LOG_CONFIG,
          fs,
          recentBatchesMaxBytes: 0,
        })
        await disabled.append(simpleBatch(3, 100), { assignOffsets: true })
        await disabled.read(0 as Offset, { maxBytes: 1 << 20 })
        assert.ok(logReads() > before, 'without the cache the same read goes to the file')
        await disabled.close()
      } finally {
        await log.close()
      }
    })
  })

  it('returns what the segments return, through appends, rolls, truncations and evictions', async () => {
    await withTempDir(async (dir) => {
      const config = { ...DEFAULT_LOG_CONFIG, segmentBytes: 4096 }
      const cached = await UnifiedLog.open({
        dir: join(dir, 'a-0'),
        config,
        fs: nodeFileSystem,
        recentBatchesMaxBytes: 3000,
      })
      const plain = await UnifiedLog.open({
        dir: join(dir, 'b-0'),
        config,
        fs: nodeFileSystem,
        recentBatchesMaxBytes: 0,
      })
      let seed = 12345
      const random = (n: number): number => {
        seed = (seed * 1103515245 + 12345) & 0x7fffffff
        return seed % n
      }
      try {
        for (let step = 0; step < 300; step++) {
          const action = random(10)
          if (action < 6) {
            const batches = [simpleBatch(1 + random(4), 10 + random(300), step)]
            if (random(3) === 0) batches.push(simpleBatch(1 + random(3), 10 + random(100), step + 1000))
            // Appends queued in one tick form one write group, as a produce burst does.
            await Promise.all(
              batches.flatMap((batch) => [
                cached.append(Buffer.from(batch), { assignOffsets: true }),
                plain.append(Buffer.from(batch), { assignOffsets: true }),
              ]),
            )
          } else if (action === 6 && cached.logEndOffset > 2) {
            const target = (cached.logEndOffset - 1 - random(3)) as Offset
            await cached.truncateTo(target)
            await plain.truncateTo(target)
          }
          assert.equal(cached.logEndOffset, plain.logEndOffset)
          const end = cached.logEndOffset
          for (let r = 0; r < 3; r++) {
            const start = Math.max(0, end - random(20)) as Offset
            const options = {
              maxBytes: random(2) === 0 ? 1 << 20 : random(1500) - 100,
              maxOffset: (start + random(Math.max(1, end - start + 2))) as Offset,
              minOneMessage: random(2) === 0,
            }
            same(
              await cached.read(start, options),
              await plain.read(start, options),
              `step ${step}: read at ${start} ${JSON.stringify(options)}`,
            )
          }
        }
      } finally {
        await cached.close()
        await plain.close()
      }
    })
  })

  it('keeps at most its bound, dropping the oldest batches first', () => {
    const recent = new RecentBatches(250)
    const batch = (base: number, size: number) => ({
      sizeInBytes: size,
      baseOffset: base as Offset,
      lastOffset: base as Offset,
      maxTimestamp: 0,
    })
    for (let i = 0; i < 5; i++) recent.add([Buffer.alloc(100, i)], [batch(i, 100)])
    assert.equal(recent.sizeInBytes, 200)
    assert.equal(recent.read(2 as Offset, 10 as Offset, 1000, true), undefined, 'offset 2 was dropped')
    const read = recent.read(3 as Offset, 10 as Offset, 1000, true)
    assert.equal(read?.nextOffset, 5)
    assert.deepEqual(
      Buffer.concat(read!.records),
      Buffer.concat([Buffer.alloc(100, 3), Buffer.alloc(100, 4)]),
    )
    recent.add([Buffer.alloc(300)], [batch(5, 300)])
    assert.equal(recent.sizeInBytes, 0, 'a write larger than the bound empties it')
    assert.equal(recent.read(5 as Offset, 10 as Offset, 1000, true), undefined)
  })
})
