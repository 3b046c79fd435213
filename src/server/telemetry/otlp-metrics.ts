/**
 * Decodes the payload of a PushTelemetry request: OpenTelemetry's MetricsData (OTLP metrics
 * v1, protobuf) into plain data points. Only what the broker exposes is declared: gauges and
 * sums with their attributes; histograms, exponential histograms and summaries are declared
 * only so that they decode, and are counted as skipped. Loaded on the first push (protobufjs
 * is not needed to answer other requests).
 *
 * The message definitions below are a subset of opentelemetry-proto
 * (opentelemetry/proto/metrics/v1/metrics.proto, common/v1/common.proto,
 * resource/v1/resource.proto), Copyright The OpenTelemetry Authors, licensed under the
 * Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0); field numbers
 * and names are theirs, unchanged.
 */
import protobuf from 'protobufjs'

const OTLP_METRICS_PROTO = `
syntax = "proto3";
package opentelemetry.proto.metrics.v1;

message AnyValue {
  oneof value {
    string string_value = 1;
    bool bool_value = 2;
    int64 int_value = 3;
    double double_value = 4;
    ArrayValue array_value = 5;
    KeyValueList kvlist_value = 6;
    bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
message KeyValue { string key = 1; AnyValue value = 2; }
message InstrumentationScope {
  string name = 1;
  string version = 2;
  repeated KeyValue attributes = 3;
  uint32 dropped_attributes_count = 4;
}
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }

message MetricsData { repeated ResourceMetrics resource_metrics = 1; }
message ResourceMetrics {
  Resource resource = 1;
  repeated ScopeMetrics scope_metrics = 2;
  string schema_url = 3;
}
message ScopeMetrics {
  InstrumentationScope scope = 1;
  repeated Metric metrics = 2;
  string schema_url = 3;
}
message Metric {
  string name = 1;
  string description = 2;
  string unit = 3;
  oneof data {
    Gauge gauge = 5;
    Sum sum = 7;
    Histogram histogram = 9;
    ExponentialHistogram exponential_histogram = 10;
    Summary summary = 11;
  }
  repeated KeyValue metadata = 12;
}
enum AggregationTemporality {
  AGGREGATION_TEMPORALITY_UNSPECIFIED = 0;
  AGGREGATION_TEMPORALITY_DELTA = 1;
  AGGREGATION_TEMPORALITY_CUMULATIVE = 2;
}
message Gauge { repeated NumberDataPoint data_points = 1; }
message Sum {
  repeated NumberDataPoint data_points = 1;
  AggregationTemporality aggregation_temporality = 2;
  bool is_monotonic = 3;
}
message Histogram { AggregationTemporality aggregation_temporality = 2; }
message ExponentialHistogram { AggregationTemporality aggregation_temporality = 2; }
message Summary { }
message NumberDataPoint {
  repeated KeyValue attributes = 7;
  fixed64 start_time_unix_nano = 2;
  fixed64 time_unix_nano = 3;
  oneof value {
    double as_double = 4;
    sfixed64 as_int = 6;
  }
  uint32 flags = 8;
}
`

export const AggregationTemporality = { UNSPECIFIED: 0, DELTA: 1, CUMULATIVE: 2 } as const

/** One value of a gauge or sum, with its attributes (resource and scope attributes merged in). */
export interface MetricPoint {
  readonly name: string
  readonly description: string
  readonly kind: 'gauge' | 'sum'
  /** Sums only: a counter that never decreases. */
  readonly monotonic: boolean
  readonly temporality: number
  readonly attributes: Readonly<Record<string, string>>
  readonly value: number
}

export interface DecodedMetrics {
  readonly points: MetricPoint[]
  /** Histograms, exponential histograms and summaries, which tidelog does not expose. */
  readonly skippedMetrics: number
}

let metricsData: protobuf.Type | null = null

function metricsDataType(): protobuf.Type {
  metricsData ??= protobuf
    .parse(OTLP_METRICS_PROTO, { keepCase: true })
    .root.lookupType('opentelemetry.proto.metrics.v1.MetricsData')
  return metricsData
}

interface KeyValue {
  key?: string
  value?: AnyValue
}
interface AnyValue {
  string_value?: string
  bool_value?: boolean
  int_value?: string
  double_value?: number
  array_value?: { values?: AnyValue[] }
  kvlist_value?: { values?: KeyValue[] }
  bytes_value?: string
}
interface NumberDataPoint {
  attributes?: KeyValue[]
  as_double?: number
  as_int?: string
}
interface Metric {
  name?: string
  description?: string
  gauge?: { data_points?: NumberDataPoint[] }
  sum?: { data_points?: NumberDataPoint[]; aggregation_temporality?: number; is_monotonic?: boolean }
  histogram?: unknown
  exponential_histogram?: unknown
  summary?: unknown
}
interface MetricsData {
  resource_metrics?: {
    resource?: { attributes?: KeyValue[] }
    scope_metrics?: { scope?: { attributes?: KeyValue[] }; metrics?: Metric[] }[]
  }[]
}

/** Decodes a MetricsData message; throws on bytes that are not one. */
export function decodeMetricsData(payload: Buffer): DecodedMetrics {
  const type = metricsDataType()
  const data = type.toObject(type.decode(payload), {
    longs: String,
    enums: Number,
    bytes: String,
    defaults: false,
  }) as MetricsData
  const points: MetricPoint[] = []
  let skippedMetrics = 0
  for (const resourceMetrics of data.resource_metrics ?? []) {
    const resourceAttributes = attributesOf(resourceMetrics.resource?.attributes)
    for (const scopeMetrics of resourceMetrics.scope_metrics ?? []) {
      const scopeAttributes = { ...resourceAttributes, ...attributesOf(scopeMetrics.scope?.attributes) }
      for (const metric of scopeMetrics.metrics ?? []) {
        const name = metric.name ?? ''
        const description = metric.description ?? ''
        const series = metric.gauge ?? metric.sum
        if (series === undefined || name === '') {
          skippedMetrics++
          continue
        }
        const kind = metric.gauge ? 'gauge' : 'sum'
        for (const point of series.data_points ?? []) {
          points.push({
            name,
            description,
            kind,
            monotonic: metric.sum?.is_monotonic === true,
            temporality: metric.sum?.aggregation_temporality ?? AggregationTemporality.UNSPECIFIED,
            attributes: { ...scopeAttributes, ...attributesOf(point.attributes) },
            value: point.as_double ?? (point.as_int === undefined ? 0 : Number(point.as_int)),
          })
        }
      }
    }
  }
  return { points, skippedMetrics }
}

function attributesOf(keyValues: readonly KeyValue[] | undefined): Record<string, string> {
  const result: Record<string, string> = {}
  for (const kv of keyValues ?? []) if (kv.key) result[kv.key] = stringOf(kv.value)
  return result
}

function stringOf(value: AnyValue | undefined): string {
  if (value === undefined) return ''
  if (value.string_value !== undefined) return value.string_value
  if (value.bool_value !== undefined) return String(value.bool_value)
  if (value.int_value !== undefined) return value.int_value
  if (value.double_value !== undefined) return String(value.double_value)
  if (value.bytes_value !== undefined) return value.bytes_value
  if (value.array_value !== undefined) return (value.array_value.values ?? []).map(stringOf).join(',')
  if (value.kvlist_value !== undefined) {
    return (value.kvlist_value.values ?? []).map((kv) => `${kv.key ?? ''}=${stringOf(kv.value)}`).join(',')
  }
  return ''
}

/** Encodes MetricsData (the tests' pushes, and the codec round trip). */
export function encodeMetricsData(data: MetricsData): Buffer {
  const type = metricsDataType()
  return Buffer.from(type.encode(type.fromObject(data)).finish())
}

export type { MetricsData as MetricsDataObject }
