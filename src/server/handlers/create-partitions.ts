/**
 * CreatePartitions (key 37).
 * Behavior: raises a topic's partition count, as Kafka's controller does: unknown topics
 * get UNKNOWN_TOPIC_OR_PARTITION; a count equal to or below the current one
 * INVALID_PARTITIONS ("would not be an increase"); manual assignments, when given, must
 * number exactly the added partitions and name registered brokers, each list as long as
 * the topic's replication factor (INVALID_REPLICA_ASSIGNMENT otherwise). A name given
 * twice gets INVALID_REQUEST "Duplicate topic name.". validateOnly checks and changes
 * nothing; otherwise all increases land in one metadata change.
 * Version notes: v1 adds nothing on the wire; v2 is flexible; v3 is v2 (KIP-599 quota).
 */

import type { ClusterImage, PartitionState, TopicImage } from '../../metadata/cluster-image.js'
import { ErrorCode, errorMessage } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type CreatePartitionsRequest,
  type CreatePartitionsRequestCreatePartitionsTopic,
  type CreatePartitionsResponse,
  type CreatePartitionsResponseCreatePartitionsTopicResult,
} from '../../protocol/generated/index.js'
import type { BrokerServices } from '../broker-services.js'
import {
  checkManualAssignment,
  checkReplicationFactor,
  MAX_PARTITIONS_PER_REQUEST,
  manualPartition,
  TopicAdminError,
} from './create-topics.js'
import type { ApiHandler } from './registry.js'

export const createPartitionsHandler: ApiHandler<CreatePartitionsRequest, CreatePartitionsResponse> = {
  apiKey: ApiKey.CreatePartitions,
  minVersion: 0,
  maxVersion: 3,
  async handle(context, request) {
    const broker = context.broker
    const image = broker.metadataImage()
    const counts = new Map<string, number>()
    for (const t of request.topics) counts.set(t.name, (counts.get(t.name) ?? 0) + 1)
    const grown = new Map<string, PartitionState[]>()
    let budget = MAX_PARTITIONS_PER_REQUEST
    const results = request.topics.map((topic): CreatePartitionsResponseCreatePartitionsTopicResult => {
      if ((counts.get(topic.name) ?? 0) > 1) {
        return result(topic.name, ErrorCode.INVALID_REQUEST, 'Duplicate topic name.')
      }
      try {
        const added = plan(broker, image, topic)
        budget -= added.length
        if (budget < 0) {
          throw new TopicAdminError(
            ErrorCode.POLICY_VIOLATION,
            'Unable to perform excessively large batch operation.',
          )
        }
        grown.set(topic.name, added)
        return result(topic.name, ErrorCode.NONE, null)
      } catch (error) {
        if (!(error instanceof TopicAdminError)) throw error
        return result(topic.name, error.errorCode, error.message)
      }
    })
    if (!request.validateOnly && grown.size > 0) {
      await broker.updateMetadata((current) => {
        const topics = new Map(current.topics)
        for (const [name, added] of grown) {
          const topic = topics.get(name)
          // Same topic id and size as planned, or the request raced a delete/create: skip.
          if (!topic || topic.topicId !== image.topics.get(name)?.topicId) continue
          if (topic.partitions.length !== added[0].partition) continue
          topics.set(name, { ...topic, partitions: [...topic.partitions, ...added] })
        }
        return { ...current, topics }
      })
    }
    return { throttleTimeMs: 0, results }
  },
}

function plan(
  broker: BrokerServices,
  image: ClusterImage,
  request: CreatePartitionsRequestCreatePartitionsTopic,
): PartitionState[] {
  const topic: TopicImage | undefined = image.topics.get(request.name)
  if (!topic)
    throw new TopicAdminError(
      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
      errorMessage(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    )
  const current = topic.partitions.length
  if (request.count === current) {
    throw new TopicAdminError(ErrorCode.INVALID_PARTITIONS, `Topic already has ${current} partition(s).`)
  }
  if (request.count < current) {
    throw new TopicAdminError(
      ErrorCode.INVALID_PARTITIONS,
      `The topic ${request.name} currently has ${current} partition(s); ${request.count} would not be an increase.`,
    )
  }
  const additional = request.count - current
  if (additional > MAX_PARTITIONS_PER_REQUEST) {
    throw new TopicAdminError(
      ErrorCode.POLICY_VIOLATION,
      'Unable to perform excessively large batch operation.',
    )
  }
  const replicationFactor = topic.partitions[0].replicas.length
  if (request.assignments !== null) {
    if (request.assignments.length !== additional) {
      throw new TopicAdminError(
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        `Attempted to add ${additional} additional partition(s), but only ${request.assignments.length} assignment(s) were specified.`,
      )
    }
    return request.assignments.map((assignment, i) => {
      checkManualAssignment(image, assignment.brokerIds, replicationFactor)
      return manualPartition(current + i, assignment.brokerIds)
    })
  }
  checkReplicationFactor(replicationFactor, image.brokers.size)
  const added: PartitionState[] = []
  for (let i = 0; i < additional; i++) added.push(broker.placeNewPartition(current + i, replicationFactor))
  return added
}

function result(
  name: string,
  errorCode: number,
  message: string | null,
): CreatePartitionsResponseCreatePartitionsTopicResult {
  return { name, errorCode, errorMessage: message }
}
