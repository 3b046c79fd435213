/**
 * The share coordinator's side of the share state requests (83-87, KIP-932): each partition
 * of the request is one share-partition key, answered by this broker's share coordinator
 * (NOT_COORDINATOR when another broker coordinates the key), by topic id.
 */
import type { SharePartitionKey } from '../../coordinator/share/share-state-records.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { BrokerServices } from '../broker-services.js'
import type { RequestContext } from '../request-context.js'
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

/**
 * Each partition's answer, in the request's order: CLUSTER_AUTHORIZATION_FAILED without
 * CLUSTER_ACTION (the inter-broker principal), UNKNOWN_TOPIC_OR_PARTITION for a topic not
 * known here, else `answer`.
 */
export async function perSharePartition<P extends { partition: number }, R>(
  context: RequestContext,
  topics: readonly { topicId: string; partitions: readonly P[] }[],
  answer: (tp: P & ShareTopicPartition) => R | Promise<R>,
  failed: (partition: number, errorCode: number) => R,
): Promise<{ topicId: string; partitions: R[] }[]> {
  const allowed = context.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
  return Promise.all(
    topics.map(async ({ topicId, partitions }) => {
      if (!allowed)
        return {
          topicId,
          partitions: partitions.map((p) => failed(p.partition, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)),
        }
      const tps = sharePartitionsOf(context.broker, topicId, partitions)
      return {
        topicId,
        partitions: tps
          ? await Promise.all(tps.map(answer))
          : partitions.map((p) => failed(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)),
      }
    }),
  )
}

/** The answer of a partition that carries an error code only (Initialize, Write, Delete). */
export function codeAnswer(partition: number, errorCode: number) {
  return { partition, errorCode, errorMessage: null }
}

/**
 * A share state request (83-87) routed to this broker's share coordinator: each partition
 * past perSharePartition's checks is served with its share-partition key; the response's
 * results. The handlers keep only what is theirs: the validation and the answer's shape.
 */
export async function routeToShareCoordinator<P extends { partition: number }, R>(
  context: RequestContext,
  request: {
    readonly groupId: string
    readonly topics: readonly { topicId: string; partitions: readonly P[] }[]
  },
  serve: (
    coordinator: BrokerServices['shareCoordinator'],
    key: SharePartitionKey,
    tp: P & ShareTopicPartition,
  ) => R | Promise<R>,
  failed: (partition: number, errorCode: number) => R,
): Promise<{ results: { topicId: string; partitions: R[] }[] }> {
  const coordinator = context.broker.shareCoordinator
  const results = await perSharePartition(
    context,
    request.topics,
    (tp) =>
      serve(coordinator, { groupId: request.groupId, topicId: tp.topicId, partition: tp.partition }, tp),
    failed,
  )
  return { results }
}
