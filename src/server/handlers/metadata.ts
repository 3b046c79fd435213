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
 * Authorization (Kafka's handleTopicMetadataRequest): an all-topics request lists only the
 * topics the principal may DESCRIBE; a named topic it may not describe answers
 * TOPIC_AUTHORIZATION_FAILED (a topic id UNKNOWN_TOPIC_ID), existing or not; auto-creation
 * needs CREATE on the cluster or the topic, else TOPIC_AUTHORIZATION_FAILED. Authorized
 * operations are filled in when asked (topics v8+, the cluster v8-v10).
 * Version notes: v0 treats an empty topic list as "all topics"; v1+ uses null for all and
 * empty for none (librdkafka's brokers-only request). v1 adds racks and controller id, v2
 * the cluster id, v4 allowAutoTopicCreation, v5 offline replicas, v7 leader epochs, v8-v10
 * authorized operations, v10 topic ids (and lookup by id), v9+ flexible, v13 a top-level
 * error code (KIP-1102's REBOOTSTRAP_REQUIRED; tidelog always answers NONE).
 */
import { type ClusterImage, endpointFor, topicById } from '../../metadata/cluster-image.js'
import { isValidTopicName } from '../../metadata/topic-name.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { ENCODE_RESPONSE } from '../../protocol/frame-encoder.js'
import {
  ApiKey,
  type MetadataRequest,
  type MetadataResponse,
  type MetadataResponseMetadataResponseTopic,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import { encodeMetadataResponseCached } from './metadata-encoding.js'
import { AUTHORIZED_OPERATIONS_OMITTED, allTopics, describedTopic } from './metadata-topics.js'
import type { ApiHandler } from './registry.js'

export { allTopics } from './metadata-topics.js'

export const metadataHandler: ApiHandler<MetadataRequest, MetadataResponse> = {
  apiKey: ApiKey.Metadata,
  minVersion: 0,
  maxVersion: 13,
  async handle(context, request) {
    const wanted = requestedTopics(context.apiVersion, request)
    const denied = new Map<RequestedTopic, number>()
    if (wanted !== 'all') {
      for (const t of wanted) if (!mayDescribe(context, t)) denied.set(t, deniedCode(t))
      await maybeAutoCreate(
        context,
        request,
        wanted.filter((t) => !denied.has(t)),
        denied,
      )
    }
    const image = context.broker.metadataImage()
    const withOperations = context.apiVersion >= 8 && request.includeTopicAuthorizedOperations
    const described =
      wanted === 'all'
        ? allTopics(image).filter((t) =>
            context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name!),
          )
        : wanted.map((t) => {
            const code = denied.get(t)
            return code === undefined ? describeRequested(image, t) : refused(t, code)
          })
    // Descriptions are shared between requests (metadata-topics.ts): a copy carries this
    // principal's operations, with the same partition list (and its encoding).
    const topics = withOperations
      ? described.map((t) =>
          t.errorCode === ErrorCode.NONE
            ? { ...t, topicAuthorizedOperations: context.authorizedOperations(ResourceType.TOPIC, t.name!) }
            : t,
        )
      : described
    return {
      [ENCODE_RESPONSE]: encodeMetadataResponseCached,
      throttleTimeMs: 0,
      // Each broker's address on the listener this client came on; brokers without it are left out.
      brokers: [...image.brokers.values()].flatMap((b) => {
        const endpoint = endpointFor(b, context.connection.listenerName)
        return endpoint ? [{ nodeId: b.nodeId, host: endpoint.host, port: endpoint.port, rack: b.rack }] : []
      }),
      clusterId: image.clusterId,
      controllerId: image.controllerId,
      topics,
      clusterAuthorizedOperations:
        context.apiVersion >= 8 && context.apiVersion <= 10 && request.includeClusterAuthorizedOperations
          ? clusterOperations(context)
          : AUTHORIZED_OPERATIONS_OMITTED,
      // v13 (KIP-1102): a top-level error, REBOOTSTRAP_REQUIRED in Kafka; tidelog has none to give.
      errorCode: ErrorCode.NONE,
    }
  },
}

/** Kafka answers 0, not an error, to a principal that may not describe the cluster. */
function clusterOperations(context: RequestContext): number {
  return context.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
    ? context.authorizedOperations(ResourceType.CLUSTER, CLUSTER_NAME)
    : 0
}

type RequestedTopic = { name: string | null; topicId: string }

function requestedTopics(version: number, request: MetadataRequest): RequestedTopic[] | 'all' {
  if (request.topics === null) return 'all'
  if (version === 0 && request.topics.length === 0) return 'all'
  return request.topics.map((t) => ({ name: t.name, topicId: t.topicId }))
}

/** A topic asked by id is looked up first: DESCRIBE is on its name. */
function mayDescribe(context: RequestContext, wanted: RequestedTopic): boolean {
  const name =
    wanted.name !== null && wanted.name !== ''
      ? wanted.name
      : wanted.topicId !== ZERO_UUID
        ? topicById(context.broker.metadataImage(), wanted.topicId)?.name
        : undefined
  return name === undefined || context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
}

/** Kafka hides a topic id the caller may not describe behind UNKNOWN_TOPIC_ID. */
function deniedCode(wanted: RequestedTopic): number {
  return wanted.name !== null && wanted.name !== ''
    ? ErrorCode.TOPIC_AUTHORIZATION_FAILED
    : ErrorCode.UNKNOWN_TOPIC_ID
}

function refused(wanted: RequestedTopic, errorCode: number): MetadataResponseMetadataResponseTopic {
  return {
    errorCode,
    name: errorCode === ErrorCode.UNKNOWN_TOPIC_ID ? null : wanted.name,
    topicId: wanted.topicId,
    isInternal: false,
    partitions: [],
    topicAuthorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
  }
}

/** Auto-creation needs CREATE on the cluster or on the topic; without it the topic is refused. */
async function maybeAutoCreate(
  context: RequestContext,
  request: MetadataRequest,
  wanted: RequestedTopic[],
  denied: Map<RequestedTopic, number>,
) {
  const allowed = context.apiVersion < 4 || request.allowAutoTopicCreation
  if (!allowed || context.broker.config.values.get('auto.create.topics.enable') !== true) return
  const image = context.broker.metadataImage()
  const missing = wanted.filter(
    (t): t is RequestedTopic & { name: string } =>
      t.name !== null && t.name !== '' && !image.topics.has(t.name),
  )
  const mayCreateAll = context.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
  const creatable: string[] = []
  for (const t of missing) {
    if (mayCreateAll || context.authorize(AclOperation.CREATE, ResourceType.TOPIC, t.name))
      creatable.push(t.name)
    else denied.set(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
  }
  if (creatable.length > 0) await context.broker.topicAdmin.autoCreateTopics(creatable)
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
  if (topic) return describedTopic(image, topic).topic
  const invalidName = wanted.name !== null && !isValidTopicName(wanted.name)
  // A topic asked for by id alone is unknown by id, as Kafka answers (v10+).
  const byId = (wanted.name === null || wanted.name === '') && wanted.topicId !== ZERO_UUID
  return {
    errorCode: byId
      ? ErrorCode.UNKNOWN_TOPIC_ID
      : invalidName
        ? ErrorCode.INVALID_TOPIC_EXCEPTION
        : ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    name: wanted.name,
    topicId: wanted.topicId,
    isInternal: false,
    partitions: [],
    topicAuthorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
  }
}
