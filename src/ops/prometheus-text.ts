/**
 * A strict parser of the Prometheus text exposition format (version 0.0.4): what
 * `tidelog top` reads from /metrics, and what the tests check /metrics against. Anything
 * the format does not allow throws with its line number: a bad metric or label name, an
 * unquoted or badly escaped label value, a value that is not a float, a TYPE after its
 * samples or given twice, a sample whose family is declared with another type, a series
 * repeated, a histogram without its +Inf bucket or with buckets that decrease.
 */

export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

export interface MetricFamily {
  readonly name: string
  type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped'
  help: string | null
  readonly samples: Sample[]
}

export class PrometheusParseError extends Error {}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped'])

export function parsePrometheusText(text: string): Map<string, MetricFamily> {
  const families = new Map<string, MetricFamily>()
  const seenSeries = new Set<string>()
  const lines = text.split('\n')
  if (lines[lines.length - 1] !== '') throw new PrometheusParseError('the exposition must end with a newline')
  lines.forEach((line, index) => {
    const fail = (message: string): never => {
      throw new PrometheusParseError(`line ${index + 1}: ${message}: ${line.slice(0, 120)}`)
    }
    if (line === '') return
    if (line.startsWith('#')) {
      const match = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line)
      if (!match) return // a plain comment
      const [, kind, name, rest] = match
      if (!METRIC_NAME.test(name)) fail('bad metric name')
      let family = families.get(name)
      if (kind === 'TYPE') {
        if (!TYPES.has(rest)) fail(`unknown type '${rest}'`)
        if (family && (family.samples.length > 0 || family.type !== 'untyped'))
          fail('TYPE after samples or twice')
        if (!family) families.set(name, (family = { name, type: 'untyped', help: null, samples: [] }))
        family.type = rest as MetricFamily['type']
      } else {
        if (family?.help != null) fail('HELP twice')
        if (!family) families.set(name, (family = { name, type: 'untyped', help: null, samples: [] }))
        family.help = rest
      }
      return
    }
    const sample = parseSample(line, fail)
    const family = familyOf(families, sample.name)
    if (!family) {
      families.set(sample.name, { name: sample.name, type: 'untyped', help: null, samples: [sample] })
    } else {
      if (sample.name !== family.name && family.type !== 'histogram' && family.type !== 'summary')
        fail(`sample ${sample.name} does not belong to ${family.type} ${family.name}`)
      family.samples.push(sample)
    }
    const series = `${sample.name}${JSON.stringify(Object.entries(sample.labels).sort())}`
    if (seenSeries.has(series)) fail('series repeated')
    seenSeries.add(series)
  })
  for (const family of families.values()) if (family.type === 'histogram') checkHistogram(family)
  return families
}

function familyOf(families: Map<string, MetricFamily>, sampleName: string): MetricFamily | undefined {
  const exact = families.get(sampleName)
  if (exact) return exact
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!sampleName.endsWith(suffix)) continue
    const family = families.get(sampleName.slice(0, -suffix.length))
    if (family && (family.type === 'histogram' || family.type === 'summary')) return family
  }
  return undefined
}

function parseSample(line: string, fail: (message: string) => never): Sample {
  const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)
  if (!nameMatch) fail('bad metric name')
  const name = nameMatch![0]
  let position = name.length
  const labels: Record<string, string> = {}
  if (line[position] === '{') {
    position++
    while (line[position] !== '}') {
      const labelMatch = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(position))
      if (!labelMatch || !LABEL_NAME.test(labelMatch[0])) fail('bad label name')
      const labelName = labelMatch![0]
      position += labelName.length
      if (line[position] !== '=' || line[position + 1] !== '"') fail('expected ="')
      position += 2
      let value = ''
      for (;;) {
        const ch = line[position]
        if (ch === undefined) fail('unterminated label value')
        if (ch === '"') break
        if (ch === '\\') {
          const next = line[position + 1]
          if (next === '\\') value += '\\'
          else if (next === '"') value += '"'
          else if (next === 'n') value += '\n'
          else fail('bad escape in label value')
          position += 2
        } else {
          value += ch
          position++
        }
      }
      position++
      if (labelName in labels) fail(`label ${labelName} repeated`)
      labels[labelName] = value
      if (line[position] === ',') position++
      else if (line[position] !== '}') fail('expected , or }')
    }
    position++
  }
  if (line[position] !== ' ') fail('expected a space before the value')
  const parts = line
    .slice(position + 1)
    .trim()
    .split(/ +/)
  if (parts.length < 1 || parts.length > 2) fail('expected a value and an optional timestamp')
  const value = parseValue(parts[0])
  if (value === null) fail(`bad value '${parts[0]}'`)
  if (parts.length === 2 && !/^-?\d+$/.test(parts[1])) fail('bad timestamp')
  return { name, labels, value: value! }
}

/** Floats as Prometheus reads them (Go's ParseFloat: NaN and Inf in any case; prom-client writes "Nan"). */
function parseValue(text: string): number | null {
  const special = text.toLowerCase()
  if (special === 'nan') return Number.NaN
  if (/^\+?inf(inity)?$/.test(special)) return Number.POSITIVE_INFINITY
  if (/^-inf(inity)?$/.test(special)) return Number.NEGATIVE_INFINITY
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) return null
  return Number(text)
}

/** Each histogram series: cumulative buckets ending in +Inf, whose count equals _count. */
function checkHistogram(family: MetricFamily): void {
  const series = new Map<string, { buckets: { le: number; value: number }[]; count?: number }>()
  for (const sample of family.samples) {
    const { le, ...rest } = sample.labels
    const key = JSON.stringify(Object.entries(rest).sort())
    let entry = series.get(key)
    if (!entry) series.set(key, (entry = { buckets: [] }))
    if (sample.name === `${family.name}_bucket`) {
      if (le === undefined) throw new PrometheusParseError(`${family.name}: bucket without le`)
      const bound = parseValue(le)
      if (bound === null) throw new PrometheusParseError(`${family.name}: bad le '${le}'`)
      entry.buckets.push({ le: bound, value: sample.value })
    } else if (sample.name === `${family.name}_count`) entry.count = sample.value
  }
  for (const [key, entry] of series) {
    const buckets = entry.buckets
    if (buckets.length === 0 || buckets[buckets.length - 1].le !== Number.POSITIVE_INFINITY)
      throw new PrometheusParseError(`${family.name}${key}: no +Inf bucket last`)
    for (let i = 1; i < buckets.length; i++) {
      if (buckets[i].le <= buckets[i - 1].le || buckets[i].value < buckets[i - 1].value)
        throw new PrometheusParseError(`${family.name}${key}: buckets not increasing`)
    }
    if (entry.count !== buckets[buckets.length - 1].value)
      throw new PrometheusParseError(`${family.name}${key}: _count differs from the +Inf bucket`)
  }
}

/** Sum of the samples named `name` whose labels include `match`. */
export function sumSamples(
  families: Map<string, MetricFamily>,
  name: string,
  match: Readonly<Record<string, string>> = {},
): number {
  const family = familyOf(families, name)
  let sum = 0
  for (const sample of family?.samples ?? []) {
    if (sample.name !== name) continue
    if (Object.entries(match).every(([k, v]) => sample.labels[k] === v)) sum += sample.value
  }
  return sum
}
