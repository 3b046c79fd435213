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
  type DeleteRecordsResponseDeleteRecordsPartitionResult,
} from '../../protocol/generated/index.js'
import { toErrorCode } from '../../replication/kafka-error.js'
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
      for (const p of topic.partitions)
        partitions.push(
          deletable
            ? await deleteOne(context, topic.name, p.partitionIndex, Number(p.offset))
            : {
                partitionIndex: p.partitionIndex,
                lowWatermark: -1n,
                errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
              },
        )
      topics.push({ name: topic.name, partitions })
    }
    return { throttleTimeMs: 0, topics }
  },
}

async function deleteOne(
  context: RequestContext,
  topic: string,
  partitionIndex: number,
  offset: number,
): Promise<DeleteRecordsResponseDeleteRecordsPartitionResult> {
  try {
    const partition = context.broker.replicaManager.getPartition(topic, partitionIndex)
    if (partition === undefined) {
      const known =
        (context.broker.metadataImage().topics.get(topic)?.partitions.length ?? 0) > partitionIndex
      return {
        partitionIndex,
        lowWatermark: -1n,
        errorCode:
          known && partitionIndex >= 0
            ? ErrorCode.NOT_LEADER_OR_FOLLOWER
            : ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
      }
    }
    partition.ensureLeader()
    const lowWatermark = await partition.log.deleteRecordsBefore(offset as Offset)
    return { partitionIndex, lowWatermark: BigInt(lowWatermark), errorCode: ErrorCode.NONE }
  } catch (error) {
    const code = toErrorCode(error)
    if (code === null) throw error
    return { partitionIndex, lowWatermark: -1n, errorCode: code }
  }
}
