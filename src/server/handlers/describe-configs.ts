/**
 * DescribeConfigs (key 32).
 * Behavior: for a TOPIC, every topic-level config with its current value and where it
 * comes from (topic override, dynamic broker, dynamic default, static broker, default);
 * for BROKER '<this id>', every broker property; for BROKER '' (the cluster default), only
 * the dynamic defaults set; BROKER_LOGGER answers an empty list; a GROUP (32) every Kafka
 * 4.4 group config, the group's own (DYNAMIC_GROUP_CONFIG) or the broker's value
 * (server/group-configs.ts), an empty group name INVALID_REQUEST. configurationKeys, when
 * not null, filters the names. Unknown topics get UNKNOWN_TOPIC_OR_PARTITION, another
 * broker's id INVALID_REQUEST, other resource types INVALID_REQUEST, each per resource.
 * Sensitive values are null.
 * Authorization: DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED) or, for a
 * broker resource, on the cluster (CLUSTER_AUTHORIZATION_FAILED), for a group on the group
 * (GROUP_AUTHORIZATION_FAILED).
 * Version notes: v0 reports isDefault instead of configSource; v1 adds includeSynonyms,
 * configSource and synonyms; v2 is v1; v3 adds includeDocumentation, configType and
 * documentation; v4 is flexible.
 */

import { ConfigSource } from '../../metadata/topic-config.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DescribeConfigsRequest,
  type DescribeConfigsResponse,
  type DescribeConfigsResponseDescribeConfigsResourceResult,
  type DescribeConfigsResponseDescribeConfigsResult,
} from '../../protocol/generated/index.js'
import { AclOperation } from '../../security/authorizer/acl.js'
import {
  ConfigResourceError,
  configAuthorizationError,
  type DescribedConfig,
  describeResource,
} from '../config-resources.js'
import type { ApiHandler } from './registry.js'

export const describeConfigsHandler: ApiHandler<DescribeConfigsRequest, DescribeConfigsResponse> = {
  apiKey: ApiKey.DescribeConfigs,
  minVersion: 0,
  maxVersion: 4,
  handle(context, request) {
    const version = context.apiVersion
    const includeSynonyms = version >= 1 && request.includeSynonyms
    const includeDocumentation = version >= 3 && request.includeDocumentation
    const image = context.broker.metadataImage()
    const results = request.resources.map((resource): DescribeConfigsResponseDescribeConfigsResult => {
      const base = { resourceType: resource.resourceType, resourceName: resource.resourceName }
      try {
        const denied = configAuthorizationError(
          context,
          AclOperation.DESCRIBE_CONFIGS,
          resource.resourceType,
          resource.resourceName,
        )
        if (denied !== null) throw denied
        const keys = resource.configurationKeys === null ? null : new Set(resource.configurationKeys)
        const configs = describeResource(
          image,
          context.broker.config,
          resource.resourceType,
          resource.resourceName,
        )
          .filter((c) => keys === null || keys.has(c.name))
          .map((c) => entry(c, version, includeSynonyms, includeDocumentation))
        return { ...base, errorCode: ErrorCode.NONE, errorMessage: null, configs }
      } catch (error) {
        if (!(error instanceof ConfigResourceError)) throw error
        return { ...base, errorCode: error.errorCode, errorMessage: error.message, configs: [] }
      }
    })
    return { throttleTimeMs: 0, results }
  },
}

function entry(
  config: DescribedConfig,
  version: number,
  includeSynonyms: boolean,
  includeDocumentation: boolean,
): DescribeConfigsResponseDescribeConfigsResourceResult {
  return {
    name: config.name,
    value: config.value,
    readOnly: config.readOnly,
    isDefault: version === 0 && config.source === ConfigSource.DEFAULT_CONFIG,
    configSource: config.source,
    isSensitive: config.sensitive,
    synonyms: includeSynonyms
      ? config.synonyms.map((s) => ({ name: s.name, value: s.value, source: s.source }))
      : [],
    configType: config.configType,
    documentation: includeDocumentation ? config.documentation : null,
  }
}
