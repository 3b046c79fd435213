/**
 * InitializeShareGroupState (key 83), KIP-932: an inter-broker request.
 * Behavior: served by the share coordinator of each share-partition key
 * (coordinator/share/share-coordinator.ts): the state starts over at the given start offset
 * under the given state epoch (AlterShareGroupOffsets on the group's coordinator,
 * share/share-state-access.ts), written as a ShareSnapshot to `__share_group_state`.
 * NOT_COORDINATOR (or COORDINATOR_LOAD_IN_PROGRESS) where the key is not coordinated,
 * FENCED_STATE_EPOCH for an epoch below the recorded one, UNKNOWN_TOPIC_OR_PARTITION for an
 * unknown topic id, INVALID_REQUEST for a negative offset.
 * Authorization: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
 * Version notes: v0 only, as Kafka 4.4.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type InitializeShareGroupStateRequest,
  type InitializeShareGroupStateResponse,
} from '../../protocol/generated/index.js'
import { codeAnswer, routeToShareCoordinator } from '../share/share-state-requests.js'
import type { ApiHandler } from './registry.js'

export const initializeShareGroupStateHandler: ApiHandler<
  InitializeShareGroupStateRequest,
  InitializeShareGroupStateResponse
> = {
  apiKey: ApiKey.InitializeShareGroupState,
  minVersion: 0,
  maxVersion: 0,
  handle(context, request) {
    return routeToShareCoordinator(
      context,
      request,
      async (coordinator, key, tp) => {
        if (tp.startOffset < 0n || tp.startOffset > BigInt(Number.MAX_SAFE_INTEGER))
          return codeAnswer(tp.partition, ErrorCode.INVALID_REQUEST)
        return codeAnswer(
          tp.partition,
          await coordinator.initializeState(key, tp.stateEpoch, Number(tp.startOffset)),
        )
      },
      codeAnswer,
    )
  },
}
