/**
 * JoinGroup (key 11).
 * Behavior: the classic rebalance's first phase (coordinator/rebalance.ts): the response is
 * held until every member has rejoined or the rebalance timeout passes; the leader gets
 * the members' protocol metadata, relayed untouched so client-side assignors work.
 * Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED.
 * Version notes: v1 adds rebalance timeout (v0 uses the session timeout), v2 throttle time,
 * v4 MEMBER_ID_REQUIRED for new members, v5 group instance id (static membership), v6+
 * flexible, v7 protocol type/name in the response, v8 reason, v9 skipAssignment.
 */

import { clientHostOf } from '../../coordinator/client-host.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { ApiKey, type JoinGroupRequest, type JoinGroupResponse } from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const joinGroupHandler: ApiHandler<JoinGroupRequest, JoinGroupResponse> = {
  apiKey: ApiKey.JoinGroup,
  minVersion: 0,
  maxVersion: 9,
  async handle(context, request) {
    const version = context.apiVersion
    if (!context.authorize(AclOperation.READ, ResourceType.GROUP, request.groupId))
      return response(version, ErrorCode.GROUP_AUTHORIZATION_FAILED, request.memberId)
    if (request.groupId === '') return response(version, ErrorCode.INVALID_GROUP_ID, request.memberId)
    const result = await context.broker.groupCoordinator.join({
      groupId: request.groupId,
      memberId: request.memberId,
      groupInstanceId: version >= 5 ? request.groupInstanceId : null,
      protocolType: request.protocolType,
      protocols: request.protocols.map((p) => ({ name: p.name, metadata: Buffer.from(p.metadata) })),
      sessionTimeoutMs: request.sessionTimeoutMs,
      rebalanceTimeoutMs: version >= 1 ? request.rebalanceTimeoutMs : request.sessionTimeoutMs,
      clientId: context.header.clientId ?? '',
      clientHost: clientHostOf(context.connection.remoteAddress),
      requireKnownMemberId: version >= 4,
      supportsSkipAssignment: version >= 9,
    })
    return {
      throttleTimeMs: 0,
      errorCode: result.errorCode,
      generationId: result.generationId,
      protocolType: version >= 7 ? result.protocolType : null,
      // Before v7 a null protocol name cannot be written: Kafka sends ''.
      protocolName: version >= 7 ? result.protocolName : (result.protocolName ?? ''),
      leader: result.leader,
      skipAssignment: version >= 9 ? result.skipAssignment : false,
      memberId: result.memberId,
      members: result.members.map((m) => ({
        memberId: m.memberId,
        groupInstanceId: version >= 5 ? m.groupInstanceId : null,
        metadata: m.metadata,
      })),
    }
  },
}

function response(version: number, errorCode: number, memberId: string): JoinGroupResponse {
  return {
    throttleTimeMs: 0,
    errorCode,
    generationId: -1,
    protocolType: null,
    protocolName: version >= 7 ? null : '',
    leader: '',
    skipAssignment: false,
    memberId,
    members: [],
  }
}
