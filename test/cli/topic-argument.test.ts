/**
 * Issue 18 item 6: one rule for naming the topic in every command that takes --topic
 * (topics, produce, consume, groups reset-offsets, bench): --topic T or T as the argument,
 * both only if they agree (exit 2 otherwise).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { withBroker } from '../client/helpers.js'
import { tidelogBin } from '../helpers/broker-process.js'
import { type RunResult, run } from '../helpers/cluster.js'

function tidelog(args: readonly string[], input?: string): Promise<RunResult> {
  return run(process.execPath, [tidelogBin(), ...args], {
    ...(input !== undefined ? { input } : {}),
    timeoutMs: 30000,
  })
}

function ok(result: RunResult, what: string): string {
  assert.equal(result.code, 0, `${what}: exit ${result.code}\n${result.stderr}`)
  return result.stdout
}

test('produce and consume take the topic as an argument as topics create does; --topic and an argument must agree', {
  timeout: 120000,
}, async () => {
  await withBroker(async (cluster) => {
    const b = ['--bootstrap-server', cluster.bootstrapServers]
    ok(await tidelog(['topics', 'create', 'positional', ...b]), 'topics create T')
    ok(
      await tidelog(['topics', 'create', '--topic', 'flagged', 'flagged', ...b]),
      'topics create --topic T T',
    )
    ok(await tidelog(['produce', 'positional', ...b], 'a\nb\n'), 'produce T')
    ok(await tidelog(['produce', '--topic', 'positional', 'positional', ...b], 'c\n'), 'produce --topic T T')
    const consumed = ok(
      await tidelog(['consume', 'positional', '--from-beginning', '--max-messages', '3', ...b]),
      'consume T',
    )
    assert.deepEqual(consumed.trim().split('\n'), ['a', 'b', 'c'])

    for (const args of [
      ['topics', 'create', '--topic', 'one', 'other'],
      ['produce', '--topic', 'one', 'other'],
      ['consume', '--topic', 'one', 'other'],
      ['groups', 'reset-offsets', '--group', 'g', '--topic', 'one', 'other', '--to-earliest'],
      ['bench', 'consume', '--topic', 'one', 'other'],
    ]) {
      const refused = await tidelog([...args, ...b], '')
      assert.equal(refused.code, 2, `${args.join(' ')}: exit ${refused.code}\n${refused.stderr}`)
      assert.match(refused.stderr, /--topic one and the argument other disagree/, args.join(' '))
    }
    const none = await tidelog(['produce', ...b], '')
    assert.equal(none.code, 2)
    assert.match(none.stderr, /name exactly one topic: --topic T, or T as the argument/)
  })
})
