/**
 * OAUTHBEARER with signed tokens, as Kafka's OAuthBearerValidatorCallbackHandler (KIP-768)
 * checks them: a JWS signed by a key of the JSON Web Key Set at
 * `sasl.oauthbearer.jwks.endpoint.url` (a file: URL here: tidelog fetches nothing over the
 * network), chosen by `kid`; RS256/384/512, PS256/384/512 and ES256/384/512 (never `none`);
 * `exp` required, `iat`/`nbf` honoured, within `sasl.oauthbearer.clock.skew.seconds`;
 * `sasl.oauthbearer.expected.issuer` and `.expected.audience` when set; the principal from
 * `sasl.oauthbearer.sub.claim.name`. Signatures are checked with node:crypto.
 */
import { createPublicKey, type KeyObject, verify } from 'node:crypto'
import { ConfigError } from '../common/errors.js'
import type { FileSystem } from '../common/file-system.js'

export interface JwtValidatorSettings {
  readonly keys: ReadonlyMap<string, { readonly key: KeyObject; readonly alg: string | undefined }>
  readonly expectedIssuer: string | null
  readonly expectedAudience: readonly string[]
  readonly subClaimName: string
  readonly scopeClaimName: string
  readonly clockSkewMs: number
}

export interface JwtClaims {
  readonly principal: string
  readonly expiresAtMs: number
  readonly scopes: readonly string[]
}

const ALGORITHMS: Readonly<Record<string, { hash: string; kty: string; pss?: true; ecdsa?: true }>> = {
  RS256: { hash: 'sha256', kty: 'RSA' },
  RS384: { hash: 'sha384', kty: 'RSA' },
  RS512: { hash: 'sha512', kty: 'RSA' },
  PS256: { hash: 'sha256', kty: 'RSA', pss: true },
  PS384: { hash: 'sha384', kty: 'RSA', pss: true },
  PS512: { hash: 'sha512', kty: 'RSA', pss: true },
  ES256: { hash: 'sha256', kty: 'EC', ecdsa: true },
  ES384: { hash: 'sha384', kty: 'EC', ecdsa: true },
  ES512: { hash: 'sha512', kty: 'EC', ecdsa: true },
}

/** Reads the key set of a `file:` JWKS URL through the injected file system. */
export async function loadJwks(url: string, fs: FileSystem): Promise<JwtValidatorSettings['keys']> {
  let path: string
  try {
    const parsed = new URL(url)
    if (parsed.protocol !== 'file:') throw new Error('not a file URL')
    path = decodeURIComponent(parsed.pathname)
  } catch {
    throw new ConfigError(
      `sasl.oauthbearer.jwks.endpoint.url ${url}: tidelog reads a key set from a file: URL only`,
    )
  }
  let text: string
  try {
    const handle = await fs.open(path, 'r')
    try {
      const { size } = await handle.stat()
      const buffer = Buffer.alloc(size)
      let read = 0
      while (read < size) {
        const n = await handle.read(buffer, read, size - read, read)
        if (n === 0) break
        read += n
      }
      text = buffer.subarray(0, read).toString('utf8')
    } finally {
      await handle.close()
    }
  } catch (error) {
    throw new ConfigError(
      `sasl.oauthbearer.jwks.endpoint.url: cannot read ${path}: ${(error as Error).message}`,
    )
  }
  let jwks: { keys?: unknown }
  try {
    jwks = JSON.parse(text)
  } catch {
    throw new ConfigError(`sasl.oauthbearer.jwks.endpoint.url: ${path} is not JSON`)
  }
  if (!Array.isArray(jwks.keys))
    throw new ConfigError(`sasl.oauthbearer.jwks.endpoint.url: ${path} has no "keys" array`)
  const keys = new Map<string, { key: KeyObject; alg: string | undefined }>()
  for (const jwk of jwks.keys as { kid?: string; alg?: string; use?: string }[]) {
    if (jwk.use !== undefined && jwk.use !== 'sig') continue
    try {
      keys.set(jwk.kid ?? '', { key: createPublicKey({ key: jwk as never, format: 'jwk' }), alg: jwk.alg })
    } catch (error) {
      throw new ConfigError(
        `sasl.oauthbearer.jwks.endpoint.url: key ${jwk.kid ?? '(no kid)'} unusable: ${(error as Error).message}`,
      )
    }
  }
  if (keys.size === 0)
    throw new ConfigError(`sasl.oauthbearer.jwks.endpoint.url: ${path} holds no signing key`)
  return keys
}

/** Validates a compact JWS; throws an Error whose message says why it is refused. */
export function validateJwt(token: string, settings: JwtValidatorSettings, nowMs: number): JwtClaims {
  const parts = token.split('.')
  if (parts.length !== 3 || parts.some((p) => p === '')) throw new Error('the token is not a signed JWT')
  let header: { alg?: unknown; kid?: unknown }
  let claims: Record<string, unknown>
  try {
    header = JSON.parse(Buffer.from(parts[0], 'base64url').toString('utf8'))
    claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'))
  } catch {
    throw new Error('the token header or claims are not JSON')
  }
  const algorithm = typeof header.alg === 'string' ? ALGORITHMS[header.alg] : undefined
  if (algorithm === undefined)
    throw new Error(`the token algorithm ${JSON.stringify(header.alg)} is not accepted`)
  const entry = settings.keys.get(typeof header.kid === 'string' ? header.kid : '')
  if (entry === undefined) throw new Error(`no key ${JSON.stringify(header.kid)} in the key set`)
  if (entry.key.asymmetricKeyType?.toUpperCase().startsWith(algorithm.kty === 'EC' ? 'EC' : 'RSA') !== true)
    throw new Error(`key ${JSON.stringify(header.kid)} does not fit algorithm ${header.alg}`)
  if (entry.alg !== undefined && entry.alg !== header.alg)
    throw new Error(`key ${JSON.stringify(header.kid)} is for ${entry.alg}`)
  const signed = Buffer.from(`${parts[0]}.${parts[1]}`)
  const signature = Buffer.from(parts[2], 'base64url')
  const ok = verify(
    algorithm.hash,
    signed,
    algorithm.ecdsa
      ? { key: entry.key, dsaEncoding: 'ieee-p1363' }
      : algorithm.pss
        ? { key: entry.key, padding: 6, saltLength: -1 } // RSA_PKCS1_PSS_PADDING, salt of the digest length
        : entry.key,
    signature,
  )
  if (!ok) throw new Error('the token signature does not verify')
  const skew = settings.clockSkewMs
  if (typeof claims.exp !== 'number') throw new Error('the token has no numeric exp claim')
  if (claims.exp * 1000 + skew <= nowMs) throw new Error('the token has expired')
  if (typeof claims.nbf === 'number' && claims.nbf * 1000 - skew > nowMs)
    throw new Error('the token is not valid yet')
  if (typeof claims.iat === 'number' && claims.iat * 1000 - skew > nowMs)
    throw new Error('the token was issued in the future')
  if (settings.expectedIssuer !== null && claims.iss !== settings.expectedIssuer)
    throw new Error(`the token issuer ${JSON.stringify(claims.iss)} is not ${settings.expectedIssuer}`)
  if (settings.expectedAudience.length > 0) {
    const audience = Array.isArray(claims.aud) ? claims.aud : [claims.aud]
    if (!audience.some((a) => settings.expectedAudience.includes(a as string)))
      throw new Error(`the token audience ${JSON.stringify(claims.aud)} is not expected`)
  }
  const principal = claims[settings.subClaimName]
  if (typeof principal !== 'string' || principal === '')
    throw new Error(`the token has no string claim ${settings.subClaimName}`)
  const scopeClaim = claims[settings.scopeClaimName]
  const scopes = Array.isArray(scopeClaim)
    ? scopeClaim.map(String)
    : typeof scopeClaim === 'string'
      ? scopeClaim.split(' ')
      : []
  return { principal, expiresAtMs: claims.exp * 1000, scopes }
}
