/**
 * One simulation run: 3 brokers, one topic (RF 3, min.insync.replicas 2 unless the options
 * say otherwise, unclean election off), producers with acks=all and acks=1, and a seeded schedule of faults for the safety
 * phase; then every fault heals and the liveness phase waits for every partition to have a
 * leader and every replica to converge. Invariants are checked after every event
 * (invariants.ts); the first violation ends the run with the trace. This file drives the
 * run and starts the brokers; the faults are world-faults.ts, the clients
 * world-workload.ts, the end of a run world-liveness.ts, its options world-options.ts.
 */
import { pino } from 'pino'
import { InvariantError } from '../common/assert.js'
import type { Logger } from '../common/logger.js'
import { type BrokerId, toBrokerId } from '../common/types.js'
import { CONSUMER_OFFSETS_TOPIC, partitionForGroup } from '../coordinator/group.js'
import { SHARE_GROUP_STATE_TOPIC } from '../coordinator/share/share-state-records.js'
import { TRANSACTION_STATE_TOPIC } from '../coordinator/transaction/transaction-log.js'
import { partitionForTransactionalId } from '../coordinator/transaction/transaction-state-manager.js'
import type { FinalizedFeaturesEpoch, TopicImage } from '../metadata/cluster-image.js'
import { ClusterMetadata } from '../metadata/cluster-metadata.js'
import { finalizedFeaturesOf, TRANSACTION_VERSION_FEATURE } from '../metadata/features.js'
import { EmbeddedStore } from '../metadata/store/embedded-store.js'
import { ErrorCode } from '../protocol/error-codes.js'
import {
  ApiKey,
  type FetchRequest,
  type FetchResponse,
  loadAllApiCodecs,
  type ProduceRequest,
} from '../protocol/generated/index.js'
import type { RequestTap } from '../server/connection.js'
import { SimDisk } from './disk.js'
import { GROUP_ID } from './group-member.js'
import { Invariants } from './invariants.js'
import { recordsBytes } from './invariants-consumer.js'
import { ScaleInvariants } from './invariants-scale.js'
import { isConsumerFetch, plant } from './mutations.js'
import { SimNetwork } from './network.js'
import { SimRandom } from './random.js'
import { ScaleAdmin } from './scale-admin.js'
import { drainMicrotasks, SimScheduler } from './scheduler.js'
import { SimBroker } from './sim-broker.js'
import type { DeliveredRecord } from './txn-checker.js'
import { lateProduceTap } from './txn-producer.js'
import { FaultSchedule } from './world-faults.js'
import type { WorldInternals } from './world-internals.js'
import { LivenessPhase } from './world-liveness.js'
import { brokerProperties, type SimOptions, type SimResult } from './world-options.js'
import { TOPIC, Violation } from './world-view.js'
import { TXN_PRODUCERS, Workload } from './world-workload.js'

/** The error lines of a broker whose disk fails (runs with disk errors only). */
const DISK_FAILURE_LOGS: ReadonlySet<string> = new Set([
  'log dir offline after a disk failure',
  'log went offline after a failed disk operation',
  'every log dir is offline: stopping the broker',
])

export type { Mutation } from './mutations.js'
export type { SimOptions, SimResult } from './world-options.js'
export { TOPIC, Violation }

const TXN_STATE_PARTITIONS = 3
const GROUP_API_NAMES: Record<number, string> = {
  8: 'OffsetCommit',
  9: 'OffsetFetch',
  11: 'JoinGroup',
  12: 'Heartbeat',
  14: 'SyncGroup',
  68: 'ConsumerGroupHeartbeat',
}
/** With stalls, store calls time out as the etcd store's do (its default deadline). */
const STORE_CALL_TIMEOUT_MS = 3000
/** Events at one simulated instant before the run is called a livelock. */
const SAME_TIME_EVENTS_MAX = 100_000

export class World implements WorldInternals {
  readonly scheduler = new SimScheduler()
  readonly random: SimRandom
  readonly network: SimNetwork
  readonly disks = new Map<number, SimDisk>()
  readonly brokers = new Map<BrokerId, SimBroker>()
  private incarnations = new Map<number, number>()
  store!: EmbeddedStore
  /** The store's own state, followed without latency: the ground truth invariants read. */
  truth: ClusterMetadata | null = null
  readonly trace: string[] = []
  readonly invariants: Invariants
  readonly stats: SimResult['stats'] = {
    simulatedMs: 0,
    events: 0,
    produced: 0,
    ackedAll: 0,
    ackedOne: 0,
    crashes: 0,
    sessionExpiries: 0,
    partitions: 0,
    diskErrors: 0,
    cleanerCheckpoints: 0,
    failoverMaxMs: 0,
  }
  readonly faults: FaultSchedule
  readonly workload: Workload
  /** A violation seen inside a callback (a consumer's answer): thrown after the event. */
  private callbackViolation: Violation | null = null
  readonly brokerIds: BrokerId[]
  readonly partitionCount: number
  /** The topic's replication factor and min.insync.replicas (options, or 3 and 2). */
  readonly replicationFactor: number
  readonly minInsyncReplicas: number
  readonly storeLatencyMaxMs: number
  /** `scalePartitions`: the admin client laying them out and their checks. */
  readonly scale: { readonly admin: ScaleAdmin; readonly invariants: ScaleInvariants } | null = null
  /** Brokers asked to stop (a controlled shutdown fault), to tell their exit from a disk's. */
  readonly stopsAsked = new WeakSet<SimBroker>()

  constructor(readonly options: SimOptions) {
    this.random = new SimRandom(options.seed)
    // The fault schedule's and the workload's streams, forked first as they always were.
    const faultRandom = this.random.fork()
    const workloadRandom = this.random.fork()
    this.network = new SimNetwork(this.scheduler, this.random.fork())
    const brokerCount = options.brokers ?? 3
    this.brokerIds = Array.from({ length: brokerCount }, (_, i) => toBrokerId(i + 1))
    // More brokers than the replication factor: 4 partitions spread the replicas and leaders.
    this.partitionCount = options.partitions ?? (brokerCount > 3 ? 4 : 2)
    this.replicationFactor = options.replicationFactor ?? 3
    this.minInsyncReplicas = options.minInsyncReplicas ?? Math.min(2, this.replicationFactor)
    if (!(this.replicationFactor >= 1 && this.replicationFactor <= 3))
      throw new Error(`replication factor ${this.replicationFactor}: must be 1..3`)
    if (!(this.minInsyncReplicas >= 1 && this.minInsyncReplicas <= this.replicationFactor))
      throw new Error(`min.insync.replicas ${this.minInsyncReplicas}: must be 1..${this.replicationFactor}`)
    const latency = options.storeLatencyMaxMs ?? 0
    this.storeLatencyMaxMs = latency > 0 ? latency : options.storeStalls === true ? 20 : 0
    this.invariants = new Invariants(this)
    this.faults = new FaultSchedule(this, faultRandom, new SimRandom(options.seed ^ 0xd15c))
    this.workload = new Workload(this, workloadRandom)
    const diskRandom = this.random.fork()
    for (const id of this.brokerIds)
      this.disks.set(id, new SimDisk(diskRandom.fork(), () => this.scheduler.nowMs()))
    if ((options.scalePartitions ?? 0) > 0) {
      // Its own random stream: the other choices of a seed stay as they were.
      let scaleInvariants: ScaleInvariants | null = null
      const admin = new ScaleAdmin(this, new SimRandom(options.seed ^ 0x5ca1e), (from, answer) =>
        scaleInvariants?.onMetadata(from, answer),
      )
      scaleInvariants = new ScaleInvariants(this, admin.expected)
      this.scale = { admin, invariants: scaleInvariants }
    }
  }

  log(message: string): void {
    const line = `${String(this.scheduler.now).padStart(7)} ${message}`
    this.trace.push(line)
    if (process.env.SIM_LIVE_TRACE === '1') console.log(line)
  }

  /**
   * A broker's logger, writing into the trace. An error-level line is a violation, as in the
   * tests that start brokers (test/helpers/log-guard.ts), unless the run injects disk errors
   * and it is one of the lines a failed disk gives: a fetcher failing on the code's own
   * assertion was logged and retried for a whole run before this.
   */
  private loggerFor(nodeId: number, incarnation: number): Logger {
    const world = this
    const level = this.options.verbose ? 'debug' : 'info'
    return pino(
      { level, base: null, timestamp: false },
      {
        write(line: string) {
          const parsed = JSON.parse(line) as { level: number; msg?: string } & Record<string, unknown>
          const { level: lvl, msg, ...rest } = parsed
          const name = lvl >= 50 ? 'ERROR' : lvl >= 40 ? 'WARN' : lvl >= 30 ? 'info' : 'debug'
          const fields = Object.keys(rest).length > 0 ? ` ${JSON.stringify(rest)}` : ''
          world.log(`  b${nodeId}.${incarnation} ${name} ${msg ?? ''}${fields}`)
          if (lvl >= 50 && !(world.options.diskErrors && DISK_FAILURE_LOGS.has(msg ?? ''))) {
            world.callbackViolation ??= new Violation(`broker ${nodeId} logged an error: ${msg}${fields}`)
          }
        },
      },
    ) as unknown as Logger
  }

  // ---- driving ------------------------------------------------------------------------------

  /** Steps the scheduler until `promise` settles (setup steps that need timers). */
  async until<T>(promise: Promise<T>, limitMs = 60_000): Promise<T> {
    let settled = false
    let value: T | undefined
    let failure: unknown
    let failed = false
    promise.then(
      (v) => {
        settled = true
        value = v
      },
      (e: unknown) => {
        settled = true
        failed = true
        failure = e
      },
    )
    const deadline = this.scheduler.now + limitMs
    await drainMicrotasks()
    while (!settled) {
      if (this.scheduler.now > deadline) throw new Violation(`setup step did not finish within ${limitMs} ms`)
      if (!(await this.scheduler.step())) throw new Violation('setup step stalled with no events queued')
      this.afterEvent()
      await drainMicrotasks()
    }
    if (failed) throw failure
    return value as T
  }

  /** A group client's failure (an invariant it reported, or a bug in the client): ends the run. */
  groupFailure(error: unknown): void {
    this.callbackViolation ??=
      error instanceof Violation ? error : new Violation(`group client failed: ${String(error)}`)
  }

  clientFailure(error: unknown): void {
    this.callbackViolation ??=
      error instanceof Violation
        ? error
        : new Violation(
            `client failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
          )
  }

  onTxnDelivered(partition: number, records: readonly DeliveredRecord[]): void {
    const txn = this.invariants.txn
    if (txn) this.checkInCallback(() => txn.onDelivered(partition, records))
  }

  /** A coordinator answered a group request without error: (b) one coordinator per leader epoch. */
  private onGroupAnswer(
    broker: SimBroker,
    apiKey: number,
    offsetsPartition: number,
    leaderEpoch: number,
  ): void {
    this.checkInCallback(() =>
      this.invariants.group.onCoordinatorAnswer(
        broker,
        offsetsPartition,
        leaderEpoch,
        GROUP_API_NAMES[apiKey] ?? String(apiKey),
      ),
    )
  }

  /** Runs an invariant check from inside a callback: its violation ends the run after the event. */
  checkInCallback(check: () => void): void {
    try {
      check()
    } catch (error) {
      if (!(error instanceof Violation)) throw error
      this.callbackViolation ??= error
    }
  }

  private afterEvent(): void {
    if (this.callbackViolation) throw this.callbackViolation
    for (const broker of this.brokers.values()) {
      if (broker.fatalErrors.length > 0) {
        const error = broker.fatalErrors[0] as Error
        throw new Violation(`broker ${broker.nodeId} hit an internal error: ${error.message}`)
      }
    }
  }

  async run(): Promise<SimResult> {
    let violation: string | null = null
    const unplant = plant(this.options.mutation ?? 'none', (message) => this.log(message))
    try {
      // Codecs load through real module I/O, which the simulated clock cannot order: all of
      // them before the first simulated request, so a run depends on its seed alone.
      await loadAllApiCodecs()
      await this.setup()
      const ticks = this.options.ticks ?? 20_000
      this.log(`safety phase: ${ticks} ms of faults`)
      this.faults.start()
      this.workload.start()
      this.scale?.admin.start()
      await this.runFor(ticks)
      this.heal()
      await new LivenessPhase(this, this.workload).run()
      this.log('run passed')
    } catch (error) {
      // The code's own assertion failing in a timer (an ISR check, a fetcher) ends the step.
      if (error instanceof InvariantError)
        violation = `a broker hit an internal error in a timer: ${error.message}`
      else if (error instanceof Violation) violation = error.message
      else throw error
      this.log(`VIOLATION: ${violation}`)
    } finally {
      unplant()
    }
    this.stats.simulatedMs = this.scheduler.now
    this.stats.events = this.scheduler.eventsRun
    this.stats.cleanerCheckpoints = this.invariants.cleanerCheckpoints
    this.stats.failoverMaxMs = this.scale?.invariants.failoverMaxMs ?? 0
    for (const broker of this.brokers.values()) if (broker.isAlive) broker.kill()
    this.truth?.close()
    return {
      seed: this.options.seed,
      ok: violation === null,
      violation,
      trace: this.trace,
      stats: this.stats,
    }
  }

  async runFor(durationMs: number): Promise<void> {
    const end = this.scheduler.now + durationMs
    let lastTime = this.scheduler.now
    let sameTime = 0
    for (;;) {
      const next = this.scheduler.peekTime()
      if (next === undefined || next > end) {
        this.scheduler.advanceTo(end)
        break
      }
      await this.scheduler.step()
      this.afterEvent()
      await this.invariants.check()
      this.scale?.invariants.check()
      if (this.scheduler.now === lastTime) {
        if (++sameTime > SAME_TIME_EVENTS_MAX)
          throw new Violation(`livelock: ${SAME_TIME_EVENTS_MAX} events without time advancing`)
      } else {
        lastTime = this.scheduler.now
        sameTime = 0
      }
    }
  }

  private async setup(): Promise<void> {
    this.log(
      `seed ${this.options.seed}${this.brokerIds.length !== 3 ? ` brokers ${this.brokerIds.length}` : ''} mutation ${this.options.mutation ?? 'none'} store latency 0-${this.storeLatencyMaxMs} ms${this.options.storeStalls === true ? ', store stalls' : ''}`,
    )
    this.store = await EmbeddedStore.open({ clock: this.scheduler })
    for (const id of this.brokerIds) await this.until(this.startBroker(id))
    const first = this.brokers.get(this.brokerIds[0])!
    await this.until(
      new Promise<void>((resolve) => {
        const poll = (): void => {
          if (first.metadata.image().brokers.size === this.brokerIds.length) resolve()
          else this.scheduler.schedule(10, poll)
        }
        poll()
      }),
    )
    await this.until(
      first.metadata.update((image) => {
        const spec = {
          name: TOPIC,
          partitions: this.partitionCount,
          replicationFactor: this.replicationFactor,
          configs: {
            'min.insync.replicas': String(this.minInsyncReplicas),
            'unclean.leader.election.enable': String(this.options.mutation === 'unclean-election'),
          },
        }
        const topic: TopicImage = {
          ...first.metadata.createTopicImage(spec),
          topicId: this.random.bytes(16).toString('base64url'),
        }
        return { ...image, topics: new Map(image.topics).set(TOPIC, topic) }
      }),
    )
    // Transactions commit group offsets too (TxnOffsetCommit); share groups keep their members there.
    if (this.options.groups === true || this.options.transactions === true || this.options.share === true) {
      // Its own random stream for the topic id: the other draws of the seed stay as they were.
      const random = new SimRandom(this.options.seed ^ 0x6a0b)
      await this.until(
        first.metadata.update((image) => {
          const spec = {
            name: CONSUMER_OFFSETS_TOPIC,
            partitions: 3,
            replicationFactor: 3,
            configs: {
              'cleanup.policy': 'compact',
              'min.insync.replicas': '2',
              'unclean.leader.election.enable': 'false',
              'segment.bytes': this.internalSegmentBytes(),
            },
          }
          const topic: TopicImage = {
            ...first.metadata.createTopicImage(spec),
            topicId: random.bytes(16).toString('base64url'),
          }
          return { ...image, topics: new Map(image.topics).set(CONSUMER_OFFSETS_TOPIC, topic) }
        }),
      )
      const offsets = first.metadata.image().topics.get(CONSUMER_OFFSETS_TOPIC)?.partitions ?? []
      this.log(
        `topic ${CONSUMER_OFFSETS_TOPIC} created: 3 partitions, RF 3; replicas ${offsets.map((p) => `p${p.partition} ${p.replicas.join(',')}`).join(' ')}; group ${GROUP_ID} in p${partitionForGroup(GROUP_ID, 3)}`,
      )
    }
    if (this.options.transactions === true) await this.createTransactionStateTopic(first)
    if (this.options.share === true) await this.createShareStateTopic(first)
    const placed = first.metadata.image().topics.get(TOPIC)?.partitions ?? []
    this.log(
      `topic ${TOPIC} created: ${this.partitionCount} partitions, RF ${this.replicationFactor}, min.insync.replicas ${this.minInsyncReplicas}; replicas ${placed.map((p) => `p${p.partition} ${p.replicas.join(',')}`).join(' ')}`,
    )
    // Opened once the cluster id exists: it reads and watches, writes nothing, draws nothing.
    this.truth = await ClusterMetadata.open(this.store, {
      clusterId: null,
      random: { next: () => 0, int: (min) => min, bytes: (n) => Buffer.alloc(n) },
      logger: pino({ level: 'silent' }) as unknown as Logger,
      checkImages: true,
    })
  }

  /** segment.bytes of __consumer_offsets and __transaction_state as created here. */
  private internalSegmentBytes(): string {
    return String(this.options.compaction === true ? 4096 : 1024 * 1024)
  }

  /** `transactions`: __transaction_state as the coordinator would create it, its topic id from its own stream. */
  private async createTransactionStateTopic(first: SimBroker): Promise<void> {
    const random = new SimRandom(this.options.seed ^ 0x7a57)
    await this.until(
      first.metadata.update((image) => {
        const spec = {
          name: TRANSACTION_STATE_TOPIC,
          partitions: TXN_STATE_PARTITIONS,
          replicationFactor: 3,
          configs: {
            'cleanup.policy': 'compact',
            'min.insync.replicas': '2',
            'unclean.leader.election.enable': 'false',
            'segment.bytes': this.internalSegmentBytes(),
          },
        }
        const topic: TopicImage = {
          ...first.metadata.createTopicImage(spec),
          topicId: random.bytes(16).toString('base64url'),
        }
        const topics = new Map(image.topics).set(TRANSACTION_STATE_TOPIC, topic)
        if ((this.options.transactionVersion ?? 1) === 2) return { ...image, topics }
        // The producers choose their protocol from the finalized transaction.version (2 by default).
        const levels = new Map(finalizedFeaturesOf(image).levels).set(TRANSACTION_VERSION_FEATURE, 1)
        const finalizedFeatures = {
          epoch: (finalizedFeaturesOf(image).epoch + 1) as FinalizedFeaturesEpoch,
          levels,
        }
        return { ...image, topics, finalizedFeatures }
      }),
    )
    const placed = first.metadata.image().topics.get(TRANSACTION_STATE_TOPIC)?.partitions ?? []
    this.log(
      `topic ${TRANSACTION_STATE_TOPIC} created: ${TXN_STATE_PARTITIONS} partitions, RF 3; replicas ${placed.map((p) => `p${p.partition} ${p.replicas.join(',')}`).join(' ')}; ${TRANSACTION_VERSION_FEATURE} finalized at ${this.options.transactionVersion ?? 1}`,
    )
    for (let i = 0; i < TXN_PRODUCERS; i++)
      this.log(
        `transactional id sim-txn-${i} in ${TRANSACTION_STATE_TOPIC}-${partitionForTransactionalId(`sim-txn-${i}`, TXN_STATE_PARTITIONS)}`,
      )
  }

  /** `share`: __share_group_state as the share coordinator would make it, its topic id from its own stream. */
  private async createShareStateTopic(first: SimBroker): Promise<void> {
    const random = new SimRandom(this.options.seed ^ 0x5a7e)
    const spec = {
      name: SHARE_GROUP_STATE_TOPIC,
      partitions: 3,
      replicationFactor: 3,
      configs: {
        'cleanup.policy': 'compact',
        'min.insync.replicas': '2',
        'unclean.leader.election.enable': 'false',
      },
    }
    await this.until(
      first.metadata.update((image) => {
        const topic: TopicImage = {
          ...first.metadata.createTopicImage(spec),
          topicId: random.bytes(16).toString('base64url'),
        }
        return { ...image, topics: new Map(image.topics).set(SHARE_GROUP_STATE_TOPIC, topic) }
      }),
    )
    const placed = first.metadata.image().topics.get(SHARE_GROUP_STATE_TOPIC)?.partitions ?? []
    this.log(
      `topic ${SHARE_GROUP_STATE_TOPIC} created: 3 partitions, RF 3; replicas ${placed.map((p) => `p${p.partition} ${p.replicas.join(',')}`).join(' ')}`,
    )
  }

  startBroker(id: BrokerId): Promise<void> {
    const incarnation = (this.incarnations.get(id) ?? 0) + 1
    this.incarnations.set(id, incarnation)
    const broker = new SimBroker(
      id,
      incarnation,
      this.scheduler,
      this.disks.get(id)!,
      this.store,
      this.network,
      this.random.fork(),
      this.loggerFor(id, incarnation),
      {
        properties: brokerProperties(this.options),
        storeLatencyMaxMs: this.storeLatencyMaxMs,
        leaseLossLearnedLate: this.options.storeStalls === true,
        storeCallTimeoutMs: this.options.storeStalls === true ? STORE_CALL_TIMEOUT_MS : 0,
        onRequest: (from) => this.requestObserver(from),
        onStoppedItself: (stopped: SimBroker) => {
          const led = (this.truth?.image().topics.get(TOPIC)?.partitions ?? [])
            .filter((state) => state.leader === stopped.nodeId)
            .map((state) => `p${state.partition}`)
          const why = this.stopsAsked.has(stopped) ? 'as asked' : 'itself (every log dir offline)'
          this.log(
            `broker ${stopped.nodeId} stopped ${why}, controlled; leader in the store of ${led.length > 0 ? led.join(',') : 'nothing'}`,
          )
        },
      },
    )
    this.brokers.set(id, broker)
    this.log(`start broker ${id} (incarnation ${incarnation})`)
    const ledInStore = (this.truth?.image().topics.get(TOPIC)?.partitions ?? []).filter(
      (s) => s.leader === id,
    )
    if (incarnation > 1 && this.truth?.image().brokers.has(id) === true)
      this.log(
        `  broker ${id} restarts still registered in the store, leader there of ${ledInStore.map((s) => `p${s.partition}`).join(',') || 'nothing'}`,
      )
    return broker.start()
  }

  /**
   * The world's tap on one process's requests: consumers' Fetch answers (no batch at or above
   * the answering broker's high watermark) and group answers (one coordinator per leader
   * epoch), both checked as the answer leaves the real handler; the idempotent producer's
   * Produce answers (which broker acknowledged its records); and a transactional Produce
   * that arrives after its client closed the connection (a stalled link's late write).
   */
  private requestObserver(broker: SimBroker): RequestTap {
    return (context, request) => {
      const apiKey = context.header.requestApiKey
      const producer = this.workload.idempotentProducer
      if (
        apiKey === ApiKey.Produce &&
        (request as ProduceRequest).transactionalId !== null &&
        this.network.isClosedByClient(context.connection.remoteAddress)
      )
        return lateProduceTap(broker, context, request as ProduceRequest, (line) => this.log(line))
      if (apiKey === ApiKey.Produce && producer !== null)
        return producer.onProduceRequest(broker, request as ProduceRequest)
      if (
        apiKey === ApiKey.Fetch &&
        (this.options.consumers === true || this.options.transactions === true)
      ) {
        const fetch = request as FetchRequest
        // v15+ (replica fetchers, KIP-903) names the replica in the replica state.
        const replicaId =
          context.header.requestApiVersion >= 15 ? fetch.replicaState.replicaId : fetch.replicaId
        if (!isConsumerFetch(replicaId)) return undefined
        const readCommitted = context.header.requestApiVersion >= 4 && fetch.isolationLevel === 1
        return (outcome) => {
          if (!('response' in outcome) || outcome.response === null) return
          for (const topic of (outcome.response as FetchResponse).responses)
            for (const p of topic.partitions)
              if (p.errorCode === ErrorCode.NONE)
                this.checkInCallback(() =>
                  this.invariants.consumer.onConsumerAnswer(
                    broker,
                    p.partitionIndex,
                    recordsBytes(p.records),
                    readCommitted,
                  ),
                )
        }
      }
      const share = this.workload.share?.invariants
      if (share) {
        const tap = share.tap(broker.nodeId, apiKey, request, (check) => this.checkInCallback(check))
        if (tap) return tap
      }
      if (this.options.groups !== true || GROUP_API_NAMES[apiKey] === undefined) return undefined
      // The coordinator routes by leadership synchronously as the handler starts.
      // OffsetFetch v8+ (tidelog's client) names its groups in a list.
      const named = request as { groupId?: string; groups?: { groupId: string }[] }
      const groupId = named.groups?.[0]?.groupId ?? named.groupId
      if (groupId === undefined) return undefined
      const route = this.groupRoute(broker, groupId)
      if (route === null) return undefined
      return (outcome) => {
        if (!('response' in outcome) || outcome.response === null || !broker.isAlive) return
        const response = outcome.response as {
          errorCode?: number
          topics?: { partitions: { errorCode: number }[] }[]
          groups?: { errorCode: number }[]
        }
        const answered =
          apiKey === ApiKey.OffsetCommit
            ? (response.topics ?? []).some((t) => t.partitions.some((p) => p.errorCode === ErrorCode.NONE))
            : (response.groups?.[0]?.errorCode ?? response.errorCode) === ErrorCode.NONE
        if (answered) this.onGroupAnswer(broker, apiKey, route.partition, route.leaderEpoch)
      }
    }
  }

  /** The group's __consumer_offsets partition and this broker's leader epoch of it now (-1: not leader). */
  private groupRoute(broker: SimBroker, groupId: string): { partition: number; leaderEpoch: number } | null {
    const topic = broker.metadata.image().topics.get(CONSUMER_OFFSETS_TOPIC)
    if (!topic || topic.partitions.length === 0) return null
    const partition = partitionForGroup(groupId, topic.partitions.length)
    const local = broker.replicaManager.getPartition(CONSUMER_OFFSETS_TOPIC, partition)
    return { partition, leaderEpoch: local?.isLeader ? local.leaderEpoch : -1 }
  }

  /** Broker `id` is up: its current process alive and started. */
  isUp(id: BrokerId): boolean {
    const broker = this.brokers.get(id)
    return broker?.isAlive === true && broker.started
  }

  /** The end of the safety phase: no new fault, producers stop, every fault heals. */
  private heal(): void {
    this.faults.stop()
    this.workload.stop()
    this.scale?.admin.stopPolling()
    this.log('HEAL everything: network healed, crashed brokers restart, producers stop')
    this.network.healAll()
    for (const broker of this.brokers.values()) broker.store.stall = null
    this.network.faults = { delayMinMs: 1, delayMaxMs: 5, resetProbability: 0 }
    for (const id of [...this.faults.impaired]) this.faults.recover(id)
  }
}

export async function runSimulation(options: SimOptions): Promise<SimResult> {
  return new World(options).run()
}
