/**
 * A deleted or re-created topic's old replica, while the broker has not got round to
 * deleting its log (issue 40, item 4). The replica manager applies images one at a time, and
 * under load an image can wait seconds behind an earlier one (creating a big topic's logs).
 * Meanwhile:
 * - a produce to the re-created name must not land in the old topic's log, acknowledged and
 *   then deleted with it: it answers UNKNOWN_TOPIC_OR_PARTITION (retriable) until the new
 *   topic's replica exists;
 * - an acks=all produce parked on the deleted topic's partition (its followers stopped
 *   fetching it, so its high watermark never moves again) answers at once with a retriable
 *   error, not at its timeout, as Kafka completes a stopped partition's delayed produces.
 * The apply is held here by gating one log creation, the way a slow disk holds it.
 * And a fetch session (KIP-227, v13+: topics by id) that held the old topic's partition
 * takes the new topic's as another partition: the old entry, forgotten or not, never reads
 * the new topic's log (before, the new entry moved the old one, which kept the old topic id,
 * and a follower got every answer for the old topic id and ignored it: the new partition's
 * high watermark waited for the ISR to shrink).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { TopicAdmin } from '../../src/metadata/topic-admin.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey, type FetchResponse, type ProduceResponse } from '../../src/protocol/generated/index.js'
import type { Broker } from '../../src/server/broker.js'
import type { TopicPartition, UnifiedLog } from '../../src/storage/unified-log.js'
import { startBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { waitUntil } from '../helpers/wait.js'
import { simpleBatch } from '../storage/helpers.js'
import { ReplicationCluster } from './in-process-cluster.js'

const create = (admin: TopicAdmin, name: string, partitions: number, replicationFactor = 1) =>
  admin.createTopics([{ name, numPartitions: partitions, replicationFactor, assignments: [], configs: {} }], {
    validateOnly: false,
    timeoutMs: 0,
  })

async function produce(
  client: RawClient,
  topic: string,
  partition: number,
  acks: number,
  timeoutMs: number,
): Promise<number> {
  const response = await rawCall<ProduceResponse>(
    client,
    ApiKey.Produce,
    9,
    {
      acks,
      timeoutMs,
      topicData: [{ name: topic, partitionData: [{ index: partition, records: simpleBatch(1) }] }],
    },
    timeoutMs + 30000,
  )
  return response.responses[0].partitionResponses[0].errorCode
}

/** Holds the creation of `topic`'s logs on `broker` until the returned function is called. */
function holdLogCreation(broker: Broker, topic: string): () => void {
  const logs = broker.logManager
  const original = logs.getOrCreateLog.bind(logs)
  let release!: () => void
  const gate = new Promise<void>((resolve) => {
    release = resolve
  })
  logs.getOrCreateLog = async (tp: TopicPartition, ...rest): Promise<UnifiedLog> => {
    if (tp.topic === topic) await gate
    return original(tp, ...rest)
  }
  return () => {
    logs.getOrCreateLog = original
    release()
  }
}

test('a re-created topic takes no record into the old topic while the broker still hosts it', async () => {
  const cluster = await startBroker({ properties: { 'auto.create.topics.enable': false } })
  const broker = cluster.brokers[0]
  const client = await RawClient.connect(Number(cluster.bootstrapServers.split(':').at(-1)))
  let release: (() => void) | null = null
  try {
    const admin = broker.topicAdmin
    await create(admin, 'recreated', 1)
    await waitUntil(
      'recreated-0 hosted',
      30000,
      () => broker.replicaManager.getPartition('recreated', 0) !== undefined,
    )
    assert.equal(await produce(client, 'recreated', 0, 1, 5000), ErrorCode.NONE)
    const oldTopicId = broker.metadataImage().topics.get('recreated')!.topicId

    // The apply queue stops at the next topic's log creation; the deletion and the new
    // topic queue behind it, so the old replica stays hosted.
    release = holdLogCreation(broker, 'blocker')
    await create(admin, 'blocker', 1)
    await admin.deleteTopics([{ name: 'recreated', topicId: oldTopicId }])
    await create(admin, 'recreated', 3)
    const newTopicId = broker.metadataImage().topics.get('recreated')!.topicId
    assert.notEqual(newTopicId, oldTopicId)

    assert.equal(
      await produce(client, 'recreated', 0, 1, 5000),
      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
      'the old replica of recreated-0 took a record meant for the new topic',
    )

    release()
    release = null
    await waitUntil('the new recreated-0 hosted', 30000, () => {
      const partition = broker.replicaManager.getPartition('recreated', 0)
      return partition !== undefined && partition.id.topicId === newTopicId && partition.isLeader
    })
    // Nothing of the old topic, nor of the refused produce, is in the new topic's log.
    assert.equal(broker.replicaManager.getPartition('recreated', 0)!.log.logEndOffset, 0)
    assert.equal(await produce(client, 'recreated', 0, 1, 5000), ErrorCode.NONE)
    assert.equal(broker.replicaManager.getPartition('recreated', 0)!.log.logEndOffset, 1)
  } finally {
    release?.()
    client.socket.destroy()
    await cluster.stop()
  }
})

test('an acks=all produce parked on a deleted partition answers at once, not at its timeout', async () => {
  const cluster = await ReplicationCluster.start(3, {
    'broker.session.timeout.ms': 3000,
    // Long enough that the ISR keeps the frozen followers while the produce waits.
    'replica.lag.time.max.ms': 60000,
    'auto.create.topics.enable': false,
  })
  const client = { raw: null as RawClient | null }
  const frozen: number[] = []
  try {
    await cluster.createTopic('parked', 1, 3)
    const state = cluster.state('parked', 0)
    const leader = cluster.broker(state.leader)
    client.raw = await RawClient.connect(Number(leader.bootstrapServers.split(':').at(-1)))
    // The followers stop fetching: the record reaches the leader's log, never the HW.
    for (const id of state.replicas.filter((id) => id !== state.leader)) {
      cluster.transports[id].freeze()
      frozen.push(id)
    }
    const producedTimeoutMs = 30000
    const startedMs = Date.now()
    const answer = produce(client.raw, 'parked', 0, -1, producedTimeoutMs)
    await waitUntil(
      'the record in the leader log',
      30000,
      () => cluster.replica(state.leader, 'parked', 0).log.logEndOffset === 1,
    )
    const topicId = leader.metadataImage().topics.get('parked')!.topicId
    await leader.topicAdmin.deleteTopics([{ name: 'parked', topicId }])
    const errorCode = await answer
    const elapsedMs = Date.now() - startedMs
    console.log(`# acks=all produce on a deleted partition answered after ${elapsedMs} ms`)
    // At its timeout it would be REQUEST_TIMED_OUT (the old replica still thought itself leader).
    assert.equal(errorCode, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert.ok(elapsedMs < producedTimeoutMs, `answered after ${elapsedMs} ms`)
  } finally {
    for (const id of frozen) cluster.transports[id].thaw()
    client.raw?.socket.destroy()
    await cluster.close()
  }
})

/** A consumer's Fetch v13 (topics by id) of partition 0 of each topic id, in a session. */
function sessionFetch(
  client: RawClient,
  sessionId: number,
  sessionEpoch: number,
  add: { topicId: string; fetchOffset: number }[],
  forget: string[],
): Promise<FetchResponse> {
  return rawCall<FetchResponse>(client, ApiKey.Fetch, 13, {
    replicaId: -1,
    maxWaitMs: 0,
    minBytes: 1,
    maxBytes: 1 << 20,
    isolationLevel: 0,
    sessionId,
    sessionEpoch,
    topics: add.map(({ topicId, fetchOffset }) => ({
      topic: '',
      topicId,
      partitions: [
        {
          partition: 0,
          currentLeaderEpoch: -1,
          fetchOffset: BigInt(fetchOffset),
          lastFetchedEpoch: -1,
          logStartOffset: -1n,
          partitionMaxBytes: 1 << 20,
        },
      ],
    })),
    forgottenTopicsData: forget.map((topicId) => ({ topic: '', topicId, partitions: [0] })),
    rackId: '',
  })
}

/** What an answer says per topic id about partition 0: its error code and record bytes. */
const answered = (response: FetchResponse) =>
  Object.fromEntries(
    response.responses.map((t) => {
      const p = t.partitions[0]
      return [t.topicId, { errorCode: p.errorCode, bytes: (p.records as Buffer | null)?.length ?? 0 }]
    }),
  )

test('a fetch session takes a re-created topic as another topic: the old entry never reads the new log', async () => {
  const cluster = await startBroker({ properties: { 'auto.create.topics.enable': false } })
  const broker = cluster.brokers[0]
  const client = await RawClient.connect(Number(cluster.bootstrapServers.split(':').at(-1)))
  try {
    const admin = broker.topicAdmin
    await create(admin, 'resession', 1)
    await waitUntil(
      'resession-0 led',
      30000,
      () => broker.replicaManager.getPartition('resession', 0)?.isLeader === true,
    )
    assert.equal(await produce(client, 'resession', 0, 1, 5000), ErrorCode.NONE)
    const oldTopicId = broker.metadataImage().topics.get('resession')!.topicId
    // Two sessions on the old topic, both read to its end (offset 1).
    const sessions: number[] = []
    for (let i = 0; i < 2; i++) {
      const opened = await sessionFetch(client, 0, 0, [{ topicId: oldTopicId, fetchOffset: 1 }], [])
      assert.equal(opened.errorCode, ErrorCode.NONE)
      assert.notEqual(opened.sessionId, 0)
      sessions.push(opened.sessionId)
    }

    await admin.deleteTopics([{ name: 'resession', topicId: oldTopicId }])
    await create(admin, 'resession', 1)
    const newTopicId = broker.metadataImage().topics.get('resession')!.topicId
    assert.notEqual(newTopicId, oldTopicId)
    await waitUntil('the new resession-0 led', 30000, () => {
      const partition = broker.replicaManager.getPartition('resession', 0)
      return partition?.id.topicId === newTopicId && partition.isLeader
    })
    assert.equal(await produce(client, 'resession', 0, 1, 5000), ErrorCode.NONE)
    assert.equal(await produce(client, 'resession', 0, 1, 5000), ErrorCode.NONE)

    // As a follower's fetcher did in the stall: the old topic forgotten (by its id, which
    // the leader no longer knows), then the new one added. Keyed by name, the forget found
    // nothing and the add moved the old entry, which kept the old id: the new partition was
    // read and answered under the old topic id, which the follower ignores.
    const forgotten = await sessionFetch(client, sessions[0], 1, [], [oldTopicId])
    assert.equal(forgotten.errorCode, ErrorCode.NONE)
    const replaced = answered(
      await sessionFetch(client, sessions[0], 2, [{ topicId: newTopicId, fetchOffset: 0 }], []),
    )
    assert.equal(replaced[oldTopicId], undefined, 'the new log read under the old topic id')
    assert.equal(replaced[newTopicId]?.errorCode, ErrorCode.NONE)
    assert.ok((replaced[newTopicId]?.bytes ?? 0) > 0, 'the new partition is not read')

    // The new one added with the old one not forgotten (as the fetcher did when it keyed
    // partitions by name): the old entry answers its error and reads nothing of the new log.
    const both = answered(
      await sessionFetch(client, sessions[1], 1, [{ topicId: newTopicId, fetchOffset: 0 }], []),
    )
    assert.deepEqual(both[oldTopicId], { errorCode: ErrorCode.UNKNOWN_TOPIC_ID, bytes: 0 })
    assert.equal(both[newTopicId]?.errorCode, ErrorCode.NONE)
    assert.ok((both[newTopicId]?.bytes ?? 0) > 0, 'the new partition is not read')
  } finally {
    client.socket.destroy()
    await cluster.stop()
  }
})
