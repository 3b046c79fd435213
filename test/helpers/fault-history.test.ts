/**
 * analyse(), the fault suites' verdict on a run: which acknowledged records count as lost,
 * and which absent implicit acks are librdkafka's own loss (see HistoryAnalysis).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type Ack, analyse } from './fault-history.js'

const ack = (producer: string, seq: number, partition: number, offset: number | null): Ack => ({
  producer,
  seq,
  partition,
  offset,
  error: null,
  atMs: 0,
})

test('an absent implicit ack before its producer first appears in the partition is librdkafka loss, not lost', () => {
  // ick1's first batch (seqs 0 and 3) died with a leader; the new leader took seq 6 at offset 1.
  const acks = [ack('ick1', 0, 0, null), ack('ick1', 3, 0, null), ack('ick1', 6, 0, 1), ack('ck1', 0, 0, 0)]
  const records = [
    { partition: 0, offset: 0, value: 'ck1-0' },
    { partition: 0, offset: 1, value: 'ick1-6' },
  ]
  const r = analyse(acks, records)
  assert.equal(r.lost, 0)
  assert.equal(r.implicitAckLosses, 2)
  assert.deepEqual(r.implicitAckLossSample, ['ick1-0@0', 'ick1-3@0'])
})

test('an absent implicit ack after a record of its producer in the partition is lost', () => {
  const acks = [ack('ick1', 0, 0, 0), ack('ick1', 3, 0, null), ack('ick1', 6, 0, 1)]
  const records = [
    { partition: 0, offset: 0, value: 'ick1-0' },
    { partition: 0, offset: 1, value: 'ick1-6' },
  ]
  const r = analyse(acks, records)
  assert.equal(r.lost, 1)
  assert.deepEqual(r.lostSample, ['ick1-3@0:null'])
  assert.equal(r.implicitAckLosses, 0)
})

test('absent records acknowledged with an offset, or with no later record of their producer, are lost', () => {
  const acks = [ack('ick1', 0, 0, 0), ack('ick1', 3, 1, null), ack('ck1', 0, 0, 1)]
  const records = [{ partition: 0, offset: 1, value: 'ck1-0' }]
  const r = analyse(acks, records)
  assert.equal(r.lost, 2)
  assert.equal(r.implicitAckLosses, 0)
  // Present implicit acks are counted as before.
  const present = analyse([ack('ick1', 0, 0, null)], [{ partition: 0, offset: 0, value: 'ick1-0' }])
  assert.equal(present.lost, 0)
  assert.equal(present.acknowledgedWithoutOffset, 1)
})
