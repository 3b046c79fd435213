/**
 * Issue 5, multi-process: a broker that loses its metadata-store session stops acting as
 * leader (no split brain). The controller, which also leads partitions, is frozen with
 * SIGSTOP for longer than broker.session.timeout.ms: its lease expires in etcd, the other
 * brokers elect a new controller and new leaders. Produce requests reach the frozen broker
 * while it is stopped; on SIGCONT it must answer them, and anything after, with
 * NOT_LEADER_OR_FOLLOWER (never append as a deposed leader), then register again.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey, apis, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import type { ProduceResponse } from '../../src/protocol/generated/produce-response.js'
import { decodeResponseHeader } from '../../src/protocol/generated/response-header.js'
import { Reader } from '../../src/protocol/primitives.js'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import { type EtcdCluster, SESSION_TIMEOUT_MS, waitFor, withEtcdCluster } from '../helpers/broker-process.js'
import { assertReadBack, kafka, kcatProduceOnePerPartition } from '../helpers/cluster-clients.js'
import { kcatConsume } from '../helpers/compat-clients.js'
import { allowErrorLogs } from '../helpers/log-guard.js'
import { kcatMetadata, type MetadataView } from '../helpers/metadata-view.js'
import { RawClient } from '../helpers/raw-client.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

const RF3 = 'session-rf3'
const RF1 = 'session-rf1'
const FAILOVER_BOUND_MS = SESSION_TIMEOUT_MS + 2000
/**
 * Longer than the session timeout plus the store's call timeout (5 s), so the brokers'
 * first attempts to register again fail too and must be retried.
 */
const FREEZE_MS = SESSION_TIMEOUT_MS + 5000

function produceFrame(correlationId: number, topic: string, partition: number, acks: number): Buffer {
  const records = encodeRecordBatchSync({
    records: [{ value: Buffer.from(`stale-${topic}-${partition}`) }],
    defaultTimestamp: Date.now(),
  })
  return RawClient.frame(ApiKey.Produce, 9, correlationId, {
    ...(apis.get(ApiKey.Produce)!.defaultRequest() as object),
    transactionalId: null,
    acks,
    timeoutMs: 5000,
    topicData: [{ name: topic, partitionData: [{ index: partition, records }] }],
  })
}

async function readProduceResponse(client: RawClient, timeoutMs: number): Promise<[number, ProduceResponse]> {
  const frame = await client.readFrame(timeoutMs)
  if (frame === null) throw new Error('connection closed instead of answering Produce')
  const r = new Reader(frame)
  const api = apis.get(ApiKey.Produce)!
  const header = decodeResponseHeader(r, api.responseHeaderVersion(9))
  return [header.correlationId, api.decodeResponse(r, 9) as ProduceResponse]
}

/** Partitions (topic, index) led by `nodeId` in `view`. */
function ledPartitions(view: MetadataView, nodeId: number): [string, number][] {
  const led: [string, number][] = []
  for (const [topic, partitions] of view.topics)
    for (const p of partitions) if (p.leader === nodeId) led.push([topic, p.partition])
  return led
}

/** Sends one produce per partition (acks=1 and acks=all) and returns the error codes as they come back. */
async function produceToEach(client: RawClient, partitions: readonly [string, number][], firstId: number) {
  let id = firstId
  const sent = new Map<number, string>()
  for (const [topic, partition] of partitions) {
    for (const acks of [1, -1]) {
      sent.set(id, `${topic}-${partition} acks=${acks}`)
      client.write(produceFrame(id++, topic, partition, acks))
    }
  }
  return sent
}

async function collect(client: RawClient, sent: ReadonlyMap<number, string>, timeoutMs: number) {
  const codes = new Map<string, number>()
  for (let i = 0; i < sent.size; i++) {
    const [correlationId, response] = await readProduceResponse(client, timeoutMs)
    codes.set(sent.get(correlationId)!, response.responses[0].partitionResponses[0].errorCode)
  }
  return codes
}

test('a broker frozen past its session stops leading: new leaders and controller meanwhile, NOT_LEADER_OR_FOLLOWER after it resumes, then it registers again', {
  timeout: 90000,
}, async () => {
  // Losing the store session is what this test does to the brokers.
  allowErrorLogs(/"msg":"metadata store session lost/)
  await withEtcdCluster({ brokers: 3 }, async (cluster: EtcdCluster) => {
    const admin = kafka(cluster.liveBootstrap).admin()
    await admin.connect()
    try {
      await admin.createTopics({
        topics: [
          { topic: RF3, numPartitions: 6, replicationFactor: 3 },
          { topic: RF1, numPartitions: 3, replicationFactor: 1 },
        ],
        waitForLeaders: true,
      })
    } finally {
      await admin.disconnect()
    }
    const before = await kcatMetadata(cluster.liveBootstrap)
    const frozen = cluster.broker(before.controllerId)
    const led = ledPartitions(before, frozen.nodeId)
    assert.ok(
      led.some(([topic]) => topic === RF3),
      `controller ${frozen.nodeId} leads an RF=3 partition`,
    )
    const others = cluster.brokers.filter((b) => b !== frozen)
    const othersBootstrap = others.map((b) => b.address).join(',')
    const client = await RawClient.connect(frozen.spec.port)
    try {
      const stoppedAt = performance.now()
      frozen.current.signal('SIGSTOP')
      // Meanwhile: new leaders from the ISR for its RF=3 partitions, its RF=1 ones offline,
      // and a new controller.
      const during = await waitFor(
        'new leaders and controller while the broker is frozen',
        async () => {
          const view = await kcatMetadata(othersBootstrap)
          const moved = view.topics.get(RF3)!.every((p) => p.leader >= 0 && p.leader !== frozen.nodeId)
          const controllerMoved = view.controllerId >= 0 && view.controllerId !== frozen.nodeId
          return moved && controllerMoved && !view.brokers.includes(frozen.nodeId) ? view : undefined
        },
        FAILOVER_BOUND_MS + 3000,
        50,
      )
      const failoverMs = performance.now() - stoppedAt
      for (const p of during.topics.get(RF1)!)
        if (p.replicas[0] === frozen.nodeId) assert.equal(p.leader, -1, `${RF1}-${p.partition} offline`)
      // Requests arrive while it is frozen, and are read the moment it resumes.
      const sent = await produceToEach(client, led, 5000)
      // Frozen for longer than the session timeout in any case.
      await sleep(Math.max(300, SESSION_TIMEOUT_MS + 500 - (performance.now() - stoppedAt)))
      const frozenForMs = performance.now() - stoppedAt
      frozen.current.signal('SIGCONT')
      const codes = await collect(client, sent, 10000)
      for (const [what, code] of codes)
        assert.equal(code, ErrorCode.NOT_LEADER_OR_FOLLOWER, `${what} answered ${code} by the deposed leader`)
      // It registers again (a new session) and rejoins; its RF=1 partitions come back.
      const resumedAt = performance.now()
      await cluster.waitForBrokers(
        cluster.brokers.map((b) => b.nodeId),
        SESSION_TIMEOUT_MS + 10000,
      )
      const reregisterMs = performance.now() - resumedAt
      assert.ok(
        frozen.current.lines.some((l) => l.includes('metadata store session lost')),
        'the broker logged that it lost its session',
      )
      const after = await waitFor(
        'RF=1 partitions back with the resumed broker',
        async () => {
          const view = await kcatMetadata(cluster.liveBootstrap)
          return view.topics.get(RF1)!.every((p) => p.leader === p.replicas[0]) ? view : undefined
        },
        10000,
        100,
      )
      // Nothing it was asked to write while deposed is anywhere; produce and consume go on.
      const codesAfter = await collect(
        client,
        await produceToEach(
          client,
          led.filter(([topic]) => topic === RF3),
          6000,
        ),
        10000,
      )
      for (const [what, code] of codesAfter) assert.equal(code, ErrorCode.NOT_LEADER_OR_FOLLOWER, what)
      const rf1 = await kcatProduceOnePerPartition(cluster.liveBootstrap, RF1, [0, 1, 2], 'after')
      const rf3 = await kcatProduceOnePerPartition(cluster.liveBootstrap, RF3, [0, 1, 2, 3, 4, 5], 'after')
      await assertReadBack(cluster.liveBootstrap, RF1, new Map([...rf1].map(([p, v]) => [p, [v]])), 3)
      await assertReadBack(cluster.liveBootstrap, RF3, new Map([...rf3].map(([p, v]) => [p, [v]])), 6)
      for (const topic of [RF1, RF3]) {
        const { records } = await kcatConsume(cluster.liveBootstrap, topic, {
          extra: ['-X', 'fetch.wait.max.ms=20'],
        })
        const stale = records.filter((r) => r.value?.startsWith('stale-'))
        assert.deepEqual(stale, [], `${topic}: records a deposed leader accepted`)
      }
      assert.ok(after.controllerId !== -1)
      assert.deepEqual(cluster.errorLogs([/metadata store session lost/]), [], 'unexpected error logs')
      console.log(
        `session loss: frozen ${frozenForMs.toFixed(0)} ms; new leaders and controller visible after ` +
          `${failoverMs.toFixed(0)} ms; registered again ${reregisterMs.toFixed(0)} ms after SIGCONT`,
      )
    } finally {
      client.close()
    }
  })
})

test('etcd frozen past every session: all brokers are deposed, register again when it returns, elect one controller and leaders, and fail over again afterwards', {
  timeout: 90000,
}, async () => {
  // Losing the store session is what this test does to the brokers.
  allowErrorLogs(/"msg":"metadata store session lost/)
  await withEtcdCluster({ brokers: 3 }, async (cluster: EtcdCluster) => {
    const admin = kafka(cluster.liveBootstrap).admin()
    await admin.connect()
    try {
      await admin.createTopics({
        topics: [{ topic: RF3, numPartitions: 6, replicationFactor: 3 }],
        waitForLeaders: true,
      })
    } finally {
      await admin.disconnect()
    }
    const lineCounts = new Map(cluster.brokers.map((b) => [b.nodeId, b.current.lines.length]))
    cluster.etcd.signal('SIGSTOP')
    try {
      await sleep(FREEZE_MS)
    } finally {
      cluster.etcd.signal('SIGCONT')
    }
    const thawedAt = performance.now()
    for (const broker of cluster.brokers)
      await broker.current.waitForLine(/metadata store session lost/, 5000, lineCounts.get(broker.nodeId))
    // Back: every broker registered again, a controller elected since, every partition led.
    const loggedSince = (nodeId: number, text: string) =>
      cluster
        .broker(nodeId)
        .current.lines.slice(lineCounts.get(nodeId))
        .some((l) => l.includes(text))
    const recovered = await waitFor(
      'brokers registered, a controller elected and every partition led after etcd returned',
      async () => {
        if (!cluster.brokers.every((b) => loggedSince(b.nodeId, 'broker registered'))) return undefined
        const view = await kcatMetadata(cluster.liveBootstrap)
        const led = view.topics.get(RF3)!.every((p) => p.leader >= 0)
        const elected = view.controllerId >= 0 && loggedSince(view.controllerId, 'became controller')
        return view.brokers.length === 3 && led && elected ? view : undefined
      },
      SESSION_TIMEOUT_MS + 10000,
      100,
    ).catch((error: unknown) => {
      const logs = cluster.brokers.map((b) => b.current.lines.slice(lineCounts.get(b.nodeId)).join('\n'))
      throw new Error(`${error}\n${logs.join('\n')}`, { cause: error })
    })
    const recoveredMs = performance.now() - thawedAt
    const controller = cluster.broker(recovered.controllerId)
    const rf3 = await kcatProduceOnePerPartition(cluster.liveBootstrap, RF3, [0, 1, 2, 3, 4, 5], 'thawed')
    await assertReadBack(cluster.liveBootstrap, RF3, new Map([...rf3].map(([p, v]) => [p, [v]])), 6)
    // The others still campaign: killing the controller elects another.
    await controller.kill()
    const killedAt = performance.now()
    const next = await waitFor(
      'another controller after the outage',
      async () => {
        const view = await kcatMetadata(cluster.liveBootstrap)
        const id = view.controllerId
        if (id < 0 || id === controller.nodeId || view.brokers.includes(controller.nodeId)) return undefined
        const elected = cluster
          .broker(id)
          .current.lines.slice(lineCounts.get(id))
          .filter((l) => l.includes('became controller')).length
        return elected > 0 &&
          view.topics.get(RF3)!.every((p) => p.leader >= 0 && p.leader !== controller.nodeId)
          ? view
          : undefined
      },
      SESSION_TIMEOUT_MS + 5000,
      50,
    )
    assert.deepEqual(cluster.errorLogs([/metadata store session lost/]), [], 'unexpected error logs')
    console.log(
      `etcd frozen ${FREEZE_MS} ms: all partitions led again ${recoveredMs.toFixed(0)} ms after it ` +
        `returned; then kill -9 of controller ${controller.nodeId} → controller ${next.controllerId} and new leaders after ` +
        `${(performance.now() - killedAt).toFixed(0)} ms`,
    )
  })
})
