/**
 * ApiVersions (key 18).
 * Behavior: lists exactly the api keys and version ranges this broker serves, and from v3
 * the supported feature ranges (metadata/features.ts) and the finalized levels and their
 * epoch from this broker's current metadata image (what UpdateFeatures last wrote). A request of a version above ours never
 * reaches this handler: the connection answers it in the v0 shape with UNSUPPORTED_VERSION
 * (see Connection.answerUnsupportedApiVersions).
 * Version notes: v1 adds throttle time; v3 is flexible, carries the client's software name
 * and version, and adds the features (supported features with a minimum of 0 only from v4,
 * KAFKA-17011); v5 (KIP-1242) carries the cluster id and node id the client meant to reach:
 * both or neither (else INVALID_REQUEST), and REBOOTSTRAP_REQUIRED when they are not this
 * broker's, with no api keys and no features, as Kafka 4.4 answers.
 */

import { finalizedFeaturesOf, supportedFeaturesFor } from '../../metadata/features.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { defaultApiVersionsResponse } from '../../protocol/generated/api-versions-response.js'
import { ApiKey, type ApiVersionsRequest, type ApiVersionsResponse } from '../../protocol/generated/index.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

export const apiVersionsHandler: ApiHandler<ApiVersionsRequest, ApiVersionsResponse> = {
  apiKey: ApiKey.ApiVersions,
  minVersion: 0,
  maxVersion: 5,
  handle(context, request) {
    const version = context.apiVersion
    // KIP-511: what the client says it is, kept for client telemetry's labels and matching.
    if (version >= 3) {
      context.connection.setClientSoftware(request.clientSoftwareName, request.clientSoftwareVersion)
    }
    const misrouted = version >= 5 ? targetError(context, request) : ErrorCode.NONE
    if (misrouted !== ErrorCode.NONE) return { ...defaultApiVersionsResponse(), errorCode: misrouted }
    const finalized = finalizedFeaturesOf(context.broker.metadataImage())
    return {
      ...defaultApiVersionsResponse(),
      errorCode: ErrorCode.NONE,
      apiKeys: context.broker.apiVersionRanges(),
      ...(version >= 3 && {
        supportedFeatures: supportedFeaturesFor(version).map((f) => ({ ...f })),
        finalizedFeaturesEpoch: BigInt(finalized.epoch),
        // A feature at level 0 is disabled: Kafka lists only the levels above it.
        finalizedFeatures: [...finalized.levels]
          .filter(([, level]) => level > 0)
          .map(([name, level]) => ({ name, maxVersionLevel: level, minVersionLevel: level })),
      }),
    }
  },
}

/** v5: the node the client meant to reach, checked against this one (KIP-1242). */
function targetError(context: RequestContext, request: ApiVersionsRequest): number {
  const hasCluster = request.clusterId !== null
  const hasNode = request.nodeId >= 0
  if (!hasCluster && !hasNode) return ErrorCode.NONE
  if (hasCluster !== hasNode) return ErrorCode.INVALID_REQUEST
  const here = context.broker.metadataImage().clusterId
  return request.clusterId === here && request.nodeId === context.broker.nodeId
    ? ErrorCode.NONE
    : ErrorCode.REBOOTSTRAP_REQUIRED
}
