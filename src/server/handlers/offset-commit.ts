/**
 * OffsetCommit (key 8).
 * Behavior: validates the member and generation (commits outside group management use
 * generation -1 on an empty group), writes OffsetCommit records to __consumer_offsets with
 * acks=all and answers once they are committed, so an acknowledged offset survives a
 * coordinator failover. Per-partition errors; a group-level error fills every partition.
 * Authorization: READ on the group (else GROUP_AUTHORIZATION_FAILED on every partition) and
 * READ on each topic (else TOPIC_AUTHORIZATION_FAILED on its partitions, which are not committed).
 * Version notes: v0 has no generation or member; v1 a per-partition commit timestamp
 * (ignored); v2-4 retention time (an explicit expiry); v3 throttle time; v6 leader epoch;
 * v7 group instance id; v8+ flexible; v9 the member epoch of a KIP-848 consumer group in
 * generationIdOrMemberEpoch (STALE_MEMBER_EPOCH / FENCED_MEMBER_EPOCH when not current);
 * v10 names topics by id (KIP-848): an id the metadata does not know gets UNKNOWN_TOPIC_ID.
 */

import { topicById } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type OffsetCommitRequest,
  type OffsetCommitResponse,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const offsetCommitHandler: ApiHandler<OffsetCommitRequest, OffsetCommitResponse> = {
  apiKey: ApiKey.OffsetCommit,
  minVersion: 0,
  maxVersion: 10,
  async handle(context, request) {
    const version = context.apiVersion
    const image = context.broker.metadataImage()
    // v10 addresses topics by id; the group stores offsets by name, as Kafka's does.
    const named = request.topics.map((t) => ({
      request: t,
      name: version >= 10 ? (topicById(image, t.topicId)?.name ?? null) : t.name,
    }))
    const partitions = named.flatMap(({ request: t, name }) =>
      name === null
        ? []
        : t.partitions.map((p) => ({
            topic: name,
            partition: p.partitionIndex,
            offset: p.committedOffset,
            leaderEpoch: version >= 6 ? p.committedLeaderEpoch : -1,
            metadata: p.committedMetadata,
          })),
    )
    const key = (topic: string, partition: number) => `${topic}\u0000${partition}`
    const everyPartition = (code: number) => new Map(partitions.map((p) => [key(p.topic, p.partition), code]))
    const readable = new Map<string, boolean>()
    const mayRead = (topic: string): boolean => {
      let allowed = readable.get(topic)
      if (allowed === undefined) {
        allowed = context.authorize(AclOperation.READ, ResourceType.TOPIC, topic)
        readable.set(topic, allowed)
      }
      return allowed
    }
    // As Kafka's KafkaApis: partitions the metadata lacks are answered before the group is
    // consulted (a missing group or a stale generation does not hide them).
    const exists = (topic: string, partition: number) => {
      const known = image.topics.get(topic)
      return known !== undefined && partition >= 0 && partition < known.partitions.length
    }
    let codes: Map<string, number>
    // A group-level error answers every partition, those of unknown topic ids too.
    let groupError: number | null = null
    if (!context.authorize(AclOperation.READ, ResourceType.GROUP, request.groupId))
      groupError = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else if (request.groupId === '') groupError = ErrorCode.INVALID_GROUP_ID
    if (groupError !== null) codes = everyPartition(groupError)
    else {
      const committable = partitions.filter((p) => mayRead(p.topic) && exists(p.topic, p.partition))
      const committed =
        committable.length === 0
          ? { partitions: new Map<string, number>() }
          : await context.broker.groupCoordinator.commit(request.groupId, {
              memberId: version >= 1 ? request.memberId : '',
              groupInstanceId: version >= 7 ? request.groupInstanceId : null,
              generationId: version >= 1 ? request.generationIdOrMemberEpoch : -1,
              apiVersion: version,
              retentionTimeMs: version >= 2 && version <= 4 ? Number(request.retentionTimeMs) : -1,
              partitions: committable,
            })
      codes = new Map(committed.partitions)
      for (const p of partitions) {
        if (!mayRead(p.topic)) codes.set(key(p.topic, p.partition), ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        else if (!exists(p.topic, p.partition))
          codes.set(key(p.topic, p.partition), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
      }
    }
    return {
      throttleTimeMs: 0,
      topics: named.map(({ request: t, name }) => ({
        name: t.name,
        topicId: version >= 10 ? t.topicId : ZERO_UUID,
        partitions: t.partitions.map((p) => ({
          partitionIndex: p.partitionIndex,
          errorCode:
            name === null
              ? (groupError ?? ErrorCode.UNKNOWN_TOPIC_ID)
              : (codes.get(key(name, p.partitionIndex)) ?? ErrorCode.UNKNOWN_SERVER_ERROR),
        })),
      })),
    }
  },
}
