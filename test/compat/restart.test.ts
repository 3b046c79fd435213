/**
 * Issue 4 compatibility: a broker restarted on the same data directory serves every topic
 * and record again (read exactly by kcat and confluent-kafka), keeps a DeleteRecords log
 * start, and appends after the old log end.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import type { Cluster } from '../../src/server/cluster.js'
import { run, startBroker } from '../helpers/cluster.js'
import {
  confluent,
  confluentConsume,
  confluentProduce,
  kcatConsume,
  normalize,
  type ProduceMessage,
  type Rec,
} from '../helpers/compat-clients.js'
import { createTopic } from '../helpers/topics.js'

async function withBrokerOn<T>(dataDir: string, fn: (cluster: Cluster) => Promise<T>): Promise<T> {
  const cluster = await startBroker({ dataDir })
  try {
    return await fn(cluster)
  } finally {
    await cluster.stop()
  }
}

function kafkaFor(cluster: Cluster): Kafka {
  return new Kafka({
    clientId: 'tidelog-compat',
    brokers: [cluster.bootstrapServers],
    logLevel: logLevel.NOTHING,
  })
}

test('restart on the same data dir: topics listed, every record read back exactly, log start kept', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tidelog-compat-restart-'))
  try {
    const topic = 'persisted'
    const partitions = 3
    const expected: Rec[] = []
    await withBrokerOn(dataDir, async (cluster) => {
      await createTopic(cluster, topic, { partitions })
      await createTopic(cluster, 'empty-topic', { partitions: 2 })
      for (const codec of ['none', 'zstd', 'gzip']) {
        const messages: ProduceMessage[] = []
        for (let i = 0; i < 100; i++) {
          messages.push({
            partition: i % partitions,
            key: `${codec}-${i}`,
            value: `${codec} value ${i} ${'z'.repeat(i)}`,
            headers: [['n', String(i)]],
          })
        }
        const { reports } = await confluentProduce(cluster.bootstrapServers, topic, messages, {
          acks: 'all',
          'compression.type': codec,
        })
        for (const [i, r] of reports.entries()) {
          assert.equal(r.error, null)
          const m = messages[i]
          expected.push({
            partition: r.partition,
            offset: r.offset,
            key: m.key!,
            value: m.value,
            headers: m.headers!,
          })
        }
      }
      const admin = kafkaFor(cluster).admin()
      await admin.connect()
      try {
        await admin.fetchTopicMetadata({ topics: [topic] }) // kafkajs deleteTopicRecords needs it cached
        await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '10' }] })
      } finally {
        await admin.disconnect()
      }
    })
    const highOf = (partition: number) => expected.filter((r) => r.partition === partition).length
    const kept = normalize(expected.filter((r) => r.partition !== 0 || r.offset >= 10))

    await withBrokerOn(dataDir, async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      const admin = kafkaFor(cluster).admin()
      await admin.connect()
      try {
        assert.deepEqual((await admin.listTopics()).sort(), ['empty-topic', topic])
        const offsets = (await admin.fetchTopicOffsets(topic)).sort((a, b) => a.partition - b.partition)
        assert.deepEqual(
          offsets.map((o) => [o.low, o.high]),
          [0, 1, 2].map((p) => [p === 0 ? '10' : '0', String(highOf(p))]),
        )
      } finally {
        await admin.disconnect()
      }
      const listed = await run('kcat', ['-b', bootstrap, '-L', '-J'])
      assert.equal(listed.code, 0, listed.stderr)
      const metadata = JSON.parse(listed.stdout) as { topics: { topic: string; partitions: unknown[] }[] }
      assert.deepEqual(metadata.topics.map((t) => [t.topic, t.partitions.length]).sort(), [
        ['empty-topic', 2],
        [topic, 3],
      ])

      const kcat = await kcatConsume(bootstrap, topic)
      assert.equal(kcat.code, 0, kcat.stderr)
      assert.deepEqual(normalize(kcat.records), kept, 'kcat after restart')
      const ck = await confluentConsume(bootstrap, topic, [
        [0, 10],
        [1, 0],
        [2, 0],
      ])
      assert.deepEqual(ck.errors, [])
      assert.deepEqual(normalize(ck.records), kept, 'confluent-kafka after restart')
      const marks = await confluent<{ watermarks: number[][] }>('watermarks', {
        bootstrap,
        topic,
        partitions: [0],
      })
      assert.deepEqual(marks.watermarks, [[10, highOf(0)]])

      // New records continue after the old log end.
      const { reports } = await confluentProduce(
        bootstrap,
        topic,
        [{ partition: 1, key: 'after', value: 'restart' }],
        {
          acks: 'all',
        },
      )
      assert.deepEqual(reports, [{ partition: 1, offset: highOf(1), error: null }])
    })
  } finally {
    await rm(dataDir, { recursive: true, force: true })
  }
})
