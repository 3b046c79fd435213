/**
 * Errors of group membership. A commit the group refused (the member's generation is
 * over, it is unknown, or a rebalance is completing) is a CommitFailedError: a
 * KafkaProtocolError with the coordinator's error code, so `code` stays
 * `ERR_KAFKA_<NAME>` and `errorCode` the number, plus the partitions that failed.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import { ConnectionError, KafkaProtocolError, RequestTimeoutError } from '../errors.js'
import type { TopicPartition } from '../leader-requests.js'

export class CommitFailedError extends KafkaProtocolError {
  readonly partitions: TopicPartition[]

  constructor(errorCode: number, detail: string, partitions: readonly TopicPartition[]) {
    super(errorCode, `commit failed: ${detail}`)
    this.name = 'CommitFailedError'
    this.partitions = [...partitions]
  }
}

/** The coordinator moved or is down: look it up again. */
export const COORDINATOR_GONE: ReadonlySet<number> = new Set([
  ErrorCode.NOT_COORDINATOR,
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
])

/** The coordinator no longer knows this member or its epoch (KIP-848 and share groups): rejoin. */
export const MEMBER_FENCED: ReadonlySet<number> = new Set([
  ErrorCode.FENCED_MEMBER_EPOCH,
  ErrorCode.UNKNOWN_MEMBER_ID,
])

/** A failure that a new coordinator lookup may cure. */
export function coordinatorLost(error: unknown): boolean {
  if (error instanceof ConnectionError || error instanceof RequestTimeoutError) return true
  return error instanceof KafkaProtocolError && COORDINATOR_GONE.has(error.errorCode)
}
