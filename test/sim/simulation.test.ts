/**
 * The deterministic simulation in CI: a fixed set of seeds, two random ones (printed, with
 * their replay line; TIDELOG_SEEDS=1,2 pins them), byte-for-byte replay, and named seeds,
 * each asserting that its scenario happened (its trace markers, scenarios.ts), not only
 * that the run passed. Replay any of them with `npm run sim -- --seed N [flags]`.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type Mutation, runSimulation, type SimOptions, type SimResult } from '../../src/sim/world.js'
import {
  CONSUMERS_ACROSS_LEADER_CHANGE,
  COORDINATOR_FAILOVER,
  DISK_ERROR_AND_ACKS_ZERO,
  FAULTS_THEN_CONVERGED,
  FIVE_BROKERS_ONE_IMPAIRED,
  findScenario,
  IDEMPOTENT_RETRY_ON_NEW_LEADER,
  ISR_EXPANSION_ACROSS_IMAGE_CHANGE,
  LATE_WRITE_REFUSED_BY_VERIFICATION,
  LEADER_ISR_WRITE_THROUGH_LATENT_STORE,
  LEADER_LOG_DIR_OFFLINE,
  POWER_LOST_LEADER_RETURNS,
  type Scenario,
  SOLE_ISR_LEADER_RESTARTS,
  STALLED_LEADER_LOSES_LEADERSHIP,
  simFlags,
  TRUNCATED_FOLLOWER_LOSES_POWER,
  TXN_COORDINATOR_FAILOVER_MID_TRANSACTION,
  ZOMBIE_FENCED,
} from './scenarios.js'

function replay(options: SimOptions): string {
  return `replay: npm run sim -- --seed ${options.seed}${simFlags(options)}`
}

function explain(result: SimResult, options: SimOptions): string {
  return `seed ${result.seed}: ${result.violation}\n${result.trace.slice(-80).join('\n')}\n${replay(options)}`
}

/** Runs `options`; the run must pass and its trace must show every one of `scenarios`. */
async function runScenario(options: SimOptions, ...scenarios: Scenario[]): Promise<void> {
  const result = await runSimulation(options)
  assert.ok(result.ok, explain(result, options))
  for (const scenario of scenarios) {
    const lines = findScenario(result.trace, scenario)
    assert.ok(
      lines,
      `seed ${options.seed} passed without its scenario: ${scenario.what}. Its markers are not in the trace (the seed drifted off it: sweep for another one with npm run sim -- --seeds K --from S and rename the test)\n${replay(options)}`,
    )
  }
}

/**
 * Runs `options` twice: as shipped it must pass; with `mutation` (the fixed bug planted back
 * by src/sim/mutations.ts) it must fail. The strongest proof a regression seed still reaches
 * its scenario: without the fix the seed finds the bug again.
 */
async function runRegression(options: SimOptions, mutation: Mutation, failure: RegExp): Promise<void> {
  const result = await runSimulation(options)
  assert.ok(result.ok, explain(result, options))
  const mutated = await runSimulation({ ...options, mutation })
  assert.ok(
    !mutated.ok && failure.test(mutated.violation ?? ''),
    `seed ${options.seed} with the bug planted back (--mutation ${mutation}) should fail with ${failure}; it ${mutated.ok ? 'passed' : `failed otherwise: ${mutated.violation}`} (the seed drifted off its scenario: sweep for another one)\n${replay({ ...options, mutation })}`,
  )
}

/**
 * Runs `options` with `mutation` (the fixed bug planted back by src/sim/mutations.ts): it must
 * fail with `failure`, and the planted code must have run (`marker` in the trace). Used after
 * the seed's unmutated run, so a regression seed proves both that it passes with the fix and
 * that it finds the bug again without it.
 */
async function expectCaught(
  options: SimOptions,
  mutation: Mutation,
  failure: RegExp,
  marker: RegExp,
): Promise<void> {
  const mutated = await runSimulation({ ...options, mutation })
  assert.ok(
    !mutated.ok && failure.test(mutated.violation ?? ''),
    `seed ${options.seed} with the bug planted back (--mutation ${mutation}) should fail with ${failure}; it ${mutated.ok ? 'passed' : `failed otherwise: ${mutated.violation}`} (the seed drifted off its scenario: sweep for another one)\n${replay({ ...options, mutation })}`,
  )
  assert.ok(
    mutated.trace.some((line) => marker.test(line)),
    `seed ${options.seed} failed with --mutation ${mutation} but its trace has no ${marker}`,
  )
}

const FIXED_SEEDS = [1, 2, 3, 4, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]

/** TIDELOG_SEEDS=1,2,3 replaces the random seeds (to replay a CI run); two random ones otherwise. */
function randomSeeds(): number[] {
  const pinned = process.env['TIDELOG_SEEDS']
  if (pinned !== undefined && pinned.trim() !== '') {
    const seeds = pinned.split(',').map((s) => Number(s.trim()))
    for (const seed of seeds)
      if (!Number.isInteger(seed) || seed < 0)
        throw new Error(`TIDELOG_SEEDS: '${pinned}' is not a list of seeds`)
    return seeds
  }
  return [0, 1].map(() => Math.floor(Math.random() * 2 ** 31))
}

describe('deterministic simulation', () => {
  it('the same seed gives the same trace, byte for byte', async () => {
    const a = await runSimulation({ seed: 7, ticks: 10_000 })
    const b = await runSimulation({ seed: 7, ticks: 10_000 })
    assert.ok(a.trace.length > 50)
    assert.equal(a.trace.join('\n'), b.trace.join('\n'))
  })

  it("the same seed gives the same trace with tidelog's producers, consumers and group members, byte for byte", async () => {
    // The clients take the scheduler as clock and a fork of the seed as random: nothing
    // ambient may reach the trace (their timers, backoffs, broker choices, rebalances,
    // transactions, the link stalls of late writes).
    const options: SimOptions = {
      seed: 3,
      ticks: 5000,
      idempotentProducers: true,
      consumers: true,
      groups: true,
      transactions: true,
    }
    // One call site for both runs: a broker's logged error carries its stack, whose async
    // frames name the line that awaited the run.
    const runs: SimResult[] = []
    for (let i = 0; i < 2; i++) runs.push(await runSimulation(options))
    const [a, b] = runs
    assert.ok(a.ok, explain(a, options))
    assert.ok(a.trace.some((line) => / ack i\d+\.\d+ p\d+ @\d+ idempotent from broker \d+$/.test(line)))
    assert.ok(a.trace.some((line) => /consumers caught up: /.test(line)))
    assert.ok(a.trace.some((line) => /group member \d+: generation [1-9]\d*, partitions \d/.test(line)))
    assert.ok(a.trace.some((line) => /txn producer \d+: txn x\d+\.\d+ committed$/.test(line)))
    assert.ok(a.trace.some((line) => /transactions: \d+ begun, [1-9]\d* committed/.test(line)))
    assert.equal(a.trace.join('\n'), b.trace.join('\n'))
  })

  // Marker: a FAULT line, then "converged after": faults happened and the cluster healed.
  for (const seed of FIXED_SEEDS) {
    it(`seed ${seed}: invariants hold through faults and the cluster converges after healing`, async () => {
      await runScenario({ seed }, FAULTS_THEN_CONVERGED)
    })
  }

  for (const seed of randomSeeds()) {
    console.log(`simulation: random seed ${seed}; ${replay({ seed })}`)
    it(`random seed ${seed} (${replay({ seed })})`, async () => {
      await runScenario({ seed }, FAULTS_THEN_CONVERGED)
    })
  }

  it('regression (seed 36): a broker back from a power loss does not lead again in its old leader epoch', async () => {
    // Before the fix it re-registered before any controller saw it go, led p0 again in epoch 0
    // with a shorter log, and followers truncated acknowledged records to match it.
    // Markers: "crash broker 3 with power loss"; "broker 3 restarts still registered in the
    // store, leader there of p0" (what made it lead again); then a STORE line moving p0's
    // leadership away from it (its first registration fences it).
    await runScenario({ seed: 36 }, POWER_LOST_LEADER_RETURNS)
    // Planted back, the returning broker stays in the ISR with its shorter log (the HW check
    // sees it first, before a follower truncates to match it).
    await expectCaught(
      { seed: 36 },
      'registration-keeps-leaderships',
      /high watermark \d+ of leader \d+ .* exceeds ISR member \d+'s log end/,
      /MUTATION: a first registration keeps its leaderships and ISR places/,
    )
  })

  it('regression (seed 11, RF 2, min ISR 1, store stalls): a follower whose first fetch met an unknown topic id replicates once the leader knows it', async () => {
    // Before the fix the leader left a partition of an unknown topic id out of the fetch
    // session the follower's first (full) fetch opened; the follower kept it in its own
    // session and sent only empty incremental fetches: its log stayed empty and it never
    // rejoined the ISR (liveness: "not converged 60000 ms after healing").
    const options: SimOptions = { seed: 11, storeStalls: true, replicationFactor: 2, minInsyncReplicas: 1 }
    await runScenario(options, FAULTS_THEN_CONVERGED)
    await expectCaught(
      options,
      'fetch-session-drops-unknown-topic',
      /not converged/,
      /MUTATION: p\d+ of unknown topic id left out of fetch session/,
    )
  })

  it('regression (seed 105): a follower back from a power loss does not hold batches it had truncated', async () => {
    // Before the fix the truncation was not fsynced: after a power loss the removed batches
    // came back under a leader-epoch checkpoint that no longer described them, the log ended
    // inside one of the leader's batches, and every fetch failed (never rejoined the ISR).
    // Markers: "(log end of p1 on broker 1 dropped ...)" (the truncation), "crash broker 1
    // with power loss" before that process restarted, its restart, and convergence.
    await runScenario({ seed: 105 }, TRUNCATED_FOLLOWER_LOSES_POWER)
  })

  it('regression (seed 105): with the truncation fsync skipped again, the simulator finds the bug', async () => {
    // Seeds 5 and 91 found the unfsynced truncation; since the simulated broker is the real
    // Broker, 91 no longer reaches it, and since restarted brokers register at once (broker
    // incarnations) 5 did not either: in 1..308 only seed 308 reached the scenario and failed
    // with the fsync skipped, so the proof is a seed finding the bug again when planted back.
    // The bug shows as liveness (never rejoins) or as agreement below the HW, as seeds 5 and
    // 91 showed it; with KIP-966's high-watermark rule seed 308 showed the second. Since
    // followers fetch in sessions (9eebaf8) 308 drifted off it; a sweep of 1..61 found the
    // scenario in 7, 10 and 61, and only 61 fails with the fsync skipped. Since the purgatory
    // timers run on a timing wheel 61 drifted off it; a sweep of 1..120 failed only 105.
    await runRegression(
      { seed: 105 },
      'truncation-not-fsynced',
      /not converged|disagree below the high watermark/,
    )
  })

  it('regression (seed 1, 400 partitions): the leaderships of a dead broker leading over 128 partitions fail over within the store transaction limit', async () => {
    // Issue 39: the store refuses a transaction of more than 128 operations (etcd's default
    // --max-txn-ops; the embedded store has the same limit). Broker 1 crashes at 964 ms
    // leading 134 of the 400 partitions; at the end of its session the controller elects
    // new leaders for all of them, one write split into transactions within the limit.
    // With the split undone (metadata-writes-unsplit) that write is one refused
    // transaction, retried unchanged: the partitions stay led by the dead broker (and its
    // restart's registration is refused too). Each broker leads a third of the partitions
    // and the leaders drop a lagging follower from the ISR before its session ends
    // (replica.lag.time.max.ms 2000 < 3000), so it takes over 384 partitions to go past
    // 128 operations in one write.
    const options: SimOptions = { seed: 1, partitions: 400, ticks: 5000 }
    const result = await runSimulation(options)
    assert.ok(result.ok, explain(result, options))
    const movedAt = new Map<string, number>()
    for (const line of result.trace) {
      const moved = /^\s*(\d+) STORE sim-\d+: leader 1 epoch \d+ ISR [\d,]+ -> leader [23] /.exec(line)
      if (moved) movedAt.set(moved[1], (movedAt.get(moved[1]) ?? 0) + 1)
    }
    const most = Math.max(0, ...movedAt.values())
    assert.ok(
      most > 128,
      `seed 1 passed without its scenario: at most ${most} leaderships moved off broker 1 at one time, not over 128 (the seed drifted off it: sweep for another one)\n${replay(options)}`,
    )
    const mutated = await runSimulation({ ...options, mutation: 'metadata-writes-unsplit' })
    assert.ok(
      !mutated.ok &&
        /still led in the store by broker 1, which has no registration/.test(mutated.violation ?? ''),
      `seed 1 with the writes unsplit should fail on the dead broker's leaderships; it ${mutated.ok ? 'passed' : `failed otherwise: ${mutated.violation}`}\n${replay({ ...options, mutation: 'metadata-writes-unsplit' })}`,
    )
    assert.ok(mutated.trace.some((line) => /MUTATION: one metadata transaction of \d+ ops/.test(line)))
  })

  it('regression (seed 3, min.insync.replicas 1): a leader restarted alone in its ISR raises its high watermark as its session starts', async () => {
    // Issue 41: broker 1, the sole ISR member of p0 (RF 3, the ISR shrank to it), is killed
    // and restarts still registered and leader; its own registration image arrives before
    // its lease, so until d7a6978 its HW stayed at the last checkpoint (316 of 398) with
    // records acknowledged up to 395. Markers: the crash of the sole ISR member, its restart
    // still leading, convergence. With the fix undone (hw-not-raised-on-session) the
    // invariant catches it at the restart.
    const options: SimOptions = { seed: 3, minInsyncReplicas: 1 }
    await runScenario(options, SOLE_ISR_LEADER_RESTARTS)
    const mutated = await runSimulation({ ...options, mutation: 'hw-not-raised-on-session' })
    assert.ok(
      !mutated.ok && /high watermark \d+ of leader 1 .* below/.test(mutated.violation ?? ''),
      `seed 3 with the bug planted back should fail on the high watermark; it ${mutated.ok ? 'passed' : `failed otherwise: ${mutated.violation}`} (the seed drifted off its scenario: sweep for another one)\n${replay({ ...options, mutation: 'hw-not-raised-on-session' })}`,
    )
  })

  it('mutation check (RF 1): with high watermarks not raised as the store session starts the simulator finds a violating seed', async () => {
    // An ISR of one by construction: every leader killed and restarted within its session
    // leads again, and only a produce would raise its high watermark.
    let found: SimResult | null = null
    for (let seed = 1; seed <= 5 && found === null; seed++) {
      const result = await runSimulation({ seed, replicationFactor: 1, mutation: 'hw-not-raised-on-session' })
      if (!result.ok) found = result
    }
    assert.ok(found, 'no seed in 1..5 caught the high watermark left at the checkpoint')
    assert.match(found.violation ?? '', /high watermark \d+ of leader \d+ .* below/)
  })

  it('regression (seed 43, store latency 20): an unrelated image change keeps the ISR expansion in flight', async () => {
    // Before the fix Partition.updateState dropped the leader's pending ISR on every image
    // change: the HW moved over the committed ISR while a follower below it was being added,
    // then the expansion committed with that follower under the HW.
    // Markers: "(leader L of pN: ISR expansion to ... in flight across an unrelated store
    // change)" (invariants.ts), then the STORE line committing that ISR.
    // Seed 33 found it; with the fix planted back it no longer fails (an unchanged partition
    // state reaches updateState only when the registered brokers change, since ReplicaManager
    // applies changed states only). Swept 1..54 with store latency 20 and the mutation: 12,
    // 20 and 31 fail on the HW above a member being added, and pass with the fix with the
    // markers; 31 fails soonest. Since the broker's per-request timers run on a timing wheel
    // 31 drifted off the scenario; the same sweep of 1..60 fails 12, 44 and 58: 12 soonest.
    // With the served record written by range as well, 12 passes with the mutation; swept
    // 1..140 again: 43, 67, 71, 74, 120 and 129 fail, 43 taken.
    const options: SimOptions = { seed: 43, storeLatencyMaxMs: 20 }
    await runScenario(options, ISR_EXPANSION_ACROSS_IMAGE_CHANGE)
    await expectCaught(
      options,
      'pending-isr-dropped-on-image-change',
      /high watermark \d+ of leader \d+ .* exceeds ISR member \d+'s log end/,
      /MUTATION: ISR change in flight for p\d+ dropped by an unrelated image change/,
    )
  })

  it("regression (seed 3, store latency 20): a leader's own ISR write commits through the latent store and the cluster converges", async () => {
    // A simulator bug: a store trip drawn at 0 ms overtook earlier ones, so a broker's
    // metadata skipped a watch revision (its own committed ISR write) and the leader kept
    // its ISR change in flight forever (liveness). The trips' order is kept in
    // sim-broker.ts and not traced; the markers show the path that hung was taken: a STORE
    // line where a leader's ISR grows in its own leadership (a leader's write), then
    // "converged after".
    await runScenario({ seed: 3, storeLatencyMaxMs: 20 }, LEADER_ISR_WRITE_THROUGH_LATENT_STORE)
  })

  // Seeds 1 and 3 no longer stall a leader's store link (their fault schedule drifted): 8 and 9 do.
  // Since restarted brokers register at once (broker incarnations) 2 no longer does; 14 does.
  for (const seed of [4, 8, 9, 14]) {
    it(`store stalls, seed ${seed}: a leader cut off from the store loses its leadership without harm`, async () => {
      // Markers: "FAULT store link of broker N stalls", a STORE line moving a leadership away
      // from N before "HEAL store link of broker N", then convergence.
      await runScenario({ seed, storeStalls: true }, STALLED_LEADER_LOSES_LEADERSHIP)
    })
  }

  // Seed 10 no longer loses an idempotent answer; 12 does. Since the simulated broker is the
  // real Broker, seed 5 no longer does either; 1 does (chosen by its markers only). Since
  // restarted brokers register at once, 12 no longer does; 2 does (by its markers only).
  // Since --idempotent runs tidelog's own Producer (issue 37), 1 and 2 no longer send a batch
  // again to a new leader that acknowledges it; 3 and 4 do (swept over 1..10, by markers only).
  for (const seed of [3, 4, 8]) {
    it(`idempotent producers, seed ${seed}: no batch committed twice when a retry lands on a new leader`, async () => {
      // tidelog's Producer (acks=all, idempotent, five requests in flight) over the simulated
      // network. Markers (the world's tap on Produce requests): "idempotent batch pP producer
      // I epoch E sequence S sent again, to broker B (first to broker A)", then the same batch
      // "acknowledged by broker B". The duplicate check runs on every committed batch.
      await runScenario({ seed, idempotentProducers: true }, IDEMPOTENT_RETRY_ON_NEW_LEADER)
    })
  }

  for (const seed of [1, 2, 3, 4]) {
    it(`consumers, seed ${seed}: tidelog's Consumer returns committed records only, in order, as committed, and every acknowledged one, across leader changes`, async () => {
      // Markers: a STORE line moving a leadership of topic sim, then "consumers caught up".
      await runScenario({ seed, consumers: true }, CONSUMERS_ACROSS_LEADER_CHANGE)
    })
  }

  for (const seed of [1, 2, 3]) {
    it(`5 brokers, seed ${seed}: RF 3 placed by the controller, consumers, one impaired broker at a time`, async () => {
      // Markers: "FAULT crash broker N" or "FAULT partition broker N", its restart or heal,
      // convergence, "consumers caught up".
      await runScenario({ seed, brokers: 5, consumers: true }, FIVE_BROKERS_ONE_IMPAIRED)
    })
  }

  // Since restarted brokers register at once, 27 no longer takes a leader's log dir offline; 1 does.
  for (const seed of [1, 3, 4]) {
    it(`disk errors, seed ${seed}: an EIO on a write or an fsync acknowledges nothing unwritten, loses nothing, and leadership leaves the failed broker`, async () => {
      // In these seeds a leader's log dir goes offline: the broker stops itself, controlled,
      // as server/broker.ts does (3 and 27 fail the leadership check without that stop).
      // Markers: "DISK ERROR on broker N: ...; leader in the store of pP", "broker N stopped
      // itself (every log dir offline)", then a STORE line moving a leadership away from N.
      await runScenario({ seed, diskErrors: true, consumers: true }, LEADER_LOG_DIR_OFFLINE)
    })
  }

  // Seed 2 no longer fires a disk error; 3 does.
  for (const seed of [1, 3]) {
    it(`everything new at once, seed ${seed}: 5 brokers, consumers, disk errors, acks=0 over the network`, async () => {
      // Markers: "DISK ERROR on broker N", "acks=0: K of M writes committed" with K > 0,
      // "consumers caught up".
      await runScenario(
        { seed, brokers: 5, consumers: true, diskErrors: true, acksZero: true },
        DISK_ERROR_AND_ACKS_ZERO,
      )
    })
  }

  // Seeds whose group coordinator moves (chosen by their markers): 1 and 2 plain, 87 with
  // store stalls, 3 with disk errors (4 did until restarted brokers registered at once).
  for (const [seed, extra] of [
    [1, {}],
    [2, {}],
    [87, { storeStalls: true }],
    [3, { diskErrors: true, consumers: true }],
  ] as const) {
    it(`consumer group, seed ${seed}${Object.keys(extra).length > 0 ? ` (${Object.keys(extra).join(', ')})` : ''}: acknowledged offset commits survive coordinator failover, one coordinator per epoch, no partition assigned twice in a generation`, async () => {
      // Seed 87 with store stalls: a deposed coordinator (stalled store link) answers
      // OffsetFetch from its cache; only the current coordinator's answers are held to (a).
      // Markers: "group sim-group in pG", a STORE line moving __consumer_offsets-G's
      // leadership (the coordinator fails over), convergence.
      await runScenario({ seed, groups: true, ...extra }, COORDINATOR_FAILOVER)
    })
  }

  // KIP-848 members (--consumer-protocol). Seed 2's coordinator moves (its markers).
  it('consumer protocol, seed 2: member epochs never go backwards across coordinator failover, acknowledged commits survive, no partition held by two members', async () => {
    await runScenario({ seed: 2, groups: true, consumerProtocol: true }, COORDINATOR_FAILOVER)
  })

  it('mutation check (groups, seed 1): with the range assignor handing a partition to two members the simulator fails', async () => {
    // Planted in tidelog's client (the group leader's assignor); the coordinator passes the
    // assignment on, and the members' onPartitionsAssigned with groupMetadata() report it to (c).
    const options: SimOptions = { seed: 1, groups: true, mutation: 'range-assigns-twice' }
    const result = await runSimulation(options)
    assert.ok(
      !result.ok &&
        /group generation \d+: \S+ assigned to member \d+ and to member \d+/.test(result.violation ?? ''),
      `${result.ok ? 'passed' : `failed otherwise: ${result.violation}`}\n${replay(options)}`,
    )
  })

  // Seed 304 (--idempotent --acks0 --consumer-protocol) once showed an OffsetFetch answer
  // overtaken by a later fetch's (the check had failed it, "went backwards"). It drifted off
  // with issue 38's changes of 2026-12-07 and sweeps of 1..900 (and 1..400 with
  // --consumer-protocol alone) found no seed that shows it again: the check's rule is tested
  // on hand-made answers in invariants-group.test.ts instead.

  // Seed 3 drifted off its transaction coordinator's move mid-transaction with issue 38's
  // changes of 2026-12-07 (metadata deltas, follower-session news, the HW at a refused ISR
  // change); seed 6 was chosen by a sweep of 1..40 for both scenarios and the six checkpoints.
  // With tidelog's transactional client (issue 37) seed 6 lost the transaction coordinator's
  // move; seed 1 has both (a sweep of 1..10: seeds 1, 4, 5, 7, 8 and 10 have the move).
  it('compaction (groups and transactions), seed 1: the internal topics are compacted while both coordinators fail over; every cleaner checkpoint stays at or below its log end', async () => {
    // 4 KiB segments and a 500 ms cleaner backoff for __consumer_offsets and
    // __transaction_state: the new coordinators load the compacted logs, and the group and
    // transaction checks hold across it. Invariants.checkCleanerCheckpoints runs after every
    // event; every broker checkpointed its six internal logs.
    const options: SimOptions = { seed: 1, groups: true, transactions: true, compaction: true }
    const result = await runSimulation(options)
    assert.ok(result.ok, explain(result, options))
    assert.equal(result.stats.cleanerCheckpoints, 6, 'the cleaner checkpointed every internal log')
    for (const scenario of [COORDINATOR_FAILOVER, TXN_COORDINATOR_FAILOVER_MID_TRANSACTION])
      assert.ok(
        findScenario(result.trace, scenario),
        `seed 1 drifted off: ${scenario.what}\n${replay(options)}`,
      )
  })

  // Transactions (--transactions): transactional producers, read_committed consumers and
  // group offsets in transactions, over the wire. Seed 1 fails with the marker and offsets
  // mutations, seed 10 with skipped KIP-890 verification (a regression test: it passes
  // unmutated). Re-swept after ISR changes were batched (3 -> 6, 7 -> 4 with store stalls, 4 -> 10)
  // and after followers fetch in sessions (6 -> 5, 4 -> 5 with store stalls), and after
  // replicas of deleted topics were retired at once and reads checked CRCs (5 -> 7, 5 -> 3
  // with store stalls; swept over seeds 1-40, chosen by their markers only), and after
  // transaction.version 2 became the default (3 -> 9 with store stalls: seed 3's late write
  // now meets NOT_ENOUGH_REPLICAS; swept over seeds 1-24, chosen by their markers only).
  // With tidelog's transactional client (issue 37) both seeds still show their scenarios
  // (swept over 1-60 and, with store stalls, 1-40). Since the served record is written by
  // range, 9 with store stalls lost its late write (9 -> 2, the first of a sweep from 1).
  for (const [seed, extra, scenarios] of [
    [7, {}, [TXN_COORDINATOR_FAILOVER_MID_TRANSACTION, ZOMBIE_FENCED]],
    [2, { storeStalls: true }, [ZOMBIE_FENCED, LATE_WRITE_REFUSED_BY_VERIFICATION]],
  ] as const) {
    it(`transactions, seed ${seed}${Object.keys(extra).length > 0 ? ` (${Object.keys(extra).join(', ')})` : ''}: ${scenarios.map((s) => s.what).join('; ')}`, async () => {
      // Markers: "transactional id sim-txn-K in __transaction_state-P", "txn xK.N begins", a
      // STORE line moving __transaction_state-P before xK.N ends, then "txn xK.N committed";
      // "instance I ... pauses", "zombie instance I ... resumes txn T", "txn T ends without
      // commit: fenced"; "... link of instance I to broker B holds its bytes ...", then "late
      // produce of sim-txn-K-I ... to broker B: pP error 47|48" (refused after the abort).
      // Each with the end checks' line.
      await runScenario({ seed, transactions: true, ...extra }, ...scenarios)
    })
  }

  // A deposed leader appending a fenced epoch's late write (DEPOSED_LEADER_APPENDS_FENCED_EPOCH,
  // seed 805 and then seed 86 with store stalls): seed 805 once failed "fenced epoch wrote
  // again" against leader 1 of p0, whose stalled store link hid that p0 had moved; it skipped
  // KIP-890's verification (the old epoch's transaction still open there, the markers went to
  // the new leader) and appended, as Kafka does, then truncated the batch away. The check now
  // holds only leaders the store names to refusing such a batch, and a deposed leader's one to
  // never being committed (txn-checker.ts, DeposedFencedAppends, unit-tested in
  // txn-checker.test.ts). With tidelog's transactional client (issue 37) no seed of 1..120
  // with store stalls reaches the scenario any more (a late write now needs the client's
  // request timeout, 3.5 s, to pass while the leadership moves): swept, none kept.

  it('regression (transactions, seed 10): with KIP-890 verification skipped, a late write lands after its abort and a read_committed consumer returns an aborted record', async () => {
    // The stalled produce of an aborted transaction lands after the ABORT marker and opens a
    // transaction in its partition with the old epoch (seed 10 at 7.2 s: "fenced epoch wrote
    // again: leader 1 (epoch 0) appended a data batch of producer 1000 epoch 0 ..."; seeds 1,
    // 4, 6 and 9 of 1..10 fail with it too).
    await runRegression(
      { seed: 10, transactions: true },
      'txn-skips-verification',
      /aborted|open|fenced epoch|committed in part/,
    )
  })

  // Seed 4 for the marker mutation: seed 1 fails it too, but only at the end (85 s simulated).
  for (const [mutation, seed, failure] of [
    ['txn-marker-skips-partition', 4, /knows aborted|still open|committed in part/],
    ['txn-offsets-on-abort', 1, /group of txn producer \d+: .*never asked to commit/],
    [
      'read-committed-ignores-transactions',
      1,
      /read_committed consumer .* (?:at or above its last stable offset|which its producer knows aborted)/,
    ],
  ] as const) {
    it(`mutation check (transactions, seed ${seed}): with ${mutation} the simulator fails`, async () => {
      const options: SimOptions = { seed, transactions: true, mutation }
      const result = await runSimulation(options)
      assert.ok(
        !result.ok && failure.test(result.violation ?? ''),
        `${result.ok ? 'passed' : `failed otherwise: ${result.violation}`}\n${replay(options)}`,
      )
    })
  }

  it('mutation check: with consumers reading up to the log end the simulator finds a violating seed', async () => {
    // Planted in the broker (Partition.read serves a read_uncommitted fetch up to the log end);
    // tidelog's Consumer fetches and the tap on the Fetch answers catches it.
    let found: SimResult | null = null
    for (let seed = 1; seed <= 10 && found === null; seed++) {
      const result = await runSimulation({ seed, consumers: true, mutation: 'consumer-reads-log-end' })
      if (!result.ok) found = result
    }
    assert.ok(found, 'no seed in 1..10 caught a consumer reading past the high watermark')
    assert.match(found.violation ?? '', /consumer/)
  })

  it('mutation check: with the ISR written without compare-and-set the simulator finds a violating seed (store stalls)', async () => {
    // A leader whose store link stalls loses its leadership (session expiry or a preferred
    // election) without knowing; its ISR proposals land on the newer leadership's state.
    let found: SimResult | null = null
    for (let seed = 1; seed <= 30 && found === null; seed++) {
      const result = await runSimulation({ seed, mutation: 'isr-without-cas', storeStalls: true })
      if (!result.ok) found = result
    }
    assert.ok(found, 'no seed in 1..30 caught the ISR write without compare-and-set')
  })

  it('mutation check: with followers truncating to their high watermark the simulator finds a violating seed', async () => {
    let found: SimResult | null = null
    for (let seed = 1; seed <= 20 && found === null; seed++) {
      const result = await runSimulation({ seed, mutation: 'hw-truncation' })
      if (!result.ok) found = result
    }
    assert.ok(found, 'no seed in 1..20 caught the high-watermark truncation')
  })

  it('mutation check: with elections outside the ISR the simulator finds a violating seed', async () => {
    // Since KIP-966 a replica that left an ISR below min ISR is elected cleanly (ELR), so an
    // unclean election needs a replica outside both: in 1..30 none happens (20 s of runs,
    // not repeated here), 31 catches it.
    let found: SimResult | null = null
    for (let seed = 28; seed <= 40 && found === null; seed++) {
      const result = await runSimulation({ seed, mutation: 'unclean-election' })
      if (!result.ok) found = result
    }
    assert.ok(found, 'no seed in 28..40 caught the unclean election')
    assert.match(found.violation ?? '', /disagree|lost/)
  })
})
