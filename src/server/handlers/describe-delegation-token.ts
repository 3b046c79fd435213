/**
 * DescribeDelegationToken (key 41, KIP-48).
 * Behavior: the live tokens the requester may see (Kafka's DelegationTokenManager
 * filterToken): those it owns, requested or may renew, those of owners it has
 * DESCRIBE_TOKENS on, and those it has DESCRIBE on (DELEGATION_TOKEN resource); `owners`
 * null lists all of them, else those whose owner or a renewer is named (an empty list:
 * none). Refused: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, DELEGATION_TOKEN_AUTH_DISABLED.
 * Version notes: v1 is v0; v2 is flexible; v3 adds the token requester.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DescribeDelegationTokenRequest,
  type DescribeDelegationTokenResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import type { DelegationToken } from '../../security/delegation-tokens.js'
import { principalText } from '../../security/principal.js'
import { allowTokenRequests } from './delegation-token-common.js'
import type { ApiHandler } from './registry.js'

export const describeDelegationTokenHandler: ApiHandler<
  DescribeDelegationTokenRequest,
  DescribeDelegationTokenResponse
> = {
  apiKey: ApiKey.DescribeDelegationToken,
  minVersion: 0,
  maxVersion: 3,
  async handle(context, request) {
    const refuse = (errorCode: number) => ({ errorCode, tokens: [], throttleTimeMs: 0 })
    if (!allowTokenRequests(context)) return refuse(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    const store = context.broker.delegationTokens
    if (store === undefined || !store.enabled) return refuse(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
    const requester = `User:${context.connection.principal.name}`
    const owners = request.owners?.map((o) => `${o.principalType}:${o.principalName}`) ?? null
    const involved = (token: DelegationToken, principal: string) =>
      principalText(token.owner) === principal ||
      principalText(token.requester) === principal ||
      token.renewers.some((r) => principalText(r) === principal)
    const visible = (token: DelegationToken) =>
      (owners === null || owners.some((owner) => involved(token, owner))) &&
      (involved(token, requester) ||
        context.authorize(AclOperation.DESCRIBE_TOKENS, ResourceType.USER, principalText(token.owner)) ||
        context.authorize(AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.tokenId))
    const tokens = (await store.list())
      .filter(visible)
      .sort((a, b) => a.issueTimestampMs - b.issueTimestampMs)
    return {
      errorCode: ErrorCode.NONE,
      tokens: tokens.map((t) => ({
        principalType: t.owner.type,
        principalName: t.owner.name,
        tokenRequesterPrincipalType: t.requester.type,
        tokenRequesterPrincipalName: t.requester.name,
        issueTimestamp: BigInt(t.issueTimestampMs),
        expiryTimestamp: BigInt(t.expiryTimestampMs),
        maxTimestamp: BigInt(t.maxTimestampMs),
        tokenId: t.tokenId,
        hmac: t.hmac,
        renewers: t.renewers.map((r) => ({ principalType: r.type, principalName: r.name })),
      })),
      throttleTimeMs: 0,
    }
  },
}
