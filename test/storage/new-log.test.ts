/**
 * A log whose directory its open made (a new replica) reads nothing and makes only its
 * `.log`: its index files appear when first written (roll, close), its leader-epoch cache
 * and producer state start empty without looking for files. Whatever happens before those
 * files exist (appends, a crash, a truncation, a deletion) must read back as it did with
 * them.
 */
import assert from 'node:assert/strict'
import { readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { pino } from 'pino'
import type { Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { fromProperties } from '../../src/storage/log-config.js'
import { joinFlat } from '../../src/storage/log-file-names.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { readAll, simpleBatch, withTempDir } from './helpers.js'

const config = fromProperties({
  'segment.bytes': 2048,
  'index.interval.bytes': 128,
  'segment.index.bytes': 4096,
})
const FIRST = '00000000000000000000'

/** Warnings and errors the log writes, parsed. */
function capturingLogger() {
  const lines: { msg: string }[] = []
  const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) })
  return { logger, lines }
}

async function appendBatches(log: UnifiedLog, count: number): Promise<void> {
  for (let i = 0; i < count; i++)
    await log.append(simpleBatch(2, 50, i, { baseTimestamp: 5000 + i }), { assignOffsets: true })
}

/** Kills the log as kill -9 would leave it: descriptors closed, nothing trimmed or written. */
async function crashAndReopen(dir: string) {
  const { logger, lines } = capturingLogger()
  const log = await UnifiedLog.open({
    fs: nodeFileSystem,
    dir,
    config,
    logger,
    hadCleanShutdown: false,
    recoveryPoint: 0 as Offset,
  })
  return { log, warnings: lines }
}

describe('a log created new', () => {
  it('keeps its paths as path.join gives them', () => {
    for (const [dir, name] of [
      ['/data/t-0', '00000000000000000000'],
      ['/data/x/', 'leader-epoch-checkpoint'],
      ['rel/./t-1', 'a'],
      ['/data/ü-0', 'b'],
    ])
      assert.equal(joinFlat(dir, name), join(dir, name))
  })

  it('closed before any write, leaves its .log only and reopens cleanly without a word', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config })
      assert.equal(log.createdNew, true)
      assert.deepEqual(await readdir(dir), [`${FIRST}.log`])
      await log.close()
      assert.deepEqual(await readdir(dir), [`${FIRST}.log`], 'an empty segment has nothing to index')
      const { logger, lines } = capturingLogger()
      const reopen = () =>
        UnifiedLog.open({ fs: nodeFileSystem, dir, config, logger, hadCleanShutdown: true })
      const reopened = await reopen()
      assert.equal(reopened.createdNew, false)
      assert.equal(reopened.logEndOffset, 0)
      await appendBatches(reopened, 3)
      await reopened.close()
      assert.deepEqual((await readdir(dir)).sort(), [`${FIRST}.index`, `${FIRST}.log`, `${FIRST}.timeindex`])
      const again = await reopen()
      assert.deepEqual(
        (await readAll(again)).map((b) => b.baseOffset),
        [0, 2, 4],
      )
      assert.deepEqual(lines, [])
      await again.close()
    })
  })

  it('emptied by a truncation, makes its index files and fsyncs at close as any written log', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config })
      await appendBatches(log, 2)
      await log.truncateTo(0 as Offset)
      await log.close()
      assert.deepEqual((await readdir(dir)).sort(), [`${FIRST}.index`, `${FIRST}.log`, `${FIRST}.timeindex`])
      assert.equal((await stat(join(dir, `${FIRST}.log`))).size, 0)
      assert.equal((await stat(join(dir, `${FIRST}.index`))).size, 0)
    })
  })

  it('appended to and crashed before any index file exists, reads the same after recovery', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config })
      await appendBatches(log, 10)
      assert.deepEqual(log.segmentBaseOffsets, [0], 'no roll yet')
      assert.deepEqual(await readdir(dir), [`${FIRST}.log`], 'the index files are not made yet')
      const before = await readAll(log)
      const middle = await log.read(11 as Offset, { maxBytes: 1, maxOffset: log.logEndOffset })
      await log.closeHandlers()
      const { log: reopened, warnings } = await crashAndReopen(dir)
      assert.equal(reopened.logEndOffset, log.logEndOffset)
      assert.deepEqual(await readAll(reopened), before)
      const middleAgain = await reopened.read(11 as Offset, { maxBytes: 1, maxOffset: reopened.logEndOffset })
      assert.deepEqual(Buffer.concat(middleAgain.records), Buffer.concat(middle.records))
      assert.deepEqual(warnings, [], 'a new log that crashed is recovered without a warning')
      await appendBatches(reopened, 2)
      await reopened.close()
      const clean = await UnifiedLog.open({ fs: nodeFileSystem, dir, config, hadCleanShutdown: true })
      assert.equal(clean.logEndOffset, 24)
      assert.equal((await readAll(clean)).length, 12)
      await clean.close()
    })
  })

  it('rolled, then crashed, reads the same after recovery', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config })
      await appendBatches(log, 40)
      assert.ok(log.segmentBaseOffsets.length >= 3, `only ${log.segmentBaseOffsets.length} segments`)
      // The first segment's index was deferred until its roll wrote it.
      assert.ok((await stat(join(dir, `${FIRST}.index`))).size > 0)
      const before = await readAll(log)
      await log.closeHandlers()
      const { log: reopened } = await crashAndReopen(dir)
      assert.deepEqual(await readAll(reopened), before)
      assert.deepEqual(reopened.segmentBaseOffsets, log.segmentBaseOffsets)
      await reopened.close()
    })
  })

  it('truncated and deleted before its index files exist', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config })
      await appendBatches(log, 5)
      await log.truncateTo(4 as Offset)
      assert.equal(log.logEndOffset, 4)
      assert.deepEqual(await readdir(dir), [`${FIRST}.log`])
      await appendBatches(log, 1)
      await log.close()
      const reopened = await UnifiedLog.open({ fs: nodeFileSystem, dir, config, hadCleanShutdown: true })
      assert.deepEqual(
        (await readAll(reopened)).map((b) => b.baseOffset),
        [0, 2, 4],
      )
      await reopened.delete()
      await assert.rejects(readdir(dir), { code: 'ENOENT' })
    })
  })
})
