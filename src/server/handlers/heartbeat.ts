/**
 * Heartbeat (key 12).
 * Behavior: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin,
 * ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID that it fell out of the group.
 * Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED.
 * Version notes: v1 throttle time, v3 group instance id, v4+ flexible.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import { ApiKey, type HeartbeatRequest, type HeartbeatResponse } from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const heartbeatHandler: ApiHandler<HeartbeatRequest, HeartbeatResponse> = {
  apiKey: ApiKey.Heartbeat,
  minVersion: 0,
  maxVersion: 4,
  handle(context, request) {
    if (!context.authorize(AclOperation.READ, ResourceType.GROUP, request.groupId))
      return { throttleTimeMs: 0, errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED }
    if (request.groupId === '') return { throttleTimeMs: 0, errorCode: ErrorCode.INVALID_GROUP_ID }
    const errorCode = context.broker.groupCoordinator.heartbeat(
      request.groupId,
      request.memberId,
      context.apiVersion >= 3 ? request.groupInstanceId : null,
      request.generationId,
    )
    return { throttleTimeMs: 0, errorCode }
  },
}
