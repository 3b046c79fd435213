/**
 * What recovery after an unclean shutdown reads (issue 41): only the segment holding the
 * recovery point and those after it are scanned; an index is sanity-checked from its used
 * entries and rebuilt only when unsound; the zeros of a preallocated index are never read.
 * Reads are counted through a FileSystem that wraps the real one.
 */
import assert from 'node:assert/strict'
import { readFile, stat, truncate, writeFile } from 'node:fs/promises'
import { basename, join } from 'node:path'
import { describe, it } from 'node:test'
import { pino } from 'pino'
import type { FileHandle, FileSystem } from '../../src/common/file-system.js'
import type { Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { fromProperties } from '../../src/storage/log-config.js'
import { OffsetIndex } from '../../src/storage/offset-index.js'
import { TimeIndex } from '../../src/storage/time-index.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { readAll, simpleBatch, withTempDir } from './helpers.js'

/** Preallocated index size: a full read of it is easy to tell from a read of its entries. */
const INDEX_BYTES = 1 << 20
/** What reading an index may cost beyond its used entries (one bounded read past them). */
const READ_SLACK_BYTES = 64 * 1024

const config = fromProperties({
  'segment.bytes': 2048,
  'index.interval.bytes': 128,
  'segment.index.bytes': INDEX_BYTES,
})

/** The real disk, counting the bytes read from each file (by file name). */
class CountingFileSystem implements FileSystem {
  readonly bytesRead = new Map<string, number>()
  readonly truncates = new Map<string, number>()
  constructor(private readonly inner: FileSystem = nodeFileSystem) {}

  async open(path: string, flags: Parameters<FileSystem['open']>[1]): Promise<FileHandle> {
    const handle = await this.inner.open(path, flags)
    const name = basename(path)
    const read: FileHandle['read'] = async (buffer, offset, length, position) => {
      const n = await handle.read(buffer, offset, length, position)
      this.bytesRead.set(name, (this.bytesRead.get(name) ?? 0) + n)
      return n
    }
    return {
      read,
      write: (buffer, position) => handle.write(buffer, position),
      writev: (buffers, position) => handle.writev(buffers, position),
      sync: () => handle.sync(),
      truncate: (length) => {
        this.truncates.set(name, (this.truncates.get(name) ?? 0) + 1)
        return handle.truncate(length)
      },
      stat: () => handle.stat(),
      close: () => handle.close(),
    }
  }
  rename(from: string, to: string) {
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

  read(name: string): number {
    return this.bytesRead.get(name) ?? 0
  }
}

function prefix(base: number): string {
  return String(base).padStart(20, '0')
}

/** Warnings the log writes, parsed. */
function capturingLogger() {
  const lines: { msg: string; segment?: string; problem?: string }[] = []
  const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) })
  return { logger, lines }
}

/**
 * A log of several segments closed cleanly, then reopened, appended to and "killed"
 * (files closed without trimming or flushing): the active segment's indexes are
 * preallocated, their new entries never written. Returns the log end before the kill.
 */
async function crashedLog(dir: string) {
  const log = await UnifiedLog.open({ fs: nodeFileSystem, dir, config })
  for (let i = 0; i < 40; i++)
    await log.append(simpleBatch(2, 50, i, { baseTimestamp: 5000 + i }), { assignOffsets: true })
  const bases = log.segmentBaseOffsets
  assert.ok(bases.length >= 4, `only ${bases.length} segments`)
  await log.close()
  const indexes = new Map<string, Buffer>()
  for (const base of bases)
    for (const suffix of ['.index', '.timeindex'])
      indexes.set(prefix(base) + suffix, await readFile(join(dir, prefix(base) + suffix)))
  const reopened = await UnifiedLog.open({ fs: nodeFileSystem, dir, config, hadCleanShutdown: true })
  const flushedEnd = reopened.logEndOffset
  for (let i = 40; i < 43; i++)
    await reopened.append(simpleBatch(2, 50, i, { baseTimestamp: 5000 + i }), { assignOffsets: true })
  assert.deepEqual(reopened.segmentBaseOffsets, bases, 'the appends after the kill stay in one segment')
  await reopened.closeHandlers()
  const active = bases[bases.length - 1]
  const activeIndexBytes = (await stat(join(dir, `${prefix(active)}.index`))).size
  assert.equal(activeIndexBytes, INDEX_BYTES, 'the active segment index is preallocated')
  return { bases, indexes, flushedEnd: flushedEnd as Offset }
}

async function reopenUnclean(dir: string, fs: FileSystem, recoveryPoint: Offset) {
  const { logger, lines } = capturingLogger()
  const log = await UnifiedLog.open({ fs, dir, config, logger, hadCleanShutdown: false, recoveryPoint })
  return { log, warnings: lines }
}

describe('recovery after an unclean shutdown', () => {
  it('reads no segment below the recovery point and of the indexes only their entries', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const { bases, indexes, flushedEnd } = await crashedLog(dir)
      const fs = new CountingFileSystem()
      const { log, warnings } = await reopenUnclean(dir, fs, flushedEnd)
      assert.equal(log.logEndOffset, 86, 'the appends after the recovery point are recovered')
      assert.deepEqual(
        warnings.filter((w) => /rebuild/.test(w.msg)),
        [],
        'a preallocated active index is no problem',
      )
      for (const base of bases.slice(0, -1)) {
        assert.equal(fs.read(`${prefix(base)}.log`), 0, `segment ${base} is below the recovery point`)
        for (const suffix of ['.index', '.timeindex']) {
          const name = prefix(base) + suffix
          assert.ok(fs.read(name) <= indexes.get(name)!.length, `${name} read ${fs.read(name)} bytes`)
        }
      }
      const active = prefix(bases[bases.length - 1])
      for (const suffix of ['.index', '.timeindex']) {
        const used = indexes.get(active + suffix)!.length
        const read = fs.read(active + suffix)
        assert.ok(read <= used + READ_SLACK_BYTES, `${active}${suffix}: ${read} bytes read of ${used} used`)
      }
      assert.equal((await readAll(log)).length, 43)
      await log.close()
    })
  })

  it('a preallocated index with trailing zeros is sound: not rebuilt, its log not read, trimmed', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const { bases, indexes, flushedEnd } = await crashedLog(dir)
      // A kill between an index's entries reaching the file and its trim, at a roll.
      const second = prefix(bases[1])
      await truncate(join(dir, `${second}.index`), INDEX_BYTES)
      await truncate(join(dir, `${second}.timeindex`), INDEX_BYTES - (INDEX_BYTES % 12))
      const fs = new CountingFileSystem()
      const { log, warnings } = await reopenUnclean(dir, fs, flushedEnd)
      assert.deepEqual(
        warnings.filter((w) => /rebuild/.test(w.msg)),
        [],
      )
      assert.equal(fs.read(`${second}.log`), 0, 'not rebuilt from its log')
      for (const suffix of ['.index', '.timeindex']) {
        const used = indexes.get(second + suffix)!.length
        assert.ok(fs.read(second + suffix) <= used + READ_SLACK_BYTES, `${suffix} read past its entries`)
        assert.deepEqual(await readFile(join(dir, second + suffix)), indexes.get(second + suffix), suffix)
      }
      assert.equal((await readAll(log)).length, 43)
      const found = await log.offsetForTimestamp(5020)
      assert.deepEqual(found, { timestamp: 5020, offset: 39, leaderEpoch: undefined })
      await log.close()
    })
  })

  it('a corrupt preallocated index below the recovery point is rebuilt, without reading its zeros', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const { bases, indexes, flushedEnd } = await crashedLog(dir)
      const second = prefix(bases[1])
      const original = indexes.get(`${second}.index`)!
      assert.ok(original.length >= 16, 'two entries at least')
      const bad = Buffer.alloc(INDEX_BYTES)
      original.copy(bad)
      bad.writeInt32BE(bad.readInt32BE(0), 8) // entry 1 repeats entry 0's offset
      await writeFile(join(dir, `${second}.index`), bad)
      const fs = new CountingFileSystem()
      const { log, warnings } = await reopenUnclean(dir, fs, flushedEnd)
      const rebuilt = warnings.filter((w) => /rebuild/.test(w.msg))
      assert.equal(rebuilt.length, 1, JSON.stringify(warnings))
      assert.match(rebuilt[0].problem ?? '', /entry 1/)
      assert.ok(fs.read(`${second}.index`) <= original.length + READ_SLACK_BYTES)
      assert.deepEqual(await readFile(join(dir, `${second}.index`)), original, 'rebuilt identical')
      assert.equal((await readAll(log)).length, 43)
      await log.close()
    })
  })

  it('an index whose entries stop before its end but resume after zeros is corrupt', async () => {
    await withTempDir(async (root) => {
      const dir = join(root, 't-0')
      const { bases, indexes, flushedEnd } = await crashedLog(dir)
      const second = prefix(bases[1])
      const original = indexes.get(`${second}.index`)!
      const bad = Buffer.from(original)
      bad.fill(0, 8, 16) // entry 1 zeroed, entry 2 and later intact
      await writeFile(join(dir, `${second}.index`), bad)
      const { log, warnings } = await reopenUnclean(dir, new CountingFileSystem(), flushedEnd)
      assert.equal(warnings.filter((w) => /rebuild/.test(w.msg)).length, 1, JSON.stringify(warnings))
      assert.deepEqual(await readFile(join(dir, `${second}.index`)), original, 'rebuilt identical')
      await log.close()
    })
  })
})

describe('index loading', () => {
  it('indexes holding no entries share one empty array, and an append to one leaves the others empty', async () => {
    await withTempDir(async (dir) => {
      // Each empty typed array was about 150 bytes of heap, four per segment on every replica.
      type Arrays = { relativeOffsets: Int32Array; positions?: Int32Array; timestamps?: Float64Array }
      const fs = new CountingFileSystem()
      const offsets = [0, 1].map(
        (i) => new OffsetIndex(fs, join(dir, `${i}.index`), 0 as Offset, INDEX_BYTES),
      )
      const times = [0, 1].map(
        (i) => new TimeIndex(fs, join(dir, `${i}.timeindex`), 0 as Offset, INDEX_BYTES),
      )
      const [a, b] = offsets.map((index) => index as unknown as Arrays)
      const [c, d] = times.map((index) => index as unknown as Arrays)
      assert.equal(a.relativeOffsets, b.relativeOffsets)
      assert.equal(a.positions, b.relativeOffsets)
      assert.equal(c.timestamps, d.timestamps)
      assert.equal(c.relativeOffsets, d.relativeOffsets)
      offsets[0].append(5 as Offset, 100)
      times[0].maybeAppend(1000, 5 as Offset)
      assert.deepEqual(offsets[0].entry(0), { offset: 5, position: 100 })
      assert.deepEqual(times[0].lastEntry, { timestamp: 1000, offset: 5 })
      assert.equal(offsets[1].entries, 0)
      assert.equal(times[1].entries, 0)
      assert.equal(b.relativeOffsets.length + (b.positions?.length ?? 0), 0, 'still the shared empty arrays')
      assert.equal((d.timestamps?.length ?? 0) + d.relativeOffsets.length, 0)
      for (const index of [...offsets, ...times]) await index.close()
    })
  })

  it('a preallocated offset index reads its entries up to the first empty slot', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, `${prefix(100)}.index`)
      const entries = Buffer.alloc(INDEX_BYTES)
      for (let i = 0; i < 5; i++) {
        entries.writeInt32BE(10 * (i + 1), i * 8)
        entries.writeInt32BE(1000 * (i + 1), i * 8 + 4)
      }
      await writeFile(path, entries)
      const fs = new CountingFileSystem()
      const index = new OffsetIndex(fs, path, 100 as Offset, INDEX_BYTES)
      assert.equal(await index.load(1 << 20), undefined)
      assert.equal(index.entries, 5)
      assert.equal(index.lastOffset, 150)
      assert.ok(fs.read(basename(path)) <= READ_SLACK_BYTES, `${fs.read(basename(path))} bytes read`)
      await index.close()
    })
  })

  it('a preallocated time index reads its entries up to the first empty slot', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, `${prefix(100)}.timeindex`)
      const bytes = INDEX_BYTES - (INDEX_BYTES % 12)
      const entries = Buffer.alloc(bytes)
      for (let i = 0; i < 3; i++) {
        entries.writeBigInt64BE(BigInt(5000 + i), i * 12)
        entries.writeInt32BE(i * 4, i * 12 + 8) // entry 0 at relative offset 0
      }
      await writeFile(path, entries)
      const fs = new CountingFileSystem()
      const index = new TimeIndex(fs, path, 100 as Offset, INDEX_BYTES)
      assert.equal(await index.load(1 << 20), undefined)
      assert.equal(index.entries, 3)
      assert.deepEqual(index.lastEntry, { timestamp: 5002, offset: 108 })
      assert.ok(fs.read(basename(path)) <= READ_SLACK_BYTES, `${fs.read(basename(path))} bytes read`)
      await index.close()
    })
  })

  it('entries out of order are a reason to rebuild when loaded, and a failed invariant once built', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, `${prefix(0)}.index`)
      const entries = Buffer.alloc(2 * 8)
      entries.writeInt32BE(5, 0)
      entries.writeInt32BE(100, 4)
      entries.writeInt32BE(4, 8) // offset goes back
      entries.writeInt32BE(200, 12)
      await writeFile(path, entries)
      const index = new OffsetIndex(new CountingFileSystem(), path, 0 as Offset, INDEX_BYTES)
      assert.match((await index.load(1000)) ?? '', /entry 1 does not increase/)
      assert.throws(() => index.checkInvariants(1000), { name: 'InvariantError' })
      assert.throws(() => index.append(3 as Offset, 300), { name: 'InvariantError' })
      await index.close()
    })
  })

  it('a trimmed index holds as many entries as its length says, an all-zero first one included', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, `${prefix(100)}.timeindex`)
      const entries = Buffer.alloc(3 * 12)
      for (let i = 1; i < 3; i++) {
        entries.writeBigInt64BE(BigInt(i * 10), i * 12)
        entries.writeInt32BE(i * 4, i * 12 + 8)
      } // entry 0: timestamp 0 at the base offset, all zeros
      await writeFile(path, entries)
      const index = new TimeIndex(new CountingFileSystem(), path, 100 as Offset, INDEX_BYTES)
      assert.equal(await index.load(1 << 20), undefined)
      assert.equal(index.entries, 3)
      assert.deepEqual(index.entry(0), { timestamp: 0, offset: 100 })
      await index.close()
    })
  })

  it('a rebuild of an index holding only zeros leaves its file alone; one with entries empties it', async () => {
    await withTempDir(async (dir) => {
      const fs = new CountingFileSystem()
      const empty = join(dir, `${prefix(0)}.index`)
      await writeFile(empty, Buffer.alloc(INDEX_BYTES))
      const index = new OffsetIndex(fs, empty, 0 as Offset, INDEX_BYTES)
      assert.equal(await index.load(0), undefined)
      await index.reset(false)
      await index.reset(true)
      assert.equal(fs.truncates.get(basename(empty)) ?? 0, 0, 'no rewrite of a zero file')
      await index.close()

      const used = join(dir, `${prefix(1)}.index`)
      const entries = Buffer.alloc(INDEX_BYTES)
      entries.writeInt32BE(3, 0)
      entries.writeInt32BE(200, 4)
      await writeFile(used, entries)
      const loaded = new OffsetIndex(fs, used, 1 as Offset, INDEX_BYTES)
      assert.equal(await loaded.load(1000), undefined)
      assert.equal(loaded.entries, 1)
      await loaded.reset(true)
      assert.equal((await stat(used)).size, INDEX_BYTES)
      assert.ok(
        (await readFile(used)).every((b) => b === 0),
        'its entry is gone from the file',
      )
      await loaded.close()
    })
  })
})
