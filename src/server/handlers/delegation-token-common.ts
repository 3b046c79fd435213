/**
 * What the four delegation token handlers share: Kafka's KafkaApis.allowTokenRequests, and
 * a token's principals on the wire.
 */
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
