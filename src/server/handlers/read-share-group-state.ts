/**
 * ReadShareGroupState (key 84), KIP-932: an inter-broker request.
 * Behavior: a partition leader making a share-partition reads its state from the share
 * coordinator of its key (coordinator/share/share-coordinator.ts, `__share_group_state`):
 * state epoch, start offset (-1 when the group has none) and the state batches above it. A
 * leader epoch above the recorded one is recorded (the previous leader's writes are then
 * fenced); one below it is FENCED_LEADER_EPOCH. NOT_COORDINATOR (or
 * COORDINATOR_LOAD_IN_PROGRESS) where the key is not coordinated, UNKNOWN_TOPIC_OR_PARTITION
 * for an unknown topic id.
 * Authorization: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
 * Version notes: v0 only, as Kafka 4.4.
 */
import {
  ApiKey,
  type ReadShareGroupStateRequest,
  type ReadShareGroupStateResponse,
} from '../../protocol/generated/index.js'
import { routeToShareCoordinator } from '../share/share-state-requests.js'
import type { ApiHandler } from './registry.js'

const failed = (partition: number, errorCode: number) => ({
  partition,
  errorCode,
  errorMessage: null,
  stateEpoch: -1,
  startOffset: -1n,
  stateBatches: [],
})

export const readShareGroupStateHandler: ApiHandler<ReadShareGroupStateRequest, ReadShareGroupStateResponse> =
  {
    apiKey: ApiKey.ReadShareGroupState,
    minVersion: 0,
    maxVersion: 0,
    handle(context, request) {
      return routeToShareCoordinator(
        context,
        request,
        async (coordinator, key, tp) => {
          const read = await coordinator.readState(key, tp.leaderEpoch)
          return {
            partition: tp.partition,
            errorCode: read.errorCode,
            errorMessage: null,
            stateEpoch: read.stateEpoch,
            startOffset: BigInt(read.startOffset),
            stateBatches: read.stateBatches.map((b) => ({
              firstOffset: BigInt(b.firstOffset),
              lastOffset: BigInt(b.lastOffset),
              deliveryState: b.deliveryState,
              deliveryCount: b.deliveryCount,
            })),
          }
        },
        failed,
      )
    },
  }
