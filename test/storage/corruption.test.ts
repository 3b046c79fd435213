/**
 * Damaged bytes on disk (issue 35, item 3): flipped bits, truncated and zeroed ranges in a
 * segment, its indexes and the log dir's checkpoints. Whatever the damage, no read serves
 * a batch that differs from what was written, none skips an offset, and each finding is
 * logged; a follower's log is cut at the damage (to be fetched again), a leader's goes
 * offline. Damage past the recovery point after an unclean shutdown is recovery's to find.
 * One exception, on purpose (as Kafka, which checks nothing it serves): the batches this
 * process appended to the still active segment are served without checking their CRC again.
 */
import assert from 'node:assert/strict'
import { open, readFile, truncate, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { pino } from 'pino'
import type { Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { CorruptSegmentError } from '../../src/storage/errors.js'
import { fromProperties } from '../../src/storage/log-config.js'
import { LogManager } from '../../src/storage/log-manager.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { type ReadBatch, simpleBatch, splitBatches, withTempDir } from './helpers.js'

const config = fromProperties({ 'segment.bytes': 1500, 'index.interval.bytes': 200 })
const prefix = (base: number) => String(base).padStart(20, '0')

function capturingLogger() {
  const lines: { level: number; msg: string; [k: string]: unknown }[] = []
  const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) })
  return { logger, lines }
}

/** 40 batches of 3 records over several segments, closed cleanly; the batches as written. */
async function writeLog(dir: string): Promise<ReadBatch[]> {
  const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config })
  for (let i = 0; i < 40; i++) await log.append(simpleBatch(3, 30, i), { assignOffsets: true })
  const batches = await readEverything(log)
  assert.ok(log.segmentBaseOffsets.length >= 4, `only ${log.segmentBaseOffsets.length} segments`)
  await log.close()
  return batches.map((b) => ({ ...b, bytes: Buffer.from(b.bytes) }))
}

async function readEverything(log: UnifiedLog): Promise<ReadBatch[]> {
  const out: ReadBatch[] = []
  let offset = log.logStartOffset
  while (offset < log.logEndOffset) {
    const data = await log.read(offset, { maxBytes: 700, maxOffset: log.logEndOffset })
    const batches = splitBatches(data.records)
    assert.ok(batches.length > 0, `no progress at ${offset}`)
    out.push(...batches)
    offset = data.nextOffset
  }
  return out
}

/**
 * Reads from the start as a consumer does (small fetches, each from the last one's next
 * offset) until the log end or an error; every batch served must be one written, in
 * order, with no offset skipped.
 */
async function readLikeAConsumer(log: UnifiedLog, written: readonly ReadBatch[], maxBytes: number) {
  let offset = log.logStartOffset
  let served = 0
  for (;;) {
    if (offset >= log.logEndOffset) return { served, error: undefined }
    let records: Buffer[]
    try {
      const data = await log.read(offset, { maxBytes, maxOffset: log.logEndOffset })
      records = data.records
      offset = data.nextOffset
    } catch (error) {
      return { served, error }
    }
    for (const batch of splitBatches(records)) {
      const expected = written[served]
      assert.ok(expected !== undefined, `served a batch past the ${written.length} written`)
      assert.equal(batch.baseOffset, expected.baseOffset, 'no offset is skipped')
      assert.ok(batch.bytes.equals(expected.bytes), `batch at ${batch.baseOffset} is served as written`)
      served++
    }
  }
}

type Damage = 'flip' | 'zero' | 'truncate'

async function damage(path: string, kind: Damage, at: number, length = 8): Promise<void> {
  if (kind === 'truncate') {
    await truncate(path, at)
    return
  }
  const handle = await open(path, 'r+')
  try {
    const buf = Buffer.alloc(kind === 'zero' ? length : 1)
    if (kind === 'flip') {
      await handle.read(buf, 0, 1, at)
      buf[0] ^= 0x10
    }
    await handle.write(buf, 0, buf.length, at)
  } finally {
    await handle.close()
  }
}

/** Where a damaged byte lands in a batch: its header fields and its records. */
const FIELDS = {
  baseOffset: 7,
  length: 10,
  magic: 16,
  crc: 19,
  attributes: 22,
  lastOffsetDelta: 26,
  maxTimestamp: 40,
  records: 70,
} as const

/** The batches of segment `base` as written, with their byte positions. */
function batchesOf(written: readonly ReadBatch[], segments: readonly number[], base: number) {
  const next = segments[segments.indexOf(base) + 1] ?? Infinity
  let position = 0
  return written
    .filter((b) => b.baseOffset >= base && b.baseOffset < next)
    .map((b) => {
      const at = position
      position += b.bytes.length
      return { ...b, position: at }
    })
}

describe('read path: damage in a segment below the recovery point (never scanned by recovery)', () => {
  for (const kind of ['flip', 'zero', 'truncate'] as const) {
    for (const [field, at] of Object.entries(FIELDS)) {
      if (kind === 'truncate' && field !== 'records' && field !== 'length') continue
      it(`${kind} at the ${field} of a batch: served up to it, then CorruptSegmentError; a follower cuts it`, async () => {
        await withTempDir(async (root) => {
          const dir = join(root, 't-0')
          const written = await writeLog(dir)
          const probe = await UnifiedLog.open({ fs: nodeFileSystem, dir, config, hadCleanShutdown: true })
          const segments = probe.segmentBaseOffsets
          await probe.close()
          const base = segments[1]
          const victim = batchesOf(written, segments, base)[4]
          await damage(join(dir, `${prefix(base)}.log`), kind, victim.position + at)

          const { logger, lines } = capturingLogger()
          const log = await UnifiedLog.open({
            fs: nodeFileSystem,
            dir,
            config,
            logger,
            hadCleanShutdown: true,
          })
          const index = written.indexOf(written.find((b) => b.baseOffset === victim.baseOffset)!)
          // After a clean shutdown the segment's index is loaded at its first read, so a file
          // cut short (kind 'truncate') is found by the read, as every other damage here is.
          for (const maxBytes of [200, 5000]) {
            const { served, error } = await readLikeAConsumer(log, written, maxBytes)
            assert.ok(error instanceof CorruptSegmentError, `read ends in a CorruptSegmentError: ${error}`)
            assert.equal(error.segmentBaseOffset, base)
            // Damage to a batch's length field can make the batch before it look damaged too.
            assert.ok(served === index || (field === 'length' && served === index - 1), `served ${served}`)
          }
          // A follower's answer: the segment is cut at the damage and the later ones go.
          const logEnd = await log.truncateAtCorruption(
            await log.read(victim.baseOffset as Offset, { maxBytes: 5000 }).then(
              () => assert.fail('the damaged batch was served'),
              (e: CorruptSegmentError) => e,
            ),
          )
          assert.ok(logEnd !== undefined && logEnd <= victim.baseOffset && logEnd >= victim.baseOffset - 3)
          assert.deepEqual(log.segmentBaseOffsets, segments.slice(0, 2))
          const after = await readLikeAConsumer(log, written, 5000)
          assert.equal(after.error, undefined)
          assert.equal(log.logEndOffset, written[after.served]?.baseOffset ?? log.logEndOffset)
          assert.ok(lines.some((l) => l.level === 50 && /truncated a corrupt log segment/.test(l.msg)))
          await log.close()
          // The cut is on disk: a restart serves the same prefix.
          const reopened = await UnifiedLog.open({ fs: nodeFileSystem, dir, config, hadCleanShutdown: true })
          assert.equal(reopened.logEndOffset, logEnd)
          assert.equal((await readLikeAConsumer(reopened, written, 5000)).error, undefined)
          await reopened.close()
        })
      })
    }
  }

  it('a leader that finds a damaged batch goes offline: its log dir is failed, nothing more is read', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const written = await writeLog(dir)
      await damage(join(dir, `${prefix(0)}.log`), 'flip', written[0].bytes.length * 2 + FIELDS.records)
      const failures: unknown[] = []
      const { logger, lines } = capturingLogger()
      const log = await UnifiedLog.open({
        fs: nodeFileSystem,
        dir,
        config,
        logger,
        hadCleanShutdown: true,
        onStorageError: (err) => failures.push(err),
      })
      const { served, error } = await readLikeAConsumer(log, written, 5000)
      assert.equal(served, 2)
      assert.ok(error instanceof CorruptSegmentError)
      log.markCorrupt(error)
      assert.ok(log.isOffline)
      assert.equal(failures.length, 1)
      await assert.rejects(log.read(0 as Offset, { maxBytes: 100 }), /corrupt record batch/)
      assert.ok(lines.some((l) => /taking its log dir offline/.test(l.msg)))
      await log.closeHandlers()
    })
  })

  it('an offset index entry pointing into a batch: read from the segment start, served as written, logged', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const written = await writeLog(dir)
      const index = join(dir, `${prefix(0)}.index`)
      const bytes = await readFile(index)
      assert.ok(bytes.length >= 16, 'the first segment has index entries')
      // The second entry's position moves 4 bytes on, still in order and inside the file.
      bytes.writeInt32BE(bytes.readInt32BE(12) + 4, 12)
      await writeFile(index, bytes)
      const { logger, lines } = capturingLogger()
      const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config, logger, hadCleanShutdown: true })
      for (const maxBytes of [200, 5000]) {
        const { served, error } = await readLikeAConsumer(log, written, maxBytes)
        assert.equal(error, undefined)
        assert.equal(served, written.length)
      }
      assert.ok(lines.some((l) => /offset index points into a batch/.test(l.msg)))
      await log.close()
    })
  })
})

describe('recovery: damage after an unclean shutdown', () => {
  for (const kind of ['flip', 'zero', 'truncate'] as const) {
    for (const file of ['log', 'index', 'timeindex'] as const) {
      it(`${kind} in a segment's .${file} past the recovery point: cut or rebuilt, never served`, async () => {
        await withTempDir(async (root) => {
          const dir = join(root, 't-0')
          const written = await writeLog(dir)
          const probe = await UnifiedLog.open({ fs: nodeFileSystem, dir, config, hadCleanShutdown: true })
          const segments = probe.segmentBaseOffsets
          await probe.close()
          const base = segments[1]
          const victim = batchesOf(written, segments, base)[3]
          const path = join(dir, `${prefix(base)}.${file}`)
          await damage(path, kind, file === 'log' ? victim.position + FIELDS.records : 6)
          const { logger, lines } = capturingLogger()
          const log = await UnifiedLog.open({
            fs: nodeFileSystem,
            dir,
            config,
            logger,
            hadCleanShutdown: false,
            recoveryPoint: base as Offset,
          })
          const { served, error } = await readLikeAConsumer(log, written, 700)
          assert.equal(error, undefined)
          if (file === 'log') {
            assert.equal(log.logEndOffset, victim.baseOffset, 'cut at the damaged batch')
            assert.ok(lines.some((l) => /recovery truncated an invalid tail/.test(l.msg)))
          } else {
            assert.equal(served, written.length, 'a damaged index loses no record')
          }
          await log.close()
        })
      })
    }
  }
})

describe('checkpoints', () => {
  const files = [
    'recovery-point-offset-checkpoint',
    'replication-offset-checkpoint',
    'log-start-offset-checkpoint',
  ] as const
  for (const kind of ['flip', 'zero', 'truncate'] as const) {
    for (const file of [...files, 'leader-epoch-checkpoint'] as const) {
      it(`${kind} in ${file}: ignored with a warning, every record still served`, async () => {
        await withTempDir(async (root) => {
          const logDir = join(root, 'data')
          const written = await managedLog(logDir)
          const path = file === 'leader-epoch-checkpoint' ? join(logDir, 't-0', file) : join(logDir, file)
          // The version line: a flipped bit makes it '1', zeros and a cut leave no valid header.
          await damage(path, kind, kind === 'truncate' ? 1 : 0, 1)
          const { logger, lines } = capturingLogger()
          const manager = await LogManager.open({
            fs: nodeFileSystem,
            logDirs: [logDir],
            defaultConfig: config,
            logger,
          })
          const log = manager.getLog({ topic: 't', partition: 0 })!
          const { served, error } = await readLikeAConsumer(log, written, 700)
          assert.equal(error, undefined)
          assert.equal(served, written.length)
          assert.equal(log.logEndOffset, written.at(-1)!.lastOffset + 1)
          assert.ok(
            lines.some((l) => /malformed/.test(`${l.msg} ${String(l['err'])}`)),
            `warned: ${JSON.stringify(lines)}`,
          )
          if (file === 'leader-epoch-checkpoint')
            assert.deepEqual(log.latestEpoch, 3, 'the epochs come back from the batches')
          await manager.shutdown()
        })
      })
    }
  }
})

/** A log dir with one log of 40 batches in leader epochs 1..3, shut down cleanly; its batches. */
async function managedLog(logDir: string): Promise<ReadBatch[]> {
  const manager = await LogManager.open({ fs: nodeFileSystem, logDirs: [logDir], defaultConfig: config })
  const log = await manager.getOrCreateLog({ topic: 't', partition: 0 })
  for (let i = 0; i < 40; i++) {
    const leaderEpoch = (1 + Math.floor(i / 15)) as never
    await log.append(simpleBatch(3, 30, i), { assignOffsets: true, leaderEpoch })
  }
  log.updateHighWatermark(log.logEndOffset)
  const written = (await readEverything(log)).map((b) => ({ ...b, bytes: Buffer.from(b.bytes) }))
  await manager.shutdown()
  return written
}

describe('read path: what this process appended to the active segment', () => {
  it('is served without checking its CRC again; once the segment rolls, its reads check it', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const roomy = fromProperties({ 'segment.bytes': 100_000, 'index.interval.bytes': 200 })
      // No recent-batches cache: every read goes to the segment file.
      const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config: roomy, recentBatchesMaxBytes: 0 })
      try {
        for (let i = 0; i < 5; i++) await log.append(simpleBatch(3, 30, i), { assignOffsets: true })
        const written = await readEverything(log)
        const damagedAt = written[0].bytes.length + written[1].bytes.length + FIELDS.records
        await damage(join(dir, `${prefix(0)}.log`), 'flip', damagedAt)
        const all = { maxBytes: 100_000, maxOffset: log.logEndOffset }
        // The damage is in bytes this process appended and checked: not looked for again.
        const unchecked = splitBatches((await log.read(0 as Offset, all)).records)
        assert.equal(unchecked.length, 5)
        assert.ok(!unchecked[2].bytes.equals(written[2].bytes), 'the damaged batch went out unchecked')
        await log.roll()
        const { served, error } = await readLikeAConsumer(log, written, 100_000)
        assert.equal(served, 2, 'the rolled segment is served up to the damage')
        assert.ok(error instanceof CorruptSegmentError, `then a CorruptSegmentError: ${error}`)
      } finally {
        await log.close()
      }
    })
  })
})
