/**
 * The security properties of a broker, with Kafka's names and defaults: the listener map,
 * TLS (`ssl.*`) and SASL (`sasl.*`), each of which a listener may override with
 * `listener.name.<listener>.<property>` (SASL's JAAS config per mechanism:
 * `listener.name.<listener>.<mechanism>.sasl.jaas.config`).
 */
import { type ConfigDef, type ConfigValue, parseConfigValue } from '../common/config-def.js'
import { ConfigError } from '../common/errors.js'
import { DEFAULT_SECURITY_PROTOCOL_MAP, type ListenerSettings, SECURITY_PROTOCOLS } from './listeners.js'

function def(
  name: string,
  type: ConfigDef['type'],
  defaultValue: ConfigValue,
  doc: string,
  validator?: ConfigDef['validator'],
): ConfigDef {
  return { name, type, defaultValue, doc, validator, ...(type === 'password' ? { sensitive: true } : {}) }
}

export const securityConfigDefs: readonly ConfigDef[] = [
  def(
    'listener.security.protocol.map',
    'list',
    DEFAULT_SECURITY_PROTOCOL_MAP,
    'Listener name to security protocol.',
  ),
  def('inter.broker.listener.name', 'string', null, 'Listener the brokers use among themselves.'),
  def(
    'security.inter.broker.protocol',
    'string',
    'PLAINTEXT',
    'Security protocol between brokers (the listener named after it); not with inter.broker.listener.name.',
    { oneOf: SECURITY_PROTOCOLS },
  ),
  def('ssl.keystore.type', 'string', 'JKS', 'Key store format; tidelog reads PEM and PKCS12.'),
  def('ssl.keystore.location', 'string', null, 'Key store file (PEM: private key and certificate chain).'),
  def('ssl.keystore.password', 'password', null, 'Password of a PKCS12 key store.'),
  def('ssl.keystore.key', 'password', null, 'PEM private key inline (ssl.keystore.type=PEM).'),
  def(
    'ssl.keystore.certificate.chain',
    'password',
    null,
    'PEM certificate chain inline (ssl.keystore.type=PEM).',
  ),
  def('ssl.key.password', 'password', null, 'Password of an encrypted private key.'),
  def('ssl.truststore.type', 'string', 'JKS', 'Trust store format; tidelog reads PEM.'),
  def('ssl.truststore.location', 'string', null, 'Trust store file (PEM certificates).'),
  def('ssl.truststore.password', 'password', null, 'Trust store password (not needed for PEM).'),
  def(
    'ssl.truststore.certificates',
    'password',
    null,
    'PEM trusted certificates inline (ssl.truststore.type=PEM).',
  ),
  def('ssl.client.auth', 'string', 'none', 'Client certificates: none, requested or required.', {
    oneOf: ['none', 'requested', 'required'],
  }),
  def(
    'ssl.principal.mapping.rules',
    'string',
    'DEFAULT',
    'Rules mapping a certificate DN to a principal name.',
  ),
  def('ssl.enabled.protocols', 'list', ['TLSv1.2', 'TLSv1.3'], 'TLS versions accepted.', {
    oneOf: ['TLSv1.2', 'TLSv1.3'],
  }),
  def('ssl.protocol', 'string', 'TLSv1.3', 'Highest TLS version offered by the inter-broker client.', {
    oneOf: ['TLSv1.2', 'TLSv1.3', 'TLS'],
  }),
  def(
    'ssl.cipher.suites',
    'list',
    null,
    'Cipher suites (IANA or OpenSSL names); the TLS defaults when null.',
  ),
  def(
    'ssl.endpoint.identification.algorithm',
    'string',
    'https',
    'Host name verification of the inter-broker client: https, or empty for none.',
  ),
  def(
    'sasl.enabled.mechanisms',
    'list',
    ['GSSAPI'],
    'SASL mechanisms served; tidelog serves PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.',
  ),
  def('sasl.mechanism.inter.broker.protocol', 'string', 'GSSAPI', 'SASL mechanism between brokers.'),
  def('sasl.server.max.receive.size', 'int', 524288, 'Largest request read before authentication.', {
    min: 1,
  }),
  def(
    'sasl.server.callback.handler.class',
    'string',
    null,
    'OAUTHBEARER: OAuthBearerValidatorCallbackHandler checks signed tokens; unsecured tokens otherwise.',
  ),
  def(
    'sasl.oauthbearer.jwks.endpoint.url',
    'string',
    null,
    'OAUTHBEARER signed tokens: the key set (a file: URL).',
  ),
  def(
    'sasl.oauthbearer.expected.issuer',
    'string',
    null,
    'OAUTHBEARER signed tokens: the required iss claim.',
  ),
  def('sasl.oauthbearer.expected.audience', 'list', null, 'OAUTHBEARER signed tokens: accepted aud claims.'),
  def('sasl.oauthbearer.sub.claim.name', 'string', 'sub', 'OAUTHBEARER signed tokens: the principal claim.'),
  def('sasl.oauthbearer.scope.claim.name', 'string', 'scope', 'OAUTHBEARER signed tokens: the scope claim.'),
  def(
    'sasl.oauthbearer.clock.skew.seconds',
    'int',
    30,
    'OAUTHBEARER signed tokens: tolerated clock difference.',
    { min: 0 },
  ),
  def(
    'connection.failed.authentication.delay.ms',
    'int',
    100,
    'Delay before a connection that failed to authenticate is closed.',
    { min: 0 },
  ),
  def(
    'connections.max.reauth.ms',
    'long',
    0,
    'Lifetime of a SASL session (KIP-368): clients re-authenticate before it ends, or are disconnected; 0: for ever.',
    { min: 0 },
  ),
]

const MECHANISM_PREFIXES = ['plain', 'scram-sha-256', 'scram-sha-512', 'oauthbearer', 'gssapi']

/** Mechanism-specific JAAS property after the listener prefix: `<mechanism>.sasl.jaas.config`. */
const JAAS_SUFFIX = '.sasl.jaas.config'

/**
 * Parses every `listener.name.<listener>.<property>`: the listener must be configured, the
 * property a security property (or a mechanism's JAAS config); Kafka would ignore a typo,
 * tidelog says so.
 */
export function checkListenerOverrides(
  props: ReadonlyMap<string, string>,
  listeners: ListenerSettings,
  defOf: (name: string) => ConfigDef | undefined,
): Map<string, ConfigValue> {
  const parsed = new Map<string, ConfigValue>()
  for (const [name, raw] of props) {
    const listener = listeners.listeners.find((l) =>
      name.startsWith(`listener.name.${l.listener.toLowerCase()}.`),
    )
    if (listener === undefined)
      throw new ConfigError(`${name}: no listener of that name in listeners (names are lower case here)`)
    const rest = name.slice(`listener.name.${listener.listener.toLowerCase()}.`.length)
    if (rest.endsWith(JAAS_SUFFIX) && rest.length > JAAS_SUFFIX.length) {
      parsed.set(name, raw.trim())
      continue
    }
    // `<mechanism>.<sasl property>` (Kafka's listener.name.l.oauthbearer.sasl.server.callback.handler.class).
    const mechanism = MECHANISM_PREFIXES.find((m) => rest.startsWith(`${m}.sasl.`))
    const property = mechanism ? rest.slice(mechanism.length + 1) : rest
    const definition = defOf(property)
    if (
      definition === undefined ||
      !(
        property.startsWith('ssl.') ||
        property.startsWith('sasl.') ||
        property.startsWith('connections.max.reauth')
      )
    )
      throw new ConfigError(`${name}: ${rest} cannot be set per listener`)
    parsed.set(name, parseConfigValue(definition, raw))
  }
  return parsed
}

/** What a listener's security reads: its override, else the broker-wide value. */
export interface SecurityConfigSource {
  readonly values: ReadonlyMap<string, ConfigValue>
  readonly listenerOverrides: ReadonlyMap<string, ConfigValue>
}

export function listenerValue(config: SecurityConfigSource, listener: string, name: string): ConfigValue {
  const override = config.listenerOverrides.get(`listener.name.${listener.toLowerCase()}.${name}`)
  if (override !== undefined) return override
  return config.values.get(name) ?? null
}

/** A SASL property for one mechanism of a listener: `listener.name.<l>.<mechanism>.<name>`, else listenerValue. */
export function mechanismValue(
  config: SecurityConfigSource,
  listener: string,
  mechanism: string,
  name: string,
): ConfigValue {
  const override = config.listenerOverrides.get(
    `listener.name.${listener.toLowerCase()}.${mechanism.toLowerCase()}.${name}`,
  )
  return override !== undefined ? override : listenerValue(config, listener, name)
}
