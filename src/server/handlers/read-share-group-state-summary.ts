/**
 * ReadShareGroupStateSummary (key 87), KIP-932: an inter-broker request.
 * Behavior: served by the share coordinator of each share-partition key
 * (coordinator/share/share-coordinator.ts) from `__share_group_state`: the start offset
 * (SPSO), state epoch, leader epoch and records done above SPSO, for DescribeShareGroupOffsets
 * on the group's coordinator (share/share-state-access.ts). Start offset -1 when the group
 * has no state written on the partition; NOT_COORDINATOR where the key is not coordinated,
 * UNKNOWN_TOPIC_OR_PARTITION for an unknown topic id.
 * Authorization: CLUSTER_ACTION on the cluster (the inter-broker principal), else
 * CLUSTER_AUTHORIZATION_FAILED on every partition.
 * Version notes: v0-1 as Kafka 4.4; v1 adds the delivery complete count.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ReadShareGroupStateSummaryRequest,
  type ReadShareGroupStateSummaryResponse,
} from '../../protocol/generated/index.js'
import { routeToShareCoordinator } from '../share/share-state-requests.js'
import type { ApiHandler } from './registry.js'

const failed = (partition: number, errorCode: number) => ({
  partition,
  errorCode,
  errorMessage: null,
  stateEpoch: -1,
  leaderEpoch: -1,
  startOffset: -1n,
  deliveryCompleteCount: -1,
})

export const readShareGroupStateSummaryHandler: ApiHandler<
  ReadShareGroupStateSummaryRequest,
  ReadShareGroupStateSummaryResponse
> = {
  apiKey: ApiKey.ReadShareGroupStateSummary,
  minVersion: 0,
  maxVersion: 1,
  handle(context, request) {
    return routeToShareCoordinator(
      context,
      request,
      (coordinator, key, tp) => {
        const s = coordinator.readSummary(key)
        if (s.errorCode !== ErrorCode.NONE) return failed(tp.partition, s.errorCode)
        return {
          partition: tp.partition,
          errorCode: ErrorCode.NONE,
          errorMessage: null,
          stateEpoch: s.stateEpoch,
          leaderEpoch: s.leaderEpoch,
          startOffset: BigInt(s.startOffset),
          deliveryCompleteCount: s.deliveryCompleteCount,
        }
      },
      failed,
    )
  },
}
