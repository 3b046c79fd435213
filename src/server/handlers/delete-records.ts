/**
 * DeleteRecords (key 21).
 * Behavior: advances each partition's log start offset on its leader (offset -1 means the
 * high watermark); whole segments below it are removed by retention. An offset above the
 * high watermark is OFFSET_OUT_OF_RANGE. Answers with the new low watermark.
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
      for (const p of topic.partitions)
        partitions.push(await deleteOne(context, topic.name, p.partitionIndex, Number(p.offset)))
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
    const partition = context.broker.replicaManager.getPartitionOrError(topic, partitionIndex)
    partition.ensureLeader()
    const lowWatermark = await partition.log.deleteRecordsBefore(offset as Offset)
    return { partitionIndex, lowWatermark: BigInt(lowWatermark), errorCode: ErrorCode.NONE }
  } catch (error) {
    const code = toErrorCode(error)
    if (code === null) throw error
    return { partitionIndex, lowWatermark: -1n, errorCode: code }
  }
}
