/**
 * CreateTopics (key 19).
 * Behavior: translates the request for the controller's side (metadata/topic-admin.ts),
 * which runs Kafka's checks in its order and creates every valid topic in one metadata
 * change: a name given twice gets INVALID_REQUEST "Duplicate topic name." (after the
 * others); illegal, existing or colliding names INVALID_TOPIC_EXCEPTION or
 * TOPIC_ALREADY_EXISTS; bad configs INVALID_CONFIG; -1 partitions or replication factor take
 * num.partitions and default.replication.factor; manual assignments are checked as Kafka
 * does. The answer comes once every new partition's leader serves it, within the request's
 * timeoutMs (REQUEST_TIMED_OUT for a topic past it; 0 does not wait). validateOnly runs
 * every check and creates nothing. Success carries errorMessage null, as Kafka's does.
 * Authorization: CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED; the
 * configs of a created topic need DESCRIBE_CONFIGS on it (else topicConfigErrorCode).
 * Version notes: v1 adds validateOnly and error messages; v2-v4 change nothing on the wire
 * (v4 allows -1 defaults, which every version here accepts); v5 is flexible and returns
 * numPartitions, replicationFactor and the topic's configs; v7 returns the topic id.
 */
import { brokerIdFromWire } from '../../common/types.js'
import type { ClusterImage, TopicImage } from '../../metadata/cluster-image.js'
import { resolveTopicConfig } from '../../metadata/topic-config.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { defaultCreateTopicsResponseCreatableTopicResult } from '../../protocol/generated/create-topics-response.js'
import {
  ApiKey,
  type CreateTopicsRequest,
  type CreateTopicsResponse,
  type CreateTopicsResponseCreatableTopicResult,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { BrokerServices } from '../broker-services.js'
import type { ApiHandler } from './registry.js'

export const createTopicsHandler: ApiHandler<CreateTopicsRequest, CreateTopicsResponse> = {
  apiKey: ApiKey.CreateTopics,
  minVersion: 0,
  maxVersion: 7,
  async handle(context, request) {
    const broker = context.broker
    const validateOnly = context.apiVersion >= 1 && request.validateOnly
    const mayCreateAll = context.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
    const allowed = (name: string): boolean =>
      mayCreateAll || context.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)
    const denied = request.topics.filter((topic) => !allowed(topic.name))
    const outcomes = await broker.topicAdmin.createTopics(
      request.topics
        .filter((topic) => allowed(topic.name))
        .map((topic) => ({
          name: topic.name,
          numPartitions: topic.numPartitions,
          replicationFactor: topic.replicationFactor,
          assignments: topic.assignments.map((a) => ({
            partitionIndex: a.partitionIndex,
            brokerIds: a.brokerIds.map(brokerIdFromWire),
          })),
          configs: Object.fromEntries(topic.configs.map((c) => [c.name, c.value])),
        })),
      { validateOnly, timeoutMs: request.timeoutMs },
    )
    const after = broker.metadataImage()
    const topics = outcomes.map((outcome): CreateTopicsResponseCreatableTopicResult => {
      const result: CreateTopicsResponseCreatableTopicResult = {
        ...defaultCreateTopicsResponseCreatableTopicResult(),
        name: outcome.name,
        errorCode: outcome.errorCode,
        errorMessage: outcome.errorMessage,
      }
      if (outcome.errorCode === ErrorCode.NONE && outcome.topic) {
        const image = validateOnly ? withTopic(after, outcome.topic) : after
        describeCreated(result, image, broker, outcome.topic, validateOnly)
      }
      if (
        result.errorCode === ErrorCode.NONE &&
        !context.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, result.name)
      ) {
        result.configs = []
        result.topicConfigErrorCode = ErrorCode.TOPIC_AUTHORIZATION_FAILED
      }
      return result
    })
    for (const topic of denied)
      topics.push({
        ...defaultCreateTopicsResponseCreatableTopicResult(),
        name: topic.name,
        errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        errorMessage: 'Authorization failed.',
      })
    return { throttleTimeMs: 0, topics }
  },
}

function withTopic(image: ClusterImage, topic: TopicImage): ClusterImage {
  return { ...image, topics: new Map(image.topics).set(topic.name, topic) }
}

/** v5+: the created topic's shape and every config with its source. */
function describeCreated(
  result: CreateTopicsResponseCreatableTopicResult,
  image: ClusterImage,
  broker: BrokerServices,
  topic: TopicImage,
  validateOnly: boolean,
): void {
  result.topicId = validateOnly ? ZERO_UUID : topic.topicId
  result.numPartitions = topic.partitions.length
  result.replicationFactor = topic.partitions[0]?.replicas.length ?? -1
  result.configs = [...resolveTopicConfig(image, broker.config, topic.name)].map(([name, config]) => ({
    name,
    value: config.sensitive ? null : config.value,
    readOnly: config.readOnly,
    configSource: config.source,
    isSensitive: config.sensitive,
  }))
}
