/**
 * TLS for a listener (and for the inter-broker client), read from Kafka's `ssl.*` properties
 * into settings the runtime's TLS network applies (runtime/node-tls-network.ts with
 * node:tls). Core code never loads a file or a certificate: it hands these settings to the
 * injected TlsProvider, which reads the PEM files and builds the secure context.
 */
import type { ConfigValue } from '../common/config-def.js'
import { ConfigError } from '../common/errors.js'
import type { ByteStream, Network } from '../common/network.js'
import { listenerValue, type SecurityConfigSource } from './security-config.js'

export type ClientAuth = 'none' | 'requested' | 'required'
export type TlsVersion = 'TLSv1.2' | 'TLSv1.3'

export interface KeyStore {
  readonly type: 'PEM' | 'PKCS12'
  /** A file: PEM with the private key and the certificate chain, or a PKCS12 bundle. */
  readonly location: string | null
  /** PEM text given inline (ssl.keystore.key / ssl.keystore.certificate.chain). */
  readonly key: string | null
  readonly certificateChain: string | null
  /** ssl.key.password (PEM) or ssl.keystore.password (PKCS12). */
  readonly password: string | null
}

export interface TrustStore {
  readonly location: string | null
  readonly certificates: string | null
}

export interface TlsSettings {
  /** Where the settings came from, for error messages: `listener SSL` or `inter-broker client`. */
  readonly origin: string
  readonly keyStore: KeyStore | null
  /** null: the system's trusted CAs. */
  readonly trustStore: TrustStore | null
  readonly clientAuth: ClientAuth
  readonly minVersion: TlsVersion
  readonly maxVersion: TlsVersion
  /** OpenSSL cipher list (TLS 1.2 and 1.3 names), null for node's defaults. */
  readonly ciphers: string | null
  /** Client side: check the server certificate names the host dialled. */
  readonly verifyHostname: boolean
}

/** A TLS connection: the byte stream and what the peer proved. */
export interface TlsByteStream extends ByteStream {
  /** The peer certificate's subject as RFC 2253 (Java's X500Principal.getName()), null without one. */
  readonly peerSubjectDn: string | null
}

/** Makes TLS networks; the runtime's is node:tls over TCP. */
export interface TlsProvider {
  /**
   * A Network whose listen() accepts TLS (streams handed over once the handshake is done,
   * as TlsByteStream) and whose connect() dials TLS. Throws ConfigError when the key or
   * certificates cannot be read or used.
   */
  network(settings: TlsSettings): TlsNetwork
}

export interface TlsNetwork extends Network {
  /**
   * Reads the key store and trust store again (a renewed certificate) and uses them for new
   * handshakes; connections already open keep theirs. Throws ConfigError, keeping the
   * current ones, when the new files cannot be used.
   */
  reload(): void
}

export function tlsSettings(
  config: SecurityConfigSource,
  listener: string,
  origin: string,
  side: 'server' | 'client',
): TlsSettings {
  const value = (name: string): ConfigValue => listenerValue(config, listener, name)
  const text = (name: string): string | null => {
    const v = value(name)
    return typeof v === 'string' && v !== '' ? v : null
  }
  const keyStore = readKeyStore(text, origin)
  if (keyStore === null && side === 'server')
    throw new ConfigError(
      `${origin}: a TLS listener needs ssl.keystore.location, or ssl.keystore.key and ssl.keystore.certificate.chain`,
    )
  const protocols = value('ssl.enabled.protocols') as string[]
  if (protocols.length === 0) throw new ConfigError(`${origin}: ssl.enabled.protocols is empty`)
  let maxVersion: TlsVersion = protocols.includes('TLSv1.3') ? 'TLSv1.3' : 'TLSv1.2'
  const minVersion: TlsVersion = protocols.includes('TLSv1.2') ? 'TLSv1.2' : 'TLSv1.3'
  if (side === 'client' && text('ssl.protocol') === 'TLSv1.2') maxVersion = 'TLSv1.2'
  const suites = value('ssl.cipher.suites') as string[] | null
  return {
    origin,
    keyStore,
    trustStore: readTrustStore(text, origin),
    clientAuth: value('ssl.client.auth') as ClientAuth,
    minVersion,
    maxVersion,
    ciphers: suites && suites.length > 0 ? suites.map(openSslCipherName).join(':') : null,
    verifyHostname: (text('ssl.endpoint.identification.algorithm') ?? '').toLowerCase() === 'https',
  }
}

function readKeyStore(text: (name: string) => string | null, origin: string): KeyStore | null {
  const type = (text('ssl.keystore.type') ?? 'JKS').toUpperCase()
  const location = text('ssl.keystore.location')
  const key = text('ssl.keystore.key')
  const certificateChain = text('ssl.keystore.certificate.chain')
  if (location === null && key === null && certificateChain === null) return null
  if (type === 'PKCS12') {
    if (location === null)
      throw new ConfigError(`${origin}: ssl.keystore.type PKCS12 needs ssl.keystore.location`)
    return { type, location, key: null, certificateChain: null, password: text('ssl.keystore.password') }
  }
  if (type !== 'PEM')
    throw new ConfigError(`${origin}: ssl.keystore.type ${type} is not supported; use PEM (or PKCS12)`)
  if (location !== null && (key !== null || certificateChain !== null))
    throw new ConfigError(
      `${origin}: give ssl.keystore.location or ssl.keystore.key with ssl.keystore.certificate.chain, not both`,
    )
  if (location === null && (key === null || certificateChain === null))
    throw new ConfigError(`${origin}: ssl.keystore.key and ssl.keystore.certificate.chain go together`)
  return { type, location, key, certificateChain, password: text('ssl.key.password') }
}

function readTrustStore(text: (name: string) => string | null, origin: string): TrustStore | null {
  const location = text('ssl.truststore.location')
  const certificates = text('ssl.truststore.certificates')
  if (location === null && certificates === null) return null
  const type = (text('ssl.truststore.type') ?? 'JKS').toUpperCase()
  if (type !== 'PEM')
    throw new ConfigError(`${origin}: ssl.truststore.type ${type} is not supported; use PEM`)
  if (location !== null && certificates !== null)
    throw new ConfigError(`${origin}: give ssl.truststore.location or ssl.truststore.certificates, not both`)
  return { location, certificates }
}

/** IANA names Kafka configs use (JSSE's) for OpenSSL's TLS 1.2 suites; TLS 1.3 names are the same in both. */
const IANA_TO_OPENSSL: Readonly<Record<string, string>> = {
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: 'ECDHE-ECDSA-AES128-GCM-SHA256',
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: 'ECDHE-RSA-AES128-GCM-SHA256',
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: 'ECDHE-ECDSA-AES256-GCM-SHA384',
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: 'ECDHE-RSA-AES256-GCM-SHA384',
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-ECDSA-CHACHA20-POLY1305',
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-RSA-CHACHA20-POLY1305',
  TLS_DHE_RSA_WITH_AES_128_GCM_SHA256: 'DHE-RSA-AES128-GCM-SHA256',
  TLS_DHE_RSA_WITH_AES_256_GCM_SHA384: 'DHE-RSA-AES256-GCM-SHA384',
}

function openSslCipherName(name: string): string {
  return IANA_TO_OPENSSL[name] ?? name
}

/** PEM blocks of one kind from a PEM text (a key store file holds the key and the chain). */
export function pemBlocks(pem: string, kind: 'PRIVATE KEY' | 'CERTIFICATE'): string[] {
  const pattern =
    kind === 'CERTIFICATE'
      ? /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g
      : /-----BEGIN (?:ENCRYPTED |RSA |EC )?PRIVATE KEY-----[\s\S]*?-----END (?:ENCRYPTED |RSA |EC )?PRIVATE KEY-----/g
  return pem.match(pattern) ?? []
}

/** The RFC 2253 form of a subject printed one RDN a line, first RDN first (node's X509Certificate.subject). */
export function rfc2253(subjectLines: string): string {
  return subjectLines
    .split('\n')
    .filter((line) => line !== '')
    .reverse()
    .map((rdn) => {
      const eq = rdn.indexOf('=')
      if (eq < 0) return rdn
      return `${rdn.slice(0, eq)}=${escapeDnValue(rdn.slice(eq + 1))}`
    })
    .join(',')
}

function escapeDnValue(value: string): string {
  let escaped = value.replace(/([,+"\\<>;])/g, '\\$1')
  if (escaped.startsWith('#') || escaped.startsWith(' ')) escaped = `\\${escaped}`
  if (escaped.endsWith(' ') && escaped.length > 1) escaped = `${escaped.slice(0, -1)}\\ `
  return escaped
}
