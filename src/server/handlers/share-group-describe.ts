/**
 * ShareGroupDescribe (key 77), KIP-932.
 * Behavior: epochs, assignor (`simple`), state (Empty or Stable) and members of each share
 * group this broker coordinates, with each member's assignment (topic ids and names). A
 * classic or consumer group answers GROUP_ID_NOT_FOUND "Group <id> is not a share group.",
 * as Kafka.
 * Authorization: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for that group).
 * Version notes: v1 only, as Kafka 4.4. Authorized operations are not computed: Kafka's
 * "omitted" value.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ShareGroupDescribeRequest,
  type ShareGroupDescribeResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

const AUTHORIZED_OPERATIONS_OMITTED = -2147483648

export const shareGroupDescribeHandler: ApiHandler<ShareGroupDescribeRequest, ShareGroupDescribeResponse> = {
  apiKey: ApiKey.ShareGroupDescribe,
  minVersion: 1,
  maxVersion: 1,
  handle(context, request) {
    const groups = request.groupIds.map((groupId) => {
      if (!context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, groupId))
        return {
          errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED,
          errorMessage: `Not authorized to describe group ${groupId}.`,
          groupId,
          groupState: '',
          groupEpoch: 0,
          assignmentEpoch: 0,
          assignorName: '',
          members: [],
          authorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
        }
      const d = context.broker.groupCoordinator.share.describe(groupId)
      // Kafka describes a group it refuses with the schema's defaults: epochs 0.
      if (d.errorCode !== ErrorCode.NONE)
        return {
          errorCode: d.errorCode,
          errorMessage: d.errorMessage,
          groupId,
          groupState: '',
          groupEpoch: 0,
          assignmentEpoch: 0,
          assignorName: '',
          members: [],
          authorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
        }
      return {
        errorCode: d.errorCode,
        errorMessage: d.errorMessage,
        groupId,
        groupState: d.state,
        groupEpoch: d.groupEpoch,
        assignmentEpoch: d.assignmentEpoch,
        assignorName: d.assignorName,
        members: d.members.map((m) => ({
          memberId: m.memberId,
          rackId: m.rackId,
          memberEpoch: m.memberEpoch,
          clientId: m.clientId,
          clientHost: m.clientHost,
          subscribedTopicNames: m.subscribedTopicNames,
          assignment: { topicPartitions: m.assignment },
        })),
        authorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
      }
    })
    return { throttleTimeMs: 0, groups }
  },
}
