/**
 * Client telemetry (KIP-714) as Kafka's ClientMetricsManager answers it, on a clock the test
 * moves: instance ids, subscriptions matched by client attributes, each PushTelemetry error
 * in Kafka's order, and the pushed metrics on /metrics' text with the client's labels until
 * the client stops pushing.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { gzipSync } from 'node:zlib'
import { silentLogger } from '../../src/common/logger.js'
import { systemRandom } from '../../src/common/random.js'
import { parsePrometheusText, sumSamples } from '../../src/ops/prometheus-text.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ZERO_UUID } from '../../src/protocol/primitives.js'
import {
  ClientMetricsManager,
  type ClientRequestInfo,
} from '../../src/server/telemetry/client-metrics-manager.js'
import { encodeMetricsData, type MetricsDataObject } from '../../src/server/telemetry/otlp-metrics.js'
import { ManualClock } from '../helpers/manual-clock.js'

const JAVA: ClientRequestInfo = {
  clientId: 'producer-1',
  softwareName: 'apache-kafka-java',
  softwareVersion: '4.4.0',
  remoteAddress: '127.0.0.1:50123',
}

function setup(subscriptions: Record<string, Record<string, string>> = {}, telemetryMaxBytes = 1024 * 1024) {
  const clock = new ManualClock()
  let configs = new Map(Object.entries(subscriptions))
  const manager = new ClientMetricsManager({
    clock,
    random: systemRandom,
    logger: silentLogger,
    telemetryMaxBytes,
    subscriptionConfigs: () => configs,
  })
  return {
    clock,
    manager,
    setSubscriptions(next: Record<string, Record<string, string>>) {
      configs = new Map(Object.entries(next))
    },
  }
}

function payload(value: number, name = 'org.apache.kafka.producer.record.queue.time.avg'): Buffer {
  const data: MetricsDataObject = {
    resource_metrics: [
      {
        resource: { attributes: [{ key: 'client_rack', value: { string_value: 'r1' } }] },
        scope_metrics: [
          {
            metrics: [
              { name, description: 'The average time', gauge: { data_points: [{ as_double: value }] } },
              {
                name: 'org.apache.kafka.producer.record.send.total',
                sum: {
                  data_points: [
                    {
                      as_int: String(Math.round(value)),
                      attributes: [{ key: 'topic', value: { string_value: 't' } }],
                    },
                  ],
                  aggregation_temporality: 2,
                  is_monotonic: true,
                },
              },
            ],
          },
        ],
      },
    ],
  }
  return encodeMetricsData(data)
}

describe('client telemetry (KIP-714)', () => {
  it('gives a client sending the zero id a new id, and no metrics when no subscription matches', () => {
    const { manager } = setup({ other: { metrics: 'org.apache.kafka.', match: 'client_id=consumer-.*' } })
    const answer = manager.getSubscriptions(ZERO_UUID, JAVA)
    assert.equal(answer.errorCode, ErrorCode.NONE)
    assert.notEqual(answer.clientInstanceId, ZERO_UUID)
    assert.equal(answer.clientInstanceId.length, 22)
    assert.deepEqual(answer.requestedMetrics, [])
    assert.equal(answer.pushIntervalMs, 300_000)
    assert.deepEqual(answer.acceptedCompressionTypes, [4, 3, 1, 2])
    assert.equal(answer.telemetryMaxBytes, 1024 * 1024)
  })

  it('merges the matching subscriptions: their prefixes and the smallest interval', () => {
    const { manager } = setup({
      a: {
        metrics: 'org.apache.kafka.producer.',
        'interval.ms': '5000',
        match: 'client_software_name=apache-kafka-java',
      },
      b: { metrics: 'org.apache.kafka.consumer.,org.apache.kafka.producer.', 'interval.ms': '2000' },
      c: { metrics: '*', match: 'client_software_name=librdkafka' },
      d: { metrics: 'org.apache.kafka.x', 'interval.ms': '100', match: 'client_source_port=1' },
    })
    const answer = manager.getSubscriptions(ZERO_UUID, JAVA)
    assert.deepEqual(answer.requestedMetrics, ['org.apache.kafka.consumer.', 'org.apache.kafka.producer.'])
    assert.equal(answer.pushIntervalMs, 2000)
    const rd = manager.getSubscriptions(ZERO_UUID, { ...JAVA, softwareName: 'librdkafka' })
    assert.deepEqual(rd.requestedMetrics, ['*'])
  })

  it('throttles a second GetTelemetrySubscriptions within the push interval', () => {
    const { manager, clock } = setup({ all: { metrics: '*', 'interval.ms': '1000' } })
    const first = manager.getSubscriptions(ZERO_UUID, JAVA)
    const again = manager.getSubscriptions(first.clientInstanceId, JAVA)
    assert.equal(again.errorCode, ErrorCode.THROTTLING_QUOTA_EXCEEDED)
    clock.advance(1000)
    assert.equal(manager.getSubscriptions(first.clientInstanceId, JAVA).errorCode, ErrorCode.NONE)
  })

  it('refuses pushes with the errors Kafka gives, in its order', async () => {
    const { manager, clock, setSubscriptions } = setup({ all: { metrics: '*', 'interval.ms': '1000' } }, 4096)
    const { clientInstanceId: id, subscriptionId } = manager.getSubscriptions(ZERO_UUID, JAVA)
    const push = (over: Partial<Parameters<ClientMetricsManager['push']>[0]> = {}) =>
      manager.push(
        {
          clientInstanceId: id,
          subscriptionId,
          terminating: false,
          compressionType: 0,
          metrics: payload(1),
          ...over,
        },
        JAVA,
      )
    assert.equal((await push({ clientInstanceId: ZERO_UUID })).errorCode, ErrorCode.INVALID_REQUEST)
    // The first push right after GetTelemetrySubscriptions is let in, even early.
    assert.equal((await push()).errorCode, ErrorCode.NONE)
    assert.equal((await push()).errorCode, ErrorCode.THROTTLING_QUOTA_EXCEEDED)
    clock.advance(1000)
    assert.equal(
      (await push({ subscriptionId: subscriptionId + 1 })).errorCode,
      ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
    )
    // After UNKNOWN_SUBSCRIPTION_ID the client may ask for its subscription at once (as in
    // Kafka, that early answer does not count as the push's GetTelemetrySubscriptions).
    assert.equal(manager.getSubscriptions(id, JAVA).errorCode, ErrorCode.NONE)
    clock.advance(1000)
    assert.equal((await push({ compressionType: 9 })).errorCode, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
    assert.equal(manager.getSubscriptions(id, JAVA).errorCode, ErrorCode.NONE)
    clock.advance(1000)
    assert.equal((await push({ metrics: Buffer.alloc(4097) })).errorCode, ErrorCode.TELEMETRY_TOO_LARGE)
    // Other errors do not excuse an early GetTelemetrySubscriptions.
    assert.equal(manager.getSubscriptions(id, JAVA).errorCode, ErrorCode.THROTTLING_QUOTA_EXCEEDED)
    clock.advance(1000)
    // 40 KiB of zeros gzip to far under 4 KiB but decompress over it.
    assert.equal(
      (await push({ compressionType: 1, metrics: gzipSync(Buffer.alloc(40_000)) })).errorCode,
      ErrorCode.TELEMETRY_TOO_LARGE,
    )
    clock.advance(1000)
    assert.equal(
      (await push({ metrics: Buffer.from([0xff, 0xff, 0xff]) })).errorCode,
      ErrorCode.INVALID_RECORD,
    )
    clock.advance(1000)
    assert.equal(
      (await push({ compressionType: 1, metrics: Buffer.from('not gzip') })).errorCode,
      ErrorCode.INVALID_RECORD,
    )
    // A terminating push is let in early; nothing is accepted after it.
    assert.equal((await push({ terminating: true })).errorCode, ErrorCode.NONE)
    clock.advance(1000)
    assert.equal((await push()).errorCode, ErrorCode.INVALID_REQUEST)
    // A changed subscription gives the client a new subscription id: the old one is stale.
    const other = setup({ all: { metrics: '*', 'interval.ms': '1000' } })
    const got = other.manager.getSubscriptions(ZERO_UUID, JAVA)
    other.setSubscriptions({ all: { metrics: 'org.apache.kafka.producer.', 'interval.ms': '1000' } })
    const stale = await other.manager.push(
      {
        clientInstanceId: got.clientInstanceId,
        subscriptionId: got.subscriptionId,
        terminating: false,
        compressionType: 0,
        metrics: payload(1),
      },
      JAVA,
    )
    assert.equal(stale.errorCode, ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
    const renewed = other.manager.getSubscriptions(got.clientInstanceId, JAVA)
    assert.equal(renewed.errorCode, ErrorCode.NONE)
    assert.notEqual(renewed.subscriptionId, got.subscriptionId)
    assert.deepEqual(renewed.requestedMetrics, ['org.apache.kafka.producer.'])
    setSubscriptions({})
  })

  it('serves pushed metrics with the client labels, compressed or not, until the client stops pushing', async () => {
    const { manager, clock } = setup({ all: { metrics: '*', 'interval.ms': '1000' } })
    const { clientInstanceId: id, subscriptionId } = manager.getSubscriptions(ZERO_UUID, JAVA)
    const push = (metrics: Buffer, compressionType = 0) =>
      manager.push(
        { clientInstanceId: id, subscriptionId, terminating: false, compressionType, metrics },
        JAVA,
      )
    assert.equal((await push(payload(7.5))).errorCode, ErrorCode.NONE)
    let families = parsePrometheusText(manager.exposition())
    const labels = {
      client_instance_id: id,
      client_id: 'producer-1',
      client_software_name: 'apache-kafka-java',
      client_software_version: '4.4.0',
      client_source_address: '127.0.0.1',
      client_source_port: '50123',
      client_rack: 'r1',
    }
    const gauge = families.get('org_apache_kafka_producer_record_queue_time_avg')
    assert.equal(gauge?.type, 'gauge')
    assert.deepEqual(gauge?.samples, [
      { name: 'org_apache_kafka_producer_record_queue_time_avg', labels, value: 7.5 },
    ])
    assert.equal(families.get('org_apache_kafka_producer_record_send_total')?.type, 'counter')
    assert.equal(sumSamples(families, 'org_apache_kafka_producer_record_send_total', { topic: 't' }), 8)
    clock.advance(1000)
    assert.equal((await push(gzipSync(payload(20)), 1)).errorCode, ErrorCode.NONE)
    families = parsePrometheusText(manager.exposition())
    assert.equal(sumSamples(families, 'org_apache_kafka_producer_record_queue_time_avg'), 20)
    assert.equal(sumSamples(families, 'org_apache_kafka_producer_record_send_total'), 20)
    // Three push intervals without a push: the client's metrics leave.
    clock.advance(3001)
    assert.equal(manager.exposition(), '')
  })

  it('adds up sums pushed as deltas', async () => {
    const { manager, clock } = setup({ all: { metrics: '*', 'interval.ms': '1000' } })
    const { clientInstanceId: id, subscriptionId } = manager.getSubscriptions(ZERO_UUID, JAVA)
    const delta = (value: number) =>
      encodeMetricsData({
        resource_metrics: [
          {
            scope_metrics: [
              {
                metrics: [
                  {
                    name: 'requests.total',
                    sum: {
                      data_points: [{ as_int: String(value) }],
                      aggregation_temporality: 1,
                      is_monotonic: true,
                    },
                  },
                ],
              },
            ],
          },
        ],
      })
    for (const value of [3, 4]) {
      const answer = await manager.push(
        {
          clientInstanceId: id,
          subscriptionId,
          terminating: false,
          compressionType: 0,
          metrics: delta(value),
        },
        JAVA,
      )
      assert.equal(answer.errorCode, ErrorCode.NONE)
      clock.advance(1000)
    }
    assert.equal(sumSamples(parsePrometheusText(manager.exposition()), 'requests_total'), 7)
  })
})
