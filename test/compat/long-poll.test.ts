/**
 * Issue 4: consumers see new records with low latency. A fetch waiting at the end of the log
 * (fetch.wait.max.ms / maxWaitMs 5000) must be answered as soon as a record is committed,
 * not at its timeout; a fetch that finds nothing is answered at its timeout.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Admin, Consumer } from '@platformatic/kafka'
import { Kafka, logLevel } from 'kafkajs'
import { polyfillPromiseWithResolvers, withBroker } from '../helpers/cluster.js'
import { LongPollConsumer } from '../helpers/compat-clients.js'
import { createTopic } from '../helpers/topics.js'

const WAIT_MS = 5000
const MUST_ARRIVE_WITHIN_MS = 2000

test('confluent-kafka consumer parked at the log end gets each new record well before fetch.wait.max.ms', async (t) => {
  await withBroker(async (cluster) => {
    const topic = 'long-poll'
    await createTopic(cluster, topic)
    const kafka = new Kafka({
      clientId: 'tidelog-compat',
      brokers: [cluster.bootstrapServers],
      logLevel: logLevel.NOTHING,
    })
    const producer = kafka.producer()
    await producer.connect()
    await producer.send({ topic, acks: 1, messages: [{ key: 'k0', value: 'v0' }] })
    const consumer = LongPollConsumer.start({
      bootstrap: cluster.bootstrapServers,
      topic,
      partition: 0,
      offset: 0,
      config: { 'fetch.wait.max.ms': WAIT_MS, 'fetch.min.bytes': 1 },
    })
    try {
      // The first record is already there, so the first fetch answers at once; after it the
      // consumer's fetches park at the log end. (On an empty log the first answer, and so
      // librdkafka's end-of-partition event, would come only after fetch.wait.max.ms.)
      const first = await consumer.next((line) => line.record !== undefined, 20000)
      assert.equal((first.value.record as { value: string }).value, 'v0')
      for (let i = 1; i < 4; i++) {
        await sleep(700) // let the consumer's next fetch reach the broker and wait there
        const sentAt = Date.now()
        await producer.send({ topic, acks: 1, messages: [{ key: `k${i}`, value: `v${i}` }] })
        const line = await consumer.next((l) => l.record !== undefined || l.error !== undefined, WAIT_MS * 2)
        const latency = line.at - sentAt
        const record = line.value.record as { offset: number; key: string; value: string } | undefined
        assert.ok(record, JSON.stringify(line.value))
        assert.deepEqual([record.offset, record.key, record.value], [i, `k${i}`, `v${i}`])
        assert.ok(latency < MUST_ARRIVE_WITHIN_MS, `record ${i} arrived after ${latency} ms`)
        t.diagnostic(`record ${i}: produced to consumed in ${latency} ms`)
      }
    } finally {
      await consumer.stop()
      await producer.disconnect()
    }
  })
})

test('@platformatic/kafka fetch() (Fetch v17): answered on new data, at maxWaitMs without it, and by minBytes', async () => {
  polyfillPromiseWithResolvers()
  await withBroker(async (cluster) => {
    const topic = 'long-poll-v17'
    await createTopic(cluster, topic)
    const bootstrapBrokers = [cluster.bootstrapServers]
    const admin = new Admin({ clientId: 'tidelog-compat', bootstrapBrokers })
    const consumer = new Consumer({ clientId: 'tidelog-compat', groupId: 'unused', bootstrapBrokers })
    const kafka = new Kafka({
      clientId: 'tidelog-compat',
      brokers: [cluster.bootstrapServers],
      logLevel: logLevel.NOTHING,
    })
    const producer = kafka.producer()
    await producer.connect()
    try {
      const topicId = (await admin.metadata({ topics: [topic] })).topics.get(topic)!.id
      const fetchAt = (offset: bigint, maxWaitTime: number, minBytes = 1) =>
        consumer.fetch({
          node: 0,
          maxWaitTime,
          minBytes,
          maxBytes: 1 << 20,
          topics: [
            {
              topicId,
              partitions: [
                {
                  partition: 0,
                  currentLeaderEpoch: -1,
                  fetchOffset: offset,
                  lastFetchedEpoch: -1,
                  partitionMaxBytes: 1 << 20,
                },
              ],
            },
          ],
        })
      const recordsOf = (response: Awaited<ReturnType<typeof fetchAt>>) =>
        response.responses.flatMap((t) =>
          t.partitions.flatMap((p) =>
            (p.records ?? []).flatMap((b) => b.records.map((r) => r.value?.toString())),
          ),
        )
      await fetchAt(0n, 0) // connect and warm up

      // Nothing arrives: answered at its timeout, not before and not much later.
      let started = Date.now()
      const empty = await fetchAt(0n, 800)
      const waited = Date.now() - started
      assert.deepEqual(recordsOf(empty), [])
      assert.ok(waited >= 700 && waited < 2500, `empty fetch took ${waited} ms`)

      // A record arrives while the fetch waits: answered right away.
      started = Date.now()
      const waiting = fetchAt(0n, WAIT_MS)
      await sleep(300)
      await producer.send({ topic, acks: 1, messages: [{ value: 'wake up' }] })
      const woken = await waiting
      const elapsed = Date.now() - started
      assert.deepEqual(recordsOf(woken), ['wake up'])
      assert.ok(elapsed < MUST_ARRIVE_WITHIN_MS, `woken after ${elapsed} ms`)

      // minBytes: one small record is not enough, two 600-byte ones are.
      started = Date.now()
      const bigEnough = fetchAt(1n, WAIT_MS, 1000)
      await sleep(200)
      await producer.send({ topic, acks: 1, messages: [{ value: 'a'.repeat(600) }] })
      await sleep(300)
      await producer.send({ topic, acks: 1, messages: [{ value: 'b'.repeat(600) }] })
      const filled = await bigEnough
      const tookMs = Date.now() - started
      assert.deepEqual(recordsOf(filled), ['a'.repeat(600), 'b'.repeat(600)])
      assert.ok(tookMs >= 450 && tookMs < MUST_ARRIVE_WITHIN_MS, `minBytes fetch took ${tookMs} ms`)
    } finally {
      await producer.disconnect()
      await consumer.close()
      await admin.close()
    }
  })
})
