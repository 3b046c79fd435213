/**
 * How this broker dials the others (replica fetchers): over the inter-broker listener's
 * security protocol, with that listener's `ssl.*` settings for TLS and, for SASL, the
 * mechanism `sasl.mechanism.inter.broker.protocol` with the `username`/`password` of that
 * listener's JAAS config, as Kafka's inter-broker client takes them.
 */
import type { Clock } from '../common/clock.js'
import { ConfigError } from '../common/errors.js'
import type { Network, Transport } from '../common/network.js'
import type { Random } from '../common/random.js'
import { parseJaasConfig } from './jaas.js'
import { type Endpoint, usesSasl, usesTls } from './listeners.js'
import { saslClientTransport } from './sasl-client.js'
import { jaasProperty, SASL_MECHANISMS, type SaslMechanism } from './sasl-server.js'
import { listenerValue, type SecurityConfigSource } from './security-config.js'
import { type TlsNetwork, type TlsProvider, tlsSettings } from './tls.js'

export function interBrokerTransport(
  config: SecurityConfigSource,
  listener: Endpoint,
  parts: { network: Network; tls?: TlsProvider; random: Random; clock: Clock; clientId: string },
  /** Told of the TLS network made for the inter-broker client, so certificates can be reloaded. */
  onTlsNetwork: (network: TlsNetwork) => void = () => {},
): Transport {
  let transport: Transport = parts.network
  if (usesTls(listener.securityProtocol)) {
    if (!parts.tls)
      throw new ConfigError(
        `inter-broker listener ${listener.listener}: TLS is not available in this runtime`,
      )
    const tls = parts.tls.network(tlsSettings(config, listener.listener, 'inter-broker client', 'client'))
    onTlsNetwork(tls)
    transport = tls
  }
  if (!usesSasl(listener.securityProtocol)) return transport
  const mechanism = String(
    listenerValue(config, listener.listener, 'sasl.mechanism.inter.broker.protocol'),
  ).toUpperCase()
  if (!(SASL_MECHANISMS as readonly string[]).includes(mechanism))
    throw new ConfigError(
      `sasl.mechanism.inter.broker.protocol ${mechanism} is not supported (${SASL_MECHANISMS.join(', ')}); the inter-broker listener ${listener.listener} uses SASL`,
    )
  const property = jaasProperty(listener.listener, mechanism)
  const text = config.listenerOverrides.get(property) as string | undefined
  if (text === undefined)
    throw new ConfigError(`the inter-broker client needs ${property} with username and password`)
  const options = parseJaasConfig(text, property).options
  if (mechanism === 'OAUTHBEARER') return oauthBearerClient(transport, options, property, parts)
  const username = options.get('username')
  const password = options.get('password')
  if (username === undefined || password === undefined)
    throw new ConfigError(`${property}: the inter-broker client needs username="..." and password="..."`)
  return saslClientTransport(transport, {
    mechanism: mechanism as SaslMechanism,
    username,
    password,
    random: parts.random,
    clientId: parts.clientId,
  })
}

/**
 * Kafka's OAuthBearerUnsecuredLoginCallbackHandler: an unsigned token whose subject is
 * `unsecuredLoginStringClaim_sub`, valid for `unsecuredLoginLifetimeSeconds` (3600).
 */
function oauthBearerClient(
  transport: Transport,
  options: ReadonlyMap<string, string>,
  property: string,
  parts: { random: Random; clientId: string; clock: Clock },
): Transport {
  const subject = options.get('unsecuredLoginStringClaim_sub')
  if (subject === undefined)
    throw new ConfigError(`${property}: the inter-broker client needs unsecuredLoginStringClaim_sub="..."`)
  const lifetimeSeconds = Number(options.get('unsecuredLoginLifetimeSeconds') ?? '3600')
  return saslClientTransport(transport, {
    mechanism: 'OAUTHBEARER',
    username: subject,
    password: '',
    random: parts.random,
    clientId: parts.clientId,
    token: () => unsecuredJwt(subject, parts.clock.nowMs(), lifetimeSeconds),
  })
}

export function unsecuredJwt(subject: string, nowMs: number, lifetimeSeconds: number): string {
  const iat = Math.floor(nowMs / 1000)
  const encode = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url')
  return `${encode({ alg: 'none' })}.${encode({ sub: subject, iat, exp: iat + lifetimeSeconds })}.`
}
