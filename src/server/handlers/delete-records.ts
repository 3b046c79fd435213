/**
 * DeleteRecords (key 21).
 * Behavior: advances each partition's log start offset on its leader (offset -1 means the
 * high watermark); whole segments below it are removed by retention. An offset above the
 * high watermark is OFFSET_OUT_OF_RANGE. Answers with the new low watermark. A partition
 * the metadata knows but this broker does not lead is NOT_LEADER_OR_FOLLOWER, whether it
 * follows it or does not host it at all (Kafka's answer, which sends clients to the
 * leader); only a topic or partition the metadata does not know is UNKNOWN_TOPIC_OR_PARTITION.
 * Authorization: DELETE on the topic, else TOPIC_AUTHORIZATION_FAILED.
 * Version notes: v2+ flexible.
 */

import type { Offset } from '../../common/types.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DeleteRecordsRequest,
  type DeleteRecordsResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

export const deleteRecordsHandler: ApiHandler<DeleteRecordsRequest, DeleteRecordsResponse> = {
  apiKey: ApiKey.DeleteRecords,
  minVersion: 0,
  maxVersion: 2,
  async handle(context, request) {
    const topics = []
    for (const topic of request.topics) {
      const partitions = []
      const deletable = context.authorize(AclOperation.DELETE, ResourceType.TOPIC, topic.name)
      for (const p of topic.partitions) {
        if (!deletable) {
          const denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
          partitions.push({ partitionIndex: p.partitionIndex, lowWatermark: -1n, errorCode: denied })
          continue
        }
        // Awaited here, not in a helper: each await is a turn the simulation's seeds replay.
        const result = await context.broker.replicaManager.deleteRecords(
          topic.name,
          p.partitionIndex,
          Number(p.offset) as Offset,
          knownPartition(context, topic.name, p.partitionIndex),
        )
        partitions.push({
          partitionIndex: p.partitionIndex,
          lowWatermark: BigInt(result.lowWatermark),
          errorCode: result.errorCode,
        })
      }
      topics.push({ name: topic.name, partitions })
    }
    return { throttleTimeMs: 0, topics }
  },
}

/** Whether the metadata has the partition (then a broker not leading it sends the client on). */
function knownPartition(context: RequestContext, topic: string, partitionIndex: number): boolean {
  const partitions = context.broker.metadataImage().topics.get(topic)?.partitions.length ?? 0
  return partitionIndex >= 0 && partitions > partitionIndex
}
