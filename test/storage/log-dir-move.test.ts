/**
 * Moving a log between log dirs (AlterReplicaLogDirs' storage side, storage/log-dir-move.ts):
 * every record and offset kept, the source gone, the checkpoints naming the new dir, and a
 * crash at either point of the move recovered at the next start without losing the log.
 */
import assert from 'node:assert/strict'
import { cp, readdir, readFile, rename } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import type { Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { DEFAULT_LOG_CONFIG } from '../../src/storage/log-config.js'
import { LogManager } from '../../src/storage/log-manager.js'
import type { UnifiedLog } from '../../src/storage/unified-log.js'
import { readAll, simpleBatch, withTempDir } from './helpers.js'

const TP = { topic: 'moving', partition: 3 }
const FUTURE_ID = '0123456789abcdef0123456789abcdef'

async function offsetsOf(log: UnifiedLog): Promise<unknown> {
  const batches = await readAll(log)
  return {
    logStartOffset: log.logStartOffset,
    highWatermark: log.highWatermark,
    logEndOffset: log.logEndOffset,
    records: batches.reduce((n, b) => n + (b.lastOffset - b.baseOffset + 1), 0),
  }
}

/** A manager over d1 and d2 with the log of TP in d1: 3 batches of 4 records, some deleted. */
async function withLogInD1(
  root: string,
): Promise<{ logDirs: string[]; manager: LogManager; before: unknown }> {
  const logDirs = [join(root, 'd1'), join(root, 'd2')]
  const manager = await LogManager.open({ fs: nodeFileSystem, logDirs })
  const log = await manager.getOrCreateLog(TP)
  assert.equal(manager.logDirOf(TP), logDirs[0])
  for (let i = 0; i < 3; i++) await log.append(simpleBatch(4, 100, i), { assignOffsets: true })
  log.updateHighWatermark(10 as Offset)
  await log.deleteRecordsBefore(4 as Offset)
  return { logDirs, manager, before: await offsetsOf(log) }
}

describe('moving a log between log dirs', () => {
  it('keeps every record and offset, removes the source and checkpoints the new dir', async () => {
    await withTempDir(async (root) => {
      const { logDirs, manager, before } = await withLogInD1(root)
      const moved = await manager.moveLog(TP, logDirs[1], DEFAULT_LOG_CONFIG)
      assert.equal(manager.logDirOf(TP), logDirs[1])
      assert.equal(moved.dir, join(logDirs[1], 'moving-3'))
      assert.deepEqual(await offsetsOf(moved), before)
      assert.deepEqual(
        await readdir(logDirs[0]).then((names) => names.filter((n) => n.startsWith('moving'))),
        [],
      )
      assert.match(await readFile(join(logDirs[1], 'replication-offset-checkpoint'), 'utf8'), /moving 3 10\n/)
      await moved.append(simpleBatch(2), { assignOffsets: true })
      await manager.shutdown()
      const reopened = await LogManager.open({ fs: nodeFileSystem, logDirs })
      try {
        assert.equal(reopened.logDirOf(TP), logDirs[1])
        const log = reopened.getLog(TP)!
        assert.deepEqual([log.logStartOffset, log.highWatermark, log.logEndOffset], [4, 10, 14])
      } finally {
        await reopened.shutdown()
      }
    })
  })

  it('a crash before the source was given up: the copy is removed, the source serves', async () => {
    await withTempDir(async (root) => {
      const { logDirs, manager, before } = await withLogInD1(root)
      await manager.shutdown()
      await cp(join(logDirs[0], 'moving-3'), join(logDirs[1], `moving-3.${FUTURE_ID}-future`), {
        recursive: true,
      })
      const reopened = await LogManager.open({ fs: nodeFileSystem, logDirs })
      try {
        assert.equal(reopened.logDirOf(TP), logDirs[0])
        assert.deepEqual(await offsetsOf(reopened.getLog(TP)!), before)
        assert.deepEqual(
          await readdir(logDirs[1]).then((names) => names.filter((n) => n.startsWith('moving'))),
          [],
        )
      } finally {
        await reopened.shutdown()
      }
    })
  })

  it('a crash after the source was marked deleted: the complete copy becomes the log', async () => {
    await withTempDir(async (root) => {
      const { logDirs, manager } = await withLogInD1(root)
      await manager.shutdown()
      await cp(join(logDirs[0], 'moving-3'), join(logDirs[1], `moving-3.${FUTURE_ID}-future`), {
        recursive: true,
      })
      await rename(join(logDirs[0], 'moving-3'), join(logDirs[0], `moving-3.${FUTURE_ID}-delete`))
      const reopened = await LogManager.open({ fs: nodeFileSystem, logDirs })
      try {
        assert.equal(reopened.logDirOf(TP), logDirs[1])
        const log = reopened.getLog(TP)!
        // Its offsets come from d1's checkpoints, which still name it.
        assert.deepEqual([log.logStartOffset, log.highWatermark, log.logEndOffset], [4, 10, 12])
        assert.equal((await readAll(log, 4 as Offset)).length, 2)
        assert.deepEqual(
          await readdir(logDirs[0]).then((names) => names.filter((n) => n.startsWith('moving'))),
          [],
        )
      } finally {
        await reopened.shutdown()
      }
    })
  })
})
