/**
 * Issue 39 through the embedded store (`tidelog/testing`: three brokers in this process
 * sharing one in-memory store, which refuses transactions over etcd's default limits as
 * etcd does): CreateTopics of one topic of 1,000 partitions at RF 3 (2,000 with
 * TIDELOG_EMBEDDED_SCALE_PARTITIONS=2000: the three brokers share one event loop, and at
 * 2,000 the file took 130 s of the test command's time; at 1,000 the failover still moves
 * over 300 leaderships, more than twice the 128 operations a transaction may hold), and of 50 topics at
 * once, answer NONE; after a kill (as kill -9) of a broker that leads about a third of
 * them and sits in every ISR, every partition is led again by a live broker within
 * broker.session.timeout.ms + 2 s with the dead broker in no ISR; an idempotent acks=all
 * producer (kafkajs) writing to a few partitions each broker leads resumes on the dead
 * broker's partitions, and every record it had acknowledged is in the log exactly once at
 * its offset. test/cluster/etcd-txn-limits.test.ts does the same with broker processes on
 * etcd.
 */
import assert from 'node:assert/strict'
import { availableParallelism, loadavg } from 'node:os'
import { test } from 'node:test'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { AckedProducer, checkAckedReadBack } from '../helpers/acked-producer.js'
import { waitFor } from '../helpers/broker-process.js'
import { createTopicsRaw, inSyncUnderPreferredLeaders } from '../helpers/create-topics.js'
import { kcatMetadata, notFailedOver } from '../helpers/metadata-view.js'
import { startCluster } from '../helpers/testing.js'

/**
 * The three brokers share this process's event loop: creating 2,000 partitions each blocks
 * it for seconds, so sessions (and replica lag) get twice the etcd test's margin.
 */
const SESSION_MS = 6000
const FAILOVER_BOUND_MS = SESSION_MS + 2000
const BIG_PARTITIONS = Number(process.env['TIDELOG_EMBEDDED_SCALE_PARTITIONS'] ?? 1000)
const TOPICS = 50
const TOPIC_PARTITIONS = 4
const TOTAL = BIG_PARTITIONS + TOPICS * TOPIC_PARTITIONS
const CREATE_TIMEOUT_MS = 90_000
const SAMPLED_PER_BROKER = 4
const WRITES_RESUME_MS = 30_000

test(`on the embedded store: CreateTopics of ${BIG_PARTITIONS} partitions and of 50 topics succeed; a killed broker fails over within the session timeout + 2 s, acks=all writes resume, nothing acknowledged is lost`, {
  timeout: 240_000,
}, async () => {
  const cluster = await startCluster({
    brokers: 3,
    properties: {
      'min.insync.replicas': 2,
      'broker.session.timeout.ms': SESSION_MS,
      'replica.lag.time.max.ms': 2 * SESSION_MS,
    },
  })
  try {
    const port = Number(cluster.bootstrapServers.split(',')[0].split(':')[1])
    let startedAt = performance.now()
    const big = await createTopicsRaw(
      port,
      [{ name: 'big', numPartitions: BIG_PARTITIONS }],
      CREATE_TIMEOUT_MS,
    )
    assert.deepEqual(
      big.topics.map((t) => [t.name, t.errorCode, t.errorMessage]),
      [['big', ErrorCode.NONE, null]],
    )
    console.log(
      `CreateTopics of ${BIG_PARTITIONS} partitions at RF 3: ${Math.round(performance.now() - startedAt)} ms`,
    )
    startedAt = performance.now()
    const many = await createTopicsRaw(
      port,
      Array.from({ length: TOPICS }, (_, i) => ({ name: `many-${i}`, numPartitions: TOPIC_PARTITIONS })),
      CREATE_TIMEOUT_MS,
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
    const before = await inSyncUnderPreferredLeaders(port, cluster.bootstrapServers, TOTAL)
    // Not the controller: its own failover (a new campaign) is failover.test.ts's.
    const victim = cluster.brokerIds.find((id) => id !== before.controllerId)!
    const led = [...before.topics.values()].flat().filter((p) => p.leader === victim).length
    assert.ok(led > 128, `broker ${victim} leads ${led} partitions`)
    const bigBefore = before.topics.get('big')!
    const sampleLedBy = (id: number) =>
      bigBefore
        .filter((p) => p.leader === id)
        .slice(0, SAMPLED_PER_BROKER)
        .map((p) => p.partition)
    const victimSample = sampleLedBy(victim)
    const producer = new AckedProducer(
      cluster.bootstrapServers,
      'big',
      cluster.brokerIds.flatMap((id) => sampleLedBy(id)),
      'embedded-scale',
    )
    try {
      await waitFor(
        'a first acks=all write to every sampled partition',
        () => (producer.notAckedSince(-1).length === 0 ? true : undefined),
        30_000,
        100,
      )
      startedAt = performance.now()
      cluster.kill(victim)
      const left = await waitFor(
        `every partition led by a live broker, ${victim} in no ISR`,
        async () => {
          const view = await kcatMetadata(cluster.bootstrapServers)
          return notFailedOver(view, victim).length === 0 ? view : undefined
        },
        FAILOVER_BOUND_MS + 30_000,
        250,
      ).then(
        () => [],
        async () => notFailedOver(await kcatMetadata(cluster.bootstrapServers), victim),
      )
      const failedOverAt = performance.now()
      const failoverMs = Math.round(failedOverAt - startedAt)
      console.log(
        `kill of broker ${victim} (leader of ${led} of ${TOTAL} partitions, in every ISR): all led again and ISRs without it after ${failoverMs} ms`,
      )
      assert.deepEqual(left.slice(0, 10), [], `${left.length} partitions not failed over`)
      // As in the etcd test: asserted on a machine with CPU to spare; under heavy load the
      // time goes to the brokers' shared event loop, and the bug leaves partitions stuck
      // for good, which the wait above catches anyway.
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
    } finally {
      await producer.stop()
    }
    const readBack = await checkAckedReadBack(cluster.bootstrapServers, producer)
    console.log(
      `acks=all writes to ${producer.partitions.length} partitions through the kill: ${producer.acked.size} acknowledged, ${readBack.read} read back`,
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
  } finally {
    await cluster.stop()
  }
})
