/**
 * ShareAcknowledge (key 79), KIP-932.
 * Behavior: a share consumer's acknowledgements without a fetch (commitSync, commitAsync,
 * close), in the member's share session: the epoch must be the session's current one (or
 * -1 to close it, releasing what the member still holds); 0 is refused (INVALID_SHARE_SESSION_EPOCH:
 * a session is opened by ShareFetch only). Each partition is answered with its
 * acknowledgements' outcome: INVALID_REQUEST for malformed batches, INVALID_RECORD_STATE for
 * offsets the member does not hold, UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED,
 * NOT_LEADER_OR_FOLLOWER.
 * Version notes: v1 (Kafka 4.1); v2 (KIP-1222) adds IsRenewAck (type 4, RENEW) and the
 * acquisition lock timeout in the answer.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ShareAcknowledgeRequest,
  type ShareAcknowledgeResponse,
} from '../../protocol/generated/index.js'
import {
  applyAcknowledgements,
  beginShareSession,
  checkShareRequest,
  currentLeaderOf,
  groupByTopic,
  type RequestedPartition,
  toAcknowledgements,
} from '../share/share-requests.js'
import { sharePartitionManagerOf } from '../share/share-services.js'
import { INITIAL_SHARE_SESSION_EPOCH, shareSessionPartitionKey } from '../share/share-session-cache.js'
import type { ApiHandler } from './registry.js'

export const shareAcknowledgeHandler: ApiHandler<ShareAcknowledgeRequest, ShareAcknowledgeResponse> = {
  apiKey: ApiKey.ShareAcknowledge,
  minVersion: 1,
  maxVersion: 2,
  async handle(context, request) {
    const manager = sharePartitionManagerOf(context.broker)
    // Kafka's error answer is the schema's defaults: no lock duration (the differential harness).
    const fail = (errorCode: number, errorMessage: string | null = null): ShareAcknowledgeResponse => ({
      throttleTimeMs: 0,
      errorCode,
      errorMessage,
      acquisitionLockTimeoutMs: 0,
      responses: [],
      nodeEndpoints: [],
    })
    const refused = checkShareRequest(context, request.groupId, request.memberId)
    if (refused) return fail(refused.errorCode, refused.errorMessage)
    if (request.shareSessionEpoch === INITIAL_SHARE_SESSION_EPOCH)
      return fail(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    const groupId = request.groupId ?? ''
    const memberId = request.memberId ?? ''
    const requested: RequestedPartition[] = request.topics.flatMap((t) =>
      t.partitions.map((p) => ({
        topicId: t.topicId,
        partition: p.partitionIndex,
        acknowledgements: toAcknowledgements(p.acknowledgementBatches),
      })),
    )
    const step = beginShareSession(context, groupId, memberId, request.shareSessionEpoch, true)
    if (step.kind === 'error') return fail(step.errorCode)
    const renewAllowed = context.apiVersion >= 2 && request.isRenewAck
    const codes = await applyAcknowledgements(context, groupId, memberId, requested, renewAllowed)
    if (step.kind === 'close') manager.releaseSession(step.session)
    const answered = requested.map((p) => ({
      topicId: p.topicId,
      partition: p.partition,
      errorCode: codes.get(shareSessionPartitionKey(p.topicId, p.partition)) ?? ErrorCode.NONE,
    }))
    return {
      ...fail(ErrorCode.NONE),
      acquisitionLockTimeoutMs: manager.recordLockDurationMs(groupId),
      responses: groupByTopic(answered).map(({ topicId, items }) => ({
        topicId,
        partitions: items.map((o) => ({
          partitionIndex: o.partition,
          errorCode: o.errorCode,
          errorMessage: null,
          currentLeader:
            o.errorCode === ErrorCode.NOT_LEADER_OR_FOLLOWER
              ? currentLeaderOf(context, o.topicId, o.partition)
              : { leaderId: -1, leaderEpoch: -1 },
        })),
      })),
    }
  },
}
