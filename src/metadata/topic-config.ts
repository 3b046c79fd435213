/**
 * Kafka 3.9's topic-level configs: names, types, defaults, validators and the broker
 * property each one falls back to (its "synonyms", most specific first). Resolution
 * follows Kafka: a topic override (TOPIC_CONFIG) beats the dynamic per-broker config,
 * which beats the dynamic cluster default, then the static server.properties value, then
 * Kafka's default. Values stay strings, as Kafka shows them; storage's LogConfig is built
 * from them once, in `logConfigFor`.
 */
import { type ConfigValue, formatConfigValue } from '../common/config-def.js'
import { ConfigError } from '../common/errors.js'
import { fromProperties, LOG_CONFIG_KEYS, type LogConfig } from '../storage/log-config.js'
import {
  type BrokerId,
  CLUSTER_DEFAULT_BROKER_CONFIG,
  type ClusterImage,
  dynamicBrokerConfigs,
} from './cluster-image.js'

/** DescribeConfigs' ConfigSource ids. */
export const ConfigSource = {
  UNKNOWN: 0,
  TOPIC_CONFIG: 1,
  DYNAMIC_BROKER_CONFIG: 2,
  DYNAMIC_DEFAULT_BROKER_CONFIG: 3,
  STATIC_BROKER_CONFIG: 4,
  DEFAULT_CONFIG: 5,
  DYNAMIC_BROKER_LOGGER_CONFIG: 6,
  CLIENT_METRICS_CONFIG: 7,
} as const
export type ConfigSource = (typeof ConfigSource)[keyof typeof ConfigSource]

/** DescribeConfigs v3+ configType ids. */
export const ConfigTypeId = {
  unknown: 0,
  boolean: 1,
  string: 2,
  int: 3,
  short: 4,
  long: 5,
  double: 6,
  list: 7,
  class: 8,
  password: 9,
} as const

export type TopicConfigType = 'int' | 'long' | 'double' | 'boolean' | 'string' | 'list'

/** A broker property a topic config falls back to; `scale` converts its unit (hours → ms). */
export interface BrokerSynonym {
  readonly name: string
  readonly scale?: number
}

export type ParsedValue = number | bigint | boolean | string | string[]

export interface TopicConfigDef {
  readonly name: string
  readonly type: TopicConfigType
  /** Kafka's default, as DescribeConfigs shows it. */
  readonly defaultValue: string
  readonly doc: string
  /** Kafka's validator: returns the reason a parsed value is refused, or null. */
  readonly check?: (value: ParsedValue) => string | null
  /** Broker properties this config falls back to, in Kafka's precedence order. */
  readonly brokerSynonyms: readonly BrokerSynonym[]
}

const LONG_MAX = '9223372036854775807'
const HOUR_MS = 3600000
const MINUTE_MS = 60000

function atLeast(min: number) {
  return (value: ParsedValue) => (Number(value) < min ? `Value must be at least ${min}` : null)
}

function between(min: number, max: number) {
  return (value: ParsedValue) => {
    if (Number(value) < min) return `Value must be at least ${min}`
    if (Number(value) > max) return `Value must be no more than ${max}`
    return null
  }
}

function oneOf(...allowed: string[]) {
  return (value: ParsedValue) => {
    const items = Array.isArray(value) ? value : [String(value)]
    return items.every((item) => allowed.includes(item))
      ? null
      : `String must be one of: ${allowed.join(', ')}`
  }
}

/** cleanup.policy: a non-empty list of compact and delete (storage needs at least one). */
function cleanupPolicy(value: ParsedValue): string | null {
  const items = value as string[]
  if (items.length === 0 || items.some((item) => item !== 'compact' && item !== 'delete')) {
    return 'String must be one of: compact, delete'
  }
  return null
}

/** compression.gzip.level: 1 to 9, or -1 for zlib's default. */
function gzipLevel(value: ParsedValue): string | null {
  const level = Number(value)
  return level === -1 || (level >= 1 && level <= 9) ? null : 'Value must be between 1 and 9, or -1'
}

/** Throttled replica lists: '*' or `partition:broker` pairs. */
function throttledReplicas(value: ParsedValue): string | null {
  const items = value as string[]
  if (items.length === 1 && items[0] === '*') return null
  if (items.every((item) => /^\d+:\d+$/.test(item))) return null
  return "must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
}

/**
 * Kafka 3.9's MetadataVersion releases and how many "-IVn" sub-versions each has (0: none,
 * the releases before 0.10.0 have no sub-version).
 */
const METADATA_RELEASES: readonly (readonly [string, number])[] = [
  ['0.8.0', 0],
  ['0.8.1', 0],
  ['0.8.2', 0],
  ['0.9.0', 0],
  ['0.10.0', 2],
  ['0.10.1', 3],
  ['0.10.2', 1],
  ['0.11.0', 3],
  ['1.0', 1],
  ['1.1', 1],
  ['2.0', 2],
  ['2.1', 3],
  ['2.2', 2],
  ['2.3', 2],
  ['2.4', 2],
  ['2.5', 1],
  ['2.6', 1],
  ['2.7', 3],
  ['2.8', 2],
  ['3.0', 2],
  ['3.1', 1],
  ['3.2', 1],
  ['3.3', 4],
  ['3.4', 1],
  ['3.5', 3],
  ['3.6', 3],
  ['3.7', 5],
  ['3.8', 1],
  ['3.9', 1],
]

/** The strings MetadataVersion.fromVersionString looks up: each release and each "release-IVn". */
const METADATA_VERSION_KEYS: ReadonlySet<string> = new Set(
  METADATA_RELEASES.flatMap(([release, subVersions]) => [
    release,
    ...Array.from({ length: subVersions }, (_, n) => `${release}-IV${n}`),
  ]),
)

/**
 * message.format.version, validated as Kafka's MetadataVersionValidator does (deprecated and
 * ignored for v2 logs since 3.0, but still checked): the first three dot-separated parts of a
 * 0.x version and the first two of any other are looked up, so `0.10.0.0`, `0.10.0-IV1`,
 * `2.8.1` and `3.0-IV1` are all legal.
 */
function metadataVersion(value: ParsedValue): string | null {
  const text = String(value)
  const segments = text.split('.')
  const kept = text.startsWith('0.') ? 3 : 2
  const key = kept >= segments.length ? text : segments.slice(0, kept).join('.')
  return METADATA_VERSION_KEYS.has(key) ? null : `Version ${text} is not a valid version`
}

function topicDef(
  name: string,
  type: TopicConfigType,
  defaultValue: string,
  doc: string,
  check: TopicConfigDef['check'] | undefined,
  ...brokerSynonyms: (string | BrokerSynonym)[]
): TopicConfigDef {
  return {
    name,
    type,
    defaultValue,
    doc,
    check,
    brokerSynonyms: brokerSynonyms.map((s) => (typeof s === 'string' ? { name: s } : s)),
  }
}

/** Every topic-level config of Kafka 3.9, by name. */
export const TOPIC_CONFIG_DEFS: readonly TopicConfigDef[] = [
  topicDef(
    'cleanup.policy',
    'list',
    'delete',
    'Retention policy of old segments: "delete" discards them by time or size, "compact" keeps the latest value per key.',
    cleanupPolicy,
    'log.cleanup.policy',
  ),
  topicDef(
    'compression.gzip.level',
    'int',
    '-1',
    'Compression level when compression.type is gzip.',
    gzipLevel,
    'compression.gzip.level',
  ),
  topicDef(
    'compression.lz4.level',
    'int',
    '9',
    'Compression level when compression.type is lz4.',
    between(1, 17),
    'compression.lz4.level',
  ),
  topicDef(
    'compression.type',
    'string',
    'producer',
    'Final compression of the topic\'s batches: a codec, "uncompressed", or "producer" to keep the producer\'s.',
    oneOf('uncompressed', 'zstd', 'lz4', 'snappy', 'gzip', 'producer'),
    'compression.type',
  ),
  topicDef(
    'compression.zstd.level',
    'int',
    '3',
    'Compression level when compression.type is zstd.',
    between(-131072, 22),
    'compression.zstd.level',
  ),
  topicDef(
    'delete.retention.ms',
    'long',
    '86400000',
    'How long delete tombstones are kept for compacted topics.',
    atLeast(0),
    'log.cleaner.delete.retention.ms',
  ),
  topicDef(
    'file.delete.delay.ms',
    'long',
    '60000',
    'Time to wait before deleting a file from the filesystem.',
    atLeast(0),
    'log.segment.delete.delay.ms',
  ),
  topicDef(
    'flush.messages',
    'long',
    LONG_MAX,
    'Messages appended between forced fsyncs of the log.',
    atLeast(1),
    'log.flush.interval.messages',
  ),
  topicDef(
    'flush.ms',
    'long',
    LONG_MAX,
    'Time between forced fsyncs of the log.',
    atLeast(0),
    'log.flush.interval.ms',
    'log.flush.scheduler.interval.ms',
  ),
  topicDef(
    'follower.replication.throttled.replicas',
    'list',
    '',
    "Replicas whose log replication is throttled on the follower side, as partition:broker pairs or '*'.",
    throttledReplicas,
  ),
  topicDef(
    'index.interval.bytes',
    'int',
    '4096',
    'Bytes appended between offset index entries.',
    atLeast(0),
    'log.index.interval.bytes',
  ),
  topicDef(
    'leader.replication.throttled.replicas',
    'list',
    '',
    "Replicas whose log replication is throttled on the leader side, as partition:broker pairs or '*'.",
    throttledReplicas,
  ),
  topicDef(
    'local.retention.bytes',
    'long',
    '-2',
    'Local size retention with tiered storage; -2 follows retention.bytes.',
    atLeast(-2),
    'log.local.retention.bytes',
  ),
  topicDef(
    'local.retention.ms',
    'long',
    '-2',
    'Local time retention with tiered storage; -2 follows retention.ms.',
    atLeast(-2),
    'log.local.retention.ms',
  ),
  topicDef(
    'max.compaction.lag.ms',
    'long',
    LONG_MAX,
    'Maximum time a record stays ineligible for compaction.',
    atLeast(1),
    'log.cleaner.max.compaction.lag.ms',
  ),
  topicDef(
    'max.message.bytes',
    'int',
    '1048588',
    'Largest record batch size allowed.',
    atLeast(0),
    'message.max.bytes',
  ),
  topicDef(
    'message.downconversion.enable',
    'boolean',
    'true',
    'Whether old consumers get down-converted batches.',
    undefined,
    'log.message.downconversion.enable',
  ),
  topicDef(
    'message.format.version',
    'string',
    '3.0-IV1',
    'Deprecated: ignored when inter.broker.protocol.version is 3.0 or higher.',
    metadataVersion,
    'log.message.format.version',
  ),
  topicDef(
    'message.timestamp.after.max.ms',
    'long',
    '3600000',
    'Largest allowed distance of a record timestamp ahead of the broker clock (CreateTime).',
    atLeast(0),
    'log.message.timestamp.after.max.ms',
  ),
  topicDef(
    'message.timestamp.before.max.ms',
    'long',
    LONG_MAX,
    'Largest allowed age of a record timestamp behind the broker clock (CreateTime).',
    atLeast(0),
    'log.message.timestamp.before.max.ms',
  ),
  topicDef(
    'message.timestamp.difference.max.ms',
    'long',
    LONG_MAX,
    'Deprecated: largest allowed difference between a record timestamp and the broker clock.',
    atLeast(0),
    'log.message.timestamp.difference.max.ms',
  ),
  topicDef(
    'message.timestamp.type',
    'string',
    'CreateTime',
    "Whether record timestamps are the producer's (CreateTime) or the broker's append time (LogAppendTime).",
    oneOf('CreateTime', 'LogAppendTime'),
    'log.message.timestamp.type',
  ),
  topicDef(
    'min.cleanable.dirty.ratio',
    'double',
    '0.5',
    'Ratio of uncompacted log that makes the log eligible for cleaning.',
    between(0, 1),
    'log.cleaner.min.cleanable.ratio',
  ),
  topicDef(
    'min.compaction.lag.ms',
    'long',
    '0',
    'Minimum time a record stays uncompacted.',
    atLeast(0),
    'log.cleaner.min.compaction.lag.ms',
  ),
  topicDef(
    'min.insync.replicas',
    'int',
    '1',
    'Replicas that must acknowledge an acks=all write.',
    atLeast(1),
    'min.insync.replicas',
  ),
  topicDef('preallocate', 'boolean', 'false', 'Preallocate segment files.', undefined, 'log.preallocate'),
  topicDef(
    'remote.log.copy.disable',
    'boolean',
    'false',
    'Stop copying segments to remote storage (tiered storage).',
    undefined,
  ),
  topicDef(
    'remote.log.delete.on.disable',
    'boolean',
    'false',
    'Delete remote data when tiered storage is disabled for the topic.',
    undefined,
  ),
  topicDef('remote.storage.enable', 'boolean', 'false', 'Use tiered storage for this topic.', undefined),
  topicDef(
    'retention.bytes',
    'long',
    '-1',
    'Largest size of a partition before old segments are deleted; -1 for no limit.',
    undefined,
    'log.retention.bytes',
  ),
  topicDef(
    'retention.ms',
    'long',
    '604800000',
    'How long segments are kept before deletion; -1 for no limit.',
    atLeast(-1),
    'log.retention.ms',
    { name: 'log.retention.minutes', scale: MINUTE_MS },
    { name: 'log.retention.hours', scale: HOUR_MS },
  ),
  topicDef('segment.bytes', 'int', '1073741824', 'Segment file size.', atLeast(14), 'log.segment.bytes'),
  topicDef(
    'segment.index.bytes',
    'int',
    '10485760',
    'Size of the offset index of a segment.',
    atLeast(4),
    'log.index.size.max.bytes',
  ),
  topicDef(
    'segment.jitter.ms',
    'long',
    '0',
    'Maximum random jitter subtracted from segment.ms.',
    atLeast(0),
    'log.roll.jitter.ms',
    { name: 'log.roll.jitter.hours', scale: HOUR_MS },
  ),
  topicDef(
    'segment.ms',
    'long',
    '604800000',
    'Time after which a segment is rolled even if not full.',
    atLeast(1),
    'log.roll.ms',
    { name: 'log.roll.hours', scale: HOUR_MS },
  ),
  topicDef(
    'unclean.leader.election.enable',
    'boolean',
    'false',
    'Allow replicas outside the ISR to become leader, at the risk of data loss.',
    undefined,
    'unclean.leader.election.enable',
  ),
]

const DEFS_BY_NAME: ReadonlyMap<string, TopicConfigDef> = new Map(TOPIC_CONFIG_DEFS.map((d) => [d.name, d]))

export function topicConfigDef(name: string): TopicConfigDef | undefined {
  return DEFS_BY_NAME.get(name)
}

const INT_MIN = -(2n ** 31n)
const INT_MAX = 2n ** 31n - 1n
const LONG_MIN_BIG = -(2n ** 63n)
const LONG_MAX_BIG = 2n ** 63n - 1n

/** Parses a value the way Kafka's ConfigDef.parseType does, with its messages. */
export function parseTopicConfigValue(def: TopicConfigDef, raw: string): ParsedValue {
  return parseKafkaValue(def.name, def.type, raw)
}

/** Kafka's ConfigDef.parseType for one property: typed value or ConfigError with Kafka's words. */
export function parseKafkaValue(
  name: string,
  type: TopicConfigType | 'short' | 'password',
  raw: string,
): ParsedValue {
  const text = raw.trim()
  switch (type) {
    case 'short':
    case 'int':
    case 'long': {
      const [min, max] =
        type === 'int'
          ? [INT_MIN, INT_MAX]
          : type === 'short'
            ? [-32768n, 32767n]
            : [LONG_MIN_BIG, LONG_MAX_BIG]
      const value = /^[+-]?\d+$/.test(text) ? BigInt(text) : null
      if (value === null || value < min || value > max) {
        throw invalidValue(name, raw, `Not a number of type ${type.toUpperCase()}`)
      }
      return type === 'long' ? value : Number(value)
    }
    case 'double': {
      const value = Number(text)
      if (text === '' || Number.isNaN(value)) throw invalidValue(name, raw, 'Not a number of type DOUBLE')
      return value
    }
    case 'boolean':
      if (text.toLowerCase() === 'true') return true
      if (text.toLowerCase() === 'false') return false
      throw invalidValue(name, raw, 'Expected value to be either true or false')
    case 'list':
      return text === '' ? [] : text.split(/\s*,\s*/)
    case 'string':
    case 'password':
      return text
  }
}

/** Checks a parsed value against a {min, max, oneOf} rule, throwing Kafka's ConfigException text. */
export function checkKafkaRule(
  name: string,
  value: ParsedValue,
  rule: { min?: number; max?: number; oneOf?: readonly string[] } | undefined,
): void {
  if (!rule) return
  let problem: string | null = null
  if (rule.oneOf) problem = oneOf(...rule.oneOf)(value)
  else if (rule.min !== undefined && rule.max !== undefined) problem = between(rule.min, rule.max)(value)
  else if (rule.min !== undefined) problem = atLeast(rule.min)(value)
  else if (rule.max !== undefined && Number(value) > rule.max)
    problem = `Value must be no more than ${rule.max}`
  if (problem !== null) throw invalidValue(name, parsedToString(value), problem)
}

function invalidValue(name: string, value: string, reason: string): ConfigError {
  return new ConfigError(`Invalid value ${value} for configuration ${name}: ${reason}`)
}

/** Kafka's string form of a parsed value (what DescribeConfigs shows for an override). */
function parsedToString(value: ParsedValue): string {
  return Array.isArray(value) ? value.join(',') : String(value)
}

/**
 * Validates topic overrides as Kafka's LogConfig.validate does: names known, values of the
 * right type and in range, and min.compaction.lag.ms <= max.compaction.lag.ms once merged
 * with `base` (the values the topic falls back to). Throws ConfigError (→ INVALID_CONFIG).
 */
export function validateTopicConfigs(
  configs: Readonly<Record<string, string | null>>,
  base: Readonly<Record<string, string>> = {},
): void {
  const nulls = Object.keys(configs).filter((name) => configs[name] === null)
  if (nulls.length > 0)
    throw new ConfigError(`Null value not supported for topic configs: ${nulls.join(',')}`)
  for (const [name, raw] of Object.entries(configs)) {
    const def = DEFS_BY_NAME.get(name)
    if (!def) throw new ConfigError(`Unknown topic config name: ${name}`)
    const value = parseTopicConfigValue(def, raw as string)
    const problem = def.check?.(value) ?? null
    if (problem !== null) throw invalidValue(name, parsedToString(value), problem)
  }
  const merged = { ...base, ...(configs as Record<string, string>) }
  const minLag = BigInt((merged['min.compaction.lag.ms'] ?? '0').trim())
  const maxLag = BigInt((merged['max.compaction.lag.ms'] ?? LONG_MAX).trim())
  if (minLag > maxLag) {
    throw new ConfigError(
      `conflict topic config setting min.compaction.lag.ms (${minLag}) > max.compaction.lag.ms (${maxLag})`,
    )
  }
  if ((configs['remote.storage.enable'] ?? '').trim().toLowerCase() === 'true') {
    throw new ConfigError(
      'Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.',
    )
  }
}

/** The parts of the broker config resolution needs (BrokerConfig satisfies it). */
export interface StaticBrokerConfig {
  readonly nodeId: BrokerId
  /** Every broker property, set or defaulted, by Kafka name. */
  readonly values: ReadonlyMap<string, ConfigValue>
  /** Names set in server.properties or on the command line. */
  readonly explicit: ReadonlySet<string>
}

export interface ConfigSynonym {
  readonly name: string
  readonly value: string | null
  readonly source: ConfigSource
}

export interface ResolvedConfig {
  readonly value: string | null
  readonly source: ConfigSource
  /** The sources the value was chosen from, highest precedence first (Kafka's order). */
  readonly synonyms: readonly ConfigSynonym[]
  readonly readOnly: boolean
  readonly sensitive: boolean
  readonly type: TopicConfigType
  readonly doc: string
}

/**
 * Every value a broker property has at each level, in Kafka's synonym order: all dynamic
 * per-broker values of the names, then dynamic defaults, then static values, then Kafka
 * defaults; null values are skipped, and so is everything before the first entry for
 * `names[0]` (Kafka's DynamicBrokerConfig does the same).
 */
export function brokerConfigSynonyms(
  image: ClusterImage,
  brokerConfig: StaticBrokerConfig,
  names: readonly string[],
  perBroker = true,
): ConfigSynonym[] {
  const dynamicBroker = perBroker ? dynamicBrokerConfigs(image, String(brokerConfig.nodeId)) : {}
  const dynamicDefault = dynamicBrokerConfigs(image, CLUSTER_DEFAULT_BROKER_CONFIG)
  const all: ConfigSynonym[] = []
  for (const name of names) {
    if (dynamicBroker[name] !== undefined)
      all.push({ name, value: dynamicBroker[name], source: ConfigSource.DYNAMIC_BROKER_CONFIG })
  }
  for (const name of names) {
    if (dynamicDefault[name] !== undefined)
      all.push({ name, value: dynamicDefault[name], source: ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG })
  }
  for (const name of names) {
    const value = brokerConfig.explicit.has(name)
      ? formatConfigValue(brokerConfig.values.get(name) ?? null)
      : null
    if (value !== null) all.push({ name, value, source: ConfigSource.STATIC_BROKER_CONFIG })
  }
  for (const name of names) {
    const value = brokerConfig.explicit.has(name)
      ? null
      : formatConfigValue(brokerConfig.values.get(name) ?? null)
    if (value !== null) all.push({ name, value, source: ConfigSource.DEFAULT_CONFIG })
  }
  const first = all.findIndex((s) => s.name === names[0])
  return first === -1 ? [] : all.slice(first)
}

/** A broker property's current value: dynamic per-broker > dynamic default > static > default. */
export function effectiveBrokerValue(
  image: ClusterImage,
  brokerConfig: StaticBrokerConfig,
  name: string,
): string | null {
  const dynamicBroker = dynamicBrokerConfigs(image, String(brokerConfig.nodeId))[name]
  if (dynamicBroker !== undefined) return dynamicBroker
  const dynamicDefault = dynamicBrokerConfigs(image, CLUSTER_DEFAULT_BROKER_CONFIG)[name]
  if (dynamicDefault !== undefined) return dynamicDefault
  return formatConfigValue(brokerConfig.values.get(name) ?? null)
}

/** The value a topic config takes from the broker when the topic does not override it. */
function brokerDerivedValue(
  image: ClusterImage,
  brokerConfig: StaticBrokerConfig,
  def: TopicConfigDef,
): string {
  for (const synonym of def.brokerSynonyms) {
    const value = effectiveBrokerValue(image, brokerConfig, synonym.name)
    if (value === null) continue
    if (synonym.scale === undefined) return value
    const scaled = BigInt(value.trim()) * BigInt(synonym.scale)
    // Kafka's logRetentionTimeMillis: any negative retention means "forever".
    return def.name === 'retention.ms' && scaled < 0n ? '-1' : String(scaled)
  }
  return def.defaultValue
}

/** Values every topic falls back to on this broker (no topic overrides). */
export function brokerTopicDefaults(
  image: ClusterImage,
  brokerConfig: StaticBrokerConfig,
): Record<string, string> {
  const result: Record<string, string> = {}
  for (const def of TOPIC_CONFIG_DEFS) result[def.name] = brokerDerivedValue(image, brokerConfig, def)
  return result
}

/**
 * All topic configs of `topic` with their values, sources and synonyms, sorted by name.
 * Throws if the topic is not in the image.
 */
export function resolveTopicConfig(
  image: ClusterImage,
  brokerConfig: StaticBrokerConfig,
  topic: string,
): Map<string, ResolvedConfig> {
  const overrides = image.topics.get(topic)?.configs
  if (overrides === undefined) throw new Error(`resolveTopicConfig: unknown topic ${topic}`)
  const result = new Map<string, ResolvedConfig>()
  for (const def of TOPIC_CONFIG_DEFS) {
    const fromBroker =
      def.brokerSynonyms.length === 0
        ? []
        : brokerConfigSynonyms(
            image,
            brokerConfig,
            def.brokerSynonyms.map((s) => s.name),
          )
    const override = overrides[def.name]
    const synonyms: ConfigSynonym[] =
      override === undefined
        ? fromBroker
        : [{ name: def.name, value: override, source: ConfigSource.TOPIC_CONFIG }, ...fromBroker]
    result.set(def.name, {
      value: override ?? brokerDerivedValue(image, brokerConfig, def),
      source: synonyms.length === 0 ? ConfigSource.DEFAULT_CONFIG : synonyms[0].source,
      synonyms,
      readOnly: false,
      sensitive: false,
      type: def.type,
      doc: def.doc,
    })
  }
  return result
}

/** Storage's minimum index size (one time-index entry); Kafka allows down to 4 bytes. */
const STORAGE_SEGMENT_INDEX_BYTES_MIN = 12

/**
 * The LogConfig of `topic` on this broker, through storage's fromProperties. The replica
 * manager calls it on every image change.
 */
export function logConfigFor(
  image: ClusterImage,
  brokerConfig: StaticBrokerConfig,
  topic: string,
): LogConfig {
  const resolved = resolveTopicConfig(image, brokerConfig, topic)
  const props: Record<string, string> = {}
  for (const key of LOG_CONFIG_KEYS) {
    const value = resolved.get(key)?.value
    if (value !== null && value !== undefined) props[key] = value.trim()
  }
  if (Number(props['segment.index.bytes']) < STORAGE_SEGMENT_INDEX_BYTES_MIN) {
    props['segment.index.bytes'] = String(STORAGE_SEGMENT_INDEX_BYTES_MIN)
  }
  return fromProperties(props)
}
