/**
 * Three in-process brokers on one embedded store, each behind a TCP proxy it advertises, so
 * a test can lose the responses of client Produce requests after the broker wrote them
 * (`dropEvery`) and stop and start brokers; for the idempotence tests with real clients.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { systemClock } from '../../src/common/clock.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import { decodeRecordBatch } from '../../src/protocol/record-batch.js'
import { nodeParts } from '../../src/runtime/node-parts.js'
import { Broker } from '../../src/server/broker.js'
import { brokerConfigFromProperties } from '../../src/server/broker-config.js'
import { waitUntil } from '../replication/in-process-cluster.js'
import { freePort } from './broker-process.js'
import { guardedLogger } from './log-guard.js'
import { TcpProxy } from './tcp-proxy.js'

const PROPERTIES: Record<string, string> = {
  'broker.session.timeout.ms': '3000',
  'replica.lag.time.max.ms': '3000',
  'replica.fetch.backoff.ms': '100',
  'min.insync.replicas': '2',
  'default.replication.factor': '3',
  'auto.create.topics.enable': 'false',
}

/** Three brokers, broker i listening on ports[i] and advertising proxies[i]. */
export class ProxiedCluster {
  readonly brokers: (Broker | null)[] = [null, null, null]
  private constructor(
    readonly store: EmbeddedStore,
    readonly root: string,
    readonly ports: number[],
    readonly proxies: TcpProxy[],
    private readonly segmentBytes: number,
  ) {}

  /** `segmentBytes`: log.segment.bytes (small: rolls and producer snapshots happen during a run). */
  static async start(segmentBytes = 16384): Promise<ProxiedCluster> {
    const root = await mkdtemp(join(tmpdir(), 'tidelog-proxied-'))
    const store = await EmbeddedStore.open({ clock: systemClock })
    const ports = [await freePort(), await freePort(), await freePort()]
    const proxies = ports.map((port) => new TcpProxy(port))
    const cluster = new ProxiedCluster(store, root, ports, proxies, segmentBytes)
    try {
      for (const proxy of proxies) await proxy.listen()
      for (let i = 0; i < 3; i++) await cluster.startBroker(i)
    } catch (error) {
      // What started must stop, or its handles keep the test file alive to its timeout.
      await cluster.close()
      throw error
    }
    return cluster
  }

  async startBroker(i: number): Promise<void> {
    const props = new Map(Object.entries(PROPERTIES))
    props.set('log.segment.bytes', String(this.segmentBytes))
    props.set('node.id', String(i))
    props.set('log.dirs', join(this.root, `broker-${i}`))
    props.set('listeners', `PLAINTEXT://127.0.0.1:${this.ports[i]}`)
    props.set('advertised.listeners', `PLAINTEXT://127.0.0.1:${this.proxies[i].port}`)
    this.brokers[i] = await Broker.start(brokerConfigFromProperties(props), {
      ...nodeParts,
      store: this.store,
      logger: guardedLogger(`broker-${i}`),
    })
  }

  async stopBroker(i: number): Promise<void> {
    const broker = this.brokers[i]
    this.brokers[i] = null
    await broker?.stop()
  }

  get bootstrap(): string {
    return this.proxies.map((p) => `127.0.0.1:${p.port}`).join(',')
  }

  get any(): Broker {
    const broker = this.brokers.find((b) => b !== null)
    if (!broker) throw new Error('no broker running')
    return broker
  }

  leaderOf(topic: string, partition: number): number {
    return this.any.metadataImage().topics.get(topic)?.partitions[partition]?.leader ?? -1
  }

  /** Loses the response of every `every`-th client Produce request (replica traffic untouched). */
  dropEvery(every: number): void {
    let count = 0
    for (const proxy of this.proxies) {
      proxy.dropResponses(({ apiKey, clientId }) => {
        if (apiKey !== ApiKey.Produce || clientId?.startsWith('tidelog-replica')) return false
        return ++count % every === 0
      })
    }
  }

  stopDropping(): number {
    for (const proxy of this.proxies) proxy.dropResponses(null)
    return this.proxies.reduce((sum, p) => sum + p.droppedResponses, 0)
  }

  async createTopic(name: string, partitions: number): Promise<void> {
    const broker = this.any
    await broker.metadata.update((image) => {
      const topic = broker.metadata.createTopicImage({ name, partitions, replicationFactor: 3, configs: {} })
      return { ...image, topics: new Map(image.topics).set(name, topic) }
    })
    await this.waitFullIsr(name, partitions)
  }

  /** Every partition led, with all 3 replicas in the ISR and hosting it. */
  async waitFullIsr(name: string, partitions: number, timeoutMs = 15000): Promise<void> {
    await waitUntil(`${name} led and fully replicated`, timeoutMs, () => {
      for (let p = 0; p < partitions; p++) {
        const state = this.any.metadataImage().topics.get(name)?.partitions[p]
        if (!state || state.leader < 0 || state.isr.length < 3) return false
        for (const id of state.replicas)
          if (!this.brokers[id]?.replicaManager.getPartition(name, p)) return false
      }
      return true
    })
  }

  /** Record values of `topic-partition` as its leader's log holds them up to the high watermark. */
  async values(topic: string, partition: number): Promise<string[]> {
    const hosted = this.brokers[this.leaderOf(topic, partition)]?.replicaManager.getPartition(
      topic,
      partition,
    )
    if (!hosted) throw new Error(`no leader for ${topic}-${partition}`)
    const out: string[] = []
    let offset = hosted.log.logStartOffset
    while (offset < hosted.highWatermark) {
      const read = await hosted.log.read(offset, { maxBytes: 1 << 20, maxOffset: hosted.highWatermark })
      for (const chunk of read.records) {
        for (let at = 0; at < chunk.length; ) {
          const batch = await decodeRecordBatch(chunk, at)
          for (const record of batch.records) out.push(record.value?.toString() ?? '')
          at += 12 + chunk.readInt32BE(at + 8)
        }
      }
      offset = read.nextOffset
    }
    return out
  }

  async close(): Promise<void> {
    for (let i = 0; i < 3; i++) await this.stopBroker(i)
    for (const proxy of this.proxies) await proxy.close()
    await this.store.close()
    await rm(this.root, { recursive: true, force: true })
  }
}

/** Every expected value exactly once and in order; returns a description of what is wrong. */
export function problems(actual: readonly string[], expected: readonly string[]): string[] {
  const found: string[] = []
  const seen = new Set<string>()
  for (const v of actual) {
    if (seen.has(v)) found.push(`duplicate ${v}`)
    seen.add(v)
  }
  for (const v of expected) if (!seen.has(v)) found.push(`missing ${v}`)
  const order = actual.filter((v) => expected.includes(v))
  const inOrder = expected.filter((v) => seen.has(v))
  if (order.join() !== inOrder.join()) found.push('out of send order')
  return found.slice(0, 10)
}
