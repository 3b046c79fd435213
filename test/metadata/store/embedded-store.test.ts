/**
 * The embedded store: the shared contract on a manual clock, then what only it has:
 * persistence (round trip, torn last line, snapshot compaction, a failing disk), bounded
 * watch history, and lease expiry on the real clock.
 */
import assert from 'node:assert/strict'
import { appendFile, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { type Clock, systemClock } from '../../../src/common/clock.js'
import { DirectoryLockedError, type FileSystem } from '../../../src/common/file-system.js'
import { EmbeddedStore } from '../../../src/metadata/store/embedded-store.js'
import { MetadataStoreError } from '../../../src/metadata/store/metadata-store.js'
import { nodeFileSystem } from '../../../src/runtime/node-file-system.js'
import { ManualClock, waitFor, withTempDir } from '../../storage/helpers.js'
import { metadataStoreContract } from './contract.js'

metadataStoreContract(
  'embedded store',
  async () => {
    const clock = new ManualClock()
    const store = await EmbeddedStore.open({ clock })
    return {
      store,
      suspendKeepAlive: (lease) => store.suspendKeepAlive(lease.id),
      elapse: async (ms) => {
        clock.advance(ms)
        await new Promise((resolve) => setImmediate(resolve))
      },
      close: () => store.close(),
    }
  },
  { waitMs: 2000 },
)

/** The system clock with timers that keep the test process alive while a lease runs out. */
const realClock: Clock = {
  ...systemClock,
  setTimeout(callback, delayMs) {
    const timer = setTimeout(callback, delayMs)
    return { cancel: () => clearTimeout(timer) }
  },
}

const isCode = (code: string) => (err: unknown) =>
  err instanceof Error && (err as { code?: string }).code === code

describe('embedded store: persistence', () => {
  test('reopening gives the same keys not bound to a lease and a revision at least as high', async () => {
    await withTempDir(async (dir) => {
      const persistPath = join(dir, 'metadata.jsonl')
      const first = await EmbeddedStore.open({ clock: systemClock, persistPath, fs: nodeFileSystem })
      const lease = await first.grantLease(1000)
      await first.txn([], [{ type: 'put', key: '/a', value: '1' }])
      await first.txn([], [{ type: 'put', key: '/a', value: '2' }])
      await first.txn([], [{ type: 'put', key: '/b', value: 'x' }])
      await first.txn([], [{ type: 'delete', key: '/b' }])
      await first.txn([], [{ type: 'put', key: '/c', value: 'c' }])
      await first.txn([], [{ type: 'put', key: '/c', value: 'now leased', lease: lease.id }])
      await first.txn([], [{ type: 'put', key: '/s', value: 'session', lease: lease.id }])
      const before = await first.range('')
      await first.close()

      const second = await EmbeddedStore.open({ clock: systemClock, persistPath, fs: nodeFileSystem })
      const after = await second.range('')
      assert.deepEqual(
        after.kvs,
        before.kvs.filter((kv) => kv.lease === null),
      )
      assert.deepEqual(
        after.kvs.map((kv) => [kv.key, kv.value, kv.version]),
        [['/a', '2', 2]],
      )
      assert.ok(after.revision >= before.revision)
      const next = await second.txn([{ key: '/a', version: 2 }], [{ type: 'put', key: '/a', value: '3' }])
      assert.deepEqual(next, { succeeded: true, revision: after.revision + 1 })
      await second.close()
    })
  })

  test('a second store on an open journal is refused, in this process too; once closed it opens', async () => {
    await withTempDir(async (dir) => {
      const persistPath = join(dir, 'meta', 'm.jsonl')
      const first = await EmbeddedStore.open({ clock: systemClock, persistPath, fs: nodeFileSystem })
      await first.txn([], [{ type: 'put', key: '/a', value: '1' }])
      await assert.rejects(
        EmbeddedStore.open({ clock: systemClock, persistPath, fs: nodeFileSystem }),
        (error: unknown) => {
          assert.ok(error instanceof DirectoryLockedError)
          assert.equal(error.dir, join(dir, 'meta'))
          assert.equal(error.lockFile, 'm.jsonl.lock')
          return true
        },
      )
      // The refused one wrote nothing: the first goes on appending to an intact journal.
      await first.txn([], [{ type: 'put', key: '/b', value: '2' }])
      await first.close()
      const second = await EmbeddedStore.open({ clock: systemClock, persistPath, fs: nodeFileSystem })
      assert.deepEqual(
        (await second.range('/')).kvs.map((kv) => kv.value),
        ['1', '2'],
      )
      await second.close()
    })
  })

  test('a torn last line is ignored and cut off; writes after it survive the next reopen', async () => {
    await withTempDir(async (dir) => {
      const persistPath = join(dir, 'metadata.jsonl')
      const first = await EmbeddedStore.open({ clock: systemClock, persistPath, fs: nodeFileSystem })
      await first.txn([], [{ type: 'put', key: '/a', value: '1' }])
      await first.txn([], [{ type: 'put', key: '/b', value: '2' }])
      await first.close()
      await appendFile(persistPath, '{"revision":99,"puts":[{"key":"/torn","val')

      const second = await EmbeddedStore.open({ clock: systemClock, persistPath, fs: nodeFileSystem })
      assert.equal(await second.get('/torn'), null)
      assert.equal((await second.get('/b'))?.value, '2')
      await second.txn([], [{ type: 'put', key: '/c', value: '3' }])
      await second.close()

      const third = await EmbeddedStore.open({ clock: systemClock, persistPath, fs: nodeFileSystem })
      assert.deepEqual(
        (await third.range('')).kvs.map((kv) => kv.key),
        ['/a', '/b', '/c'],
      )
      await third.close()
    })
  })

  test('a damaged line before the end fails the open instead of forgetting metadata', async () => {
    await withTempDir(async (dir) => {
      const persistPath = join(dir, 'metadata.jsonl')
      const store = await EmbeddedStore.open({ clock: systemClock, persistPath, fs: nodeFileSystem })
      await store.txn([], [{ type: 'put', key: '/a', value: '1' }])
      await store.txn([], [{ type: 'put', key: '/b', value: '2' }])
      await store.close()
      const lines = (await readFile(persistPath, 'utf8')).split('\n')
      lines[0] = 'garbage'
      await writeFile(persistPath, lines.join('\n'))
      await assert.rejects(
        EmbeddedStore.open({ clock: systemClock, persistPath, fs: nodeFileSystem }),
        isCode('METADATA_CORRUPT'),
      )
    })
  })

  test('the file is compacted into a snapshot as it grows and still reopens to the same state', async () => {
    await withTempDir(async (dir) => {
      const persistPath = join(dir, 'metadata.jsonl')
      const options = { clock: systemClock, persistPath, journalBytesMax: 2048, fs: nodeFileSystem }
      const first = await EmbeddedStore.open(options)
      for (let i = 0; i < 300; i++)
        await first.txn([], [{ type: 'put', key: `/k${i % 7}`, value: String(i) }])
      const before = await first.range('')
      const size = (await readFile(persistPath)).length
      assert.ok(size < 4096, `file not compacted: ${size} bytes`)
      await first.close()

      const second = await EmbeddedStore.open(options)
      assert.deepEqual((await second.range('')).kvs, before.kvs)
      await second.close()
    })
  })

  test('a failed fsync fails the txn and stops the store, since memory and disk may disagree', async () => {
    await withTempDir(async (dir) => {
      let failSync = false
      const fs: FileSystem = {
        ...bind(nodeFileSystem),
        open: async (path, flags) => {
          const handle = await nodeFileSystem.open(path, flags)
          return {
            ...bind(handle),
            sync: () =>
              failSync ? Promise.reject(Object.assign(new Error('EIO'), { code: 'EIO' })) : handle.sync(),
          }
        },
      }
      const store = await EmbeddedStore.open({ clock: systemClock, persistPath: join(dir, 'm.jsonl'), fs })
      await store.txn([], [{ type: 'put', key: '/a', value: '1' }])
      failSync = true
      await assert.rejects(
        store.txn([], [{ type: 'put', key: '/b', value: '2' }]),
        isCode('STORE_UNAVAILABLE'),
      )
      await assert.rejects(store.get('/a'), isCode('STORE_UNAVAILABLE'))
      await store.close()
    })
  })
})

describe('embedded store: watches and leases', () => {
  test('watch callbacks run after the writing call returns, never inside it', async () => {
    const store = await EmbeddedStore.open({ clock: systemClock })
    let calls = 0
    store.watch('', 1, () => {
      calls += 1
    })
    const pending = store.txn([], [{ type: 'put', key: '/a', value: '1' }])
    assert.equal(calls, 0)
    await pending
    await waitFor(() => calls === 1)
    await store.close()
  })

  test('a watch from a compacted revision throws REVISION_COMPACTED; a recent one still replays', async () => {
    const store = await EmbeddedStore.open({ clock: systemClock, historyRevisionsMax: 5 })
    for (let i = 0; i < 10; i++) await store.txn([], [{ type: 'put', key: '/a', value: String(i) }])
    const { revision } = await store.range('')
    assert.throws(() => store.watch('', revision - 5, () => {}), isCode('REVISION_COMPACTED'))
    const seen: number[] = []
    const watch = store.watch('', revision - 4, (_, rev) => seen.push(rev))
    await waitFor(() => seen.length === 5)
    assert.deepEqual(seen, [revision - 4, revision - 3, revision - 2, revision - 1, revision])
    watch.cancel()
    await store.close()
  })

  test('a suspended lease expires exactly at its TTL on the injected clock', async () => {
    const clock = new ManualClock()
    const store = await EmbeddedStore.open({ clock })
    const lease = await store.grantLease(3000)
    await store.txn([], [{ type: 'put', key: '/s', value: 'x', lease: lease.id }])
    let lost = false
    void lease.lost.then(() => {
      lost = true
    })
    clock.advance(60_000)
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(lost, false, 'a lease that is kept alive never expires')
    store.suspendKeepAlive(lease.id)
    clock.advance(2999)
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(lost, false)
    clock.advance(1)
    await lease.lost
    await waitFor(async () => (await store.get('/s')) === null)
    await store.close()
  })

  test('a suspended lease expires on the system clock too', async () => {
    const store = await EmbeddedStore.open({ clock: realClock })
    const lease = await store.grantLease(1000)
    await store.txn([], [{ type: 'put', key: '/s', value: 'x', lease: lease.id }])
    store.suspendKeepAlive(lease.id)
    await lease.lost
    await waitFor(async () => (await store.get('/s')) === null)
    assert.throws(() => store.suspendKeepAlive(lease.id), isCode('LEASE_NOT_FOUND'))
    await store.close()
  })

  test('closing ends watches with STORE_CLOSED through onError', async () => {
    const store = await EmbeddedStore.open({ clock: systemClock })
    const errors: unknown[] = []
    store.watch(
      '',
      1,
      () => {},
      (err) => errors.push(err),
    )
    await store.close()
    await waitFor(() => errors.length === 1)
    assert.ok(errors[0] instanceof MetadataStoreError && errors[0].code === 'STORE_CLOSED')
  })
})

/** An object's methods bound to it, so a test can override one and keep the rest. */
function bind<T extends object>(target: T): T {
  const out: Record<string, unknown> = {}
  let proto: object | null = target
  while (proto !== null && proto !== Object.prototype) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      const value = (target as Record<string, unknown>)[name]
      if (name !== 'constructor' && typeof value === 'function' && !(name in out))
        out[name] = value.bind(target)
    }
    proto = Object.getPrototypeOf(proto)
  }
  return out as T
}
