/**
 * ConsumerGroupDescribe (key 69), KIP-848.
 * Behavior: epochs, assignor, state and members of each consumer group this broker
 * coordinates, with each member's current and target assignment (topic ids and names).
 * A classic or unknown group answers GROUP_ID_NOT_FOUND, as Kafka. While the consumer
 * protocol is off (ConsumerGroupHeartbeat's consumerProtocolDisabled: group.version 0 or
 * group.coordinator.rebalance.protocols) every group answers UNSUPPORTED_VERSION.
 * Authorization: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for that group).
 * Version notes: v1 (KIP-1099) adds the member type: consumer for every tidelog member. Authorized operations
 * are not computed: Kafka's "omitted" value.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ConsumerGroupDescribeRequest,
  type ConsumerGroupDescribeResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import { consumerProtocolDisabled } from './consumer-group-heartbeat.js'
import type { ApiHandler } from './registry.js'

const AUTHORIZED_OPERATIONS_OMITTED = -2147483648
/** ConsumerGroupDescribe v1's MemberType of a member that joined with ConsumerGroupHeartbeat. */
const MEMBER_TYPE_CONSUMER = 1

/** A refused group's entry: the schema's defaults, as Kafka answers it (no state, epochs 0). */
const DENIED = {
  groupState: '',
  groupEpoch: 0,
  assignmentEpoch: 0,
  assignorName: '',
  members: [],
  authorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
}

export const consumerGroupDescribeHandler: ApiHandler<
  ConsumerGroupDescribeRequest,
  ConsumerGroupDescribeResponse
> = {
  apiKey: ApiKey.ConsumerGroupDescribe,
  minVersion: 0,
  maxVersion: 1,
  handle(context, request) {
    // Kafka 4.4 answers every group so while the consumer protocol is off (group.version 0).
    if (consumerProtocolDisabled(context) !== null)
      return {
        throttleTimeMs: 0,
        groups: request.groupIds.map((groupId) => ({
          ...DENIED,
          errorCode: ErrorCode.UNSUPPORTED_VERSION,
          errorMessage: null,
          groupId,
        })),
      }
    const groups = request.groupIds.map((groupId) => {
      if (!context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, groupId))
        return {
          ...DENIED,
          errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED,
          errorMessage: `Not authorized to describe group ${groupId}.`,
          groupId,
        }
      const d = context.broker.groupCoordinator.consumerGroupDescribe(groupId)
      if (d.errorCode !== ErrorCode.NONE)
        return { ...DENIED, errorCode: d.errorCode, errorMessage: d.errorMessage, groupId }
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
          instanceId: m.instanceId,
          rackId: m.rackId,
          memberEpoch: m.memberEpoch,
          clientId: m.clientId,
          clientHost: m.clientHost,
          subscribedTopicNames: m.subscribedTopicNames,
          subscribedTopicRegex: m.subscribedTopicRegex,
          // v1 (KIP-1099): every member of a tidelog consumer group speaks the consumer protocol.
          memberType: MEMBER_TYPE_CONSUMER,
          assignment: { topicPartitions: m.assignment },
          targetAssignment: { topicPartitions: m.targetAssignment },
        })),
        authorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
      }
    })
    return { throttleTimeMs: 0, groups }
  },
}
