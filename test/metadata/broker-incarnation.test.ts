/**
 * Broker incarnations (issue 20): a restarted broker registers at once over its previous
 * process's live registration, with a new incarnation id and a higher broker epoch, and
 * that epoch fences the previous process: its ISR changes and ISR members fetched by it
 * are refused, and where it stays leader it leads in a new leader epoch.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import { systemRandom } from '../../src/common/random.js'
import { brokerEpochOf, type ClusterImage, type PartitionState } from '../../src/metadata/cluster-image.js'
import { ClusterMetadata, initialState } from '../../src/metadata/cluster-metadata.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import { AlterPartitionManager } from '../../src/replication/alter-partition-manager.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock } from '../storage/helpers.js'

const LEASE_MS = 600_000

async function view(store: EmbeddedStore): Promise<ClusterMetadata> {
  return ClusterMetadata.open(store, { clusterId: null, random: systemRandom, logger: silentLogger })
}

async function register(
  metadata: ClusterMetadata,
  store: EmbeddedStore,
  nodeId: number,
  incarnationId: string,
) {
  const lease = await store.grantLease(LEASE_MS)
  const epoch = await metadata.register(
    { nodeId: toBrokerId(nodeId), host: 'localhost', port: 9092 + nodeId, rack: null, incarnationId },
    lease,
  )
  assert.ok(epoch !== null && epoch > 0)
  return epoch
}

function withPartitions(image: ClusterImage, partitions: PartitionState[]): ClusterImage {
  const topic = { name: 't', topicId: 'AAAAAAAAAAAAAAAAAAAAAg', partitions, configs: {} }
  return { ...image, topics: new Map([['t', topic]]) }
}

function partition(metadata: ClusterMetadata, index: number): PartitionState {
  return metadata.image().topics.get('t')!.partitions[index]
}

test('a new incarnation replaces a live registration at once and fences the previous one', async () => {
  const store = await EmbeddedStore.open({ clock: new ManualClock() })
  const old = await view(store)
  const fresh = await view(store)
  try {
    for (const id of [0, 2]) await register(old, store, id, `first-${id}`)
    const oldEpoch = await register(old, store, 1, 'first-1')
    await old.update((image) =>
      withPartitions(image, [
        initialState(0, ids(1, 0, 2)), // led by 1, which has another live ISR member
        { ...initialState(1, ids(1, 2)), isr: ids(1) }, // led by 1 alone
        { ...initialState(2, ids(0, 1)), isr: ids(0) }, // led by 0, 1 outside the ISR
      ]),
    )
    const before = partition(old, 1)

    const newEpoch = await register(fresh, store, 1, 'second-1')
    assert.ok(newEpoch > oldEpoch, `broker epoch ${newEpoch} > ${oldEpoch}`)
    const registration = fresh.image().brokers.get(toBrokerId(1))!
    assert.equal(registration.incarnationId, 'second-1')
    assert.equal(brokerEpochOf(fresh.image(), toBrokerId(1)), newEpoch)
    assert.equal(partition(fresh, 0).leader, 0, 'leadership moved to a live ISR member')
    assert.deepEqual(partition(fresh, 0).isr, [0, 2], 'the new incarnation rejoins once caught up')
    assert.equal(partition(fresh, 1).leader, 1, 'the last ISR member keeps leading...')
    assert.equal(partition(fresh, 1).leaderEpoch, before.leaderEpoch + 1, '...in a new leader epoch')

    // The previous process, still running, proposes from the state it sees (now current).
    const oldManager = new AlterPartitionManager({
      nodeId: toBrokerId(1),
      updateMetadata: (c, g) => old.update(c, g),
      logger: silentLogger,
    })
    const led = partition(old, 1)
    const proposal = {
      topic: 't',
      topicId: fresh.image().topics.get('t')!.topicId,
      partition: 1,
      leaderEpoch: led.leaderEpoch,
      partitionEpoch: led.partitionEpoch,
      isr: ids(1, 2),
    }
    assert.equal(
      await oldManager.submit({
        ...proposal,
        brokerEpoch: oldEpoch,
        addedMembers: [{ brokerId: toBrokerId(2), brokerEpoch: -1 }],
      }),
      false,
    )
    assert.deepEqual(partition(fresh, 1).isr, [1], 'STALE_BROKER_EPOCH: the old incarnation changes nothing')

    // Leader 0 must not add broker 1 on the strength of the old incarnation's fetches.
    const leader0 = new AlterPartitionManager({
      nodeId: toBrokerId(0),
      updateMetadata: (c, g) => fresh.update(c, g),
      logger: silentLogger,
    })
    const s2 = partition(fresh, 2)
    const add1 = {
      topic: 't',
      topicId: fresh.image().topics.get('t')!.topicId,
      partition: 2,
      leaderEpoch: s2.leaderEpoch,
      partitionEpoch: s2.partitionEpoch,
      isr: ids(0, 1),
    }
    const epoch0 = brokerEpochOf(fresh.image(), toBrokerId(0))!
    assert.equal(
      await leader0.submit({
        ...add1,
        brokerEpoch: epoch0,
        addedMembers: [{ brokerId: toBrokerId(1), brokerEpoch: oldEpoch }],
      }),
      false,
    )
    assert.deepEqual(partition(fresh, 2).isr, [0], 'INELIGIBLE_REPLICA')
    assert.equal(
      await leader0.submit({
        ...add1,
        brokerEpoch: epoch0,
        addedMembers: [{ brokerId: toBrokerId(1), brokerEpoch: newEpoch }],
      }),
      true,
    )
    assert.deepEqual(partition(fresh, 2).isr, [0, 1])

    // The new incarnation itself proposes with its epoch and is heard.
    const newManager = new AlterPartitionManager({
      nodeId: toBrokerId(1),
      updateMetadata: (c, g) => fresh.update(c, g),
      logger: silentLogger,
    })
    const now = partition(fresh, 1)
    assert.equal(
      await newManager.submit({
        ...proposal,
        leaderEpoch: now.leaderEpoch,
        partitionEpoch: now.partitionEpoch,
        brokerEpoch: newEpoch,
        addedMembers: [
          { brokerId: toBrokerId(2), brokerEpoch: brokerEpochOf(fresh.image(), toBrokerId(2))! },
        ],
      }),
      true,
    )
    assert.deepEqual(partition(fresh, 1).isr, [1, 2])
  } finally {
    old.close()
    fresh.close()
    await store.close()
  }
})
