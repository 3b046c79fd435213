/**
 * The server side of SASL on one connection, as Kafka's SaslServerAuthenticator runs it:
 * ApiVersions and SaslHandshake first; after a handshake only SaslAuthenticate (v1
 * handshake), or raw length-prefixed tokens (v0 handshake, KIP-43's old clients), until the
 * mechanism completes. Anything else before then closes the connection; a failed exchange
 * answers SASL_AUTHENTICATION_FAILED and closes it after
 * connection.failed.authentication.delay.ms.
 */
import { timingSafeEqual } from 'node:crypto'
import type { Clock } from '../common/clock.js'
import type { ConfigValue } from '../common/config-def.js'
import { ConfigError } from '../common/errors.js'
import type { Random } from '../common/random.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { ApiKey } from '../protocol/generated/index.js'
import type { DelegationTokenStore } from './delegation-tokens.js'
import { parseJaasConfig } from './jaas.js'
import type { JwtValidatorSettings } from './jwt-validator.js'
import { OAuthBearerServer, type OAuthBearerValidation, unsecuredValidatorOptions } from './oauthbearer.js'
import type { KafkaPrincipal } from './principal.js'
import { SaslAuthenticationError } from './sasl-errors.js'
import { SCRAM_MECHANISMS, type ScramMechanism, ScramServer } from './scram.js'
import type { ScramCredentialStore } from './scram-credentials.js'
import { listenerValue, mechanismValue, type SecurityConfigSource } from './security-config.js'

export const SASL_MECHANISMS = ['PLAIN', ...SCRAM_MECHANISMS, 'OAUTHBEARER'] as const
export type SaslMechanism = (typeof SASL_MECHANISMS)[number]

const PLAIN_LOGIN_MODULE = 'org.apache.kafka.common.security.plain.PlainLoginModule'
const OAUTHBEARER_LOGIN_MODULE = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule'

/** What a SASL listener authenticates with, built once per listener at startup. */
export interface SaslListenerSettings {
  readonly listener: string
  readonly mechanisms: readonly SaslMechanism[]
  /** PLAIN's users (JAAS `user_<name>="<password>"`); empty when PLAIN is off. */
  readonly plainUsers: ReadonlyMap<string, string>
  readonly scramCredentials: ScramCredentialStore
  /** Delegation tokens for SCRAM logins with tokenauth=true; absent: such logins fail. */
  readonly delegationTokens?: DelegationTokenStore
  readonly random: Random
  /** How OAUTHBEARER tokens are checked; null when OAUTHBEARER is off. */
  readonly oauthBearer: OAuthBearerValidation | null
  /** Token expiry (OAUTHBEARER). */
  readonly clock: Clock
  /** sasl.server.max.receive.size: the largest frame read before authentication. */
  readonly maxReceiveBytes: number
  readonly failedAuthenticationDelayMs: number
  /** connections.max.reauth.ms: session lifetime (KIP-368); 0 keeps sessions for ever. */
  readonly reauthMs: number
}

export function jaasProperty(listener: string, mechanism: string): string {
  return `listener.name.${listener.toLowerCase()}.${mechanism.toLowerCase()}.sasl.jaas.config`
}

export function saslListenerSettings(
  config: SecurityConfigSource,
  listener: string,
  scramCredentials: ScramCredentialStore,
  random: Random,
  clock: Clock,
  /** The key set of sasl.oauthbearer.jwks.endpoint.url, loaded by the caller, for signed tokens. */
  jwtKeys: JwtValidatorSettings['keys'] | null = null,
): SaslListenerSettings {
  const value = (name: string): ConfigValue => listenerValue(config, listener, name)
  const enabled = (value('sasl.enabled.mechanisms') as string[]).map((m) => m.toUpperCase())
  if (enabled.length === 0) throw new ConfigError(`listener ${listener}: sasl.enabled.mechanisms is empty`)
  for (const mechanism of enabled)
    if (!(SASL_MECHANISMS as readonly string[]).includes(mechanism))
      throw new ConfigError(
        `listener ${listener}: SASL mechanism ${mechanism} is not supported (sasl.enabled.mechanisms may name ${SASL_MECHANISMS.join(', ')})`,
      )
  const plainUsers = new Map<string, string>()
  if (enabled.includes('PLAIN')) {
    const property = jaasProperty(listener, 'PLAIN')
    const text = config.listenerOverrides.get(property) as string | undefined
    if (text === undefined)
      throw new ConfigError(
        `listener ${listener}: PLAIN needs ${property} (${PLAIN_LOGIN_MODULE} required user_<name>="<password>";)`,
      )
    const entry = parseJaasConfig(text, property)
    if (entry.loginModule !== PLAIN_LOGIN_MODULE)
      throw new ConfigError(`${property}: expected ${PLAIN_LOGIN_MODULE}, got ${entry.loginModule}`)
    for (const [key, password] of entry.options)
      if (key.startsWith('user_')) plainUsers.set(key.slice(5), password)
  }
  let oauthBearer: OAuthBearerValidation | null = null
  if (enabled.includes('OAUTHBEARER') && usesSignedTokens(config, listener)) {
    if (jwtKeys === null)
      throw new ConfigError(
        `listener ${listener}: signed OAUTHBEARER tokens need sasl.oauthbearer.jwks.endpoint.url`,
      )
    const v = (name: string): ConfigValue => mechanismValue(config, listener, 'OAUTHBEARER', name)
    oauthBearer = {
      kind: 'signed',
      settings: {
        keys: jwtKeys,
        expectedIssuer: (v('sasl.oauthbearer.expected.issuer') as string | null) || null,
        expectedAudience: (v('sasl.oauthbearer.expected.audience') as string[] | null) ?? [],
        subClaimName: v('sasl.oauthbearer.sub.claim.name') as string,
        scopeClaimName: v('sasl.oauthbearer.scope.claim.name') as string,
        clockSkewMs: (v('sasl.oauthbearer.clock.skew.seconds') as number) * 1000,
      },
    }
  } else if (enabled.includes('OAUTHBEARER')) {
    const property = jaasProperty(listener, 'OAUTHBEARER')
    const text = config.listenerOverrides.get(property) as string | undefined
    if (text === undefined)
      throw new ConfigError(
        `listener ${listener}: OAUTHBEARER needs ${property} (${OAUTHBEARER_LOGIN_MODULE} required;)`,
      )
    const entry = parseJaasConfig(text, property)
    if (entry.loginModule !== OAUTHBEARER_LOGIN_MODULE)
      throw new ConfigError(`${property}: expected ${OAUTHBEARER_LOGIN_MODULE}, got ${entry.loginModule}`)
    try {
      oauthBearer = { kind: 'unsecured', ...unsecuredValidatorOptions(entry.options) }
    } catch (error) {
      throw new ConfigError(`${property}: ${(error as Error).message}`)
    }
  }
  return {
    listener,
    mechanisms: enabled as SaslMechanism[],
    plainUsers,
    scramCredentials,
    random,
    oauthBearer,
    clock,
    maxReceiveBytes: value('sasl.server.max.receive.size') as number,
    failedAuthenticationDelayMs: value('connection.failed.authentication.delay.ms') as number,
    reauthMs: value('connections.max.reauth.ms') as number,
  }
}

const SIGNED_TOKEN_HANDLERS = [
  'org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler',
  'org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler',
]

/** Kafka checks signed OAUTHBEARER tokens when the listener's callback handler says so. */
export function usesSignedTokens(config: SecurityConfigSource, listener: string): boolean {
  const handler = mechanismValue(config, listener, 'OAUTHBEARER', 'sasl.server.callback.handler.class') as
    | string
    | null
  if (handler === null || handler === '') return false
  if (!SIGNED_TOKEN_HANDLERS.includes(handler))
    throw new ConfigError(
      `sasl.server.callback.handler.class ${handler} is not supported (${SIGNED_TOKEN_HANDLERS[0]})`,
    )
  return true
}

export type SaslState =
  | 'handshake'
  | 'authenticate'
  | 'raw-authenticate'
  | 'complete'
  | 'reauthenticate'
  | 'failed'

interface Mechanism {
  evaluate(token: Buffer): Promise<{ challenge: Buffer; complete: boolean }>
  readonly username: string
  /** When the credential itself expires (an OAUTHBEARER token's exp), if it does. */
  readonly expiresAtMs?: number
}

export interface AuthenticateOutcome {
  readonly errorCode: number
  readonly errorMessage: string | null
  readonly authBytes: Buffer
  /** KIP-368: how long the session lasts (0: for ever); the client re-authenticates before. */
  readonly sessionLifetimeMs: bigint
}

export class SaslSession {
  private current: SaslState = 'handshake'
  private mechanismName: SaslMechanism | null = null
  private mechanism: Mechanism | null = null
  private evaluating = false
  private authenticated: KafkaPrincipal | null = null
  /** Set when connections.max.reauth.ms (or a token's expiry) bounds the session. */
  private expiresAtMs: number | null = null
  /** The SaslAuthenticate version of the last exchange (v0 clients cannot re-authenticate). */
  private authenticateVersion = -1

  constructor(readonly settings: SaslListenerSettings) {}

  get state(): SaslState {
    return this.current
  }

  /** The authenticated principal (kept while a re-authentication is under way). */
  get principal(): KafkaPrincipal | null {
    return this.authenticated
  }

  get isComplete(): boolean {
    return this.current === 'complete'
  }

  /** KIP-368: the session has outlived its lifetime; only a re-authentication may follow. */
  isExpired(nowMs: number): boolean {
    return this.current === 'complete' && this.expiresAtMs !== null && nowMs >= this.expiresAtMs
  }

  /** Whether a request of `apiKey` may be read in the current state (otherwise: close). */
  allows(apiKey: number): boolean {
    if (this.current === 'complete') return true
    if (this.current === 'handshake') return apiKey === ApiKey.ApiVersions || apiKey === ApiKey.SaslHandshake
    if (this.current === 'authenticate' || this.current === 'reauthenticate')
      return apiKey === ApiKey.SaslAuthenticate
    return false
  }

  /**
   * SaslHandshake: picks the mechanism; an unknown one fails the session (answered, then
   * closed). On an authenticated connection it starts a KIP-368 re-authentication when
   * connections.max.reauth.ms is set and the client speaks SaslAuthenticate v1+, with the
   * same mechanism; otherwise ILLEGAL_SASL_STATE, as KafkaApis answers.
   */
  handshake(mechanismName: string, version: number): { errorCode: number; mechanisms: string[] } {
    const mechanisms = [...this.settings.mechanisms]
    if (this.current === 'complete') return this.reauthenticationHandshake(mechanismName, version, mechanisms)
    if (this.current !== 'handshake') return { errorCode: ErrorCode.ILLEGAL_SASL_STATE, mechanisms }
    const name = mechanismName as SaslMechanism
    if (!this.settings.mechanisms.includes(name)) {
      this.current = 'failed'
      return { errorCode: ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms }
    }
    this.start(name)
    this.current = version === 0 ? 'raw-authenticate' : 'authenticate'
    return { errorCode: ErrorCode.NONE, mechanisms }
  }

  private reauthenticationHandshake(
    mechanismName: string,
    version: number,
    mechanisms: string[],
  ): { errorCode: number; mechanisms: string[] } {
    if (this.settings.reauthMs === 0 || version < 1 || this.authenticateVersion < 1)
      return { errorCode: ErrorCode.ILLEGAL_SASL_STATE, mechanisms }
    if (mechanismName !== this.mechanismName) {
      // Kafka: a re-authentication keeps the mechanism of the first authentication.
      this.current = 'failed'
      return { errorCode: ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms: [this.mechanismName!] }
    }
    this.start(this.mechanismName)
    this.current = 'reauthenticate'
    return { errorCode: ErrorCode.NONE, mechanisms }
  }

  private start(name: SaslMechanism): void {
    this.mechanismName = name
    this.mechanism =
      name === 'PLAIN'
        ? new PlainServer(this.settings.plainUsers)
        : name === 'OAUTHBEARER'
          ? new OAuthBearerServer(this.settings.oauthBearer!, this.settings.clock)
          : this.scramServer(name)
  }

  private scramServer(name: ScramMechanism): ScramServer {
    const store = this.settings.scramCredentials
    const tokens = this.settings.delegationTokens
    return new ScramServer(
      name,
      this.settings.random,
      (mechanism, user) => store.get(mechanism, user),
      tokens === undefined ? undefined : (mechanism, tokenId) => tokens.scramLogin(mechanism, tokenId),
    )
  }

  /** One token of the exchange (a SaslAuthenticate request of `version`, or a raw v0 token: -1). */
  async authenticate(token: Buffer, version = -1): Promise<AuthenticateOutcome> {
    const mechanism = this.mechanism
    const pending =
      this.current === 'authenticate' ||
      this.current === 'raw-authenticate' ||
      this.current === 'reauthenticate'
    if (!pending || mechanism === null || this.evaluating) {
      this.current = 'failed'
      return failure(ErrorCode.ILLEGAL_SASL_STATE, 'Unexpected SASL token')
    }
    this.evaluating = true
    try {
      const { challenge, complete } = await mechanism.evaluate(token)
      if (!complete)
        return { errorCode: ErrorCode.NONE, errorMessage: null, authBytes: challenge, sessionLifetimeMs: 0n }
      const principal: KafkaPrincipal =
        mechanism instanceof ScramServer && mechanism.tokenAuthenticated
          ? { type: 'User', name: mechanism.username, tokenAuthenticated: true }
          : { type: 'User', name: mechanism.username }
      if (this.current === 'reauthenticate' && this.authenticated?.name !== principal.name)
        throw new SaslAuthenticationError(
          `Cannot change principals during re-authentication from User:${this.authenticated?.name}: User:${principal.name}`,
        )
      this.current = 'complete'
      this.authenticated = principal
      this.authenticateVersion = version
      const lifetimeMs = this.sessionLifetimeMs(mechanism)
      this.expiresAtMs = lifetimeMs === 0 ? null : this.settings.clock.nowMs() + lifetimeMs
      return {
        errorCode: ErrorCode.NONE,
        errorMessage: null,
        authBytes: challenge,
        sessionLifetimeMs: BigInt(lifetimeMs),
      }
    } catch (error) {
      this.current = 'failed'
      if (!(error instanceof SaslAuthenticationError)) throw error
      return failure(ErrorCode.SASL_AUTHENTICATION_FAILED, error.message)
    } finally {
      this.evaluating = false
    }
  }

  /** connections.max.reauth.ms, shortened to the credential's own expiry (Kafka: a token's exp). */
  private sessionLifetimeMs(mechanism: Mechanism): number {
    if (this.settings.reauthMs === 0) return 0
    const untilExpiryMs =
      mechanism.expiresAtMs === undefined
        ? Number.POSITIVE_INFINITY
        : mechanism.expiresAtMs - this.settings.clock.nowMs()
    return Math.max(1, Math.min(this.settings.reauthMs, untilExpiryMs))
  }
}

function failure(errorCode: number, errorMessage: string): AuthenticateOutcome {
  return { errorCode, errorMessage, authBytes: Buffer.alloc(0), sessionLifetimeMs: 0n }
}

/** PLAIN (RFC 4616): `authzid NUL authcid NUL password`, one message. */
class PlainServer implements Mechanism {
  username = ''

  constructor(private readonly users: ReadonlyMap<string, string>) {}

  async evaluate(token: Buffer): Promise<{ challenge: Buffer; complete: boolean }> {
    const parts = token.toString('utf8').split('\u0000')
    if (parts.length !== 3)
      throw new SaslAuthenticationError('Invalid SASL/PLAIN response: expected 3 tokens')
    const [authzid, user, password] = parts
    if (user === '') throw new SaslAuthenticationError('Authentication failed: username not specified')
    if (password === '') throw new SaslAuthenticationError('Authentication failed: password not specified')
    const expected = this.users.get(user)
    if (expected === undefined || !sameText(expected, password))
      throw new SaslAuthenticationError('Authentication failed: Invalid username or password')
    if (authzid !== '' && authzid !== user)
      throw new SaslAuthenticationError(
        'Authentication failed: Client requested an authorization id that is different from username',
      )
    this.username = user
    return { challenge: Buffer.alloc(0), complete: true }
  }
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8')
  const y = Buffer.from(b, 'utf8')
  return x.length === y.length && timingSafeEqual(x, y)
}
