/**
 * Issue 38: a stall of the event loop long enough to endanger the store session is logged
 * and counted; the checks' own timer running on time is not.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Logger } from '../../src/common/logger.js'
import { EventLoopStallMonitor } from '../../src/server/event-loop-stall-monitor.js'
import { ManualClock } from '../storage/helpers.js'

const SESSION_TIMEOUT_MS = 3000

function recordingLogger(): { logger: Logger; warnings: { stalledMs: number }[] } {
  const warnings: { stalledMs: number }[] = []
  const logger = { warn: (fields: { stalledMs: number }) => warnings.push(fields) } as unknown as Logger
  return { logger, warnings }
}

test('a stall over a third of the session timeout is logged and counted once; timers on time are not', () => {
  const clock = new ManualClock()
  const { logger, warnings } = recordingLogger()
  const monitor = new EventLoopStallMonitor(clock, logger, SESSION_TIMEOUT_MS)
  monitor.start()
  // Ticks on time (every 300 ms), and a late one within the bound (900 ms late).
  for (let i = 0; i < 20; i++) clock.advance(300)
  clock.advance(1200)
  assert.equal(warnings.length, 0)
  assert.deepEqual(monitor.counters, { stalls: 0, longestStallMs: 0 })
  // Paused for 5 s: the timer due 300 ms after the last check fires 4.7 s late.
  clock.advance(5000)
  assert.equal(warnings.length, 1)
  assert.equal(warnings[0]?.stalledMs, 4700)
  assert.deepEqual(monitor.counters, { stalls: 1, longestStallMs: 4700 })
  for (let i = 0; i < 10; i++) clock.advance(300)
  assert.equal(warnings.length, 1)
  monitor.stop()
  clock.advance(10_000)
  assert.equal(warnings.length, 1, 'stopped')
})
