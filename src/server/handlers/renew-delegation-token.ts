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
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type RenewDelegationTokenRequest,
  type RenewDelegationTokenResponse,
} from '../../protocol/generated/index.js'
import { allowTokenRequests, ERROR_TIMESTAMP_MS } from './delegation-token-common.js'
import type { ApiHandler } from './registry.js'

export const renewDelegationTokenHandler: ApiHandler<
  RenewDelegationTokenRequest,
  RenewDelegationTokenResponse
> = {
  apiKey: ApiKey.RenewDelegationToken,
  minVersion: 0,
  maxVersion: 2,
  async handle(context, request) {
    const refuse = (errorCode: number) => ({
      errorCode,
      expiryTimestampMs: ERROR_TIMESTAMP_MS,
      throttleTimeMs: 0,
    })
    if (!allowTokenRequests(context)) return refuse(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    const tokens = context.broker.delegationTokens
    if (tokens === undefined || !tokens.enabled) return refuse(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
    const update = await tokens.renew(
      request.hmac,
      context.connection.principal,
      Number(request.renewPeriodMs),
    )
    if (update.errorCode !== ErrorCode.NONE) return refuse(update.errorCode)
    return {
      errorCode: ErrorCode.NONE,
      expiryTimestampMs: BigInt(update.expiryTimestampMs),
      throttleTimeMs: 0,
    }
  },
}
