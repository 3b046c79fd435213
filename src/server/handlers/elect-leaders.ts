/**
 * ElectLeaders (key 43).
 * Behavior: PREFERRED (0) moves each partition's leadership to its first replica when that
 * replica is live and in the ISR (PREFERRED_LEADER_NOT_AVAILABLE otherwise,
 * ELECTION_NOT_NEEDED when it already leads); UNCLEAN (1) gives an offline partition a
 * leader from its live replicas even outside the ISR (ELIGIBLE_LEADERS_NOT_AVAILABLE when
 * none is live, ELECTION_NOT_NEEDED when it has a leader). Null partitions mean all. The
 * controller's side (metadata/topic-admin.ts) decides and commits by compare-and-set.
 * Authorization: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
 * Version notes: v1 adds the election type and a top-level error code, v2+ flexible.
 */
import type { ElectionType } from '../../metadata/topic-admin.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ElectLeadersRequest,
  type ElectLeadersResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

const ELECTION_TYPES = new Map<number, ElectionType>([
  [0, 'preferred'],
  [1, 'unclean'],
])

export const electLeadersHandler: ApiHandler<ElectLeadersRequest, ElectLeadersResponse> = {
  apiKey: ApiKey.ElectLeaders,
  minVersion: 0,
  maxVersion: 2,
  async handle(context, request) {
    if (!context.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME))
      return {
        throttleTimeMs: 0,
        errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        replicaElectionResults: (request.topicPartitions ?? []).map((t) => ({
          topic: t.topic,
          partitionResult: t.partitions.map((partitionId) => ({
            partitionId,
            errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            errorMessage: 'Cluster authorization failed.',
          })),
        })),
      }
    const electionType = ELECTION_TYPES.get(context.apiVersion >= 1 ? request.electionType : 0)
    if (electionType === undefined) {
      return { throttleTimeMs: 0, errorCode: ErrorCode.INVALID_REQUEST, replicaElectionResults: [] }
    }
    const outcomes = await context.broker.topicAdmin.electLeaders(
      electionType,
      request.topicPartitions?.map((t) => ({ topic: t.topic, partitions: t.partitions })) ?? null,
    )
    return {
      throttleTimeMs: 0,
      errorCode: ErrorCode.NONE,
      replicaElectionResults: outcomes.map(({ topic, partitions }) => ({
        topic,
        partitionResult: partitions.map(({ partition, errorCode, errorMessage }) => ({
          partitionId: partition,
          errorCode,
          errorMessage,
        })),
      })),
    }
  },
}
