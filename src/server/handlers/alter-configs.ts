/**
 * AlterConfigs (key 33), the legacy whole-set form.
 * Behavior: replaces every override of each resource with the given set: a TOPIC's
 * configs, the dynamic configs of BROKER '<this id>' or BROKER '' (cluster default), or a
 * GROUP's configs (32, as Kafka 4.4 takes them here too).
 * Names left out are removed. Topic values follow Kafka's validation (INVALID_CONFIG);
 * broker names follow Kafka's DynamicBrokerConfig rules (static ones are INVALID_REQUEST
 * "Cannot update these configs dynamically: Set(...)"; unimplemented dynamic and unknown
 * names are stored with no effect, docs/accepted-configs.md). Duplicate resources or keys and null values are INVALID_REQUEST;
 * unknown topics UNKNOWN_TOPIC_OR_PARTITION. validateOnly checks and changes nothing.
 * Authorization: ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED) or, for a broker
 * resource, on the cluster (CLUSTER_AUTHORIZATION_FAILED), for a group on the group
 * (GROUP_AUTHORIZATION_FAILED).
 * Version notes: v1 is v0; v2 is flexible.
 */
import {
  type AlterConfigsRequest,
  type AlterConfigsRequestAlterableConfig,
  type AlterConfigsResponse,
  ApiKey,
} from '../../protocol/generated/index.js'
import { AclOperation } from '../../security/authorizer/acl.js'
import { alterResources, configAuthorizationError, rejectNullValues } from '../config-resources.js'
import type { ApiHandler } from './registry.js'

export const alterConfigsHandler: ApiHandler<AlterConfigsRequest, AlterConfigsResponse> = {
  apiKey: ApiKey.AlterConfigs,
  minVersion: 0,
  maxVersion: 2,
  async handle(context, request) {
    const responses = await alterResources<AlterConfigsRequestAlterableConfig>(
      context.broker,
      request.resources,
      request.validateOnly,
      (_image, _target, configs) => {
        rejectNullValues(configs.filter((c) => c.value === null).map((c) => c.name))
        return Object.fromEntries(configs.map((c) => [c.name, c.value as string]))
      },
      (type, name) => configAuthorizationError(context, AclOperation.ALTER_CONFIGS, type, name),
    )
    return { throttleTimeMs: 0, responses }
  },
}
