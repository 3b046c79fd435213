/**
 * The idempotent producer's sequence bookkeeping on its own (no broker, no timers): the
 * tests play the sender, asking readyToSend, stamping, and reporting answers as Kafka's
 * TransactionManagerTest does for the Java producer.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ProducerBatch } from '../../src/client/producer-batch.js'
import { TransactionManager } from '../../src/client/transaction-manager.js'
import { CompressionType } from '../../src/protocol/batch-header.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'

const KEY = 't/0'

function batchOf(records: number, partition = 0): ProducerBatch {
  const batch = new ProducerBatch('t', partition, 0, 120000, { compression: CompressionType.None })
  for (let i = 0; i < records; i++) {
    batch.append({ key: null, value: Buffer.from(`v${i}`), headers: [], timestamp: 1 }, 10, noop, noop)
  }
  return batch
}

function noop(): void {}

/** The sender's side of one partition: its queue and what of it is in flight. */
class Partition {
  readonly queue: ProducerBatch[] = []
  readonly inFlight = new Set<ProducerBatch>()
  constructor(
    readonly tm: TransactionManager,
    readonly key = KEY,
  ) {}

  add(...batches: ProducerBatch[]): this {
    this.queue.push(...batches)
    return this
  }

  ready(): boolean {
    return this.queue.length > 0 && this.tm.readyToSend(this.key, this.queue, this.inFlight.size)
  }

  /** Drains the head if it may go; returns it. */
  send(): ProducerBatch {
    assert.ok(this.ready(), 'head of the queue is ready')
    const batch = this.queue.shift()!
    if (!batch.hasSequence) this.tm.stampBatch(this.key, batch)
    this.inFlight.add(batch)
    return batch
  }

  ack(batch: ProducerBatch): void {
    assert.ok(this.inFlight.delete(batch))
    this.tm.handleCompletedBatch(batch)
  }

  /** An error answer for an in-flight batch: the verdict, the batch back in the queue unless it fails. */
  error(batch: ProducerBatch, errorCode: number, logStartOffset?: bigint): string | undefined {
    assert.ok(this.inFlight.delete(batch))
    const verdict = this.tm.canRetry(batch, errorCode, logStartOffset)
    if (verdict === 'fail') this.tm.handleFailedBatch(batch, false)
    else this.requeue(batch)
    return verdict
  }

  /** Back in sequence order among the retried batches, ahead of new ones (as the sender requeues). */
  private requeue(batch: ProducerBatch): void {
    let at = 0
    while (
      at < this.queue.length &&
      this.queue[at].hasSequence &&
      this.queue[at].baseSequence < batch.baseSequence
    )
      at++
    this.queue.splice(at, 0, batch)
  }

  /** The batch expired while in flight (delivery.timeout.ms). */
  expire(batch: ProducerBatch): void {
    assert.ok(this.inFlight.delete(batch))
    this.tm.handleFailedBatch(batch, true)
  }
}

function started(producerId = 1000n): TransactionManager {
  const tm = new TransactionManager()
  tm.setProducerIdAndEpoch(producerId, 0)
  return tm
}

describe('TransactionManager: sequences', () => {
  it('nothing goes before a producer id; then batches count up by their record counts', () => {
    const tm = new TransactionManager()
    const p = new Partition(tm).add(batchOf(2), batchOf(3), batchOf(1))
    assert.equal(p.ready(), false, 'no producer id yet')
    assert.equal(tm.producerIdAndEpoch, null)
    tm.setProducerIdAndEpoch(1000n, 3)
    const sent = [p.send(), p.send(), p.send()]
    assert.deepEqual(
      sent.map((b) => [b.producerId, b.producerEpoch, b.baseSequence]),
      [
        [1000n, 3, 0],
        [1000n, 3, 2],
        [1000n, 3, 5],
      ],
    )
    assert.deepEqual(tm.producerIdAndEpoch, { producerId: 1000n, producerEpoch: 3 })
  })

  it('at most 5 batches of a partition are in flight', () => {
    const p = new Partition(started())
    for (let i = 0; i < 6; i++) p.add(batchOf(1))
    const sent = Array.from({ length: 5 }, () => p.send())
    assert.equal(p.ready(), false, 'the sixth waits')
    p.ack(sent[0])
    assert.equal(p.send().baseSequence, 5)
  })

  it('a retried batch keeps its sequence and goes alone, before the batches behind it', () => {
    const p = new Partition(started()).add(batchOf(1), batchOf(1), batchOf(1))
    const [a, b] = [p.send(), p.send()]
    assert.equal(p.error(a, ErrorCode.NOT_LEADER_OR_FOLLOWER), undefined, 'left to the common retry rules')
    assert.equal(p.ready(), false, "'b' is still in flight: the retry waits")
    // 'b' was sent behind the unacknowledged 'a': transient, retried with its sequence.
    assert.equal(p.error(b, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), 'retry')
    const again = p.send()
    assert.equal(again, a)
    assert.equal(again.baseSequence, 0, 'same sequence')
    assert.equal(p.ready(), false, 'one retried batch at a time')
    p.ack(a)
    assert.equal(p.send().baseSequence, 1)
    assert.equal(p.send().baseSequence, 2, 'then the new batch, next in sequence')
    assert.equal(p.tm.producerIdResets, 0)
  })
})

describe('TransactionManager: producer id resets (KIP-360)', () => {
  it('OUT_OF_ORDER_SEQUENCE_NUMBER on the next sequence fails that batch and moves the partition to a new id', () => {
    const tm = started()
    const p = new Partition(tm).add(batchOf(1), batchOf(2), batchOf(1))
    const a = p.send()
    p.ack(a)
    const b = p.send()
    assert.equal(
      p.error(b, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
      'fail',
      'a real gap: b is the next sequence',
    )
    assert.equal(tm.producerIdAndEpoch, null, 'the id is given up')
    assert.equal(tm.producerIdResets, 1)
    assert.equal(p.ready(), false, 'waits for the new id')
    tm.setProducerIdAndEpoch(1001n, 0)
    const c = p.send()
    assert.deepEqual([c.producerId, c.baseSequence], [1001n, 0])
  })

  for (const [name, code] of [
    ['UNKNOWN_PRODUCER_ID', ErrorCode.UNKNOWN_PRODUCER_ID],
    ['INVALID_PRODUCER_EPOCH', ErrorCode.INVALID_PRODUCER_EPOCH],
  ] as const) {
    it(`${name} resets: the partition's unacknowledged batches are re-stamped from 0 under the new id`, () => {
      const tm = started()
      const p = new Partition(tm).add(batchOf(1), batchOf(1), batchOf(1))
      p.ack(p.send())
      const [b, c] = [p.send(), p.send()]
      assert.equal(p.error(b, code, 0n), 'reset')
      assert.equal(tm.producerIdAndEpoch, null)
      tm.setProducerIdAndEpoch(1001n, 0)
      assert.equal(p.ready(), false, "'c' of the old id is still in flight")
      assert.equal(p.error(c, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), 'retry', 'not the next sequence')
      const [b2, c2] = [p.send(), p.send()]
      assert.deepEqual(
        [b2, c2].map((x) => [x.producerId, x.baseSequence, x.sequenceReset]),
        [
          [1001n, 0, true],
          [1001n, 1, true],
        ],
      )
      assert.equal(tm.producerIdResets, 1, 'one new id for the one reset')
      // A gap on a re-stamped batch is not a real one: retried.
      assert.equal(p.error(b2, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), 'retry')
    })
  }

  it('UNKNOWN_PRODUCER_ID without a log start offset (the partition moved while answering) is retried as is', () => {
    const tm = started()
    const p = new Partition(tm).add(batchOf(1))
    const a = p.send()
    assert.equal(p.error(a, ErrorCode.UNKNOWN_PRODUCER_ID, -1n), 'retry')
    assert.deepEqual(tm.producerIdAndEpoch, { producerId: 1000n, producerEpoch: 0 })
    assert.equal(p.send().baseSequence, 0)
  })

  it('other partitions move to the new id once their in-flight batches are answered', () => {
    const tm = started()
    const p0 = new Partition(tm, 't/0').add(batchOf(1))
    const p1 = new Partition(tm, 't/1').add(batchOf(1, 1), batchOf(1, 1))
    const a = p0.send()
    const x = p1.send()
    p0.error(a, ErrorCode.UNKNOWN_PRODUCER_ID, 0n)
    tm.setProducerIdAndEpoch(1001n, 0)
    assert.equal(p1.ready(), false, "t/1's new batch waits for its old-id batch")
    p1.ack(x)
    const y = p1.send()
    assert.deepEqual([y.producerId, y.baseSequence], [1001n, 0], 't/1 starts over under the new id')
  })

  it("a reset in one drain stops another partition's stamp that readyToSend allowed before", () => {
    const tm = started()
    const p0 = new Partition(tm, 't/0').add(batchOf(1))
    const p1 = new Partition(tm, 't/1').add(batchOf(1, 1), batchOf(1, 1))
    p0.ack(p0.send())
    const expired = p1.send()
    p1.expire(expired) // unresolved: nothing of t/1 was acknowledged
    p0.add(batchOf(1))
    assert.equal(p0.ready(), true)
    assert.equal(p1.ready(), false, 'the unresolved sequence was never acknowledged: t/1 resets')
    assert.equal(tm.producerIdAndEpoch, null)
    assert.equal(tm.canStamp('t/0'), false, "t/0's batch must wait for the new id, not take the old one")
  })
})

describe('TransactionManager: a batch that expired after it was sent (unresolved sequences)', () => {
  it('written: the batches behind it keep their sequences, and so does the producer id', () => {
    const tm = started()
    const p = new Partition(tm).add(batchOf(1), batchOf(1), batchOf(1))
    p.ack(p.send())
    const a = p.send()
    const b = p.send()
    p.expire(a)
    assert.deepEqual(tm.producerIdAndEpoch, { producerId: 1000n, producerEpoch: 0 }, 'kept while unresolved')
    p.add(batchOf(1))
    assert.equal(p.ready(), false, "a new batch waits until 'b' is through")
    // 'b' is retried with its sequence, and acknowledged: 'a' must have been written.
    assert.equal(p.error(b, ErrorCode.REQUEST_TIMED_OUT), undefined)
    const retried = p.send()
    assert.equal(retried.baseSequence, 2, "'b' keeps its sequence")
    p.ack(retried)
    const c = p.send()
    assert.deepEqual([c.producerId, c.baseSequence], [1000n, 3], 'resolved: same id, next sequence')
    assert.equal(tm.producerIdResets, 0)
  })

  it('not written: the batch right behind it meets the gap and the partition moves to a new id', () => {
    const tm = started()
    const p = new Partition(tm).add(batchOf(1), batchOf(1), batchOf(1))
    p.ack(p.send())
    const a = p.send()
    const b = p.send()
    p.expire(a)
    assert.equal(
      p.error(b, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
      'reset',
      "'b' is right behind the expired 'a'",
    )
    assert.equal(tm.producerIdAndEpoch, null)
    assert.equal(tm.producerIdResets, 1)
    tm.setProducerIdAndEpoch(1001n, 0)
    const b2 = p.send()
    assert.equal(b2, b)
    assert.deepEqual([b2.producerId, b2.baseSequence], [1001n, 0], "'b' re-stamped from 0")
    p.add(batchOf(1))
    assert.equal(p.send().baseSequence, 1)
  })

  it('not written, nothing behind it: the next new batch finds the sequence unacknowledged and resets', () => {
    const tm = started()
    const p = new Partition(tm).add(batchOf(1))
    p.ack(p.send())
    p.add(batchOf(1))
    p.expire(p.send())
    p.add(batchOf(1))
    assert.equal(p.ready(), false)
    assert.equal(tm.producerIdAndEpoch, null, 'reset: the expired sequence was never acknowledged')
    tm.setProducerIdAndEpoch(1001n, 0)
    assert.deepEqual((({ producerId, baseSequence }) => [producerId, baseSequence])(p.send()), [1001n, 0])
  })

  it('a gap two behind the expired batch is transient: retried with its sequence', () => {
    const tm = started()
    const p = new Partition(tm).add(batchOf(1), batchOf(1), batchOf(1))
    const a = p.send()
    p.send()
    const c = p.send()
    p.expire(a)
    assert.equal(p.error(c, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), 'retry')
    assert.deepEqual(tm.producerIdAndEpoch, { producerId: 1000n, producerEpoch: 0 })
  })
})
