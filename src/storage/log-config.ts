/**
 * Per-topic log settings. Kafka's dotted property names are converted here, once; the rest
 * of storage only sees camelCase fields with their unit in the name. "No limit" values
 * (Long.MAX_VALUE, -1 for retention) become Infinity.
 */
import { ConfigError } from '../common/errors.js'
import { TimestampType } from '../protocol/batch-header.js'

export type CleanupPolicy = 'delete' | 'compact'

export interface LogConfig {
  readonly segmentBytes: number
  readonly segmentMs: number
  readonly segmentIndexBytes: number
  readonly indexIntervalBytes: number
  /** Infinity: keep forever (retention.ms=-1). */
  readonly retentionMs: number
  /** Infinity: no size limit (retention.bytes=-1). */
  readonly retentionBytes: number
  /** Infinity: never fsync because of a message count. */
  readonly flushMessages: number
  /** Infinity: never fsync because of elapsed time. */
  readonly flushMs: number
  readonly messageTimestampType: TimestampType
  /** message.timestamp.before.max.ms: how far behind the broker clock a CreateTime may be (Infinity: any). */
  readonly messageTimestampBeforeMaxMs: number
  /** message.timestamp.after.max.ms: how far ahead of the broker clock a CreateTime may be. */
  readonly messageTimestampAfterMaxMs: number
  readonly maxMessageBytes: number
  /** 'delete': retention by time and size; 'compact': the log cleaner keeps the last record per key. */
  readonly cleanupPolicy: readonly CleanupPolicy[]
  /** delete.retention.ms: how long a tombstone stays after the cleaner first saw it. */
  readonly deleteRetentionMs: number
  /** min.cleanable.dirty.ratio: dirty bytes / cleanable bytes that make a compacted log worth cleaning. */
  readonly minCleanableDirtyRatio: number
  /** min.compaction.lag.ms: a record younger than this is not cleaned. */
  readonly minCompactionLagMs: number
  /** max.compaction.lag.ms: a dirty record older than this makes the log cleanable whatever its ratio. Infinity: never. */
  readonly maxCompactionLagMs: number
}

const LONG_MAX = '9223372036854775807'

export const DEFAULT_LOG_CONFIG: LogConfig = Object.freeze({
  segmentBytes: 1073741824,
  segmentMs: 604800000,
  segmentIndexBytes: 10485760,
  indexIntervalBytes: 4096,
  retentionMs: 604800000,
  retentionBytes: Infinity,
  flushMessages: Infinity,
  flushMs: Infinity,
  messageTimestampType: TimestampType.CreateTime,
  // No bounds for a log configured without them; a broker's topics get Kafka 4.0's
  // message.timestamp.after.max.ms of an hour through their topic config (topic-config.ts).
  messageTimestampBeforeMaxMs: Infinity,
  messageTimestampAfterMaxMs: Infinity,
  maxMessageBytes: 1048588,
  cleanupPolicy: Object.freeze(['delete'] as CleanupPolicy[]),
  deleteRetentionMs: 86400000,
  minCleanableDirtyRatio: 0.5,
  minCompactionLagMs: 0,
  maxCompactionLagMs: Infinity,
})

/** Smallest legal values, as Kafka's ConfigDef validators (segment.bytes >= 14). */
const SEGMENT_BYTES_MIN = 14
/** One time-index entry; Kafka allows 4 but an index that holds nothing rolls on every append. */
const SEGMENT_INDEX_BYTES_MIN = 12

export type LogConfigProperties = Readonly<Record<string, string | number | undefined>>

/** Kafka property names this module understands; others (min.insync.replicas, ...) are ignored. */
export const LOG_CONFIG_KEYS = [
  'segment.bytes',
  'segment.ms',
  'segment.index.bytes',
  'index.interval.bytes',
  'retention.ms',
  'retention.bytes',
  'flush.messages',
  'flush.ms',
  'message.timestamp.type',
  'message.timestamp.before.max.ms',
  'message.timestamp.after.max.ms',
  'max.message.bytes',
  'cleanup.policy',
  'delete.retention.ms',
  'min.cleanable.dirty.ratio',
  'min.compaction.lag.ms',
  'max.compaction.lag.ms',
] as const

/**
 * Builds a LogConfig from Kafka-named properties over `base`. Throws ConfigError naming the
 * key for any value of the wrong type or out of range.
 */
export function fromProperties(props: LogConfigProperties, base: LogConfig = DEFAULT_LOG_CONFIG): LogConfig {
  const get = (key: string) => props[key]
  return Object.freeze({
    segmentBytes: intProp(
      get('segment.bytes'),
      'segment.bytes',
      base.segmentBytes,
      SEGMENT_BYTES_MIN,
      2 ** 31 - 1,
    ),
    segmentMs: longProp(get('segment.ms'), 'segment.ms', base.segmentMs, 1),
    segmentIndexBytes: intProp(
      get('segment.index.bytes'),
      'segment.index.bytes',
      base.segmentIndexBytes,
      SEGMENT_INDEX_BYTES_MIN,
      2 ** 31 - 1,
    ),
    indexIntervalBytes: intProp(
      get('index.interval.bytes'),
      'index.interval.bytes',
      base.indexIntervalBytes,
      0,
      2 ** 31 - 1,
    ),
    retentionMs: unlimitedProp(get('retention.ms'), 'retention.ms', base.retentionMs),
    retentionBytes: unlimitedProp(get('retention.bytes'), 'retention.bytes', base.retentionBytes),
    flushMessages: longProp(get('flush.messages'), 'flush.messages', base.flushMessages, 1),
    flushMs: longProp(get('flush.ms'), 'flush.ms', base.flushMs, 0),
    messageTimestampType: timestampTypeProp(get('message.timestamp.type'), base.messageTimestampType),
    messageTimestampBeforeMaxMs: longProp(
      get('message.timestamp.before.max.ms'),
      'message.timestamp.before.max.ms',
      base.messageTimestampBeforeMaxMs,
      0,
    ),
    messageTimestampAfterMaxMs: longProp(
      get('message.timestamp.after.max.ms'),
      'message.timestamp.after.max.ms',
      base.messageTimestampAfterMaxMs,
      0,
    ),
    maxMessageBytes: intProp(
      get('max.message.bytes'),
      'max.message.bytes',
      base.maxMessageBytes,
      0,
      2 ** 31 - 1,
    ),
    cleanupPolicy: cleanupPolicyProp(get('cleanup.policy'), base.cleanupPolicy),
    deleteRetentionMs: longProp(get('delete.retention.ms'), 'delete.retention.ms', base.deleteRetentionMs, 0),
    minCleanableDirtyRatio: ratioProp(
      get('min.cleanable.dirty.ratio'),
      'min.cleanable.dirty.ratio',
      base.minCleanableDirtyRatio,
    ),
    minCompactionLagMs: longProp(
      get('min.compaction.lag.ms'),
      'min.compaction.lag.ms',
      base.minCompactionLagMs,
      0,
    ),
    maxCompactionLagMs: longProp(
      get('max.compaction.lag.ms'),
      'max.compaction.lag.ms',
      base.maxCompactionLagMs,
      1,
    ),
  })
}

/** The inverse of fromProperties, for DescribeConfigs and checkpoints of topic configs. */
export function toProperties(config: LogConfig): Record<string, string> {
  const long = (value: number) => (value === Infinity ? LONG_MAX : String(value))
  const unlimited = (value: number) => (value === Infinity ? '-1' : String(value))
  return {
    'segment.bytes': String(config.segmentBytes),
    'segment.ms': long(config.segmentMs),
    'segment.index.bytes': String(config.segmentIndexBytes),
    'index.interval.bytes': String(config.indexIntervalBytes),
    'retention.ms': unlimited(config.retentionMs),
    'retention.bytes': unlimited(config.retentionBytes),
    'flush.messages': long(config.flushMessages),
    'flush.ms': long(config.flushMs),
    'message.timestamp.type':
      config.messageTimestampType === TimestampType.LogAppendTime ? 'LogAppendTime' : 'CreateTime',
    'max.message.bytes': String(config.maxMessageBytes),
    'cleanup.policy': config.cleanupPolicy.join(','),
    'delete.retention.ms': long(config.deleteRetentionMs),
    'min.cleanable.dirty.ratio': String(config.minCleanableDirtyRatio),
    'min.compaction.lag.ms': long(config.minCompactionLagMs),
    'max.compaction.lag.ms': long(config.maxCompactionLagMs),
  }
}

function parseInteger(raw: string | number, key: string): number {
  const text = String(raw).trim()
  if (!/^-?\d+$/.test(text)) throw new ConfigError(`${key}: '${raw}' is not an integer`)
  if (text === LONG_MAX) return Infinity
  const value = Number(text)
  if (!Number.isSafeInteger(value)) throw new ConfigError(`${key}: ${raw} is out of range`)
  return value
}

function intProp(
  raw: string | number | undefined,
  key: string,
  fallback: number,
  min: number,
  max: number,
): number {
  if (raw === undefined) return fallback
  const value = parseInteger(raw, key)
  if (value < min || value > max) throw new ConfigError(`${key}: ${raw} is not in [${min}, ${max}]`)
  return value
}

/** A long where Long.MAX_VALUE means "never". */
function longProp(raw: string | number | undefined, key: string, fallback: number, min: number): number {
  if (raw === undefined) return fallback
  const value = parseInteger(raw, key)
  if (value < min) throw new ConfigError(`${key}: ${raw} is below ${min}`)
  return value
}

/** A long where -1 means "no limit". */
function unlimitedProp(raw: string | number | undefined, key: string, fallback: number): number {
  if (raw === undefined) return fallback
  const value = parseInteger(raw, key)
  if (value < -1) throw new ConfigError(`${key}: ${raw} is below -1`)
  return value === -1 ? Infinity : value
}

/** A double in [0, 1] (min.cleanable.dirty.ratio). */
function ratioProp(raw: string | number | undefined, key: string, fallback: number): number {
  if (raw === undefined) return fallback
  const text = String(raw).trim()
  const value = Number(text)
  if (text === '' || !Number.isFinite(value)) throw new ConfigError(`${key}: '${raw}' is not a number`)
  if (value < 0 || value > 1) throw new ConfigError(`${key}: ${raw} is not in [0, 1]`)
  return value
}

function timestampTypeProp(raw: string | number | undefined, fallback: TimestampType): TimestampType {
  if (raw === undefined) return fallback
  if (raw === 'CreateTime') return TimestampType.CreateTime
  if (raw === 'LogAppendTime') return TimestampType.LogAppendTime
  throw new ConfigError(`message.timestamp.type: '${raw}' is neither CreateTime nor LogAppendTime`)
}

function cleanupPolicyProp(
  raw: string | number | undefined,
  fallback: readonly CleanupPolicy[],
): readonly CleanupPolicy[] {
  if (raw === undefined) return fallback
  const parts = String(raw)
    .split(',')
    .map((part) => part.trim())
  if (parts.length === 0 || parts.some((part) => part !== 'delete' && part !== 'compact')) {
    throw new ConfigError(`cleanup.policy: '${raw}' must be a list of delete and compact`)
  }
  return Object.freeze([...new Set(parts)] as CleanupPolicy[])
}

export function hasDeletePolicy(config: LogConfig): boolean {
  return config.cleanupPolicy.includes('delete')
}

export function hasCompactPolicy(config: LogConfig): boolean {
  return config.cleanupPolicy.includes('compact')
}
