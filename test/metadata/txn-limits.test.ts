/**
 * Issue 39: every metadata write fits the store's transaction limits (etcd's --max-txn-ops
 * 128 and --max-request-bytes 1.5 MiB, kept by the embedded store too). Large changes are
 * split into transactions each consistent alone: elections and ISR changes per partition, a
 * topic's partitions staged where no reader looks before one small transaction publishes
 * its record; a store failure reaches the admin API as a Kafka error code.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { systemClock } from '../../src/common/clock.js'
import { silentLogger } from '../../src/common/logger.js'
import { systemRandom } from '../../src/common/random.js'
import { type ClusterImage, NO_LEADER } from '../../src/metadata/cluster-image.js'
import { ClusterMetadata } from '../../src/metadata/cluster-metadata.js'
import { onBrokerChange } from '../../src/metadata/elections.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import {
  type MetadataStore,
  MetadataStoreError,
  STORE_LIMITS_DEFAULT,
  type StoreOp,
  type VersionCompare,
} from '../../src/metadata/store/metadata-store.js'
import { applyInBatches, packTxns } from '../../src/metadata/store/txn-batches.js'
import { txnOpCount } from '../../src/metadata/store/txn-checks.js'
import { TopicAdmin } from '../../src/metadata/topic-admin.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { brokerConfigFromProperties } from '../../src/server/broker-config.js'
import { plant } from '../../src/sim/mutations.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock } from '../storage/helpers.js'

const LIMITS = STORE_LIMITS_DEFAULT
const BROKERS = ids(0, 1, 2)

function put(key: string, value = 'v'): StoreOp {
  return { type: 'put', key, value }
}

test('packTxns packs parts in order within the op count, counting a modRevision compare twice', () => {
  const shared: VersionCompare[] = [{ key: 'brokers/1', version: 1, modRevision: 7 }]
  const parts = Array.from({ length: 300 }, (_, i) => ({
    compares: [{ key: `k${i}`, version: 1 }],
    ops: [put(`k${i}`)],
  }))
  const txns = packTxns(LIMITS, parts, shared)
  assert.equal(txns.length, 3)
  const keys = txns.flatMap((txn) => txn.ops.map((op) => (op.type === 'put' ? op.key : '')))
  assert.deepEqual(
    keys,
    parts.map((_, i) => `k${i}`),
    'every part once, in order',
  )
  for (const txn of txns) {
    assert.deepEqual(txn.compares[0], shared[0], 'shared compares in every transaction')
    assert.ok(txnOpCount(txn.compares, txn.ops) <= LIMITS.txnOpsMax)
  }
  assert.equal(txns[0].ops.length, LIMITS.txnOpsMax - 2, 'the shared compare counts as two')
})

test('packTxns splits by bytes, and refuses a part too large alone before anything is written', () => {
  const big = 'x'.repeat(100_000)
  const parts = Array.from({ length: 40 }, (_, i) => ({ compares: [], ops: [put(`k${i}`, big)] }))
  const txns = packTxns(LIMITS, parts)
  assert.equal(txns.length, 3)
  for (const txn of txns) assert.ok(txn.ops.length <= 15)
  const tooMany = { compares: [], ops: Array.from({ length: 129 }, (_, i) => put(`k${i}`)) }
  assert.throws(
    () => packTxns(LIMITS, [tooMany]),
    (error: unknown) => error instanceof MetadataStoreError && error.code === 'TXN_TOO_LARGE',
  )
  const tooBig = { compares: [], ops: [put('k', 'x'.repeat(LIMITS.requestBytesMax))] }
  assert.throws(() => packTxns(LIMITS, [tooBig]), /over the store's limits/)
})

test("the embedded store refuses a transaction over etcd's limits, as etcd does", async () => {
  const store = await EmbeddedStore.open({ clock: new ManualClock() })
  try {
    const ops = Array.from({ length: 128 }, (_, i) => put(`k${i}`))
    const compares = ops.map((op) => ({ key: op.type === 'put' ? op.key : '', version: 0 }))
    assert.ok((await store.txn(compares, ops)).succeeded, '128 compares and 128 ops fit')
    await assert.rejects(
      store.txn([], [...ops, put('k128')]),
      (error: unknown) => error instanceof MetadataStoreError && error.code === 'TXN_TOO_LARGE',
    )
    await assert.rejects(store.txn([...compares, { key: 'k128', version: 0 }], [put('x')]), /129 compares/)
    await assert.rejects(store.txn([], [put('big', 'x'.repeat(LIMITS.requestBytesMax))]), /bytes/)
    // Independent ops (ACLs, credentials) go through in batches.
    await applyInBatches(
      store,
      Array.from({ length: 1000 }, (_, i) => put(`acl/${i}`)),
    )
    assert.equal((await store.range('acl/')).kvs.length, 1000)
  } finally {
    await store.close()
  }
})

interface Cluster {
  store: EmbeddedStore
  metadata: ClusterMetadata
  /** A second broker's view: every image it sees is checked for half-written changes. */
  reader: ClusterMetadata
  images: ClusterImage[]
  close(): Promise<void>
}

async function cluster(): Promise<Cluster> {
  const store = await EmbeddedStore.open({ clock: new ManualClock() })
  const open = () =>
    ClusterMetadata.open(store, {
      clusterId: null,
      random: systemRandom,
      logger: silentLogger,
      clock: systemClock,
    })
  const metadata = await open()
  for (const nodeId of BROKERS) {
    const lease = await store.grantLease(600_000)
    const registration = {
      nodeId,
      host: 'localhost',
      port: 9092 + nodeId,
      rack: null,
      incarnationId: `i${nodeId}`,
    }
    assert.ok(await metadata.register(registration, lease))
  }
  const reader = await open()
  const images: ClusterImage[] = []
  reader.onChange((image) => images.push(image))
  return {
    store,
    metadata,
    reader,
    images,
    close: async () => {
      metadata.close()
      reader.close()
      await store.close()
    },
  }
}

/** Every topic a reader sees has every partition written (none offline for want of its key). */
function assertWhole(image: ClusterImage): void {
  for (const topic of image.topics.values())
    for (const state of topic.partitions) {
      assert.notEqual(
        state.leader,
        NO_LEADER,
        `${topic.name}-${state.partition} seen before its state was written`,
      )
      assert.ok(
        state.replicas.includes(state.leader),
        `${topic.name}-${state.partition} led outside its replicas`,
      )
      for (const id of state.isr)
        assert.ok(state.replicas.includes(id), `${topic.name}-${state.partition} ISR`)
    }
}

function admin(metadata: ClusterMetadata): TopicAdmin {
  const config = brokerConfigFromProperties(new Map([['node.id', '0']]))
  return new TopicAdmin({ metadata, config, clock: new ManualClock(), logger: silentLogger })
}

test('a topic of 2,000 partitions and 50 topics at once are created within the limits, whole to readers', async () => {
  const c = await cluster()
  try {
    const revisionBefore = c.store.currentRevision()
    const one = await admin(c.metadata).createTopics(
      [{ name: 'big', numPartitions: 2000, replicationFactor: 3, assignments: [], configs: {} }],
      { validateOnly: false, timeoutMs: 0 },
    )
    assert.equal(one[0].errorCode, ErrorCode.NONE, one[0].errorMessage ?? '')
    assert.ok(c.store.currentRevision() - revisionBefore > 2000 / 128, 'written in many transactions')
    const many = await admin(c.metadata).createTopics(
      Array.from({ length: 50 }, (_, i) => ({
        name: `t${i}`,
        numPartitions: 40,
        replicationFactor: 3,
        assignments: [],
        configs: {},
      })),
      { validateOnly: false, timeoutMs: 0 },
    )
    assert.deepEqual(
      many.filter((r) => r.errorCode !== ErrorCode.NONE),
      [],
    )
    await c.reader.update((image) => image) // the reader has caught up
    const image = c.reader.image()
    assert.equal(image.topics.get('big')?.partitions.length, 2000)
    for (let i = 0; i < 50; i++) assert.equal(image.topics.get(`t${i}`)?.partitions.length, 40)
    for (const seen of c.images) assertWhole(seen)
    assert.equal((await c.store.range('staging/')).kvs.length, 0, 'staging claims released')
    // Growing a topic stages the new partitions the same way.
    const grown = await admin(c.metadata).createPartitions(
      [{ name: 'big', count: 2300, assignments: null }],
      {
        validateOnly: false,
        timeoutMs: 0,
      },
    )
    assert.equal(grown[0].errorCode, ErrorCode.NONE)
    for (const seen of c.images) assertWhole(seen)
    assert.equal(c.metadata.image().topics.get('big')?.partitions.length, 2300)
  } finally {
    await c.close()
  }
})

/** The controller's reaction to broker 2's death: new leaders, ISRs without it. */
function failOver(image: ClusterImage): ClusterImage {
  const live = new Set(ids(0, 1))
  const topic = image.topics.get('big')!
  const partitions = topic.partitions.map(
    (state) => onBrokerChange({ state, live, uncleanLeaderElection: false })?.state ?? state,
  )
  return { ...image, topics: new Map(image.topics).set('big', { ...topic, partitions }) }
}

test("a dead broker's 2,000 partitions all fail over, one partition's compare-and-set at a time", async () => {
  const c = await cluster()
  try {
    await admin(c.metadata).createTopics(
      [{ name: 'big', numPartitions: 2000, replicationFactor: 3, assignments: [], configs: {} }],
      { validateOnly: false, timeoutMs: 0 },
    )
    const after = await c.metadata.update(failOver)
    for (const state of after.topics.get('big')!.partitions) {
      assert.ok(
        state.leader === 0 || state.leader === 1,
        `partition ${state.partition} led by ${state.leader}`,
      )
      assert.ok(!state.isr.includes(toBrokerId(2)))
    }
    for (const seen of c.images) assertWhole(seen)
  } finally {
    await c.close()
  }
})

test('with the split planted away (sim mutation metadata-writes-unsplit), the same failover is refused', async () => {
  const c = await cluster()
  const planted: string[] = []
  try {
    await admin(c.metadata).createTopics(
      [{ name: 'big', numPartitions: 2000, replicationFactor: 3, assignments: [], configs: {} }],
      { validateOnly: false, timeoutMs: 0 },
    )
    const unplant = plant('metadata-writes-unsplit', (message) => planted.push(message))
    try {
      await assert.rejects(
        c.metadata.update(failOver),
        (error: unknown) => error instanceof MetadataStoreError && error.code === 'TXN_TOO_LARGE',
      )
    } finally {
      unplant()
    }
    assert.match(planted.join('\n'), /one metadata transaction of 2000 ops/)
  } finally {
    await c.close()
  }
})

test('two writers creating one topic concurrently never mix their partitions', async () => {
  const c = await cluster()
  try {
    const spec = { name: 'race', numPartitions: 600, replicationFactor: 2, assignments: [], configs: {} }
    const results = await Promise.all([
      admin(c.metadata).createTopics([spec], { validateOnly: false, timeoutMs: 0 }),
      admin(c.reader).createTopics([spec], { validateOnly: false, timeoutMs: 0 }),
    ])
    const codes = results.map((r) => r[0].errorCode).sort()
    assert.deepEqual(codes, [ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS])
    await c.reader.update((image) => image)
    for (const seen of [...c.images, c.metadata.image()]) assertWhole(seen)
    const topic = c.metadata.image().topics.get('race')!
    for (const state of topic.partitions) assert.equal(state.leader, state.replicas[0])
  } finally {
    await c.close()
  }
})

/** The store as a broker sees it while etcd is unreachable: every write fails. */
function unreachable(store: MetadataStore): MetadataStore {
  return new Proxy(store, {
    get(target, property, receiver) {
      if (property === 'txn')
        return () =>
          Promise.reject(new MetadataStoreError('STORE_UNAVAILABLE', 'etcd txn failed: deadline exceeded'))
      const value = Reflect.get(target, property, receiver)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

test('a store that does not commit answers CreateTopics with REQUEST_TIMED_OUT, not an exception', async () => {
  const c = await cluster()
  await admin(c.metadata).createTopics(
    [{ name: 'old', numPartitions: 3, replicationFactor: 3, assignments: [], configs: {} }],
    { validateOnly: false, timeoutMs: 0 },
  )
  const metadata = await ClusterMetadata.open(unreachable(c.store), {
    clusterId: null,
    random: systemRandom,
    logger: silentLogger,
  })
  try {
    const results = await admin(metadata).createTopics(
      [
        { name: 'ok', numPartitions: 3, replicationFactor: 3, assignments: [], configs: {} },
        { name: 'bad!', numPartitions: 3, replicationFactor: 3, assignments: [], configs: {} },
      ],
      { validateOnly: false, timeoutMs: 1000 },
    )
    assert.equal(results[0].errorCode, ErrorCode.REQUEST_TIMED_OUT)
    assert.match(results[0].errorMessage ?? '', /did not commit/)
    assert.equal(results[1].errorCode, ErrorCode.INVALID_TOPIC_EXCEPTION, 'other errors keep their code')
    const deleted = await admin(metadata).deleteTopics([{ name: 'old', topicId: '' }])
    assert.equal(deleted[0].errorCode, ErrorCode.REQUEST_TIMED_OUT)
  } finally {
    metadata.close()
    await c.close()
  }
})

test('a registration that leaves many partitions is written last, after them', async () => {
  const c = await cluster()
  try {
    await admin(c.metadata).createTopics(
      [{ name: 'big', numPartitions: 900, replicationFactor: 3, assignments: [], configs: {} }],
      { validateOnly: false, timeoutMs: 0 },
    )
    c.images.length = 0
    // A new process (a fresh view) registers as a new incarnation: it leaves what it led.
    const restarted = await ClusterMetadata.open(c.store, {
      clusterId: null,
      random: systemRandom,
      logger: silentLogger,
    })
    const lease = await c.store.grantLease(600_000)
    const epoch = await restarted.register(
      { nodeId: toBrokerId(2), host: 'localhost', port: 9094, rack: null, incarnationId: 'restarted' },
      lease,
    )
    assert.ok(epoch !== null)
    restarted.close()
    await c.reader.update((image) => image)
    assert.ok(c.images.length > 1, 'in several transactions')
    for (const image of c.images) {
      const registered = image.brokers.get(toBrokerId(2))?.incarnationId === 'restarted'
      if (!registered) continue
      for (const state of image.topics.get('big')!.partitions) {
        assert.notEqual(state.leader, 2, 'the new incarnation registered while its predecessor led')
        assert.ok(!state.isr.includes(toBrokerId(2)))
      }
    }
  } finally {
    await c.close()
  }
})

test('reassigning 300 partitions of one topic at once starts every move, a transaction at a time', async () => {
  const c = await cluster()
  try {
    await admin(c.metadata).createTopics(
      [{ name: 'moved', numPartitions: 300, replicationFactor: 2, assignments: [], configs: {} }],
      { validateOnly: false, timeoutMs: 0 },
    )
    const before = c.metadata.image().topics.get('moved')!
    const targets = before.partitions.map((p) =>
      BROKERS.filter((id) => !p.replicas.includes(id)).concat(p.replicas[0]),
    )
    const outcomes = await admin(c.metadata).alterPartitionReassignments([
      {
        name: 'moved',
        partitions: targets.map((replicas, partitionIndex) => ({ partitionIndex, replicas })),
      },
    ])
    assert.equal(outcomes.length, 1)
    assert.equal(outcomes[0].partitions.length, 300)
    assert.deepEqual(
      outcomes[0].partitions.filter((p) => p.errorCode !== ErrorCode.NONE),
      [],
    )
    for (const state of c.metadata.image().topics.get('moved')!.partitions)
      assert.deepEqual(state.addingReplicas, targets[state.partition].slice(0, 1))
    for (const seen of c.images) assertWhole(seen)
  } finally {
    await c.close()
  }
})
