/**
 * What the four delegation token handlers share: Kafka's KafkaApis.allowTokenRequests, the
 * answer of a renewal or an expiry, and a token's principals on the wire.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import type { DelegationTokenStore, TokenUpdate } from '../../security/delegation-tokens.js'
import type { KafkaPrincipal } from '../../security/principal.js'
import type { RequestContext } from '../request-context.js'

/**
 * Kafka refuses token requests (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED) from a connection
 * authenticated with a token, and from one not authenticated at all: PLAINTEXT, or SSL
 * without a client certificate (principal ANONYMOUS).
 */
export function allowTokenRequests(context: RequestContext): boolean {
  const principal = context.connection.principal
  if (principal.tokenAuthenticated === true) return false
  return context.connection.sasl !== null || principal.name !== 'ANONYMOUS'
}

/** Kafka's ErrorTimestamp: the timestamps of a refused token request. */
export const ERROR_TIMESTAMP_MS = -1n

export function principalOf(principalType: string, principalName: string): KafkaPrincipal {
  return { type: principalType as 'User', name: principalName }
}

/** Renew and Expire answer alike: the new expiry, or an error with the error timestamp. */
export async function answerExpiryChange(
  context: RequestContext,
  change: (tokens: DelegationTokenStore) => Promise<TokenUpdate>,
): Promise<{ errorCode: number; expiryTimestampMs: bigint; throttleTimeMs: number }> {
  const refuse = (errorCode: number) => ({
    errorCode,
    expiryTimestampMs: ERROR_TIMESTAMP_MS,
    throttleTimeMs: 0,
  })
  if (!allowTokenRequests(context)) return refuse(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
  const tokens = context.broker.delegationTokens
  if (tokens === undefined || !tokens.enabled) return refuse(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
  const update = await change(tokens)
  if (update.errorCode !== ErrorCode.NONE) return refuse(update.errorCode)
  return { errorCode: ErrorCode.NONE, expiryTimestampMs: BigInt(update.expiryTimestampMs), throttleTimeMs: 0 }
}
