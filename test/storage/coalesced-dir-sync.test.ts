/**
 * Every caller of CoalescedDirSync.sync gets an fsync that started after its call (an
 * earlier one may have missed its directory entry), and callers that arrive while one runs
 * share the next one.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { FileSystem } from '../../src/common/file-system.js'
import { CoalescedDirSync } from '../../src/storage/coalesced-dir-sync.js'

/** A file system whose directory fsyncs end only when the test says so. */
function heldSyncs() {
  const started: { path: string; end: () => void; fail: (err: Error) => void }[] = []
  const fs = {
    syncDir: (path: string) =>
      new Promise<void>((resolve, reject) => started.push({ path, end: resolve, fail: reject })),
  } as unknown as FileSystem
  return { fs, started }
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve))

describe('CoalescedDirSync', () => {
  it('gives a caller arriving during a sync the next one, shared with the others who arrived', async () => {
    const { fs, started } = heldSyncs()
    const dirSync = new CoalescedDirSync(fs, '/data')
    const done: string[] = []
    const first = dirSync.sync().then(() => done.push('first'))
    assert.equal(started.length, 1)
    const second = dirSync.sync().then(() => done.push('second'))
    const third = dirSync.sync().then(() => done.push('third'))
    await tick()
    assert.equal(started.length, 1, 'no second fsync while the first runs')
    started[0].end()
    await first
    await tick()
    assert.deepEqual(done, ['first'], 'the later callers wait for a sync that started after them')
    assert.equal(started.length, 2)
    started[1].end()
    await Promise.all([second, third])
    assert.deepEqual(done, ['first', 'second', 'third'])
    assert.equal(dirSync.syncs, 2)
  })

  it('starts a fresh sync once none runs, and a failed one fails only its own callers', async () => {
    const { fs, started } = heldSyncs()
    const dirSync = new CoalescedDirSync(fs, '/data')
    const failing = dirSync.sync()
    const waiting = dirSync.sync()
    started[0].fail(new Error('EIO'))
    await assert.rejects(failing, /EIO/)
    await tick()
    assert.equal(started.length, 2, 'the waiting caller gets its own sync')
    started[1].end()
    await waiting
    const later = dirSync.sync()
    assert.equal(started.length, 3)
    started[2].end()
    await later
  })
})
