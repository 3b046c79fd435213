/**
 * ListConfigResources (key 74), until Kafka 4.1 ListClientMetricsResources (KIP-714).
 * Behavior: the names of every client metrics subscription (CLIENT_METRICS config resource)
 * in the cluster image.
 * Authorization: DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED, as Kafka.
 * Version notes: v0 only, flexible. v1 (KIP-1142) lists every config resource type the
 * request names; tidelog does not serve it yet.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ListConfigResourcesRequest,
  type ListConfigResourcesResponse,
} from '../../protocol/generated/index.js'
import { defaultListConfigResourcesResponseConfigResource } from '../../protocol/generated/list-config-resources-response.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const listClientMetricsResourcesHandler: ApiHandler<
  ListConfigResourcesRequest,
  ListConfigResourcesResponse
> = {
  apiKey: ApiKey.ListConfigResources,
  minVersion: 0,
  maxVersion: 0,
  handle(context) {
    if (!context.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)) {
      return {
        throttleTimeMs: 0,
        errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        configResources: [],
      }
    }
    const names = [...(context.broker.metadataImage().clientMetricsConfigs?.keys() ?? [])].sort()
    return {
      throttleTimeMs: 0,
      errorCode: ErrorCode.NONE,
      // v0's ResourceType is implicit: CLIENT_METRICS, the schema default.
      configResources: names.map((name) => ({
        ...defaultListConfigResourcesResponseConfigResource(),
        resourceName: name,
      })),
    }
  },
}
