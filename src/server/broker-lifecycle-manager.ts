/**
 * A broker's membership of the cluster (Kafka's BrokerLifecycleManager): its registration
 * in the metadata store under a session lease, the broker epoch that registration gives
 * it, registering again after a lost session, fencing by a newer incarnation of its node
 * id, and the controller candidacy each registration runs. Apart from broker.ts, which
 * composes the services: this is the one state machine of the broker's session.
 */
import { ExponentialBackoff } from '../common/backoff.js'
import type { Clock, TimerHandle } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import type { BrokerId, BrokerRegistration, ClusterImage } from '../metadata/cluster-image.js'
import type { ClusterMetadata } from '../metadata/cluster-metadata.js'
import { Controller } from '../metadata/controller.js'
import type { LeadershipRecord } from '../metadata/leadership-record.js'
import type { Lease, MetadataStore } from '../metadata/store/metadata-store.js'
import type { ReplicaManager } from '../replication/replica-manager.js'
import type { LogManager } from '../storage/log-manager.js'
import type { BrokerConfig } from './broker-config.js'
import { type EventLoopStallCounters, EventLoopStallMonitor } from './event-loop-stall-monitor.js'

/**
 * Registration is a compare-and-set on the broker key; it loses only to a concurrent
 * registration of the same node id, so a few attempts settle it.
 */
const MAX_REGISTRATION_ATTEMPTS = 5

/** Backoff between attempts to register again after a lost session. */
const REREGISTER_BACKOFF = { initialMs: 200, maxMs: 2000 } as const

/** What the lifecycle needs of its broker. */
export interface BrokerLifecycleHost {
  readonly nodeId: BrokerId
  readonly config: BrokerConfig
  readonly clock: Clock
  readonly logger: Logger
  readonly store: MetadataStore
  readonly metadata: ClusterMetadata
  readonly logManager: LogManager
  readonly replicaManager: ReplicaManager
  readonly leadershipRecord: LeadershipRecord
  /**
   * Watch this process's event loop for stalls that endanger the session (a real process;
   * the simulator's time has no loop to stall).
   */
  readonly monitorEventLoop: boolean
  /** This process's incarnation (KRaft's incarnation id): a restart is a new one. */
  readonly incarnationId: string
  /** stop() began: nothing registers or re-registers any more. */
  isStopping(): boolean
  /** The port a listener bound (the advertised port when that was configured as 0). */
  boundPort(listener: string): number
  /** The schema registry's URL to advertise in the registration, if the broker serves one. */
  advertisedRegistryUrl(advertisedHost: string): { schemaRegistryUrl?: string }
  minInsyncReplicas(image: ClusterImage, topic: string): number
  uncleanLeaderElection(image: ClusterImage, topic: string): boolean
}

export class BrokerLifecycleManager {
  private leaseValue: Lease | null = null
  /** The epoch of this broker's current registration, -1 while unregistered. */
  private brokerEpochValue = -1
  /** A newer incarnation of this node id registered: this process stays out for good. */
  private fencedByIncarnation = false
  private activeController: Controller | null = null
  private registerRetry: TimerHandle | null = null
  private readonly reregisterBackoff = new ExponentialBackoff(REREGISTER_BACKOFF)
  private sessionLosses = 0
  private reregistrations = 0
  private readonly stallMonitor: EventLoopStallMonitor | null

  constructor(private readonly host: BrokerLifecycleHost) {
    this.stallMonitor = host.monitorEventLoop
      ? new EventLoopStallMonitor(
          host.clock,
          host.logger,
          host.config.values.get('broker.session.timeout.ms') as number,
        )
      : null
  }

  /** Sessions lost and registrations made again since (a broker's /metrics), and the loop's stalls. */
  get counters(): { sessionLosses: number; reregistrations: number } & EventLoopStallCounters {
    return {
      sessionLosses: this.sessionLosses,
      reregistrations: this.reregistrations,
      ...(this.stallMonitor?.counters ?? { stalls: 0, longestStallMs: 0 }),
    }
  }

  /** The lease this broker is registered under; null while fenced or unregistered. */
  get lease(): Lease | null {
    return this.leaseValue
  }
  /** The epoch of this broker's current registration, -1 while unregistered. */
  get brokerEpoch(): number {
    return this.brokerEpochValue
  }
  /** The controller candidate of this broker's current registration (null while unregistered). */
  get controller(): Controller | null {
    return this.activeController
  }

  /**
   * Registers this broker in the store, bound to a lease of broker.session.timeout.ms: if
   * the process dies the registration disappears and the controller moves its leaderships.
   * A restarted broker registers at once, replacing its previous process's registration
   * with a new incarnation and broker epoch that fence that process (cluster-metadata.ts).
   */
  async register(): Promise<void> {
    const host = this.host
    const sessionTimeoutMs = host.config.values.get('broker.session.timeout.ms') as number
    const registration = this.registration()
    this.stallMonitor?.start()
    const lease = await host.store.grantLease(sessionTimeoutMs)
    let brokerEpoch: number | null = null
    try {
      for (let attempt = 1; brokerEpoch === null; attempt++) {
        if (attempt > MAX_REGISTRATION_ATTEMPTS)
          throw new Error(`node.id ${host.nodeId}: registration kept conflicting with another one`)
        brokerEpoch = await host.metadata.register(registration, lease, {
          uncleanShutdown: !host.logManager.hadCleanShutdown,
          logEnd: (topic, partition) => {
            const log = host.logManager.getLog({ topic, partition })
            if (log === undefined) return undefined
            return { leaderEpoch: log.latestEpoch ?? -1, endOffset: log.logEndOffset }
          },
          minInsyncReplicas: (image, topic) => host.minInsyncReplicas(image, topic),
        })
      }
    } catch (error) {
      // Kept alive by its keep-alives, a lease nobody uses would never end: revoke it.
      await lease.revoke().catch((revokeError: unknown) => {
        host.logger.debug({ err: revokeError }, 'revoking an unused lease failed; it expires')
      })
      throw error
    }
    if (host.isStopping() || this.fencedByIncarnation) {
      // stop() began while this re-registration was under way: leave at once.
      await lease.revoke()
      return
    }
    this.leaseValue = lease
    this.brokerEpochValue = brokerEpoch
    this.onLeadershipRegained()
    this.activeController = this.newController(lease)
    this.activeController.start()
    lease.lost.then(
      () => this.onSessionLost(lease),
      () => this.onSessionLost(lease),
    )
    host.logger.info(
      { nodeId: host.nodeId, incarnationId: host.incarnationId, brokerEpoch },
      'broker registered',
    )
  }

  /** What this broker registers: its advertised endpoints as bound, its incarnation, its registry. */
  private registration(): BrokerRegistration {
    const host = this.host
    const endpoints = host.config.listeners.advertised.map((e) => ({
      listener: e.listener,
      securityProtocol: e.securityProtocol,
      host: e.host,
      port: e.port === 0 ? host.boundPort(e.listener) : e.port,
    }))
    return {
      nodeId: host.nodeId,
      host: endpoints[0].host,
      port: endpoints[0].port,
      rack: host.config.rack,
      endpoints,
      incarnationId: host.incarnationId,
      ...host.advertisedRegistryUrl(endpoints[0].host),
    }
  }

  /**
   * Leading needs a store session (Partition.isLeader), and the images applied while this
   * broker had none could not act as leader: a restarted broker's own registration arrives
   * before its lease is set, and for a partition whose ISR is this broker alone no fetch or
   * produce would come to raise the high watermark checkpointed before the crash to the log
   * end. Done before the first Fetch or ListOffsets can see this broker as leader.
   */
  private onLeadershipRegained(): void {
    this.host.replicaManager.onLeadershipRegained()
    this.host.leadershipRecord.onApplied(this.host.replicaManager.servedLeaderEpochs())
  }

  /**
   * A newer incarnation of this node id replaced this broker's registration (this process
   * was taken for dead: paused, cut off, or a second process started with the same
   * node.id). Its broker epoch fences this one's ISR changes and fetches; this process
   * also stops leading and campaigning and, unlike after a lost session, never registers
   * again, which would fence the newer process in turn.
   */
  maybeFencedByIncarnation(image: ClusterImage): void {
    const host = this.host
    const lease = this.leaseValue
    if (lease === null || host.isStopping()) return
    const current = image.brokers.get(host.nodeId)
    if (current === undefined || current.incarnationId === host.incarnationId) return
    if ((current.brokerEpoch ?? -1) <= this.brokerEpochValue) return
    this.fencedByIncarnation = true
    this.leaseValue = null
    this.brokerEpochValue = -1
    host.logger.error(
      { nodeId: host.nodeId, incarnationId: host.incarnationId, newerIncarnationId: current.incarnationId },
      'a newer incarnation of this broker registered: this process is fenced and serves nothing more',
    )
    const controller = this.activeController
    this.activeController = null
    controller?.stop().catch((error: unknown) => host.logger.warn({ err: error }, 'controller stop failed'))
    // Only keys still bound to this lease go (its controller candidacy), not the registration.
    lease.revoke().catch((error: unknown) => host.logger.warn({ err: error }, 'lease revoke failed'))
  }

  private newController(lease: Lease): Controller {
    const host = this.host
    const values = host.config.values
    return new Controller({
      nodeId: host.nodeId,
      store: host.store,
      metadata: host.metadata,
      lease,
      clock: host.clock,
      logger: host.logger,
      autoLeaderRebalance:
        values.get('auto.leader.rebalance.enable') === true
          ? {
              intervalMs: (values.get('leader.imbalance.check.interval.seconds') as number) * 1000,
              imbalancePercentage: values.get('leader.imbalance.per.broker.percentage') as number,
            }
          : null,
      uncleanLeaderElection: (image, topic) => host.uncleanLeaderElection(image, topic),
      minInsyncReplicas: (image, topic) => host.minInsyncReplicas(image, topic),
    })
  }

  /** Without a session this broker may not act as leader (another may have been elected). */
  private onSessionLost(lease: Lease): void {
    const host = this.host
    if (this.leaseValue !== lease || host.isStopping()) return
    this.leaseValue = null
    this.brokerEpochValue = -1
    this.sessionLosses++
    host.logger.warn(
      { sessionLosses: this.sessionLosses, ...this.stallMonitor?.counters },
      'metadata store session lost: no longer leading any partition; registering again',
    )
    const controller = this.activeController
    this.activeController = null
    controller?.stop().catch((error: unknown) => host.logger.warn({ err: error }, 'controller stop failed'))
    this.registerAgain(1)
  }

  /**
   * Registers again after a lost session, retrying with backoff for as long as it takes:
   * the store may still be unreachable (the usual reason a session is lost), and a broker
   * that gave up would stay out of the cluster for good once the store is back.
   */
  private registerAgain(attempt: number): void {
    const host = this.host
    this.registerRetry = null
    if (host.isStopping() || this.fencedByIncarnation) return
    this.register().then(
      () => {
        if (this.leaseValue !== null) this.reregistrations++
      },
      (error: unknown) => {
        if (host.isStopping()) return
        const delayMs = this.reregisterBackoff.delayMs(attempt)
        host.logger.warn({ err: error, attempt, delayMs }, 'registering again failed; retrying')
        this.registerRetry = host.clock.setTimeout(() => this.registerAgain(attempt + 1), delayMs)
      },
    )
  }

  /**
   * The broker stops: no more retries, and its controller candidacy and lease are handed
   * over for the broker to stop and revoke in its shutdown order.
   */
  leave(): { controller: Controller | null; lease: Lease | null } {
    this.stallMonitor?.stop()
    this.registerRetry?.cancel()
    this.registerRetry = null
    const controller = this.activeController
    const lease = this.leaseValue
    this.activeController = null
    this.leaseValue = null
    return { controller, lease }
  }
}
