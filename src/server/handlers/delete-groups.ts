/**
 * DeleteGroups (key 42).
 * Behavior: deletes empty groups (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND when
 * unknown) with tombstones for their offsets and metadata, answered once committed. An
 * empty share group's share-partition state is deleted on the partitions' leaders first.
 * Authorization: DELETE on the group, else GROUP_AUTHORIZATION_FAILED.
 * Version notes: v2+ flexible; v3 a per-group error message (null: tidelog gives the code only).
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DeleteGroupsRequest,
  type DeleteGroupsResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import { deleteShareGroup } from '../share/share-state-access.js'
import type { ApiHandler } from './registry.js'

export const deleteGroupsHandler: ApiHandler<DeleteGroupsRequest, DeleteGroupsResponse> = {
  apiKey: ApiKey.DeleteGroups,
  minVersion: 0,
  maxVersion: 3,
  async handle(context, request) {
    const results = await Promise.all(
      request.groupsNames.map(async (groupId) => ({
        groupId,
        errorCode: context.authorize(AclOperation.DELETE, ResourceType.GROUP, groupId)
          ? ((await deleteShareGroup(context.broker, groupId)) ??
            (await context.broker.groupCoordinator.deleteGroup(groupId)))
          : ErrorCode.GROUP_AUTHORIZATION_FAILED,
        errorMessage: null,
      })),
    )
    return { throttleTimeMs: 0, results }
  },
}
