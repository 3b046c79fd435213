/**
 * ExpireDelegationToken (key 40, KIP-48).
 * Behavior: moves the expiry of the token the HMAC names to now + expiryTimePeriodMs,
 * never past its max timestamp; a time in the past (a negative period) deletes the token
 * at once. Refused as RenewDelegationToken is; the expiry timestamp is then -1.
 * Version notes: v1 is v0; v2 is flexible.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ExpireDelegationTokenRequest,
  type ExpireDelegationTokenResponse,
} from '../../protocol/generated/index.js'
import { allowTokenRequests, ERROR_TIMESTAMP_MS } from './delegation-token-common.js'
import type { ApiHandler } from './registry.js'

export const expireDelegationTokenHandler: ApiHandler<
  ExpireDelegationTokenRequest,
  ExpireDelegationTokenResponse
> = {
  apiKey: ApiKey.ExpireDelegationToken,
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
    const update = await tokens.expire(
      request.hmac,
      context.connection.principal,
      Number(request.expiryTimePeriodMs),
    )
    if (update.errorCode !== ErrorCode.NONE) return refuse(update.errorCode)
    return {
      errorCode: ErrorCode.NONE,
      expiryTimestampMs: BigInt(update.expiryTimestampMs),
      throttleTimeMs: 0,
    }
  },
}
