/**
 * LocalLog.flush makes a new segment's directory entries durable as Kafka's does: the
 * partition directory is fsynced when a segment made since the last flush is flushed, and a
 * new log's own entry in the log dir at its first flush. Without them a power loss can
 * drop the files of a log whose contents were fsynced.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import type { FileSystem } from '../../src/common/file-system.js'
import type { Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { fromProperties } from '../../src/storage/log-config.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { simpleBatch, withTempDir } from './helpers.js'

const config = fromProperties({ 'segment.bytes': 2048, 'index.interval.bytes': 128 })

/** The node file system, with every directory fsync recorded. */
function recordingDirSyncs(): { fs: FileSystem; synced: string[] } {
  const synced: string[] = []
  const fs = new Proxy(nodeFileSystem, {
    get(target, key, receiver) {
      if (key === 'syncDir')
        return (path: string) => {
          synced.push(path)
          return target.syncDir(path)
        }
      const value = Reflect.get(target, key, receiver)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  return { fs, synced }
}

async function appendBatches(log: UnifiedLog, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await log.append(simpleBatch(2, 50, i), { assignOffsets: true })
}

describe('LocalLog.flush', () => {
  it('fsyncs a new log directory and its entry in the log dir at the first flush only', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const { fs, synced } = recordingDirSyncs()
      const log = await UnifiedLog.open({ fs, dir, config })
      await appendBatches(log, 2)
      await log.flush()
      assert.deepEqual(synced, [dir, root])
      synced.length = 0
      await appendBatches(log, 1)
      await log.flush()
      assert.deepEqual(synced, [], 'no segment is new since the last flush')
      await log.close()
    })
  })

  it('fsyncs the partition directory once a rolled segment is flushed', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const { fs, synced } = recordingDirSyncs()
      const log = await UnifiedLog.open({ fs, dir, config })
      await appendBatches(log, 1)
      await log.flush()
      synced.length = 0
      while (log.numberOfSegments < 2) await appendBatches(log, 1)
      await appendBatches(log, 1)
      await log.flush()
      assert.ok(synced.includes(dir), `the new segment's directory was fsynced: ${JSON.stringify(synced)}`)
      assert.ok(!synced.includes(root), 'the log dir only for a new log')
      await log.close()
    })
  })

  it('leaves the directories alone for a reopened log whose segments were all flushed', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const first = await UnifiedLog.open({ fs: nodeFileSystem, dir, config })
      await appendBatches(first, 2)
      await first.close()
      const { fs, synced } = recordingDirSyncs()
      const log = await UnifiedLog.open({
        fs,
        dir,
        config,
        hadCleanShutdown: true,
        recoveryPoint: first.logEndOffset as Offset,
      })
      await appendBatches(log, 1)
      await log.flush()
      assert.deepEqual(synced, [])
      await log.close()
    })
  })
})
