/**
 * Fetch (key 1).
 * Behavior: reads whole record batches from each partition's leader up to the high
 * watermark (read_uncommitted) or the last stable offset (read_committed), at most
 * partitionMaxBytes per partition and maxBytes in all, except that the first batch found
 * is returned even when larger (v3+), so a consumer can always make progress. When fewer
 * than minBytes are available the fetch waits in the purgatory until data is committed or
 * maxWaitMs passes. Incremental fetch sessions (KIP-227) are kept in the broker's cache:
 * an incremental fetch reads only the session partitions that may have news (see
 * unchangedSince) and answers only those that do, while a follower's fetch still counts for
 * every partition of its session (the session's fetch offsets are its position). A
 * follower's session only considers the partitions that may have news at all, so an idle
 * follower's round trip costs O(partitions with news) (replication/follower-session-news.ts).
 * Authorization: a follower's fetch needs CLUSTER_ACTION on the cluster, a consumer's READ
 * on each topic; a partition it may not read answers TOPIC_AUTHORIZATION_FAILED.
 * Version notes: v3 adds maxBytes, v4 isolation level, last stable offset and aborted
 * transactions, v5 log start offset, v7 fetch sessions, v9 current leader epoch, v11
 * rack and preferred read replica (KIP-392: with replica.selector.class set, the leader names
 * a replica in the consumer's rack and reads nothing for it; any v11+ consumer fetch may be
 * served by a follower, up to its high watermark), v12+ flexible with diverging epoch tags, v13 topic ids
 * instead of names, v15 replica state instead of replicaId: a follower fetch with a broker
 * epoch older than its registration's comes from a fenced incarnation (NOT_LEADER_OR_FOLLOWER);
 * v18 (KIP-1166) lets a follower send its high watermark, a tagged field tidelog ignores.
 */

import { type BrokerId, brokerIdFromWire, NO_OFFSET, offsetFromWire, toOffset } from '../../common/types.js'
import { topicById } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { defaultFetchResponsePartitionData } from '../../protocol/generated/fetch-response.js'
import {
  ApiKey,
  type FetchRequest,
  type FetchResponse,
  type FetchResponseFetchableTopicResponse,
  type FetchResponsePartitionData,
} from '../../protocol/generated/index.js'
import type {
  FetchPartitionData,
  FetchPartitionRequest,
  FetchPartitionResult,
  FetchReader,
} from '../../replication/fetch-messages.js'
import { FollowerSessionNews } from '../../replication/follower-session-news.js'
import { toErrorCode } from '../../replication/kafka-error.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import { type FetchSession, type SessionPartition, sessionKey } from '../fetch-session-cache.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

const TOPIC_ID_VERSION = 13

interface FetchTarget extends FetchPartitionRequest {
  /** Set when the topic id of a v13+ request is unknown. */
  readonly unknownTopicId?: boolean
  /** The principal may not read it (a consumer without READ, a follower without CLUSTER_ACTION). */
  readonly denied?: boolean
  readonly sessionPartition?: SessionPartition
}

export const fetchHandler: ApiHandler<FetchRequest, FetchResponse> = {
  apiKey: ApiKey.Fetch,
  minVersion: 0,
  maxVersion: 18,
  // Not async: the response is built in the replica manager's callback, in the same turn
  // as its last read (as before the long poll moved there), so the deterministic
  // simulation's seeds still replay the same histories.
  handle(context, request) {
    try {
      return handleFetch(context, request)
    } catch (error) {
      return Promise.reject(error)
    }
  },
}

function handleFetch(context: RequestContext, request: FetchRequest): Promise<FetchResponse> {
  const version = context.apiVersion
  const replicaId = brokerIdFromWire(version >= 15 ? request.replicaState.replicaId : request.replicaId)
  let session: FetchSession | null = null
  let incremental = false
  if (version >= 7) {
    try {
      const decision = context.broker.fetchSessions.begin(
        request.sessionId,
        request.sessionEpoch,
        context.broker.clock.nowMs(),
        {
          privileged: replicaId >= 0,
          partitionCount: request.topics.reduce((sum, t) => sum + t.partitions.length, 0),
        },
      )
      session = decision.session
      incremental = decision.kind === 'incremental'
    } catch (error) {
      const code = toErrorCode(error)
      if (code === null) throw error
      return Promise.resolve({
        throttleTimeMs: 0,
        errorCode: code,
        sessionId: 0,
        responses: [],
        nodeEndpoints: [],
      })
    }
  }
  // A follower's session tracks which partitions may have news (follower-session-news.ts):
  // its incremental fetches consider only those, unless it may not fetch at all.
  let news = session !== null && incremental ? followerNews.get(session) : undefined
  if (
    news !== undefined &&
    !context.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
  )
    news = undefined
  const targets = authorizeTargets(
    context,
    !incremental
      ? fullTargets(context, request, session, replicaId)
      : news !== undefined
        ? updateTrackedSession(context, request, session!, news)
        : updateSession(context, request, session!),
    replicaId >= 0,
  )
  const reader = readerOf(context, request, replicaId)
  const requestedMaxBytes = version >= 3 ? request.maxBytes : Number.MAX_SAFE_INTEGER
  // Kafka asks no more than a consumer's byte-rate quota allows in (samples - 1) windows.
  const quotaMaxBytes =
    reader.kind === 'consumer' && context.broker.clientQuotas?.fetch.enabled
      ? context.broker.clientQuotas.fetchMaxBytes(
          context.connection.principal.name,
          context.header.clientId ?? '',
        )
      : Number.MAX_SAFE_INTEGER
  // Partitions refused here (unknown topic id, not authorized) are answered without the
  // replica manager, as Kafka's erroneous partitions are. A refused partition does not cut
  // the others' long poll short; an unknown topic id does (tidelog's answer so far).
  const refused = (t: FetchTarget): boolean => t.unknownTopicId === true || t.denied === true
  const readable = targets.some(refused) ? targets.filter((t) => !refused(t)) : targets
  const answerAtOnce = targets.some((t) => t.unknownTopicId && !t.denied)
  const params = {
    reader,
    partitions: readable,
    maxBytes: Math.min(requestedMaxBytes, quotaMaxBytes),
    minBytes: request.minBytes,
    maxWaitMs: answerAtOnce ? 0 : request.maxWaitMs,
    firstBatchMayExceed: version >= 3,
    byTopicId: version >= TOPIC_ID_VERSION,
    incremental,
    metadataImage: () => context.broker.metadataImage(),
    purgatoryTimer: context.purgatoryTimer,
    followerSession: news,
  }
  return context.broker.replicaManager.fetchMessages(params, (read) =>
    toResponse(context, targets, read, session, incremental, news !== undefined),
  )
}

/** The response: the replica manager's answers and the refused partitions', in request order. */
function toResponse(
  context: RequestContext,
  targets: readonly FetchTarget[],
  read: readonly FetchPartitionResult<FetchTarget>[],
  session: FetchSession | null,
  incremental: boolean,
  /** The reads are of the tracked session's partitions with news, not of `targets`. */
  tracked: boolean,
): FetchResponse {
  const results = tracked ? mergeTracked(targets, read) : mergeResults(targets, read)
  // The answer that opens a session cannot reach a client that closed the connection (a
  // replica fetcher cuts its long poll short that way): the session would hold a slot,
  // and a follower's outranks consumers', until it went stale.
  if (session !== null && !incremental && context.connection.isClosed)
    context.broker.fetchSessions.remove(session.id)
  const shown = incremental ? results.filter((r) => hasNews(r)) : results
  for (const r of results) rememberSeen(r)
  return {
    throttleTimeMs: 0,
    errorCode: ErrorCode.NONE,
    sessionId: session?.id ?? 0,
    responses: groupByTopic(shown, context.apiVersion),
    nodeEndpoints: [],
  }
}

/** Who fetches: a follower (replicaId >= 0) or a consumer, with what the version carries. */
function readerOf(context: RequestContext, request: FetchRequest, replicaId: BrokerId): FetchReader {
  const version = context.apiVersion
  return replicaId >= 0
    ? {
        kind: 'follower',
        replicaId,
        brokerEpoch: version >= 15 ? Number(request.replicaState.replicaEpoch) : -1,
      }
    : {
        kind: 'consumer',
        isolation: version >= 4 && request.isolationLevel === 1 ? 'read_committed' : 'read_uncommitted',
        // KIP-392: a v11+ fetch carries client metadata, so it may read from a follower.
        followerReadAllowed: version >= 11,
        clientRack:
          version >= 11 && context.broker.config.values.get('replica.selector.class') !== null
            ? request.rackId
            : '',
      }
}

/** Kafka's handleFetchRequest: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on each topic. */
function authorizeTargets(context: RequestContext, targets: FetchTarget[], follower: boolean): FetchTarget[] {
  if (follower) {
    if (context.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)) return targets
    return targets.map((t) => ({ ...t, denied: true }))
  }
  const readable = new Map<string, boolean>()
  return targets.map((t) => {
    if (t.unknownTopicId) return t
    let allowed = readable.get(t.topic)
    if (allowed === undefined) {
      allowed = context.authorize(AclOperation.READ, ResourceType.TOPIC, t.topic)
      readable.set(t.topic, allowed)
    }
    return allowed ? t : { ...t, denied: true }
  })
}

function resolveTopic(context: RequestContext, version: number, name: string, topicId: string) {
  if (version < TOPIC_ID_VERSION)
    return { name, topicId: context.broker.metadataImage().topics.get(name)?.topicId ?? topicId }
  const topic = topicById(context.broker.metadataImage(), topicId)
  return topic ? { name: topic.name, topicId } : { name: '', topicId, unknown: true }
}

function fullTargets(
  context: RequestContext,
  request: FetchRequest,
  session: FetchSession | null,
  replicaId: BrokerId,
): FetchTarget[] {
  const targets: FetchTarget[] = []
  for (const topic of request.topics) {
    const resolved = resolveTopic(context, context.apiVersion, topic.topic, topic.topicId)
    for (const p of topic.partitions) {
      const target = toTarget(resolved, p)
      if (session) {
        // A partition of a topic id not known yet stays in the session, as in Kafka's
        // FetchSession, and is resolved by a later fetch: left out, the client (which
        // keeps it in its session) would never send it again, and a follower whose first
        // fetch came before the leader knew the topic never replicated it.
        const sp = toSessionPartition(target)
        session.partitions.set(keyOf(target, context.apiVersion), sp)
        targets.push({ ...target, sessionPartition: sp })
      } else {
        targets.push(target)
      }
    }
  }
  if (session !== null && replicaId >= 0) trackNews(context, session, replicaId)
  return targets
}

/** The follower sessions whose news is tracked (every follower session this broker opens). */
const followerNews = new WeakMap<FetchSession, FollowerSessionNews<FetchTarget>>()

/** Starts tracking a new follower session: every partition has news until a fetch finds it unchanged. */
function trackNews(context: RequestContext, session: FetchSession, replicaId: BrokerId): void {
  const news = new FollowerSessionNews<FetchTarget>(replicaId, context.broker.clock.monotonicMs())
  for (const [k, sp] of session.partitions) news.set(k, sessionTarget(sp))
  followerNews.set(session, news)
  session.onClose = () => news.close()
}

/**
 * Applies an incremental request to a tracked follower session, in O(partitions it
 * carries); returns the session partitions that may have news.
 */
function updateTrackedSession(
  context: RequestContext,
  request: FetchRequest,
  session: FetchSession,
  news: FollowerSessionNews<FetchTarget>,
): FetchTarget[] {
  const version = context.apiVersion
  for (const forgotten of request.forgottenTopicsData) {
    const resolved = resolveTopic(context, version, forgotten.topic, forgotten.topicId)
    for (const partition of forgotten.partitions) {
      const k = keyOf(
        {
          topic: resolved.name,
          topicId: resolved.topicId,
          partition,
          unknownTopicId: resolved.unknown === true,
        },
        version,
      )
      session.partitions.delete(k)
      news.delete(k)
    }
  }
  for (const topic of request.topics) {
    const resolved = resolveTopic(context, version, topic.topic, topic.topicId)
    for (const p of topic.partitions) {
      const target = toTarget(resolved, p)
      const k = keyOf(target, version)
      const existing = session.partitions.get(k)
      let sp: SessionPartition
      if (existing && existing.topicId === target.topicId) {
        existing.fetchOffset = target.fetchOffset
        existing.partitionMaxBytes = target.partitionMaxBytes
        existing.currentLeaderEpoch = target.currentLeaderEpoch
        sp = existing
      } else {
        sp = toSessionPartition(target)
        session.partitions.set(k, sp)
      }
      news.set(k, sessionTarget(sp))
    }
  }
  const candidates = news.candidates(context.broker.clock.monotonicMs())
  // A partition of a topic id unknown so far has news (its error) until it is resolved.
  if (candidates.some((t) => t.unknownTopicId)) {
    resolveSessionTopics(context, session, (k, sp) => news.set(k, sessionTarget(sp)))
    return news.dirtyTargets()
  }
  return candidates
}

/**
 * A session's targets as of its last change: an incremental fetch that changes nothing (an
 * idle follower's) reuses them instead of building one per session partition.
 */
const sessionTargets = new WeakMap<FetchSession, FetchTarget[]>()

/** Applies an incremental request to its session; the session's partitions are fetched. */
function updateSession(context: RequestContext, request: FetchRequest, session: FetchSession): FetchTarget[] {
  if (request.topics.length === 0 && request.forgottenTopicsData.length === 0) {
    const cached = sessionTargets.get(session)
    if (cached !== undefined) return cached
  }
  for (const forgotten of request.forgottenTopicsData) {
    const resolved = resolveTopic(context, context.apiVersion, forgotten.topic, forgotten.topicId)
    for (const partition of forgotten.partitions)
      session.partitions.delete(
        keyOf(
          {
            topic: resolved.name,
            topicId: resolved.topicId,
            partition,
            unknownTopicId: resolved.unknown === true,
          },
          context.apiVersion,
        ),
      )
  }
  for (const topic of request.topics) {
    const resolved = resolveTopic(context, context.apiVersion, topic.topic, topic.topicId)
    for (const p of topic.partitions) {
      const target = toTarget(resolved, p)
      const k = keyOf(target, context.apiVersion)
      const existing = session.partitions.get(k)
      // Before v13 the key is the name, and a topic re-created under it is another topic:
      // its entry is replaced, not moved to the new one's position under the old topic id.
      if (existing && existing.topicId === target.topicId) {
        existing.fetchOffset = target.fetchOffset
        existing.partitionMaxBytes = target.partitionMaxBytes
        existing.currentLeaderEpoch = target.currentLeaderEpoch
      } else {
        session.partitions.set(k, toSessionPartition(target))
      }
    }
  }
  const unresolved = resolveSessionTopics(context, session)
  const targets: FetchTarget[] = [...session.partitions.values()].map(sessionTarget)
  // A session with topic ids still unknown is resolved again on every fetch, not cached.
  if (unresolved === 0) sessionTargets.set(session, targets)
  else sessionTargets.delete(session)
  return targets
}

/** The topic name of a session partition whose topic id the broker does not know yet. */
const UNRESOLVED = ''

function sessionTarget(sp: SessionPartition): FetchTarget {
  return {
    topic: sp.topic,
    topicId: sp.topicId,
    partition: sp.partition,
    fetchOffset: sp.fetchOffset,
    partitionMaxBytes: sp.partitionMaxBytes,
    currentLeaderEpoch: sp.currentLeaderEpoch,
    unknownTopicId: sp.topic === UNRESOLVED,
    sessionPartition: sp,
  }
}

/**
 * A session partition's key: from v13, where requests name topics by id, the topic id
 * (Kafka's sessions hold TopicIdPartitions); before, the name. Keyed by name, a v13+
 * session mixed up a topic and the one created again under its name (issue 40, item 4): a
 * follower's forget of the old topic's partition, by an id this broker had dropped with the
 * deletion, found nothing; its later add of the new topic's partition then moved the old
 * entry, which kept the old topic id. Every answer went out under the old id, which the
 * follower ignored: it never fetched the new partition, and acks=all produces waited until
 * the ISR dropped it (replica.lag.time.max.ms, 30 s).
 */
function keyOf(
  target: { topic: string; topicId: string; partition: number; unknownTopicId?: boolean },
  version: number,
): string {
  return version >= TOPIC_ID_VERSION || target.unknownTopicId === true
    ? sessionKey(`\u0001${target.topicId}`, target.partition)
    : sessionKey(target.topic, target.partition)
}

/**
 * Names the session's partitions whose topic id is known now (Kafka's
 * maybeResolveUnknownName); returns how many stay unknown.
 */
function resolveSessionTopics(
  context: RequestContext,
  session: FetchSession,
  onResolved?: (k: string, sp: SessionPartition) => void,
): number {
  let unresolved = 0
  for (const [k, sp] of session.partitions) {
    if (sp.topic !== UNRESOLVED) continue
    const topic = topicById(context.broker.metadataImage(), sp.topicId)
    if (topic === undefined) {
      unresolved++
      continue
    }
    // Keyed by topic id (v13+): the entry keeps its key and its place.
    const named = { ...sp, topic: topic.name }
    session.partitions.set(k, named)
    onResolved?.(k, named)
  }
  return unresolved
}

function toTarget(
  resolved: { name: string; topicId: string; unknown?: boolean },
  p: FetchRequest['topics'][number]['partitions'][number],
): FetchTarget {
  return {
    topic: resolved.name,
    topicId: resolved.topicId,
    partition: p.partition,
    fetchOffset: offsetFromWire(p.fetchOffset),
    partitionMaxBytes: p.partitionMaxBytes,
    currentLeaderEpoch: p.currentLeaderEpoch,
    unknownTopicId: resolved.unknown === true,
  }
}

function toSessionPartition(target: FetchTarget): SessionPartition {
  return {
    topic: target.topic,
    topicId: target.topicId,
    partition: target.partition,
    fetchOffset: target.fetchOffset,
    partitionMaxBytes: target.partitionMaxBytes,
    currentLeaderEpoch: target.currentLeaderEpoch,
    lastHighWatermark: NO_OFFSET,
    lastLogStartOffset: NO_OFFSET,
    lastLastStableOffset: NO_OFFSET,
  }
}

interface ReadResult {
  readonly target: FetchTarget
  readonly data: FetchResponsePartitionData
  readonly bytes: number
}

/**
 * The answers in request order: the replica manager's, translated, and the refused
 * partitions'. An incremental fetch leaves out the session partitions not read (unchanged).
 */
function mergeResults(
  targets: readonly FetchTarget[],
  read: readonly FetchPartitionResult<FetchTarget>[],
): ReadResult[] {
  const byTarget = new Map(read.map((r) => [r.target, r]))
  const results: ReadResult[] = []
  for (const target of targets) {
    if (target.unknownTopicId) results.push(errorResult(target, ErrorCode.UNKNOWN_TOPIC_ID))
    else if (target.denied) results.push(errorResult(target, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    else {
      const r = byTarget.get(target)
      if (r !== undefined) results.push({ target, data: toResponseData(target, r.data), bytes: r.bytes })
    }
  }
  return results
}

/** A tracked session's answers: the partitions refused here, then the replica manager's reads. */
function mergeTracked(
  targets: readonly FetchTarget[],
  read: readonly FetchPartitionResult<FetchTarget>[],
): ReadResult[] {
  const results: ReadResult[] = []
  for (const target of targets) {
    if (target.unknownTopicId) results.push(errorResult(target, ErrorCode.UNKNOWN_TOPIC_ID))
    else if (target.denied) results.push(errorResult(target, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
  }
  for (const r of read)
    results.push({ target: r.target, data: toResponseData(r.target, r.data), bytes: r.bytes })
  return results
}

function toResponseData(target: FetchTarget, data: FetchPartitionData): FetchResponsePartitionData {
  if (data.errorCode !== ErrorCode.NONE) return errorResult(target, data.errorCode).data
  return {
    ...defaultFetchResponsePartitionData(),
    partitionIndex: target.partition,
    errorCode: ErrorCode.NONE,
    highWatermark: BigInt(data.highWatermark),
    lastStableOffset: BigInt(data.lastStableOffset),
    logStartOffset: BigInt(data.logStartOffset),
    abortedTransactions:
      data.abortedTransactions?.map((t) => ({
        producerId: t.producerId,
        firstOffset: BigInt(t.firstOffset),
      })) ?? null,
    preferredReadReplica: data.preferredReadReplica,
    records: data.records,
  }
}

const REFUSED_BEFORE_READ: ReadonlySet<number> = new Set([
  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
  ErrorCode.UNKNOWN_TOPIC_ID,
  ErrorCode.TOPIC_AUTHORIZATION_FAILED,
])

function errorResult(target: FetchTarget, errorCode: number): ReadResult {
  return {
    target,
    bytes: 0,
    data: {
      ...defaultFetchResponsePartitionData(),
      partitionIndex: target.partition,
      errorCode,
      highWatermark: -1n,
      lastStableOffset: -1n,
      logStartOffset: -1n,
      // As Kafka: a partition refused before the read (unknown, not authorized) carries an
      // empty list, one whose read failed (out of range, fenced epoch, not leader) null.
      abortedTransactions: REFUSED_BEFORE_READ.has(errorCode) ? [] : null,
      preferredReadReplica: -1,
      records: [],
    },
  }
}

/** An incremental response carries a partition only when something changed for its client. */
function hasNews(result: ReadResult): boolean {
  const sp = result.target.sessionPartition
  if (!sp) return true
  return (
    result.bytes > 0 ||
    result.data.errorCode !== ErrorCode.NONE ||
    result.data.preferredReadReplica >= 0 ||
    Number(result.data.highWatermark) !== sp.lastHighWatermark ||
    Number(result.data.lastStableOffset) !== sp.lastLastStableOffset ||
    Number(result.data.logStartOffset) !== sp.lastLogStartOffset
  )
}

function rememberSeen(result: ReadResult): void {
  const sp = result.target.sessionPartition
  if (!sp) return
  sp.lastHighWatermark = toOffset(Number(result.data.highWatermark))
  sp.lastLogStartOffset = toOffset(Number(result.data.logStartOffset))
  sp.lastLastStableOffset = toOffset(Number(result.data.lastStableOffset))
}

function groupByTopic(
  results: readonly ReadResult[],
  version: number,
): FetchResponseFetchableTopicResponse[] {
  const topics: FetchResponseFetchableTopicResponse[] = []
  let current: FetchResponseFetchableTopicResponse | null = null
  for (const r of results) {
    const sameTopic =
      current &&
      (version >= TOPIC_ID_VERSION ? current.topicId === r.target.topicId : current.topic === r.target.topic)
    if (!sameTopic) {
      current = { topic: r.target.topic, topicId: r.target.topicId, partitions: [] }
      topics.push(current)
    }
    current!.partitions.push(r.data)
  }
  return topics
}
