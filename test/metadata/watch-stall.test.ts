/**
 * Issue 38: a metadata watch the store stopped feeding. etcd 3.4 (before 3.4.31) can leave
 * the watcher of a client that fell behind unsynced for good (docs/notes/scale.md): the
 * view's image stayed stale, and a registration after a lost session waited for ever for its
 * own write to come back through that watch. The view restarts a watch that delivered
 * nothing for `watchStallMs` while it waited for its own write. (The real fault, a paused
 * broker process on etcd, is test/cluster/session-stall.test.ts.)
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setImmediate as turn } from 'node:timers/promises'
import { silentLogger } from '../../src/common/logger.js'
import { systemRandom } from '../../src/common/random.js'
import { ClusterMetadata } from '../../src/metadata/cluster-metadata.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import type { MetadataStore, Watch } from '../../src/metadata/store/metadata-store.js'
import { toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock } from '../storage/helpers.js'

const WATCH_STALL_MS = 3000

/** The store, except that the first watch it opens goes silent once `silence()` is called. */
function withSilencedFirstWatch(store: EmbeddedStore): { store: MetadataStore; silence: () => void } {
  let silent = false
  let first = true
  const watch: MetadataStore['watch'] = (prefix, fromRevision, onEvents, onError) => {
    const isFirst = first
    first = false
    return store.watch(
      prefix,
      fromRevision,
      (events, revision) => {
        if (!(isFirst && silent)) onEvents(events, revision)
      },
      onError,
    ) as Watch
  }
  const proxy = new Proxy(store, {
    get(target, property) {
      if (property === 'watch') return watch
      const value = Reflect.get(target, property, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  return { store: proxy, silence: () => (silent = true) }
}

test('a registration whose own write never comes back through a silent watch restarts the watch from a fresh read and completes', {
  timeout: 10_000,
}, async () => {
  const clock = new ManualClock()
  const embedded = await EmbeddedStore.open({ clock })
  const { store, silence } = withSilencedFirstWatch(embedded)
  const metadata = await ClusterMetadata.open(store, {
    clusterId: null,
    random: systemRandom,
    logger: silentLogger,
    clock,
    watchStallMs: WATCH_STALL_MS,
  })
  try {
    silence()
    const lease = await embedded.grantLease(600_000)
    let brokerEpoch: number | null | undefined
    const registering = metadata
      .register(
        { nodeId: toBrokerId(1), host: 'localhost', port: 9093, rack: null, incarnationId: 'one' },
        lease,
      )
      .then((epoch) => {
        brokerEpoch = epoch
      })
    for (let i = 0; i < 20; i++) await turn()
    assert.equal(brokerEpoch, undefined, 'the write is not seen through the silent watch')
    assert.equal(metadata.image().brokers.has(toBrokerId(1)), false)
    clock.advance(WATCH_STALL_MS - 1)
    for (let i = 0; i < 20; i++) await turn()
    assert.equal(brokerEpoch, undefined, 'no restart before watchStallMs')
    clock.advance(1)
    for (let i = 0; i < 20 && brokerEpoch === undefined; i++) await turn()
    assert.notEqual(brokerEpoch, undefined, 'registered once the watch restarted')
    await registering
    assert.ok(typeof brokerEpoch === 'number' && brokerEpoch > 0, `broker epoch ${brokerEpoch}`)
    assert.equal(metadata.image().brokers.has(toBrokerId(1)), true)
    assert.deepEqual(metadata.watchCounters(), { restarts: 1, stalls: 1, probeStalls: 0 })
    // The new watch delivers: a later write comes back through it, with no timer needed.
    await metadata.register(
      { nodeId: toBrokerId(2), host: 'localhost', port: 9094, rack: null, incarnationId: 'two' },
      lease,
    )
    assert.equal(metadata.image().brokers.has(toBrokerId(2)), true)
    assert.deepEqual(metadata.watchCounters(), { restarts: 1, stalls: 1, probeStalls: 0 })
  } finally {
    metadata.close()
    await embedded.close()
  }
})

test('a check that runs late (this process was held up) looks once more before restarting the watch', {
  timeout: 10_000,
}, async () => {
  const clock = new ManualClock()
  const embedded = await EmbeddedStore.open({ clock })
  const { store, silence } = withSilencedFirstWatch(embedded)
  const metadata = await ClusterMetadata.open(store, {
    clusterId: null,
    random: systemRandom,
    logger: silentLogger,
    clock,
    watchStallMs: WATCH_STALL_MS,
  })
  try {
    silence()
    const lease = await embedded.grantLease(600_000)
    let registered = false
    const registering = metadata
      .register(
        { nodeId: toBrokerId(1), host: 'localhost', port: 9093, rack: null, incarnationId: 'one' },
        lease,
      )
      .then(() => {
        registered = true
      })
    for (let i = 0; i < 20; i++) await turn()
    // The check falls due while the process is held up for 10 s: it fires 7 s late.
    clock.advance(10_000)
    for (let i = 0; i < 20; i++) await turn()
    assert.equal(registered, false)
    assert.deepEqual(
      metadata.watchCounters(),
      { restarts: 0, stalls: 0, probeStalls: 0 },
      'no restart on a late check',
    )
    clock.advance(WATCH_STALL_MS / 10)
    for (let i = 0; i < 20 && !registered; i++) await turn()
    assert.equal(registered, true, 'the second look, on time, restarted the watch')
    await registering
    assert.deepEqual(metadata.watchCounters(), { restarts: 1, stalls: 1, probeStalls: 0 })
  } finally {
    metadata.close()
    await embedded.close()
  }
})
