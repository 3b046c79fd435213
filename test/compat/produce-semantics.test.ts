/**
 * Issue 4 Produce semantics with real clients: LogAppendTime topics, compacted topics
 * refusing records without keys (INVALID_RECORD), a failed acks=0 produce (the connection
 * closes and the producer recovers), and many concurrent producers over many partitions.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { ApiKey } from '../../src/protocol/generated/index.js'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import { withBroker } from '../helpers/cluster.js'
import {
  confluentConsume,
  confluentProduce,
  kcatConsume,
  kcatProduce,
  normalize,
  offsetsConsecutive,
  type ProduceMessage,
} from '../helpers/compat-clients.js'
import { RawClient } from '../helpers/raw-client.js'
import { createTopic } from '../helpers/topics.js'

function kafkaFor(bootstrap: string): Kafka {
  return new Kafka({ clientId: 'tidelog-compat', brokers: [bootstrap], logLevel: logLevel.NOTHING })
}

test('message.timestamp.type=LogAppendTime: the broker stamps records; kcat and confluent-kafka see it', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopic(cluster, 'append-time', { configs: { 'message.timestamp.type': 'LogAppendTime' } })
    await createTopic(cluster, 'create-time')
    const producer = kafkaFor(bootstrap).producer()
    await producer.connect()
    const oldTimestamp = 1_600_000_000_000
    const before = Date.now()
    let appendTime: string | undefined
    try {
      for (const topic of ['append-time', 'create-time']) {
        const [result] = await producer.send({
          topic,
          acks: -1,
          messages: [
            { value: 'a', timestamp: String(oldTimestamp) },
            { value: 'b', timestamp: String(oldTimestamp + 1) },
          ],
        })
        assert.equal(result.errorCode, 0)
        if (topic === 'append-time') appendTime = result.logAppendTime
        else assert.equal(result.logAppendTime, '-1')
      }
    } finally {
      await producer.disconnect()
    }
    const after = Date.now()
    assert.ok(Number(appendTime) >= before && Number(appendTime) <= after, `logAppendTime ${appendTime}`)

    const appended = await kcatConsume(bootstrap, 'append-time')
    assert.equal(appended.code, 0, appended.stderr)
    assert.deepEqual(appended.timestamps, [Number(appendTime), Number(appendTime)])
    const created = await kcatConsume(bootstrap, 'create-time')
    assert.deepEqual(created.timestamps, [oldTimestamp, oldTimestamp + 1])

    const ck = await confluentConsume(bootstrap, 'append-time', [[0, 0]])
    // confluent_kafka.TIMESTAMP_LOG_APPEND_TIME is 2, TIMESTAMP_CREATE_TIME 1.
    assert.deepEqual(
      ck.records.map((r) => [r.value, r.timestampType, r.timestamp]),
      [
        ['a', 2, Number(appendTime)],
        ['b', 2, Number(appendTime)],
      ],
    )
  })
})

test('compacted topic: records without keys -> INVALID_RECORD (kafkajs, librdkafka); keyed records land', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopic(cluster, 'compacted', { configs: { 'cleanup.policy': 'compact' } })
    const producer = kafkaFor(bootstrap).producer({ retry: { retries: 0 } })
    await producer.connect()
    try {
      const error = await producer
        .send({ topic: 'compacted', acks: -1, messages: [{ key: null, value: 'no key' }] })
        .then(
          () => null,
          (e: unknown) => e as { type?: string; cause?: { type?: string } },
        )
      assert.ok(error, 'a keyless record on a compacted topic must be refused')
      assert.equal(error.type ?? error.cause?.type, 'INVALID_RECORD', String(error))
      const [ok] = await producer.send({
        topic: 'compacted',
        acks: -1,
        messages: [{ key: 'k', value: 'keyed' }],
      })
      assert.equal(ok.errorCode, 0)
    } finally {
      await producer.disconnect()
    }
    const { reports } = await confluentProduce(
      bootstrap,
      'compacted',
      [{ value: 'no key either' }, { key: 'k2', value: 'keyed too' }],
      { acks: 'all', 'batch.num.messages': 1, 'message.send.max.retries': 0 },
    )
    assert.equal(reports[0].error?.name, 'INVALID_RECORD')
    assert.deepEqual(reports[1], { partition: 0, offset: 1, error: null })
    const kcat = await kcatConsume(bootstrap, 'compacted')
    assert.deepEqual(
      normalize(kcat.records).map((r) => [r.offset, r.key, r.value]),
      [
        [0, 'k', 'keyed'],
        [1, 'k2', 'keyed too'],
      ],
    )
  })
})

test('acks=0 produce that fails closes the connection; the kafkajs producer reconnects and goes on', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopic(cluster, 'acks-zero', { configs: { 'max.message.bytes': '1024' } })
    const producer = kafkaFor(bootstrap).producer()
    await producer.connect()
    try {
      await producer.send({ topic: 'acks-zero', acks: 0, messages: [{ value: 'first' }] })
      // Too large: no response with acks=0, the broker closes the connection instead.
      await producer.send({ topic: 'acks-zero', acks: 0, messages: [{ value: 'x'.repeat(4000) }] })
      // No pause here: the broker reads nothing behind an acks=0 produce until it is done,
      // so the send below cannot be appended and then lose its answer to the close.
      let landed = false
      for (let attempt = 0; attempt < 20 && !landed; attempt++) {
        try {
          const [result] = await producer.send({
            topic: 'acks-zero',
            acks: -1,
            messages: [{ value: 'after' }],
          })
          landed = result.errorCode === 0
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
      }
      assert.ok(landed, 'the producer recovered')
    } finally {
      await producer.disconnect()
    }
    const kcat = await kcatConsume(bootstrap, 'acks-zero')
    assert.deepEqual(
      normalize(kcat.records).map((r) => [r.offset, r.value]),
      [
        [0, 'first'],
        [1, 'after'],
      ],
    )
  })
})

test('a request pipelined behind a failing acks=0 produce is not appended', async () => {
  await withBroker(async (cluster) => {
    await createTopic(cluster, 'held', { configs: { 'max.message.bytes': '1024' } })
    const client = await RawClient.connect(cluster.brokers[0].port)
    const produce = (acks: number, value: string, correlationId: number): Buffer =>
      RawClient.frame(ApiKey.Produce, 7, correlationId, {
        transactionalId: null,
        acks,
        timeoutMs: 5000,
        topicData: [
          {
            name: 'held',
            partitionData: [
              {
                index: 0,
                records: encodeRecordBatchSync({ records: [{ value: Buffer.from(value), timestamp: 1 }] }),
              },
            ],
          },
        ],
      })
    // One write: a too-large acks=0 produce, then an acks=1 produce right behind it.
    client.write(Buffer.concat([produce(0, 'x'.repeat(4000), 1), produce(1, 'behind', 2)]))
    assert.equal(await client.waitClosed(), true, 'the failed acks=0 produce closes the connection')
    const log = cluster.brokers[0].replicaManager.getPartition('held', 0)!.log
    assert.equal(log.logEndOffset, 0, 'nothing behind the failed acks=0 produce was appended')
  })
})

test('concurrent producers (kcat, confluent-kafka, kafkajs) over 6 partitions: nothing lost, order kept per producer', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    const topic = 'concurrent'
    const partitions = 6
    await createTopic(cluster, topic, { partitions })
    const perProducer = 300
    const valuesOf = (name: string) => Array.from({ length: perProducer }, (_, i) => `${name}:${i}`)
    const kafkajsProducer = kafkaFor(bootstrap).producer()
    await kafkajsProducer.connect()
    const jobs: Promise<unknown>[] = []
    try {
      for (const [n, codec] of ['gzip', 'zstd', 'none'].entries()) {
        const name = `kcat${n}`
        // Keys pin each producer's records of one key to one partition.
        const lines = valuesOf(name).map((v, i) => `${name}-${i % 10}\t${v}`)
        jobs.push(
          kcatProduce(bootstrap, topic, lines, { keyDelimiter: '\t', compression: codec }).then((r) =>
            assert.equal(r.code, 0, r.stderr),
          ),
        )
      }
      for (const [n, codec] of ['snappy', 'lz4'].entries()) {
        const name = `ck${n}`
        const messages: ProduceMessage[] = valuesOf(name).map((v, i) => ({
          key: `${name}-${i % 10}`,
          value: v,
        }))
        jobs.push(
          confluentProduce(bootstrap, topic, messages, {
            acks: 'all',
            'compression.type': codec,
            'linger.ms': 2,
          }).then((r) => assert.ok(r.reports.every((report) => report.error === null))),
        )
      }
      jobs.push(
        (async () => {
          const values = valuesOf('kjs')
          for (let i = 0; i < values.length; i += 25) {
            await kafkajsProducer.send({
              topic,
              acks: 1,
              messages: values.slice(i, i + 25).map((v, j) => ({ key: `kjs-${(i + j) % 10}`, value: v })),
            })
          }
        })(),
      )
      await Promise.all(jobs)
    } finally {
      await kafkajsProducer.disconnect()
    }
    const kcat = await kcatConsume(bootstrap, topic)
    assert.equal(kcat.code, 0, kcat.stderr)
    const all = normalize(kcat.records)
    assert.equal(all.length, 6 * perProducer)
    assert.ok(offsetsConsecutive(all), 'offsets consecutive in every partition')
    // Each (producer, key) stream is on one partition, in the order it was sent.
    const streams = new Map<string, { partition: number; indexes: number[] }>()
    for (const r of all) {
      const [name, index] = r.value!.split(':')
      const stream = streams.get(r.key!) ?? { partition: r.partition, indexes: [] }
      assert.equal(stream.partition, r.partition, `key ${r.key} on two partitions`)
      assert.ok(r.key!.startsWith(`${name}-`))
      stream.indexes.push(Number(index))
      streams.set(r.key!, stream)
    }
    assert.equal(streams.size, 60)
    for (const [key, stream] of streams) {
      const sorted = [...stream.indexes].sort((a, b) => a - b)
      assert.deepEqual(stream.indexes, sorted, `order of ${key}`)
      assert.equal(stream.indexes.length, perProducer / 10)
    }
    const ck = await confluentConsume(
      bootstrap,
      topic,
      Array.from({ length: partitions }, (_, p): [number, number] => [p, 0]),
    )
    assert.deepEqual(ck.errors, [])
    assert.deepEqual(normalize(ck.records), all)
  })
})
