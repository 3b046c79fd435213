/**
 * tidelog's own producer with enableIdempotence (issue 8 item 4, issue 7 item 1).
 *
 * Options: idempotence is on by default with acks=all, off otherwise, and explicit `true`
 * with acks other than all (or retries 0, or more than 5 in flight) is refused.
 *
 * The producer-side rules against a scripted broker: InitProducerId retried on
 * COORDINATOR_NOT_AVAILABLE, a retry re-sent byte-identical with its sequence, KIP-360's
 * reset on UNKNOWN_PRODUCER_ID / INVALID_PRODUCER_EPOCH (new producer id, sequence 0),
 * OUT_OF_ORDER_SEQUENCE_NUMBER on the next sequence failing that batch only, and a broker
 * without InitProducerId.
 *
 * Forced retries: three in-process brokers (one embedded store, RF=3, min.insync.replicas
 * 2), each behind a TCP proxy it advertises. The proxies lose the responses of some
 * Produce requests after the broker wrote them, and the leader of a partition is stopped
 * mid-stream and started again, while tidelog's producer (acks all, 5 requests in flight)
 * writes numbered records. Read back with tidelog's consumer: every record exactly once,
 * in send order per partition, and each at the offset its send resolved with.
 */
import assert from 'node:assert/strict'
import { createServer, type Server, type Socket } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Producer, type RecordMetadata } from '../../src/client/producer.js'
import { type Clock, systemClock } from '../../src/common/clock.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { FrameDecoder } from '../../src/protocol/frame-decoder.js'
import { encodeResponseFrame } from '../../src/protocol/frame-encoder.js'
import { ApiKey, apis, loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import type { ProduceRequest } from '../../src/protocol/generated/produce-request.js'
import { decodeRequestHeader } from '../../src/protocol/generated/request-header.js'
import { Reader, ZERO_UUID } from '../../src/protocol/primitives.js'
import { decodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import { ManualClock } from '../helpers/manual-clock.js'
import { ProxiedCluster, problems } from '../helpers/proxied-cluster.js'
import { readAll, text } from './helpers.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

describe('enableIdempotence options', () => {
  const bootstrapServers = '127.0.0.1:1'
  it('on by default with acks=all, off with acks 0/1 or when disabled', () => {
    const made: Producer[] = []
    try {
      const defaults = new Producer({ bootstrapServers })
      made.push(defaults)
      assert.equal(defaults.isIdempotent, true)
      const all = new Producer({ bootstrapServers, acks: -1 })
      made.push(all)
      assert.equal(all.isIdempotent, true)
      for (const acks of [0, 1] as const) {
        const p = new Producer({ bootstrapServers, acks })
        made.push(p)
        assert.equal(p.isIdempotent, false)
      }
      const off = new Producer({ bootstrapServers, enableIdempotence: false })
      made.push(off)
      assert.equal(off.isIdempotent, false)
      const noRetries = new Producer({ bootstrapServers, retries: 0 })
      made.push(noRetries)
      assert.equal(noRetries.isIdempotent, false, 'retries 0 turns the default off, as in Kafka')
      const many = new Producer({ bootstrapServers, maxInFlightRequestsPerConnection: 10 })
      made.push(many)
      assert.equal(many.isIdempotent, true, 'max.in.flight is capped at 5 instead')
      const explicit = new Producer({ bootstrapServers, enableIdempotence: true, acks: 'all' })
      made.push(explicit)
      assert.equal(explicit.isIdempotent, true)
      assert.equal(explicit.producerIdentity, null, 'no producer id before the first send')
    } finally {
      for (const p of made) p.client.close()
    }
  })

  it('explicit true with acks other than all, retries 0 or more than 5 in flight is a configuration error', () => {
    for (const bad of [
      { acks: 1 as const },
      { acks: 0 as const },
      { retries: 0 },
      { maxInFlightRequestsPerConnection: 6 },
      { enableIdempotence: 'yes' as unknown as boolean },
    ]) {
      assert.throws(() => new Producer({ bootstrapServers, enableIdempotence: true, ...bad }), {
        code: 'ERR_INVALID_ARGUMENT',
      })
    }
  })
})

/** What the scripted broker saw of one produced batch. */
interface SeenBatch {
  producerId: bigint
  producerEpoch: number
  baseSequence: number
  count: number
  bytes: string
  values: string[]
}

interface Script {
  /** Error codes InitProducerId answers first, in turn; then fresh ids from 1000. */
  initErrors: number[]
  /** The error for the n-th produced batch (0-based), or undefined for success. */
  produce: (batch: SeenBatch, n: number) => number | undefined
  /** Leave InitProducerId out of ApiVersions. */
  noInitProducerId?: boolean
  /**
   * Answer Produce this much later, so several requests are in flight (equal delays keep
   * request order; a function may answer out of order, which the client matches by
   * correlation id).
   */
  produceDelayMs?: number | ((batch: SeenBatch, n: number) => number)
  /** The clock the delays run on (the producer's, for a test on a manual clock). */
  clock?: Clock
}

/** A one-broker, one-topic ('t', 1 partition) stand-in that answers as `script` says. */
async function scriptedBroker(script: Script): Promise<{
  bootstrap: string
  inits: number
  batches: SeenBatch[]
  close(): Promise<void>
}> {
  const sockets = new Set<Socket>()
  let nextProducerId = 1000n
  let offset = 0n
  const state = {
    bootstrap: '',
    inits: 0,
    batches: [] as SeenBatch[],
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
  const answer = (socket: Socket, frame: Buffer): void => {
    const apiKey = frame.readInt16BE(0)
    const version = frame.readInt16BE(2)
    const api = apis.get(apiKey)!
    const reader = new Reader(frame)
    const header = decodeRequestHeader(reader, api.requestHeaderVersion(version))
    const request = api.decodeRequest(reader, version)
    const base = api.defaultResponse() as object
    let body: object
    if (apiKey === ApiKey.ApiVersions) {
      const keys: { apiKey: number; minVersion: number; maxVersion: number }[] = [
        { apiKey: ApiKey.ApiVersions, minVersion: 0, maxVersion: 3 },
        { apiKey: ApiKey.Metadata, minVersion: 1, maxVersion: 12 },
        { apiKey: ApiKey.Produce, minVersion: 3, maxVersion: 9 },
      ]
      if (!script.noInitProducerId) keys.push({ apiKey: ApiKey.InitProducerId, minVersion: 0, maxVersion: 5 })
      body = { ...base, errorCode: 0, apiKeys: keys }
    } else if (apiKey === ApiKey.Metadata) {
      body = {
        ...base,
        brokers: [{ nodeId: 0, host: '127.0.0.1', port, rack: null }],
        clusterId: 'scripted',
        controllerId: 0,
        topics: [
          {
            errorCode: 0,
            name: 't',
            topicId: ZERO_UUID,
            isInternal: false,
            topicAuthorizedOperations: -2147483648,
            partitions: [
              {
                errorCode: 0,
                partitionIndex: 0,
                leaderId: 0,
                leaderEpoch: 0,
                replicaNodes: [0],
                isrNodes: [0],
                offlineReplicas: [],
              },
            ],
          },
        ],
      }
    } else if (apiKey === ApiKey.InitProducerId) {
      state.inits++
      const error = script.initErrors.shift()
      body =
        error !== undefined
          ? { ...base, errorCode: error, producerId: -1n, producerEpoch: -1 }
          : { ...base, errorCode: 0, producerId: nextProducerId++, producerEpoch: 0 }
    } else if (apiKey === ApiKey.Produce) {
      const produce = request as ProduceRequest
      body = {
        ...base,
        responses: produce.topicData.map((topic) => ({
          name: topic.name,
          partitionResponses: topic.partitionData.map((p) => {
            const records = Buffer.concat(
              p.records === null ? [] : Buffer.isBuffer(p.records) ? [p.records] : [...p.records],
            )
            const decoded = decodeRecordBatchSync(records)
            const seen: SeenBatch = {
              producerId: decoded.producerId,
              producerEpoch: decoded.producerEpoch,
              baseSequence: decoded.baseSequence,
              count: decoded.records.length,
              bytes: records.toString('hex'),
              values: decoded.records.map((r) => r.value?.toString() ?? ''),
            }
            state.batches.push(seen)
            const error = script.produce(seen, state.batches.length - 1)
            const baseOffset = error === undefined ? offset : -1n
            if (error === undefined) offset += BigInt(seen.count)
            return {
              index: p.index,
              errorCode: error ?? 0,
              baseOffset,
              logAppendTimeMs: -1n,
              logStartOffset: 0n,
              recordErrors: [],
              errorMessage: null,
              currentLeader: { leaderId: -1, leaderEpoch: -1 },
            }
          }),
        })),
      }
    } else {
      socket.destroy()
      return
    }
    const bytes = Buffer.concat(encodeResponseFrame(apiKey, version, header.correlationId, body))
    // Equal delays fire in creation order: responses stay in request order.
    const delay =
      apiKey !== ApiKey.Produce
        ? 0
        : typeof script.produceDelayMs === 'function'
          ? script.produceDelayMs(state.batches.at(-1)!, state.batches.length - 1)
          : script.produceDelayMs
    if (delay) {
      ;(script.clock ?? systemClock).setTimeout(() => socket.write(bytes), delay)
    } else {
      socket.write(bytes)
    }
  }
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => socket.destroy())
    const decoder = new FrameDecoder(1 << 20)
    socket.on('data', (chunk: Buffer) => decoder.push(chunk, (frame) => answer(socket, frame)))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : 0
  state.bootstrap = `127.0.0.1:${port}`
  return state
}

function scriptedProducer(bootstrap: string, extra: Partial<ConstructorParameters<typeof Producer>[0]> = {}) {
  return new Producer({
    bootstrapServers: bootstrap,
    lingerMs: 0,
    retryBackoffMs: 10,
    retryBackoffMaxMs: 50,
    requestTimeoutMs: 2000,
    deliveryTimeoutMs: 10000,
    ...extra,
  })
}

describe('idempotent producer rules against a scripted broker', () => {
  it('InitProducerId is retried on COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR, then stamps batches', async () => {
    const broker = await scriptedBroker({
      initErrors: [ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR],
      produce: () => undefined,
    })
    const producer = scriptedProducer(broker.bootstrap)
    try {
      assert.equal((await producer.send({ topic: 't', value: 'a' })).offset, 0)
      assert.equal((await producer.send({ topic: 't', value: 'b' })).offset, 1)
      assert.equal(broker.inits, 3)
      assert.deepEqual(
        broker.batches.map((b) => [b.producerId, b.producerEpoch, b.baseSequence]),
        [
          [1000n, 0, 0],
          [1000n, 0, 1],
        ],
      )
      assert.deepEqual(producer.producerIdentity, { producerId: 1000n, producerEpoch: 0 })
    } finally {
      await producer.close()
      await broker.close()
    }
  })

  it('a retried batch is re-sent byte-identical, with its sequence', async () => {
    const broker = await scriptedBroker({
      initErrors: [],
      produce: (_, n) => (n < 2 ? ErrorCode.NOT_LEADER_OR_FOLLOWER : undefined),
    })
    const producer = scriptedProducer(broker.bootstrap)
    try {
      const sends = ['x', 'y', 'z'].map((value) => producer.send({ topic: 't', value }))
      const offsets = (await Promise.all(sends)).map((m) => m.offset)
      await producer.send({ topic: 't', value: 'w' })
      assert.deepEqual(offsets, [0, 1, 2])
      const first = broker.batches[0]
      assert.equal(first.baseSequence, 0)
      assert.equal(broker.batches[1].bytes, first.bytes, 'first retry: same bytes')
      assert.equal(broker.batches[2].bytes, first.bytes, 'second retry: same bytes')
      const last = broker.batches.at(-1)!
      assert.equal(last.baseSequence, 3, 'the next batch continues the sequence')
      assert.equal(producer.metrics().retries, 2)
    } finally {
      await producer.close()
      await broker.close()
    }
  })

  for (const error of [ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_EPOCH]) {
    it(`error ${error} resets the partition (KIP-360): a new producer id, the batch re-stamped from sequence 0`, async () => {
      const broker = await scriptedBroker({
        initErrors: [],
        produce: (_, n) => (n === 1 ? error : undefined),
      })
      const producer = scriptedProducer(broker.bootstrap)
      try {
        await producer.send({ topic: 't', value: 'a' })
        await producer.send({ topic: 't', value: 'b' })
        await producer.send({ topic: 't', value: 'c' })
        assert.deepEqual(
          broker.batches.map((b) => [b.producerId, b.baseSequence]),
          [
            [1000n, 0],
            [1000n, 1],
            [1001n, 0],
            [1001n, 1],
          ],
        )
        assert.equal(broker.inits, 2)
        assert.equal(producer.metrics().producerIdResets, 1)
        assert.equal(producer.metrics().failedBatches, 0)
      } finally {
        await producer.close()
        await broker.close()
      }
    })
  }

  it('OUT_OF_ORDER_SEQUENCE_NUMBER on the next sequence fails that batch; later batches go under a new id', async () => {
    const broker = await scriptedBroker({
      initErrors: [],
      produce: (_, n) => (n === 1 ? ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER : undefined),
    })
    const producer = scriptedProducer(broker.bootstrap)
    try {
      await producer.send({ topic: 't', value: 'a' })
      await assert.rejects(producer.send({ topic: 't', value: 'b' }), {
        code: 'ERR_KAFKA_OUT_OF_ORDER_SEQUENCE_NUMBER',
      })
      await producer.send({ topic: 't', value: 'c' })
      assert.deepEqual(
        broker.batches.map((b) => [b.producerId, b.baseSequence]),
        [
          [1000n, 0],
          [1000n, 1],
          [1001n, 0],
        ],
      )
    } finally {
      await producer.close()
      await broker.close()
    }
  })

  it('OUT_OF_ORDER_SEQUENCE_NUMBER behind an unacknowledged batch is retried in sequence order', async () => {
    // After a warm-up batch, batch 1 is lost (NOT_LEADER); the batches in flight behind it are refused
    // as out of order until 0 is through.
    let acceptedUpTo = -1
    let refused = 0
    const broker = await scriptedBroker({
      initErrors: [],
      produceDelayMs: 30,
      produce: (batch, n) => {
        if (n === 1) return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if (batch.baseSequence !== acceptedUpTo + 1) {
          refused++
          return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        }
        acceptedUpTo = batch.baseSequence + batch.count - 1
        return undefined
      },
    })
    const producer = scriptedProducer(broker.bootstrap, { batchSize: 100 })
    try {
      // Metadata and producer id first, so the records below batch up in one tick.
      assert.equal((await producer.send({ topic: 't', value: 'warm-up' })).offset, 0)
      const values = Array.from({ length: 20 }, (_, i) => `v-${String(i).padStart(3, '0')}`)
      const metadata = await Promise.all(values.map((value) => producer.send({ topic: 't', value })))
      assert.deepEqual(
        metadata.map((m) => m.offset),
        values.map((_, i) => i + 1),
        'offsets in send order',
      )
      assert.equal(producer.metrics().failedBatches, 0)
      assert.equal(producer.metrics().producerIdResets, 0)
      assert.ok(refused > 0, 'later batches were in flight behind the lost one')
      assert.ok(new Set(broker.batches.map((b) => b.producerId)).size === 1)
    } finally {
      await producer.close()
      await broker.close()
    }
  })

  /**
   * A leader that writes what it is sent and deduplicates retries by sequence (one producer
   * id at a time is enough here), whose Produce answers `answer` may turn into errors.
   */
  function deduplicatingLeader(answer: (batch: SeenBatch, isRetry: boolean) => number | undefined) {
    const written: string[] = []
    const acceptedUpTo = new Map<bigint, number>()
    return {
      written,
      produce: (batch: SeenBatch): number | undefined => {
        const last = acceptedUpTo.get(batch.producerId) ?? -1
        const isRetry = batch.baseSequence <= last
        if (!isRetry && batch.baseSequence !== last + 1) return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        if (!isRetry && answer(batch, false) !== ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER) {
          written.push(...batch.values)
          acceptedUpTo.set(batch.producerId, batch.baseSequence + batch.count - 1)
        }
        return answer(batch, isRetry)
      },
    }
  }

  it('a sent batch that expires but was written: the batches behind it keep their sequences, nothing is written twice', async () => {
    // 'a' is written but every answer for it is lost until it expires; 'b', sent while 'a'
    // was in flight, is written and its first answer lost too. Re-stamping 'b' under a new
    // producer id when 'a' expires would write it twice.
    const clock = new ManualClock()
    const leader = deduplicatingLeader((batch, isRetry) => {
      if (batch.values[0] === 'a') return ErrorCode.REQUEST_TIMED_OUT
      if (batch.values[0] === 'b' && !isRetry) return ErrorCode.REQUEST_TIMED_OUT
      return undefined
    })
    const broker = await scriptedBroker({
      initErrors: [],
      produce: leader.produce,
      // The first attempt of 'a' (the second batch the leader sees) is answered late.
      produceDelayMs: (_, n) => (n === 1 ? 1200 : 0),
      clock,
    })
    const producer = scriptedProducer(broker.bootstrap, {
      requestTimeoutMs: 300,
      deliveryTimeoutMs: 1500,
      clock,
    })
    try {
      await clock.runUntil(producer.send({ topic: 't', value: 'warm-up' }))
      const a = producer.send({ topic: 't', value: 'a' })
      const aFailed = assert.rejects(a, { code: 'ERR_DELIVERY_TIMEOUT' })
      // 'b' goes while 'a' is in flight, and expires 800 ms after 'a'.
      await clock.runFor(800)
      const b = producer.send({ topic: 't', value: 'b' })
      await clock.runUntil(aFailed)
      await clock.runUntil(b)
      await clock.runUntil(producer.send({ topic: 't', value: 'c' }))
      assert.deepEqual(leader.written, ['warm-up', 'a', 'b', 'c'], 'each record written once')
      assert.equal(broker.inits, 1, 'the producer id was kept: every stamped sequence was acknowledged')
      assert.equal(producer.metrics().producerIdResets, 0)
      assert.deepEqual(
        [...new Set(broker.batches.map((batch) => `${batch.producerId}/${batch.baseSequence}`))],
        ['1000/0', '1000/1', '1000/2', '1000/3'],
      )
    } finally {
      await producer.close()
      await broker.close()
    }
  })

  it('a sent batch that expires and was not written: the batch behind it meets the gap and moves to a new producer id', async () => {
    const clock = new ManualClock()
    const leader = deduplicatingLeader((batch) =>
      batch.values[0] === 'a' && batch.producerId === 1000n
        ? ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        : undefined,
    )
    const broker = await scriptedBroker({
      initErrors: [],
      // 'a' is never written: its answers say REQUEST_TIMED_OUT, slowly the first time.
      produce: (batch) => (batch.values[0] === 'a' ? ErrorCode.REQUEST_TIMED_OUT : leader.produce(batch)),
      // The first attempt of 'a' (the second batch the leader sees) is answered late.
      produceDelayMs: (_, n) => (n === 1 ? 1200 : 0),
      clock,
    })
    const producer = scriptedProducer(broker.bootstrap, {
      requestTimeoutMs: 300,
      deliveryTimeoutMs: 1500,
      clock,
    })
    try {
      await clock.runUntil(producer.send({ topic: 't', value: 'warm-up' }))
      const a = producer.send({ topic: 't', value: 'a' })
      const aFailed = assert.rejects(a, { code: 'ERR_DELIVERY_TIMEOUT' })
      // 'b' goes while 'a' is in flight, and expires 800 ms after 'a'.
      await clock.runFor(800)
      const b = producer.send({ topic: 't', value: 'b' })
      await clock.runUntil(aFailed)
      await clock.runUntil(b)
      await clock.runUntil(producer.send({ topic: 't', value: 'c' }))
      assert.deepEqual(leader.written, ['warm-up', 'b', 'c'])
      assert.equal(broker.inits, 2, 'a new producer id after the gap')
      const b1001 = broker.batches.find((batch) => batch.values[0] === 'b' && batch.producerId === 1001n)
      assert.equal(b1001?.baseSequence, 0, "'b' re-stamped from sequence 0 under the new id")
      assert.equal(producer.metrics().failedBatches, 1, "only 'a' failed")
    } finally {
      await producer.close()
      await broker.close()
    }
  })

  it('a batch in flight past its deadline fails then, not at its late answer; unwritten, the next batch goes under a new producer id', async () => {
    // The scripted broker answers in the order it is asked, so nothing else of the
    // partition is sent while 'a' is in flight (a later answer would pair with it).
    const clock = new ManualClock()
    const leader = deduplicatingLeader(() => undefined)
    const broker = await scriptedBroker({
      initErrors: [],
      produce: (batch) => (batch.values[0] === 'a' ? ErrorCode.REQUEST_TIMED_OUT : leader.produce(batch)),
      // The first attempt of 'a' is answered 200 ms after its deadline, before the client
      // would give the request up (300 + 2000 ms): it is in flight when it expires.
      produceDelayMs: (_, n) => (n === 1 ? 1700 : 0),
      clock,
    })
    const producer = scriptedProducer(broker.bootstrap, {
      requestTimeoutMs: 300,
      deliveryTimeoutMs: 1500,
      clock,
    })
    try {
      await clock.runUntil(producer.send({ topic: 't', value: 'warm-up' }))
      const aSentMs = clock.monotonicMs()
      const aFailedAtMs = producer.send({ topic: 't', value: 'a' }).then(
        () => assert.fail("'a' should have expired"),
        (error: unknown) => {
          assert.equal((error as { code?: string }).code, 'ERR_DELIVERY_TIMEOUT')
          return clock.monotonicMs()
        },
      )
      const elapsedMs = (await clock.runUntil(aFailedAtMs)) - aSentMs
      assert.ok(elapsedMs >= 1500 && elapsedMs < 1700, `'a' failed after ${elapsedMs} ms`)
      // 'b' waits until the answer of 'a' tells it was not written, then goes under a new id
      // from sequence 0 (the sequence of 'a' is never reused).
      await clock.runUntil(producer.send({ topic: 't', value: 'b' }))
      await clock.runUntil(producer.send({ topic: 't', value: 'c' }))
      assert.deepEqual(leader.written, ['warm-up', 'b', 'c'])
      assert.equal(broker.inits, 2, 'a new producer id after the unresolved sequence')
      assert.deepEqual(
        broker.batches
          .filter((batch) => batch.values[0] !== 'a')
          .map((batch) => `${batch.producerId}/${batch.baseSequence}`),
        ['1000/0', '1001/0', '1001/1'],
      )
      assert.equal(producer.metrics().failedBatches, 1, "only 'a' failed")
    } finally {
      await producer.close()
      await broker.close()
    }
  })

  it('a broker without InitProducerId: the default turns idempotence off, explicit true fails the sends', async () => {
    const broker = await scriptedBroker({ initErrors: [], produce: () => undefined, noInitProducerId: true })
    const implicit = scriptedProducer(broker.bootstrap)
    const explicit = scriptedProducer(broker.bootstrap, { enableIdempotence: true })
    try {
      assert.equal((await implicit.send({ topic: 't', value: 'a' })).offset, 0)
      assert.equal(implicit.isIdempotent, false)
      assert.equal(broker.batches[0].producerId, -1n)
      await assert.rejects(explicit.send({ topic: 't', value: 'b' }), { code: 'ERR_UNSUPPORTED_API' })
    } finally {
      await implicit.close()
      await explicit.close()
      await broker.close()
    }
  })
})

describe("tidelog's idempotent producer with forced retries (3 brokers behind proxies)", () => {
  let cluster: ProxiedCluster
  before(async () => {
    cluster = await ProxiedCluster.start(65536)
  })
  after(async () => {
    await cluster?.close()
  })

  it('lost responses and a stopped/restarted leader leave every record once, in send order, at its acknowledged offset', async () => {
    const topic = 'client-idem'
    const partitions = 3
    const records = 3000
    await cluster.createTopic(topic, partitions)
    const producer = new Producer({
      bootstrapServers: cluster.bootstrap,
      clientId: 'client-idem',
      acks: 'all',
      maxInFlightRequestsPerConnection: 5,
      lingerMs: 2,
      batchSize: 2048,
      requestTimeoutMs: 3000,
      deliveryTimeoutMs: 90000,
      retryBackoffMs: 50,
      retryBackoffMaxMs: 500,
    })
    const expected: string[][] = Array.from({ length: partitions }, () => [])
    const acked = new Map<string, RecordMetadata>()
    const failed: string[] = []
    const pending: Promise<unknown>[] = []
    const victim = cluster.leaderOf(topic, 0)
    cluster.dropEvery(5)
    try {
      for (let i = 0; i < records; i++) {
        if (i === 1000) await cluster.stopBroker(victim)
        if (i === 2000) await cluster.startBroker(victim)
        const partition = i % partitions
        const value = `c-${i}`
        expected[partition].push(value)
        pending.push(
          producer.send({ topic, partition, value }).then(
            (metadata) => acked.set(value, metadata),
            (error: Error) => failed.push(`${value}: ${error.message}`),
          ),
        )
        // A steady stream, so sends straddle the lost responses and the leader change.
        if (i % 30 === 29) await sleep(20)
      }
      await producer.flush()
      await Promise.all(pending)
    } finally {
      const dropped = cluster.stopDropping()
      await producer.close()
      assert.ok(dropped >= 10, `only ${dropped} responses were lost`)
    }
    assert.deepEqual(failed.slice(0, 5), [], 'every send acknowledged')
    assert.equal(acked.size, records)
    const metrics = producer.metrics()
    assert.ok(metrics.retries > 0, 'the lost responses forced retries')
    assert.equal(metrics.failedBatches, 0)

    await cluster.waitFullIsr(topic, partitions, 30000)
    const read = await readAll(cluster.bootstrap, topic)
    for (let p = 0; p < partitions; p++) {
      const inPartition = read.filter((r) => r.partition === p)
      const values = inPartition.map((r) => text(r.value) ?? '')
      assert.deepEqual(problems(values, expected[p]), [], `${topic}-${p}`)
      // A duplicate answered with its first offsets: each send resolved with where it is.
      for (const record of inPartition) {
        const metadata = acked.get(text(record.value) ?? '')
        assert.equal(metadata?.offset, record.offset, `offset of ${text(record.value)}`)
        assert.equal(metadata?.partition, p)
      }
    }
  })

  it('sync style (await each send): a leader stopped mid-stream and lost responses leave no duplicate', async () => {
    const topic = 'client-idem-sync'
    await cluster.createTopic(topic, 2)
    const producer = new Producer({
      bootstrapServers: cluster.bootstrap,
      clientId: 'client-idem-sync',
      requestTimeoutMs: 3000,
      deliveryTimeoutMs: 90000,
      retryBackoffMs: 50,
      retryBackoffMaxMs: 500,
      lingerMs: 0,
    })
    assert.equal(producer.isIdempotent, true, 'idempotent by default (acks all)')
    const victim = cluster.leaderOf(topic, 1)
    const expected: string[][] = [[], []]
    cluster.dropEvery(3)
    try {
      for (let i = 0; i < 200; i++) {
        if (i === 70) await cluster.stopBroker(victim)
        if (i === 140) await cluster.startBroker(victim)
        const value = `s-${i}`
        const metadata = await producer.send({ topic, key: `key-${i % 7}`, value })
        expected[metadata.partition].push(value)
      }
    } finally {
      cluster.stopDropping()
      await producer.close()
    }
    const identity = producer.producerIdentity
    assert.ok(identity && identity.producerId >= 0n && identity.producerEpoch >= 0)
    await cluster.waitFullIsr(topic, 2, 30000)
    const read = await readAll(cluster.bootstrap, topic)
    for (let p = 0; p < 2; p++) {
      const values = read.filter((r) => r.partition === p).map((r) => text(r.value) ?? '')
      assert.deepEqual(problems(values, expected[p]), [], `${topic}-${p}`)
    }
  })
})
