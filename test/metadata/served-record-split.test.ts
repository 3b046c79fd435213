/**
 * Issue 38 item 2: a leader's served record (metadata/leadership-record.ts) is split into
 * keys by topic and range of partitions, and after each applied image only the ranges that
 * changed are written. A failover over thousands of partitions is one change the controller
 * cuts into many store transactions, every other broker applies each as an image, and each
 * image made each survivor rewrite its whole record. Counted on the store (bytes and ops of
 * `served/` writes per broker), with three brokers' views wired as Broker.startup wires
 * them (apply one event loop turn per image, then onApplied: no deferral).
 *
 * TIDELOG_SERVED_SPLIT_PARTITIONS sets the topic's size (default 3,000);
 * TIDELOG_SERVED_SPLIT_PRINT=1 prints the counts.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { systemClock } from '../../src/common/clock.js'
import { silentLogger } from '../../src/common/logger.js'
import { systemRandom } from '../../src/common/random.js'
import {
  type BrokerId,
  type ClusterImage,
  leaderServes,
  type ServedRecord,
  servedRangeIndex,
  servedRecordFrom,
} from '../../src/metadata/cluster-image.js'
import { ClusterMetadata, KEYS } from '../../src/metadata/cluster-metadata.js'
import { Controller } from '../../src/metadata/controller.js'
import { movedAwayFrom } from '../../src/metadata/elections.js'
import { LeadershipRecord } from '../../src/metadata/leadership-record.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import { EtcdStore } from '../../src/metadata/store/etcd-store.js'
import type {
  Lease,
  MetadataStore,
  StoreLimits,
  StoreOp,
  VersionCompare,
} from '../../src/metadata/store/metadata-store.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'
import { startEtcd } from '../helpers/etcd.js'
import { waitUntil } from '../helpers/wait.js'
import { ManualClock } from '../storage/helpers.js'

const PARTITIONS = Number(process.env.TIDELOG_SERVED_SPLIT_PARTITIONS ?? 3000)
const PRINT = process.env.TIDELOG_SERVED_SPLIT_PRINT === '1'
const BROKERS = ids(0, 1, 2)
const TOPIC = 'big'

/** `served/` writes of one broker: ops, their bytes (key and value) and transactions. */
interface Written {
  ops: number
  bytes: number
  txns: number
}

interface Fixture {
  store: EmbeddedStore
  /** The writer of the controlled shutdown's change (the controller's view). */
  metadata: ClusterMetadata
  leases: Lease[]
  closeBroker(id: BrokerId): void
  written: Map<number, Written>
  close(): Promise<void>
}

/** Counts the committed `served/` ops of each transaction by the broker id in their keys. */
function countServedWrites(store: MetadataStore, written: Map<number, Written>): void {
  const txn = store.txn.bind(store)
  store.txn = async (compares: readonly VersionCompare[], ops: readonly StoreOp[]) => {
    const result = await txn(compares, ops)
    if (!result.succeeded) return result
    const brokers = new Set<number>()
    for (const op of ops) {
      if (op.type === 'deletePrefix' || !op.key.startsWith(KEYS.servedPrefix)) continue
      const id = Number(op.key.slice(KEYS.servedPrefix.length).split('/')[0])
      const counts = written.get(id) ?? { ops: 0, bytes: 0, txns: 0 }
      counts.ops++
      counts.bytes += op.key.length + (op.type === 'put' ? op.value.length : 0)
      if (!brokers.has(id)) counts.txns++
      brokers.add(id)
      written.set(id, counts)
    }
    return result
  }
}

/**
 * A broker's image handling as Broker.startup wires it: each image applied in turn (one
 * event loop turn each, as the real apply takes file system calls), then onApplied with what
 * the applied image says it leads.
 */
async function recordingBroker(store: EmbeddedStore, nodeId: BrokerId): Promise<() => void> {
  const metadata = await openView(store)
  const record = new LeadershipRecord({ nodeId, metadata, clock: new ManualClock(), logger: silentLogger })
  let applying = Promise.resolve()
  metadata.onChange((image) => {
    applying = applying
      .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
      .then(() => record.onApplied(ledBy(image, nodeId)))
  })
  return () => {
    record.close()
    metadata.close()
  }
}

function ledBy(image: ClusterImage, nodeId: BrokerId): ServedRecord {
  const led: [string, number, number][] = []
  for (const topic of image.topics.values())
    for (const state of topic.partitions)
      if (state.leader === nodeId) led.push([topic.topicId, state.partition, state.leaderEpoch])
  return servedRecordFrom(led)
}

async function fixture(): Promise<Fixture> {
  const store = await EmbeddedStore.open({ clock: new ManualClock() })
  const written = new Map<number, Written>()
  countServedWrites(store, written)
  const metadata = await openView(store)
  const leases: Lease[] = []
  for (const nodeId of BROKERS) {
    const lease = await store.grantLease(600_000)
    leases.push(lease)
    const registration = {
      nodeId,
      host: 'localhost',
      port: 9092 + nodeId,
      rack: null,
      incarnationId: `i${nodeId}`,
    }
    assert.ok(await metadata.register(registration, lease))
  }
  const closers = await Promise.all(BROKERS.map((id) => recordingBroker(store, id)))
  await metadata.update((image) => {
    const topic = metadata.createTopicImage({
      name: TOPIC,
      partitions: PARTITIONS,
      replicationFactor: 3,
      configs: {},
    })
    return { ...image, topics: new Map(image.topics).set(TOPIC, topic) }
  })
  await waitAllServed(metadata, 'the new topic')
  return {
    store,
    metadata,
    leases,
    written,
    closeBroker: (id) => closers[id](),
    close: async () => {
      for (const close of closers) close()
      metadata.close()
      await store.close()
    },
  }
}

function openView(store: EmbeddedStore): Promise<ClusterMetadata> {
  return ClusterMetadata.open(store, {
    clusterId: null,
    random: systemRandom,
    logger: silentLogger,
    clock: systemClock,
  })
}

/** Until every partition has a leader other than `gone` that recorded it served in its epoch. */
function waitAllServed(view: ClusterMetadata, what: string, gone?: BrokerId): Promise<void> {
  return waitUntil(`${what}: every partition served`, 60_000, () => {
    const image = view.image()
    const topic = image.topics.get(TOPIC)
    if (topic === undefined) return false
    return topic.partitions.every((state) => state.leader !== gone && leaderServes(image, topic, state))
  })
}

/**
 * Each survivor wrote, over the whole change, at most twice the bytes of its final record:
 * the ranges each image changed, not its whole record per image (at 3,000 partitions the
 * controller writes a failover in ~24 transactions, and the whole record per image came to
 * ~15 times the final record).
 */
function assertWrittenByChange(f: Fixture, survivors: readonly BrokerId[], what: string): void {
  const image = f.metadata.image()
  if (PRINT)
    console.log(
      `${what} at ${PARTITIONS} partitions, served writes by broker: ${JSON.stringify([...f.written])}`,
    )
  for (const id of survivors) {
    const counts = f.written.get(id) ?? { ops: 0, bytes: 0, txns: 0 }
    let recordBytes = 0
    for (const [topicId, ranges] of ledBy(image, id))
      for (const [rangeIndex, range] of ranges)
        recordBytes +=
          KEYS.servedRange(id, topicId, rangeIndex).length + JSON.stringify(Object.fromEntries(range)).length
    if (PRINT)
      console.log(
        `${what} at ${PARTITIONS} partitions: broker ${id} wrote ${JSON.stringify(counts)}; its record ${recordBytes} B`,
      )
    assert.ok(counts.ops >= 1, `${what}: broker ${id} recorded its new leaderships`)
    assert.ok(
      counts.bytes <= 2 * recordBytes,
      `${what}: broker ${id} wrote ${counts.bytes} B of served record (${counts.ops} ops) for a record of ${recordBytes} B`,
    )
  }
}

test(`after a failover of ${PARTITIONS} partitions each surviving leader writes the ranges that changed, not its record per image`, async () => {
  const f = await fixture()
  const view = await openView(f.store)
  const controller = new Controller({
    nodeId: toBrokerId(0),
    store: f.store,
    metadata: view,
    lease: f.leases[0],
    clock: systemClock,
    logger: silentLogger,
    uncleanLeaderElection: () => false,
  })
  try {
    controller.start()
    await waitUntil('the controller active', 5000, () => controller.isActive, 5)
    f.closeBroker(toBrokerId(2))
    f.written.clear()
    await f.leases[2].revoke()
    await waitAllServed(f.metadata, 'failover', toBrokerId(2))
    assertWrittenByChange(f, ids(0, 1), 'failover')
  } finally {
    await controller.stop()
    view.close()
    await f.close()
  }
})

test(`after a controlled shutdown moving about ${Math.round(PARTITIONS / 3)} leaderships each surviving leader writes the ranges that changed`, async () => {
  const f = await fixture()
  try {
    f.written.clear()
    await f.metadata.update((image) => movedAwayFrom(image, toBrokerId(2), () => 2))
    await waitAllServed(f.metadata, 'controlled shutdown', toBrokerId(2))
    assertWrittenByChange(f, ids(0, 1), 'controlled shutdown')
  } finally {
    await f.close()
  }
})

/**
 * A broker's record of `partitions` leaderships of one topic, at epochs of 10 digits, written
 * on `store` (the key of before the split there beside it), then one partition's epoch
 * changed: the first write takes several transactions within the store's limits (the store
 * refuses any over them, as etcd does) and deletes the old key, the second one range.
 */
async function assertLargeRecordWritten(store: MetadataStore, partitions: number): Promise<void> {
  const written = new Map<number, Written>()
  countServedWrites(store, written)
  const metadata = await ClusterMetadata.open(store, {
    clusterId: null,
    random: systemRandom,
    logger: silentLogger,
    clock: systemClock,
  })
  const nodeId = toBrokerId(1)
  await store.txn([], [{ type: 'put', key: KEYS.servedWhole(nodeId), value: '{"old:0":1}' }])
  const record = new LeadershipRecord({ nodeId, metadata, clock: new ManualClock(), logger: silentLogger })
  const topicId = 'AAAAAAAAAAAAAAAAAAAAAQ'
  const epoch = 2_000_000_000
  const entries = (bump: number): [string, number, number][] =>
    Array.from({ length: partitions }, (_, p): [string, number, number] => [
      topicId,
      p,
      epoch + (p === bump ? 1 : 0),
    ])
  const readBack = () => metadata.image().servedLeaderEpochs?.get(nodeId)?.get(topicId)
  try {
    record.onApplied(servedRecordFrom(entries(-1)))
    await waitUntil('the record written', 30_000, () => {
      let count = 0
      for (const range of readBack()?.values() ?? []) count += range.size
      return count === partitions
    })
    const first = written.get(nodeId)
    if (PRINT) console.log(`a record of ${partitions} leaderships: ${JSON.stringify(first)}`)
    assert.ok(first !== undefined && first.txns > 1, 'several transactions, each within the limits')
    assert.equal(await store.get(KEYS.servedWhole(nodeId)), null, 'the key of before the split deleted')
    written.clear()
    const changed = partitions - 7
    record.onApplied(servedRecordFrom(entries(changed)))
    await waitUntil(
      'the change written',
      30_000,
      () => readBack()?.get(servedRangeIndex(changed))?.get(changed) === epoch + 1,
    )
    assert.equal(written.get(nodeId)?.ops, 1, 'one range rewritten for one partition changed')
  } finally {
    record.close()
    metadata.close()
  }
}

test('a broker leading 60,000 partitions writes its record within the store limits, and later only what changed', async () => {
  // A request limit a third of etcd's: the record of 60,000 leaderships as one key (~1.1 MB
  // with epochs of 10 digits) is over it, as 48,000 were over etcd's in the old encoding.
  const limits: StoreLimits = { txnOpsMax: 128, requestBytesMax: 512 * 1024 }
  const store = await EmbeddedStore.open({ clock: new ManualClock(), limits })
  try {
    await assertLargeRecordWritten(store, 60_000)
  } finally {
    await store.close()
  }
})

test('on an etcd with its default limits a broker leading 100,000 partitions writes its record (~1.9 MB as one key)', async () => {
  const etcd = await startEtcd()
  try {
    const store = await EtcdStore.connect({ endpoints: [etcd.endpoint], prefix: '/served-split' })
    try {
      await assertLargeRecordWritten(store, 100_000)
    } finally {
      await store.close()
    }
  } finally {
    await etcd.stop()
  }
})
