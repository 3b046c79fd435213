/**
 * Client metrics subscriptions (KIP-714): the CLIENT_METRICS config resources an admin sets
 * with IncrementalAlterConfigs, kept in the cluster image (`clientMetricsConfigs`), and
 * Kafka's rules for them (ClientMetricsConfigs.validate): only `metrics` (a list of metric
 * name prefixes, `*` for all), `interval.ms` (100 .. 3,600,000, default 300,000) and `match`
 * (a list of `selector=regex`, selectors client_instance_id, client_id, client_software_name,
 * client_software_version, client_source_address, client_source_port; a client matches when
 * every selector's regex matches its value whole; no selector matches every client).
 */

export const METRICS_CONFIG = 'metrics'
export const INTERVAL_MS_CONFIG = 'interval.ms'
export const MATCH_CONFIG = 'match'

/** Kafka's ClientMetricsConfigs.INTERVAL_MS_DEFAULT: 5 minutes. */
export const PUSH_INTERVAL_MS_DEFAULT = 300_000
const PUSH_INTERVAL_MS_MIN = 100
const PUSH_INTERVAL_MS_MAX = 3_600_000
const INT_MAX = 2 ** 31 - 1

/** A subscription's `metrics` entry that subscribes every metric. */
export const ALL_METRICS = '*'

/** The client attributes a `match` selector may name (ClientMetricsInstanceMetadata). */
export const MATCH_SELECTORS = [
  'client_instance_id',
  'client_id',
  'client_software_name',
  'client_software_version',
  'client_source_address',
  'client_source_port',
] as const
export type MatchSelector = (typeof MATCH_SELECTORS)[number]

/** Config name -> type and default, as Kafka's ClientMetricsConfigs.configDef lists them. */
export const CLIENT_METRICS_CONFIG_DEFS: readonly {
  readonly name: string
  readonly type: 'list' | 'int'
  readonly defaultValue: string
  readonly doc: string
}[] = [
  {
    name: INTERVAL_MS_CONFIG,
    type: 'int',
    defaultValue: '300000',
    doc: 'Metrics push interval in milliseconds',
  },
  { name: MATCH_CONFIG, type: 'list', defaultValue: '', doc: 'Client match criteria' },
  { name: METRICS_CONFIG, type: 'list', defaultValue: '', doc: 'Telemetry metric name prefix list' },
]

export interface Subscription {
  readonly name: string
  readonly metrics: readonly string[]
  readonly intervalMs: number
  readonly match: ReadonlyMap<MatchSelector, RegExp>
}

/** A subscription that breaks Kafka's rules: the error code's name and Kafka's message. */
export class SubscriptionConfigError extends Error {
  constructor(
    readonly kind: 'INVALID_REQUEST' | 'INVALID_CONFIG',
    message: string,
  ) {
    super(message)
    this.name = 'SubscriptionConfigError'
  }
}

/** Kafka's LIST parsing: comma-separated, each item trimmed, '' is the empty list. */
export function parseList(value: string): string[] {
  const trimmed = value.trim()
  return trimmed === '' ? [] : trimmed.split(',').map((item) => item.trim())
}

/** Checks a subscription's complete configs as Kafka's controller does; throws SubscriptionConfigError. */
export function validateSubscription(name: string, configs: Readonly<Record<string, string>>): void {
  if (name === '') throw new SubscriptionConfigError('INVALID_REQUEST', "Subscription name can't be empty")
  for (const key of Object.keys(configs)) {
    if (!CLIENT_METRICS_CONFIG_DEFS.some((d) => d.name === key)) {
      throw new SubscriptionConfigError('INVALID_REQUEST', `Unknown client metrics configuration: ${key}`)
    }
  }
  const interval = configs[INTERVAL_MS_CONFIG]
  if (interval !== undefined) {
    const parsed = parseIntervalMs(interval)
    if (parsed < PUSH_INTERVAL_MS_MIN || parsed > PUSH_INTERVAL_MS_MAX) {
      throw new SubscriptionConfigError(
        'INVALID_REQUEST',
        `Invalid value ${parsed} for ${INTERVAL_MS_CONFIG}, interval must be between 100 and 3600000 (1 hour)`,
      )
    }
  }
  const match = configs[MATCH_CONFIG]
  if (match !== undefined) parseMatch(parseList(match))
}

/** The subscription a validated config set describes (defaults for what it leaves out). */
export function parseSubscription(name: string, configs: Readonly<Record<string, string>>): Subscription {
  const interval = configs[INTERVAL_MS_CONFIG]
  return {
    name,
    metrics: parseList(configs[METRICS_CONFIG] ?? ''),
    intervalMs: interval === undefined ? PUSH_INTERVAL_MS_DEFAULT : parseIntervalMs(interval),
    match: parseMatch(parseList(configs[MATCH_CONFIG] ?? '')),
  }
}

function parseIntervalMs(value: string): number {
  const text = value.trim()
  const parsed = /^[+-]?\d+$/.test(text) ? Number(text) : Number.NaN
  if (!Number.isSafeInteger(parsed) || parsed > INT_MAX || parsed < -INT_MAX - 1) {
    // Kafka's ConfigDef.parse: a ConfigException, which the controller answers INVALID_CONFIG.
    throw new SubscriptionConfigError(
      'INVALID_CONFIG',
      `Invalid value ${value} for configuration ${INTERVAL_MS_CONFIG}: Not a number of type INT`,
    )
  }
  return parsed
}

/**
 * Kafka's parseMatchingPatterns: each item splits at '=' into exactly two parts, the first a
 * known selector, the second a regular expression (JavaScript's syntax here, Java's in Kafka).
 */
function parseMatch(patterns: readonly string[]): Map<MatchSelector, RegExp> {
  const result = new Map<MatchSelector, RegExp>()
  for (const pattern of patterns) {
    const parts = pattern.split('=')
    const illegal = () =>
      new SubscriptionConfigError('INVALID_CONFIG', `Illegal client matching pattern: ${pattern}`)
    if (parts.length !== 2) throw illegal()
    const selector = parts[0].trim()
    if (!(MATCH_SELECTORS as readonly string[]).includes(selector)) throw illegal()
    try {
      // Java's Matcher.matches(): the whole value must match.
      result.set(selector as MatchSelector, new RegExp(`^(?:${parts[1].trim()})$`, 'u'))
    } catch {
      throw illegal()
    }
  }
  return result
}
