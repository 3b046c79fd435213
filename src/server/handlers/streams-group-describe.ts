/**
 * StreamsGroupDescribe (key 89), KIP-1071.
 * Behavior: state (Empty, NotReady, Assigning, Reconciling, Stable), epochs, topology and
 * members of each streams group this broker coordinates, with each member's process,
 * endpoint, current and target tasks. A classic, consumer or share group answers
 * GROUP_ID_NOT_FOUND "Group <id> is not a streams group.", as Kafka.
 * Authorization: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for that group).
 * Version notes: v0-1 as Kafka 4.4. v1's topology description (KIP-1331), when asked for:
 * AVAILABLE (3) with the description a member pushed for the group's current topology epoch
 * (streams-topology-description.ts), else NOT_STORED (1), as Kafka with its in-memory plugin
 * (and always NOT_STORED without one); NOT_REQUESTED (0) otherwise; the assignor name is tidelog's "sticky" (see streams-assignor.ts). Authorized
 * operations are not computed: Kafka's "omitted" value. Task offsets are the ones each
 * member last reported (in memory, as Kafka's).
 */
import type { StreamsGroupDescription } from '../../coordinator/streams/streams-group-coordinator.js'
import type {
  TopologyDescription,
  TopologyDescriptionNode,
} from '../../coordinator/streams/streams-topology-description.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type StreamsGroupDescribeRequest,
  type StreamsGroupDescribeResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

const AUTHORIZED_OPERATIONS_OMITTED = -2147483648
const TOPOLOGY_DESCRIPTION_NOT_REQUESTED = 0
const TOPOLOGY_DESCRIPTION_NOT_STORED = 1
const TOPOLOGY_DESCRIPTION_AVAILABLE = 3
const ASSIGNOR_NAME = 'sticky'

type DescribedGroup = StreamsGroupDescribeResponse['groups'][number]

function toWireNode(n: TopologyDescriptionNode) {
  return { ...n, sourceTopics: [...n.sourceTopics], stores: [...n.stores], successors: [...n.successors] }
}

function toWireDescription(d: TopologyDescription): NonNullable<DescribedGroup['topologyDescription']> {
  return {
    subtopologies: d.subtopologies.map((s) => ({
      subtopologyId: s.subtopologyId,
      nodes: s.nodes.map(toWireNode),
    })),
    globalStores: d.globalStores.map((g) => ({
      source: toWireNode(g.source),
      processor: toWireNode(g.processor),
    })),
  }
}

function described(d: StreamsGroupDescription, descriptionStatus: number): DescribedGroup {
  const ok = d.errorCode === ErrorCode.NONE
  const available =
    ok && descriptionStatus !== TOPOLOGY_DESCRIPTION_NOT_REQUESTED && (d.topologyDescription ?? null) !== null
  const topicInfo = (t: {
    name: string
    partitions: number
    replicationFactor: number
    topicConfigs: readonly { key: string; value: string }[]
  }) => ({
    name: t.name,
    partitions: t.partitions,
    replicationFactor: t.replicationFactor,
    topicConfigs: t.topicConfigs.map((c) => ({ key: c.key, value: c.value })),
  })
  return {
    errorCode: d.errorCode,
    errorMessage: d.errorMessage,
    groupId: d.groupId,
    groupState: d.state,
    groupEpoch: d.groupEpoch,
    assignmentEpoch: d.assignmentEpoch,
    topology:
      d.topology === null
        ? null
        : {
            epoch: d.topology.epoch,
            subtopologies: d.topology.subtopologies.map((s) => ({
              subtopologyId: s.subtopologyId,
              sourceTopics: [...s.sourceTopics],
              repartitionSinkTopics: [...s.repartitionSinkTopics],
              stateChangelogTopics: s.stateChangelogTopics.map(topicInfo),
              repartitionSourceTopics: s.repartitionSourceTopics.map(topicInfo),
            })),
          },
    members: d.members.map((m) => ({
      memberId: m.memberId,
      memberEpoch: m.memberEpoch,
      instanceId: m.instanceId,
      rackId: m.rackId,
      clientId: m.clientId,
      clientHost: m.clientHost,
      topologyEpoch: m.topologyEpoch,
      processId: m.processId,
      userEndpoint: m.userEndpoint,
      clientTags: m.clientTags.map((t) => ({ key: t.key, value: t.value })),
      taskOffsets: m.taskOffsets.map((o) => ({ ...o })),
      taskEndOffsets: m.taskEndOffsets.map((o) => ({ ...o })),
      assignment: {
        activeTasks: m.assignment.active,
        standbyTasks: m.assignment.standby,
        warmupTasks: m.assignment.warmup,
      },
      targetAssignment: {
        activeTasks: m.targetAssignment.active,
        standbyTasks: m.targetAssignment.standby,
        warmupTasks: m.targetAssignment.warmup,
      },
      isClassic: false,
    })),
    authorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
    topologyDescription: available && d.topologyDescription ? toWireDescription(d.topologyDescription) : null,
    topologyDescriptionStatus: !ok
      ? TOPOLOGY_DESCRIPTION_NOT_REQUESTED
      : available
        ? TOPOLOGY_DESCRIPTION_AVAILABLE
        : descriptionStatus,
    assignorName: ok ? ASSIGNOR_NAME : null,
  }
}

export const streamsGroupDescribeHandler: ApiHandler<
  StreamsGroupDescribeRequest,
  StreamsGroupDescribeResponse
> = {
  apiKey: ApiKey.StreamsGroupDescribe,
  minVersion: 0,
  maxVersion: 1,
  handle(context, request) {
    const descriptionStatus = request.includeTopologyDescription
      ? TOPOLOGY_DESCRIPTION_NOT_STORED
      : TOPOLOGY_DESCRIPTION_NOT_REQUESTED
    const groups = request.groupIds.map((groupId) => {
      if (!context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, groupId))
        return described(
          {
            groupId,
            errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED,
            errorMessage: `Not authorized to describe group ${groupId}.`,
            state: '',
            groupEpoch: 0,
            assignmentEpoch: 0,
            topology: null,
            members: [],
          },
          descriptionStatus,
        )
      return described(context.broker.groupCoordinator.streams.describe(groupId), descriptionStatus)
    })
    return { throttleTimeMs: 0, groups }
  },
}
