/**
 * An in-process cluster whose brokers can be stopped and started again one at a time on
 * their own data directory and port (startCluster cannot restart one broker): every broker
 * is a Broker.start on one shared EmbeddedStore, with a replica-fetcher transport the test
 * can freeze (a follower that is alive and registered but does not fetch).
 */
import { createHash } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { systemClock } from '../../src/common/clock.js'
import type { ByteStream, Network } from '../../src/common/network.js'
import type { Offset } from '../../src/common/types.js'
import type { PartitionState } from '../../src/metadata/cluster-image.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import type { Partition } from '../../src/replication/partition.js'
import { nodeNetwork } from '../../src/runtime/node-network.js'
import { nodeParts } from '../../src/runtime/node-parts.js'
import { Broker } from '../../src/server/broker.js'
import { brokerConfigFromProperties } from '../../src/server/broker-config.js'
import { freePort } from '../helpers/broker-process.js'
import { guardedLogger } from '../helpers/log-guard.js'
import { waitUntil as waitUntilPolling } from '../helpers/wait.js'

/** TCP whose traffic can be held (nothing delivered either way) and released, like a partition. */
export class FreezableTransport implements Network {
  private frozen = false
  private readonly held: (() => void)[] = []

  freeze(): void {
    this.frozen = true
  }

  thaw(): void {
    this.frozen = false
    for (const release of this.held.splice(0)) release()
  }

  private run(action: () => void): void {
    if (this.frozen) this.held.push(action)
    else action()
  }

  listen(host: string, port: number, onConnection: (stream: ByteStream) => void) {
    return nodeNetwork.listen(host, port, onConnection)
  }

  async connect(host: string, port: number): Promise<ByteStream> {
    const inner = await nodeNetwork.connect(host, port)
    return {
      remoteAddress: inner.remoteAddress,
      get writableNeedDrain() {
        return inner.writableNeedDrain
      },
      pause: () => inner.pause(),
      resume: () => inner.resume(),
      onDrain: (listener) => inner.onDrain(listener),
      write: (chunks) => this.run(() => inner.write(chunks)),
      onData: (listener) => inner.onData((chunk) => this.run(() => listener(chunk))),
      onClose: (listener) => inner.onClose((error) => this.run(() => listener(error))),
      destroy: () => inner.destroy(),
    }
  }
}

export class ReplicationCluster {
  readonly brokers: (Broker | null)[]
  readonly transports: FreezableTransport[]

  private constructor(
    private readonly store: EmbeddedStore,
    private readonly root: string,
    private readonly ports: number[],
    private readonly properties: Readonly<Record<string, string | number | boolean>>,
  ) {
    this.brokers = ports.map(() => null)
    this.transports = ports.map(() => new FreezableTransport())
  }

  static async start(
    count: number,
    properties: Readonly<Record<string, string | number | boolean>>,
  ): Promise<ReplicationCluster> {
    const root = await mkdtemp(join(tmpdir(), 'tidelog-repl-'))
    const store = await EmbeddedStore.open({ clock: systemClock })
    const ports: number[] = []
    for (let i = 0; i < count; i++) ports.push(await freePort())
    const cluster = new ReplicationCluster(store, root, ports, properties)
    try {
      for (let i = 0; i < count; i++) await cluster.startBroker(i)
    } catch (error) {
      await cluster.close()
      throw error
    }
    return cluster
  }

  async startBroker(index: number): Promise<Broker> {
    if (this.brokers[index]) throw new Error(`broker ${index} is running`)
    const props = new Map<string, string>(Object.entries(this.properties).map(([k, v]) => [k, String(v)]))
    props.set('node.id', String(index))
    props.set('log.dirs', join(this.root, `broker-${index}`))
    props.set('listeners', `PLAINTEXT://127.0.0.1:${this.ports[index]}`)
    const broker = await Broker.start(brokerConfigFromProperties(props), {
      ...nodeParts,
      store: this.store,
      network: this.transports[index],
      logger: guardedLogger(`broker-${index}`),
    })
    this.brokers[index] = broker
    return broker
  }

  /** Controlled shutdown of one broker (its leaderships move first). */
  async stopBroker(index: number): Promise<void> {
    const broker = this.brokers[index]
    this.brokers[index] = null
    await broker?.stop()
  }

  broker(index: number): Broker {
    const broker = this.brokers[index]
    if (!broker) throw new Error(`broker ${index} is stopped`)
    return broker
  }

  get running(): Broker[] {
    return this.brokers.filter((b): b is Broker => b !== null)
  }

  get bootstrap(): string {
    return this.running.map((b) => b.bootstrapServers).join(',')
  }

  /** The partition state as the metadata holds it now. */
  state(topic: string, partition: number): PartitionState {
    const state = this.running[0].metadataImage().topics.get(topic)?.partitions[partition]
    if (!state) throw new Error(`${topic}-${partition} unknown`)
    return state
  }

  replica(index: number, topic: string, partition: number): Partition {
    const hosted = this.broker(index).replicaManager.getPartition(topic, partition)
    if (!hosted) throw new Error(`broker ${index} does not host ${topic}-${partition}`)
    return hosted
  }

  /** Creates a topic through broker metadata and waits until every replica hosts it with a known leader. */
  async createTopic(
    name: string,
    partitions: number,
    replicationFactor: number,
    configs = {},
  ): Promise<void> {
    const broker = this.running[0]
    await broker.metadata.update((image) => {
      const topic = broker.metadata.createTopicImage({ name, partitions, replicationFactor, configs })
      return { ...image, topics: new Map(image.topics).set(name, topic) }
    })
    await waitUntil(`${name} hosted everywhere`, 10000, () => {
      const state = this.state(name, 0)
      for (let p = 0; p < partitions; p++) {
        for (const id of this.state(name, p).replicas) {
          if (!this.brokers[id]?.replicaManager.getPartition(name, p)) return false
        }
      }
      return state.leader >= 0
    })
  }

  async close(): Promise<void> {
    for (let i = 0; i < this.brokers.length; i++) await this.stopBroker(i)
    await this.store.close()
    await rm(this.root, { recursive: true, force: true })
  }
}

/** wait.ts's waitUntil polling every 10 ms (these brokers are in-process: state changes fast). */
export function waitUntil(
  what: string,
  timeoutMs: number,
  condition: () => boolean | Promise<boolean>,
): Promise<void> {
  return waitUntilPolling(what, timeoutMs, condition, 10)
}

/** SHA-256 and length of every batch of a replica's log from its start up to `end`, as stored. */
export async function logDigest(
  partition: Partition,
  end: number,
): Promise<{ bytes: number; sha256: string }> {
  const log = partition.log
  const hash = createHash('sha256')
  let bytes = 0
  let offset = log.logStartOffset
  while (offset < end) {
    const info = await log.read(offset, { maxBytes: 4 << 20, maxOffset: end as Offset, minOneMessage: true })
    if (info.sizeInBytes === 0) throw new Error(`no progress reading ${log.dir} at ${offset}`)
    for (const chunk of info.records) {
      hash.update(chunk)
      bytes += chunk.length
    }
    offset = info.nextOffset
  }
  return { bytes, sha256: hash.digest('hex') }
}
