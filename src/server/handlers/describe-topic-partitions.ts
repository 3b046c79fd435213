/**
 * DescribeTopicPartitions (key 75, KIP-966).
 * Behavior: each requested topic (every topic when none are named), sorted by name, with its
 * partitions' leader, leader epoch, replicas, ISR, eligible leader replicas and last known
 * ELR, and as offline replicas those whose broker is not registered. An unknown topic is
 * answered UNKNOWN_TOPIC_OR_PARTITION. Paged as Kafka pages it: at most
 * responsePartitionLimit partitions (capped by max.request.partition.size.limit) from the
 * cursor on, and a nextCursor naming the first partition left out. A cursor naming a topic
 * that is not requested is INVALID_REQUEST on every requested topic (Kafka's error response).
 * Authorization: DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED; left out of a listing of
 * all); each topic carries its authorized operations, as Kafka's does.
 * Version notes: v0 only (flexible).
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DescribeTopicPartitionsRequest,
  type DescribeTopicPartitionsResponse,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

type ResponseTopic = DescribeTopicPartitionsResponse['topics'][number]

const AUTHORIZED_OPERATIONS_OMITTED = -2147483648

export const describeTopicPartitionsHandler: ApiHandler<
  DescribeTopicPartitionsRequest,
  DescribeTopicPartitionsResponse
> = {
  apiKey: ApiKey.DescribeTopicPartitions,
  minVersion: 0,
  maxVersion: 0,
  handle(context, request) {
    const image = context.broker.metadataImage()
    const configured = context.broker.config.values.get('max.request.partition.size.limit') as number
    const limit = Math.max(1, Math.min(request.responsePartitionLimit, configured))
    const describable = (name: string) => context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
    // Every topic asked for: the ones the principal may not describe are left out, as in Metadata.
    const names =
      request.topics.length === 0
        ? [...image.topics.keys()].filter(describable)
        : [...new Set(request.topics.map((t) => t.name))]
    names.sort()
    const cursor = request.cursor
    if (cursor !== null && request.topics.length > 0 && !names.includes(cursor.topicName))
      return {
        throttleTimeMs: 0,
        topics: names.map((name) => ({ ...unknownTopic(name), errorCode: ErrorCode.INVALID_REQUEST })),
        nextCursor: null,
      }
    const topics: ResponseTopic[] = []
    let remaining = limit
    let nextCursor: DescribeTopicPartitionsResponse['nextCursor'] = null
    for (const name of names) {
      if (cursor !== null && name < cursor.topicName) continue
      if (!describable(name)) {
        topics.push({ ...unknownTopic(name), errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED })
        continue
      }
      const topic = image.topics.get(name)
      if (!topic) {
        topics.push(unknownTopic(name))
        continue
      }
      const from = cursor !== null && name === cursor.topicName ? Math.max(0, cursor.partitionIndex) : 0
      if (remaining === 0) {
        nextCursor = { topicName: name, partitionIndex: from }
        break
      }
      const shown = topic.partitions.slice(from, from + remaining)
      remaining -= shown.length
      topics.push({
        errorCode: ErrorCode.NONE,
        name,
        topicId: topic.topicId,
        isInternal: name.startsWith('__'),
        topicAuthorizedOperations: context.authorizedOperations(ResourceType.TOPIC, name),
        partitions: shown.map((state) => ({
          errorCode: ErrorCode.NONE,
          partitionIndex: state.partition,
          leaderId: state.leader,
          leaderEpoch: state.leaderEpoch,
          replicaNodes: [...state.replicas],
          isrNodes: [...state.isr],
          eligibleLeaderReplicas: [...(state.elr ?? [])],
          lastKnownElr: [...(state.lastKnownElr ?? [])],
          offlineReplicas: state.replicas.filter((id) => !image.brokers.has(id)),
        })),
      })
      const next = from + shown.length
      if (next < topic.partitions.length) {
        nextCursor = { topicName: name, partitionIndex: next }
        break
      }
    }
    return { throttleTimeMs: 0, topics, nextCursor }
  },
}

function unknownTopic(name: string): ResponseTopic {
  return {
    errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    name,
    topicId: ZERO_UUID,
    isInternal: false,
    partitions: [],
    topicAuthorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
  }
}
