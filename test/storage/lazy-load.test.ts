import assert from 'node:assert/strict'
import { readdir } from 'node:fs/promises'
import { basename, join } from 'node:path'
import { describe, it } from 'node:test'
import type { FileHandle, FileSystem, OpenFlags } from '../../src/common/file-system.js'
import type { LeaderEpoch, Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { BoundedFileSystem } from '../../src/storage/bounded-file-system.js'
import { fromProperties } from '../../src/storage/log-config.js'
import { LogManager } from '../../src/storage/log-manager.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { readAll, simpleBatch, withTempDir } from './helpers.js'

const configProperties = {
  'segment.bytes': 2048,
  'index.interval.bytes': 128,
  'segment.index.bytes': 4096,
}
const config = fromProperties(configProperties)

/** The real disk, recording which files were opened (and how) and which were written. */
class RecordingFileSystem implements FileSystem {
  readonly opened: { name: string; flags: OpenFlags }[] = []
  readonly renamed: string[] = []
  constructor(private readonly inner: FileSystem = nodeFileSystem) {}

  open(path: string, flags: OpenFlags): Promise<FileHandle> {
    this.opened.push({ name: basename(path), flags })
    return this.inner.open(path, flags)
  }
  openedNames(): string[] {
    return this.opened.map((o) => o.name)
  }
  rename(from: string, to: string) {
    this.renamed.push(basename(to))
    return this.inner.rename(from, to)
  }
  lockExclusive(path: string) {
    return this.inner.lockExclusive(path)
  }
  unlink(path: string) {
    return this.inner.unlink(path)
  }
  mkdir(path: string) {
    return this.inner.mkdir(path)
  }
  rmdir(path: string) {
    return this.inner.rmdir(path)
  }
  readdir(path: string) {
    return this.inner.readdir(path)
  }
  stat(path: string) {
    return this.inner.stat(path)
  }
  syncDir(path: string) {
    return this.inner.syncDir(path)
  }
  statfs(path: string) {
    return this.inner.statfs(path)
  }
}

function prefix(base: number): string {
  return String(base).padStart(20, '0')
}

/** A log of several segments (batch i has timestamp 5000 + i), closed cleanly. */
async function writeSegments(dir: string): Promise<Offset[]> {
  const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config })
  for (let i = 0; i < 40; i++) {
    await log.append(simpleBatch(2, 50, i, { baseTimestamp: 5000 + i, partitionLeaderEpoch: 0 }), {
      assignOffsets: true,
      leaderEpoch: 0 as LeaderEpoch,
    })
  }
  const bases = log.segmentBaseOffsets
  await log.close()
  assert.ok(bases.length >= 4, `${bases.length} segments`)
  return bases
}

describe('lazy log loading after a clean shutdown (Kafka LazyIndex)', () => {
  it('a clean restart opens only the active segment; a read of an old segment opens it then', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 'lazy-0')
      const bases = await writeSegments(dir)
      const fs = new RecordingFileSystem()
      const log = await UnifiedLog.open({ fs, dir, config, hadCleanShutdown: true })
      const active = prefix(bases.at(-1)!)
      const segmentFiles = fs.openedNames().filter((name) => /^\d{20}\./.test(name))
      assert.deepEqual(segmentFiles.sort(), [`${active}.index`, `${active}.log`, `${active}.timeindex`])
      assert.deepEqual(
        log.segmentList.map((s) => s.isLoaded),
        bases.map((_, i) => i === bases.length - 1),
      )
      // The sizes came from a stat: the log's size is known without opening anything.
      let bytes = 0
      for (const name of await readdir(dir)) if (name.endsWith('.log')) bytes += (await stat(dir, name)).size
      assert.equal(log.size, bytes)

      const read = await log.read(0 as Offset, { maxBytes: 100 })
      assert.equal(read.records.length > 0, true)
      const first = prefix(bases[0])
      assert.ok(fs.openedNames().includes(`${first}.log`))
      assert.ok(fs.openedNames().includes(`${first}.index`))
      assert.deepEqual(
        log.segmentList.map((s) => s.isLoaded),
        bases.map((_, i) => i === 0 || i === bases.length - 1),
      )
      // Every record is still served, in order, across loaded and lazily opened segments.
      assert.equal((await readAll(log)).length, 40)
      await log.close()
    })
  })

  it('a timestamp lookup loads segments from the oldest until it finds one late enough', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 'lazy-1')
      const bases = await writeSegments(dir)
      const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config, hadCleanShutdown: true })
      // batch i holds offsets 2i, 2i+1 with timestamps 5000+i, 5001+i
      assert.deepEqual(await log.offsetForTimestamp(5020), { timestamp: 5020, offset: 39, leaderEpoch: 0 })
      const loaded = log.segmentList.filter((s) => s.isLoaded).map((s) => s.baseOffset)
      assert.ok(loaded.length < bases.length, `loaded ${loaded} of ${bases}`)
      await log.close()
    })
  })

  it('retention by time loads the oldest segments only as far as it looks', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 'lazy-2')
      const bases = await writeSegments(dir)
      const keepForever = fromProperties({ ...configProperties, 'retention.ms': 1e15 })
      const log = await UnifiedLog.open({
        fs: nodeFileSystem,
        dir,
        config: keepForever,
        hadCleanShutdown: true,
      })
      log.updateHighWatermark(log.logEndOffset)
      assert.equal(await log.deleteOldSegments(), 0)
      assert.deepEqual(
        log.segmentList.map((s) => s.isLoaded),
        bases.map((_, i) => i === 0 || i === bases.length - 1),
      )
      await log.close()
      const expireAll = fromProperties({ ...configProperties, 'retention.ms': 1 })
      const reopened = await UnifiedLog.open({
        fs: nodeFileSystem,
        dir,
        config: expireAll,
        hadCleanShutdown: true,
      })
      reopened.updateHighWatermark(reopened.logEndOffset)
      assert.equal(await reopened.deleteOldSegments(), bases.length - 1)
      await reopened.close()
    })
  })

  it('a clean restart does not rewrite the leader-epoch checkpoint it read', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 'lazy-3')
      await writeSegments(dir)
      const fs = new RecordingFileSystem()
      const log = await UnifiedLog.open({ fs, dir, config, hadCleanShutdown: true })
      assert.deepEqual(fs.renamed, [])
      assert.deepEqual(
        fs.opened.filter((o) => o.name.startsWith('leader-epoch-checkpoint')),
        [{ name: 'leader-epoch-checkpoint', flags: 'r' }],
      )
      await log.close()
    })
  })

  it('after a crash every segment is opened and checked at load, as before', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 'lazy-4')
      const bases = await writeSegments(dir)
      const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config, hadCleanShutdown: false })
      assert.ok(log.segmentList.every((s) => s.isLoaded))
      assert.equal(log.segmentList.length, bases.length)
      await log.close()
    })
  })

  it('the log manager holds no descriptor of its logs once loaded', async () => {
    await withTempDir(async (root) => {
      const logDir = join(root, 'data')
      const first = await LogManager.open({
        logDirs: [logDir],
        fs: nodeFileSystem,
        maxOpenFiles: 64,
        defaultConfig: config,
      })
      for (let partition = 0; partition < 8; partition++) {
        const log = await first.getOrCreateLog({ topic: 't', partition })
        await log.append(simpleBatch(2, 50, 0), { assignOffsets: true })
      }
      await first.shutdown()
      const manager = await LogManager.open({
        logDirs: [logDir],
        fs: nodeFileSystem,
        maxOpenFiles: 64,
        defaultConfig: config,
      })
      const bounded = manager.allLogs()[0].fileSystem
      assert.ok(bounded instanceof BoundedFileSystem)
      assert.equal(manager.allLogs().length, 8)
      assert.equal(bounded.openDescriptors, 0)
      // A read opens what it needs again.
      const read = await manager.allLogs()[0].read(0 as Offset, { maxBytes: 1000 })
      assert.equal(read.records.length > 0, true)
      assert.ok(bounded.openDescriptors > 0)
      await manager.shutdown()
    })
  })
})

function stat(dir: string, name: string) {
  return nodeFileSystem.stat(join(dir, name))
}
