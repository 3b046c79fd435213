/**
 * Kafka-style configuration definitions: dotted property names, typed values, defaults,
 * validation and documentation, declared once. Property strings are parsed at this
 * boundary; the rest of the code uses typed camelCase fields.
 */
import { ConfigError } from './errors.js'

export type ConfigType = 'int' | 'long' | 'short' | 'double' | 'boolean' | 'string' | 'list' | 'password'
export type ConfigValue = number | boolean | string | string[] | null

export interface ConfigDef {
  readonly name: string
  readonly type: ConfigType
  /** null: no default (Kafka's "null" default). */
  readonly defaultValue: ConfigValue
  readonly doc: string
  /** Values accepted: a numeric range or a list of allowed strings. */
  readonly validator?: { min?: number; max?: number; oneOf?: readonly string[] }
  /** Can be changed at run time through IncrementalAlterConfigs/AlterConfigs. */
  readonly dynamic?: boolean
  readonly sensitive?: boolean
}

const INT_MIN = -(2 ** 31)
const INT_MAX = 2 ** 31 - 1
const SHORT_MIN = -(2 ** 15)
const SHORT_MAX = 2 ** 15 - 1

/** Parses and validates one property string against its definition. */
export function parseConfigValue(def: ConfigDef, raw: string): ConfigValue {
  const text = raw.trim()
  const value = parseByType(def, text)
  validate(def, value)
  return value
}

function parseByType(def: ConfigDef, text: string): ConfigValue {
  switch (def.type) {
    case 'int':
    case 'short':
    case 'long':
      return parseInteger(def, text)
    case 'double': {
      const value = Number(text)
      if (text === '' || Number.isNaN(value)) throw invalid(def, text, 'expected a number')
      return value
    }
    case 'boolean':
      if (text.toLowerCase() === 'true') return true
      if (text.toLowerCase() === 'false') return false
      throw invalid(def, text, 'expected true or false')
    case 'list':
      return text === '' ? [] : text.split(',').map((item) => item.trim())
    case 'string':
    case 'password':
      return text
  }
}

function parseInteger(def: ConfigDef, text: string): number {
  if (!/^-?\d+$/.test(text)) throw invalid(def, text, `expected an integer (${def.type})`)
  const value = Number(text)
  const [min, max] =
    def.type === 'int'
      ? [INT_MIN, INT_MAX]
      : def.type === 'short'
        ? [SHORT_MIN, SHORT_MAX]
        : [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER]
  // Long.MAX_VALUE is Kafka's "never" for several settings; keep it as MAX_SAFE_INTEGER.
  if (def.type === 'long' && text === '9223372036854775807') return Number.MAX_SAFE_INTEGER
  if (value < min || value > max) throw invalid(def, text, `out of range for ${def.type}`)
  return value
}

function validate(def: ConfigDef, value: ConfigValue): void {
  const rule = def.validator
  if (!rule) return
  if (typeof value === 'number') {
    if (rule.min !== undefined && value < rule.min)
      throw invalid(def, String(value), `must be at least ${rule.min}`)
    if (rule.max !== undefined && value > rule.max)
      throw invalid(def, String(value), `must be at most ${rule.max}`)
  }
  if (typeof value === 'string' && rule.oneOf && !rule.oneOf.includes(value)) {
    throw invalid(def, value, `must be one of ${rule.oneOf.join(', ')}`)
  }
  if (Array.isArray(value) && rule.oneOf) {
    for (const item of value) {
      if (!rule.oneOf.includes(item)) throw invalid(def, item, `must be one of ${rule.oneOf.join(', ')}`)
    }
  }
}

function invalid(def: ConfigDef, text: string, why: string): ConfigError {
  return new ConfigError(`Invalid value ${text} for configuration ${def.name}: ${why}`)
}

/** Renders a typed value the way Kafka's DescribeConfigs shows it. */
export function formatConfigValue(value: ConfigValue): string | null {
  if (value === null) return null
  if (Array.isArray(value)) return value.join(',')
  if (value === Number.MAX_SAFE_INTEGER) return '9223372036854775807'
  return String(value)
}

/** A set of definitions, looked up by name. */
export class ConfigDefs {
  private readonly byName: ReadonlyMap<string, ConfigDef>

  constructor(readonly defs: readonly ConfigDef[]) {
    this.byName = new Map(defs.map((def) => [def.name, def]))
  }

  get(name: string): ConfigDef | undefined {
    return this.byName.get(name)
  }

  has(name: string): boolean {
    return this.byName.has(name)
  }

  /** Parses a property map; unknown names throw unless `allowUnknown`. */
  parse(properties: ReadonlyMap<string, string>, allowUnknown = false): Map<string, ConfigValue> {
    const values = new Map<string, ConfigValue>()
    for (const [name, raw] of properties) {
      const def = this.byName.get(name)
      if (!def) {
        if (allowUnknown) continue
        throw new ConfigError(`Unknown configuration ${name}`)
      }
      values.set(name, parseConfigValue(def, raw))
    }
    return values
  }
}
