/**
 * Produce (key 0).
 * Behavior: appends each partition's record batches on its leader, assigning offsets in
 * place; per-partition errors never fail the whole request. acks=1 answers after the
 * leader's append, acks=-1 once the ISR has the records (with min.insync.replicas checked
 * first), acks=0 gets no response at all; if an acks=0 write fails the connection is
 * closed, as Kafka does, so the producer notices and refreshes its metadata.
 * KIP-890 part 1 (transaction.partition.verification.enable, default true): a
 * transactional batch from a producer with no transaction open in the partition is first
 * verified with the transaction coordinator (is the partition in its ongoing
 * transaction?), then appended holding the producer state's verification guard, which a
 * marker written meanwhile voids. Kafka's answers: not in the transaction is
 * INVALID_TXN_STATE; the coordinator unreachable, loading, moved or busy
 * (CONCURRENT_TRANSACTIONS) is NOT_ENOUGH_REPLICAS, which clients retry without a metadata
 * refresh. A broker without a coordinator refuses such batches (INVALID_TXN_STATE).
 * Verified appends of one partition run in arrival order. From v12 (transaction version 2,
 * KIP-890 part 2) the producer sends no AddPartitionsToTxn: the leader asks the coordinator
 * to add the partition (AddPartitionsToTxn v5 without verify_only), whatever
 * transaction.partition.verification.enable says.
 * Authorization (Kafka's handleProduceRequest): WRITE on the transactional id when there is
 * one, else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED; WRITE on each topic, else
 * its partitions TOPIC_AUTHORIZATION_FAILED.
 * Version notes: v2 adds logAppendTime, v3 transactionalId (magic v2 only), v5
 * logStartOffset, v8 record errors and an error message, v9+ flexible, v10 the current
 * leader and node endpoints as tagged fields (left empty: clients then refresh metadata),
 * v11 TRANSACTION_ABORTABLE (a partition the transaction coordinator does not know in the
 * transaction; INVALID_TXN_STATE before), v12 the same layout with transaction version 2,
 * v13 names topics by id (KIP-516): an id the metadata does not know is UNKNOWN_TOPIC_ID on
 * each of its partitions, before authorization (which needs the name), as Kafka.
 */

import { ACKS_NONE, type Acks, isAcks } from '../../common/types.js'
import { topicById } from '../../metadata/cluster-image.js'
import { effectiveBrokerValue } from '../../metadata/topic-config.js'
import { BATCH_LENGTH_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET } from '../../protocol/batch-header.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ProduceRequest,
  type ProduceResponse,
  type ProduceResponsePartitionProduceResponse,
  type ProduceResponseTopicProduceResponse,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import { MAGIC_V2 } from '../../protocol/record-batch.js'
import { TransactionVerificationError } from '../../replication/append-verification.js'
import { toErrorCode } from '../../replication/kafka-error.js'
import type { AppendResult } from '../../replication/replica-manager.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { RequestContext } from '../request-context.js'
import type { ApiHandler } from './registry.js'

export const produceHandler: ApiHandler<ProduceRequest, ProduceResponse> = {
  apiKey: ApiKey.Produce,
  minVersion: 0,
  maxVersion: 13,
  // acks=0 gets no response, so a failure closes the connection; nothing pipelined behind
  // it may be appended before that is known.
  holdsConnection: (request) => request.acks === ACKS_NONE,
  async handle(context, request) {
    // Checked once here: null answers every partition INVALID_REQUIRED_ACKS (in Kafka's
    // order, after the partition and framing checks), and the rest of the path sees an Acks.
    const acks = isAcks(request.acks) ? request.acks : null
    const transactionalId = request.transactionalId
    const corrupt =
      context.apiVersion >= 3
        ? unknownMagic(
            request.topicData.flatMap((t) => t.partitionData.map((d) => d.records as Buffer | null)),
          )
        : null
    const transactionDenied =
      transactionalId !== null &&
      !context.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactionalId)
    const image = context.broker.metadataImage()
    const byId = context.apiVersion >= 13
    const topics = request.topicData.map((requested) => {
      const name = byId ? topicById(image, requested.topicId)?.name : requested.name
      if (name === undefined) {
        // The transactional id and a corrupt batch fail the whole request first, as for known topics.
        const code = transactionDenied
          ? ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
          : corrupt !== null
            ? ErrorCode.CORRUPT_MESSAGE
            : ErrorCode.UNKNOWN_TOPIC_ID
        const message = code === ErrorCode.CORRUPT_MESSAGE ? corrupt : null
        return {
          requested,
          partitions: requested.partitionData.map((data) =>
            Promise.resolve(failure(data.index, code, message)),
          ),
        }
      }
      const topic = { ...requested, name }
      const denied = transactionDenied
        ? ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        : context.authorize(AclOperation.WRITE, ResourceType.TOPIC, topic.name)
          ? null
          : ErrorCode.TOPIC_AUTHORIZATION_FAILED
      if (denied !== null)
        return {
          requested,
          partitions: topic.partitionData.map((data) => Promise.resolve(failure(data.index, denied, null))),
        }
      return {
        requested,
        partitions: produceTopic(context, topic, acks, request.timeoutMs, transactionalId, corrupt),
      }
    })
    const responses: ProduceResponseTopicProduceResponse[] = []
    for (const { requested, partitions } of topics)
      responses.push({
        // Each version's own key: the name up to v12, the id from v13.
        name: requested.name,
        topicId: byId ? requested.topicId : ZERO_UUID,
        partitionResponses: await Promise.all(partitions),
      })
    if (acks === ACKS_NONE) {
      const failed = responses.some((t) => t.partitionResponses.some((p) => p.errorCode !== ErrorCode.NONE))
      if (failed)
        context.connection.close('acks=0 produce failed; closing so the producer refreshes metadata')
      return null
    }
    return { responses, throttleTimeMs: 0, nodeEndpoints: [] }
  },
}

function produceTopic(
  context: RequestContext,
  topic: ProduceRequest['topicData'][number],
  acks: Acks | null,
  timeoutMs: number,
  transactionalId: string | null,
  corrupt: string | null,
): Promise<ProduceResponsePartitionProduceResponse>[] {
  const known = context.broker.metadataImage().topics.get(topic.name)
  const partitions = topic.partitionData.map((data) => {
    // Kafka's order: a batch of an unknown magic anywhere in the request (its reader throws
    // while the request is scanned for transactional batches), a partition missing from the
    // metadata, the records' framing, then acks.
    if (corrupt !== null) return Promise.resolve(failure(data.index, ErrorCode.CORRUPT_MESSAGE, corrupt))
    if (known === undefined || data.index < 0 || data.index >= known.partitions.length)
      return Promise.resolve(failure(data.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, null))
    const framing =
      context.apiVersion >= 3 && data.records !== null ? checkBatchFraming(data.records as Buffer) : null
    if (framing !== null) return Promise.resolve(failure(data.index, framing.errorCode, framing.message))
    if (acks === null) return Promise.resolve(failure(data.index, ErrorCode.INVALID_REQUIRED_ACKS, null))
    if (data.records === null)
      return Promise.resolve(failure(data.index, ErrorCode.INVALID_RECORD, 'no records'))
    // Called synchronously so appends keep the order requests arrived in.
    return append(
      context,
      topic.name,
      data.index,
      data.records as Buffer,
      acks,
      timeoutMs,
      transactionalId,
    ).then(
      (result): ProduceResponsePartitionProduceResponse => ({
        index: data.index,
        errorCode: result.errorCode,
        baseOffset: BigInt(result.baseOffset),
        logAppendTimeMs: BigInt(result.logAppendTimeMs),
        logStartOffset: BigInt(result.logStartOffset),
        recordErrors: [],
        errorMessage: null,
        currentLeader: { leaderId: -1, leaderEpoch: -1 },
      }),
      (error: unknown) => {
        const thrown = toErrorCode(error)
        if (thrown === null) throw error
        const code =
          error instanceof TransactionVerificationError
            ? verificationAnswer(thrown, context.apiVersion)
            : thrown
        return {
          ...failure(data.index, code, error instanceof Error ? error.message : null),
          logStartOffset: BigInt(
            error instanceof TransactionVerificationError
              ? -1
              : logStartOffsetOnFailure(context, topic.name, data.index, code),
          ),
        }
      },
    )
  })
  return partitions
}

/**
 * Kafka's coordinator answers a partition missing from the transaction TRANSACTION_ABORTABLE,
 * which the leader turns into INVALID_TXN_STATE for producers older than v11, that do not
 * know the code (AddPartitionsToTxnManager; the differential harness shows both).
 */
function verificationAnswer(code: number, version: number): number {
  return code === ErrorCode.TRANSACTION_ABORTABLE && version < 11 ? ErrorCode.INVALID_TXN_STATE : code
}

function append(
  context: RequestContext,
  topic: string,
  partitionIndex: number,
  records: Buffer,
  acks: Acks,
  timeoutMs: number,
  transactionalId: string | null,
): Promise<AppendResult> {
  return context.broker.replicaManager.appendRecords({
    topic,
    partition: partitionIndex,
    records,
    requiredAcks: acks,
    timeoutMs,
    purgatoryTimer: context.purgatoryTimer,
    verification: {
      enabled: () => verificationEnabled(context),
      verifier: context.broker.transactionVerifier,
      transactionalId,
      // Kafka's produceRequestVersionToTransactionSupportedOperation: v12+ is a transaction
      // version 2 producer, whose partitions the leader adds to its transaction.
      addPartition: context.apiVersion >= 12,
    },
  })
}

/** A dynamic broker config in Kafka: AlterConfigs on the broker or the cluster default applies it. */
function verificationEnabled(context: RequestContext): boolean {
  const broker = context.broker
  const value = effectiveBrokerValue(
    broker.metadataImage(),
    broker.config,
    'transaction.partition.verification.enable',
  )
  return value === 'true'
}

/**
 * Produce v3+ carries exactly one v2 batch per partition, as Kafka's
 * ProduceRequest.validateRecords checks before the log sees it: a magic above 2 is
 * CORRUPT_MESSAGE (the batch reader refuses it); no whole batch, a second one, or magic 0
 * or 1 is INVALID_RECORD.
 */
function checkBatchFraming(records: Buffer): { errorCode: number; message: string } | null {
  if (records.length < LOG_OVERHEAD)
    return { errorCode: ErrorCode.INVALID_RECORD, message: 'produce v3+ needs at least one record batch' }
  const size = LOG_OVERHEAD + records.readInt32BE(BATCH_LENGTH_OFFSET)
  if (records.length <= MAGIC_OFFSET || records.length < size)
    return {
      errorCode: ErrorCode.INVALID_RECORD,
      message: 'produce v3+ needs at least one whole record batch',
    }
  if (records.length > size)
    return {
      errorCode: ErrorCode.INVALID_RECORD,
      message: 'produce v3+ takes exactly one record batch per partition',
    }
  if (records[MAGIC_OFFSET] !== MAGIC_V2)
    return {
      errorCode: ErrorCode.INVALID_RECORD,
      message: 'produce v3+ takes record batches of magic 2 only',
    }
  return null
}

/** The message for a request whose first batch of some partition has a magic above 2, or null. */
function unknownMagic(records: readonly (Buffer | null)[]): string | null {
  for (const r of records)
    if (r !== null && r.length > MAGIC_OFFSET && r[MAGIC_OFFSET] > MAGIC_V2)
      return `invalid magic ${r[MAGIC_OFFSET]}`
  return null
}

/**
 * Errors Kafka answers without the partition's log start offset (its ReplicaManager's
 * UNKNOWN_LOG_APPEND_INFO cases); every other append error carries it (processFailedRecord).
 */
const NO_LOG_START_ERRORS: ReadonlySet<number> = new Set([
  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
  ErrorCode.NOT_LEADER_OR_FOLLOWER,
  ErrorCode.MESSAGE_TOO_LARGE,
  ErrorCode.RECORD_LIST_TOO_LARGE,
  ErrorCode.CORRUPT_MESSAGE,
  ErrorCode.KAFKA_STORAGE_ERROR,
  ErrorCode.UNKNOWN_TOPIC_ID,
])

/** The log start offset a failed append answers: the hosted partition's, or -1 (see above). */
function logStartOffsetOnFailure(
  context: RequestContext,
  topic: string,
  index: number,
  code: number,
): number {
  if (NO_LOG_START_ERRORS.has(code)) return -1
  const partition = context.broker.replicaManager.getPartition(topic, index)
  return partition?.log.logStartOffset ?? -1
}

function failure(
  index: number,
  errorCode: number,
  message: string | null,
): ProduceResponsePartitionProduceResponse {
  return {
    index,
    errorCode,
    baseOffset: -1n,
    logAppendTimeMs: -1n,
    logStartOffset: -1n,
    recordErrors: [],
    errorMessage: message,
    currentLeader: { leaderId: -1, leaderEpoch: -1 },
  }
}
