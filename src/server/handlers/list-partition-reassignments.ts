/**
 * ListPartitionReassignments (key 46).
 * Behavior: the partitions being reassigned (all, or those asked for) with their current
 * replicas and the replicas being added and removed.
 * Authorization: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
 * Version notes: v0 only, flexible.
 */
import { isReassigning } from '../../metadata/reassignment.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ListPartitionReassignmentsRequest,
  type ListPartitionReassignmentsResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const listPartitionReassignmentsHandler: ApiHandler<
  ListPartitionReassignmentsRequest,
  ListPartitionReassignmentsResponse
> = {
  apiKey: ApiKey.ListPartitionReassignments,
  minVersion: 0,
  maxVersion: 0,
  handle(context, request) {
    if (!context.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME))
      return {
        throttleTimeMs: 0,
        errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        errorMessage: 'Cluster authorization failed.',
        topics: [],
      }
    const image = context.broker.metadataImage()
    const wanted = request.topics && new Map(request.topics.map((t) => [t.name, new Set(t.partitionIndexes)]))
    const topics = []
    for (const topic of image.topics.values()) {
      if (wanted && !wanted.has(topic.name)) continue
      const partitions = topic.partitions
        .filter((p) => isReassigning(p) && (!wanted || wanted.get(topic.name)!.has(p.partition)))
        .map((p) => ({
          partitionIndex: p.partition,
          replicas: [...p.replicas],
          addingReplicas: [...(p.addingReplicas ?? [])],
          removingReplicas: [...(p.removingReplicas ?? [])],
        }))
      if (partitions.length > 0) topics.push({ name: topic.name, partitions })
    }
    return { throttleTimeMs: 0, errorCode: ErrorCode.NONE, errorMessage: null, topics }
  },
}
