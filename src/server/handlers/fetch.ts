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
 * every partition of its session (the session's fetch offsets are its position).
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
import {
  type DelayedFetchWatch,
  type FetchWakeOn,
  fetchWatch,
  waitForFetchData,
} from '../../replication/delayed-operations.js'
import { toErrorCode } from '../../replication/kafka-error.js'
import type { IsolationLevel, Partition } from '../../replication/partition.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { AbortedTxn } from '../../storage/transaction-index.js'
import type { FetchDataInfo } from '../../storage/unified-log.js'
import { type FetchSession, type SessionPartition, sessionKey } from '../fetch-session-cache.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

const TOPIC_ID_VERSION = 13

interface FetchTarget {
  readonly topic: string
  readonly topicId: string
  readonly partition: number
  readonly fetchOffset: number
  readonly partitionMaxBytes: number
  readonly currentLeaderEpoch: number
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
  async handle(context, request) {
    const version = context.apiVersion
    const replicaId = version >= 15 ? request.replicaState.replicaId : request.replicaId
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
        return { throttleTimeMs: 0, errorCode: code, sessionId: 0, responses: [], nodeEndpoints: [] }
      }
    }
    const targets = authorizeTargets(
      context,
      incremental ? updateSession(context, request, session!) : fullTargets(context, request, session),
      replicaId >= 0,
    )
    const reader: FetchReader =
      replicaId >= 0
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
    const requestedMaxBytes = version >= 3 ? request.maxBytes : Number.MAX_SAFE_INTEGER
    // Kafka asks no more than a consumer's byte-rate quota allows in (samples - 1) windows.
    const quotaMaxBytes =
      reader.kind === 'consumer' && context.broker.clientQuotas?.fetch.enabled
        ? context.broker.clientQuotas.fetchMaxBytes(
            context.connection.principal.name,
            context.header.clientId ?? '',
          )
        : Number.MAX_SAFE_INTEGER
    const maxBytes = Math.min(requestedMaxBytes, quotaMaxBytes)
    // A follower's fetch offsets are its log ends: record them all before reading anything,
    // so one partition's high watermark (and the acks=all produces waiting on it) does not
    // wait for the reads of the partitions ahead of it in this request.
    // Looked up once for the steps before the first read: a fetch of a session carries
    // thousands of partitions, and most of an idle follower's fetch is these lookups.
    const hosted = hostedPartitions(context, targets)
    if (reader.kind === 'follower') recordFollowerFetchStates(targets, hosted, reader)
    const wakeOn: FetchWakeOn =
      reader.kind === 'follower'
        ? 'logEnd'
        : reader.isolation === 'read_committed'
          ? 'lastStableOffset'
          : 'highWatermark'
    // The baseline for "new data" is taken before the first read: a record appended while
    // that read awaits the disk fired no watcher yet, and must still wake this fetch.
    const watches = watchesFor(targets, hosted, wakeOn)
    let results = await readAll(
      context,
      toRead(targets, hosted, reader, incremental),
      reader,
      maxBytes,
      version >= 3,
      false,
    )
    const gotBytes = results.reduce((sum, r) => sum + r.bytes, 0)
    // A refused partition stays refused: as in Kafka it does not cut the others' long poll short.
    // A consumer sent to another replica is answered at once, as Kafka does.
    const anyError = results.some(
      (r) => (r.data.errorCode !== ErrorCode.NONE && !r.target.denied) || r.data.preferredReadReplica >= 0,
    )
    const waitable = targets.some((t) => !t.denied)
    if (gotBytes < request.minBytes && request.maxWaitMs > 0 && !anyError && waitable) {
      await waitForFetchData(
        context.broker.clock,
        watches,
        request.minBytes - gotBytes,
        request.maxWaitMs,
        wakeOn,
        context.purgatoryTimer,
      )
      results = await readAll(
        context,
        // Looked up again: a partition deleted during the wait must answer its error.
        toRead(targets, incremental ? hostedPartitions(context, targets) : hosted, reader, incremental),
        reader,
        maxBytes,
        version >= 3,
        true,
      )
    }
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
      responses: groupByTopic(shown, version),
      nodeEndpoints: [],
    }
  },
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
  return targets
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
  const targets: FetchTarget[] = [...session.partitions.values()].map((sp) => ({
    topic: sp.topic,
    topicId: sp.topicId,
    partition: sp.partition,
    fetchOffset: sp.fetchOffset,
    partitionMaxBytes: sp.partitionMaxBytes,
    currentLeaderEpoch: sp.currentLeaderEpoch,
    unknownTopicId: sp.topic === UNRESOLVED,
    sessionPartition: sp,
  }))
  // A session with topic ids still unknown is resolved again on every fetch, not cached.
  if (unresolved === 0) sessionTargets.set(session, targets)
  else sessionTargets.delete(session)
  return targets
}

/** The topic name of a session partition whose topic id the broker does not know yet. */
const UNRESOLVED = ''

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
function resolveSessionTopics(context: RequestContext, session: FetchSession): number {
  let unresolved = 0
  for (const [k, sp] of session.partitions) {
    if (sp.topic !== UNRESOLVED) continue
    const topic = topicById(context.broker.metadataImage(), sp.topicId)
    if (topic === undefined) {
      unresolved++
      continue
    }
    // Keyed by topic id (v13+): the entry keeps its key and its place.
    session.partitions.set(k, { ...sp, topic: topic.name })
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
    fetchOffset: Number(p.fetchOffset),
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
    lastHighWatermark: -1,
    lastLogStartOffset: -1,
    lastLastStableOffset: -1,
  }
}

interface ReadResult {
  readonly target: FetchTarget
  readonly data: FetchResponsePartitionData
  readonly bytes: number
}

/** Consumers read committed records; followers read everything and report their log end. */
type FetchReader =
  | {
      readonly kind: 'consumer'
      readonly isolation: IsolationLevel
      /** KIP-392: Fetch v11+ may be served by a follower. */
      readonly followerReadAllowed: boolean
      /** The consumer's client.rack when replica.selector.class is set, else ''. */
      readonly clientRack: string
    }
  /** `brokerEpoch`: the follower incarnation's broker epoch (v15+, KIP-903), -1 before. */
  | { readonly kind: 'follower'; readonly replicaId: number; readonly brokerEpoch: number }

/**
 * Records a follower's fetch offset (its log end) on each partition it fetches that this
 * broker leads, as readOne's checks allow: it may move the ISR and the high watermark.
 * Partitions that fail a check are left to readOne, which answers the error.
 */
function recordFollowerFetchStates(
  targets: readonly FetchTarget[],
  hosted: readonly (Partition | undefined)[],
  reader: FetchReader & { kind: 'follower' },
): void {
  for (const [index, target] of targets.entries()) {
    const partition = hosted[index]
    if (!partition?.isLeader) continue
    if (target.currentLeaderEpoch !== -1 && target.currentLeaderEpoch !== partition.leaderEpoch) continue
    // One past the leader's log end is a diverged log (answered OFFSET_OUT_OF_RANGE by the
    // read): it must not count as caught up, as Kafka only updates the state after a good read.
    if (target.fetchOffset <= partition.log.logEndOffset)
      partition.updateFollowerFetchState(reader.replicaId, target.fetchOffset, reader.brokerEpoch)
  }
}

/**
 * The targets to read: all of them, except in an incremental fetch the session partitions
 * that cannot have news (Kafka's IncrementalFetchContext leaves those out of the answer).
 */
function toRead(
  targets: readonly FetchTarget[],
  hosted: readonly (Partition | undefined)[],
  reader: FetchReader,
  incremental: boolean,
): readonly FetchTarget[] {
  if (!incremental) return targets
  const changed: FetchTarget[] = []
  for (let index = 0; index < targets.length; index++)
    if (!unchangedSince(targets[index], hosted[index], reader)) changed.push(targets[index])
  return changed
}

/** Each target's partition, undefined for one not hosted here or not to be read (unknown, denied). */
function hostedPartitions(
  context: RequestContext,
  targets: readonly FetchTarget[],
): (Partition | undefined)[] {
  const replicaManager = context.broker.replicaManager
  const byId = context.apiVersion >= TOPIC_ID_VERSION
  const hosted = new Array<Partition | undefined>(targets.length)
  for (let index = 0; index < targets.length; index++) {
    const target = targets[index]
    const partition =
      target.unknownTopicId || target.denied
        ? undefined
        : replicaManager.getPartition(target.topic, target.partition)
    // Another topic's partition under the name (see readOne): not read, watched or moved.
    hosted[index] = byId && partition?.id.topicId !== target.topicId ? undefined : partition
  }
  return hosted
}

/**
 * Whether reading a session partition would answer nothing its client has not seen: it
 * would read no error, no records (the fetch offset is where this reader's data ends) and
 * the same high watermark, last stable offset and log start as the session's last answer.
 * Checked without a read or an allocation; anything it does not rule out goes to readOne,
 * which answers it (errors included).
 */
function unchangedSince(target: FetchTarget, partition: Partition | undefined, reader: FetchReader): boolean {
  const sp = target.sessionPartition
  if (sp === undefined || partition === undefined || !partition.isLeader) return false
  if (target.currentLeaderEpoch !== -1 && target.currentLeaderEpoch !== partition.leaderEpoch) return false
  const log = partition.log
  const highWatermark = log.highWatermark
  if (highWatermark !== sp.lastHighWatermark || log.logStartOffset !== sp.lastLogStartOffset) return false
  if (reader.kind === 'follower') {
    if (target.fetchOffset !== log.logEndOffset) return false
  } else if (
    target.fetchOffset !==
    (reader.isolation === 'read_committed' ? partition.lastStableOffset : highWatermark)
  )
    return false
  if (partition.lastStableOffset !== sp.lastLastStableOffset) return false
  return reader.kind !== 'follower' || !partition.isStaleFetch(reader.replicaId, reader.brokerEpoch)
}

async function readAll(
  context: RequestContext,
  targets: readonly FetchTarget[],
  reader: FetchReader,
  maxBytes: number,
  firstBatchMayExceed: boolean,
  /** False when recordFollowerFetchStates already recorded this request's follower offsets. */
  updateFollowerState: boolean,
): Promise<ReadResult[]> {
  // Partitions are read side by side when their limits fit the request's (the common case
  // for a follower, and for a consumer whose fetch.max.bytes covers its partitions'
  // max.partition.fetch.bytes): one partition's disk read then does not wait for another's.
  const speculative =
    targets.length > 1 &&
    targets.reduce((sum, t) => sum + Math.min(maxBytes, t.partitionMaxBytes), 0) <= maxBytes
      ? await Promise.all(
          targets.map((target) =>
            readOne(
              context,
              target,
              reader,
              Math.min(maxBytes, target.partitionMaxBytes),
              firstBatchMayExceed,
              updateFollowerState,
            ),
          ),
        )
      : null
  const results: ReadResult[] = []
  let budget = maxBytes
  let minOneMessage = firstBatchMayExceed
  for (const [index, target] of targets.entries()) {
    const limit = Math.min(budget, target.partitionMaxBytes)
    // A side-by-side read had limits at least as large as the ones the order below gives
    // it; when it took no more than `limit` it is what that read would have returned (a
    // first batch taken beyond the limit only because of minOneMessage is larger than
    // `limit`). Otherwise it is read again with the order's limits (a budget used up, or
    // an oversized first batch that only the first partition with data may return).
    const early = speculative?.[index]
    const result =
      early !== undefined && early.bytes <= limit
        ? early
        : await readOne(
            context,
            target,
            reader,
            limit,
            minOneMessage,
            updateFollowerState && early === undefined,
          )
    if (result.bytes > 0) minOneMessage = false
    budget = Math.max(0, budget - result.bytes)
    results.push(result)
  }
  return results
}

async function readOne(
  context: RequestContext,
  target: FetchTarget,
  reader: FetchReader,
  maxBytes: number,
  minOneMessage: boolean,
  updateFollowerState: boolean,
): Promise<ReadResult> {
  if (target.unknownTopicId) return errorResult(target, ErrorCode.UNKNOWN_TOPIC_ID)
  if (target.denied) return errorResult(target, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
  try {
    const partition = context.broker.replicaManager.getPartitionOrError(target.topic, target.partition)
    // A session entry of a topic since deleted keeps its name, which a topic created again
    // may have now: that one is another topic, and its records or a follower's position in
    // it must not be taken for the old one's (Kafka's ReplicaManager answers the same).
    if (context.apiVersion >= TOPIC_ID_VERSION && partition.id.topicId !== target.topicId)
      return errorResult(
        target,
        topicById(context.broker.metadataImage(), target.topicId) === undefined
          ? ErrorCode.UNKNOWN_TOPIC_ID
          : ErrorCode.INCONSISTENT_TOPIC_ID,
      )
    if (reader.kind === 'follower') partition.ensureLeader()
    else partition.ensureConsumerReadable(reader.followerReadAllowed)
    partition.checkLeaderEpoch(target.currentLeaderEpoch)
    const preferred = preferredReplicaFor(context, partition, target, reader)
    if (preferred >= 0)
      return { target, data: { ...emptyData(partition, target), preferredReadReplica: preferred }, bytes: 0 }
    const readsAnything = maxBytes > 0 || minOneMessage
    let info: FetchDataInfo | null = null
    let aborted: readonly AbortedTxn[] | undefined
    if (reader.kind === 'follower') {
      if (partition.isStaleFetch(reader.replicaId, reader.brokerEpoch))
        return errorResult(target, ErrorCode.NOT_LEADER_OR_FOLLOWER)
      // The offset a follower fetches at is its log end: it may move the ISR and the HW. One
      // past the leader's log end is a diverged log (answered OFFSET_OUT_OF_RANGE below): it
      // must not count as caught up, as Kafka only updates the state after a good read.
      if (updateFollowerState && target.fetchOffset <= partition.log.logEndOffset)
        partition.updateFollowerFetchState(reader.replicaId, target.fetchOffset, reader.brokerEpoch)
      if (readsAnything) info = await partition.readForFollower(target.fetchOffset, maxBytes)
    } else if (readsAnything) {
      const read = await partition.read(target.fetchOffset, maxBytes, reader.isolation, minOneMessage)
      info = read.info
      aborted = read.abortedTransactions
    }
    const data: FetchResponsePartitionData = {
      ...emptyData(partition, target),
      abortedTransactions:
        reader.kind === 'consumer' && reader.isolation === 'read_committed'
          ? (aborted ?? []).map((t) => ({ producerId: t.producerId, firstOffset: BigInt(t.firstOffset) }))
          : null,
      records: info?.records ?? [],
    }
    return { target, data, bytes: info?.sizeInBytes ?? 0 }
  } catch (error) {
    const code = toErrorCode(error)
    if (code === null) throw error
    return errorResult(target, code)
  }
}

/** A partition's answer with its offsets and no records. */
function emptyData(partition: Partition, target: FetchTarget): FetchResponsePartitionData {
  return {
    ...defaultFetchResponsePartitionData(),
    partitionIndex: target.partition,
    errorCode: ErrorCode.NONE,
    highWatermark: BigInt(partition.highWatermark),
    lastStableOffset: BigInt(partition.lastStableOffset),
    logStartOffset: BigInt(partition.log.logStartOffset),
    preferredReadReplica: -1,
    records: [],
  }
}

/**
 * KIP-392: the leader names the replica a consumer in a rack should read from (and reads
 * nothing for it), when replica.selector.class is set and the consumer gave its rack.
 */
function preferredReplicaFor(
  context: RequestContext,
  partition: Partition,
  target: FetchTarget,
  reader: FetchReader,
): number {
  if (reader.kind !== 'consumer' || reader.clientRack === '' || !partition.isLeader) return -1
  const brokers = context.broker.metadataImage().brokers
  return partition.preferredReadReplica(
    target.fetchOffset,
    reader.clientRack,
    (brokerId) => brokers.get(brokerId)?.rack ?? null,
  )
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

function watchesFor(
  targets: readonly FetchTarget[],
  hosted: readonly (Partition | undefined)[],
  wakeOn: FetchWakeOn,
): DelayedFetchWatch[] {
  const watches: DelayedFetchWatch[] = []
  for (let index = 0; index < targets.length; index++) {
    const partition = hosted[index]
    if (partition) watches.push(fetchWatch(partition, targets[index].fetchOffset, wakeOn))
  }
  return watches
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
  sp.lastHighWatermark = Number(result.data.highWatermark)
  sp.lastLogStartOffset = Number(result.data.logStartOffset)
  sp.lastLastStableOffset = Number(result.data.lastStableOffset)
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
