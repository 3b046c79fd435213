/**
 * The transaction checks (src/verify/transactions.ts) on planted histories: a clean
 * transactional history passes (aborted records unread by read_committed, markers' offset
 * gaps, a consume-transform-produce transaction), and each anomaly is found with its lines:
 * aborted reads (G1a), reads of an open transaction's records, a transaction reading its
 * own records, and intermediate reads (G1b).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { formatVerifyReport } from '../../src/verify/format.js'
import { HistoryFormatError, parseHistory } from '../../src/verify/history.js'
import { HistoryBuilder, onlyAnomalies } from './history-builder.js'

const RC = { isolation: 'read_committed' }

/**
 * p1 commits T1 (a, b in partition 0) and aborts T2 (c); p2 commits T3 (d in 0, e in 1);
 * c1 reads read_committed everything committed; p3's T4 reads a and b as part of it and
 * writes f to partition 1.
 */
function clean(): HistoryBuilder {
  return new HistoryBuilder()
    .begin('p1', 'T1')
    .write('p1', 0, 'a', { txn: 'T1' })
    .write('p1', 0, 'b', { txn: 'T1' })
    .commit('p1', 'T1')
    .write('p1', 0, 'c', { txn: 'T2' })
    .abort('p1', 'T2')
    .write('p2', 0, 'd', { txn: 'T3' })
    .write('p2', 1, 'e', { txn: 'T3' })
    .commit('p2', 'T3')
    .assign('c1', 0)
    .assign('c1', 1)
    .read('c1', 'a', { ...RC, poll: 1 })
    .read('c1', 'b', { ...RC, poll: 1 })
    .read('c1', 'd', { ...RC, poll: 2 })
    .read('c1', 'e', { ...RC, poll: 2 })
    .covered(0)
    .covered(1)
    .read('c3', 'a', { ...RC, producer: 'p3', txn: 'T4' })
    .read('c3', 'b', { ...RC, producer: 'p3', txn: 'T4' })
    .write('p3', 1, 'f', { txn: 'T4' })
    .commit('p3', 'T4')
}

test('a clean transactional history passes: aborted records unread, marker gaps skipped over', () => {
  const report = clean().check()
  onlyAnomalies(report)
  assert.deepEqual(report.counts.transactions, { committed: 3, aborted: 1, undecided: 0 })
  assert.deepEqual(report.notChecked, [])
  assert.equal(
    report.counts.acksNotCheckedForLoss,
    2,
    'the aborted c and f (after the coverage) are not judged',
  )
  assert.deepEqual(
    report.unseen.map((u) => u.send.value),
    ['f'],
    'an aborted record is not unseen: nobody should see it',
  )
  assert.match(
    formatVerifyReport(report),
    /4 transactions \(3 committed, 1 aborted, 0 undecided\)[\s\S]*OK: no anomalies$/,
  )
})

test('a read_committed read of an aborted transaction is an aborted read (G1a); read_uncommitted may', () => {
  const history = clean().read('c1', 'c', RC).read('c2', 'c', { isolation: 'read_uncommitted' })
  const report = history.check()
  // Aborted records are outside the version order, so c1's read of c is not a poll-order finding too.
  onlyAnomalies(report, 'abortedReads')
  assert.equal(report.anomalies.abortedReads.length, 1)
  const [r] = report.anomalies.abortedReads
  assert.equal(r.read.line, history.line({ type: 'read', consumer: 'c1', value: 'c' }))
  assert.equal(r.send.line, history.line({ type: 'send', value: 'c' }))
  assert.equal(r.abort.line, history.line({ type: 'abort', txn: 'T2' }))
  assert.match(
    formatVerifyReport(report),
    /aborted reads \(G1a[^\n]*: 1\n {4}p1 seq 2 "c" \(sent line \d+\) in transaction T2, aborted \(abort line \d+\): read at t-0@3 \(read line \d+\)/,
  )
})

test("a read_committed read of a transaction's record while it was still open is an uncommitted read", () => {
  const history = clean()
    .write('p1', 0, 'g', { txn: 'T5' })
    .read('c1', 'g', RC)
    .write('p1', 0, 'h', { txn: 'T5' })
    .commit('p1', 'T5')
  const report = history.check()
  onlyAnomalies(report, 'uncommittedReads')
  const [r] = report.anomalies.uncommittedReads
  assert.equal(r.reason, 'still-open')
  assert.equal(r.read.line, history.line({ type: 'read', value: 'g' }))
  assert.equal(r.laterSend?.line, history.line({ type: 'send', value: 'h' }))
  assert.match(formatVerifyReport(report), /while the transaction was open \(it sent again on line \d+\)/)

  // Read after the last send (the commit's markers already out): no finding.
  const after = clean()
    .write('p1', 0, 'g', { txn: 'T5' })
    .write('p1', 0, 'h', { txn: 'T5' })
    .read('c1', 'g', RC)
    .commit('p1', 'T5')
  onlyAnomalies(after.check())
})

test('a transaction reading its own record under read_committed read it uncommitted', () => {
  const history = clean()
    .write('p4', 1, 'own', { txn: 'T6' })
    .read('c4', 'own', { ...RC, producer: 'p4', txn: 'T6' })
    .commit('p4', 'T6')
  const report = history.check()
  onlyAnomalies(report, 'uncommittedReads')
  assert.deepEqual(
    report.anomalies.uncommittedReads.map((r) => [r.reason, r.read.line]),
    [['own-transaction', history.line({ type: 'read', value: 'own' })]],
  )
})

test("a transaction whose last read of a partition is another's non-final write read an intermediate state (G1b)", () => {
  const history = new HistoryBuilder()
    .write('p1', 0, 'x1', { txn: 'T1' })
    .write('p1', 0, 'x2', { txn: 'T1' })
    .commit('p1', 'T1')
    .read('c2', 'x1', { producer: 'p2', txn: 'T2' })
    .write('p2', 1, 'y', { txn: 'T2' })
    .commit('p2', 'T2')
  const report = history.check()
  onlyAnomalies(report, 'intermediateReads')
  const [r] = report.anomalies.intermediateReads
  assert.equal(
    `${r.reader.producer}/${r.reader.txn} <- ${r.writer.producer}/${r.writer.txn}`,
    'p2/T2 <- p1/T1',
  )
  assert.equal(r.read.line, history.line({ type: 'read', value: 'x1' }))
  assert.equal(r.laterSend.line, history.line({ type: 'send', value: 'x2' }))

  // Reading on to x2, its final write there: no finding.
  const whole = new HistoryBuilder()
    .write('p1', 0, 'x1', { txn: 'T1' })
    .write('p1', 0, 'x2', { txn: 'T1' })
    .commit('p1', 'T1')
    .read('c2', 'x1', { producer: 'p2', txn: 'T2' })
    .read('c2', 'x2', { producer: 'p2', txn: 'T2' })
    .write('p2', 1, 'y', { txn: 'T2' })
    .commit('p2', 'T2')
  onlyAnomalies(whole.check())
})

test("an aborted or undecided transaction's acknowledged record is not judged lost", () => {
  const history = new HistoryBuilder()
    .write('p1', 0, 'kept', { txn: 'T1' })
    .commit('p1', 'T1')
    .write('p1', 0, 'dropped', { txn: 'T2' })
    .abort('p1', 'T2')
    .write('p2', 0, 'unknown', { txn: 'T3' })
    .read('c1', 'kept', RC)
    .covered(0)
  const report = history.check()
  onlyAnomalies(report)
  assert.deepEqual(report.counts.transactions, { committed: 1, aborted: 1, undecided: 1 })
  assert.equal(report.counts.acksNotCheckedForLoss, 2)
})

function errorsOf(text: string): string[] {
  try {
    parseHistory(text)
  } catch (error) {
    assert.ok(error instanceof HistoryFormatError)
    return error.errors.map((e) => `${e.line}: ${e.message}`)
  }
  assert.fail('the history parsed')
}

test('transaction events that contradict each other are malformed, with their lines', () => {
  const lines = [
    { type: 'begin', producer: 'p1', txn: 'T1' },
    { type: 'send', producer: 'p1', seq: 0, topic: 't', value: 'a', txn: 'T1' },
    { type: 'begin', producer: 'p1', txn: 'T1' },
    { type: 'commit', producer: 'p1', txn: 'T1' },
    { type: 'send', producer: 'p1', seq: 1, topic: 't', value: 'b', txn: 'T1' },
    { type: 'abort', producer: 'p1', txn: 'T1' },
    { type: 'read', topic: 't', partition: 0, offset: 0, value: 'a', txn: 'T1' },
    { type: 'read', topic: 't', partition: 0, offset: 0, value: 'a', isolation: 'serializable' },
    { type: 'send', producer: 'p2', seq: 0, topic: 't', value: 'c', txn: 'T9' },
    { type: 'begin', producer: 'p2', txn: 'T9' },
    { type: 'assign', topic: 't', partition: 0 },
  ].map((e) => JSON.stringify(e))
  const errors = errorsOf(lines.join('\n'))
  const expected: [number, RegExp][] = [
    [3, /transaction 'T1' of producer 'p1' already began on line 1/],
    [5, /sent in transaction 'T1' of producer 'p1', which ended on line 4 \(commit\)/],
    [6, /already ended \(commit, line 4\)/],
    [7, /both 'producer' and 'txn', or neither/],
    [8, /'isolation' must be "read_committed" or "read_uncommitted"/],
    [10, /had events before this begin/],
    [11, /'consumer' must be a non-empty string/],
  ]
  assert.equal(errors.length, expected.length, errors.join('\n'))
  expected.forEach(([line, pattern], i) => {
    assert.ok(errors[i].startsWith(`${line}: `), errors[i])
    assert.match(errors[i], pattern)
  })
})
