/**
 * Issue 4 compatibility: @platformatic/kafka 1.35 (flexible Produce v11 / Fetch v17 /
 * Metadata v12 with topic ids). Its Producer writes none/gzip/snappy/lz4 batches with keys
 * and headers; kcat and confluent-kafka read them back exactly, and its Consumer's
 * group-free `fetch()` (Fetch by topic id) does too.
 *
 * Not covered: `Consumer.consume()`, which always joins a consumer group first
 * (dist/clients/consumer/consumer.js #performConsume -> joinGroup); groups are not
 * implemented yet. zstd: @platformatic/kafka uses node:zlib's zstd, which Node 20 lacks.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Admin, Consumer, Producer } from '@platformatic/kafka'
import { polyfillPromiseWithResolvers, withBroker } from '../helpers/cluster.js'
import {
  confluentConsume,
  kcatConsume,
  normalize,
  offsetsConsecutive,
  type Rec,
} from '../helpers/compat-clients.js'
import { createTopic, storedCodecs } from '../helpers/topics.js'

const CODECS = ['none', 'gzip', 'snappy', 'lz4'] as const

function text(buffer: Buffer | null | undefined): string | null {
  return buffer === null || buffer === undefined ? null : buffer.toString('utf8')
}

test('@platformatic/kafka producer (none/gzip/snappy/lz4) -> kcat, confluent-kafka and its own fetch() read all exactly', async () => {
  polyfillPromiseWithResolvers()
  await withBroker(async (cluster) => {
    const topic = 'platformatic-produce'
    const partitions = 2
    await createTopic(cluster, topic, { partitions })
    const bootstrapBrokers = [cluster.bootstrapServers]
    const producer = new Producer({ clientId: 'tidelog-compat', bootstrapBrokers, autocreateTopics: false })
    const expected: Rec[] = []
    const nextOffset = [0, 0]
    try {
      for (const [round, compression] of CODECS.entries()) {
        const messages = []
        for (let i = 0; i < 40; i++) {
          const partition = (i + round) % partitions
          const key = `pk-${round}-${i % 6}`
          const value = i === 2 ? `${compression} repeat `.repeat(300) : `platformatic ${compression} ${i} ✓`
          const headers = new Map<Buffer, Buffer>()
          if (i % 3 !== 0) {
            headers.set(Buffer.from('codec'), Buffer.from(compression))
            headers.set(Buffer.from('i'), Buffer.from(String(i)))
          }
          messages.push({ topic, partition, key: Buffer.from(key), value: Buffer.from(value), headers })
          expected.push({
            partition,
            offset: nextOffset[partition]++,
            key,
            value,
            headers: [...headers].map(([k, v]): [string, string] => [k.toString(), v.toString()]),
          })
        }
        const result = await producer.send({ messages, acks: -1, compression })
        assert.equal(result.offsets?.length, partitions)
      }
    } finally {
      await producer.close()
    }
    const want = normalize(expected)
    assert.ok(offsetsConsecutive(want))
    const codecs = new Set<number>()
    for (let p = 0; p < partitions; p++) for (const c of await storedCodecs(cluster, topic, p)) codecs.add(c)
    assert.deepEqual([...codecs].sort(), [0, 1, 2, 3], 'batches stored with every codec')

    const kcat = await kcatConsume(cluster.bootstrapServers, topic)
    assert.equal(kcat.code, 0, kcat.stderr)
    assert.deepEqual(normalize(kcat.records), want, 'kcat read')
    const ck = await confluentConsume(cluster.bootstrapServers, topic, [
      [0, 0],
      [1, 0],
    ])
    assert.deepEqual(ck.errors, [])
    assert.deepEqual(normalize(ck.records), want, 'confluent-kafka read')

    // The Consumer's low-level fetch() needs no group: Fetch v17 addresses topics by id.
    const admin = new Admin({ clientId: 'tidelog-compat', bootstrapBrokers })
    const consumer = new Consumer({ clientId: 'tidelog-compat', groupId: 'unused', bootstrapBrokers })
    try {
      const metadata = await admin.metadata({ topics: [topic] })
      const topicId = metadata.topics.get(topic)!.id
      const got: Rec[] = []
      const position = [0n, 0n]
      for (let attempt = 0; attempt < 50 && got.length < want.length; attempt++) {
        const response = await consumer.fetch({
          node: 0,
          maxWaitTime: 100,
          minBytes: 1,
          maxBytes: 64 * 1024,
          topics: [
            {
              topicId,
              partitions: [0, 1].map((partition) => ({
                partition,
                currentLeaderEpoch: -1,
                fetchOffset: position[partition],
                lastFetchedEpoch: -1,
                partitionMaxBytes: 16 * 1024,
              })),
            },
          ],
        })
        assert.equal(response.errorCode, 0)
        for (const t of response.responses) {
          assert.equal(t.topicId, topicId)
          for (const p of t.partitions) {
            assert.equal(p.errorCode, 0)
            for (const batch of p.records ?? []) {
              for (const r of batch.records) {
                const offset = batch.firstOffset + BigInt(r.offsetDelta)
                if (offset < position[p.partitionIndex]) continue // batch starts before the fetch offset
                got.push({
                  partition: p.partitionIndex,
                  offset: Number(offset),
                  key: text(r.key),
                  value: text(r.value),
                  headers: r.headers.map(([k, v]): [string, string | null] => [text(k) ?? '', text(v)]),
                })
                position[p.partitionIndex] = offset + 1n
              }
            }
          }
        }
      }
      assert.deepEqual(normalize(got), want, '@platformatic/kafka fetch() read')
    } finally {
      await consumer.close()
      await admin.close()
    }
  })
})
