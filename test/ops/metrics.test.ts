/**
 * /metrics of three in-process brokers scraped during a produce/consume run and while a
 * follower is down: under-replicated partitions go 0 → N → 0, bytes in grows by the bytes
 * produced, the consumer lag equals kafkajs's admin computation, every scrape parses with
 * a strict Prometheus text-format parser; plus the health endpoints and bad HTTP input.
 */
import assert from 'node:assert/strict'
import { request } from 'node:http'
import { connect } from 'node:net'
import { after, before, test } from 'node:test'
import { CompressionTypes } from 'kafkajs'
import { type MetricFamily, parsePrometheusText, sumSamples } from '../../src/ops/prometheus-text.js'
import { kafka } from '../helpers/cluster-clients.js'
import { ReplicationCluster, waitUntil } from '../replication/in-process-cluster.js'

const TOPIC = 'ops-metrics'
const PARTITIONS = 3
const GROUP = 'ops-metrics-group'
const VALUE_BYTES = 1024
const BATCHES = 20
const BATCH_RECORDS = 50

let cluster: ReplicationCluster

before(async () => {
  cluster = await ReplicationCluster.start(3, {
    'tidelog.http.listener': '127.0.0.1:0',
    'replica.lag.time.max.ms': 1500,
    'offsets.topic.replication.factor': 3,
    'offsets.topic.num.partitions': 3,
    'group.initial.rebalance.delay.ms': 0,
    'auto.leader.rebalance.enable': false,
    'broker.session.timeout.ms': 3000,
  })
  await cluster.createTopic(TOPIC, PARTITIONS, 3)
})

after(async () => {
  await cluster?.close()
})

function metricsUrl(index: number): string {
  const url = cluster.broker(index).httpUrl
  assert.ok(url, `broker ${index} has an HTTP listener`)
  return `${url}metrics`
}

async function scrape(index: number): Promise<Map<string, MetricFamily>> {
  const response = await fetch(metricsUrl(index))
  assert.equal(response.status, 200)
  assert.match(response.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/)
  return parsePrometheusText(await response.text())
}

/** Sum of one metric over the running brokers. */
async function clusterSum(name: string, match: Record<string, string> = {}): Promise<number> {
  let sum = 0
  for (let i = 0; i < 3; i++) if (cluster.brokers[i]) sum += sumSamples(await scrape(i), name, match)
  return sum
}

test('every broker serves /metrics in strict Prometheus text format with Kafka-named metrics', async () => {
  for (let i = 0; i < 3; i++) {
    const families = await scrape(i)
    for (const name of [
      'kafka_server_replicamanager_underreplicatedpartitions',
      'kafka_server_replicamanager_underminisrpartitioncount',
      'kafka_server_replicamanager_leadercount',
      'kafka_server_replicamanager_partitioncount',
      'kafka_server_replicamanager_isrshrinks_total',
      'kafka_controller_kafkacontroller_activecontrollercount',
      'kafka_controller_kafkacontroller_offlinepartitionscount',
      'kafka_controller_controllerstats_uncleanleaderelections_total',
      'kafka_controller_controllerstats_uncleanleaderelection_lostoffsets_total',
      'kafka_network_requestmetrics_totaltime_seconds',
      'kafka_server_delayedoperationpurgatory_purgatorysize',
      'kafka_server_socketservermetrics_connection_count',
      'tidelog_log_sync_append_stalls_total',
      'nodejs_eventloop_utilization_ratio',
      'nodejs_eventloop_lag_p99_seconds',
      'process_resident_memory_bytes',
    ])
      assert.ok(families.has(name), `broker ${i}: ${name} missing`)
    assert.equal(sumSamples(families, 'kafka_server_replicamanager_partitioncount'), PARTITIONS)
  }
  assert.equal(await clusterSum('kafka_controller_kafkacontroller_activecontrollercount'), 1)
  assert.equal(await clusterSum('kafka_server_replicamanager_leadercount'), PARTITIONS)
})

test('the strict parser rejects what the text format does not allow', () => {
  assert.throws(() => parsePrometheusText('a{b="c} 1\n'), /unterminated/)
  assert.throws(() => parsePrometheusText('1a 1\n'), /bad metric name/)
  assert.throws(() => parsePrometheusText('a 1x\n'), /bad value/)
  assert.throws(() => parsePrometheusText('a 1\na 2\n'), /repeated/)
  assert.throws(() => parsePrometheusText('a 1\n# TYPE a gauge\n'), /TYPE after samples/)
  assert.throws(() => parsePrometheusText('a 1'), /newline/)
  assert.throws(
    () => parsePrometheusText('# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_count 1\n'),
    /not increasing/,
  )
})

test('bytes in grows by the bytes produced (±5%), messages in by the records, and the group lag equals kafkajs admin', async () => {
  const client = kafka(cluster.bootstrap)
  const producer = client.producer({ allowAutoTopicCreation: false })
  const admin = client.admin()
  await producer.connect()
  await admin.connect()
  try {
    const bytesBefore = await clusterSum('kafka_server_brokertopicmetrics_bytesin_total', { topic: TOPIC })
    const messagesBefore = await clusterSum('kafka_server_brokertopicmetrics_messagesin_total', {
      topic: TOPIC,
    })
    let produced = 0
    for (let b = 0; b < BATCHES; b++) {
      const messages = Array.from({ length: BATCH_RECORDS }, (_, i) => ({
        key: `k${b}-${i}`,
        value: Buffer.alloc(VALUE_BYTES, 97 + (i % 26)),
      }))
      for (const m of messages) produced += m.key.length + m.value.length
      await producer.send({
        topic: TOPIC,
        acks: -1,
        compression: CompressionTypes.None,
        messages: messages.map((m, i) => ({ ...m, partition: (b + i) % PARTITIONS })),
      })
      // Scraping during the run must not disturb it (and must always parse).
      if (b % 5 === 0) await scrape(b % 3)
    }
    const bytesIn =
      (await clusterSum('kafka_server_brokertopicmetrics_bytesin_total', { topic: TOPIC })) - bytesBefore
    const messagesIn =
      (await clusterSum('kafka_server_brokertopicmetrics_messagesin_total', { topic: TOPIC })) -
      messagesBefore
    assert.equal(messagesIn, BATCHES * BATCH_RECORDS)
    // Record bytes include batch and record headers: a few percent over key + value.
    assert.ok(
      Math.abs(bytesIn - produced) / produced <= 0.05,
      `bytes in ${bytesIn} vs ${produced} produced (key + value)`,
    )
    assert.ok(
      (await clusterSum('kafka_network_requestmetrics_requests_total', { request: 'Produce' })) >= BATCHES,
    )

    // Consume everything in a group, then produce more: the committed offsets trail.
    const consumer = client.consumer({ groupId: GROUP, maxWaitTimeInMs: 200 })
    await consumer.connect()
    await consumer.subscribe({ topic: TOPIC, fromBeginning: true })
    let consumed = 0
    await consumer.run({
      autoCommitInterval: 100,
      eachMessage: async () => {
        consumed++
      },
    })
    await waitUntil('all records consumed', 30000, () => consumed >= BATCHES * BATCH_RECORDS)
    const bytesOut = await clusterSum('kafka_server_brokertopicmetrics_bytesout_total', { topic: TOPIC })
    assert.ok(bytesOut >= bytesIn * 0.95, `bytes out ${bytesOut} after consuming ${bytesIn} bytes in`)
    await consumer.disconnect()
    for (let p = 0; p < PARTITIONS; p++) {
      await producer.send({
        topic: TOPIC,
        acks: -1,
        messages: Array.from({ length: 7 + p }, (_, i) => ({ partition: p, value: `late-${i}` })),
      })
    }
    const kafkajsLag = async (): Promise<Map<number, number>> => {
      const [committed] = await admin.fetchOffsets({ groupId: GROUP, topics: [TOPIC] })
      const ends = await admin.fetchTopicOffsets(TOPIC)
      const lag = new Map<number, number>()
      for (const c of committed.partitions) {
        const end = ends.find((e) => e.partition === c.partition)!
        lag.set(c.partition, Math.max(0, Number(end.high) - Number(c.offset)))
      }
      return lag
    }
    const expected = await kafkajsLag()
    assert.deepEqual(
      [...expected.values()].reduce((a, b) => a + b, 0) > 0,
      true,
      'the late records leave a lag',
    )
    for (let p = 0; p < PARTITIONS; p++) {
      const lag = await clusterSum('kafka_consumergroup_lag', {
        group: GROUP,
        topic: TOPIC,
        partition: String(p),
      })
      assert.equal(lag, expected.get(p), `partition ${p}: metric lag ${lag}, kafkajs ${expected.get(p)}`)
    }
  } finally {
    await producer.disconnect()
    await admin.disconnect()
  }
})

test('under-replicated partitions go 0 → N → 0 while a follower lags and while it is down; ISR shrinks and expands are counted', async () => {
  const underReplicated = () => clusterSum('kafka_server_replicamanager_underreplicatedpartitions')
  await waitUntil('fully replicated', 20000, async () => (await underReplicated()) === 0)
  const shrinksBefore = await clusterSum('kafka_server_replicamanager_isrshrinks_total')
  const expandsBefore = await clusterSum('kafka_server_replicamanager_isrexpands_total')

  // A follower alive but not fetching: its leaders shrink the ISR after replica.lag.time.max.ms.
  const followedOn2 = [...cluster.broker(2).replicaManager.hostedPartitions].filter((p) => !p.isLeader).length
  assert.ok(followedOn2 > 0)
  cluster.transports[2].freeze()
  await waitUntil(
    `${followedOn2} under-replicated (follower frozen)`,
    20000,
    async () => (await underReplicated()) === followedOn2,
  )
  const shrinks = (await clusterSum('kafka_server_replicamanager_isrshrinks_total')) - shrinksBefore
  assert.equal(shrinks, followedOn2, 'one ISR shrink per partition the frozen follower replicates')
  cluster.transports[2].thaw()
  await waitUntil('fully replicated after the thaw', 30000, async () => (await underReplicated()) === 0)
  const expands = (await clusterSum('kafka_server_replicamanager_isrexpands_total')) - expandsBefore
  assert.equal(expands, followedOn2, 'one ISR expansion per partition it caught up on')

  // A follower stopped: every partition with a replica on it is under-replicated.
  const hostedOn2 = [...cluster.broker(2).replicaManager.hostedPartitions].length
  await cluster.stopBroker(2)
  await waitUntil(
    `${hostedOn2} under-replicated (broker stopped)`,
    20000,
    async () => (await underReplicated()) === hostedOn2,
  )
  await cluster.startBroker(2)
  await waitUntil('fully replicated after the restart', 30000, async () => (await underReplicated()) === 0)
  assert.equal(
    await clusterSum('kafka_controller_controllerstats_uncleanleaderelection_lostoffsets_total'),
    0,
  )
})

test('/healthz and /readyz answer; bad HTTP input gets a 4xx and the Kafka listener keeps serving', async () => {
  const base = cluster.broker(0).httpUrl!
  const health = await fetch(`${base}healthz`)
  assert.equal(health.status, 200)
  const ready = await fetch(`${base}readyz`)
  assert.equal(ready.status, 200)
  assert.deepEqual(((await ready.json()) as { checks: unknown }).checks, {
    recovered: true,
    registered: true,
    logDirsOnline: true,
  })
  assert.equal((await fetch(`${base}no/such/path`)).status, 404)
  const wrongMethod = await fetch(`${base}metrics`, { method: 'DELETE' })
  assert.equal(wrongMethod.status, 405)
  assert.equal(wrongMethod.headers.get('allow'), 'GET')
  assert.equal(
    (
      await fetch(`${base}api/topics`, {
        method: 'POST',
        body: '{}',
        headers: { 'content-type': 'application/json' },
      })
    ).status,
    403,
  )
  assert.equal((await fetch(`${base}api/messages`)).status, 400)
  const { port } = new URL(base)
  assert.equal(await rawStatus(Number(port), 'GET /%E0%A4%A HTTP/1.1\r\nHost: x\r\n\r\n'), 400)
  assert.equal(await rawStatus(Number(port), 'NOT-HTTP\r\n\r\n'), 400)
  assert.equal(
    await rawStatus(Number(port), `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`),
    431,
  )
  assert.equal(await headerTooLargeViaHttp(Number(port)), 431)
  // The Kafka side is untouched: a metadata round trip still works.
  const admin = kafka(cluster.bootstrap).admin()
  await admin.connect()
  assert.ok((await admin.listTopics()).includes(TOPIC))
  await admin.disconnect()
})

/** Status code of a raw HTTP exchange. */
function rawStatus(port: number, text: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text))
    let received = ''
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1')
      const match = /^HTTP\/1\.1 (\d{3})/.exec(received)
      if (match) {
        resolve(Number(match[1]))
        socket.destroy()
      }
    })
    socket.on('error', reject)
    socket.on('close', () => reject(new Error(`closed without a status: ${received.slice(0, 80)}`)))
  })
}

function headerTooLargeViaHttp(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      { port, host: '127.0.0.1', path: '/metrics', headers: { 'x-big': 'b'.repeat(40_000) } },
      (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      },
    )
    req.on('error', reject)
    req.end()
  })
}
