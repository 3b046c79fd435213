/**
 * `--command-config FILE`: Kafka client properties (as kafka-console-producer and friends take
 * them, and as `tidelog start --secure` prints them) turned into the client's `ssl` and `sasl`
 * options. The librdkafka spellings (kcat -F, confluent-kafka) are read too, so one file
 * serves both. Trust and key stores are PEM only: tidelog has no JKS or PKCS12 reader.
 */
import { readFileSync } from 'node:fs'
import { parse as parseProperties } from 'dot-properties'
import type { ClientOptions } from '../client/client.js'
import { InvalidArgumentError } from '../client/errors.js'
import type { ClientSaslMechanismName, SslOptions } from '../client/security-options.js'
import { parseJaasConfig } from '../security/jaas.js'

export type SecurityOptions = Pick<ClientOptions, 'ssl' | 'sasl'>

const SECURITY_PROTOCOLS = ['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL']
const MECHANISMS = new Map<string, ClientSaslMechanismName>([
  ['PLAIN', 'plain'],
  ['SCRAM-SHA-256', 'scram-sha-256'],
  ['SCRAM-SHA-512', 'scram-sha-512'],
])

/** Every key this reader acts on; any other is refused rather than silently ignored. */
const KNOWN = new Set([
  'security.protocol',
  'sasl.mechanism',
  'sasl.mechanisms',
  'sasl.jaas.config',
  'sasl.username',
  'sasl.password',
  'ssl.truststore.type',
  'ssl.truststore.location',
  'ssl.truststore.certificates',
  'ssl.ca.location',
  'ssl.keystore.type',
  'ssl.keystore.location',
  'ssl.keystore.key',
  'ssl.keystore.certificate.chain',
  'ssl.key.password',
  'ssl.key.location',
  'ssl.certificate.location',
  'ssl.endpoint.identification.algorithm',
  'enable.ssl.certificate.verification',
])

export function loadCommandConfig(path: string): SecurityOptions {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    throw new InvalidArgumentError(`--command-config ${path}: ${(error as Error).message}`)
  }
  return commandConfigOptions(parseProperties(text) as Record<string, string>, path)
}

export function commandConfigOptions(
  props: Readonly<Record<string, string>>,
  source: string,
): SecurityOptions {
  const bad = (message: string) => new InvalidArgumentError(`--command-config ${source}: ${message}`)
  for (const key of Object.keys(props))
    if (!KNOWN.has(key)) throw bad(`${key} is not supported (supported: ${[...KNOWN].join(', ')})`)
  const protocol = (props['security.protocol'] ?? 'PLAINTEXT').toUpperCase()
  if (!SECURITY_PROTOCOLS.includes(protocol))
    throw bad(`security.protocol must be one of ${SECURITY_PROTOCOLS.join(', ')}, got ${protocol}`)
  const options: SecurityOptions = {}
  if (protocol.endsWith('SSL')) options.ssl = sslOptions(props, bad)
  if (protocol.startsWith('SASL')) {
    // Kafka's default mechanism is GSSAPI, which tidelog does not speak: say so instead.
    const name = (props['sasl.mechanism'] ?? props['sasl.mechanisms'] ?? 'GSSAPI').toUpperCase()
    const mechanism = MECHANISMS.get(name)
    if (mechanism === undefined)
      throw bad(`sasl.mechanism ${name} is not supported (${[...MECHANISMS.keys()].join(', ')})`)
    let username = props['sasl.username']
    let password = props['sasl.password']
    const jaas = props['sasl.jaas.config']
    if (jaas !== undefined) {
      let entry: ReturnType<typeof parseJaasConfig>
      try {
        entry = parseJaasConfig(jaas, 'sasl.jaas.config')
      } catch (error) {
        throw bad((error as Error).message)
      }
      username = entry.options.get('username') ?? username
      password = entry.options.get('password') ?? password
    }
    if (username === undefined || password === undefined)
      throw bad(
        `security.protocol ${protocol} needs sasl.jaas.config with username="..." password="..." (or sasl.username and sasl.password)`,
      )
    options.sasl = { mechanism, username, password }
  }
  return options
}

function sslOptions(props: Readonly<Record<string, string>>, bad: (message: string) => Error): SslOptions {
  const read = (key: string): string => {
    try {
      return readFileSync(props[key], 'utf8')
    } catch (error) {
      throw bad(`${key}: ${(error as Error).message}`)
    }
  }
  const pemOnly = (key: string) => {
    const type = (props[key] ?? 'PEM').toUpperCase()
    if (type !== 'PEM')
      throw bad(`${key} ${type} is not supported: tidelog reads PEM trust and key stores only`)
  }
  pemOnly('ssl.truststore.type')
  pemOnly('ssl.keystore.type')
  const ssl: SslOptions = {}
  if (props['ssl.truststore.certificates'] !== undefined) ssl.ca = props['ssl.truststore.certificates']
  else if (props['ssl.truststore.location'] !== undefined) ssl.ca = read('ssl.truststore.location')
  else if (props['ssl.ca.location'] !== undefined) ssl.ca = read('ssl.ca.location')
  if (props['ssl.keystore.location'] !== undefined) {
    // A PEM key store holds the private key and the certificate chain in one file.
    const pem = read('ssl.keystore.location')
    ssl.key = pemBlocks(pem, /PRIVATE KEY/)
    ssl.cert = pemBlocks(pem, /^CERTIFICATE$/)
    if (ssl.key === '' || ssl.cert === '')
      throw bad('ssl.keystore.location must hold a PEM private key and its certificate chain')
  }
  if (props['ssl.keystore.key'] !== undefined) ssl.key = props['ssl.keystore.key']
  if (props['ssl.keystore.certificate.chain'] !== undefined)
    ssl.cert = props['ssl.keystore.certificate.chain']
  if (props['ssl.key.location'] !== undefined) ssl.key = read('ssl.key.location')
  if (props['ssl.certificate.location'] !== undefined) ssl.cert = read('ssl.certificate.location')
  if (props['ssl.key.password'] !== undefined) ssl.keyPassword = props['ssl.key.password']
  const identification = props['ssl.endpoint.identification.algorithm']
  if (identification !== undefined) {
    const value = identification.toLowerCase()
    if (value !== '' && value !== 'https' && value !== 'none')
      throw bad(`ssl.endpoint.identification.algorithm must be https or empty, got ${identification}`)
    if (value !== 'https') ssl.verifyHostname = false
  }
  const verification = props['enable.ssl.certificate.verification']
  if (verification !== undefined) {
    if (verification !== 'true' && verification !== 'false')
      throw bad(`enable.ssl.certificate.verification must be true or false, got ${verification}`)
    ssl.rejectUnauthorized = verification === 'true'
  }
  return ssl
}

/** The PEM blocks whose label matches, e.g. every CERTIFICATE of a chain. */
function pemBlocks(pem: string, label: RegExp): string {
  const blocks = pem.match(/-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g) ?? []
  return blocks
    .filter((block) => label.test(/-----BEGIN ([A-Z0-9 ]+)-----/.exec(block)![1]))
    .map((block) => `${block}\n`)
    .join('')
}
