/**
 * DescribeProducers (key 61), what `kafka-transactions.sh describe-producers` and the
 * admin client's describeProducers ask.
 * Behavior: per partition, on its leader, every producer id in the producer state: epoch,
 * last sequence (-1 when its only write was a marker), the last batch's or marker's
 * timestamp, the coordinator epoch of its last marker (-1 for none) and the first offset
 * of its open transaction (-1 for none). A partition the metadata knows but this broker
 * does not lead is NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION.
 * Authorization: READ on the topic, else TOPIC_AUTHORIZATION_FAILED.
 * Version notes: v0 only, flexible.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DescribeProducersRequest,
  type DescribeProducersResponse,
  type DescribeProducersResponsePartitionResponse,
} from '../../protocol/generated/index.js'
import { KafkaError, toErrorCode } from '../../replication/kafka-error.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

export const describeProducersHandler: ApiHandler<DescribeProducersRequest, DescribeProducersResponse> = {
  apiKey: ApiKey.DescribeProducers,
  minVersion: 0,
  maxVersion: 0,
  handle(context, request) {
    return {
      throttleTimeMs: 0,
      topics: request.topics.map((topic) => {
        const readable = context.authorize(AclOperation.READ, ResourceType.TOPIC, topic.name)
        return {
          name: topic.name,
          partitions: topic.partitionIndexes.map((index) =>
            readable
              ? describeOne(context, topic.name, index)
              : {
                  partitionIndex: index,
                  errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                  errorMessage: null,
                  activeProducers: [],
                },
          ),
        }
      }),
    }
  },
}

function describeOne(
  context: RequestContext,
  topic: string,
  partitionIndex: number,
): DescribeProducersResponsePartitionResponse {
  try {
    const partition = context.broker.replicaManager.getPartition(topic, partitionIndex)
    if (partition === undefined || !partition.isLeader) throw notLeader(context, topic, partitionIndex)
    const activeProducers = [...(partition.producerState?.activeProducers.values() ?? [])].map((entry) => ({
      producerId: entry.producerId,
      producerEpoch: entry.producerEpoch,
      lastSequence: entry.lastSeq,
      lastTimestamp: BigInt(entry.lastTimestamp),
      coordinatorEpoch: entry.coordinatorEpoch,
      currentTxnStartOffset: BigInt(entry.currentTxnFirstOffset),
    }))
    return { partitionIndex, errorCode: ErrorCode.NONE, errorMessage: null, activeProducers }
  } catch (error) {
    const code = toErrorCode(error)
    if (code === null) throw error
    return {
      partitionIndex,
      errorCode: code,
      errorMessage: error instanceof Error ? error.message : null,
      activeProducers: [],
    }
  }
}

function notLeader(context: RequestContext, topic: string, partition: number): KafkaError {
  const known = context.broker
    .metadataImage()
    .topics.get(topic)
    ?.partitions.some((p) => p.partition === partition)
  return known === true
    ? new KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, `${topic}-${partition} is not led here`)
    : new KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, `${topic}-${partition} is unknown`)
}
