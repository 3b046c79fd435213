/**
 * Issue 39, item 3: etcd killed for 20 s under a steady acks=all producer (3 broker
 * processes, 6 partitions at RF 3, min.insync.replicas 2, nothing else changing). A stopped
 * etcd expires no lease (it renews every one for a full TTL when it starts again), and a
 * Kafka broker goes on serving while its controller quorum is unreachable: so do these.
 * Acknowledgements go on through the outage, a change that needs the store (a new topic)
 * fails with a Kafka error code meanwhile, and afterwards every acknowledged record is
 * there exactly once. Before the fix every broker ended its session one TTL (3 s) into the
 * outage and stopped leading until etcd returned: no acknowledgement for 17 s.
 */
import assert from 'node:assert/strict'
import { availableParallelism, loadavg } from 'node:os'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Producer } from 'kafkajs'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { CreateTopicsResponse } from '../../src/protocol/generated/create-topics-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import { type EtcdCluster, waitFor, withEtcdCluster } from '../helpers/broker-process.js'
import { kafka } from '../helpers/cluster-clients.js'
import { kcatConsume } from '../helpers/compat-clients.js'
import { kcatMetadata } from '../helpers/metadata-view.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

const TOPIC = 'outage'
const PARTITIONS = 6
const OUTAGE_MS = 20_000
/** The bound on the longest wait between two acknowledgements. */
const ACK_GAP_BOUND_MS = 1000

interface Ack {
  readonly value: string
  readonly atMs: number
}

/** One acks=all record at a time, round robin over the partitions, until `stop` says so. */
async function produceSteadily(producer: Producer, acks: Ack[], stop: () => boolean): Promise<void> {
  for (let seq = 0; !stop(); seq++) {
    const value = `r${seq}`
    await producer.send({
      topic: TOPIC,
      acks: -1,
      timeout: 10_000,
      messages: [{ partition: seq % PARTITIONS, value }],
    })
    acks.push({ value, atMs: performance.now() })
  }
}

/** CreateTopics while etcd is down: an answer with an error code, not a closed connection. */
async function createTopicDuringOutage(cluster: EtcdCluster): Promise<number> {
  const client = await RawClient.connect(cluster.brokers[1].spec.port)
  try {
    const response = await rawCall<CreateTopicsResponse>(
      client,
      ApiKey.CreateTopics,
      5,
      {
        topics: [
          { name: 'during-outage', numPartitions: 1, replicationFactor: 3, assignments: [], configs: [] },
        ],
        timeoutMs: 3000,
        validateOnly: false,
      },
      15_000,
    )
    return response.topics[0].errorCode
  } finally {
    client.socket.destroy()
  }
}

/**
 * Kafka's default broker.session.timeout.ms, not the 3 s of the other etcd tests: a restarted
 * etcd opens its port about 1-2 s before it answers, and a broker's session is proven only
 * until one TTL after etcd last refused a connection (README "Not done yet": an etcd slower
 * than that to answer ends sessions). At 3 s that window decided the test by chance.
 */
const SESSION_TIMEOUT_MS = 9000

test('etcd killed for 20 s under an acks=all producer: acknowledgements go on, nothing lost, a new topic fails with a Kafka error', {
  timeout: 120_000,
}, async () => {
  const properties = { 'min.insync.replicas': 2, 'broker.session.timeout.ms': SESSION_TIMEOUT_MS }
  await withEtcdCluster({ brokers: 3, properties }, async (cluster) => {
    const admin = kafka(cluster.liveBootstrap).admin()
    await admin.connect()
    try {
      await admin.createTopics({
        topics: [{ topic: TOPIC, numPartitions: PARTITIONS, replicationFactor: 3 }],
        waitForLeaders: true,
      })
    } finally {
      await admin.disconnect()
    }
    await waitFor(
      'every replica in sync',
      async () => {
        const view = await kcatMetadata(cluster.liveBootstrap)
        return view.topics.get(TOPIC)?.every((p) => p.isr.length === 3) === true ? true : undefined
      },
      15_000,
      100,
    )
    const before = await kcatMetadata(cluster.liveBootstrap)
    const producer = kafka(cluster.liveBootstrap).producer({ allowAutoTopicCreation: false })
    await producer.connect()
    const acks: Ack[] = []
    let stopping = false
    const producing = produceSteadily(producer, acks, () => stopping)
    // Awaited below; a failure meanwhile is reported there, not as an unhandled rejection.
    producing.catch(() => undefined)
    try {
      await sleep(2000)
      const killedAt = performance.now()
      cluster.etcd.kill()
      // Past every session's TTL, so the brokers must go on without a confirmed one.
      await sleep(SESSION_TIMEOUT_MS + 3000)
      const createError = await createTopicDuringOutage(cluster)
      await sleep(Math.max(0, OUTAGE_MS - (performance.now() - killedAt)))
      const restartedAt = performance.now()
      await cluster.etcd.restart()
      await sleep(3000)
      stopping = true
      await producing

      assert.equal(createError, ErrorCode.REQUEST_TIMED_OUT, 'CreateTopics while etcd is down')
      const lateInOutage = acks.filter(
        (a) => a.atMs > killedAt + SESSION_TIMEOUT_MS + 1000 && a.atMs < restartedAt,
      ).length
      assert.ok(lateInOutage > 0, 'no acknowledgement while etcd was down past the session TTL')
      let gapMs = 0
      for (let i = 1; i < acks.length; i++) gapMs = Math.max(gapMs, acks[i].atMs - acks[i - 1].atMs)
      console.log(
        `etcd down ${Math.round(restartedAt - killedAt)} ms: ${acks.length} acks=all records acknowledged, ` +
          `${lateInOutage} of them past the session TTL; longest wait between two: ${Math.round(gapMs)} ms`,
      )
      // A timing bound, asserted where the machine has CPU to spare (the behaviour, acks
      // through the outage, is asserted above whatever the load).
      if (loadavg()[0] / availableParallelism() < 2)
        assert.ok(gapMs <= ACK_GAP_BOUND_MS, `acknowledgements stopped for ${Math.round(gapMs)} ms`)
    } finally {
      stopping = true
      await producing.catch(() => undefined)
      await producer.disconnect()
    }

    // Nothing changed: the same leaders, and every acknowledged record there exactly once.
    const after = await kcatMetadata(cluster.liveBootstrap)
    assert.deepEqual(
      after.topics.get(TOPIC)!.map((p) => [p.partition, p.leader]),
      before.topics.get(TOPIC)!.map((p) => [p.partition, p.leader]),
    )
    const read = await kcatConsume(cluster.liveBootstrap, TOPIC, { timeoutMs: 30_000 })
    assert.equal(read.code, 0, read.stderr)
    const counts = new Map<string, number>()
    for (const { value } of read.records) if (value !== null) counts.set(value, (counts.get(value) ?? 0) + 1)
    const missing = acks
      .filter((a) => counts.get(a.value) !== 1)
      .map((a) => `${a.value}×${counts.get(a.value) ?? 0}`)
    assert.deepEqual(
      missing.slice(0, 10),
      [],
      `${missing.length} acknowledged records not there exactly once`,
    )
    assert.deepEqual(cluster.errorLogs(), [])
  })
})
