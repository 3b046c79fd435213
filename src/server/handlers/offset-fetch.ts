/**
 * OffsetFetch (key 9).
 * Behavior: committed offsets of a group (-1 and empty metadata where none), for the listed
 * partitions or, with null topics, every partition the group has an offset for. Only
 * committed (replicated) offsets are ever visible, and transactional ones only once their
 * transaction committed. With requireStable a partition with a commit still pending (an
 * open transaction's TxnOffsetCommit, or a plain commit being replicated) answers
 * UNSTABLE_OFFSET_COMMIT, which clients retry.
 * Authorization: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED; topics the principal
 * may not describe answer TOPIC_AUTHORIZATION_FAILED, or are left out when all are asked.
 * Version notes: v0-1 report errors per partition only; v2 null topics and a top-level
 * error; v3 throttle time; v5 leader epochs; v6+ flexible; v7 requireStable; v8+ a batch
 * of groups, each with its own error; v9 member id and epoch (KIP-848: STALE_MEMBER_EPOCH);
 * v10 names topics by id both ways: an id the metadata does not know answers UNKNOWN_TOPIC_ID
 * on its partitions, and a topic the metadata no longer has is left out of an all-topics answer.
 */

import { topicById } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type OffsetFetchRequest,
  type OffsetFetchRequestOffsetFetchRequestGroup,
  type OffsetFetchResponse,
  type OffsetFetchResponseOffsetFetchResponseGroup,
  type OffsetFetchResponseOffsetFetchResponseTopic,
  type OffsetFetchResponseOffsetFetchResponseTopics,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

type WantedTopics = { name: string; partitions: number[] }[] | null

export const offsetFetchHandler: ApiHandler<OffsetFetchRequest, OffsetFetchResponse> = {
  apiKey: ApiKey.OffsetFetch,
  minVersion: 0,
  maxVersion: 10,
  handle(context, request) {
    if (context.apiVersion >= 8) {
      const groups = request.groups.map((g) => {
        // v9: a KIP-848 member's id and epoch, checked against the consumer group.
        const member =
          context.apiVersion >= 9 && (g.memberId ?? '') !== ''
            ? { memberId: g.memberId ?? '', memberEpoch: g.memberEpoch }
            : null
        if (context.apiVersion >= 10) return fetchGroupByTopicId(context, g, request.requireStable, member)
        const result = fetchGroup(context, g.groupId, toWanted(g.topics), request.requireStable, member)
        return {
          groupId: g.groupId,
          errorCode: result.errorCode,
          topics: result.topics.map((t) => ({ ...t, topicId: ZERO_UUID })),
        }
      })
      return { throttleTimeMs: 0, topics: [], errorCode: ErrorCode.NONE, groups }
    }
    const requireStable = context.apiVersion >= 7 && request.requireStable
    const result = fetchGroup(context, request.groupId, toWanted(request.topics), requireStable)
    if (context.apiVersion >= 2)
      return { throttleTimeMs: 0, topics: result.topics, errorCode: result.errorCode, groups: [] }
    // v0-1 have no top-level error: a group error goes on every requested partition.
    const topics =
      result.errorCode === ErrorCode.NONE
        ? result.topics
        : (request.topics ?? []).map((t) => ({
            name: t.name,
            partitions: t.partitionIndexes.map((partitionIndex) => ({
              partitionIndex,
              committedOffset: -1n,
              committedLeaderEpoch: -1,
              metadata: '',
              errorCode: result.errorCode,
            })),
          }))
    return { throttleTimeMs: 0, topics, errorCode: ErrorCode.NONE, groups: [] }
  },
}

/** v10: the group's topics by id; the coordinator keeps offsets by name, as Kafka's does. */
function fetchGroupByTopicId(
  context: RequestContext,
  group: OffsetFetchRequestOffsetFetchRequestGroup,
  requireStable: boolean,
  member: { memberId: string; memberEpoch: number } | null,
): OffsetFetchResponseOffsetFetchResponseGroup {
  const image = context.broker.metadataImage()
  const unknown: OffsetFetchResponseOffsetFetchResponseTopics[] = []
  let wanted: WantedTopics = null
  if (group.topics !== null) {
    wanted = []
    for (const t of group.topics) {
      const name = topicById(image, t.topicId)?.name
      if (name !== undefined) wanted.push({ name, partitions: t.partitionIndexes })
      else
        unknown.push({
          name: '',
          topicId: t.topicId,
          partitions: t.partitionIndexes.map((partitionIndex) => ({
            partitionIndex,
            committedOffset: -1n,
            committedLeaderEpoch: -1,
            metadata: '',
            errorCode: ErrorCode.UNKNOWN_TOPIC_ID,
          })),
        })
    }
  }
  const result = fetchGroup(context, group.groupId, wanted, requireStable, member)
  const topics = result.topics.flatMap((t) => {
    const topicId = image.topics.get(t.name)?.topicId
    return topicId === undefined ? [] : [{ ...t, topicId }]
  })
  return { groupId: group.groupId, errorCode: result.errorCode, topics: [...topics, ...unknown] }
}

function toWanted(topics: { name: string; partitionIndexes: number[] }[] | null): WantedTopics {
  return topics === null ? null : topics.map((t) => ({ name: t.name, partitions: t.partitionIndexes }))
}

function fetchGroup(
  context: RequestContext,
  groupId: string,
  wanted: WantedTopics,
  requireStable: boolean,
  member: { memberId: string; memberEpoch: number } | null = null,
): { errorCode: number; topics: OffsetFetchResponseOffsetFetchResponseTopic[] } {
  if (!context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, groupId))
    return { errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED, topics: [] }
  const describable = (topic: string) => context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
  const allowedWanted = wanted === null ? null : wanted.filter((t) => describable(t.name))
  const result = context.broker.groupCoordinator.fetchOffsets(groupId, allowedWanted, requireStable, member)
  const leaderEpochs = context.apiVersion >= 5
  // All partitions asked for: the topics the principal may not describe are left out, as Kafka does.
  const shown = wanted === null ? result.topics.filter((t) => describable(t.name)) : result.topics
  const refused = (wanted ?? [])
    .filter((t) => !describable(t.name))
    .map((t) => ({
      name: t.name,
      partitions: t.partitions.map((partitionIndex) => ({
        partitionIndex,
        committedOffset: -1n,
        committedLeaderEpoch: -1,
        metadata: '',
        errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
      })),
    }))
  return {
    errorCode: result.errorCode,
    topics: [
      ...shown.map((t) => ({
        name: t.name,
        partitions: t.partitions.map((p) => ({
          partitionIndex: p.partition,
          committedOffset: p.offset,
          committedLeaderEpoch: leaderEpochs ? p.leaderEpoch : -1,
          metadata: p.metadata,
          errorCode: p.errorCode,
        })),
      })),
      ...refused,
    ],
  }
}
