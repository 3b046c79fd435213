/**
 * Interop both ways with real clients, exactly (keys, values, null values, headers, offsets):
 * records produced by tidelog's client are consumed by kcat and by confluent-kafka in
 * assign mode (kafkajs cannot consume without a group, which tidelog brokers lack), and
 * records produced by kafkajs and kcat (every codec kcat has) are consumed by tidelog's
 * consumer.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { CompressionTypes } from 'kafkajs'
import { Producer, type ProducerRecord } from '../../src/client/producer.js'
import { kafka } from '../helpers/cluster-clients.js'
import { confluentConsume, kcatConsume, kcatProduce, normalize, type Rec } from '../helpers/compat-clients.js'
import { createTopics, readAll, text, withBroker } from './helpers.js'

const CODECS = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const

/** Records with every shape a client must carry: keys or none, null values, repeated and null headers. */
function records(topic: string, tag: string): ProducerRecord[] {
  return Array.from({ length: 60 }, (_, i) => ({
    topic,
    partition: i % 3,
    key: i % 5 === 0 ? null : `${tag}-key-${i}`,
    value: i % 11 === 7 ? null : `${tag}-value-${i}-${'é'.repeat(i % 4)}`,
    headers:
      i % 2 === 0
        ? [
            ['h', `${i}`],
            ['h', 'again'],
            ['n', null],
          ]
        : {},
  }))
}

/** What a record looks like once stored at `offset`. */
function expected(sent: ProducerRecord[], offsets: number[]): Rec[] {
  return normalize(
    sent.map((r, i) => ({
      partition: r.partition!,
      offset: offsets[i],
      key: (r.key as string | null) ?? null,
      value: r.value as string | null,
      headers: (Array.isArray(r.headers) ? r.headers : []).map(
        ([k, v]) => [k, v as string | null] as [string, string | null],
      ),
    })),
  )
}

test('records produced by tidelog (every codec) are consumed exactly by kcat and confluent-kafka', {
  timeout: 120000,
}, async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(
      bootstrap,
      CODECS.map((codec) => ({ topic: `out-${codec}`, partitions: 3 })),
    )
    for (const codec of CODECS) {
      const topic = `out-${codec}`
      const producer = new Producer({ bootstrapServers: bootstrap, compression: codec, lingerMs: 10 })
      const sent = records(topic, codec)
      const acks = await Promise.all(sent.map((r) => producer.send(r)))
      await producer.close()
      const want = expected(
        sent,
        acks.map((a) => a.offset),
      )
      const kcat = await kcatConsume(bootstrap, topic)
      assert.equal(kcat.code, 0, kcat.stderr)
      assert.deepEqual(normalize(kcat.records), want, `kcat reads ${codec}`)
      const ck = await confluentConsume(bootstrap, topic, [
        [0, 0],
        [1, 0],
        [2, 0],
      ])
      assert.deepEqual(ck.errors, [])
      assert.deepEqual(normalize(ck.records), want, `confluent-kafka reads ${codec}`)
    }
  })
})

test('records produced by kafkajs and by kcat (every codec) are consumed exactly by tidelog', {
  timeout: 120000,
}, async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [
      { topic: 'from-kafkajs', partitions: 3 },
      ...CODECS.map((codec) => ({ topic: `from-kcat-${codec}`, partitions: 1 })),
    ])
    const producer = kafka(bootstrap).producer({ allowAutoTopicCreation: false })
    await producer.connect()
    const messages = Array.from({ length: 90 }, (_, i) => ({
      partition: i % 3,
      key: i % 4 === 0 ? null : `k${i}`,
      value: i % 9 === 4 ? null : `kafkajs-${i}`,
      headers: i % 2 === 0 ? { a: `x${i}`, b: 'y' } : {},
    }))
    // Two sends: one plain, one gzip (kafkajs' built-in codec).
    await producer.send({ topic: 'from-kafkajs', acks: -1, messages: messages.slice(0, 45) })
    await producer.send({
      topic: 'from-kafkajs',
      acks: -1,
      compression: CompressionTypes.GZIP,
      messages: messages.slice(45),
    })
    await producer.disconnect()
    const got = (await readAll(bootstrap, 'from-kafkajs')).map((r) => ({
      partition: r.partition,
      key: text(r.key),
      value: text(r.value),
      headers: r.headers.map((h): [string, string | null] => [h.key, text(h.value)]),
    }))
    const want = messages.map((m) => ({
      partition: m.partition,
      key: m.key,
      value: m.value,
      headers: Object.entries(m.headers),
    }))
    const byPartition = (list: typeof want) => [0, 1, 2].map((p) => list.filter((m) => m.partition === p))
    assert.deepEqual(byPartition(got), byPartition(want))
    const offsets = (await readAll(bootstrap, 'from-kafkajs')).map((r) => [r.partition, r.offset])
    for (const p of [0, 1, 2]) {
      assert.deepEqual(
        offsets.filter(([q]) => q === p).map(([, o]) => o),
        Array.from({ length: 30 }, (_, i) => i),
      )
    }

    for (const codec of CODECS) {
      const lines = Array.from({ length: 50 }, (_, i) => `k${i}:kcat-${codec}-${i}`)
      const result = await kcatProduce(bootstrap, `from-kcat-${codec}`, lines, {
        keyDelimiter: ':',
        headers: [['via', 'kcat']],
        ...(codec === 'none' ? {} : { compression: codec }),
        extra: ['-X', 'linger.ms=50'],
      })
      assert.equal(result.code, 0, result.stderr)
      const read = await readAll(bootstrap, `from-kcat-${codec}`)
      assert.deepEqual(
        read.map((r) => [r.offset, text(r.key), text(r.value), r.headers.map((h) => [h.key, text(h.value)])]),
        lines.map((_line, i) => [i, `k${i}`, `kcat-${codec}-${i}`, [['via', 'kcat']]]),
        `tidelog reads kcat's ${codec}`,
      )
    }
  })
})
