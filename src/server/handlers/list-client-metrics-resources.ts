/**
 * ListClientMetricsResources (key 74, KIP-714).
 * Behavior: the names of every client metrics subscription (CLIENT_METRICS config resource)
 * in the cluster image.
 * Authorization: DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED, as Kafka.
 * Version notes: v0 only, flexible.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ListClientMetricsResourcesRequest,
  type ListClientMetricsResourcesResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const listClientMetricsResourcesHandler: ApiHandler<
  ListClientMetricsResourcesRequest,
  ListClientMetricsResourcesResponse
> = {
  apiKey: ApiKey.ListClientMetricsResources,
  minVersion: 0,
  maxVersion: 0,
  handle(context) {
    if (!context.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)) {
      return {
        throttleTimeMs: 0,
        errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        clientMetricsResources: [],
      }
    }
    const names = [...(context.broker.metadataImage().clientMetricsConfigs?.keys() ?? [])].sort()
    return {
      throttleTimeMs: 0,
      errorCode: ErrorCode.NONE,
      clientMetricsResources: names.map((name) => ({ name })),
    }
  },
}
