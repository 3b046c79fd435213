/**
 * One simulation run: 3 brokers, one topic (RF 3, min.insync.replicas 2 unless the options
 * say otherwise, unclean election off), producers with acks=all and acks=1, and a seeded schedule of faults for the safety
 * phase; then every fault heals and the liveness phase waits for every partition to have a
 * leader and every replica to converge. Invariants are checked after every event
 * (invariants.ts); the first violation ends the run with the trace.
 */
import { pino } from 'pino'
import { InvariantError } from '../common/assert.js'
import type { Logger } from '../common/logger.js'
import { CONSUMER_OFFSETS_TOPIC, partitionForGroup } from '../coordinator/group.js'
import { TRANSACTION_STATE_TOPIC } from '../coordinator/transaction/transaction-log.js'
import { partitionForTransactionalId } from '../coordinator/transaction/transaction-state-manager.js'
import type { TopicImage } from '../metadata/cluster-image.js'
import { ClusterMetadata } from '../metadata/cluster-metadata.js'
import { EmbeddedStore } from '../metadata/store/embedded-store.js'
import { ErrorCode } from '../protocol/error-codes.js'
import {
  ApiKey,
  type FetchRequest,
  type FetchResponse,
  loadAllApiCodecs,
} from '../protocol/generated/index.js'
import { defaultProduceRequest } from '../protocol/generated/produce-request.js'
import { encodeRecordBatchSync } from '../protocol/record-batch.js'
import { BrokerClient } from '../replication/broker-client.js'
import { toErrorCode } from '../replication/kafka-error.js'
import type { Partition } from '../replication/partition.js'
import type { RequestTap } from '../server/connection.js'
import { recordsBytes, SimConsumer } from './consumer.js'
import { SimConsumerProtocolMember } from './consumer-protocol-member.js'
import { SimDisk } from './disk.js'
import { GROUP_ID, GroupWorkload, OffsetVerifier, SimGroupMember } from './group-member.js'
import { Invariants } from './invariants.js'
import { isConsumerFetch, type Mutation, plant } from './mutations.js'
import { SimNetwork } from './network.js'
import { SimRandom } from './random.js'
import { drainMicrotasks, SimScheduler } from './scheduler.js'
import { SimBroker } from './sim-broker.js'
import {
  checkFinalOffsets,
  checkFinalTransactions,
  type DecidedRecord,
  type DeliveredRecord,
  decideLog,
  decodeBatches,
} from './txn-checker.js'
import { SimReadCommittedConsumer } from './txn-consumer.js'
import { SimTxnProducer, TRANSACTION_TIMEOUT_MS, TxnOffsetReader, TxnWorkload } from './txn-producer.js'
import { TOPIC, Violation, type WorldView } from './world-view.js'

export type { Mutation } from './mutations.js'
export { TOPIC, Violation }

export interface SimOptions {
  readonly seed: number
  /** Simulated milliseconds of the safety phase (faults on). */
  readonly ticks?: number
  readonly brokers?: number
  readonly partitions?: number
  /**
   * The topic's replication factor, 1..3 (default 3). RF 1 makes every partition an ISR of
   * its leader alone: a leader restarted within its session leads again in the same epoch
   * with nothing but a produce to raise its high watermark (issue 41).
   */
  readonly replicationFactor?: number
  /**
   * The topic's min.insync.replicas, 1..RF (default 2, capped at the RF). With 1 an ISR of
   * the leader alone raises the high watermark (below min ISR it stays, KIP-966).
   */
  readonly minInsyncReplicas?: number
  readonly mutation?: Mutation
  /**
   * Random one-way latency to the metadata store, 0..this ms (default 0: in-process). With
   * it, the fault schedule also moves leaders to their preferred replica (an admin action)
   * so a leader can act on a leadership it already lost.
   */
  readonly storeLatencyMaxMs?: number
  /**
   * With store latency (20 ms if not given): the fault schedule also stalls a leader's link
   * to the store and then moves its leadership (preferred election) or ends its session (a
   * zombie leader), and store faults take some of the idle fault slots. A process learns
   * its lease ended one trip late. Off by default.
   */
  readonly storeStalls?: boolean
  /**
   * Two impairments at once: a broker may crash (power loss included, under the same rule)
   * while another is impaired (stalled store link, cut off, crashed). With store stalls this
   * is the schedule where a power-lost broker could be left the last registered ISR member
   * (seeds 140, 174, 197, 198 of the first stall schedule lost acknowledged writes so before
   * KIP-966's ELR). Off by default.
   */
  readonly twoImpairments?: boolean
  /**
   * Adds one idempotent producer per partition (acks=all, one batch in flight, retries of
   * the same bytes on errors and on answers lost with their leader, a new epoch after
   * OUT_OF_ORDER_SEQUENCE_NUMBER): no batch of it may be committed twice. Off by default.
   */
  readonly idempotentProducers?: boolean
  /**
   * Adds one consumer per partition (consumer.ts): Fetch over the simulated network to the
   * leader its metadata names, read_uncommitted; it must receive committed batches only, each
   * equal to the batch committed at its offset, and catch up with the log after healing.
   * Off by default.
   */
  readonly consumers?: boolean
  /**
   * Disk errors: some idle fault slots arm an EIO on one broker's next write (a prefix may
   * reach the page cache) or next fsync. The broker reacts as server/broker.ts does (its
   * log dir goes offline and, with none left, it stops itself, controlled); it is the one
   * impaired broker until a later recovery slot restarts it, as after a crash. Off by
   * default.
   */
  readonly diskErrors?: boolean
  /**
   * Half of the acks=1 writes become acks=0 produces sent over the simulated network to the
   * real Produce handler (no answer; a failure closes the connection). No survival claim,
   * only the invariants. Off by default.
   */
  readonly acksZero?: boolean
  /**
   * The brokers host __consumer_offsets (3 partitions, RF 3) and the real GroupCoordinator;
   * three group members (group-member.ts) join, sync, heartbeat and commit offsets through
   * the real handlers, a verifier reads them back. Off by default.
   */
  readonly groups?: boolean
  /**
   * With `groups`: the members speak KIP-848's consumer protocol (consumer-protocol-member.ts:
   * ConsumerGroupHeartbeat, OffsetCommit v9 with member epochs) instead of the classic one.
   */
  readonly consumerProtocol?: boolean
  /**
   * Transactions: __transaction_state (3 partitions, RF 3), the real coordinator, producers
   * (txn-producer.ts; `transactionVersion` 1 by default, 2: KIP-890 part 2), a read_committed
   * consumer per partition (txn-consumer.ts); txn-checker.ts holds the checks. Off by default.
   */
  readonly transactions?: boolean
  readonly transactionVersion?: 1 | 2
  /**
   * With `groups` or `transactions`: __consumer_offsets and __transaction_state get 4 KiB
   * segments and the log cleaner a 500 ms backoff, so their logs are compacted while faults
   * truncate and restart replicas; the invariants then check every log's cleaner checkpoint
   * against its log end. Off by default (it changes the seeds' event order).
   */
  readonly compaction?: boolean
  /** Keep the broker logs in the trace (debug aid; the trace gets long). */
  readonly verbose?: boolean
}

export interface SimResult {
  readonly seed: number
  readonly ok: boolean
  readonly violation: string | null
  readonly trace: readonly string[]
  readonly stats: {
    simulatedMs: number
    events: number
    produced: number
    ackedAll: number
    ackedOne: number
    crashes: number
    sessionExpiries: number
    partitions: number
    diskErrors: number
    /** The most logs of one broker process that held a cleaner checkpoint at a check. */
    cleanerCheckpoints: number
  }
}

/** `groups`: few __consumer_offsets partitions, a short first-rebalance delay, small segments. */
const GROUP_PROPERTIES: readonly [string, string][] = [
  ['offsets.topic.num.partitions', '3'],
  ['offsets.topic.replication.factor', '3'],
  ['group.initial.rebalance.delay.ms', '300'],
  ['group.min.session.timeout.ms', '1000'],
  ['offsets.topic.segment.bytes', String(1024 * 1024)],
  // KIP-848 members (`consumerProtocol`): sessions as short as the classic members' (3 s).
  ['group.consumer.session.timeout.ms', '3000'],
  ['group.consumer.heartbeat.interval.ms', '300'],
]
/**
 * `transactions`: few __transaction_state partitions (Kafka's 50 would be most of the
 * simulated work), small segments, and timed-out transactions aborted within a second
 * (Kafka's cleanup interval is 10 s; the producers ask for a 5 s transaction timeout).
 */
const TXN_PROPERTIES: readonly [string, string][] = [
  ['transaction.state.log.num.partitions', '3'],
  ['transaction.state.log.replication.factor', '3'],
  ['transaction.state.log.min.isr', '2'],
  ['transaction.state.log.segment.bytes', String(1024 * 1024)],
  ['transaction.abort.timed.out.transaction.cleanup.interval.ms', '1000'],
]
/** `compaction`: segments small enough for the cleaner to have work in a 20 s run. */
const COMPACTION_PROPERTIES: readonly [string, string][] = [
  ['offsets.topic.segment.bytes', '4096'],
  ['transaction.state.log.segment.bytes', '4096'],
  ['log.cleaner.backoff.ms', '500'],
]
const TXN_STATE_PARTITIONS = 3
const TXN_PRODUCERS = 2
const GROUP_API_NAMES: Record<number, string> = {
  8: 'OffsetCommit',
  9: 'OffsetFetch',
  11: 'JoinGroup',
  12: 'Heartbeat',
  14: 'SyncGroup',
  68: 'ConsumerGroupHeartbeat',
}
/**
 * Every broker's properties (the real Broker reads them as `tidelog broker` does): short
 * timeouts and small fetches so that a 20 s run sees many rounds, and the leader imbalance
 * check every 5 s so that auto leader rebalance (on by default) runs too.
 */
const BROKER_PROPERTIES: readonly [string, string][] = [
  ['broker.session.timeout.ms', '3000'],
  ['replica.lag.time.max.ms', '2000'],
  ['replica.fetch.max.bytes', String(64 * 1024)],
  ['replica.fetch.response.max.bytes', String(256 * 1024)],
  ['replica.fetch.wait.max.ms', '200'],
  ['replica.fetch.backoff.ms', '100'],
  ['replica.socket.timeout.ms', '1000'],
  ['leader.imbalance.check.interval.seconds', '5'],
  // The disk is memory: Kafka's 10 MiB index preallocation is 20 MiB a replica, 18 GiB for
  // 300 partitions at RF 3. 64 KiB still holds thousands of entries (a run writes hundreds).
  ['log.index.size.max.bytes', String(64 * 1024)],
]
/** Store stalls (`storeStalls`): how long the link stalls, and the range of one trip then. */
const STALL_MS = [3000, 5000] as const
const STALL_TRIP_MS = [2000, 4000] as const
/** With stalls, store calls time out as the etcd store's do (its default deadline). */
const STORE_CALL_TIMEOUT_MS = 3000
const LIVENESS_MS_MAX = 60_000
/** A broker process that failed to start is started again after this (as a service manager would). */
const RESTART_DELAY_MS = 1000
const GROUP_MEMBERS = 3
/** The acks=0 producer's network id (clients are never cut off). */
const ACKS_ZERO_NODE = 200
const PRODUCE_TIMEOUT_MS = 3000
/** Events at one simulated instant before the run is called a livelock. */
const SAME_TIME_EVENTS_MAX = 100_000

export class World implements WorldView {
  readonly scheduler = new SimScheduler()
  readonly random: SimRandom
  private readonly faultRandom: SimRandom
  private readonly workloadRandom: SimRandom
  private idempotentRandomStream: SimRandom | null = null
  private get idempotentRandom(): SimRandom {
    if (this.idempotentRandomStream === null)
      this.idempotentRandomStream = new SimRandom(this.options.seed ^ 0x1de4)
    return this.idempotentRandomStream
  }
  readonly network: SimNetwork
  readonly disks = new Map<number, SimDisk>()
  readonly brokers = new Map<number, SimBroker>()
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
  }
  private faultsOn = true
  readonly consumers: SimConsumer[] = []
  /** Disk errors' own random stream (`diskErrors`): the fault stream keeps its draws. */
  private readonly diskErrorRandom: SimRandom
  /** Brokers with a disk error armed or fired: recovery disarms it and restarts a stopped process. */
  private readonly diskFailed = new Set<number>()
  /** `transactions`: the producers, their shared counters, the read_committed consumers. */
  readonly txnProducers: SimTxnProducer[] = []
  readonly txnWorkload = new TxnWorkload()
  readonly readCommittedConsumers: SimReadCommittedConsumer[] = []
  private readonly txnOffsetReaders: TxnOffsetReader[] = []
  /** A violation seen inside a callback (a consumer's answer): thrown after the event. */
  private callbackViolation: Violation | null = null
  /** `groups`: what the members share, the members and the offset verifier. */
  groupWorkload: GroupWorkload | null = null
  private readonly groupMembers: (SimGroupMember | SimConsumerProtocolMember)[] = []
  private offsetVerifier: OffsetVerifier | null = null
  private producing = true
  private nextValue = 0
  /** Brokers crashed or cut off: at most one at a time (the single failure the design claims to survive). */
  private readonly impaired = new Set<number>()
  readonly brokerIds: number[]
  readonly partitionCount: number
  /** The topic's replication factor and min.insync.replicas (options, or 3 and 2). */
  readonly replicationFactor: number
  readonly minInsyncReplicas: number
  readonly storeLatencyMaxMs: number

  constructor(readonly options: SimOptions) {
    this.random = new SimRandom(options.seed)
    this.faultRandom = this.random.fork()
    this.workloadRandom = this.random.fork()
    this.network = new SimNetwork(this.scheduler, this.random.fork())
    const brokerCount = options.brokers ?? 3
    this.brokerIds = Array.from({ length: brokerCount }, (_, i) => i + 1)
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
    this.diskErrorRandom = new SimRandom(options.seed ^ 0xd15c)
    this.acksZeroRandom = new SimRandom(options.seed ^ 0xa0)
    const diskRandom = this.random.fork()
    for (const id of this.brokerIds)
      this.disks.set(id, new SimDisk(diskRandom.fork(), () => this.scheduler.nowMs()))
  }

  log(message: string): void {
    const line = `${String(this.scheduler.now).padStart(7)} ${message}`
    this.trace.push(line)
    if (process.env.SIM_LIVE_TRACE === '1') console.log(line)
  }

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

  onTxnDelivered(partition: number, records: readonly DeliveredRecord[], from: number): void {
    const txn = this.invariants.txn
    if (txn) this.checkInCallback(() => txn.onDelivered(partition, records, from))
  }

  /** A coordinator answered a group request without error: (b) one coordinator per leader epoch. */
  private onGroupAnswer(
    broker: SimBroker,
    apiKey: number,
    offsetsPartition: number,
    leaderEpoch: number,
  ): void {
    this.checkInCallback(() =>
      this.invariants.onCoordinatorAnswer(
        broker,
        offsetsPartition,
        leaderEpoch,
        GROUP_API_NAMES[apiKey] ?? String(apiKey),
      ),
    )
  }

  /** Runs an invariant check from inside a callback: its violation ends the run after the event. */
  private checkInCallback(check: () => void): void {
    try {
      check()
    } catch (error) {
      if (!(error instanceof Violation)) throw error
      this.callbackViolation ??= error
    }
  }

  onConsumed(
    partition: number,
    position: number,
    batch: { base: number; last: number; bytes: Buffer },
    from: number,
  ): void {
    this.checkInCallback(() => this.invariants.onConsumed(partition, position, batch, from))
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
      this.scheduleFaults()
      this.scheduleProducer()
      await this.runFor(ticks)
      this.heal()
      await this.liveness()
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

  private async runFor(durationMs: number): Promise<void> {
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
    // Transactions commit group offsets too (TxnOffsetCommit).
    if (this.options.groups === true || this.options.transactions === true) {
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
    const placed = first.metadata.image().topics.get(TOPIC)?.partitions ?? []
    this.log(
      `topic ${TOPIC} created: ${this.partitionCount} partitions, RF ${this.replicationFactor}, min.insync.replicas ${this.minInsyncReplicas}; replicas ${placed.map((p) => `p${p.partition} ${p.replicas.join(',')}`).join(' ')}`,
    )
    // Opened once the cluster id exists: it reads and watches, writes nothing, draws nothing.
    this.truth = await ClusterMetadata.open(this.store, {
      clusterId: null,
      random: { next: () => 0, int: (min) => min, bytes: (n) => Buffer.alloc(n) },
      logger: pino({ level: 'silent' }) as unknown as Logger,
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
        return { ...image, topics: new Map(image.topics).set(TRANSACTION_STATE_TOPIC, topic) }
      }),
    )
    const placed = first.metadata.image().topics.get(TRANSACTION_STATE_TOPIC)?.partitions ?? []
    this.log(
      `topic ${TRANSACTION_STATE_TOPIC} created: ${TXN_STATE_PARTITIONS} partitions, RF 3; replicas ${placed.map((p) => `p${p.partition} ${p.replicas.join(',')}`).join(' ')}`,
    )
    for (let i = 0; i < TXN_PRODUCERS; i++)
      this.log(
        `transactional id sim-txn-${i} in ${TRANSACTION_STATE_TOPIC}-${partitionForTransactionalId(`sim-txn-${i}`, TXN_STATE_PARTITIONS)}`,
      )
  }

  private startBroker(id: number): Promise<void> {
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
        properties: new Map([
          ...BROKER_PROPERTIES,
          ...(this.options.groups === true || this.options.transactions === true ? GROUP_PROPERTIES : []),
          ...(this.options.transactions === true ? TXN_PROPERTIES : []),
          ...(this.options.compaction === true ? COMPACTION_PROPERTIES : []),
        ]),
        storeLatencyMaxMs: this.storeLatencyMaxMs,
        leaseLossLearnedLate: this.options.storeStalls === true,
        storeCallTimeoutMs: this.options.storeStalls === true ? STORE_CALL_TIMEOUT_MS : 0,
        onRequest: (from) => this.requestObserver(from),
        onStoppedItself: (stopped: SimBroker) => {
          const led = (this.truth?.image().topics.get(TOPIC)?.partitions ?? [])
            .filter((state) => state.leader === stopped.nodeId)
            .map((state) => `p${state.partition}`)
          this.log(
            `broker ${stopped.nodeId} stopped itself (every log dir offline), controlled; leader in the store of ${led.length > 0 ? led.join(',') : 'nothing'}`,
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
   * epoch), both checked as the answer leaves the real handler.
   */
  private requestObserver(broker: SimBroker): RequestTap {
    return (context, request) => {
      const apiKey = context.header.requestApiKey
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
                  this.invariants.onConsumerAnswer(
                    broker,
                    p.partitionIndex,
                    recordsBytes(p.records),
                    readCommitted,
                  ),
                )
        }
      }
      if (this.options.groups !== true || GROUP_API_NAMES[apiKey] === undefined) return undefined
      // The coordinator routes by leadership synchronously as the handler starts.
      const route = this.groupRoute(broker, (request as { groupId: string }).groupId)
      if (route === null) return undefined
      return (outcome) => {
        if (!('response' in outcome) || outcome.response === null || !broker.isAlive) return
        const response = outcome.response as {
          errorCode?: number
          topics?: { partitions: { errorCode: number }[] }[]
        }
        const answered =
          apiKey === ApiKey.OffsetCommit
            ? (response.topics ?? []).some((t) => t.partitions.some((p) => p.errorCode === ErrorCode.NONE))
            : response.errorCode === ErrorCode.NONE
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

  // ---- faults -------------------------------------------------------------------------------

  private scheduleFaults(): void {
    const next = (): void => {
      if (!this.faultsOn) return
      this.injectFault()
      this.scheduler.schedule(this.faultRandom.int(300, 2500), next)
    }
    this.scheduler.schedule(this.faultRandom.int(500, 1500), next)
  }

  private injectFault(): void {
    const r = this.faultRandom
    const choice = r.int(0, 9)
    const up = this.brokerIds.filter((id) => this.brokers.get(id)?.isAlive && !this.impaired.has(id))
    const maxImpaired = this.options.twoImpairments === true ? 2 : 1
    if (choice <= 2 && this.impaired.size < maxImpaired && up.length > 0) {
      this.crash(r.pick(up))
    } else if (choice === 3 && this.impaired.size === 0) {
      const victim = r.pick(up)
      const twoWay = r.chance(0.5)
      for (const other of this.brokerIds) {
        if (other === victim) continue
        this.network.cutLink(victim, other)
        if (twoWay) this.network.cutLink(other, victim)
      }
      this.impaired.add(victim)
      this.stats.partitions++
      this.log(`FAULT partition broker ${victim} from the others (${twoWay ? 'two-way' : 'outbound only'})`)
    } else if (choice === 4) {
      const victim = r.pick(up)
      const broker = this.brokers.get(victim)!
      if (broker.lease) {
        this.stats.sessionExpiries++
        this.log(`FAULT expire the store session of broker ${victim}`)
        broker.expireSession().catch(() => undefined)
      }
    } else if (choice === 5) {
      const reset = r.chance(0.5) ? 0 : 0.02
      const slow = r.chance(0.3)
      this.network.faults = { delayMinMs: 1, delayMaxMs: slow ? r.int(50, 1500) : 5, resetProbability: reset }
      this.log(`FAULT network delay 1-${this.network.faults.delayMaxMs} ms, reset probability ${reset}`)
    } else if (choice === 6 && this.storeLatencyMaxMs > 0) {
      this.storeFault()
    } else if (this.impaired.size > 0 && choice >= 7) {
      this.recover([...this.impaired][0])
    } else if (this.options.storeStalls === true && r.chance(0.5)) {
      this.storeFault()
    } else if (
      this.options.diskErrors === true &&
      this.impaired.size === 0 &&
      this.diskErrorRandom.chance(0.3)
    ) {
      this.armDiskError(this.diskErrorRandom.pick(up))
    }
  }

  /** The next write or fsync on `id`'s disk fails with EIO; it is the impaired broker until restarted. */
  private armDiskError(id: number): void {
    const kind = this.diskErrorRandom.chance(0.5) ? 'write' : 'sync'
    const disk = this.disks.get(id)!
    disk.armedError = kind
    disk.onErrorFired = (what) => {
      this.stats.diskErrors++
      const led = (this.truth?.image().topics.get(TOPIC)?.partitions ?? []).filter((s) => s.leader === id)
      this.log(
        `DISK ERROR on broker ${id}: EIO on ${what}; leader in the store of ${led.map((s) => `p${s.partition}`).join(',') || 'nothing'}`,
      )
    }
    this.impaired.add(id)
    this.diskFailed.add(id)
    this.log(`FAULT disk of broker ${id}: its next ${kind === 'write' ? 'write' : 'fsync'} fails with EIO`)
  }

  /**
   * Store latency mode: a preferred-leader election, or with stalls one of the stall faults.
   * A stalled broker is the one impaired broker until it recovers (the stall is lifted):
   * with another broker down meanwhile, a power loss of one ISR member and the session
   * loss of the other leave the power-lost one as the only registered ISR member, two
   * failures at once (seeds 140, 174, 197, 198 of the first stall schedule lost acknowledged writes so).
   */
  private storeFault(): void {
    const kind = this.options.storeStalls === true ? this.faultRandom.int(0, 2) : 0
    if (kind === 0 || this.impaired.size > 0) this.electPreferredLeaders()
    else if (kind === 1) this.stallLeaderThenMoveIt()
    else this.stallLeaderThenExpireIt()
  }

  private electPreferredLeaders(): void {
    const controller = [...this.brokers.values()].find((b) => b.isAlive && b.controller?.isActive)
    if (controller) {
      this.log(`ADMIN preferred leader election through controller ${controller.nodeId}`)
      controller.controller?.electPreferredLeaders().catch(() => undefined)
    }
  }

  private isUp(id: number): boolean {
    const broker = this.brokers.get(id)
    return broker?.isAlive === true && broker.started
  }

  /**
   * The broker's link to the store stalls (cut off from the store, not from the other
   * brokers): for 3-5 s every trip, watch events and answers included, takes 2-4 s, in order.
   * Its leases are kept alive by the store meanwhile; it learns of their end one trip late.
   */
  private stallStoreLink(victim: SimBroker, why: string): void {
    const r = this.faultRandom
    this.impaired.add(victim.nodeId)
    const durationMs = r.int(STALL_MS[0], STALL_MS[1])
    const maxMs = r.int(STALL_TRIP_MS[0], STALL_TRIP_MS[1])
    victim.store.stall = { untilMs: this.scheduler.now + durationMs, minMs: STALL_TRIP_MS[0], maxMs }
    this.log(
      `FAULT store link of broker ${victim.nodeId} stalls for ${durationMs} ms (trips ${STALL_TRIP_MS[0]}-${maxMs} ms), ${why}`,
    )
  }

  /**
   * A stalled leader loses its leadership to an admin action: the store link of a leader
   * that is not its partition's preferred replica stalls, then leaderships move to preferred
   * replicas. It acts on a leadership it lost, and its ISR proposals land after the newer
   * leadership (what the ISR compare-and-set is for).
   */
  private stallLeaderThenMoveIt(): void {
    const r = this.faultRandom
    const states = this.truth?.image().topics.get(TOPIC)?.partitions ?? []
    const movable = states.filter(
      (s) =>
        s.leader !== -1 &&
        s.leader !== s.replicas[0] &&
        this.isUp(s.leader) &&
        this.isUp(s.replicas[0]) &&
        s.isr.includes(s.replicas[0]),
    )
    if (movable.length === 0) {
      this.electPreferredLeaders()
      return
    }
    this.stallStoreLink(this.brokers.get(r.pick(movable).leader)!, 'then a preferred leader election')
    this.scheduler.schedule(r.int(10, 500), () => {
      if (this.faultsOn) this.electPreferredLeaders()
    })
  }

  /**
   * A zombie leader: the store link of a broker leading some partition stalls, then the store
   * ends its session (its keep-alives were lost). The controller moves its leaderships; it
   * learns of the lost session, and of the new leaders, only when its link recovers.
   */
  private stallLeaderThenExpireIt(): void {
    const r = this.faultRandom
    const states = this.truth?.image().topics.get(TOPIC)?.partitions ?? []
    const leaders = [...new Set(states.map((s) => s.leader))].filter((id) => this.isUp(id))
    if (leaders.length === 0) return
    const victim = this.brokers.get(r.pick(leaders))!
    this.stallStoreLink(victim, 'then its session expires')
    this.scheduler.schedule(r.int(10, 300), () => {
      if (!this.faultsOn || !victim.isAlive) return
      this.stats.sessionExpiries++
      this.log(`FAULT expire the store session of broker ${victim.nodeId}`)
      victim.expireSession().catch(() => undefined)
    })
  }

  /**
   * Kills broker `id`. A power loss (its page cache gone) only when every partition whose
   * ISR it is in keeps another ISR member: losing the page cache of a whole ISR at once is
   * outside the fault model (see README). Otherwise a process crash: the page cache stays.
   */
  private crash(id: number): void {
    const broker = this.brokers.get(id)!
    const soleIsrOf = this.partitionsWithSoleIsrMember(id)
    const powerLoss = soleIsrOf.length === 0 && this.faultRandom.chance(0.7)
    this.stats.crashes++
    broker.kill()
    broker.suspendLeases()
    this.impaired.add(id)
    if (!powerLoss) {
      const why = soleIsrOf.length > 0 ? ` (sole ISR member of ${soleIsrOf.join(',')})` : ''
      this.log(`FAULT crash broker ${id}: process crash, page cache kept${why}`)
      return
    }
    this.disks.get(id)!.crash(0.5)
    const lost = this.disks.get(id)!.lastCrash
    this.log(
      `FAULT crash broker ${id} with power loss: ${lost.filesReverted} files lost unflushed bytes (${lost.bytesLost} bytes, ${lost.tornTails} torn tails)`,
    )
  }

  /**
   * Partitions whose ISR (as the store has it) holds `id` and no other healthy member: one
   * whose current process is up and registered (a member listed for a process that died,
   * or for one restarted and not registered yet, may have lost its page cache already).
   */
  private partitionsWithSoleIsrMember(id: number): string[] {
    // The store's own state: a broker's image lags it under store latency (seed 102 with
    // store stalls: a stalled broker's image still listed a second ISR member).
    const truth = this.truth?.image()
    if (!truth) return []
    // Registered too: a process whose session ended is out of the controller's live set
    // (the store ISR loses it) and its registration may lag its return.
    const healthy = (m: number): boolean => {
      const b = this.brokers.get(m)
      return b?.isAlive === true && b.started && b.lease !== null && truth.brokers.has(m)
    }
    // Every topic (with `groups`, __consumer_offsets too: its acknowledged commits).
    return [...truth.topics.values()].flatMap((topic) =>
      topic.partitions
        .filter((state) => state.isr.includes(id) && !state.isr.some((m) => m !== id && healthy(m)))
        .map((state) => `${topic.name === TOPIC ? '' : `${topic.name}-`}p${state.partition}`),
    )
  }

  private recover(id: number): void {
    this.impaired.delete(id)
    const broker = this.brokers.get(id)!
    if (this.diskFailed.delete(id)) {
      const disk = this.disks.get(id)!
      const fired = disk.armedError === null
      disk.armedError = null
      if (broker.isAlive) {
        // Its log dir offline, server/broker.ts stops the broker (the process then exits, and
        // the restart below follows as after a crash). Still alive here: the error never fired,
        // or fired on a broker-level checkpoint (only logged, the dir stays online), and the
        // broker carries on; or its controlled stop has not finished (its store calls hang):
        // the process is killed, as an operator would.
        const offline = (broker.broker?.logManager.offlineLogDirs.length ?? 0) > 0
        if (!offline) {
          this.log(
            `HEAL disk of broker ${id}: ${fired ? 'the error fired, log dir online' : 'the error never fired'}; it carries on`,
          )
          return
        }
        this.log(
          `HEAL disk of broker ${id}: log dir offline, its stop has not finished; the process is killed`,
        )
        broker.kill()
        broker.suspendLeases()
        this.restart(id)
        return
      }
      this.log(`HEAL disk of broker ${id}: it had stopped itself; restart`)
    }
    for (const other of this.brokerIds) {
      this.network.healLink(id, other)
      this.network.healLink(other, id)
    }
    if (broker.isAlive) {
      if (broker.store.stall !== null) {
        broker.store.stall = null
        this.log(`HEAL store link of broker ${id}`)
      }
      this.log(`HEAL network of broker ${id}`)
      return
    }
    this.restart(id)
  }

  /**
   * Starts a new incarnation of broker `id`. One that fails to start (its store calls timed
   * out, its old registration had not expired) exits, as `tidelog broker` does, and is
   * started again a second later, as a service manager would.
   */
  private restart(id: number): void {
    this.startBroker(id).catch((error: unknown) => {
      this.log(
        `broker ${id} failed to start: ${String(error)}; the process exits and restarts in ${RESTART_DELAY_MS} ms`,
      )
      const failed = this.brokers.get(id)
      if (failed?.isAlive) {
        failed.kill()
        failed.suspendLeases()
      }
      this.scheduler.schedule(RESTART_DELAY_MS, () => {
        if (this.brokers.get(id) === failed) this.restart(id)
      })
    })
  }

  private heal(): void {
    this.faultsOn = false
    this.producing = false
    this.log('HEAL everything: network healed, crashed brokers restart, producers stop')
    this.network.healAll()
    for (const producer of this.txnProducers) producer.stopStarting()
    for (const broker of this.brokers.values()) broker.store.stall = null
    this.network.faults = { delayMinMs: 1, delayMaxMs: 5, resetProbability: 0 }
    for (const id of [...this.impaired]) this.recover(id)
  }

  // ---- workload -----------------------------------------------------------------------------

  private scheduleProducer(): void {
    const next = (): void => {
      if (!this.producing) return
      this.produceOne()
      this.scheduler.schedule(this.workloadRandom.int(5, 60), next)
    }
    this.scheduler.schedule(10, next)
    if (this.options.consumers === true) {
      // Their own random stream: the other choices of a seed stay as they were (the network's
      // delays are drawn for their traffic too, so the traces differ all the same).
      const random = new SimRandom(this.options.seed ^ 0xc0de)
      for (let partition = 0; partition < this.partitionCount; partition++) {
        const consumer = new SimConsumer(this, partition, random.fork())
        this.consumers.push(consumer)
        consumer.start()
      }
    }
    if (this.options.idempotentProducers === true) {
      for (let partition = 0; partition < this.partitionCount; partition++)
        this.startIdempotentProducer(partition)
    }
    if (this.options.transactions === true) {
      // Their own random streams: the other choices of a seed stay as they were.
      const producerRandom = new SimRandom(this.options.seed ^ 0x7a11)
      for (let i = 0; i < TXN_PRODUCERS; i++) {
        const producer = new SimTxnProducer(
          this,
          i,
          producerRandom.fork(),
          this.invariants.txn!.book,
          this.txnWorkload,
        )
        this.txnProducers.push(producer)
        producer.start()
      }
      const readerRandom = new SimRandom(this.options.seed ^ 0x7a0f)
      for (let i = 0; i < TXN_PRODUCERS; i++) {
        const reader = new TxnOffsetReader(this, i, readerRandom.fork(), this.txnWorkload, (offset, from) =>
          this.checkInCallback(() => this.invariants.txn?.onTxnOffsetsFetched(i, offset, from)),
        )
        this.txnOffsetReaders.push(reader)
        reader.start()
      }
      const consumerRandom = new SimRandom(this.options.seed ^ 0x7c0)
      for (let partition = 0; partition < this.partitionCount; partition++) {
        const consumer = new SimReadCommittedConsumer(this, partition, consumerRandom.fork())
        this.readCommittedConsumers.push(consumer)
        consumer.start()
      }
    }
    if (this.options.groups === true) {
      const random = new SimRandom(this.options.seed ^ 0x6709)
      const workload = new GroupWorkload()
      this.groupWorkload = workload
      const active: (SimGroupMember | SimConsumerProtocolMember)[] = []
      const startMember = (): void => {
        const member =
          this.options.consumerProtocol === true
            ? new SimConsumerProtocolMember(this, this.groupMembers.length, random.fork(), workload)
            : new SimGroupMember(this, this.groupMembers.length, random.fork(), workload)
        this.groupMembers.push(member)
        active.push(member)
        member.start()
      }
      for (let i = 0; i < GROUP_MEMBERS; i++) startMember()
      // Churn: every 2-6 s a member dies (it stops, unannounced: its session expires) and a new
      // one joins, so that generations change while the coordinator fails over.
      const churn = (): void => {
        if (!this.producing) return
        const victim = active.splice(random.int(0, active.length - 1), 1)[0]
        victim.stop()
        this.log(`group member ${victim.index} dies; member ${this.groupMembers.length} starts`)
        startMember()
        this.scheduler.schedule(random.int(2000, 6000), churn)
      }
      this.scheduler.schedule(random.int(2000, 6000), churn)
      this.offsetVerifier = new OffsetVerifier(this, random.fork(), workload)
      this.offsetVerifier.start()
    }
  }

  /**
   * One idempotent producer for `partition` (its own random stream, so the other workload
   * keeps its choices): a batch at a time, acks=all, sent to the leader a random live
   * broker names; retried with the same bytes after an error or when no answer came within
   * the produce timeout (the leader died, or the answer was lost), as the Java producer
   * with max.in.flight 1 and infinite retries. OUT_OF_ORDER_SEQUENCE_NUMBER: a new epoch
   * from sequence 0 (KIP-360). Its acknowledged batches join the acks=all survival check.
   */
  private startIdempotentProducer(partition: number): void {
    const r = this.idempotentRandom.fork()
    // With transactions, out of the producer id manager's blocks (0, 1000, 2000, ...), which
    // the transactional producers draw from: two producers must not share an id.
    const producerId = BigInt((this.options.transactions === true ? 1_000_000_000 : 1000) + partition)
    let epoch = 0
    let sequence = 0
    let attempt = 0
    const nextBatch = (): void => {
      if (!this.producing) return
      const value = `i${partition}.${epoch}.${sequence}`
      const count = r.int(1, 3)
      const batch = encodeRecordBatchSync({
        records: Array.from({ length: count }, (_, i) => ({ value: Buffer.from(`${value}.${i}`) })),
        defaultTimestamp: this.scheduler.nowMs(),
        producerId,
        producerEpoch: epoch,
        baseSequence: sequence,
      })
      send(batch, value, count, epoch)
    }
    const retry = (batch: Buffer, value: string, count: number, batchEpoch: number): void => {
      this.scheduler.schedule(r.int(20, 200), () => send(batch, value, count, batchEpoch))
    }
    const send = (batch: Buffer, value: string, count: number, batchEpoch: number): void => {
      if (!this.producing) return
      const mine = ++attempt
      const live = this.brokerIds.filter((id) => this.isUp(id))
      const informant = live.length > 0 ? this.brokers.get(r.pick(live)) : undefined
      const leaderId = informant?.metadata.image().topics.get(TOPIC)?.partitions[partition]?.leader ?? -1
      const leader = this.brokers.get(leaderId)
      if (!leader) {
        retry(batch, value, count, batchEpoch)
        return
      }
      this.stats.produced++
      const incarnation = leader.incarnation
      // No answer in time: the leader died or the answer was lost; send the same bytes again.
      this.scheduler.schedule(PRODUCE_TIMEOUT_MS + 500, () => {
        if (attempt !== mine || !this.producing) return
        this.log(`idempotent ${value} p${partition}: no answer from broker ${leaderId}; retrying`)
        retry(batch, value, count, batchEpoch)
      })
      this.scheduler.schedule(r.int(1, 5), () => {
        if (!leader.isAlive || leader.incarnation !== incarnation || !leader.broker) return
        leader.replicaManager.appendToLeader(TOPIC, partition, batch, -1, PRODUCE_TIMEOUT_MS).then(
          (result) =>
            answer(
              mine,
              leader,
              leaderId,
              result.errorCode,
              result.baseOffset,
              this.epochLed(leader, partition),
            ),
          (error: unknown) => answer(mine, leader, leaderId, toErrorCode(error) ?? -1, -1, -1),
        )
      })
      const answer = (
        which: number,
        from: SimBroker,
        fromId: number,
        errorCode: number,
        baseOffset: number,
        leaderEpoch: number,
      ): void => {
        this.scheduler.schedule(r.int(1, 5), () => {
          if (!from.isAlive || which !== attempt || !this.producing) return
          attempt++ // this attempt is answered: its timeout does nothing
          if (errorCode === 0) {
            this.stats.ackedAll++
            this.invariants.onAcked(partition, baseOffset, count, value, -1, fromId, leaderEpoch)
            this.log(`ack ${value} p${partition} @${baseOffset} idempotent from broker ${fromId}`)
            sequence += count
            this.scheduler.schedule(r.int(5, 40), nextBatch)
          } else if (errorCode === ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER) {
            this.log(
              `idempotent producer of p${partition}: OUT_OF_ORDER_SEQUENCE_NUMBER for ${value}; new epoch`,
            )
            epoch++
            sequence = 0
            nextBatch()
          } else {
            if (errorCode !== ErrorCode.NOT_LEADER_OR_FOLLOWER && errorCode !== ErrorCode.NOT_ENOUGH_REPLICAS)
              this.log(
                `idempotent ${value} p${partition}: error ${errorCode} from broker ${fromId}; retrying`,
              )
            retry(batch, value, count, batchEpoch)
          }
        })
      }
    }
    this.scheduler.schedule(r.int(10, 50), nextBatch)
  }

  private produceOne(): void {
    const r = this.workloadRandom
    const partition = r.int(0, this.partitionCount - 1)
    const acks = r.chance(0.8) ? -1 : 1
    const value = `v${this.nextValue++}`
    const count = r.int(1, 3)
    const batch = encodeRecordBatchSync({
      records: Array.from({ length: count }, (_, i) => ({ value: Buffer.from(`${value}.${i}`) })),
      defaultTimestamp: this.scheduler.nowMs(),
    })
    // The producer's metadata: what a live broker tells it (may be stale).
    const live = this.brokerIds.filter((id) => this.brokers.get(id)?.started && this.brokers.get(id)?.isAlive)
    if (live.length === 0) return
    const informant = this.brokers.get(r.pick(live))!
    const leaderId = informant.metadata.image().topics.get(TOPIC)?.partitions[partition]?.leader ?? -1
    const leader = this.brokers.get(leaderId)
    if (!leader) return
    this.stats.produced++
    if (acks === 1 && this.options.acksZero === true && this.acksZeroRandom.chance(0.5)) {
      this.produceAcksZero(leaderId, partition, batch, value)
      return
    }
    const incarnation = leader.incarnation
    this.scheduler.schedule(r.int(1, 5), () => {
      if (!leader.isAlive || leader.incarnation !== incarnation || !leader.broker) return
      leader.replicaManager.appendToLeader(TOPIC, partition, batch, acks, PRODUCE_TIMEOUT_MS).then(
        (result) => {
          const leaderEpoch = this.epochLed(leader, partition)
          // The answer travels back; a crash meanwhile loses it.
          this.scheduler.schedule(r.int(1, 5), () => {
            if (!leader.isAlive) return
            if (result.errorCode !== 0) return
            if (acks === -1) this.stats.ackedAll++
            else this.stats.ackedOne++
            this.invariants.onAcked(partition, result.baseOffset, count, value, acks, leaderId, leaderEpoch)
            this.log(`ack ${value} p${partition} @${result.baseOffset} acks=${acks} from broker ${leaderId}`)
          })
        },
        () => undefined,
      )
    })
  }

  /** The leader epoch in which `leader` leads `partition` as its append is answered (-1: not leading). */
  private epochLed(leader: SimBroker, partition: number): number {
    const local = leader.broker ? leader.replicaManager.getPartition(TOPIC, partition) : undefined
    return local?.isLeader === true ? local.leaderEpoch : -1
  }

  private readonly acksZeroRandom: SimRandom
  /** acks=0 producer connections, per leader (one client, as a producer keeps per broker). */
  private readonly acksZeroClients = new Map<number, BrokerClient>()
  private readonly acksZeroValues: string[] = []

  /** An acks=0 produce over the simulated network: fire and forget, through the real Produce handler. */
  private produceAcksZero(leaderId: number, partition: number, batch: Buffer, value: string): void {
    let client = this.acksZeroClients.get(leaderId)
    if (!client) {
      client = new BrokerClient(
        SimNetwork.hostOf(leaderId),
        9092,
        'sim-acks0-producer',
        this.network.transportFor(ACKS_ZERO_NODE, () => this.producing),
      )
      this.acksZeroClients.set(leaderId, client)
    }
    this.acksZeroValues.push(value)
    const sent = client.request(ApiKey.Produce, 9, {
      ...defaultProduceRequest(),
      acks: 0,
      timeoutMs: PRODUCE_TIMEOUT_MS,
      topicData: [{ name: TOPIC, partitionData: [{ index: partition, records: batch }] }],
    })
    // No answer ever comes: the promise only settles when the connection closes (a failed
    // write closes it, as Kafka does); the next request reconnects.
    sent.catch(() => {
      if (this.acksZeroClients.get(leaderId) === client) this.acksZeroClients.delete(leaderId)
      client.close()
    })
  }

  // ---- liveness -----------------------------------------------------------------------------

  private async liveness(): Promise<void> {
    const start = this.scheduler.now
    this.log(`liveness phase: up to ${LIVENESS_MS_MAX} ms for leaders and converged replicas`)
    for (;;) {
      await this.runFor(500)
      const problem = await this.invariants.convergenceProblem()
      if (problem === null) break
      if (this.scheduler.now - start > LIVENESS_MS_MAX)
        throw new Violation(`liveness: not converged ${LIVENESS_MS_MAX} ms after healing: ${problem}`)
      if (this.scheduler.peekTime() === undefined) throw new Violation(`liveness: no events left: ${problem}`)
    }
    this.log(`converged after ${this.scheduler.now - start} ms`)
    if (this.acksZeroValues.length > 0) {
      const committed = this.invariants.committedFirstValues()
      const landed = this.acksZeroValues.filter((v) => committed.has(`${v}.0`)).length
      this.log(`acks=0: ${landed} of ${this.acksZeroValues.length} writes committed (no survival claim)`)
    }
    await this.invariants.checkAckedSurvived()
    if (this.consumers.length > 0) await this.consumersCatchUp(start)
    if (this.groupWorkload) await this.groupOffsetsSurvived(start)
    if (this.options.transactions === true) await this.transactionsSettled(start)
  }

  /**
   * `transactions` at the end: the producers finish the transaction under way, every
   * partition's transactions get decided (the coordinator aborts the expired ones), the
   * read_committed consumers reach the high watermark, then the whole-run checks on the
   * final logs (txn-checker.ts checkFinalTransactions).
   */
  private async transactionsSettled(start: number): Promise<void> {
    const budgetMs = LIVENESS_MS_MAX + TRANSACTION_TIMEOUT_MS
    const waitFor = async (what: string, done: () => Promise<string | null>): Promise<void> => {
      for (;;) {
        const problem = await done()
        if (problem === null) return
        if (this.scheduler.now - start > budgetMs)
          throw new Violation(`liveness: ${what} ${budgetMs} ms after healing: ${problem}`)
        await this.runFor(200)
      }
    }
    await waitFor('transactional producers still busy', async () => {
      const busy = this.txnProducers.filter((p) => !p.idle)
      return busy.length === 0 ? null : busy.map((p) => p.transactionalId).join(', ')
    })
    let logs = new Map<number, DecidedRecord[]>()
    await waitFor('transactions still open', async () => {
      logs = await this.finalTransactionLogs()
      for (const [partition, records] of logs) {
        const open = records.find((r) => r.decision === 'open')
        if (open)
          return `p${partition}: ${open.value} at offset ${open.offset} (producer ${open.producerId}) in an undecided transaction`
      }
      return this.lsoProblem()
    })
    await waitFor('read_committed consumers behind', async () => {
      const behind = this.readCommittedConsumers.filter(
        (c) => c.position !== this.leaderPartition(c.partition)?.highWatermark,
      )
      return behind.length === 0 ? null : behind.map((c) => `p${c.partition} at ${c.position}`).join(', ')
    })
    for (const consumer of this.readCommittedConsumers) consumer.stop()
    logs = await this.finalTransactionLogs()
    const txn = this.invariants.txn!
    const problem = checkFinalTransactions(txn.book, logs, txn.delivered)
    if (problem !== null) throw new Violation(problem)
    // The group offsets, from the (loaded) group coordinator once no reader is mid-request.
    for (const reader of this.txnOffsetReaders) reader.stop()
    const finalOffsets: number[] = []
    for (const reader of this.txnOffsetReaders) {
      let fetched: number | null = null
      await waitFor(`no stable OffsetFetch answer for txn producer ${reader.producer}'s group`, async () => {
        if (fetched !== null) return null
        if (!reader.idle) return 'a fetch in flight'
        reader.fetchOnce().then(
          (offset) => {
            fetched = offset
          },
          (error: unknown) => this.clientFailure(error),
        )
        return 'no answer yet'
      })
      reader.close()
      const offsetProblem = checkFinalOffsets(txn.book, reader.producer, fetched!, logs)
      if (offsetProblem !== null) throw new Violation(offsetProblem)
      finalOffsets.push(fetched!)
    }
    const c = txn.book.counts()
    const w = this.txnWorkload
    const inLog = [...logs.values()].reduce(
      (n, records) => n + records.filter((r) => r.decision === 'commit').length,
      0,
    )
    this.log(
      `transactions: ${txn.book.txns.size} begun, ${c.committed} committed, ${c.aborted} aborted, ${c.unknown} unknown; ${w.inits} inits, ${w.bumps} epoch bumps, ${w.fenced} fenced, ${w.takeovers} takeovers by a new instance, ${w.slowRequests} held produces, ${w.lateEndTxn} EndTxn given up; errors ${[...w.errorCodes].map(([k, n]) => `${k}: ${n}`).join(', ') || 'none'}; ${inLog} committed records in the logs; read_committed consumers ${this.readCommittedConsumers.map((r) => `p${r.partition} returned ${r.returned} records, dropped ${r.dropped} aborted`).join(', ')}; ${txn.stats.lsoChecks} LSO checks (${txn.stats.followerLsoChecks} on followers, ${txn.stats.lsoBehindHw} behind the HW), ${txn.stats.leaderAppendsChecked} leader appends checked for fenced epochs (${txn.stats.deposedFencedAppends} by deposed leaders, never committed); group offsets ${finalOffsets.join(', ')} (${txn.stats.offsetFetches} fetches checked)`,
    )
  }

  private leaderPartition(partition: number): Partition | undefined {
    const state = this.truth?.image().topics.get(TOPIC)?.partitions[partition]
    const leader = state ? this.brokers.get(state.leader) : undefined
    if (!leader?.isAlive || !leader.broker) return undefined
    return leader.replicaManager.getPartition(TOPIC, partition) ?? undefined
  }

  /** A leader whose last stable offset is behind its high watermark once every transaction is decided. */
  private lsoProblem(): string | null {
    for (let partition = 0; partition < this.partitionCount; partition++) {
      const p = this.leaderPartition(partition)
      if (!p?.isLeader) return `p${partition} has no acting leader`
      if (p.lastStableOffset !== p.highWatermark)
        return `p${partition} last stable offset ${p.lastStableOffset}, high watermark ${p.highWatermark}`
    }
    return null
  }

  /** Every partition's transactional records in its leader's log, each with its transaction's outcome there. */
  private async finalTransactionLogs(): Promise<Map<number, DecidedRecord[]>> {
    const logs = new Map<number, DecidedRecord[]>()
    for (let partition = 0; partition < this.partitionCount; partition++) {
      const p = this.leaderPartition(partition)
      if (!p) continue
      const chunks: Buffer[] = []
      let from = p.log.logStartOffset
      const end = p.log.logEndOffset
      while (from < end) {
        const read = await p.log.read(from, { maxBytes: 1 << 20, minOneMessage: true })
        if (read.sizeInBytes === 0) break
        chunks.push(...read.records)
        from = read.nextOffset
      }
      logs.set(partition, decideLog(decodeBatches(chunks)))
    }
    return logs
  }

  /**
   * (a) at the end: the members stop (their requests in flight answered or timed out), then
   * the coordinator, once loaded, returns at least every acknowledged commit.
   */
  private async groupOffsetsSurvived(start: number): Promise<void> {
    for (const member of this.groupMembers) member.stop()
    while (this.groupMembers.some((m) => !m.idle)) await this.runFor(100)
    this.offsetVerifier?.stop()
    const verifier = new OffsetVerifier(
      this,
      new SimRandom(this.options.seed ^ 0x6710),
      this.groupWorkload!,
      998,
    )
    let fetched = false
    verifier.fetchOnce().then(
      (ok) => {
        fetched = ok
      },
      (error: unknown) => this.groupFailure(error),
    )
    for (;;) {
      await this.runFor(100)
      if (fetched) break
      if (this.scheduler.now - start > LIVENESS_MS_MAX)
        throw new Violation(
          `liveness: no OffsetFetch answer from the group coordinator ${LIVENESS_MS_MAX} ms after healing`,
        )
      if (verifier.idle)
        verifier.fetchOnce().then(
          (ok) => {
            fetched = ok
          },
          (error: unknown) => this.groupFailure(error),
        )
    }
    verifier.stop()
    const w = this.groupWorkload!
    const g = this.invariants.groupChecks
    this.log(
      `group: ${w.rebalances} assignments, ${w.commits} commits (${w.ackedCommits} partition commits acknowledged), ${w.fetches} offset fetches (${g.fetches} checked, ${g.staleFetches} from a deposed coordinator, ${g.staleBehind} of those behind an acknowledged commit), ${g.coordinatorAnswers} coordinator answers, ${g.memberEpochs} member epochs checked; errors ${[...w.errorCodes].map(([code, n]) => `${code}: ${n}`).join(', ') || 'none'}; acknowledged commits found by the final OffsetFetch`,
    )
  }

  /** After convergence every consumer reaches its partition's log end (all committed by then). */
  private async consumersCatchUp(start: number): Promise<void> {
    for (;;) {
      const behind = this.consumers.filter((c) => {
        const image = this.truth?.image().topics.get(TOPIC)?.partitions[c.partition]
        const leader = image ? this.brokers.get(image.leader) : undefined
        const hw = leader?.broker?.replicaManager.getPartition(TOPIC, c.partition)?.highWatermark ?? -1
        return c.position !== hw
      })
      if (behind.length === 0) break
      if (this.scheduler.now - start > LIVENESS_MS_MAX)
        throw new Violation(
          `liveness: consumers behind ${LIVENESS_MS_MAX} ms after healing: ${behind.map((c) => `p${c.partition} at ${c.position}`).join(', ')}`,
        )
      await this.runFor(200)
    }
    for (const consumer of this.consumers) consumer.stop()
    this.invariants.checkConsumedCommitted()
    this.log(
      `consumers caught up: ${this.consumers.map((c) => `p${c.partition} at ${c.position} (${c.fetches} fetches, ${c.errors} errors${[...c.errorCodes].map(([code, n]) => `, code ${code}: ${n}`).join('')})`).join(', ')}; ${this.invariants.consumedBatches} batches checked`,
    )
  }
}

export async function runSimulation(options: SimOptions): Promise<SimResult> {
  return new World(options).run()
}
