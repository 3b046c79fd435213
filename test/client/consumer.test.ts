/**
 * Consumer behaviour against a real broker (assign mode): the reset policies, seek by
 * offset, to the beginning/end and by time, pause/resume, OFFSET_OUT_OF_RANGE handled by
 * the policy, long-poll fetches, and the three ways to read (poll, for await, run).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { Consumer, type ConsumerRecord } from '../../src/client/consumer.js'
import { Producer } from '../../src/client/producer.js'
import { createTopics, text, withBroker } from './helpers.js'

async function produce(
  bootstrap: string,
  topic: string,
  count: number,
  options: { partition?: number; prefix?: string; timestampOf?: (i: number) => number } = {},
): Promise<void> {
  const producer = new Producer({ bootstrapServers: bootstrap, lingerMs: 0 })
  // Awaited one by one: each record its own batch, so ListOffsets by time is exact.
  for (let i = 0; i < count; i++) {
    await producer.send({
      topic,
      partition: options.partition ?? 0,
      key: `k${i}`,
      value: `${options.prefix ?? 'v'}${i}`,
      ...(options.timestampOf ? { timestamp: options.timestampOf(i) } : {}),
    })
  }
  await producer.close()
}

async function pollUntil(consumer: Consumer, count: number, timeoutMs = 10000): Promise<ConsumerRecord[]> {
  const records: ConsumerRecord[] = []
  const deadline = Date.now() + timeoutMs
  while (records.length < count && Date.now() < deadline) records.push(...(await consumer.poll(200)))
  return records
}

const values = (records: readonly ConsumerRecord[]) => records.map((r) => text(r.value))

test('auto.offset.reset earliest, latest and none; an explicit offset wins', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'reset' }])
    await produce(bootstrap, 'reset', 5)
    const earliest = new Consumer({ bootstrapServers: bootstrap, autoOffsetReset: 'earliest' })
    earliest.assign([{ topic: 'reset', partition: 0 }])
    assert.deepEqual(values(await pollUntil(earliest, 5)), ['v0', 'v1', 'v2', 'v3', 'v4'])
    await earliest.close()

    const latest = new Consumer({ bootstrapServers: bootstrap, fetchMaxWaitMs: 100 })
    latest.assign([{ topic: 'reset', partition: 0 }])
    assert.deepEqual(await latest.poll(300), [])
    assert.equal(latest.position({ topic: 'reset', partition: 0 }), 5)
    await produce(bootstrap, 'reset', 2, { prefix: 'new' })
    assert.deepEqual(values(await pollUntil(latest, 2)), ['new0', 'new1'])
    await latest.close()

    const none = new Consumer({ bootstrapServers: bootstrap, autoOffsetReset: 'none' })
    none.assign([{ topic: 'reset', partition: 0 }])
    await assert.rejects(none.poll(200), { code: 'ERR_NO_OFFSET' })
    none.assign([{ topic: 'reset', partition: 0, offset: 3 }])
    assert.deepEqual(values(await pollUntil(none, 4)), ['v3', 'v4', 'new0', 'new1'])
    await none.close()
  })
})

test('seek to an offset, the beginning, the end and a time (ListOffsets)', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'seek', partitions: 2 }])
    const base = 1_700_000_000_000
    await produce(bootstrap, 'seek', 10, { timestampOf: (i) => base + i * 1000 })
    await produce(bootstrap, 'seek', 3, { partition: 1, prefix: 'p1-' })
    const consumer = new Consumer({
      bootstrapServers: bootstrap,
      autoOffsetReset: 'earliest',
      fetchMaxWaitMs: 100,
    })
    const tp = { topic: 'seek', partition: 0 }
    consumer.assign([tp])
    consumer.seek(tp, 7)
    assert.deepEqual(values(await pollUntil(consumer, 3)), ['v7', 'v8', 'v9'])
    consumer.seekToBeginning()
    assert.equal(text((await pollUntil(consumer, 1))[0].value), 'v0')
    consumer.seekToEnd()
    assert.deepEqual(await consumer.poll(300), [])
    assert.equal(consumer.position(tp), 10)
    consumer.seekToTimestamp(base + 4500)
    const fromTime = await pollUntil(consumer, 5)
    assert.deepEqual(values(fromTime), ['v5', 'v6', 'v7', 'v8', 'v9'])
    assert.equal(fromTime[0].timestamp, base + 5000)
    assert.equal(fromTime[0].timestampType, 'CreateTime')
    // After the last record: Kafka answers -1, the consumer starts at the end.
    consumer.seekToTimestamp(base + 60_000)
    assert.deepEqual(await consumer.poll(300), [])
    assert.equal(consumer.position(tp), 10)
    const tps = [tp, { topic: 'seek', partition: 1 }]
    assert.deepEqual([...(await consumer.endOffsets(tps)).values()], [10, 3])
    assert.deepEqual([...(await consumer.beginningOffsets(tps)).values()], [0, 0])
    assert.deepEqual([...(await consumer.offsetsForTimes([tp], base + 2000)).values()], [2])
    await consumer.close()
  })
})

test('many small fetches, each sent before the last is decoded, keep every partition in order; a seek drops what was fetched ahead', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'ahead', partitions: 2 }])
    const perPartition = 3000
    // Small batches (about 100 records each) and a 4 KiB fetch size: dozens of fetches per partition.
    const producer = new Producer({ bootstrapServers: bootstrap, lingerMs: 5, batchSize: 2048 })
    const sends: Promise<unknown>[] = []
    for (let i = 0; i < perPartition; i++) {
      for (const partition of [0, 1])
        sends.push(producer.send({ topic: 'ahead', partition, value: `p${partition}-${i}` }))
    }
    await Promise.all(sends)
    await producer.close()
    const consumer = new Consumer({
      bootstrapServers: bootstrap,
      autoOffsetReset: 'earliest',
      maxPartitionFetchBytes: 4096,
      maxPollRecords: 150,
      fetchMaxWaitMs: 100,
    })
    consumer.assign([
      { topic: 'ahead', partition: 0 },
      { topic: 'ahead', partition: 1 },
    ])
    const seen: [number[], number[]] = [[], []]
    let seeked = false
    const deadline = Date.now() + 20000
    const done = () => seeked && seen[0].at(-1) === perPartition - 1 && seen[1].length >= perPartition
    while (!done() && Date.now() < deadline) {
      for (const r of await consumer.poll(200)) {
        assert.equal(text(r.value), `p${r.partition}-${r.offset}`)
        seen[r.partition].push(r.offset)
      }
      if (!seeked && seen[0].length >= 1000) {
        seeked = true
        consumer.seek({ topic: 'ahead', partition: 0 }, 10)
      }
    }
    await consumer.close()
    const upTo = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i)
    const seekAt = seen[0].indexOf(10, 11)
    assert.ok(seekAt >= 1000, 'partition 0 starts again at 10 after the seek')
    assert.deepEqual(seen[0].slice(0, seekAt), upTo(0, seekAt))
    assert.deepEqual(seen[0].slice(seekAt), upTo(10, perPartition))
    assert.deepEqual(seen[1], upTo(0, perPartition))
  })
})

test('paused partitions return nothing until resumed', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'pause', partitions: 2 }])
    await produce(bootstrap, 'pause', 3, { partition: 0, prefix: 'a' })
    await produce(bootstrap, 'pause', 3, { partition: 1, prefix: 'b' })
    const consumer = new Consumer({
      bootstrapServers: bootstrap,
      autoOffsetReset: 'earliest',
      fetchMaxWaitMs: 100,
    })
    await consumer.assignTopics(['pause'])
    consumer.pause([{ topic: 'pause', partition: 1 }])
    assert.deepEqual(consumer.paused(), [{ topic: 'pause', partition: 1 }])
    const first = await pollUntil(consumer, 3)
    assert.deepEqual(values(first), ['a0', 'a1', 'a2'])
    assert.deepEqual(await consumer.poll(300), [])
    consumer.resume([{ topic: 'pause', partition: 1 }])
    assert.deepEqual(values(await pollUntil(consumer, 3)), ['b0', 'b1', 'b2'])
    await consumer.close()
  })
})

test('OFFSET_OUT_OF_RANGE is handled by the reset policy (earliest, latest) or thrown (none)', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'oor' }])
    await produce(bootstrap, 'oor', 10)
    const admin = new Admin({ bootstrapServers: bootstrap })
    assert.equal((await admin.deleteRecords([{ topic: 'oor', partition: 0, offset: 6 }])).get('oor/0'), 6)
    admin.close()
    const earliest = new Consumer({ bootstrapServers: bootstrap, autoOffsetReset: 'earliest' })
    earliest.assign([{ topic: 'oor', partition: 0, offset: 2 }])
    assert.deepEqual(values(await pollUntil(earliest, 4)), ['v6', 'v7', 'v8', 'v9'])
    await earliest.close()
    const latest = new Consumer({
      bootstrapServers: bootstrap,
      autoOffsetReset: 'latest',
      fetchMaxWaitMs: 100,
    })
    latest.assign([{ topic: 'oor', partition: 0, offset: 50 }])
    assert.deepEqual(await latest.poll(500), [])
    assert.equal(latest.position({ topic: 'oor', partition: 0 }), 10)
    await latest.close()
    const none = new Consumer({ bootstrapServers: bootstrap, autoOffsetReset: 'none' })
    none.assign([{ topic: 'oor', partition: 0, offset: 1 }])
    await assert.rejects(pollUntil(none, 1, 3000), { code: 'ERR_KAFKA_OFFSET_OUT_OF_RANGE' })
    await none.close()
  })
})

test('a long poll returns as soon as a record arrives, not after fetch.max.wait.ms', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'lp' }])
    const consumer = new Consumer({ bootstrapServers: bootstrap, fetchMaxWaitMs: 5000 })
    consumer.assign([{ topic: 'lp', partition: 0, offset: 0 }])
    const started = Date.now()
    const polling = consumer.poll(8000)
    setTimeout(() => {
      produce(bootstrap, 'lp', 1).catch((error: unknown) => assert.fail(String(error)))
    }, 300)
    const records = await polling
    const elapsed = Date.now() - started
    assert.deepEqual(values(records), ['v0'])
    assert.ok(elapsed < 3000, `poll took ${elapsed} ms`)
    await consumer.close()
  })
})

test('for await, batches() and run() deliver in order until stop()', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'iter', partitions: 2 }])
    await produce(bootstrap, 'iter', 20, { partition: 0 })
    await produce(bootstrap, 'iter', 20, { partition: 1, prefix: 'w' })
    const consumer = new Consumer({
      bootstrapServers: bootstrap,
      autoOffsetReset: 'earliest',
      fetchMaxWaitMs: 100,
      maxPollRecords: 7,
    })
    await consumer.assignTopics(['iter'])
    const seen: ConsumerRecord[] = []
    for await (const record of consumer) {
      seen.push(record)
      if (seen.length === 40) break
    }
    for (const p of [0, 1]) {
      assert.deepEqual(
        seen.filter((r) => r.partition === p).map((r) => r.offset),
        Array.from({ length: 20 }, (_, i) => i),
      )
    }
    consumer.seekToBeginning()
    const batches: number[] = []
    await consumer.run({
      eachBatch: (batch) => {
        assert.ok(batch.records.length <= 7)
        batches.push(batch.records.length)
        if (batches.reduce((a, b) => a + b, 0) >= 40) consumer.stop()
      },
    })
    assert.equal(
      batches.reduce((a, b) => a + b, 0),
      40,
    )
    await consumer.close()
  })
})

test('subscribe and commit need a groupId; group options are checked at construction', async () => {
  const consumer = new Consumer({ bootstrapServers: '127.0.0.1:1' })
  assert.throws(() => consumer.subscribe(['t']), { code: 'ERR_INVALID_ARGUMENT' })
  await assert.rejects(consumer.commit(), { code: 'ERR_INVALID_ARGUMENT' })
  await consumer.close()
  for (const bad of [
    { groupId: '' },
    { groupId: 'g', heartbeatIntervalMs: 5000, sessionTimeoutMs: 5000 },
    { groupId: 'g', partitionAssignmentStrategy: ['uniform' as 'range'] },
  ]) {
    assert.throws(() => new Consumer({ bootstrapServers: '127.0.0.1:1', ...bad }), {
      code: 'ERR_INVALID_ARGUMENT',
    })
  }
  const member = new Consumer({ bootstrapServers: '127.0.0.1:1', groupId: 'g' })
  member.subscribe(['t'])
  assert.throws(() => member.assign([{ topic: 't', partition: 0 }]), { code: 'ERR_INVALID_ARGUMENT' })
  assert.deepEqual(member.subscription(), ['t'])
  await member.close()
})

test('a fetch response many times the socket read buffer arrives whole: every value byte for byte, in order', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'large-fetch', partitions: 2 }])
    // ~3 MiB over two partitions: one fetch response is read in place, far past FrameReader's 64 KiB scratch buffer.
    const payloadOf = (i: number): Buffer => Buffer.alloc(10_000 + (i % 7), i % 251)
    const producer = new Producer({ bootstrapServers: bootstrap, batchSize: 1 << 20, lingerMs: 20 })
    await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        producer.send({ topic: 'large-fetch', partition: i % 2, value: payloadOf(i) }),
      ),
    )
    await producer.close()
    const consumer = new Consumer({
      bootstrapServers: bootstrap,
      autoOffsetReset: 'earliest',
      maxPartitionFetchBytes: 10 << 20,
      maxPollRecords: 1000,
    })
    consumer.assign([
      { topic: 'large-fetch', partition: 0 },
      { topic: 'large-fetch', partition: 1 },
    ])
    const records = await pollUntil(consumer, 300)
    await consumer.close()
    assert.equal(records.length, 300)
    for (const partition of [0, 1]) {
      const mine = records.filter((r) => r.partition === partition)
      assert.deepEqual(
        mine.map((r) => r.offset),
        Array.from({ length: 150 }, (_, i) => i),
      )
      for (const [i, r] of mine.entries())
        assert.ok(r.value!.equals(payloadOf(2 * i + partition)), `value at offset ${i}`)
    }
  })
})
