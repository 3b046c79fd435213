/**
 * IncrementalAlterConfigs (key 44).
 * Behavior: applies per-key operations to a TOPIC's overrides or to the dynamic configs
 * of BROKER '<this id>' / BROKER '' (cluster default): SET (0) stores a value, DELETE (1)
 * removes the override, APPEND (2) and SUBTRACT (3) add or remove items of a LIST config,
 * starting from the value in effect when there is no override (INVALID_CONFIG "Can't
 * APPEND to key x because its type is not LIST." otherwise). The result is validated as a
 * whole, as Kafka does: topic values INVALID_CONFIG; GROUP (32) names and values follow
 * Kafka 4.4's GroupConfig (INVALID_CONFIG, server/group-configs.ts); broker names must be dynamic
 * (INVALID_REQUEST). Duplicate resources or keys, null values for non-DELETE operations and
 * unknown operations are INVALID_REQUEST. validateOnly checks and changes nothing.
 * Authorization: ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED) or, for a broker
 * resource, on the cluster (CLUSTER_AUTHORIZATION_FAILED), for a group on the group
 * (GROUP_AUTHORIZATION_FAILED).
 * Version notes: v1 is flexible.
 */

import type { ClusterImage } from '../../metadata/cluster-image.js'
import { currentOverrides } from '../../metadata/topic-admin.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type IncrementalAlterConfigsRequest,
  type IncrementalAlterConfigsRequestAlterableConfig,
  type IncrementalAlterConfigsResponse,
} from '../../protocol/generated/index.js'
import { AclOperation } from '../../security/authorizer/acl.js'
import type { BrokerConfig } from '../broker-config.js'
import {
  type AlterTarget,
  alterResources,
  ConfigResourceError,
  configAuthorizationError,
  effectiveValue,
  isListConfig,
  rejectNullValues,
} from '../config-resources.js'
import type { ApiHandler } from './registry.js'

const OP_SET = 0
const OP_DELETE = 1
const OP_APPEND = 2
const OP_SUBTRACT = 3
const OP_NAMES = ['SET', 'DELETE', 'APPEND', 'SUBTRACT']

export const incrementalAlterConfigsHandler: ApiHandler<
  IncrementalAlterConfigsRequest,
  IncrementalAlterConfigsResponse
> = {
  apiKey: ApiKey.IncrementalAlterConfigs,
  minVersion: 0,
  maxVersion: 1,
  async handle(context, request) {
    const config = context.broker.config
    const responses = await alterResources<IncrementalAlterConfigsRequestAlterableConfig>(
      context.broker,
      request.resources,
      request.validateOnly,
      (image, target, ops) => apply(image, config, target, ops),
      (type, name) => configAuthorizationError(context, AclOperation.ALTER_CONFIGS, type, name),
    )
    return { throttleTimeMs: 0, responses }
  },
}

function apply(
  image: ClusterImage,
  config: BrokerConfig,
  target: AlterTarget,
  ops: readonly IncrementalAlterConfigsRequestAlterableConfig[],
): Record<string, string> {
  for (const op of ops) {
    if (op.configOperation < OP_SET || op.configOperation > OP_SUBTRACT) {
      throw new ConfigResourceError(
        ErrorCode.INVALID_REQUEST,
        `Unknown alter configs operation type ${op.configOperation}`,
      )
    }
  }
  rejectNullValues(
    ops.filter((op) => op.configOperation !== OP_DELETE && op.value === null).map((op) => op.name),
  )
  const overrides = currentOverrides(image, target)
  for (const op of ops) {
    switch (op.configOperation) {
      case OP_SET:
        overrides[op.name] = op.value as string
        break
      case OP_DELETE:
        delete overrides[op.name]
        break
      default: {
        if (!isListConfig(target, op.name)) {
          throw new ConfigResourceError(
            ErrorCode.INVALID_CONFIG,
            `Can't ${OP_NAMES[op.configOperation]} to key ${op.name} because its type is not LIST.`,
          )
        }
        const start = overrides[op.name] ?? effectiveValue(image, config, target, op.name) ?? ''
        const items = start === '' ? [] : start.split(',').map((item) => item.trim())
        const operands = (op.value as string).split(',').map((item) => item.trim())
        const result =
          op.configOperation === OP_APPEND
            ? [...items, ...operands.filter((item) => !items.includes(item))]
            : items.filter((item) => !operands.includes(item))
        overrides[op.name] = result.join(',')
      }
    }
  }
  return overrides
}
