/**
 * SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them: no channel
 * binding (`n,,` or `y,,`), an optional authzid that must equal the user, extensions after
 * the nonce ignored except `tokenauth=true` (a delegation token: the user is the token id,
 * the password its HMAC in base64, and the login becomes the token's owner), and
 * credentials kept salted (stored key, server key) so the password never is.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import { SaslAuthenticationError } from '../common/errors.js'
import type { Random } from '../common/random.js'
import {
  scramAlgorithm as algorithm,
  scramHmac as hmac,
  type ScramMechanism,
} from '../protocol/sasl-client.js'

// The client side and the hashing both sides share live in protocol/ (tidelog's client uses them).
export {
  SCRAM_MECHANISMS,
  ScramClient,
  type ScramMechanism,
  saltedPassword,
} from '../protocol/sasl-client.js'

/** Kafka's bounds on iterations (ScramMechanism.minIterations, AlterUserScramCredentials' maximum). */
export const SCRAM_MIN_ITERATIONS = 4096
export const SCRAM_MAX_ITERATIONS = 16384

export interface ScramCredential {
  readonly salt: Buffer
  readonly storedKey: Buffer
  readonly serverKey: Buffer
  readonly iterations: number
}

/** The stored form of a salted password (what AlterUserScramCredentials sends). */
export function credentialFromSaltedPassword(
  mechanism: ScramMechanism,
  salted: Buffer,
  salt: Buffer,
  iterations: number,
): ScramCredential {
  const clientKey = hmac(mechanism, salted, 'Client Key')
  return {
    salt,
    storedKey: createHash(algorithm(mechanism)).update(clientKey).digest(),
    serverKey: hmac(mechanism, salted, 'Server Key'),
    iterations,
  }
}

/** `=2C` and `=3D` in a saslname (RFC 5802 §5.1); any other `=` is malformed. */
function decodeSaslName(name: string): string {
  if (/=(?!2C|3D)/.test(name)) throw new SaslAuthenticationError('Invalid SCRAM username encoding')
  return name.replace(/=2C/g, ',').replace(/=3D/g, '=')
}

const CLIENT_FIRST = /^([ny]),(?:a=([^,]*))?,(n=([^,]*),r=([\x21-\x2B\x2D-\x7E]+)((?:,[A-Za-z]+=[^,]*)*))$/
const CLIENT_FINAL =
  /^(c=([A-Za-z0-9+/=]*),r=([\x21-\x2B\x2D-\x7E]+)(?:,[A-Za-z]+=[^,]*)*),p=([A-Za-z0-9+/=]+)$/

/**
 * The server side of one SCRAM exchange: `clientFirst` answers the server-first message,
 * `clientFinal` checks the proof and answers the server-final message. Any step out of
 * order, malformed message or wrong proof throws SaslAuthenticationError.
 */
export class ScramServer {
  private step: 'first' | 'final' | 'done' = 'first'
  private user = ''
  private gs2Header = ''
  private nonce = ''
  private credential: ScramCredential | null = null
  private clientFirstBare = ''
  private serverFirst = ''
  /** The token's owner when the client authenticates with a delegation token. */
  private tokenOwner: string | null = null

  constructor(
    readonly mechanism: ScramMechanism,
    private readonly random: Random,
    private readonly lookup: (mechanism: ScramMechanism, user: string) => Promise<ScramCredential | null>,
    /** A delegation token's credential and owner by token id; absent: tokens are refused. */
    private readonly tokenLookup?: (
      mechanism: ScramMechanism,
      tokenId: string,
    ) => Promise<{ credential: ScramCredential; owner: { name: string } } | null>,
  ) {}

  /** Who the client is once authenticated: the user, or the owner of the token it used. */
  get username(): string {
    return this.tokenOwner ?? this.user
  }

  get tokenAuthenticated(): boolean {
    return this.tokenOwner !== null
  }

  async evaluate(token: Buffer): Promise<{ challenge: Buffer; complete: boolean }> {
    if (this.step === 'first')
      return { challenge: await this.clientFirst(token.toString('utf8')), complete: false }
    if (this.step === 'final') return { challenge: this.clientFinal(token.toString('utf8')), complete: true }
    throw new SaslAuthenticationError('SCRAM exchange already complete')
  }

  private async clientFirst(message: string): Promise<Buffer> {
    const match = CLIENT_FIRST.exec(message)
    if (!match) throw new SaslAuthenticationError('Invalid SCRAM client first message')
    const [, binding, authzid, bare, saslName, clientNonce, extensions] = match
    this.user = decodeSaslName(saslName)
    if (authzid !== undefined && authzid !== '' && decodeSaslName(authzid) !== this.user)
      throw new SaslAuthenticationError(
        'Authentication failed: Client requested an authorization id that is different from username',
      )
    const tokenAuth = /(^|,)tokenauth=true(,|$)/i.test(extensions)
    if (tokenAuth && this.tokenLookup === undefined)
      throw new SaslAuthenticationError('Authentication failed: delegation tokens are not supported')
    this.step = 'final'
    if (tokenAuth) {
      const login = await this.tokenLookup!(this.mechanism, this.user)
      this.credential = login?.credential ?? null
      if (login !== null) this.tokenOwner = login.owner.name
    } else this.credential = await this.lookup(this.mechanism, this.user)
    if (this.credential === null)
      throw new SaslAuthenticationError(
        `Authentication failed during authentication due to invalid credentials with SASL mechanism ${this.mechanism}`,
      )
    this.gs2Header = `${binding},${authzid !== undefined ? `a=${authzid}` : ''},`
    this.nonce = clientNonce + this.random.bytes(24).toString('base64')
    this.clientFirstBare = bare
    this.serverFirst = `r=${this.nonce},s=${this.credential.salt.toString('base64')},i=${this.credential.iterations}`
    return Buffer.from(this.serverFirst, 'utf8')
  }

  private clientFinal(message: string): Buffer {
    this.step = 'done'
    const credential = this.credential!
    const match = CLIENT_FINAL.exec(message)
    if (!match) throw new SaslAuthenticationError('Invalid SCRAM client final message')
    const [, withoutProof, channelBinding, nonce, proofText] = match
    // Kafka checks endsWith, not equality: librdkafka before 2.1 sends the client nonce
    // again in front of the combined one, and Kafka brokers accept it.
    if (!nonce.endsWith(this.nonce))
      throw new SaslAuthenticationError(
        'Invalid SCRAM nonce: the client final message does not continue this exchange',
      )
    if (Buffer.from(channelBinding, 'base64').toString('utf8') !== this.gs2Header)
      throw new SaslAuthenticationError('Invalid SCRAM channel binding: it must repeat the GS2 header')
    const authMessage = `${this.clientFirstBare},${this.serverFirst},${withoutProof}`
    const proof = Buffer.from(proofText, 'base64')
    const signature = hmac(this.mechanism, credential.storedKey, authMessage)
    if (proof.length !== signature.length) throw this.invalidCredentials()
    const clientKey = Buffer.alloc(signature.length)
    for (let i = 0; i < signature.length; i++) clientKey[i] = proof[i] ^ signature[i]
    const storedKey = createHash(algorithm(this.mechanism)).update(clientKey).digest()
    if (!timingSafeEqual(storedKey, credential.storedKey)) throw this.invalidCredentials()
    const serverSignature = hmac(this.mechanism, credential.serverKey, authMessage)
    return Buffer.from(`v=${serverSignature.toString('base64')}`, 'utf8')
  }

  private invalidCredentials(): SaslAuthenticationError {
    return new SaslAuthenticationError(
      `Authentication failed during authentication due to invalid credentials with SASL mechanism ${this.mechanism}`,
    )
  }
}
