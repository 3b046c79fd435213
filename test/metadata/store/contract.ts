/**
 * The metadata store contract: one suite, run against the embedded store and against etcd,
 * so code written against either behaves the same on the other. Each test gets a fresh,
 * empty store from the factory.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import {
  type KeyValue,
  type Leadership,
  type Lease,
  type MetadataStore,
  MetadataStoreError,
  type Watch,
  type WatchEvent,
} from '../../../src/metadata/store/metadata-store.js'
import { waitFor } from '../../storage/helpers.js'

export interface StoreHarness {
  readonly store: MetadataStore
  /** The lease's holder stops keeping it alive without revoking it: it expires after its TTL. */
  suspendKeepAlive(lease: Lease): void
  /** Lets `ms` of store time pass: a manual clock advances, a real one is slept on. */
  elapse(ms: number): Promise<void>
  close(): Promise<void>
}

export interface ContractOptions {
  /** How long a real-time wait for an asynchronous outcome may take. */
  readonly waitMs: number
}

const TTL_MS = 1000

export function metadataStoreContract(
  name: string,
  createHarness: () => Promise<StoreHarness>,
  options: ContractOptions,
): void {
  const it = (title: string, fn: (h: StoreHarness) => Promise<void>) =>
    test(title, async () => {
      const harness = await createHarness()
      try {
        await fn(harness)
      } finally {
        await harness.close()
      }
    })
  const until = (condition: () => boolean | Promise<boolean>) => waitFor(condition, options.waitMs)

  describe(`${name}: keys, versions and revisions`, () => {
    it('get of an absent key is null; a put creates version 1 at the txn revision', async ({ store }) => {
      assert.equal(await store.get('/a'), null)
      const result = await put(store, '/a', 'one')
      assert.equal(result.succeeded, true)
      assert.deepEqual(await store.get('/a'), kv('/a', 'one', 1, result.revision, result.revision))
    })

    it('each put bumps the version and modRevision; createRevision stays', async ({ store }) => {
      const first = await put(store, '/a', 'one')
      const second = await put(store, '/a', 'two')
      assert.equal(second.revision, first.revision + 1)
      assert.deepEqual(await store.get('/a'), kv('/a', 'two', 2, first.revision, second.revision))
    })

    it('a deleted and re-created key starts again at version 1 with a new createRevision', async ({
      store,
    }) => {
      await put(store, '/a', 'one')
      await put(store, '/a', 'two')
      await store.txn([], [{ type: 'delete', key: '/a' }])
      assert.equal(await store.get('/a'), null)
      const again = await put(store, '/a', 'three')
      assert.deepEqual(await store.get('/a'), kv('/a', 'three', 1, again.revision, again.revision))
    })

    it('range returns the keys under a prefix sorted by key, with the revision of the read', async ({
      store,
    }) => {
      for (const key of ['/t/c', '/t/a', '/u/x', '/t/b', '/t']) await put(store, key, key)
      const last = await put(store, '/t/d', 'd')
      const { kvs, revision } = await store.range('/t/')
      assert.deepEqual(
        kvs.map((k) => k.key),
        ['/t/a', '/t/b', '/t/c', '/t/d'],
      )
      assert.equal(revision, last.revision)
      assert.equal((await store.range('/nothing/')).kvs.length, 0)
    })

    it('the revision grows by one per changing txn; failed, empty and no-op txns keep it', async ({
      store,
    }) => {
      const start = (await store.range('/')).revision
      const one = await put(store, '/a', '1')
      assert.equal(one.revision, start + 1)
      assert.deepEqual(
        await store.txn([{ key: '/a', version: 7 }], [{ type: 'put', key: '/a', value: 'x' }]),
        {
          succeeded: false,
          revision: start + 1,
        },
      )
      assert.deepEqual(await store.txn([], []), { succeeded: true, revision: start + 1 })
      // etcd does not count a transaction that changed nothing as a revision.
      assert.deepEqual(await store.txn([], [{ type: 'delete', key: '/absent' }]), {
        succeeded: true,
        revision: start + 1,
      })
      assert.equal((await store.range('/')).revision, start + 1)
    })
  })

  describe(`${name}: transactions`, () => {
    it('all ops of a txn apply as one revision', async ({ store }) => {
      await put(store, '/old', 'x')
      const result = await store.txn(
        [],
        [
          { type: 'put', key: '/a', value: '1' },
          { type: 'put', key: '/b', value: '2' },
          { type: 'delete', key: '/old' },
        ],
      )
      const { kvs } = await store.range('/')
      assert.deepEqual(
        kvs.map((k) => [k.key, k.modRevision]),
        [
          ['/a', result.revision],
          ['/b', result.revision],
        ],
      )
    })

    it('a failed compare writes nothing; version 0 means absent', async ({ store }) => {
      await put(store, '/a', 'one')
      const failed = await store.txn(
        [
          { key: '/a', version: 1 },
          { key: '/b', version: 1 },
        ],
        [{ type: 'put', key: '/a', value: 'two' }],
      )
      assert.equal(failed.succeeded, false)
      assert.equal((await store.get('/a'))?.value, 'one')
      const created = await store.txn(
        [
          { key: '/a', version: 1 },
          { key: '/b', version: 0 },
        ],
        [
          { type: 'put', key: '/a', value: 'two' },
          { type: 'put', key: '/b', value: 'new' },
        ],
      )
      assert.equal(created.succeeded, true)
      assert.equal((await store.get('/a'))?.version, 2)
      assert.equal((await store.get('/b'))?.version, 1)
    })

    it('a modRevision compare tells a re-created key from the one it replaced', async ({ store }) => {
      const first = await put(store, '/r', 'one')
      await store.txn([], [{ type: 'delete', key: '/r' }])
      await put(store, '/r', 'two')
      const stale = await store.txn(
        [{ key: '/r', version: 1, modRevision: first.revision }],
        [{ type: 'put', key: '/r', value: 'stale' }],
      )
      assert.equal(stale.succeeded, false, 'same version 1, but not the same key any more')
      const current = await store.get('/r')
      assert.equal(current?.version, 1)
      const fresh = await store.txn(
        [{ key: '/r', version: 1, modRevision: current!.modRevision }],
        [{ type: 'put', key: '/r', value: 'three' }],
      )
      assert.equal(fresh.succeeded, true)
      const absent = await store.txn([{ key: '/none', version: 0, modRevision: 0 }], [])
      assert.equal(absent.succeeded, true, 'an absent key has modRevision 0')
    })

    it('of concurrent compare-and-sets on the same version exactly one wins', async ({ store }) => {
      await put(store, '/counter', '0')
      for (let round = 1; round <= 5; round++) {
        const results = await Promise.all(
          Array.from({ length: 6 }, (_, i) =>
            store.txn(
              [{ key: '/counter', version: round }],
              [{ type: 'put', key: '/counter', value: `${round}-${i}` }],
            ),
          ),
        )
        assert.equal(results.filter((r) => r.succeeded).length, 1, `round ${round}`)
        assert.equal((await store.get('/counter'))?.version, round + 1)
      }
    })

    it('deletePrefix deletes exactly the keys under the prefix, in one revision', async ({ store }) => {
      for (const key of ['/p/a', '/p/b/c', '/pq', '/q']) await put(store, key, 'x')
      const result = await store.txn([], [{ type: 'deletePrefix', prefix: '/p/' }])
      assert.deepEqual(
        (await store.range('/')).kvs.map((k) => k.key),
        ['/pq', '/q'],
      )
      assert.equal((await store.range('/')).revision, result.revision)
    })

    it('a put bound to an ended lease fails with LEASE_NOT_FOUND and writes nothing', async ({ store }) => {
      const lease = await store.grantLease(TTL_MS)
      await lease.revoke()
      await assert.rejects(
        store.txn([], [{ type: 'put', key: '/a', value: 'x', lease: lease.id }]),
        (err: unknown) => err instanceof MetadataStoreError && err.code === 'LEASE_NOT_FOUND',
      )
      assert.equal(await store.get('/a'), null)
    })
  })

  describe(`${name}: watches`, () => {
    it('a watch from a past revision replays every change in order, one call per revision', async ({
      store,
    }) => {
      const r1 = await put(store, '/w/a', '1')
      const r2 = await store.txn(
        [],
        [
          { type: 'put', key: '/w/b', value: '2' },
          { type: 'put', key: '/other', value: 'x' },
        ],
      )
      const r3 = await store.txn([], [{ type: 'delete', key: '/w/a' }])
      const seen = record(store, '/w/', r1.revision)
      await until(() => seen.batches.length === 3)
      assert.deepEqual(
        seen.batches.map((b) => b.revision),
        [r1.revision, r2.revision, r3.revision],
      )
      assert.deepEqual(seen.batches[1]?.events, [
        { type: 'put', kv: kv('/w/b', '2', 1, r2.revision, r2.revision) },
      ])
      assert.deepEqual(seen.batches[2]?.events, [
        {
          type: 'delete',
          kv: {
            key: '/w/a',
            value: '',
            version: 0,
            createRevision: 0,
            modRevision: r3.revision,
            lease: null,
          },
        },
      ])
      seen.watch.cancel()
    })

    it('a watch from now on gets only new changes, then live ones in order', async ({ store }) => {
      await put(store, '/w/old', 'x')
      const { revision } = await store.range('/w/')
      const seen = record(store, '/w/', revision + 1)
      const written: number[] = []
      for (let i = 0; i < 20; i++) written.push((await put(store, `/w/k${i % 3}`, String(i))).revision)
      await until(() => seen.batches.length === 20)
      assert.deepEqual(
        seen.batches.map((b) => b.revision),
        written,
      )
      assert.ok(seen.batches.every((b) => b.events.every((e) => e.kv.key !== '/w/old')))
      seen.watch.cancel()
    })

    it('one revision with several keys arrives as one call; deletePrefix too', async ({ store }) => {
      const { revision } = await store.range('/')
      const seen = record(store, '/g/', revision + 1)
      await store.txn(
        [],
        [
          { type: 'put', key: '/g/a', value: '1' },
          { type: 'put', key: '/g/b', value: '2' },
        ],
      )
      const deleted = await store.txn([], [{ type: 'deletePrefix', prefix: '/g/' }])
      await until(() => seen.batches.length === 2)
      assert.deepEqual(
        seen.batches[0]?.events.map((e) => [e.type, e.kv.key]),
        [
          ['put', '/g/a'],
          ['put', '/g/b'],
        ],
      )
      assert.deepEqual(
        seen.batches[1]?.events.map((e) => [e.type, e.kv.key, e.kv.modRevision]),
        [
          ['delete', '/g/a', deleted.revision],
          ['delete', '/g/b', deleted.revision],
        ],
      )
      seen.watch.cancel()
    })

    it('cancel stops delivery', async ({ store }) => {
      const { revision } = await store.range('/')
      const seen = record(store, '/c/', revision + 1)
      await put(store, '/c/a', '1')
      await until(() => seen.batches.length === 1)
      seen.watch.cancel()
      await put(store, '/c/a', '2')
      const probe = record(store, '/c/', revision + 1)
      await until(() => probe.batches.length === 2)
      probe.watch.cancel()
      assert.equal(seen.batches.length, 1)
    })
  })

  describe(`${name}: leases`, () => {
    it('keys carry their lease; revoking deletes them, the watch sees the deletes, lost resolves', async ({
      store,
    }) => {
      const lease = await store.grantLease(TTL_MS)
      assert.equal(lease.ttlMs >= TTL_MS, true)
      await store.txn(
        [],
        [
          { type: 'put', key: '/s/a', value: '1', lease: lease.id },
          { type: 'put', key: '/s/b', value: '2', lease: lease.id },
          { type: 'put', key: '/s/kept', value: '3' },
        ],
      )
      assert.equal((await store.get('/s/a'))?.lease, lease.id)
      assert.equal((await store.get('/s/kept'))?.lease, null)
      const { revision } = await store.range('/s/')
      const seen = record(store, '/s/', revision + 1)
      await lease.revoke()
      await lease.lost
      await until(() => seen.batches.length === 1)
      assert.deepEqual(
        seen.batches[0]?.events.map((e) => [e.type, e.kv.key]),
        [
          ['delete', '/s/a'],
          ['delete', '/s/b'],
        ],
      )
      assert.deepEqual(
        (await store.range('/s/')).kvs.map((k) => k.key),
        ['/s/kept'],
      )
      seen.watch.cancel()
    })

    it('a lease whose keep-alive stopped expires after its TTL and its keys go; a kept one stays', async (h) => {
      const { store } = h
      const kept = await store.grantLease(TTL_MS)
      const dying = await store.grantLease(TTL_MS)
      await store.txn(
        [],
        [
          { type: 'put', key: '/e/kept', value: '1', lease: kept.id },
          { type: 'put', key: '/e/dying', value: '2', lease: dying.id },
        ],
      )
      const { revision } = await store.range('/e/')
      const seen = record(store, '/e/', revision + 1)
      let dyingLost = false
      void dying.lost.then(() => {
        dyingLost = true
      })
      h.suspendKeepAlive(dying)
      await h.elapse(TTL_MS / 2)
      assert.equal(dyingLost, false, 'expired before its TTL')
      await h.elapse(dying.ttlMs * 2)
      await dying.lost
      await until(() => seen.batches.length === 1)
      assert.deepEqual(
        seen.batches[0]?.events.map((e) => [e.type, e.kv.key]),
        [['delete', '/e/dying']],
      )
      assert.equal((await store.get('/e/kept'))?.value, '1')
      seen.watch.cancel()
      await kept.revoke()
    })
  })

  describe(`${name}: elections`, () => {
    it('the first campaigner leads, the second waits; resign hands over', async ({ store }) => {
      const [l1, l2] = [await store.grantLease(TTL_MS), await store.grantLease(TTL_MS)]
      assert.equal(await store.leader('/el/c'), null)
      const first = await store.campaign('/el/c', 'broker-1', l1)
      assert.equal(await store.leader('/el/c'), 'broker-1')
      const second = track(store.campaign('/el/c', 'broker-2', l2))
      await settle(store)
      assert.equal(second.leadership, null, 'second leads while the first still does')
      await first.resign()
      await first.lost
      await until(() => second.leadership !== null)
      assert.equal(await store.leader('/el/c'), 'broker-2')
      await elected(second).resign()
      assert.equal(await store.leader('/el/c'), null)
      await Promise.all([l1.revoke(), l2.revoke()])
    })

    it('losing the lease ends leadership and the next candidate leads', async ({ store }) => {
      const [l1, l2] = [await store.grantLease(TTL_MS), await store.grantLease(TTL_MS)]
      const first = await store.campaign('/el/l', '1', l1)
      const second = track(store.campaign('/el/l', '2', l2))
      await l1.revoke()
      await first.lost
      await until(() => second.leadership !== null)
      assert.equal(await store.leader('/el/l'), '2')
      await l2.revoke()
      await elected(second).lost
      assert.equal(await store.leader('/el/l'), null)
    })

    it('an expired leader hands over after its TTL', async (h) => {
      const { store } = h
      const [l1, l2] = [await store.grantLease(TTL_MS), await store.grantLease(TTL_MS)]
      const first = await store.campaign('/el/x', '1', l1)
      const second = track(store.campaign('/el/x', '2', l2))
      h.suspendKeepAlive(l1)
      await h.elapse(l1.ttlMs * 2)
      await first.lost
      await until(() => second.leadership !== null)
      assert.equal(await store.leader('/el/x'), '2')
      await l2.revoke()
    })

    it('a waiting candidate whose lease ends is rejected and does not block the line', async ({ store }) => {
      const leases = [
        await store.grantLease(TTL_MS),
        await store.grantLease(TTL_MS),
        await store.grantLease(TTL_MS),
      ]
      const [l1, l2, l3] = leases as [Lease, Lease, Lease]
      const first = await store.campaign('/el/w', '1', l1)
      const second = track(store.campaign('/el/w', '2', l2))
      const third = track(store.campaign('/el/w', '3', l3))
      await settle(store)
      await l2.revoke()
      await until(() => second.error !== null)
      assert.ok(second.error instanceof MetadataStoreError && second.error.code === 'LEASE_NOT_FOUND')
      await first.resign()
      await until(() => third.leadership !== null)
      assert.equal(await store.leader('/el/w'), '3')
      await Promise.all(leases.map((l) => l.revoke()))
    })

    it('at most one candidate leads at any time while leaders resign and lose leases', async ({ store }) => {
      const election = '/el/one'
      let leading = 0
      let maxLeading = 0
      let terms = 0
      const candidates = await Promise.all(
        [1, 2, 3, 4].map(async (n) => ({ n, lease: await store.grantLease(TTL_MS) })),
      )
      const runs = candidates.map(async ({ n, lease }) => {
        const leadership = await store.campaign(election, String(n), lease)
        leading += 1
        terms += 1
        maxLeading = Math.max(maxLeading, leading)
        assert.equal(await store.leader(election), String(n))
        void leadership.lost.then(() => {
          leading -= 1
        })
        // Odd candidates resign, even ones lose their lease.
        if (n % 2 === 1) await leadership.resign()
        else await lease.revoke()
        await leadership.lost
      })
      await Promise.all(runs)
      assert.equal(terms, 4)
      assert.equal(maxLeading, 1)
      await Promise.all(candidates.map(({ lease }) => lease.revoke()))
    })
  })

  describe(`${name}: closing`, () => {
    it('a closed store rejects calls with STORE_CLOSED and its leases are lost', async ({ store }) => {
      const lease = await store.grantLease(TTL_MS)
      await store.close()
      await lease.lost
      await assert.rejects(
        store.get('/a'),
        (err: unknown) => err instanceof MetadataStoreError && err.code === 'STORE_CLOSED',
      )
      await assert.rejects(put(store, '/a', 'x'), (err: unknown) => err instanceof MetadataStoreError)
    })
  })
}

function put(store: MetadataStore, key: string, value: string) {
  return store.txn([], [{ type: 'put', key, value }])
}

function kv(
  key: string,
  value: string,
  version: number,
  createRevision: number,
  modRevision: number,
): KeyValue {
  return { key, value, version, createRevision, modRevision, lease: null }
}

interface Recorded {
  readonly watch: Watch
  readonly batches: { revision: number; events: WatchEvent[] }[]
}

function record(store: MetadataStore, prefix: string, fromRevision: number): Recorded {
  const batches: Recorded['batches'] = []
  const watch = store.watch(prefix, fromRevision, (events, revision) => {
    batches.push({ revision, events: [...events] })
  })
  return { watch, batches }
}

interface Tracked {
  leadership: Leadership | null
  error: unknown
}

function track(campaign: Promise<Leadership>): Tracked {
  const tracked: Tracked = { leadership: null, error: null }
  void campaign.then(
    (leadership) => {
      tracked.leadership = leadership
    },
    (err: unknown) => {
      tracked.error = err
    },
  )
  return tracked
}

function elected(tracked: Tracked): Leadership {
  assert.ok(tracked.leadership !== null, 'not leading')
  return tracked.leadership
}

/** Gives queued work (watch deliveries, campaign steps) a chance to run: one store round trip and a pause. */
async function settle(store: MetadataStore): Promise<void> {
  await store.range('/')
  await new Promise((resolve) => setTimeout(resolve, 100))
}
