/**
 * Producer.produce(record, callback): the callback reports each record's outcome without a
 * promise; records land in send order with their keys, values and headers (encoded into
 * the batch as appended, batch buffers reused across many batches); argument errors and a
 * closed producer reach the callback, on a later tick.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { KafkaClientError } from '../../src/client/errors.js'
import { Producer, type RecordMetadata } from '../../src/client/producer.js'
import { createTopics, readAll, text, withBroker } from './helpers.js'

test('produce(): callbacks get offsets in send order; keys, null values and headers arrive intact across many batches', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'cb', partitions: 1 }])
    // Small batches and little buffer.memory: many batches, buffers reused many times.
    // Idempotent (acks all): retries on a broker just started keep the order.
    const producer = new Producer({
      bootstrapServers: bootstrap,
      acks: 'all',
      batchSize: 4096,
      bufferMemory: 64 * 1024,
    })
    const count = 2000
    const results: (RecordMetadata | KafkaClientError)[] = []
    await new Promise<void>((resolve) => {
      for (let i = 0; i < count; i++) {
        producer.produce(
          {
            topic: 'cb',
            key: i % 4 === 0 ? null : `k${i}`,
            value: i % 10 === 0 ? null : `${i}:`.padEnd(100 + (i % 300), 'v'),
            headers: i % 3 === 0 ? { n: String(i) } : undefined,
          },
          (error, metadata) => {
            results[i] = error ?? metadata!
            if (results.filter((r) => r !== undefined).length === count) resolve()
          },
        )
      }
    })
    for (let i = 0; i < count; i++) {
      const r = results[i] as RecordMetadata
      assert.equal(r.offset, i, `record ${i}`)
      assert.equal(r.partition, 0)
    }
    await producer.close()
    const stored = await readAll(bootstrap, 'cb')
    assert.equal(stored.length, count)
    for (let i = 0; i < count; i++) {
      assert.equal(text(stored[i].key), i % 4 === 0 ? null : `k${i}`)
      assert.equal(text(stored[i].value), i % 10 === 0 ? null : `${i}:`.padEnd(100 + (i % 300), 'v'))
      const headers = stored[i].headers.map((h) => [h.key, text(h.value)])
      assert.deepEqual(headers, i % 3 === 0 ? [['n', String(i)]] : [])
    }
  })
})

test('produce(): an invalid record or a closed producer fails through the callback on a later tick', async () => {
  await withBroker(async (cluster) => {
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'cb-errors' }])
    const producer = new Producer({ bootstrapServers: bootstrap })
    let called = false
    const invalid = new Promise<KafkaClientError | null>((resolve) =>
      producer.produce({ topic: 'cb-errors', partition: 7, value: 'x' }, (error) => {
        called = true
        resolve(error)
      }),
    )
    assert.equal(called, false, 'not called inside produce()')
    assert.equal((await invalid)?.code, 'ERR_INVALID_ARGUMENT')
    assert.throws(() => producer.produce({ topic: 'cb-errors', value: 'x' }, undefined as never), {
      code: 'ERR_INVALID_ARGUMENT',
    })
    await producer.close()
    const closed = await new Promise<KafkaClientError | null>((resolve) =>
      producer.produce({ topic: 'cb-errors', value: 'x' }, resolve),
    )
    assert.equal(closed?.code, 'ERR_CLIENT_CLOSED')
  })
})
