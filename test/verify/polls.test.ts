/**
 * Jepsen's poll checks (src/verify/polls.ts) on planted histories: a consumer that jumps
 * over records (poll skip), goes back (nonmonotonic poll), and the same inside one poll; an
 * `assign` line restarts its sequence; offset gaps (markers) and aborted records are not
 * skips.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { formatVerifyReport } from '../../src/verify/format.js'
import { HistoryBuilder, onlyAnomalies } from './history-builder.js'

/** p1 writes r0..r4 to partition 0, non-transactionally. */
function written(): HistoryBuilder {
  const history = new HistoryBuilder()
  for (let i = 0; i < 5; i++) history.write('p1', 0, `r${i}`)
  return history
}

test('reading on record by record, across polls and within one, is clean', () => {
  const history = written()
  history.read('c1', 'r0', { poll: 1 }).read('c1', 'r1', { poll: 1 }).read('c1', 'r2', { poll: 2 })
  history.read('c1', 'r3').read('c1', 'r4')
  onlyAnomalies(history.check())
})

test('a consumer whose next poll starts past the next record skipped (poll-skip), with the skipped lines', () => {
  const history = written().read('c1', 'r0', { poll: 1 }).read('c1', 'r3', { poll: 2 })
  const report = history.check()
  onlyAnomalies(report, 'pollSkips')
  const [s] = report.anomalies.pollSkips
  assert.equal(s.consumer, 'c1')
  assert.equal(s.delta, 3)
  assert.equal(s.previous.line, history.line({ type: 'read', value: 'r0' }))
  assert.equal(s.next.line, history.line({ type: 'read', value: 'r3' }))
  assert.deepEqual(
    s.skipped.map((e) => [e.value, e.event.line]),
    [
      ['r1', history.line({ type: 'ack', seq: 1 })],
      ['r2', history.line({ type: 'ack', seq: 2 })],
    ],
  )
  assert.match(
    formatVerifyReport(report),
    /poll skips[^\n]*: 1\n {4}c1 in t-0: read "r0" at offset 0 \(read line \d+\), then "r3" at offset 3 \(read line \d+\): \+3 in the version order, skipping "r1" at offset 1 \(ack line \d+\), "r2"/,
  )
})

test('a consumer whose next poll starts at or before its last record went back (nonmonotonic poll)', () => {
  const history = written().read('c1', 'r0').read('c1', 'r1').read('c1', 'r1')
  const report = history.check()
  onlyAnomalies(report, 'nonmonotonicPolls')
  assert.deepEqual(
    report.anomalies.nonmonotonicPolls.map((s) => s.delta),
    [0],
  )
  // After an assign line (a rebalance, a seek), it may start anywhere.
  const reassigned = written()
    .read('c1', 'r0')
    .read('c1', 'r1')
    .assign('c1', 0)
    .read('c1', 'r0')
    .read('c1', 'r4')
  const afterAssign = reassigned.check()
  onlyAnomalies(afterAssign, 'pollSkips')
  assert.equal(afterAssign.anomalies.pollSkips[0].next.line, reassigned.line({ type: 'read', value: 'r4' }))
})

test('within one poll: a gap is an internal poll skip, a step back an internal nonmonotonic read', () => {
  const skip = written().read('c1', 'r0', { poll: 7 }).read('c1', 'r2', { poll: 7 }).check()
  onlyAnomalies(skip, 'internalPollSkips')
  assert.deepEqual(
    skip.anomalies.internalPollSkips[0].skipped.map((e) => e.value),
    ['r1'],
  )
  const back = written().read('c1', 'r1', { poll: 7 }).read('c1', 'r0', { poll: 7 }).check()
  onlyAnomalies(back, 'internalNonmonotonicPolls')
  assert.equal(back.anomalies.internalNonmonotonicPolls[0].delta, -1)
})

test('consumers are judged apart, and reads without a consumer are not judged for order', () => {
  const history = written().read('c1', 'r0').read('c2', 'r1').read('c1', 'r1')
  history.events.push({ type: 'read', topic: 't', partition: 0, offset: 4, value: 'r4' })
  onlyAnomalies(history.check())
})

test('offsets taken by markers and aborted records are not skips for a read_committed consumer', () => {
  const history = new HistoryBuilder()
    .write('p1', 0, 'a', { txn: 'T1' })
    .commit('p1', 'T1')
    .write('p1', 0, 'x', { txn: 'T2' })
    .abort('p1', 'T2')
    .write('p1', 0, 'b', { txn: 'T3' })
    .commit('p1', 'T3')
    .read('c1', 'a', { isolation: 'read_committed' })
    .read('c1', 'b', { isolation: 'read_committed' })
  onlyAnomalies(history.check())
})

test('a crash line: the next owner may read again what the crashed consumer read, a skip is still one', () => {
  // c1 read r0..r2 but committed only up to r0 before it crashed; c2 takes over from r1.
  const history = written().read('c1', 'r0').read('c1', 'r1').read('c1', 'r2')
  history.events.push({ type: 'crash', consumer: 'c1', group: 'g' })
  history.read('c2', 'r1').read('c2', 'r2').read('c2', 'r4')
  const report = history.check()
  onlyAnomalies(report, 'pollSkips')
  assert.equal(report.counts.crashes, 1)
  assert.deepEqual(
    report.anomalies.pollSkips.map((s) => s.skipped.map((e) => e.value)),
    [['r3']],
  )
  assert.match(formatVerifyReport(report), /; 1 crashed consumer\n/)
  // A crashed consumer reads nothing more: a later read of it is a malformed history.
  const after = written().read('c1', 'r0')
  after.events.push({ type: 'crash', consumer: 'c1' })
  after.read('c1', 'r1')
  const crashLine = after.line({ type: 'crash' })
  assert.throws(() => after.check(), new RegExp(`read by consumer 'c1', which crashed on line ${crashLine}`))
})
