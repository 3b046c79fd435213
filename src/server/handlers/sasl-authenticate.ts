/**
 * SaslAuthenticate (key 36).
 * Behavior: one token of the mechanism chosen by SaslHandshake v1, answered with the
 * server's token. A failed exchange answers SASL_AUTHENTICATION_FAILED with Kafka's message
 * and the connection closes after connection.failed.authentication.delay.ms. Outside a
 * pending exchange it answers ILLEGAL_SASL_STATE (KafkaApis).
 * Version notes: v1 adds sessionLifetimeMs (KIP-368: connections.max.reauth.ms, or less
 * for an OAUTHBEARER token that expires sooner; 0 when not set); a v0 client cannot
 * re-authenticate and is disconnected once its session expires. v2 is flexible.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type SaslAuthenticateRequest,
  type SaslAuthenticateResponse,
} from '../../protocol/generated/index.js'
import type { ApiHandler } from './registry.js'

export const saslAuthenticateHandler: ApiHandler<SaslAuthenticateRequest, SaslAuthenticateResponse> = {
  apiKey: ApiKey.SaslAuthenticate,
  minVersion: 0,
  maxVersion: 2,
  async handle(context, request) {
    const sasl = context.connection.sasl
    if (sasl === null || sasl.isComplete)
      return {
        errorCode: ErrorCode.ILLEGAL_SASL_STATE,
        errorMessage: 'SaslAuthenticate request received after successful authentication',
        authBytes: Buffer.alloc(0),
        sessionLifetimeMs: 0n,
      }
    return sasl.authenticate(request.authBytes, context.apiVersion)
  },
}
