/**
 * Random transaction sequences against the embedded store and a model that is too simple to
 * be wrong: versions, createRevisions and revisions must match, and a watch from the start
 * must rebuild exactly the final keyspace. A failing seed becomes a named regression test.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { EmbeddedStore } from '../../../src/metadata/store/embedded-store.js'
import type { KeyValue, StoreOp, VersionCompare } from '../../../src/metadata/store/metadata-store.js'
import { ManualClock, waitFor } from '../../storage/helpers.js'

const KEYS = ['/a/1', '/a/2', '/a/3', '/b/1', '/b/2']
const PREFIXES = ['/a/', '/b/', '/']

interface Model {
  revision: number
  kvs: Map<string, KeyValue>
}

const opArb: fc.Arbitrary<StoreOp> = fc.oneof(
  fc.record({
    type: fc.constant('put' as const),
    key: fc.constantFrom(...KEYS),
    value: fc.string({ maxLength: 4 }),
  }),
  fc.record({ type: fc.constant('delete' as const), key: fc.constantFrom(...KEYS) }),
  fc.record({ type: fc.constant('deletePrefix' as const), prefix: fc.constantFrom(...PREFIXES) }),
)
const compareArb: fc.Arbitrary<VersionCompare> = fc.record({
  key: fc.constantFrom(...KEYS),
  version: fc.nat(3),
})
const txnArb = fc.record({
  compares: fc.array(compareArb, { maxLength: 2 }),
  ops: fc.array(opArb, { maxLength: 3 }).filter(isValidTxn),
})

/** The shapes etcd refuses (a key put twice, or put and deleted) are asserted elsewhere. */
function isValidTxn(ops: readonly StoreOp[]): boolean {
  const puts = ops.flatMap((op) => (op.type === 'put' ? [op.key] : []))
  if (new Set(puts).size !== puts.length) return false
  return ops.every(
    (op) =>
      op.type === 'put' ||
      (op.type === 'delete' ? !puts.includes(op.key) : !puts.some((key) => key.startsWith(op.prefix))),
  )
}

function applyToModel(model: Model, compares: readonly VersionCompare[], ops: readonly StoreOp[]): boolean {
  if (!compares.every((c) => (model.kvs.get(c.key)?.version ?? 0) === c.version)) return false
  const next = new Map(model.kvs)
  const revision = model.revision + 1
  let changed = false
  for (const op of ops) {
    if (op.type === 'put') {
      const previous = next.get(op.key)
      next.set(op.key, {
        key: op.key,
        value: op.value,
        version: (previous?.version ?? 0) + 1,
        createRevision: previous?.createRevision ?? revision,
        modRevision: revision,
        lease: null,
      })
      changed = true
    } else {
      for (const key of [...next.keys()]) {
        if (op.type === 'delete' ? key === op.key : key.startsWith(op.prefix))
          changed = next.delete(key) || changed
      }
    }
  }
  model.kvs = next
  if (changed) model.revision = revision
  return true
}

test('random transactions match the model, and a watch from the start rebuilds the keyspace', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(txnArb, { maxLength: 40 }), async (txns) => {
      const store = await EmbeddedStore.open({ clock: new ManualClock() })
      const model: Model = { revision: 1, kvs: new Map() }
      const rebuilt = new Map<string, KeyValue>()
      let watchedRevision = 0
      const watch = store.watch('', 1, (events, revision) => {
        assert.ok(revision > watchedRevision)
        watchedRevision = revision
        for (const event of events) {
          if (event.type === 'put') rebuilt.set(event.kv.key, event.kv)
          else rebuilt.delete(event.kv.key)
        }
      })
      for (const { compares, ops } of txns) {
        const expected = applyToModel(model, compares, ops)
        const result = await store.txn(compares, ops)
        assert.deepEqual(result, { succeeded: expected, revision: model.revision })
      }
      const { kvs, revision } = await store.range('')
      assert.equal(revision, model.revision)
      assert.deepEqual(
        kvs,
        [...model.kvs.values()].sort((a, b) => (a.key < b.key ? -1 : 1)),
      )
      await waitFor(() => watchedRevision === model.revision || model.revision === 1)
      assert.deepEqual(new Map([...rebuilt].sort()), new Map([...model.kvs].sort()))
      watch.cancel()
      await store.close()
    }),
    { numRuns: 200 },
  )
})
