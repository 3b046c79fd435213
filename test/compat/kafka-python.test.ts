/**
 * Issue 4 compatibility: kafka-python 2.0.2 (python3-kafka), which probes with ApiVersions
 * v0 plus a pipelined Metadata v0, guesses the broker version and then sends fixed,
 * non-flexible versions. Its KafkaProducer (none and gzip) must land every record, readable
 * exactly by kcat and by its own group-less KafkaConsumer (Fetch v4, ListOffsets v1).
 * snappy/lz4/zstd need Python codec modules that are not installed.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { withBroker } from '../helpers/cluster.js'
import {
  kcatConsume,
  normalize,
  offsetsConsecutive,
  pythonJson,
  type Rec,
} from '../helpers/compat-clients.js'
import { createTopic } from '../helpers/topics.js'

interface KpProduceResult {
  reports: { partition: number; offset: number }[]
  apiVersion: number[]
}

test('kafka-python KafkaProducer (none, gzip; acks 1 and all) -> kcat and kafka-python read all exactly', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    const topic = 'kafka-python'
    const partitions = 2
    await createTopic(cluster, topic, { partitions })
    const expected: Rec[] = []
    for (const [round, config] of [
      { acks: 1, compression_type: null },
      { acks: 'all', compression_type: 'gzip' },
    ].entries()) {
      const messages = Array.from({ length: 30 }, (_, i) => ({
        key: i % 7 === 6 ? null : `kp-${round}-${i}`,
        value: `kafka-python ${round}/${i} ${'p'.repeat(i * 3)}`,
        headers: i % 2 === 0 ? [['round', String(round)] as [string, string]] : [],
        partition: i % partitions,
      }))
      const result = await pythonJson<KpProduceResult>('kp.py', 'produce', {
        bootstrap,
        topic,
        messages,
        config,
      })
      // It guessed a broker version from ApiVersions v0 (2.x: record batches, not message sets).
      assert.ok(result.apiVersion[0] >= 2, `kafka-python guessed ${result.apiVersion.join('.')}`)
      for (const [i, report] of result.reports.entries()) {
        const m = messages[i]
        assert.equal(report.partition, m.partition)
        expected.push({
          partition: report.partition,
          offset: report.offset,
          key: m.key,
          value: m.value,
          headers: m.headers,
        })
      }
    }
    const want = normalize(expected)
    assert.ok(offsetsConsecutive(want))
    const kcat = await kcatConsume(bootstrap, topic)
    assert.equal(kcat.code, 0, kcat.stderr)
    assert.deepEqual(normalize(kcat.records), want, 'kcat read')
    const own = await pythonJson<{ records: Rec[] }>('kp.py', 'consume', {
      bootstrap,
      topic,
      partitions: [0, 1],
      count: want.length,
    })
    assert.deepEqual(normalize(own.records), want, 'kafka-python read')
  })
})
