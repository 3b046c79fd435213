/**
 * ConsumerGroupHeartbeat (key 68), KIP-848's consumer protocol.
 * Behavior: one request for joining, staying, reconciling and leaving a consumer group
 * (coordinator/consumer-group.ts): the coordinator computes the target assignment with a
 * server-side assignor and hands each member the partitions it may use now, a partition
 * reaching a new owner only after its previous owner acknowledged revoking it. The answer
 * waits for the group's records to be committed to __consumer_offsets.
 * Version notes: v0 (Kafka 3.7-3.9) has no regex and lets the coordinator make member ids;
 * v1 (Kafka 4.0) adds SubscribedTopicRegex and requires the client's own member id.
 * Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED), as Kafka.
 * Refused with UNSUPPORTED_VERSION when group.coordinator.rebalance.protocols lacks
 * 'consumer' (Kafka leaves the API out of ApiVersions then; our ranges are static), or
 * while group.version is finalized below 1 (UpdateFeatures): Kafka 4.4 then still lists
 * the API in ApiVersions and answers every heartbeat UNSUPPORTED_VERSION, as here.
 */
import { clientHostOf } from '../../coordinator/client-host.js'
import { finalizedLevel, GROUP_VERSION_CONSUMER_PROTOCOL } from '../../metadata/features.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ConsumerGroupHeartbeatRequest,
  type ConsumerGroupHeartbeatResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

export const consumerGroupHeartbeatHandler: ApiHandler<
  ConsumerGroupHeartbeatRequest,
  ConsumerGroupHeartbeatResponse
> = {
  apiKey: ApiKey.ConsumerGroupHeartbeat,
  minVersion: 0,
  maxVersion: 1,
  async handle(context, request) {
    const coordinator = context.broker.groupCoordinator
    // Kafka answers every refused heartbeat with the schema's defaults beside the error
    // (member epoch 0, not the -1 of a member that left), as the differential harness shows.
    const empty = {
      throttleTimeMs: 0,
      memberId: null,
      memberEpoch: 0,
      heartbeatIntervalMs: 0,
      assignment: null,
    }
    const disabled = consumerProtocolDisabled(context)
    if (disabled !== null)
      return { ...empty, errorCode: ErrorCode.UNSUPPORTED_VERSION, errorMessage: disabled }
    if (!context.authorize(AclOperation.READ, ResourceType.GROUP, request.groupId))
      return {
        ...empty,
        errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED,
        errorMessage: `Not authorized to read group ${request.groupId}.`,
      }
    const result = await coordinator.consumerGroupHeartbeat(
      {
        groupId: request.groupId,
        memberId: request.memberId,
        memberEpoch: request.memberEpoch,
        instanceId: request.instanceId,
        rackId: request.rackId,
        rebalanceTimeoutMs: request.rebalanceTimeoutMs,
        subscribedTopicNames: request.subscribedTopicNames,
        subscribedTopicRegex: context.apiVersion >= 1 ? request.subscribedTopicRegex : null,
        serverAssignor: request.serverAssignor,
        topicPartitions: request.topicPartitions,
        clientId: context.header.clientId ?? '',
        clientHost: clientHostOf(context.connection.remoteAddress),
      },
      context.apiVersion,
    )
    if (result.errorCode !== ErrorCode.NONE)
      return { ...empty, errorCode: result.errorCode, errorMessage: result.errorMessage }
    return {
      throttleTimeMs: 0,
      errorCode: result.errorCode,
      errorMessage: result.errorMessage,
      memberId: result.memberId,
      memberEpoch: result.memberEpoch,
      heartbeatIntervalMs: result.heartbeatIntervalMs,
      assignment:
        result.assignment === null
          ? null
          : {
              topicPartitions: result.assignment.map((t) => ({
                topicId: t.topicId,
                partitions: [...t.partitions],
              })),
            },
    }
  },
}

/** Why the consumer protocol is off on this broker now, or null when it is on. */
export function consumerProtocolDisabled(context: RequestContext): string | null {
  if (!context.broker.groupCoordinator.consumerProtocolEnabled)
    return 'The consumer rebalance protocol is not enabled (group.coordinator.rebalance.protocols).'
  if (finalizedLevel(context.broker.metadataImage(), 'group.version') < GROUP_VERSION_CONSUMER_PROTOCOL)
    return 'The consumer rebalance protocol is not enabled (group.version is finalized below 1).'
  return null
}
