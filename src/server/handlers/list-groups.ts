/**
 * ListGroups (key 16).
 * Behavior: the groups this broker coordinates (clients ask every broker and merge).
 * Authorization: every group with DESCRIBE on the cluster, else those the principal may describe.
 * Version notes: v1 throttle time, v3+ flexible, v4 state filter and group state, v5 type
 * filter and group type ("classic" or "consumer", KIP-848).
 */
import { ApiKey, type ListGroupsRequest, type ListGroupsResponse } from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const listGroupsHandler: ApiHandler<ListGroupsRequest, ListGroupsResponse> = {
  apiKey: ApiKey.ListGroups,
  minVersion: 0,
  maxVersion: 5,
  handle(context, request) {
    const version = context.apiVersion
    const states = new Set((version >= 4 ? request.statesFilter : []).map((s) => s.toLowerCase()))
    const types = new Set((version >= 5 ? request.typesFilter : []).map((t) => t.toLowerCase()))
    const { errorCode, groups } = context.broker.groupCoordinator.listGroups()
    // Kafka: DESCRIBE on the cluster lists every group, else the groups the principal may describe.
    const everyGroup = context.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
    return {
      throttleTimeMs: 0,
      errorCode,
      groups: groups
        .filter((g) => states.size === 0 || states.has(g.state.toLowerCase()))
        .filter((g) => types.size === 0 || types.has(g.type))
        .filter((g) => everyGroup || context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.groupId))
        .map((g) => ({
          groupId: g.groupId,
          protocolType: g.protocolType,
          groupState: version >= 4 ? g.state : '',
          groupType: version >= 5 ? g.type : '',
        })),
    }
  },
}
