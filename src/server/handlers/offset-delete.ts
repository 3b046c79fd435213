/**
 * OffsetDelete (key 47).
 * Behavior: deletes a group's committed offsets for the listed partitions, except those of
 * topics its live members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC); a non-empty group of
 * another protocol type is NON_EMPTY_GROUP. Answered once the tombstones are committed.
 * Authorization: DELETE on the group (GROUP_AUTHORIZATION_FAILED) and READ on each topic
 * (TOPIC_AUTHORIZATION_FAILED on its partitions).
 * Version notes: v0 only.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type OffsetDeleteRequest,
  type OffsetDeleteResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const offsetDeleteHandler: ApiHandler<OffsetDeleteRequest, OffsetDeleteResponse> = {
  apiKey: ApiKey.OffsetDelete,
  minVersion: 0,
  maxVersion: 0,
  async handle(context, request) {
    if (!context.authorize(AclOperation.DELETE, ResourceType.GROUP, request.groupId))
      return { errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED, throttleTimeMs: 0, topics: [] }
    const readable = new Set(
      request.topics
        .map((t) => t.name)
        .filter((name) => context.authorize(AclOperation.READ, ResourceType.TOPIC, name)),
    )
    const partitions = request.topics
      .filter((t) => readable.has(t.name))
      .flatMap((t) => t.partitions.map((p) => ({ topic: t.name, partition: p.partitionIndex })))
    const result = await context.broker.groupCoordinator.deleteOffsets(request.groupId, partitions)
    if (result.errorCode !== ErrorCode.NONE)
      return { errorCode: result.errorCode, throttleTimeMs: 0, topics: [] }
    return {
      errorCode: ErrorCode.NONE,
      throttleTimeMs: 0,
      topics: request.topics.map((t) => ({
        name: t.name,
        partitions: t.partitions.map((p) => ({
          partitionIndex: p.partitionIndex,
          errorCode: readable.has(t.name)
            ? (result.partitions.get(`${t.name}\u0000${p.partitionIndex}`) ?? ErrorCode.NONE)
            : ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        })),
      })),
    }
  },
}
