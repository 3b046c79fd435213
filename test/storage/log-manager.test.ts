import assert from 'node:assert/strict'
import { readFile, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { DirectoryLockedError } from '../../src/common/file-system.js'
import type { LeaderEpoch, Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { fromProperties } from '../../src/storage/log-config.js'
import {
  CLEAN_SHUTDOWN_FILE,
  CLEANER_OFFSET_CHECKPOINT_FILE,
  LogManager,
} from '../../src/storage/log-manager.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { crashableFileSystem, ManualClock, readAll, simpleBatch, waitFor, withTempDir } from './helpers.js'

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch {
    return false
  }
}

describe('LogManager', () => {
  it('creates logs spread over log.dirs and writes Kafka checkpoint files on shutdown', async () => {
    await withTempDir(async (root) => {
      const logDirs = [join(root, 'd1'), join(root, 'd2')]
      const manager = await LogManager.open({ fs: nodeFileSystem, logDirs })
      const a = await manager.getOrCreateLog({ topic: 'orders', partition: 0 })
      const b = await manager.getOrCreateLog({ topic: 'orders', partition: 1 })
      assert.equal(await manager.getOrCreateLog({ topic: 'orders', partition: 0 }), a)
      assert.notEqual(a.dir.split('/').at(-2), b.dir.split('/').at(-2), 'one log per dir')
      await a.append(simpleBatch(5), { assignOffsets: true })
      a.updateHighWatermark(3 as Offset)
      await a.deleteRecordsBefore(2 as Offset)
      await manager.shutdown()
      const d1 = logDirs.find((d) => a.dir.startsWith(d))!
      assert.equal(await readFile(join(d1, 'recovery-point-offset-checkpoint'), 'utf8'), '0\n1\norders 0 5\n')
      assert.equal(await readFile(join(d1, 'replication-offset-checkpoint'), 'utf8'), '0\n1\norders 0 3\n')
      assert.equal(await readFile(join(d1, 'log-start-offset-checkpoint'), 'utf8'), '0\n1\norders 0 2\n')
      assert.ok(await exists(join(d1, CLEAN_SHUTDOWN_FILE)))
    })
  })

  it('puts a new log in the dir holding the fewest, counting logs loaded, deleted and moved', async () => {
    await withTempDir(async (root) => {
      const [d1, d2] = [join(root, 'd1'), join(root, 'd2')]
      const dirOf = (log: UnifiedLog) => join(log.dir, '..')
      const seed = await LogManager.open({ fs: nodeFileSystem, logDirs: [d1] })
      for (let partition = 0; partition < 3; partition++)
        await seed.getOrCreateLog({ topic: 'old', partition })
      await seed.shutdown()
      const manager = await LogManager.open({ fs: nodeFileSystem, logDirs: [d1, d2] })
      const created = async (partition: number) =>
        dirOf(await manager.getOrCreateLog({ topic: 'new', partition }))
      // d1 loaded 3 logs: the next 3 go to d2, then they alternate (d1 first on a tie).
      assert.deepEqual(
        [await created(0), await created(1), await created(2), await created(3)],
        [d2, d2, d2, d1],
      )
      await manager.deleteLog({ topic: 'old', partition: 0 })
      await manager.deleteLog({ topic: 'old', partition: 1 })
      // 4 and 3 before the deletions, 2 and 3 after.
      assert.deepEqual([await created(4), await created(5)], [d1, d1])
      const config = manager.getLog({ topic: 'new', partition: 3 })!.config
      await manager.moveLog({ topic: 'new', partition: 3 }, d2, config)
      // 4 and 3 before the move, 3 and 4 after.
      assert.deepEqual([await created(6), await created(7), await created(8)], [d1, d1, d2])
      await manager.shutdown()
    })
  })

  it('reloads logs with their checkpointed offsets and removes the clean-shutdown marker', async () => {
    await withTempDir(async (root) => {
      const logDirs = [join(root, 'd1')]
      const first = await LogManager.open({ fs: nodeFileSystem, logDirs })
      const log = await first.getOrCreateLog({ topic: 'my-topic-with-dashes', partition: 7 })
      for (let i = 0; i < 5; i++)
        await log.append(simpleBatch(2), { assignOffsets: true, leaderEpoch: 2 as LeaderEpoch })
      log.updateHighWatermark(8 as Offset)
      await log.deleteRecordsBefore(4 as Offset)
      await first.shutdown()
      const second = await LogManager.open({ fs: nodeFileSystem, logDirs })
      assert.equal(await exists(join(logDirs[0], CLEAN_SHUTDOWN_FILE)), false)
      const reloaded = second.getLog({ topic: 'my-topic-with-dashes', partition: 7 })!
      assert.deepEqual(
        [reloaded.logStartOffset, reloaded.highWatermark, reloaded.logEndOffset, reloaded.recoveryPoint],
        [4, 8, 10, 10],
      )
      assert.equal(reloaded.latestEpoch, 2)
      assert.equal((await readAll(reloaded)).length, 3)
      await second.shutdown()
    })
  })

  it("lowers a log's cleaner checkpoint on disk when the log is truncated below it", async () => {
    await withTempDir(async (root) => {
      const logDirs = [join(root, 'd1')]
      const first = await LogManager.open({ fs: nodeFileSystem, logDirs, cleanerEnable: true })
      const log = await first.getOrCreateLog({ topic: 't', partition: 0 })
      for (let i = 0; i < 5; i++) await log.append(simpleBatch(2), { assignOffsets: true })
      await first.shutdown()
      // A clean had checked the first dirty offset in at 8.
      await writeFile(join(logDirs[0], CLEANER_OFFSET_CHECKPOINT_FILE), '0\n1\nt 0 8\n')
      const second = await LogManager.open({ fs: nodeFileSystem, logDirs, cleanerEnable: true })
      const reloaded = second.getLog({ topic: 't', partition: 0 })!
      await reloaded.truncateTo(4 as Offset)
      // Before the truncation returns, not at the next clean or shutdown: a crash now must
      // not bring back a checkpoint above batches that will be appended again.
      assert.equal(await readFile(join(logDirs[0], CLEANER_OFFSET_CHECKPOINT_FILE), 'utf8'), '0\n1\nt 0 4\n')
      await reloaded.truncateTo(6 as Offset) // above the log end: nothing changes
      assert.equal(await readFile(join(logDirs[0], CLEANER_OFFSET_CHECKPOINT_FILE), 'utf8'), '0\n1\nt 0 4\n')
      await second.shutdown()
    })
  })

  it('locks every log dir before reading it: a second manager on one is refused, holding none of the others', async () => {
    await withTempDir(async (root) => {
      const [d1, d2] = [join(root, 'd1'), join(root, 'd2')]
      const first = await LogManager.open({ fs: nodeFileSystem, logDirs: [d2] })
      await first.getOrCreateLog({ topic: 't', partition: 0 })
      await assert.rejects(LogManager.open({ fs: nodeFileSystem, logDirs: [d1, d2] }), (error: unknown) => {
        assert.ok(error instanceof DirectoryLockedError)
        assert.equal(error.dir, d2)
        assert.equal(error.lockFile, '.lock')
        return true
      })
      assert.ok(await exists(join(d2, '.lock')))
      // d1 was locked before d2 was refused, and released with the refusal.
      const onD1 = await LogManager.open({ fs: nodeFileSystem, logDirs: [d1] })
      await onD1.shutdown()
      await first.shutdown()
      const second = await LogManager.open({ fs: nodeFileSystem, logDirs: [d1, d2] })
      assert.equal(second.getLog({ topic: 't', partition: 0 })?.logEndOffset, 0)
      await second.shutdown()
    })
  })

  it('recovers after an unclean stop and ignores a malformed checkpoint', async () => {
    await withTempDir(async (root) => {
      const logDirs = [join(root, 'd1')]
      const process = crashableFileSystem()
      const first = await LogManager.open({ fs: process.fs, logDirs })
      const log = await first.getOrCreateLog({ topic: 't', partition: 0 })
      await log.append(simpleBatch(3), { assignOffsets: true })
      await first.checkpointRecoveryPoints()
      await log.closeHandlers() // crash: no marker, no final checkpoint
      await process.crash()
      await writeFile(join(logDirs[0], 'replication-offset-checkpoint'), 'garbage')
      const second = await LogManager.open({ fs: nodeFileSystem, logDirs })
      const reloaded = second.getLog({ topic: 't', partition: 0 })!
      assert.equal(reloaded.logEndOffset, 3)
      assert.equal(reloaded.highWatermark, 0)
      await second.shutdown()
    })
  })

  it('rewrites a checkpoint file only when its offsets changed (an idle broker writes nothing)', async () => {
    await withTempDir(async (root) => {
      const logDirs = [join(root, 'd1')]
      const manager = await LogManager.open({ fs: nodeFileSystem, logDirs, clock: new ManualClock() })
      const log = await manager.getOrCreateLog({ topic: 't', partition: 0 })
      for (let i = 0; i < 4; i++) await log.append(simpleBatch(5), { assignOffsets: true })
      const path = join(logDirs[0], 'replication-offset-checkpoint')
      log.updateHighWatermark(10 as Offset)
      await manager.checkpointHighWatermarks()
      const written = await stat(path)
      await manager.checkpointHighWatermarks()
      assert.equal((await stat(path)).ino, written.ino, 'nothing changed: the file is not replaced')
      log.updateHighWatermark(20 as Offset)
      await manager.checkpointHighWatermarks()
      assert.notEqual((await stat(path)).ino, written.ino)
      assert.equal(await readFile(path, 'utf8'), '0\n1\nt 0 20\n')
      await manager.shutdown()
    })
  })

  it('rewrites a checkpoint when its logs changed though every offset is the same', async () => {
    await withTempDir(async (root) => {
      const logDirs = [join(root, 'd1')]
      const manager = await LogManager.open({ fs: nodeFileSystem, logDirs, clock: new ManualClock() })
      await manager.getOrCreateLog({ topic: 't', partition: 0 })
      await manager.getOrCreateLog({ topic: 't', partition: 1 })
      const path = join(logDirs[0], 'replication-offset-checkpoint')
      await manager.checkpointHighWatermarks()
      assert.equal(await readFile(path, 'utf8'), '0\n2\nt 0 0\nt 1 0\n')
      // As many logs as before, each at offset 0: only which logs they are tells the change.
      await manager.deleteLog({ topic: 't', partition: 1 })
      await manager.getOrCreateLog({ topic: 't', partition: 2 })
      await manager.checkpointHighWatermarks()
      assert.equal(await readFile(path, 'utf8'), '0\n2\nt 0 0\nt 2 0\n')
      const written = await stat(path)
      await manager.checkpointHighWatermarks()
      assert.equal((await stat(path)).ino, written.ino, 'nothing changed since: not replaced')
      await manager.shutdown()
    })
  })

  it('walks the logs that are not compacted once per cleaner pass', async () => {
    await withTempDir(async (root) => {
      const logDirs = [join(root, 'd1')]
      const manager = await LogManager.open({ fs: nodeFileSystem, logDirs, clock: new ManualClock() })
      const deleted: UnifiedLog[] = []
      for (let partition = 0; partition < 5; partition++)
        deleted.push(await manager.getOrCreateLog({ topic: 'd', partition }))
      const compacted = await manager.getOrCreateLog(
        { topic: 'c', partition: 0 },
        fromProperties({ 'cleanup.policy': 'compact' }),
      )
      // A pass runs every log.cleaner.backoff.ms over every hosted log (33,000 on a broker
      // of the scale bench): a look at each config to pick the compacted ones, no more.
      const configReads = new Map<UnifiedLog, number>()
      const config = Object.getOwnPropertyDescriptor(UnifiedLog.prototype, 'config')!.get!
      Object.defineProperty(UnifiedLog.prototype, 'config', {
        configurable: true,
        get(this: UnifiedLog) {
          configReads.set(this, (configReads.get(this) ?? 0) + 1)
          return config.call(this)
        },
      })
      try {
        assert.equal(await manager.cleanLogs(), 0)
      } finally {
        Object.defineProperty(UnifiedLog.prototype, 'config', { configurable: true, get: config })
      }
      assert.deepEqual(
        deleted.map((log) => configReads.get(log)),
        [1, 1, 1, 1, 1],
      )
      assert.ok((configReads.get(compacted) ?? 0) >= 1, 'the compacted log was considered')
      await manager.shutdown()
    })
  })

  it('does not even compare a checkpoint with its logs while no log operation or high watermark move was counted', async () => {
    await withTempDir(async (root) => {
      const clock = new ManualClock()
      const logDirs = [join(root, 'd1')]
      const manager = await LogManager.open({ fs: nodeFileSystem, logDirs, clock })
      const logs = []
      for (let partition = 0; partition < 10; partition++)
        logs.push(await manager.getOrCreateLog({ topic: 't', partition }))
      // Reads of a high watermark count what a checkpoint pass looks at.
      let reads = 0
      const highWatermark = Object.getOwnPropertyDescriptor(UnifiedLog.prototype, 'highWatermark')!.get!
      for (const log of logs)
        Object.defineProperty(log, 'highWatermark', {
          get() {
            reads++
            return highWatermark.call(this)
          },
        })
      // A queued operation is counted as its task ends, just after its promise resolves.
      const appended = async (log: UnifiedLog, count: number) => {
        await log.append(simpleBatch(count), { assignOffsets: true })
        await new Promise(setImmediate)
      }
      await appended(logs[0], 5)
      logs[0].updateHighWatermark(5 as Offset)
      await manager.checkpointHighWatermarks()
      const path = join(logDirs[0], 'replication-offset-checkpoint')
      const written = await stat(path)
      reads = 0
      for (let i = 0; i < 3; i++) await manager.checkpointHighWatermarks()
      assert.equal(reads, 0, 'nothing counted: no log looked at')
      // An operation that moves no checkpointed offset: compared, not rewritten.
      await appended(logs[1], 2)
      await manager.checkpointHighWatermarks()
      assert.equal(reads, logs.length)
      assert.equal((await stat(path)).ino, written.ino)
      // A high watermark move: rewritten.
      logs[1].updateHighWatermark(2 as Offset)
      await manager.checkpointHighWatermarks()
      assert.notEqual((await stat(path)).ino, written.ino)
      assert.match(await readFile(path, 'utf8'), /^t 1 2$/m)
      // However quiet, compared again after a minute.
      reads = 0
      clock.advance(60_000)
      await manager.checkpointHighWatermarks()
      assert.equal(reads, logs.length)
      await manager.shutdown()
    })
  })

  it('runs retention and checkpoints on the injected clock', async () => {
    await withTempDir(async (root) => {
      const clock = new ManualClock()
      const logDirs = [join(root, 'd1')]
      const config = fromProperties({ 'segment.bytes': 512, 'retention.bytes': 600 })
      const manager = await LogManager.open({
        fs: nodeFileSystem,
        logDirs,
        clock,
        defaultConfig: config,
        retentionCheckIntervalMs: 1000,
      })
      manager.startup()
      const log = await manager.getOrCreateLog({ topic: 't', partition: 0 })
      for (let i = 0; i < 20; i++) await log.append(simpleBatch(2, 40), { assignOffsets: true })
      log.updateHighWatermark(log.logEndOffset)
      const before = log.numberOfSegments
      clock.advance(5000) // high-watermark checkpoint and retention both due
      await waitFor(() => log.numberOfSegments < before)
      assert.ok(log.numberOfSegments < before)
      await waitFor(() => exists(join(logDirs[0], 'replication-offset-checkpoint')))
      assert.equal(
        await readFile(join(logDirs[0], 'replication-offset-checkpoint'), 'utf8'),
        '0\n1\nt 0 40\n',
      )
      await manager.deleteLog({ topic: 't', partition: 0 })
      assert.equal(await exists(join(logDirs[0], 't-0')), false)
      await manager.shutdown()
    })
  })

  it("makes every new log's entry in its log dir durable with a few shared fsyncs at shutdown", async () => {
    await withTempDir(async (root) => {
      const logDir = join(root, 'd1')
      const logCount = 200
      let logDirSyncs = 0
      // A log dir fsync slow enough (5 ms) that the closes running together meet one.
      const fs = new Proxy(nodeFileSystem, {
        get(target, key, receiver) {
          if (key === 'syncDir')
            return async (path: string) => {
              if (path === logDir) {
                logDirSyncs++
                await new Promise((resolve) => setTimeout(resolve, 5))
              }
              return target.syncDir(path)
            }
          const value = Reflect.get(target, key, receiver)
          return typeof value === 'function' ? value.bind(target) : value
        },
      })
      const manager = await LogManager.open({ fs, logDirs: [logDir] })
      for (let partition = 0; partition < logCount; partition++) {
        const log = await manager.getOrCreateLog({ topic: 't', partition })
        await log.append(simpleBatch(1), { assignOffsets: true })
      }
      assert.equal(logDirSyncs, 0, 'nothing flushed yet')
      await manager.shutdown()
      // Each new log's first flush asks for one; the checkpoints and the marker add theirs.
      assert.ok(logDirSyncs >= 1 && logDirSyncs < logCount / 4, `${logDirSyncs} fsyncs of the log dir`)
    })
  })
})
