/**
 * A small simulated cluster for tidelog's own client: three real brokers (SimBroker) on the
 * simulated clock, disk and network, and the client's connector dialling over that network
 * (SimNetwork.clientConnector), so the shipped Producer and Consumer run under cuts, resets
 * and crashes, deterministically from one seed. world.ts drives its own protocol clients;
 * this drives the real one and keeps to what a test of it needs.
 */
import { pino } from 'pino'
import type { ClientOptions } from '../../src/client/client.js'
import type { ClientConnector } from '../../src/client/connector.js'
import type { Logger } from '../../src/common/logger.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import { loadAllApiCodecs } from '../../src/protocol/generated/index.js'
import { SimDisk } from '../../src/sim/disk.js'
import { SimNetwork } from '../../src/sim/network.js'
import { SimRandom } from '../../src/sim/random.js'
import { drainMicrotasks, SimScheduler } from '../../src/sim/scheduler.js'
import { SimBroker } from '../../src/sim/sim-broker.js'
import { toBrokerId } from '../helpers/broker-ids.js'

const BROKER_PROPERTIES: readonly [string, string][] = [
  ['broker.session.timeout.ms', '3000'],
  ['replica.lag.time.max.ms', '2000'],
  ['replica.fetch.wait.max.ms', '200'],
  ['replica.fetch.backoff.ms', '100'],
  ['replica.socket.timeout.ms', '1000'],
  ['log.index.size.max.bytes', String(64 * 1024)],
]
/** The client's process on the network: never killed. */
export const CLIENT_NODE = 100
/** A broker that failed to start (its old registration still live) is started again after this. */
const RESTART_DELAY_MS = 1000

export class RealClientWorld {
  readonly scheduler = new SimScheduler()
  readonly random: SimRandom
  readonly network: SimNetwork
  readonly brokerIds = [1, 2, 3]
  readonly brokers = new Map<number, SimBroker>()
  readonly trace: string[] = []
  private readonly disks = new Map<number, SimDisk>()
  private readonly incarnations = new Map<number, number>()
  private store!: EmbeddedStore

  constructor(readonly seed: number) {
    this.random = new SimRandom(seed)
    this.network = new SimNetwork(this.scheduler, this.random.fork())
    for (const id of this.brokerIds)
      this.disks.set(id, new SimDisk(this.random.fork(), () => this.scheduler.nowMs()))
  }

  get bootstrapServers(): string[] {
    return this.brokerIds.map((id) => `${SimNetwork.hostOf(id)}:9092`)
  }

  get connector(): ClientConnector {
    return this.network.clientConnector(CLIENT_NODE)
  }

  /** What a Producer, Consumer or Admin needs to run in this world: its network, clock and a fork of the seed. */
  clientOptions(): Required<
    Pick<ClientOptions, 'bootstrapServers' | 'clock' | 'random' | 'connector' | 'defer'>
  > {
    return {
      bootstrapServers: this.bootstrapServers,
      clock: this.scheduler,
      random: this.random.fork(),
      connector: this.connector,
      // The producer's drain as an event of the scheduler, not a turn of Node's event loop.
      defer: (callback) => {
        this.scheduler.schedule(0, callback)
      },
    }
  }

  log(message: string): void {
    this.trace.push(`${String(this.scheduler.now).padStart(7)} ${message}`)
  }

  /** Three brokers registered and topic `name` created (RF 3, min.insync.replicas 2). */
  async setup(topic: string, partitions: number): Promise<void> {
    // Codecs load through real module I/O, which the simulated clock cannot order.
    await loadAllApiCodecs()
    this.store = await EmbeddedStore.open({ clock: this.scheduler })
    for (const id of this.brokerIds) await this.until(this.startBroker(id))
    const first = this.brokers.get(1)!
    await this.until(this.poll(() => first.metadata.image().brokers.size === this.brokerIds.length))
    await this.until(
      first.metadata.update((image) => {
        const spec = {
          name: topic,
          partitions,
          replicationFactor: 3,
          configs: { 'min.insync.replicas': '2', 'unclean.leader.election.enable': 'false' },
        }
        const created = {
          ...first.metadata.createTopicImage(spec),
          topicId: this.random.bytes(16).toString('base64url'),
        }
        return { ...image, topics: new Map(image.topics).set(topic, created) }
      }),
    )
    await this.until(this.poll(() => this.leaderOf(topic, partitions - 1) !== null))
  }

  /** The leader of a partition as a live broker's metadata has it (null: none yet). */
  leaderOf(topic: string, partition: number): number | null {
    for (const broker of this.brokers.values()) {
      if (!broker.isAlive || !broker.started) continue
      const state = broker.metadata.image().topics.get(topic)?.partitions[partition]
      if (state && state.leader >= 0) return state.leader
    }
    return null
  }

  /** Cuts broker `id` off from the other brokers, both ways (the client still reaches it). */
  isolate(id: number): void {
    for (const other of this.brokerIds)
      if (other !== id) {
        this.network.cutLink(id, other)
        this.network.cutLink(other, id)
      }
    this.log(`FAULT broker ${id} cut off from the other brokers`)
  }

  healNetwork(): void {
    this.network.healAll()
    this.log('HEAL network')
  }

  /** A process crash: timers dropped, connections reset, its lease left to expire. */
  crash(id: number): void {
    const broker = this.brokers.get(id)!
    broker.kill()
    broker.suspendLeases()
    this.log(`FAULT crash broker ${id}`)
  }

  /** Starts the next incarnation; one that fails to start is started again a second later. */
  restart(id: number): void {
    this.startBroker(id).catch((error: unknown) => {
      this.log(`broker ${id} failed to start: ${String(error)}; again in ${RESTART_DELAY_MS} ms`)
      const failed = this.brokers.get(id)
      if (failed?.isAlive) {
        failed.kill()
        failed.suspendLeases()
      }
      this.scheduler.schedule(RESTART_DELAY_MS, () => this.restart(id))
    })
  }

  /** Steps the simulation until `promise` settles; fails past `limitMs` of simulated time. */
  async until<T>(promise: Promise<T>, limitMs = 60_000): Promise<T> {
    let outcome: { value: T } | { error: unknown } | null = null
    promise.then(
      (value) => {
        outcome = { value }
      },
      (error: unknown) => {
        outcome = { error }
      },
    )
    const deadline = this.scheduler.now + limitMs
    await drainMicrotasks()
    while (outcome === null) {
      if (this.scheduler.now > deadline)
        throw new Error(`not settled within ${limitMs} simulated ms\n${this.trace.slice(-40).join('\n')}`)
      if (!(await this.scheduler.step())) throw new Error('stalled: no events queued')
      this.checkBrokers()
    }
    const settled = outcome as { value: T } | { error: unknown }
    if ('error' in settled) throw settled.error
    return settled.value
  }

  /** Runs the simulation for `durationMs` of simulated time. */
  async runFor(durationMs: number): Promise<void> {
    const end = this.scheduler.now + durationMs
    for (;;) {
      const next = this.scheduler.peekTime()
      if (next === undefined || next > end) {
        this.scheduler.advanceTo(end)
        return
      }
      await this.scheduler.step()
      this.checkBrokers()
    }
  }

  /** Resolves once `condition` holds, checked every 10 simulated ms. */
  poll(condition: () => boolean): Promise<void> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (condition()) resolve()
        else this.scheduler.schedule(10, check)
      }
      check()
    })
  }

  close(): void {
    for (const broker of this.brokers.values()) if (broker.isAlive) broker.kill()
  }

  private checkBrokers(): void {
    for (const broker of this.brokers.values())
      if (broker.fatalErrors.length > 0)
        throw new Error(`broker ${broker.nodeId} hit an internal error: ${String(broker.fatalErrors[0])}`)
  }

  private startBroker(id: number): Promise<void> {
    const incarnation = (this.incarnations.get(id) ?? 0) + 1
    this.incarnations.set(id, incarnation)
    const broker = new SimBroker(
      toBrokerId(id),
      incarnation,
      this.scheduler,
      this.disks.get(id)!,
      this.store,
      this.network,
      this.random.fork(),
      this.loggerFor(id, incarnation),
      { properties: new Map(BROKER_PROPERTIES), storeLatencyMaxMs: 0 },
    )
    this.brokers.set(id, broker)
    this.log(`start broker ${id} (incarnation ${incarnation})`)
    return broker.start()
  }

  /** Warnings and errors go to the trace (shown when the test fails). */
  private loggerFor(id: number, incarnation: number): Logger {
    return pino(
      { level: 'warn', base: null, timestamp: false },
      {
        write: (line: string) => {
          const { level, msg } = JSON.parse(line) as { level: number; msg?: string }
          this.log(`  b${id}.${incarnation} ${level >= 50 ? 'ERROR' : 'WARN'} ${msg ?? ''}`)
        },
      },
    ) as unknown as Logger
  }
}
