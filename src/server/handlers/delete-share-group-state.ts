/**
 * DeleteShareGroupState (key 86), KIP-932: an inter-broker request.
 * Behavior: forgets the share group's share-partition on each partition led here
 * (DeleteShareGroupOffsets and DeleteGroups on the group's coordinator,
 * share/share-state-access.ts). Kafka serves it on the share coordinator; tidelog keeps the
 * state on the partition leader, so it is served there: NOT_LEADER_OR_FOLLOWER elsewhere,
 * UNKNOWN_TOPIC_OR_PARTITION for an unknown topic id.
 * Authorization: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
 * Version notes: v0 only, as Kafka 4.4.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DeleteShareGroupStateRequest,
  type DeleteShareGroupStateResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import { sharePartitionManagerOf } from '../share/share-services.js'
import { perPartition } from '../share/share-state-requests.js'
import type { ApiHandler } from './registry.js'

export const deleteShareGroupStateHandler: ApiHandler<
  DeleteShareGroupStateRequest,
  DeleteShareGroupStateResponse
> = {
  apiKey: ApiKey.DeleteShareGroupState,
  minVersion: 0,
  maxVersion: 0,
  handle(context, request) {
    const allowed = context.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    const manager = sharePartitionManagerOf(context.broker)
    const answer = (partition: number, errorCode: number) => ({ partition, errorCode, errorMessage: null })
    const results = perPartition(
      context.broker,
      request.topics,
      (tp) =>
        answer(
          tp.partition,
          allowed ? manager.deleteState(request.groupId, tp) : ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ),
      (partition, code) => answer(partition, allowed ? code : ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    )
    return { results }
  },
}
