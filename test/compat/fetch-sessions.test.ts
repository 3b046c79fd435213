/**
 * KIP-227 incremental fetch sessions as the Java consumer drives them (none of the installed
 * clients opens one: librdkafka 2.0.2, kafkajs and kafka-python send sessionless fetches and
 * @platformatic/kafka always a new full one), over a raw socket: a full fetch opens the
 * session, incremental fetches carry only changed partitions and get only partitions with
 * news, forgotten partitions leave, a waiting incremental fetch wakes on new data, and a
 * wrong epoch or unknown id is refused.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { BatchHeader } from '../../src/protocol/batch-header.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { FetchResponse } from '../../src/protocol/generated/fetch-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { ProduceResponse } from '../../src/protocol/generated/produce-response.js'
import { decodeRecordBatch, encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import { withBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { createTopic } from '../helpers/topics.js'

const VERSION = 12 // flexible, topic names (v13+ would use ids)

function partitionRequest(partition: number, fetchOffset: bigint) {
  return {
    partition,
    currentLeaderEpoch: -1,
    fetchOffset,
    lastFetchedEpoch: -1,
    logStartOffset: -1n,
    partitionMaxBytes: 1 << 20,
  }
}

test('KIP-227 fetch session: full, incremental, forgotten partitions, long poll, bad epoch and id', async () => {
  await withBroker(async (cluster) => {
    const topic = 'sessions'
    await createTopic(cluster, topic, { partitions: 3 })
    const client = await RawClient.connect(cluster.brokers[0].port)
    // Produce on its own connection: responses come in request order, so a produce behind a
    // waiting fetch on the same connection would be answered only after it.
    const producer = await RawClient.connect(cluster.brokers[0].port)
    const produce = async (partition: number, values: string[]) => {
      const records = encodeRecordBatchSync({
        records: values.map((v) => ({ value: Buffer.from(v) })),
        defaultTimestamp: Date.now(),
      })
      const response = await rawCall<ProduceResponse>(producer, ApiKey.Produce, 9, {
        transactionalId: null,
        acks: -1,
        timeoutMs: 5000,
        topicData: [{ name: topic, partitionData: [{ index: partition, records }] }],
      })
      assert.equal(response.responses[0].partitionResponses[0].errorCode, ErrorCode.NONE)
    }
    const fetch = (body: Record<string, unknown>) =>
      rawCall<FetchResponse>(client, ApiKey.Fetch, VERSION, {
        replicaId: -1,
        maxWaitMs: 0,
        minBytes: 1,
        maxBytes: 1 << 20,
        isolationLevel: 0,
        forgottenTopicsData: [],
        rackId: '',
        ...body,
      })
    /** [partition, highWatermark, values] of every partition in a response. */
    const shown = async (response: FetchResponse) => {
      const out: [number, number, string[]][] = []
      for (const t of response.responses) {
        for (const p of t.partitions) {
          assert.equal(p.errorCode, ErrorCode.NONE)
          // Decoded records are one Buffer; the broker's own responses may hold a chunk list.
          const records = p.records as Buffer | Buffer[] | null
          const data =
            records === null ? Buffer.alloc(0) : Buffer.isBuffer(records) ? records : Buffer.concat(records)
          const values: string[] = []
          for (let at = 0; at < data.length; at += new BatchHeader(data, at).sizeInBytes) {
            const batch = await decodeRecordBatch(data, at)
            for (const r of batch.records) values.push(r.value!.toString())
          }
          out.push([p.partitionIndex, Number(p.highWatermark), values])
        }
      }
      return out.sort((a, b) => a[0] - b[0])
    }
    try {
      await produce(0, ['a0', 'a1'])
      // Full fetch with epoch 0 opens a session holding all three partitions.
      const full = await fetch({
        sessionId: 0,
        sessionEpoch: 0,
        topics: [{ topic, partitions: [0, 1, 2].map((p) => partitionRequest(p, 0n)) }],
      })
      assert.equal(full.errorCode, ErrorCode.NONE)
      assert.notEqual(full.sessionId, 0)
      const sessionId = full.sessionId
      assert.deepEqual(await shown(full), [
        [0, 2, ['a0', 'a1']],
        [1, 0, []],
        [2, 0, []],
      ])

      // Incremental, partition 0 moved on to offset 2: nothing changed, nothing shown.
      let next = await fetch({
        sessionId,
        sessionEpoch: 1,
        topics: [{ topic, partitions: [partitionRequest(0, 2n)] }],
      })
      assert.equal(next.errorCode, ErrorCode.NONE)
      assert.equal(next.sessionId, sessionId)
      assert.deepEqual(await shown(next), [])

      // New data on partition 2 only: the empty incremental fetch shows just partition 2.
      await produce(2, ['c0'])
      next = await fetch({ sessionId, sessionEpoch: 2, topics: [] })
      assert.deepEqual(await shown(next), [[2, 1, ['c0']]])

      // Forget partition 2; a waiting incremental fetch wakes when partition 1 gets data.
      const waiting = fetch({
        sessionId,
        sessionEpoch: 3,
        maxWaitMs: 5000,
        topics: [],
        forgottenTopicsData: [{ topic, topicId: full.responses[0].topicId, partitions: [2] }],
      })
      const started = Date.now()
      await new Promise((resolve) => setTimeout(resolve, 200))
      await produce(2, ['c1']) // forgotten: must not wake the fetch
      await new Promise((resolve) => setTimeout(resolve, 200))
      await produce(1, ['b0'])
      next = await waiting
      assert.ok(Date.now() - started < 2000, 'woken by new data, not the timeout')
      assert.deepEqual(await shown(next), [[1, 1, ['b0']]])

      // Out-of-step epochs and unknown sessions are refused at the top level.
      next = await fetch({ sessionId, sessionEpoch: 9, topics: [] })
      assert.equal(next.errorCode, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
      next = await fetch({ sessionId: sessionId + 1, sessionEpoch: 1, topics: [] })
      assert.equal(next.errorCode, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
      // The session still works at its expected epoch (partition 1 now read to offset 1).
      next = await fetch({
        sessionId,
        sessionEpoch: 4,
        topics: [{ topic, partitions: [partitionRequest(1, 1n)] }],
      })
      assert.equal(next.errorCode, ErrorCode.NONE)
      assert.deepEqual(await shown(next), [])
      // Closing it (epoch -1) makes a sessionless full fetch of what it names.
      next = await fetch({
        sessionId,
        sessionEpoch: -1,
        topics: [{ topic, partitions: [partitionRequest(2, 0n)] }],
      })
      assert.equal(next.sessionId, 0)
      assert.deepEqual(await shown(next), [[2, 2, ['c0', 'c1']]])
      next = await fetch({ sessionId, sessionEpoch: 5, topics: [] })
      assert.equal(next.errorCode, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    } finally {
      client.close()
      producer.close()
    }
  })
})
