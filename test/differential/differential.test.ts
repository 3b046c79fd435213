/**
 * Issue 32, item 3: differential tests against Apache Kafka 4.4. The fixed sequences
 * (sequences.ts) and a few generated ones (generator.ts) go to one tidelog broker and one
 * Kafka 4.4 node (the reference broker, started once for the file); the answers, decoded
 * and normalised, are compared field by field (harness.ts). A difference not listed in
 * known-differences.ts fails its test, printed as path, tidelog's value, Kafka's value; a
 * listed difference the fixed set no longer meets fails the last test, so the list shrinks
 * as tidelog is fixed. Recorded client sessions (session.ts, sessions/*.jsonl) replay the same
 * way. `npm run test:differential -- --seeds N` runs a long random sweep.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type Brokers, startBrokers } from './brokers.js'
import { generatedSequence } from './generator.js'
import { type Difference, formatDifference, runSequence, type Sequence } from './harness.js'
import { KNOWN_DIFFERENCES, type KnownDifference, knownDifference } from './known-differences.js'
import { FIXED_SEQUENCES } from './sequences.js'
import { recordedSession, recordedSessionNames } from './session.js'

/** The generated sequences CI runs: a few seeds, short, so that the file stays near a minute. */
const CI_SEEDS = [1, 2, 3]
const CI_STEPS = 40

describe('differential: tidelog against Kafka 4.4, request by request', { timeout: 300_000 }, () => {
  let brokers: Brokers
  const met = new Set<KnownDifference>()

  before(async () => {
    brokers = await startBrokers()
  })

  after(async () => {
    await brokers?.stop()
  })

  async function check(sequence: Sequence): Promise<void> {
    const result = await runSequence(sequence, brokers.tidelog, brokers.kafka)
    const unknown: Difference[] = []
    for (const d of result.differences) {
      const known = knownDifference(d)
      if (known) met.add(known)
      else unknown.push(d)
    }
    assert.ok(result.steps > 0, `${sequence.name}: no step compared`)
    assert.deepEqual(
      unknown.map(formatDifference),
      [],
      `${sequence.name}: ${unknown.length} differences from Kafka 4.4 not in known-differences.ts`,
    )
  }

  for (const sequence of FIXED_SEQUENCES) it(`fixed: ${sequence.name}`, () => check(sequence))

  for (const seed of CI_SEEDS)
    it(`generated: seed ${seed}, ${CI_STEPS} steps`, () => check(generatedSequence(seed, CI_STEPS)))

  // Built when the test runs: a session's timestamps move by the time since its recording.
  for (const name of recordedSessionNames()) it(`recorded: ${name}`, () => check(recordedSession(name)))

  it('every known difference of the fixed set is still met', () => {
    const stale = KNOWN_DIFFERENCES.filter((k) => !k.sweepOnly && !met.has(k)).map(
      (k) => `${k.api} ${k.path}: ${k.why}`,
    )
    assert.deepEqual(stale, [], 'known differences no longer seen: remove them from known-differences.ts')
  })
})
