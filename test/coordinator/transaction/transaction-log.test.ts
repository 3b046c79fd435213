/**
 * `__transaction_state` records in Kafka's formats: bytes laid out by hand from Kafka's
 * TransactionLogKey/TransactionLogValue schemas (v0 written, v0 and v1 read), and the state
 * machine's transitions and epoch rules (Kafka's TransactionMetadata).
 */

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { toProducerId } from '../../../src/common/types.js'
import {
  decodeTransactionLogKey,
  decodeTransactionLogValue,
  encodeTransactionLogKey,
  encodeTransactionLogValue,
  TransactionLogFormatError,
} from '../../../src/coordinator/transaction/transaction-log.js'
import {
  NO_PRODUCER_EPOCH,
  TransactionMetadata,
  TransactionState,
} from '../../../src/coordinator/transaction/transaction-metadata.js'
import { Writer } from '../../../src/protocol/primitives.js'

describe('TransactionLogKey', () => {
  it('is version 0 and the transactional id as an int16-length string', () => {
    const key = encodeTransactionLogKey('tx-1')
    assert.deepEqual(key, Buffer.from([0, 0, 0, 4, 0x74, 0x78, 0x2d, 0x31]))
    assert.equal(decodeTransactionLogKey(key), 'tx-1')
  })

  it('an unknown key version is skipped, not misread', () => {
    assert.equal(decodeTransactionLogKey(Buffer.from([0, 1, 0, 1, 0x61])), undefined)
  })
})

describe('TransactionLogValue', () => {
  const value = {
    producerId: toProducerId(4242n),
    producerEpoch: 7,
    txnTimeoutMs: 60000,
    state: TransactionState.Ongoing,
    partitions: new Map([
      ['b', new Set([2, 0])],
      ['a', new Set([1])],
    ]),
    txnLastUpdateTimestampMs: 1_700_000_000_500,
    txnStartTimestampMs: 1_700_000_000_000,
  }

  it('writes version 0 in schema order, topics and partitions sorted', () => {
    const expected = new Writer(64)
      .writeInt16(0)
      .writeInt64(4242n)
      .writeInt16(7)
      .writeInt32(60000)
      .writeInt8(1)
      .writeArrayLength(2)
      .writeString('a')
      .writeArrayLength(1)
      .writeInt32(1)
      .writeString('b')
      .writeArrayLength(2)
      .writeInt32(0)
      .writeInt32(2)
      .writeInt64(1_700_000_000_500n)
      .writeInt64(1_700_000_000_000n)
      .toBuffer()
    assert.deepEqual(encodeTransactionLogValue(value), expected)
    const decoded = decodeTransactionLogValue(expected)
    assert.equal(decoded.producerId, 4242n)
    assert.equal(decoded.producerEpoch, 7)
    assert.equal(decoded.state, TransactionState.Ongoing)
    assert.deepEqual(
      [...decoded.partitions].map(([t, ids]) => [t, [...ids].sort()]),
      [
        ['a', [1]],
        ['b', [0, 2]],
      ],
    )
    assert.equal(decoded.txnStartTimestampMs, 1_700_000_000_000)
    assert.equal(decoded.previousProducerId, -1n)
  })

  it('reads version 1 (flexible) with its tagged producer ids and client transaction version', () => {
    const tagged = (tag: number, body: Buffer) => [tag, body] as const
    const tags = [
      tagged(0, new Writer(8).writeInt64(11n).toBuffer()),
      tagged(1, new Writer(8).writeInt64(13n).toBuffer()),
      tagged(2, new Writer(2).writeInt16(2).toBuffer()),
      tagged(9, Buffer.from([1, 2, 3])),
    ]
    const w = new Writer(64)
      .writeInt16(1)
      .writeInt64(12n)
      .writeInt16(0)
      .writeInt32(1000)
      .writeInt8(TransactionState.PrepareCommit)
      .writeCompactArrayLength(1)
      .writeCompactString('t')
      .writeCompactArrayLength(1)
      .writeInt32(3)
      .writeUnsignedVarint(0)
      .writeInt64(5n)
      .writeInt64(4n)
      .writeUnsignedVarint(tags.length)
    for (const [tag, body] of tags) w.writeUnsignedVarint(tag).writeUnsignedVarint(body.length).writeRaw(body)
    const decoded = decodeTransactionLogValue(w.toBuffer())
    assert.equal(decoded.state, TransactionState.PrepareCommit)
    assert.deepEqual([...(decoded.partitions.get('t') ?? [])], [3])
    assert.equal(decoded.previousProducerId, 11n)
    assert.equal(decoded.nextProducerId, 13n)
    assert.equal(decoded.clientTransactionVersion, 2)
    assert.equal(decoded.txnLastUpdateTimestampMs, 5)
  })

  it('writes version 1 for a transaction version 2 transaction, bytes as the reader above reads them', () => {
    const expected = new Writer(64)
      .writeInt16(1)
      .writeInt64(12n)
      .writeInt16(0)
      .writeInt32(1000)
      .writeInt8(TransactionState.PrepareCommit)
      .writeCompactArrayLength(1)
      .writeCompactString('t')
      .writeCompactArrayLength(1)
      .writeInt32(3)
      .writeUnsignedVarint(0)
      .writeInt64(5n)
      .writeInt64(4n)
      // Only the tags that differ from their defaults: next producer id and client version.
      .writeUnsignedVarint(2)
      .writeUnsignedVarint(1)
      .writeUnsignedVarint(8)
      .writeInt64(13n)
      .writeUnsignedVarint(2)
      .writeUnsignedVarint(2)
      .writeInt16(2)
      .toBuffer()
    const written = encodeTransactionLogValue({
      producerId: toProducerId(12n),
      previousProducerId: toProducerId(-1n),
      nextProducerId: toProducerId(13n),
      producerEpoch: 0,
      txnTimeoutMs: 1000,
      state: TransactionState.PrepareCommit,
      partitions: new Map([['t', new Set([3])]]),
      txnLastUpdateTimestampMs: 5,
      txnStartTimestampMs: 4,
      clientTransactionVersion: 2,
    })
    assert.deepEqual(written, expected)
    const decoded = decodeTransactionLogValue(written)
    assert.equal(decoded.nextProducerId, 13n)
    assert.equal(decoded.clientTransactionVersion, 2)
  })

  it('refuses unknown versions and states, and never writes PrepareEpochFence or Dead', () => {
    assert.throws(() => decodeTransactionLogValue(Buffer.from([0, 2, 0, 0])), TransactionLogFormatError)
    const bad = Buffer.from(encodeTransactionLogValue(value))
    bad[2 + 8 + 2 + 4] = 9
    assert.throws(() => decodeTransactionLogValue(bad), /unknown transaction state 9/)
    assert.throws(
      () => encodeTransactionLogValue({ ...value, state: TransactionState.PrepareEpochFence }),
      TransactionLogFormatError,
    )
  })
})

describe('TransactionMetadata', () => {
  const fresh = () => TransactionMetadata.created('tx', toProducerId(5n), 60000, 1000)

  it('bumps the epoch from none to 0, and a KIP-360 retry of the last bump gets the same epoch', () => {
    const m = fresh()
    const first = m.prepareIncrementProducerEpoch(60000, null, 1001)
    assert.ok(first)
    assert.equal(m.pendingState, TransactionState.Empty)
    m.completeTransition(first)
    assert.equal(m.producerEpoch, 0)
    assert.equal(m.lastProducerEpoch, NO_PRODUCER_EPOCH)
    const bumped = m.prepareIncrementProducerEpoch(60000, 0, 1002)
    assert.ok(bumped)
    m.completeTransition(bumped)
    assert.equal(m.producerEpoch, 1)
    assert.equal(m.lastProducerEpoch, 0)
    const retried = m.prepareIncrementProducerEpoch(60000, 0, 1003)
    assert.equal(retried?.producerEpoch, 1, 'the previous epoch retried: same answer')
    m.abandonTransition()
    assert.equal(m.prepareIncrementProducerEpoch(60000, 7, 1004), null, 'a stranger epoch is fenced')
  })

  it('one change at a time, and only along Kafka transitions', () => {
    const m = fresh()
    m.completeTransition(m.prepareIncrementProducerEpoch(60000, null, 1)!)
    assert.throws(
      () => m.prepareAbortOrCommit(TransactionState.PrepareCommit, 2),
      /cannot become PrepareCommit/,
    )
    const add = m.prepareAddPartitions(new Map([['t', new Set([0])]]), 5)
    assert.throws(() => m.prepareAddPartitions(new Map(), 6), /already pending/)
    m.completeTransition(add)
    assert.equal(m.state, TransactionState.Ongoing)
    assert.equal(m.txnStartTimestampMs, 5)
    m.completeTransition(m.prepareAddPartitions(new Map([['t', new Set([1])]]), 9))
    assert.equal(m.txnStartTimestampMs, 5, 'adding partitions keeps the start time')
    assert.ok(m.hasPartition('t', 1) && m.hasPartition('t', 0))
    const fence = m.prepareFenceProducerEpoch()
    assert.equal(fence.producerEpoch, 1)
    assert.equal(m.pendingState, TransactionState.PrepareEpochFence)
  })

  it('an exhausted epoch rotates the producer id, remembering the old one', () => {
    const m = new TransactionMetadata('tx', { ...fresh().snapshot(), producerEpoch: 32766 })
    assert.ok(m.isProducerEpochExhausted)
    assert.throws(() => m.prepareIncrementProducerEpoch(1000, null, 1), /rotated, not bumped/)
    const rotated = m.prepareProducerIdRotation(toProducerId(9n), 1000, 2, true)
    m.completeTransition(rotated)
    assert.equal(m.producerId, 9n)
    assert.equal(m.previousProducerId, 5n)
    assert.equal(m.producerEpoch, 0)
    assert.equal(m.lastProducerEpoch, 32766)
  })
})
