/**
 * What an EndTxn (or the coordinator's own abort) does to a transaction, decided before
 * anything is written (the validation half of Kafka's TransactionCoordinator.endTransaction
 * and endTransactionWithTV1). Nothing here does I/O.
 *
 * Transaction version 1: the client names the current epoch; a retry after completion is
 * recognised by the state alone (CompleteCommit answers a commit NONE).
 *
 * Transaction version 2 (KIP-890 part 2): every end bumps the epoch, so "the same epoch"
 * names the next transaction and a retry is recognised by the epoch one below the current
 * one (or the previous producer id after an epoch overflow). Kafka's table for the states
 * with no transaction ongoing (PF: PRODUCER_FENCED, ITS: INVALID_TXN_STATE, EB: written
 * with an epoch bump, NONE: the retry answered without a write):
 *
 * |                | abort retry | abort current | commit retry | commit current |
 * | Empty          | PF          | EB            | PF           | ITS            |
 * | CompleteAbort  | NONE        | EB            | ITS          | ITS            |
 * | CompleteCommit | ITS         | EB            | NONE         | ITS            |
 */

import type { TransactionResult } from '../../common/transaction.js'
import type { ProducerId } from '../../common/types.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { EPOCH_MAX, type TransactionMetadata, TransactionState } from './transaction-metadata.js'

/** Answered without writing anything; `current` when the answer names the producer's id and epoch. */
export interface EndAnswer {
  readonly errorCode: number
  readonly current?: true
}

/** Written: PrepareCommit or PrepareAbort. */
export interface EndWrite {
  readonly nextState: typeof TransactionState.PrepareCommit | typeof TransactionState.PrepareAbort
  /** The coordinator's abort of an ongoing transaction whose epoch it bumped to fence it. */
  readonly isEpochFence: boolean
  /** A TV2 abort with no transaction ongoing (it only bumps the epoch). */
  readonly noPartitionAdded: boolean
}

export type EndDecision = EndAnswer | EndWrite

export interface EndRequest {
  readonly producerId: ProducerId
  readonly producerEpoch: number
  readonly result: TransactionResult
  readonly isFromClient: boolean
}

const ANSWER_INVALID: EndAnswer = { errorCode: ErrorCode.INVALID_TXN_STATE }

function nextStateOf(result: TransactionResult): EndWrite['nextState'] {
  return result === 'commit' ? TransactionState.PrepareCommit : TransactionState.PrepareAbort
}

/** Kafka's endTransactionWithTV1. */
export function decideEndV1(metadata: TransactionMetadata, request: EndRequest): EndDecision {
  const { producerEpoch, result, isFromClient } = request
  if (metadata.producerId !== request.producerId) return { errorCode: ErrorCode.INVALID_PRODUCER_ID_MAPPING }
  // Clients must name the current epoch; the coordinator's own abort names a bumped one.
  if ((isFromClient && producerEpoch !== metadata.producerEpoch) || producerEpoch < metadata.producerEpoch)
    return { errorCode: ErrorCode.PRODUCER_FENCED }
  const isEpochFence = metadata.pendingState === TransactionState.PrepareEpochFence
  if (metadata.pendingState !== null && !isEpochFence) return { errorCode: ErrorCode.CONCURRENT_TRANSACTIONS }
  const commit = result === 'commit'
  switch (metadata.state) {
    case TransactionState.Ongoing:
      return {
        nextState: nextStateOf(result),
        isEpochFence: isEpochFence && !commit,
        noPartitionAdded: false,
      }
    case TransactionState.CompleteCommit:
      return commit ? { errorCode: ErrorCode.NONE } : ANSWER_INVALID
    case TransactionState.CompleteAbort:
      return commit ? ANSWER_INVALID : { errorCode: ErrorCode.NONE }
    case TransactionState.PrepareCommit:
      return commit ? { errorCode: ErrorCode.CONCURRENT_TRANSACTIONS } : ANSWER_INVALID
    case TransactionState.PrepareAbort:
      return commit ? ANSWER_INVALID : { errorCode: ErrorCode.CONCURRENT_TRANSACTIONS }
    default:
      return ANSWER_INVALID
  }
}

/** Kafka's endTransaction for transaction version 2. */
export function decideEndV2(metadata: TransactionMetadata, request: EndRequest): EndDecision {
  const { producerId, producerEpoch, result } = request
  const isEpochFence = metadata.pendingState === TransactionState.PrepareEpochFence
  // A retried EndTxn that overflowed the epoch: the producer has moved to a new id at epoch 0.
  const retryOnOverflow =
    !isEpochFence &&
    metadata.previousProducerId === producerId &&
    producerEpoch === EPOCH_MAX - 1 &&
    metadata.producerEpoch === 0
  // A retried EndTxn whose bump is already in the metadata.
  const retryOnEpochBump = !isEpochFence && metadata.producerEpoch === producerEpoch + 1
  const isRetry = retryOnEpochBump || retryOnOverflow
  if (metadata.producerId !== producerId && !retryOnOverflow)
    return { errorCode: ErrorCode.INVALID_PRODUCER_ID_MAPPING }
  if (!isValidEpochV2(metadata, request, isEpochFence, retryOnEpochBump, retryOnOverflow))
    return { errorCode: ErrorCode.PRODUCER_FENCED }
  if (metadata.pendingState !== null && !isEpochFence) return { errorCode: ErrorCode.CONCURRENT_TRANSACTIONS }
  const commit = result === 'commit'
  const bumpOnly: EndWrite = {
    nextState: TransactionState.PrepareAbort,
    isEpochFence: false,
    noPartitionAdded: true,
  }
  switch (metadata.state) {
    case TransactionState.Ongoing:
      return {
        nextState: nextStateOf(result),
        isEpochFence: isEpochFence && !commit,
        noPartitionAdded: false,
      }
    case TransactionState.CompleteCommit:
      if (commit) return isRetry ? { errorCode: ErrorCode.NONE, current: true } : ANSWER_INVALID
      return isRetry ? ANSWER_INVALID : bumpOnly
    case TransactionState.CompleteAbort:
      if (commit) return ANSWER_INVALID
      return isRetry ? { errorCode: ErrorCode.NONE, current: true } : bumpOnly
    case TransactionState.PrepareCommit:
      return commit ? { errorCode: ErrorCode.CONCURRENT_TRANSACTIONS } : ANSWER_INVALID
    case TransactionState.PrepareAbort:
      return commit ? ANSWER_INVALID : { errorCode: ErrorCode.CONCURRENT_TRANSACTIONS }
    case TransactionState.Empty:
      return commit ? ANSWER_INVALID : bumpOnly
    default:
      return ANSWER_INVALID
  }
}

/**
 * With TV2 the state and the same epoch do not make a retry: the same epoch is the next
 * transaction's. A higher epoch than expected is fenced too (Kafka answers PRODUCER_FENCED
 * even where it could mean an invalid transition).
 */
function isValidEpochV2(
  metadata: TransactionMetadata,
  request: EndRequest,
  isEpochFence: boolean,
  retryOnEpochBump: boolean,
  retryOnOverflow: boolean,
): boolean {
  const { producerEpoch, isFromClient } = request
  if (isEpochFence)
    return (
      (!isFromClient || producerEpoch === metadata.producerEpoch) && producerEpoch >= metadata.producerEpoch
    )
  switch (metadata.state) {
    case TransactionState.PrepareCommit:
    case TransactionState.PrepareAbort:
      return retryOnEpochBump
    case TransactionState.CompleteCommit:
    case TransactionState.CompleteAbort:
      return retryOnEpochBump || retryOnOverflow || producerEpoch === metadata.producerEpoch
    default:
      return producerEpoch === metadata.producerEpoch
  }
}
