/**
 * RenewDelegationToken (key 39, KIP-48).
 * Behavior: moves the expiry of the token the HMAC names to now + renewPeriodMs (the
 * default delegation.token.expiry.time.ms when negative), never past its max timestamp.
 * Refused: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (token-authenticated or unauthenticated
 * connection), DELEGATION_TOKEN_AUTH_DISABLED, DELEGATION_TOKEN_NOT_FOUND,
 * DELEGATION_TOKEN_EXPIRED, DELEGATION_TOKEN_OWNER_MISMATCH (neither owner nor renewer);
 * the expiry timestamp is then -1.
 * Version notes: v1 is v0; v2 is flexible.
 */
import {
  ApiKey,
  type RenewDelegationTokenRequest,
  type RenewDelegationTokenResponse,
} from '../../protocol/generated/index.js'
import { answerExpiryChange } from './delegation-token-common.js'
import type { ApiHandler } from './registry.js'

export const renewDelegationTokenHandler: ApiHandler<
  RenewDelegationTokenRequest,
  RenewDelegationTokenResponse
> = {
  apiKey: ApiKey.RenewDelegationToken,
  minVersion: 0,
  maxVersion: 2,
  handle(context, request) {
    return answerExpiryChange(context, (tokens) =>
      tokens.renew(request.hmac, context.connection.principal, Number(request.renewPeriodMs)),
    )
  },
}
