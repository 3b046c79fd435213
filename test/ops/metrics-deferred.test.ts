/**
 * BrokerMetrics imports prom-client only in load() (docs/notes/startup.md): what registered before
 * must reach the Registry in the order it was built, and log flushes seen before the flush
 * histogram existed must be counted in it.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import type { BrokerMetricsSource } from '../../src/ops/broker-metrics-source.js'
import { BrokerMetrics } from '../../src/ops/metrics.js'

const FLUSH = 'kafka_log_logflushstats_logflush_seconds'

function newMetrics(): BrokerMetrics {
  return new BrokerMetrics({ logger: silentLogger, slowRequestMs: -1, highWatermarks: async () => new Map() })
}

/** attach() only hooks the log manager's flush callback; the gauges read the rest at scrape time. */
function fakeSource(): { source: BrokerMetricsSource; flushed: (ms: number) => void } {
  const logManager: { onLogFlushed: ((durationMs: number) => void) | null } = { onLogFlushed: null }
  return {
    source: { logManager } as unknown as BrokerMetricsSource,
    flushed: (ms) => logManager.onLogFlushed?.(ms),
  }
}

test('flushes before load() are counted; default metrics come first and the flush histogram last', async () => {
  const metrics = newMetrics()
  const { source, flushed } = fakeSource()
  metrics.attach(source)
  flushed(3)
  flushed(40)
  const registry = await metrics.load()
  flushed(7)
  const names = registry.getMetricsAsArray().map((m) => m.name)
  assert.equal(names.at(-1), FLUSH)
  const firstKafka = names.findIndex((n) => n.startsWith('kafka_'))
  assert.ok(firstKafka > 0, 'default Node metrics registered before the broker metrics')
  assert.ok(names.slice(0, firstKafka).includes('process_resident_memory_bytes'))
  assert.ok(names.slice(0, firstKafka).every((n) => /^(process|nodejs)_/.test(n)))
  // The request metrics are built first, then the broker gauges, as when prom-client loaded eagerly.
  assert.equal(names[firstKafka], 'kafka_network_requestmetrics_requests_total')
  const text = await registry.getSingleMetricAsString(FLUSH)
  assert.match(text, new RegExp(`^${FLUSH}_count 3$`, 'm'))
  assert.match(text, new RegExp(`^${FLUSH}_sum 0\\.05$`, 'm'))
  metrics.close()
})

test('attach after load() defines the flush histogram at once; load() runs once', async () => {
  const metrics = newMetrics()
  const registry = await metrics.load()
  assert.equal(await metrics.load(), registry)
  assert.equal(registry.getSingleMetric(FLUSH), undefined)
  const { source, flushed } = fakeSource()
  metrics.attach(source)
  flushed(2)
  assert.match(await registry.getSingleMetricAsString(FLUSH), new RegExp(`^${FLUSH}_count 1$`, 'm'))
  metrics.close()
})

test('a BrokerMetrics closed before load() builds an empty registry', async () => {
  const metrics = newMetrics()
  metrics.close()
  const registry = await metrics.load()
  assert.deepEqual(registry.getMetricsAsArray(), [])
})
