/**
 * OffsetCommit (key 8).
 * Behavior: validates the member and generation (commits outside group management use
 * generation -1 on an empty group), writes OffsetCommit records to __consumer_offsets with
 * acks=all and answers once they are committed, so an acknowledged offset survives a
 * coordinator failover. Per-partition errors; a group-level error fills every partition.
 * Version notes: v0 has no generation or member; v1 a per-partition commit timestamp
 * (ignored); v2-4 retention time (an explicit expiry); v3 throttle time; v6 leader epoch;
 * v7 group instance id; v8+ flexible; v9 the member epoch of a KIP-848 consumer group in
 * generationIdOrMemberEpoch (STALE_MEMBER_EPOCH / FENCED_MEMBER_EPOCH when not current).
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type OffsetCommitRequest,
  type OffsetCommitResponse,
} from '../../protocol/generated/index.js'
import type { ApiHandler } from './registry.js'

export const offsetCommitHandler: ApiHandler<OffsetCommitRequest, OffsetCommitResponse> = {
  apiKey: ApiKey.OffsetCommit,
  minVersion: 0,
  maxVersion: 9,
  async handle(context, request) {
    const version = context.apiVersion
    const partitions = request.topics.flatMap((t) =>
      t.partitions.map((p) => ({
        topic: t.name,
        partition: p.partitionIndex,
        offset: p.committedOffset,
        leaderEpoch: version >= 6 ? p.committedLeaderEpoch : -1,
        metadata: p.committedMetadata,
      })),
    )
    const codes =
      request.groupId === ''
        ? new Map(
            partitions.map((p) => [`${p.topic}\u0000${p.partition}`, ErrorCode.INVALID_GROUP_ID as number]),
          )
        : (
            await context.broker.groupCoordinator.commit(request.groupId, {
              memberId: version >= 1 ? request.memberId : '',
              groupInstanceId: version >= 7 ? request.groupInstanceId : null,
              generationId: version >= 1 ? request.generationIdOrMemberEpoch : -1,
              apiVersion: version,
              retentionTimeMs: version >= 2 && version <= 4 ? Number(request.retentionTimeMs) : -1,
              partitions,
            })
          ).partitions
    return {
      throttleTimeMs: 0,
      topics: request.topics.map((t) => ({
        name: t.name,
        partitions: t.partitions.map((p) => ({
          partitionIndex: p.partitionIndex,
          errorCode: codes.get(`${t.name}\u0000${p.partitionIndex}`) ?? ErrorCode.UNKNOWN_SERVER_ERROR,
        })),
      })),
    }
  },
}
