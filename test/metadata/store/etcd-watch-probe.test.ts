/**
 * Issue 38: a watch etcd stops feeding (etcd 3.4 before 3.4.31 can leave a watcher unsynced
 * for good, docs/notes/scale.md) is found by the etcd store's probe whatever its owner
 * writes, on a real etcd. The stall is made here by swallowing what etcd sends to the watch
 * (its listener taken off etcd3's watcher): etcd itself does not stall on demand.
 */
import assert from 'node:assert/strict'
import type { EventEmitter } from 'node:events'
import { after, before, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { systemClock } from '../../../src/common/clock.js'
import { silentLogger } from '../../../src/common/logger.js'
import { systemRandom } from '../../../src/common/random.js'
import { ClusterMetadata } from '../../../src/metadata/cluster-metadata.js'
import { EtcdStore } from '../../../src/metadata/store/etcd-store.js'
import { MetadataStoreError, type Watch } from '../../../src/metadata/store/metadata-store.js'
import { toBrokerId } from '../../helpers/broker-ids.js'
import { type EtcdProcess, startEtcd } from '../../helpers/etcd.js'

const PROBE_INTERVAL_MS = 200
/** A stall is found within about three intervals; this leaves room for a loaded machine. */
const FOUND_WITHIN_MS = 8000

let etcd: EtcdProcess
let nextPrefix = 0
const uniquePrefix = () => `/tidelog-probe-${process.pid}-${nextPrefix++}`

before(async () => {
  etcd = await startEtcd()
})

after(async () => {
  await etcd.stop()
})

const connect = (prefix: string, watchProbeIntervalMs: number | null = PROBE_INTERVAL_MS) =>
  EtcdStore.connect({ endpoints: [etcd.endpoint], prefix, watchProbeIntervalMs })

/** etcd goes on sending; the watch no longer hears it, as when etcd leaves it unsynced. */
function swallowEventsOf(watch: Watch): void {
  const watcher = (watch as unknown as { watcher: EventEmitter }).watcher
  const ours = watcher.listeners('data').at(-1)
  assert.ok(ours !== undefined, "the store's listener on the etcd3 watcher")
  watcher.off('data', ours as (...args: unknown[]) => void)
}

async function until(condition: () => boolean, withinMs: number): Promise<boolean> {
  const deadlineMs = systemClock.monotonicMs() + withinMs
  while (!condition() && systemClock.monotonicMs() < deadlineMs) await sleep(20)
  return condition()
}

test('a watch that stops hearing etcd ends with WATCH_STALLED though its owner writes nothing; a healthy silent one does not', {
  timeout: 30_000,
}, async () => {
  const prefix = uniquePrefix()
  const [watching, writer, elsewhere] = await Promise.all([
    connect(prefix),
    connect(prefix),
    connect(uniquePrefix()),
  ])
  try {
    const { revision } = await watching.range('')
    const errors: MetadataStoreError[] = []
    const healthyErrors: MetadataStoreError[] = []
    const delivered: number[] = []
    const stalled = watching.watch(
      '/a/',
      revision + 1,
      () => {},
      (error) => errors.push(error),
    )
    const healthy = watching.watch(
      '/b/',
      revision + 1,
      (_events, at) => delivered.push(at),
      (error) => healthyErrors.push(error),
    )
    swallowEventsOf(stalled)
    // Writes in another namespace move etcd's revision: the healthy watch must not be blamed.
    for (let i = 0; i < 5; i++) await elsewhere.txn([], [{ type: 'put', key: `/x${i}`, value: 'x' }])
    await sleep(PROBE_INTERVAL_MS * 4)
    assert.equal(errors.length, 0, 'nothing under /a/ yet: nothing missed')
    const written = await writer.txn([], [{ type: 'put', key: '/a/k', value: '1' }])
    assert.ok(await until(() => errors.length > 0, FOUND_WITHIN_MS), 'the stall is found')
    assert.equal(errors.length, 1)
    assert.ok(errors[0] instanceof MetadataStoreError)
    assert.equal(errors[0].code, 'WATCH_STALLED')
    assert.match(errors[0].message, new RegExp(`next ${revision + 1}, store ${written.revision}`))
    // The healthy watch, silent through all this, still delivers and was never ended.
    await writer.txn([], [{ type: 'put', key: '/b/k', value: '1' }])
    assert.ok(await until(() => delivered.length > 0, FOUND_WITHIN_MS))
    assert.deepEqual(healthyErrors, [])
    healthy.cancel()
  } finally {
    await Promise.all([watching.close(), writer.close(), elsewhere.close()])
  }
})

test('a view that never writes, whose watch stopped hearing etcd, restarts it from a fresh read and sees another broker register', {
  timeout: 30_000,
}, async () => {
  const prefix = uniquePrefix()
  const [readerStore, writerStore] = await Promise.all([connect(prefix), connect(prefix)])
  const open = (store: EtcdStore) =>
    ClusterMetadata.open(store, {
      clusterId: null,
      random: systemRandom,
      logger: silentLogger,
      clock: systemClock,
      watchStallMs: 3000,
    })
  const writer = await open(writerStore)
  const reader = await open(readerStore)
  try {
    const watches = (readerStore as unknown as { watches: Set<Watch> }).watches
    assert.equal(watches.size, 1, "the view's one watch")
    for (const watch of watches) swallowEventsOf(watch)
    const lease = await writerStore.grantLease(10_000)
    await writer.register(
      { nodeId: toBrokerId(2), host: 'localhost', port: 9094, rack: null, incarnationId: 'two' },
      lease,
    )
    const seen = await until(() => reader.image().brokers.has(toBrokerId(2)), FOUND_WITHIN_MS)
    assert.ok(seen, "the reader's image shows broker 2")
    assert.deepEqual(reader.watchCounters(), { restarts: 1, stalls: 0, probeStalls: 1 })
    // The new watch hears etcd: a later change arrives without another restart.
    await lease.revoke()
    assert.ok(await until(() => !reader.image().brokers.has(toBrokerId(2)), FOUND_WITHIN_MS))
    assert.deepEqual(reader.watchCounters(), { restarts: 1, stalls: 0, probeStalls: 1 })
  } finally {
    reader.close()
    writer.close()
    await Promise.all([readerStore.close(), writerStore.close()])
  }
})
