/**
 * The polling wait (wait.ts): what a test reports when a wait runs out is what was awaited
 * and the condition's last error, so a timeout shows the assertion that kept failing.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { WaitTimeoutError, waitForValue, waitUntil } from './wait.js'

test('at its deadline a wait names what it awaited and carries the last assertion as its cause', async () => {
  let polls = 0
  const failure = await waitUntil(
    'the answer',
    100,
    () => {
      polls++
      assert.equal(polls, -1, `poll ${polls}`)
      return true
    },
    5,
  ).then(
    () => assert.fail('the wait should time out'),
    (error: unknown) => error,
  )
  assert.ok(failure instanceof WaitTimeoutError)
  assert.match(failure.message, /^timed out after 100 ms waiting for the answer \(last poll threw\): /)
  // The last poll's assertion, with its own message, not the first one's.
  assert.ok(failure.cause instanceof assert.AssertionError)
  assert.match(failure.message, new RegExp(`poll ${polls}\\b`))
  assert.equal((failure.cause as Error).message.split('\n')[0], `poll ${polls}`)
})

test('a condition that threw and then returned false still reports what it threw', async () => {
  let polls = 0
  const failure = await waitUntil(
    'a settled state',
    100,
    () => {
      polls++
      if (polls === 1) throw new Error('broker restarting')
      return false
    },
    5,
  ).catch((error: unknown) => error)
  assert.ok(failure instanceof WaitTimeoutError)
  assert.match(failure.message, /last poll returned false; an earlier poll threw\): broker restarting/)
})

test('a condition that never threw times out with what was awaited only', async () => {
  await assert.rejects(
    waitUntil('nothing', 50, () => false, 5),
    {
      name: 'WaitTimeoutError',
      message: 'timed out after 50 ms waiting for nothing',
    },
  )
})

test('a wait returns as soon as the condition holds; waitForValue returns the value', async () => {
  let polls = 0
  await waitUntil('the third poll', 10_000, () => ++polls === 3, 1)
  assert.equal(polls, 3)
  let probes = 0
  assert.equal(await waitForValue('a value', 10_000, () => (++probes < 2 ? undefined : 'ready'), 1), 'ready')
})
