/**
 * Issue 39: three `tidelog broker` processes on an etcd with its default limits (128 ops
 * per transaction, 1.5 MiB per request), as the README starts it. CreateTopics of one
 * topic of 2,000 partitions, and of 50 topics at once, at RF 3, answer NONE (not a closed
 * connection); after kill -9 of a broker that leads about a third of them and sits in
 * every ISR, every partition is led again by a live broker within
 * broker.session.timeout.ms + 2 s, and no ISR names the dead broker. Before the fix
 * etcd refused the controller's one transaction for all of them ("too many operations in
 * txn request") and it was retried unchanged for ever. An idempotent acks=all producer
 * (kafkajs) writes to a few partitions each broker leads all along: its writes resume
 * after the failover and, at the end, every record it had acknowledged is in the log
 * exactly once at its offset. The dead broker is started again; once it is back in every
 * ISR the other broker that is not the controller, leading about half the partitions, gets
 * SIGTERM: its controlled shutdown moves every leadership and ISR membership (over 3,000
 * partition changes, split into transactions) before it exits, so the controller elects
 * nothing when it goes. Measured times are printed.
 *
 * The sizes are CI's unless TIDELOG_ETCD_LIMITS_PARTITIONS (the big topic's partitions) and
 * TIDELOG_ETCD_LIMITS_TOPICS (topics created at once) say otherwise: `npm run test:scale`
 * runs issue 38's 10,000 partitions and 100 topics. The waits grow with the partition count;
 * the bounds the issue sets (failover, controlled shutdown) do not.
 */
import assert from 'node:assert/strict'
import { availableParallelism, loadavg } from 'node:os'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { CreateTopicsResponse } from '../../src/protocol/generated/create-topics-response.js'
import { AckedProducer, checkAckedReadBack } from '../helpers/acked-producer.js'
import {
  type BrokerProcess,
  type EtcdCluster,
  type LogLine,
  SESSION_TIMEOUT_MS,
  waitFor,
  withEtcdCluster,
} from '../helpers/broker-process.js'
import { allInSync, createTopicsRaw, inSyncUnderPreferredLeaders } from '../helpers/create-topics.js'
import { kcatMetadata, ledBy, type MetadataView, notFailedOver } from '../helpers/metadata-view.js'

/**
 * Twice the other cluster tests' session: three brokers each creating 2,000 partitions on
 * two shared cores block their event loops for seconds, and at 3 s every session expired
 * at once during the creations (a stall this test is not about).
 */
const SESSION_MS = 2 * SESSION_TIMEOUT_MS
const FAILOVER_BOUND_MS = SESSION_MS + 2000
function sizeFromEnv(name: string, fallback: number): number {
  const text = process.env[name]
  if (text === undefined || text === '') return fallback
  const n = Number(text)
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${text}`)
  return n
}
const BIG_PARTITIONS = sizeFromEnv('TIDELOG_ETCD_LIMITS_PARTITIONS', 2000)
const TOPICS = sizeFromEnv('TIDELOG_ETCD_LIMITS_TOPICS', 50)
const TOPIC_PARTITIONS = 4
/** Waits measured at CI's 2,200 partitions, stretched in proportion above it. */
const WAIT_SCALE = Math.max(1, (BIG_PARTITIONS + TOPICS * TOPIC_PARTITIONS) / 2200)
const CREATE_TIMEOUT_MS = 90_000 * WAIT_SCALE
/** Partitions each broker leads that the acks=all producer writes. */
const SAMPLED_PER_BROKER = 4
/** After a failover, the producer's next acknowledgement on every sampled partition. */
const WRITES_RESUME_MS = 30_000 * WAIT_SCALE
/**
 * SIGTERM to exit with 2,000 leaderships to move and 2,200 ISRs to leave (a few seconds
 * measured; asserted when the machine has CPU to spare, as the failover bound).
 */
const CONTROLLED_EXIT_MS = 20_000

/** CreateTopics v5 on a raw connection: the answer, or the connection closed (the bug). */
function createTopics(
  cluster: EtcdCluster,
  topics: readonly { name: string; numPartitions: number }[],
): Promise<CreateTopicsResponse> {
  return createTopicsRaw(cluster.brokers[0].spec.port, topics, CREATE_TIMEOUT_MS)
}

test(`on a default etcd: CreateTopics of ${BIG_PARTITIONS} partitions and of ${TOPICS} topics succeed; a dead broker fails over within the session timeout + 2 s, acks=all writes resume, nothing acknowledged is lost; a controlled shutdown moves its leaderships before it exits`, {
  timeout: 240_000 * WAIT_SCALE,
}, async () => {
  const properties = { 'min.insync.replicas': 2, 'broker.session.timeout.ms': SESSION_MS }
  await withEtcdCluster({ brokers: 3, properties }, async (cluster) => {
    let startedAt = performance.now()
    const big = await createTopics(cluster, [{ name: 'big', numPartitions: BIG_PARTITIONS }])
    assert.deepEqual(
      big.topics.map((t) => [t.name, t.errorCode, t.errorMessage]),
      [['big', ErrorCode.NONE, null]],
    )
    console.log(
      `CreateTopics of ${BIG_PARTITIONS} partitions at RF 3: ${Math.round(performance.now() - startedAt)} ms`,
    )
    startedAt = performance.now()
    const many = await createTopics(
      cluster,
      Array.from({ length: TOPICS }, (_, i) => ({ name: `many-${i}`, numPartitions: TOPIC_PARTITIONS })),
    )
    assert.equal(many.topics.length, TOPICS)
    assert.deepEqual(
      many.topics
        .filter((t) => t.errorCode !== ErrorCode.NONE)
        .map((t) => [t.name, t.errorCode, t.errorMessage]),
      [],
    )
    console.log(`CreateTopics of ${TOPICS} topics at once: ${Math.round(performance.now() - startedAt)} ms`)

    // Every replica in sync and led by its preferred replica, so the kill is the only change.
    const total = BIG_PARTITIONS + TOPICS * TOPIC_PARTITIONS
    const inSync = allInSync(total)
    const before = await inSyncUnderPreferredLeaders(
      cluster.brokers[0].spec.port,
      cluster.liveBootstrap,
      total,
      60_000 * WAIT_SCALE,
    )
    // Not the controller: its own failover (a new campaign) is failover.test.ts's.
    const victim = cluster.brokers.find((b) => b.nodeId !== before.controllerId)!
    const led = [...before.topics.values()].flat().filter((p) => p.leader === victim.nodeId).length
    assert.ok(led > 128, `broker ${victim.nodeId} leads ${led} partitions`)
    // acks=all writes all along to a few partitions each broker leads.
    const bigBefore = before.topics.get('big')!
    const sampleLedBy = (id: number) =>
      bigBefore
        .filter((p) => p.leader === id)
        .slice(0, SAMPLED_PER_BROKER)
        .map((p) => p.partition)
    const victimSample = sampleLedBy(victim.nodeId)
    const producer = new AckedProducer(
      cluster.liveBootstrap,
      'big',
      cluster.brokers.flatMap((b) => sampleLedBy(b.nodeId)),
    )
    try {
      await waitFor(
        'a first acks=all write to every sampled partition',
        () => (producer.notAckedSince(-1).length === 0 ? true : undefined),
        30_000,
        100,
      )
      await killAndFailOver(cluster, victim, { led, total, producer, victimSample })
      await restartAndDrain(cluster, victim, { total, inSync, producer })
    } finally {
      await producer.stop()
    }
    const readBack = await checkAckedReadBack(cluster.liveBootstrap, producer)
    console.log(
      `acks=all writes to ${producer.partitions.length} partitions through the kill, the restart and the controlled shutdown: ${producer.acked.size} acknowledged, ${readBack.read} read back`,
    )
    assert.ok(producer.acked.size > 0)
    assert.deepEqual(
      {
        lost: readBack.lost.slice(0, 10),
        duplicated: readBack.duplicated.slice(0, 10),
        misplaced: readBack.misplaced.slice(0, 10),
      },
      { lost: [], duplicated: [], misplaced: [] },
    )
    assert.deepEqual(cluster.errorLogs(), [])
  })
})

/**
 * kill -9 of `victim`: every partition led again by a live broker, and `victim` in no ISR,
 * within the failover bound (asserted when the machine has CPU to spare); then acks=all
 * writes resume on the sampled partitions it led.
 */
async function killAndFailOver(
  cluster: EtcdCluster,
  victim: BrokerProcess,
  context: { led: number; total: number; producer: AckedProducer; victimSample: readonly number[] },
): Promise<void> {
  const { led, total, producer, victimSample } = context
  const startedAt = performance.now()
  await victim.kill()
  const left = await waitFor(
    `every partition led by a live broker, ${victim.nodeId} in no ISR`,
    async () => {
      const view = await kcatMetadata(cluster.liveBootstrap)
      return notFailedOver(view, victim.nodeId).length === 0 ? view : undefined
    },
    FAILOVER_BOUND_MS + 30_000 * WAIT_SCALE,
    250,
  ).then(
    () => [],
    async () => notFailedOver(await kcatMetadata(cluster.liveBootstrap), victim.nodeId),
  )
  const failedOverAt = performance.now()
  const failoverMs = Math.round(failedOverAt - startedAt)
  console.log(
    `kill -9 of broker ${victim.nodeId} (leader of ${led} of ${total} partitions, in every ISR): all led again and ISRs without it after ${failoverMs} ms`,
  )
  assert.deepEqual(left.slice(0, 10), [], `${left.length} partitions not failed over`)
  // The bound holds on a machine with CPU to spare (6.4 s measured for 8 s); at a load of
  // 10 runnable processes per core, three brokers each fetching 2,200 partitions took up
  // to 10 s, the time going to the brokers' event loops, not the store. Printed, not
  // asserted, there: the bug this test is about leaves partitions stuck for good.
  const loadPerCore = loadavg()[0] / availableParallelism()
  if (loadPerCore < 2)
    assert.ok(failoverMs <= FAILOVER_BOUND_MS, `failover took ${failoverMs} ms > ${FAILOVER_BOUND_MS} ms`)
  else if (failoverMs > FAILOVER_BOUND_MS)
    console.log(
      `failover past ${FAILOVER_BOUND_MS} ms at a load of ${loadPerCore.toFixed(1)} per core: not asserted`,
    )
  await waitFor(
    `acks=all writes resumed on partitions ${victimSample.join(',')} (led by the dead broker)`,
    () => (producer.notAckedSince(failedOverAt, victimSample).length === 0 ? true : undefined),
    WRITES_RESUME_MS,
    100,
  )
  console.log(
    `acks=all writes to the dead broker's partitions resumed ${Math.round(performance.now() - startedAt)} ms after the kill`,
  )
}

/**
 * `victim` started again; once every replica is back in sync, SIGTERM of the broker that is
 * neither the controller nor `victim`, which then leads about half the partitions: a controlled shutdown moves its leaderships to
 * other ISR members and takes it out of every ISR before it leaves (Kafka's broker asks
 * the controller with wantShutDown and waits for that), so the controller elects nothing
 * when its registration goes; it exits within CONTROLLED_EXIT_MS and acks=all writes go on.
 */
async function restartAndDrain(
  cluster: EtcdCluster,
  victim: BrokerProcess,
  context: { total: number; inSync: (view: MetadataView) => boolean; producer: AckedProducer },
): Promise<void> {
  const { total, inSync, producer } = context
  let startedAt = performance.now()
  await victim.start(60_000 * WAIT_SCALE)
  await cluster.waitForBrokers(
    cluster.brokers.map((b) => b.nodeId),
    30_000 * WAIT_SCALE,
  )
  const synced = await waitFor(
    'every partition with its 3 replicas in sync after the restart',
    async () => {
      const view = await kcatMetadata(cluster.liveBootstrap)
      return inSync(view) ? view : undefined
    },
    90_000 * WAIT_SCALE,
    500,
  )
  console.log(
    `broker ${victim.nodeId} restarted and back in every ISR after ${Math.round(performance.now() - startedAt)} ms`,
  )
  const drained = cluster.brokers.find((b) => b !== victim && b.nodeId !== synced.controllerId)!
  const drainedLed = new Set(ledBy(synced, drained.nodeId))
  assert.ok(drainedLed.size > 128, `broker ${drained.nodeId} leads ${drainedLed.size} partitions`)
  const drainedSample = producer.partitions.filter((p) => drainedLed.has(`big-${p}`))
  assert.ok(drainedSample.length > 0)
  // The elections the controller logs from now on of partitions `drained` led (none expected).
  const controller = cluster.broker(synced.controllerId)
  const controllerLinesFrom = controller.current.lines.length
  startedAt = performance.now()
  const run = drained.current
  run.signal('SIGTERM')
  const exit = await Promise.race([
    run.exited,
    sleep(CONTROLLED_EXIT_MS * 3 * WAIT_SCALE, undefined, { ref: false }).then(() => null),
  ])
  const exitMs = Math.round(performance.now() - startedAt)
  assert.ok(exit !== null, `broker ${drained.nodeId} still running ${exitMs} ms after SIGTERM`)
  assert.deepEqual(exit, { code: 0, signal: null })
  console.log(
    `SIGTERM of broker ${drained.nodeId} (leader of ${drainedLed.size} of ${total} partitions, in every ISR): exited after ${exitMs} ms`,
  )
  const loadPerCore = loadavg()[0] / availableParallelism()
  if (loadPerCore < 2)
    assert.ok(
      exitMs <= CONTROLLED_EXIT_MS,
      `controlled shutdown took ${exitMs} ms > ${CONTROLLED_EXIT_MS} ms`,
    )
  const after = await waitFor(
    `no partition led by ${drained.nodeId} nor with it in the ISR`,
    async () => {
      const view = await kcatMetadata(cluster.liveBootstrap)
      return notFailedOver(view, drained.nodeId).length === 0 ? view : undefined
    },
    30_000 * WAIT_SCALE,
    250,
  )
  assert.equal([...after.topics.values()].flat().length, total)
  const elections = controller.current.lines.slice(controllerLinesFrom).filter((text) => {
    if (!/elected leader|partition offline/.test(text)) return false
    const line = JSON.parse(text) as LogLine
    return drainedLed.has(`${line.topic}-${line.partition}`)
  })
  // What the stopped broker logged at warn and above says why, when its shutdown left
  // leaderships behind (an incomplete move, conflicting metadata updates).
  const drainedWarnings = run.lines.filter((text) => /"level":(40|50|60)/.test(text)).slice(-10)
  assert.deepEqual(
    elections.slice(0, 5),
    [],
    `the controller elected ${elections.length} leaders after broker ${drained.nodeId}'s controlled shutdown; its last warnings:\n${drainedWarnings.join('\n')}`,
  )
  await waitFor(
    `acks=all writes resumed on partitions ${drainedSample.join(',')} (led by the stopped broker)`,
    () => (producer.notAckedSince(startedAt + exitMs, drainedSample).length === 0 ? true : undefined),
    WRITES_RESUME_MS,
    100,
  )
}
