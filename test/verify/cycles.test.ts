/**
 * Dependency cycles (src/verify/cycles.ts) on planted histories: two transactions that each
 * read the other's record form a G1c cycle through wr edges, reported with every edge's
 * lines; two whose writes interleave in opposite orders in two partitions form a G0 write
 * cycle, listed as allowed (Kafka does not isolate concurrent transactions' writes).
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

test('a cycle of write order and a read (ww then wr) is G1c too', () => {
  // T1 precedes T2 in partition 0, and T1 read T2's record in partition 1.
  const history = new HistoryBuilder()
    .write('p1', 0, 'a', { txn: 'T1' })
    .write('p2', 0, 'b', { txn: 'T2' })
    .write('p2', 1, 'c', { txn: 'T2' })
    .read('c1', 'c', { producer: 'p1', txn: 'T1' })
    .commit('p2', 'T2')
    .commit('p1', 'T1')
  const report = history.check()
  onlyAnomalies(report, 'circularFlows')
  assert.deepEqual(report.anomalies.circularFlows[0].edges.map((e) => e.kind).sort(), ['wr', 'ww'])
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
