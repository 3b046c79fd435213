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
import { ErrorCode } from '../protocol/error-codes.js'
import { nodeFileSystem } from '../runtime/node-file-system.js'
import { nodeNetwork } from '../runtime/node-network.js'
import { Broker } from '../server/broker.js'
import { brokerConfigFromProperties } from '../server/broker-config.js'
import { BrokerThread } from '../server/broker-thread.js'
import {
  FaultyFileSystem,
  FaultyNetwork,
  type LinkEnd,
  type Links,
  ProcessClock,
  ProcessState,
  ProcessStore,
} from './fault-parts.js'
import { type Incarnation, LocalIncarnation, ThreadIncarnation } from './incarnations.js'
import { newSharedLinkState, type SharedLinkState, SharedLinks, SharedProcessState } from './thread-parts.js'

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
  /**
   * Each broker in a worker thread of its own, as brokers on their own machines run on cores
   * of their own (the test's thread keeps the metadata store and the fault API). The fault
   * API works the same, except `broker(id)`, which has no Broker object to give: a pause or
   * a slow or full disk takes effect when the broker's thread reads the message (a kill, a
   * cut link and isolate at once). Default false.
   */
  readonly workerThreads?: boolean
}

/** Properties that make a test cluster fail over in seconds, not Kafka's production minutes. */
const TEST_PROPERTIES: Readonly<Record<string, string>> = {
  'broker.session.timeout.ms': '3000',
  'replica.lag.time.max.ms': '3000',
  'group.initial.rebalance.delay.ms': '0',
  'group.streams.initial.rebalance.delay.ms': '0',
  'offsets.topic.replication.factor': '3',
  'replica.fetch.wait.max.ms': '100',
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

  clear(): void {
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
  private readonly links: LinkTable | SharedLinks
  /** The links' shared buffers when the brokers run in worker threads; null in this thread. */
  private readonly threadLinks: SharedLinkState | null
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
    workerThreads = false,
  ) {
    this.threadLinks = workerThreads ? newSharedLinkState(ports) : null
    this.links = this.threadLinks ? new SharedLinks(this.threadLinks) : new LinkTable()
  }

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
      options.workerThreads === true,
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

  /** The running broker `id` (throws when it is down, or in a worker thread). */
  broker(id: number): Broker {
    const { broker } = this.incarnation(id)
    if (broker === null)
      throw new Error(
        `broker ${id} runs in a worker thread (workerThreads: true): there is no Broker object here`,
      )
    return broker
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
      properties.set('tidelog.schema.registry.listener', `127.0.0.1:${this.registryPorts[id]}`)
    }
    this.running.set(
      id,
      this.threadLinks
        ? await this.startThread(id, properties, this.threadLinks)
        : await this.startLocal(id, properties, this.links as LinkTable),
    )
  }

  private async startLocal(id: number, properties: ReadonlyMap<string, string>, links: LinkTable) {
    links.listeners.set(`127.0.0.1:${this.ports[id]}`, id)
    const process = new ProcessState()
    const fileSystem = new FaultyFileSystem(nodeFileSystem, process, (ms) => sleep(ms))
    const network = new FaultyNetwork(nodeNetwork, id, process, links)
    const store = new ProcessStore(this.store, process, this.store)
    const broker = await Broker.start(brokerConfigFromProperties(properties), {
      clock: new ProcessClock(this.clock, process),
      random: systemRandom,
      fileSystem,
      network,
      store,
      logger: this.logger.child({ broker: id }),
    })
    return new LocalIncarnation(broker, process, fileSystem, network, store, (error) =>
      this.logger.warn({ err: error }, 'registry close failed'),
    )
  }

  private async startThread(id: number, properties: ReadonlyMap<string, string>, links: SharedLinkState) {
    SharedProcessState.setDead(links.dead, id, false)
    const thread = await BrokerThread.spawn(
      new URL('./broker-worker.js', import.meta.url),
      { nodeId: id, properties: [...properties], extra: links },
      this.store,
      this.logger,
    )
    return new ThreadIncarnation(thread, id, this.store, links)
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
    const incarnation = this.incarnation(id)
    this.running.delete(id)
    this.exits.set(id, incarnation.kill())
  }

  /** kill, and every byte the broker wrote but did not fsync is lost (a machine losing power). */
  async powerLoss(id: number): Promise<{ files: number; bytes: number }> {
    const incarnation = this.incarnation(id)
    this.running.delete(id)
    const { exited, lost } = incarnation.powerLoss()
    this.exits.set(id, exited)
    return lost
  }

  /** Starts broker `id` again on its data (after kill, powerLoss or stopBroker). */
  async restart(id: number): Promise<void> {
    await this.startBroker(id)
  }

  /** Controlled shutdown of one broker (its leaderships move first, logs flushed). */
  async stopBroker(id: number): Promise<void> {
    const incarnation = this.incarnation(id)
    this.running.delete(id)
    await incarnation.stop()
  }

  /** As SIGSTOP: nothing of broker `id` makes progress, and its session is not kept alive. */
  pause(id: number): void {
    this.incarnation(id).pause()
  }

  /** As SIGCONT. A broker paused past its session finds it lost, and registers again. */
  resume(id: number): void {
    this.incarnation(id).resume()
  }

  /** Cuts every link of broker `id`: to and from the other brokers and the clients. */
  isolate(id: number): void {
    for (const other of [...this.brokerIds.filter((b) => b !== id), 'client' as const]) this.cut(id, other)
    this.incarnation(id).cutStoreLink()
  }

  /** Cuts the link between `a` and `b` both ways (`oneWay`: only from a to b); 'client' is every client. */
  cut(a: LinkEnd, b: LinkEnd, options: { oneWay?: boolean } = {}): void {
    this.links.cutOneWay(a, b)
    if (options.oneWay !== true) this.links.cutOneWay(b, a)
  }

  /** Heals every cut link; held bytes flow again. */
  heal(): void {
    this.links.clear()
    for (const incarnation of this.running.values()) incarnation.heal()
  }

  /** Every disk operation of broker `id` takes `ms` longer (0: back to normal). */
  slowDisk(id: number, ms: number): void {
    this.incarnation(id).slowDisk(ms)
  }

  /** Writes of broker `id` fail with ENOSPC (`full` false: space again). */
  diskFull(id: number, full = true): void {
    this.incarnation(id).diskFull(full)
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
    let elected = false
    for (const incarnation of this.running.values())
      if (await incarnation.electPreferredLeader(`${topic}:${partition}`)) elected = true
    if (!elected) throw new Error('no active controller')
    return this.leaderOf(topic, partition)
  }

  /** Creates a topic and waits until every partition's leader serves it. */
  async createTopic(topic: TestTopic): Promise<void> {
    const [created] = await this.anyIncarnation().createTopics(
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
    if (created.errorCode !== ErrorCode.NONE)
      throw new Error(
        `creating topic ${topic.name}: error ${created.errorCode}: ${created.errorMessage ?? ''}`,
      )
    await this.waitUntil(
      `every partition of ${topic.name} served by its leader`,
      async () => {
        const partitions = this.image().topics.get(topic.name)?.partitions
        if (partitions === undefined) return false
        for (const p of partitions)
          if (!(await this.running.get(p.leader)?.isLeader(topic.name, p.partition))) return false
        return true
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
      incarnation.resume()
      this.running.delete(id)
      await incarnation.stop()
    }
    await Promise.all(this.exits.values())
    this.truth?.close()
    await this.store.close()
    await rm(this.root, { recursive: true, force: true })
  }

  private image(): ClusterImage {
    if (!this.truth) throw new Error('the cluster is not started')
    return this.truth.image()
  }

  private anyIncarnation(): Incarnation {
    const first = this.running.values().next()
    if (first.done) throw new Error('no broker is running')
    return first.value
  }

  private async waitUntil(
    what: string,
    done: () => boolean | Promise<boolean>,
    timeoutMs: number,
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (!(await done())) {
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
