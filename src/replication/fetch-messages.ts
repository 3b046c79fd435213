/**
 * The replica manager's fetch (Kafka's ReplicaManager.fetchMessages, readFromLog and
 * DelayedFetch): reads each partition for a consumer or a follower within the request's
 * byte limits, records a follower's fetch offsets (which may move the ISR and the high
 * watermark), and when fewer than minBytes were found waits in the fetch purgatory until
 * enough is readable or maxWaitMs passes, then reads again. The Fetch handler translates
 * the request into this and the result into the response; sessions, authorization and
 * topic-id resolution stay in the handler, as in Kafka's KafkaApis.
 */

import type { Clock } from '../common/clock.js'
import { type BrokerId, NO_BROKER_ID, NO_OFFSET, type Offset } from '../common/types.js'
import { type ClusterImage, topicById } from '../metadata/cluster-image.js'
import { ErrorCode } from '../protocol/error-codes.js'
import type { AbortedTxn } from '../storage/transaction-index.js'
import type { FetchDataInfo } from '../storage/unified-log.js'
import {
  type DelayedFetchWatch,
  type FetchWakeOn,
  fetchWatch,
  type PurgatoryTimer,
  waitForFetchData,
} from './delayed-operations.js'
import type { FollowerSessionNews } from './follower-session-news.js'
import { toErrorCode } from './kafka-error.js'
import type { IsolationLevel, Partition } from './partition.js'

/** Consumers read committed records; followers read everything and report their log end. */
export type FetchReader =
  | {
      readonly kind: 'consumer'
      readonly isolation: IsolationLevel
      /** KIP-392: Fetch v11+ may be served by a follower. */
      readonly followerReadAllowed: boolean
      /** The consumer's client.rack when replica.selector.class is set, else ''. */
      readonly clientRack: string
    }
  /** `brokerEpoch`: the follower incarnation's broker epoch (v15+, KIP-903), -1 before. */
  | { readonly kind: 'follower'; readonly replicaId: BrokerId; readonly brokerEpoch: number }

/** What a fetch session's client last saw of a partition (Kafka's CachedPartition). */
export interface LastSeenOffsets {
  readonly lastHighWatermark: Offset
  readonly lastLogStartOffset: Offset
  readonly lastLastStableOffset: Offset
}

/** One partition of a fetch, with a topic the handler resolved and authorized. */
export interface FetchPartitionRequest {
  readonly topic: string
  readonly topicId: string
  readonly partition: number
  readonly fetchOffset: Offset
  readonly partitionMaxBytes: number
  readonly currentLeaderEpoch: number
  /** Set for a session partition: an incremental fetch skips it when nothing changed. */
  readonly sessionPartition?: LastSeenOffsets
}

export interface FetchParams<T extends FetchPartitionRequest> {
  readonly reader: FetchReader
  readonly partitions: readonly T[]
  /** The request's maxBytes, already capped by the client's fetch quota. */
  readonly maxBytes: number
  readonly minBytes: number
  readonly maxWaitMs: number
  /** Fetch v3+: the first batch found is returned even when larger than the limits. */
  readonly firstBatchMayExceed: boolean
  /** Fetch v13+ names topics by id: a hosted partition of another topic id is not this one. */
  readonly byTopicId: boolean
  /** Skip the session partitions that cannot have news (Kafka's IncrementalFetchContext). */
  readonly incremental: boolean
  readonly metadataImage: () => ClusterImage
  readonly purgatoryTimer?: PurgatoryTimer
  /**
   * A follower's incremental fetch in a session whose news is tracked: `partitions` are its
   * candidates (the session partitions that may have news), and the partitions it skips
   * are caught up as of this fetch (follower-session-news.ts).
   */
  readonly followerSession?: FollowerSessionNews<T>
}

/** A partition's answer (Kafka's FetchPartitionData); offsets are -1 on an error. */
export interface FetchPartitionData {
  readonly errorCode: number
  readonly highWatermark: Offset
  readonly lastStableOffset: Offset
  readonly logStartOffset: Offset
  readonly records: Buffer[]
  /** The aborted transactions a read_committed read overlaps; null for any other reader. */
  readonly abortedTransactions: readonly AbortedTxn[] | null
  /** KIP-392: the replica the consumer should fetch from instead, else -1. */
  readonly preferredReadReplica: number
}

export interface FetchPartitionResult<T extends FetchPartitionRequest> {
  readonly target: T
  readonly data: FetchPartitionData
  readonly bytes: number
}

/** What the fetch needs of the replica manager. */
export interface FetchHost {
  readonly clock: Clock
  getPartition(topic: string, partition: number): Partition | undefined
  getPartitionOrError(topic: string, partition: number): Partition
  /** A registered broker's epoch, to tell a fenced follower incarnation's fetch. */
  brokerEpochOf?(brokerId: BrokerId): number | undefined
}

/**
 * Reads the partitions, waiting for minBytes as described above, and hands `respond` the
 * answers: every partition of `params.partitions` in order, except in an incremental fetch
 * the ones skipped as unchanged. `respond` (Kafka's responseCallback) runs in the turn of
 * the last read, with no await between: the broker's histories, and so the deterministic
 * simulation's seeds, stay what they were when the handler ran the long poll itself.
 */
export async function fetchMessages<T extends FetchPartitionRequest, R>(
  host: FetchHost,
  params: FetchParams<T>,
  respond: (results: FetchPartitionResult<T>[]) => R,
): Promise<R> {
  const { reader, partitions: targets } = params
  // A follower's fetch offsets are its log ends: record them all before reading anything,
  // so one partition's high watermark (and the acks=all produces waiting on it) does not
  // wait for the reads of the partitions ahead of it in this request.
  // Looked up once for the steps before the first read: a fetch of a session carries
  // thousands of partitions, and most of an idle follower's fetch is these lookups.
  const hosted = hostedPartitions(host, targets, params.byTopicId)
  if (reader.kind === 'follower') recordFollowerFetchStates(targets, hosted, reader)
  const wakeOn: FetchWakeOn =
    reader.kind === 'follower'
      ? 'logEnd'
      : reader.isolation === 'read_committed'
        ? 'lastStableOffset'
        : 'highWatermark'
  const firstReads = toRead(targets, hosted, params)
  const news = params.followerSession
  // The baseline for "new data" is taken before the first read: a record appended while
  // that read awaits the disk fired no watcher yet, and must still wake this fetch. A
  // session partition found unchanged wakes it through the session (watchMore): watching
  // it here too cost two watchers per partition on each sweep of an idle session.
  const watches = watchesFor(targets, hosted, wakeOn, news)
  // Every candidate's state is recorded: the partitions skipped were caught up in this fetch.
  if (news !== undefined && reader.kind === 'follower' && !isFencedIncarnation(host, reader))
    news.onFetched(host.clock.monotonicMs())
  const results = await readAll(host, params, firstReads, false)
  const gotBytes = results.reduce((sum, r) => sum + r.bytes, 0)
  // A consumer sent to another replica is answered at once, as Kafka does.
  const anyError = results.some(
    (r) => r.data.errorCode !== ErrorCode.NONE || r.data.preferredReadReplica >= 0,
  )
  if (
    gotBytes >= params.minBytes ||
    params.maxWaitMs <= 0 ||
    anyError ||
    (targets.length === 0 && news === undefined)
  )
    return respond(results)
  await waitForFetchData(
    host.clock,
    watches,
    params.minBytes - gotBytes,
    params.maxWaitMs,
    wakeOn,
    params.purgatoryTimer,
    news === undefined ? undefined : (wake) => news.watch(wake),
  )
  // The partitions that got news during the wait are answered with the candidates.
  const final = news === undefined ? targets : news.dirtyTargets()
  // Looked up again: a partition deleted during the wait must answer its error.
  const again = params.incremental ? hostedPartitions(host, final, params.byTopicId) : hosted
  return respond(await readAll(host, params, toRead(final, again, params), true))
}

/** A fetch from a follower incarnation older than the one registered: it proves nothing. */
function isFencedIncarnation(host: FetchHost, reader: FetchReader & { kind: 'follower' }): boolean {
  if (reader.brokerEpoch < 0) return false
  const registered = host.brokerEpochOf?.(reader.replicaId) ?? -1
  return reader.brokerEpoch < registered
}

/**
 * Records a follower's fetch offset (its log end) on each partition it fetches that this
 * broker leads, as readOne's checks allow: it may move the ISR and the high watermark.
 * Partitions that fail a check are left to readOne, which answers the error.
 */
function recordFollowerFetchStates(
  targets: readonly FetchPartitionRequest[],
  hosted: readonly (Partition | undefined)[],
  reader: FetchReader & { kind: 'follower' },
): void {
  // Indexed: an entries() pair per partition is garbage on every sweep of a session.
  for (let index = 0; index < targets.length; index++) {
    const target = targets[index]
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
function toRead<T extends FetchPartitionRequest>(
  targets: readonly T[],
  hosted: readonly (Partition | undefined)[],
  params: FetchParams<T>,
): readonly T[] {
  if (!params.incremental) return targets
  const changed: T[] = []
  const news = params.followerSession
  for (let index = 0; index < targets.length; index++) {
    const partition = hosted[index]
    if (!unchangedSince(targets[index], partition, params.reader)) changed.push(targets[index])
    else if (news !== undefined && partition !== undefined) news.onUnchanged(targets[index], partition)
  }
  return changed
}

/** Each target's partition, undefined for one not hosted here. */
function hostedPartitions(
  host: FetchHost,
  targets: readonly FetchPartitionRequest[],
  byTopicId: boolean,
): (Partition | undefined)[] {
  const hosted = new Array<Partition | undefined>(targets.length)
  for (let index = 0; index < targets.length; index++) {
    const target = targets[index]
    const partition = host.getPartition(target.topic, target.partition)
    // Another topic's partition under the name (see readOne): not read, watched or moved.
    hosted[index] = byTopicId && partition?.id.topicId !== target.topicId ? undefined : partition
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
function unchangedSince(
  target: FetchPartitionRequest,
  partition: Partition | undefined,
  reader: FetchReader,
): boolean {
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

async function readAll<T extends FetchPartitionRequest>(
  host: FetchHost,
  params: FetchParams<T>,
  targets: readonly T[],
  /** False when recordFollowerFetchStates already recorded this request's follower offsets. */
  updateFollowerState: boolean,
): Promise<FetchPartitionResult<T>[]> {
  const { maxBytes, firstBatchMayExceed } = params
  // Partitions are read side by side when their limits fit the request's (the common case
  // for a follower, and for a consumer whose fetch.max.bytes covers its partitions'
  // max.partition.fetch.bytes): one partition's disk read then does not wait for another's.
  const speculative =
    targets.length > 1 &&
    targets.reduce((sum, t) => sum + Math.min(maxBytes, t.partitionMaxBytes), 0) <= maxBytes
      ? await Promise.all(
          targets.map((target) =>
            readOne(
              host,
              params,
              target,
              Math.min(maxBytes, target.partitionMaxBytes),
              firstBatchMayExceed,
              updateFollowerState,
            ),
          ),
        )
      : null
  const results: FetchPartitionResult<T>[] = []
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
            host,
            params,
            target,
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

async function readOne<T extends FetchPartitionRequest>(
  host: FetchHost,
  params: FetchParams<T>,
  target: T,
  maxBytes: number,
  minOneMessage: boolean,
  updateFollowerState: boolean,
): Promise<FetchPartitionResult<T>> {
  const { reader } = params
  try {
    const partition = host.getPartitionOrError(target.topic, target.partition)
    // A session entry of a topic since deleted keeps its name, which a topic created again
    // may have now: that one is another topic, and its records or a follower's position in
    // it must not be taken for the old one's (Kafka's ReplicaManager answers the same).
    if (params.byTopicId && partition.id.topicId !== target.topicId)
      return errorResult(
        target,
        topicById(params.metadataImage(), target.topicId) === undefined
          ? ErrorCode.UNKNOWN_TOPIC_ID
          : ErrorCode.INCONSISTENT_TOPIC_ID,
      )
    if (reader.kind === 'follower') partition.ensureLeader()
    else partition.ensureConsumerReadable(reader.followerReadAllowed)
    partition.checkLeaderEpoch(target.currentLeaderEpoch)
    const preferred = preferredReplicaFor(params, partition, target)
    // An empty list of aborted transactions, whatever the reader: what tidelog always answered.
    if (preferred >= 0)
      return { target, data: { ...emptyData(partition, []), preferredReadReplica: preferred }, bytes: 0 }
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
    const readCommitted = reader.kind === 'consumer' && reader.isolation === 'read_committed'
    const data = {
      ...emptyData(partition, readCommitted ? (aborted ?? []) : null),
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
function emptyData(
  partition: Partition,
  abortedTransactions: readonly AbortedTxn[] | null,
): FetchPartitionData {
  return {
    errorCode: ErrorCode.NONE,
    highWatermark: partition.highWatermark,
    lastStableOffset: partition.lastStableOffset,
    logStartOffset: partition.log.logStartOffset,
    records: [],
    abortedTransactions,
    preferredReadReplica: -1,
  }
}

/**
 * KIP-392: the leader names the replica a consumer in a rack should read from (and reads
 * nothing for it), when replica.selector.class is set and the consumer gave its rack.
 */
function preferredReplicaFor(
  params: FetchParams<FetchPartitionRequest>,
  partition: Partition,
  target: FetchPartitionRequest,
): BrokerId {
  const { reader } = params
  if (reader.kind !== 'consumer' || reader.clientRack === '' || !partition.isLeader) return NO_BROKER_ID
  const brokers = params.metadataImage().brokers
  return partition.preferredReadReplica(
    target.fetchOffset,
    reader.clientRack,
    (brokerId) => brokers.get(brokerId)?.rack ?? null,
  )
}

function errorResult<T extends FetchPartitionRequest>(target: T, errorCode: number): FetchPartitionResult<T> {
  return {
    target,
    bytes: 0,
    data: {
      errorCode,
      highWatermark: NO_OFFSET,
      lastStableOffset: NO_OFFSET,
      logStartOffset: NO_OFFSET,
      records: [],
      abortedTransactions: null,
      preferredReadReplica: -1,
    },
  }
}

function watchesFor<T extends FetchPartitionRequest>(
  targets: readonly T[],
  hosted: readonly (Partition | undefined)[],
  wakeOn: FetchWakeOn,
  news: FollowerSessionNews<T> | undefined,
): DelayedFetchWatch[] {
  const watches: DelayedFetchWatch[] = []
  for (let index = 0; index < targets.length; index++) {
    const partition = hosted[index]
    if (partition === undefined || news?.isClean(targets[index])) continue
    watches.push(fetchWatch(partition, targets[index].fetchOffset, wakeOn))
  }
  return watches
}
