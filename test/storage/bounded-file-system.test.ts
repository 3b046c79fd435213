import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import type { FileHandle, FileSystem, OpenFlags } from '../../src/common/file-system.js'
import type { Offset } from '../../src/common/types.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { BoundedFileSystem } from '../../src/storage/bounded-file-system.js'
import { fromProperties } from '../../src/storage/log-config.js'
import { LogManager } from '../../src/storage/log-manager.js'
import { readAll, simpleBatch, withTempDir } from './helpers.js'

/** Node's file system, counting the descriptors it holds and refusing I/O on a closed one. */
class CountingFileSystem {
  openNow = 0
  peak = 0
  opens = 0
  usedAfterClose = 0

  constructor(private readonly inner: FileSystem = nodeFileSystem) {}

  async openFile(path: string, flags: OpenFlags): Promise<FileHandle> {
    const handle = await this.inner.open(path, flags)
    this.openNow++
    this.opens++
    this.peak = Math.max(this.peak, this.openNow)
    let closed = false
    const guard = <T>(op: () => Promise<T>): Promise<T> => {
      if (closed) {
        this.usedAfterClose++
        return Promise.reject(Object.assign(new Error('EBADF'), { code: 'EBADF' }))
      }
      return op()
    }
    return {
      read: (b, o, l, p) => guard(() => handle.read(b, o, l, p)),
      write: (b, p) => guard(() => handle.write(b, p)),
      writev: (b, p) => guard(() => handle.writev(b, p)),
      sync: () => guard(() => handle.sync()),
      truncate: (l) => guard(() => handle.truncate(l)),
      stat: () => guard(() => handle.stat()),
      close: async () => {
        assert.equal(closed, false, `${path} closed twice`)
        closed = true
        this.openNow--
        await handle.close()
      },
    }
  }
}

function counting(): { counter: CountingFileSystem; fs: FileSystem } {
  const counter = new CountingFileSystem()
  const fs: FileSystem = {
    open: (p, f) => counter.openFile(p, f),
    rename: (a, b) => nodeFileSystem.rename(a, b),
    unlink: (p) => nodeFileSystem.unlink(p),
    mkdir: (p) => nodeFileSystem.mkdir(p),
    rmdir: (p) => nodeFileSystem.rmdir(p),
    readdir: (p) => nodeFileSystem.readdir(p),
    stat: (p) => nodeFileSystem.stat(p),
    syncDir: (p) => nodeFileSystem.syncDir(p),
    statfs: (p) => nodeFileSystem.statfs(p),
    lockExclusive: (p) => nodeFileSystem.lockExclusive(p),
  }
  return { counter, fs }
}

const SMALL_SEGMENTS = fromProperties({ 'segment.bytes': 1024, 'index.interval.bytes': 128 })

describe('BoundedFileSystem', () => {
  it('keeps at most log.segment.open.files.max descriptors across many segments and reads everything back', async () => {
    await withTempDir(async (root) => {
      const { counter, fs } = counting()
      const maxOpenFiles = 8
      const manager = await LogManager.open({
        fs,
        logDirs: [join(root, 'd')],
        defaultConfig: SMALL_SEGMENTS,
        maxOpenFiles,
      })
      const logs = []
      for (let p = 0; p < 4; p++) logs.push(await manager.getOrCreateLog({ topic: 't', partition: p }))
      for (let round = 0; round < 60; round++) {
        for (const [p, log] of logs.entries())
          await log.append(simpleBatch(3, 40, round + p), { assignOffsets: true })
      }
      for (const log of logs) assert.ok(log.numberOfSegments >= 10, `${log.numberOfSegments} segments`)
      // 4 logs x >= 10 segments x 3 files would be > 120 descriptors without the bound.
      assert.ok(counter.openNow <= maxOpenFiles, `${counter.openNow} open`)
      for (const [p, log] of logs.entries()) {
        const batches = await readAll(log, 0 as Offset, 300)
        assert.equal(batches.length, 60)
        batches.forEach((batch, round) => {
          assert.equal(batch.baseOffset, round * 3)
          assert.equal(batch.bytes.at(-2), (round + p + 2) & 0xff, 'last record value byte')
        })
      }
      assert.ok(counter.openNow <= maxOpenFiles, `${counter.openNow} open after reads`)
      await manager.shutdown()
      assert.equal(counter.openNow, 0, 'shutdown closes every descriptor')
      assert.equal(counter.usedAfterClose, 0)

      const reopened = await LogManager.open({
        fs,
        logDirs: [join(root, 'd')],
        defaultConfig: SMALL_SEGMENTS,
        maxOpenFiles,
      })
      assert.ok(counter.peak <= maxOpenFiles, `peak ${counter.peak}`)
      const log = reopened.getLog({ topic: 't', partition: 2 })
      assert.ok(log !== undefined)
      assert.equal(log.logEndOffset, 180)
      assert.equal((await readAll(log, 0 as Offset, 500)).length, 60)
      await reopened.shutdown()
      assert.equal(counter.openNow, 0)
    })
  })

  it('never runs a read on a descriptor that an eviction closed, with reads racing across segments', async () => {
    await withTempDir(async (root) => {
      const { counter, fs } = counting()
      const manager = await LogManager.open({
        fs,
        logDirs: [join(root, 'd')],
        defaultConfig: fromProperties({ 'segment.bytes': 16384, 'index.interval.bytes': 128 }),
        maxOpenFiles: 2,
      })
      const log = await manager.getOrCreateLog({ topic: 'race', partition: 0 })
      // 150 batches of 5 KB: the reads below (batches 0-59) lie beyond the log's in-memory
      // tail of recent batches (256 KiB), so they go to the segments and reopen them.
      for (let i = 0; i < 150; i++) await log.append(simpleBatch(2, 2500, i), { assignOffsets: true })
      const opensBefore = counter.opens
      const reads = []
      for (let i = 0; i < 200; i++) {
        const offset = ((i * 37) % 120) as Offset
        reads.push(
          log.read(offset, { maxBytes: 1 }).then((data) => {
            const base = Number(data.records[0].readBigInt64BE(0))
            assert.equal(base, offset - (offset % 2), `batch holding ${offset}`)
          }),
        )
      }
      await Promise.all(reads)
      assert.ok(counter.opens > opensBefore + 10, 'the reads reopened evicted segments')
      assert.equal(counter.usedAfterClose, 0)
      assert.ok(counter.peak <= 2, `peak ${counter.peak} open`)
      await manager.shutdown()
      assert.equal(counter.openNow, 0)
    })
  })

  it('reopens a file created with w+ without truncating it, follows renames and waits for busy handles on close', async () => {
    await withTempDir(async (root) => {
      const { counter, fs } = counting()
      const bounded = new BoundedFileSystem(fs, 1)
      const a = await bounded.open(join(root, 'a'), 'w+')
      await a.write(Buffer.from('hello'), 0)
      const b = await bounded.open(join(root, 'b'), 'w+')
      assert.equal(counter.openNow, 1, 'opening b evicted a')
      await bounded.rename(join(root, 'a'), join(root, 'a2'))
      const buf = Buffer.alloc(5)
      assert.equal(await a.read(buf, 0, 5, 0), 5, 'a reopens under its new name, not truncated')
      assert.equal(buf.toString(), 'hello')
      assert.equal(counter.openNow, 1)
      const reading = b.read(Buffer.alloc(1), 0, 1, 0)
      const closing = b.close()
      assert.equal(await reading, 0)
      await closing
      await assert.rejects(b.read(Buffer.alloc(1), 0, 1, 0), { code: 'EBADF' })
      await a.close()
      assert.equal(counter.openNow, 0)
      assert.equal(bounded.openDescriptors, 0)
      assert.equal(counter.usedAfterClose, 0)
      await assert.rejects(bounded.open(join(root, 'a2'), 'wx+'), { code: 'EEXIST' })
      assert.equal(bounded.openDescriptors, 0, 'a failed open holds no descriptor')
    })
  })

  it('makes an open wait while every descriptor is busy, so the bound holds under any concurrency', async () => {
    await withTempDir(async (root) => {
      const { counter, fs } = counting()
      const bounded = new BoundedFileSystem(fs, 3)
      const handles = []
      for (let i = 0; i < 40; i++) {
        const handle = await bounded.open(join(root, `f${i}`), 'w+')
        await handle.write(Buffer.from([i]), 0)
        handles.push(handle)
      }
      // 40 handles x 5 concurrent reads and syncs, all at once: opens queue behind busy descriptors.
      const results = await Promise.all(
        handles.flatMap((handle, i) =>
          Array.from({ length: 5 }, async (_, j) => {
            if (j === 4) await handle.sync()
            const buf = Buffer.alloc(1)
            await handle.read(buf, 0, 1, 0)
            return buf[0] === i
          }),
        ),
      )
      assert.ok(results.every(Boolean), 'every read saw its own file')
      assert.ok(counter.peak <= 3, `peak ${counter.peak}`)
      assert.ok(bounded.peakOpenDescriptors <= 3)
      await Promise.all(handles.map((h) => h.close()))
      assert.equal(counter.openNow, 0)
      assert.equal(counter.usedAfterClose, 0)
    })
  })
})
