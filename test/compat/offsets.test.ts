/**
 * Issue 4 compatibility: ListOffsets (earliest, latest, by timestamp, max timestamp) as
 * kcat -Q (v2), confluent-kafka (v2), kafkajs (v3) and @platformatic/kafka (v9) ask it;
 * DeleteRecords through the kafkajs admin, after which the earliest offset moves and a
 * consumer positioned below it gets OFFSET_OUT_OF_RANGE handling (auto.offset.reset).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Admin } from '@platformatic/kafka'
import { Kafka, logLevel } from 'kafkajs'
import { polyfillPromiseWithResolvers, run, withBroker } from '../helpers/cluster.js'
import { confluent, confluentConsume, kcatConsume, normalize, type Rec } from '../helpers/compat-clients.js'
import { createTopic } from '../helpers/topics.js'

/** `kcat -Q -t topic:partition:timestamp` → the offset it prints. */
async function kcatQuery(
  bootstrap: string,
  topic: string,
  partition: number,
  timestamp: number,
): Promise<number> {
  const result = await run('kcat', ['-b', bootstrap, '-Q', '-t', `${topic}:${partition}:${timestamp}`])
  assert.equal(result.code, 0, result.stderr)
  const match = /\[(\d+)\] offset (-?\d+)/.exec(result.stdout)
  assert.ok(match, result.stdout)
  assert.equal(Number(match[1]), partition)
  return Number(match[2])
}

test('ListOffsets and DeleteRecords with kcat, confluent-kafka, kafkajs and @platformatic/kafka', async () => {
  polyfillPromiseWithResolvers()
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    const topic = 'offsets'
    await createTopic(cluster, topic, { partitions: 2 })
    const kafka = new Kafka({ clientId: 'tidelog-compat', brokers: [bootstrap], logLevel: logLevel.NOTHING })
    // Ten records on partition 0, one second apart, in two batches; the newest timestamp
    // sits in the middle so MAX_TIMESTAMP is not simply the last record.
    const t0 = Date.now() - 3_600_000
    const stamp = (i: number) => (i === 6 ? t0 + 100_000 : t0 + i * 1000)
    const producer = kafka.producer()
    await producer.connect()
    const expected: Rec[] = []
    try {
      for (const first of [0, 5]) {
        const messages = []
        for (let i = first; i < first + 5; i++) {
          messages.push({ partition: 0, key: `k${i}`, value: `v${i}`, timestamp: String(stamp(i)) })
          expected.push({ partition: 0, offset: i, key: `k${i}`, value: `v${i}`, headers: [] })
        }
        await producer.send({ topic, messages, acks: -1 })
      }
    } finally {
      await producer.disconnect()
    }

    // kcat -Q: -1 latest, -2 earliest, timestamps (the first record at or after it).
    assert.equal(await kcatQuery(bootstrap, topic, 0, -1), 10)
    assert.equal(await kcatQuery(bootstrap, topic, 0, -2), 0)
    assert.equal(await kcatQuery(bootstrap, topic, 0, t0), 0)
    assert.equal(await kcatQuery(bootstrap, topic, 0, t0 + 2500), 3)
    assert.equal(await kcatQuery(bootstrap, topic, 0, t0 + 7000), 6) // record 6 is newer
    assert.equal(await kcatQuery(bootstrap, topic, 1, -1), 0) // empty partition
    // confluent-kafka: watermarks and offsets_for_times (past the newest: -1, "end").
    const marks = await confluent<{ watermarks: number[][] }>('watermarks', {
      bootstrap,
      topic,
      partitions: [0, 1],
    })
    assert.deepEqual(marks.watermarks, [
      [0, 10],
      [0, 0],
    ])
    const times = await confluent<{ offsets: number[]; errors: unknown[] }>('times', {
      bootstrap,
      topic,
      queries: [
        [0, t0 + 4000],
        [0, t0 + 4001],
        [0, t0 + 100_000],
        [0, t0 + 100_001],
        [1, t0],
      ],
    })
    assert.deepEqual(times.offsets, [4, 5, 6, -1, -1])
    assert.deepEqual(times.errors, [null, null, null, null, null])
    // kafkajs (ListOffsets v3).
    const admin = kafka.admin()
    await admin.connect()
    try {
      assert.deepEqual(await admin.fetchTopicOffsets(topic), [
        { partition: 0, offset: '10', high: '10', low: '0' },
        { partition: 1, offset: '0', high: '0', low: '0' },
      ])
      const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, t0 + 1500)
      assert.deepEqual(
        byTime.sort((a, b) => a.partition - b.partition),
        [
          { partition: 0, offset: '2' },
          { partition: 1, offset: '0' }, // kafkajs answers the high watermark when none is found
        ],
      )
      // @platformatic/kafka (ListOffsets v9): MAX_TIMESTAMP (-3) finds record 6.
      const platformatic = new Admin({ clientId: 'tidelog-compat', bootstrapBrokers: [bootstrap] })
      try {
        const listed = await platformatic.listOffsets({
          topics: [
            {
              name: topic,
              partitions: [
                { partitionIndex: 0, timestamp: -3n },
                { partitionIndex: 1, timestamp: -2n },
              ],
            },
          ],
        })
        const byPartition = listed[0].partitions.sort((a, b) => a.partitionIndex - b.partitionIndex)
        assert.equal(byPartition[0].offset, 6n)
        assert.equal(byPartition[0].timestamp, BigInt(stamp(6)))
        assert.equal(byPartition[1].offset, 0n)
      } finally {
        await platformatic.close()
      }

      // DeleteRecords: the log start moves to 4.
      await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '4' }] })
      assert.deepEqual(
        (await admin.fetchTopicOffsets(topic)).find((p) => p.partition === 0),
        {
          partition: 0,
          offset: '10',
          high: '10',
          low: '4',
        },
      )
    } finally {
      await admin.disconnect()
    }
    assert.equal(await kcatQuery(bootstrap, topic, 0, -2), 4)
    const after = await confluent<{ watermarks: number[][] }>('watermarks', {
      bootstrap,
      topic,
      partitions: [0],
    })
    assert.deepEqual(after.watermarks, [[4, 10]])
    const remaining = normalize(expected.slice(4))

    // A consumer at offset 1 (deleted): auto.offset.reset=error reports the out-of-range
    // position; earliest resets to the new log start and reads exactly what is left.
    const failing = await confluentConsume(bootstrap, topic, [[0, 1]], {
      config: { 'auto.offset.reset': 'error' },
    })
    assert.deepEqual(failing.records, [])
    assert.equal(failing.errors.length, 1)
    assert.equal(failing.errors[0].name, '_AUTO_OFFSET_RESET')
    assert.match(failing.errors[0].str, /out of range/i)
    const resetting = await confluentConsume(bootstrap, topic, [[0, 1]], {
      config: { 'auto.offset.reset': 'earliest' },
    })
    assert.deepEqual(resetting.errors, [])
    assert.deepEqual(normalize(resetting.records), remaining)
    const kcat = await kcatConsume(bootstrap, topic, {
      partition: 0,
      offset: 1,
      extra: ['-X', 'auto.offset.reset=earliest'],
    })
    assert.equal(kcat.code, 0, kcat.stderr)
    assert.deepEqual(normalize(kcat.records), remaining)
    const fromStart = await kcatConsume(bootstrap, topic, { partition: 0 })
    assert.deepEqual(normalize(fromStart.records), remaining)
  })
})
