/**
 * A broker: the listener, the handlers, and the services they use. Start with
 * `Broker.start(config)`; `stop()` closes connections, then flushes and closes the logs.
 */

import { randomInt } from 'node:crypto'
import { join } from 'node:path'
import { InvariantError } from '../common/assert.js'
import { type Clock, systemClock, type TimerHandle } from '../common/clock.js'
import type { FileSystem } from '../common/file-system.js'
import { createLogger, type Logger } from '../common/logger.js'
import { GroupCoordinator } from '../coordinator/group-coordinator.js'
import type {
  BrokerRegistration,
  ClusterImage,
  PartitionState,
  TopicImage,
} from '../metadata/cluster-image.js'
import { ClusterMetadata, type NewTopic } from '../metadata/cluster-metadata.js'
import { Controller } from '../metadata/controller.js'
import { onControlledShutdown } from '../metadata/elections.js'
import { ProducerIdManager } from '../metadata/producer-id-manager.js'
import { EmbeddedStore } from '../metadata/store/embedded-store.js'
import type { Lease, MetadataStore } from '../metadata/store/metadata-store.js'
import { logConfigFor, resolveTopicConfig } from '../metadata/topic-config.js'
import { topicNameProblem } from '../metadata/topic-name.js'
import type { BrokerMetricsSource } from '../ops/broker-metrics-source.js'
import { OpsServer } from '../ops/ops-server.js'
import { type Transport, tcpTransport } from '../replication/broker-client.js'
import type { IsrProposal } from '../replication/partition.js'
import { ReplicaFetcherManager } from '../replication/replica-fetcher.js'
import { ReplicaManager, type TopicSettings } from '../replication/replica-manager.js'
import { LogManager } from '../storage/log-manager.js'
import { type BrokerConfig, groupCoordinatorConfig } from './broker-config.js'
import type { BrokerServices } from './broker-services.js'
import { FetchSessionCache } from './fetch-session-cache.js'
import { allHandlers } from './handlers/all.js'
import { HandlerRegistry } from './handlers/registry.js'
import { SocketServer } from './socket-server.js'

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

export interface BrokerDependencies {
  clock?: Clock
  logger?: Logger
  /**
   * The cluster's metadata store, shared by its brokers (embedded for brokers in one
   * process, etcd across processes). Without one the broker opens an embedded store
   * persisted in its first log directory and owns it.
   */
  store?: MetadataStore
  random?: () => number
  /** Broker-to-broker connections of the replica fetchers (TCP unless a test injects one). */
  transport?: Transport
  /** The log directories' file system (node:fs unless a test injects failures). */
  fileSystem?: FileSystem
}

const METADATA_FILE = '__tidelog_metadata.log'
/** How long a restarted broker waits for its previous registration's lease to expire. */
const REGISTRATION_GRACE_MS = 2000
/** Backoff between attempts to register again after a lost session. */
const REGISTER_RETRY_MIN_MS = 200
const REGISTER_RETRY_MAX_MS = 2000

/** ops: the HTTP listener when tidelog.http.listener is set. */
async function startOps(config: BrokerConfig, logger: Logger): Promise<OpsServer | null> {
  const listener = config.values.get('tidelog.http.listener') as string | null
  if (listener === null || listener === '') return null
  return OpsServer.start(
    {
      listener,
      slowRequestMs: config.values.get('tidelog.request.log.slow.ms') as number,
      topicAdminEnabled: config.values.get('tidelog.console.topic.admin.enable') === true,
    },
    logger,
  )
}

export class Broker implements BrokerServices {
  readonly nodeId: number
  readonly handlers: HandlerRegistry
  readonly clock: Clock
  readonly logger: Logger
  readonly replicaManager: ReplicaManager
  readonly fetchSessions: FetchSessionCache
  readonly producerIdManager: ProducerIdManager
  readonly groupCoordinator: GroupCoordinator
  private socketServer: SocketServer | null = null
  private boundPort = -1
  private stopping: Promise<void> | null = null
  private markStopped!: () => void
  private readonly stopped = new Promise<void>((resolve) => {
    this.markStopped = resolve
  })
  private lease: Lease | null = null
  private controller: Controller | null = null
  private readonly isrStats = { shrinks: 0, expands: 0 }
  private registerRetry: TimerHandle | null = null
  /** ops: the HTTP listener and metrics (tidelog.http.listener), null when off. */
  private ops: OpsServer | null = null

  private constructor(
    readonly config: BrokerConfig,
    readonly metadata: ClusterMetadata,
    readonly logManager: LogManager,
    private readonly store: MetadataStore,
    private readonly ownsStore: boolean,
    deps: { clock: Clock; logger: Logger; transport?: Transport },
  ) {
    this.nodeId = config.nodeId
    this.clock = deps.clock
    this.logger = deps.logger
    this.handlers = new HandlerRegistry(allHandlers)
    this.replicaManager = new ReplicaManager({
      nodeId: config.nodeId,
      logs: logManager,
      clock: deps.clock,
      logger: deps.logger,
      topicSettings: (image, topic) => this.topicSettings(image, topic),
      isFenced: () => this.lease === null,
      alterIsr: (proposal) => this.alterIsr(proposal),
      replicaLagTimeMaxMs: config.values.get('replica.lag.time.max.ms') as number,
      producerIdExpirationMs: config.values.get('producer.id.expiration.ms') as number,
      producerIdExpirationCheckIntervalMs: config.values.get(
        'producer.id.expiration.check.interval.ms',
      ) as number,
      fetchers: new ReplicaFetcherManager({
        nodeId: config.nodeId,
        clock: deps.clock,
        logger: deps.logger,
        transport: deps.transport ?? tcpTransport,
        brokerAddress: (id) => this.metadata.image().brokers.get(id),
        fetchMaxBytes: config.values.get('replica.fetch.max.bytes') as number,
        fetchResponseMaxBytes: config.values.get('replica.fetch.response.max.bytes') as number,
        fetchWaitMaxMs: config.values.get('replica.fetch.wait.max.ms') as number,
        fetchMinBytes: config.values.get('replica.fetch.min.bytes') as number,
        fetchBackoffMs: config.values.get('replica.fetch.backoff.ms') as number,
      }),
    })
    const sessionSlots = config.values.get('max.incremental.fetch.session.cache.slots') as number | undefined
    this.fetchSessions = new FetchSessionCache(sessionSlots ?? 1000, () => randomInt(1, 2 ** 31 - 1))
    this.producerIdManager = new ProducerIdManager({ store, logger: deps.logger })
    this.groupCoordinator = new GroupCoordinator(this, groupCoordinatorConfig(config))
  }

  static async start(config: BrokerConfig, deps: BrokerDependencies = {}): Promise<Broker> {
    const logger = deps.logger ?? createLogger(`broker-${config.nodeId}`)
    // ops: the HTTP listener starts first, so /healthz answers while logs recover.
    const ops = await startOps(config, logger)
    try {
      return await Broker.startWith(config, { ...deps, logger }, ops)
    } catch (error) {
      await ops?.close()
      throw error
    }
  }

  private static async startWith(
    config: BrokerConfig,
    deps: BrokerDependencies & { logger: Logger },
    ops: OpsServer | null,
  ): Promise<Broker> {
    const logger = deps.logger
    const clock = deps.clock ?? systemClock
    const store =
      deps.store ?? (await EmbeddedStore.open({ clock, persistPath: join(config.logDirs[0], METADATA_FILE) }))
    const metadata = await ClusterMetadata.open(store, {
      clusterId: config.clusterId,
      random: deps.random ?? Math.random,
      logger,
    })
    // Bound once the broker exists: a disk failure while loading fails start() instead.
    let onLogDirFailure: (dir: string) => void = () => {}
    const logManager = await LogManager.open({
      logDirs: config.logDirs,
      clock,
      logger,
      ...(deps.fileSystem ? { fs: deps.fileSystem } : {}),
      onLogDirFailure: (dir) => onLogDirFailure(dir),
      retentionCheckIntervalMs: config.values.get('log.retention.check.interval.ms') as number,
      cleanerEnable:
        (config.values.get('log.cleaner.enable') as boolean) &&
        config.values.get('log.cleaner.threads') !== 0,
      cleanerBackoffMs: config.values.get('log.cleaner.backoff.ms') as number,
      producerIdExpirationMs: config.values.get('producer.id.expiration.ms') as number,
      cleanerOffsetMapMaxEntries: Math.max(
        1,
        Math.floor((config.values.get('log.cleaner.dedupe.buffer.size') as number) / 24),
      ),
      // Logs found on disk open with their topic's config; a topic no longer in the
      // metadata (deleted while stopped) opens with defaults and is removed when applied.
      topicConfig: (topic) =>
        metadata.image().topics.has(topic) ? logConfigFor(metadata.image(), config, topic) : undefined,
    })
    const broker: Broker = new Broker(config, metadata, logManager, store, deps.store === undefined, {
      clock,
      logger,
      ...(deps.transport ? { transport: deps.transport } : {}),
    })
    onLogDirFailure = (dir) => broker.onLogDirFailure(dir)
    broker.ops = ops // ops
    ops?.attach(broker.metricsSource()) // ops
    await broker.replicaManager.applyImage(metadata.image())
    broker.groupCoordinator.onPartitionsChanged()
    metadata.onChange((image) => {
      broker.replicaManager
        .applyImage(image)
        // Leadership of __consumer_offsets partitions decides which groups this broker coordinates.
        .then(() => broker.groupCoordinator.onPartitionsChanged())
        .catch((error: unknown) => broker.onFatal(error as Error))
    })
    logManager.startup()
    broker.replicaManager.startup()
    await broker.listen()
    await broker.register()
    return broker
  }

  /**
   * Registers this broker in the store, bound to a lease of broker.session.timeout.ms: if
   * the process dies the registration disappears and the controller moves its leaderships.
   * A restarted broker waits for its previous registration to expire.
   */
  private async register(): Promise<void> {
    const sessionTimeoutMs = this.config.values.get('broker.session.timeout.ms') as number
    const registration: BrokerRegistration = {
      nodeId: this.nodeId,
      host: this.config.advertisedHost,
      port: this.config.advertisedPort === 0 ? this.boundPort : this.config.advertisedPort,
      rack: this.config.rack,
    }
    const deadline = this.clock.monotonicMs() + sessionTimeoutMs + REGISTRATION_GRACE_MS
    const lease = await this.store.grantLease(sessionTimeoutMs)
    try {
      for (;;) {
        if (await this.metadata.register(registration, lease)) break
        if (this.clock.monotonicMs() > deadline)
          throw new Error(`node.id ${this.nodeId} is registered by another live broker`)
        await new Promise<void>((resolve) => this.clock.setTimeout(resolve, 200))
      }
    } catch (error) {
      // Kept alive by its keep-alives, a lease nobody uses would never end: revoke it.
      await lease.revoke().catch((revokeError: unknown) => {
        this.logger.debug({ err: revokeError }, 'revoking an unused lease failed; it expires')
      })
      throw error
    }
    if (this.stopping) {
      // stop() began while this re-registration was under way: leave at once.
      await lease.revoke()
      return
    }
    this.lease = lease
    this.controller = new Controller({
      nodeId: this.nodeId,
      store: this.store,
      metadata: this.metadata,
      lease,
      clock: this.clock,
      logger: this.logger,
      autoLeaderRebalance:
        this.config.values.get('auto.leader.rebalance.enable') === true
          ? {
              intervalMs:
                (this.config.values.get('leader.imbalance.check.interval.seconds') as number) * 1000,
              imbalancePercentage: this.config.values.get('leader.imbalance.per.broker.percentage') as number,
            }
          : null,
      uncleanLeaderElection: (image, topic) =>
        resolveTopicConfig(image, this.config, topic).get('unclean.leader.election.enable')?.value === 'true',
    })
    this.controller.start()
    lease.lost.then(
      () => this.onSessionLost(lease),
      () => this.onSessionLost(lease),
    )
    this.logger.info({ nodeId: this.nodeId }, 'broker registered')
  }

  /** Without a session this broker may not act as leader (another may have been elected). */
  private onSessionLost(lease: Lease): void {
    if (this.lease !== lease || this.stopping) return
    this.lease = null
    this.logger.error('metadata store session lost: no longer leading any partition; registering again')
    const controller = this.controller
    this.controller = null
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
    if (this.stopping) return
    this.register().catch((error: unknown) => {
      if (this.stopping) return
      const delayMs = Math.min(REGISTER_RETRY_MAX_MS, REGISTER_RETRY_MIN_MS * 2 ** (attempt - 1))
      this.logger.warn({ err: error, attempt, delayMs }, 'registering again failed; retrying')
      this.registerRetry = this.clock.setTimeout(() => this.registerAgain(attempt + 1), delayMs)
    })
  }

  /**
   * An ISR change proposed by a partition this broker leads, written by compare-and-set: it
   * applies only if the partition state is still the one the proposal was made from (same
   * leader, leader epoch and partition epoch), so a deposed leader cannot change the ISR.
   */
  private async alterIsr(proposal: IsrProposal): Promise<boolean> {
    let committed = false
    let previousIsrSize = 0
    await this.metadata.update((image) => {
      committed = false
      const topic = image.topics.get(proposal.topic)
      const state = topic?.partitions[proposal.partition]
      if (!topic || !state) return image
      const current =
        state.leader === this.nodeId &&
        state.leaderEpoch === proposal.leaderEpoch &&
        state.partitionEpoch === proposal.partitionEpoch
      if (!current) return image
      committed = true
      previousIsrSize = state.isr.length
      const partitions = [...topic.partitions]
      partitions[proposal.partition] = { ...state, isr: [...proposal.isr] }
      return { ...image, topics: new Map(image.topics).set(topic.name, { ...topic, partitions }) }
    })
    if (committed) {
      const grew = proposal.isr.length > previousIsrSize
      if (grew) this.isrStats.expands++
      else this.isrStats.shrinks++
      this.logger.info({ ...proposal, previousIsrSize }, grew ? 'ISR expanded' : 'ISR shrunk')
    }
    return committed
  }

  /**
   * Replication health as this broker sees it: ISR changes it made as leader, the
   * elections it made while controller, partitions it leads that are under-replicated, and
   * each follower's lag behind it. (No metrics endpoint yet: read it through the embedding
   * API; DescribeLogDirs reports each replica's offset lag.)
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
      isrShrinks: this.isrStats.shrinks,
      isrExpands: this.isrStats.expands,
      leaderElections: this.controller?.stats.elections ?? 0,
      uncleanLeaderElections: this.controller?.stats.uncleanElections ?? 0,
      underReplicatedPartitions: underReplicated,
      offlinePartitions: offline,
      followerLag: followers,
    }
  }

  /** Effective settings of a topic: its overrides over the broker's defaults. */
  private topicSettings(image: ClusterImage, topic: string): TopicSettings {
    return {
      logConfig: logConfigFor(image, this.config, topic),
      minInsyncReplicas: Number(
        resolveTopicConfig(image, this.config, topic).get('min.insync.replicas')?.value ?? 1,
      ),
    }
  }

  /** ops: the HTTP listener's URL (tidelog.http.listener), null when it is off. */
  get httpUrl(): string | null {
    return this.ops?.url ?? null
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
      isrCounters: () => this.isrStats,
      connectionCount: () => this.socketServer?.connectionCount ?? 0,
      isRegistered: () => this.lease !== null,
      configValue: (name) => this.config.values.get(name),
    }
  }

  /** The bound port (differs from the configured one when that was 0). */
  get port(): number {
    return this.boundPort
  }

  get bootstrapServers(): string {
    return `${this.config.host}:${this.boundPort}`
  }

  metadataImage(): ClusterImage {
    return this.metadata.image()
  }

  get isController(): boolean {
    return this.controller?.isActive === true
  }

  /** auto.create.topics.enable: creates missing topics with the broker defaults. */
  async autoCreateTopics(names: readonly string[]): Promise<void> {
    if (this.config.values.get('auto.create.topics.enable') !== true) return
    const valid = names.filter((name) => topicNameProblem(name) === null)
    if (valid.length === 0) return
    await this.metadata.update((image) => {
      const topics = new Map(image.topics)
      for (const name of valid) {
        if (topics.has(name)) continue
        topics.set(
          name,
          this.metadata.createTopicImage({
            name,
            partitions: this.config.values.get('num.partitions') as number,
            replicationFactor: Math.min(
              this.config.values.get('default.replication.factor') as number,
              image.brokers.size,
            ),
            configs: {},
          }),
        )
      }
      return topics.size === image.topics.size ? image : { ...image, topics }
    })
  }

  updateMetadata(change: (image: ClusterImage) => ClusterImage): Promise<ClusterImage> {
    return this.metadata.update(change)
  }

  placeNewTopic(spec: NewTopic): TopicImage {
    return this.metadata.createTopicImage(spec)
  }

  placeNewPartition(partition: number, replicationFactor: number): PartitionState {
    return this.metadata.newPartition(partition, replicationFactor)
  }

  private async listen(): Promise<void> {
    const server = new SocketServer(
      {
        handlers: this.handlers,
        socketRequestMaxBytes: this.config.socketRequestMaxBytes,
        maxQueuedRequests: this.config.queuedMaxRequests,
        logger: this.logger,
        onFatal: (error) => this.onFatal(error),
        requestObserver: this.ops?.requestObserver, // ops
        makeContext: (connection, header, observation) => ({
          header,
          apiVersion: header.requestApiVersion,
          connection,
          broker: this,
          purgatoryTimer: observation, // ops
        }),
      },
      this.logger,
    )
    this.boundPort = await server.listen(this.config.host, this.config.port)
    this.socketServer = server
    this.logger.info({ port: this.boundPort }, 'broker listening')
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
    if (online.length > 0) {
      this.logger.error({ dir, online }, 'log dir offline; its partitions are unavailable until a restart')
      return
    }
    this.logger.fatal({ dir }, 'every log dir is offline: stopping the broker')
    this.stop().catch((error: unknown) => this.logger.error({ err: error }, 'stop after log dir failure'))
  }

  /** A programmer error reached the top: stop serving rather than risk corrupting data. */
  onFatal(error: Error): void {
    this.logger.fatal({ err: error }, 'invariant violated; stopping broker')
    if (error instanceof InvariantError) {
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
    await this.ops?.close() // ops
    this.replicaManager.stopFollowing()
    if (this.lease)
      await this.moveLeadershipAway().catch((error: unknown) =>
        this.logger.warn({ err: error }, 'controlled shutdown incomplete'),
      )
    await this.socketServer?.close()
    this.registerRetry?.cancel()
    this.registerRetry = null
    const controller = this.controller
    const lease = this.lease
    this.controller = null
    this.lease = null
    await controller?.stop()
    this.groupCoordinator.shutdown()
    await lease?.revoke().catch((error: unknown) => this.logger.warn({ err: error }, 'lease revoke failed'))
    this.replicaManager.shutdown()
    this.metadata.close()
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
          const unclean = false
          const result = onControlledShutdown({ state, live, uncleanLeaderElection: unclean }, this.nodeId)
          if (result) changed = true
          return result?.state ?? state
        })
        topics.set(topic.name, { ...topic, partitions })
      }
      return changed ? { ...image, topics } : image
    })
  }
}
