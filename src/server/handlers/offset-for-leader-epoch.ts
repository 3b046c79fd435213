/**
 * OffsetForLeaderEpoch (key 23).
 * Behavior: for each partition this broker leads, the end offset of the requested leader
 * epoch in its log: the start offset of the next larger epoch, or the log end for the
 * current one, with the largest epoch at or below the requested one (KIP-101/279). A
 * follower truncates to it after a leader change instead of to its high watermark, so no
 * committed record is lost and no diverging one kept. Unknown epochs answer -1/-1.
 * Authorization: a follower (replicaId >= 0) needs CLUSTER_ACTION on the cluster
 * (CLUSTER_AUTHORIZATION_FAILED), a consumer DESCRIBE on the topic (TOPIC_AUTHORIZATION_FAILED).
 * Version notes: v1 returns the leader epoch, v2 adds the current leader epoch (fencing),
 * v3 the replica id, v4+ flexible.
 */

import type { LeaderEpoch } from '../../common/types.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type OffsetForLeaderEpochRequest,
  type OffsetForLeaderEpochResponse,
  type OffsetForLeaderEpochResponseEpochEndOffset,
} from '../../protocol/generated/index.js'
import { toErrorCode } from '../../replication/kafka-error.js'
import type { Partition } from '../../replication/partition.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { EpochEndOffset } from '../../storage/leader-epoch-cache.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

export const offsetForLeaderEpochHandler: ApiHandler<
  OffsetForLeaderEpochRequest,
  OffsetForLeaderEpochResponse
> = {
  apiKey: ApiKey.OffsetForLeaderEpoch,
  minVersion: 0,
  maxVersion: 4,
  handle(context, request) {
    const follower = context.apiVersion >= 3 && request.replicaId >= 0
    const deniedCode = (topic: string): number | null => {
      if (follower)
        return context.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
          ? null
          : ErrorCode.CLUSTER_AUTHORIZATION_FAILED
      return context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
        ? null
        : ErrorCode.TOPIC_AUTHORIZATION_FAILED
    }
    return {
      throttleTimeMs: 0,
      topics: request.topics.map((topic) => {
        const denied = deniedCode(topic.topic)
        return {
          topic: topic.topic,
          partitions: topic.partitions.map((p) =>
            denied === null
              ? endOffsetFor(context, topic.topic, p)
              : { errorCode: denied, partition: p.partition, leaderEpoch: -1, endOffset: -1n },
          ),
        }
      }),
    }
  },
}

function endOffsetFor(
  context: RequestContext,
  topic: string,
  p: OffsetForLeaderEpochRequest['topics'][number]['partitions'][number],
): OffsetForLeaderEpochResponseEpochEndOffset {
  try {
    const partition = context.broker.replicaManager.getPartitionOrError(topic, p.partition)
    partition.ensureLeader()
    if (context.apiVersion >= 2) partition.checkLeaderEpoch(p.currentLeaderEpoch)
    const found = endOffsetOnLeader(partition, p.leaderEpoch)
    return {
      errorCode: ErrorCode.NONE,
      partition: p.partition,
      leaderEpoch: context.apiVersion >= 1 ? (found?.leaderEpoch ?? -1) : -1,
      endOffset: BigInt(found?.endOffset ?? -1),
    }
  } catch (error) {
    const code = toErrorCode(error)
    if (code === null) throw error
    return { errorCode: code, partition: p.partition, leaderEpoch: -1, endOffset: -1n }
  }
}

/**
 * Kafka's leader writes its own epoch into the leader-epoch cache when elected; tidelog's
 * log learns an epoch only with its first batch. Until then a requested epoch above the
 * cache's latest (up to the current one) would be "unknown" and the follower would fall
 * back to truncating to its own high watermark, which may keep records this leader never
 * had (after an unclean election) or drop acknowledged ones. Answer as Kafka does: those
 * epochs end where the current one starts, at the log end, and the epoch is the cache's
 * latest (the follower then truncates to the smaller of that and its own end for it).
 */
function endOffsetOnLeader(partition: Partition, requested: number): EpochEndOffset | undefined {
  const log = partition.log
  const latest = log.latestEpoch
  if (requested >= 0 && requested <= partition.leaderEpoch && (latest === undefined || requested > latest)) {
    return { leaderEpoch: latest ?? (requested as LeaderEpoch), endOffset: log.logEndOffset }
  }
  return log.endOffsetForEpoch(requested as LeaderEpoch)
}
