/**
 * SaslHandshake (key 17).
 * Behavior: on a SASL listener before authentication, picks the mechanism (one of
 * sasl.enabled.mechanisms; otherwise UNSUPPORTED_SASL_MECHANISM with the enabled list, and
 * the connection closes). After authentication it begins a KIP-368 re-authentication
 * when connections.max.reauth.ms is set (same mechanism; ILLEGAL_SASL_STATE otherwise). On a
 * PLAINTEXT or SSL listener it answers ILLEGAL_SASL_STATE, as KafkaApis does.
 * Version notes: v0 means the tokens that follow come bare, without SaslAuthenticate
 * (KIP-43); v1 means they come in SaslAuthenticate requests (KIP-152).
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type SaslHandshakeRequest,
  type SaslHandshakeResponse,
} from '../../protocol/generated/index.js'
import type { ApiHandler } from './registry.js'

export const saslHandshakeHandler: ApiHandler<SaslHandshakeRequest, SaslHandshakeResponse> = {
  apiKey: ApiKey.SaslHandshake,
  minVersion: 0,
  maxVersion: 1,
  handle(context, request) {
    const sasl = context.connection.sasl
    if (sasl === null) return { errorCode: ErrorCode.ILLEGAL_SASL_STATE, mechanisms: [] }
    return sasl.handshake(request.mechanism, context.apiVersion)
  },
}
