/**
 * ApiVersions (key 18).
 * Behavior: lists exactly the api keys and version ranges this broker serves. A request of
 * a version above ours never reaches this handler: the connection answers it in the v0
 * shape with UNSUPPORTED_VERSION (see Connection.answerUnsupportedApiVersions).
 * Version notes: v1 adds throttle time; v3 is flexible, carries the client's software name
 * and version, and adds feature tags (tidelog advertises no features).
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import { defaultApiVersionsResponse } from '../../protocol/generated/api-versions-response.js'
import { ApiKey, type ApiVersionsRequest, type ApiVersionsResponse } from '../../protocol/generated/index.js'
import type { ApiHandler } from './registry.js'

export const apiVersionsHandler: ApiHandler<ApiVersionsRequest, ApiVersionsResponse> = {
  apiKey: ApiKey.ApiVersions,
  minVersion: 0,
  maxVersion: 4,
  handle(context, request) {
    // KIP-511: what the client says it is, kept for client telemetry's labels and matching.
    if (context.apiVersion >= 3) {
      context.connection.setClientSoftware(request.clientSoftwareName, request.clientSoftwareVersion)
    }
    return {
      ...defaultApiVersionsResponse(),
      errorCode: ErrorCode.NONE,
      apiKeys: context.broker.apiVersionRanges(),
    }
  },
}
