/**
 * A broker's Kafka listeners (what Kafka's SocketServer holds, one acceptor per endpoint):
 * each listener's socket server over the runtime's network, TLS and its principal mapping
 * for SSL/SASL_SSL, SASL state for SASL_*, the request context each request gets (the one
 * door to the broker's services, with the authorizer asked on the connection's principal),
 * and the ports bound. Apart from broker.ts, which composes the services these serve.
 */
import type { Clock } from '../common/clock.js'
import { ConfigError } from '../common/errors.js'
import type { FileSystem } from '../common/file-system.js'
import type { Logger } from '../common/logger.js'
import type { Random } from '../common/random.js'
import type { RequestObservation, RequestObserver } from '../ops/request-observer.js'
import type { RequestHeader } from '../protocol/generated/index.js'
import { operationName, resourceTypeName } from '../security/authorizer/acl.js'
import { type Authorizer, hostOf } from '../security/authorizer/standard-authorizer.js'
import type { DelegationTokenStore } from '../security/delegation-tokens.js'
import { type JwtValidatorSettings, loadJwks } from '../security/jwt-validator.js'
import { type Endpoint, usesSasl, usesTls } from '../security/listeners.js'
import {
  type KafkaPrincipal,
  NoMatchingRuleError,
  principalText,
  SslPrincipalMapper,
} from '../security/principal.js'
import { type SaslListenerSettings, saslListenerSettings, usesSignedTokens } from '../security/sasl-server.js'
import type { ScramCredentialStore } from '../security/scram-credentials.js'
import { listenerValue, mechanismValue } from '../security/security-config.js'
import { type TlsByteStream, type TlsNetwork, tlsSettings } from '../security/tls.js'
import type { BrokerConfig } from './broker-config.js'
import type { BrokerParts } from './broker-parts.js'
import type { BrokerServices } from './broker-services.js'
import type { Connection } from './connection.js'
import type { HandlerRegistry } from './handlers/registry.js'
import type { ClientQuotas } from './quota/client-quotas.js'
import type { RequestContext } from './request-context.js'
import { RequestMemoryPool } from './request-memory-pool.js'
import { SocketServer } from './socket-server.js'

/** What the listeners need of their broker. */
export interface BrokerListenersHost {
  readonly config: BrokerConfig
  /** The runtime's network and TLS, and the simulator's request tap (broker-parts.ts). */
  readonly parts: BrokerParts
  /** The services every request context opens onto. */
  readonly services: BrokerServices
  readonly handlers: HandlerRegistry
  readonly authorizer: Authorizer
  readonly scramCredentials: ScramCredentialStore
  readonly delegationTokens: DelegationTokenStore
  readonly clientQuotas: ClientQuotas
  readonly clock: Clock
  readonly random: Random
  readonly fileSystem: FileSystem
  readonly logger: Logger
  /** The ops listener's request metrics, when it is on. */
  requestObserver(): RequestObserver | undefined
  /** A programmer error reached a connection's top. */
  onFatal(error: Error): void
  /** A TLS network a listener made (reloadTls reloads them all). */
  onTlsNetwork(network: TlsNetwork): void
}

export class BrokerListeners {
  /** One per listener, in the order of `listeners`. */
  private readonly socketServers: SocketServer[] = []
  /** The SASL settings of each SASL listener, once it listens (the registry's basic auth reads them). */
  readonly saslListeners: SaslListenerSettings[] = []
  /** Bound port of each listener, by name. */
  private readonly boundPorts = new Map<string, number>()

  /** queued.max.request.bytes, shared by every listener's connections. */
  private readonly requestMemoryPool: RequestMemoryPool

  constructor(private readonly host: BrokerListenersHost) {
    this.requestMemoryPool = new RequestMemoryPool(host.config.queuedMaxRequestBytes)
  }

  /** The port the named listener bound; undefined before it listens. */
  boundPort(listener: string): number | undefined {
    return this.boundPorts.get(listener)
  }

  /** Connections accepted on every listener since startup. */
  get acceptedConnections(): number {
    return this.socketServers.reduce((n, s) => n + s.acceptedCount, 0)
  }

  /** Connections open now on every listener. */
  get connectionCount(): number {
    return this.socketServers.reduce((n, s) => n + s.connectionCount, 0)
  }

  /** The principals of the connections open now (for operators and tests). */
  connectedPrincipals(): string[] {
    return this.socketServers.flatMap((s) => s.principals())
  }

  /** Closes every listener and its connections. */
  close(): Promise<unknown> {
    return Promise.all(this.socketServers.map((server) => server.close()))
  }

  async listen(): Promise<void> {
    for (const endpoint of this.host.config.listeners.listeners) {
      const server = this.socketServerFor(endpoint, await this.jwtKeysFor(endpoint))
      this.socketServers.push(server)
      const port = await server.listen(endpoint.host, endpoint.port)
      this.boundPorts.set(endpoint.listener, port)
      this.host.logger.info(
        { listener: endpoint.listener, securityProtocol: endpoint.securityProtocol, port },
        'broker listening',
      )
    }
  }

  /** The key set of a SASL listener that checks signed OAUTHBEARER tokens, read through the injected disk. */
  private async jwtKeysFor(endpoint: Endpoint): Promise<JwtValidatorSettings['keys'] | null> {
    const name = endpoint.listener
    if (!usesSasl(endpoint.securityProtocol) || !usesSignedTokens(this.host.config, name)) return null
    const url = mechanismValue(this.host.config, name, 'OAUTHBEARER', 'sasl.oauthbearer.jwks.endpoint.url') as
      | string
      | null
    if (url === null)
      throw new ConfigError(
        `listener ${name}: signed OAUTHBEARER tokens need sasl.oauthbearer.jwks.endpoint.url`,
      )
    return loadJwks(url, this.host.fileSystem)
  }

  /** A listener: TLS from the runtime for SSL/SASL_SSL, SASL state on each connection for SASL_*. */
  private socketServerFor(endpoint: Endpoint, jwtKeys: JwtValidatorSettings['keys'] | null): SocketServer {
    const name = endpoint.listener
    let network = this.host.parts.network
    let principalOf: ((stream: TlsByteStream) => KafkaPrincipal | undefined) | undefined
    if (usesTls(endpoint.securityProtocol)) {
      if (!this.host.parts.tls)
        throw new Error(`listener ${name} needs TLS, which this runtime does not provide`)
      const tls = this.host.parts.tls.network(
        tlsSettings(this.host.config, name, `listener ${name}`, 'server'),
      )
      this.host.onTlsNetwork(tls)
      network = tls
      const mapper = new SslPrincipalMapper(
        String(listenerValue(this.host.config, name, 'ssl.principal.mapping.rules')),
      )
      principalOf = (stream) =>
        stream.peerSubjectDn === null
          ? undefined
          : { type: 'User', name: mapper.nameOf(stream.peerSubjectDn) }
    }
    const sasl = usesSasl(endpoint.securityProtocol)
      ? {
          ...saslListenerSettings(
            this.host.config,
            name,
            this.host.scramCredentials,
            this.host.random,
            this.host.clock,
            jwtKeys,
          ),
          delegationTokens: this.host.delegationTokens,
        }
      : undefined
    if (sasl) this.saslListeners.push(sasl)
    return new SocketServer(
      network,
      {
        handlers: this.host.handlers,
        socketRequestMaxBytes: this.host.config.socketRequestMaxBytes,
        maxQueuedRequests: this.host.config.queuedMaxRequests,
        ...(this.host.config.connectionQueuedMaxRequestBytes === null
          ? {}
          : { maxQueuedRequestBytes: this.host.config.connectionQueuedMaxRequestBytes }),
        ...(this.requestMemoryPool.maxBytes === null ? {} : { requestMemoryPool: this.requestMemoryPool }),
        logger: this.host.logger,
        onFatal: (error) => this.host.onFatal(error),
        requestObserver: this.host.requestObserver(),
        listenerName: name,
        ...(sasl ? { sasl } : {}),
        clock: this.host.clock,
        quotas: this.host.clientQuotas,
        makeContext: (connection, header, observation) =>
          requestContext(this.host, connection, header, observation),
        ...(this.host.parts.observer?.onRequest ? { tap: this.host.parts.observer.onRequest } : {}),
      },
      this.host.logger,
      principalOf
        ? (stream) => {
            try {
              return principalOf(stream as TlsByteStream)
            } catch (error) {
              if (error instanceof NoMatchingRuleError) return null
              throw error
            }
          }
        : undefined,
      { maxIdleMs: this.host.config.connectionsMaxIdleMs, clock: this.host.clock },
    )
  }
}

/** A request's context: its header and connection, the broker's services, the authorizer asked on its principal. */
function requestContext(
  host: BrokerListenersHost,
  connection: Connection,
  header: RequestHeader,
  observation: RequestObservation | undefined,
): RequestContext {
  const who = () => ({
    principal: principalText(connection.principal),
    host: hostOf(connection.remoteAddress),
  })
  return {
    header,
    apiVersion: header.requestApiVersion,
    connection,
    broker: host.services,
    purgatoryTimer: observation,
    authorize: (operation, resourceType, resourceName) => {
      const request = who()
      const allowed = host.authorizer.authorize(request, operation, resourceType, resourceName)
      // Kafka's authorizer logger: denials at debug (Metadata's filtering asks often).
      if (!allowed)
        host.logger.debug(
          {
            ...request,
            operation: operationName(operation),
            resource: `${resourceTypeName(resourceType)}:${resourceName}`,
          },
          'authorization denied',
        )
      return allowed
    },
    authorizeByResourceType: (operation, resourceType) =>
      host.authorizer.authorizeByResourceType(who(), operation, resourceType),
    authorizedOperations: (resourceType, resourceName) =>
      host.authorizer.authorizedOperations(who(), resourceType, resourceName),
  }
}
