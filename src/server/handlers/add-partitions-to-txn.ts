/**
 * AddPartitionsToTxn (key 24).
 * Behavior: a transactional producer adds the partitions it is about to write to its
 * transaction (starting it); the coordinator writes them to __transaction_state before
 * answering. Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and the others
 * OPERATION_NOT_ATTEMPTED, as Kafka; any other error applies to every partition. With
 * verify_only (v4+, sent by partition leaders, KIP-890) nothing is added: each partition
 * answers NONE if it is in the ongoing transaction, else TRANSACTION_ABORTABLE (Kafka 4.4's
 * coordinator, at v4 too; the leader turns it into INVALID_TXN_STATE for a producer that
 * does not know the code). A v4+ request
 * without verify_only is a leader adding a transaction version 2 producer's partition
 * (KIP-890 part 2, Produce v12 and TxnOffsetCommit v5).
 * Authorization: WRITE on the transactional id and on each topic; v4+ (brokers' verification)
 * needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED).
 * Version notes: v2 adds PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before it); v3 flexible;
 * v4 batches transactions (top-level error code, results by transaction) and adds
 * verify_only; v5 adds TRANSACTION_ABORTABLE to the schema (answered at v4 as well, as Kafka).
 */
import { type ProducerId, producerIdFromWire } from '../../common/types.js'
import { type TopicPartitions, TV_0, TV_2 } from '../../coordinator/transaction/transaction-metadata.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  type AddPartitionsToTxnRequest,
  type AddPartitionsToTxnRequestAddPartitionsToTxnTopic,
  type AddPartitionsToTxnResponse,
  type AddPartitionsToTxnResponseAddPartitionsToTxnTopicResult,
  ApiKey,
} from '../../protocol/generated/index.js'
import { AclOperation, CLUSTER_NAME, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

export const addPartitionsToTxnHandler: ApiHandler<AddPartitionsToTxnRequest, AddPartitionsToTxnResponse> = {
  apiKey: ApiKey.AddPartitionsToTxn,
  minVersion: 0,
  maxVersion: 5,
  async handle(context, request) {
    const empty = {
      throttleTimeMs: 0,
      errorCode: ErrorCode.NONE,
      resultsByTransaction: [],
      resultsByTopicV3AndBelow: [],
    }
    // v4+ is the brokers' verification batch (KIP-890): an inter-broker request.
    if (
      context.apiVersion >= 4 &&
      !context.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    )
      return { ...empty, errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED }
    if (context.apiVersion <= 3) {
      const resultsByTopicV3AndBelow = await addOrVerify(
        context,
        request.v3AndBelowTransactionalId,
        producerIdFromWire(request.v3AndBelowProducerId),
        request.v3AndBelowProducerEpoch,
        false,
        request.v3AndBelowTopics,
      )
      return { ...empty, resultsByTopicV3AndBelow }
    }
    const resultsByTransaction = await Promise.all(
      request.transactions.map(async (txn) => ({
        transactionalId: txn.transactionalId,
        topicResults: await addOrVerify(
          context,
          txn.transactionalId,
          producerIdFromWire(txn.producerId),
          txn.producerEpoch,
          txn.verifyOnly,
          txn.topics,
        ),
      })),
    )
    return { ...empty, resultsByTransaction }
  },
}

async function addOrVerify(
  context: RequestContext,
  transactionalId: string,
  producerId: ProducerId,
  producerEpoch: number,
  verifyOnly: boolean,
  topics: readonly AddPartitionsToTxnRequestAddPartitionsToTxnTopic[],
): Promise<AddPartitionsToTxnResponseAddPartitionsToTxnTopicResult[]> {
  const coordinator = context.broker.transactionCoordinator
  const producer = { producerId, producerEpoch }
  const partitions = toPartitions(topics)
  const codes = new Map<string, number>()
  const denied = verifyOnly ? null : authorizationCodes(context, transactionalId, partitions)
  if (denied !== null) {
    for (const [topic, ids] of partitions)
      for (const id of ids)
        codes.set(`${topic}\u0000${id}`, denied.get(topic) ?? ErrorCode.OPERATION_NOT_ATTEMPTED)
  } else if (verifyOnly) {
    for (const r of coordinator.verifyPartitions(transactionalId, producer, partitions))
      codes.set(`${r.topic}\u0000${r.partition}`, r.errorCode)
  } else {
    const image = context.broker.metadataImage()
    const unknown = new Set<string>()
    for (const [topic, ids] of partitions)
      for (const id of ids) {
        const partitionCount = image.topics.get(topic)?.partitions.length ?? 0
        if (id < 0 || id >= partitionCount) unknown.add(`${topic}\u0000${id}`)
      }
    const errorCode =
      unknown.size > 0
        ? ErrorCode.OPERATION_NOT_ATTEMPTED
        : await coordinator.addPartitions(
            transactionalId,
            producer,
            partitions,
            // Kafka's transactionVersionForAddPartitionsToTxn: only brokers send v4+, and a
            // broker adds (not verifies) for a transaction version 2 producer.
            context.apiVersion >= 4 ? TV_2 : TV_0,
          )
    for (const [topic, ids] of partitions)
      for (const id of ids) {
        const key = `${topic}\u0000${id}`
        codes.set(key, unknown.has(key) ? ErrorCode.UNKNOWN_TOPIC_OR_PARTITION : errorCode)
      }
  }
  return [...partitions].map(([name, ids]) => ({
    name,
    resultsByPartition: [...ids].map((partitionIndex) => ({
      partitionIndex,
      partitionErrorCode: versioned(
        context,
        codes.get(`${name}\u0000${partitionIndex}`) ?? ErrorCode.UNKNOWN_SERVER_ERROR,
      ),
    })),
  }))
}

/**
 * Kafka's checks before adding: WRITE on the transactional id, else every partition
 * TRANSACTIONAL_ID_AUTHORIZATION_FAILED; WRITE on each topic, else its partitions
 * TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED. Null: all allowed.
 */
function authorizationCodes(
  context: RequestContext,
  transactionalId: string,
  partitions: TopicPartitions,
): Map<string, number> | null {
  const topics = [...partitions.keys()]
  if (!context.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactionalId))
    return new Map(topics.map((t) => [t, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]))
  const refused = topics.filter((t) => !context.authorize(AclOperation.WRITE, ResourceType.TOPIC, t))
  return refused.length === 0 ? null : new Map(refused.map((t) => [t, ErrorCode.TOPIC_AUTHORIZATION_FAILED]))
}

function toPartitions(topics: readonly AddPartitionsToTxnRequestAddPartitionsToTxnTopic[]): TopicPartitions {
  const partitions = new Map<string, Set<number>>()
  for (const topic of topics) {
    const ids = partitions.get(topic.name) ?? new Set<number>()
    for (const id of topic.partitions) ids.add(id)
    partitions.set(topic.name, ids)
  }
  return partitions
}

/** PRODUCER_FENCED exists from v2; older clients know it as INVALID_PRODUCER_EPOCH. */
function versioned(context: RequestContext, errorCode: number): number {
  return errorCode === ErrorCode.PRODUCER_FENCED && context.apiVersion < 2
    ? ErrorCode.INVALID_PRODUCER_EPOCH
    : errorCode
}
