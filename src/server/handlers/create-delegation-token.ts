/**
 * CreateDelegationToken (key 38, KIP-48).
 * Behavior: a token for the requester, or (v3) for the owner it names, renewable by the
 * renewers it lists, stored in the metadata store (security/delegation-tokens.ts). Refused
 * in Kafka's order: a connection that may not ask (token-authenticated, PLAINTEXT, SSL
 * without a certificate) DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; another owner without
 * CREATE_TOKENS on it DELEGATION_TOKEN_AUTHORIZATION_FAILED; a renewer not of type User
 * INVALID_PRINCIPAL_TYPE; no delegation.token.secret.key DELEGATION_TOKEN_AUTH_DISABLED.
 * maxLifetimeMs <= 0 takes delegation.token.max.lifetime.ms; larger ones are capped by it.
 * Version notes: v1 is v0 (throttle on quota violation); v2 is flexible; v3 adds the owner
 * and the requester.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type CreateDelegationTokenRequest,
  type CreateDelegationTokenResponse,
} from '../../protocol/generated/index.js'
import { AclOperation, ResourceType } from '../../security/authorizer/acl.js'
import { type KafkaPrincipal, principalText } from '../../security/principal.js'
import { allowTokenRequests, ERROR_TIMESTAMP_MS, principalOf } from './delegation-token-common.js'
import type { ApiHandler } from './registry.js'

export const createDelegationTokenHandler: ApiHandler<
  CreateDelegationTokenRequest,
  CreateDelegationTokenResponse
> = {
  apiKey: ApiKey.CreateDelegationToken,
  minVersion: 0,
  maxVersion: 3,
  async handle(context, request) {
    const requester = context.connection.principal
    const named = context.apiVersion >= 3 ? request.ownerPrincipalName : null
    const owner: KafkaPrincipal =
      named === null || named === ''
        ? { type: 'User', name: requester.name }
        : principalOf(request.ownerPrincipalType ?? 'User', named)
    const refuse = (errorCode: number) => refused(errorCode, owner, requester)
    if (!allowTokenRequests(context)) return refuse(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    if (
      principalText(owner) !== `User:${requester.name}` &&
      !context.authorize(AclOperation.CREATE_TOKENS, ResourceType.USER, principalText(owner))
    ) {
      return refuse(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
    }
    if (request.renewers.some((r) => r.principalType !== 'User'))
      return refuse(ErrorCode.INVALID_PRINCIPAL_TYPE)
    const tokens = context.broker.delegationTokens
    if (tokens === undefined || !tokens.enabled) return refuse(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
    const token = await tokens.create(
      owner,
      { type: 'User', name: requester.name },
      request.renewers.map((r) => principalOf(r.principalType, r.principalName)),
      Number(request.maxLifetimeMs),
    )
    return {
      errorCode: ErrorCode.NONE,
      principalType: token.owner.type,
      principalName: token.owner.name,
      tokenRequesterPrincipalType: token.requester.type,
      tokenRequesterPrincipalName: token.requester.name,
      issueTimestampMs: BigInt(token.issueTimestampMs),
      expiryTimestampMs: BigInt(token.expiryTimestampMs),
      maxTimestampMs: BigInt(token.maxTimestampMs),
      tokenId: token.tokenId,
      hmac: token.hmac,
      throttleTimeMs: 0,
    }
  },
}

function refused(
  errorCode: number,
  owner: KafkaPrincipal,
  requester: KafkaPrincipal,
): CreateDelegationTokenResponse {
  return {
    errorCode,
    principalType: owner.type,
    principalName: owner.name,
    tokenRequesterPrincipalType: requester.type,
    tokenRequesterPrincipalName: requester.name,
    issueTimestampMs: ERROR_TIMESTAMP_MS,
    expiryTimestampMs: ERROR_TIMESTAMP_MS,
    maxTimestampMs: ERROR_TIMESTAMP_MS,
    tokenId: '',
    hmac: Buffer.alloc(0),
    throttleTimeMs: 0,
  }
}
