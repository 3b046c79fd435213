/**
 * ShareGroupHeartbeat (key 76), KIP-932's share groups.
 * Behavior: one request for joining (epoch 0, with the subscribed topic names), staying
 * and leaving (epoch -1) a share group (coordinator/share-group.ts): the coordinator
 * assigns the subscribed topics' partitions with the `simple` assignor, sharing a
 * partition among members when they outnumber its topic's partitions. The member id is the
 * client's own. Share groups are kept in the coordinator's memory (not yet on
 * __consumer_offsets): a coordinator failover makes members join again.
 * Version notes: v1 only (Kafka 4.1 made the API production-ready at v1; v0 was the
 * early-access version Kafka no longer serves).
 * Off while `share.version` is finalized at 0 (UNSUPPORTED_VERSION, as Kafka).
 * Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED), as Kafka; Kafka also
 * checks DESCRIBE on the subscribed topics, which tidelog does not yet.
 */
import { clientHostOf } from '../../coordinator/client-host.js'
import { finalizedLevel } from '../../metadata/features.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ShareGroupHeartbeatRequest,
  type ShareGroupHeartbeatResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

export const shareGroupHeartbeatHandler: ApiHandler<ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse> =
  {
    apiKey: ApiKey.ShareGroupHeartbeat,
    minVersion: 1,
    maxVersion: 1,
    async handle(context, request) {
      if (!context.authorize(AclOperation.READ, ResourceType.GROUP, request.groupId))
        return refused(
          ErrorCode.GROUP_AUTHORIZATION_FAILED,
          `Not authorized to read group ${request.groupId}.`,
        )
      // share.version 0 (UpdateFeatures) turns share groups off: Kafka answers UNSUPPORTED_VERSION.
      if (finalizedLevel(context.broker.metadataImage(), 'share.version') < 1)
        return refused(
          ErrorCode.UNSUPPORTED_VERSION,
          'Share groups are not enabled (share.version is finalized at 0).',
        )
      const result = await context.broker.groupCoordinator.share.heartbeat({
        groupId: request.groupId,
        memberId: request.memberId,
        memberEpoch: request.memberEpoch,
        rackId: request.rackId,
        subscribedTopicNames: request.subscribedTopicNames,
        clientId: context.header.clientId ?? '',
        clientHost: clientHostOf(context.connection.remoteAddress),
      })
      if (result.errorCode !== ErrorCode.NONE) return refused(result.errorCode, result.errorMessage)
      return {
        throttleTimeMs: 0,
        errorCode: result.errorCode,
        errorMessage: result.errorMessage,
        memberId: result.memberId,
        memberEpoch: result.memberEpoch,
        heartbeatIntervalMs: result.heartbeatIntervalMs,
        assignment: result.assignment === null ? null : { topicPartitions: result.assignment },
      }
    },
  }

/**
 * Kafka answers every refused heartbeat with the schema's defaults beside the error (member
 * epoch 0, not the -1 of a member that left), as the differential harness shows.
 */
function refused(errorCode: number, errorMessage: string | null): ShareGroupHeartbeatResponse {
  return {
    throttleTimeMs: 0,
    errorCode,
    errorMessage,
    memberId: null,
    memberEpoch: 0,
    heartbeatIntervalMs: 0,
    assignment: null,
  }
}
