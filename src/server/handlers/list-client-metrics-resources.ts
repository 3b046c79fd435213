/**
 * ListConfigResources (key 74), until Kafka 4.1 ListClientMetricsResources (KIP-714).
 * Behavior: the config resources of the types asked for (KafkaApis.handleListConfigResources):
 * GROUP (the groups with dynamic configs), CLIENT_METRICS (every
 * client metrics subscription in the cluster image), BROKER_LOGGER and BROKER (every
 * registered broker with this connection's listener, by id), TOPIC (every topic, internal
 * ones included), in that order. No types means every type the version supports; a type it
 * does not support fails the whole request with UNSUPPORTED_VERSION and no resources.
 * Authorization: DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED, as Kafka.
 * Version notes: flexible. v0 supports CLIENT_METRICS only and has no ResourceTypes (so it
 * lists the subscriptions) nor ResourceType in the answer; v1 (KIP-1142) supports TOPIC,
 * BROKER, BROKER_LOGGER, CLIENT_METRICS and GROUP.
 */
import { endpointFor } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ListConfigResourcesRequest,
  type ListConfigResourcesResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import { ResourceType as ConfigResourceType } from '../config-resources.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

/** The types each version may list (ListConfigResourcesRequest.supportedResourceTypes). */
function supportedTypes(version: number): ReadonlySet<number> {
  if (version === 0) return new Set([ConfigResourceType.CLIENT_METRICS])
  return new Set([
    ConfigResourceType.TOPIC,
    ConfigResourceType.BROKER,
    ConfigResourceType.BROKER_LOGGER,
    ConfigResourceType.CLIENT_METRICS,
    ConfigResourceType.GROUP,
  ])
}

type ConfigResource = ListConfigResourcesResponse['configResources'][number]

export const listClientMetricsResourcesHandler: ApiHandler<
  ListConfigResourcesRequest,
  ListConfigResourcesResponse
> = {
  apiKey: ApiKey.ListConfigResources,
  minVersion: 0,
  maxVersion: 1,
  handle(context, request) {
    if (!context.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)) {
      return { throttleTimeMs: 0, errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED, configResources: [] }
    }
    const supported = supportedTypes(context.apiVersion)
    // v0 decodes with no types: every supported one, that is CLIENT_METRICS.
    const types = new Set(request.resourceTypes.length > 0 ? request.resourceTypes : supported)
    if ([...types].some((type) => !supported.has(type)))
      return { throttleTimeMs: 0, errorCode: ErrorCode.UNSUPPORTED_VERSION, configResources: [] }
    return { throttleTimeMs: 0, errorCode: ErrorCode.NONE, configResources: listResources(context, types) }
  },
}

/** Kafka's order: groups, client metrics, broker loggers, brokers, topics. */
function listResources(context: RequestContext, types: ReadonlySet<number>): ConfigResource[] {
  const image = context.broker.metadataImage()
  const of = (resourceType: number, names: Iterable<string>): ConfigResource[] =>
    types.has(resourceType) ? [...names].map((resourceName) => ({ resourceName, resourceType })) : []
  const brokerIds = [...image.brokers.values()]
    .filter((b) => endpointFor(b, context.connection.listenerName) !== null)
    .map((b) => String(b.nodeId))
  return [
    // The groups that set some config, as Kafka lists them.
    ...of(ConfigResourceType.GROUP, [...(image.groupConfigs?.keys() ?? [])].sort()),
    ...of(ConfigResourceType.CLIENT_METRICS, [...(image.clientMetricsConfigs?.keys() ?? [])].sort()),
    ...of(ConfigResourceType.BROKER_LOGGER, brokerIds),
    ...of(ConfigResourceType.BROKER, brokerIds),
    ...of(ConfigResourceType.TOPIC, [...image.topics.keys()].sort()),
  ]
}
