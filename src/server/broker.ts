/**
 * A broker: the listener, the handlers, and the services they use, built from injected parts
 * (broker-parts.ts): the CLI and startBroker() pass Node's, the simulator its own, and both
 * run this class. Start with `Broker.start(config, parts)`; `stop()` is a controlled
 * shutdown (leaderships moved away, connections closed, logs flushed and closed).
 */

import { join } from 'node:path'
import { InvariantError } from '../common/assert.js'
import type { Clock, TimerHandle } from '../common/clock.js'
import type { FileLock, FileSystem } from '../common/file-system.js'
import { createLogger, type Logger } from '../common/logger.js'
import type { Transport } from '../common/network.js'
import type { Random } from '../common/random.js'
import { TimingWheelClock } from '../common/timing-wheel.js'
import type { TransactionMarkerListener, TransactionVerifier } from '../common/transaction.js'
import type { BrokerId, Offset } from '../common/types.js'
import type { GroupCoordinator } from '../coordinator/group-coordinator.js'
import type { ShareCoordinator } from '../coordinator/share/share-coordinator.js'
import type { TransactionCoordinator } from '../coordinator/transaction/transaction-coordinator.js'
import type { CoordinatorTransactionVerifier } from '../coordinator/transaction/transaction-verifier.js'
import { type ClusterImage, endpointFor } from '../metadata/cluster-image.js'
import { ClusterMetadata } from '../metadata/cluster-metadata.js'
import type { Controller } from '../metadata/controller.js'
import { movedAwayFrom } from '../metadata/elections.js'
import { newUuid } from '../metadata/ids.js'
import { LeadershipRecord } from '../metadata/leadership-record.js'
import { ProducerIdManager } from '../metadata/producer-id-manager.js'
import { EmbeddedStore } from '../metadata/store/embedded-store.js'
import type { Lease, MetadataStore } from '../metadata/store/metadata-store.js'
import { TopicAdmin } from '../metadata/topic-admin.js'
import { logConfigFor } from '../metadata/topic-config.js'
import type { BrokerMetricsSource } from '../ops/broker-metrics-source.js'
import type { OpsServer } from '../ops/ops-server.js'
import type { SchemaRegistryService } from '../ops/schema-registry-service.js'
import { AlterPartitionManager } from '../replication/alter-partition-manager.js'
import { ReplicaFetcherManager } from '../replication/replica-fetcher-manager.js'
import { ReplicaManager, type TopicSettings } from '../replication/replica-manager.js'
import {
  type Authorization,
  checkAuthorizerConfig,
  openAuthorization,
} from '../security/authorizer/authorization.js'
import type { Authorizer, AuthorizerSettings } from '../security/authorizer/standard-authorizer.js'
import { DelegationTokenStore } from '../security/delegation-tokens.js'
import { interBrokerTransport } from '../security/inter-broker.js'
import { ScramCredentialStore } from '../security/scram-credentials.js'
import type { TlsNetwork } from '../security/tls.js'
import { isStorageError } from '../storage/errors.js'
import { LogManager, lockLogDirs } from '../storage/log-manager.js'
import type { BrokerConfig } from './broker-config.js'
import { composeCoordinators } from './broker-coordinators.js'
import {
  advertisedRegistryUrl,
  type RegistryBroker,
  registryHost,
  registrySecurity,
  startOps,
  startSchemaRegistry,
} from './broker-http.js'
import { BrokerLifecycleManager } from './broker-lifecycle-manager.js'
import { BrokerListeners } from './broker-listeners.js'
import type { BrokerObserver, BrokerParts } from './broker-parts.js'
import type { BrokerServices } from './broker-services.js'
import { FetchSessionCache } from './fetch-session-cache.js'
import { allHandlers } from './handlers/all.js'
import { HandlerRegistry } from './handlers/registry.js'
import { ClientQuotaStore } from './quota/client-quota-store.js'
import { ClientQuotas } from './quota/client-quotas.js'
import { ResolvedTopics } from './resolved-topics.js'
import { shareMetricsView } from './share/share-services.js'
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
    logEndOffset: Offset
    lagMessages: number
    caughtUpAgoMs: number
  }[]
}

/** Parts a caller leaves out are Node's real ones (runtime/node-parts.ts). */
/** What `Broker.create` is given: its parts, the logger optional (one named for the broker). */
export type BrokerDependencies = Omit<BrokerParts, 'logger'> & { readonly logger?: Logger }

const METADATA_FILE = '__tidelog_metadata.log'

/** The handlers are stateless: one registry serves every broker of the process. */
const handlers = new HandlerRegistry(allHandlers)

export class Broker implements BrokerServices {
  readonly nodeId: BrokerId
  readonly clock: Clock
  /**
   * The clock's time with one timing wheel for the timers set per waiting request or per
   * acquisition (delayed fetches and produces, share-group record locks): thousands at
   * once under many long polls, nearly all cancelled before they fire.
   */
  readonly timingWheel: TimingWheelClock
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
  /** The Kafka listeners: socket servers, request contexts, bound ports. */
  private readonly listeners: BrokerListeners
  /** Every TLS network of this broker (listeners, inter-broker client), for reloadTls(). */
  private readonly tlsNetworks: TlsNetwork[] = []
  private stopping: Promise<void> | null = null
  private markStopped!: () => void
  private readonly stopped = new Promise<void>((resolve) => {
    this.markStopped = resolve
  })
  /** This process's incarnation (KRaft's incarnation id): a restart is a new one. */
  readonly incarnationId: string
  /** Registration, session, broker epoch and controller candidacy. */
  private readonly lifecycle: BrokerLifecycleManager
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
    this.resolvedTopics = new ResolvedTopics(config)
    this.nodeId = config.nodeId
    this.clock = parts.clock
    this.timingWheel = new TimingWheelClock(parts.clock)
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
    this.replicaManager = this.newReplicaManager(dial(`broker-${config.nodeId}-fetcher`))
    const values = config.values
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
    const coordinators = composeCoordinators(this, dial, (id) => this.interBrokerAddress(id))
    this.groupCoordinator = coordinators.groupCoordinator
    this.shareCoordinator = coordinators.shareCoordinator
    this.transactionCoordinator = coordinators.transactionCoordinator
    this.coordinatorVerifier = coordinators.coordinatorVerifier
    this.interBroker = coordinators.interBroker
    this.transactionVerifier = this.coordinatorVerifier
    this.lifecycle = this.newLifecycle()
    this.listeners = this.newListeners()
  }

  /** The replica manager (Kafka's), with its replica fetchers dialling over `fetcherTransport`. */
  private newReplicaManager(fetcherTransport: Transport): ReplicaManager {
    const config = this.config
    const values = config.values
    return new ReplicaManager({
      nodeId: config.nodeId,
      logs: this.logManager,
      clock: this.clock,
      purgatoryClock: this.timingWheel,
      logger: this.logger,
      topicSettings: (image, topic) => this.topicSettings(image, topic),
      isFenced: () => this.lifecycle.lease === null,
      localBrokerEpoch: () => this.lifecycle.brokerEpoch,
      alterIsr: (proposal) => this.alterPartitions.submit(proposal),
      replicaLagTimeMaxMs: values.get('replica.lag.time.max.ms') as number,
      producerIdExpirationMs: values.get('producer.id.expiration.ms') as number,
      producerIdExpirationCheckIntervalMs: values.get('producer.id.expiration.check.interval.ms') as number,
      fetchers: new ReplicaFetcherManager({
        nodeId: config.nodeId,
        brokerEpoch: () => this.lifecycle.brokerEpoch,
        clock: this.clock,
        logger: this.logger,
        transport: fetcherTransport,
        brokerAddress: (id) => this.interBrokerAddress(id),
        fetchMaxBytes: values.get('replica.fetch.max.bytes') as number,
        fetchResponseMaxBytes: values.get('replica.fetch.response.max.bytes') as number,
        fetchWaitMaxMs: values.get('replica.fetch.wait.max.ms') as number,
        fetchMinBytes: values.get('replica.fetch.min.bytes') as number,
        fetchBackoffMs: values.get('replica.fetch.backoff.ms') as number,
        requestTimeoutMs: values.get('replica.socket.timeout.ms') as number,
      }),
    })
  }

  private newListeners(): BrokerListeners {
    return new BrokerListeners({
      config: this.config,
      parts: this.parts,
      services: this,
      handlers,
      authorizer: this.authorizer,
      scramCredentials: this.scramCredentials,
      delegationTokens: this.delegationTokens,
      clientQuotas: this.clientQuotas,
      clock: this.clock,
      random: this.random,
      fileSystem: this.fileSystem,
      logger: this.logger,
      requestObserver: () => this.ops?.requestObserver,
      onFatal: (error) => this.onFatal(error),
      onTlsNetwork: (network) => this.tlsNetworks.push(network),
    })
  }

  private newLifecycle(): BrokerLifecycleManager {
    return new BrokerLifecycleManager({
      nodeId: this.nodeId,
      config: this.config,
      clock: this.clock,
      logger: this.logger,
      store: this.store,
      metadata: this.metadata,
      logManager: this.logManager,
      replicaManager: this.replicaManager,
      leadershipRecord: this.leadershipRecord,
      incarnationId: this.incarnationId,
      monitorEventLoop: this.parts.monitorEventLoop === true,
      isStopping: () => this.isStopping,
      boundPort: (listener) => this.listeners.boundPort(listener)!,
      advertisedRegistryUrl: (host) => advertisedRegistryUrl(this.schemaRegistry, this.ops, host),
      minInsyncReplicas: (image, topic) => this.topicSettings(image, topic).minInsyncReplicas,
      uncleanLeaderElection: (image, topic) =>
        this.resolvedTopics.resolve(image, topic).uncleanLeaderElection,
    })
  }

  /** A broker's endpoint on the inter-broker listener, as replication and transaction markers dial it. */
  private interBrokerAddress(nodeId: BrokerId): { host: string; port: number } | undefined {
    const registration = this.metadata.image().brokers.get(nodeId)
    if (!registration) return undefined
    return endpointFor(registration, this.config.listeners.interBrokerListener) ?? undefined
  }

  /** Opens the broker (`create`), then starts serving (`startup`). */
  static async start(config: BrokerConfig, deps: BrokerDependencies): Promise<Broker> {
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
  static async create(config: BrokerConfig, deps: BrokerDependencies): Promise<Broker> {
    const parts: BrokerParts = { ...deps, logger: deps.logger ?? createLogger(`broker-${config.nodeId}`) }
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
      ops?.attach({
        ...broker.metricsSource(),
        shareMetrics: () => shareMetricsView(broker),
        shareCoordinatorWrites: () => broker.shareCoordinator.writeStats,
      })
      const registryBroker = broker.registryBroker()
      registry?.attach(registryHost(registryBroker), registrySecurity(registryBroker))
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
      checkImages: parts.checkMetadataImages === true,
      watchStallMs: config.values.get('broker.session.timeout.ms') as number,
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
      this.metadata.onChange((image, previous, delta) => {
        this.lifecycle.maybeFencedByIncarnation(image)
        this.replicaManager
          .applyImage(image, { previous, delta })
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
      await this.listeners.listen()
      await this.lifecycle.register()
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
      leaderElections: this.lifecycle.controller?.stats.elections ?? 0,
      uncleanLeaderElections: this.lifecycle.controller?.stats.uncleanElections ?? 0,
      underReplicatedPartitions: underReplicated,
      offlinePartitions: offline,
      followerLag: followers,
    }
  }

  private readonly resolvedTopics: ResolvedTopics

  private topicSettings(image: ClusterImage, topic: string): TopicSettings {
    return this.resolvedTopics.settings(image, topic)
  }

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

  /** What the schema registry's wiring (broker-http.ts) reads of this broker. */
  private registryBroker(): RegistryBroker {
    return {
      nodeId: this.nodeId,
      config: this.config,
      logger: this.logger,
      metadata: this.metadata,
      topicAdmin: this.topicAdmin,
      authorizer: this.authorizer,
      acls: this.authorization.acls,
      scramCredentials: this.scramCredentials,
      saslListeners: this.listeners.saslListeners,
      listenerAddress: (listener) => this.listenerAddress(listener),
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
      connectionCount: () => this.listeners.connectionCount,
      syncAppendStalls: () => this.fileSystem.syncAppendStalls?.() ?? 0,
      isRegistered: () => this.lifecycle.lease !== null,
      sessionCounters: () => ({ ...this.lifecycle.counters, watch: this.metadata.watchCounters() }),
      configValue: (name) => this.config.values.get(name),
      clientTelemetryExposition: () => this.clientMetrics.exposition(),
    }
  }

  /** The first listener's bound port (differs from the configured one when that was 0). */
  get port(): number {
    return this.listeners.boundPort(this.config.listeners.listeners[0].listener) ?? -1
  }

  /** The first listener's `host:port`. */
  get bootstrapServers(): string {
    return `${this.config.host}:${this.port}`
  }

  /** `host:port` of the named listener, as bound. */
  listenerAddress(listener: string): string {
    const endpoint = this.config.listeners.listeners.find((l) => l.listener === listener.toUpperCase())
    if (!endpoint) throw new Error(`no listener ${listener}`)
    return `${endpoint.host}:${this.listeners.boundPort(endpoint.listener) ?? -1}`
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
    return this.listeners.acceptedConnections
  }

  /** The principals of the connections open now (for operators and tests). */
  connectedPrincipals(): string[] {
    return this.listeners.connectedPrincipals()
  }

  apiVersionRanges(): { apiKey: number; minVersion: number; maxVersion: number }[] {
    return handlers.ranges()
  }

  metadataImage(): ClusterImage {
    return this.metadata.image()
  }

  get isController(): boolean {
    return this.lifecycle.controller?.isActive === true
  }

  /** The controller candidate of this broker's current registration (null while unregistered). */
  get controller(): Controller | null {
    return this.lifecycle.controller
  }

  /** The lease this broker is registered under; null while fenced or unregistered. */
  get registrationLease(): Lease | null {
    return this.lifecycle.lease
  }

  get isStopping(): boolean {
    return this.stopping !== null
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
    if (this.lifecycle.lease)
      await this.moveLeadershipAway().catch((error: unknown) =>
        this.logger.warn({ err: error }, 'controlled shutdown incomplete'),
      )
    await this.listeners.close()
    const { controller, lease } = this.lifecycle.leave()
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
    await this.metadata.update((image) =>
      movedAwayFrom(image, this.nodeId, (topic) => this.topicSettings(image, topic).minInsyncReplicas),
    )
  }
}
