/**
 * PushTelemetry (key 72, KIP-714).
 * Behavior: a client's metrics, OTLP MetricsData protobuf, compressed or not, decoded and
 * kept for /metrics with the client's labels. Errors in Kafka's order: a reserved client
 * instance id or a push after a terminating one INVALID_REQUEST; before the push interval
 * THROTTLING_QUOTA_EXCEEDED (a terminating push, or the first after
 * GetTelemetrySubscriptions, is let through); a stale subscription id
 * UNKNOWN_SUBSCRIPTION_ID; an unknown compression type UNSUPPORTED_COMPRESSION_TYPE; over
 * telemetry.max.bytes (compressed or decompressed) TELEMETRY_TOO_LARGE; a payload that does
 * not decompress or decode INVALID_RECORD (server/telemetry/client-metrics-manager.ts).
 * Version notes: v0 only, flexible.
 */
import {
  ApiKey,
  type PushTelemetryRequest,
  type PushTelemetryResponse,
} from '../../protocol/generated/index.js'
import { clientRequestInfo } from './get-telemetry-subscriptions.js'
import type { ApiHandler } from './registry.js'

export const pushTelemetryHandler: ApiHandler<PushTelemetryRequest, PushTelemetryResponse> = {
  apiKey: ApiKey.PushTelemetry,
  minVersion: 0,
  maxVersion: 0,
  async handle(context, request) {
    const answer = await context.broker.clientMetrics.push(request, clientRequestInfo(context))
    return { throttleTimeMs: 0, errorCode: answer.errorCode }
  },
}
