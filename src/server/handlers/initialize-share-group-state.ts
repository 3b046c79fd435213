/**
 * InitializeShareGroupState (key 83), KIP-932: an inter-broker request.
 * Behavior: the share group's share-partition on each partition led here starts over at the
 * given start offset (AlterShareGroupOffsets on the group's coordinator,
 * share/share-state-access.ts). Kafka serves it on the share coordinator; tidelog keeps the
 * state on the partition leader, so it is served there: NOT_LEADER_OR_FOLLOWER elsewhere,
 * UNKNOWN_TOPIC_OR_PARTITION for an unknown topic id, INVALID_REQUEST for a negative offset.
 * Authorization: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
 * Version notes: v0 only, as Kafka 4.4; the state epoch is not kept.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type InitializeShareGroupStateRequest,
  type InitializeShareGroupStateResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import { sharePartitionManagerOf } from '../share/share-services.js'
import { perPartition } from '../share/share-state-requests.js'
import type { ApiHandler } from './registry.js'

export const initializeShareGroupStateHandler: ApiHandler<
  InitializeShareGroupStateRequest,
  InitializeShareGroupStateResponse
> = {
  apiKey: ApiKey.InitializeShareGroupState,
  minVersion: 0,
  maxVersion: 0,
  handle(context, request) {
    const allowed = context.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    const manager = sharePartitionManagerOf(context.broker)
    const answer = (partition: number, errorCode: number) => ({ partition, errorCode, errorMessage: null })
    const results = perPartition(
      context.broker,
      request.topics,
      (tp) => {
        if (!allowed) return answer(tp.partition, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if (tp.startOffset < 0n || tp.startOffset > BigInt(Number.MAX_SAFE_INTEGER))
          return answer(tp.partition, ErrorCode.INVALID_REQUEST)
        return answer(tp.partition, manager.initializeState(request.groupId, tp, Number(tp.startOffset)))
      },
      (partition, code) => answer(partition, allowed ? code : ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    )
    return { results }
  },
}
