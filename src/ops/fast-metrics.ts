/**
 * Counters and histograms for the request path, registered in a prom-client Registry as
 * custom metrics. prom-client's own Counter/Histogram hash their label object on every
 * call; these key on one precomputed label value and only build label objects at scrape
 * time, so a produce pays a few array writes for its metrics.
 */
/**
 * Where a metric registers: a prom-client Registry, or BrokerMetrics' stand-in that keeps
 * them until prom-client has loaded (after the broker listens, see metrics.ts).
 */
export interface MetricSink {
  registerMetric(metric: never): void
}

type Labels = Record<string, string | number>

interface MetricValue {
  value: number
  labels: Labels
  metricName?: string
}

interface CustomMetric {
  name: string
  help: string
  type: 'counter' | 'gauge' | 'histogram'
  aggregator: 'sum'
  get(): MetricSnapshot | Promise<MetricSnapshot>
}

interface MetricSnapshot {
  name: string
  help: string
  type: string
  values: MetricValue[]
  aggregator: 'sum'
}

/** A counter with one label. */
export class LabeledCounter implements CustomMetric {
  readonly type = 'counter' as const
  readonly aggregator = 'sum' as const
  private readonly values = new Map<string, number>()

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelName: string,
    registry: MetricSink,
    private readonly extraLabels: Labels = {},
  ) {
    registry.registerMetric(this as never)
  }

  inc(labelValue: string, amount = 1): void {
    this.values.set(labelValue, (this.values.get(labelValue) ?? 0) + amount)
  }

  value(labelValue: string): number {
    return this.values.get(labelValue) ?? 0
  }

  get(): MetricSnapshot {
    const values: MetricValue[] = []
    for (const [labelValue, value] of this.values)
      values.push({ value, labels: { ...this.extraLabels, [this.labelName]: labelValue } })
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }
}

/** Upper bounds in seconds, 0.5 ms to 30 s: Kafka's request times span that range. */
export const LATENCY_BUCKETS_SECONDS: readonly number[] = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
]

interface HistogramSeries {
  readonly counts: Float64Array
  sum: number
  count: number
}

/** A histogram with one label, observed in milliseconds and exposed in seconds. */
export class LabeledHistogram implements CustomMetric {
  readonly type = 'histogram' as const
  readonly aggregator = 'sum' as const
  private readonly series = new Map<string, HistogramSeries>()

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelName: string,
    registry: MetricSink,
    private readonly bucketsSeconds: readonly number[] = LATENCY_BUCKETS_SECONDS,
  ) {
    registry.registerMetric(this as never)
  }

  observeMs(labelValue: string, valueMs: number): void {
    let series = this.series.get(labelValue)
    if (!series) {
      series = { counts: new Float64Array(this.bucketsSeconds.length), sum: 0, count: 0 }
      this.series.set(labelValue, series)
    }
    const seconds = valueMs / 1000
    series.sum += seconds
    series.count++
    const buckets = this.bucketsSeconds
    for (let i = 0; i < buckets.length; i++) {
      if (seconds <= buckets[i]) {
        series.counts[i]++
        break
      }
    }
  }

  count(labelValue: string): number {
    return this.series.get(labelValue)?.count ?? 0
  }

  get(): MetricSnapshot {
    const values: MetricValue[] = []
    for (const [labelValue, series] of this.series) {
      let cumulative = 0
      for (let i = 0; i < this.bucketsSeconds.length; i++) {
        cumulative += series.counts[i]
        values.push({
          metricName: `${this.name}_bucket`,
          value: cumulative,
          labels: { le: this.bucketsSeconds[i], [this.labelName]: labelValue },
        })
      }
      values.push({
        metricName: `${this.name}_bucket`,
        value: series.count,
        labels: { le: '+Inf', [this.labelName]: labelValue },
      })
      values.push({
        metricName: `${this.name}_sum`,
        value: series.sum,
        labels: { [this.labelName]: labelValue },
      })
      values.push({
        metricName: `${this.name}_count`,
        value: series.count,
        labels: { [this.labelName]: labelValue },
      })
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }
}

/** Samples of a metric read from the broker's state at scrape time. */
export type Samples = readonly { readonly labels?: Labels; readonly value: number }[]

/**
 * A gauge or counter whose values are read when scraped (Kafka's gauges read broker state
 * the same way), possibly asynchronously.
 */
export class CollectedMetric implements CustomMetric {
  readonly aggregator = 'sum' as const

  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'gauge',
    registry: MetricSink,
    private readonly read: () => Samples | Promise<Samples>,
  ) {
    registry.registerMetric(this as never)
  }

  // The registry awaits get(), so a read may ask other brokers (the consumer lag does).
  async get(): Promise<MetricSnapshot> {
    const samples = await this.read()
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      values: samples.map((s) => ({ value: s.value, labels: s.labels ?? {} })),
      aggregator: this.aggregator,
    }
  }
}
