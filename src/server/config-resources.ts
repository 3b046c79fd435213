/**
 * Config resources shared by DescribeConfigs, AlterConfigs and IncrementalAlterConfigs:
 * what a TOPIC or BROKER resource holds (values, sources, synonyms), which names may be
 * changed, and how a new set of overrides is validated and written to the cluster image.
 * Failures carry a Kafka error code and Kafka's message (ConfigResourceError).
 */
import type { ConfigDef } from '../common/config-def.js'
import { ConfigError } from '../common/errors.js'
import {
  CLUSTER_DEFAULT_BROKER_CONFIG,
  type ClusterImage,
  dynamicBrokerConfigs,
} from '../metadata/cluster-image.js'
import { CommitFailedError, type ConfigChange, type ConfigTarget } from '../metadata/topic-admin.js'
import {
  brokerConfigSynonyms,
  brokerTopicDefaults,
  type ConfigSource,
  type ConfigSynonym,
  ConfigTypeId,
  checkKafkaRule,
  effectiveBrokerValue,
  parseKafkaValue,
  resolveTopicConfig,
  ConfigSource as Source,
  topicConfigDef,
  validateTopicConfigs,
} from '../metadata/topic-config.js'
import { topicNameProblem } from '../metadata/topic-name.js'
import { ErrorCode, errorMessage } from '../protocol/error-codes.js'
import {
  type AclOperation,
  ResourceType as AclResourceType,
  CLUSTER_NAME,
} from '../security/authorizer/acl.js'
import { type BrokerConfig, brokerConfigDefs } from './broker-config.js'
import type { BrokerServices } from './broker-services.js'
import {
  describeGroupConfigs,
  GROUP_CONFIG_RESOURCE,
  GroupConfigError,
  groupConfigDefault,
  isGroupListConfig,
  validateGroupConfigs,
} from './group-configs.js'
import { isPerBrokerOnly, KAFKA_DYNAMIC_BROKER_CONFIGS } from './kafka-dynamic-configs.js'
import type { RequestContext } from './request-context.js'
import {
  CLIENT_METRICS_CONFIG_DEFS,
  SubscriptionConfigError,
  validateSubscription,
} from './telemetry/client-metrics-config.js'

/** ConfigResource.Type ids. */
export const ResourceType = {
  UNKNOWN: 0,
  ANY: 1,
  TOPIC: 2,
  BROKER: 4,
  BROKER_LOGGER: 8,
  CLIENT_METRICS: 16,
  GROUP: GROUP_CONFIG_RESOURCE,
} as const

const RESOURCE_TYPE_NAMES = new Map<number, string>(
  Object.entries(ResourceType).map(([name, id]) => [id, name]),
)

export function resourceTypeName(type: number): string {
  return RESOURCE_TYPE_NAMES.get(type) ?? 'UNKNOWN'
}

/** A resource-level failure: a Kafka error code and Kafka's message. */
export class ConfigResourceError extends Error {
  constructor(
    readonly errorCode: number,
    message: string,
  ) {
    super(message)
    this.name = 'ConfigResourceError'
  }
}

/** One config entry as DescribeConfigs reports it. */
export interface DescribedConfig {
  readonly name: string
  readonly value: string | null
  readonly source: ConfigSource
  readonly synonyms: readonly ConfigSynonym[]
  readonly readOnly: boolean
  readonly sensitive: boolean
  /** DescribeConfigs v3 configType id. */
  readonly configType: number
  readonly documentation: string
}

/** Everything a TOPIC, BROKER or BROKER_LOGGER resource holds, Kafka's errors otherwise. */
export function describeResource(
  image: ClusterImage,
  config: BrokerConfig,
  resourceType: number,
  resourceName: string,
): DescribedConfig[] {
  switch (resourceType) {
    case ResourceType.TOPIC:
      return describeTopic(image, config, resourceName)
    case ResourceType.BROKER:
      return describeBroker(image, config, resourceName)
    case ResourceType.BROKER_LOGGER:
      // tidelog has no log4j loggers to list; Kafka checks the broker id the same way.
      brokerIdOf(config, resourceName, 'describe')
      return []
    case ResourceType.CLIENT_METRICS:
      return describeClientMetrics(image, resourceName)
    case ResourceType.GROUP:
      return describeGroupConfigs(image, config, groupIdOf(resourceName, 'describe')).map((c) => ({
        ...c,
        readOnly: false,
        sensitive: false,
      }))
    default:
      throw new ConfigResourceError(
        ErrorCode.INVALID_REQUEST,
        `Unsupported resource type: ${resourceTypeName(resourceType)}`,
      )
  }
}

function describeTopic(image: ClusterImage, config: BrokerConfig, topic: string): DescribedConfig[] {
  const problem = topicNameProblem(topic)
  if (problem !== null) throw new ConfigResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
  if (!image.topics.has(topic)) {
    throw new ConfigResourceError(
      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
      errorMessage(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    )
  }
  return [...resolveTopicConfig(image, config, topic)].map(([name, resolved]) => ({
    name,
    value: resolved.sensitive ? null : resolved.value,
    source: resolved.source,
    synonyms: resolved.synonyms,
    readOnly: resolved.readOnly,
    sensitive: resolved.sensitive,
    configType: ConfigTypeId[resolved.type],
    documentation: resolved.doc,
  }))
}

/**
 * A client metrics subscription, as Kafka 4 lists it: its three configs, those it sets with
 * source CLIENT_METRICS_CONFIG, the others with their defaults (DEFAULT_CONFIG). A name no
 * subscription has lists the defaults; an empty name is INVALID_REQUEST.
 */
function describeClientMetrics(image: ClusterImage, name: string): DescribedConfig[] {
  if (name === '') {
    throw new ConfigResourceError(
      ErrorCode.INVALID_REQUEST,
      'Client metrics subscription name must not be empty',
    )
  }
  const set = image.clientMetricsConfigs?.get(name) ?? {}
  return CLIENT_METRICS_CONFIG_DEFS.map((def) => ({
    name: def.name,
    value: set[def.name] ?? def.defaultValue,
    source: set[def.name] === undefined ? Source.DEFAULT_CONFIG : Source.CLIENT_METRICS_CONFIG,
    synonyms: [],
    readOnly: false,
    sensitive: false,
    configType: ConfigTypeId[def.type],
    documentation: def.doc,
  }))
}

/**
 * '' (the cluster default) lists only the dynamic defaults; this broker's id lists every
 * broker property with its current value; any other id is INVALID_REQUEST, as in Kafka.
 */
function describeBroker(image: ClusterImage, config: BrokerConfig, resourceName: string): DescribedConfig[] {
  const perBroker = brokerIdOf(config, resourceName, 'describe') !== null
  const names = perBroker
    ? brokerConfigDefs.defs.map((d) => d.name)
    : Object.keys(dynamicBrokerConfigs(image, CLUSTER_DEFAULT_BROKER_CONFIG)).sort()
  const result: DescribedConfig[] = []
  for (const name of names) {
    const def = brokerConfigDefs.get(name)
    const sensitive = def === undefined || def.type === 'password' || def.sensitive === true
    const synonyms = brokerConfigSynonyms(image, config, brokerSynonymNames(name), perBroker).map((s) =>
      sensitive ? { ...s, value: null } : s,
    )
    const value = perBroker
      ? effectiveBrokerValue(image, config, name)
      : dynamicBrokerConfigs(image, CLUSTER_DEFAULT_BROKER_CONFIG)[name]
    result.push({
      name,
      value: sensitive ? null : (value ?? null),
      source: synonyms.length === 0 ? Source.DEFAULT_CONFIG : synonyms[0].source,
      synonyms,
      readOnly: def?.dynamic !== true,
      sensitive,
      configType: def ? ConfigTypeId[def.type] : ConfigTypeId.unknown,
      documentation: def?.doc ?? '',
    })
  }
  return result
}

/** Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the names one broker setting answers to. */
export function brokerSynonymNames(name: string): string[] {
  switch (name) {
    case 'log.roll.ms':
    case 'log.roll.hours':
      return ['log.roll.ms', 'log.roll.hours']
    case 'log.roll.jitter.ms':
    case 'log.roll.jitter.hours':
      return ['log.roll.jitter.ms', 'log.roll.jitter.hours']
    case 'log.flush.interval.ms':
      return ['log.flush.interval.ms', 'log.flush.scheduler.interval.ms']
    case 'log.retention.ms':
    case 'log.retention.minutes':
    case 'log.retention.hours':
      return ['log.retention.ms', 'log.retention.minutes', 'log.retention.hours']
    default:
      return [name]
  }
}

/**
 * The broker id a BROKER resource names: null for '' (cluster default), this broker's id,
 * or INVALID_REQUEST with Kafka's message for a non-number or another broker.
 */
export function brokerIdOf(
  config: BrokerConfig,
  resourceName: string,
  use: 'describe' | 'alter',
): number | null {
  if (resourceName === '') return null
  if (!/^-?\d+$/.test(resourceName)) {
    throw new ConfigResourceError(
      ErrorCode.INVALID_REQUEST,
      use === 'describe'
        ? `Broker id must be an integer, but it is: ${resourceName}`
        : `Node id must be an integer, but it is: ${resourceName}`,
    )
  }
  const id = Number(resourceName)
  if (id !== config.nodeId) {
    throw new ConfigResourceError(
      ErrorCode.INVALID_REQUEST,
      use === 'describe'
        ? `Unexpected broker id, expected ${config.nodeId} or empty string, but received ${resourceName}`
        : `Unexpected broker id, expected ${config.nodeId}, but received ${resourceName}`,
    )
  }
  return id
}

/** A GROUP resource's group id; an empty one is INVALID_REQUEST with Kafka's messages. */
function groupIdOf(resourceName: string, use: 'describe' | 'alter'): string {
  if (resourceName === '') {
    throw new ConfigResourceError(
      ErrorCode.INVALID_REQUEST,
      use === 'describe' ? 'Group name must not be empty' : 'Default group resources are not allowed.',
    )
  }
  return resourceName
}

/** Where a resource's overrides live in the image. */
export type AlterTarget = ConfigTarget

/** Checks that an alterable resource exists and says where its overrides are kept. */
export function alterTarget(
  image: ClusterImage,
  config: BrokerConfig,
  resourceType: number,
  resourceName: string,
): AlterTarget {
  if (resourceType === ResourceType.TOPIC) {
    if (resourceName === '') {
      throw new ConfigResourceError(ErrorCode.INVALID_REQUEST, 'Default topic resources are not allowed.')
    }
    const problem = topicNameProblem(resourceName)
    if (problem !== null) throw new ConfigResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    if (!image.topics.has(resourceName)) {
      throw new ConfigResourceError(
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        `The topic '${resourceName}' does not exist.`,
      )
    }
    return { kind: 'topic', topic: resourceName }
  }
  if (resourceType === ResourceType.BROKER) {
    const id = brokerIdOf(config, resourceName, 'alter')
    return { kind: 'broker', key: id === null ? CLUSTER_DEFAULT_BROKER_CONFIG : String(id) }
  }
  if (resourceType === ResourceType.BROKER_LOGGER) {
    throw new ConfigResourceError(
      ErrorCode.INVALID_REQUEST,
      'tidelog has no log4j loggers: BROKER_LOGGER resources cannot be altered',
    )
  }
  if (resourceType === ResourceType.CLIENT_METRICS) {
    if (resourceName === '') {
      throw new ConfigResourceError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    }
    return { kind: 'client-metrics', name: resourceName }
  }
  if (resourceType === ResourceType.GROUP) return { kind: 'group', groupId: groupIdOf(resourceName, 'alter') }
  throw new ConfigResourceError(
    ErrorCode.INVALID_REQUEST,
    `Unsupported resource type: ${resourceTypeName(resourceType)}`,
  )
}

/** The value an APPEND/SUBTRACT starts from when there is no override: what the resource uses now. */
export function effectiveValue(
  image: ClusterImage,
  config: BrokerConfig,
  target: AlterTarget,
  name: string,
): string | null {
  if (target.kind === 'topic') return resolveTopicConfig(image, config, target.topic).get(name)?.value ?? null
  if (target.kind === 'client-metrics') {
    return CLIENT_METRICS_CONFIG_DEFS.find((d) => d.name === name)?.defaultValue ?? null
  }
  if (target.kind === 'group') return groupConfigDefault(config, name)
  return effectiveBrokerValue(image, config, name)
}

/** Whether a config is a LIST (the only type APPEND and SUBTRACT apply to). */
export function isListConfig(target: AlterTarget, name: string): boolean {
  if (target.kind === 'topic') return topicConfigDef(name)?.type === 'list'
  // Kafka 4.4 knows the types of topic and broker configs only: APPEND or SUBTRACT on a
  // client metrics subscription's `metrics` or `match` is INVALID_CONFIG there too.
  if (target.kind === 'client-metrics') return false
  if (target.kind === 'group') return isGroupListConfig(name)
  return brokerConfigDefs.get(name)?.type === 'list'
}

/**
 * Validates a resource's complete new overrides. Topics: Kafka's LogConfig rules
 * (INVALID_CONFIG). Brokers, as Kafka's DynamicBrokerConfig.validateConfigs: no static
 * broker config (INVALID_REQUEST "Cannot update these configs dynamically: Set(...)"), no
 * per-broker-only name at the cluster default, then the values of the names tidelog knows
 * (INVALID_REQUEST, as Kafka's KAFKA-13609).
 */
export function validateOverrides(
  image: ClusterImage,
  config: BrokerConfig,
  target: AlterTarget,
  overrides: Readonly<Record<string, string>>,
): void {
  if (target.kind === 'topic') {
    try {
      validateTopicConfigs(overrides, brokerTopicDefaults(image, config))
    } catch (error) {
      if (error instanceof ConfigError) throw new ConfigResourceError(ErrorCode.INVALID_CONFIG, error.message)
      throw error
    }
    return
  }
  if (target.kind === 'group') {
    try {
      validateGroupConfigs(config, overrides)
    } catch (error) {
      if (!(error instanceof GroupConfigError)) throw error
      throw new ConfigResourceError(error.errorCode, error.message)
    }
    return
  }
  if (target.kind === 'client-metrics') {
    try {
      validateSubscription(target.name, overrides)
    } catch (error) {
      if (!(error instanceof SubscriptionConfigError)) throw error
      throw new ConfigResourceError(ErrorCode[error.kind], error.message)
    }
    return
  }
  // Kafka refuses only its own static broker configs: a dynamic name tidelog does not
  // implement, or a name that is no broker config at all (a plugin's, a topic config's),
  // is stored and has no effect (docs/accepted-configs.md).
  const names = Object.keys(overrides)
  const nonDynamic = names.filter((name) => {
    const def = brokerConfigDefs.get(name)
    return def !== undefined && def.dynamic !== true && !KAFKA_DYNAMIC_BROKER_CONFIGS.has(name)
  })
  if (nonDynamic.length > 0) {
    throw new ConfigResourceError(
      ErrorCode.INVALID_REQUEST,
      `Cannot update these configs dynamically: Set(${nonDynamic.join(', ')})`,
    )
  }
  const perBrokerOnly = target.key === CLUSTER_DEFAULT_BROKER_CONFIG ? names.filter(isPerBrokerOnly) : []
  if (perBrokerOnly.length > 0) {
    throw new ConfigResourceError(
      ErrorCode.INVALID_REQUEST,
      `Cannot update these configs at default cluster level, broker id must be specified: Set(${perBrokerOnly.join(', ')})`,
    )
  }
  for (const [name, raw] of Object.entries(overrides)) {
    const def: ConfigDef | undefined = brokerConfigDefs.get(name)
    if (def === undefined) continue
    try {
      const value = parseKafkaValue(name, def.type, raw)
      checkKafkaRule(name, value, def.validator)
    } catch (error) {
      if (error instanceof ConfigError)
        throw new ConfigResourceError(ErrorCode.INVALID_REQUEST, error.message)
      throw error
    }
  }
}

/** One resource of an AlterConfigs or IncrementalAlterConfigs request. */
export interface AlterRequestResource<C> {
  readonly resourceType: number
  readonly resourceName: string
  readonly configs: readonly C[]
}

export interface AlterResult {
  resourceType: number
  resourceName: string
  errorCode: number
  errorMessage: string | null
}

/**
 * Kafka's shared AlterConfigs/IncrementalAlterConfigs flow: duplicate resources and keys
 * are INVALID_REQUEST, `nextOverrides` computes each resource's complete new overrides
 * from the current image, they are validated, and (unless validateOnly) all valid
 * resources change in one metadata update. Each resource succeeds or fails alone.
 */
export async function alterResources<C extends { name: string }>(
  broker: BrokerServices,
  resources: readonly AlterRequestResource<C>[],
  validateOnly: boolean,
  nextOverrides: (image: ClusterImage, target: AlterTarget, configs: readonly C[]) => Record<string, string>,
  /** The authorization error of a resource the caller may not alter (configAuthorizationError). */
  denied: (resourceType: number, resourceName: string) => ConfigResourceError | null = () => null,
): Promise<AlterResult[]> {
  const key = (r: AlterRequestResource<C>) => `${r.resourceType}:${r.resourceName}`
  const counts = new Map<string, number>()
  for (const r of resources) counts.set(key(r), (counts.get(key(r)) ?? 0) + 1)
  let planned: AlterResult[] = []
  try {
    return await broker.topicAdmin.alterConfigs((image) => {
      const changes: ConfigChange[] = []
      const results = resources.map((resource): AlterResult => {
        const base = { resourceType: resource.resourceType, resourceName: resource.resourceName }
        try {
          const authorizationError = denied(resource.resourceType, resource.resourceName)
          if (authorizationError !== null) throw authorizationError
          if ((counts.get(key(resource)) ?? 0) > 1) {
            throw new ConfigResourceError(ErrorCode.INVALID_REQUEST, 'Duplicate resource.')
          }
          const names = resource.configs.map((c) => c.name)
          if (new Set(names).size !== names.length) {
            throw new ConfigResourceError(ErrorCode.INVALID_REQUEST, 'Error due to duplicate config keys')
          }
          const target = alterTarget(image, broker.config, resource.resourceType, resource.resourceName)
          const overrides = nextOverrides(image, target, resource.configs)
          validateOverrides(image, broker.config, target, overrides)
          if (!validateOnly) {
            changes.push({ target, overrides })
            broker.logger.info({ resource: base, overrides }, 'configs altered')
          }
          return { ...base, errorCode: ErrorCode.NONE, errorMessage: null }
        } catch (error) {
          if (!(error instanceof ConfigResourceError)) throw error
          return { ...base, errorCode: error.errorCode, errorMessage: error.message }
        }
      })
      planned = results
      return { changes, result: results }
    })
  } catch (error) {
    // The store did not commit: every resource that would have changed gets its outcome.
    if (!(error instanceof CommitFailedError)) throw error
    return planned.map((r) => (r.errorCode === ErrorCode.NONE ? { ...r, ...error.outcome } : r))
  }
}

/** INVALID_REQUEST "Null value not supported for : a, b" when any of `names` has a null value. */
export function rejectNullValues(names: readonly string[]): void {
  if (names.length > 0) {
    throw new ConfigResourceError(
      ErrorCode.INVALID_REQUEST,
      `Null value not supported for : ${names.join(', ')}`,
    )
  }
}

/**
 * Kafka's authorization of config resources: a TOPIC needs `operation` (DESCRIBE_CONFIGS or
 * ALTER_CONFIGS) on the topic, else TOPIC_AUTHORIZATION_FAILED; a BROKER or BROKER_LOGGER
 * needs it on the cluster, else CLUSTER_AUTHORIZATION_FAILED; so does a CLIENT_METRICS
 * subscription. A GROUP needs it on the group, else GROUP_AUTHORIZATION_FAILED. Other
 * types are left to the resource's own checks.
 */
export function configAuthorizationError(
  context: RequestContext,
  operation: AclOperation,
  resourceType: number,
  resourceName: string,
): ConfigResourceError | null {
  if (resourceType === ResourceType.TOPIC) {
    if (context.authorize(operation, AclResourceType.TOPIC, resourceName)) return null
    return new ConfigResourceError(
      ErrorCode.TOPIC_AUTHORIZATION_FAILED,
      errorMessage(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    )
  }
  if (resourceType === ResourceType.GROUP) {
    if (context.authorize(operation, AclResourceType.GROUP, resourceName)) return null
    return new ConfigResourceError(
      ErrorCode.GROUP_AUTHORIZATION_FAILED,
      errorMessage(ErrorCode.GROUP_AUTHORIZATION_FAILED),
    )
  }
  if (
    resourceType === ResourceType.BROKER ||
    resourceType === ResourceType.BROKER_LOGGER ||
    resourceType === ResourceType.CLIENT_METRICS
  ) {
    if (context.authorize(operation, AclResourceType.CLUSTER, CLUSTER_NAME)) return null
    return new ConfigResourceError(
      ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
      errorMessage(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    )
  }
  return null
}
