/**
 * The client's error catalogue. Every error has a stable `code` (documented in the README),
 * a `cause` when another error led to it, and `retriable`: whether the same operation may
 * succeed if tried again. Kafka outcomes arrive as numeric codes in responses and become
 * KafkaProtocolError here, at the edge, once.
 */
import { TidelogError } from '../common/errors.js'
import { ErrorCode, errorMessage, errorName, isRetriable } from '../protocol/error-codes.js'

/** Base class of every error the client throws or rejects with. */
export class KafkaClientError extends TidelogError {
  constructor(code: string, message: string, options: { cause?: unknown; retriable?: boolean } = {}) {
    super(code, message, options)
    this.name = 'KafkaClientError'
  }
}

/** Error codes on which a client must refresh its metadata: the partition's leader moved. */
const STALE_METADATA_CODES: ReadonlySet<number> = new Set([
  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
  ErrorCode.LEADER_NOT_AVAILABLE,
  ErrorCode.NOT_LEADER_OR_FOLLOWER,
  ErrorCode.FENCED_LEADER_EPOCH,
  ErrorCode.UNKNOWN_LEADER_EPOCH,
  ErrorCode.KAFKA_STORAGE_ERROR,
])

export function isStaleMetadataError(errorCode: number): boolean {
  return STALE_METADATA_CODES.has(errorCode)
}

/** A Kafka error code from a response. `code` is `ERR_KAFKA_<NAME>`, e.g. ERR_KAFKA_NOT_LEADER_OR_FOLLOWER. */
export class KafkaProtocolError extends KafkaClientError {
  readonly errorCode: number
  readonly errorName: string

  constructor(errorCode: number, detail?: string | null, cause?: unknown) {
    const name = errorName(errorCode)
    const text = detail ? `${name}: ${detail}` : `${name}: ${errorMessage(errorCode) || 'unknown error'}`
    super(`ERR_KAFKA_${name}`, text, { cause, retriable: isRetriable(errorCode) })
    this.name = 'KafkaProtocolError'
    this.errorCode = errorCode
    this.errorName = name
  }

  /** The partition's leader moved or is unknown: refresh metadata before retrying. */
  get staleMetadata(): boolean {
    return isStaleMetadataError(this.errorCode)
  }
}

/**
 * The broker refused the SASL credentials (SASL_AUTHENTICATION_FAILED), or its SCRAM answer
 * did not prove it knows them. Never retried: the same credentials fail the same way.
 */
export class SaslAuthenticationFailedError extends KafkaProtocolError {
  constructor(detail: string, cause?: unknown) {
    super(ErrorCode.SASL_AUTHENTICATION_FAILED, detail, cause)
    this.name = 'SaslAuthenticationFailedError'
  }
}

/** The TLS handshake failed on the certificates (untrusted, expired, wrong host): not retried. */
export class SslAuthenticationError extends KafkaClientError {
  constructor(message: string, cause?: unknown) {
    super('ERR_SSL_AUTHENTICATION', message, { cause, retriable: false })
    this.name = 'SslAuthenticationError'
  }
}

/** A socket could not be opened, closed under a request, or spoke garbage. */
export class ConnectionError extends KafkaClientError {
  constructor(message: string, cause?: unknown) {
    super('ERR_CONNECTION', message, { cause, retriable: true })
    this.name = 'ConnectionError'
  }
}

/** No response within request.timeout.ms; the connection is closed, as Kafka's clients do. */
export class RequestTimeoutError extends KafkaClientError {
  constructor(message: string) {
    super('ERR_REQUEST_TIMEOUT', message, { retriable: true })
    this.name = 'RequestTimeoutError'
  }
}

/** A record was not acknowledged within delivery.timeout.ms (or ran out of retries); `cause` is the last error. */
export class DeliveryTimeoutError extends KafkaClientError {
  constructor(message: string, cause?: unknown) {
    super('ERR_DELIVERY_TIMEOUT', message, { cause, retriable: false })
    this.name = 'DeliveryTimeoutError'
  }
}

/** The broker lacks an API, or no version both sides speak. */
export class UnsupportedApiError extends KafkaClientError {
  constructor(
    readonly apiName: string,
    message: string,
    code = 'ERR_UNSUPPORTED_API',
  ) {
    super(code, message)
    this.name = 'UnsupportedApiError'
  }
}

/** Consumer groups need FindCoordinator/JoinGroup/...; the broker does not serve them (yet). */
export class GroupsNotSupportedError extends UnsupportedApiError {
  constructor(apiName: string) {
    super(
      apiName,
      `consumer groups are not supported by this broker yet (it does not serve ${apiName})`,
      'ERR_GROUPS_NOT_SUPPORTED',
    )
    this.name = 'GroupsNotSupportedError'
  }
}

/** Waiting for buffer space or for metadata took longer than max.block.ms. */
export class BlockTimeoutError extends KafkaClientError {
  constructor(message: string, cause?: unknown) {
    super('ERR_MAX_BLOCK_TIMEOUT', message, { cause, retriable: true })
    this.name = 'BlockTimeoutError'
  }
}

/** The producer, consumer or admin was closed. */
export class ClientClosedError extends KafkaClientError {
  constructor(what: string) {
    super('ERR_CLIENT_CLOSED', `${what} is closed`)
    this.name = 'ClientClosedError'
  }
}

/** Bad options or arguments from the caller, found at construction or call time. */
export class InvalidArgumentError extends KafkaClientError {
  constructor(message: string) {
    super('ERR_INVALID_ARGUMENT', message)
    this.name = 'InvalidArgumentError'
  }
}

/** A fetched batch failed its CRC or did not decode. */
export class CorruptRecordError extends KafkaClientError {
  constructor(message: string, cause?: unknown) {
    super('ERR_CORRUPT_RECORD', message, { cause })
    this.name = 'CorruptRecordError'
  }
}

/**
 * Another producer with the same transactional id took over (a newer epoch): this one is a
 * zombie and may write nothing more (Java's ProducerFencedException). Fatal: close the
 * producer. `errorCode` is what the broker answered (PRODUCER_FENCED or
 * INVALID_PRODUCER_EPOCH).
 */
export class ProducerFencedError extends KafkaClientError {
  constructor(
    readonly errorCode: number,
    message: string,
  ) {
    super('ERR_PRODUCER_FENCED', message, { retriable: false })
    this.name = 'ProducerFencedError'
  }
}

/** A transactional call not allowed in the producer's state (Java's IllegalStateException / KafkaException). */
export class TransactionStateError extends KafkaClientError {
  constructor(
    /** The producer's TransactionState when the call was refused. */
    readonly state: string,
    message: string,
    cause?: unknown,
  ) {
    super('ERR_TRANSACTION_STATE', message, { cause, retriable: false })
    this.name = 'TransactionStateError'
  }
}

/**
 * The transaction cannot commit (a batch or a transactional request failed: `cause`);
 * abortTransaction() and start again (Java's TransactionAbortableException and the
 * abortable-error state).
 */
export class TransactionAbortableError extends KafkaClientError {
  constructor(message: string, cause: unknown) {
    super('ERR_TRANSACTION_ABORTABLE', message, { cause, retriable: false })
    this.name = 'TransactionAbortableError'
  }
}

/** Wraps anything into a KafkaClientError so callers can rely on `code` and `retriable`. */
export function asClientError(error: unknown): KafkaClientError {
  if (error instanceof KafkaClientError) return error
  if (error instanceof TidelogError) {
    return new KafkaClientError(error.code, error.message, { cause: error, retriable: error.retriable })
  }
  const message = error instanceof Error ? error.message : String(error)
  return new KafkaClientError('ERR_UNEXPECTED', message, { cause: error })
}
