/**
 * SyncGroup (key 14).
 * Behavior: the rebalance's second phase: the leader sends every member's assignment, which
 * is stored in __consumer_offsets; each member's response (the leader's included) waits
 * until that record is committed, then carries the member's assignment bytes untouched.
 * Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED.
 * Version notes: v1 throttle time, v3 group instance id, v4+ flexible, v5 protocol type and
 * name (checked against the group's: INCONSISTENT_GROUP_PROTOCOL).
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import { ApiKey, type SyncGroupRequest, type SyncGroupResponse } from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const syncGroupHandler: ApiHandler<SyncGroupRequest, SyncGroupResponse> = {
  apiKey: ApiKey.SyncGroup,
  minVersion: 0,
  maxVersion: 5,
  async handle(context, request) {
    const version = context.apiVersion
    if (!context.authorize(AclOperation.READ, ResourceType.GROUP, request.groupId))
      return respond(version, ErrorCode.GROUP_AUTHORIZATION_FAILED, null, null, Buffer.alloc(0))
    if (request.groupId === '')
      return respond(version, ErrorCode.INVALID_GROUP_ID, null, null, Buffer.alloc(0))
    const result = await context.broker.groupCoordinator.sync(request.groupId, {
      memberId: request.memberId,
      groupInstanceId: version >= 3 ? request.groupInstanceId : null,
      generationId: request.generationId,
      protocolType: version >= 5 ? request.protocolType : null,
      protocolName: version >= 5 ? request.protocolName : null,
      assignments: request.assignments.map((a) => ({
        memberId: a.memberId,
        assignment: Buffer.from(a.assignment),
      })),
    })
    return respond(version, result.errorCode, result.protocolType, result.protocolName, result.assignment)
  },
}

function respond(
  version: number,
  errorCode: number,
  protocolType: string | null,
  protocolName: string | null,
  assignment: Buffer,
): SyncGroupResponse {
  return {
    throttleTimeMs: 0,
    errorCode,
    protocolType: version >= 5 ? protocolType : null,
    protocolName: version >= 5 ? protocolName : null,
    assignment,
  }
}
