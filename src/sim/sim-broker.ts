/**
 * One broker process in the simulation: the real LogManager, ReplicaManager,
 * ReplicaFetcherManager, ClusterMetadata and Controller wired on the simulated clock, disk,
 * network and the shared EmbeddedStore, as server/broker.ts wires them (that file listens
 * on node:net, so its glue is restated here: registration bound to a lease, re-registering
 * after a lost session, the ISR compare-and-set). Requests from other brokers' fetchers are
 * decoded and answered by the real handlers (Fetch, OffsetForLeaderEpoch, ListOffsets).
 *
 * `kill()` is a crash: timers dropped, disk calls and store calls never answered,
 * connections reset. Nothing of the process is reused by the next incarnation.
 *
 * As server/broker.ts, a broker whose every log dir went offline (a disk error) stops
 * itself, controlled (`stop()`: leaderships moved to other ISR members, listener closed,
 * lease revoked, logs closed), and then its process exits (`kill()`).
 */
import { InvariantError } from '../common/assert.js'
import type { Logger } from '../common/logger.js'
import { CONSUMER_OFFSETS_TOPIC, partitionForGroup } from '../coordinator/group.js'
import { GroupCoordinator } from '../coordinator/group-coordinator.js'
import type { BrokerRegistration } from '../metadata/cluster-image.js'
import { ClusterMetadata } from '../metadata/cluster-metadata.js'
import { Controller } from '../metadata/controller.js'
import { onControlledShutdown } from '../metadata/elections.js'
import type { EmbeddedStore } from '../metadata/store/embedded-store.js'
import {
  type Leadership,
  type Lease,
  type MetadataStore,
  MetadataStoreError,
  type Watch,
} from '../metadata/store/metadata-store.js'
import { TopicAdmin } from '../metadata/topic-admin.js'
import { logConfigFor, resolveTopicConfig } from '../metadata/topic-config.js'
import { FrameDecoder } from '../protocol/frame-decoder.js'
import { apis } from '../protocol/generated/index.js'
import { decodeRequestHeader } from '../protocol/generated/request-header.js'
import { encodeResponseHeader } from '../protocol/generated/response-header.js'
import { Reader, Writer } from '../protocol/primitives.js'
import type { IsrProposal } from '../replication/partition.js'
import { ReplicaFetcherManager } from '../replication/replica-fetcher.js'
import { ReplicaManager } from '../replication/replica-manager.js'
import type { BrokerConfig } from '../server/broker-config.js'
import { brokerConfigFromProperties, groupCoordinatorConfig } from '../server/broker-config.js'
import type { BrokerServices } from '../server/broker-services.js'
import { FetchSessionCache } from '../server/fetch-session-cache.js'
import { allHandlers } from '../server/handlers/all.js'
import { HandlerRegistry } from '../server/handlers/registry.js'
import type { RequestContext } from '../server/request-context.js'
import { isStorageError } from '../storage/errors.js'
import { LogManager } from '../storage/log-manager.js'
import { ProcessDisk, type SimDisk } from './disk.js'
import { type ServerEndpoint, SimNetwork } from './network.js'
import type { SimRandom } from './random.js'
import { ProcessClock, type SimScheduler } from './scheduler.js'

export interface SimBrokerSettings {
  readonly sessionTimeoutMs: number
  readonly replicaLagTimeMaxMs: number
  readonly properties: ReadonlyMap<string, string>
  /** Random one-way latency to the metadata store, 0..this (0: in-process, no latency). */
  readonly storeLatencyMaxMs: number
  /** With store latency: the process learns its lease ended one trip after the store ended it. */
  readonly leaseLossLearnedLate?: boolean
  /** Store calls not answered within this many ms fail, as the etcd store's deadline (0: none). */
  readonly storeCallTimeoutMs?: number
  /** Mutation check: the ISR write skips its compare-and-set on leader and epochs. */
  readonly mutateIsrWithoutCas?: boolean
  /** Mutation check: the controller may elect outside the ISR whatever the topic says. */
  readonly mutateUncleanElection?: boolean
  /** Mutation check: followers truncate to their high watermark instead of using leader epochs. */
  readonly mutateTruncateToHighWatermark?: boolean
  /**
   * Called with every Fetch answer to a consumer as it leaves the handler: replicaId < 0, or
   * 99 (the `consumer-reads-log-end` mutation: a consumer posing as a replica reads past the
   * high watermark).
   */
  readonly onConsumerAnswer?: (broker: SimBroker, partition: number, records: unknown) => void
  /** Hosts __consumer_offsets' group coordinator (the real GroupCoordinator), as server/broker.ts. */
  readonly groups?: boolean
  /**
   * Called with every group API answer without a top-level error (JoinGroup, SyncGroup,
   * Heartbeat, OffsetCommit, OffsetFetch), with the group's __consumer_offsets partition and
   * this broker's leader epoch of it when the request arrived (-1: not its leader then): the
   * coordinator routes by leadership synchronously as the handler starts.
   */
  readonly onGroupAnswer?: (
    broker: SimBroker,
    apiKey: number,
    offsetsPartition: number,
    leaderEpochAtRequest: number,
  ) => void
  /** Called when the process exits after stopping itself (every log dir offline). */
  readonly onStoppedItself?: (broker: SimBroker) => void
}

const handlers = new HandlerRegistry(allHandlers)

/** OffsetCommit, OffsetFetch, JoinGroup, Heartbeat, SyncGroup: answered by the group's coordinator. */
const GROUP_APIS: ReadonlySet<number> = new Set([8, 9, 11, 12, 14])

/** The replica id a consumer sends under the `consumer-reads-log-end` mutation. */
export const MUTATED_CONSUMER_REPLICA_ID = 99

function isConsumer(replicaId: number): boolean {
  return replicaId < 0 || replicaId === MUTATED_CONSUMER_REPLICA_ID
}

/** A store seen from one process: a dead process's calls never settle and its watches go quiet. */
class ProcessStore implements MetadataStore {
  readonly leases: Lease[] = []
  /** Last scheduled arrival per direction, so requests and answers stay in order (one connection). */
  private lastRequestAt = 0
  private lastAnswerAt = 0
  /** A stalled link (store latency mode): until `untilMs` every trip takes minMs..maxMs. */
  stall: { readonly untilMs: number; readonly minMs: number; readonly maxMs: number } | null = null

  constructor(
    private readonly store: EmbeddedStore,
    private readonly isAlive: () => boolean,
    private readonly scheduler: SimScheduler,
    /** False: store calls go straight through (in-process). */
    private readonly latencyOn: boolean,
    /** Simulated one-way latency to the store, drawn per trip. */
    private readonly latencyMs: () => number,
    private readonly stallRandom: (min: number, max: number) => number,
    private readonly leaseLossLearnedLate: boolean,
    /** Calls not answered within this fail (0: they wait for ever). */
    private readonly callTimeoutMs: number,
  ) {}

  /**
   * Runs `run` after a one-way trip, in order with earlier trips the same way. Without store
   * latency it runs at once. With it, a trip drawn at 0 ms is still scheduled behind the ones
   * in flight: running it at once let a watch event overtake an earlier one, and
   * ClusterMetadata (rightly, etcd delivers in order) skipped the earlier revision as seen.
   */
  private travel(direction: 'request' | 'answer', run: () => void): void {
    if (!this.latencyOn) {
      run()
      return
    }
    const stall = this.stall !== null && this.scheduler.now < this.stall.untilMs ? this.stall : null
    const delay = stall ? this.stallRandom(stall.minMs, stall.maxMs) : this.latencyMs()
    const now = this.scheduler.now
    const last = direction === 'request' ? this.lastRequestAt : this.lastAnswerAt
    const at = Math.max(now + delay, last)
    if (direction === 'request') this.lastRequestAt = at
    else this.lastAnswerAt = at
    this.scheduler.schedule(at - now, run)
  }

  private gate<T>(op: () => Promise<T>, deadline = true): Promise<T> {
    if (!this.isAlive()) return new Promise<T>(() => undefined)
    return new Promise<T>((resolve, reject) => {
      let settled = false
      const settle = (done: () => void): void => {
        if (settled || !this.isAlive()) return
        settled = true
        done()
      }
      // A deadline as the etcd store has: the caller gives up, the request may still apply.
      if (deadline && this.callTimeoutMs > 0)
        this.scheduler.schedule(this.callTimeoutMs, () =>
          settle(() => reject(new MetadataStoreError('STORE_UNAVAILABLE', 'store call timed out'))),
        )
      this.travel('request', () => {
        op().then(
          (value) => this.travel('answer', () => settle(() => resolve(value))),
          (error: unknown) => this.travel('answer', () => settle(() => reject(error))),
        )
      })
    })
  }

  get(key: string) {
    return this.gate(() => this.store.get(key))
  }
  range(prefix: string) {
    return this.gate(() => this.store.range(prefix))
  }
  txn(...args: Parameters<MetadataStore['txn']>) {
    return this.gate(() => this.store.txn(...args))
  }
  watch(...args: Parameters<MetadataStore['watch']>): Watch {
    const [prefix, from, onEvents, onError] = args
    return this.store.watch(
      prefix,
      from,
      (events, revision) => {
        this.travel('answer', () => {
          if (this.isAlive()) onEvents(events, revision)
        })
      },
      (error) => {
        this.travel('answer', () => {
          if (this.isAlive()) onError?.(error)
        })
      },
    )
  }
  grantLease(ttlMs: number): Promise<Lease> {
    return this.gate(async () => {
      const lease = await this.store.grantLease(ttlMs)
      this.leases.push(lease)
      if (!this.latencyOn || !this.leaseLossLearnedLate) return lease
      // The process learns that its lease ended from the store (a keep-alive answer): one
      // trip behind what the store already sent it, so a stalled link keeps it unaware.
      const lost = new Promise<void>((resolve) => {
        lease.lost.then(() => this.travel('answer', resolve))
      })
      return { id: lease.id, ttlMs: lease.ttlMs, lost, revoke: () => lease.revoke() }
    })
  }
  campaign(election: string, candidate: string, lease: Lease): Promise<Leadership> {
    // Waits until elected: no deadline.
    return this.gate(() => this.store.campaign(election, candidate, lease), false)
  }
  leader(election: string) {
    return this.gate(() => this.store.leader(election))
  }
  close(): Promise<void> {
    return Promise.resolve()
  }
}

export class SimBroker {
  readonly clock: ProcessClock
  readonly disk: ProcessDisk
  readonly store: ProcessStore
  readonly config: BrokerConfig
  metadata!: ClusterMetadata
  logManager!: LogManager
  replicaManager!: ReplicaManager
  lease: Lease | null = null
  controller: Controller | null = null
  groupCoordinator: GroupCoordinator | null = null
  topicAdmin!: TopicAdmin
  private alive = true
  /** Set once start() finished (the broker serves and is registered). */
  started = false
  /** When every log dir of this process went offline (it then stops itself), and whether it was registered then. */
  allLogDirsOfflineAt: { readonly atMs: number; readonly registered: boolean } | null = null
  private stopping: Promise<void> | null = null
  private readonly scheduler: SimScheduler

  constructor(
    readonly nodeId: number,
    readonly incarnation: number,
    scheduler: SimScheduler,
    simDisk: SimDisk,
    private readonly rawStore: EmbeddedStore,
    private readonly network: SimNetwork,
    private readonly random: SimRandom,
    readonly logger: Logger,
    private readonly settings: SimBrokerSettings,
  ) {
    this.scheduler = scheduler
    this.clock = new ProcessClock(scheduler)
    this.disk = new ProcessDisk(simDisk)
    this.store = new ProcessStore(
      rawStore,
      () => this.alive,
      scheduler,
      settings.storeLatencyMaxMs > 0,
      () => random.int(0, settings.storeLatencyMaxMs),
      (min, max) => random.int(min, max),
      settings.leaseLossLearnedLate === true,
      settings.storeCallTimeoutMs ?? 0,
    )
    this.config = brokerConfigFromProperties(
      new Map([
        ...settings.properties,
        ['node.id', String(nodeId)],
        ['log.dirs', `/broker-${nodeId}/data`],
        ['listeners', `PLAINTEXT://${SimNetwork.hostOf(nodeId)}:9092`],
      ]),
    )
  }

  get isAlive(): boolean {
    return this.alive
  }

  async start(): Promise<void> {
    const logger = this.logger
    // As server/broker.ts: bound once the broker exists (a failure while loading fails start()).
    let onLogDirFailure: (dir: string) => void = () => {}
    this.metadata = await ClusterMetadata.open(this.store, {
      clusterId: 'sim-cluster',
      random: () => this.random.next(),
      logger,
    })
    this.logManager = await LogManager.open({
      logDirs: this.config.logDirs,
      fs: this.disk,
      clock: this.clock,
      logger,
      onLogDirFailure: (dir) => {
        // For the invariants, whatever the broker does about it.
        if (this.logManager && this.config.logDirs.every((d) => this.logManager.offlineLogDirs.includes(d)))
          this.allLogDirsOfflineAt ??= { atMs: this.scheduler.now, registered: this.lease !== null }
        onLogDirFailure(dir)
      },
      topicConfig: (topic) =>
        this.metadata.image().topics.has(topic)
          ? logConfigFor(this.metadata.image(), this.config, topic)
          : undefined,
    })
    this.replicaManager = new ReplicaManager({
      nodeId: this.nodeId,
      logs: this.logManager,
      clock: this.clock,
      logger,
      topicSettings: (image, topic) => ({
        logConfig: logConfigFor(image, this.config, topic),
        minInsyncReplicas: Number(
          resolveTopicConfig(image, this.config, topic).get('min.insync.replicas')?.value ?? 1,
        ),
      }),
      isFenced: () => this.lease === null,
      alterIsr: (proposal) => this.alterIsr(proposal),
      replicaLagTimeMaxMs: this.settings.replicaLagTimeMaxMs,
      fetchers: new ReplicaFetcherManager({
        nodeId: this.nodeId,
        clock: this.clock,
        logger,
        transport: this.network.transportFor(this.nodeId, () => this.alive),
        brokerAddress: (id) => this.metadata.image().brokers.get(id),
        fetchMaxBytes: 64 * 1024,
        fetchResponseMaxBytes: 256 * 1024,
        fetchWaitMaxMs: 200,
        fetchMinBytes: 1,
        fetchBackoffMs: 100,
        requestTimeoutMs: 1000,
        unsafeTruncateToHighWatermark: this.settings.mutateTruncateToHighWatermark === true,
      }),
    })
    onLogDirFailure = (dir) => this.onLogDirFailure(dir)
    this.topicAdmin = new TopicAdmin({
      metadata: this.metadata,
      config: this.config,
      clock: this.clock,
      logger,
    })
    if (this.settings.groups === true)
      this.groupCoordinator = new GroupCoordinator(
        {
          nodeId: this.nodeId,
          clock: this.clock,
          logger,
          replicaManager: this.replicaManager,
          metadataImage: () => this.metadata.image(),
          topicAdmin: this.topicAdmin,
        },
        groupCoordinatorConfig(this.config),
      )
    await this.replicaManager.applyImage(this.metadata.image())
    this.groupCoordinator?.onPartitionsChanged()
    this.metadata.onChange((image) => {
      this.replicaManager
        .applyImage(image)
        // Leadership of __consumer_offsets partitions decides which groups this broker coordinates.
        .then(() => this.groupCoordinator?.onPartitionsChanged())
        .catch((error: unknown) => this.onFatal(error))
    })
    this.logManager.startup()
    this.replicaManager.startup()
    if (this.stopping) return
    this.network.listen(this.nodeId, (send, close) => this.accept(send, close))
    await this.register()
    if (!this.stopping) this.started = true
  }

  /** Fatal errors inside a broker are invariant violations: the world records them. */
  fatalErrors: unknown[] = []
  private onFatal(error: unknown): void {
    if (!this.alive) return
    // server/broker.ts logs a failure to apply an image and carries on unless it is an
    // InvariantError; a storage error (a log dir offline after a disk error) is expected then.
    if (isStorageError(error)) {
      this.logger.error(
        { err: String(error) },
        'applying the metadata image failed (storage error); carrying on',
      )
      return
    }
    this.fatalErrors.push(error)
    this.logger.fatal({ err: error }, 'fatal error in broker')
  }

  kill(): void {
    this.alive = false
    this.clock.kill()
    this.disk.kill()
    this.network.unlisten(this.nodeId)
    this.metadata?.close()
  }

  /** The store ends this broker's session now (a lost keep-alive, a store failover). */
  async expireSession(): Promise<boolean> {
    const lease = this.lease
    if (!lease) return false
    await this.rawStore.expireLease(lease.id)
    return true
  }

  /** A crashed process stops keeping its leases alive: they expire one TTL later. */
  suspendLeases(): void {
    for (const lease of this.store.leases) {
      try {
        this.rawStore.suspendKeepAlive(lease.id)
      } catch {
        // LEASE_NOT_FOUND: already ended.
      }
    }
  }

  // ---- as server/broker.ts ---------------------------------------------------------------

  /** As server/broker.ts: with no log dir left online the broker stops itself, controlled. */
  private onLogDirFailure(dir: string): void {
    if (!this.alive) return
    const online = this.config.logDirs.filter((d) => !this.logManager.offlineLogDirs.includes(d))
    if (online.length > 0) {
      this.logger.error({ dir, online }, 'log dir offline; its partitions are unavailable until a restart')
      return
    }
    this.logger.fatal({ dir }, 'every log dir is offline: stopping the broker')
    this.stop().catch((error: unknown) =>
      this.logger.error({ err: String(error) }, 'stop after log dir failure'),
    )
  }

  stop(): Promise<void> {
    this.stopping ??= this.doStop()
    return this.stopping
  }

  get isStopping(): boolean {
    return this.stopping !== null
  }

  /**
   * As server/broker.ts's controlled shutdown: leadership moves to other ISR members, the
   * listener closes, the registration is revoked and the logs are closed; then the process
   * exits (a killed process to the simulation: its page cache stays).
   */
  private async doStop(): Promise<void> {
    this.replicaManager.stopFollowing()
    if (this.lease)
      await this.moveLeadershipAway().catch((error: unknown) =>
        this.logger.warn({ err: String(error) }, 'controlled shutdown incomplete'),
      )
    this.network.unlisten(this.nodeId)
    const controller = this.controller
    const lease = this.lease
    this.controller = null
    this.lease = null
    await controller?.stop()
    this.groupCoordinator?.shutdown()
    await lease
      ?.revoke()
      .catch((error: unknown) => this.logger.warn({ err: String(error) }, 'lease revoke failed'))
    this.replicaManager.shutdown()
    this.metadata.close()
    await this.logManager.shutdown()
    if (!this.alive) return
    this.logger.info('broker stopped; the process exits')
    this.kill()
    this.suspendLeases()
    this.settings.onStoppedItself?.(this)
  }

  private async moveLeadershipAway(): Promise<void> {
    await this.metadata.update((image) => {
      const live = new Set(image.brokers.keys())
      const topics = new Map(image.topics)
      let changed = false
      for (const topic of image.topics.values()) {
        const partitions = topic.partitions.map((state) => {
          const result = onControlledShutdown({ state, live, uncleanLeaderElection: false }, this.nodeId)
          if (result) changed = true
          return result?.state ?? state
        })
        topics.set(topic.name, { ...topic, partitions })
      }
      return changed ? { ...image, topics } : image
    })
  }

  private async register(): Promise<void> {
    const registration: BrokerRegistration = {
      nodeId: this.nodeId,
      host: SimNetwork.hostOf(this.nodeId),
      port: 9092,
      rack: null,
    }
    const lease = await this.store.grantLease(this.settings.sessionTimeoutMs)
    for (;;) {
      if (await this.metadata.register(registration, lease)) break
      await new Promise<void>((resolve) => this.clock.setTimeout(resolve, 200))
    }
    if (this.stopping) {
      // stop() began while this registration was under way: leave at once (server/broker.ts).
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
      uncleanLeaderElection: (image, topic) =>
        this.settings.mutateUncleanElection === true ||
        resolveTopicConfig(image, this.config, topic).get('unclean.leader.election.enable')?.value === 'true',
    })
    this.controller.start()
    lease.lost.then(() => this.onSessionLost(lease))
    this.logger.info('broker registered')
  }

  private onSessionLost(lease: Lease): void {
    if (this.lease !== lease || !this.alive || this.stopping) return
    this.lease = null
    this.logger.warn('metadata store session lost; registering again')
    const controller = this.controller
    this.controller = null
    controller?.stop().catch(() => undefined)
    const again = (attempt: number): void => {
      if (!this.alive || this.stopping) return
      this.register().catch(() => {
        this.clock.setTimeout(() => again(attempt + 1), Math.min(2000, 200 * 2 ** (attempt - 1)))
      })
    }
    again(1)
  }

  private async alterIsr(proposal: IsrProposal): Promise<boolean> {
    let committed = false
    let stale = false
    const written = this.metadata.update((image) => {
      committed = false
      stale = false
      const topic = image.topics.get(proposal.topic)
      const state = topic?.partitions[proposal.partition]
      if (!topic || !state) return image
      const current =
        state.leader === this.nodeId &&
        state.leaderEpoch === proposal.leaderEpoch &&
        state.partitionEpoch === proposal.partitionEpoch
      if (!current && this.settings.mutateIsrWithoutCas !== true) return image
      stale = !current
      committed = true
      const partitions = [...topic.partitions]
      partitions[proposal.partition] = { ...state, isr: [...proposal.isr] }
      return { ...image, topics: new Map(image.topics).set(topic.name, { ...topic, partitions }) }
    })
    await written.catch((error: unknown) => {
      this.logger.info({ ...proposal, err: String(error) }, 'ISR write failed without an answer')
      throw error
    })
    if (committed && stale)
      this.logger.warn({ ...proposal }, 'MUTATION: stale ISR proposal written without compare-and-set')
    else if (committed) this.logger.info({ ...proposal }, 'ISR changed')
    else this.logger.info({ ...proposal }, 'ISR change refused: the partition state moved on')
    return committed
  }

  // ---- server side: the real handlers behind a simulated connection ------------------------

  private services(): BrokerServices {
    return {
      nodeId: this.nodeId,
      config: this.config,
      handlers,
      clock: this.clock,
      logger: this.logger,
      replicaManager: this.replicaManager,
      logManager: this.logManager,
      fetchSessions: this.fetchSessions,
      producerIdManager: undefined as never,
      groupCoordinator: (this.groupCoordinator ?? undefined) as never,
      metadataImage: () => this.metadata.image(),
      topicAdmin: this.topicAdmin,
    }
  }

  /** The group's __consumer_offsets partition and this broker's leader epoch of it now (-1: not leader). */
  private groupRoute(groupId: string): { partition: number; leaderEpoch: number } | null {
    const topic = this.metadata.image().topics.get(CONSUMER_OFFSETS_TOPIC)
    if (!topic || topic.partitions.length === 0) return null
    const partition = partitionForGroup(groupId, topic.partitions.length)
    const local = this.replicaManager.getPartition(CONSUMER_OFFSETS_TOPIC, partition)
    return { partition, leaderEpoch: local?.isLeader ? local.leaderEpoch : -1 }
  }

  private readonly fetchSessions = new FetchSessionCache(10, () => this.random.int(1, 2 ** 31 - 2))

  private accept(send: (chunks: readonly Buffer[]) => void, close: () => void): ServerEndpoint {
    const decoder = new FrameDecoder(100 * 1024 * 1024)
    const queue: { done: boolean; chunks: Buffer[] | null }[] = []
    let closed = false
    const connection = {
      remoteAddress: 'sim:0',
      isClosed: false,
      close: () => {
        closed = true
        close()
      },
    }
    const flush = (): void => {
      while (!closed && queue.length > 0 && queue[0].done) {
        const slot = queue.shift()!
        if (slot.chunks) send(slot.chunks)
      }
    }
    const onFrame = (frame: Buffer): void => {
      const apiKey = frame.readInt16BE(0)
      const apiVersion = frame.readInt16BE(2)
      const handler = handlers.get(apiKey)
      const descriptor = apis.get(apiKey)
      if (!handler || !descriptor) {
        connection.close()
        return
      }
      const reader = new Reader(frame)
      const header = decodeRequestHeader(reader, descriptor.requestHeaderVersion(apiVersion))
      const request = descriptor.decodeRequest(reader, apiVersion)
      const context = {
        header,
        apiVersion,
        connection,
        broker: this.services(),
      } as unknown as RequestContext
      if (apiKey === 1) {
        const fetch = request as {
          replicaId: number
          topics: { partitions: { partition: number; fetchOffset: bigint }[] }[]
        }
        this.logger.debug(
          {
            from: fetch.replicaId,
            offsets: fetch.topics.flatMap((t) => t.partitions.map((p) => `p${p.partition}@${p.fetchOffset}`)),
          },
          'fetch request',
        )
      }
      const groupRoute =
        this.settings.onGroupAnswer && GROUP_APIS.has(apiKey)
          ? this.groupRoute((request as { groupId: string }).groupId)
          : null
      const slot: { done: boolean; chunks: Buffer[] | null } = { done: false, chunks: null }
      queue.push(slot)
      const respond = (response: unknown): void => {
        const onConsumerAnswer = this.settings.onConsumerAnswer
        if (
          apiKey === 1 &&
          response !== null &&
          onConsumerAnswer &&
          isConsumer((request as { replicaId: number }).replicaId)
        ) {
          const fetched = response as {
            responses: { partitions: { partitionIndex: number; errorCode: number; records: unknown }[] }[]
          }
          for (const topic of fetched.responses)
            for (const p of topic.partitions)
              if (p.errorCode === 0) onConsumerAnswer(this, p.partitionIndex, p.records)
        }
        if (response !== null && groupRoute !== null && this.alive) {
          const code = (response as { errorCode?: number }).errorCode
          const answered =
            apiKey === 8
              ? (response as { topics: { partitions: { errorCode: number }[] }[] }).topics.some((t) =>
                  t.partitions.some((p) => p.errorCode === 0),
                )
              : code === 0
          if (answered)
            this.settings.onGroupAnswer?.(this, apiKey, groupRoute.partition, groupRoute.leaderEpoch)
        }
        if (response !== null) {
          const writer = new Writer(512)
          writer.writeInt32(0)
          encodeResponseHeader(writer, descriptor.responseHeaderVersion(apiVersion), {
            correlationId: header.correlationId,
          })
          descriptor.encodeResponse(writer, apiVersion, response)
          const chunks = writer.toChunks()
          chunks[0].writeInt32BE(writer.length - 4, 0)
          slot.chunks = chunks
        }
        slot.done = true
        flush()
      }
      const fail = (error: unknown): void => {
        if (error instanceof InvariantError) this.onFatal(error)
        else this.logger.warn({ err: String(error) }, 'request failed; closing connection')
        connection.close()
      }
      try {
        const result = handler.handle(context, request)
        if (result instanceof Promise) {
          // As server/connection.ts: an acks=0 produce holds the connection until it settles
          // (its failure closes the connection; nothing behind it may be appended first).
          if (handler.holdsConnection?.(request)) holdUntilSettled(result)
          result.then(respond, fail)
        } else respond(result)
      } catch (error) {
        fail(error)
      }
    }
    let heldFrames: Buffer[] | null = null
    const holdUntilSettled = (result: Promise<unknown>): void => {
      heldFrames = []
      const release = (): void => {
        const frames = heldFrames ?? []
        heldFrames = null
        for (let i = 0; i < frames.length; i++) {
          if (closed || !this.alive) return
          if (heldFrames !== null) {
            ;(heldFrames as Buffer[]).push(...frames.slice(i))
            return
          }
          onFrame(frames[i])
        }
      }
      result.then(release, release)
    }
    const onFrameOrHold = (frame: Buffer): void => {
      if (heldFrames !== null) heldFrames.push(frame)
      else onFrame(frame)
    }
    return {
      onData: (chunk) => {
        if (closed || !this.alive) return
        decoder.push(chunk, onFrameOrHold)
      },
      onClose: () => {
        closed = true
      },
    }
  }
}
