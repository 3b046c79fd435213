import assert from 'node:assert/strict'
import {
  appendFile,
  copyFile,
  mkdir,
  readFile,
  rm,
  stat,
  truncate,
  unlink,
  writeFile,
} from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import type { LeaderEpoch, Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { fromProperties } from '../../src/storage/log-config.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { readAll, simpleBatch, withTempDir } from './helpers.js'

const SEGMENT = '00000000000000000000'
const small = fromProperties({
  'segment.bytes': 2048,
  'index.interval.bytes': 128,
  'segment.index.bytes': 4096,
})

/** Writes `count` batches of 3 records and closes cleanly; returns the batch boundaries of segment 0. */
async function writeLog(dir: string, count: number, config = fromProperties({ 'index.interval.bytes': 64 })) {
  const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config })
  const ends: number[] = []
  for (let i = 0; i < count; i++) {
    await log.append(simpleBatch(3, 20 + (i % 7), i, { partitionLeaderEpoch: 0 }), {
      assignOffsets: true,
      leaderEpoch: (i < 2 ? 1 : 2) as LeaderEpoch,
    })
    ends.push(log.activeSegment.size)
  }
  await log.close()
  return ends
}

async function reopen(dir: string, options: { clean?: boolean; recoveryPoint?: number } = {}) {
  return UnifiedLog.open({
    fs: nodeFileSystem,
    dir,
    config: fromProperties({ 'index.interval.bytes': 64 }),
    hadCleanShutdown: options.clean ?? false,
    recoveryPoint: (options.recoveryPoint as Offset) ?? 0,
  })
}

describe('recovery from bad data', () => {
  it('a tail cut at every byte position of the last batch is truncated to the last whole batch', async () => {
    await withTempDir(async (root) => {
      const source = join(root, 'source-0')
      const ends = await writeLog(source, 4)
      const original = await readFile(join(source, `${SEGMENT}.log`))
      const lastStart = ends[2]
      for (let cut = lastStart; cut < ends[3]; cut++) {
        const dir = join(root, `cut-0`)
        await rm(dir, { recursive: true, force: true })
        await mkdir(dir)
        await writeFile(join(dir, `${SEGMENT}.log`), original.subarray(0, cut))
        await copyFile(join(source, `${SEGMENT}.index`), join(dir, `${SEGMENT}.index`))
        const log = await reopen(dir)
        assert.equal(log.logEndOffset, 9, `cut at ${cut}`)
        assert.equal((await stat(join(dir, `${SEGMENT}.log`))).size, lastStart, `cut at ${cut}`)
        const batches = await readAll(log)
        assert.deepEqual(Buffer.concat(batches.map((b) => b.bytes)), original.subarray(0, lastStart))
        // the recovered log takes appends at the right offset
        const next = await log.append(simpleBatch(1), { assignOffsets: true })
        assert.equal(next.firstOffset, 9)
        await log.close()
      }
    })
  })

  it('a flipped bit in a batch truncates the log at the start of that batch', async () => {
    await withTempDir(async (root) => {
      const source = join(root, 'source-0')
      const ends = await writeLog(source, 5)
      const original = await readFile(join(source, `${SEGMENT}.log`))
      const start = ends[1]
      const size = ends[2] - ends[1]
      // every byte of the third batch (offsets 6..8) except partitionLeaderEpoch (12..15), which the CRC does not cover
      const positions = [...Array(size).keys()].filter((p) => p < 12 || p > 15)
      for (const p of positions) {
        const dir = join(root, 'flip-0')
        await rm(dir, { recursive: true, force: true })
        await mkdir(dir)
        const damaged = Buffer.from(original)
        damaged[start + p] ^= 1 << (p % 8)
        await writeFile(join(dir, `${SEGMENT}.log`), damaged)
        const log = await reopen(dir)
        assert.equal(log.logEndOffset, 6, `flip at byte ${p}`)
        assert.equal((await readAll(log)).length, 2)
        await log.close()
      }
    })
  })

  it('a zero-filled tail is removed and everything before it kept', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 'zeros-0')
      const ends = await writeLog(dir, 6)
      await appendFile(join(dir, `${SEGMENT}.log`), Buffer.alloc(8192))
      const log = await reopen(dir)
      assert.equal(log.logEndOffset, 18)
      assert.equal((await stat(join(dir, `${SEGMENT}.log`))).size, ends[5])
      assert.equal((await readAll(log)).length, 6)
      await log.close()
    })
  })

  it('a clean shutdown skips the scan; an unclean one finds the damage', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 'clean-0')
      const ends = await writeLog(dir, 4)
      const path = join(dir, `${SEGMENT}.log`)
      const bytes = await readFile(path)
      bytes[ends[2] + 40] ^= 0xff
      await writeFile(path, bytes)
      const trusted = await reopen(dir, { clean: true })
      assert.equal(trusted.logEndOffset, 12, 'not rescanned')
      await trusted.close()
      const recovered = await reopen(dir, { clean: false })
      assert.equal(recovered.logEndOffset, 9)
      await recovered.close()
    })
  })

  it('damage in an older segment drops it from there and every later segment', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 'multi-0')
      const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config: small })
      for (let i = 0; i < 40; i++) await log.append(simpleBatch(2, 50, i), { assignOffsets: true })
      const bases = log.segmentBaseOffsets
      assert.ok(bases.length >= 4)
      await log.close()
      const second = join(dir, `${String(bases[1]).padStart(20, '0')}.log`)
      const size = (await stat(second)).size
      await truncate(second, size - 7)
      const reopened = await UnifiedLog.open({
        fs: nodeFileSystem,
        dir,
        config: small,
        recoveryPoint: 0 as Offset,
      })
      assert.deepEqual(reopened.segmentBaseOffsets, bases.slice(0, 2))
      const batches = await readAll(reopened)
      assert.equal(reopened.logEndOffset, batches.at(-1)!.lastOffset + 1)
      assert.equal(batches.length, reopened.logEndOffset / 2)
      await reopened.close()
    })
  })

  it('recovery rebuilds the leader-epoch cache from the batches past the recovery point', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 'epochs-0')
      await writeLog(dir, 5)
      await unlink(join(dir, 'leader-epoch-checkpoint'))
      const log = await reopen(dir)
      assert.deepEqual(log.leaderEpochCache.entries(), [
        { epoch: 1, startOffset: 0 },
        { epoch: 2, startOffset: 6 },
      ])
      await log.close()
    })
  })
})

describe('index rebuilding', () => {
  async function segmentFiles(dir: string, base: number) {
    const prefix = join(dir, String(base).padStart(20, '0'))
    return { index: `${prefix}.index`, timeindex: `${prefix}.timeindex` }
  }

  async function prepare(dir: string) {
    const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config: small })
    for (let i = 0; i < 40; i++)
      await log.append(simpleBatch(2, 50, i, { baseTimestamp: 5000 + i }), { assignOffsets: true })
    const bases = log.segmentBaseOffsets
    await log.close()
    const files = await segmentFiles(dir, bases[1])
    return { bases, files, index: await readFile(files.index), timeindex: await readFile(files.timeindex) }
  }

  for (const damage of ['deleted', 'odd length', 'garbage entries', 'past the log'] as const) {
    it(`an index that is ${damage} is rebuilt identical after a clean shutdown (at load or first use)`, async () => {
      await withTempDir(async (root) => {
        const dir = join(root, 'idx-0')
        const before = await prepare(dir)
        assert.ok(before.index.length > 0)
        if (damage === 'deleted') await unlink(before.files.index)
        if (damage === 'odd length') await appendFile(before.files.index, Buffer.from([1, 2, 3]))
        if (damage === 'garbage entries')
          await writeFile(before.files.index, Buffer.alloc(before.index.length, 0x7f))
        if (damage === 'past the log') {
          const bad = Buffer.from(before.index)
          bad.writeInt32BE(1 << 30, bad.length - 4)
          await writeFile(before.files.index, bad)
        }
        const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config: small, hadCleanShutdown: true })
        // A missing index is rebuilt at load; the others belong to an inactive segment whose
        // indexes are read, checked and rebuilt when a read first needs them.
        assert.equal((await readAll(log)).length, 40)
        assert.deepEqual(await readFile(before.files.index), before.index)
        assert.deepEqual(await readFile(before.files.timeindex), before.timeindex)
        await log.close()
      })
    })
  }

  it('a deleted time index is rebuilt and timestamp lookups still work', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 'tidx-0')
      const before = await prepare(dir)
      await unlink(before.files.timeindex)
      const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config: small, hadCleanShutdown: true })
      assert.deepEqual(await readFile(before.files.timeindex), before.timeindex)
      // batch i holds offsets 2i, 2i+1 with timestamps 5000+i, 5001+i
      const found = await log.offsetForTimestamp(5020)
      assert.deepEqual(found, { timestamp: 5020, offset: 39, leaderEpoch: undefined })
      await log.close()
    })
  })
})
