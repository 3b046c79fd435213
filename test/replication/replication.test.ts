/**
 * Replication in one process with real clients: three brokers on a shared embedded store,
 * RF=3, min.insync.replicas=2, short lag time. acks=all writes from kafkajs and
 * confluent-kafka end byte-identical on every replica; consumers stop at the high
 * watermark; a follower that stops fetching leaves the ISR after replica.lag.time.max.ms
 * and rejoins; with two replicas down acks=all is refused and acks=1 accepted; a restarted
 * follower catches up (the speed is printed).
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { confluentConsume, confluentProduce } from '../helpers/compat-clients.js'
import { simpleBatch } from '../storage/helpers.js'
import { logDigest, ReplicationCluster, waitUntil } from './in-process-cluster.js'

const LAG_MS = 2000
const PROPERTIES = {
  'broker.session.timeout.ms': 3000,
  'replica.lag.time.max.ms': LAG_MS,
  'replica.fetch.backoff.ms': 200,
  'min.insync.replicas': 2,
  'default.replication.factor': 3,
  'num.partitions': 3,
  'auto.create.topics.enable': false,
}

function kafka(bootstrap: string, retries = 5): Kafka {
  return new Kafka({
    clientId: 'tidelog-replication',
    brokers: bootstrap.split(','),
    logLevel: logLevel.NOTHING,
    retry: { retries, initialRetryTime: 100 },
  })
}

/** Waits until every replica of every partition has the leader's log end as its high watermark, all in the ISR. */
async function waitReplicated(cluster: ReplicationCluster, topic: string, partitions: number): Promise<void> {
  await waitUntil(`${topic} fully replicated`, 15000, () => {
    for (let p = 0; p < partitions; p++) {
      const state = cluster.state(topic, p)
      if (state.isr.length !== state.replicas.length) return false
      const end = cluster.replica(state.leader, topic, p).log.logEndOffset
      for (const id of state.replicas) {
        const replica = cluster.replica(id, topic, p)
        if (replica.log.logEndOffset !== end || replica.highWatermark !== end) return false
      }
    }
    return true
  })
}

/** Every replica's log bytes up to the leader's high watermark are identical; returns that HW per partition. */
async function assertIdentical(
  cluster: ReplicationCluster,
  topic: string,
  partitions: number,
): Promise<number[]> {
  const hws: number[] = []
  for (let p = 0; p < partitions; p++) {
    const state = cluster.state(topic, p)
    const hw = cluster.replica(state.leader, topic, p).highWatermark
    const digests = await Promise.all(
      state.replicas.map((id) => logDigest(cluster.replica(id, topic, p), hw)),
    )
    for (const d of digests) assert.deepEqual(d, digests[0], `${topic}-${p} replicas differ below HW ${hw}`)
    hws.push(hw)
  }
  return hws
}

describe('replication with real clients (3 brokers, RF=3, min.insync.replicas=2)', () => {
  let cluster: ReplicationCluster
  before(async () => {
    cluster = await ReplicationCluster.start(3, PROPERTIES)
  })
  after(async () => {
    await cluster?.close()
  })

  it('acks=all from kafkajs and confluent-kafka: every replica byte-identical up to the HW', async () => {
    await cluster.createTopic('acks-all', 3, 3)
    const producer = kafka(cluster.bootstrap).producer({ allowAutoTopicCreation: false })
    await producer.connect()
    try {
      for (let round = 0; round < 20; round++) {
        await producer.send({
          topic: 'acks-all',
          acks: -1,
          messages: Array.from({ length: 10 }, (_, i) => ({
            key: `k${(round * 10 + i) % 7}`,
            value: `kafkajs-${round * 10 + i}`,
          })),
        })
      }
    } finally {
      await producer.disconnect()
    }
    const messages = Array.from({ length: 300 }, (_, i) => ({ key: `c${i % 5}`, value: `ck-${i}` }))
    const { reports, undelivered } = await confluentProduce(cluster.bootstrap, 'acks-all', messages, {
      acks: 'all',
      'linger.ms': 5,
    })
    assert.equal(undelivered, 0)
    assert.deepEqual(
      reports.filter((r) => r.error !== null),
      [],
    )
    await waitReplicated(cluster, 'acks-all', 3)
    const hws = await assertIdentical(cluster, 'acks-all', 3)
    assert.equal(
      hws.reduce((a, b) => a + b, 0),
      500,
    )
    const consumed = await confluentConsume(cluster.bootstrap, 'acks-all', [
      [0, 0],
      [1, 0],
      [2, 0],
    ])
    assert.deepEqual(consumed.errors, [])
    const values = consumed.records.map((r) => r.value).sort()
    const expected = [
      ...Array.from({ length: 200 }, (_, i) => `kafkajs-${i}`),
      ...Array.from({ length: 300 }, (_, i) => `ck-${i}`),
    ].sort()
    assert.deepEqual(values, expected)
  })

  it('consumers never see records above the high watermark', async () => {
    await cluster.createTopic('above-hw', 1, 3)
    const state = cluster.state('above-hw', 0)
    const leader = cluster.replica(state.leader, 'above-hw', 0)
    const committed = await confluentProduce(
      cluster.bootstrap,
      'above-hw',
      Array.from({ length: 20 }, (_, i) => ({ value: `committed-${i}` })),
      { acks: 'all' },
    )
    assert.equal(committed.undelivered, 0)
    await waitReplicated(cluster, 'above-hw', 1)
    // Followers stop fetching: acks=1 records reach the leader's log but not the HW.
    const followers = state.replicas.filter((id) => id !== state.leader)
    for (const id of followers) cluster.transports[id].freeze()
    try {
      const pending = await confluentProduce(
        cluster.bootstrap,
        'above-hw',
        Array.from({ length: 30 }, (_, i) => ({ value: `uncommitted-${i}` })),
        { acks: '1' },
      )
      assert.equal(pending.undelivered, 0)
      assert.equal(leader.log.logEndOffset, 50)
      assert.equal(leader.highWatermark, 20)
      const seen = await confluentConsume(cluster.bootstrap, 'above-hw', [[0, 0]])
      assert.deepEqual(
        seen.records.map((r) => r.value),
        Array.from({ length: 20 }, (_, i) => `committed-${i}`),
      )
      assert.equal(
        await kafkajsLatestOffset(cluster.bootstrap, 'above-hw'),
        20,
        'kafkajs ListOffsets latest = HW',
      )
    } finally {
      for (const id of followers) cluster.transports[id].thaw()
    }
    await waitReplicated(cluster, 'above-hw', 1)
    const all = await confluentConsume(cluster.bootstrap, 'above-hw', [[0, 0]])
    assert.equal(all.records.length, 50)
    await assertIdentical(cluster, 'above-hw', 1)
  })

  it('a follower that stops fetching leaves the ISR after replica.lag.time.max.ms and rejoins', async () => {
    await cluster.createTopic('lagging', 1, 3)
    const state = cluster.state('lagging', 0)
    const follower = state.replicas.find((id) => id !== state.leader)!
    const producer = kafka(cluster.bootstrap).producer({ allowAutoTopicCreation: false })
    await producer.connect()
    try {
      cluster.transports[follower].freeze()
      const frozenAt = Date.now()
      let sent = 0
      while (cluster.state('lagging', 0).isr.includes(follower)) {
        // acks=all keeps working meanwhile: the HW waits for the frozen member until it is removed.
        await producer.send({ topic: 'lagging', acks: 1, messages: [{ value: `v${sent++}` }] })
        await new Promise((resolve) => setTimeout(resolve, 50))
        assert.ok(Date.now() - frozenAt < LAG_MS * 4, 'the frozen follower was never removed')
      }
      const removedAfter = Date.now() - frozenAt
      console.log(`frozen follower ${follower} left the ISR after ${removedAfter} ms (lag ${LAG_MS} ms)`)
      assert.ok(removedAfter >= LAG_MS - 50, `removed after ${removedAfter} ms, before the lag time`)
      assert.deepEqual(
        [...cluster.state('lagging', 0).isr].sort(),
        state.replicas.filter((id) => id !== follower).sort(),
      )
      // With min.insync.replicas=2 and two left, acks=all still works.
      await producer.send({ topic: 'lagging', acks: -1, messages: [{ value: 'while-out' }] })
      // The leader reports the shrink, the partition as under-replicated, and the follower's lag.
      const leaderBroker = cluster.broker(state.leader)
      const report = leaderBroker.replicationReport()
      assert.ok(report.isrShrinks >= 1, `isrShrinks ${report.isrShrinks}`)
      assert.ok(report.underReplicatedPartitions >= 1)
      const lag = report.followerLag.find((l) => l.topic === 'lagging' && l.brokerId === follower)
      assert.ok(lag && lag.lagMessages > 0 && lag.caughtUpAgoMs >= LAG_MS, JSON.stringify(lag))
      cluster.transports[follower].thaw()
      const thawedAt = Date.now()
      await waitUntil('follower back in the ISR', 10000, () =>
        cluster.state('lagging', 0).isr.includes(follower),
      )
      console.log(`follower ${follower} rejoined the ISR ${Date.now() - thawedAt} ms after it fetched again`)
      assert.ok(cluster.broker(state.leader).replicationReport().isrExpands >= 1)
    } finally {
      cluster.transports[follower].thaw()
      await producer.disconnect()
    }
    await waitReplicated(cluster, 'lagging', 1)
    await assertIdentical(cluster, 'lagging', 1)
  })

  it('a follower stopped and started again on its data dir catches up (100 MB) and rejoins', async () => {
    await cluster.createTopic('catch-up', 1, 3)
    const state = cluster.state('catch-up', 0)
    const follower = state.replicas.find((id) => id !== state.leader)!
    await cluster.stopBroker(follower)
    await waitUntil(
      'stopped follower out of the ISR',
      5000,
      () => !cluster.state('catch-up', 0).isr.includes(follower),
    )
    const leaderBroker = cluster.broker(cluster.state('catch-up', 0).leader)
    const batch = 1000
    const valueBytes = 1024
    let bytes = 0
    for (let i = 0; i < 100; i++) {
      const records = simpleBatch(batch, valueBytes, i)
      bytes += records.length
      const result = await leaderBroker.replicaManager.appendToLeader({
        topic: 'catch-up',
        partition: 0,
        records: records,
        requiredAcks: 1,
        timeoutMs: 30000,
      })
      assert.equal(result.errorCode, 0)
    }
    const leaderLog = leaderBroker.replicaManager.getPartition('catch-up', 0)!.log
    const end = leaderLog.logEndOffset
    assert.equal(end, 100 * batch)
    const startedAt = performance.now()
    await cluster.startBroker(follower)
    const registeredAt = performance.now()
    await waitUntil(
      'follower caught up',
      60000,
      () => cluster.replica(follower, 'catch-up', 0).log.logEndOffset >= end,
    )
    const caughtUpAt = performance.now()
    const seconds = (caughtUpAt - registeredAt) / 1000
    console.log(
      `catch-up: ${(bytes / 1e6).toFixed(1)} MB in ${(seconds * 1000).toFixed(0)} ms = ${(bytes / 1e6 / seconds).toFixed(1)} MB/s` +
        ` (broker start ${(registeredAt - startedAt).toFixed(0)} ms)`,
    )
    await waitUntil('restarted follower back in the ISR', 10000, () =>
      cluster.state('catch-up', 0).isr.includes(follower),
    )
    await waitReplicated(cluster, 'catch-up', 1)
    await assertIdentical(cluster, 'catch-up', 1)
  })

  it('with 2 of 3 replicas down acks=all fails with NOT_ENOUGH_REPLICAS and acks=1 succeeds (kafkajs, confluent-kafka)', async () => {
    await cluster.createTopic('two-down', 1, 3)
    await waitReplicated(cluster, 'two-down', 1)
    const state = cluster.state('two-down', 0)
    const survivor = state.replicas[2]
    const stopped = state.replicas.filter((id) => id !== survivor)
    for (const id of stopped) await cluster.stopBroker(id)
    try {
      await waitUntil('survivor alone leads', 5000, () => {
        const s = cluster.state('two-down', 0)
        return s.leader === survivor && s.isr.length === 1
      })
      const bootstrap = cluster.broker(survivor).bootstrapServers
      const producer = kafka(bootstrap, 0).producer({ allowAutoTopicCreation: false })
      await producer.connect()
      try {
        const error = await producer.send({ topic: 'two-down', acks: -1, messages: [{ value: 'all' }] }).then(
          () => null,
          (e: unknown) => e as { type?: string; cause?: { type?: string }; message: string },
        )
        assert.ok(error, 'kafkajs acks=all must fail')
        const type = error.type ?? error.cause?.type
        assert.equal(type, 'NOT_ENOUGH_REPLICAS', `kafkajs error: ${error.message}`)
        const ok = await producer.send({ topic: 'two-down', acks: 1, messages: [{ value: 'kafkajs-one' }] })
        assert.equal(ok[0].errorCode, 0)
      } finally {
        await producer.disconnect()
      }
      const refused = await confluentProduce(bootstrap, 'two-down', [{ value: 'ck-all' }], {
        acks: 'all',
        retries: 0,
        'message.timeout.ms': 10000,
      })
      assert.equal(refused.reports[0].error?.name, 'NOT_ENOUGH_REPLICAS')
      const accepted = await confluentProduce(bootstrap, 'two-down', [{ value: 'ck-one' }], { acks: '1' })
      assert.equal(accepted.reports[0].error, null)
      const log = cluster.replica(survivor, 'two-down', 0).log
      assert.equal(log.logEndOffset, 2, 'only the two acks=1 records were appended')
    } finally {
      for (const id of stopped) await cluster.startBroker(id)
    }
    await waitReplicated(cluster, 'two-down', 1)
    await assertIdentical(cluster, 'two-down', 1)
    const values = (await confluentConsume(cluster.bootstrap, 'two-down', [[0, 0]])).records.map(
      (r) => r.value,
    )
    assert.deepEqual(values, ['kafkajs-one', 'ck-one'])
  })
})

/** The latest offset of partition 0 as kafkajs's ListOffsets reports it (the high watermark). */
async function kafkajsLatestOffset(bootstrap: string, topic: string): Promise<number> {
  const admin = kafka(bootstrap).admin()
  await admin.connect()
  try {
    const offsets = await admin.fetchTopicOffsets(topic)
    return Number(offsets.find((o) => o.partition === 0)?.high)
  } finally {
    await admin.disconnect()
  }
}
