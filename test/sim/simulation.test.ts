/**
 * The deterministic simulation in CI: a fixed set of seeds, two random ones (their seeds are
 * printed), byte-for-byte replay, and named regression seeds for bugs it found.
 * Replay any of them with `npm run sim -- --seed N`.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { runSimulation, type SimResult } from '../../src/sim/world.js'

function explain(result: SimResult, flags = ''): string {
  return `seed ${result.seed}: ${result.violation}\n${result.trace.slice(-80).join('\n')}\nreplay: npm run sim -- --seed ${result.seed}${flags}`
}

const FIXED_SEEDS = [1, 2, 3, 4, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]

describe('deterministic simulation', () => {
  it('the same seed gives the same trace, byte for byte', async () => {
    const a = await runSimulation({ seed: 7, ticks: 10_000 })
    const b = await runSimulation({ seed: 7, ticks: 10_000 })
    assert.ok(a.trace.length > 50)
    assert.equal(a.trace.join('\n'), b.trace.join('\n'))
  })

  for (const seed of FIXED_SEEDS) {
    it(`seed ${seed}: invariants hold through faults and the cluster converges after healing`, async () => {
      const result = await runSimulation({ seed })
      assert.ok(result.ok, explain(result))
    })
  }

  for (let i = 0; i < 2; i++) {
    const seed = Math.floor(Math.random() * 2 ** 31)
    it(`random seed ${seed}`, async () => {
      const result = await runSimulation({ seed })
      assert.ok(result.ok, explain(result))
    })
  }

  it('regression (seed 36): a broker back from a power loss does not lead again in its old leader epoch', async () => {
    // Before the fix it re-registered before any controller saw it go, led p0 again in epoch 0
    // with a shorter log, and followers truncated acknowledged records to match it.
    const result = await runSimulation({ seed: 36 })
    assert.ok(result.ok, explain(result))
  })

  it('regression (seed 5): a follower back from a power loss does not hold batches it had truncated', async () => {
    // Before the fix the truncation was not fsynced: after a power loss the removed batches
    // came back under a leader-epoch checkpoint that no longer described them, the log ended
    // inside one of the leader's batches, and every fetch failed (never rejoined the ISR).
    const result = await runSimulation({ seed: 5 })
    assert.ok(result.ok, explain(result))
  })

  it('regression (seed 91): no replica holds a different batch below its high watermark after a power loss', async () => {
    const result = await runSimulation({ seed: 91 })
    assert.ok(result.ok, explain(result))
  })

  it('regression (seed 33, store latency 20): an unrelated image change keeps the ISR expansion in flight', async () => {
    // Before the fix Partition.updateState dropped the leader's pending ISR on every image
    // change: the HW moved over the committed ISR while a follower below it was being added,
    // then the expansion committed with that follower under the HW.
    const result = await runSimulation({ seed: 33, storeLatencyMaxMs: 20 })
    assert.ok(result.ok, explain(result, ' --store-latency 20'))
  })

  it('regression (seed 3, store latency 20): store answers and watch events stay in order', async () => {
    // A simulator bug: a store trip drawn at 0 ms overtook earlier ones, so a broker's
    // metadata skipped a watch revision (its own committed ISR write) and the leader kept
    // its ISR change in flight forever (liveness).
    const result = await runSimulation({ seed: 3, storeLatencyMaxMs: 20 })
    assert.ok(result.ok, explain(result, ' --store-latency 20'))
  })

  for (const seed of [1, 2, 3, 4]) {
    it(`store stalls, seed ${seed}: a leader cut off from the store loses its leadership without harm`, async () => {
      const result = await runSimulation({ seed, storeStalls: true })
      assert.ok(result.ok, explain(result, ' --store-stalls'))
    })
  }

  for (const seed of [5, 8, 10]) {
    it(`idempotent producers, seed ${seed}: no batch committed twice, whatever the retries`, async () => {
      // These seeds find duplicates when followers do not track producer state (checked by
      // hand, see the README): retries after a lost answer land on a new leader.
      const result = await runSimulation({ seed, idempotentProducers: true })
      assert.ok(result.ok, explain(result, ' --idempotent'))
    })
  }

  for (const seed of [1, 2, 3, 4]) {
    it(`consumers, seed ${seed}: a consumer receives committed batches only, as committed, across leader changes`, async () => {
      const result = await runSimulation({ seed, consumers: true })
      assert.ok(result.ok, explain(result, ' --consumers'))
    })
  }

  for (const seed of [1, 2, 3]) {
    it(`5 brokers, seed ${seed}: RF 3 placed by the controller, consumers, one impaired broker at a time`, async () => {
      const result = await runSimulation({ seed, brokers: 5, consumers: true })
      assert.ok(result.ok, explain(result, ' --brokers 5 --consumers'))
    })
  }

  for (const seed of [3, 4, 27]) {
    it(`disk errors, seed ${seed}: an EIO on a write or an fsync acknowledges nothing unwritten, loses nothing, and leadership leaves the failed broker`, async () => {
      // In these seeds a leader's log dir goes offline: the broker stops itself, controlled,
      // as server/broker.ts does (3 and 27 fail the leadership check without that stop).
      const result = await runSimulation({ seed, diskErrors: true, consumers: true })
      assert.ok(result.ok, explain(result, ' --disk-errors --consumers'))
    })
  }

  for (const seed of [1, 2]) {
    it(`everything new at once, seed ${seed}: 5 brokers, consumers, disk errors, acks=0 over the network`, async () => {
      const result = await runSimulation({
        seed,
        brokers: 5,
        consumers: true,
        diskErrors: true,
        acksZero: true,
      })
      assert.ok(result.ok, explain(result, ' --brokers 5 --consumers --disk-errors --acks0'))
    })
  }

  for (const [seed, extra] of [
    [1, {}],
    [2, {}],
    [87, { storeStalls: true }],
    [3, { diskErrors: true, consumers: true }],
  ] as const) {
    it(`consumer group, seed ${seed}${Object.keys(extra).length > 0 ? ` (${Object.keys(extra).join(', ')})` : ''}: acknowledged offset commits survive coordinator failover, one coordinator per epoch, no partition assigned twice in a generation`, async () => {
      // Seed 87 with store stalls: a deposed coordinator (stalled store link) answers
      // OffsetFetch from its cache; only the current coordinator's answers are held to (a).
      const result = await runSimulation({ seed, groups: true, ...extra })
      const flags = Object.keys(extra)
        .map(
          (k) =>
            ({ storeStalls: ' --store-stalls', diskErrors: ' --disk-errors', consumers: ' --consumers' })[k],
        )
        .join('')
      assert.ok(result.ok, explain(result, ` --groups${flags}`))
    })
  }

  it('mutation check: with consumers reading up to the log end the simulator finds a violating seed', async () => {
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
    let found: SimResult | null = null
    for (let seed = 1; seed <= 30 && found === null; seed++) {
      const result = await runSimulation({ seed, mutation: 'unclean-election' })
      if (!result.ok) found = result
    }
    assert.ok(found, 'no seed in 1..30 caught the unclean election')
    assert.match(found.violation ?? '', /disagree|lost/)
  })
})
