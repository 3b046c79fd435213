/**
 * ExpireDelegationToken (key 40, KIP-48).
 * Behavior: moves the expiry of the token the HMAC names to now + expiryTimePeriodMs,
 * never past its max timestamp; a time in the past (a negative period) deletes the token
 * at once. Refused as RenewDelegationToken is; the expiry timestamp is then -1.
 * Version notes: v1 is v0; v2 is flexible.
 */
import {
  ApiKey,
  type ExpireDelegationTokenRequest,
  type ExpireDelegationTokenResponse,
} from '../../protocol/generated/index.js'
import { answerExpiryChange } from './delegation-token-common.js'
import type { ApiHandler } from './registry.js'

export const expireDelegationTokenHandler: ApiHandler<
  ExpireDelegationTokenRequest,
  ExpireDelegationTokenResponse
> = {
  apiKey: ApiKey.ExpireDelegationToken,
  minVersion: 0,
  maxVersion: 2,
  handle(context, request) {
    return answerExpiryChange(context, (tokens) =>
      tokens.expire(request.hmac, context.connection.principal, Number(request.expiryTimePeriodMs)),
    )
  },
}
