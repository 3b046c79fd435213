/**
 * A broker's HTTP side: the ops listener (metrics, health checks, console) and the schema
 * registry it hosts, with what the registry needs of the broker (the `_schemas` topic, a
 * Kafka client's connection settings, its security over the broker's SASL users and
 * authorizer). Kafka has no such part; apart from broker.ts so the broker's composition
 * does not carry the registry's wiring.
 */
import { readFileSync } from 'node:fs'
import type { SaslOptions, SslOptions } from '../client/security-options.js'
import type { Logger } from '../common/logger.js'
import { type BrokerId, type ClusterImage, NO_LEADER } from '../metadata/cluster-image.js'
import type { TopicAdmin } from '../metadata/topic-admin.js'
import { OpsServer } from '../ops/ops-server.js'
import { SchemaRegistryService } from '../ops/schema-registry-service.js'
import { httpsServerOptions } from '../runtime/node-tls-network.js'
import type { RegistrySecurity } from '../schema-registry/auth.js'
import type { RegistryHost } from '../schema-registry/registry.js'
import type { RegistryClientOptions } from '../schema-registry/types.js'
import { AclOperation, CLUSTER_NAME, ResourceType, resourceTypeName } from '../security/authorizer/acl.js'
import type { Authorization } from '../security/authorizer/authorization.js'
import { type Authorizer, hostOf } from '../security/authorizer/standard-authorizer.js'
import { parseJaasConfig } from '../security/jaas.js'
import { type Endpoint, usesSasl, usesTls } from '../security/listeners.js'
import { PasswordCheck } from '../security/password-check.js'
import { jaasProperty, type SaslListenerSettings } from '../security/sasl-server.js'
import type { ScramCredentialStore } from '../security/scram-credentials.js'
import { listenerValue } from '../security/security-config.js'
import { pemBlocks, tlsSettings } from '../security/tls.js'
import { type BrokerConfig, parseListener } from './broker-config.js'

/** What the schema registry's wiring reads of its broker. */
export interface RegistryBroker {
  readonly nodeId: BrokerId
  readonly config: BrokerConfig
  readonly logger: Logger
  readonly metadata: { image(): ClusterImage }
  readonly topicAdmin: TopicAdmin
  readonly authorizer: Authorizer
  /** The ACLs of the metadata store; null without an authorizer. */
  readonly acls: Authorization['acls']
  readonly scramCredentials: ScramCredentialStore
  /** The SASL settings of each SASL listener, filled as they start listening. */
  readonly saslListeners: readonly SaslListenerSettings[]
  /** `host:port` of the named listener, as bound. */
  listenerAddress(listener: string): string
}

/** The schema registry's topic (Confluent's kafkastore.topic) and its replicas (capped at the brokers). */
const SCHEMAS_TOPIC = '_schemas'
const SCHEMAS_REPLICATION_FACTOR = 3

/** ops: the HTTP listener when tidelog.http.listener is set. */
export async function startOps(
  config: BrokerConfig,
  logger: Logger,
  registry: SchemaRegistryService | null,
): Promise<OpsServer | null> {
  const listener = config.values.get('tidelog.http.listener') as string | null
  if (listener === null || listener === '') return null
  return OpsServer.start(
    {
      listener: parseListener(listener),
      slowRequestMs: config.values.get('tidelog.request.log.slow.ms') as number,
      topicAdminEnabled: config.values.get('tidelog.console.topic.admin.enable') === true,
    },
    logger,
    registry,
  )
}

/** ops: the schema registry (loaded on its first request) unless tidelog.schema.registry.enable is false. */
export async function startSchemaRegistry(
  config: BrokerConfig,
  logger: Logger,
): Promise<SchemaRegistryService | null> {
  if (config.values.get('tidelog.schema.registry.enable') === false) return null
  const listener = config.values.get('tidelog.schema.registry.listener') as string | null
  const https = listener !== null && /^\s*https:\/\//i.test(listener)
  const bound = listener === null || listener === '' ? null : parseListener(listener)
  return SchemaRegistryService.start(bound, logger, https ? registryHttpsOptions(config) : null)
}

/**
 * An https:// registry listener serves with a Kafka TLS listener's ssl.* settings (its key
 * store, trust store and ssl.client.auth): the one tidelog.schema.registry.ssl.listener.name
 * names, else the first SSL or SASL_SSL listener, else the top-level ssl.* settings.
 */
function registryHttpsOptions(config: BrokerConfig) {
  const named = config.values.get('tidelog.schema.registry.ssl.listener.name') as string | null
  const listener =
    named?.toUpperCase() ??
    config.listeners.listeners.find((l) => usesTls(l.securityProtocol))?.listener ??
    // No TLS listener: listenerValue falls back to the top-level ssl.* of this made-up name.
    'SCHEMA_REGISTRY'
  return httpsServerOptions(tlsSettings(config, listener, 'schema registry listener', 'server'))
}

/** The registry's URL for other brokers: its own listener's, else the HTTP listener's path. */
export function advertisedRegistryUrl(
  schemaRegistry: SchemaRegistryService | null,
  ops: OpsServer | null,
  advertisedHost: string,
): { schemaRegistryUrl?: string } {
  if (!schemaRegistry) return {}
  const url = schemaRegistry.url ?? (ops ? `${ops.url}schema-registry` : null)
  if (url === null) return {}
  // A wildcard bind is reached at the broker's advertised host.
  return {
    schemaRegistryUrl: url.replace(/^(https?):\/\/(0\.0\.0\.0|\[::\])(?=:)/, `$1://${advertisedHost}`),
  }
}

/** What the schema registry needs of this broker; `_schemas` partition 0's leader is its writer. */
export function registryHost(broker: RegistryBroker): RegistryHost {
  const leaderOfSchemas = () =>
    broker.metadata.image().topics.get(SCHEMAS_TOPIC)?.partitions[0]?.leader ?? NO_LEADER
  return {
    nodeId: broker.nodeId,
    kafkaClient: () => registryClientOptions(broker),
    clusterId: () => broker.metadata.image().clusterId,
    schemasLeader: leaderOfSchemas,
    registryUrlOf: (nodeId) => broker.metadata.image().brokers.get(nodeId)?.schemaRegistryUrl ?? null,
    ensureSchemasTopic: () =>
      broker.topicAdmin.ensureInternalTopic({
        name: SCHEMAS_TOPIC,
        partitions: 1,
        replicationFactor: SCHEMAS_REPLICATION_FACTOR,
        configs: { 'cleanup.policy': 'compact' },
      }),
  }
}

/**
 * How the registry's client connects: without an authorizer, a PLAINTEXT listener if the
 * broker has one (no credentials needed); else the inter-broker listener, as this broker's
 * replica fetchers do, with their identity (the inter-broker SASL user, a super user or
 * one allowed on `_schemas` where ACLs are on) and the listener's CAs and key store.
 */
function registryClientOptions(broker: RegistryBroker): RegistryClientOptions {
  const listeners = broker.config.listeners
  const plain = listeners.listeners.find((l) => l.securityProtocol === 'PLAINTEXT')
  if (plain && broker.acls === null) return { bootstrapServers: broker.listenerAddress(plain.listener) }
  const endpoint = listeners.listeners.find((l) => l.listener === listeners.interBrokerListener)
  if (!endpoint) throw new Error('the schema registry found no inter-broker listener to connect to')
  const name = endpoint.listener
  const options: { bootstrapServers: string; ssl?: SslOptions; sasl?: SaslOptions } = {
    bootstrapServers: broker.listenerAddress(name),
  }
  if (usesTls(endpoint.securityProtocol)) {
    const settings = tlsSettings(broker.config, name, 'the schema registry client', 'client')
    const pem = (location: string | null, text: string | null) =>
      location !== null ? readFileSync(location, 'utf8') : (text ?? '')
    const ssl: SslOptions = {
      // Its own listener: the certificate is checked against the CAs, not the host dialled.
      verifyHostname: false,
      ...(settings.trustStore
        ? {
            ca: pemBlocks(pem(settings.trustStore.location, settings.trustStore.certificates), 'CERTIFICATE'),
          }
        : {}),
    }
    const keyStore = settings.keyStore
    if (keyStore?.type === 'PEM' && settings.clientAuth !== 'none') {
      const key = pem(keyStore.location, keyStore.key)
      const chain = pem(keyStore.location, keyStore.certificateChain)
      ssl.key = pemBlocks(key, 'PRIVATE KEY')[0]
      ssl.cert = pemBlocks(chain, 'CERTIFICATE').join('\n')
      if (keyStore.password !== null) ssl.keyPassword = keyStore.password
    }
    options.ssl = ssl
  }
  if (usesSasl(endpoint.securityProtocol)) {
    const mechanism = String(
      listenerValue(broker.config, name, 'sasl.mechanism.inter.broker.protocol'),
    ).toUpperCase()
    if (!['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'].includes(mechanism))
      throw new Error(
        `the schema registry's client logs in with PLAIN or SCRAM only; the inter-broker listener ${name} uses ${mechanism}`,
      )
    const property = jaasProperty(name, mechanism)
    const text = broker.config.listenerOverrides.get(property) as string | undefined
    const jaas = text === undefined ? null : parseJaasConfig(text, property).options
    const username = jaas?.get('username')
    const password = jaas?.get('password')
    if (username === undefined || password === undefined)
      throw new Error(`the schema registry's client needs username and password in ${property}`)
    options.sasl = { mechanism: mechanism.toLowerCase() as SaslOptions['mechanism'], username, password }
  }
  return options
}

/**
 * The schema registry's security (schema-registry/auth.ts), null when off:
 * tidelog.schema.registry.authentication.method BASIC, or AUTO with a listener that uses
 * SASL with PLAIN or SCRAM. Passwords are checked against those listeners' PLAIN users and
 * the cluster's SCRAM credentials; the broker's authorizer decides on the topics and cluster the registry maps requests to.
 */
export function registrySecurity(broker: RegistryBroker): RegistrySecurity | null {
  const method = String(broker.config.values.get('tidelog.schema.registry.authentication.method'))
  const passwordMechanisms = (l: Endpoint) =>
    usesSasl(l.securityProtocol) &&
    (listenerValue(broker.config, l.listener, 'sasl.enabled.mechanisms') as string[]).some((m) =>
      /^(PLAIN|SCRAM-SHA-(256|512))$/i.test(m),
    )
  if (method === 'NONE') return null
  if (method === 'AUTO' && !broker.config.listeners.listeners.some(passwordMechanisms)) return null
  const check = new PasswordCheck({
    plainUsers: () => broker.saslListeners.map((l) => l.plainUsers),
    scramCredentials: broker.scramCredentials,
  })
  const operations = {
    DESCRIBE: AclOperation.DESCRIBE,
    WRITE: AclOperation.WRITE,
    DELETE: AclOperation.DELETE,
    DESCRIBE_CONFIGS: AclOperation.DESCRIBE_CONFIGS,
    ALTER_CONFIGS: AclOperation.ALTER_CONFIGS,
  } as const
  return {
    verify: (user, password) => check.verify(user, password),
    authorize: (principal, host, operation, resource) => {
      const [type, name] =
        resource.type === 'topic' ? [ResourceType.TOPIC, resource.name] : [ResourceType.CLUSTER, CLUSTER_NAME]
      const request = { principal, host: hostOf(host) }
      const allowed = broker.authorizer.authorize(request, operations[operation], type, name)
      if (!allowed)
        broker.logger.debug(
          { ...request, operation, resource: `${resourceTypeName(type)}:${name}` },
          'schema registry authorization denied',
        )
      return allowed
    },
  }
}
