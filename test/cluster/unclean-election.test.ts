/**
 * Issue 5, multi-process: unclean leader election. Three topics share one replica
 * assignment, [A, B] (manual), on three `tidelog broker` processes on etcd (the third one
 * stays up and keeps a controller alive). Kill A: B leads, the ISR shrinks to B. Kill B:
 * every partition is offline (kcat: leader -1, kafkajs: LEADER_NOT_AVAILABLE). Restart A,
 * which is not in the ISR:
 *   - unclean.leader.election.enable=false: the partition stays offline until B returns,
 *     then B leads again with the records only it had;
 *   - =true at creation: it comes back at once with A as leader, and the controller logs
 *     "UNCLEAN leader election";
 *   - false, then set to true by confluent-kafka's AlterConfigs while offline: the config
 *     change alone brings it back with A.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  type EtcdCluster,
  type LogLine,
  SESSION_TIMEOUT_MS,
  waitFor,
  withEtcdCluster,
} from '../helpers/broker-process.js'
import { run } from '../helpers/cluster.js'
import { assertReadBack, kafka, kcatProduceOnePerPartition } from '../helpers/cluster-clients.js'
import { PYTHON } from '../helpers/compat-clients.js'
import {
  kafkajsMetadataError,
  kcatMetadata,
  type MetadataView,
  partitionOf,
} from '../helpers/metadata-view.js'

const CLEAN = 'unclean-off'
const UNCLEAN = 'unclean-on'
const LATER = 'unclean-later'
const TOPICS = [CLEAN, UNCLEAN, LATER]
const FAILOVER_BOUND_MS = SESSION_TIMEOUT_MS + 2000
/** How long a partition must stay offline to count as "stays offline". */
const STAYS_OFFLINE_MS = 2500

async function leaderOf(cluster: EtcdCluster, topic: string): Promise<number> {
  return partitionOf(await kcatMetadata(cluster.liveBootstrap, topic), topic, 0).leader
}

/** Waits until kcat shows `topic`-0 led by `leader` (-1: offline); returns the view. */
async function awaitLeader(
  cluster: EtcdCluster,
  topics: readonly string[],
  leader: number,
  timeoutMs: number,
) {
  return waitFor(
    `${topics} led by ${leader}`,
    async () => {
      const view = await kcatMetadata(cluster.liveBootstrap)
      return topics.every((t) => partitionOf(view, t, 0).leader === leader) ? view : undefined
    },
    timeoutMs,
    50,
  )
}

async function assertKafkajsOffline(cluster: EtcdCluster, topic: string): Promise<void> {
  const admin = kafka(cluster.liveBootstrap).admin({ retry: { retries: 1, initialRetryTime: 100 } })
  await admin.connect()
  try {
    assert.equal(await kafkajsMetadataError(admin, [topic]), 'LEADER_NOT_AVAILABLE', `${topic} offline`)
  } finally {
    await admin.disconnect()
  }
}

/** confluent-kafka (librdkafka) AdminClient.alter_configs on a topic. */
async function alterTopicConfig(bootstrap: string, topic: string, configs: Record<string, string>) {
  const script = [
    'import json, sys',
    'from confluent_kafka.admin import AdminClient, ConfigResource',
    'admin = AdminClient({"bootstrap.servers": sys.argv[1]})',
    'resource = ConfigResource("topic", sys.argv[2], set_config=json.loads(sys.argv[3]))',
    'for future in admin.alter_configs([resource]).values(): future.result(timeout=15)',
    'print("ok")',
  ].join('\n')
  const result = await run(PYTHON, ['-c', script, bootstrap, topic, JSON.stringify(configs)])
  assert.equal(result.code, 0, `alter_configs: ${result.stderr}`)
}

function uncleanLogs(cluster: EtcdCluster, topic: string): (LogLine & { broker: number })[] {
  return cluster.brokers.flatMap((b) =>
    b
      .logs()
      .filter(
        (l) => typeof l.msg === 'string' && l.msg.includes('UNCLEAN leader election') && l['topic'] === topic,
      )
      .map((l) => ({ ...l, broker: b.nodeId })),
  )
}

test('unclean leader election: off keeps an ISR-less partition offline until an ISR member returns; on elects the returning out-of-sync replica and logs it', {
  timeout: 120000,
}, async () => {
  await withEtcdCluster({ brokers: 3 }, async (cluster) => {
    const [a, b] = [cluster.brokers[0], cluster.brokers[1]]
    const admin = kafka(cluster.liveBootstrap).admin()
    await admin.connect()
    try {
      await admin.createTopics({
        topics: TOPICS.map((topic) => ({
          topic,
          replicaAssignment: [{ partition: 0, replicas: [a.nodeId, b.nodeId] }],
          configEntries: topic === UNCLEAN ? [{ name: 'unclean.leader.election.enable', value: 'true' }] : [],
        })),
        waitForLeaders: true,
      })
    } finally {
      await admin.disconnect()
    }
    let view: MetadataView = await awaitLeader(cluster, TOPICS, a.nodeId, 5000)
    for (const topic of TOPICS) assert.deepEqual(partitionOf(view, topic, 0).replicas, [a.nodeId, b.nodeId])
    await kcatProduceOnePerPartition(cluster.liveBootstrap, CLEAN, [0], 'both')

    // A dies: B (in the ISR) leads, and the ISR shrinks to B alone.
    await a.kill()
    view = await awaitLeader(cluster, TOPICS, b.nodeId, FAILOVER_BOUND_MS + 3000)
    for (const topic of TOPICS) assert.deepEqual(partitionOf(view, topic, 0).isr, [b.nodeId])
    // Records only B has: committed with the ISR [B].
    await kcatProduceOnePerPartition(cluster.liveBootstrap, CLEAN, [0], 'only-b')

    // B dies too: no live ISR member, every topic offline; the ISR keeps B for its return.
    await b.kill()
    view = await awaitLeader(cluster, TOPICS, -1, FAILOVER_BOUND_MS + 3000)
    for (const topic of TOPICS) {
      const p = partitionOf(view, topic, 0)
      assert.match(p.error ?? '', /not available/i, `${topic}: ${p.error}`)
      assert.deepEqual(p.isr, [b.nodeId])
    }
    await assertKafkajsOffline(cluster, CLEAN)

    // A returns, out of sync. unclean=true: A leads at once, and the election is logged.
    await a.start()
    await cluster.waitForBrokers([a.nodeId, cluster.brokers[2].nodeId], 10000)
    view = await awaitLeader(cluster, [UNCLEAN], a.nodeId, 5000)
    assert.deepEqual(partitionOf(view, UNCLEAN, 0).isr, [a.nodeId])
    const logged = await waitFor(
      'an UNCLEAN leader election log line',
      () => {
        const lines = uncleanLogs(cluster, UNCLEAN)
        return lines.length > 0 ? lines : undefined
      },
      5000,
    )
    assert.equal(logged.length, 1, JSON.stringify(logged))
    assert.equal(logged[0]['leader'], a.nodeId)
    assert.equal(logged[0].level, 40, 'logged as a warning')
    // unclean=false: stays offline while only A is back (kcat and kafkajs agree).
    const offlineSince = Date.now()
    while (Date.now() - offlineSince < STAYS_OFFLINE_MS) {
      assert.equal(await leaderOf(cluster, CLEAN), -1, `${CLEAN} must stay offline without an ISR member`)
      assert.equal(await leaderOf(cluster, LATER), -1, `${LATER} must stay offline without an ISR member`)
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    await assertKafkajsOffline(cluster, CLEAN)
    assert.deepEqual(uncleanLogs(cluster, CLEAN), [])

    // Turning unclean election on for an offline topic elects A right away (AlterConfigs).
    await alterTopicConfig(cluster.liveBootstrap, LATER, { 'unclean.leader.election.enable': 'true' })
    await awaitLeader(cluster, [LATER], a.nodeId, 5000)
    await waitFor(
      'the unclean election of the altered topic logged',
      () => (uncleanLogs(cluster, LATER).length === 1 ? true : undefined),
      5000,
    )
    assert.equal(await leaderOf(cluster, CLEAN), -1)

    // B returns: the clean topic comes back with B, which has every committed record.
    await b.start()
    view = await awaitLeader(cluster, [CLEAN], b.nodeId, 10000)
    await assertReadBack(
      cluster.liveBootstrap,
      CLEAN,
      new Map([[0, ['both-unclean-off-0', 'only-b-unclean-off-0']]]),
      1,
    )
    // The unclean leaders stay: B follows A there (and rejoins the ISR once caught up).
    for (const topic of [UNCLEAN, LATER]) assert.equal(partitionOf(view, topic, 0).leader, a.nodeId)
    assert.deepEqual(uncleanLogs(cluster, CLEAN), [], 'no unclean election on the clean topic')
    assert.deepEqual(cluster.errorLogs(), [], 'unexpected error logs')
  })
})
