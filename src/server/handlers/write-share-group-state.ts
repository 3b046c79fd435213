/**
 * WriteShareGroupState (key 85), KIP-932: an inter-broker request.
 * Behavior: a partition leader writes a share-partition's changed state (SPSO, the changed
 * batches with their states and delivery counts) to the share coordinator of its key
 * (coordinator/share/share-coordinator.ts): a ShareUpdate record on `__share_group_state`, or
 * a whole ShareSnapshot every share.coordinator.snapshot.update.records.per.snapshot
 * updates; answered once committed. FENCED_LEADER_EPOCH for a leader epoch below the
 * recorded one, FENCED_STATE_EPOCH for a state epoch below it, NOT_COORDINATOR (or
 * COORDINATOR_LOAD_IN_PROGRESS) where the key is not coordinated, UNKNOWN_TOPIC_OR_PARTITION
 * for an unknown topic id, INVALID_REQUEST for offsets out of range.
 * Authorization: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
 * Version notes: v0-1 as Kafka 4.4; v1 adds the delivery complete count (-1 in v0).
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type WriteShareGroupStateRequest,
  type WriteShareGroupStateResponse,
} from '../../protocol/generated/index.js'
import { codeAnswer, routeToShareCoordinator } from '../share/share-state-requests.js'
import type { ApiHandler } from './registry.js'

const MAX = BigInt(Number.MAX_SAFE_INTEGER)

export const writeShareGroupStateHandler: ApiHandler<
  WriteShareGroupStateRequest,
  WriteShareGroupStateResponse
> = {
  apiKey: ApiKey.WriteShareGroupState,
  minVersion: 0,
  maxVersion: 1,
  handle(context, request) {
    return routeToShareCoordinator(
      context,
      request,
      async (coordinator, key, tp) => {
        const offsets = [tp.startOffset, ...tp.stateBatches.flatMap((b) => [b.firstOffset, b.lastOffset])]
        if (
          offsets.some((o) => o < -1n || o > MAX) ||
          tp.stateBatches.some((b) => b.firstOffset > b.lastOffset)
        )
          return codeAnswer(tp.partition, ErrorCode.INVALID_REQUEST)
        const code = await coordinator.writeState(key, {
          stateEpoch: tp.stateEpoch,
          leaderEpoch: tp.leaderEpoch,
          startOffset: Number(tp.startOffset),
          deliveryCompleteCount: context.apiVersion >= 1 ? tp.deliveryCompleteCount : -1,
          stateBatches: tp.stateBatches.map((b) => ({
            firstOffset: Number(b.firstOffset),
            lastOffset: Number(b.lastOffset),
            deliveryState: b.deliveryState,
            deliveryCount: b.deliveryCount,
          })),
        })
        return codeAnswer(tp.partition, code)
      },
      codeAnswer,
    )
  },
}
