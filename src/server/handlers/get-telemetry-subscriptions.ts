/**
 * GetTelemetrySubscriptions (key 71, KIP-714).
 * Behavior: a client sending the zero id gets a new client instance id; the answer carries
 * the subscription id, the compression types accepted for pushes (zstd, lz4, gzip, snappy),
 * the push interval (the smallest of the matching subscriptions, 300000 ms when none match),
 * telemetry.max.bytes, deltaTemporality (false: tidelog exposes cumulative counters) and the
 * metric name prefixes of every matching subscription (["*"] when one asks for all, [] when
 * none match). Asking again within the push interval is THROTTLING_QUOTA_EXCEEDED unless the
 * last push failed with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE
 * (server/telemetry/client-metrics-manager.ts).
 * Version notes: v0 only, flexible.
 */
import {
  ApiKey,
  type GetTelemetrySubscriptionsRequest,
  type GetTelemetrySubscriptionsResponse,
} from '../../protocol/generated/index.js'
import type { RequestContext } from '../request-context.js'
import type { ClientRequestInfo } from '../telemetry/client-metrics-manager.js'
import type { ApiHandler } from './registry.js'

export const getTelemetrySubscriptionsHandler: ApiHandler<
  GetTelemetrySubscriptionsRequest,
  GetTelemetrySubscriptionsResponse
> = {
  apiKey: ApiKey.GetTelemetrySubscriptions,
  minVersion: 0,
  maxVersion: 0,
  handle(context, request) {
    const answer = context.broker.clientMetrics.getSubscriptions(
      request.clientInstanceId,
      clientRequestInfo(context),
    )
    return {
      throttleTimeMs: 0,
      errorCode: answer.errorCode,
      clientInstanceId: answer.clientInstanceId,
      subscriptionId: answer.subscriptionId,
      acceptedCompressionTypes: [...answer.acceptedCompressionTypes],
      pushIntervalMs: answer.pushIntervalMs,
      telemetryMaxBytes: answer.telemetryMaxBytes,
      deltaTemporality: answer.deltaTemporality,
      requestedMetrics: [...answer.requestedMetrics],
    }
  },
}

/** What a telemetry request tells of its client: header, ApiVersions and the connection. */
export function clientRequestInfo(context: RequestContext): ClientRequestInfo {
  return {
    clientId: context.header.clientId ?? '',
    softwareName: context.connection.clientSoftware.name,
    softwareVersion: context.connection.clientSoftware.version,
    remoteAddress: context.connection.remoteAddress,
  }
}
