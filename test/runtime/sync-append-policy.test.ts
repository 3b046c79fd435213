import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type SyncAppendOptions, SyncAppendPolicy } from '../../src/runtime/sync-append-policy.js'

const options: SyncAppendOptions = {
  maxBytes: 1024,
  stallMs: 2,
  pauseMs: 100,
  maxPauseMs: 350,
  calmMs: 1_000,
}

function policyAt(): { policy: SyncAppendPolicy; clock: { nowMs: number } } {
  const clock = { nowMs: 0 }
  return { policy: new SyncAppendPolicy(options, () => clock.nowMs), clock }
}

/** One synchronous write at the clock's time that takes `tookMs`; false if the policy refused it. */
function write(policy: SyncAppendPolicy, clock: { nowMs: number }, tookMs: number, bytes = 10): boolean {
  const started = policy.startSync(bytes)
  if (started === undefined) return false
  clock.nowMs += tookMs
  policy.finishSync(started)
  return true
}

describe('SyncAppendPolicy', () => {
  it('writes small appends synchronously and large ones through the pool', () => {
    const { policy, clock } = policyAt()
    assert.equal(write(policy, clock, 0.01, 1024), true)
    assert.equal(write(policy, clock, 0.01, 1025), false)
    assert.equal(policy.stalls, 0)
  })

  it('a write at the stall threshold is not a stall; one above it pauses synchronous writes', () => {
    const { policy, clock } = policyAt()
    assert.equal(write(policy, clock, 2), true)
    assert.equal(policy.stalls, 0)
    assert.equal(write(policy, clock, 2.5), true)
    assert.equal(policy.stalls, 1)
    assert.equal(policy.pausedUntil, 4.5 + 100)
    clock.nowMs = 104.4
    assert.equal(write(policy, clock, 0), false, 'still paused')
    clock.nowMs = 104.5
    assert.equal(write(policy, clock, 0), true, 'the pause is over')
  })

  it('doubles the pause for stalls that follow one another, up to maxPauseMs, and forgets them once calm', () => {
    const { policy, clock } = policyAt()
    const pauses: number[] = []
    for (let i = 0; i < 4; i++) {
      assert.equal(write(policy, clock, 3), true)
      pauses.push(policy.pausedUntil - clock.nowMs)
      clock.nowMs = policy.pausedUntil
    }
    assert.deepEqual(pauses, [100, 200, 350, 350])
    // calmMs of synchronous writes after the last pause: the next stall pauses for pauseMs again.
    clock.nowMs += 1_000
    assert.equal(write(policy, clock, 3), true)
    assert.equal(policy.pausedUntil - clock.nowMs, 100)
  })

  it('refuses options where a pause could not end or not grow', () => {
    assert.throws(() => new SyncAppendPolicy({ ...options, pauseMs: 0 }, () => 0), RangeError)
    assert.throws(() => new SyncAppendPolicy({ ...options, maxPauseMs: 50 }, () => 0), RangeError)
  })
})
