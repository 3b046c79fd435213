/**
 * AlterPartitionReassignments (key 45).
 * Behavior: starts moving each partition to the given replicas (every broker registered,
 * no duplicates: INVALID_REPLICA_ASSIGNMENT otherwise) or, with null replicas, cancels the
 * reassignment in progress (NO_REASSIGNMENT_IN_PROGRESS when there is none). New replicas
 * catch up as followers; the controller completes the move once all of them are in the
 * ISR (see metadata/reassignment.ts). The controller's side (metadata/topic-admin.ts)
 * checks and commits the whole request in one compare-and-set.
 * Authorization: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
 * Version notes: flexible. v1 (KIP-1101) adds AllowReplicationFactorChange (default true,
 * v0's behaviour): false refuses each partition whose new replica list is not as long as
 * its replica list now (its target's during a move) with INVALID_REPLICATION_FACTOR, and
 * the response echoes the flag.
 */
import { brokerIdFromWire } from '../../common/types.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  type AlterPartitionReassignmentsRequest,
  type AlterPartitionReassignmentsResponse,
  ApiKey,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const alterPartitionReassignmentsHandler: ApiHandler<
  AlterPartitionReassignmentsRequest,
  AlterPartitionReassignmentsResponse
> = {
  apiKey: ApiKey.AlterPartitionReassignments,
  minVersion: 0,
  maxVersion: 1,
  async handle(context, request) {
    if (!context.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME))
      return {
        throttleTimeMs: 0,
        errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        errorMessage: 'Cluster authorization failed.',
        allowReplicationFactorChange: request.allowReplicationFactorChange,
        responses: request.topics.map((t) => ({
          name: t.name,
          partitions: t.partitions.map((p) => ({
            partitionIndex: p.partitionIndex,
            errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            errorMessage: 'Cluster authorization failed.',
          })),
        })),
      }
    const outcomes = await context.broker.topicAdmin.alterPartitionReassignments(
      request.topics.map((t) => ({
        name: t.name,
        partitions: t.partitions.map((p) => ({
          partitionIndex: p.partitionIndex,
          replicas: p.replicas?.map(brokerIdFromWire) ?? null,
        })),
      })),
      request.allowReplicationFactorChange,
    )
    return {
      throttleTimeMs: 0,
      errorCode: ErrorCode.NONE,
      errorMessage: null,
      allowReplicationFactorChange: request.allowReplicationFactorChange,
      responses: outcomes.map(({ topic, partitions }) => ({
        name: topic,
        partitions: partitions.map(({ partition, errorCode, errorMessage }) => ({
          partitionIndex: partition,
          errorCode,
          errorMessage,
        })),
      })),
    }
  },
}
