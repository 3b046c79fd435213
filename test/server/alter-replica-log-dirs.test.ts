/**
 * AlterReplicaLogDirs on a broker with two log dirs: Kafka's errors (a dir not in log.dirs,
 * a partition the cluster lacks, a topic name too long to move, a replica already there), then a partition moved to the
 * other dir while a producer writes: every record readable once, in order, DescribeLogDirs
 * showing it in its new dir, nothing of it left in the old one, and all of it still there
 * after a restart.
 */
import assert from 'node:assert/strict'
import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { Producer } from '../../src/client/producer.js'
import { systemClock } from '../../src/common/clock.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import { errorName } from '../../src/protocol/error-codes.js'
import type { AlterReplicaLogDirsResponse } from '../../src/protocol/generated/alter-replica-log-dirs-response.js'
import type { DescribeLogDirsResponse } from '../../src/protocol/generated/describe-log-dirs-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import { nodeParts } from '../../src/runtime/node-parts.js'
import { Broker } from '../../src/server/broker.js'
import { brokerConfigFromProperties } from '../../src/server/broker-config.js'
import { readAll } from '../client/helpers.js'
import { freePort } from '../helpers/broker-process.js'
import { type Cluster, startBroker } from '../helpers/cluster.js'
import { guardedLogger } from '../helpers/log-guard.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { waitUntil } from '../helpers/wait.js'

const TOPIC = 'moved'

async function withClient<T>(port: number, body: (client: RawClient) => Promise<T>): Promise<T> {
  const client = await RawClient.connect(port)
  try {
    return await body(client)
  } finally {
    client.socket.destroy()
  }
}

/** The log dir DescribeLogDirs places partition 0 of `topic` in, and its size there. */
async function whereIs(port: number, topic = TOPIC): Promise<{ dir: string; bytes: number } | undefined> {
  const answer = await withClient(port, (c) =>
    rawCall<DescribeLogDirsResponse>(c, ApiKey.DescribeLogDirs, 4, { topics: null }),
  )
  for (const r of answer.results)
    for (const t of r.topics)
      for (const p of t.partitions)
        if (t.name === topic && p.partitionIndex === 0)
          return { dir: r.logDir, bytes: Number(p.partitionSize) }
  return undefined
}

/** AlterReplicaLogDirs v2 of one dir; the answers as `topic-partition CODE`. */
async function alter(port: number, path: string, topics: { name: string; partitions: number[] }[]) {
  const answer = await withClient(port, (c) =>
    rawCall<AlterReplicaLogDirsResponse>(c, ApiKey.AlterReplicaLogDirs, 2, { dirs: [{ path, topics }] }),
  )
  return answer.results.flatMap((t) =>
    t.partitions.map((p) => `${t.topicName}-${p.partitionIndex} ${errorName(p.errorCode)}`),
  )
}

test('AlterReplicaLogDirs moves a replica to another log dir, losing nothing, across a restart', {
  timeout: 120_000,
}, async () => {
  const root = await mkdtemp(join(tmpdir(), 'tidelog-alter-log-dirs-'))
  const logDirs = [join(root, 'a'), join(root, 'b')]
  const properties = { 'log.dirs': logDirs.join(','), 'num.partitions': 1, 'default.replication.factor': 1 }
  let cluster: Cluster | undefined = await startBroker({ properties })
  let producer: Producer | undefined
  try {
    const port = cluster.brokers[0].port
    const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
    await admin.createTopics([{ topic: TOPIC, numPartitions: 2, replicationFactor: 1 }])
    admin.close()
    producer = new Producer({ bootstrapServers: cluster.bootstrapServers, lingerMs: 0 })
    const sent: string[] = []
    const send = async (from: number, count: number) => {
      for (let i = from; i < from + count; i++) {
        await producer!.send({ topic: TOPIC, partition: 0, value: `v${i}` })
        sent.push(`v${i}`)
      }
    }
    await send(0, 50)
    const before = await whereIs(port)
    assert.ok(before, 'DescribeLogDirs places the partition')
    const from = before.dir
    const to = logDirs.find((d) => d !== from)!

    assert.deepEqual(await alter(port, join(root, 'c'), [{ name: TOPIC, partitions: [0] }]), [
      `${TOPIC}-0 LOG_DIR_NOT_FOUND`,
    ])
    assert.deepEqual(
      await alter(port, to, [
        { name: 'no-such-topic', partitions: [0] },
        { name: TOPIC, partitions: [7] },
      ]),
      ['no-such-topic-0 UNKNOWN_TOPIC_OR_PARTITION', `${TOPIC}-7 UNKNOWN_TOPIC_OR_PARTITION`],
    )
    // Its move's directory name would not fit a file name: refused before anything else.
    const long = 'x'.repeat(249)
    assert.deepEqual(await alter(port, join(root, 'c'), [{ name: long, partitions: [0] }]), [
      `${long}-0 INVALID_TOPIC_EXCEPTION`,
    ])
    // Already there: nothing moves.
    assert.deepEqual(await alter(port, from, [{ name: TOPIC, partitions: [0] }]), [`${TOPIC}-0 NONE`])
    assert.equal((await whereIs(port))?.dir, from)

    // The move, while the producer goes on: it is answered at once, as Kafka's.
    const writing = send(50, 50)
    assert.deepEqual(await alter(port, to, [{ name: TOPIC, partitions: [0] }]), [`${TOPIC}-0 NONE`])
    await waitUntil(
      'the partition in its new log dir',
      60_000,
      async () => (await whereIs(port))?.dir === to,
      100,
    )
    await writing
    assert.ok(((await whereIs(port))?.bytes ?? 0) >= before.bytes, 'its data moved with it')
    assert.deepEqual(
      (await readdir(from)).filter((name) => name.startsWith(`${TOPIC}-0`)),
      [],
      'nothing of it left in the old dir',
    )
    const read = async () => (await readAll(cluster!.bootstrapServers, TOPIC)).map((r) => r.value?.toString())
    assert.deepEqual(await read(), sent, 'every record once, in order')

    await producer.close()
    producer = undefined
    await cluster.stop()
    cluster = undefined
    cluster = await startBroker({ properties })
    assert.equal((await whereIs(cluster.brokers[0].port))?.dir, to, 'still there after a restart')
    assert.deepEqual(await read(), sent, 'every record after the restart')
  } finally {
    await producer?.close()
    await cluster?.stop()
    await rm(root, { recursive: true, force: true })
  }
})

test('moving the leader and a follower of an acks=all partition between their log dirs loses no record; a partition hosted elsewhere is REPLICA_NOT_AVAILABLE', {
  timeout: 120_000,
}, async () => {
  const root = await mkdtemp(join(tmpdir(), 'tidelog-alter-log-dirs-rf3-'))
  const store = await EmbeddedStore.open({ clock: systemClock })
  const brokers: Broker[] = []
  let producer: Producer | undefined
  const topic = 'moved-rf3'
  try {
    for (let i = 0; i < 3; i++) {
      const port = await freePort()
      const props = new Map<string, string>([
        ['node.id', String(i)],
        ['log.dirs', `${join(root, `broker-${i}`, 'a')},${join(root, `broker-${i}`, 'b')}`],
        ['listeners', `PLAINTEXT://127.0.0.1:${port}`],
        ['broker.session.timeout.ms', '30000'],
        ['replica.lag.time.max.ms', '10000'],
        ['min.insync.replicas', '2'],
      ])
      brokers.push(
        await Broker.start(brokerConfigFromProperties(props), {
          ...nodeParts,
          store,
          logger: guardedLogger(`broker-${i}`),
        }),
      )
    }
    const bootstrap = brokers.map((b) => b.bootstrapServers).join(',')
    const admin = new Admin({ bootstrapServers: bootstrap })
    await admin.createTopics([
      { topic, numPartitions: 1, replicationFactor: 3 },
      { topic: 'on-broker-0', assignments: [[0]] },
    ])
    admin.close()
    // A partition the cluster has but this broker does not host: REPLICA_NOT_AVAILABLE.
    await waitUntil('broker 1 knows on-broker-0', 30_000, () =>
      brokers[1].metadataImage().topics.has('on-broker-0'),
    )
    assert.deepEqual(
      await alter(brokers[1].port, brokers[1].config.logDirs[0], [{ name: 'on-broker-0', partitions: [0] }]),
      ['on-broker-0-0 REPLICA_NOT_AVAILABLE'],
    )
    const state = () => brokers[0].metadataImage().topics.get(topic)?.partitions[0]
    await waitUntil(
      'a leader and a full ISR',
      30_000,
      () => (state()?.leader ?? -1) >= 0 && state()?.isr.length === 3,
    )
    const leader = brokers.find((b) => b.nodeId === state()!.leader)!
    const follower = brokers.find((b) => b.nodeId !== leader.nodeId)!
    producer = new Producer({ bootstrapServers: bootstrap, acks: 'all', lingerMs: 0 })
    const sent: string[] = []
    let stop = false
    const writing = (async () => {
      for (let i = 0; !stop || i < 100; i++) {
        await producer!.send({ topic, partition: 0, value: `v${i}` })
        sent.push(`v${i}`)
      }
    })()
    await waitUntil('records before the moves', 30_000, () => sent.length >= 50, 20)
    for (const broker of [leader, follower]) {
      const port = broker.port
      const from = (await whereIs(port, topic))?.dir
      const to = broker.config.logDirs.find((d) => d !== from)!
      assert.deepEqual(await alter(port, to, [{ name: topic, partitions: [0] }]), [`${topic}-0 NONE`])
      await waitUntil(
        `broker ${broker.nodeId}'s replica in its new dir`,
        60_000,
        async () => (await whereIs(port, topic))?.dir === to,
        100,
      )
    }
    stop = true
    await writing
    await waitUntil('the full ISR again', 60_000, () => state()?.isr.length === 3, 100)
    assert.equal(state()!.leader, leader.nodeId, 'no leadership change: the leader only paused')
    assert.deepEqual(
      (await readAll(bootstrap, topic)).map((r) => r.value?.toString()),
      sent,
      'every acknowledged record once, in order',
    )
  } finally {
    await producer?.close()
    for (const broker of brokers.reverse()) await broker.stop().catch(() => {})
    await store.close()
    await rm(root, { recursive: true, force: true })
  }
})
