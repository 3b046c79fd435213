/**
 * The client's TLS and SASL options (Kafka's security.protocol, ssl.*, sasl.*), checked at
 * construction so a typo fails there rather than as a refused handshake later.
 */
import { InvalidArgumentError } from './errors.js'

export interface SslOptions {
  /** Trusted CA certificates, PEM (ssl.truststore.* / ssl.ca.location); default: Node's roots. */
  ca?: string | Buffer | (string | Buffer)[]
  /** Client certificate chain, PEM, for brokers with ssl.client.auth (ssl.certificate.location). */
  cert?: string | Buffer
  /** Client private key, PEM (ssl.key.location). */
  key?: string | Buffer
  /** Passphrase of an encrypted `key` (ssl.key.password). */
  keyPassword?: string
  /** Verify the broker's certificate chain and host name (default true). */
  rejectUnauthorized?: boolean
  /** Check the certificate names the broker's host (ssl.endpoint.identification.algorithm=https, the default). */
  verifyHostname?: boolean
  /** SNI and the name checked against the certificate; default: the broker's host when it is a name. */
  servername?: string
}

export const CLIENT_SASL_MECHANISMS = ['plain', 'scram-sha-256', 'scram-sha-512'] as const
export type ClientSaslMechanismName = (typeof CLIENT_SASL_MECHANISMS)[number]

export interface SaslOptions {
  mechanism: ClientSaslMechanismName
  username: string
  password: string
}

export function checkSaslOptions(sasl: SaslOptions | undefined): SaslOptions | undefined {
  if (sasl === undefined) return undefined
  const mechanism = String(sasl.mechanism).toLowerCase()
  if (!(CLIENT_SASL_MECHANISMS as readonly string[]).includes(mechanism))
    throw new InvalidArgumentError(
      `sasl.mechanism must be one of ${CLIENT_SASL_MECHANISMS.join(', ')}, got ${String(sasl.mechanism)}`,
    )
  if (typeof sasl.username !== 'string' || sasl.username === '')
    throw new InvalidArgumentError('sasl.username is required')
  if (typeof sasl.password !== 'string') throw new InvalidArgumentError('sasl.password is required')
  return { mechanism: mechanism as ClientSaslMechanismName, username: sasl.username, password: sasl.password }
}

export function checkSslOptions(ssl: SslOptions | boolean | undefined): SslOptions | undefined {
  if (ssl === undefined || ssl === false) return undefined
  if (ssl === true) return {}
  if ((ssl.cert === undefined) !== (ssl.key === undefined))
    throw new InvalidArgumentError('ssl.cert and ssl.key go together (a client certificate needs its key)')
  return ssl
}
