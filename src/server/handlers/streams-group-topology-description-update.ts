/**
 * StreamsGroupTopologyDescriptionUpdate (key 93), KIP-1331.
 * Behavior: a streams group member asked by its heartbeat (TopologyDescriptionRequired)
 * pushes the processing graph of its topology epoch; the group coordinator keeps it with the
 * group (coordinator/streams/streams-topology-description.ts) and StreamsGroupDescribe v1
 * returns it. Kafka 4.4 keeps descriptions in a plugin: without
 * `group.streams.topology.description.plugin.class` (the default) it answers
 * UNSUPPORTED_VERSION "The broker has no streams group topology description plugin
 * configured.", and so does tidelog; set to Kafka's InMemoryTopologyDescriptionPlugin, the
 * descriptions are kept as that plugin keeps them (in memory).
 * Version notes: v0 only, as Kafka 4.4.
 * Authorization: as Kafka's KafkaApis, UNSUPPORTED_VERSION while streams groups are off, then
 * READ on the group (GROUP_AUTHORIZATION_FAILED), each with the error's own message.
 */
import { finalizedLevel } from '../../metadata/features.js'
import { ErrorCode, errorInfos } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type StreamsGroupTopologyDescriptionUpdateRequest,
  type StreamsGroupTopologyDescriptionUpdateResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { ApiHandler } from './registry.js'

/** Kafka's ApiError.fromThrowable of the error's own exception: its default message. */
function withDefaultMessage(errorCode: number): StreamsGroupTopologyDescriptionUpdateResponse {
  return { throttleTimeMs: 0, errorCode, errorMessage: errorInfos.get(errorCode)?.message ?? null }
}

export const streamsGroupTopologyDescriptionUpdateHandler: ApiHandler<
  StreamsGroupTopologyDescriptionUpdateRequest,
  StreamsGroupTopologyDescriptionUpdateResponse
> = {
  apiKey: ApiKey.StreamsGroupTopologyDescriptionUpdate,
  minVersion: 0,
  maxVersion: 0,
  handle(context, request) {
    const coordinator = context.broker.groupCoordinator
    if (
      finalizedLevel(context.broker.metadataImage(), 'streams.version') < 1 ||
      !coordinator.streamsProtocolEnabled
    )
      return withDefaultMessage(ErrorCode.UNSUPPORTED_VERSION)
    if (!context.authorize(AclOperation.READ, ResourceType.GROUP, request.groupId))
      return withDefaultMessage(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    const outcome = coordinator.streams.updateTopologyDescription(request)
    return { throttleTimeMs: 0, errorCode: outcome.errorCode, errorMessage: outcome.errorMessage }
  },
}
