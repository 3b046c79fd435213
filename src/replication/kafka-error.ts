/**
 * A Kafka outcome raised inside the broker (NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE,
 * ...), carried to the handler that turns it into the response's error code. Storage
 * errors carry their Kafka name as `code`; `toErrorCode` maps both kinds once, here.
 */
import { TidelogError } from '../common/errors.js'
import { ErrorCode } from '../protocol/error-codes.js'

export class KafkaError extends TidelogError {
  readonly errorCode: number

  /**
   * Without a stack trace, as Kafka's ApiException: the outcome goes into a response, and a
   * leader answering NOT_LEADER_OR_FOLLOWER for thousands of fetched partitions spent 6.9%
   * of its CPU capturing stacks nobody reads (33,000 partitions, a broker's session lost).
   */
  constructor(errorCode: number, message: string) {
    const stackTraceLimit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    try {
      super(`KAFKA_${errorCode}`, message)
    } finally {
      Error.stackTraceLimit = stackTraceLimit
    }
    this.errorCode = errorCode
    this.name = 'KafkaError'
  }
}

const ERROR_CODE_BY_NAME: Readonly<Record<string, number>> = ErrorCode

/** The Kafka error code for a failure, or null when it is an unexpected (programming) error. */
export function toErrorCode(error: unknown): number | null {
  if (error instanceof KafkaError) return error.errorCode
  if (error instanceof TidelogError) {
    if (error.code === 'RECORD_BATCH_TOO_LARGE') return ErrorCode.RECORD_LIST_TOO_LARGE
    if (error.code === 'LOG_CLOSED') return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if (error.code === 'ERR_CORRUPT_RECORD') return ErrorCode.CORRUPT_MESSAGE
    if (error.code === 'ERR_INVALID_RECORD') return ErrorCode.INVALID_RECORD
    const byName = ERROR_CODE_BY_NAME[error.code]
    if (byName !== undefined) return byName
  }
  return null
}
