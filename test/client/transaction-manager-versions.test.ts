/**
 * The transactional state machine at transaction version 1 and 2 (KIP-890 part 2), on its
 * own as Kafka's TransactionManagerTest runs it with isTransactionV2Enabled true and false:
 * at 1 a partition sends only once AddPartitionsToTxn added it and the epoch stays across
 * transactions; at 2 it sends at once (Produce v12 adds it), EndTxn v5's bumped epoch is
 * the next transaction's with every sequence from 0 again, and a failed batch needs no
 * client-side epoch bump after the abort.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ProducerBatch } from '../../src/client/producer-batch.js'
import { partitionKey, TransactionManager } from '../../src/client/transaction-manager.js'
import { CompressionType } from '../../src/protocol/batch-header.js'

const PRODUCER_ID = 4000n

function batchOf(records: number, partition = 0): ProducerBatch {
  const batch = new ProducerBatch('t', partition, 0, 120000, { compression: CompressionType.None })
  for (let i = 0; i < records; i++)
    batch.append({ key: null, value: Buffer.from(`v${i}`), headers: [], timestamp: 1 }, 10, noop, noop)
  return batch
}

function noop(): void {}

function initialized(transactionV2: boolean): TransactionManager {
  const tm = new TransactionManager('txn-a')
  tm.beginInitTransactions()
  tm.completeInitTransactions(PRODUCER_ID, 7, transactionV2)
  return tm
}

/** What the sender does with a new batch of an allowed partition: readyToSend, stamp. */
function stamped(tm: TransactionManager, batch: ProducerBatch): ProducerBatch {
  const key = partitionKey(batch.topic, batch.partition)
  assert.ok(tm.isSendToPartitionAllowed(key), `${key} may send`)
  assert.ok(tm.readyToSend(key, [batch], 0))
  tm.stampBatch(key, batch)
  return batch
}

describe('TransactionManager at transaction version 1', () => {
  it('a partition sends once AddPartitionsToTxn added it; the epoch and the sequences carry over to the next transaction', () => {
    const tm = initialized(false)
    assert.equal(tm.isTransactionV2, false)
    tm.beginTransaction()
    tm.maybeAddPartition('t', 0)
    assert.equal(tm.isSendToPartitionAllowed('t/0'), false)
    assert.equal(tm.needsEndTxn, false)
    assert.deepEqual(tm.takeNewPartitions(), [{ topic: 't', partition: 0 }])
    tm.onPartitionsAdded([{ topic: 't', partition: 0 }])
    assert.equal(tm.needsEndTxn, true)
    const first = stamped(tm, batchOf(3))
    assert.equal(first.producerEpoch, 7)
    tm.handleCompletedBatch(first)
    tm.beginCommit()
    tm.completeTransaction(null)
    tm.beginTransaction()
    tm.maybeAddPartition('t', 0)
    tm.onPartitionsAdded(tm.takeNewPartitions())
    const second = stamped(tm, batchOf(1))
    assert.deepEqual([second.producerId, second.producerEpoch, second.baseSequence], [PRODUCER_ID, 7, 3])
  })

  it('a failed batch: the abort is followed by an InitProducerId epoch bump (KIP-360)', () => {
    const tm = initialized(false)
    tm.beginTransaction()
    tm.maybeAddPartition('t', 0)
    tm.onPartitionsAdded(tm.takeNewPartitions())
    tm.handleFailedBatch(stamped(tm, batchOf(1)), false)
    assert.equal(tm.needsEpochBump, true)
    tm.beginAbort()
    tm.beginEpochBump()
    // The bump keeps the version initTransactions chose.
    tm.completeInitTransactions(PRODUCER_ID, 8)
    assert.equal(tm.isTransactionV2, false)
    assert.equal(tm.state, 'READY')
  })
})

describe('TransactionManager at transaction version 2', () => {
  it('a partition joins the transaction with its first batch: no AddPartitionsToTxn, EndTxn needed', () => {
    const tm = initialized(true)
    assert.equal(tm.isTransactionV2, true)
    tm.beginTransaction()
    assert.equal(tm.needsEndTxn, false, 'nothing sent: no EndTxn')
    tm.maybeAddPartition('t', 0)
    tm.maybeAddPartition('t', 1)
    assert.equal(tm.hasPartitionsToAdd, false)
    assert.deepEqual(tm.takeNewPartitions(), [])
    assert.equal(tm.isSendToPartitionAllowed('t/0'), true)
    assert.equal(tm.isSendToPartitionAllowed('t/1'), true)
    assert.equal(tm.isSendToPartitionAllowed('t/2'), false)
    assert.equal(tm.needsEndTxn, true)
  })

  it("EndTxn v5's bumped epoch is the next transaction's, every partition from sequence 0 again", () => {
    const tm = initialized(true)
    tm.beginTransaction()
    tm.maybeAddPartition('t', 0)
    const first = stamped(tm, batchOf(5))
    assert.deepEqual([first.producerEpoch, first.baseSequence], [7, 0])
    tm.handleCompletedBatch(first)
    tm.beginCommit()
    tm.completeTransaction({ producerId: PRODUCER_ID, producerEpoch: 8 })
    assert.deepEqual(tm.producerIdAndEpoch, { producerId: PRODUCER_ID, producerEpoch: 8 })
    tm.beginTransaction()
    assert.equal(tm.isSendToPartitionAllowed('t/0'), false, 'the last transaction ended: added again')
    tm.maybeAddPartition('t', 0)
    const second = stamped(tm, batchOf(2))
    assert.deepEqual([second.producerId, second.producerEpoch, second.baseSequence], [PRODUCER_ID, 8, 0])
    // An abort bumps too; an epoch overflow answers a new producer id at epoch 0.
    tm.handleCompletedBatch(second)
    tm.beginAbort()
    tm.completeTransaction({ producerId: PRODUCER_ID + 1n, producerEpoch: 0 })
    tm.beginTransaction()
    tm.maybeAddPartition('t', 0)
    const third = stamped(tm, batchOf(1))
    assert.deepEqual([third.producerId, third.producerEpoch, third.baseSequence], [PRODUCER_ID + 1n, 0, 0])
  })

  it('a failed batch needs no client-side epoch bump: the abort EndTxn bumps it', () => {
    const tm = initialized(true)
    tm.beginTransaction()
    tm.maybeAddPartition('t', 0)
    const batch = stamped(tm, batchOf(1))
    tm.handleFailedBatch(batch, false)
    tm.abortableError(new Error('batch failed'))
    assert.throws(() => tm.beginCommit(), /abortTransaction/)
    assert.equal(tm.needsEpochBump, false)
    tm.beginAbort()
    tm.completeTransaction({ producerId: PRODUCER_ID, producerEpoch: 8 })
    assert.equal(tm.state, 'READY')
    tm.beginTransaction()
    tm.maybeAddPartition('t', 0)
    assert.deepEqual(stamped(tm, batchOf(1)).baseSequence, 0)
  })

  it('an answer without an id (EndTxn v4 and below: -1) keeps the epoch and the sequences', () => {
    const tm = initialized(true)
    tm.beginTransaction()
    tm.maybeAddPartition('t', 0)
    tm.handleCompletedBatch(stamped(tm, batchOf(2)))
    tm.beginCommit()
    tm.completeTransaction({ producerId: -1n, producerEpoch: -1 })
    tm.beginTransaction()
    tm.maybeAddPartition('t', 0)
    const next = stamped(tm, batchOf(1))
    assert.deepEqual([next.producerEpoch, next.baseSequence], [7, 2])
  })
})
