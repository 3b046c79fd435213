/**
 * WriteTxnMarkers (key 27), from a transaction coordinator to each partition's leader.
 * Behavior: for every marker, a COMMIT or ABORT control batch is appended to each of its
 * partitions as their leader, with the producer's id and epoch and the coordinator's
 * epoch, and answered once the ISR has it (Kafka appends with requiredAcks -1 and
 * request.timeout.ms). The producer state refuses a marker from an older producer epoch
 * (INVALID_PRODUCER_EPOCH) or coordinator epoch (TRANSACTION_COORDINATOR_FENCED). Errors
 * are per partition: a partition the metadata does not know is UNKNOWN_TOPIC_OR_PARTITION,
 * one led elsewhere NOT_LEADER_OR_FOLLOWER. After each marker is written the broker's
 * marker listener hears of it (the group coordinator's pending transactional offsets).
 * Authorization: CLUSTER_ACTION on the cluster (the inter-broker principal), else
 * CLUSTER_AUTHORIZATION_FAILED on every partition.
 * Version notes: v1+ flexible.
 */
import { ACKS_ALL, producerIdFromWire } from '../../common/types.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type WriteTxnMarkersRequest,
  type WriteTxnMarkersRequestWritableTxnMarker,
  type WriteTxnMarkersResponse,
  type WriteTxnMarkersResponseWritableTxnMarkerPartitionResult,
  type WriteTxnMarkersResponseWritableTxnMarkerResult,
} from '../../protocol/generated/index.js'
import { KafkaError, toErrorCode } from '../../replication/kafka-error.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import { encodeEndTxnMarker } from '../../storage/control-batch.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

/** Kafka's request.timeout.ms default, which its WriteTxnMarkers append waits at most. */
export const MARKER_APPEND_TIMEOUT_MS = 30_000

export const writeTxnMarkersHandler: ApiHandler<WriteTxnMarkersRequest, WriteTxnMarkersResponse> = {
  apiKey: ApiKey.WriteTxnMarkers,
  minVersion: 0,
  maxVersion: 1,
  async handle(context, request) {
    if (!context.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME))
      return {
        markers: request.markers.map((marker) => ({
          producerId: marker.producerId,
          topics: marker.topics.map((topic) => ({
            name: topic.name,
            partitions: topic.partitionIndexes.map((partitionIndex) => ({
              partitionIndex,
              errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            })),
          })),
        })),
      }
    // Every partition's append starts now, in request order; the answers are awaited after.
    const markers = request.markers.map((marker) => writeMarker(context, marker))
    return { markers: await Promise.all(markers) }
  },
}

async function writeMarker(
  context: RequestContext,
  marker: WriteTxnMarkersRequestWritableTxnMarker,
): Promise<WriteTxnMarkersResponseWritableTxnMarkerResult> {
  const topics = marker.topics.map((topic) => ({
    name: topic.name,
    partitions: topic.partitionIndexes.map((partition) => writeOne(context, marker, topic.name, partition)),
  }))
  const results = []
  for (const topic of topics)
    results.push({ name: topic.name, partitions: await Promise.all(topic.partitions) })
  return { producerId: marker.producerId, topics: results }
}

async function writeOne(
  context: RequestContext,
  marker: WriteTxnMarkersRequestWritableTxnMarker,
  topic: string,
  partition: number,
): Promise<WriteTxnMarkersResponseWritableTxnMarkerPartitionResult> {
  const result = marker.transactionResult ? 'commit' : 'abort'
  const producerId = producerIdFromWire(marker.producerId)
  const broker = context.broker
  try {
    if (broker.replicaManager.getPartition(topic, partition) === undefined)
      throw notHere(context, topic, partition)
    const batch = encodeEndTxnMarker({
      producerId,
      producerEpoch: marker.producerEpoch,
      coordinatorEpoch: marker.coordinatorEpoch,
      result,
      timestampMs: broker.clock.nowMs(),
    })
    const appended = await broker.replicaManager.appendToLeader({
      topic,
      partition,
      records: batch,
      requiredAcks: ACKS_ALL,
      timeoutMs: MARKER_APPEND_TIMEOUT_MS,
      purgatoryTimer: context.purgatoryTimer,
      leaderAppend: { origin: 'coordinator' },
    })
    if (appended.errorCode === ErrorCode.NONE)
      broker.onTransactionMarker?.(topic, partition, producerId, result)
    return { partitionIndex: partition, errorCode: appended.errorCode }
  } catch (error) {
    const code = toErrorCode(error)
    if (code === null) throw error
    return { partitionIndex: partition, errorCode: code }
  }
}

/** Not hosted here: unknown to the metadata, or hosted by other brokers. */
function notHere(context: RequestContext, topic: string, partition: number): KafkaError {
  const known = context.broker
    .metadataImage()
    .topics.get(topic)
    ?.partitions.some((p) => p.partition === partition)
  return known === true
    ? new KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, `${topic}-${partition} is not led here`)
    : new KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, `${topic}-${partition} is unknown`)
}
