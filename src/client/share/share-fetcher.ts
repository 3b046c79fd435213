/**
 * The share consumer's requests to partition leaders (Java's ShareConsumeRequestManager):
 * ShareFetch with the acknowledgements piggybacked, ShareAcknowledge for commitSync,
 * commitAsync, RENEW and close, one ShareSession per broker.
 *
 * - A ShareFetch at epoch 0 opens the session and may carry no acknowledgements: they go
 *   back to the caller (`unsent`) to ride on the next request.
 * - RENEW acknowledgements go in a ShareAcknowledge of their own with IsRenewAck (v2): a
 *   ShareFetch with IsRenewAck fetches nothing and must zero its limits, so it is no use.
 * - Each acknowledged partition gets a result: null, or the partition's acknowledge error
 *   code, the request's top-level error, or the failure that lost the request.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import type {
  ShareAcknowledgeRequest,
  ShareAcknowledgeResponse,
} from '../../protocol/generated/apis/share-acknowledge.js'
import type { ShareFetchRequest, ShareFetchResponse } from '../../protocol/generated/apis/share-fetch.js'
import { ApiKey } from '../../protocol/generated/index.js'
import type { KafkaClient } from '../client.js'
import { asClientError, KafkaClientError, KafkaProtocolError } from '../errors.js'
import type { AcknowledgementBatch, Acknowledgements } from './acknowledgements.js'
import { decodeAcquiredRecords, type ShareConsumerRecord } from './share-fetch-records.js'
import {
  FINAL_SHARE_SESSION_EPOCH,
  ShareSession,
  type ShareSessionEpoch,
  type TopicIdPartition,
  tipKey,
} from './share-session.js'

/** One partition's acknowledgements to send. */
export interface PartitionAcknowledgements {
  readonly tip: TopicIdPartition
  readonly acknowledgements: Acknowledgements
}

/** The outcome of acknowledgements sent for one partition (Java's commitSync map entry). */
export interface AcknowledgementResult {
  readonly topic: string
  readonly topicId: string
  readonly partition: number
  /** The offsets acknowledged, GAP offsets included. */
  readonly offsets: readonly number[]
  /** null: the broker applied them; else why not (a KafkaProtocolError carries the Kafka error code). */
  readonly error: KafkaClientError | null
}

export interface ShareFetchLimits {
  readonly fetchMinBytes: number
  readonly fetchMaxBytes: number
  readonly maxPollRecords: number
  /** share.acquire.mode: 0 batch_optimized, 1 record_limit (ShareFetch v2). */
  readonly acquireMode: number
  readonly requestTimeoutMs: number
}

export interface NodeFetchResult {
  readonly records: ShareConsumerRecord[]
  /** Acquired offsets without a record, per partition: to be answered GAP. */
  readonly gaps: { tip: TopicIdPartition; offsets: number[] }[]
  readonly results: AcknowledgementResult[]
  /** Acknowledgements the request could not carry (new session): send them later. */
  readonly unsent: PartitionAcknowledgements[]
  /** A partition's leader moved or is unknown: refresh the metadata before the next fetch. */
  readonly staleMetadata: boolean
  /** A failure that is not the partition's to retry (authorization, ...): poll throws it. */
  readonly fatal: KafkaClientError | null
  /** The request failed as a whole (lost connection, session error): back off before the next. */
  readonly failed: boolean
}

const SESSION_ERRORS: ReadonlySet<number> = new Set([
  ErrorCode.SHARE_SESSION_NOT_FOUND,
  ErrorCode.INVALID_SHARE_SESSION_EPOCH,
])

const LEADER_MOVED: ReadonlySet<number> = new Set([
  ErrorCode.NOT_LEADER_OR_FOLLOWER,
  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
  ErrorCode.UNKNOWN_TOPIC_ID,
  ErrorCode.LEADER_NOT_AVAILABLE,
  ErrorCode.FENCED_LEADER_EPOCH,
  ErrorCode.UNKNOWN_LEADER_EPOCH,
  ErrorCode.KAFKA_STORAGE_ERROR,
])

export class ShareFetcher {
  private readonly sessions = new Map<number, ShareSession>()

  constructor(
    private readonly client: KafkaClient,
    private readonly groupId: string,
    private readonly memberId: string,
    private readonly limits: ShareFetchLimits,
  ) {}

  /** The nodes with an open share session (close sends each its final ShareAcknowledge). */
  openSessionNodes(): number[] {
    return [...this.sessions.values()].filter((s) => s.isOpen).map((s) => s.nodeId)
  }

  isSessionOpen(nodeId: number): boolean {
    return this.sessions.get(nodeId)?.isOpen ?? false
  }

  /** One ShareFetch to `nodeId` for `partitions`, carrying `acks` when the session is open. */
  fetch(
    nodeId: number,
    partitions: readonly TopicIdPartition[],
    acks: readonly PartitionAcknowledgements[],
    maxWaitMs: number,
  ): Promise<NodeFetchResult> {
    const session = this.sessionOf(nodeId)
    return session.exclusive(async () => {
      let carried = session.isOpen ? acks : []
      const unsent = session.isOpen ? [] : [...acks]
      const results: AcknowledgementResult[] = []
      const renews = carried.filter((a) => a.acknowledgements.hasRenew)
      if (renews.length > 0) {
        results.push(...(await this.sendAcknowledge(session, renews, session.nextEpoch)))
        carried = carried.filter((a) => !a.acknowledgements.hasRenew)
        // The ShareAcknowledge may have reset the session: then the rest waits too.
        if (!session.isOpen) {
          unsent.push(...carried)
          carried = []
        }
      }
      const outcome = await this.sendFetch(session, partitions, carried, maxWaitMs)
      return { ...outcome, results: [...results, ...outcome.results], unsent: [...unsent, ...outcome.unsent] }
    })
  }

  /**
   * One ShareAcknowledge to `nodeId` (`final`: epoch -1, closing the session). Acks for a
   * broker without an open session come back in `unsent` (none at close: they are dropped,
   * the member's leave releases those records anyway).
   */
  acknowledge(
    nodeId: number,
    acks: readonly PartitionAcknowledgements[],
    options: { final?: boolean } = {},
  ): Promise<{ results: AcknowledgementResult[]; unsent: PartitionAcknowledgements[] }> {
    const session = this.sessionOf(nodeId)
    return session.exclusive(async () => {
      if (!session.isOpen) return { results: [], unsent: options.final ? [] : [...acks] }
      if (options.final) {
        const results = await this.sendAcknowledge(session, acks, FINAL_SHARE_SESSION_EPOCH)
        session.markClosed()
        return { results, unsent: [] }
      }
      return { results: await this.sendAcknowledge(session, acks, session.nextEpoch), unsent: [] }
    })
  }

  private sessionOf(nodeId: number): ShareSession {
    let session = this.sessions.get(nodeId)
    if (!session) {
      session = new ShareSession(nodeId)
      this.sessions.set(nodeId, session)
    }
    return session
  }

  private async sendFetch(
    session: ShareSession,
    partitions: readonly TopicIdPartition[],
    acks: readonly PartitionAcknowledgements[],
    maxWaitMs: number,
  ): Promise<Omit<NodeFetchResult, 'unsent'> & { unsent: PartitionAcknowledgements[] }> {
    const epoch = session.nextEpoch
    const change = session.change(partitions)
    const request = this.fetchRequest(epoch, change.added, change.forgotten, acks, maxWaitMs)
    let response: ShareFetchResponse
    try {
      response = await this.client.request<ShareFetchResponse>(session.nodeId, ApiKey.ShareFetch, request, {
        purpose: 'fetch',
        timeoutMs: this.limits.requestTimeoutMs + maxWaitMs,
      })
    } catch (error) {
      session.reset()
      const failure = asClientError(error)
      const fatal = failure.retriable ? null : failure
      return { ...emptyFetch(true, fatal), results: failedResults(acks, failure), unsent: [] }
    }
    if (response.errorCode !== ErrorCode.NONE) {
      if (SESSION_ERRORS.has(response.errorCode)) session.reset()
      else session.onAnswered()
      const failure = new KafkaProtocolError(response.errorCode, response.errorMessage ?? 'ShareFetch')
      const fatal = failure.retriable || SESSION_ERRORS.has(response.errorCode) ? null : failure
      return { ...emptyFetch(true, fatal), results: failedResults(acks, failure), unsent: [] }
    }
    session.onAnswered()
    return this.onFetchResponse(response, partitions, acks)
  }

  private fetchRequest(
    epoch: ShareSessionEpoch,
    added: readonly TopicIdPartition[],
    forgotten: readonly TopicIdPartition[],
    acks: readonly PartitionAcknowledgements[],
    maxWaitMs: number,
  ): (version: number) => ShareFetchRequest {
    // A new session names every partition; an incremental one those added and those acknowledged.
    const named = new Map<string, { tip: TopicIdPartition; batches: AcknowledgementBatch[] }>()
    for (const tip of added) named.set(tipKey(tip), { tip, batches: [] })
    for (const a of acks) named.set(tipKey(a.tip), { tip: a.tip, batches: a.acknowledgements.toBatches() })
    return (version) => ({
      groupId: this.groupId,
      memberId: this.memberId,
      shareSessionEpoch: epoch,
      maxWaitMs,
      minBytes: this.limits.fetchMinBytes,
      maxBytes: this.limits.fetchMaxBytes,
      maxRecords: this.limits.maxPollRecords,
      batchSize: this.limits.maxPollRecords,
      shareAcquireMode: version >= 2 ? this.limits.acquireMode : 0,
      isRenewAck: false,
      topics: byTopic([...named.values()], (n) => n.tip).map(([topicId, entries]) => ({
        topicId,
        partitions: entries.map((n) => ({
          partitionIndex: n.tip.partition,
          partitionMaxBytes: 0,
          acknowledgementBatches: n.batches,
        })),
      })),
      forgottenTopicsData: byTopic(forgotten, (tip) => tip).map(([topicId, tips]) => ({
        topicId,
        partitions: tips.map((tip) => tip.partition),
      })),
    })
  }

  private async onFetchResponse(
    response: ShareFetchResponse,
    partitions: readonly TopicIdPartition[],
    acks: readonly PartitionAcknowledgements[],
  ): Promise<Omit<NodeFetchResult, 'unsent'> & { unsent: PartitionAcknowledgements[] }> {
    const known = new Map(partitions.map((tip) => [tipKey(tip), tip]))
    for (const a of acks) known.set(tipKey(a.tip), a.tip)
    const ackErrors = new Map<string, KafkaClientError>()
    const records: ShareConsumerRecord[] = []
    const gaps: { tip: TopicIdPartition; offsets: number[] }[] = []
    let staleMetadata = false
    let fatal: KafkaClientError | null = null
    for (const topic of response.responses)
      for (const p of topic.partitions) {
        const tip = known.get(tipKey({ topicId: topic.topicId, partition: p.partitionIndex }))
        if (!tip) continue
        if (p.acknowledgeErrorCode !== ErrorCode.NONE)
          ackErrors.set(tipKey(tip), partitionError(p.acknowledgeErrorCode, p.acknowledgeErrorMessage, tip))
        if (p.errorCode !== ErrorCode.NONE) {
          if (LEADER_MOVED.has(p.errorCode)) staleMetadata = true
          else if (!new KafkaProtocolError(p.errorCode).retriable)
            fatal ??= partitionError(p.errorCode, p.errorMessage, tip)
          continue
        }
        const batch = await decodeAcquiredRecords(
          tip.topicId,
          tip.topic,
          tip.partition,
          p.records,
          p.acquiredRecords,
        )
        records.push(...batch.records)
        if (batch.gapOffsets.length > 0) gaps.push({ tip, offsets: batch.gapOffsets })
      }
    const results = acks.map((a) => result(a, ackErrors.get(tipKey(a.tip)) ?? null))
    return { records, gaps, results, unsent: [], staleMetadata, fatal, failed: false }
  }

  private async sendAcknowledge(
    session: ShareSession,
    acks: readonly PartitionAcknowledgements[],
    epoch: ShareSessionEpoch,
  ): Promise<AcknowledgementResult[]> {
    const renew = acks.some((a) => a.acknowledgements.hasRenew)
    const build = (version: number): ShareAcknowledgeRequest => {
      if (renew && version < 2)
        throw new KafkaClientError(
          'ERR_UNSUPPORTED_VERSION',
          `RENEW needs ShareAcknowledge v2 (KIP-1222); broker ${session.nodeId} serves v${version}`,
        )
      return {
        groupId: this.groupId,
        memberId: this.memberId,
        shareSessionEpoch: epoch,
        isRenewAck: renew,
        topics: byTopic(acks, (a) => a.tip).map(([topicId, entries]) => ({
          topicId,
          partitions: entries.map((a) => ({
            partitionIndex: a.tip.partition,
            acknowledgementBatches: a.acknowledgements.toBatches(),
          })),
        })),
      }
    }
    let response: ShareAcknowledgeResponse
    try {
      response = await this.client.request<ShareAcknowledgeResponse>(
        session.nodeId,
        ApiKey.ShareAcknowledge,
        build,
      )
    } catch (error) {
      const failure = asClientError(error)
      if (failure.code !== 'ERR_UNSUPPORTED_VERSION') session.reset()
      return failedResults(acks, failure)
    }
    if (response.errorCode !== ErrorCode.NONE) {
      if (SESSION_ERRORS.has(response.errorCode)) session.reset()
      else if (epoch !== FINAL_SHARE_SESSION_EPOCH) session.onAnswered()
      return failedResults(
        acks,
        new KafkaProtocolError(response.errorCode, response.errorMessage ?? 'ShareAcknowledge'),
      )
    }
    if (epoch !== FINAL_SHARE_SESSION_EPOCH) session.onAnswered()
    const errors = new Map<string, KafkaClientError>()
    for (const topic of response.responses)
      for (const p of topic.partitions)
        if (p.errorCode !== ErrorCode.NONE) {
          const key = tipKey({ topicId: topic.topicId, partition: p.partitionIndex })
          const tip = acks.find((a) => tipKey(a.tip) === key)?.tip
          if (tip) errors.set(key, partitionError(p.errorCode, p.errorMessage, tip))
        }
    return acks.map((a) => result(a, errors.get(tipKey(a.tip)) ?? null))
  }
}

function emptyFetch(
  failed: boolean,
  fatal: KafkaClientError | null,
): Omit<NodeFetchResult, 'results' | 'unsent'> {
  return { records: [], gaps: [], staleMetadata: failed, fatal, failed }
}

function result(a: PartitionAcknowledgements, error: KafkaClientError | null): AcknowledgementResult {
  return {
    topic: a.tip.topic,
    topicId: a.tip.topicId,
    partition: a.tip.partition,
    offsets: a.acknowledgements.entries().map(([offset]) => offset),
    error,
  }
}

function failedResults(
  acks: readonly PartitionAcknowledgements[],
  error: KafkaClientError,
): AcknowledgementResult[] {
  return acks.map((a) => result(a, error))
}

function partitionError(code: number, message: string | null, tip: TopicIdPartition): KafkaProtocolError {
  return new KafkaProtocolError(code, `${tip.topic}-${tip.partition}${message ? `: ${message}` : ''}`)
}

/** Groups items by topic id, keeping first-seen order. */
function byTopic<T>(items: readonly T[], tipOf: (item: T) => TopicIdPartition): [string, T[]][] {
  const groups = new Map<string, T[]>()
  for (const item of items) {
    const topicId = tipOf(item).topicId
    const group = groups.get(topicId)
    if (group) group.push(item)
    else groups.set(topicId, [item])
  }
  return [...groups]
}
