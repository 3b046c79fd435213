/**
 * DeleteShareGroupState (key 86), KIP-932: an inter-broker request.
 * Behavior: served by the share coordinator of each share-partition key
 * (coordinator/share/share-coordinator.ts): the state is forgotten, tombstones written to
 * `__share_group_state` (DeleteShareGroupOffsets and DeleteGroups on the group's coordinator,
 * share/share-state-access.ts). NOT_COORDINATOR where the key is not coordinated,
 * UNKNOWN_TOPIC_OR_PARTITION for an unknown topic id; a key without state answers NONE.
 * Authorization: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
 * Version notes: v0 only, as Kafka 4.4.
 */
import {
  ApiKey,
  type DeleteShareGroupStateRequest,
  type DeleteShareGroupStateResponse,
} from '../../protocol/generated/index.js'
import { codeAnswer, routeToShareCoordinator } from '../share/share-state-requests.js'
import type { ApiHandler } from './registry.js'

export const deleteShareGroupStateHandler: ApiHandler<
  DeleteShareGroupStateRequest,
  DeleteShareGroupStateResponse
> = {
  apiKey: ApiKey.DeleteShareGroupState,
  minVersion: 0,
  maxVersion: 0,
  handle(context, request) {
    return routeToShareCoordinator(
      context,
      request,
      async (coordinator, key, tp) => codeAnswer(tp.partition, await coordinator.deleteState(key)),
      codeAnswer,
    )
  },
}
