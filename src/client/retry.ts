/**
 * Retry policy in one place (as franz-go keeps it): which failures are worth retrying at
 * all, and a clock-driven sleep. The delays themselves are KIP-580's exponential backoff
 * between retry.backoff.ms and retry.backoff.max.ms: `KafkaClient.backoff`, one
 * `ExponentialBackoff` (src/common/backoff.ts) per client.
 */
import type { Clock } from '../common/clock.js'
import { ConnectionError, KafkaClientError, KafkaProtocolError, RequestTimeoutError } from './errors.js'

/** Whether trying the same request again may succeed. */
export function isRetriableError(error: unknown): boolean {
  if (error instanceof ConnectionError || error instanceof RequestTimeoutError) return true
  if (error instanceof KafkaProtocolError) return error.retriable || error.staleMetadata
  return error instanceof KafkaClientError && error.retriable
}

/** Whether the failure means the leader may have moved (refresh metadata before retrying). */
export function needsMetadataRefresh(error: unknown): boolean {
  if (error instanceof ConnectionError || error instanceof RequestTimeoutError) return true
  return error instanceof KafkaProtocolError && error.staleMetadata
}

/** Resolves after `ms` on `clock`, or at once when `signal` aborts. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve()
      return
    }
    const timer = clock.setTimeout(done, ms)
    function done(): void {
      timer.cancel()
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, { once: true })
  })
}
