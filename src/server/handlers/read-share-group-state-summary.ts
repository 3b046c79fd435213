/**
 * ReadShareGroupStateSummary (key 87), KIP-932: an inter-broker request.
 * Behavior: the share group's start offset (SPSO), leader epoch and records done above SPSO
 * on each partition led here, for DescribeShareGroupOffsets on the group's coordinator
 * (share/share-state-access.ts). Kafka serves it on the share coordinator from
 * `__share_group_state`; tidelog keeps that state on the partition leader, so it is served
 * there: NOT_LEADER_OR_FOLLOWER elsewhere, UNKNOWN_TOPIC_OR_PARTITION for an unknown topic
 * id, start offset -1 when the group has no state written on the partition.
 * Authorization: CLUSTER_ACTION on the cluster (the inter-broker principal), else
 * CLUSTER_AUTHORIZATION_FAILED on every partition.
 * Version notes: v0-1 as Kafka 4.4; v1 adds the delivery complete count.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ReadShareGroupStateSummaryRequest,
  type ReadShareGroupStateSummaryResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import { sharePartitionManagerOf } from '../share/share-services.js'
import { perPartition } from '../share/share-state-requests.js'
import type { ApiHandler } from './registry.js'

const failed = (partition: number, errorCode: number) => ({
  partition,
  errorCode,
  errorMessage: null,
  stateEpoch: -1,
  leaderEpoch: -1,
  startOffset: -1n,
  deliveryCompleteCount: -1,
})

export const readShareGroupStateSummaryHandler: ApiHandler<
  ReadShareGroupStateSummaryRequest,
  ReadShareGroupStateSummaryResponse
> = {
  apiKey: ApiKey.ReadShareGroupStateSummary,
  minVersion: 0,
  maxVersion: 1,
  handle(context, request) {
    const allowed = context.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    const manager = sharePartitionManagerOf(context.broker)
    const results = perPartition(
      context.broker,
      request.topics,
      (tp) => {
        if (!allowed) return failed(tp.partition, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        const s = manager.stateSummary(request.groupId, tp)
        if (s.errorCode !== ErrorCode.NONE) return failed(tp.partition, s.errorCode)
        return {
          partition: tp.partition,
          errorCode: ErrorCode.NONE,
          errorMessage: null,
          stateEpoch: 0,
          leaderEpoch: s.leaderEpoch,
          startOffset: BigInt(s.startOffset),
          deliveryCompleteCount: s.deliveryCompleteCount,
        }
      },
      (partition, code) => failed(partition, allowed ? code : ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    )
    return { results }
  },
}
