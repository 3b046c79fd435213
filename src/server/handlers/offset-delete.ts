/**
 * OffsetDelete (key 47).
 * Behavior: deletes a group's committed offsets for the listed partitions, except those of
 * topics its live members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC); a non-empty group of
 * another protocol type is NON_EMPTY_GROUP. Answered once the tombstones are committed.
 * Version notes: v0 only.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type OffsetDeleteRequest,
  type OffsetDeleteResponse,
} from '../../protocol/generated/index.js'
import type { ApiHandler } from './registry.js'

export const offsetDeleteHandler: ApiHandler<OffsetDeleteRequest, OffsetDeleteResponse> = {
  apiKey: ApiKey.OffsetDelete,
  minVersion: 0,
  maxVersion: 0,
  async handle(context, request) {
    const partitions = request.topics.flatMap((t) =>
      t.partitions.map((p) => ({ topic: t.name, partition: p.partitionIndex })),
    )
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
          errorCode: result.partitions.get(`${t.name}\u0000${p.partitionIndex}`) ?? ErrorCode.NONE,
        })),
      })),
    }
  },
}
