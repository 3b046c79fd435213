/**
 * The partition leader's side of the share state requests the group coordinator sends
 * (share-state-access.ts): the group's state on partitions led here, by topic id.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import type { BrokerServices } from '../broker-services.js'
import type { ShareTopicPartition } from './share-partition-manager.js'

/** `partitions` of `topicId` as share-partition places, or null when the topic is unknown here. */
export function sharePartitionsOf<P extends { partition: number }>(
  broker: BrokerServices,
  topicId: string,
  partitions: readonly P[],
): (P & ShareTopicPartition)[] | null {
  for (const [topic, image] of broker.metadataImage().topics)
    if (image.topicId === topicId) return partitions.map((p) => ({ ...p, topic, topicId }))
  return null
}

/** Each partition's answer, UNKNOWN_TOPIC_OR_PARTITION for all of a topic not known here. */
export function perPartition<P extends { partition: number }, R>(
  broker: BrokerServices,
  topics: readonly { topicId: string; partitions: readonly P[] }[],
  answer: (tp: P & ShareTopicPartition) => R,
  unknown: (partition: number, errorCode: number) => R,
): { topicId: string; partitions: R[] }[] {
  return topics.map(({ topicId, partitions }) => {
    const tps = sharePartitionsOf(broker, topicId, partitions)
    return {
      topicId,
      partitions: tps
        ? tps.map(answer)
        : partitions.map((p) => unknown(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)),
    }
  })
}
