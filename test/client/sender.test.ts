/**
 * The sender's delivery.timeout.ms (KIP-91, as Kafka's Java producer): a batch fails once
 * `now - createdMs >= delivery.timeout.ms`, whether it waits in its partition's queue or
 * its request is in flight, and an answer that arrives after that does not complete it.
 * What expiry does to sequences: an idempotent producer whose expired batch was written
 * keeps its producer id and writes the batches behind it once each, in order; a
 * transactional producer's expiry leaves the transaction abortable. And the option's own
 * rule (at least linger.ms + request.timeout.ms).
 *
 * A real in-process broker; the client reaches it through a connector that can hold the
 * answers on its produce connections (a paused proxy): the broker writes, the client hears
 * nothing until the test releases them. Time is a ManualClock, so the deadlines are exact
 * and a run takes a few seconds of real time.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { ClientConnector } from '../../src/client/connector.js'
import { Consumer } from '../../src/client/consumer.js'
import { KafkaClientError, TransactionAbortableError } from '../../src/client/errors.js'
import { Producer, type ProducerOptions, type RecordMetadata } from '../../src/client/producer.js'
import { resolveProducerOptions } from '../../src/client/producer-options.js'
import { tcpConnector } from '../../src/client/tcp-connector.js'
import type { ByteStream } from '../../src/common/network.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import { withBroker } from '../helpers/cluster.js'
import { ManualClock } from '../helpers/manual-clock.js'
import { createTopics, readAll, text } from './helpers.js'

const REQUEST_TIMEOUT_MS = 1000
const DELIVERY_TIMEOUT_MS = 1500
/** The client gives a Produce request up at request.timeout.ms plus its margin (CLIENT_TIMEOUT_MARGIN_MS). */
const REQUEST_GIVEN_UP_MS = REQUEST_TIMEOUT_MS + 2000
/**
 * For the steps no deadline should cut short (connecting, InitProducerId, sends after the
 * answers are released): 1 ms of virtual time per step, so a slow, loaded machine gets
 * more than a second of real time before a 1500 ms delivery timeout could pass.
 */
const PATIENT = { stepMs: 1 }

const TXN_BROKER_PROPERTIES = {
  'transaction.state.log.replication.factor': 1,
  'transaction.state.log.min.isr': 1,
  'transaction.state.log.num.partitions': 1,
}

/**
 * Holds, while `holding`, what the broker sends back on every connection that carried a
 * Produce request; `release()` delivers it in order. Answers of a connection that closed
 * meanwhile are dropped with it.
 */
class ProduceAnswerGate {
  holding = false
  private readonly held: (() => void)[] = []

  readonly connector: ClientConnector = async (target, signal) =>
    this.wrap(await tcpConnector(target, signal))

  hold(): void {
    this.holding = true
  }

  release(): void {
    this.holding = false
    for (const deliver of this.held.splice(0)) deliver()
  }

  private wrap(inner: ByteStream): ByteStream {
    let carriesProduce = false
    let closed = false
    inner.onClose(() => {
      closed = true
    })
    const pass = (deliver: () => void): void => {
      if (!carriesProduce || (!this.holding && this.held.length === 0)) deliver()
      else
        this.held.push(() => {
          if (!closed) deliver()
        })
    }
    const stream: ByteStream = {
      remoteAddress: inner.remoteAddress,
      get writableNeedDrain() {
        return inner.writableNeedDrain
      },
      write(chunks, onWritten) {
        // A request frame starts with its size (int32), then its api key (int16).
        if (chunks[0] !== undefined && chunks[0].length >= 6 && chunks[0].readInt16BE(4) === ApiKey.Produce)
          carriesProduce = true
        inner.write(chunks, onWritten)
      },
      pause: () => inner.pause(),
      resume: () => inner.resume(),
      onData: (listener) =>
        inner.onData((chunk) => {
          const copy = Buffer.from(chunk)
          pass(() => listener(copy))
        }),
      onDrain: (listener) => inner.onDrain(listener),
      onClose: (listener) => inner.onClose(listener),
      destroy: () => inner.destroy(),
    }
    const readFrames = inner.readFrames?.bind(inner)
    if (readFrames) {
      stream.readFrames = (maxFrameBytes, onFrame, onError) =>
        readFrames(
          maxFrameBytes,
          (frame) => {
            // The reader may reuse its buffer once onFrame returns.
            const copy = Buffer.from(frame)
            pass(() => onFrame(copy))
          },
          onError,
        )
    }
    return stream
  }
}

/** When (virtual ms) `promise` rejected; the error is checked by `check`. */
function failureTime(
  clock: ManualClock,
  promise: Promise<unknown>,
): Promise<{ atMs: number; error: unknown }> {
  return promise.then(
    () => {
      throw new Error(`the send succeeded at ${clock.monotonicMs()} ms: it should have expired`)
    },
    (error: unknown) => ({ atMs: clock.monotonicMs(), error }),
  )
}

function assertExpired(error: unknown, partition: string, recordCount: number): void {
  assert.ok(error instanceof KafkaClientError, String(error))
  assert.equal(error.code, 'ERR_DELIVERY_TIMEOUT')
  assert.match(
    error.message,
    new RegExp(
      `^Expiring ${recordCount} record\\(s\\) for ${partition}: \\d+ ms has passed since batch creation`,
    ),
  )
}

function producer(
  bootstrapServers: string,
  gate: ProduceAnswerGate,
  clock: ManualClock,
  extra: Partial<ProducerOptions> = {},
): Producer {
  return new Producer({
    bootstrapServers,
    connector: gate.connector,
    clock,
    lingerMs: 0,
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    deliveryTimeoutMs: DELIVERY_TIMEOUT_MS,
    retryBackoffMs: 20,
    retryBackoffMaxMs: 100,
    ...extra,
  })
}

describe('delivery.timeout.ms', () => {
  it('must be at least linger.ms + request.timeout.ms when set; the default is raised to it', () => {
    const bootstrapServers = '127.0.0.1:1'
    assert.throws(
      () => resolveProducerOptions({ bootstrapServers, lingerMs: 5, deliveryTimeoutMs: 30004 }, 30000),
      {
        code: 'ERR_INVALID_ARGUMENT',
        message: 'delivery.timeout.ms (30004) must be at least linger.ms + request.timeout.ms (30005)',
      },
    )
    assert.equal(
      resolveProducerOptions({ bootstrapServers, lingerMs: 5, deliveryTimeoutMs: 30005 }, 30000)
        .deliveryTimeoutMs,
      30005,
    )
    assert.equal(resolveProducerOptions({ bootstrapServers }, 30000).deliveryTimeoutMs, 120000)
    assert.equal(
      resolveProducerOptions({ bootstrapServers, lingerMs: 100 }, 200000).deliveryTimeoutMs,
      200100,
    )
  })

  it('an in-flight batch expires at its deadline; its answer arriving later does not complete it', async () => {
    await withBroker(async (cluster) => {
      await createTopics(cluster.bootstrapServers, [{ topic: 'inflight' }])
      const gate = new ProduceAnswerGate()
      const clock = new ManualClock()
      const p = producer(cluster.bootstrapServers, gate, clock)
      try {
        await clock.runUntil(p.send({ topic: 'inflight', value: 'warm-up' }), PATIENT)
        gate.hold()
        const sentMs = clock.monotonicMs()
        const failed = failureTime(clock, p.send({ topic: 'inflight', value: 'a' }))
        // The broker has written 'a'; its answer comes 100 ms after the deadline, well
        // before the client would give the request up.
        await clock.runFor(DELIVERY_TIMEOUT_MS + 100)
        gate.release()
        const { atMs, error } = await clock.runUntil(failed)
        assertExpired(error, 'inflight-0', 1)
        const elapsedMs = atMs - sentMs
        assert.ok(
          elapsedMs >= DELIVERY_TIMEOUT_MS && elapsedMs < DELIVERY_TIMEOUT_MS + 100,
          `failed after ${elapsedMs} ms`,
        )
        // The producer goes on: the next send is acknowledged.
        await clock.runUntil(p.send({ topic: 'inflight', value: 'b' }), PATIENT)
        // Every batch settled: no wake is left armed for a deadline (up to
        // delivery.timeout.ms away, it would keep the process alive).
        await clock.runFor(100)
        assert.equal(clock.pendingTimers, 0)
      } finally {
        gate.release()
        await p.close()
      }
    })
  })

  it('a queued batch behind one that is never answered expires at its own deadline', async () => {
    await withBroker(async (cluster) => {
      await createTopics(cluster.bootstrapServers, [{ topic: 'queued' }])
      const gate = new ProduceAnswerGate()
      const clock = new ManualClock()
      // One request in flight: 'b' waits in the queue while 'a' is unanswered.
      const p = producer(cluster.bootstrapServers, gate, clock, { maxInFlightRequestsPerConnection: 1 })
      try {
        await clock.runUntil(p.send({ topic: 'queued', value: 'warm-up' }), PATIENT)
        gate.hold()
        const aSentMs = clock.monotonicMs()
        const aFailed = failureTime(clock, p.send({ topic: 'queued', value: 'a' }))
        await clock.runFor(500)
        const bCreatedMs = clock.monotonicMs()
        const bFailed = failureTime(clock, p.send({ topic: 'queued', value: 'b1' }))
        const b2Failed = failureTime(clock, p.send({ topic: 'queued', value: 'b2' }))
        const [a, b, b2] = await clock.runUntil(Promise.all([aFailed, bFailed, b2Failed]), { maxMs: 10_000 })
        assertExpired(a.error, 'queued-0', 1)
        assertExpired(b.error, 'queued-0', 2)
        assert.equal(b2.atMs, b.atMs, 'one batch')
        const bElapsedMs = b.atMs - bCreatedMs
        assert.ok(
          bElapsedMs >= DELIVERY_TIMEOUT_MS && bElapsedMs < DELIVERY_TIMEOUT_MS + 100,
          `the queued batch failed after ${bElapsedMs} ms`,
        )
        assert.ok(b.atMs - aSentMs < REQUEST_GIVEN_UP_MS, 'before the request in flight was given up')
      } finally {
        gate.release()
        await p.close()
      }
    })
  })

  it('an idempotent producer whose expired batch was written keeps its id; nothing is duplicated or reordered', async () => {
    await withBroker(async (cluster) => {
      await createTopics(cluster.bootstrapServers, [{ topic: 'idem' }])
      const gate = new ProduceAnswerGate()
      const clock = new ManualClock()
      const p = producer(cluster.bootstrapServers, gate, clock)
      const acknowledged = new Map<string, number>()
      const record = async (value: string): Promise<RecordMetadata> => {
        const metadata = await p.send({ topic: 'idem', value })
        acknowledged.set(value, metadata.offset)
        return metadata
      }
      try {
        await clock.runUntil(record('warm-up'), PATIENT)
        const identity = p.producerIdentity
        assert.ok(identity !== null)
        gate.hold()
        const aSentMs = clock.monotonicMs()
        const aFailed = failureTime(clock, record('a'))
        // 'b' and 'c' go while 'a' is in flight (sequences after it) and outlive its deadline.
        await clock.runFor(1000)
        const later = [record('b'), record('c')]
        // Every answer comes 100 ms after the deadline of 'a', well before those of 'b' and 'c'.
        await clock.runFor(DELIVERY_TIMEOUT_MS + 100 - 1000)
        gate.release()
        const { atMs, error } = await clock.runUntil(aFailed)
        assertExpired(error, 'idem-0', 1)
        assert.ok(atMs - aSentMs < DELIVERY_TIMEOUT_MS + 100, `'a' failed after ${atMs - aSentMs} ms`)
        await clock.runUntil(Promise.all(later), PATIENT)
        await clock.runUntil(Promise.all([record('d'), record('e')]), PATIENT)
        assert.deepEqual(p.producerIdentity, identity, 'every stamped sequence was acknowledged: same id')
        assert.equal(p.metrics().producerIdResets, 0)
        const read = (await readAll(cluster.bootstrapServers, 'idem')).map((r) => [text(r.value), r.offset])
        // 'a' was written before it expired (its send failed: KIP-91's at-least-once edge).
        assert.deepEqual(
          read.map(([value]) => value),
          ['warm-up', 'a', 'b', 'c', 'd', 'e'],
        )
        for (const [value, offset] of read) {
          if (value !== 'a') assert.equal(acknowledged.get(value as string), offset, `offset of ${value}`)
        }
      } finally {
        gate.release()
        await p.close()
      }
    })
  })

  it("a transactional producer's expiry makes the transaction abortable; the next one commits", async () => {
    await withBroker(
      async (cluster) => {
        await createTopics(cluster.bootstrapServers, [{ topic: 'txn' }])
        const gate = new ProduceAnswerGate()
        const clock = new ManualClock()
        const p = producer(cluster.bootstrapServers, gate, clock, {
          transactionalId: 'expiry',
          maxBlockMs: 20000,
        })
        try {
          await clock.runUntil(p.initTransactions(), PATIENT)
          p.beginTransaction()
          gate.hold()
          const aSentMs = clock.monotonicMs()
          const aFailed = failureTime(clock, p.send({ topic: 'txn', value: 'a' }))
          // The answer (the broker wrote 'a') comes 100 ms after the deadline.
          await clock.runFor(DELIVERY_TIMEOUT_MS + 100)
          gate.release()
          const { atMs, error } = await clock.runUntil(aFailed)
          assertExpired(error, 'txn-0', 1)
          assert.ok(atMs - aSentMs < DELIVERY_TIMEOUT_MS + 100, `'a' failed after ${atMs - aSentMs} ms`)
          assert.equal(p.transactionState, 'ABORTABLE_ERROR')
          await assert.rejects(clock.runUntil(p.commitTransaction()), (thrown: unknown) => {
            assert.ok(thrown instanceof TransactionAbortableError, String(thrown))
            return true
          })
          await clock.runUntil(p.abortTransaction(), PATIENT)
          assert.equal(p.transactionState, 'READY')
          p.beginTransaction()
          const b = p.send({ topic: 'txn', value: 'b' })
          await clock.runUntil(p.commitTransaction(), PATIENT)
          await b
          const consumer = new Consumer({
            bootstrapServers: cluster.bootstrapServers,
            isolationLevel: 'read_committed',
            fetchMaxWaitMs: 100,
          })
          try {
            consumer.assign([{ topic: 'txn', partition: 0 }])
            consumer.seekToBeginning()
            const seen: string[] = []
            const deadline = Date.now() + 20000
            while (seen.length < 1 && Date.now() < deadline)
              for (const r of await consumer.poll(200)) seen.push(text(r.value) ?? '')
            // Nothing after 'b' either: poll once more past it.
            for (const r of await consumer.poll(300)) seen.push(text(r.value) ?? '')
            assert.deepEqual(seen, ['b'])
          } finally {
            await consumer.close()
          }
        } finally {
          gate.release()
          await p.close()
        }
      },
      { properties: TXN_BROKER_PROPERTIES },
    )
  })
})
