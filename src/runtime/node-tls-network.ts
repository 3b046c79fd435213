/**
 * TLS networks with node:tls, beside node-network.ts's TCP: the broker's SSL and SASL_SSL
 * listeners and its inter-broker client. Key stores and trust stores are read here, once,
 * when the network is made (a file that cannot be read or a key that does not fit its
 * certificate is a ConfigError at startup, not a failed handshake later).
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import type { SecureContext, Server, TLSSocket } from 'node:tls'
import { ConfigError } from '../common/errors.js'
import type { NetworkListener } from '../common/network.js'
import { socketStream } from '../common/socket-stream.js'
import {
  pemBlocks,
  rfc2253,
  type TlsByteStream,
  type TlsNetwork,
  type TlsProvider,
  type TlsSettings,
} from '../security/tls.js'

/**
 * node:tls, loaded by the first TLS listener or connection: a broker with plaintext
 * listeners only never compiles it (about 2 ms of start-up, docs/notes/startup.md).
 */
const loadBuiltin = createRequire(import.meta.url)
let tlsModule: typeof import('node:tls') | null = null
function tls(): typeof import('node:tls') {
  tlsModule ??= loadBuiltin('node:tls') as typeof import('node:tls')
  return tlsModule
}

/** A handshake that has not finished after this long is dropped (a client that speaks plaintext and waits). */
const HANDSHAKE_TIMEOUT_MS = 10_000

export const nodeTls: TlsProvider = {
  network(settings) {
    const { options, context } = loadContext(settings)
    return tlsNetwork(settings, options, context)
  },
}

/** Reads the stores and builds the context once, so a bad key or certificate fails here, not each handshake. */
function loadContext(settings: TlsSettings): { options: ContextOptions; context: SecureContext } {
  const options = secureContextOptions(settings)
  try {
    return { options, context: tls().createSecureContext(options) }
  } catch (error) {
    throw new ConfigError(`${settings.origin}: TLS key or certificates unusable: ${(error as Error).message}`)
  }
}

function read(path: string, settings: TlsSettings, what: string): Buffer {
  try {
    return readFileSync(path)
  } catch (error) {
    throw new ConfigError(`${settings.origin}: cannot read ${what} ${path}: ${(error as Error).message}`)
  }
}

type ContextOptions = NonNullable<Parameters<typeof import('node:tls').createSecureContext>[0]>

function secureContextOptions(settings: TlsSettings): ContextOptions {
  const options: ContextOptions = {
    minVersion: settings.minVersion,
    maxVersion: settings.maxVersion,
    ...(settings.ciphers !== null ? { ciphers: settings.ciphers } : {}),
  }
  const keyStore = settings.keyStore
  if (keyStore?.type === 'PKCS12') {
    options.pfx = read(keyStore.location!, settings, 'ssl.keystore.location')
    if (keyStore.password !== null) options.passphrase = keyStore.password
  } else if (keyStore) {
    const pem =
      keyStore.location !== null
        ? read(keyStore.location, settings, 'ssl.keystore.location').toString()
        : null
    const keys = pemBlocks(pem ?? keyStore.key!, 'PRIVATE KEY')
    const chain = pemBlocks(pem ?? keyStore.certificateChain!, 'CERTIFICATE')
    if (keys.length !== 1)
      throw new ConfigError(`${settings.origin}: the key store holds ${keys.length} private keys, expected 1`)
    if (chain.length === 0) throw new ConfigError(`${settings.origin}: the key store holds no certificate`)
    options.key = keys[0]
    options.cert = chain.join('\n')
    if (keyStore.password !== null) options.passphrase = keyStore.password
  }
  const trust = settings.trustStore
  if (trust) {
    const pem =
      trust.location !== null
        ? read(trust.location, settings, 'ssl.truststore.location').toString()
        : trust.certificates!
    const certificates = pemBlocks(pem, 'CERTIFICATE')
    if (certificates.length === 0)
      throw new ConfigError(`${settings.origin}: the trust store holds no certificate`)
    options.ca = certificates
  }
  return options
}

function peerSubjectDn(socket: TLSSocket): string | null {
  const certificate = socket.getPeerX509Certificate()
  return certificate ? rfc2253(certificate.subject) : null
}

function tlsStream(socket: TLSSocket): TlsByteStream {
  const stream = socketStream(socket)
  return Object.assign(stream, { peerSubjectDn: peerSubjectDn(socket) })
}

function tlsNetwork(
  settings: TlsSettings,
  initialOptions: ContextOptions,
  initialContext: SecureContext,
): TlsNetwork {
  let options = initialOptions
  let context = initialContext
  const servers = new Set<Server>()
  return {
    reload() {
      const loaded = loadContext(settings)
      options = loaded.options
      context = loaded.context
      for (const server of servers) server.setSecureContext(options)
    },
    listen(host, port, onConnection) {
      // tls.Server builds its context from the key material options (it ignores secureContext).
      const server = tls().createServer({
        ...options,
        requestCert: settings.clientAuth !== 'none',
        // 'requested' accepts a client without a certificate; one with a certificate the
        // trust store does not vouch for is refused below, as Java's wantClientAuth does.
        rejectUnauthorized: settings.clientAuth === 'required',
        handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
      })
      servers.add(server)
      server.on('close', () => servers.delete(server))
      server.on('secureConnection', (socket) => {
        if (settings.clientAuth === 'requested' && !socket.authorized && socket.getPeerX509Certificate()) {
          socket.destroy()
          return
        }
        onConnection(tlsStream(socket))
      })
      // A failed handshake (plaintext spoken to this port, an untrusted client
      // certificate) ends that socket only; nothing to report beyond it.
      server.on('tlsClientError', (_error, socket) => socket.destroy())
      return new Promise<NetworkListener>((resolve, reject) => {
        server.once('error', reject)
        server.listen({ host, port, backlog: 1024 }, () => {
          server.off('error', reject)
          resolve({
            port: (server.address() as AddressInfo).port,
            close: () => new Promise<void>((done) => server.close(() => done())),
          })
        })
      })
    },
    connect(host, port) {
      return new Promise((resolve, reject) => {
        const socket = tls().connect({
          host,
          port,
          secureContext: context,
          servername: /^[\d.]+$|:/.test(host) ? undefined : host,
          rejectUnauthorized: true,
          ...(settings.verifyHostname ? {} : { checkServerIdentity: () => undefined }),
        })
        socket.once('secureConnect', () => {
          socket.off('error', reject)
          resolve(tlsStream(socket))
        })
        socket.once('error', reject)
      })
    },
  }
}

/**
 * node:https's server options for `settings` (a TLS listener's key store, trust store and
 * ssl.client.auth): the schema registry's HTTPS listener serves with the broker's certificates.
 */
export function httpsServerOptions(
  settings: TlsSettings,
): ContextOptions & { requestCert: boolean; rejectUnauthorized: boolean } {
  const options = secureContextOptions(settings)
  try {
    tls().createSecureContext(options)
  } catch (error) {
    throw new ConfigError(`${settings.origin}: TLS key or certificates unusable: ${(error as Error).message}`)
  }
  return {
    ...options,
    requestCert: settings.clientAuth !== 'none',
    rejectUnauthorized: settings.clientAuth === 'required',
  }
}
