/**
 * ListOffsets (key 2).
 * Behavior: per partition, on its leader: LATEST (-1) is the high watermark, or the last
 * stable offset for read_committed (the log end for a replica's own query); EARLIEST (-2)
 * and EARLIEST_LOCAL (-4) the log start offset; MAX_TIMESTAMP (-3) the record with the
 * largest timestamp; LATEST_TIERED (-5) nothing (no tiered storage: offset -1); any other
 * timestamp the first record at or after it, below the high watermark (the last stable
 * offset for read_committed). A client's LATEST, or a timestamp found at or past what it
 * could fetch, is OFFSET_NOT_AVAILABLE (retriable) while the leader's high watermark is
 * below the log end its leadership began at (KIP-207: until its followers' first fetches
 * a new leader's HW lags, and the offset would go back from the previous leader's answer).
 * Authorization: DESCRIBE on the topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
 * Version notes: v0 answers with a list of offsets (maxNumOffsets), v1+ with one offset
 * and its timestamp; v2 adds isolation level, v4 current leader epoch (fencing) and the
 * answer's leader epoch, v6+ flexible, v7 MAX_TIMESTAMP, v8 EARLIEST_LOCAL, v9 LATEST_TIERED,
 * v10 a timeout for remote offsets (KIP-1075; tidelog has no remote storage, so nothing
 * waits), v11 EARLIEST_PENDING_UPLOAD (-6), which without tiered storage finds nothing.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ListOffsetsRequest,
  type ListOffsetsResponse,
  type ListOffsetsResponseListOffsetsPartitionResponse,
} from '../../protocol/generated/index.js'
import { KafkaError, toErrorCode } from '../../replication/kafka-error.js'
import type { Partition } from '../../replication/partition.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

const LATEST = -1
const EARLIEST = -2
const MAX_TIMESTAMP = -3
const EARLIEST_LOCAL = -4
const LATEST_TIERED = -5
/** v11 (KIP-1023): the first offset not yet in remote storage; tidelog has none, as LATEST_TIERED. */
const EARLIEST_PENDING_UPLOAD = -6

interface Found {
  readonly offset: number
  readonly timestamp: number
  readonly leaderEpoch: number
}

const NOT_FOUND: Found = { offset: -1, timestamp: -1, leaderEpoch: -1 }

export const listOffsetsHandler: ApiHandler<ListOffsetsRequest, ListOffsetsResponse> = {
  apiKey: ApiKey.ListOffsets,
  minVersion: 0,
  maxVersion: 11,
  async handle(context, request) {
    const duplicates = duplicatePartitions(request)
    const answered = new Set<string>()
    const topics = []
    for (const topic of request.topics) {
      const partitions = []
      const describable = context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
      for (const p of topic.partitions) {
        const duplicate = duplicates.has(partitionKey(topic.name, p.partitionIndex))
        // A partition named twice is answered once (v1+), as Kafka answers per partition.
        if (duplicate && context.apiVersion > 0 && answered.has(partitionKey(topic.name, p.partitionIndex)))
          continue
        answered.add(partitionKey(topic.name, p.partitionIndex))
        if (!describable) {
          partitions.push(
            answer(p.partitionIndex, ErrorCode.TOPIC_AUTHORIZATION_FAILED, NOT_FOUND, context.apiVersion),
          )
          continue
        }
        partitions.push(
          duplicate && context.apiVersion > 0
            ? answer(p.partitionIndex, ErrorCode.INVALID_REQUEST, NOT_FOUND, context.apiVersion)
            : await listOne(context, request, topic.name, p),
        )
      }
      topics.push({ name: topic.name, partitions })
    }
    return { throttleTimeMs: 0, topics }
  },
}

function partitionKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`
}

/** Partitions named more than once (in any topic entry): Kafka answers each once, INVALID_REQUEST. */
function duplicatePartitions(request: ListOffsetsRequest): Set<string> {
  const seen = new Set<string>()
  const duplicates = new Set<string>()
  for (const topic of request.topics) {
    for (const p of topic.partitions) {
      const key = partitionKey(topic.name, p.partitionIndex)
      if (seen.has(key)) duplicates.add(key)
      seen.add(key)
    }
  }
  return duplicates
}

async function listOne(
  context: RequestContext,
  request: ListOffsetsRequest,
  topic: string,
  p: ListOffsetsRequest['topics'][number]['partitions'][number],
): Promise<ListOffsetsResponseListOffsetsPartitionResponse> {
  try {
    const partition = context.broker.replicaManager.getPartitionOrError(topic, p.partitionIndex)
    partition.ensureLeader()
    if (context.apiVersion >= 4) partition.checkLeaderEpoch(p.currentLeaderEpoch)
    const found = await lookup(
      partition,
      Number(p.timestamp),
      request.replicaId >= 0,
      readCommitted(context, request),
    )
    return answer(p.partitionIndex, ErrorCode.NONE, found, context.apiVersion, p.maxNumOffsets)
  } catch (error) {
    const code = toErrorCode(error)
    if (code === null) throw error
    return answer(p.partitionIndex, code, NOT_FOUND, context.apiVersion)
  }
}

function readCommitted(context: RequestContext, request: ListOffsetsRequest): boolean {
  return context.apiVersion >= 2 && request.isolationLevel === 1
}

async function lookup(
  partition: Partition,
  timestamp: number,
  fromReplica: boolean,
  committed: boolean,
): Promise<Found> {
  const log = partition.log
  const lagging = fromReplica ? null : highWatermarkLagging(partition)
  switch (timestamp) {
    case LATEST: {
      if (lagging) throw lagging
      const offset = fromReplica
        ? log.logEndOffset
        : committed
          ? partition.lastStableOffset
          : partition.highWatermark
      return { offset, timestamp: -1, leaderEpoch: partition.leaderEpoch }
    }
    case EARLIEST:
    case EARLIEST_LOCAL:
      // With the epoch of the log start, as Kafka's UnifiedLog answers (v4+ carries it).
      // Kafka's leader records its epoch at the log end when elected; tidelog's cache has
      // it from the first append, so an empty log's start is in the current epoch.
      return {
        offset: log.logStartOffset,
        timestamp: -1,
        leaderEpoch:
          log.leaderEpochCache.epochForOffset(log.logStartOffset) ??
          (log.logStartOffset === log.logEndOffset ? partition.leaderEpoch : -1),
      }
    case MAX_TIMESTAMP: {
      const latest = await log.latestTimestamp()
      // With the log's latest epoch, not the record's: Kafka's UnifiedLog answers so (seen
      // when DeleteRecords has removed the record's epoch from the cache).
      return latest
        ? { offset: latest.offset, timestamp: latest.timestamp, leaderEpoch: log.latestEpoch ?? -1 }
        : NOT_FOUND
    }
    case LATEST_TIERED:
    case EARLIEST_PENDING_UPLOAD:
      return NOT_FOUND
    default: {
      const found = await log.offsetForTimestamp(timestamp)
      // Kafka's lastFetchableOffset: what this isolation level could fetch.
      const fetchable = committed ? partition.lastStableOffset : partition.highWatermark
      if (!found || found.offset >= fetchable) {
        if (lagging) throw lagging
        return NOT_FOUND
      }
      return { offset: found.offset, timestamp: found.timestamp, leaderEpoch: found.leaderEpoch ?? -1 }
    }
  }
}

/** Kafka's KIP-207 check: the leader's high watermark below the log end its leadership began at. */
function highWatermarkLagging(partition: Partition): KafkaError | null {
  const epochStart = partition.leaderEpochStart
  if (epochStart === null || epochStart <= partition.highWatermark) return null
  return new KafkaError(
    ErrorCode.OFFSET_NOT_AVAILABLE,
    `${partition.topic}-${partition.partition}: high watermark ${partition.highWatermark} is behind ${epochStart}, where leader epoch ${partition.leaderEpoch} began`,
  )
}

/** Fields a version does not have must keep their defaults (they are not ignorable). */
function answer(
  partitionIndex: number,
  errorCode: number,
  found: Found,
  version: number,
  maxNumOffsets = 0,
): ListOffsetsResponseListOffsetsPartitionResponse {
  const oldStyle = version === 0 && errorCode === ErrorCode.NONE && found.offset >= 0 && maxNumOffsets > 0
  return {
    partitionIndex,
    errorCode,
    oldStyleOffsets: oldStyle ? [BigInt(found.offset)] : [],
    timestamp: version >= 1 ? BigInt(found.timestamp) : -1n,
    offset: version >= 1 ? BigInt(found.offset) : -1n,
    leaderEpoch: version >= 4 ? found.leaderEpoch : -1,
  }
}
