/**
 * Issue 38: a broker that keeps its store session and writes nothing must still follow the
 * cluster when etcd 3.4 (before 3.4.31, etcd issue 17529) leaves its watch unsynced for good.
 * The view's own check (test/cluster/session-stall.test.ts) only runs while the broker waits
 * for its own write; here only the etcd store's probe could find the stall.
 *
 * The fault is real: SIGSTOP of a `tidelog broker` process that is not the controller, with a
 * session timeout longer than the pause (it stays registered), following HOSTED_PARTITIONS
 * (RF 3) it never leads (the leaders drop it from their ISRs meanwhile), while the controller
 * creates, on the other two brokers only, a topic of STALL_PARTITIONS partitions (bytes to
 * fill the paused client's socket) and STALL_TOPICS small topics (more revisions than etcd
 * buffers for a stream that does not drain); then SIGCONT. Nothing in that asks the paused
 * broker to write. It must show the others' image, and be back in its ISRs, within
 * RECOVERY_BOUND_MS, having kept its session.
 * The default sizes keep it short (about 5 s); `npm run test:idle-watch-stall` runs the sizes
 * at which the session-stall test reached etcd's stall. Neither reached it in the runs
 * recorded in docs/notes/scale.md (etcd sent everything; no watch restart), so this checks
 * the scenario and that the probe does not get in the way of a catch-up; the probe's own
 * finding is tested with a stall made client-side (test/metadata/store/etcd-watch-probe.test.ts).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { CreateTopicsResponse } from '../../src/protocol/generated/create-topics-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import {
  type BrokerProcess,
  type EtcdCluster,
  freePort,
  waitFor,
  withEtcdCluster,
} from '../helpers/broker-process.js'
import { kcatMetadata } from '../helpers/metadata-view.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

const HOSTED_PARTITIONS = Number(process.env.TIDELOG_IDLE_STALL_HOSTED ?? 3)
const STALL_PARTITIONS = Number(process.env.TIDELOG_IDLE_STALL_PARTITIONS ?? 50)
const STALL_TOPICS = Number(process.env.TIDELOG_IDLE_STALL_TOPICS ?? 10)
/** The idle broker's broker.session.timeout.ms: longer than the pause; its probe looks every third. */
const IDLE_SESSION_MS = Number(process.env.TIDELOG_IDLE_STALL_SESSION_MS ?? 15000)
/** Kept paused this much longer after the creation. */
const HOLD_MS = Number(process.env.TIDELOG_IDLE_STALL_HOLD_MS ?? 0)
/** Between the small topics' creations (0: TOPICS_IN_FLIGHT at a time), to spread the writes over the pause. */
const TOPIC_GAP_MS = Number(process.env.TIDELOG_IDLE_STALL_TOPIC_GAP_MS ?? 0)
const TOPICS_IN_FLIGHT = 10
/** A stall is found within about a session timeout after SIGCONT; the restart reads everything. */
const RECOVERY_BOUND_MS = IDLE_SESSION_MS * 2 + 20_000

/**
 * A topic of `numPartitions` with replicas `brokerIds`, the first two taking turns to lead:
 * the idle broker, when one of them, is always last (a follower, which writes nothing).
 */
async function createTopic(
  broker: BrokerProcess,
  name: string,
  numPartitions: number,
  brokerIds: readonly number[],
): Promise<void> {
  const [first = 0, second = 0, ...rest] = brokerIds
  const assignments = Array.from({ length: numPartitions }, (_, partitionIndex) => ({
    partitionIndex,
    brokerIds: partitionIndex % 2 === 0 ? [first, second, ...rest] : [second, first, ...rest],
  }))
  const client = await RawClient.connect(broker.spec.port)
  try {
    const response = await rawCall<CreateTopicsResponse>(
      client,
      ApiKey.CreateTopics,
      5,
      {
        topics: [{ name, numPartitions: -1, replicationFactor: -1, assignments, configs: [] }],
        timeoutMs: 60_000,
        validateOnly: false,
      },
      70_000,
    )
    const [topic] = response.topics
    assert.equal(topic?.errorCode, 0, `CreateTopics ${name}: ${topic?.errorCode} ${topic?.errorMessage}`)
  } finally {
    client.socket.destroy()
  }
}

test('a broker that keeps its session and writes nothing follows the topics created while it was paused', {
  timeout: 600_000,
}, async () => {
  const httpPorts = [await freePort(), await freePort(), await freePort()]
  const brokerProperties = (nodeId: number) => ({
    'tidelog.http.listener': `127.0.0.1:${httpPorts[nodeId - 1]}`,
    // Brokers 2 and 3 may be paused; the controller is whichever of them is not.
    ...(nodeId === 1 ? {} : { 'broker.session.timeout.ms': IDLE_SESSION_MS }),
  })
  // The leaders drop the paused follower from their ISRs while it is paused (more writes).
  const properties = { 'replica.lag.time.max.ms': 3000 }
  await withEtcdCluster({ brokers: 3, properties, brokerProperties }, async (cluster: EtcdCluster) => {
    const controllerId = (await kcatMetadata(cluster.brokers[0].address)).controllerId
    const idle = cluster.brokers.find((b) => b.nodeId !== 1 && b.nodeId !== controllerId)
    assert.ok(idle !== undefined, `a broker other than 1 and the controller ${controllerId}`)
    const creator = cluster.broker(controllerId)
    const others = cluster.brokers.filter((b) => b !== idle).map((b) => b.nodeId)
    const replicas = [others[0] ?? 0, others[1] ?? 0]
    if (HOSTED_PARTITIONS > 0)
      await createTopic(creator, 'idle-rf3', HOSTED_PARTITIONS, [...replicas, idle.nodeId])
    const metricsOfIdle = async () => {
      const text = await (await fetch(`http://127.0.0.1:${httpPorts[idle.nodeId - 1]}/metrics`)).text()
      return (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1])
    }
    idle.current.signal('SIGSTOP')
    const stoppedAt = performance.now()
    let resumed = false
    try {
      if (STALL_PARTITIONS > 0) await createTopic(creator, 'idle-bulk', STALL_PARTITIONS, replicas)
      for (let i = 0; TOPIC_GAP_MS > 0 && i < STALL_TOPICS; i++) {
        await createTopic(creator, `idle-small-${i}`, 1, replicas)
        await sleep(TOPIC_GAP_MS)
      }
      for (let i = 0; TOPIC_GAP_MS === 0 && i < STALL_TOPICS; i += TOPICS_IN_FLIGHT)
        await Promise.all(
          Array.from({ length: Math.min(TOPICS_IN_FLIGHT, STALL_TOPICS - i) }, (_, j) =>
            createTopic(creator, `idle-small-${i + j}`, 1, replicas),
          ),
        )
      if (HOLD_MS > 0) await sleep(HOLD_MS)
      const pausedForMs = performance.now() - stoppedAt
      idle.current.signal('SIGCONT')
      resumed = true
      const resumedAt = performance.now()
      assert.ok(pausedForMs < IDLE_SESSION_MS, `paused ${pausedForMs.toFixed(0)} ms, past its session`)
      const topicCount = (HOSTED_PARTITIONS > 0 ? 1 : 0) + (STALL_PARTITIONS > 0 ? 1 : 0) + STALL_TOPICS
      await waitFor(
        'the idle broker showing every topic created while it was paused, and back in its ISRs',
        async () => {
          const [own, other] = await Promise.all([kcatMetadata(idle.address), kcatMetadata(creator.address)])
          const rf3 = other.topics.get('idle-rf3') ?? []
          const inIsrs = rf3.every((p) => p.isr.includes(idle.nodeId))
          return own.topics.size === topicCount && inIsrs ? true : undefined
        },
        RECOVERY_BOUND_MS,
        200,
      )
      const recoveredMs = performance.now() - resumedAt
      const sample = await metricsOfIdle()
      assert.equal(sample('kafka_server_sessionexpirelistener_sessionexpires_total'), 0, 'kept its session')
      const probeStalls = sample('kafka_server_brokermetadatametrics_watchprobestalls_total')
      const restarts = sample('kafka_server_brokermetadatametrics_watchrestarts_total')
      // The view's own check runs only while it waits for its own write: this broker made none.
      assert.equal(
        sample('kafka_server_brokermetadatametrics_watchstalls_total'),
        0,
        "the view's check never ran",
      )
      assert.deepEqual(cluster.errorLogs(), [], 'unexpected error logs')
      console.log(
        `idle watch stall: broker ${idle.nodeId} paused ${pausedForMs.toFixed(0)} ms while ${STALL_PARTITIONS} + ` +
          `${STALL_TOPICS} partitions were created; in sync ${recoveredMs.toFixed(0)} ms after SIGCONT; ` +
          `watch restarts ${restarts}, of them found by the probe ${probeStalls}`,
      )
    } finally {
      if (!resumed) idle.current.signal('SIGCONT')
    }
  })
})
