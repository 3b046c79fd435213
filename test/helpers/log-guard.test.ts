/** The log guard fails a test on an error-level broker line it did not allow, and only then. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { run } from './cluster.js'

const FIXTURE = fileURLToPath(new URL('./log-guard-fixture.js', import.meta.url))

async function runFixture(mode: string): Promise<{ code: number; output: string }> {
  // Its own test run, not a subtest of this one: without the runner's context variable.
  const result = await run('/usr/bin/env', [
    '-u',
    'NODE_TEST_CONTEXT',
    `LOG_GUARD_FIXTURE=${mode}`,
    'TIDELOG_LOG_LEVEL=silent',
    process.execPath,
    '--test',
    FIXTURE,
  ])
  return { code: result.code, output: result.stdout + result.stderr }
}

test('an unexpected error line of an in-process broker fails the test, naming the line', async () => {
  const { code, output } = await runFixture('unexpected')
  assert.notEqual(code, 0, output)
  assert.match(output, /1 unexpected error-level broker log line\(s\) during this test/)
  assert.match(output, /broker-0: \{"level":50.*"msg":"disk on fire"/)
})

test('an error line of a broker process fails the test too', async () => {
  const { code, output } = await runFixture('process')
  assert.notEqual(code, 0, output)
  assert.match(output, /broker 7 \(pid 1\): \{"level":60/)
})

test('an allowed error line passes, and warnings never count', async () => {
  const { code, output } = await runFixture('allowed')
  assert.equal(code, 0, output)
})
