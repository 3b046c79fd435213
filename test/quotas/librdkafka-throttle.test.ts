/**
 * A producer_byte_rate quota against librdkafka (python3 confluent-kafka): the producer is
 * held within 10% of 1 MiB/s over whole quota periods (period-rate.ts), and librdkafka
 * reports the throttle times through throttle_cb.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { type AlterClientQuotasResponse, ApiKey } from '../../src/protocol/generated/index.js'
import { run, startBroker } from '../helpers/cluster.js'
import { PYTHON, repoRoot } from '../helpers/compat-clients.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { periodRate } from './period-rate.js'

const QUOTA_BYTES_PER_SECOND = 1_048_576
/**
 * quota.window.num for these brokers: 6 one-second windows instead of Kafka's 11 make a quota
 * period (one burst to the next) 6 s, so a run takes 27 s rather than 44.
 */
const QUOTA_WINDOWS = 6
const PERIOD_MS = QUOTA_WINDOWS * 1000
/** Bursts come at about 0, 6, 12 and 18 s: three periods fit, two are needed (9 s to spare). */
const RUN_MS = 4.5 * PERIOD_MS

test('a producer_byte_rate of 1 MiB/s holds librdkafka within 10% and reaches its throttle_cb', async (t) => {
  const cluster = await startBroker({ port: 0, properties: { 'quota.window.num': QUOTA_WINDOWS } })
  try {
    const admin = new Kafka({ brokers: [cluster.bootstrapServers], logLevel: logLevel.NOTHING }).admin()
    await admin.connect()
    await admin.createTopics({ topics: [{ topic: 'quota-rdkafka', numPartitions: 1 }], waitForLeaders: true })
    await admin.disconnect()
    const raw = await RawClient.connect(Number(cluster.bootstrapServers.split(':')[1]))
    try {
      const response = await rawCall<AlterClientQuotasResponse>(raw, ApiKey.AlterClientQuotas, 0, {
        entries: [
          {
            entity: [{ entityType: 'client-id', entityName: 'rdkafka-throttled' }],
            ops: [{ key: 'producer_byte_rate', value: QUOTA_BYTES_PER_SECOND, remove: false }],
          },
        ],
        validateOnly: false,
      })
      assert.equal(response.entries[0].errorCode, ErrorCode.NONE)
    } finally {
      raw.close()
    }
    const script = join(repoRoot(), 'test', 'quotas', 'python', 'throttled_producer.py')
    const durationS = RUN_MS / 1000
    const result = await run(
      PYTHON,
      [script, cluster.bootstrapServers, 'quota-rdkafka', 'rdkafka-throttled', String(durationS)],
      { timeoutMs: 120_000 },
    )
    assert.equal(result.code, 0, result.stderr)
    const out = JSON.parse(result.stdout) as {
      deliveries: [number, number][]
      throttlesMs: number[]
      errors: string[]
    }
    assert.deepEqual(out.errors, [])
    const held = periodRate(
      out.deliveries.map(([atMs, bytes]) => ({ atMs, bytes })),
      QUOTA_BYTES_PER_SECOND,
      2,
    )
    assert.ok(held !== null, 'fewer than two quota periods (no throttling?)')
    const mib = held.bytesPerSecond / QUOTA_BYTES_PER_SECOND
    t.diagnostic(
      `librdkafka: ${mib.toFixed(3)} MiB/s over ${held.periods} periods, ${out.throttlesMs.length} throttle_cb calls`,
    )
    assert.ok(Math.abs(mib - 1) < 0.1, `librdkafka ran at ${mib.toFixed(3)} MiB/s`)
    assert.ok(out.throttlesMs.filter((ms) => ms > 0).length > 0, 'throttle_cb reported throttle times')
  } finally {
    await cluster.stop()
  }
})
