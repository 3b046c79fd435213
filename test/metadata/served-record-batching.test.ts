/**
 * Issue 38 item 2: the leaders' served records (metadata/leadership-record.ts) written once
 * per change, not once per image. An election over thousands of partitions is one change the
 * controller cuts into many store transactions (24 at 3,000 partitions), and every other
 * broker applies each as an image of its own; a broker rewriting its record after each wrote
 * 24 records of every leadership it holds. Counted on the store, with three brokers' views
 * wired as the broker wires them (an image queued, applied in turn, settled), the apply
 * taking a turn of the event loop as the real one takes file system calls. Planted away
 * (the record written after every settled image), both counting tests fail with 24 writes.
 *
 * TIDELOG_SERVED_BATCH_PARTITIONS sets the topic's size (default 3,000).
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
  servedKey,
} from '../../src/metadata/cluster-image.js'
import { ClusterMetadata, KEYS } from '../../src/metadata/cluster-metadata.js'
import { Controller } from '../../src/metadata/controller.js'
import { movedAwayFrom } from '../../src/metadata/elections.js'
import { LeadershipRecord, SERVED_DEFER_MAX_MS } from '../../src/metadata/leadership-record.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import type { Lease, StoreOp, VersionCompare } from '../../src/metadata/store/metadata-store.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'
import { waitUntil } from '../helpers/wait.js'
import { ManualClock } from '../storage/helpers.js'

const PARTITIONS = Number(process.env.TIDELOG_SERVED_BATCH_PARTITIONS ?? 3000)
const BROKERS = ids(0, 1, 2)
const TOPIC = 'big'

/** A broker as far as its served record goes: a view, an apply queue and the record. */
interface RecordingBroker {
  readonly nodeId: BrokerId
  readonly metadata: ClusterMetadata
  readonly record: LeadershipRecord
  close(): void
}

interface Fixture {
  store: EmbeddedStore
  /** The writer of the controlled shutdown's change (the controller's view). */
  metadata: ClusterMetadata
  leases: Lease[]
  brokers: RecordingBroker[]
  /** Served-record writes by broker id since the last reset. */
  servedWrites: Map<number, number>
  close(): Promise<void>
}

/**
 * A broker's image handling as Broker.startup wires it: each image queued on the record, then
 * applied in turn (one event loop turn each), then settled. What it serves is what the
 * applied image says it leads.
 */
async function recordingBroker(store: EmbeddedStore, nodeId: BrokerId): Promise<RecordingBroker> {
  const metadata = await openView(store)
  // A clock that never moves: the hold-back's deadline (the last test) does not fire, so on a
  // machine too loaded to apply 24 images within SERVED_DEFER_MAX_MS the count still holds.
  const record = new LeadershipRecord({ nodeId, metadata, clock: new ManualClock(), logger: silentLogger })
  let applied: ClusterImage = metadata.image()
  let applying = Promise.resolve()
  const served = () => {
    const epochs = new Map<string, number>()
    for (const topic of applied.topics.values())
      for (const state of topic.partitions)
        if (state.leader === nodeId) epochs.set(servedKey(topic.topicId, state.partition), state.leaderEpoch)
    return epochs
  }
  metadata.onChange((image) => {
    record.onImageQueued()
    applying = applying
      .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
      .then(() => {
        applied = image
        record.onImageSettled(served)
      })
  })
  return {
    nodeId,
    metadata,
    record,
    close: () => {
      record.close()
      metadata.close()
    },
  }
}

async function fixture(): Promise<Fixture> {
  const store = await EmbeddedStore.open({ clock: new ManualClock() })
  const servedWrites = new Map<number, number>()
  const txn = store.txn.bind(store)
  store.txn = async (compares: readonly VersionCompare[], ops: readonly StoreOp[]) => {
    const result = await txn(compares, ops)
    for (const op of ops)
      if (result.succeeded && op.type === 'put' && op.key.startsWith(KEYS.servedPrefix)) {
        const id = Number(op.key.slice(KEYS.servedPrefix.length))
        servedWrites.set(id, (servedWrites.get(id) ?? 0) + 1)
      }
    return result
  }
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
  const brokers = await Promise.all(BROKERS.map((id) => recordingBroker(store, id)))
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
    brokers,
    servedWrites,
    close: async () => {
      for (const broker of brokers) broker.close()
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

function partitionsOf(image: ClusterImage) {
  const topic = image.topics.get(TOPIC)
  assert.ok(topic)
  return topic.partitions
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
 * One change seen as many images: each surviving broker wrote its record once or twice (the
 * queue may drain once between the controller's rounds of transactions), not once per image
 * (24 at 3,000 partitions before the record waited for queued images).
 */
function assertCoalesced(f: Fixture, survivors: readonly BrokerId[], what: string): void {
  for (const id of survivors) {
    const writes = f.servedWrites.get(id) ?? 0
    assert.ok(writes >= 1, `${what}: broker ${id} recorded its new leaderships`)
    assert.ok(writes <= 2, `${what}: broker ${id} wrote its served record ${writes} times`)
  }
}

test(`after a failover of ${PARTITIONS} partitions each surviving leader writes its served record a few times, not once per image`, async () => {
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
    assert.ok(partitionsOf(view.image()).filter((p) => p.leader === 2).length > PARTITIONS / 4)
    f.brokers[2].close()
    f.servedWrites.clear()
    await f.leases[2].revoke()
    await waitAllServed(f.metadata, 'failover', toBrokerId(2))
    assertCoalesced(f, ids(0, 1), 'failover')
  } finally {
    await controller.stop()
    view.close()
    await f.close()
  }
})

test(`after a controlled shutdown moving about ${Math.round(PARTITIONS / 3)} leaderships each surviving leader writes its served record a few times, not once per image`, async () => {
  const f = await fixture()
  try {
    f.servedWrites.clear()
    await f.metadata.update((image) => movedAwayFrom(image, toBrokerId(2), () => 2))
    await waitAllServed(f.metadata, 'controlled shutdown', toBrokerId(2))
    assertCoalesced(f, ids(0, 1), 'controlled shutdown')
  } finally {
    await f.close()
  }
})

test('later images hold the served record back at most SERVED_DEFER_MAX_MS', async () => {
  const clock = new ManualClock()
  const written: number[] = []
  const record = new LeadershipRecord({
    nodeId: toBrokerId(1),
    metadata: {
      recordServed: async (_nodeId, leaderEpochs) => {
        written.push(leaderEpochs.get('t:0') ?? -1)
      },
    },
    clock,
    logger: silentLogger,
  })
  let epoch = 0
  const served = () => new Map([['t:0', epoch]])
  const flush = () => new Promise<void>((resolve) => setImmediate(resolve))
  record.onImageQueued()
  for (let image = 1; image <= 20; image++) {
    // The next image is queued before this one settles: the queue never drains. Image k is
    // applied from k * SERVED_DEFER_MAX_MS / 4 on.
    record.onImageQueued()
    epoch = image
    clock.advance(SERVED_DEFER_MAX_MS / 4)
    record.onImageSettled(served)
    await flush()
  }
  // Held back from image 1 (t = 1/4), due at t = 5/4 while image 5 applies, held back again
  // when image 5 settles, due while image 9 applies, and so on.
  assert.deepEqual(written, [5, 9, 13, 17])
  record.onImageSettled(served)
  await flush()
  assert.deepEqual(written, [5, 9, 13, 17, 20], 'the drained queue writes the latest state at once')
  clock.advance(SERVED_DEFER_MAX_MS * 2)
  await flush()
  assert.equal(written.length, 5, 'nothing held back any more')
  record.close()
})
