/**
 * What ShareFetch and ShareAcknowledge have in common: the session step, resolving a
 * request's topic ids, applying acknowledgements, and the per-partition answer's shape.
 * The handlers (handlers/share-fetch.ts, handlers/share-acknowledge.ts) only translate.
 */
import { topicById } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import { type AcknowledgementBatch, validateAcknowledgementBatches } from './share-partition.js'
import { countOne, type ShareTopicPartition } from './share-partition-manager.js'
import { sharePartitionManagerOf } from './share-services.js'
import { type ShareSession, type ShareSessionStep, shareSessionPartitionKey } from './share-session-cache.js'

/** A partition as a request names it, with its acknowledgements. */
export interface RequestedPartition {
  readonly topicId: string
  readonly partition: number
  readonly acknowledgements: readonly AcknowledgementBatch[]
}

/** One partition's outcome, before it is put in a response's shape. */
export interface PartitionOutcome {
  readonly topicId: string
  readonly partition: number
  errorCode: number
  /** null when the request carried no acknowledgements for it. */
  acknowledgeErrorCode: number | null
  records: Buffer[]
  acquired: { firstOffset: bigint; lastOffset: bigint; deliveryCount: number }[]
}

/** Kafka's checks before the session (KafkaApis handleShareFetchRequest / handleShareAcknowledgeRequest). */
export function checkShareRequest(
  context: RequestContext,
  groupId: string | null,
  memberId: string | null,
): { errorCode: number; errorMessage: string } | null {
  if (groupId === null || groupId === '')
    return { errorCode: ErrorCode.INVALID_GROUP_ID, errorMessage: 'The group id is invalid.' }
  if (!context.authorize(AclOperation.READ, ResourceType.GROUP, groupId))
    return {
      errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED,
      errorMessage: `Not authorized to read group ${groupId}.`,
    }
  if (memberId === null || memberId === '')
    return { errorCode: ErrorCode.INVALID_REQUEST, errorMessage: 'The member id is invalid.' }
  return null
}

/**
 * Opens, continues or closes the member's share session; an opening one replaces (and
 * releases) the old, and ends with the connection it was opened on, as Kafka's sessions do.
 */
export function beginShareSession(
  context: RequestContext,
  groupId: string,
  memberId: string,
  epoch: number,
  hasAcknowledgements: boolean,
): ShareSessionStep {
  const manager = sharePartitionManagerOf(context.broker)
  const step = manager.sessions.begin(groupId, memberId, epoch, hasAcknowledgements, (old) =>
    manager.releaseSession(old),
  )
  if (step.kind === 'open') {
    const { session } = step
    context.connection.whenClosed?.(() => manager.onConnectionClosed(session))
  }
  return step
}

/** Adds the request's partitions to the session, drops its forgotten ones. */
export function updateSessionPartitions(
  session: ShareSession,
  added: readonly RequestedPartition[],
  forgotten: readonly { topicId: string; partitions: number[] }[],
): void {
  for (const f of forgotten)
    for (const partition of f.partitions)
      session.partitions.delete(shareSessionPartitionKey(f.topicId, partition))
  for (const p of added)
    session.partitions.set(shareSessionPartitionKey(p.topicId, p.partition), {
      topicId: p.topicId,
      partition: p.partition,
    })
}

/**
 * The topic of a topic id, or the partition's error: UNKNOWN_TOPIC_ID for an id this broker
 * does not know, TOPIC_AUTHORIZATION_FAILED without READ on the topic.
 */
export function resolveSharePartition(
  context: RequestContext,
  topicId: string,
  partition: number,
): ShareTopicPartition | number {
  const topic = topicById(context.broker.metadataImage(), topicId)
  if (!topic) return ErrorCode.UNKNOWN_TOPIC_ID
  if (!context.authorize(AclOperation.READ, ResourceType.TOPIC, topic.name))
    return ErrorCode.TOPIC_AUTHORIZATION_FAILED
  return { topic: topic.name, topicId, partition }
}

/**
 * Applies each partition's acknowledgements (checked first, as Kafka's validateAcknowledgementBatches).
 * Counted as Kafka's SharePartitionManager.acknowledge counts them (ShareFetch's piggybacked ones
 * too): TotalShareAcknowledgementRequestsPerSec once per topic of the request, and
 * FailedShareAcknowledgementRequestsPerSec once per partition whose acknowledgements failed.
 */
export async function applyAcknowledgements(
  context: RequestContext,
  groupId: string,
  memberId: string,
  partitions: readonly RequestedPartition[],
  renewAllowed: boolean,
): Promise<Map<string, number>> {
  const manager = sharePartitionManagerOf(context.broker)
  const codes = new Map<string, number>()
  const writes: Promise<void>[] = []
  const counted = manager.stats.topicRequests
  const topics = new Set<string>()
  for (const p of partitions) {
    if (p.acknowledgements.length === 0) continue
    const name = topicById(context.broker.metadataImage(), p.topicId)?.name
    if (name !== undefined && !topics.has(name)) {
      topics.add(name)
      countOne(counted.acknowledgement, name)
    }
    const key = shareSessionPartitionKey(p.topicId, p.partition)
    const invalid = validateAcknowledgementBatches(p.acknowledgements, renewAllowed)
    if (invalid !== ErrorCode.NONE) {
      codes.set(key, invalid)
      continue
    }
    const tp = resolveSharePartition(context, p.topicId, p.partition)
    if (typeof tp === 'number') codes.set(key, tp)
    else
      writes.push(
        manager.acknowledge(groupId, memberId, tp, p.acknowledgements).then((code) => {
          codes.set(key, code)
          if (code !== ErrorCode.NONE) countOne(counted.failedAcknowledgement, tp.topic)
        }),
      )
  }
  // Each partition's acknowledgements answer once written to the share coordinator.
  return Promise.all(writes).then(() => codes)
}

/** A request's acknowledgement batches with offsets as numbers. */
export function toAcknowledgements(
  batches: readonly { firstOffset: bigint; lastOffset: bigint; acknowledgeTypes: number[] }[],
): AcknowledgementBatch[] {
  return batches.map((b) => ({
    firstOffset: Number(b.firstOffset),
    lastOffset: Number(b.lastOffset),
    acknowledgeTypes: b.acknowledgeTypes,
  }))
}

/** Outcomes grouped by topic id, in the order first seen. */
export function groupByTopic<T extends { topicId: string }>(
  items: readonly T[],
): { topicId: string; items: T[] }[] {
  const byTopic = new Map<string, T[]>()
  for (const item of items) {
    const list = byTopic.get(item.topicId) ?? []
    list.push(item)
    byTopic.set(item.topicId, list)
  }
  return [...byTopic].map(([topicId, list]) => ({ topicId, items: list }))
}

/** The leader of a partition as the metadata says (a NOT_LEADER_OR_FOLLOWER answer names it). */
export function currentLeaderOf(
  context: RequestContext,
  topicId: string,
  partition: number,
): { leaderId: number; leaderEpoch: number } {
  const topic = topicById(context.broker.metadataImage(), topicId)
  const state = topic?.partitions[partition]
  return state
    ? { leaderId: state.leader, leaderEpoch: state.leaderEpoch }
    : { leaderId: -1, leaderEpoch: -1 }
}
