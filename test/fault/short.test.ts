/**
 * The short run of the fault-injection suite inside `npm test`: 25 s of faults (kill -9 of
 * leaders and followers, controlled restarts, isolation, link cuts, connection resets) on
 * three broker processes with acks=all, RF=3, min.insync.replicas=2, clean elections only.
 * No acknowledged record may be lost, misplaced or reordered, and the replicas must be
 * byte-identical up to the high watermark; the idempotent producers write no duplicates; the
 * history checker (`tidelog verify`) finds nothing in the run's history. Longer runs:
 * `npm run test:fault -- --seconds 300`.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { formatReport, runFaultSuite } from './suite.js'

test('fault injection, 25 s, acks=all: no acknowledged record lost', { timeout: 240000 }, async () => {
  const report = await runFaultSuite({ seconds: 25, acks: 'all', unclean: false, log: () => undefined })
  console.log(formatReport(report))
  assert.ok(report.acknowledged > 1000, `only ${report.acknowledged} records acknowledged`)
  assert.ok(Object.values(report.faults).reduce((a, b) => a + b, 0) >= 2, 'too few faults injected')
  assert.equal(report.lost, 0, `lost: ${report.lostSample.join(', ')}`)
  assert.equal(report.offsetMismatches, 0)
  assert.equal(report.orderViolations, 0)
  assert.equal(report.idempotentDuplicated, 0, 'idempotent producers wrote duplicates')
  assert.deepEqual(report.replicaProblems, [])
  const checker = report.history.report
  assert.equal(
    checker.counts.anomalies,
    0,
    `history checker (${report.history.file}): ${JSON.stringify(checker.anomalies).slice(0, 2000)}`,
  )
  assert.equal(checker.counts.acksCheckedForLoss, checker.counts.acks, 'the checker judged every ack')
  assert.equal(checker.counts.acks, report.acknowledged, 'the history holds every acknowledgement')
})
