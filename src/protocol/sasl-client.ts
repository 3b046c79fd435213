/**
 * The client side of Kafka's SASL mechanisms, with no transport: the tokens PLAIN, SCRAM
 * (RFC 5802, RFC 7677, no channel binding) and OAUTHBEARER send in SaslAuthenticate, and the
 * SCRAM hashing the broker's server side shares. tidelog's client and the inter-broker
 * client both run `saslClientExchange` over their own request path.
 */
import { createHash, createHmac, pbkdf2Sync } from 'node:crypto'
import { SaslAuthenticationError } from '../common/errors.js'
import type { Random } from '../common/random.js'

export const SCRAM_MECHANISMS = ['SCRAM-SHA-256', 'SCRAM-SHA-512'] as const
export type ScramMechanism = (typeof SCRAM_MECHANISMS)[number]

export function scramAlgorithm(mechanism: ScramMechanism): 'sha256' | 'sha512' {
  return mechanism === 'SCRAM-SHA-256' ? 'sha256' : 'sha512'
}

export function scramHmac(mechanism: ScramMechanism, key: Buffer, text: string | Buffer): Buffer {
  return createHmac(scramAlgorithm(mechanism), key).update(text).digest()
}

export function saltedPassword(
  mechanism: ScramMechanism,
  password: string,
  salt: Buffer,
  iterations: number,
): Buffer {
  const length = mechanism === 'SCRAM-SHA-256' ? 32 : 64
  return pbkdf2Sync(Buffer.from(password, 'utf8'), salt, iterations, length, scramAlgorithm(mechanism))
}

/** `=` and `,` escaped in a saslname (RFC 5802 §5.1). */
function encodeSaslName(name: string): string {
  return name.replace(/=/g, '=3D').replace(/,/g, '=2C')
}

const algorithm = scramAlgorithm
const hmac = scramHmac

/** One SCRAM exchange with a password, as a client. */
export class ScramClient {
  private clientNonce = ''
  private clientFirstBare = ''
  private expectedServerSignature: Buffer | null = null

  constructor(
    readonly mechanism: ScramMechanism,
    private readonly user: string,
    private readonly password: string,
    private readonly random: Random,
  ) {}

  firstMessage(): Buffer {
    this.clientNonce = this.random.bytes(24).toString('base64')
    this.clientFirstBare = `n=${encodeSaslName(this.user)},r=${this.clientNonce}`
    return Buffer.from(`n,,${this.clientFirstBare}`, 'utf8')
  }

  finalMessage(serverFirst: Buffer): Buffer {
    const text = serverFirst.toString('utf8')
    const match = /^r=([^,]+),s=([^,]+),i=(\d+)/.exec(text)
    if (!match?.[1].startsWith(this.clientNonce))
      throw new SaslAuthenticationError('Invalid SCRAM server first message')
    const salted = saltedPassword(
      this.mechanism,
      this.password,
      Buffer.from(match[2], 'base64'),
      Number(match[3]),
    )
    const clientKey = hmac(this.mechanism, salted, 'Client Key')
    const storedKey = createHash(algorithm(this.mechanism)).update(clientKey).digest()
    const withoutProof = `c=${Buffer.from('n,,').toString('base64')},r=${match[1]}`
    const authMessage = `${this.clientFirstBare},${text},${withoutProof}`
    const signature = hmac(this.mechanism, storedKey, authMessage)
    const proof = Buffer.alloc(clientKey.length)
    for (let i = 0; i < proof.length; i++) proof[i] = clientKey[i] ^ signature[i]
    this.expectedServerSignature = hmac(
      this.mechanism,
      hmac(this.mechanism, salted, 'Server Key'),
      authMessage,
    )
    return Buffer.from(`${withoutProof},p=${proof.toString('base64')}`, 'utf8')
  }

  /** Checks the server's signature: a server that does not know the password cannot forge it. */
  checkServerFinal(serverFinal: Buffer): void {
    const expected = `v=${this.expectedServerSignature?.toString('base64')}`
    if (serverFinal.toString('utf8') !== expected)
      throw new SaslAuthenticationError('SCRAM server signature does not match')
  }
}

export type ClientSaslMechanism = 'PLAIN' | ScramMechanism | 'OAUTHBEARER'

export interface SaslCredentials {
  readonly mechanism: ClientSaslMechanism
  /** PLAIN and SCRAM: the user and password. */
  readonly username: string
  readonly password: string
  /** OAUTHBEARER: a fresh token for each connection. */
  readonly token?: () => string
}

/**
 * Runs the mechanism's exchange after a successful SaslHandshake: `step` sends one token in
 * SaslAuthenticate and resolves with the broker's answer (rejecting on an error code).
 * Throws SaslAuthenticationError when the broker's own answer does not check out.
 */
export async function saslClientExchange(
  credentials: SaslCredentials,
  random: Random,
  step: (token: Buffer) => Promise<Buffer>,
): Promise<void> {
  if (credentials.mechanism === 'OAUTHBEARER') {
    const token = credentials.token?.()
    if (token === undefined) throw new SaslAuthenticationError('OAUTHBEARER needs a token')
    await step(Buffer.from(`n,,\u0001auth=Bearer ${token}\u0001\u0001`, 'utf8'))
  } else if (credentials.mechanism === 'PLAIN') {
    await step(Buffer.from(`\u0000${credentials.username}\u0000${credentials.password}`, 'utf8'))
  } else {
    const scram = new ScramClient(credentials.mechanism, credentials.username, credentials.password, random)
    const serverFirst = await step(scram.firstMessage())
    scram.checkServerFinal(await step(scram.finalMessage(serverFirst)))
  }
}
