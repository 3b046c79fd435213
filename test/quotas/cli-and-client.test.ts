/**
 * `tidelog quotas describe|alter` against a real broker, and tidelog's own producer under
 * a quota: it reports the throttle times (metrics, onThrottle), and its next produce goes
 * only after the throttle time (the broker mutes the connection and the client holds its
 * writes, KIP-219; this test cannot tell the two apart).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import type { ThrottleEvent } from '../../src/client/client.js'
import { KafkaProtocolError } from '../../src/client/errors.js'
import { Producer } from '../../src/client/producer.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import { createTopics } from '../client/helpers.js'
import { tidelogBin } from '../helpers/broker-process.js'
import { type RunResult, run, withBroker } from '../helpers/cluster.js'

function tidelog(args: readonly string[]): Promise<RunResult> {
  return run(process.execPath, [tidelogBin(), ...args], { timeoutMs: 30000 })
}

function ok(result: RunResult, what: string): string {
  assert.equal(result.code, 0, `${what}: exit ${result.code}\n${result.stderr}`)
  return result.stdout
}

test('tidelog quotas alter and describe, with Kafka errors and exit codes', async () => {
  await withBroker(
    async (cluster) => {
      const b = ['--bootstrap-server', cluster.bootstrapServers]
      ok(
        await tidelog([
          'quotas',
          'alter',
          '--client-id',
          'app',
          '--add-config',
          'producer_byte_rate=50000',
          ...b,
        ]),
        'alter',
      )
      ok(
        await tidelog([
          'quotas',
          'alter',
          '--user',
          'alice',
          '--client-default',
          '--add-config',
          'consumer_byte_rate=2048,request_percentage=50',
          ...b,
        ]),
        'alter user',
      )
      const validated = await tidelog([
        'quotas',
        'alter',
        '--user-default',
        '--add-config',
        'producer_byte_rate=1',
        '--validate-only',
        ...b,
      ])
      assert.match(ok(validated, 'validate'), /Validated the quotas of user=<default>/)
      const all = JSON.parse(ok(await tidelog(['quotas', 'describe', '--json', ...b]), 'describe'))
      assert.deepEqual(all, [
        { entity: { clientId: 'app' }, values: { producer_byte_rate: 50000 } },
        {
          entity: { user: 'alice', clientId: null },
          values: { consumer_byte_rate: 2048, request_percentage: 50 },
        },
      ])
      const table = ok(await tidelog(['quotas', 'describe', '--user', 'alice', ...b]), 'describe alice')
      assert.match(table, /user=alice,client-id=<default>\s+consumer_byte_rate=2048,request_percentage=50/)
      assert.doesNotMatch(table, /client-id=app/)
      const strict = JSON.parse(
        ok(await tidelog(['quotas', 'describe', '--client-default', '--strict', '--json', ...b]), 's'),
      )
      assert.deepEqual(strict, [])

      const bad = await tidelog([
        'quotas',
        'alter',
        '--client-id',
        'app',
        '--add-config',
        'producer.byte.rate=1',
        ...b,
      ])
      assert.equal(bad.code, 1)
      assert.match(bad.stderr, /client quotas of client-id=app: Invalid configuration key producer.byte.rate/)
      const usage = await tidelog([
        'quotas',
        'alter',
        '--user',
        'u',
        '--user-default',
        '--add-config',
        'x=1',
        ...b,
      ])
      assert.equal(usage.code, 2)

      ok(
        await tidelog([
          'quotas',
          'alter',
          '--client-id',
          'app',
          '--delete-config',
          'producer_byte_rate',
          ...b,
        ]),
        'delete',
      )
      const left = JSON.parse(
        ok(await tidelog(['quotas', 'describe', '--json', ...b]), 'describe after delete'),
      )
      assert.deepEqual(
        left.map((e: { entity: unknown }) => e.entity),
        [{ user: 'alice', clientId: null }],
      )
    },
    { port: 0 },
  )
})

test("tidelog's producer reports throttle times and its next produce goes after the throttle time", async () => {
  await withBroker(
    async (cluster) => {
      await createTopics(cluster.bootstrapServers, [{ topic: 'throttled' }])
      const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
      try {
        await assert.rejects(
          admin.alterClientQuotas([
            { entity: { clientId: 'x' }, ops: [{ key: 'consumer_byte_rate', value: 0.5 }] },
          ]),
          (error: unknown) =>
            error instanceof KafkaProtocolError && error.errorCode === ErrorCode.INVALID_REQUEST,
        )
        // 100 KB/s: 1.2 MB over the 10 s minimum window is 20% over, about 2 s of throttle.
        await admin.alterClientQuotas([
          { entity: { clientId: 'slow-tidelog' }, ops: [{ key: 'producer_byte_rate', value: 100_000 }] },
        ])
        assert.deepEqual(
          await admin.describeClientQuotas([{ entityType: 'client-id', match: 'slow-tidelog' }]),
          [{ entity: { clientId: 'slow-tidelog' }, values: { producer_byte_rate: 100_000 } }],
        )
      } finally {
        admin.close()
      }
      const producer = new Producer({
        bootstrapServers: cluster.bootstrapServers,
        clientId: 'slow-tidelog',
        lingerMs: 0,
      })
      const events: ThrottleEvent[] = []
      producer.client.onThrottle((event) => events.push(event))
      try {
        const value = Buffer.alloc(200_000, 't')
        for (let i = 0; i < 6; i++) await producer.send({ topic: 'throttled', value })
        assert.ok(events.length > 0, 'throttle events')
        assert.ok(events.every((e) => e.apiKey === ApiKey.Produce && e.throttleTimeMs > 0))
        const throttleMs = events.at(-1)!.throttleTimeMs
        const startMs = Date.now()
        await producer.send({ topic: 'throttled', value: Buffer.from('next') })
        const waitedMs = Date.now() - startMs
        assert.ok(
          waitedMs >= throttleMs - 100,
          `next produce went after ${waitedMs} ms (throttle ${throttleMs} ms)`,
        )
        const metrics = producer.metrics()
        assert.equal(metrics.throttledResponses, events.length)
        assert.equal(metrics.throttleTimeMsMax, Math.max(...events.map((e) => e.throttleTimeMs)))
        assert.ok(metrics.throttleTimeMsTotal >= metrics.throttleTimeMsMax)
      } finally {
        await producer.close()
      }
    },
    { port: 0 },
  )
})
