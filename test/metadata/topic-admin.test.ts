/**
 * The controller's side of the topic admin APIs, driven directly on an embedded store with
 * a manual clock: Kafka's checks and codes, one compare-and-set per request, answers once
 * the new partitions' leaders serve them, REQUEST_TIMED_OUT past the timeout.
 */
import assert from 'node:assert/strict'
import { afterEach, beforeEach, test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import { type BrokerId, servedRecordFrom } from '../../src/metadata/cluster-image.js'
import { ClusterMetadata } from '../../src/metadata/cluster-metadata.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import { type ConfigChange, type CreatableTopic, TopicAdmin } from '../../src/metadata/topic-admin.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ZERO_UUID } from '../../src/protocol/primitives.js'
import { brokerConfigFromProperties } from '../../src/server/broker-config.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock } from '../storage/helpers.js'

const BROKERS = ids(0, 1, 2)

interface Setup {
  clock: ManualClock
  store: EmbeddedStore
  metadata: ClusterMetadata
  admin: TopicAdmin
}

let setup: Setup

async function open(properties: Record<string, string> = {}): Promise<Setup> {
  const clock = new ManualClock()
  const store = await EmbeddedStore.open({ clock })
  let seed = 1
  const next = () => {
    seed = (seed * 16807) % 2147483647
    return seed / 2147483647
  }
  const random = {
    next,
    int: (min: number, max: number) => min + Math.floor(next() * (max - min + 1)),
    bytes: (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(next() * 256))),
  }
  const metadata = await ClusterMetadata.open(store, { clusterId: null, random, logger: silentLogger })
  for (const nodeId of BROKERS) {
    const lease = await store.grantLease(600_000)
    assert.ok(
      await metadata.register(
        {
          nodeId,
          host: 'localhost',
          port: 9092 + nodeId,
          rack: null,
          incarnationId: `incarnation-${nodeId}`,
        },
        lease,
      ),
    )
  }
  const config = brokerConfigFromProperties(new Map(Object.entries({ 'node.id': '0', ...properties })))
  return { clock, store, metadata, admin: new TopicAdmin({ metadata, config, clock, logger: silentLogger }) }
}

beforeEach(async () => {
  setup = await open()
})

afterEach(async () => {
  setup.metadata.close()
  await setup.store.close()
})

function topic(name: string, partial: Partial<CreatableTopic> = {}): CreatableTopic {
  return { name, numPartitions: 3, replicationFactor: 2, assignments: [], configs: {}, ...partial }
}

/** What each leader would record once it has applied the current image (leadership-record.ts). */
async function leadersServe(metadata: ClusterMetadata): Promise<void> {
  const image = metadata.image()
  const served = new Map(BROKERS.map((id) => [id, [] as [string, number, number][]]))
  for (const t of image.topics.values())
    for (const p of t.partitions) served.get(p.leader)?.push([t.topicId, p.partition, p.leaderEpoch])
  for (const [id, epochs] of served) await metadata.recordServed(toBrokerId(id), servedRecordFrom(epochs))
}

/** Whether `promise` settles within a few turns of the event loop (no clock advance). */
async function settlesSoon<T>(promise: Promise<T>): Promise<boolean> {
  let settled = false
  promise.then(
    () => void (settled = true),
    () => void (settled = true),
  )
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
  return settled
}

test("createTopics runs Kafka's checks per topic and answers duplicates last", async () => {
  const { admin, metadata } = setup
  const existing = await admin.createTopics([topic('ex.isting')], { validateOnly: false, timeoutMs: 0 })
  assert.equal(existing[0].errorCode, ErrorCode.NONE)
  const results = await admin.createTopics(
    [
      topic('dup'),
      topic('bad name!'),
      topic('ex.isting'),
      topic('ex_isting'),
      topic('rf', { replicationFactor: 4 }),
      topic('zero', { numPartitions: 0 }),
      topic('conf', { configs: { 'cleanup.policy': 'sideways' } }),
      topic('manual', {
        numPartitions: -1,
        replicationFactor: -1,
        assignments: [{ partitionIndex: 0, brokerIds: ids(1, 7) }],
      }),
      topic('gap', {
        numPartitions: -1,
        replicationFactor: -1,
        assignments: [
          { partitionIndex: 0, brokerIds: ids(1) },
          { partitionIndex: 2, brokerIds: ids(2) },
        ],
      }),
      topic('__cluster_metadata'),
      topic('ok', { numPartitions: -1, replicationFactor: -1 }),
      topic('dup'),
    ],
    { validateOnly: false, timeoutMs: 0 },
  )
  const byName = new Map(results.map((r) => [r.name, r]))
  assert.equal(results.length, 11)
  assert.equal(results.at(-1)!.name, 'dup', 'duplicates answer after the others')
  assert.equal(byName.get('dup')!.errorCode, ErrorCode.INVALID_REQUEST)
  assert.equal(byName.get('dup')!.errorMessage, 'Duplicate topic name.')
  assert.equal(byName.get('bad name!')!.errorCode, ErrorCode.INVALID_TOPIC_EXCEPTION)
  assert.equal(byName.get('ex.isting')!.errorCode, ErrorCode.TOPIC_ALREADY_EXISTS)
  assert.equal(byName.get('ex.isting')!.errorMessage, "Topic 'ex.isting' already exists.")
  assert.equal(byName.get('ex_isting')!.errorCode, ErrorCode.INVALID_TOPIC_EXCEPTION)
  assert.match(byName.get('ex_isting')!.errorMessage!, /collides with existing topic: ex.isting/)
  assert.equal(byName.get('rf')!.errorCode, ErrorCode.INVALID_REPLICATION_FACTOR)
  assert.equal(byName.get('zero')!.errorCode, ErrorCode.INVALID_PARTITIONS)
  assert.equal(byName.get('conf')!.errorCode, ErrorCode.INVALID_CONFIG)
  assert.equal(byName.get('manual')!.errorCode, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
  assert.match(byName.get('manual')!.errorMessage!, /broker 7, but no such broker is registered/)
  assert.equal(byName.get('gap')!.errorCode, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
  assert.equal(byName.get('__cluster_metadata')!.errorCode, ErrorCode.INVALID_REQUEST)
  const ok = byName.get('ok')!
  assert.equal(ok.errorCode, ErrorCode.NONE)
  assert.equal(ok.errorMessage, null, 'success carries a null message, as Kafka sends')
  const created = metadata.image().topics.get('ok')!
  assert.equal(created.partitions.length, 1, 'num.partitions default')
  assert.equal(created.partitions[0].replicas.length, 1, 'default.replication.factor default')
  assert.deepEqual([...metadata.image().topics.keys()].sort(), ['ex.isting', 'ok'])
})

test('validateOnly checks and places but creates nothing', async () => {
  const { admin, metadata } = setup
  const [result] = await admin.createTopics([topic('dry', { numPartitions: 4, replicationFactor: 3 })], {
    validateOnly: true,
    timeoutMs: 60_000,
  })
  assert.equal(result.errorCode, ErrorCode.NONE)
  assert.equal(result.topic!.partitions.length, 4)
  assert.ok(result.topic!.partitions.every((p) => p.replicas.length === 3))
  assert.equal(metadata.image().topics.has('dry'), false)
  const [grow] = await admin.createPartitions([{ name: 'dry', count: 5, assignments: null }], {
    validateOnly: true,
    timeoutMs: 0,
  })
  assert.equal(grow.errorCode, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
})

test('createTopics answers once every new partition is served by its leader', async () => {
  const { admin, metadata } = setup
  const answer = admin.createTopics([topic('ready', { numPartitions: 6, replicationFactor: 3 })], {
    validateOnly: false,
    timeoutMs: 30_000,
  })
  assert.equal(await settlesSoon(answer), false, 'no answer while the leaders serve nothing')
  assert.ok(metadata.image().topics.has('ready'), 'the topic is committed before the wait')
  await leadersServe(metadata)
  const [result] = await answer
  assert.equal(result.errorCode, ErrorCode.NONE)
  assert.equal(result.errorMessage, null)
})

test('a leader serving another epoch does not count; past the timeout the topic gets REQUEST_TIMED_OUT', async () => {
  const { admin, metadata, clock } = setup
  const answer = admin.createTopics([topic('slow', { numPartitions: 2, replicationFactor: 1 })], {
    validateOnly: false,
    timeoutMs: 5000,
  })
  assert.equal(await settlesSoon(answer), false)
  const created = metadata.image().topics.get('slow')!
  // Partition 0 served in its epoch; partition 1's leader records a stale epoch.
  const p0 = created.partitions[0]
  const p1 = created.partitions[1]
  await metadata.recordServed(p0.leader, servedRecordFrom([[created.topicId, 0, p0.leaderEpoch]]))
  if (p1.leader !== p0.leader)
    await metadata.recordServed(p1.leader, servedRecordFrom([[created.topicId, 1, p1.leaderEpoch + 7]]))
  assert.equal(await settlesSoon(answer), false, 'partition 1 is not served in its leader epoch')
  clock.advance(4999)
  assert.equal(await settlesSoon(answer), false)
  clock.advance(1)
  const [result] = await answer
  assert.equal(result.errorCode, ErrorCode.REQUEST_TIMED_OUT)
  assert.ok(metadata.image().topics.has('slow'), 'a timed-out creation still stands, as in Kafka')
})

test('timeoutMs 0 answers at once, without waiting for the leaders', async () => {
  const [result] = await setup.admin.createTopics([topic('nowait')], { validateOnly: false, timeoutMs: 0 })
  assert.equal(result.errorCode, ErrorCode.NONE)
})

test('concurrent creations of one name: one compare-and-set wins, the other gets TOPIC_ALREADY_EXISTS', async () => {
  const { admin, metadata } = setup
  const [a, b] = await Promise.all([
    admin.createTopics([topic('race')], { validateOnly: false, timeoutMs: 0 }),
    admin.createTopics([topic('race')], { validateOnly: false, timeoutMs: 0 }),
  ])
  const codes = [a[0].errorCode, b[0].errorCode].sort()
  assert.deepEqual(codes, [ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS])
  const winner = a[0].errorCode === ErrorCode.NONE ? a[0] : b[0]
  assert.equal(metadata.image().topics.get('race')!.topicId, winner.topic!.topicId)
})

test('createPartitions grows topics, refuses what Kafka refuses, and waits for the new partitions only', async () => {
  const { admin, metadata } = setup
  await admin.createTopics([topic('grow', { numPartitions: 2 })], { validateOnly: false, timeoutMs: 0 })
  await leadersServe(metadata)
  const refused = await admin.createPartitions(
    [
      { name: 'missing', count: 3, assignments: null },
      { name: 'grow', count: 2, assignments: null },
    ],
    { validateOnly: false, timeoutMs: 0 },
  )
  assert.equal(refused[0].errorCode, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
  assert.equal(refused[1].errorCode, ErrorCode.INVALID_PARTITIONS)
  assert.equal(refused[1].errorMessage, 'Topic already has 2 partition(s).')
  const manual = await admin.createPartitions([{ name: 'grow', count: 4, assignments: [ids(0, 1)] }], {
    validateOnly: false,
    timeoutMs: 0,
  })
  assert.equal(manual[0].errorCode, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
  const answer = admin.createPartitions(
    [
      {
        name: 'grow',
        count: 4,
        assignments: [ids(2, 0), ids(1, 2)],
      },
    ],
    {
      validateOnly: false,
      timeoutMs: 30_000,
    },
  )
  assert.equal(await settlesSoon(answer), false)
  const grown = metadata.image().topics.get('grow')!
  assert.deepEqual(
    grown.partitions.map((p) => p.replicas),
    [grown.partitions[0].replicas, grown.partitions[1].replicas, [2, 0], [1, 2]],
  )
  await leadersServe(metadata)
  const [result] = await answer
  assert.deepEqual(result, { name: 'grow', errorCode: ErrorCode.NONE, errorMessage: null })
  const duplicate = await admin.createPartitions(
    [
      { name: 'grow', count: 9, assignments: null },
      { name: 'grow', count: 9, assignments: null },
    ],
    { validateOnly: false, timeoutMs: 0 },
  )
  assert.ok(duplicate.every((r) => r.errorCode === ErrorCode.INVALID_REQUEST))
  assert.equal(metadata.image().topics.get('grow')!.partitions.length, 4)
})

test('deleteTopics by name and by id, with Kafka codes for unknown and duplicate ones', async () => {
  const { admin, metadata } = setup
  await admin.createTopics([topic('a'), topic('b')], { validateOnly: false, timeoutMs: 0 })
  const idOfB = metadata.image().topics.get('b')!.topicId
  const results = await admin.deleteTopics([
    { name: 'a', topicId: ZERO_UUID },
    { name: null, topicId: idOfB },
    { name: 'nope', topicId: ZERO_UUID },
    { name: null, topicId: 'AAAAAAAAAAAAAAAAAAAAAQ' },
    { name: null, topicId: ZERO_UUID },
  ])
  assert.deepEqual(
    results.map((r) => [r.name, r.errorCode]),
    [
      ['a', ErrorCode.NONE],
      ['b', ErrorCode.NONE],
      ['nope', ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
      [null, ErrorCode.UNKNOWN_TOPIC_ID],
      [null, ErrorCode.INVALID_REQUEST],
    ],
  )
  assert.equal(results[0].errorMessage, null)
  assert.equal(metadata.image().topics.size, 0)
})

test('delete.topic.enable=false refuses every deletion with TOPIC_DELETION_DISABLED', async () => {
  const locked = await open({ 'delete.topic.enable': 'false' })
  try {
    await locked.admin.createTopics([topic('kept')], { validateOnly: false, timeoutMs: 0 })
    const [result] = await locked.admin.deleteTopics([{ name: 'kept', topicId: ZERO_UUID }])
    assert.equal(result.errorCode, ErrorCode.TOPIC_DELETION_DISABLED)
    assert.ok(locked.metadata.image().topics.has('kept'))
  } finally {
    locked.metadata.close()
    await locked.store.close()
  }
})

test('electLeaders moves leadership back to the preferred replica, once', async () => {
  const { admin, metadata } = setup
  await admin.createTopics([topic('pref', { numPartitions: 1, replicationFactor: 3 })], {
    validateOnly: false,
    timeoutMs: 0,
  })
  await metadata.update((image) => {
    const t = image.topics.get('pref')!
    const p = t.partitions[0]
    const moved = { ...p, leader: p.replicas[1], leaderEpoch: p.leaderEpoch + 1 }
    return { ...image, topics: new Map(image.topics).set('pref', { ...t, partitions: [moved] }) }
  })
  const [elected] = await admin.electLeaders('preferred', [{ topic: 'pref', partitions: [0, 5] }])
  assert.equal(elected.partitions[0].errorCode, ErrorCode.NONE)
  assert.equal(elected.partitions[1].errorCode, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
  const state = metadata.image().topics.get('pref')!.partitions[0]
  assert.equal(state.leader, state.replicas[0])
  const [again] = await admin.electLeaders('preferred', null)
  assert.equal(again.partitions[0].errorCode, ErrorCode.ELECTION_NOT_NEEDED)
  const [unclean] = await admin.electLeaders('unclean', [{ topic: 'pref', partitions: [0] }])
  assert.equal(unclean.partitions[0].errorCode, ErrorCode.ELECTION_NOT_NEEDED)
})

test('alterPartitionReassignments checks replicas, starts a move and cancels it', async () => {
  const { admin, metadata } = setup
  await admin.createTopics([topic('move', { numPartitions: 1, replicationFactor: 1, assignments: [] })], {
    validateOnly: false,
    timeoutMs: 0,
  })
  const from = metadata.image().topics.get('move')!.partitions[0].replicas[0]
  const to = BROKERS.find((id) => id !== from)!
  const [checked] = await admin.alterPartitionReassignments([
    {
      name: 'move',
      partitions: [
        { partitionIndex: 0, replicas: [to, to] },
        { partitionIndex: 3, replicas: [to] },
      ],
    },
  ])
  assert.equal(checked.partitions[0].errorCode, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
  assert.equal(checked.partitions[1].errorCode, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
  const [cancelNone] = await admin.alterPartitionReassignments([
    { name: 'move', partitions: [{ partitionIndex: 0, replicas: null }] },
  ])
  assert.equal(cancelNone.partitions[0].errorCode, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
  const [started] = await admin.alterPartitionReassignments([
    { name: 'move', partitions: [{ partitionIndex: 0, replicas: [to] }] },
  ])
  assert.equal(started.partitions[0].errorCode, ErrorCode.NONE)
  assert.deepEqual(metadata.image().topics.get('move')!.partitions[0].addingReplicas, [to])
  const [cancelled] = await admin.alterPartitionReassignments([
    { name: 'move', partitions: [{ partitionIndex: 0, replicas: null }] },
  ])
  assert.equal(cancelled.partitions[0].errorCode, ErrorCode.NONE)
  assert.deepEqual(metadata.image().topics.get('move')!.partitions[0].replicas, [from])
})

test('allowReplicationFactorChange=false refuses a new replication factor, the target counting during a move', async () => {
  const { admin, metadata } = setup
  await admin.createTopics([topic('rf', { numPartitions: 1, replicationFactor: 2, assignments: [] })], {
    validateOnly: false,
    timeoutMs: 0,
  })
  const [a, b] = metadata.image().topics.get('rf')!.partitions[0].replicas
  const c = BROKERS.find((id) => id !== a && id !== b)!
  const answer = async (replicas: BrokerId[] | null, allowReplicationFactorChange: boolean) => {
    const [t] = await admin.alterPartitionReassignments(
      [{ name: 'rf', partitions: [{ partitionIndex: 0, replicas }] }],
      allowReplicationFactorChange,
    )
    return t.partitions[0]
  }
  assert.deepEqual(await answer([a, b, c], false), {
    partition: 0,
    errorCode: ErrorCode.INVALID_REPLICATION_FACTOR,
    errorMessage: 'The replication factor is changed from 2 to 3',
  })
  assert.equal((await answer([a], false)).errorCode, ErrorCode.INVALID_REPLICATION_FACTOR)
  // The replica list is checked first, as in Kafka.
  assert.equal((await answer([a, a, a], false)).errorCode, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
  assert.deepEqual(metadata.image().topics.get('rf')!.partitions[0].replicas, [a, b])
  // Same size: a move.
  assert.equal((await answer([b, c], false)).errorCode, ErrorCode.NONE)
  assert.deepEqual(metadata.image().topics.get('rf')!.partitions[0].addingReplicas, [c])
  // During the move the factor is the target's: [b, c] is 2, though [b, c, a] are replicas.
  assert.equal((await answer([a, b, c], false)).errorCode, ErrorCode.INVALID_REPLICATION_FACTOR)
  assert.equal((await answer([c, a], false)).errorCode, ErrorCode.NONE)
  // Cancelling is not a new factor; with the flag true (v0) any factor goes.
  assert.equal((await answer(null, false)).errorCode, ErrorCode.NONE)
  assert.equal((await answer([a, b, c], true)).errorCode, ErrorCode.NONE)
  assert.deepEqual(metadata.image().topics.get('rf')!.partitions[0].addingReplicas, [c])
})

test('alterConfigs writes the planned overrides, replanned on the image the change applies to', async () => {
  const { admin, metadata } = setup
  await admin.createTopics([topic('conf')], { validateOnly: false, timeoutMs: 0 })
  let runs = 0
  // A concurrent write between the plan and its commit makes the compare-and-set conflict.
  const result = await admin.alterConfigs((image) => {
    runs++
    if (runs === 1)
      void metadata.update((current) => {
        const t = current.topics.get('conf')!
        return {
          ...current,
          topics: new Map(current.topics).set('conf', { ...t, configs: { 'retention.ms': '1' } }),
        }
      })
    const previous = image.topics.get('conf')!.configs
    const changes: ConfigChange[] = [
      { target: { kind: 'topic', topic: 'conf' }, overrides: { ...previous, 'segment.ms': '60000' } },
      { target: { kind: 'broker', key: '' }, overrides: { 'log.retention.bytes': '777' } },
    ]
    return { changes, result: runs }
  })
  const image = metadata.image()
  assert.deepEqual(image.topics.get('conf')!.configs, { 'retention.ms': '1', 'segment.ms': '60000' })
  assert.deepEqual(image.brokerConfigs?.get(''), { 'log.retention.bytes': '777' })
  assert.equal(result, runs, 'the answer is that of the plan that was committed')
  assert.ok(runs >= 2, 'the plan ran again after the conflict')
})

test('ensureInternalTopic creates once, capping the replication factor at the registered brokers', async () => {
  const { admin, metadata } = setup
  const spec = {
    name: '__consumer_offsets',
    partitions: 4,
    replicationFactor: 5,
    configs: { 'cleanup.policy': 'compact' },
  }
  await Promise.all([admin.ensureInternalTopic(spec), admin.ensureInternalTopic(spec)])
  const created = metadata.image().topics.get('__consumer_offsets')!
  assert.equal(created.partitions.length, 4)
  assert.ok(created.partitions.every((p) => p.replicas.length === 3))
  await admin.ensureInternalTopic(spec)
  assert.equal(metadata.image().topics.get('__consumer_offsets')!.topicId, created.topicId)
})

test('auto-creation follows auto.create.topics.enable and the broker defaults', async () => {
  const { admin, metadata } = setup
  const waiting = admin.autoCreateTopics(['auto', 'bad name!'])
  assert.equal(await settlesSoon(waiting), false, 'waits for the leaders, briefly')
  await leadersServe(metadata)
  await waiting
  assert.deepEqual([...metadata.image().topics.keys()], ['auto'])
  const off = await open({ 'auto.create.topics.enable': 'false' })
  try {
    await off.admin.autoCreateTopics(['auto'])
    assert.equal(off.metadata.image().topics.size, 0)
  } finally {
    off.metadata.close()
    await off.store.close()
  }
})
