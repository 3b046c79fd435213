/**
 * The share group in the simulation (`--share`, src/sim/share-workload.ts): tidelog's own
 * producer and share consumers against three real brokers under the world's faults, checked
 * by src/sim/invariants-share.ts. Named seeds pass and show their scenario; each planted
 * share bug (src/sim/mutations-share.ts) is caught by the seed a sweep found for it
 * (`npm run sim -- --seeds K --from 1 --share --mutation M`), or, where no seed reaches it
 * any more, by a test that builds its scenario (share-read-before-dropped-write: see seed 202).
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type Mutation, runSimulation, type SimOptions, type SimResult } from '../../src/sim/world.js'
import { findScenario, type Scenario, simFlags } from './scenarios.js'

function explain(result: SimResult, options: SimOptions): string {
  return `seed ${result.seed}: ${result.violation}\n${result.trace.slice(-60).join('\n')}\nreplay: npm run sim -- --seed ${options.seed}${simFlags(options)}`
}

/** A member crashed, one stalled past its locks, a leader moved, and every acknowledged record settled. */
const SHARE_THROUGH_FAULTS: Scenario = {
  what: 'share members crash and stall while leaders move, then every acknowledged record settles',
  steps: [
    { marker: /share member \d+ stalls \d+ ms holding/ },
    { marker: /share member \d+ crashes; member \d+ starts/ },
    { marker: /STORE sim-\d+: leader (\d+) epoch \d+ ISR [\d,]+ -> leader (?!\1 )\d+ / },
    {
      marker:
        /share: \d+ records acknowledged to the producer, all settled after \d+ ms; \d+ deliveries \([1-9]\d* again\), [1-9]\d* accepted, [1-9]\d* released, [1-9]\d* rejected, [1-9]\d* delivered 3 times/,
    },
  ],
}

async function passes(options: SimOptions): Promise<SimResult> {
  const result = await runSimulation(options)
  assert.ok(result.ok, explain(result, options))
  assert.ok(
    findScenario(result.trace, SHARE_THROUGH_FAULTS),
    `seed ${options.seed} passed without its scenario: ${SHARE_THROUGH_FAULTS.what} (sweep for another seed)\nreplay: npm run sim -- --seed ${options.seed}${simFlags(options)}`,
  )
  return result
}

async function caught(options: SimOptions, mutation: Mutation, failure: RegExp): Promise<void> {
  const mutated = await runSimulation({ ...options, mutation })
  assert.ok(
    !mutated.ok && failure.test(mutated.violation ?? ''),
    `seed ${options.seed} with --mutation ${mutation} should fail with ${failure}; it ${mutated.ok ? 'passed' : `failed otherwise: ${mutated.violation}`}\nreplay: npm run sim -- --seed ${options.seed}${simFlags({ ...options, mutation })}`,
  )
  assert.ok(
    mutated.trace.some((line) => line.includes('MUTATION: ')),
    `seed ${options.seed} failed with --mutation ${mutation} but the planted code never ran`,
  )
}

describe('share groups in the simulation', () => {
  it('seed 1 passes through faults', async () => {
    await passes({ seed: 1, share: true })
  })

  it('a seed replays byte for byte (the real clients draw only from the seed and the scheduler)', async () => {
    const first = await runSimulation({ seed: 1, share: true, ticks: 5000 })
    const again = await runSimulation({ seed: 1, share: true, ticks: 5000 })
    assert.ok(first.ok, explain(first, { seed: 1, share: true, ticks: 5000 }))
    assert.ok(first.trace.some((line) => line.includes('share member')))
    assert.equal(again.trace.join('\n'), first.trace.join('\n'))
  })

  // Found at seed 7 (src/sim/README.md, "Bug found"): a new leader's state read answered
  // before the old leader's write of an ACCEPT committed, and that write then answered as done,
  // so the record was delivered again. Since failed writes roll back (share-partition.ts) seed 7
  // no longer reaches it; a sweep of 1..40 with the operations unordered again failed seeds 3
  // and 15 with an ACCEPTed record delivered again. Since share groups assign at most once per
  // group.share.assignment.interval.ms the timings moved: the same sweep fails seeds 5 and 23;
  // since a share-partition made again waits for the dropped one's last write, only 23; since
  // timers run on a timing wheel 23 fails at p1 offset 203 instead of 235.
  it("seed 23: the share coordinator runs each key's operations in order", async () => {
    const options: SimOptions = { seed: 23, share: true }
    await passes(options)
    await caught(options, 'share-state-ops-unordered', /p1 offset 203, ACCEPTed .* delivered again/)
  })

  // Found at seed 202 (src/sim/README.md, "Bugs found"): a share-partition dropped when its
  // last session ended still had an ACCEPT's write on its way (retried at the moved share
  // coordinator); the next fetch made a new one whose state read was answered first, and the
  // accepted record was delivered again with delivery count 1. Since timers run on a timing
  // wheel seed 202 no longer reaches that scenario (no replacement seed found): the bug's
  // regression test is test/server/share/share-dropped-write.test.ts, which builds the scenario
  // step by step and fails with share-read-before-dropped-write planted. The seed still passes.
  it("seed 202: a share-partition made again reads its state after the dropped one's last write", async () => {
    await passes({ seed: 202, share: true })
  })

  // Found at seed 4 with --store-stalls (src/sim/README.md, "Share groups"): broker 3's store
  // link stalled and its session expired; the store moved sim-1 to broker 1 (epoch 2), whose
  // member ACCEPTed p1 offsets 79-98; broker 3, still leading epoch 1 in its own eyes, delivered
  // them again from the state it held, as Kafka's deposed leader would until it learns (its
  // writes are fenced). Since the served record is written by range, seed 4 no longer stalls
  // that way; a sweep of 1..158 found the same scenario at seed 158 (broker 2 deposed, p1
  // offsets from 298 delivered again after broker 1's member ACCEPTed them). The invariant exempts such a delivery only from a broker whose leader
  // epoch was below the store's all through the fetch; a current leader's stays a violation
  // (test/sim/invariants-share.test.ts builds both cases by hand).
  it("seed 158 with --store-stalls: a deposed leader's deliveries are counted, not violations", async () => {
    const options: SimOptions = { seed: 158, share: true, storeStalls: true }
    const result = await runSimulation(options)
    assert.ok(result.ok, explain(result, options))
    const deposed = findScenario(result.trace, {
      what: 'a stalled leader deposed by the store delivers records the new leader settled',
      steps: [
        { marker: /FAULT store link of broker 2 stalls/ },
        { marker: /STORE sim-1: leader 2 epoch 1 .* -> leader 1 epoch 2 / },
        { marker: /share: deposed broker 2 delivered p1 offset \d+ again \(ACCEPTed, broker 1 answered/ },
        { marker: /share: .* [1-9]\d* settled ones again by a deposed leader/ },
      ],
    })
    assert.ok(
      deposed,
      `seed 158 passed without its scenario (sweep for another seed)\nreplay: npm run sim -- --seed 158${simFlags(options)}`,
    )
  })

  // The exemption above hides no current leader's double delivery under stalls: at seed 117
  // broker 1's store link stalls at 1016 ms and the store moves sim-1 to broker 2 (epoch 1);
  // an ACCEPT broker 1 answered before, unwritten with the mutation, is delivered again by
  // broker 2, the current leader, and that stays a violation. (Seed 15 until the served record
  // was written by range; swept 1..200 with the mutation and --store-stalls for a run where
  // the settling broker's link stalled and the leadership moved from it to the redeliverer:
  // 24, 30, 117, 122, 132; 117 is the first where the ACCEPT came before the stall.)
  it('seed 117 with --store-stalls: the new leader delivering a record its deposed predecessor settled is caught', async () => {
    await caught(
      { seed: 117, share: true, storeStalls: true },
      'share-ack-answered-unwritten',
      /p1 offset 0, ACCEPTed \(broker 1 answered at 436 ms\), delivered again by broker 2/,
    )
  })

  it('an acknowledgement answered before its state is written is caught (seed 1)', async () => {
    await caught(
      { seed: 1, share: true },
      'share-ack-answered-unwritten',
      /(ACCEPT|REJECT)ed .* delivered again/,
    )
  })

  it('a release at the delivery count limit making the record available again is caught (seed 1)', async () => {
    await caught(
      { seed: 1, share: true },
      'share-release-ignores-limit',
      /delivered p\d offset \d+ with delivery count 4, above the limit 3/,
    )
  })
})
