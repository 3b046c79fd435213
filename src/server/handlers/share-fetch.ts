/**
 * ShareFetch (key 78), KIP-932.
 * Behavior: a share consumer's fetch from a partition leader. The share session (epoch 0
 * opens, -1 closes, otherwise the session's current epoch; share-session-cache.ts) holds
 * the partitions the member fetches. Acknowledgements ride along (applied first, answered
 * in each partition's AcknowledgeErrorCode); then each session partition acquires records
 * for the member (SharePartition: locks of group.share.record.lock.duration.ms, delivery
 * counts), returned as whole batches with their AcquiredRecords ranges. With nothing
 * acquired the fetch waits up to MaxWaitMs for new data. Closing the session releases what
 * the member still holds. Only partitions with records, an error or acknowledgements are
 * answered, the opening request's too (as Kafka).
 * Errors: top level INVALID_GROUP_ID, GROUP_AUTHORIZATION_FAILED, INVALID_REQUEST (no member
 * id, acknowledgements in the opening request), SHARE_SESSION_NOT_FOUND,
 * INVALID_SHARE_SESSION_EPOCH; per partition UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED,
 * NOT_LEADER_OR_FOLLOWER; per acknowledgement INVALID_REQUEST (malformed batches) and
 * INVALID_RECORD_STATE (offsets the member does not hold).
 * Version notes: v1 (Kafka 4.1) adds MaxRecords and BatchSize; v2 (Kafka 4.2, KIP-1206 and
 * KIP-1222) ShareAcquireMode (1: record_limit, never more than MaxRecords) and IsRenewAck
 * (acknowledge type 4, RENEW).
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import { ApiKey, type ShareFetchRequest, type ShareFetchResponse } from '../../protocol/generated/index.js'
import type { RequestContext } from '../request-context.js'
import { acquireForMember } from '../share/share-fetch.js'
import {
  applyAcknowledgements,
  beginShareSession,
  checkShareRequest,
  currentLeaderOf,
  groupByTopic,
  type PartitionOutcome,
  type RequestedPartition,
  resolveSharePartition,
  toAcknowledgements,
  updateSessionPartitions,
} from '../share/share-requests.js'
import { sharePartitionManagerOf } from '../share/share-services.js'
import { shareSessionPartitionKey } from '../share/share-session-cache.js'
import type { ApiHandler } from './registry.js'

const RECORD_LIMIT_MODE = 1

export const shareFetchHandler: ApiHandler<ShareFetchRequest, ShareFetchResponse> = {
  apiKey: ApiKey.ShareFetch,
  minVersion: 1,
  maxVersion: 2,
  async handle(context, request) {
    const manager = sharePartitionManagerOf(context.broker)
    const lockMs = manager.recordLockDurationMs(request.groupId ?? '')
    // Kafka's error answer is the schema's defaults: no lock duration (the differential harness).
    const fail = (errorCode: number, errorMessage: string | null = null): ShareFetchResponse => ({
      throttleTimeMs: 0,
      errorCode,
      errorMessage,
      acquisitionLockTimeoutMs: 0,
      responses: [],
      nodeEndpoints: [],
    })
    const refused = checkShareRequest(context, request.groupId, request.memberId)
    if (refused) return fail(refused.errorCode, refused.errorMessage)
    const groupId = request.groupId ?? ''
    const memberId = request.memberId ?? ''
    const requested: RequestedPartition[] = request.topics.flatMap((t) =>
      t.partitions.map((p) => ({
        topicId: t.topicId,
        partition: p.partitionIndex,
        acknowledgements: toAcknowledgements(p.acknowledgementBatches),
      })),
    )
    const hasAcks = requested.some((p) => p.acknowledgements.length > 0)
    const step = beginShareSession(context, groupId, memberId, request.shareSessionEpoch, hasAcks)
    if (step.kind === 'error') return fail(step.errorCode)
    const { session } = step
    if (step.kind !== 'close') updateSessionPartitions(session, requested, request.forgottenTopicsData)
    const renewAllowed = context.apiVersion >= 2 && request.isRenewAck
    const ackCodes = await applyAcknowledgements(context, groupId, memberId, requested, renewAllowed)
    const outcomes = new Map<string, PartitionOutcome>()
    const outcome = (topicId: string, partition: number): PartitionOutcome => {
      const key = shareSessionPartitionKey(topicId, partition)
      let o = outcomes.get(key)
      if (!o) {
        o = {
          topicId,
          partition,
          errorCode: ErrorCode.NONE,
          acknowledgeErrorCode: null,
          records: [],
          acquired: [],
        }
        outcomes.set(key, o)
      }
      return o
    }
    for (const p of requested)
      if (ackCodes.has(shareSessionPartitionKey(p.topicId, p.partition)))
        outcome(p.topicId, p.partition).acknowledgeErrorCode =
          ackCodes.get(shareSessionPartitionKey(p.topicId, p.partition)) ?? 0
    if (step.kind === 'close') manager.releaseSession(session)
    // A renewal-only request acquires nothing (KIP-1222).
    else if (!renewAllowed) {
      const targets = [...session.partitions.values()].map((p) => outcome(p.topicId, p.partition))
      for (const t of targets) {
        const tp = resolveSharePartition(context, t.topicId, t.partition)
        if (typeof tp === 'number') t.errorCode = tp
      }
      await acquireForMember(context, groupId, memberId, targets, {
        maxRecords: request.maxRecords > 0 ? request.maxRecords : Number.MAX_SAFE_INTEGER,
        maxBytes: request.maxBytes,
        maxWaitMs: request.maxWaitMs,
        mode:
          context.apiVersion >= 2 && request.shareAcquireMode === RECORD_LIMIT_MODE
            ? 'record_limit'
            : 'batch_optimized',
      })
    }
    // Kafka answers (opening requests included) only partitions with records, an error or acknowledgements.
    const shown = [...outcomes.values()].filter(
      (o) => o.acquired.length > 0 || o.errorCode !== ErrorCode.NONE || o.acknowledgeErrorCode !== null,
    )
    return {
      ...fail(ErrorCode.NONE),
      acquisitionLockTimeoutMs: lockMs,
      responses: toResponses(context, shown),
    }
  },
}

function toResponses(
  context: RequestContext,
  outcomes: readonly PartitionOutcome[],
): ShareFetchResponse['responses'] {
  return groupByTopic(outcomes).map(({ topicId, items }) => ({
    topicId,
    partitions: items.map((o) => ({
      partitionIndex: o.partition,
      errorCode: o.errorCode,
      errorMessage: null,
      acknowledgeErrorCode: o.acknowledgeErrorCode ?? ErrorCode.NONE,
      acknowledgeErrorMessage: null,
      currentLeader:
        o.errorCode === ErrorCode.NOT_LEADER_OR_FOLLOWER
          ? currentLeaderOf(context, o.topicId, o.partition)
          : { leaderId: -1, leaderEpoch: -1 },
      records: o.records,
      acquiredRecords: o.acquired,
    })),
  }))
}
