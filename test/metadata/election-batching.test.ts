/**
 * Issue 38 item 2: leader elections batched. The controller's reaction to a dead broker and a
 * controlled shutdown's leadership moves are each one metadata change, written in as few
 * store transactions as the store's limits allow (etcd's 128 compares and ops: 128
 * partitions a transaction, one compare-and-set each), every partition once. Counted on the
 * store: a write per partition, or a transaction per election, fails these tests.
 *
 * TIDELOG_ELECTION_BATCH_PARTITIONS sets the topic's size (default 3,000; 10,000 takes a few
 * seconds more).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { systemClock } from '../../src/common/clock.js'
import { silentLogger } from '../../src/common/logger.js'
import { systemRandom } from '../../src/common/random.js'
import type { ClusterImage } from '../../src/metadata/cluster-image.js'
import { ClusterMetadata, KEYS } from '../../src/metadata/cluster-metadata.js'
import { Controller } from '../../src/metadata/controller.js'
import { movedAwayFrom } from '../../src/metadata/elections.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import type { Lease, StoreOp, VersionCompare } from '../../src/metadata/store/metadata-store.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'
import { waitUntil } from '../helpers/wait.js'
import { ManualClock } from '../storage/helpers.js'

const PARTITIONS = Number(process.env.TIDELOG_ELECTION_BATCH_PARTITIONS ?? 3000)
const BROKERS = ids(0, 1, 2)
const TOPIC = 'big'

interface Counted {
  /** Transactions that wrote partition states, and the partition keys each wrote. */
  readonly partitionTxns: string[][]
}

interface Fixture {
  store: EmbeddedStore
  /** The writer's view (a broker); the controller has a view of its own. */
  metadata: ClusterMetadata
  leases: Lease[]
  counted: Counted
  close(): Promise<void>
}

/** Three registered brokers and one topic of PARTITIONS at RF 3, every store transaction counted. */
async function fixture(): Promise<Fixture> {
  const store = await EmbeddedStore.open({ clock: new ManualClock() })
  const counted: Counted = { partitionTxns: [] }
  const txn = store.txn.bind(store)
  store.txn = async (compares: readonly VersionCompare[], ops: readonly StoreOp[]) => {
    const result = await txn(compares, ops)
    const keys = ops.flatMap((op) =>
      op.type === 'put' && op.key.startsWith(KEYS.partitionsPrefix) ? [op.key] : [],
    )
    if (result.succeeded && keys.length > 0) counted.partitionTxns.push(keys)
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
  await metadata.update((image) => {
    const topic = metadata.createTopicImage({
      name: TOPIC,
      partitions: PARTITIONS,
      replicationFactor: 3,
      configs: {},
    })
    return { ...image, topics: new Map(image.topics).set(TOPIC, topic) }
  })
  return {
    store,
    metadata,
    leases,
    counted,
    close: async () => {
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

/** The fewest transactions `changed` partition writes fit in: one compare and one put each. */
function fewestTxns(store: EmbeddedStore, changed: number): number {
  return Math.ceil(changed / store.limits.txnOpsMax)
}

/** Every partition written once, and in no more transactions than the limits require. */
function assertBatched(f: Fixture, changed: number, what: string): void {
  const keys = f.counted.partitionTxns.flat()
  assert.equal(keys.length, changed, `${what}: every changed partition written`)
  assert.equal(new Set(keys).size, keys.length, `${what}: each partition written once`)
  // Two changes of 1,000 and 2,000 partitions fit in as many transactions as one of 3,000;
  // only one change leaves a single transaction short of the limit.
  const short = f.counted.partitionTxns.filter((txn) => txn.length < f.store.limits.txnOpsMax)
  assert.ok(short.length <= 1, `${what}: ${short.length} transactions below the limit, one change leaves one`)
  assert.equal(
    f.counted.partitionTxns.length,
    fewestTxns(f.store, changed),
    `${what}: ${changed} partitions in ${f.counted.partitionTxns.length} store transactions, ` +
      `${fewestTxns(f.store, changed)} needed at ${f.store.limits.txnOpsMax} ops each`,
  )
}

test(`the controller re-elects a dead broker's partitions (${PARTITIONS}) in as few store transactions as the limits allow`, async () => {
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
    const led = partitionsOf(view.image()).filter((p) => p.leader === 2).length
    assert.ok(led > PARTITIONS / 4, `broker 2 leads ${led}`)
    f.counted.partitionTxns.length = 0
    await f.leases[2].revoke()
    await waitUntil(
      "broker 2's partitions re-elected",
      8000,
      () => partitionsOf(view.image()).every((p) => p.leader !== 2 && !p.isr.includes(toBrokerId(2))),
      5,
    )
    // RF 3 on 3 brokers: broker 2 is in every partition's ISR.
    assertBatched(f, PARTITIONS, 'failover')
    assert.equal(controller.stats.elections, led)
  } finally {
    await controller.stop()
    view.close()
    await f.close()
  }
})

test(`a controlled shutdown moves every leadership (${PARTITIONS} partitions) in as few store transactions as the limits allow`, async () => {
  const f = await fixture()
  try {
    const before = partitionsOf(f.metadata.image())
    const led = before.filter((p) => p.leader === 2).length
    f.counted.partitionTxns.length = 0
    const after = partitionsOf(
      await f.metadata.update((image) => movedAwayFrom(image, toBrokerId(2), () => 2)),
    )
    for (const state of after) {
      assert.notEqual(state.leader, 2, `${TOPIC}-${state.partition} still led by the leaving broker`)
      assert.ok(state.isr.includes(state.leader), `${TOPIC}-${state.partition} led from outside its ISR`)
      assert.ok(
        !state.isr.includes(toBrokerId(2)),
        `${TOPIC}-${state.partition} keeps the leaving broker in its ISR`,
      )
    }
    assert.equal(after.filter((s, i) => s.leaderEpoch === before[i].leaderEpoch + 1).length, led)
    assertBatched(f, PARTITIONS, 'controlled shutdown')
  } finally {
    await f.close()
  }
})
