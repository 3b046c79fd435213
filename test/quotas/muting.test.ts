/**
 * KIP-219 on the wire: a throttled Produce answers at once with throttle_time_ms and then
 * the broker stops reading that connection for that long (acks=0 too, with no answer);
 * other connections, even of the same client id, are read meanwhile; pipelined answers keep
 * their order; a consumer fetch carries its throttle time in the body; request_percentage
 * throttles by request time.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  ApiKey,
  apis,
  type FetchResponse,
  loadAllApiCodecs,
  type MetadataResponse,
  type ProduceResponse,
} from '../../src/protocol/generated/index.js'
import { defaultProduceRequest } from '../../src/protocol/generated/produce-request.js'
import { decodeResponseHeader } from '../../src/protocol/generated/response-header.js'
import { Reader } from '../../src/protocol/primitives.js'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import { startBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { createTopic } from '../helpers/topics.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

const TOPIC = 'muted'
/** The raw client's client id (RawClient.frame). */
const CLIENT_ID = 'raw-test'
const QUOTA = 20_000

function produceFrame(correlationId: number, bytes: number, acks: number): Buffer {
  return RawClient.frame(ApiKey.Produce, 9, correlationId, {
    ...defaultProduceRequest(),
    acks,
    timeoutMs: 5000,
    topicData: [
      {
        name: TOPIC,
        partitionData: [
          {
            index: 0,
            records: encodeRecordBatchSync({ records: [{ value: Buffer.alloc(bytes, 'm'), timestamp: 0 }] }),
          },
        ],
      },
    ],
  })
}

function decode<T>(
  apiKey: number,
  version: number,
  frame: Buffer | null,
): { correlationId: number; body: T } {
  assert.ok(frame !== null, 'connection closed')
  const reader = new Reader(frame)
  const { correlationId } = decodeResponseHeader(reader, apis.get(apiKey)!.responseHeaderVersion(version))
  return { correlationId, body: apis.get(apiKey)!.decodeResponse(reader, version) as T }
}

/** How long an ApiVersions takes to be answered on `client` (not counted by a byte quota). */
async function apiVersionsLatencyMs(client: RawClient): Promise<number> {
  const startMs = Date.now()
  await rawCall(
    client,
    ApiKey.ApiVersions,
    3,
    { clientSoftwareName: 't', clientSoftwareVersion: '1' },
    15_000,
  )
  return Date.now() - startMs
}

test('a throttled connection is muted for its throttle time after the answer, and only that connection', async () => {
  const cluster = await startBroker({ port: 0 })
  const port = Number(cluster.bootstrapServers.split(':')[1])
  const clients: RawClient[] = []
  try {
    await createTopic(cluster, TOPIC, { partitions: 1 })
    const broker = cluster.brokers[0]
    await broker.clientQuotaStore.alter([
      { entity: { clientId: CLIENT_ID }, ops: new Map([['producer_byte_rate', QUOTA]]) },
    ])
    const [a, b] = await Promise.all([RawClient.connect(port), RawClient.connect(port)])
    clients.push(a, b)

    // ~220 KB over the 10 s minimum window: 22 KB/s against 20 KB/s, about 1 s of throttle.
    a.write(produceFrame(1, 220_000, 1))
    const first = decode<ProduceResponse>(ApiKey.Produce, 9, await a.readFrame())
    assert.equal(first.body.responses[0].partitionResponses[0].errorCode, 0)
    const throttleMs = first.body.throttleTimeMs
    assert.ok(throttleMs >= 900 && throttleMs <= 1500, `throttle ${throttleMs} ms`)
    const [mutedMs, otherMs] = await Promise.all([apiVersionsLatencyMs(a), apiVersionsLatencyMs(b)])
    assert.ok(mutedMs >= throttleMs - 100, `muted connection answered after ${mutedMs} ms`)
    assert.ok(otherMs < throttleMs / 2, `the other connection answered after ${otherMs} ms`)

    // acks=0: no answer, still muted; then the next request waits.
    a.write(produceFrame(2, 20_000, 0))
    const afterAcks0Ms = await apiVersionsLatencyMs(a)
    assert.ok(afterAcks0Ms >= 500, `acks=0 produce muted the connection (${afterAcks0Ms} ms)`)

    // Pipelined produces answer in order, each with its (growing) throttle time.
    a.write(Buffer.concat([produceFrame(10, 1000, 1), produceFrame(11, 1000, 1), produceFrame(12, 1000, 1)]))
    const answers = []
    for (let i = 0; i < 3; i++)
      answers.push(decode<ProduceResponse>(ApiKey.Produce, 9, await a.readFrame(15_000)))
    assert.deepEqual(
      answers.map((r) => r.correlationId),
      [10, 11, 12],
    )
    assert.ok(answers.every((r) => r.body.throttleTimeMs > 0))
  } finally {
    for (const client of clients) client.close()
    await cluster.stop()
  }
})

test('a consumer fetch carries its byte-rate throttle time in the response body', async () => {
  const cluster = await startBroker({ port: 0 })
  const port = Number(cluster.bootstrapServers.split(':')[1])
  const client = await RawClient.connect(port)
  try {
    await createTopic(cluster, TOPIC, { partitions: 1 })
    client.write(produceFrame(1, 300_000, 1))
    decode<ProduceResponse>(ApiKey.Produce, 9, await client.readFrame())
    await cluster.brokers[0].clientQuotaStore.alter([
      { entity: { clientId: CLIENT_ID }, ops: new Map([['consumer_byte_rate', QUOTA]]) },
    ])
    const topicId = cluster.brokers[0].metadataImage().topics.get(TOPIC)!.topicId
    // Each version on a connection of its own: a throttled connection is muted for its
    // throttle time (seconds at this quota), which the test above checks; the quota is the
    // client id's, so every connection's fetch is still throttled.
    for (const version of [4, 12, 16]) {
      const fetcher = await RawClient.connect(port)
      const response = await rawCall<FetchResponse>(
        fetcher,
        ApiKey.Fetch,
        version,
        {
          replicaId: -1,
          maxWaitMs: 0,
          minBytes: 1,
          maxBytes: 10_000_000,
          topics: [
            {
              topic: TOPIC,
              topicId,
              partitions: [
                {
                  partition: 0,
                  currentLeaderEpoch: -1,
                  fetchOffset: 0n,
                  lastFetchedEpoch: -1,
                  logStartOffset: -1n,
                  partitionMaxBytes: 10_000_000,
                },
              ],
            },
          ],
        },
        30_000,
      ).finally(() => fetcher.close())
      const records = response.responses[0].partitions[0].records
      assert.ok(records !== null && records.length > 0, `v${version} returned the records`)
      // The quota bounds one fetch to 10 s of it (200 KB): the first batch is still returned whole.
      assert.ok(response.throttleTimeMs > 0, `v${version} throttle ${response.throttleTimeMs}`)
    }
  } finally {
    client.close()
    await cluster.stop()
  }
})

test('request_percentage throttles by request time, capped at one window', async () => {
  const cluster = await startBroker({ port: 0 })
  const client = await RawClient.connect(Number(cluster.bootstrapServers.split(':')[1]))
  try {
    await cluster.brokers[0].clientQuotaStore.alter([
      // Any request's time is far over a millionth of a percent of a thread.
      { entity: { clientId: CLIENT_ID }, ops: new Map([['request_percentage', 1e-6]]) },
    ])
    const first = await rawCall<MetadataResponse>(client, ApiKey.Metadata, 12, { topics: [] })
    assert.equal(first.throttleTimeMs, 1000)
    const startMs = Date.now()
    const second = await rawCall<MetadataResponse>(client, ApiKey.Metadata, 12, { topics: [] }, 10_000)
    assert.ok(Date.now() - startMs >= 900, 'the connection was muted for the throttle time')
    assert.equal(second.throttleTimeMs, 1000)
  } finally {
    client.close()
    await cluster.stop()
  }
})

test('muting and queued.max.requests back-pressure together keep every answer, in order', async () => {
  const cluster = await startBroker({ port: 0, properties: { 'queued.max.requests': 2 } })
  const client = await RawClient.connect(Number(cluster.bootstrapServers.split(':')[1]))
  try {
    await createTopic(cluster, TOPIC, { partitions: 1 })
    await cluster.brokers[0].clientQuotaStore.alter([
      // 10 records of 30 KB over the 10 s minimum window: the 9th and 10th go past 25 KB/s.
      { entity: { clientId: CLIENT_ID }, ops: new Map([['producer_byte_rate', 25_000]]) },
    ])
    const count = 10
    client.write(Buffer.concat(Array.from({ length: count }, (_, i) => produceFrame(100 + i, 30_000, 1))))
    const answers = []
    for (let i = 0; i < count; i++)
      answers.push(decode<ProduceResponse>(ApiKey.Produce, 9, await client.readFrame(15_000)))
    assert.deepEqual(
      answers.map((a) => a.correlationId),
      Array.from({ length: count }, (_, i) => 100 + i),
    )
    assert.deepEqual(
      answers.map((a) => a.body.responses[0].partitionResponses[0].baseOffset),
      Array.from({ length: count }, (_, i) => BigInt(i)),
    )
    assert.equal(answers[0].body.throttleTimeMs, 0)
    assert.ok(answers.at(-1)!.body.throttleTimeMs > 0, 'the last ones were throttled')
  } finally {
    client.close()
    await cluster.stop()
  }
})
