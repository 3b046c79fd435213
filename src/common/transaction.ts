/**
 * What the transaction coordinator, the log and the group coordinator agree on, so each
 * can be built and tested on its own side of the boundary.
 */

import type { ProducerId } from './types.js'
/** How a transaction ended; a COMMIT or ABORT control batch in each of its partitions. */
export type TransactionResult = 'commit' | 'abort'

/** A transactional batch's claim, checked before it may open a transaction in a partition. */
export interface TransactionVerificationRequest {
  readonly transactionalId: string
  readonly producerId: ProducerId
  readonly producerEpoch: number
  readonly topic: string
  readonly partition: number
  /**
   * Transaction version 2 (Produce v12, TxnOffsetCommit v5; Kafka's `addPartition`
   * operation): the coordinator adds the partition to the transaction, starting it if
   * needed, instead of only checking it is there.
   */
  readonly addPartition?: boolean
  /**
   * Called before the verifier asks again after CONCURRENT_TRANSACTIONS: the leader starts
   * its verification guard over, since a marker written while it waited voided the old one.
   */
  readonly beforeRetry?: () => void
}

/**
 * KIP-890 part 1: before a transactional batch opens a transaction in a partition, the
 * partition's leader asks the transaction coordinator whether the partition was added to
 * the producer's ongoing transaction (AddPartitionsToTxn v4+ with verify_only). So a late
 * write from a transaction that already timed out and aborted is refused instead of
 * opening a transaction no marker will ever close, which would hang the LSO.
 */
export interface TransactionVerifier {
  /** Kafka's error code: NONE (0) when the partition is (now) in the ongoing transaction. */
  verify(request: TransactionVerificationRequest): Promise<number>
}

/** Told after a COMMIT or ABORT marker is written to a partition led here. */
export type TransactionMarkerListener = (
  topic: string,
  partition: number,
  producerId: ProducerId,
  result: TransactionResult,
) => void
