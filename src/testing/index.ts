/**
 * `tidelog/testing`: a replicated Kafka-compatible cluster inside the test process, and a
 * fault API to break it the way production breaks.
 *
 *   import { startCluster } from 'tidelog/testing'
 *   const cluster = await startCluster({ brokers: 3, topics: [{ name: 'orders', partitions: 3 }] })
 *   // point kafkajs / librdkafka / tidelog's client at cluster.bootstrapServers
 *   cluster.kill(cluster.leaderOf('orders', 0))   // as kill -9: the process is gone
 *   await cluster.restart(id)
 *   await cluster.stop()
 *
 * Each broker is the real `Broker` built from Node's parts wrapped by fault-parts.ts: real
 * TCP on free loopback ports, real files in a temporary directory, and one in-memory
 * metadata store shared by the brokers (leases expire on the system clock).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { type Clock, systemClock } from '../common/clock.js'
import { type Logger, silentLogger } from '../common/logger.js'
import { systemRandom } from '../common/random.js'
import type { ClusterImage, PartitionState } from '../metadata/cluster-image.js'
import { ClusterMetadata } from '../metadata/cluster-metadata.js'
import { EmbeddedStore } from '../metadata/store/embedded-store.js'
import { nodeFileSystem } from '../runtime/node-file-system.js'
import { nodeNetwork } from '../runtime/node-network.js'
import { Broker } from '../server/broker.js'
import { brokerConfigFromProperties } from '../server/broker-config.js'
import {
  FaultyFileSystem,
  FaultyNetwork,
  type LinkEnd,
  type Links,
  ProcessClock,
  ProcessState,
  ProcessStore,
} from './fault-parts.js'

export type { LinkEnd } from './fault-parts.js'

export interface TestTopic {
  readonly name: string
  /** Default 1. */
  readonly partitions?: number
  /** Default: the cluster size, at most 3. */
  readonly replicationFactor?: number
  /** Topic configs by Kafka name, e.g. `{ 'min.insync.replicas': 2 }`. */
  readonly configs?: Readonly<Record<string, string | number | boolean>>
}

export interface TestClusterOptions {
  /** Brokers (node ids 0..n-1), default 3. */
  readonly brokers?: number
  /** Broker properties by Kafka name, applied to every broker. */
  readonly properties?: Readonly<Record<string, string | number | boolean>>
  /** Topics created before startCluster resolves, each with a leader serving every partition. */
  readonly topics?: readonly TestTopic[]
  /** Default: silent. */
  readonly logger?: Logger
  /**
   * Each broker serves the schema registry (Confluent's API) on a listener of its own, a
   * free loopback port kept across restarts: `schemaRegistryUrl`. Default false (it is
   * still under /schema-registry/ of an HTTP listener set in `properties`).
   */
  readonly schemaRegistry?: boolean
}

/** Properties that make a test cluster fail over in seconds, not Kafka's production minutes. */
const TEST_PROPERTIES: Readonly<Record<string, string>> = {
  'broker.session.timeout.ms': '3000',
  'replica.lag.time.max.ms': '3000',
  'group.initial.rebalance.delay.ms': '0',
  'offsets.topic.replication.factor': '3',
  'replica.fetch.wait.max.ms': '100',
}

interface Incarnation {
  readonly broker: Broker
  readonly process: ProcessState
  readonly fileSystem: FaultyFileSystem
  readonly network: FaultyNetwork
  readonly store: ProcessStore
}

class LinkTable implements Links {
  private readonly cut = new Set<string>()
  private readonly dialers = new Map<string, number>()
  readonly listeners = new Map<string, number>()
  private healed: { promise: Promise<void>; resolve: () => void } | null = null

  canSend(from: LinkEnd, to: LinkEnd): boolean {
    return !this.cut.has(`${from}>${to}`)
  }

  async whenOpen(from: LinkEnd, to: LinkEnd): Promise<void> {
    while (!this.canSend(from, to)) {
      if (!this.healed) {
        let resolve!: () => void
        const promise = new Promise<void>((r) => {
          resolve = r
        })
        this.healed = { promise, resolve }
      }
      await this.healed.promise
    }
  }

  dialerAt(address: string): number | undefined {
    return this.dialers.get(address)
  }

  listenerAt(address: string): number | undefined {
    return this.listeners.get(address)
  }

  registerDialer(address: string, brokerId: number): void {
    this.dialers.set(address, brokerId)
  }

  cutOneWay(from: LinkEnd, to: LinkEnd): void {
    this.cut.add(`${from}>${to}`)
  }

  heal(): void {
    this.cut.clear()
    const healed = this.healed
    this.healed = null
    healed?.resolve()
  }
}

export class TestCluster {
  private readonly running = new Map<number, Incarnation>()
  /** Per killed broker: its locks released, as the OS releases a dead process's (awaited by a restart). */
  private readonly exits = new Map<number, Promise<void>>()
  private readonly links = new LinkTable()
  private stopped = false
  /** The store's own state, followed without faults: what leaderOf and waitForIsr read. */
  private truth: ClusterMetadata | null = null

  private constructor(
    private readonly store: EmbeddedStore,
    private readonly root: string,
    private readonly ports: readonly number[],
    private readonly properties: ReadonlyMap<string, string>,
    private readonly logger: Logger,
    private readonly clock: Clock,
    private readonly registryPorts: readonly number[] = [],
  ) {}

  /** HTTP listeners of killed brokers, closing: a restart waits for their ports. */
  private readonly closingHttp = new Map<number, Promise<void>>()

  /**
   * URL of the schema registry (`startCluster({ schemaRegistry: true })`) on the first
   * running broker; every broker serves reads, and writes reach the leader of `_schemas`
   * partition 0 in this process. Throws without `schemaRegistry`.
   */
  get schemaRegistryUrl(): string {
    if (this.registryPorts.length === 0)
      throw new Error('startCluster({ schemaRegistry: true }) serves a registry')
    const id = [...this.running.keys()].sort((a, b) => a - b)[0] ?? 0
    return this.schemaRegistryUrlOf(id)
  }

  /** URL of broker `id`'s schema registry listener. */
  schemaRegistryUrlOf(id: number): string {
    if (this.registryPorts[id] === undefined) throw new Error(`broker ${id} serves no schema registry`)
    return `http://127.0.0.1:${this.registryPorts[id]}`
  }

  /** Starts the brokers, then creates `options.topics` and waits until each partition is served. */
  static async start(options: TestClusterOptions = {}): Promise<TestCluster> {
    const count = options.brokers ?? 3
    if (!Number.isInteger(count) || count < 1) throw new Error('brokers must be a positive integer')
    const root = await mkdtemp(join(tmpdir(), 'tidelog-test-'))
    const store = await EmbeddedStore.open({ clock: systemClock })
    const properties = new Map<string, string>(Object.entries(TEST_PROPERTIES))
    properties.set('default.replication.factor', String(Math.min(3, count)))
    properties.set('offsets.topic.replication.factor', String(Math.min(3, count)))
    for (const [key, value] of Object.entries(options.properties ?? {})) properties.set(key, String(value))
    const ports = await Promise.all(Array.from({ length: count }, () => freePort()))
    const registryPorts = options.schemaRegistry
      ? await Promise.all(Array.from({ length: count }, () => freePort()))
      : []
    const cluster = new TestCluster(
      store,
      root,
      ports,
      properties,
      options.logger ?? silentLogger,
      systemClock,
      registryPorts,
    )
    try {
      await Promise.all(ports.map((_, id) => cluster.startBroker(id)))
      cluster.truth = await ClusterMetadata.open(store, {
        clusterId: null,
        random: systemRandom,
        logger: silentLogger,
      })
      for (const topic of options.topics ?? []) await cluster.createTopic(topic)
    } catch (error) {
      await cluster.stop()
      throw error
    }
    return cluster
  }

  /** `host:port,...` of every broker, running or not (clients skip the dead ones). */
  get bootstrapServers(): string {
    return this.ports.map((port) => `127.0.0.1:${port}`).join(',')
  }

  /** Node ids of the brokers, 0..n-1. */
  get brokerIds(): number[] {
    return this.ports.map((_, id) => id)
  }

  /** The running broker `id` (throws when it is down). */
  broker(id: number): Broker {
    const incarnation = this.running.get(id)
    if (!incarnation) throw new Error(`broker ${id} is not running`)
    return incarnation.broker
  }

  isRunning(id: number): boolean {
    return this.running.has(id)
  }

  private async startBroker(id: number): Promise<void> {
    if (this.running.has(id)) throw new Error(`broker ${id} is running`)
    await this.exits.get(id)
    this.exits.delete(id)
    const properties = new Map(this.properties)
    properties.set('node.id', String(id))
    properties.set('log.dirs', join(this.root, `broker-${id}`))
    properties.set('listeners', `PLAINTEXT://127.0.0.1:${this.ports[id]}`)
    if (this.registryPorts[id] !== undefined) {
      await this.closingHttp.get(id)
      this.closingHttp.delete(id)
      properties.set('tidelog.schema.registry.listener', `127.0.0.1:${this.registryPorts[id]}`)
    }
    this.links.listeners.set(`127.0.0.1:${this.ports[id]}`, id)
    const process = new ProcessState()
    const fileSystem = new FaultyFileSystem(nodeFileSystem, process, (ms) => sleep(ms))
    const network = new FaultyNetwork(nodeNetwork, id, process, this.links)
    const store = new ProcessStore(this.store, process)
    const broker = await Broker.start(brokerConfigFromProperties(properties), {
      clock: new ProcessClock(this.clock, process),
      random: systemRandom,
      fileSystem,
      network,
      store,
      logger: this.logger.child({ broker: id }),
    })
    this.running.set(id, { broker, process, fileSystem, network, store })
  }

  private incarnation(id: number): Incarnation {
    const incarnation = this.running.get(id)
    if (!incarnation) throw new Error(`broker ${id} is not running`)
    return incarnation
  }

  /**
   * As kill -9: the broker stops at once, mid-operation (no controlled shutdown, nothing
   * flushed, connections reset); its session expires after broker.session.timeout.ms and the
   * controller moves its leaderships. Written bytes stay on disk, as they stay in the page
   * cache of a machine that is still up (see powerLoss).
   */
  kill(id: number): void {
    const { broker, process, fileSystem, network, store } = this.incarnation(id)
    this.running.delete(id)
    process.kill()
    this.exits.set(id, fileSystem.kill())
    network.kill()
    store.suspendLeases()
    // The HTTP listeners are node:http, outside the faulty parts: they die with the broker.
    this.closingHttp.set(
      id,
      broker
        .closeHttpListeners()
        .catch((error: unknown) => this.logger.warn({ err: error }, 'registry close failed')),
    )
  }

  /** kill, and every byte the broker wrote but did not fsync is lost (a machine losing power). */
  async powerLoss(id: number): Promise<{ files: number; bytes: number }> {
    const { fileSystem } = this.incarnation(id)
    this.kill(id)
    return fileSystem.losePageCache()
  }

  /** Starts broker `id` again on its data (after kill, powerLoss or stopBroker). */
  async restart(id: number): Promise<void> {
    await this.startBroker(id)
  }

  /** Controlled shutdown of one broker (its leaderships move first, logs flushed). */
  async stopBroker(id: number): Promise<void> {
    const { broker } = this.incarnation(id)
    this.running.delete(id)
    await broker.stop()
  }

  /** As SIGSTOP: nothing of broker `id` makes progress, and its session is not kept alive. */
  pause(id: number): void {
    const { process, store } = this.incarnation(id)
    process.pause()
    store.suspendLeases()
  }

  /** As SIGCONT. A broker paused past its session finds it lost, and registers again. */
  resume(id: number): void {
    const { process, store } = this.incarnation(id)
    store.resumeLeases()
    process.resume()
  }

  /** Cuts every link of broker `id`: to and from the other brokers and the clients. */
  isolate(id: number): void {
    for (const other of [...this.brokerIds.filter((b) => b !== id), 'client' as const]) this.cut(id, other)
    this.incarnation(id).store.cutLink()
  }

  /** Cuts the link between `a` and `b` both ways (`oneWay`: only from a to b); 'client' is every client. */
  cut(a: LinkEnd, b: LinkEnd, options: { oneWay?: boolean } = {}): void {
    this.links.cutOneWay(a, b)
    if (options.oneWay !== true) this.links.cutOneWay(b, a)
  }

  /** Heals every cut link; held bytes flow again. */
  heal(): void {
    this.links.heal()
    for (const incarnation of this.running.values()) incarnation.store.healLink()
  }

  /** Every disk operation of broker `id` takes `ms` longer (0: back to normal). */
  slowDisk(id: number, ms: number): void {
    this.incarnation(id).fileSystem.slowMs = ms
  }

  /** Writes of broker `id` fail with ENOSPC (`full` false: space again). */
  diskFull(id: number, full = true): void {
    this.incarnation(id).fileSystem.full = full
  }

  /** The leader of a partition as the cluster metadata has it (-1: offline). */
  leaderOf(topic: string, partition: number): number {
    return this.partitionState(topic, partition).leader
  }

  partitionState(topic: string, partition: number): PartitionState {
    const state = this.image().topics.get(topic)?.partitions[partition]
    if (!state) throw new Error(`no partition ${topic}-${partition}`)
    return state
  }

  /** Waits until every partition of `topic` has a leader and its full replica set in sync. */
  async waitForIsr(topic: string, options: { timeoutMs?: number } = {}): Promise<void> {
    await this.waitUntil(
      `every partition of ${topic} has a leader and a full ISR`,
      () => {
        const image = this.image().topics.get(topic)
        return (
          image?.partitions.every(
            (p) => p.leader >= 0 && this.running.has(p.leader) && p.isr.length === p.replicas.length,
          ) === true
        )
      },
      options.timeoutMs ?? 30_000,
    )
  }

  /** Preferred leader election for one partition (the first replica leads again if in sync). */
  async electLeader(topic: string, partition: number): Promise<number> {
    const controller = [...this.running.values()].find((i) => i.broker.isController)?.broker.controller
    if (!controller) throw new Error('no active controller')
    await controller.electPreferredLeaders(new Set([`${topic}:${partition}`]))
    return this.leaderOf(topic, partition)
  }

  /** Creates a topic and waits until every partition's leader serves it. */
  async createTopic(topic: TestTopic): Promise<void> {
    const broker = this.anyBroker()
    const [created] = await broker.topicAdmin.createTopics(
      [
        {
          name: topic.name,
          numPartitions: topic.partitions ?? 1,
          replicationFactor: topic.replicationFactor ?? Math.min(3, this.running.size),
          assignments: [],
          configs: Object.fromEntries(
            Object.entries(topic.configs ?? {}).map(([key, value]) => [key, String(value)]),
          ),
        },
      ],
      { validateOnly: false, timeoutMs: 30_000 },
    )
    if (created.errorCode !== 0)
      throw new Error(
        `creating topic ${topic.name}: error ${created.errorCode}: ${created.errorMessage ?? ''}`,
      )
    await this.waitUntil(
      `every partition of ${topic.name} served by its leader`,
      () => {
        const image = this.image().topics.get(topic.name)
        return (
          image?.partitions.every((p) => {
            const leader = this.running.get(p.leader)?.broker
            return leader?.replicaManager.getPartition(topic.name, p.partition)?.isLeader === true
          }) === true
        )
      },
      30_000,
    )
  }

  /** Stops every running broker (controlled) and removes the data directory. */
  async stop(): Promise<void> {
    if (this.stopped) return
    this.stopped = true
    this.heal()
    for (const [id, incarnation] of [...this.running]) {
      incarnation.process.resume()
      this.running.delete(id)
      await incarnation.broker.stop()
    }
    await Promise.all(this.exits.values())
    await Promise.all(this.closingHttp.values())
    this.truth?.close()
    await this.store.close()
    await rm(this.root, { recursive: true, force: true })
  }

  private image(): ClusterImage {
    if (!this.truth) throw new Error('the cluster is not started')
    return this.truth.image()
  }

  private anyBroker(): Broker {
    const first = this.running.values().next()
    if (first.done) throw new Error('no broker is running')
    return first.value.broker
  }

  private async waitUntil(what: string, done: () => boolean, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`)
      await sleep(10)
    }
  }
}

/** Starts an in-process cluster (default 3 brokers) on free loopback ports and temporary directories. */
export function startCluster(options: TestClusterOptions = {}): Promise<TestCluster> {
  return TestCluster.start(options)
}

async function freePort(): Promise<number> {
  const listener = await nodeNetwork.listen('127.0.0.1', 0, (stream) => stream.destroy())
  const { port } = listener
  await listener.close()
  return port
}
