/**
 * Issue 38 (docs/notes/scale.md, "What breaks at 33,000"): a broker paused past its store
 * session while the other brokers create partitions must come back: register again, catch
 * its image up and serve as before. On etcd 3.4 (before 3.4.31, as Debian ships it) the
 * watch of a client that stopped reading while etcd had much to send can stay unsynced for
 * good (etcd issue 17529): the paused broker's image stayed stale and its registration
 * after the lost session waited for ever for its own write to come back through that watch.
 *
 * The fault is real: SIGSTOP of a `tidelog broker` process hosting HOSTED_PARTITIONS (RF 3)
 * for longer than broker.session.timeout.ms while the others shrink those ISRs, create a
 * topic of STALL_PARTITIONS partitions (bytes to fill the paused client's socket) and then
 * STALL_TOPICS small topics (more revisions than etcd buffers for a watch stream that does
 * not drain), then SIGCONT. The default sizes keep it short (12-18 s on 2 loaded cores) and check the
 * re-registration and the stall's log, but do not reach etcd's stall; `npm run
 * test:session-stall` (1,000 + 1,000 + 300, about a minute) does: without the watch restart
 * it failed there, the paused broker's image stale 30 s after SIGCONT.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { CreateTopicsResponse } from '../../src/protocol/generated/create-topics-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import {
  type BrokerProcess,
  type EtcdCluster,
  freePort,
  waitFor,
  withEtcdCluster,
} from '../helpers/broker-process.js'
import { allowErrorLogs } from '../helpers/log-guard.js'
import { kcatMetadata } from '../helpers/metadata-view.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

const HOSTED_PARTITIONS = Number(process.env.TIDELOG_SESSION_STALL_HOSTED ?? 3)
const STALL_PARTITIONS = Number(process.env.TIDELOG_SESSION_STALL_PARTITIONS ?? 300)
const STALL_TOPICS = Number(process.env.TIDELOG_SESSION_STALL_TOPICS ?? 50)
const TOPICS_IN_FLIGHT = 10
/** From SIGCONT until the paused broker is registered, in sync with the others' image and serving. */
const RECOVERY_BOUND_MS = 30_000

/** CreateTopics v5 of `name` through `broker`, answered without error. */
async function createTopic(
  broker: BrokerProcess,
  name: string,
  numPartitions: number,
  replicationFactor: number,
): Promise<void> {
  const client = await RawClient.connect(broker.spec.port)
  try {
    const response = await rawCall<CreateTopicsResponse>(
      client,
      ApiKey.CreateTopics,
      5,
      {
        topics: [{ name, numPartitions, replicationFactor, assignments: [], configs: [] }],
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

/** What `broker` itself serves: its brokers, controller and topic count. */
async function viewOf(broker: BrokerProcess): Promise<string> {
  const view = await kcatMetadata(broker.address)
  return `brokers ${view.brokers.join(',')} controller ${view.controllerId} topics ${view.topics.size}`
}

test('a broker paused past its session while partitions are created registers again, catches its image up and leads again', {
  timeout: 180_000,
}, async () => {
  allowErrorLogs(/"msg":"metadata store session lost/)
  const httpPorts = [await freePort(), await freePort(), await freePort()]
  const brokerProperties = (nodeId: number) => ({
    'tidelog.http.listener': `127.0.0.1:${httpPorts[nodeId - 1]}`,
  })
  await withEtcdCluster({ brokers: 3, brokerProperties }, async (cluster: EtcdCluster) => {
    const [paused, creator] = cluster.brokers
    await createTopic(creator, 'stall-rf3', HOSTED_PARTITIONS, 3)
    const lineCount = paused.current.lines.length
    paused.current.signal('SIGSTOP')
    const stoppedAt = performance.now()
    let resumed = false
    try {
      await waitFor(
        'the paused broker out of the cluster',
        async () => ((await kcatMetadata(creator.address)).brokers.length === 2 ? true : undefined),
        20_000,
        100,
      )
      if (STALL_PARTITIONS > 0) await createTopic(creator, 'stall-bulk', STALL_PARTITIONS, 2)
      for (let i = 0; i < STALL_TOPICS; i += TOPICS_IN_FLIGHT)
        await Promise.all(
          Array.from({ length: Math.min(TOPICS_IN_FLIGHT, STALL_TOPICS - i) }, (_, j) =>
            createTopic(creator, `stall-small-${i + j}`, 1, 2),
          ),
        )
      const pausedForMs = performance.now() - stoppedAt
      paused.current.signal('SIGCONT')
      resumed = true
      const resumedAt = performance.now()
      const topicCount = 1 + (STALL_PARTITIONS > 0 ? 1 : 0) + STALL_TOPICS
      await waitFor(
        'the resumed broker registered, with the image the others have',
        async () => {
          const [own, other] = await Promise.all([
            kcatMetadata(paused.address),
            kcatMetadata(creator.address),
          ])
          const inSync =
            own.brokers.length === 3 &&
            other.brokers.length === 3 &&
            own.controllerId === other.controllerId &&
            own.topics.size === topicCount
          // Its RF=3 partitions have it back in their ISR: it fetches from the current leaders.
          const rf3 = other.topics.get('stall-rf3') ?? []
          return inSync && rf3.every((p) => p.isr.includes(paused.nodeId)) ? true : undefined
        },
        RECOVERY_BOUND_MS,
        200,
      ).catch(async (error: unknown) => {
        const views = `paused: ${await viewOf(paused)}; others: ${await viewOf(creator)}`
        const lines = paused.current.lines.slice(lineCount).filter((l) => /"level":[45]/.test(l))
        throw new Error(`${error}\n${views}\n${lines.join('\n')}`, { cause: error })
      })
      const recoveredMs = performance.now() - resumedAt
      assert.ok(
        paused.current.lines.slice(lineCount).some((l) => l.includes('metadata store session lost')),
        'the broker logged that it lost its session',
      )
      assert.ok(
        paused.current.lines.slice(lineCount).some((l) => l.includes('event loop stalled')),
        'the pause was logged as an event-loop stall',
      )
      const metrics = await (await fetch(`http://127.0.0.1:${httpPorts[paused.nodeId - 1]}/metrics`)).text()
      const sample = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1])
      assert.equal(sample('kafka_server_sessionexpirelistener_sessionexpires_total'), 1)
      assert.equal(sample('kafka_server_sessionexpirelistener_reregistrations_total'), 1)
      assert.ok(sample('nodejs_eventloop_stalls_total') >= 1, 'the pause counted as a stall')
      assert.deepEqual(cluster.errorLogs([/metadata store session lost/]), [], 'unexpected error logs')
      console.log(
        `session stall: paused ${pausedForMs.toFixed(0)} ms while ${STALL_PARTITIONS} + ${STALL_TOPICS} partitions were created; ` +
          `registered and in sync ${recoveredMs.toFixed(0)} ms after SIGCONT; metadata watch restarts ` +
          sample('kafka_server_brokermetadatametrics_watchrestarts_total') +
          ` (the view's check ${sample('kafka_server_brokermetadatametrics_watchstalls_total')}, the store's probe ` +
          `${sample('kafka_server_brokermetadatametrics_watchprobestalls_total')})`,
      )
    } finally {
      if (!resumed) paused.current.signal('SIGCONT')
    }
  })
})
