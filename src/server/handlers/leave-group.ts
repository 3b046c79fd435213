/**
 * LeaveGroup (key 13).
 * Behavior: removes members at once (no wait for their session to expire) and rebalances
 * the rest. Static members leave by group.instance.id; a member id that does not match the
 * instance's current member is FENCED_INSTANCE_ID.
 * Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED.
 * Version notes: v0-2 one member id; v3+ a batch of members with per-member errors;
 * v1 throttle time, v4+ flexible, v5 reason.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import { ApiKey, type LeaveGroupRequest, type LeaveGroupResponse } from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const leaveGroupHandler: ApiHandler<LeaveGroupRequest, LeaveGroupResponse> = {
  apiKey: ApiKey.LeaveGroup,
  minVersion: 0,
  maxVersion: 5,
  handle(context, request) {
    const batched = context.apiVersion >= 3
    const members = batched
      ? request.members.map((m) => ({ memberId: m.memberId, groupInstanceId: m.groupInstanceId }))
      : [{ memberId: request.memberId, groupInstanceId: null }]
    if (!context.authorize(AclOperation.READ, ResourceType.GROUP, request.groupId))
      return { throttleTimeMs: 0, errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED, members: [] }
    if (request.groupId === '')
      return { throttleTimeMs: 0, errorCode: ErrorCode.INVALID_GROUP_ID, members: [] }
    const result = context.broker.groupCoordinator.leave(request.groupId, members)
    if (!batched) {
      const errorCode = result.errorCode !== ErrorCode.NONE ? result.errorCode : result.codes[0]
      return { throttleTimeMs: 0, errorCode, members: [] }
    }
    return {
      throttleTimeMs: 0,
      errorCode: result.errorCode,
      members:
        result.errorCode !== ErrorCode.NONE
          ? []
          : members.map((m, i) => ({
              memberId: m.memberId,
              groupInstanceId: m.groupInstanceId,
              errorCode: result.codes[i],
            })),
    }
  },
}
