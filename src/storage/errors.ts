/**
 * Storage outcomes as TidelogErrors whose `code` is the Kafka error name the server maps
 * to a numeric code (OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, ...). A disk failure is
 * KAFKA_STORAGE_ERROR and takes the log offline.
 */
import { TidelogError } from '../common/errors.js'
import type { Offset } from '../common/types.js'

export type StorageErrorCode =
  | 'OFFSET_OUT_OF_RANGE'
  | 'CORRUPT_MESSAGE'
  | 'INVALID_RECORD'
  | 'MESSAGE_TOO_LARGE'
  | 'RECORD_BATCH_TOO_LARGE'
  | 'UNEXPECTED_APPEND_OFFSET'
  | 'INVALID_LEADER_EPOCH'
  | 'INVALID_TIMESTAMP'
  | 'KAFKA_STORAGE_ERROR'
  | 'LOG_CLOSED'

export class StorageError extends TidelogError {
  declare readonly code: StorageErrorCode

  constructor(
    code: StorageErrorCode,
    message: string,
    options: { cause?: unknown; retriable?: boolean } = {},
  ) {
    super(code, message, options)
    this.name = 'StorageError'
  }
}

/**
 * A read reached a segment the cleaner replaced after the read chose it. UnifiedLog
 * retries the read on its current segments; it only escapes when that keeps happening.
 */
export class SegmentReplacedError extends StorageError {
  constructor(readonly baseOffset: Offset) {
    super('KAFKA_STORAGE_ERROR', `segment ${baseOffset} was replaced by a cleaned segment`, {
      retriable: true,
    })
  }
}

/** Times a read starts over when the cleaner replaced a segment under it (once per clean is the norm). */
const READ_RETRIES_MAX = 8

/**
 * Runs a read again when the cleaner swapped a segment under it: the read chose its
 * segments before the swap and found one gone, so it starts over on the current ones.
 */
export async function retryingReplacedSegments<T>(read: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read()
    } catch (err) {
      if (!(err instanceof SegmentReplacedError) || attempt >= READ_RETRIES_MAX) throw err
    }
  }
}

export function offsetOutOfRange(offset: Offset, logStartOffset: Offset, logEndOffset: Offset): StorageError {
  return new StorageError(
    'OFFSET_OUT_OF_RANGE',
    `offset ${offset} is outside [${logStartOffset}, ${logEndOffset}] (logStartOffset, logEndOffset)`,
  )
}

export function storageFailure(what: string, cause: unknown): StorageError {
  return new StorageError('KAFKA_STORAGE_ERROR', `${what}: ${String((cause as Error)?.message ?? cause)}`, {
    cause,
    retriable: true,
  })
}

export function isStorageError(err: unknown, code?: StorageErrorCode): err is StorageError {
  return err instanceof StorageError && (code === undefined || err.code === code)
}

/**
 * A read found a batch on disk that fails its checks (CRC-32C, framing, offsets): disk
 * damage, since every batch was checked before it was written. Nothing from it on is
 * served; the partition decides what to do (a follower truncates it away and refetches, a
 * leader takes its log dir offline). KAFKA_STORAGE_ERROR for the client, which retries.
 */
export class CorruptSegmentError extends StorageError {
  constructor(
    readonly segmentPath: string,
    readonly segmentBaseOffset: Offset,
    /** Byte position in the segment of the first batch that failed. */
    readonly position: number,
    readonly problem: string,
  ) {
    super('KAFKA_STORAGE_ERROR', `corrupt record batch at byte ${position} of ${segmentPath}: ${problem}`, {
      retriable: true,
    })
    this.name = 'CorruptSegmentError'
  }
}
