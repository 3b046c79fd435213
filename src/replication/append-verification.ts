/**
 * KIP-890 part 1 on the leader (Kafka's ReplicaManager.appendRecords with transaction
 * verification): a transactional batch from a producer with no transaction open in the
 * partition is first verified with the transaction coordinator (is the partition in its
 * ongoing transaction?), then appended holding the producer state's verification guard,
 * which a marker written meanwhile voids. The coordinator's answers become Kafka's produce
 * errors: not in the transaction is INVALID_TXN_STATE; the coordinator unreachable,
 * loading, moved or busy (CONCURRENT_TRANSACTIONS) is NOT_ENOUGH_REPLICAS, which clients
 * retry without a metadata refresh. Without a coordinator such batches are refused
 * (INVALID_TXN_STATE). Verified appends of one partition and producer run in arrival order.
 */

import type { TransactionVerifier } from '../common/transaction.js'
import type { ProducerId } from '../common/types.js'
import { BatchHeader, RECORD_BATCH_OVERHEAD } from '../protocol/batch-header.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { KafkaError } from './kafka-error.js'
import type { LeaderAppend, Partition } from './partition.js'
import { UNVERIFIED } from './producer-state.js'

/** How a produce's records are checked before they may open a transaction. */
export interface TransactionVerification {
  /**
   * transaction.partition.verification.enable, as the broker's dynamic config has it;
   * asked only for transactional records.
   */
  readonly enabled: () => boolean
  /** The transaction coordinator's side; undefined on a broker without one. */
  readonly verifier: TransactionVerifier | undefined
  /** The produce request's transactional id. */
  readonly transactionalId: string | null
  /**
   * Transaction version 2 (Produce v12): the coordinator adds the partition to the
   * transaction. Done whether or not verification is enabled, as Kafka does: the producer
   * relies on it.
   */
  readonly addPartition?: boolean
}

/**
 * A refusal from the verification, which Kafka answers before the append (so without the
 * log start offset, like its UNKNOWN_LOG_APPEND_INFO cases).
 */
export class TransactionVerificationError extends KafkaError {}

/** The producer of a transactional produce (a request's batches share one producer). */
export function transactionalProducer(
  records: Buffer,
): { producerId: ProducerId; producerEpoch: number } | undefined {
  if (records.length < RECORD_BATCH_OVERHEAD) return undefined
  const header = new BatchHeader(records, 0)
  if (header.magic !== 2 || !header.isTransactional || header.isControl) return undefined
  return { producerId: header.producerId, producerEpoch: header.producerEpoch }
}

/** Appends on the leader under a verification guard; the replica manager's, one per broker. */
export class AppendVerification {
  /**
   * Verified appends waiting their turn, per partition and producer: a producer's requests
   * reach the log in arrival order (its sequences), other producers do not wait for it.
   */
  private readonly tails = new WeakMap<Partition, Map<ProducerId, Promise<unknown>>>()

  /**
   * Runs `append` with the guard the records need: none for a non-transactional produce,
   * Kafka's sentinel for a transaction already open here (should a marker end it before
   * the records reach the log, they are refused instead of opening a transaction nobody
   * verified), and a verified guard after asking the coordinator otherwise. `partition` is
   * undefined when not hosted: the append answers the error without asking the coordinator.
   */
  append<R>(
    partition: Partition | undefined,
    records: Buffer,
    verification: TransactionVerification,
    target: { topic: string; partition: number },
    append: (leaderAppend: LeaderAppend) => Promise<R>,
  ): Promise<R> {
    const producer = transactionalProducer(records)
    const addPartition = verification.addPartition === true
    const enabled = producer !== undefined && (addPartition || verification.enabled())
    const direct = () => append(enabled ? { verificationGuard: UNVERIFIED } : {})
    // Kafka refuses transactional records without a transactional id (its authorization step).
    if (producer !== undefined && verification.transactionalId === null)
      return Promise.reject(
        new KafkaError(
          ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
          'transactional records need a transactional id',
        ),
      )
    const state = partition?.producerState
    // Not the leader: the append answers NOT_LEADER_OR_FOLLOWER without asking the coordinator.
    const verifying =
      partition?.isLeader === true &&
      state !== undefined &&
      producer !== undefined &&
      enabled &&
      (state.needsVerification(producer.producerId, producer.producerEpoch) ||
        this.tails.get(partition)?.has(producer.producerId) === true)
    if (!verifying) return direct()
    let producerTails = this.tails.get(partition)
    if (producerTails === undefined) {
      producerTails = new Map()
      this.tails.set(partition, producerTails)
    }
    const tails = producerTails
    const previous = tails.get(producer.producerId) ?? Promise.resolve()
    // Resolves once the append is handed to the log (its place in the order taken), with the
    // append's own promise inside, so the next one waits for that and not for replication.
    const started = previous.then(async (): Promise<{ appended: Promise<R> }> => {
      // Its state may have been reloaded (truncation) while it waited: ask it again.
      if (!state.needsVerification(producer.producerId, producer.producerEpoch)) return { appended: direct() }
      let guard = state.beginVerification(producer.producerId, producer.producerEpoch)
      const verifier = verification.verifier
      if (verifier === undefined)
        throw new KafkaError(
          ErrorCode.INVALID_TXN_STATE,
          'no transaction coordinator to verify the partition with',
        )
      const code = await verifier.verify({
        transactionalId: verification.transactionalId ?? '',
        producerId: producer.producerId,
        producerEpoch: producer.producerEpoch,
        topic: target.topic,
        partition: target.partition,
        addPartition,
        // A retried add starts over with a new guard, as Kafka's leader retries the whole
        // append: the previous transaction's marker, written while it waited, voided the old.
        beforeRetry: () => {
          guard = state.beginVerification(producer.producerId, producer.producerEpoch)
        },
      })
      if (code !== ErrorCode.NONE) throw verificationError(code)
      return { appended: append({ verificationGuard: guard }) }
    })
    // The next verified append waits for this one to reach the log, not for its replication.
    const tail = started.then(
      () => undefined,
      () => undefined,
    )
    tails.set(producer.producerId, tail)
    void tail.then(() => {
      if (tails.get(producer.producerId) === tail) tails.delete(producer.producerId)
    })
    return started.then(({ appended }) => appended)
  }
}

/** Kafka's translation of the coordinator's answer into a produce error. */
function verificationError(code: number): TransactionVerificationError {
  switch (code) {
    case ErrorCode.INVALID_TXN_STATE:
    case ErrorCode.TRANSACTION_ABORTABLE:
      return new TransactionVerificationError(code, 'Partition was not added to the transaction')
    case ErrorCode.NETWORK_EXCEPTION:
    case ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
    case ErrorCode.COORDINATOR_NOT_AVAILABLE:
    case ErrorCode.NOT_COORDINATOR:
    case ErrorCode.CONCURRENT_TRANSACTIONS:
      return new TransactionVerificationError(
        ErrorCode.NOT_ENOUGH_REPLICAS,
        `Unable to verify the partition has been added to the transaction. Underlying error: ${errorName(code)}`,
      )
    default:
      return new TransactionVerificationError(code, 'transaction verification failed')
  }
}

function errorName(code: number): string {
  for (const [name, value] of Object.entries(ErrorCode)) if (value === code) return name
  return String(code)
}
