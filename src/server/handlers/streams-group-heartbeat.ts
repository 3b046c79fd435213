/**
 * StreamsGroupHeartbeat (key 88), KIP-1071's streams groups.
 * Behavior: one request for joining (epoch 0, with the application's topology), staying
 * and leaving (epoch -1, or -2 for a static member) a streams group
 * (coordinator/streams/): the coordinator assigns the topology's tasks, moving an active
 * task only once its previous owner has revoked it. When the topology's repartition or
 * changelog topics are missing, the answer carries the MISSING_INTERNAL_TOPICS status and the
 * broker creates them (with the topology's partition counts, replication factors and
 * configs; -1 replicas meaning default.replication.factor), as Kafka's KafkaApis does,
 * without waiting: a later heartbeat finds them and tasks are assigned. Streams groups are
 * written to __consumer_offsets (streams-group-records.ts): a new coordinator keeps them.
 * Version notes: v0-1 as Kafka 4.4 (v1 adds AcceptableRecoveryLag as int64 and
 * TopologyDescriptionRequired: set, with a topology description store configured, while none
 * is stored for the group's topology epoch; see streams-group-topology-description-update.ts).
 * Off while `streams.version` is finalized at 0 (UNSUPPORTED_VERSION, as Kafka).
 * Authorization, in KafkaApis' order: UNSUPPORTED_VERSION while streams groups are off, READ
 * on the group (GROUP_AUTHORIZATION_FAILED), both without a message as Kafka; a joining
 * member's topology must name none of Kafka's internal topics and only valid names
 * (STREAMS_INVALID_TOPOLOGY) and have DESCRIBE on each of its topics
 * (TOPIC_AUTHORIZATION_FAILED); internal topics are created only with CREATE on the cluster
 * or on each topic, otherwise the status says which were not authorized, as Kafka.
 */
import { clientHostOf } from '../../coordinator/client-host.js'
import type { TaskSet } from '../../coordinator/streams/streams-assignor.js'
import type { StreamsHeartbeatResult } from '../../coordinator/streams/streams-group.js'
import { type CreatableInternalTopic, StreamsStatus } from '../../coordinator/streams/streams-topology.js'
import { finalizedLevel } from '../../metadata/features.js'
import { isValidTopicName } from '../../metadata/topic-name.js'
import { ErrorCode, errorInfos } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type StreamsGroupHeartbeatRequest,
  type StreamsGroupHeartbeatResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

type TaskIds = { subtopologyId: string; partitions: number[] }[] | null

function taskSet(tasks: NonNullable<TaskIds>): TaskSet {
  return new Map(tasks.map((t) => [t.subtopologyId, [...t.partitions].sort((a, b) => a - b)]))
}

/** Kafka's Topic.isInternal. */
const KAFKA_INTERNAL_TOPICS: ReadonlySet<string> = new Set([
  '__consumer_offsets',
  '__transaction_state',
  '__share_group_state',
])

/**
 * KafkaApis' checks of a joining member's topology topics (source, repartition and changelog,
 * each once, in the topology's order): none of Kafka's internal topics, valid names, and
 * DESCRIBE on every one (TOPIC_AUTHORIZATION_FAILED, no message); null when all pass.
 */
function refusedTopologyTopics(
  context: RequestContext,
  topology: NonNullable<StreamsGroupHeartbeatRequest['topology']>,
): { errorCode: number; errorMessage: string | null } | null {
  const topics = [
    ...new Set(
      topology.subtopologies.flatMap((s) => [
        ...s.sourceTopics,
        ...s.repartitionSinkTopics,
        ...s.repartitionSourceTopics.map((t) => t.name),
        ...s.stateChangelogTopics.map((t) => t.name),
      ]),
    ),
  ]
  const internal = topics.filter((t) => KAFKA_INTERNAL_TOPICS.has(t))
  if (internal.length > 0)
    return {
      errorCode: ErrorCode.STREAMS_INVALID_TOPOLOGY,
      errorMessage: `Use of Kafka internal topics ${internal.join(',')} in a Kafka Streams topology is prohibited.`,
    }
  const invalid = topics.filter((t) => !isValidTopicName(t))
  if (invalid.length > 0)
    return {
      errorCode: ErrorCode.STREAMS_INVALID_TOPOLOGY,
      errorMessage: `Topic names ${invalid.join(',')} are not valid topic names.`,
    }
  if (topics.some((t) => !context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t)))
    return { errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED, errorMessage: null }
  return null
}

function errorResponse(
  apiVersion: number,
  errorCode: number,
  errorMessage: string | null,
): StreamsGroupHeartbeatResponse {
  return toResponse(
    {
      errorCode,
      errorMessage,
      memberId: '',
      memberEpoch: 0,
      heartbeatIntervalMs: 0,
      status: [],
      tasks: null,
      endpointInformationEpoch: 0,
      partitionsByUserEndpoint: null,
      creatableTopics: [],
    },
    apiVersion,
  )
}

/**
 * The response of `apiVersion`. The recovery lag and task offset interval are told to a
 * member in the group only: an error or a leave carries the fields' defaults (-1 and 0), as
 * Kafka's answers do.
 */
function toResponse(
  result: StreamsHeartbeatResult,
  apiVersion: number,
  acceptableRecoveryLag: number | null = null,
  taskOffsetIntervalMs = 0,
  topologyDescriptionRequired = false,
) {
  return {
    throttleTimeMs: 0,
    errorCode: result.errorCode,
    errorMessage: result.errorMessage,
    memberId: result.memberId,
    memberEpoch: result.memberEpoch,
    heartbeatIntervalMs: result.heartbeatIntervalMs,
    // v0 carries the lag as int32, v1 as int64 (each version only writes its own field).
    acceptableRecoveryLagLegacy:
      apiVersion === 0 && acceptableRecoveryLag !== null ? Math.min(acceptableRecoveryLag, 2147483647) : 0,
    taskOffsetIntervalMs,
    acceptableRecoveryLag:
      apiVersion >= 1 && acceptableRecoveryLag !== null ? BigInt(acceptableRecoveryLag) : -1n,
    status: result.status.map((s) => ({ statusCode: s.statusCode, statusDetail: s.statusDetail })),
    activeTasks: result.tasks?.active ?? null,
    standbyTasks: result.tasks?.standby ?? null,
    warmupTasks: result.tasks?.warmup ?? null,
    topologyDescriptionRequired,
    endpointInformationEpoch: result.endpointInformationEpoch,
    partitionsByUserEndpoint: result.partitionsByUserEndpoint,
  }
}

/**
 * Why the last creation of an internal topic failed, per broker: the next heartbeat's
 * MISSING_INTERNAL_TOPICS detail says so (Kafka 4.4 reports these errors the same way), so
 * that an application waiting for its topics learns why they do not come.
 */
const creationErrors = new WeakMap<object, Map<string, string>>()

/**
 * Kafka's autoTopicCreationManager.createStreamsInternalTopics: the authorized ones are
 * created in the background; returns the names CREATE was denied on.
 */
function createInternalTopics(context: RequestContext, topics: readonly CreatableInternalTopic[]): string[] {
  const mayCreateAll = context.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
  const allowed = topics.filter(
    (t) => mayCreateAll || context.authorize(AclOperation.CREATE, ResourceType.TOPIC, t.name),
  )
  const denied = topics.filter((t) => !allowed.includes(t)).map((t) => t.name)
  if (allowed.length === 0) return denied
  const broker = context.broker
  void broker.topicAdmin
    .createTopics(
      allowed.map((t) => ({
        name: t.name,
        numPartitions: t.partitions,
        replicationFactor: t.replicationFactor,
        assignments: [],
        configs: t.configs,
      })),
      { validateOnly: false, timeoutMs: 0 },
    )
    .then((outcomes) => {
      let errors = creationErrors.get(broker)
      if (!errors) {
        errors = new Map()
        creationErrors.set(broker, errors)
      }
      for (const o of outcomes) {
        if (o.errorCode === ErrorCode.NONE || o.errorCode === ErrorCode.TOPIC_ALREADY_EXISTS) {
          errors.delete(o.name)
          continue
        }
        errors.set(o.name, `${errorInfos.get(o.errorCode)?.name ?? o.errorCode}: ${o.errorMessage ?? ''}`)
        broker.logger.info(
          { topic: o.name, errorCode: o.errorCode, errorMessage: o.errorMessage },
          'streams group internal topic not created',
        )
      }
    })
    .catch((error: unknown) =>
      broker.logger.info({ err: error }, 'streams group internal topics not created'),
    )
  return denied
}

export const streamsGroupHeartbeatHandler: ApiHandler<
  StreamsGroupHeartbeatRequest,
  StreamsGroupHeartbeatResponse
> = {
  apiKey: ApiKey.StreamsGroupHeartbeat,
  minVersion: 0,
  maxVersion: 1,
  async handle(context, request) {
    // streams.version 0 (UpdateFeatures) turns streams groups off: Kafka answers UNSUPPORTED_VERSION.
    if (
      finalizedLevel(context.broker.metadataImage(), 'streams.version') < 1 ||
      !context.broker.groupCoordinator.streamsProtocolEnabled
    )
      return errorResponse(context.apiVersion, ErrorCode.UNSUPPORTED_VERSION, null)
    if (!context.authorize(AclOperation.READ, ResourceType.GROUP, request.groupId))
      return errorResponse(context.apiVersion, ErrorCode.GROUP_AUTHORIZATION_FAILED, null)
    const refused = request.topology === null ? null : refusedTopologyTopics(context, request.topology)
    if (refused !== null) return errorResponse(context.apiVersion, refused.errorCode, refused.errorMessage)
    const coordinator = context.broker.groupCoordinator
    const owned =
      request.activeTasks === null || request.standbyTasks === null || request.warmupTasks === null
        ? null
        : {
            active: taskSet(request.activeTasks),
            standby: taskSet(request.standbyTasks),
            warmup: taskSet(request.warmupTasks),
          }
    const result = await coordinator.streams.heartbeat({
      groupId: request.groupId,
      memberId: request.memberId,
      memberEpoch: request.memberEpoch,
      endpointInformationEpoch: request.endpointInformationEpoch,
      instanceId: request.instanceId,
      rackId: request.rackId,
      rebalanceTimeoutMs: request.rebalanceTimeoutMs,
      topology: request.topology,
      owned,
      processId: request.processId,
      userEndpoint: request.userEndpoint,
      clientTags: request.clientTags,
      shutdownApplication: request.shutdownApplication,
      taskOffsets: request.taskOffsets,
      taskEndOffsets: request.taskEndOffsets,
      clientId: context.header.clientId ?? '',
      clientHost: clientHostOf(context.connection.remoteAddress),
    })
    let status = result.status
    if (result.creatableTopics.length > 0) {
      const errors = creationErrors.get(context.broker)
      const failed = result.creatableTopics
        .filter((t) => errors?.has(t.name))
        .map((t) => `Unable to create topic ${t.name}: ${errors?.get(t.name)}`)
      const denied = createInternalTopics(context, result.creatableTopics)
      const notes = [
        ...(denied.length > 0 ? [`Unauthorized to CREATE on topics ${denied.sort().join(', ')}.`] : []),
        ...failed,
      ]
      if (notes.length > 0)
        status = status.map((s) =>
          s.statusCode === StreamsStatus.MISSING_INTERNAL_TOPICS
            ? { ...s, statusDetail: [s.statusDetail, ...notes].join('; ') }
            : s,
        )
    }
    const config = coordinator.streams.configOf(request.groupId)
    if (result.errorCode !== ErrorCode.NONE || result.memberEpoch < 0)
      return toResponse({ ...result, status }, context.apiVersion)
    return toResponse(
      { ...result, status },
      context.apiVersion,
      config.acceptableRecoveryLag,
      config.taskOffsetIntervalMs,
      coordinator.streams.topologyDescriptionRequired(
        request.groupId,
        context.apiVersion,
        request.memberEpoch,
        result,
      ),
    )
  },
}
