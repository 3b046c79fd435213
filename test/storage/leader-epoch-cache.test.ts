import assert from 'node:assert/strict'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import type { LeaderEpoch, Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { LeaderEpochFileCache } from '../../src/storage/leader-epoch-cache.js'
import { withTempDir } from './helpers.js'

describe('LeaderEpochFileCache', () => {
  it("persists in Kafka's text format and answers OffsetForLeaderEpoch", async () => {
    await withTempDir(async (dir) => {
      const cache = await LeaderEpochFileCache.load(nodeFileSystem, dir, silentLogger)
      await cache.assign(0 as LeaderEpoch, 0 as Offset)
      await cache.assign(0 as LeaderEpoch, 5 as Offset) // same epoch: no change
      await cache.assign(2 as LeaderEpoch, 10 as Offset)
      await cache.assign(5 as LeaderEpoch, 30 as Offset)
      assert.equal(await readFile(join(dir, 'leader-epoch-checkpoint'), 'utf8'), '0\n3\n0 0\n2 10\n5 30\n')
      assert.deepEqual(cache.endOffsetFor(5 as LeaderEpoch, 42 as Offset), { leaderEpoch: 5, endOffset: 42 })
      assert.deepEqual(cache.endOffsetFor(2 as LeaderEpoch, 42 as Offset), { leaderEpoch: 2, endOffset: 30 })
      assert.deepEqual(cache.endOffsetFor(3 as LeaderEpoch, 42 as Offset), { leaderEpoch: 2, endOffset: 30 })
      assert.deepEqual(cache.endOffsetFor(6 as LeaderEpoch, 42 as Offset), { leaderEpoch: -1, endOffset: -1 })
      assert.deepEqual(cache.endOffsetFor(-1 as LeaderEpoch, 42 as Offset), {
        leaderEpoch: -1,
        endOffset: -1,
      })
      assert.equal(cache.epochForOffset(29 as Offset), 2)
      const reloaded = await LeaderEpochFileCache.load(nodeFileSystem, dir, silentLogger)
      assert.deepEqual(reloaded.entries(), cache.entries())
    })
  })

  it('truncates from the end and from the start as Kafka does', async () => {
    await withTempDir(async (dir) => {
      const cache = await LeaderEpochFileCache.load(nodeFileSystem, dir, silentLogger)
      await cache.assign(1 as LeaderEpoch, 0 as Offset)
      await cache.assign(2 as LeaderEpoch, 10 as Offset)
      await cache.assign(3 as LeaderEpoch, 20 as Offset)
      await cache.truncateFromEnd(20 as Offset)
      assert.deepEqual(cache.entries(), [
        { epoch: 1, startOffset: 0 },
        { epoch: 2, startOffset: 10 },
      ])
      await cache.truncateFromStart(15 as Offset)
      assert.deepEqual(cache.entries(), [{ epoch: 2, startOffset: 15 }])
      assert.deepEqual(cache.endOffsetFor(1 as LeaderEpoch, 50 as Offset), { leaderEpoch: 1, endOffset: 15 })
    })
  })

  it('a new epoch below existing start offsets replaces the entries it contradicts', async () => {
    await withTempDir(async (dir) => {
      const cache = await LeaderEpochFileCache.load(nodeFileSystem, dir, silentLogger)
      await cache.assign(1 as LeaderEpoch, 0 as Offset)
      await cache.assign(2 as LeaderEpoch, 10 as Offset)
      await cache.assign(3 as LeaderEpoch, 5 as Offset)
      assert.deepEqual(cache.entries(), [
        { epoch: 1, startOffset: 0 },
        { epoch: 3, startOffset: 5 },
      ])
    })
  })

  it('loads an empty cache from a malformed file', async () => {
    await withTempDir(async (dir) => {
      await writeFile(join(dir, 'leader-epoch-checkpoint'), '0\n2\n1 0\n')
      const cache = await LeaderEpochFileCache.load(nodeFileSystem, dir, silentLogger)
      assert.deepEqual(cache.entries(), [])
    })
  })
})
