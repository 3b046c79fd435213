/**
 * Dependency cycles (src/verify/cycles.ts) on planted histories: two transactions that each
 * read the other's record form a G1c cycle through wr edges, reported with every edge's
 * lines; two whose writes interleave in opposite orders in two partitions form a G0 write
 * cycle, and a cycle through a read that needs write order to close is not G1c: both listed
 * as allowed (Kafka does not isolate concurrent transactions' writes).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { txnName } from '../../src/verify/cycles.js'
import { formatVerifyReport } from '../../src/verify/format.js'
import { HistoryBuilder, onlyAnomalies } from './history-builder.js'

test('two transactions that each read the other are a G1c cycle, each edge with its lines', () => {
  const history = new HistoryBuilder()
    .write('p1', 0, 'a', { txn: 'T1' })
    .write('p2', 1, 'b', { txn: 'T2' })
    .read('c1', 'b', { producer: 'p1', txn: 'T1' })
    .read('c2', 'a', { producer: 'p2', txn: 'T2' })
    .commit('p1', 'T1')
    .commit('p2', 'T2')
  const report = history.check()
  onlyAnomalies(report, 'circularFlows')
  const [cycle] = report.anomalies.circularFlows
  assert.equal(cycle.kind, 'G1c')
  const edges = cycle.edges.map(
    (e) => `${txnName(e.from)} -${e.kind}-> ${txnName(e.to)} @${e.first.line},${e.second.line}`,
  )
  const sendA = history.line({ type: 'send', value: 'a' })
  const sendB = history.line({ type: 'send', value: 'b' })
  const readA = history.line({ type: 'read', value: 'a' })
  const readB = history.line({ type: 'read', value: 'b' })
  assert.deepEqual(edges.sort(), [
    `p1/T1 -wr-> p2/T2 @${sendA},${readA}`,
    `p2/T2 -wr-> p1/T1 @${sendB},${readB}`,
  ])
  assert.match(formatVerifyReport(report), /circular information flow[^\n]*: 1\n {4}G1c: p\d\/T\d -wr-> /)

  // Either transaction aborted: no cycle among committed ones.
  const aborted = new HistoryBuilder()
    .write('p1', 0, 'a', { txn: 'T1' })
    .write('p2', 1, 'b', { txn: 'T2' })
    .read('c1', 'b', { producer: 'p1', txn: 'T1' })
    .read('c2', 'a', { producer: 'p2', txn: 'T2' })
    .commit('p1', 'T1')
    .abort('p2', 'T2')
  onlyAnomalies(aborted.check())
})

test('a cycle of write order and a read (ww then wr) is allowed: writes are not isolated', () => {
  // T1 precedes T2 in partition 0, and T1 read T2's committed record in partition 1: T1
  // wrote partition 0 before T2 did, then read T2's record once T2 committed, as a correct
  // Kafka allows.
  const history = new HistoryBuilder()
    .write('p1', 0, 'a', { txn: 'T1' })
    .write('p2', 0, 'b', { txn: 'T2' })
    .write('p2', 1, 'c', { txn: 'T2' })
    .commit('p2', 'T2')
    .read('c1', 'c', { producer: 'p1', txn: 'T1' })
    .commit('p1', 'T1')
  const report = history.check()
  onlyAnomalies(report)
  assert.equal(report.expected.cyclesThroughWrites.length, 1)
  const [cycle] = report.expected.cyclesThroughWrites
  assert.deepEqual(cycle.edges.map((e) => e.kind).sort(), ['wr', 'ww'])
  assert.match(
    formatVerifyReport(report),
    /allowed: 1 cycle through a read closed by write order[^\n]*\n {4}G1c: /,
  )
})

test('a read cycle beside write order is G1c, listed once as the anomaly', () => {
  // T1 and T2 read each other, and T1 also precedes T2 in partition 0.
  const history = new HistoryBuilder()
    .write('p1', 0, 'a', { txn: 'T1' })
    .write('p2', 0, 'b', { txn: 'T2' })
    .write('p1', 1, 'c', { txn: 'T1' })
    .write('p2', 2, 'd', { txn: 'T2' })
    .read('c1', 'd', { producer: 'p1', txn: 'T1' })
    .read('c2', 'c', { producer: 'p2', txn: 'T2' })
    .commit('p1', 'T1')
    .commit('p2', 'T2')
  const report = history.check()
  onlyAnomalies(report, 'circularFlows')
  assert.deepEqual(
    report.anomalies.circularFlows[0].edges.map((e) => e.kind),
    ['wr', 'wr'],
  )
  assert.equal(report.expected.cyclesThroughWrites.length, 0)
})

test('transactions whose writes interleave in opposite orders are a G0 write cycle, allowed', () => {
  const history = new HistoryBuilder()
    .write('p1', 0, 'a0', { txn: 'T1' })
    .write('p2', 0, 'b0', { txn: 'T2' })
    .write('p2', 1, 'b1', { txn: 'T2' })
    .write('p1', 1, 'a1', { txn: 'T1' })
    .commit('p1', 'T1')
    .commit('p2', 'T2')
  const report = history.check()
  onlyAnomalies(report)
  assert.equal(report.expected.writeCycles.length, 1)
  const [cycle] = report.expected.writeCycles
  assert.equal(cycle.kind, 'G0')
  assert.deepEqual(cycle.edges.map((e) => [e.kind, e.partition]).sort(), [
    ['ww', 0],
    ['ww', 1],
  ])
  assert.match(formatVerifyReport(report), /allowed: 1 write cycle \(G0[^\n]*\n {4}G0: /)
})
