/**
 * ListGroups (key 16).
 * Behavior: the groups this broker coordinates (clients ask every broker and merge).
 * Version notes: v1 throttle time, v3+ flexible, v4 state filter and group state, v5 type
 * filter and group type ("classic" or "consumer", KIP-848).
 */
import { ApiKey, type ListGroupsRequest, type ListGroupsResponse } from '../../protocol/generated/index.js'
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
    return {
      throttleTimeMs: 0,
      errorCode,
      groups: groups
        .filter((g) => states.size === 0 || states.has(g.state.toLowerCase()))
        .filter((g) => types.size === 0 || types.has(g.type))
        .map((g) => ({
          groupId: g.groupId,
          protocolType: g.protocolType,
          groupState: version >= 4 ? g.state : '',
          groupType: version >= 5 ? g.type : '',
        })),
    }
  },
}
