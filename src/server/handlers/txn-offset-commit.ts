/**
 * TxnOffsetCommit (key 28).
 * Behavior: a transactional producer's consumed offsets, committed as part of its
 * transaction (sendOffsetsToTransaction). With partition verification enabled
 * (transaction.partition.verification.enable, KIP-890) the group's __consumer_offsets
 * partition must be in the producer's ongoing transaction (AddOffsetsToTxn added it), so
 * a late commit of a transaction that already ended is refused. The offsets are written as
 * a transactional batch of the request's producer id and epoch (an older epoch than the
 * partition knows is refused: INVALID_PRODUCER_EPOCH) and stay invisible to OffsetFetch
 * until the transaction's COMMIT marker reaches the partition; ABORT drops them.
 * Authorization: WRITE on the transactional id, READ on the group and on each topic, each
 * failure answered with its *_AUTHORIZATION_FAILED code on the partitions concerned.
 * Version notes: v0-1 offset and metadata; v2 leader epoch; v3+ flexible, with the
 * consumer's generation, member id and group instance id (KIP-447), which fence a
 * producer whose consumer is no longer a member of the current generation. v4 adds
 * TRANSACTION_ABORTABLE (the offsets partition not in the transaction; INVALID_TXN_STATE
 * before). v5 is
 * transaction version 2 (KIP-890 part 2): the producer sent no AddOffsetsToTxn, so the
 * group's offsets partition is added to its transaction here (as Produce v12 adds a
 * partition), whatever transaction.partition.verification.enable says. v6 names topics by id
 * (KIP-1319): an id the metadata does not know is UNKNOWN_TOPIC_ID on its partitions, after
 * the transactional id's and the group's authorization and before the transaction's check.
 */

import { producerIdFromWire } from '../../common/types.js'
import { CONSUMER_OFFSETS_TOPIC, partitionForGroup } from '../../coordinator/group.js'
import { offsetAppendError } from '../../coordinator/offsets.js'
import { topicById } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type TxnOffsetCommitRequest,
  type TxnOffsetCommitResponse,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

/** Kafka answers these for the whole request, before it looks up topic ids. */
const AUTHORIZATION_CODES = new Set<number>([
  ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
  ErrorCode.GROUP_AUTHORIZATION_FAILED,
])

export const txnOffsetCommitHandler: ApiHandler<TxnOffsetCommitRequest, TxnOffsetCommitResponse> = {
  apiKey: ApiKey.TxnOffsetCommit,
  minVersion: 0,
  maxVersion: 6,
  async handle(context, request) {
    const version = context.apiVersion
    const image = context.broker.metadataImage()
    // v6 addresses topics by id; the group stores offsets by name, as Kafka's does.
    const named = request.topics.map((t) => ({
      request: t,
      name: version >= 6 ? (topicById(image, t.topicId)?.name ?? null) : t.name,
    }))
    const partitions = named.flatMap(({ request: t, name }) =>
      (name === null ? [] : t.partitions).map((p) => ({
        topic: name!,
        partition: p.partitionIndex,
        offset: p.committedOffset,
        leaderEpoch: version >= 2 ? p.committedLeaderEpoch : -1,
        metadata: p.committedMetadata,
      })),
    )
    const readable = new Set(
      named
        .flatMap((t) => (t.name === null ? [] : [t.name]))
        .filter((name) => context.authorize(AclOperation.READ, ResourceType.TOPIC, name)),
    )
    const groupCode = !context.authorize(
      AclOperation.WRITE,
      ResourceType.TRANSACTIONAL_ID,
      request.transactionalId,
    )
      ? ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
      : !context.authorize(AclOperation.READ, ResourceType.GROUP, request.groupId)
        ? ErrorCode.GROUP_AUTHORIZATION_FAILED
        : request.groupId === ''
          ? ErrorCode.INVALID_GROUP_ID
          : await verify(context, request)
    const codes: Map<string, number> =
      groupCode !== ErrorCode.NONE
        ? new Map(partitions.map((p) => [`${p.topic}\u0000${p.partition}`, groupCode]))
        : new Map(
            (
              await context.broker.groupCoordinator.commitTransactional(request.groupId, {
                producerId: producerIdFromWire(request.producerId),
                producerEpoch: request.producerEpoch,
                memberId: version >= 3 ? request.memberId : '',
                groupInstanceId: version >= 3 ? request.groupInstanceId : null,
                generationId: version >= 3 ? request.generationIdOrMemberEpoch : -1,
                partitions: partitions.filter((p) => readable.has(p.topic)),
              })
            ).partitions,
          )
    if (groupCode === ErrorCode.NONE)
      for (const p of partitions)
        if (!readable.has(p.topic))
          codes.set(`${p.topic}\u0000${p.partition}`, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return {
      throttleTimeMs: 0,
      topics: named.map(({ request: t, name }) => ({
        name: t.name,
        topicId: version >= 6 ? t.topicId : ZERO_UUID,
        partitions: t.partitions.map((p) => ({
          partitionIndex: p.partitionIndex,
          errorCode:
            name === null
              ? AUTHORIZATION_CODES.has(groupCode)
                ? groupCode
                : ErrorCode.UNKNOWN_TOPIC_ID
              : (codes.get(`${name}\u0000${p.partitionIndex}`) ?? ErrorCode.UNKNOWN_SERVER_ERROR),
        })),
      })),
    }
  },
}

/**
 * KIP-890's check that the group's offsets partition is in the ongoing transaction, with
 * Kafka's conversion of its errors (GroupMetadataManager.maybeConvertOffsetCommitError).
 * Without a transaction coordinator on this broker nothing can be verified, and no
 * transaction can have started through it either; the commit then goes unverified.
 */
async function verify(context: RequestContext, request: TxnOffsetCommitRequest): Promise<number> {
  const verifier = context.broker.transactionVerifier
  // Kafka's txnOffsetCommitRequestVersionToTransactionSupportedOperation: v5+ is a
  // transaction version 2 producer, which sent no AddOffsetsToTxn; the partition is added.
  const addPartition = context.apiVersion >= 5
  if (!verifier || !(addPartition || verificationEnabled(context))) return ErrorCode.NONE
  const offsetsTopic = context.broker.metadataImage().topics.get(CONSUMER_OFFSETS_TOPIC)
  if (!offsetsTopic || offsetsTopic.partitions.length === 0) return ErrorCode.COORDINATOR_NOT_AVAILABLE
  const code = await verifier.verify({
    transactionalId: request.transactionalId,
    producerId: producerIdFromWire(request.producerId),
    producerEpoch: request.producerEpoch,
    topic: CONSUMER_OFFSETS_TOPIC,
    partition: partitionForGroup(request.groupId, offsetsTopic.partitions.length),
    addPartition,
  })
  // Kafka's coordinator answers an offsets partition missing from the transaction
  // TRANSACTION_ABORTABLE; v0-3 clients, which do not know it, get INVALID_TXN_STATE
  // (AddPartitionsToTxnManager; the differential harness shows both).
  if (code === ErrorCode.TRANSACTION_ABORTABLE && context.apiVersion < 4) return ErrorCode.INVALID_TXN_STATE
  switch (code) {
    case ErrorCode.NETWORK_EXCEPTION:
      // Kafka: older clients may not retry NETWORK_EXCEPTION here; they all retry this.
      return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    // The verifier's "coordinator cannot answer now" (NOT_ENOUGH_REPLICAS, as for Produce).
    case ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
    case ErrorCode.NOT_ENOUGH_REPLICAS:
    case ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
      return ErrorCode.COORDINATOR_NOT_AVAILABLE
    case ErrorCode.NOT_LEADER_OR_FOLLOWER:
    case ErrorCode.KAFKA_STORAGE_ERROR:
      return ErrorCode.NOT_COORDINATOR
    default:
      return offsetAppendError(code)
  }
}

function verificationEnabled(context: RequestContext): boolean {
  return context.broker.config.values.get('transaction.partition.verification.enable') === true
}
