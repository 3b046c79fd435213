/**
 * The short run of the fault-injection suite inside `npm test`: 25 s of faults (kill -9 of
 * leaders and followers, controlled restarts, isolation, link cuts, connection resets) on
 * three broker processes with acks=all, RF=3, min.insync.replicas=2, clean elections only.
 * No acknowledged record may be lost, misplaced or reordered, and the replicas must be
 * byte-identical up to the high watermark; the idempotent producers write no duplicates; the
 * history checker (`tidelog verify`) finds nothing in the run's history. Longer runs:
 * `npm run test:fault -- --seconds 300`.
 *
 * The seed picks the faults after the first ones (random, printed with its replay line;
 * TIDELOG_SEEDS=N pins it). The run is on wall time, so a seed repeats the fault choices,
 * not the timing.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { allowErrorLogs } from '../helpers/log-guard.js'
import { assertNothingLost, type Fault, formatReport, runFaultSuite } from './suite.js'

function seed(): number {
  const pinned = process.env['TIDELOG_SEEDS']
  if (pinned === undefined || pinned.trim() === '') return Math.floor(Math.random() * 1_000_000)
  const value = Number(pinned.split(',')[0])
  if (!Number.isInteger(value) || value < 0)
    throw new Error(`TIDELOG_SEEDS: '${pinned}' is not a list of seeds`)
  return value
}

/** The scenario the test's name promises, injected first; random faults fill the rest of the 25 s. */
const FIRST_FAULTS: readonly Fault[] = ['kill-leader', 'strand-leader']
const SEED = seed()
const REPLAY = `replay: TIDELOG_SEEDS=${SEED} node --test dist/test/fault/short.test.js (or npm run test:fault -- --seconds 25 --seed ${SEED} --faults ${FIRST_FAULTS.join(',')})`
console.log(`fault suite: seed ${SEED}; ${REPLAY}`)

test(`fault injection, 25 s, acks=all, seed ${SEED}: a leader killed -9 and a leader stranded, no acknowledged record lost`, {
  timeout: 240000,
}, async () => {
  // Broker processes killed -9, stopped or cut off lose their store session, and a
  // stranded leader's ISR shrinks to itself: their lines saying so are the point.
  allowErrorLogs(/metadata store session lost/)
  const report = await runFaultSuite({
    seconds: 25,
    acks: 'all',
    unclean: false,
    seed: SEED,
    faults: FIRST_FAULTS,
    log: () => undefined,
  })
  console.log(formatReport(report))
  const [kill, strand] = report.events
  assert.equal(kill?.fault, 'kill-leader', REPLAY)
  assert.ok(kill.ledPartitions > 0, `the killed broker ${kill.target} led no partition\n${REPLAY}`)
  assert.ok(kill.leadershipsMoved > 0, `no leadership moved after broker ${kill.target}'s kill -9\n${REPLAY}`)
  assert.equal(strand?.fault, 'strand-leader', REPLAY)
  assert.ok(strand.ledPartitions > 0, `the stranded broker ${strand.target} led no partition\n${REPLAY}`)
  assertNothingLost(report, REPLAY)
})
