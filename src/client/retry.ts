/**
 * Retry policy in one place (as franz-go keeps it): exponential backoff with jitter between
 * retry.backoff.ms and retry.backoff.max.ms (KIP-580), and which failures are worth
 * retrying at all.
 */
import { ConnectionError, KafkaClientError, KafkaProtocolError, RequestTimeoutError } from './errors.js'

export interface BackoffOptions {
  retryBackoffMs: number
  retryBackoffMaxMs: number
}

/** Backoff before attempt `attempt` (1 = first retry): base * 2^(attempt-1), ±20 % jitter, capped. */
export function backoffMs(
  attempt: number,
  options: BackoffOptions,
  random: () => number = Math.random,
): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 30)
  const raw = Math.min(options.retryBackoffMs * 2 ** exponent, options.retryBackoffMaxMs)
  const jitter = 0.8 + random() * 0.4
  return Math.max(0, Math.round(Math.min(raw * jitter, options.retryBackoffMaxMs)))
}

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

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve()
      return
    }
    const timer = setTimeout(done, ms)
    function done(): void {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, { once: true })
  })
}
