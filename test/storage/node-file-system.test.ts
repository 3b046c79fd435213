import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { NodeFileSystem, nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { DEFAULT_SYNC_APPEND_OPTIONS, SyncAppendPolicy } from '../../src/runtime/sync-append-policy.js'
import { withTempDir } from './helpers.js'

describe('node file system handle', () => {
  it('writes and reads at positions with writev and read', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'f')
      const handle = await nodeFileSystem.open(path, 'w+')
      assert.equal(await handle.writev([Buffer.from('hello '), Buffer.from('world')], 0), 11)
      assert.equal(await handle.writev([Buffer.from('W')], 6), 1)
      const out = Buffer.alloc(20)
      assert.equal(await handle.read(out, 2, 11, 0), 11)
      assert.equal(out.subarray(2, 13).toString(), 'hello World')
      assert.equal(await handle.read(out, 0, 5, 100), 0, 'a read past the end reads nothing')
      await handle.close()
      assert.equal(await readFile(path, 'utf8'), 'hello World')
    })
  })

  it('closes after the writes in flight, and refuses calls once closing', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'f')
      const throughThePool = new SyncAppendPolicy({ ...DEFAULT_SYNC_APPEND_OPTIONS, maxBytes: 0 }, () => 0)
      const handle = await new NodeFileSystem(throughThePool).open(path, 'w+')
      const chunk = Buffer.alloc(64 * 1024, 1)
      const writes = Array.from({ length: 16 }, (_, i) => handle.writev([chunk], i * chunk.length))
      const closed = handle.close()
      await assert.rejects(handle.writev([chunk], 0), { code: 'EBADF' })
      await assert.rejects(handle.read(Buffer.alloc(1), 0, 1, 0), { code: 'EBADF' })
      assert.deepEqual(await Promise.all(writes), Array(16).fill(chunk.length))
      await closed
      assert.equal((await readFile(path)).length, 16 * chunk.length)
    })
  })

  it('writes a small append before writev returns, and a stall sends the next ones to the pool', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'f')
      let nowMs = 0
      let writeTakesMs = 0
      const policy = new SyncAppendPolicy(DEFAULT_SYNC_APPEND_OPTIONS, () => {
        const t = nowMs
        nowMs += writeTakesMs // every other reading is a write's end
        return t
      })
      const handle = await new NodeFileSystem(policy).open(path, 'w+')
      const written = handle.writev([Buffer.from('abc')], 0)
      assert.equal(readFileSync(path, 'utf8'), 'abc', 'on disk before the promise settles')
      assert.equal(await written, 3)
      writeTakesMs = 5
      assert.equal(await handle.writev([Buffer.from('d')], 3), 1)
      assert.equal(policy.stalls, 1)
      writeTakesMs = 0
      assert.equal(policy.startSync(1), undefined, 'paused after the stall')
      assert.equal(await handle.writev([Buffer.from('e')], 4), 1)
      await handle.close()
      assert.equal(await readFile(path, 'utf8'), 'abcde')
    })
  })
})

describe('node file system mkdir', () => {
  it('says whether it made the directory, its parents included', async () => {
    await withTempDir(async (dir) => {
      assert.equal(await nodeFileSystem.mkdir(join(dir, 'a', 'b')), true)
      assert.equal(await nodeFileSystem.mkdir(join(dir, 'a', 'b')), false)
      assert.equal(await nodeFileSystem.mkdir(join(dir, 'a')), false)
      assert.equal(await nodeFileSystem.mkdir(join(dir, 'a', 'c')), true)
    })
  })
})
