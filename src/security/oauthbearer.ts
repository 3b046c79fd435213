/**
 * SASL/OAUTHBEARER (RFC 7628, KIP-255) with Kafka's unsecured-token validator
 * (OAuthBearerUnsecuredValidatorCallbackHandler): the token is a JWT with `"alg":"none"`,
 * the principal its `sub` claim (or unsecuredValidatorPrincipalClaimName), `exp` required
 * and not past (allowing unsecuredValidatorAllowableClockSkewMs), and every scope of
 * unsecuredValidatorRequiredScope present in the `scope` claim. It is meant for tests and
 * development, as in Kafka: the token is not signed. A refused token is answered, per the
 * RFC, with a JSON error challenge; the client's `\x01` reply then fails the exchange with
 * SASL_AUTHENTICATION_FAILED.
 */
import type { Clock } from '../common/clock.js'
import { type JwtValidatorSettings, validateJwt } from './jwt-validator.js'
import { SaslAuthenticationError } from './sasl-errors.js'

/** How tokens are checked: Kafka's unsecured validator, or signatures against a key set. */
export type OAuthBearerValidation =
  | ({ readonly kind: 'unsecured' } & UnsecuredValidatorOptions)
  | { readonly kind: 'signed'; readonly settings: JwtValidatorSettings }

export interface UnsecuredValidatorOptions {
  readonly principalClaimName: string
  readonly scopeClaimName: string
  readonly requiredScope: readonly string[]
  readonly allowableClockSkewMs: number
}

/** Reads the validator options Kafka takes from the OAuthBearerLoginModule's JAAS options. */
export function unsecuredValidatorOptions(
  jaasOptions: ReadonlyMap<string, string>,
): UnsecuredValidatorOptions {
  const skew = Number(jaasOptions.get('unsecuredValidatorAllowableClockSkewMs') ?? '0')
  if (!Number.isInteger(skew) || skew < 0)
    throw new SaslAuthenticationError('unsecuredValidatorAllowableClockSkewMs must be a non-negative integer')
  return {
    principalClaimName: jaasOptions.get('unsecuredValidatorPrincipalClaimName') || 'sub',
    scopeClaimName: jaasOptions.get('unsecuredValidatorScopeClaimName') || 'scope',
    requiredScope: (jaasOptions.get('unsecuredValidatorRequiredScope') ?? '')
      .split(/[\s,]+/)
      .filter((s) => s !== ''),
    allowableClockSkewMs: skew,
  }
}

const SEPARATOR = '\u0001'
/**
 * The client's first message: a GS2 header (`n,,`, `y,,` or `n,a=<authzid>,`), then
 * `\x01`-separated `key=value` pairs ending in `\x01\x01` (RFC 7628 §3.1). Parsed by hand:
 * the separator is a control character.
 */
function parseClientMessage(
  text: string,
): { authzid: string | undefined; pairs: Map<string, string> } | null {
  const second = text.indexOf(',', 2)
  if ((text[0] !== 'n' && text[0] !== 'y') || text[1] !== ',' || second < 0) return null
  const authz = text.slice(2, second)
  if (authz !== '' && !authz.startsWith('a=')) return null
  const rest = text.slice(second + 1)
  if (rest.length < 2 || !rest.startsWith(SEPARATOR) || !rest.endsWith(SEPARATOR + SEPARATOR)) return null
  const pairs = new Map<string, string>()
  for (const pair of rest.slice(1, -2).split(SEPARATOR)) {
    if (pair === '') continue
    const eq = pair.indexOf('=')
    if (eq <= 0 || !/^[A-Za-z]+$/.test(pair.slice(0, eq))) return null
    pairs.set(pair.slice(0, eq), pair.slice(eq + 1))
  }
  return { authzid: authz === '' ? undefined : authz.slice(2), pairs }
}

export class OAuthBearerServer {
  private step: 'initial' | 'error-sent' | 'done' = 'initial'
  private errorMessage = ''
  username = ''
  expiresAtMs: number | undefined

  constructor(
    private readonly validation: OAuthBearerValidation,
    private readonly clock: Clock,
  ) {}

  async evaluate(token: Buffer): Promise<{ challenge: Buffer; complete: boolean }> {
    const text = token.toString('utf8')
    if (this.step === 'error-sent') {
      this.step = 'done'
      if (text !== SEPARATOR)
        throw new SaslAuthenticationError('Invalid OAUTHBEARER reply to an error challenge')
      throw new SaslAuthenticationError(this.errorMessage)
    }
    if (this.step === 'done') throw new SaslAuthenticationError('OAUTHBEARER exchange already complete')
    const message = parseClientMessage(text)
    if (!message) throw new SaslAuthenticationError('Invalid OAUTHBEARER client first message')
    const pairs = message.pairs
    const auth = /^Bearer ([A-Za-z0-9_.~+/=-]+)$/.exec(pairs.get('auth') ?? '')
    if (!auth)
      throw new SaslAuthenticationError('Invalid OAUTHBEARER client first message: no auth=Bearer token')
    const failure = this.validate(auth[1], message.authzid)
    if (failure !== null) {
      this.step = 'error-sent'
      this.errorMessage = `Authentication failed: ${failure.message}`
      return { challenge: Buffer.from(JSON.stringify({ status: failure.status }), 'utf8'), complete: false }
    }
    this.step = 'done'
    return { challenge: Buffer.alloc(0), complete: true }
  }

  private validate(jwt: string, authzid: string | undefined): { status: string; message: string } | null {
    if (this.validation.kind === 'signed') {
      try {
        const claims = validateJwt(jwt, this.validation.settings, this.clock.nowMs())
        if (authzid !== undefined && authzid !== '' && authzid !== claims.principal)
          return invalid('the authorization id differs from the token principal')
        this.username = claims.principal
        this.expiresAtMs = claims.expiresAtMs
        return null
      } catch (error) {
        return invalid((error as Error).message)
      }
    }
    return this.validateUnsecured(jwt, authzid, this.validation)
  }

  private validateUnsecured(
    jwt: string,
    authzid: string | undefined,
    options: UnsecuredValidatorOptions,
  ): { status: string; message: string } | null {
    const parts = jwt.split('.')
    if (parts.length !== 3 || parts[2] !== '')
      return invalid('the token is not an unsecured JWT (header.payload.)')
    let header: Record<string, unknown>
    let claims: Record<string, unknown>
    try {
      header = JSON.parse(Buffer.from(parts[0], 'base64url').toString('utf8'))
      claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'))
    } catch {
      return invalid('the token header or claims are not JSON')
    }
    if (header.alg !== 'none')
      return invalid(`unsecured tokens must have alg "none", not ${JSON.stringify(header.alg)}`)
    const principal = claims[options.principalClaimName]
    if (typeof principal !== 'string' || principal === '')
      return invalid(`the token has no string claim ${options.principalClaimName}`)
    const exp = claims.exp
    if (typeof exp !== 'number') return invalid('the token has no numeric exp claim')
    const nowMs = this.clock.nowMs()
    if (exp * 1000 + options.allowableClockSkewMs <= nowMs) return invalid('the token has expired')
    const iat = claims.iat
    if (iat !== undefined && (typeof iat !== 'number' || iat * 1000 - options.allowableClockSkewMs > nowMs))
      return invalid('the token was issued in the future')
    const scopeClaim = claims[options.scopeClaimName]
    const scopes = Array.isArray(scopeClaim)
      ? scopeClaim
      : typeof scopeClaim === 'string'
        ? scopeClaim.split(' ')
        : []
    const missing = options.requiredScope.filter((s) => !scopes.includes(s))
    if (missing.length > 0)
      return {
        status: 'insufficient_scope',
        message: `the token lacks the required scope ${missing.join(' ')}`,
      }
    if (authzid !== undefined && authzid !== '' && authzid !== principal)
      return invalid('the authorization id differs from the token principal')
    this.username = principal
    this.expiresAtMs = exp * 1000
    return null
  }
}

function invalid(message: string): { status: string; message: string } {
  return { status: 'invalid_token', message }
}
