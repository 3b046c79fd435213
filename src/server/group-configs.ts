/**
 * Dynamic group configs (KIP-848, KIP-932): ConfigResource type GROUP, Kafka 4.4's
 * GroupConfig. Each group's overrides are kept cluster-wide in the cluster image (as Kafka
 * keeps them in ConfigRecords of type GROUP); a group without an override uses the
 * broker's value (its `group.*` synonym). Validation follows GroupConfig.validate: unknown
 * names, unparsable values and values outside the broker's min/max bounds are
 * INVALID_CONFIG with Kafka's messages.
 *
 * Applied by tidelog: share.auto.offset.reset, share.record.lock.duration.ms,
 * share.delivery.count.limit, share.partition.max.record.locks, share.isolation.level and
 * share.renew.acknowledge.enable (by the share-partitions), share.session.timeout.ms and
 * share.heartbeat.interval.ms (share heartbeats), consumer.session.timeout.ms and
 * consumer.heartbeat.interval.ms (KIP-848 heartbeats), consumer.assignment.interval.ms,
 * share.assignment.interval.ms and streams.assignment.interval.ms (target assignments). The others are stored and described and have no effect (docs/share-groups.md).
 */
import { ConfigError } from '../common/errors.js'
import type { ClusterImage } from '../metadata/cluster-image.js'
import {
  brokerConfigSynonyms,
  type ConfigSource,
  type ConfigSynonym,
  ConfigTypeId,
  checkKafkaRule,
  type ParsedValue,
  parseKafkaValue,
  ConfigSource as Source,
} from '../metadata/topic-config.js'
import { ErrorCode } from '../protocol/error-codes.js'
import type { IsolationLevel } from '../replication/partition.js'
import { type BrokerConfig, brokerConfigDefs } from './broker-config.js'
import type { ShareAutoOffsetReset } from './share/share-partition-manager.js'

/** ConfigResource.Type.GROUP. */
export const GROUP_CONFIG_RESOURCE = 32
/** DescribeConfigsResponse.ConfigSource.GROUP_CONFIG: a value the group sets. */
export const GROUP_CONFIG_SOURCE = 8 as ConfigSource

type GroupConfigType = 'int' | 'long' | 'boolean' | 'string' | 'list'

interface GroupConfigDef {
  readonly name: string
  readonly type: GroupConfigType
  /** Kafka's default, used when tidelog has no broker synonym. */
  readonly defaultValue: string
  /** The broker config whose value a group without an override uses. */
  readonly brokerSynonym?: string
  /** ConfigDef's own rule (atLeast, in). */
  readonly rule?: { min?: number; max?: number; oneOf?: readonly string[] }
  /** The broker's bounds: [min config, Kafka's min default, max config, Kafka's max default]. */
  readonly bounds?: readonly [string, number, string, number]
  /** A broker bound on one side only (Kafka's validateIntMin / validateIntMax): [config, Kafka's default]. */
  readonly atLeast?: readonly [string, number]
  readonly atMost?: readonly [string, number]
  readonly doc: string
}

const def = (
  name: string,
  type: GroupConfigType,
  defaultValue: string,
  doc: string,
  extra: Partial<Pick<GroupConfigDef, 'brokerSynonym' | 'rule' | 'bounds' | 'atLeast' | 'atMost'>> = {},
): GroupConfigDef => ({ name, type, defaultValue, doc, ...extra })

const minMax = (prefix: string, what: string, min: number, max: number) =>
  [`${prefix}.min.${what}`, min, `${prefix}.max.${what}`, max] as const

/** Kafka 4.4's GroupConfig, in its order. */
export const GROUP_CONFIG_DEFS: readonly GroupConfigDef[] = [
  def('consumer.session.timeout.ms', 'int', '45000', 'Session timeout of the consumer group members.', {
    brokerSynonym: 'group.consumer.session.timeout.ms',
    rule: { min: 1 },
    bounds: minMax('group.consumer', 'session.timeout.ms', 45000, 60000),
  }),
  def(
    'consumer.heartbeat.interval.ms',
    'int',
    '5000',
    'Heartbeat interval given to consumer group members.',
    {
      brokerSynonym: 'group.consumer.heartbeat.interval.ms',
      rule: { min: 1 },
      bounds: minMax('group.consumer', 'heartbeat.interval.ms', 5000, 15000),
    },
  ),
  def(
    'consumer.assignment.interval.ms',
    'int',
    '1000',
    'Interval between consumer group assignment updates.',
    {
      brokerSynonym: 'group.consumer.assignment.interval.ms',
      rule: { min: 0 },
      bounds: minMax('group.consumer', 'assignment.interval.ms', 0, 15000),
    },
  ),
  def(
    'consumer.assignor.offload.enable',
    'boolean',
    'true',
    'Whether assignment runs off the coordinator thread.',
    {
      brokerSynonym: 'group.consumer.assignor.offload.enable',
    },
  ),
  def('share.session.timeout.ms', 'int', '45000', 'Session timeout of the share group members.', {
    brokerSynonym: 'group.share.session.timeout.ms',
    rule: { min: 1 },
    bounds: minMax('group.share', 'session.timeout.ms', 45000, 60000),
  }),
  def('share.heartbeat.interval.ms', 'int', '5000', 'Heartbeat interval given to share group members.', {
    brokerSynonym: 'group.share.heartbeat.interval.ms',
    rule: { min: 1 },
    bounds: minMax('group.share', 'heartbeat.interval.ms', 5000, 15000),
  }),
  def('share.record.lock.duration.ms', 'int', '30000', 'Acquisition lock duration of share group records.', {
    brokerSynonym: 'group.share.record.lock.duration.ms',
    rule: { min: 1000 },
    bounds: minMax('group.share', 'record.lock.duration.ms', 15000, 60000),
  }),
  def('share.delivery.count.limit', 'int', '5', 'Delivery attempts of a record to a share group.', {
    brokerSynonym: 'group.share.delivery.count.limit',
    rule: { min: 2 },
    bounds: minMax('group.share', 'delivery.count.limit', 2, 10),
  }),
  def(
    'share.partition.max.record.locks',
    'int',
    '2000',
    'Share-group record lock limit per share-partition.',
    {
      brokerSynonym: 'group.share.partition.max.record.locks',
      rule: { min: 100 },
      bounds: minMax('group.share', 'partition.max.record.locks', 100, 10000),
    },
  ),
  // Kafka's default is latest; tidelog's broker-wide tidelog.share.auto.offset.reset stands in.
  def('share.auto.offset.reset', 'string', 'latest', 'Where a new share-partition starts.', {
    brokerSynonym: 'tidelog.share.auto.offset.reset',
    // by_duration:<ISO8601> is Kafka's too; tidelog cannot apply it, so refuses it.
    rule: { oneOf: ['latest', 'earliest'] },
  }),
  def(
    'share.isolation.level',
    'string',
    'read_uncommitted',
    'How a share group reads transactional records.',
    {
      rule: { oneOf: ['read_committed', 'read_uncommitted'] },
    },
  ),
  def('share.renew.acknowledge.enable', 'boolean', 'true', 'Whether the renew acknowledge type is enabled.'),
  def('share.assignment.interval.ms', 'int', '1000', 'Interval between share group assignment updates.', {
    brokerSynonym: 'group.share.assignment.interval.ms',
    rule: { min: 0 },
    bounds: minMax('group.share', 'assignment.interval.ms', 0, 15000),
  }),
  def(
    'share.assignor.offload.enable',
    'boolean',
    'true',
    'Whether assignment runs off the coordinator thread.',
    {
      brokerSynonym: 'group.share.assignor.offload.enable',
    },
  ),
  def('streams.session.timeout.ms', 'int', '45000', 'Session timeout of streams group members.', {
    brokerSynonym: 'group.streams.session.timeout.ms',
    rule: { min: 1 },
    bounds: minMax('group.streams', 'session.timeout.ms', 45000, 60000),
  }),
  def('streams.heartbeat.interval.ms', 'int', '5000', 'Heartbeat interval given to streams group members.', {
    brokerSynonym: 'group.streams.heartbeat.interval.ms',
    rule: { min: 1 },
    bounds: minMax('group.streams', 'heartbeat.interval.ms', 5000, 15000),
  }),
  def('streams.num.standby.replicas', 'int', '0', 'Standby replicas of each streams task.', {
    brokerSynonym: 'group.streams.num.standby.replicas',
    rule: { min: 0 },
    atMost: ['group.streams.max.standby.replicas', 2],
  }),
  def('streams.initial.rebalance.delay.ms', 'int', '3000', 'Delay of a streams group first rebalance.', {
    brokerSynonym: 'group.streams.initial.rebalance.delay.ms',
    rule: { min: 0 },
  }),
  def('streams.assignment.interval.ms', 'int', '1000', 'Interval between streams group assignment updates.', {
    brokerSynonym: 'group.streams.assignment.interval.ms',
    rule: { min: 0 },
    bounds: minMax('group.streams', 'assignment.interval.ms', 0, 15000),
  }),
  def(
    'streams.assignor.offload.enable',
    'boolean',
    'true',
    'Whether assignment runs off the coordinator thread.',
    {
      brokerSynonym: 'group.streams.assignor.offload.enable',
    },
  ),
  def('streams.task.offset.interval.ms', 'int', '60000', 'Interval of streams task offset reports.', {
    brokerSynonym: 'group.streams.task.offset.interval.ms',
    rule: { min: 1 },
    atLeast: ['group.streams.min.task.offset.interval.ms', 15000],
  }),
  def('streams.num.warmup.replicas', 'int', '2', 'Warmup replicas of a streams group.', {
    brokerSynonym: 'group.streams.num.warmup.replicas',
    rule: { min: 0 },
    atMost: ['group.streams.max.warmup.replicas', 20],
  }),
  def('streams.rack.aware.assignment.tags', 'list', '', 'Client tag keys spreading standby replicas.', {
    brokerSynonym: 'group.streams.rack.aware.assignment.tags',
  }),
  def('streams.acceptable.recovery.lag', 'long', '10000', 'Lag under which a streams task is caught up.', {
    brokerSynonym: 'group.streams.acceptable.recovery.lag',
    rule: { min: 0 },
  }),
  def('streams.assignor.name', 'string', '', 'The task assignor of a streams group.'),
  def('errors.deadletterqueue.topic.name', 'string', '', 'The dead-letter queue topic of a share group.'),
  def(
    'errors.deadletterqueue.copy.record.enable',
    'boolean',
    'false',
    'Whether DLQ records copy the original.',
  ),
]

const DEFS_BY_NAME = new Map(GROUP_CONFIG_DEFS.map((d) => [d.name, d]))

/** A group config failure: INVALID_CONFIG (or INVALID_REQUEST) and Kafka's message. */
export class GroupConfigError extends Error {
  constructor(
    readonly errorCode: number,
    message: string,
  ) {
    super(message)
    this.name = 'GroupConfigError'
  }
}

/** The broker's value of a broker config, or `fallback` when tidelog has no such config. */
function brokerValue(config: BrokerConfig, name: string | undefined, fallback: string): string {
  if (name === undefined || brokerConfigDefs.get(name) === undefined) return fallback
  const value = config.values.get(name)
  if (value === undefined || value === null) return fallback
  return Array.isArray(value) ? value.join(',') : String(value)
}

function boundOf(config: BrokerConfig, name: string, kafkaDefault: number): number {
  return Number(brokerValue(config, name, String(kafkaDefault)))
}

/** The value a group uses when it sets none: the broker's. */
export function groupConfigDefault(config: BrokerConfig, name: string): string | null {
  const d = DEFS_BY_NAME.get(name)
  return d === undefined ? null : brokerValue(config, d.brokerSynonym, d.defaultValue)
}

/** Whether a group config is a LIST (APPEND and SUBTRACT apply to it). */
export function isGroupListConfig(name: string): boolean {
  return DEFS_BY_NAME.get(name)?.type === 'list'
}

/** The overrides a group sets. */
export function groupOverrides(image: ClusterImage, groupId: string): Readonly<Record<string, string>> {
  return image.groupConfigs?.get(groupId) ?? {}
}

/** GroupConfig.validate: names, values, the broker's bounds, session above heartbeat, the DLQ topic's name. */
export function validateGroupConfigs(
  config: BrokerConfig,
  overrides: Readonly<Record<string, string>>,
): void {
  for (const name of Object.keys(overrides)) {
    if (!DEFS_BY_NAME.has(name)) {
      throw new GroupConfigError(ErrorCode.INVALID_CONFIG, `Unknown group config name: ${name}`)
    }
  }
  const parsed = new Map<string, ParsedValue>()
  try {
    for (const [name, raw] of Object.entries(overrides)) {
      const d = DEFS_BY_NAME.get(name) as GroupConfigDef
      const value = parseKafkaValue(name, d.type, raw)
      checkKafkaRule(name, value, d.rule)
      parsed.set(name, value)
    }
  } catch (error) {
    if (error instanceof ConfigError) throw new GroupConfigError(ErrorCode.INVALID_CONFIG, error.message)
    throw error
  }
  for (const d of GROUP_CONFIG_DEFS) {
    const value = parsed.get(d.name)
    if (value === undefined) continue
    if (d.atMost !== undefined && Number(value) > boundOf(config, d.atMost[0], d.atMost[1]))
      throw new GroupConfigError(
        ErrorCode.INVALID_CONFIG,
        `${d.name} must be less than or equal to ${boundOf(config, d.atMost[0], d.atMost[1])}`,
      )
    if (d.atLeast !== undefined && Number(value) < boundOf(config, d.atLeast[0], d.atLeast[1]))
      throw new GroupConfigError(
        ErrorCode.INVALID_CONFIG,
        `${d.name} must be greater than or equal to ${boundOf(config, d.atLeast[0], d.atLeast[1])}`,
      )
    if (d.bounds === undefined) continue
    const min = boundOf(config, d.bounds[0], d.bounds[1])
    const max = boundOf(config, d.bounds[2], d.bounds[3])
    if (Number(value) < min || Number(value) > max) {
      throw new GroupConfigError(
        ErrorCode.INVALID_CONFIG,
        `${d.name} must be in the range ${min} to ${max} inclusive.`,
      )
    }
  }
  for (const kind of ['consumer', 'share', 'streams']) {
    const session = `${kind}.session.timeout.ms`
    const heartbeat = `${kind}.heartbeat.interval.ms`
    if (!parsed.has(session) && !parsed.has(heartbeat)) continue
    // The one not set is the broker's (Kafka compares against the broker default too).
    const sessionMs = Number(parsed.get(session) ?? groupConfigDefault(config, session))
    const heartbeatMs = Number(parsed.get(heartbeat) ?? groupConfigDefault(config, heartbeat))
    if (sessionMs <= heartbeatMs) {
      throw new GroupConfigError(ErrorCode.INVALID_CONFIG, `${session} must be greater than ${heartbeat}`)
    }
  }
  // Kafka 4.4 checks it last, though tidelog has no dead-letter queues (docs/share-groups.md).
  const dlqTopic = overrides['errors.deadletterqueue.topic.name']
  if (dlqTopic?.startsWith('__')) {
    throw new GroupConfigError(
      ErrorCode.INVALID_CONFIG,
      "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'",
    )
  }
}

/** One group config as DescribeConfigs lists it. */
export interface DescribedGroupConfig {
  readonly name: string
  readonly value: string | null
  readonly source: ConfigSource
  readonly synonyms: readonly ConfigSynonym[]
  readonly configType: number
  readonly documentation: string
}

/**
 * Every group config of `groupId`, as Kafka 4.4 describes it: the synonyms are the group's
 * own value (GROUP_CONFIG), then the broker's synonym where it has one (its dynamic, static
 * or default value), else Kafka's default under the group config's own name; the value and
 * source are the first synonym's.
 */
export function describeGroupConfigs(
  image: ClusterImage,
  config: BrokerConfig,
  groupId: string,
): DescribedGroupConfig[] {
  const set = groupOverrides(image, groupId)
  return GROUP_CONFIG_DEFS.map((d) => {
    const own: ConfigSynonym[] =
      set[d.name] === undefined ? [] : [{ name: d.name, value: set[d.name], source: GROUP_CONFIG_SOURCE }]
    const broker =
      d.brokerSynonym !== undefined && brokerConfigDefs.get(d.brokerSynonym) !== undefined
        ? brokerConfigSynonyms(image, config, [d.brokerSynonym])
        : [{ name: d.name, value: d.defaultValue, source: Source.DEFAULT_CONFIG }]
    const synonyms = [...own, ...broker]
    return {
      name: d.name,
      value: synonyms[0]?.value ?? null,
      source: synonyms[0]?.source ?? Source.DEFAULT_CONFIG,
      synonyms,
      configType: ConfigTypeId[d.type],
      documentation: d.doc,
    }
  })
}

/** What a share group's share-partitions use: its overrides, else the broker's values. */
export interface ShareGroupSettings {
  readonly autoOffsetReset: ShareAutoOffsetReset
  readonly recordLockDurationMs: number
  readonly deliveryCountLimit: number
  readonly maxInFlightRecords: number
  readonly isolationLevel: IsolationLevel
  readonly renewAcknowledgeEnabled: boolean
}

export function shareGroupSettings(
  image: ClusterImage,
  config: BrokerConfig,
  groupId: string,
): ShareGroupSettings {
  const set = groupOverrides(image, groupId)
  const value = (name: string) => set[name] ?? (groupConfigDefault(config, name) as string)
  return {
    autoOffsetReset: value('share.auto.offset.reset').trim() as ShareAutoOffsetReset,
    recordLockDurationMs: Number(value('share.record.lock.duration.ms')),
    deliveryCountLimit: Number(value('share.delivery.count.limit')),
    maxInFlightRecords: Number(value('share.partition.max.record.locks')),
    isolationLevel: value('share.isolation.level').trim() as IsolationLevel,
    renewAcknowledgeEnabled: value('share.renew.acknowledge.enable').trim().toLowerCase() === 'true',
  }
}
