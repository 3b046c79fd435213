/**
 * DescribeGroups (key 15).
 * Behavior: state, protocol and members of each group this broker coordinates
 * (NOT_COORDINATOR for others); member metadata and assignments only while Stable, as
 * Kafka. Below v6 an unknown group (or a KIP-848 consumer group) is described as Dead with
 * no error; v6 (KIP-1043) answers GROUP_ID_NOT_FOUND with Kafka's message instead.
 * Authorization: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED.
 * Version notes: v1 throttle time, v3 authorized operations (when asked), v4 group instance
 * ids, v5+ flexible, v6 GROUP_ID_NOT_FOUND and per-group error messages.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DescribeGroupsRequest,
  type DescribeGroupsResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

const AUTHORIZED_OPERATIONS_OMITTED = -2147483648

export const describeGroupsHandler: ApiHandler<DescribeGroupsRequest, DescribeGroupsResponse> = {
  apiKey: ApiKey.DescribeGroups,
  minVersion: 0,
  maxVersion: 6,
  handle(context, request) {
    const version = context.apiVersion
    const groups = request.groups.map((groupId) => {
      if (!context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, groupId))
        return {
          errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED,
          errorMessage: null,
          groupId,
          groupState: '',
          protocolType: '',
          protocolData: '',
          members: [],
          authorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
        }
      const d = context.broker.groupCoordinator.describeGroup(groupId)
      if (version >= 6 && d.notFound !== undefined)
        return {
          errorCode: ErrorCode.GROUP_ID_NOT_FOUND,
          errorMessage:
            d.notFound === 'unknown'
              ? `Group ${groupId} not found.`
              : `Group ${groupId} is not a classic group.`,
          groupId,
          groupState: d.state,
          protocolType: '',
          protocolData: '',
          members: [],
          authorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
        }
      return {
        errorCode: d.errorCode,
        errorMessage: null,
        groupId,
        groupState: d.state,
        protocolType: d.protocolType,
        protocolData: d.protocolData,
        members: d.members.map((m) => ({
          memberId: m.memberId,
          groupInstanceId: version >= 4 ? m.groupInstanceId : null,
          clientId: m.clientId,
          clientHost: m.clientHost,
          memberMetadata: m.metadata,
          memberAssignment: m.assignment,
        })),
        authorizedOperations:
          version >= 3 && request.includeAuthorizedOperations
            ? context.authorizedOperations(ResourceType.GROUP, groupId)
            : AUTHORIZED_OPERATIONS_OMITTED,
      }
    })
    return { throttleTimeMs: 0, groups }
  },
}
