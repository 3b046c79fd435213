/**
 * The AlterPartitionManager batches ISR changes (issue 19's scale target): proposals made
 * while a write is in flight, or in the same pass, go in one metadata write and one image,
 * each still decided on its own; and the image keeps the objects of partitions it did not
 * change, which the brokers rely on to apply only what changed.
 */

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import { systemRandom } from '../../src/common/random.js'
import { type BrokerId, toPartitionEpoch } from '../../src/common/types.js'
import type { ClusterImage, PartitionState } from '../../src/metadata/cluster-image.js'
import { ClusterMetadata, initialState } from '../../src/metadata/cluster-metadata.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import { AlterPartitionManager } from '../../src/replication/alter-partition-manager.js'
import type { IsrProposal } from '../../src/replication/partition.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock } from '../storage/helpers.js'

const PARTITIONS = 50

async function cluster(): Promise<{ store: EmbeddedStore; metadata: ClusterMetadata }> {
  const store = await EmbeddedStore.open({ clock: new ManualClock() })
  const metadata = await ClusterMetadata.open(store, {
    clusterId: null,
    random: systemRandom,
    logger: silentLogger,
  })
  for (const nodeId of ids(0, 1, 2)) {
    const lease = await store.grantLease(600_000)
    await metadata.register(
      { nodeId, host: 'localhost', port: 9092 + nodeId, rack: null, incarnationId: `i-${nodeId}` },
      lease,
    )
  }
  // Led by 0, followers 1 and 2 out of the ISR (as after a shrink).
  await metadata.update((image) => {
    const partitions = Array.from({ length: PARTITIONS }, (_, i) => ({
      ...initialState(i, ids(0, 1, 2)),
      isr: ids(0),
    }))
    const topic = { name: 't', topicId: 'AAAAAAAAAAAAAAAAAAAAAg', partitions, configs: {} }
    return { ...image, topics: new Map([['t', topic]]) }
  })
  return { store, metadata }
}

function state(image: ClusterImage, index: number): PartitionState {
  return image.topics.get('t')!.partitions[index]
}

function expand(image: ClusterImage, index: number, isr: BrokerId[]): IsrProposal {
  const s = state(image, index)
  return {
    topic: 't',
    topicId: image.topics.get('t')!.topicId,
    partition: index,
    leaderEpoch: s.leaderEpoch,
    partitionEpoch: s.partitionEpoch,
    isr,
    brokerEpoch: image.brokers.get(toBrokerId(0))!.brokerEpoch!,
    addedMembers: isr.filter((id) => id !== 0).map((brokerId) => ({ brokerId, brokerEpoch: -1 })),
  }
}

interface Fixture {
  metadata: ClusterMetadata
  manager: AlterPartitionManager
  /** Metadata writes the manager has made so far. */
  writes(): number
}

/** Runs `body` against a fresh cluster and manager, and closes both whatever happens. */
async function withManager(body: (fixture: Fixture) => Promise<void>): Promise<void> {
  const { store, metadata } = await cluster()
  let writes = 0
  const manager = new AlterPartitionManager({
    nodeId: toBrokerId(0),
    updateMetadata: (change, guard) => {
      writes++
      return metadata.update(change, guard)
    },
    logger: silentLogger,
  })
  try {
    await body({ metadata, manager, writes: () => writes })
  } finally {
    metadata.close()
    await store.close()
  }
}

test('proposals made together commit in one metadata write and one image', () =>
  withManager(async ({ metadata, manager, writes }) => {
    let images = 0
    metadata.onChange(() => images++)
    const before = metadata.image()
    const results = await Promise.all(
      Array.from({ length: PARTITIONS }, (_, i) => manager.submit(expand(before, i, ids(0, 1, 2)))),
    )
    assert.deepEqual(results, Array(PARTITIONS).fill(true))
    assert.equal(writes(), 1, 'one compare-and-set for the whole batch')
    assert.equal(images, 1, 'one image for the whole batch')
    assert.equal(manager.stats.expands, PARTITIONS)
    for (let i = 0; i < PARTITIONS; i++) {
      assert.deepEqual(state(metadata.image(), i).isr, [0, 1, 2])
      assert.equal(state(metadata.image(), i).partitionEpoch, state(before, i).partitionEpoch + 1)
    }
  }))

test('a refused proposal does not hold back the others of its batch, and a stale one is refused', () =>
  withManager(async ({ metadata, manager }) => {
    const before = metadata.image()
    const stale = {
      ...expand(before, 1, ids(0, 1)),
      partitionEpoch: toPartitionEpoch(state(before, 1).partitionEpoch - 1),
    }
    const fenced = {
      ...expand(before, 2, ids(0, 2)),
      brokerEpoch: before.brokers.get(toBrokerId(0))!.brokerEpoch! - 1,
    }
    const results = await Promise.all([
      manager.submit(expand(before, 0, ids(0, 1))),
      manager.submit(stale),
      manager.submit(fenced),
      manager.submit(expand(before, 3, ids(0, 2))),
    ])
    assert.deepEqual(results, [true, false, false, true])
    assert.deepEqual(state(metadata.image(), 0).isr, [0, 1])
    assert.deepEqual(state(metadata.image(), 1).isr, [0], 'stale partition epoch: unchanged')
    assert.deepEqual(state(metadata.image(), 2).isr, [0], 'older broker epoch of the leader: unchanged')
    assert.deepEqual(state(metadata.image(), 3).isr, [0, 2])
    // Made from the state the first write replaced: the epoch moved on.
    assert.equal(await manager.submit(expand(before, 0, ids(0, 1, 2))), false)
  }))

test('a proposal from a replica of a deleted topic does not change the new topic of the same name', () =>
  withManager(async ({ metadata, manager }) => {
    const before = metadata.image()
    // Same name, same partition and leader epochs (both new), another topic id: a replica of
    // the deleted topic not retired yet proposes from its state.
    const oldTopic = { ...expand(before, 0, ids(0, 1, 2)), topicId: 'AAAAAAAAAAAAAAAAAAAAAw' }
    assert.equal(await manager.submit(oldTopic), false)
    assert.deepEqual(state(metadata.image(), 0).isr, [0], 'unchanged')
    assert.equal(await manager.submit(expand(before, 0, ids(0, 1, 2))), true)
  }))

test('two proposals for one partition go in separate writes: the second sees the first committed', () =>
  withManager(async ({ metadata, manager, writes }) => {
    const before = metadata.image()
    const results = await Promise.all([
      manager.submit(expand(before, 5, ids(0, 1))),
      manager.submit(expand(before, 5, ids(0, 2))),
    ])
    // Both made from the same state: only the first can commit, and the second must not count.
    assert.deepEqual(results, [true, false])
    assert.equal(writes(), 2)
    assert.deepEqual(state(metadata.image(), 5).isr, [0, 1])
  }))

test('the image keeps the objects of partitions and topics a write did not change', () =>
  withManager(async ({ metadata, manager }) => {
    await metadata.update((image) => {
      const other = {
        name: 'u',
        topicId: 'AAAAAAAAAAAAAAAAAAAAAw',
        partitions: [initialState(0, ids(1, 2, 0))],
        configs: {},
      }
      return { ...image, topics: new Map(image.topics).set('u', other) }
    })
    const before = metadata.image()
    assert.equal(await manager.submit(expand(before, 7, ids(0, 1))), true)
    const after = metadata.image()
    assert.notEqual(after, before)
    assert.equal(after.topics.get('u'), before.topics.get('u'), 'untouched topic: same object')
    assert.notEqual(state(after, 7), state(before, 7))
    for (let i = 0; i < PARTITIONS; i++)
      if (i !== 7) assert.equal(state(after, i), state(before, i), `partition ${i}: same object`)
  }))
