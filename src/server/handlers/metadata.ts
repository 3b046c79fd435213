/**
 * Metadata (key 3).
 * Behavior: lists the live brokers, the controller, and the requested topics with each
 * partition's leader, leader epoch, replicas, ISR and offline replicas. Unknown topics are
 * created when the broker's auto.create.topics.enable and the request allow it, otherwise
 * answered with UNKNOWN_TOPIC_OR_PARTITION; the answer waits briefly for the new leaders
 * (topic-admin's AUTO_CREATE_READY_WAIT_MS). A partition without a leader, or whose first
 * leader does not serve it yet (a new topic's leader still creating the log),
 * carries LEADER_NOT_AVAILABLE and no leader so clients retry, as Kafka answers for a new
 * topic, rather than a leader that would answer UNKNOWN_TOPIC_OR_PARTITION. (Only a new
 * partition's first leader is held back; later elections are named at once, as in Kafka.)
 * Version notes: v0 treats an empty topic list as "all topics"; v1+ uses null for all and
 * empty for none (librdkafka's brokers-only request). v1 adds racks and controller id, v2
 * the cluster id, v4 allowAutoTopicCreation, v5 offline replicas, v7 leader epochs, v8-v10
 * authorized operations, v10 topic ids (and lookup by id), v9+ flexible.
 */
import {
  type ClusterImage,
  endpointFor,
  leaderHasStorageError,
  leaderServes,
  NO_LEADER,
  type TopicImage,
  topicById,
} from '../../metadata/cluster-image.js'
import { isValidTopicName } from '../../metadata/topic-name.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type MetadataRequest,
  type MetadataResponse,
  type MetadataResponseMetadataResponsePartition,
  type MetadataResponseMetadataResponseTopic,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

/** Kafka's MetadataResponse.NO_LEADER_ID. */
const NO_LEADER_ID = -1
/** Kafka's sentinel for "authorized operations not requested". */
const AUTHORIZED_OPERATIONS_OMITTED = -2147483648

export const metadataHandler: ApiHandler<MetadataRequest, MetadataResponse> = {
  apiKey: ApiKey.Metadata,
  minVersion: 0,
  maxVersion: 12,
  async handle(context, request) {
    const wanted = requestedTopics(context.apiVersion, request)
    if (wanted !== 'all') await maybeAutoCreate(context, request, wanted)
    const image = context.broker.metadataImage()
    return {
      throttleTimeMs: 0,
      // Each broker's address on the listener this client came on; brokers without it are left out.
      brokers: [...image.brokers.values()].flatMap((b) => {
        const endpoint = endpointFor(b, context.connection.listenerName)
        return endpoint ? [{ nodeId: b.nodeId, host: endpoint.host, port: endpoint.port, rack: b.rack }] : []
      }),
      clusterId: image.clusterId,
      controllerId: image.controllerId,
      topics: wanted === 'all' ? allTopics(image) : wanted.map((t) => describeRequested(image, t)),
      clusterAuthorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
    }
  },
}

type RequestedTopic = { name: string | null; topicId: string }

function requestedTopics(version: number, request: MetadataRequest): RequestedTopic[] | 'all' {
  if (request.topics === null) return 'all'
  if (version === 0 && request.topics.length === 0) return 'all'
  return request.topics.map((t) => ({ name: t.name, topicId: t.topicId }))
}

async function maybeAutoCreate(context: RequestContext, request: MetadataRequest, wanted: RequestedTopic[]) {
  const allowed = context.apiVersion < 4 || request.allowAutoTopicCreation
  if (!allowed) return
  const image = context.broker.metadataImage()
  const missing = wanted
    .map((t) => t.name)
    .filter((name): name is string => name !== null && name !== '' && !image.topics.has(name))
  if (missing.length > 0) await context.broker.topicAdmin.autoCreateTopics(missing)
}

function allTopics(image: ClusterImage): MetadataResponseMetadataResponseTopic[] {
  return [...image.topics.values()]
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((t) => describeTopic(image, t))
}

function describeRequested(
  image: ClusterImage,
  wanted: RequestedTopic,
): MetadataResponseMetadataResponseTopic {
  const topic =
    wanted.name !== null && wanted.name !== ''
      ? image.topics.get(wanted.name)
      : wanted.topicId !== ZERO_UUID
        ? topicById(image, wanted.topicId)
        : undefined
  if (topic) return describeTopic(image, topic)
  const invalidName = wanted.name !== null && !isValidTopicName(wanted.name)
  return {
    errorCode: invalidName ? ErrorCode.INVALID_TOPIC_EXCEPTION : ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    name: wanted.name,
    topicId: wanted.topicId,
    isInternal: false,
    partitions: [],
    topicAuthorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
  }
}

function describeTopic(image: ClusterImage, topic: TopicImage): MetadataResponseMetadataResponseTopic {
  return {
    errorCode: ErrorCode.NONE,
    name: topic.name,
    topicId: topic.topicId,
    isInternal: topic.name.startsWith('__'),
    partitions: topic.partitions.map((p): MetadataResponseMetadataResponsePartition => {
      const offlineReplicas = p.replicas.filter((id) => !image.brokers.has(id))
      // A new partition's first leader (epoch 0) is named once it serves the partition, as
      // Kafka answers LEADER_NOT_AVAILABLE for a new topic: named earlier, it would answer
      // UNKNOWN_TOPIC_OR_PARTITION, and a producer retrying its first batches after later ones
      // reorders records. Leaders elected later are named at once, as in Kafka: they host
      // the log already, and a client meeting NOT_LEADER_OR_FOLLOWER refreshes its metadata.
      const served = p.leader !== NO_LEADER && (p.leaderEpoch > 0 || leaderServes(image, topic, p))
      // Its leader's log dir failed while creating it: a client retries, and sees why.
      const unavailable = leaderHasStorageError(image, topic, p)
        ? ErrorCode.KAFKA_STORAGE_ERROR
        : ErrorCode.LEADER_NOT_AVAILABLE
      return {
        errorCode: served ? ErrorCode.NONE : unavailable,
        partitionIndex: p.partition,
        leaderId: served ? p.leader : NO_LEADER_ID,
        leaderEpoch: p.leaderEpoch,
        replicaNodes: [...p.replicas],
        isrNodes: [...p.isr],
        offlineReplicas,
      }
    }),
    topicAuthorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
  }
}
