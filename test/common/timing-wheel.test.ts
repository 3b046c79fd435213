import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { Clock, TimerHandle } from '../../src/common/clock.js'
import { TimingWheelClock } from '../../src/common/timing-wheel.js'
import { ManualClock } from '../helpers/manual-clock.js'

/**
 * A clock whose timers run only when the test says: an underlying timer that fires late.
 * `fireAll` runs every timer set so far, then those of no delay they set in turn.
 */
class LateClock implements Clock {
  timeMs = 0
  private timers: { callback: () => void; delayMs: number; cancelled: boolean }[] = []
  nowMs(): number {
    return this.timeMs
  }
  monotonicMs(): number {
    return this.timeMs
  }
  setTimeout(callback: () => void, delayMs: number): TimerHandle {
    const timer = { callback, delayMs, cancelled: false }
    this.timers.push(timer)
    return { cancel: () => (timer.cancelled = true) }
  }
  fireAll(): void {
    for (let round = 0; ; round++) {
      const ready = this.timers.filter((t) => round === 0 || t.delayMs === 0)
      if (ready.length === 0) return
      this.timers = this.timers.filter((t) => !ready.includes(t))
      for (const timer of ready) if (!timer.cancelled) timer.callback()
    }
  }
}

/** A small deterministic generator (the test must replay exactly). */
function lcg(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0
    return state / 2 ** 32
  }
}

describe('TimingWheelClock', () => {
  it('fires in deadline order, equal deadlines in the order set, each at its deadline', () => {
    const clock = new ManualClock()
    const wheel = new TimingWheelClock(clock)
    const fired: [string, number][] = []
    for (const [name, delayMs] of [
      ['a', 50],
      ['b', 10],
      ['c', 30],
      ['d', 10],
      ['e', 0],
    ] as const)
      wheel.setTimeout(() => fired.push([name, clock.monotonicMs()]), delayMs)
    clock.advance(100)
    assert.deepEqual(fired, [
      ['e', 0],
      ['b', 10],
      ['d', 10],
      ['c', 30],
      ['a', 50],
    ])
  })

  it('never runs a callback inside setTimeout, even with a delay of 0', () => {
    const clock = new ManualClock()
    const wheel = new TimingWheelClock(clock)
    let ran = false
    const handle = wheel.setTimeout(() => {
      ran = true
      handle.cancel()
    }, 0)
    assert.equal(ran, false)
    clock.advance(0)
    assert.equal(ran, true)
  })

  it('fires exactly when Node-style timers on the same clock would, over random adds, cancels and advances', () => {
    for (const seed of [1, 2, 3, 42, 1234]) {
      const random = lcg(seed)
      const clock = new ManualClock()
      const wheel = new TimingWheelClock(clock, { tickMs: 1, wheelSize: 8 })
      const viaWheel: string[] = []
      const viaClock: string[] = []
      const handles: [TimerHandle, TimerHandle][] = []
      for (let step = 0; step < 3_000; step++) {
        const action = random()
        if (action < 0.5) {
          // Delays across every level of an 8-bucket wheel: 1 ms to 8^5 ms.
          const delayMs = Math.floor(8 ** (random() * 5) * random())
          const id = `${step}`
          handles.push([
            wheel.setTimeout(() => viaWheel.push(`${id}@${clock.monotonicMs()}`), delayMs),
            clock.setTimeout(() => viaClock.push(`${id}@${clock.monotonicMs()}`), delayMs),
          ])
        } else if (action < 0.7 && handles.length > 0) {
          const [a, b] = handles.splice(Math.floor(random() * handles.length), 1)[0]
          a.cancel()
          b.cancel()
        } else {
          clock.advance(Math.floor(random() * random() * 5_000))
        }
      }
      clock.advance(8 ** 5)
      assert.ok(viaClock.length > 500, `seed ${seed}: the model fired ${viaClock.length}`)
      assert.deepEqual(viaWheel, viaClock, `seed ${seed}`)
      assert.equal(wheel.pendingTimers, 0)
    }
  })

  it('fires no earlier than the delay and at most one tick late with a coarse tick', () => {
    const random = lcg(7)
    const clock = new ManualClock()
    const tickMs = 10
    const wheel = new TimingWheelClock(clock, { tickMs, wheelSize: 4 })
    let checked = 0
    for (let i = 0; i < 2_000; i++) {
      const delayMs = random() * 5_000
      const deadlineMs = clock.monotonicMs() + delayMs
      wheel.setTimeout(() => {
        const lateMs = clock.monotonicMs() - deadlineMs
        assert.ok(lateMs >= 0, `fired ${-lateMs} ms early`)
        assert.ok(lateMs < tickMs, `fired ${lateMs} ms late`)
        checked++
      }, delayMs)
      if (i % 10 === 0) clock.advance(random() * 100)
    }
    clock.advance(10_000)
    assert.equal(checked, 2_000)
  })

  it('keeps one underlying timer however many are set, and none once all are cancelled', () => {
    const clock = new ManualClock()
    const wheel = new TimingWheelClock(clock)
    const handles = Array.from({ length: 1_000 }, (_, i) =>
      wheel.setTimeout(() => assert.fail('cancelled'), 500 + i),
    )
    assert.equal(clock.pendingTimers, 1)
    assert.equal(wheel.pendingTimers, 1_000)
    for (const handle of handles) handle.cancel()
    assert.equal(wheel.pendingTimers, 0)
    clock.advance(2_000)
    assert.equal(clock.pendingTimers, 0)
  })

  it('moves a far deadline down from the overflow wheels and fires it on time', () => {
    const clock = new ManualClock()
    const wheel = new TimingWheelClock(clock, { tickMs: 1, wheelSize: 4 })
    const fired: number[] = []
    // 4^7 ms: seven wheels up.
    for (const delayMs of [16_384, 16_383, 5, 70_000])
      wheel.setTimeout(() => fired.push(clock.monotonicMs()), delayMs)
    clock.advance(100_000)
    assert.deepEqual(fired, [5, 16_383, 16_384, 70_000])
  })

  it('after a long idle gap and a late underlying timer, fires what is due in order and nothing early', () => {
    const clock = new LateClock()
    const wheel = new TimingWheelClock(clock, { tickMs: 1, wheelSize: 4 })
    const fired: string[] = []
    wheel.setTimeout(() => fired.push(`a@${clock.timeMs}`), 30_000)
    wheel.setTimeout(() => fired.push(`b@${clock.timeMs}`), 10)
    clock.timeMs = 50_000
    // Set while the wheel's time is behind (its due buckets not yet flushed).
    wheel.setTimeout(() => fired.push(`c@${clock.timeMs}`), 5)
    wheel.setTimeout(() => fired.push(`d@${clock.timeMs}`), 100_000)
    clock.fireAll()
    assert.deepEqual(fired, ['b@50000', 'a@50000'])
    clock.timeMs = 50_004
    clock.fireAll()
    assert.deepEqual(fired, ['b@50000', 'a@50000'], 'c is not due before 50,005')
    clock.timeMs = 50_005
    clock.fireAll()
    clock.timeMs = 149_999
    clock.fireAll()
    assert.deepEqual(fired, ['b@50000', 'a@50000', 'c@50005'])
    clock.timeMs = 1_000_000
    clock.fireAll()
    assert.deepEqual(fired, ['b@50000', 'a@50000', 'c@50005', 'd@1000000'])
  })

  it('takes timers set and cancelled from inside a callback, in the same batch too', () => {
    const clock = new ManualClock()
    const wheel = new TimingWheelClock(clock)
    const fired: string[] = []
    let rounds = 0
    const periodic = (): void => {
      fired.push(`tick@${clock.monotonicMs()}`)
      if (++rounds < 5) wheel.setTimeout(periodic, 10)
    }
    wheel.setTimeout(periodic, 10)
    // Same deadline: the first cancels the second, which must not run.
    const second: { handle?: TimerHandle } = {}
    wheel.setTimeout(() => {
      fired.push('first@20')
      second.handle?.cancel()
      wheel.setTimeout(() => fired.push(`zero@${clock.monotonicMs()}`), 0)
    }, 20)
    second.handle = wheel.setTimeout(() => fired.push('second'), 20)
    clock.advance(100)
    // At 20 ms, the timer set at 0 ms before the one set at 10 ms, as Node orders them.
    assert.deepEqual(fired, ['tick@10', 'first@20', 'tick@20', 'zero@20', 'tick@30', 'tick@40', 'tick@50'])
  })

  it('runs the rest of a batch when one callback throws', () => {
    const clock = new ManualClock()
    const wheel = new TimingWheelClock(clock)
    const fired: number[] = []
    wheel.setTimeout(() => {
      throw new Error('boom')
    }, 5)
    wheel.setTimeout(() => fired.push(clock.monotonicMs()), 5)
    wheel.setTimeout(() => fired.push(clock.monotonicMs()), 9)
    assert.throws(() => clock.advance(5), /boom/)
    clock.advance(10)
    assert.deepEqual(fired, [5, 9])
  })

  it('lets the promise jobs of one callback run before the next, as Node timers do', async () => {
    const clock = new ManualClock()
    const wheel = new TimingWheelClock(clock)
    const order: string[] = []
    wheel.setTimeout(() => {
      order.push('first')
      Promise.resolve().then(() => order.push('first job'))
    }, 5)
    wheel.setTimeout(() => order.push('second'), 5)
    await clock.tick(5)
    assert.deepEqual(order, ['first', 'first job', 'second'])
  })
})
