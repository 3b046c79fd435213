/**
 * Issue 16: the fault-injection suite (suite.ts) with every connection over SASL_SSL, the
 * brokers' replication included: one SASL_SSL listener per broker (PLAIN, a throwaway CA),
 * reached only through its proxy, so the faults cut TLS sessions mid-record and every
 * reconnection, a follower's among them, repeats the handshake and the authentication.
 * acks=all, RF=3, min.insync.replicas=2, clean elections only: nothing acknowledged may be
 * lost, misplaced or reordered, and the replicas must be byte-identical up to the high
 * watermark. Longer runs: `npm run test:fault -- --security SASL_SSL --seconds 300`.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { allowErrorLogs } from '../helpers/log-guard.js'
import { assertNothingLost, type Fault, formatReport, runFaultSuite } from './suite.js'

/** A follower's fetch session is cut first (its reconnection re-authenticates), then a leader dies. */
const FIRST_FAULTS: readonly Fault[] = ['reset', 'kill-leader']
const SEED = Number(process.env['TIDELOG_SEEDS']?.split(',')[0] || Math.floor(Math.random() * 1_000_000))
assert.ok(
  Number.isInteger(SEED) && SEED >= 0,
  `TIDELOG_SEEDS: '${process.env['TIDELOG_SEEDS']}' is not a seed`,
)
const REPLAY = `replay: TIDELOG_SEEDS=${SEED} node --test dist/test/fault/sasl-ssl.test.js (or npm run test:fault -- --security SASL_SSL --seconds 20 --seed ${SEED} --faults ${FIRST_FAULTS.join(',')})`
console.log(`fault suite over SASL_SSL: seed ${SEED}; ${REPLAY}`)

test(`fault injection over SASL_SSL, 20 s, acks=all, seed ${SEED}: connections reset and a leader killed -9, no acknowledged record lost`, {
  timeout: 240000,
}, async () => {
  allowErrorLogs(/metadata store session lost/)
  const report = await runFaultSuite({
    seconds: 20,
    acks: 'all',
    unclean: false,
    seed: SEED,
    faults: FIRST_FAULTS,
    security: 'SASL_SSL',
    log: () => undefined,
  })
  console.log(formatReport(report))
  const [reset, kill] = report.events
  assert.equal(reset?.fault, 'reset', REPLAY)
  assert.equal(kill?.fault, 'kill-leader', REPLAY)
  assert.ok(kill.leadershipsMoved > 0, `no leadership moved after broker ${kill.target}'s kill -9\n${REPLAY}`)
  assertNothingLost(report, REPLAY)
})
