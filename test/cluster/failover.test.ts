/**
 * Issue 5, multi-process: three `tidelog broker` processes on a private etcd. kill -9 the
 * leader of some partitions, then the controller: within the session timeout (+2 s) kcat
 * and kafkajs see new leaders from the ISR (first live replica in assignment order) and a
 * new controller; producing and consuming go on wherever a partition has a live leader,
 * and acks=all records written before the kill are still there. A killed broker restarted
 * re-registers (after its old lease expired) and rejoins. Measured times are printed.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { ElectLeadersResponse } from '../../src/protocol/generated/elect-leaders-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import {
  type BrokerProcess,
  type EtcdCluster,
  SESSION_TIMEOUT_MS,
  waitFor,
  withEtcdCluster,
} from '../helpers/broker-process.js'
import {
  assertReadBack,
  cleanLeader,
  kafka,
  kcatProduceOnePerPartition,
  produceOnePerPartition,
  remember,
  withLiveLeader,
} from '../helpers/cluster-clients.js'
import {
  kafkajsMetadata,
  kafkajsMetadataError,
  kcatMetadata,
  ledBy,
  type MetadataView,
} from '../helpers/metadata-view.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

const FAILOVER_BOUND_MS = SESSION_TIMEOUT_MS + 2000
const RF3 = 'failover-rf3'
const RF1 = 'failover-rf1'
const PARTITIONS = 6

interface Written {
  rf3: Map<number, string[]>
  rf1: Map<number, string[]>
}

/**
 * Produces one record to every partition with a live leader of both topics and remembers
 * it: with kafkajs where the whole topic is online, with kcat where a partition is not.
 */
async function produceEverywhereLive(cluster: EtcdCluster, written: Written, tag: string): Promise<void> {
  const view = await kcatMetadata(cluster.liveBootstrap)
  for (const [topic, into] of [
    [RF3, written.rf3],
    [RF1, written.rf1],
  ] as const) {
    const live = withLiveLeader(view, topic)
    const produce = live.length === PARTITIONS ? produceOnePerPartition : kcatProduceOnePerPartition
    remember(into, await produce(cluster.liveBootstrap, topic, live, tag))
  }
}

/** Reads back every remembered record of the partitions that have a live leader now. */
async function readBackLive(cluster: EtcdCluster, written: Written): Promise<void> {
  const view = await kcatMetadata(cluster.liveBootstrap)
  for (const [topic, values] of [
    [RF3, written.rf3],
    [RF1, written.rf1],
  ] as const) {
    const live = new Set(withLiveLeader(view, topic))
    await assertReadBack(
      cluster.liveBootstrap,
      topic,
      new Map([...values].filter(([p]) => live.has(p))),
      PARTITIONS,
    )
  }
}

/**
 * SIGKILLs `victim` and polls kcat until every partition it led has the leader a clean
 * election picks (or none, when no other ISR member lives); returns the time that took.
 */
async function killAndAwaitLeaders(cluster: EtcdCluster, victim: BrokerProcess, before: MetadataView) {
  const dead = new Set([victim.nodeId])
  const expected = new Map<string, number>()
  for (const [topic, partitions] of before.topics)
    for (const p of partitions)
      if (p.leader === victim.nodeId) expected.set(`${topic}-${p.partition}`, cleanLeader(p, dead))
  assert.ok(expected.size > 0, `broker ${victim.nodeId} leads something`)
  const killedAt = performance.now()
  const killedAtEpochMs = Date.now()
  await victim.kill()
  const survivors = cluster.liveBootstrap
  const view = await waitFor(
    `new leaders for ${[...expected.keys()]}`,
    async () => {
      const now = await kcatMetadata(survivors)
      for (const [name, leader] of expected) {
        const [topic, index] = splitName(name)
        if (now.topics.get(topic)![index].leader !== leader) return undefined
      }
      return now
    },
    FAILOVER_BOUND_MS + 5000,
    20,
  )
  const leadersMs = performance.now() - killedAt
  return { killedAt, killedAtEpochMs, leadersMs, view, expected }
}

function splitName(name: string): [string, number] {
  const at = name.lastIndexOf('-')
  return [name.slice(0, at), Number(name.slice(at + 1))]
}

/**
 * kafkajs sees what kcat sees: the same leaders and replicas for the topics that are all
 * online, and LEADER_NOT_AVAILABLE for a topic with an offline partition.
 */
async function assertKafkajsAgrees(cluster: EtcdCluster, view: MetadataView): Promise<void> {
  const online = [RF3, RF1].filter((t) => view.topics.get(t)!.every((p) => p.leader >= 0))
  // A kafkajs client remembers the topics it asked for and refreshes them all, so the
  // offline topic gets a client of its own.
  for (const topic of [RF3, RF1].filter((t) => !online.includes(t))) {
    const probe = kafka(cluster.liveBootstrap).admin({ retry: { retries: 1, initialRetryTime: 100 } })
    await probe.connect()
    try {
      assert.equal(await kafkajsMetadataError(probe, [topic]), 'LEADER_NOT_AVAILABLE')
    } finally {
      await probe.disconnect()
    }
  }
  const admin = kafka(cluster.liveBootstrap).admin()
  await admin.connect()
  try {
    const allOnline = online.length === 2
    const theirs = await kafkajsMetadata(admin, online, { describeCluster: allOnline })
    if (allOnline) {
      assert.deepEqual(theirs.brokers, view.brokers)
      assert.equal(theirs.controllerId, view.controllerId)
    }
    for (const topic of online) {
      assert.deepEqual(
        theirs.topics.get(topic)!.map((p) => [p.leader, p.replicas]),
        view.topics.get(topic)!.map((p) => [p.leader, p.replicas]),
        `kafkajs and kcat disagree on ${topic}`,
      )
    }
  } finally {
    await admin.disconnect()
  }
}

/** Restarts `broker` and waits until the metadata lists every broker again; returns how long. */
async function restartAndRejoin(cluster: EtcdCluster, broker: BrokerProcess): Promise<number> {
  const startedAt = performance.now()
  await broker.start()
  await cluster.waitForBrokers(
    cluster.brokers.map((b) => b.nodeId),
    SESSION_TIMEOUT_MS + 10000,
  )
  return performance.now() - startedAt
}

test('3 broker processes on etcd: kill -9 a leader, then the controller; new leaders and controller within the session timeout, clients go on', {
  timeout: 150000,
}, async () => {
  await withEtcdCluster({ brokers: 3 }, async (cluster) => {
    const admin = kafka(cluster.liveBootstrap).admin()
    await admin.connect()
    try {
      assert.equal(
        await admin.createTopics({
          topics: [
            { topic: RF3, numPartitions: PARTITIONS, replicationFactor: 3 },
            { topic: RF1, numPartitions: PARTITIONS, replicationFactor: 1 },
          ],
          waitForLeaders: true,
        }),
        true,
      )
    } finally {
      await admin.disconnect()
    }
    const written: Written = { rf3: new Map(), rf1: new Map() }
    await produceEverywhereLive(cluster, written, 'initial')
    await readBackLive(cluster, written)
    const report: string[] = []

    // ---- kill -9 a broker that leads partitions but is not the controller
    let before = await kcatMetadata(cluster.liveBootstrap)
    const leader = cluster.brokers.find(
      (b) => b.nodeId !== before.controllerId && ledBy(before, b.nodeId).some((n) => n.startsWith(RF3)),
    )!
    const first = await killAndAwaitLeaders(cluster, leader, before)
    report.push(
      `kill -9 leader ${leader.nodeId} → new leaders visible to kcat: ${first.leadersMs.toFixed(0)} ms`,
    )
    assert.ok(first.leadersMs <= FAILOVER_BOUND_MS, `leader failover took ${first.leadersMs} ms`)
    assert.deepEqual(
      first.view.brokers,
      cluster.brokers.filter((b) => b !== leader).map((b) => b.nodeId),
    )
    for (const p of first.view.topics.get(RF3)!) {
      assert.ok(p.leader >= 0 && p.leader !== leader.nodeId, `${RF3}-${p.partition} led by ${p.leader}`)
      assert.ok(
        !p.isr.includes(leader.nodeId),
        `${RF3}-${p.partition} ISR ${p.isr} still has the dead broker`,
      )
    }
    // RF=1 partitions of the dead broker have no other replica: offline, LEADER_NOT_AVAILABLE.
    for (const p of first.view.topics.get(RF1)!) {
      if (p.replicas[0] !== leader.nodeId) continue
      assert.equal(p.leader, -1)
      assert.match(p.error ?? '', /not available/i)
    }
    await assertKafkajsAgrees(cluster, first.view)
    await produceEverywhereLive(cluster, written, 'after-leader-kill')
    await readBackLive(cluster, written)

    // The killed broker comes back: it re-registers, its RF=1 partitions return with it,
    // and once it has caught up it is in the RF=3 ISRs again.
    const rejoinMs = await restartAndRejoin(cluster, leader)
    report.push(`restart of ${leader.nodeId} → registered again: ${rejoinMs.toFixed(0)} ms`)
    const back = await waitFor(
      'RF=1 partitions back online and the restarted broker in every RF=3 ISR',
      async () => {
        const view = await kcatMetadata(cluster.liveBootstrap)
        const online = view.topics.get(RF1)!.every((p) => p.leader === p.replicas[0])
        const inIsr = view.topics.get(RF3)!.every((p) => p.isr.includes(leader.nodeId))
        return online && inIsr ? view : undefined
      },
      15000,
      100,
    )
    // ElectLeaders PREFERRED gives the restarted broker its preferred leaderships back.
    const notPreferred = back.topics.get(RF3)!.filter((p) => p.leader !== p.replicas[0])
    assert.ok(notPreferred.length > 0, 'some partitions moved away from their preferred replica')
    const raw = await RawClient.connect(cluster.brokers[0].spec.port)
    try {
      const response = await rawCall<ElectLeadersResponse>(raw, ApiKey.ElectLeaders, 2, {
        electionType: 0,
        topicPartitions: [{ topic: RF3, partitions: notPreferred.map((p) => p.partition) }],
        timeoutMs: 10000,
      })
      for (const result of response.replicaElectionResults[0].partitionResult)
        assert.equal(result.errorCode, ErrorCode.NONE, `${RF3}-${result.partitionId}: ${result.errorMessage}`)
    } finally {
      raw.close()
    }
    const preferred = await kcatMetadata(cluster.liveBootstrap)
    for (const p of preferred.topics.get(RF3)!) assert.equal(p.leader, p.replicas[0], `${RF3}-${p.partition}`)
    await produceEverywhereLive(cluster, written, 'after-rejoin')
    await readBackLive(cluster, written)

    // ---- kill -9 the controller
    before = await kcatMetadata(cluster.liveBootstrap)
    const controller = cluster.broker(before.controllerId)
    assert.ok(
      controller.logs().some((l) => l.msg === 'became controller'),
      'the named controller leads',
    )
    const logsFrom = new Map(cluster.brokers.map((b) => [b.nodeId, b.current.lines.length]))
    const second = await killAndAwaitLeaders(cluster, controller, before)
    const survivors = cluster.brokers.filter((b) => b !== controller)
    const elected = await waitFor(
      'a surviving broker to become controller',
      () => {
        for (const b of survivors) {
          const line = b.current.lines
            .slice(logsFrom.get(b.nodeId))
            .find((l) => l.includes('became controller'))
          if (line) return { broker: b, atMs: (JSON.parse(line) as { time: number }).time }
        }
        return undefined
      },
      FAILOVER_BOUND_MS,
    )
    const controllerVisibleMs = await waitFor(
      'the metadata to name the new controller',
      async () =>
        (await kcatMetadata(cluster.liveBootstrap)).controllerId === elected.broker.nodeId
          ? performance.now() - second.killedAt
          : undefined,
      FAILOVER_BOUND_MS,
      20,
    )
    const electedAfterMs = elected.atMs - second.killedAtEpochMs
    report.push(
      `kill -9 controller ${controller.nodeId} → broker ${elected.broker.nodeId} became controller after ` +
        `${electedAfterMs.toFixed(0)} ms (its log), named in kcat metadata after ${controllerVisibleMs.toFixed(0)} ms, ` +
        `new leaders visible after ${second.leadersMs.toFixed(0)} ms`,
    )
    assert.ok(second.leadersMs <= FAILOVER_BOUND_MS, `leader failover took ${second.leadersMs} ms`)
    assert.ok(controllerVisibleMs <= FAILOVER_BOUND_MS, `controller failover took ${controllerVisibleMs} ms`)
    await assertKafkajsAgrees(cluster, await kcatMetadata(cluster.liveBootstrap))
    await produceEverywhereLive(cluster, written, 'after-controller-kill')
    await readBackLive(cluster, written)
    report.push(
      `restart of ${controller.nodeId} → registered again: ${(await restartAndRejoin(cluster, controller)).toFixed(0)} ms`,
    )

    // ---- kill -9 and restart at once: the new process waits for its old lease to expire
    const hasty = survivors.find((b) => b !== elected.broker)!
    await hasty.kill()
    const restartedAt = performance.now()
    await hasty.start(SESSION_TIMEOUT_MS + 15000)
    const reregisterMs = performance.now() - restartedAt
    report.push(
      `kill -9 and immediate restart of ${hasty.nodeId} → registered after ${reregisterMs.toFixed(0)} ms`,
    )
    await cluster.waitForBrokers(
      cluster.brokers.map((b) => b.nodeId),
      10000,
    )
    await waitFor(
      'RF=1 partitions online',
      async () => {
        const view = await kcatMetadata(cluster.liveBootstrap)
        return view.topics.get(RF1)!.every((p) => p.leader === p.replicas[0]) ? true : undefined
      },
      10000,
      100,
    )
    await produceEverywhereLive(cluster, written, 'after-hasty-restart')
    await readBackLive(cluster, written)

    // ---- SIGTERM (controlled shutdown) of a broker that leads RF=3 partitions: its
    // leaderships move to other ISR members before it leaves, and it exits 0.
    before = await kcatMetadata(cluster.liveBootstrap)
    const stopping = cluster.brokers.find((b) =>
      before.topics.get(RF3)!.some((p) => p.leader === b.nodeId && p.isr.length > 1),
    )!
    const movedRf3 = before.topics.get(RF3)!.filter((p) => p.leader === stopping.nodeId && p.isr.length > 1)
    const stoppedAt = performance.now()
    const exit = stopping.stop()
    const otherBootstrap = cluster.brokers
      .filter((b) => b !== stopping)
      .map((b) => b.address)
      .join(',')
    const controlledMs = await waitFor(
      'leaders moved by the controlled shutdown',
      async () => {
        const view = await kcatMetadata(otherBootstrap, RF3)
        const moved = movedRf3.every((p) => {
          const now = view.topics.get(RF3)![p.partition]
          return now.leader === cleanLeader(p, new Set([stopping.nodeId]))
        })
        return moved ? performance.now() - stoppedAt : undefined
      },
      10000,
      10,
    )
    assert.equal(await exit, 0, `broker ${stopping.nodeId} exit code:\n${stopping.current.tail()}`)
    report.push(
      `SIGTERM (controlled shutdown) of ${stopping.nodeId} → ${movedRf3.length} new leaders visible to kcat: ${controlledMs.toFixed(0)} ms`,
    )
    await cluster.waitForBrokers(
      cluster.brokers.filter((b) => b !== stopping).map((b) => b.nodeId),
      5000,
    )
    await produceEverywhereLive(cluster, written, 'after-controlled-shutdown')
    await readBackLive(cluster, written)
    report.push(
      `restart of ${stopping.nodeId} → registered again: ${(await restartAndRejoin(cluster, stopping)).toFixed(0)} ms`,
    )
    await waitFor(
      'RF=1 partitions online',
      async () => {
        const view = await kcatMetadata(cluster.liveBootstrap)
        return view.topics.get(RF1)!.every((p) => p.leader === p.replicas[0]) ? true : undefined
      },
      10000,
      100,
    )
    await produceEverywhereLive(cluster, written, 'final')
    await readBackLive(cluster, written)
    assert.deepEqual(cluster.errorLogs(), [], 'unexpected error logs')
    console.log(`failover (broker.session.timeout.ms=${SESSION_TIMEOUT_MS}):\n  ${report.join('\n  ')}`)
  })
})
