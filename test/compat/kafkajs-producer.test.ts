/**
 * Issue 4 compatibility: kafkajs 2.2.4 produces (keys, headers, null keys and values, no
 * compression and gzip, acks -1/1/0) and kcat and confluent-kafka read every record back
 * exactly, with consecutive offsets per partition.
 *
 * Not covered here: the kafkajs Consumer, which always joins a consumer group (JoinGroup,
 * SyncGroup, ...), not implemented yet; kafkajs snappy/lz4/zstd, which need codec plugins
 * that are not installed (librdkafka covers those codecs in kcat-producer.test.ts and
 * confluent-producer.test.ts).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { CompressionTypes, Kafka, logLevel, Partitioners } from 'kafkajs'
import { withBroker } from '../helpers/cluster.js'
import {
  confluentConsume,
  kcatConsume,
  normalize,
  offsetsConsecutive,
  type Rec,
} from '../helpers/compat-clients.js'
import { createTopic, serves, storedCodecs } from '../helpers/topics.js'

const CREATE_TOPICS = 19

function kafkaFor(bootstrap: string): Kafka {
  return new Kafka({ clientId: 'tidelog-compat', brokers: [bootstrap], logLevel: logLevel.NOTHING })
}

test('kafkajs producer: keys, headers, none/gzip, acks -1/1/0 -> kcat and confluent-kafka read all exactly', async (t) => {
  await withBroker(async (cluster) => {
    const topic = 'kafkajs-produce'
    const partitions = 3
    const kafka = kafkaFor(cluster.bootstrapServers)
    if (serves(cluster, CREATE_TOPICS)) {
      const admin = kafka.admin()
      await admin.connect()
      try {
        assert.equal(
          await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true }),
          true,
        )
      } finally {
        await admin.disconnect()
      }
    } else {
      t.diagnostic('CreateTopics is not served yet: topic created through the broker metadata')
      await createTopic(cluster, topic, { partitions })
    }

    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner })
    await producer.connect()
    const expected: Rec[] = []
    const nextOffset = [0, 0, 0]
    try {
      let round = 0
      for (const compression of [CompressionTypes.None, CompressionTypes.GZIP]) {
        for (const acks of [-1, 1, 0]) {
          const messages = []
          for (let i = 0; i < 12; i++) {
            const partition = (i + round) % partitions
            const id = `r${round}-m${i}`
            // Some variety: null keys, a null value (tombstone), an empty value, repeated
            // and empty header values, non-ASCII text and a long compressible value.
            const key = i % 5 === 4 ? null : `key-${id}-é`
            const value =
              i === 3
                ? null
                : i === 7
                  ? ''
                  : i === 9
                    ? `long-${id}-`.repeat(500)
                    : `value ${id} ☃ ${'x'.repeat(i)}`
            const headers: Record<string, string | string[]> =
              i % 4 === 0 ? {} : { trace: `t-${id}`, multi: ['a', 'b'], empty: '' }
            messages.push({ partition, key, value, headers })
            const recHeaders: [string, string | null][] =
              i % 4 === 0
                ? []
                : [
                    ['trace', `t-${id}`],
                    ['multi', 'a'],
                    ['multi', 'b'],
                    ['empty', ''],
                  ]
            expected.push({ partition, offset: nextOffset[partition]++, key, value, headers: recHeaders })
          }
          const result = await producer.send({ topic, messages, acks, compression })
          if (acks !== 0) {
            assert.equal(result.length, partitions)
            for (const r of result) assert.equal(r.errorCode, 0)
          }
          round++
        }
      }
      // acks=0 answers nothing: a final acks=-1 send proves everything before it landed
      // (requests on one connection are appended in order).
      const sentinel = { partition: 0, key: 'sentinel', value: 'last', headers: {} }
      const [last] = await producer.send({ topic, messages: [sentinel], acks: -1 })
      assert.equal(Number(last.baseOffset), nextOffset[0])
      expected.push({ partition: 0, offset: nextOffset[0]++, key: 'sentinel', value: 'last', headers: [] })
    } finally {
      await producer.disconnect()
    }
    const want = normalize(expected)
    assert.ok(offsetsConsecutive(want))
    const codecs = new Set<number>()
    for (let p = 0; p < partitions; p++) for (const c of await storedCodecs(cluster, topic, p)) codecs.add(c)
    assert.deepEqual([...codecs].sort(), [0, 1], 'uncompressed and gzip batches stored')

    const kcat = await kcatConsume(cluster.bootstrapServers, topic)
    assert.equal(kcat.code, 0, kcat.stderr)
    assert.deepEqual(normalize(kcat.records), want)

    const ck = await confluentConsume(
      cluster.bootstrapServers,
      topic,
      [0, 1, 2].map((p): [number, number] => [p, 0]),
    )
    assert.deepEqual(ck.errors, [])
    assert.deepEqual(normalize(ck.records), want)
  })
})

test('kafkajs producer auto-creates a topic through Metadata and kcat reads it back', async () => {
  await withBroker(
    async (cluster) => {
      const kafka = kafkaFor(cluster.bootstrapServers)
      const producer = kafka.producer({ allowAutoTopicCreation: true })
      await producer.connect()
      try {
        const result = await producer.send({
          topic: 'auto-created',
          acks: -1,
          messages: [
            { key: 'k', value: 'v1', partition: 1 },
            { key: 'k', value: 'v2', partition: 1 },
          ],
        })
        assert.equal(result[0].errorCode, 0)
      } finally {
        await producer.disconnect()
      }
      const admin = kafka.admin()
      await admin.connect()
      try {
        const metadata = await admin.fetchTopicMetadata({ topics: ['auto-created'] })
        assert.equal(metadata.topics[0].partitions.length, 2)
      } finally {
        await admin.disconnect()
      }
      const kcat = await kcatConsume(cluster.bootstrapServers, 'auto-created')
      assert.equal(kcat.code, 0, kcat.stderr)
      assert.deepEqual(normalize(kcat.records), [
        { partition: 1, offset: 0, key: 'k', value: 'v1', headers: [] },
        { partition: 1, offset: 1, key: 'k', value: 'v2', headers: [] },
      ])
    },
    { properties: { 'num.partitions': 2 } },
  )
})
