/**
 * Producer behaviour against a real broker: sync and async styles, acks 0/1/all, batching
 * and linger, compression, retries bounded by `retries` and delivery.timeout.ms, argument
 * errors, and produce and fetch on separate connections.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { KafkaClient } from '../../src/client/client.js'
import { Consumer } from '../../src/client/consumer.js'
import { KafkaClientError } from '../../src/client/errors.js'
import { Producer, type RecordMetadata } from '../../src/client/producer.js'
import { ManualClock } from '../helpers/manual-clock.js'
import { storedCodecs } from '../helpers/topics.js'
import { createTopics, readAll, text, withBroker } from './helpers.js'

test('sync style: each awaited send resolves with the next offset; producerType sync orders un-awaited sends', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'sync' }])
    const producer = new Producer({ bootstrapServers: bootstrap, acks: 'all' })
    for (let i = 0; i < 20; i++) {
      const meta = await producer.send({ topic: 'sync', value: `a${i}` })
      assert.deepEqual([meta.partition, meta.offset], [0, i])
    }
    await producer.close()
    const strict = new Producer({ bootstrapServers: bootstrap, producerType: 'sync', lingerMs: 0 })
    const sent = await Promise.all(
      Array.from({ length: 20 }, (_, i) => strict.send({ topic: 'sync', value: `b${i}` })),
    )
    await strict.close()
    assert.deepEqual(
      sent.map((m) => m.offset),
      Array.from({ length: 20 }, (_, i) => 20 + i),
    )
    // producer.type=sync: one record per request, so one batch per record.
    assert.equal((await storedCodecs(cluster, 'sync', 0)).length, 40)
  })
})

test('async style: callbacks and promises settle, flush() sends lingering batches, records batch together', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'async' }])
    // A manual clock that never moves: the batch lingers until flush() sends it.
    const clock = new ManualClock()
    const producer = new Producer({ bootstrapServers: bootstrap, lingerMs: 60000, clock })
    const called: RecordMetadata[] = []
    const promises = Array.from({ length: 500 }, (_, i) =>
      producer.send({ topic: 'async', key: `k${i}`, value: `v${i}` }, (error, meta) => {
        assert.equal(error, null)
        called.push(meta!)
      }),
    )
    assert.equal(producer.pendingRecordCount, 500, 'lingering (linger.ms 60 s)')
    await new Promise((resolve) => setTimeout(resolve, 100))
    assert.equal(producer.pendingRecordCount, 500, 'still lingering: nothing is sent before linger.ms')
    const started = clock.monotonicMs()
    await withRealTimeout(producer.flush(), 10000, 'flush() waits for linger.ms')
    assert.equal(clock.monotonicMs() - started, 0, 'flush did not wait for linger.ms')
    assert.equal(called.length, 500)
    const metas = await Promise.all(promises)
    assert.deepEqual(
      metas.map((m) => m.offset),
      Array.from({ length: 500 }, (_, i) => i),
    )
    await producer.close()
    assert.ok((await storedCodecs(cluster, 'async', 0)).length <= 2, 'records of one tick share a batch')
  })
})

test('a lingering batch goes once linger.ms has passed on the clock, not before', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'linger' }])
    const clock = new ManualClock()
    const producer = new Producer({ bootstrapServers: bootstrap, lingerMs: 1000, clock })
    // Metadata first (real I/O, no clock time), so the record is appended at once, at 0 ms.
    await producer.client.refreshMetadata(['linger'])
    let acknowledged: RecordMetadata | null = null
    const sent = producer.send({ topic: 'linger', value: 'x' }).then((meta) => {
      acknowledged = meta
      return meta
    })
    await clock.tick(999)
    await new Promise((resolve) => setTimeout(resolve, 100))
    assert.equal(acknowledged, null, 'not sent 1 ms before linger.ms')
    assert.equal(producer.pendingRecordCount, 1)
    // Virtual time runs on while the request is on the wire (10 ms per real millisecond):
    // the bound only has to outlast a produce round trip on a loaded machine.
    const meta = await clock.runUntil(sent, { maxMs: 60_000 })
    assert.equal(meta.offset, 0)
    assert.ok(clock.monotonicMs() >= 1000, `sent at ${clock.monotonicMs()} ms, linger.ms is 1000`)
    await producer.close()
  })
})

test('acks 0, 1 and all all deliver; acks=0 reports offset -1', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'acks' }])
    // acks=0 last: a broker that cannot take it yet (the partition's leadership still being
    // set up just after creation) drops it and closes the connection, as Kafka does.
    for (const acks of [1, 'all', 0] as const) {
      const producer = new Producer({ bootstrapServers: bootstrap, acks })
      const metas = await Promise.all(
        Array.from({ length: 10 }, (_, i) => producer.send({ topic: 'acks', value: `${acks}-${i}` })),
      )
      await producer.close()
      if (acks === 0) assert.ok(metas.every((m) => m.offset === -1))
      else assert.ok(metas.every((m) => m.offset >= 0))
    }
    const values = (await readAll(bootstrap, 'acks')).map((r) => text(r.value))
    assert.equal(values.length, 30)
    assert.deepEqual(
      values.slice(20),
      Array.from({ length: 10 }, (_, i) => `0-${i}`),
    )
  })
})

test('each compression codec is stored as such and reads back', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    const codecs = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const
    await createTopics(bootstrap, [{ topic: 'codecs' }])
    for (const compression of codecs) {
      const producer = new Producer({ bootstrapServers: bootstrap, compression })
      await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          producer.send({ topic: 'codecs', value: `${compression}-${i}`.repeat(20) }),
        ),
      )
      await producer.close()
    }
    assert.deepEqual([...new Set(await storedCodecs(cluster, 'codecs', 0))], [0, 1, 2, 3, 4])
    const values = (await readAll(bootstrap, 'codecs')).map((r) => text(r.value))
    assert.deepEqual(
      values,
      codecs.flatMap((c) => Array.from({ length: 50 }, (_, i) => `${c}-${i}`.repeat(20))),
    )
  })
})

test('retriable errors are retried `retries` times, then fail with the broker error', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    // One broker cannot satisfy min.insync.replicas=2: acks=all gets NOT_ENOUGH_REPLICAS (retriable).
    await createTopics(bootstrap, [{ topic: 'isr', configs: { 'min.insync.replicas': '2' } }])
    // acks=1 needs only the leader. It goes first, with default retries: right after
    // creation the broker may not host the partition yet (UNKNOWN_TOPIC_OR_PARTITION, retried),
    // which would use up the `retries: 0` below.
    const leaderOnly = new Producer({ bootstrapServers: bootstrap, acks: 1 })
    assert.equal((await leaderOnly.send({ topic: 'isr', value: 'z' })).offset, 0)
    await leaderOnly.close()
    const once = new Producer({ bootstrapServers: bootstrap, retries: 0 })
    await assert.rejects(once.send({ topic: 'isr', value: 'x' }), {
      code: 'ERR_KAFKA_NOT_ENOUGH_REPLICAS',
      retriable: true,
    })
    await once.close()
    const clock = new ManualClock()
    const started = clock.monotonicMs()
    const few = new Producer({
      bootstrapServers: bootstrap,
      retries: 3,
      retryBackoffMs: 50,
      retryBackoffMaxMs: 100,
      clock,
    })
    await assert.rejects(clock.runUntil(few.send({ topic: 'isr', value: 'y' })), {
      code: 'ERR_KAFKA_NOT_ENOUGH_REPLICAS',
    })
    assert.ok(clock.monotonicMs() - started >= 3 * 40, 'three backoffs passed')
    assert.equal(few.metrics().retries, 3)
    await few.close()
  })
})

test('delivery.timeout.ms bounds retries when the broker is gone', async () => {
  let producer: Producer | null = null
  let pending: Promise<RecordMetadata> | null = null
  const clock = new ManualClock()
  await withBroker(async (cluster) => {
    await createTopics(cluster.bootstrapServers, [{ topic: 'gone' }])
    producer = new Producer({
      bootstrapServers: cluster.bootstrapServers,
      requestTimeoutMs: 500,
      deliveryTimeoutMs: 1500,
      lingerMs: 0,
      connectTimeoutMs: 300,
      clock,
    })
    await clock.runUntil(producer.send({ topic: 'gone', value: 'before' }))
  })
  const started = clock.monotonicMs()
  pending = producer!.send({ topic: 'gone', value: 'after' })
  await assert.rejects(clock.runUntil(pending), (error: unknown) => {
    assert.ok(error instanceof KafkaClientError)
    assert.equal(error.code, 'ERR_DELIVERY_TIMEOUT')
    assert.ok(error.cause, 'keeps the last error as cause')
    return true
  })
  const elapsed = clock.monotonicMs() - started
  assert.ok(elapsed >= 1000 && elapsed < 6000, `failed after ${elapsed} ms`)
  await producer!.close()
})

test('bad records and options fail fast with stable codes', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'bad', partitions: 2 }])
    assert.throws(() => new Producer({ bootstrapServers: bootstrap, acks: 2 as 1 }), {
      code: 'ERR_INVALID_ARGUMENT',
    })
    // Idempotence needs acks=all: asked for with acks=1 it is a configuration error.
    assert.throws(() => new Producer({ bootstrapServers: bootstrap, acks: 1, enableIdempotence: true }), {
      code: 'ERR_INVALID_ARGUMENT',
    })
    assert.throws(() => new Producer({ bootstrapServers: 'nohost' }), { code: 'ERR_INVALID_ARGUMENT' })
    const producer = new Producer({
      bootstrapServers: bootstrap,
      maxRequestSize: 10000,
      maxBlockMs: 500,
      allowAutoTopicCreation: false,
    })
    await assert.rejects(producer.send({ topic: 'bad', partition: 2, value: 'x' }), {
      code: 'ERR_INVALID_ARGUMENT',
    })
    await assert.rejects(producer.send({ topic: 'bad', value: Buffer.alloc(20000) }), {
      code: 'ERR_RECORD_TOO_LARGE',
    })
    await assert.rejects(producer.send({ topic: 'missing', value: 'x' }), {
      code: 'ERR_KAFKA_UNKNOWN_TOPIC_OR_PARTITION',
    })
    await producer.close()
    await assert.rejects(producer.send({ topic: 'bad', value: 'x' }), { code: 'ERR_CLIENT_CLOSED' })
  })
})

test('max.in.flight 1 keeps order; a long-poll fetch does not delay a produce on a shared client', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'shared', partitions: 2 }])
    const client = new KafkaClient({ bootstrapServers: bootstrap })
    const consumer = new Consumer({ client, fetchMaxWaitMs: 4000, fetchMinBytes: 1 << 20 })
    consumer.assign([{ topic: 'shared', partition: 1, offset: 0 }])
    const polling = consumer.poll(4500)
    await new Promise((resolve) => setTimeout(resolve, 300)) // the fetch is now parked at the broker
    const producer = new Producer({ client, maxInFlightRequestsPerConnection: 1, acks: 1, lingerMs: 0 })
    const started = Date.now()
    const metas = await Promise.all(
      Array.from({ length: 100 }, (_, i) => producer.send({ topic: 'shared', partition: 0, value: `${i}` })),
    )
    const ackMs = Date.now() - started
    assert.ok(ackMs < 2000, `produce waited ${ackMs} ms behind the long poll`)
    assert.deepEqual(
      metas.map((m) => m.offset),
      Array.from({ length: 100 }, (_, i) => i),
    )
    assert.deepEqual(await polling, [])
    await producer.close()
    await consumer.close()
    client.close()
  })
})

/** Rejects if `promise` is not settled within `ms` of real time (a hang guard, not a measurement). */
async function withRealTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not settled after ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([promise, guard])
  } finally {
    clearTimeout(timer)
  }
}
