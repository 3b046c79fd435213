/**
 * Issue 5, in one process: clusters of three and five brokers on the embedded store
 * (startCluster), seen through kafkajs and kcat. Placement spreads leaders and replicas
 * evenly; a controlled shutdown hands every leadership to another ISR member before the
 * broker's registration goes, and the controller role moves when the controller stops;
 * ElectLeaders (PREFERRED) moves leadership back to the preferred replica.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import type { ClusterImage } from '../../src/metadata/cluster-image.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { ElectLeadersResponse } from '../../src/protocol/generated/elect-leaders-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { MetadataResponse } from '../../src/protocol/generated/metadata-response.js'
import type { ProduceResponse } from '../../src/protocol/generated/produce-response.js'
import { ZERO_UUID } from '../../src/protocol/primitives.js'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import type { Broker } from '../../src/server/broker.js'
import type { Cluster } from '../../src/server/cluster.js'
import { SESSION_TIMEOUT_MS, waitFor } from '../helpers/broker-process.js'
import { startCluster } from '../helpers/cluster.js'
import {
  countPerBroker,
  kafkajsMetadata,
  kcatMetadata,
  ledBy,
  type MetadataView,
} from '../helpers/metadata-view.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

async function withCluster<T>(brokers: number, fn: (cluster: Cluster) => Promise<T>): Promise<T> {
  const cluster = await startCluster({
    brokers,
    port: 0,
    properties: { 'broker.session.timeout.ms': SESSION_TIMEOUT_MS, 'num.partitions': 1 },
  })
  try {
    return await fn(cluster)
  } finally {
    await cluster.stop()
  }
}

function kafkaFor(bootstrap: string): Kafka {
  return new Kafka({ clientId: 'tidelog-cluster', brokers: bootstrap.split(','), logLevel: logLevel.NOTHING })
}

async function withAdmin<T>(bootstrap: string, fn: (admin: ReturnType<Kafka['admin']>) => Promise<T>) {
  const admin = kafkaFor(bootstrap).admin()
  await admin.connect()
  try {
    return await fn(admin)
  } finally {
    await admin.disconnect()
  }
}

function live(cluster: Cluster, stopped: ReadonlySet<Broker>): Broker[] {
  return cluster.brokers.filter((b) => !stopped.has(b))
}

function bootstrapOf(brokers: readonly Broker[]): string {
  return brokers.map((b) => b.bootstrapServers).join(',')
}

/** Partition rows compared between clients (errors are named differently by each). */
function rows(view: MetadataView): string {
  return JSON.stringify(
    [...view.topics]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([topic, ps]) => [topic, ps.map((p) => [p.leader, p.replicas, p.isr])]),
  )
}

function assertEvenPlacement(view: MetadataView, topic: string, brokers: number, rf: number): void {
  const partitions = view.topics.get(topic)!
  for (const p of partitions) {
    assert.equal(p.replicas.length, rf, `${topic}-${p.partition} replicas ${p.replicas}`)
    assert.equal(new Set(p.replicas).size, rf, `${topic}-${p.partition} repeats a broker`)
    assert.equal(p.leader, p.replicas[0], 'a new partition is led by its preferred replica')
    assert.deepEqual(p.isr, p.replicas, 'a new partition starts with every replica in sync')
  }
  const leaders = countPerBroker(view, [topic], (p) => [p.leader])
  const replicas = countPerBroker(view, [topic], (p) => p.replicas)
  assert.deepEqual(
    [...leaders.values()],
    Array(brokers).fill(partitions.length / brokers),
    `${topic}: leaders per broker ${JSON.stringify([...leaders])}`,
  )
  assert.deepEqual(
    [...replicas.values()],
    Array(brokers).fill((partitions.length * rf) / brokers),
    `${topic}: replicas per broker ${JSON.stringify([...replicas])}`,
  )
  // Kafka shifts followers so no two partitions led by one broker share the same followers.
  const patterns = new Set(partitions.map((p) => p.replicas.join(',')))
  assert.ok(patterns.size >= Math.min(partitions.length, brokers * (brokers - 1)) / 2, 'followers spread')
}

for (const brokers of [3, 5]) {
  test(`${brokers} brokers: topics placed with leaders and replicas spread evenly, seen alike by kafkajs and kcat`, {
    timeout: 60000,
  }, async () => {
    await withCluster(brokers, async (cluster) => {
      const topics = [
        { topic: 'rf3', numPartitions: brokers * 4, replicationFactor: 3 },
        { topic: 'rf2', numPartitions: brokers * 2, replicationFactor: 2 },
        { topic: 'rf1', numPartitions: brokers * 2, replicationFactor: 1 },
        { topic: 'rf-all', numPartitions: brokers, replicationFactor: brokers },
      ]
      await withAdmin(cluster.bootstrapServers, async (admin) => {
        assert.equal(await admin.createTopics({ topics, waitForLeaders: true }), true)
        const cluster_ = await admin.describeCluster()
        assert.equal(cluster_.brokers.length, brokers)
        const kafkajsView = await kafkajsMetadata(
          admin,
          topics.map((t) => t.topic),
        )
        for (const { topic, replicationFactor } of topics)
          assertEvenPlacement(kafkajsView, topic, brokers, replicationFactor)
        // Every broker answers Metadata for the whole cluster, and kcat agrees with kafkajs.
        for (const broker of cluster.brokers) {
          const view = await kcatMetadata(broker.bootstrapServers)
          assert.deepEqual(view.brokers, kafkajsView.brokers)
          assert.equal(view.controllerId, kafkajsView.controllerId)
          assert.equal(rows(view), rows(kafkajsView))
        }
      })
      const controllers = cluster.brokers.filter((b) => b.isController).map((b) => b.nodeId)
      assert.equal(controllers.length, 1, `exactly one controller, got ${controllers}`)
      assert.equal((await kcatMetadata(cluster.bootstrapServers)).controllerId, controllers[0])
    })
  })
}

/**
 * Stops `leaving` (a controlled shutdown) while recording every image a survivor applies,
 * and measures how long until kcat sees its partitions led elsewhere.
 */
async function stopAndWatch(
  cluster: Cluster,
  leaving: Broker,
  stopped: Set<Broker>,
  topic: string,
): Promise<{ images: ClusterImage[]; ledBefore: string[]; visibleMs: number }> {
  const survivors = live(cluster, new Set([...stopped, leaving]))
  const before = await kcatMetadata(bootstrapOf(survivors), topic)
  const ledBefore = ledBy(before, leaving.nodeId)
  const images: ClusterImage[] = []
  survivors[0].metadata.onChange((image) => images.push(image))
  const startedAt = performance.now()
  const stopping = leaving.stop()
  stopped.add(leaving)
  const visibleMs = await waitFor(
    'new leaders in kcat metadata',
    async () => {
      const view = await kcatMetadata(bootstrapOf(survivors), topic)
      return ledBy(view, leaving.nodeId).length === 0 && view.topics.get(topic)!.every((p) => p.leader >= 0)
        ? performance.now() - startedAt
        : undefined
    },
    10000,
    10,
  )
  await stopping
  return { images, ledBefore, visibleMs }
}

test('5 brokers: controlled shutdown moves leaderships to ISR members before the broker leaves; the controller role moves', {
  timeout: 60000,
}, async () => {
  await withCluster(5, async (cluster) => {
    const topic = 'shutdown'
    await withAdmin(cluster.bootstrapServers, (admin) =>
      admin.createTopics({
        topics: [{ topic, numPartitions: 10, replicationFactor: 3 }],
        waitForLeaders: true,
      }),
    )
    const stopped = new Set<Broker>()
    const timings: string[] = []
    for (const role of ['controller', 'follower'] as const) {
      const candidates = live(cluster, stopped)
      const leaving = candidates.find((b) => b.isController === (role === 'controller'))!
      const { images, ledBefore, visibleMs } = await stopAndWatch(cluster, leaving, stopped, topic)
      timings.push(`${role} ${leaving.nodeId}: ${visibleMs.toFixed(0)} ms for ${ledBefore.length} partitions`)
      assert.ok(ledBefore.length > 0, `broker ${leaving.nodeId} led something`)
      assert.ok(images.length > 0, 'the survivor saw the change')
      // In every image a survivor applied, a broker that is gone leads nothing: the
      // leaderships moved while it was still registered.
      let sawLeadersMoveFirst = false
      for (const image of images) {
        const partitions = image.topics.get(topic)!.partitions
        const stillLeads = partitions.filter((p) => p.leader === leaving.nodeId).length
        if (!image.brokers.has(leaving.nodeId))
          assert.equal(stillLeads, 0, `broker ${leaving.nodeId} left while leading ${stillLeads} partitions`)
        else if (stillLeads === 0) sawLeadersMoveFirst = true
      }
      assert.ok(sawLeadersMoveFirst, 'an image with leadership moved and the broker still registered')
      // Once it is gone it is in no ISR (the controller fences a broker that left).
      await waitFor(
        `broker ${leaving.nodeId} out of every ISR`,
        async () => {
          const view = await kcatMetadata(bootstrapOf(live(cluster, stopped)), topic)
          return view.topics.get(topic)!.every((p) => !p.isr.includes(leaving.nodeId)) ? true : undefined
        },
        5000,
      )
      // Every moved partition is led by a live member of its previous ISR, epoch bumped.
      const after = await kcatMetadata(bootstrapOf(live(cluster, stopped)), topic)
      for (const p of after.topics.get(topic)!) {
        assert.ok(!p.isr.includes(leaving.nodeId), `${topic}-${p.partition} ISR ${p.isr}`)
        assert.ok(p.isr.includes(p.leader) && p.leader !== leaving.nodeId)
        assert.equal(
          p.leader,
          p.replicas.find((id) => p.isr.includes(id)),
          'first ISR replica in order',
        )
      }
      // The controller role: exactly one live broker holds it and the metadata names it.
      const controller = await waitFor(
        'one controller',
        () => {
          const active = live(cluster, stopped).filter((b) => b.isController)
          return active.length === 1 ? active[0] : undefined
        },
        5000,
      )
      assert.notEqual(controller.nodeId, leaving.nodeId)
      await waitFor(
        'the metadata to name the controller',
        async () =>
          (await kcatMetadata(bootstrapOf(live(cluster, stopped)))).controllerId === controller.nodeId
            ? true
            : undefined,
        5000,
      )
      // Producing goes on on RF=3 partitions: every partition has a live leader to take it.
      const produced = await produceRaw(live(cluster, stopped), topic, after)
      assert.deepEqual(produced, Array(10).fill(ErrorCode.NONE))
    }
    console.log(`controlled shutdown → new leaders visible to kcat: ${timings.join('; ')}`)
  })
})

/** One raw Produce (acks=1) to each partition's leader; returns the error codes by partition. */
async function produceRaw(brokers: readonly Broker[], topic: string, view: MetadataView): Promise<number[]> {
  const codes: number[] = []
  for (const p of view.topics.get(topic)!) {
    const leader = brokers.find((b) => b.nodeId === p.leader)!
    const client = await RawClient.connect(leader.port)
    try {
      const records = encodeRecordBatchSync({
        records: [{ value: Buffer.from(`to ${p.partition}`) }],
        defaultTimestamp: Date.now(),
      })
      const response = await rawCall<ProduceResponse>(client, ApiKey.Produce, 9, {
        transactionalId: null,
        acks: 1,
        timeoutMs: 5000,
        topicData: [{ name: topic, partitionData: [{ index: p.partition, records }] }],
      })
      codes.push(response.responses[0].partitionResponses[0].errorCode)
    } finally {
      client.close()
    }
  }
  return codes
}

async function leaderEpochs(port: number, topic: string): Promise<number[]> {
  const client = await RawClient.connect(port)
  try {
    const response = await rawCall<MetadataResponse>(client, ApiKey.Metadata, 12, {
      topics: [{ name: topic, topicId: ZERO_UUID }],
      allowAutoTopicCreation: false,
      includeTopicAuthorizedOperations: false,
    })
    return response.topics[0].partitions.map((p) => p.leaderEpoch)
  } finally {
    client.close()
  }
}

test('3 brokers: ElectLeaders PREFERRED moves leadership back to the preferred replica', {
  timeout: 60000,
}, async () => {
  await withCluster(3, async (cluster) => {
    const topic = 'preferred'
    await withAdmin(cluster.bootstrapServers, (admin) =>
      admin.createTopics({
        topics: [{ topic, numPartitions: 6, replicationFactor: 3 }],
        waitForLeaders: true,
      }),
    )
    // Leadership away from the preferred replica with the ISR whole, as after a failover
    // once the broker has caught up again (partitions 0..3; 4 and 5 stay where they are).
    await cluster.brokers[0].metadata.update((image) => {
      const current = image.topics.get(topic)!
      const partitions = current.partitions.map((p) =>
        p.partition < 4 ? { ...p, leader: p.replicas[1], leaderEpoch: p.leaderEpoch + 1 } : p,
      )
      return { ...image, topics: new Map(image.topics).set(topic, { ...current, partitions }) }
    })
    const moved = await waitFor(
      'leaders away from the preferred replicas',
      async () => {
        const view = await kcatMetadata(cluster.bootstrapServers, topic)
        const away = view.topics.get(topic)!.filter((p) => p.leader !== p.replicas[0])
        return away.length === 4 ? view : undefined
      },
      5000,
    )
    const epochsBefore = await leaderEpochs(cluster.brokers[2].port, topic)
    const client = await RawClient.connect(cluster.brokers[1].port)
    try {
      const response = await rawCall<ElectLeadersResponse>(client, ApiKey.ElectLeaders, 2, {
        electionType: 0,
        topicPartitions: [{ topic, partitions: [0, 1, 2, 3, 4, 5] }],
        timeoutMs: 10000,
      })
      assert.equal(response.errorCode, ErrorCode.NONE)
      const results = response.replicaElectionResults[0].partitionResult
        .map((r) => [r.partitionId, r.errorCode] as const)
        .sort((a, b) => a[0] - b[0])
      assert.deepEqual(results, [
        [0, ErrorCode.NONE],
        [1, ErrorCode.NONE],
        [2, ErrorCode.NONE],
        [3, ErrorCode.NONE],
        [4, ErrorCode.ELECTION_NOT_NEEDED],
        [5, ErrorCode.ELECTION_NOT_NEEDED],
      ])
    } finally {
      client.close()
    }
    // Every broker (and so every client) sees the preferred replicas lead, with new epochs.
    for (const broker of cluster.brokers) {
      const view = await kcatMetadata(broker.bootstrapServers, topic)
      for (const p of view.topics.get(topic)!)
        assert.equal(p.leader, p.replicas[0], `${topic}-${p.partition}`)
    }
    const epochsAfter = await leaderEpochs(cluster.brokers[2].port, topic)
    assert.deepEqual(
      epochsAfter,
      epochsBefore.map((e, i) => (i < 4 ? e + 1 : e)),
    )
    await withAdmin(cluster.bootstrapServers, async (admin) => {
      const view = await kafkajsMetadata(admin, [topic])
      assert.equal(rows(view), rows(await kcatMetadata(cluster.bootstrapServers, topic)))
    })
    // The old leaders refuse produce for the partitions they gave back.
    const oldLeaderOf0 = cluster.brokers.find((b) => b.nodeId === moved.topics.get(topic)![0].leader)!
    const codes = await produceRaw([oldLeaderOf0], topic, {
      ...moved,
      topics: new Map([[topic, [moved.topics.get(topic)![0]]]]),
    })
    assert.deepEqual(codes, [ErrorCode.NOT_LEADER_OR_FOLLOWER])
    // The preferred replica is not live: PREFERRED_LEADER_NOT_AVAILABLE, nothing changes.
    const preferredOf0 = moved.topics.get(topic)![0].replicas[0]
    const survivor = cluster.brokers.find((b) => b.nodeId !== preferredOf0)!
    await cluster.brokers.find((b) => b.nodeId === preferredOf0)!.stop()
    const raw = await RawClient.connect(survivor.port)
    try {
      const response = await rawCall<ElectLeadersResponse>(raw, ApiKey.ElectLeaders, 2, {
        electionType: 0,
        topicPartitions: [{ topic, partitions: [0] }],
        timeoutMs: 10000,
      })
      assert.equal(
        response.replicaElectionResults[0].partitionResult[0].errorCode,
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
      )
    } finally {
      raw.close()
    }
  })
})
