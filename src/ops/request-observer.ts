/**
 * The request path's one hook for metrics: the connection tells an observer when a request
 * arrives, when its handler starts, when the response is ready and when it is written.
 * From those marks (and the purgatory enter/leave the delayed operations report) come
 * Kafka's request metrics: RequestsPerSec, ErrorsPerSec, and the split of TotalTimeMs
 * into RequestQueueTimeMs (frame read → handler: decoding), LocalTimeMs (the handler's own
 * work), RemoteTimeMs (waiting in the produce or fetch purgatory) and ResponseSendTimeMs
 * (response ready → written: encoding and the wait behind earlier responses, which leave
 * in request order); plus BytesInPerSec/MessagesInPerSec (produce) and BytesOutPerSec
 * (consumer fetches; follower fetches count as replication bytes out), and the slow
 * request log (Kafka's kafka.request.logger, with a threshold).
 */

import type { Logger } from '../common/logger.js'
import { ErrorCode, errorName } from '../protocol/error-codes.js'
import { ApiKey, apis } from '../protocol/generated/index.js'
import type { PurgatoryTimer } from '../replication/delayed-operations.js'
import { LabeledCounter, LabeledHistogram, type MetricSink } from './fast-metrics.js'

/** What the connection reports for one request (all marks are optional to act on). */
export interface RequestObservation extends PurgatoryTimer {
  /** The request is decoded and its handler is about to run. */
  onHandlerStart(request: unknown, clientId: string | null): void
  /** The handler produced its response (null: none is sent, as for acks=0). */
  onResponse(response: unknown): void
  /** The response was written to the socket. */
  onSent(): void
  /** The handler threw: the connection closes without a response. */
  onFailed(): void
}

export interface RequestObserver {
  /** A whole request frame was read; called before it is decoded. */
  onRequest(apiKey: number, apiVersion: number, remoteAddress: string): RequestObservation
}

export interface RequestMetricsOptions {
  readonly registry: MetricSink
  readonly logger: Logger
  /** tidelog.request.log.slow.ms: requests slower than this, purgatory wait excluded, are logged; -1 off. */
  readonly slowRequestMs: number
  /** Topic names of Fetch v13+ responses, which carry topic ids. */
  readonly topicName: (topicId: string) => string | undefined
  readonly nowMs?: () => number
}

/** At most one slow-request line per this interval; the others are counted in the next line. */
const SLOW_LOG_INTERVAL_MS = 1000

interface ProduceShape {
  readonly topicData: readonly {
    name: string
    /** Produce v13+ names topics by id only (`name` is empty). */
    topicId?: string
    partitionData: readonly { index: number; records: unknown }[]
  }[]
}

interface ProduceResponseShape {
  readonly responses: readonly {
    name: string
    partitionResponses: readonly { index: number; errorCode: number }[]
  }[]
}

interface FetchResponseShape {
  readonly errorCode: number
  readonly responses: readonly {
    topic: string
    topicId?: string
    partitions: readonly { errorCode: number; records: unknown }[]
  }[]
}

function findPartition(
  responses: ProduceResponseShape['responses'],
  topic: string,
  partition: number,
): { errorCode: number } | undefined {
  return responses.find((t) => t.name === topic)?.partitionResponses.find((p) => p.index === partition)
}

/** Kafka's request names (the `request` label of kafka.network:type=RequestMetrics). */
function apiName(apiKey: number): string {
  return apis.get(apiKey)?.name ?? `Api${apiKey}`
}

export class RequestMetrics implements RequestObserver {
  readonly requests: LabeledCounter
  readonly errors: LabeledCounter
  readonly bytesIn: LabeledCounter
  readonly messagesIn: LabeledCounter
  readonly bytesOut: LabeledCounter
  readonly replicationBytesOut: LabeledCounter
  readonly totalTime: LabeledHistogram
  readonly queueTime: LabeledHistogram
  readonly localTime: LabeledHistogram
  readonly remoteTime: LabeledHistogram
  readonly sendTime: LabeledHistogram
  /** Requests waiting in each purgatory now (kafka.server:type=DelayedOperationPurgatory). */
  readonly purgatorySize = { Produce: 0, Fetch: 0 }
  readonly nowMs: () => number
  private lastSlowLogMs = Number.NEGATIVE_INFINITY
  private slowSuppressed = 0

  constructor(private readonly options: RequestMetricsOptions) {
    const r = options.registry
    this.nowMs = options.nowMs ?? (() => performance.now())
    const prefix = 'kafka_network_requestmetrics'
    this.requests = new LabeledCounter(
      `${prefix}_requests_total`,
      'Requests received (RequestsPerSec)',
      'request',
      r,
    )
    this.errors = new LabeledCounter(
      `${prefix}_errors_total`,
      'Error codes in responses, by request and error as "Request:ERROR" (ErrorsPerSec)',
      'request_error',
      r,
    )
    const histogram = (name: string, help: string) =>
      new LabeledHistogram(`${prefix}_${name}`, help, 'request', r)
    this.totalTime = histogram('totaltime_seconds', 'Request total time (TotalTimeMs)')
    this.queueTime = histogram(
      'requestqueuetime_seconds',
      'Frame read until the handler runs (RequestQueueTimeMs)',
    )
    this.localTime = histogram('localtime_seconds', 'Time in the handler outside purgatory (LocalTimeMs)')
    this.remoteTime = histogram('remotetime_seconds', 'Time waiting in purgatory (RemoteTimeMs)')
    this.sendTime = histogram(
      'responsesendtime_seconds',
      'Response ready until written, in request order (ResponseQueueTimeMs + ResponseSendTimeMs)',
    )
    const topicCounter = (name: string, help: string) =>
      new LabeledCounter(`kafka_server_brokertopicmetrics_${name}`, help, 'topic', r)
    this.bytesIn = topicCounter('bytesin_total', 'Record bytes appended by produce requests (BytesInPerSec)')
    this.messagesIn = topicCounter(
      'messagesin_total',
      'Records appended by produce requests (MessagesInPerSec)',
    )
    this.bytesOut = topicCounter('bytesout_total', 'Record bytes sent to consumers (BytesOutPerSec)')
    this.replicationBytesOut = topicCounter(
      'replicationbytesout_total',
      'Record bytes sent to follower replicas (ReplicationBytesOutPerSec)',
    )
  }

  onRequest(apiKey: number, apiVersion: number, remoteAddress: string): RequestObservation {
    return new Observation(this, apiKey, apiVersion, remoteAddress)
  }

  /**
   * Produce: adds the record bytes and counts (from the batch headers) of the partitions
   * whose append succeeded, and counts the failed ones' error codes. The handler answers
   * topics and partitions in request order, so request and response are walked together.
   */
  countProduce(request: ProduceShape, response: ProduceResponseShape | null): void {
    const topics = request.topicData
    const answered = response?.responses
    for (let t = 0; t < topics.length; t++) {
      const topic = topics[t]
      const partitions = topic.partitionData
      const answer = answered?.[t]?.name === topic.name ? answered[t].partitionResponses : undefined
      for (let p = 0; p < partitions.length; p++) {
        const data = partitions[p]
        // acks=0 has no response: what was sent counts (Kafka counts appends, which we cannot see).
        let errorCode: number = ErrorCode.NONE
        if (answered) {
          const result =
            answer?.[p]?.index === data.index ? answer[p] : findPartition(answered, topic.name, data.index)
          errorCode = result?.errorCode ?? ErrorCode.NONE
        }
        if (errorCode !== ErrorCode.NONE) {
          this.errors.inc(`Produce:${errorName(errorCode)}`)
          continue
        }
        if (!Buffer.isBuffer(data.records)) continue
        const name =
          topic.name || (topic.topicId ? this.options.topicName(topic.topicId) : undefined) || 'unknown'
        this.bytesIn.inc(name, data.records.length)
        this.messagesIn.inc(name, countRecords(data.records))
      }
    }
  }

  /** Fetch response: record bytes per topic, to consumers or to followers, and error codes. */
  countFetched(response: FetchResponseShape, follower: boolean): void {
    if (response.errorCode !== ErrorCode.NONE) this.errors.inc(`Fetch:${errorName(response.errorCode)}`)
    const counter = follower ? this.replicationBytesOut : this.bytesOut
    for (const topic of response.responses) {
      let bytes = 0
      for (const p of topic.partitions) {
        if (p.errorCode !== ErrorCode.NONE) this.errors.inc(`Fetch:${errorName(p.errorCode)}`)
        bytes += recordsLength(p.records)
      }
      if (bytes === 0) continue
      const name =
        topic.topic || (topic.topicId ? this.options.topicName(topic.topicId) : undefined) || 'unknown'
      counter.inc(name, bytes)
    }
  }

  countErrors(api: string, response: unknown): void {
    countErrorCodes(response, 0, (code) => this.errors.inc(`${api}:${errorName(code)}`))
  }

  maybeLogSlow(fields: {
    api: string
    apiVersion: number
    clientId: string | null
    remoteAddress: string
    totalMs: number
    queueMs: number
    localMs: number
    remoteMs: number
    sendMs: number
  }): void {
    const threshold = this.options.slowRequestMs
    if (threshold < 0 || fields.totalMs - fields.remoteMs <= threshold) return
    // A saturated broker makes every request slow: one line per interval, with a count of
    // the rest, keeps the log (and its cost) bounded when it matters most.
    const now = this.nowMs()
    if (now - this.lastSlowLogMs < SLOW_LOG_INTERVAL_MS) {
      this.slowSuppressed++
      return
    }
    const suppressed = this.slowSuppressed
    this.lastSlowLogMs = now
    this.slowSuppressed = 0
    this.options.logger.warn(
      {
        ...fields,
        slowRequestsNotLogged: suppressed,
        totalMs: round(fields.totalMs),
        queueMs: round(fields.queueMs),
        localMs: round(fields.localMs),
        remoteMs: round(fields.remoteMs),
        sendMs: round(fields.sendMs),
      },
      'slow request',
    )
  }
}

class Observation implements RequestObservation {
  private readonly receivedMs: number
  private handlerStartMs = 0
  private responseMs = 0
  private purgatoryDepth = 0
  private purgatoryStartMs = 0
  private remoteMs = 0
  private request: unknown = null
  private follower = false
  private clientId: string | null = null
  private readonly api: string

  constructor(
    private readonly metrics: RequestMetrics,
    private readonly apiKey: number,
    private readonly apiVersion: number,
    private readonly remoteAddress: string,
  ) {
    this.receivedMs = metrics.nowMs()
    this.api = apiName(apiKey)
    metrics.requests.inc(this.api)
  }

  onHandlerStart(request: unknown, clientId: string | null): void {
    this.handlerStartMs = this.metrics.nowMs()
    this.clientId = clientId
    if (this.apiKey === ApiKey.Produce) this.request = request
    else if (this.apiKey === ApiKey.Fetch) {
      const r = request as { replicaId?: number; replicaState?: { replicaId: number } }
      this.follower = (r.replicaState?.replicaId ?? r.replicaId ?? -1) >= 0
    }
  }

  // A produce to several partitions waits in the purgatory once per partition, overlapping:
  // the remote time is the span during which at least one of them waits.
  enter(purgatory: 'Produce' | 'Fetch'): void {
    if (this.purgatoryDepth++ === 0) {
      this.purgatoryStartMs = this.metrics.nowMs()
      this.metrics.purgatorySize[purgatory]++
    }
  }

  leave(purgatory: 'Produce' | 'Fetch'): void {
    if (--this.purgatoryDepth === 0) {
      this.remoteMs += this.metrics.nowMs() - this.purgatoryStartMs
      this.metrics.purgatorySize[purgatory]--
    }
  }

  onResponse(response: unknown): void {
    this.responseMs = this.metrics.nowMs()
    if (this.apiKey === ApiKey.Produce)
      this.metrics.countProduce(this.request as ProduceShape, response as ProduceResponseShape | null)
    else if (this.apiKey === ApiKey.Fetch) {
      if (response !== null) this.metrics.countFetched(response as FetchResponseShape, this.follower)
    } else if (response !== null) this.metrics.countErrors(this.api, response)
  }

  onSent(): void {
    const now = this.metrics.nowMs()
    const m = this.metrics
    const totalMs = now - this.receivedMs
    const queueMs = this.handlerStartMs - this.receivedMs
    const localMs = Math.max(0, this.responseMs - this.handlerStartMs - this.remoteMs)
    const sendMs = now - this.responseMs
    m.totalTime.observeMs(this.api, totalMs)
    m.queueTime.observeMs(this.api, queueMs)
    m.localTime.observeMs(this.api, localMs)
    m.remoteTime.observeMs(this.api, this.remoteMs)
    m.sendTime.observeMs(this.api, sendMs)
    m.maybeLogSlow({
      api: this.api,
      apiVersion: this.apiVersion,
      clientId: this.clientId,
      remoteAddress: this.remoteAddress,
      totalMs,
      queueMs,
      localMs,
      remoteMs: this.remoteMs,
      sendMs,
    })
  }

  onFailed(): void {
    this.metrics.errors.inc(`${this.api}:UNKNOWN_SERVER_ERROR`)
  }
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000
}

/** Records in a produce payload: the record count of each batch header (magic 2), no decoding. */
export function countRecords(records: Buffer): number {
  let count = 0
  let position = 0
  // Batch header: baseOffset int64, batchLength int32 (bytes after this field), ..., magic
  // at 16, ..., recordCount int32 at 57; 61 bytes in all.
  while (position + 61 <= records.length) {
    const batchLength = records.readInt32BE(position + 8)
    if (batchLength < 49 || records[position + 16] !== 2) break
    count += records.readInt32BE(position + 57)
    position += 12 + batchLength
  }
  return count
}

function recordsLength(records: unknown): number {
  if (Buffer.isBuffer(records)) return records.length
  if (Array.isArray(records)) {
    let length = 0
    for (const chunk of records) if (Buffer.isBuffer(chunk)) length += chunk.length
    return length
  }
  return 0
}

/** Calls `onError` for each non-zero `errorCode` in a response (bounded depth; skips record data). */
function countErrorCodes(value: unknown, depth: number, onError: (code: number) => void): void {
  if (depth > 5 || value === null || typeof value !== 'object' || Buffer.isBuffer(value)) return
  if (Array.isArray(value)) {
    for (const item of value) countErrorCodes(item, depth + 1, onError)
    return
  }
  for (const key in value) {
    const field = (value as Record<string, unknown>)[key]
    if (key === 'errorCode') {
      if (typeof field === 'number' && field !== ErrorCode.NONE) onError(field)
    } else if (typeof field === 'object' && key !== 'records') countErrorCodes(field, depth + 1, onError)
  }
}
