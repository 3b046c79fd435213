/**
 * Issue 39: three `tidelog broker` processes on an etcd with its default limits (128 ops
 * per transaction, 1.5 MiB per request), as the README starts it. CreateTopics of one
 * topic of 2,000 partitions, and of 50 topics at once, at RF 3, answer NONE (not a closed
 * connection); after kill -9 of a broker that leads about a third of them and sits in
 * every ISR, every partition is led again by a live broker within
 * broker.session.timeout.ms + 2 s, and no ISR names the dead broker. Before the fix
 * etcd refused the controller's one transaction for all of them ("too many operations in
 * txn request") and it was retried unchanged for ever. Measured times are printed.
 */
import assert from 'node:assert/strict'
import { availableParallelism, loadavg } from 'node:os'
import { test } from 'node:test'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { CreateTopicsResponse } from '../../src/protocol/generated/create-topics-response.js'
import type { ElectLeadersResponse } from '../../src/protocol/generated/elect-leaders-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import { type EtcdCluster, SESSION_TIMEOUT_MS, waitFor, withEtcdCluster } from '../helpers/broker-process.js'
import { kcatMetadata, type MetadataView } from '../helpers/metadata-view.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

/**
 * Twice the other cluster tests' session: three brokers each creating 2,000 partitions on
 * two shared cores block their event loops for seconds, and at 3 s every session expired
 * at once during the creations (a stall this test is not about).
 */
const SESSION_MS = 2 * SESSION_TIMEOUT_MS
const FAILOVER_BOUND_MS = SESSION_MS + 2000
const BIG_PARTITIONS = 2000
const TOPICS = 50
const TOPIC_PARTITIONS = 4
const CREATE_TIMEOUT_MS = 90_000

/** CreateTopics v5 on a raw connection: the answer, or the connection closed (the bug). */
async function createTopics(
  cluster: EtcdCluster,
  topics: readonly { name: string; numPartitions: number }[],
): Promise<CreateTopicsResponse> {
  const client = await RawClient.connect(cluster.brokers[0].spec.port)
  try {
    return await rawCall<CreateTopicsResponse>(
      client,
      ApiKey.CreateTopics,
      5,
      {
        topics: topics.map((t) => ({
          name: t.name,
          numPartitions: t.numPartitions,
          replicationFactor: 3,
          assignments: [],
          configs: [],
        })),
        timeoutMs: CREATE_TIMEOUT_MS,
        validateOnly: false,
      },
      CREATE_TIMEOUT_MS + 10_000,
    )
  } finally {
    client.socket.destroy()
  }
}

/** Partitions (as topic-partition) without a live leader, or with `dead` in their ISR. */
function notFailedOver(view: MetadataView, dead: number): string[] {
  const left: string[] = []
  for (const [topic, partitions] of view.topics)
    for (const p of partitions)
      if (p.leader === dead || p.leader < 0 || p.isr.includes(dead)) left.push(`${topic}-${p.partition}`)
  return left
}

test('on a default etcd: CreateTopics of 2,000 partitions and of 50 topics succeed; a dead broker fails over within the session timeout + 2 s', {
  timeout: 240_000,
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

    const total = BIG_PARTITIONS + TOPICS * TOPIC_PARTITIONS
    // Every replica in sync and every partition led by its preferred replica (a session a
    // stalled broker lost while creating moves leaderships away; ElectLeaders of all of
    // them is a change over the store's limits too), so the kill is the only change.
    const inSync = (view: MetadataView) => {
      const all = [...view.topics.values()].flat()
      return all.length === total && all.every((p) => p.isr.length === 3 && p.leader >= 0)
    }
    const synced = await waitFor(
      'every partition with its 3 replicas in sync',
      async () => {
        const view = await kcatMetadata(cluster.liveBootstrap)
        return inSync(view) ? view : undefined
      },
      60_000,
      500,
    )
    if ([...synced.topics.values()].flat().some((p) => p.leader !== p.replicas[0])) {
      const raw = await RawClient.connect(cluster.brokers[0].spec.port)
      try {
        const response = await rawCall<ElectLeadersResponse>(raw, ApiKey.ElectLeaders, 2, {
          electionType: 0,
          topicPartitions: null,
          timeoutMs: 30_000,
        })
        assert.equal(response.errorCode, ErrorCode.NONE)
      } finally {
        raw.socket.destroy()
      }
    }
    const before = await waitFor(
      'every partition led by its preferred replica',
      async () => {
        const view = await kcatMetadata(cluster.liveBootstrap)
        const all = [...view.topics.values()].flat()
        return inSync(view) && all.every((p) => p.leader === p.replicas[0]) ? view : undefined
      },
      30_000,
      500,
    )
    // Not the controller: its own failover (a new campaign) is failover.test.ts's.
    const victim = cluster.brokers.find((b) => b.nodeId !== before.controllerId)!
    const led = [...before.topics.values()].flat().filter((p) => p.leader === victim.nodeId).length
    assert.ok(led > 128, `broker ${victim.nodeId} leads ${led} partitions`)
    startedAt = performance.now()
    await victim.kill()
    const left = await waitFor(
      `every partition led by a live broker, ${victim.nodeId} in no ISR`,
      async () => {
        const view = await kcatMetadata(cluster.liveBootstrap)
        return notFailedOver(view, victim.nodeId).length === 0 ? view : undefined
      },
      FAILOVER_BOUND_MS + 30_000,
      250,
    ).then(
      () => [],
      async () => notFailedOver(await kcatMetadata(cluster.liveBootstrap), victim.nodeId),
    )
    const failoverMs = Math.round(performance.now() - startedAt)
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
    assert.deepEqual(cluster.errorLogs(), [])
  })
})
