/**
 * Partitioning matches the Java client bit for bit: Kafka's own murmur2 test vectors
 * (clients/.../common/utils/UtilsTest.java, testMurmur2), toPositive, and for many keys and
 * partition counts the partition librdkafka's murmur2_random partitioner (confluent-kafka)
 * actually sent each key to. Records without a key follow KIP-480's sticky partitioner.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { murmur2, partitionForKey, StickyPartitioner, toPositive } from '../../src/client/partitioner.js'
import { Producer } from '../../src/client/producer.js'
import { systemRandom } from '../../src/common/random.js'
import { confluentProduce } from '../helpers/compat-clients.js'
import { createTopics, withBroker } from './helpers.js'

/** Kafka's UtilsTest.testMurmur2: key bytes → Utils.murmur2 (a Java int). */
const JAVA_MURMUR2: readonly [string, number][] = [
  ['21', -973932308],
  ['foobar', -790332482],
  ['a-little-bit-long-string', -985981536],
  ['a-little-bit-longer-string', -1486304829],
  ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
  ['abc', 479470107],
]

test('murmur2 equals the Java client on Kafka UtilsTest vectors', () => {
  for (const [key, expected] of JAVA_MURMUR2) assert.equal(murmur2(Buffer.from(key)), expected, key)
})

test('toPositive clears the sign bit as Utils.toPositive (not Math.abs)', () => {
  assert.equal(toPositive(-2147483648), 0)
  assert.equal(toPositive(-1), 2147483647)
  assert.equal(toPositive(5), 5)
  // The keyed partition uses toPositive: the vectors give these partitions for 7 partitions.
  for (const [key, hash] of JAVA_MURMUR2)
    assert.equal(partitionForKey(Buffer.from(key), 7), (hash & 0x7fffffff) % 7, key)
})

/** Keys of every length class (0-3 tail bytes), empty, UTF-8 and binary. */
function keys(): Buffer[] {
  const out: Buffer[] = [
    Buffer.alloc(0),
    Buffer.from('é'),
    Buffer.from('日本語キー'),
    Buffer.from([0xff, 0x00, 0x80, 0x7f, 0xfe]),
  ]
  for (let i = 0; i < 240; i++) out.push(Buffer.from(`key-${i}-${'x'.repeat(i % 13)}`))
  return out
}

const PARTITION_COUNTS = [1, 2, 3, 5, 7, 12, 16, 31, 64]

test("keyed partitions equal librdkafka's murmur2_random for many keys and partition counts", {
  timeout: 180000,
}, async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(
      bootstrap,
      PARTITION_COUNTS.map((n) => ({ topic: `murmur-${n}`, partitions: n })),
    )
    const sample = keys()
    // Binary keys cannot cross the JSON bridge as text; librdkafka gets the UTF-8 keys.
    const textKeys = sample.filter((k) => Buffer.from(k.toString('utf8'), 'utf8').equals(k))
    const producer = new Producer({ bootstrapServers: bootstrap, lingerMs: 20 })
    try {
      for (const n of PARTITION_COUNTS) {
        const topic = `murmur-${n}`
        const { reports, undelivered } = await confluentProduce(
          bootstrap,
          topic,
          textKeys.map((k) => ({ key: k.toString('utf8'), value: 'v' })),
          { partitioner: 'murmur2_random' },
        )
        assert.equal(undelivered, 0)
        const ours = await Promise.all(sample.map((key) => producer.send({ topic, key, value: 'v' })))
        textKeys.forEach((key, i) => {
          assert.equal(reports[i].error, null)
          assert.equal(
            partitionForKey(key, n),
            reports[i].partition,
            `key ${JSON.stringify(key.toString())} with ${n} partitions`,
          )
        })
        // And the producer sends each key where the rule says, binary keys included.
        for (const [i, key] of sample.entries()) assert.equal(ours[i].partition, partitionForKey(key, n))
      }
    } finally {
      await producer.close()
    }
  })
})

test('sticky partitioner (KIP-480) keeps a partition until a new batch, then moves to another available one', () => {
  let draw = 0
  // Sequential "random" numbers, as BuiltInPartitionerTest mocks them.
  const sticky = new StickyPartitioner({ ...systemRandom, next: () => ((draw++ % 4) + 0.5) / 2 ** 32 })
  const topic = { numPartitions: 3, available: [0, 1, 2] }
  const first = sticky.partition('t', topic)
  assert.equal(sticky.partition('t', topic), first, 'sticks while the batch is open')
  const second = sticky.onNewBatch('t', topic, first)
  assert.notEqual(second, first, 'a new batch moves it')
  assert.equal(sticky.partition('t', topic), second)
  assert.equal(
    sticky.onNewBatch('t', topic, first),
    second,
    'a stale previous partition does not move it again',
  )
})

test('sticky partitioner never picks a partition without a leader; with none available it picks any', () => {
  const sticky = new StickyPartitioner()
  const topic = { numPartitions: 3, available: [0, 2] }
  let current = sticky.partition('a', topic)
  for (let i = 0; i < 200; i++) {
    assert.notEqual(current, 1)
    current = sticky.onNewBatch('a', topic, current)
  }
  const single = { numPartitions: 2, available: [1] }
  for (let i = 0; i < 20; i++) assert.equal(sticky.onNewBatch('b', single, sticky.partition('b', single)), 1)
  const none = { numPartitions: 1, available: [] }
  assert.equal(sticky.partition('c', none), 0)
})

test('records without key fill one partition per open batch, and move on when batches fill', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'sticky', partitions: 4 }])
    const producer = new Producer({ bootstrapServers: bootstrap, lingerMs: 50, batchSize: 1 << 20 })
    try {
      const sent = await Promise.all(
        Array.from({ length: 200 }, (_, i) => producer.send({ topic: 'sticky', value: `v${i}` })),
      )
      assert.equal(new Set(sent.map((m) => m.partition)).size, 1, 'one open batch, one partition')
      // A small batch.size makes every batch fill at once: records spread over partitions.
      const small = new Producer({ bootstrapServers: bootstrap, lingerMs: 50, batchSize: 200 })
      const spread = await Promise.all(
        Array.from({ length: 200 }, (_, i) => small.send({ topic: 'sticky', value: `w${i}` })),
      )
      await small.close()
      assert.ok(new Set(spread.map((m) => m.partition)).size > 1, 'new batches move to other partitions')
    } finally {
      await producer.close()
    }
  })
})
