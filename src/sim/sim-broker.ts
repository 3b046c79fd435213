/**
 * One broker process in the simulation: server/broker.ts's `Broker`, the class `tidelog
 * start` runs, built from simulated parts: the process's view of the simulated clock
 * (timers die with it), disk (calls of a dead process never answer), network (it listens as
 * broker-<id>; its connections reset when it dies) and metadata store (latency, stalls, a
 * deadline per call). This file holds those parts and the process's life; the broker's
 * lifecycle, registration, ISR writes, connection handling and dispatch are the real ones.
 *
 * `kill()` is a crash: timers dropped, disk calls and store calls never answered,
 * connections reset. Nothing of the process is reused by the next incarnation. A broker
 * that stops itself (every log dir offline) is a process that exits: it is killed then.
 */
import type { Logger } from '../common/logger.js'
import type { Network } from '../common/network.js'
import type { BrokerId } from '../common/types.js'
import type { ClusterMetadata } from '../metadata/cluster-metadata.js'
import type { Controller } from '../metadata/controller.js'
import type { EmbeddedStore } from '../metadata/store/embedded-store.js'
import {
  type Leadership,
  type Lease,
  type MetadataStore,
  MetadataStoreError,
  type StoreLimits,
  type Watch,
} from '../metadata/store/metadata-store.js'
import type { ReplicaManager } from '../replication/replica-manager.js'
import { Broker } from '../server/broker.js'
import type { BrokerConfig } from '../server/broker-config.js'
import { brokerConfigFromProperties } from '../server/broker-config.js'
import type { RequestTap } from '../server/connection.js'
import type { LogManager } from '../storage/log-manager.js'
import { ProcessDisk, type SimDisk } from './disk.js'
import { SimNetwork } from './network.js'
import type { SimRandom } from './random.js'
import { ProcessClock, type SimScheduler } from './scheduler.js'

export interface SimBrokerSettings {
  /** Broker properties (node.id, log.dirs and listeners are set here). */
  readonly properties: ReadonlyMap<string, string>
  /** Random one-way latency to the metadata store, 0..this (0: in-process, no latency). */
  readonly storeLatencyMaxMs: number
  /** With store latency: the process learns its lease ended one trip after the store ended it. */
  readonly leaseLossLearnedLate?: boolean
  /** Store calls not answered within this many ms fail, as the etcd store's deadline (0: none). */
  readonly storeCallTimeoutMs?: number
  /** The world's tap on this process's requests (its invariants on answers). */
  readonly onRequest?: (broker: SimBroker) => RequestTap
  /** Called when the process exits after its broker stopped itself (every log dir offline). */
  readonly onStoppedItself?: (broker: SimBroker) => void
}

/** A store seen from one process: a dead process's calls never settle and its watches go quiet. */
class ProcessStore implements MetadataStore {
  /** The shared store's: a process meets the same limits. */
  get limits(): StoreLimits {
    return this.store.limits
  }

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
  readonly network: Network
  readonly config: BrokerConfig
  /** The real broker, from the moment its logs are open (before it serves or registers). */
  broker: Broker | null = null
  private alive = true
  /** Set once start() finished (the broker serves and is registered). */
  started = false
  /** When every log dir of this process went offline (it then stops itself), and whether it was registered then. */
  allLogDirsOfflineAt: { readonly atMs: number; readonly registered: boolean } | null = null
  /** Internal errors the broker reported (its InvariantErrors among them): the world ends the run on one. */
  readonly fatalErrors: unknown[] = []
  private readonly scheduler: SimScheduler

  constructor(
    readonly nodeId: BrokerId,
    readonly incarnation: number,
    scheduler: SimScheduler,
    simDisk: SimDisk,
    private readonly rawStore: EmbeddedStore,
    private readonly simNetwork: SimNetwork,
    private readonly random: SimRandom,
    readonly logger: Logger,
    private readonly settings: SimBrokerSettings,
  ) {
    this.scheduler = scheduler
    this.clock = new ProcessClock(scheduler)
    this.disk = new ProcessDisk(simDisk)
    this.network = simNetwork.nodeNetwork(nodeId, () => this.alive)
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

  private get real(): Broker {
    if (!this.broker) throw new Error(`broker ${this.nodeId}.${this.incarnation} has not opened yet`)
    return this.broker
  }

  get replicaManager(): ReplicaManager {
    return this.real.replicaManager
  }

  get metadata(): ClusterMetadata {
    return this.real.metadata
  }

  get logManager(): LogManager {
    return this.real.logManager
  }

  /** The lease the broker is registered under (null while fenced, unregistered or not open). */
  get lease(): Lease | null {
    return this.broker?.registrationLease ?? null
  }

  get controller(): Controller | null {
    return this.broker?.controller ?? null
  }

  get isStopping(): boolean {
    return this.broker?.isStopping === true
  }

  async start(): Promise<void> {
    const broker = await Broker.create(this.config, {
      clock: this.clock,
      random: this.random,
      fileSystem: this.disk,
      network: this.network,
      store: this.store,
      logger: this.logger,
      checkMetadataImages: true,
      observer: {
        ...(this.settings.onRequest ? { onRequest: this.settings.onRequest(this) } : {}),
        onFatal: (error) => {
          if (this.alive) this.fatalErrors.push(error)
        },
        onLogDirOffline: (_dir, online) => {
          // For the invariants, whatever the broker does about it.
          if (online.length === 0)
            this.allLogDirsOfflineAt ??= { atMs: this.scheduler.now, registered: this.lease !== null }
        },
      },
    })
    this.broker = broker
    // A broker that stopped itself is a process that exits (its page cache stays).
    broker.whenStopped().then(() => this.onBrokerStopped())
    await broker.startup()
    if (!broker.isStopping) this.started = true
  }

  private onBrokerStopped(): void {
    if (!this.alive) return
    this.logger.info('broker stopped; the process exits')
    this.kill()
    this.suspendLeases()
    this.settings.onStoppedItself?.(this)
  }

  /** A controlled stop, as SIGTERM: the broker's own shutdown, then the process exits. */
  stop(): Promise<void> {
    return this.real.stop()
  }

  kill(): void {
    this.alive = false
    this.clock.kill()
    this.disk.kill()
    this.simNetwork.unlisten(this.nodeId)
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
}
