/**
 * Issue 4 bad input, with real clients where they can send it and a raw socket where they
 * cannot: records over max.message.bytes (MESSAGE_TOO_LARGE), partitions and topics that do
 * not exist (UNKNOWN_TOPIC_OR_PARTITION), illegal topic names (INVALID_TOPIC_EXCEPTION), a
 * batch with a bad CRC (CORRUPT_MESSAGE), fetches out of range and duplicate ListOffsets
 * partitions. After each, the broker keeps serving.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { CRC_OFFSET, RECORD_BATCH_OVERHEAD } from '../../src/protocol/batch-header.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { FetchResponse } from '../../src/protocol/generated/fetch-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { ListOffsetsResponse } from '../../src/protocol/generated/list-offsets-response.js'
import type { MetadataResponse } from '../../src/protocol/generated/metadata-response.js'
import type { ProduceResponse } from '../../src/protocol/generated/produce-response.js'
import { ZERO_UUID } from '../../src/protocol/primitives.js'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import { run, withBroker } from '../helpers/cluster.js'
import { confluentProduce, kcatConsume, normalize } from '../helpers/compat-clients.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { createTopic } from '../helpers/topics.js'

function batchOf(values: string[]): Buffer {
  return encodeRecordBatchSync({
    records: values.map((value, i) => ({ key: Buffer.from(`k${i}`), value: Buffer.from(value) })),
    defaultTimestamp: Date.now(),
  })
}

function produceBody(topic: string, partition: number, records: Buffer, acks = -1) {
  return {
    transactionalId: null,
    acks,
    timeoutMs: 5000,
    topicData: [{ name: topic, partitionData: [{ index: partition, records }] }],
  }
}

/** kafkajs wraps protocol errors (KafkaJSNonRetriableError.cause, retries' errors); find the type. */
function kafkajsErrorTypes(error: unknown): string[] {
  const types: string[] = []
  const visit = (e: unknown, depth: number) => {
    if (!e || typeof e !== 'object' || depth > 5) return
    const o = e as { type?: unknown; cause?: unknown; errors?: unknown[] }
    if (typeof o.type === 'string') types.push(o.type)
    visit(o.cause, depth + 1)
    for (const inner of o.errors ?? []) visit(inner, depth + 1)
  }
  visit(error, 0)
  return types
}

test('records over max.message.bytes: kafkajs and librdkafka get MESSAGE_TOO_LARGE, smaller ones still land', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopic(cluster, 'small', { configs: { 'max.message.bytes': '2048' } })
    const kafka = new Kafka({ clientId: 'tidelog-compat', brokers: [bootstrap], logLevel: logLevel.NOTHING })
    const producer = kafka.producer({ retry: { retries: 0 } })
    await producer.connect()
    try {
      const error = await producer
        .send({ topic: 'small', acks: -1, messages: [{ value: 'x'.repeat(5000) }] })
        .then(
          () => null,
          (e: unknown) => e,
        )
      assert.ok(error, 'kafkajs send of a 5000-byte record to a 2048-byte topic must fail')
      assert.ok(kafkajsErrorTypes(error).includes('MESSAGE_TOO_LARGE'), String(error))
      const [ok] = await producer.send({ topic: 'small', acks: -1, messages: [{ value: 'fits' }] })
      assert.equal(ok.errorCode, 0)
      assert.equal(Number(ok.baseOffset), 0)
    } finally {
      await producer.disconnect()
    }
    // librdkafka checks only its own message.max.bytes (1 MB), so the broker refuses it.
    const { reports } = await confluentProduce(
      bootstrap,
      'small',
      [{ value: 'y'.repeat(5000) }, { value: 'fits too' }],
      { acks: 'all', 'linger.ms': 0, 'batch.num.messages': 1, 'message.send.max.retries': 0 },
    )
    assert.equal(reports[0].error?.name, 'MSG_SIZE_TOO_LARGE')
    assert.equal(reports[1].error, null)
    assert.equal(reports[1].offset, 1)
    const kcat = await kcatConsume(bootstrap, 'small')
    assert.deepEqual(
      normalize(kcat.records).map((r) => r.value),
      ['fits', 'fits too'],
    )
  })
})

test('a broker-wide message.max.bytes applies to topics without an override', async () => {
  await withBroker(
    async (cluster) => {
      await createTopic(cluster, 'plain')
      const { reports } = await confluentProduce(
        cluster.bootstrapServers,
        'plain',
        [{ value: 'z'.repeat(3000) }, { value: 'ok' }],
        { acks: 'all', 'batch.num.messages': 1, 'message.send.max.retries': 0 },
      )
      assert.equal(reports[0].error?.name, 'MSG_SIZE_TOO_LARGE')
      assert.deepEqual(reports[1], { partition: 0, offset: 0, error: null })
    },
    { properties: { 'message.max.bytes': 1500 } },
  )
})

test('raw Produce: bad CRC -> CORRUPT_MESSAGE, missing partition/topic -> UNKNOWN_TOPIC_OR_PARTITION; then a valid produce works', async () => {
  await withBroker(async (cluster) => {
    const topic = 'raw-target'
    await createTopic(cluster, topic, { partitions: 1 })
    const client = await RawClient.connect(cluster.brokers[0].port)
    try {
      for (const version of [3, 7, 9, 11]) {
        const corrupt = batchOf(['a', 'b'])
        corrupt[corrupt.length - 1] ^= 0xff // a record byte: the CRC no longer matches
        let response = await rawCall<ProduceResponse>(
          client,
          ApiKey.Produce,
          version,
          produceBody(topic, 0, corrupt),
        )
        assert.equal(
          response.responses[0].partitionResponses[0].errorCode,
          ErrorCode.CORRUPT_MESSAGE,
          `v${version}`,
        )

        const badCrcField = batchOf(['c'])
        badCrcField.writeUInt32BE((badCrcField.readUInt32BE(CRC_OFFSET) + 1) >>> 0, CRC_OFFSET)
        response = await rawCall<ProduceResponse>(
          client,
          ApiKey.Produce,
          version,
          produceBody(topic, 0, badCrcField),
        )
        assert.equal(response.responses[0].partitionResponses[0].errorCode, ErrorCode.CORRUPT_MESSAGE)

        response = await rawCall<ProduceResponse>(
          client,
          ApiKey.Produce,
          version,
          produceBody(topic, 7, batchOf(['x'])),
        )
        assert.equal(
          response.responses[0].partitionResponses[0].errorCode,
          ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        )
        response = await rawCall<ProduceResponse>(
          client,
          ApiKey.Produce,
          version,
          produceBody('no-such-topic', 0, batchOf(['x'])),
        )
        assert.equal(
          response.responses[0].partitionResponses[0].errorCode,
          ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        )
      }
      assert.equal(
        cluster.brokers[0].metadataImage().topics.has('no-such-topic'),
        false,
        'Produce never creates topics',
      )
      // The same connection keeps working: a valid batch lands at offset 0.
      const response = await rawCall<ProduceResponse>(
        client,
        ApiKey.Produce,
        9,
        produceBody(topic, 0, batchOf(['good', 'data'])),
      )
      const partition = response.responses[0].partitionResponses[0]
      assert.equal(partition.errorCode, ErrorCode.NONE)
      assert.equal(partition.baseOffset, 0n)
      // A truncated batch (header only) is corrupt too.
      const truncated = batchOf(['t']).subarray(0, RECORD_BATCH_OVERHEAD)
      const cut = await rawCall<ProduceResponse>(client, ApiKey.Produce, 7, produceBody(topic, 0, truncated))
      assert.notEqual(cut.responses[0].partitionResponses[0].errorCode, ErrorCode.NONE)
    } finally {
      client.close()
    }
    const kcat = await kcatConsume(cluster.bootstrapServers, topic)
    assert.equal(kcat.code, 0, kcat.stderr)
    assert.deepEqual(normalize(kcat.records), [
      { partition: 0, offset: 0, key: 'k0', value: 'good', headers: [] },
      { partition: 0, offset: 1, key: 'k1', value: 'data', headers: [] },
    ])
  })
})

test('raw Fetch and ListOffsets: out of range, missing partitions, duplicate partitions', async () => {
  await withBroker(async (cluster) => {
    const topic = 'raw-fetch'
    await createTopic(cluster, topic, { partitions: 1 })
    const client = await RawClient.connect(cluster.brokers[0].port)
    try {
      const produced = await rawCall<ProduceResponse>(
        client,
        ApiKey.Produce,
        7,
        produceBody(topic, 0, batchOf(['a', 'b', 'c'])),
      )
      assert.equal(produced.responses[0].partitionResponses[0].errorCode, ErrorCode.NONE)
      const fetchBody = (partition: number, fetchOffset: bigint) => ({
        replicaId: -1,
        maxWaitMs: 0,
        minBytes: 1,
        maxBytes: 1 << 20,
        isolationLevel: 0,
        sessionId: 0,
        sessionEpoch: -1,
        topics: [
          {
            topic,
            partitions: [
              {
                partition,
                currentLeaderEpoch: -1,
                fetchOffset,
                lastFetchedEpoch: -1,
                logStartOffset: -1n,
                partitionMaxBytes: 1 << 20,
              },
            ],
          },
        ],
        forgottenTopicsData: [],
        rackId: '',
      })
      for (const [partition, offset, code] of [
        [0, 4n, ErrorCode.OFFSET_OUT_OF_RANGE],
        [0, -1n, ErrorCode.OFFSET_OUT_OF_RANGE],
        [3, 0n, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
        [0, 3n, ErrorCode.NONE], // at the log end: nothing yet, no error
      ] as const) {
        const fetched = await rawCall<FetchResponse>(client, ApiKey.Fetch, 11, fetchBody(partition, offset))
        assert.equal(fetched.responses[0].partitions[0].errorCode, code, `fetch ${partition}@${offset}`)
      }
      const listBody = {
        replicaId: -1,
        isolationLevel: 0,
        topics: [
          {
            name: topic,
            partitions: [
              { partitionIndex: 0, currentLeaderEpoch: -1, timestamp: -1n, maxNumOffsets: 1 },
              { partitionIndex: 0, currentLeaderEpoch: -1, timestamp: -2n, maxNumOffsets: 1 },
              { partitionIndex: 9, currentLeaderEpoch: -1, timestamp: -1n, maxNumOffsets: 1 },
            ],
          },
        ],
      }
      const listed = await rawCall<ListOffsetsResponse>(client, ApiKey.ListOffsets, 2, listBody)
      // A partition named twice is answered once, INVALID_REQUEST, as Kafka 4.4 answers
      // (test/differential's list-offsets sequence compares it with Kafka itself).
      assert.deepEqual(
        listed.topics[0].partitions.map((p) => [p.partitionIndex, p.errorCode]),
        [
          [0, ErrorCode.INVALID_REQUEST],
          [9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
        ],
      )
      const latest = await rawCall<ListOffsetsResponse>(client, ApiKey.ListOffsets, 2, {
        ...listBody,
        topics: [{ name: topic, partitions: [listBody.topics[0].partitions[0]] }],
      })
      assert.equal(latest.topics[0].partitions[0].offset, 3n)
    } finally {
      client.close()
    }
  })
})

test('illegal topic names: Metadata answers INVALID_TOPIC_EXCEPTION and creates nothing', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    const illegal = ['bad name', 'bad/name', 'a'.repeat(250), '..', 'é']
    const client = await RawClient.connect(cluster.brokers[0].port)
    try {
      for (const version of [1, 4, 9, 12]) {
        const response = await rawCall<MetadataResponse>(client, ApiKey.Metadata, version, {
          topics: illegal.map((name) => ({ name, topicId: ZERO_UUID })),
          allowAutoTopicCreation: true,
        })
        assert.deepEqual(
          response.topics.map((t) => [t.name, t.errorCode]),
          illegal.map((name) => [name, ErrorCode.INVALID_TOPIC_EXCEPTION]),
          `Metadata v${version}`,
        )
      }
    } finally {
      client.close()
    }
    // kcat (librdkafka Metadata v4) reports the error per topic.
    const kcat = await run('kcat', ['-b', bootstrap, '-L', '-J', '-t', 'bad name'])
    assert.equal(kcat.code, 0, kcat.stderr)
    const listed = JSON.parse(kcat.stdout) as { topics: { topic: string; error?: string }[] }
    assert.equal(listed.topics.length, 1)
    assert.match(listed.topics[0].error ?? '', /invalid topic/i)
    // kafkajs (Metadata v6) throws the protocol error.
    const kafka = new Kafka({ clientId: 'tidelog-compat', brokers: [bootstrap], logLevel: logLevel.NOTHING })
    const admin = kafka.admin()
    await admin.connect()
    try {
      const error = await admin.fetchTopicMetadata({ topics: ['bad name'] }).then(
        () => null,
        (e: unknown) => e,
      )
      assert.ok(kafkajsErrorTypes(error).includes('INVALID_TOPIC_EXCEPTION'), String(error))
      assert.deepEqual(await admin.listTopics(), [])
    } finally {
      await admin.disconnect()
    }
    assert.equal(cluster.brokers[0].metadataImage().topics.size, 0)
  })
})
