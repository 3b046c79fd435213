/**
 * A broker: the listener, the handlers, and the services they use, built from injected parts
 * (broker-parts.ts): the CLI and startBroker() pass Node's, the simulator its own, and both
 * run this class. Start with `Broker.start(config, parts)`; `stop()` is a controlled
 * shutdown (leaderships moved away, connections closed, logs flushed and closed).
 */

import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { SaslOptions, SslOptions } from '../client/security-options.js'
import { InvariantError } from '../common/assert.js'
import { ExponentialBackoff } from '../common/backoff.js'
import type { Clock, TimerHandle } from '../common/clock.js'
import { ConfigError } from '../common/errors.js'
import type { FileLock, FileSystem } from '../common/file-system.js'
import { createLogger, type Logger } from '../common/logger.js'
import type { Random } from '../common/random.js'
import type { TransactionMarkerListener, TransactionVerifier } from '../common/transaction.js'
import { GroupCoordinator } from '../coordinator/group-coordinator.js'
import { ShareCoordinator } from '../coordinator/share/share-coordinator.js'
import { TransactionCoordinator } from '../coordinator/transaction/transaction-coordinator.js'
import { CoordinatorTransactionVerifier } from '../coordinator/transaction/transaction-verifier.js'
import { type BrokerRegistration, type ClusterImage, endpointFor } from '../metadata/cluster-image.js'
import { ClusterMetadata } from '../metadata/cluster-metadata.js'
import { Controller } from '../metadata/controller.js'
import { onControlledShutdown } from '../metadata/elections.js'
import { newUuid } from '../metadata/ids.js'
import { LeadershipRecord } from '../metadata/leadership-record.js'
import { ProducerIdManager } from '../metadata/producer-id-manager.js'
import { EmbeddedStore } from '../metadata/store/embedded-store.js'
import type { Lease, MetadataStore } from '../metadata/store/metadata-store.js'
import { TopicAdmin } from '../metadata/topic-admin.js'
import { logConfigFor, resolveTopicConfig } from '../metadata/topic-config.js'
import type { BrokerMetricsSource } from '../ops/broker-metrics-source.js'
import { OpsServer } from '../ops/ops-server.js'
import { SchemaRegistryService } from '../ops/schema-registry-service.js'
import { AlterPartitionManager } from '../replication/alter-partition-manager.js'
import { ReplicaFetcherManager } from '../replication/replica-fetcher-manager.js'
import { ReplicaManager, type TopicSettings } from '../replication/replica-manager.js'
import { nodeBrokerParts } from '../runtime/node-parts.js'
import { httpsServerOptions } from '../runtime/node-tls-network.js'
import type { RegistrySecurity } from '../schema-registry/auth.js'
import type { RegistryHost } from '../schema-registry/registry.js'
import type { RegistryClientOptions } from '../schema-registry/types.js'
import {
  AclOperation,
  CLUSTER_NAME,
  operationName,
  ResourceType,
  resourceTypeName,
} from '../security/authorizer/acl.js'
import {
  type Authorization,
  checkAuthorizerConfig,
  openAuthorization,
} from '../security/authorizer/authorization.js'
import {
  type Authorizer,
  type AuthorizerSettings,
  hostOf,
} from '../security/authorizer/standard-authorizer.js'
import { DelegationTokenStore } from '../security/delegation-tokens.js'
import { interBrokerTransport } from '../security/inter-broker.js'
import { parseJaasConfig } from '../security/jaas.js'
import { type JwtValidatorSettings, loadJwks } from '../security/jwt-validator.js'
import { type Endpoint, usesSasl, usesTls } from '../security/listeners.js'
import { PasswordCheck } from '../security/password-check.js'
import {
  type KafkaPrincipal,
  NoMatchingRuleError,
  principalText,
  SslPrincipalMapper,
} from '../security/principal.js'
import {
  jaasProperty,
  type SaslListenerSettings,
  saslListenerSettings,
  usesSignedTokens,
} from '../security/sasl-server.js'
import { ScramCredentialStore } from '../security/scram-credentials.js'
import { listenerValue, mechanismValue } from '../security/security-config.js'
import { pemBlocks, type TlsByteStream, type TlsNetwork, tlsSettings } from '../security/tls.js'
import { isStorageError } from '../storage/errors.js'
import { LogManager, lockLogDirs } from '../storage/log-manager.js'
import {
  type BrokerConfig,
  groupCoordinatorConfig,
  shareCoordinatorConfig,
  transactionCoordinatorConfig,
} from './broker-config.js'
import type { BrokerObserver, BrokerParts } from './broker-parts.js'
import type { BrokerServices } from './broker-services.js'
import { FetchSessionCache } from './fetch-session-cache.js'
import { allHandlers } from './handlers/all.js'
import { HandlerRegistry } from './handlers/registry.js'
import { ClientQuotaStore } from './quota/client-quota-store.js'
import { ClientQuotas } from './quota/client-quotas.js'
import { SocketServer } from './socket-server.js'
import { ClientMetricsManager } from './telemetry/client-metrics-manager.js'

export interface ReplicationReport {
  readonly isrShrinks: number
  readonly isrExpands: number
  readonly leaderElections: number
  readonly uncleanLeaderElections: number
  readonly underReplicatedPartitions: number
  readonly offlinePartitions: number
  readonly followerLag: readonly {
    topic: string
    partition: number
    brokerId: number
    logEndOffset: number
    lagMessages: number
    caughtUpAgoMs: number
  }[]
}

/** Parts a caller leaves out are Node's real ones (runtime/node-parts.ts). */
export type BrokerDependencies = Partial<BrokerParts>

const METADATA_FILE = '__tidelog_metadata.log'
/**
 * Registration is a compare-and-set on the broker key; it loses only to a concurrent
 * registration of the same node id, so a few attempts settle it.
 */
const MAX_REGISTRATION_ATTEMPTS = 5
/** The schema registry's topic (Confluent's kafkastore.topic) and its replicas (capped at the brokers). */
const SCHEMAS_TOPIC = '_schemas'
const SCHEMAS_REPLICATION_FACTOR = 3

/** Backoff between attempts to register again after a lost session. */
const REREGISTER_BACKOFF = { initialMs: 200, maxMs: 2000 } as const

/** The handlers are stateless: one registry serves every broker of the process. */
const handlers = new HandlerRegistry(allHandlers)

/** ops: the HTTP listener when tidelog.http.listener is set. */
async function startOps(
  config: BrokerConfig,
  logger: Logger,
  registry: SchemaRegistryService | null,
): Promise<OpsServer | null> {
  const listener = config.values.get('tidelog.http.listener') as string | null
  if (listener === null || listener === '') return null
  return OpsServer.start(
    {
      listener,
      slowRequestMs: config.values.get('tidelog.request.log.slow.ms') as number,
      topicAdminEnabled: config.values.get('tidelog.console.topic.admin.enable') === true,
    },
    logger,
    registry,
  )
}

/** ops: the schema registry (loaded on its first request) unless tidelog.schema.registry.enable is false. */
async function startSchemaRegistry(
  config: BrokerConfig,
  logger: Logger,
): Promise<SchemaRegistryService | null> {
  if (config.values.get('tidelog.schema.registry.enable') === false) return null
  const listener = config.values.get('tidelog.schema.registry.listener') as string | null
  const https = listener !== null && /^\s*https:\/\//i.test(listener)
  return SchemaRegistryService.start(listener, logger, https ? registryHttpsOptions(config) : null)
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

interface ResolvedTopic {
  readonly settings: TopicSettings
  readonly uncleanLeaderElection: boolean
}

export class Broker implements BrokerServices {
  readonly nodeId: number
  readonly clock: Clock
  readonly random: Random
  readonly fileSystem: FileSystem
  readonly logger: Logger
  readonly replicaManager: ReplicaManager
  readonly fetchSessions: FetchSessionCache
  readonly producerIdManager: ProducerIdManager
  readonly groupCoordinator: GroupCoordinator
  readonly transactionCoordinator: TransactionCoordinator
  readonly shareCoordinator: ShareCoordinator
  readonly transactionVerifier: TransactionVerifier
  /** The verifier this broker built (closed at stop, whatever transactionVerifier is). */
  private readonly coordinatorVerifier: CoordinatorTransactionVerifier
  readonly topicAdmin: TopicAdmin
  readonly interBroker: NonNullable<BrokerServices['interBroker']>
  /** A marker in a __consumer_offsets partition ends the producer's pending group offsets. */
  readonly onTransactionMarker: TransactionMarkerListener = (topic, partition, producerId, result) =>
    this.groupCoordinator.onTransactionMarker(topic, partition, producerId, result)
  private readonly alterPartitions: AlterPartitionManager
  /** What this broker serves as leader, published for readiness checks (leadership-record.ts). */
  private readonly leadershipRecord: LeadershipRecord
  readonly scramCredentials: ScramCredentialStore
  /** Delegation tokens in the metadata store (off without delegation.token.secret.key). */
  readonly delegationTokens: DelegationTokenStore
  /** The next delegation.token.expiry.check.interval.ms check, while tokens are on. */
  private tokenExpiryCheck: TimerHandle | null = null
  /** What every handler asks before acting (allows everything without authorizer.class.name). */
  readonly authorizer: Authorizer
  /** The ACLs of the metadata store; null without an authorizer. */
  readonly acls: Authorization['acls']
  /** Client quotas as the metadata store holds them, and their enforcement on connections. */
  readonly clientQuotaStore: ClientQuotaStore
  readonly clientQuotas: ClientQuotas
  readonly clientMetrics: ClientMetricsManager
  /** One per listener, in the order of `listeners`. */
  private socketServers: SocketServer[] = []
  /** Every TLS network of this broker (listeners, inter-broker client), for reloadTls(). */
  private readonly tlsNetworks: TlsNetwork[] = []
  /** The SASL settings of each SASL listener, once it listens (the registry's basic auth reads them). */
  private readonly saslListeners: SaslListenerSettings[] = []
  /** Bound port of each listener, by name. */
  private readonly boundPorts = new Map<string, number>()
  private stopping: Promise<void> | null = null
  private markStopped!: () => void
  private readonly stopped = new Promise<void>((resolve) => {
    this.markStopped = resolve
  })
  private lease: Lease | null = null
  /** This process's incarnation (KRaft's incarnation id): a restart is a new one. */
  readonly incarnationId: string
  /** The epoch of this broker's current registration, -1 while unregistered. */
  private brokerEpoch = -1
  /** A newer incarnation of this node id registered: this process stays out for good. */
  private fencedByIncarnation = false
  private activeController: Controller | null = null
  private registerRetry: TimerHandle | null = null
  private readonly reregisterBackoff = new ExponentialBackoff(REREGISTER_BACKOFF)
  /** The HTTP listener and metrics (tidelog.http.listener), null when off. */
  private ops: OpsServer | null = null
  /** The schema registry (tidelog.schema.registry.enable), null when off. */
  private schemaRegistry: SchemaRegistryService | null = null

  private constructor(
    readonly config: BrokerConfig,
    readonly metadata: ClusterMetadata,
    readonly logManager: LogManager,
    private readonly store: MetadataStore,
    private readonly ownsStore: boolean,
    private readonly parts: BrokerParts,
    private readonly authorization: Authorization,
  ) {
    this.authorizer = authorization.authorizer
    this.acls = authorization.acls
    this.nodeId = config.nodeId
    this.clock = parts.clock
    this.random = parts.random
    this.fileSystem = parts.fileSystem
    this.logger = parts.logger
    this.scramCredentials = new ScramCredentialStore(store)
    this.clientQuotaStore = new ClientQuotaStore(store, parts.logger)
    this.delegationTokens = new DelegationTokenStore(store, parts.clock, parts.random, {
      // Kafka 4 still reads the deprecated delegation.token.master.key when the new name is unset.
      secretKey:
        (config.values.get('delegation.token.secret.key') as string | null) ??
        (config.values.get('delegation.token.master.key') as string | null),
      maxLifetimeMs: config.values.get('delegation.token.max.lifetime.ms') as number,
      expiryTimeMs: config.values.get('delegation.token.expiry.time.ms') as number,
    })
    this.clientMetrics = new ClientMetricsManager({
      clock: parts.clock,
      random: parts.random,
      logger: parts.logger,
      telemetryMaxBytes: config.values.get('telemetry.max.bytes') as number,
      subscriptionConfigs: () => this.metadata.image().clientMetricsConfigs,
    })
    this.clientQuotas = new ClientQuotas({
      samples: config.values.get('quota.window.num') as number,
      windowMs: (config.values.get('quota.window.size.seconds') as number) * 1000,
    })
    const interBroker = config.listeners.advertised.find(
      (e) => e.listener === config.listeners.interBrokerListener,
    )!
    // Replication, transaction markers and share state requests dial the inter-broker listener.
    const { network, tls, random, clock } = parts
    const dial = (clientId: string) =>
      interBrokerTransport(config, interBroker, { network, tls, random, clock, clientId }, (n) =>
        this.tlsNetworks.push(n),
      )
    this.incarnationId = newUuid(parts.random)
    this.alterPartitions = new AlterPartitionManager({
      nodeId: config.nodeId,
      updateMetadata: (change, guardBrokers) => this.metadata.update(change, guardBrokers),
      minInsyncReplicas: (image, topic) => this.topicSettings(image, topic).minInsyncReplicas,
      logger: parts.logger,
    })
    const values = config.values
    this.replicaManager = new ReplicaManager({
      nodeId: config.nodeId,
      logs: logManager,
      clock: parts.clock,
      logger: parts.logger,
      topicSettings: (image, topic) => this.topicSettings(image, topic),
      isFenced: () => this.lease === null,
      localBrokerEpoch: () => this.brokerEpoch,
      alterIsr: (proposal) => this.alterPartitions.submit(proposal),
      replicaLagTimeMaxMs: values.get('replica.lag.time.max.ms') as number,
      producerIdExpirationMs: values.get('producer.id.expiration.ms') as number,
      producerIdExpirationCheckIntervalMs: values.get('producer.id.expiration.check.interval.ms') as number,
      fetchers: new ReplicaFetcherManager({
        nodeId: config.nodeId,
        brokerEpoch: () => this.brokerEpoch,
        clock: parts.clock,
        logger: parts.logger,
        transport: dial(`broker-${config.nodeId}-fetcher`),
        brokerAddress: (id) => this.interBrokerAddress(id),
        fetchMaxBytes: values.get('replica.fetch.max.bytes') as number,
        fetchResponseMaxBytes: values.get('replica.fetch.response.max.bytes') as number,
        fetchWaitMaxMs: values.get('replica.fetch.wait.max.ms') as number,
        fetchMinBytes: values.get('replica.fetch.min.bytes') as number,
        fetchBackoffMs: values.get('replica.fetch.backoff.ms') as number,
        requestTimeoutMs: values.get('replica.socket.timeout.ms') as number,
      }),
    })
    const sessionSlots = values.get('max.incremental.fetch.session.cache.slots') as number | undefined
    this.fetchSessions = new FetchSessionCache(sessionSlots ?? 1000, () => parts.random.int(1, 2 ** 31 - 2))
    this.producerIdManager = new ProducerIdManager({ store, logger: parts.logger })
    this.topicAdmin = new TopicAdmin({ metadata, config, clock: parts.clock, logger: parts.logger })
    this.leadershipRecord = new LeadershipRecord({
      nodeId: config.nodeId,
      metadata,
      clock: parts.clock,
      logger: parts.logger,
    })
    this.groupCoordinator = new GroupCoordinator(this, groupCoordinatorConfig(config))
    this.shareCoordinator = new ShareCoordinator(this, shareCoordinatorConfig(config))
    const txnConfig = transactionCoordinatorConfig(config)
    const txnHost = {
      nodeId: config.nodeId,
      clock: parts.clock,
      logger: parts.logger,
      replicaManager: this.replicaManager,
      metadataImage: () => this.metadata.image(),
      topicAdmin: this.topicAdmin,
      producerIdManager: this.producerIdManager,
      transport: dial(`broker-${config.nodeId}-txn`),
      brokerAddress: (id: number) => this.interBrokerAddress(id),
    }
    this.interBroker = {
      transport: dial(`broker-${config.nodeId}-share`),
      brokerAddress: (id: number) => this.interBrokerAddress(id),
    }
    this.transactionCoordinator = new TransactionCoordinator(txnHost, txnConfig)
    this.coordinatorVerifier = new CoordinatorTransactionVerifier(
      txnHost,
      this.transactionCoordinator,
      txnConfig,
    )
    this.transactionVerifier = this.coordinatorVerifier
  }

  /** A broker's endpoint on the inter-broker listener, as replication and transaction markers dial it. */
  private interBrokerAddress(nodeId: number): { host: string; port: number } | undefined {
    const registration = this.metadata.image().brokers.get(nodeId)
    if (!registration) return undefined
    return endpointFor(registration, this.config.listeners.interBrokerListener) ?? undefined
  }

  /** Opens the broker (`create`), then starts serving (`startup`). */
  static async start(config: BrokerConfig, deps: BrokerDependencies = {}): Promise<Broker> {
    const broker = await Broker.create(config, deps)
    await broker.startup()
    return broker
  }

  /**
   * Opens the metadata and the logs, without serving or registering yet: a caller that must
   * see the broker while it starts (the simulator's invariants) calls `startup()` itself.
   * The HTTP listener (when configured) starts once the directories are locked and before
   * the logs load, so /healthz answers while logs recover.
   */
  static async create(config: BrokerConfig, deps: BrokerDependencies = {}): Promise<Broker> {
    const parts: BrokerParts = {
      ...nodeBrokerParts(deps.logger ?? createLogger(`broker-${config.nodeId}`)),
      ...deps,
    }
    const authorizerSettings = checkAuthorizerConfig(config.values)
    // First of all, the locks (Kafka's "Failed to acquire lock on file .lock"): the log dirs',
    // and the journal's of an embedded store the broker owns, which locks it before reading
    // it. Taken at once: on real files each lock costs a process spawn (~5 ms of the start).
    // A second broker on them, in this process or another, fails here having loaded nothing.
    const [locked, opened] = await Promise.allSettled([
      lockLogDirs(parts.fileSystem, config.logDirs),
      parts.store ??
        EmbeddedStore.open({
          clock: parts.clock,
          persistPath: join(config.logDirs[0], METADATA_FILE),
          fs: parts.fileSystem,
          limits: {
            txnOpsMax: config.values.get('tidelog.metadata.store.max.txn.ops') as number,
            requestBytesMax: config.values.get('tidelog.metadata.store.max.request.bytes') as number,
          },
        }),
    ])
    let registry: Awaited<ReturnType<typeof startSchemaRegistry>> = null
    let ops: OpsServer | null = null
    try {
      if (locked.status === 'rejected') throw locked.reason
      if (opened.status === 'rejected') throw opened.reason
      registry = await startSchemaRegistry(config, parts.logger)
      ops = await startOps(config, parts.logger, registry)
      const broker = await Broker.open(config, parts, locked.value, opened.value, authorizerSettings)
      broker.ops = ops
      broker.schemaRegistry = registry
      ops?.attach(broker.metricsSource())
      registry?.attach(broker.registryHost(), broker.registrySecurity())
      return broker
    } catch (error) {
      await ops?.close()
      await registry?.close()
      // A failed start leaves the directories free for the next one (a lock the log manager
      // released already is not released twice: release is idempotent).
      const ownedStore = parts.store === undefined && opened.status === 'fulfilled' ? opened.value : null
      const locks = locked.status === 'fulfilled' ? locked.value : []
      await Promise.allSettled([ownedStore?.close(), ...locks.map((lock) => lock.release())])
      throw error
    }
  }

  /** On failure it closes what it opened; the caller closes the store and releases the locks. */
  private static async open(
    config: BrokerConfig,
    parts: BrokerParts,
    dirLocks: readonly FileLock[],
    store: MetadataStore,
    authorizerSettings: AuthorizerSettings | null,
  ): Promise<Broker> {
    const metadata = await ClusterMetadata.open(store, {
      clusterId: config.clusterId,
      random: parts.random,
      logger: parts.logger,
      clock: parts.clock,
    })
    // Bound once the broker exists: a disk failure while loading fails create() instead.
    let onLogDirFailure: (dir: string) => void = () => {}
    const values = config.values
    let logManager: LogManager | undefined
    try {
      logManager = await LogManager.open({
        logDirs: config.logDirs,
        dirLocks,
        clock: parts.clock,
        logger: parts.logger,
        fs: parts.fileSystem,
        onLogDirFailure: (dir) => onLogDirFailure(dir),
        maxOpenFiles: values.get('log.segment.open.files.max') as number,
        retentionCheckIntervalMs: values.get('log.retention.check.interval.ms') as number,
        highWatermarkCheckpointIntervalMs: values.get(
          'replica.high.watermark.checkpoint.interval.ms',
        ) as number,
        recoveryPointCheckpointIntervalMs: values.get('log.flush.offset.checkpoint.interval.ms') as number,
        logStartOffsetCheckpointIntervalMs: values.get(
          'log.flush.start.offset.checkpoint.interval.ms',
        ) as number,
        cleanerEnable:
          (values.get('log.cleaner.enable') as boolean) && values.get('log.cleaner.threads') !== 0,
        cleanerBackoffMs: values.get('log.cleaner.backoff.ms') as number,
        producerIdExpirationMs: values.get('producer.id.expiration.ms') as number,
        cleanerOffsetMapMaxEntries: Math.max(
          1,
          Math.floor((values.get('log.cleaner.dedupe.buffer.size') as number) / 24),
        ),
        // Logs found on disk open with their topic's config; a topic no longer in the
        // metadata (deleted while stopped) opens with defaults and is removed when applied.
        topicConfig: (topic) =>
          metadata.image().topics.has(topic) ? logConfigFor(metadata.image(), config, topic) : undefined,
      })
      const authorization = await openAuthorization(authorizerSettings, store, parts.logger)
      const broker: Broker = new Broker(
        config,
        metadata,
        logManager,
        store,
        parts.store === undefined,
        parts,
        authorization,
      )
      onLogDirFailure = (dir) => broker.onLogDirFailure(dir)
      return broker
    } catch (error) {
      // What was opened closes; the log manager's shutdown releases the dirs' locks.
      await logManager?.shutdown()
      metadata.close()
      throw error
    }
  }

  /**
   * Applies the metadata, starts the logs' and the replicas' timers, listens and registers.
   * On failure the broker is stopped (whatever it opened is closed) and the error rethrown.
   */
  async startup(): Promise<void> {
    try {
      await this.replicaManager.applyImage(this.metadata.image())
      this.groupCoordinator.onPartitionsChanged()
      this.transactionCoordinator.onPartitionsChanged()
      this.shareCoordinator.onPartitionsChanged()
      this.transactionCoordinator.startup()
      this.metadata.onChange((image) => {
        this.maybeFencedByIncarnation(image)
        this.replicaManager
          .applyImage(image)
          // Leadership of __consumer_offsets and __transaction_state partitions decides which
          // groups and transactional ids this broker coordinates.
          .then(() => {
            this.groupCoordinator.onPartitionsChanged()
            this.transactionCoordinator.onPartitionsChanged()
            this.shareCoordinator.onPartitionsChanged()
            this.leadershipRecord.onApplied(this.replicaManager.servedLeaderEpochs())
          })
          .catch((error: unknown) => this.onApplyFailure(error))
      })
      this.logManager.startup()
      this.replicaManager.startup()
      await this.clientQuotaStore.start()
      this.clientQuotaStore.onChange((entries) => this.clientQuotas.apply(entries))
      this.scheduleTokenExpiryCheck()
      if (this.stopping) return
      await this.listen()
      await this.register()
      // prom-client is not needed to answer Kafka requests: the first /metrics scrape loads
      // it, so a broker nobody scrapes neither waits for it nor holds its 3-4 MB (docs/notes/startup.md).
    } catch (error) {
      await this.stop().catch((stopError: unknown) =>
        this.logger.error({ err: stopError }, 'stop after a failed start'),
      )
      throw error
    }
  }

  private get observer(): BrokerObserver | undefined {
    return this.parts.observer
  }

  /**
   * Registers this broker in the store, bound to a lease of broker.session.timeout.ms: if
   * the process dies the registration disappears and the controller moves its leaderships.
   * A restarted broker registers at once, replacing its previous process's registration
   * with a new incarnation and broker epoch that fence that process (cluster-metadata.ts).
   */
  private async register(): Promise<void> {
    const sessionTimeoutMs = this.config.values.get('broker.session.timeout.ms') as number
    const endpoints = this.config.listeners.advertised.map((e) => ({
      listener: e.listener,
      securityProtocol: e.securityProtocol,
      host: e.host,
      port: e.port === 0 ? this.boundPorts.get(e.listener)! : e.port,
    }))
    const registration: BrokerRegistration = {
      nodeId: this.nodeId,
      host: endpoints[0].host,
      port: endpoints[0].port,
      rack: this.config.rack,
      endpoints,
      incarnationId: this.incarnationId,
      ...this.advertisedRegistryUrl(endpoints[0].host),
    }
    const lease = await this.store.grantLease(sessionTimeoutMs)
    let brokerEpoch: number | null = null
    try {
      for (let attempt = 1; brokerEpoch === null; attempt++) {
        if (attempt > MAX_REGISTRATION_ATTEMPTS)
          throw new Error(`node.id ${this.nodeId}: registration kept conflicting with another one`)
        brokerEpoch = await this.metadata.register(registration, lease, {
          uncleanShutdown: !this.logManager.hadCleanShutdown,
          logEnd: (topic, partition) => {
            const log = this.logManager.getLog({ topic, partition })
            if (log === undefined) return undefined
            return { leaderEpoch: log.latestEpoch ?? -1, endOffset: log.logEndOffset }
          },
          minInsyncReplicas: (image, topic) => this.topicSettings(image, topic).minInsyncReplicas,
        })
      }
    } catch (error) {
      // Kept alive by its keep-alives, a lease nobody uses would never end: revoke it.
      await lease.revoke().catch((revokeError: unknown) => {
        this.logger.debug({ err: revokeError }, 'revoking an unused lease failed; it expires')
      })
      throw error
    }
    if (this.stopping || this.fencedByIncarnation) {
      // stop() began while this re-registration was under way: leave at once.
      await lease.revoke()
      return
    }
    this.lease = lease
    this.brokerEpoch = brokerEpoch
    this.onLeadershipRegained()
    this.activeController = this.newController(lease)
    this.activeController.start()
    lease.lost.then(
      () => this.onSessionLost(lease),
      () => this.onSessionLost(lease),
    )
    this.logger.info(
      { nodeId: this.nodeId, incarnationId: this.incarnationId, brokerEpoch },
      'broker registered',
    )
  }

  /**
   * Leading needs a store session (Partition.isLeader), and the images applied while this
   * broker had none could not act as leader: a restarted broker's own registration arrives
   * before its lease is set, and for a partition whose ISR is this broker alone no fetch or
   * produce would come to raise the high watermark checkpointed before the crash to the log
   * end. Done before the first Fetch or ListOffsets can see this broker as leader.
   */
  private onLeadershipRegained(): void {
    this.replicaManager.onLeadershipRegained()
    this.leadershipRecord.onApplied(this.replicaManager.servedLeaderEpochs())
  }

  /**
   * A newer incarnation of this node id replaced this broker's registration (this process
   * was taken for dead: paused, cut off, or a second process started with the same
   * node.id). Its broker epoch fences this one's ISR changes and fetches; this process
   * also stops leading and campaigning and, unlike after a lost session, never registers
   * again, which would fence the newer process in turn.
   */
  private maybeFencedByIncarnation(image: ClusterImage): void {
    const lease = this.lease
    if (lease === null || this.stopping) return
    const current = image.brokers.get(this.nodeId)
    if (current === undefined || current.incarnationId === this.incarnationId) return
    if ((current.brokerEpoch ?? -1) <= this.brokerEpoch) return
    this.fencedByIncarnation = true
    this.lease = null
    this.brokerEpoch = -1
    this.logger.error(
      { nodeId: this.nodeId, incarnationId: this.incarnationId, newerIncarnationId: current.incarnationId },
      'a newer incarnation of this broker registered: this process is fenced and serves nothing more',
    )
    const controller = this.activeController
    this.activeController = null
    controller?.stop().catch((error: unknown) => this.logger.warn({ err: error }, 'controller stop failed'))
    // Only keys still bound to this lease go (its controller candidacy), not the registration.
    lease.revoke().catch((error: unknown) => this.logger.warn({ err: error }, 'lease revoke failed'))
  }

  private newController(lease: Lease): Controller {
    const values = this.config.values
    return new Controller({
      nodeId: this.nodeId,
      store: this.store,
      metadata: this.metadata,
      lease,
      clock: this.clock,
      logger: this.logger,
      autoLeaderRebalance:
        values.get('auto.leader.rebalance.enable') === true
          ? {
              intervalMs: (values.get('leader.imbalance.check.interval.seconds') as number) * 1000,
              imbalancePercentage: values.get('leader.imbalance.per.broker.percentage') as number,
            }
          : null,
      uncleanLeaderElection: (image, topic) => this.resolvedTopic(image, topic).uncleanLeaderElection,
      minInsyncReplicas: (image, topic) => this.topicSettings(image, topic).minInsyncReplicas,
    })
  }

  /** Without a session this broker may not act as leader (another may have been elected). */
  private onSessionLost(lease: Lease): void {
    if (this.lease !== lease || this.stopping) return
    this.lease = null
    this.brokerEpoch = -1
    this.logger.warn('metadata store session lost: no longer leading any partition; registering again')
    const controller = this.activeController
    this.activeController = null
    controller?.stop().catch((error: unknown) => this.logger.warn({ err: error }, 'controller stop failed'))
    this.registerAgain(1)
  }

  /**
   * Registers again after a lost session, retrying with backoff for as long as it takes:
   * the store may still be unreachable (the usual reason a session is lost), and a broker
   * that gave up would stay out of the cluster for good once the store is back.
   */
  private registerAgain(attempt: number): void {
    this.registerRetry = null
    if (this.stopping || this.fencedByIncarnation) return
    this.register().catch((error: unknown) => {
      if (this.stopping) return
      const delayMs = this.reregisterBackoff.delayMs(attempt)
      this.logger.warn({ err: error, attempt, delayMs }, 'registering again failed; retrying')
      this.registerRetry = this.clock.setTimeout(() => this.registerAgain(attempt + 1), delayMs)
    })
  }

  /**
   * Replication health as this broker sees it: ISR changes it made as leader, the
   * elections it made while controller, partitions it leads that are under-replicated, and
   * each follower's lag behind it. (DescribeLogDirs reports each replica's offset lag.)
   */
  replicationReport(): ReplicationReport {
    const followers: ReplicationReport['followerLag'][number][] = []
    let underReplicated = 0
    for (const partition of this.replicaManager.hostedPartitions) {
      if (!partition.isLeader) continue
      if (partition.isr.length < partition.replicas.length) underReplicated++
      for (const lag of partition.followerLag())
        followers.push({ topic: partition.topic, partition: partition.partition, ...lag })
    }
    const image = this.metadata.image()
    let offline = 0
    for (const topic of image.topics.values())
      for (const p of topic.partitions) if (p.leader === -1) offline++
    return {
      isrShrinks: this.alterPartitions.stats.shrinks,
      isrExpands: this.alterPartitions.stats.expands,
      leaderElections: this.activeController?.stats.elections ?? 0,
      uncleanLeaderElections: this.activeController?.stats.uncleanElections ?? 0,
      underReplicatedPartitions: underReplicated,
      offlinePartitions: offline,
      followerLag: followers,
    }
  }

  /** Effective settings of a topic: its overrides over the broker's defaults. */
  private topicSettings(image: ClusterImage, topic: string): TopicSettings {
    return this.resolvedTopic(image, topic).settings
  }

  /**
   * A topic's resolved settings, kept per image (images are immutable): the controller and
   * shutdown ask once per partition, and with 10,000 partitions resolving them each time
   * was most of CreateTopics' and a controlled shutdown's CPU.
   */
  private resolvedTopic(image: ClusterImage, topic: string): ResolvedTopic {
    let byTopic = this.topicSettingsCache.get(image)
    if (byTopic === undefined) {
      byTopic = new Map()
      this.topicSettingsCache.set(image, byTopic)
    }
    let resolved = byTopic.get(topic)
    if (resolved === undefined) {
      const configs = resolveTopicConfig(image, this.config, topic)
      resolved = {
        settings: {
          logConfig: logConfigFor(image, this.config, topic),
          minInsyncReplicas: Number(configs.get('min.insync.replicas')?.value ?? 1),
        },
        uncleanLeaderElection: configs.get('unclean.leader.election.enable')?.value === 'true',
      }
      byTopic.set(topic, resolved)
    }
    return resolved
  }

  private readonly topicSettingsCache = new WeakMap<ClusterImage, Map<string, ResolvedTopic>>()

  /** ops: the HTTP listener's URL (tidelog.http.listener), null when it is off. */
  get httpUrl(): string | null {
    return this.ops?.url ?? null
  }

  /** The schema registry's own listener's URL (tidelog.schema.registry.listener), null when off. */
  get schemaRegistryUrl(): string | null {
    return this.schemaRegistry?.url ?? null
  }

  /**
   * The HTTP listeners (ops, schema registry) close at once: a killed test broker's, whose
   * node:http servers are outside its faulty parts and would otherwise outlive it.
   */
  async closeHttpListeners(): Promise<void> {
    const registry = this.schemaRegistry
    const ops = this.ops
    this.schemaRegistry = null
    this.ops = null
    await registry?.close()
    await ops?.close()
  }

  /** The registry's URL for other brokers: its own listener's, else the HTTP listener's path. */
  private advertisedRegistryUrl(advertisedHost: string): { schemaRegistryUrl?: string } {
    if (!this.schemaRegistry) return {}
    const url = this.schemaRegistry.url ?? (this.ops ? `${this.ops.url}schema-registry` : null)
    if (url === null) return {}
    // A wildcard bind is reached at the broker's advertised host.
    return {
      schemaRegistryUrl: url.replace(/^(https?):\/\/(0\.0\.0\.0|\[::\])(?=:)/, `$1://${advertisedHost}`),
    }
  }

  /** What the schema registry needs of this broker; `_schemas` partition 0's leader is its writer. */
  private registryHost(): RegistryHost {
    const leaderOfSchemas = () => this.metadata.image().topics.get(SCHEMAS_TOPIC)?.partitions[0]?.leader ?? -1
    return {
      nodeId: this.nodeId,
      kafkaClient: () => this.registryClientOptions(),
      clusterId: () => this.metadata.image().clusterId,
      schemasLeader: leaderOfSchemas,
      registryUrlOf: (nodeId) => this.metadata.image().brokers.get(nodeId)?.schemaRegistryUrl ?? null,
      ensureSchemasTopic: () =>
        this.topicAdmin.ensureInternalTopic({
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
  private registryClientOptions(): RegistryClientOptions {
    const listeners = this.config.listeners
    const plain = listeners.listeners.find((l) => l.securityProtocol === 'PLAINTEXT')
    if (plain && this.authorization.acls === null)
      return { bootstrapServers: this.listenerAddress(plain.listener) }
    const endpoint = listeners.listeners.find((l) => l.listener === listeners.interBrokerListener)
    if (!endpoint) throw new Error('the schema registry found no inter-broker listener to connect to')
    const name = endpoint.listener
    const options: { bootstrapServers: string; ssl?: SslOptions; sasl?: SaslOptions } = {
      bootstrapServers: this.listenerAddress(name),
    }
    if (usesTls(endpoint.securityProtocol)) {
      const settings = tlsSettings(this.config, name, 'the schema registry client', 'client')
      const pem = (location: string | null, text: string | null) =>
        location !== null ? readFileSync(location, 'utf8') : (text ?? '')
      const ssl: SslOptions = {
        // Its own listener: the certificate is checked against the CAs, not the host dialled.
        verifyHostname: false,
        ...(settings.trustStore
          ? {
              ca: pemBlocks(
                pem(settings.trustStore.location, settings.trustStore.certificates),
                'CERTIFICATE',
              ),
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
        listenerValue(this.config, name, 'sasl.mechanism.inter.broker.protocol'),
      ).toUpperCase()
      if (!['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'].includes(mechanism))
        throw new Error(
          `the schema registry's client logs in with PLAIN or SCRAM only; the inter-broker listener ${name} uses ${mechanism}`,
        )
      const property = jaasProperty(name, mechanism)
      const text = this.config.listenerOverrides.get(property) as string | undefined
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
  private registrySecurity(): RegistrySecurity | null {
    const method = String(this.config.values.get('tidelog.schema.registry.authentication.method'))
    const passwordMechanisms = (l: Endpoint) =>
      usesSasl(l.securityProtocol) &&
      (listenerValue(this.config, l.listener, 'sasl.enabled.mechanisms') as string[]).some((m) =>
        /^(PLAIN|SCRAM-SHA-(256|512))$/i.test(m),
      )
    if (method === 'NONE') return null
    if (method === 'AUTO' && !this.config.listeners.listeners.some(passwordMechanisms)) return null
    const check = new PasswordCheck({
      plainUsers: () => this.saslListeners.map((l) => l.plainUsers),
      scramCredentials: this.scramCredentials,
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
          resource.type === 'topic'
            ? [ResourceType.TOPIC, resource.name]
            : [ResourceType.CLUSTER, CLUSTER_NAME]
        const request = { principal, host: hostOf(host) }
        const allowed = this.authorizer.authorize(request, operations[operation], type, name)
        if (!allowed)
          this.logger.debug(
            { ...request, operation, resource: `${resourceTypeName(type)}:${name}` },
            'schema registry authorization denied',
          )
        return allowed
      },
    }
  }

  /** Kafka's expiry check: every delegation.token.expiry.check.interval.ms, expired tokens are deleted. */
  private scheduleTokenExpiryCheck(): void {
    if (!this.delegationTokens.enabled || this.stopping) return
    const intervalMs = this.config.values.get('delegation.token.expiry.check.interval.ms') as number
    this.tokenExpiryCheck = this.clock.setTimeout(() => {
      this.delegationTokens.removeExpired().then(
        (removed) => {
          if (removed > 0) this.logger.info({ removed }, 'expired delegation tokens removed')
          this.scheduleTokenExpiryCheck()
        },
        (error: unknown) => {
          this.logger.warn({ err: error }, 'delegation token expiry check failed')
          this.scheduleTokenExpiryCheck()
        },
      )
    }, intervalMs)
  }

  /** ops: the read-only view the metrics, health checks and console read. */
  private metricsSource(): BrokerMetricsSource {
    return {
      nodeId: this.nodeId,
      replicaManager: this.replicaManager,
      logManager: this.logManager,
      groupCoordinator: this.groupCoordinator,
      bootstrapServers: () => this.bootstrapServers,
      metadataImage: () => this.metadata.image(),
      isActiveController: () => this.isController,
      controllerCounters: () => ({
        leaderElections: this.controller?.stats.elections ?? 0,
        uncleanLeaderElections: this.controller?.stats.uncleanElections ?? 0,
      }),
      isrCounters: () => this.alterPartitions.stats,
      connectionCount: () => this.socketServers.reduce((n, s) => n + s.connectionCount, 0),
      syncAppendStalls: () => this.fileSystem.syncAppendStalls?.() ?? 0,
      isRegistered: () => this.lease !== null,
      configValue: (name) => this.config.values.get(name),
      clientTelemetryExposition: () => this.clientMetrics.exposition(),
    }
  }

  /** The first listener's bound port (differs from the configured one when that was 0). */
  get port(): number {
    return this.boundPorts.get(this.config.listeners.listeners[0].listener) ?? -1
  }

  /** The first listener's `host:port`. */
  get bootstrapServers(): string {
    return `${this.config.host}:${this.port}`
  }

  /** `host:port` of the named listener, as bound. */
  listenerAddress(listener: string): string {
    const endpoint = this.config.listeners.listeners.find((l) => l.listener === listener.toUpperCase())
    if (!endpoint) throw new Error(`no listener ${listener}`)
    return `${endpoint.host}:${this.boundPorts.get(endpoint.listener) ?? -1}`
  }

  /**
   * Reads every TLS key store and trust store again (renewed certificates) for new
   * handshakes, without a restart; open connections keep theirs. Throws a
   * ConfigError, keeping the current certificates of that network, when a file is unusable.
   */
  reloadTls(): number {
    for (const network of this.tlsNetworks) network.reload()
    this.logger.info({ networks: this.tlsNetworks.length }, 'TLS certificates reloaded')
    return this.tlsNetworks.length
  }

  /** Connections accepted on every listener since startup. */
  get acceptedConnections(): number {
    return this.socketServers.reduce((n, s) => n + s.acceptedCount, 0)
  }

  /** The principals of the connections open now (for operators and tests). */
  connectedPrincipals(): string[] {
    return this.socketServers.flatMap((s) => s.principals())
  }

  apiVersionRanges(): { apiKey: number; minVersion: number; maxVersion: number }[] {
    return handlers.ranges()
  }

  metadataImage(): ClusterImage {
    return this.metadata.image()
  }

  get isController(): boolean {
    return this.activeController?.isActive === true
  }

  /** The controller candidate of this broker's current registration (null while unregistered). */
  get controller(): Controller | null {
    return this.activeController
  }

  /** The lease this broker is registered under; null while fenced or unregistered. */
  get registrationLease(): Lease | null {
    return this.lease
  }

  get isStopping(): boolean {
    return this.stopping !== null
  }

  private async listen(): Promise<void> {
    for (const endpoint of this.config.listeners.listeners) {
      const server = this.socketServerFor(endpoint, await this.jwtKeysFor(endpoint))
      this.socketServers.push(server)
      const port = await server.listen(endpoint.host, endpoint.port)
      this.boundPorts.set(endpoint.listener, port)
      this.logger.info(
        { listener: endpoint.listener, securityProtocol: endpoint.securityProtocol, port },
        'broker listening',
      )
    }
  }

  /** The key set of a SASL listener that checks signed OAUTHBEARER tokens, read through the injected disk. */
  private async jwtKeysFor(endpoint: Endpoint): Promise<JwtValidatorSettings['keys'] | null> {
    const name = endpoint.listener
    if (!usesSasl(endpoint.securityProtocol) || !usesSignedTokens(this.config, name)) return null
    const url = mechanismValue(this.config, name, 'OAUTHBEARER', 'sasl.oauthbearer.jwks.endpoint.url') as
      | string
      | null
    if (url === null)
      throw new ConfigError(
        `listener ${name}: signed OAUTHBEARER tokens need sasl.oauthbearer.jwks.endpoint.url`,
      )
    return loadJwks(url, this.fileSystem)
  }

  /** A listener: TLS from the runtime for SSL/SASL_SSL, SASL state on each connection for SASL_*. */
  private socketServerFor(endpoint: Endpoint, jwtKeys: JwtValidatorSettings['keys'] | null): SocketServer {
    const name = endpoint.listener
    let network = this.parts.network
    let principalOf: ((stream: TlsByteStream) => KafkaPrincipal | undefined) | undefined
    if (usesTls(endpoint.securityProtocol)) {
      if (!this.parts.tls) throw new Error(`listener ${name} needs TLS, which this runtime does not provide`)
      const tls = this.parts.tls.network(tlsSettings(this.config, name, `listener ${name}`, 'server'))
      this.tlsNetworks.push(tls)
      network = tls
      const mapper = new SslPrincipalMapper(
        String(listenerValue(this.config, name, 'ssl.principal.mapping.rules')),
      )
      principalOf = (stream) =>
        stream.peerSubjectDn === null
          ? undefined
          : { type: 'User', name: mapper.nameOf(stream.peerSubjectDn) }
    }
    const sasl = usesSasl(endpoint.securityProtocol)
      ? {
          ...saslListenerSettings(this.config, name, this.scramCredentials, this.random, this.clock, jwtKeys),
          delegationTokens: this.delegationTokens,
        }
      : undefined
    if (sasl) this.saslListeners.push(sasl)
    return new SocketServer(
      network,
      {
        handlers,
        socketRequestMaxBytes: this.config.socketRequestMaxBytes,
        maxQueuedRequests: this.config.queuedMaxRequests,
        logger: this.logger,
        onFatal: (error) => this.onFatal(error),
        requestObserver: this.ops?.requestObserver,
        listenerName: name,
        ...(sasl ? { sasl } : {}),
        clock: this.clock,
        quotas: this.clientQuotas,
        makeContext: (connection, header, observation) => {
          const who = () => ({
            principal: principalText(connection.principal),
            host: hostOf(connection.remoteAddress),
          })
          return {
            header,
            apiVersion: header.requestApiVersion,
            connection,
            broker: this,
            purgatoryTimer: observation,
            authorize: (operation, resourceType, resourceName) => {
              const request = who()
              const allowed = this.authorizer.authorize(request, operation, resourceType, resourceName)
              // Kafka's authorizer logger: denials at debug (Metadata's filtering asks often).
              if (!allowed)
                this.logger.debug(
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
              this.authorizer.authorizeByResourceType(who(), operation, resourceType),
            authorizedOperations: (resourceType, resourceName) =>
              this.authorizer.authorizedOperations(who(), resourceType, resourceName),
          }
        },
        ...(this.observer?.onRequest ? { tap: this.observer.onRequest } : {}),
      },
      this.logger,
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
    )
  }

  /**
   * A log directory went offline after a disk error (its logs refuse every operation). With
   * no directory left the broker cannot serve what it leads or follows: Kafka halts it; tidelog
   * stops it, controlled, so its leaderships move at once to other ISR members, which hold
   * every committed record, instead of after the session timeout. (With several directories
   * and one failed, its partitions stay unavailable here until a restart: not done yet.)
   */
  private onLogDirFailure(dir: string): void {
    const online = this.config.logDirs.filter((d) => !this.logManager.offlineLogDirs.includes(d))
    this.observer?.onLogDirOffline?.(dir, online)
    if (online.length > 0) {
      this.logger.error({ dir, online }, 'log dir offline; its partitions are unavailable until a restart')
      return
    }
    this.logger.fatal({ dir }, 'every log dir is offline: stopping the broker')
    this.stop().catch((error: unknown) => this.logger.error({ err: error }, 'stop after log dir failure'))
  }

  /**
   * Applying a metadata image failed. A storage error (a log dir went offline after a disk
   * error, handled by onLogDirFailure) is expected then; anything else is a bug.
   */
  private onApplyFailure(error: unknown): void {
    if (isStorageError(error)) {
      this.logger.error({ err: error }, 'applying the metadata image failed (storage error); carrying on')
      return
    }
    this.onFatal(error as Error)
  }

  /** A programmer error reached the top: stop serving rather than risk corrupting data. */
  onFatal(error: Error): void {
    this.logger.fatal({ err: error }, 'internal error in the broker')
    this.observer?.onFatal?.(error)
    if (error instanceof InvariantError) {
      this.logger.fatal('invariant violated; stopping broker')
      this.stop().catch((stopError: unknown) => this.logger.error({ err: stopError }, 'stop failed'))
    }
  }

  stop(): Promise<void> {
    this.stopping ??= this.doStop().finally(() => this.markStopped())
    return this.stopping
  }

  /** Settles once the broker has stopped, whoever stopped it (a caller, a fatal error, a failed disk). */
  whenStopped(): Promise<void> {
    return this.stopped
  }

  /**
   * Controlled shutdown: leadership moves to other ISR members before this broker leaves,
   * then the listener closes, the registration is revoked and the logs are closed cleanly.
   */
  private async doStop(): Promise<void> {
    await this.schemaRegistry?.close()
    await this.ops?.close()
    this.replicaManager.stopFollowing()
    if (this.lease)
      await this.moveLeadershipAway().catch((error: unknown) =>
        this.logger.warn({ err: error }, 'controlled shutdown incomplete'),
      )
    await Promise.all(this.socketServers.map((server) => server.close()))
    this.registerRetry?.cancel()
    this.registerRetry = null
    const controller = this.activeController
    const lease = this.lease
    this.activeController = null
    this.lease = null
    await controller?.stop()
    this.groupCoordinator.shutdown()
    this.transactionCoordinator.shutdown()
    this.shareCoordinator.shutdown()
    this.coordinatorVerifier.close()
    await lease?.revoke().catch((error: unknown) => this.logger.warn({ err: error }, 'lease revoke failed'))
    this.replicaManager.shutdown()
    this.leadershipRecord.close()
    this.clientQuotaStore.close()
    this.tokenExpiryCheck?.cancel()
    this.tokenExpiryCheck = null
    this.metadata.close()
    this.authorization.close()
    // An image still being applied (a deleted topic's logs going) finishes before the logs
    // close, not on closed logs or a data directory removed after stop.
    await this.replicaManager.idle()
    await this.logManager.shutdown()
    if (this.ownsStore) await this.store.close()
    this.logger.info('broker stopped')
  }

  private async moveLeadershipAway(): Promise<void> {
    await this.metadata.update((image) => {
      const live = new Set(image.brokers.keys())
      const topics = new Map(image.topics)
      let changed = false
      for (const topic of image.topics.values()) {
        const partitions = topic.partitions.map((state) => {
          const minIsr = this.topicSettings(image, topic.name).minInsyncReplicas
          const result = onControlledShutdown(
            { state, live, uncleanLeaderElection: false, minIsr },
            this.nodeId,
          )
          if (result) changed = true
          return result?.state ?? state
        })
        topics.set(topic.name, { ...topic, partitions })
      }
      return changed ? { ...image, topics } : image
    })
  }
}
