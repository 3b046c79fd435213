/**
 * tidelog's own producer with enableIdempotence (issue 8 item 4, issue 7 item 1).
 *
 * Options: idempotence is on by default with acks=all, off otherwise, and explicit `true`
 * with acks other than all (or retries 0, or more than 5 in flight) is refused.
 *
 * Forced retries: three in-process brokers (one embedded store, RF=3, min.insync.replicas
 * 2), each behind a TCP proxy it advertises. The proxies lose the responses of some
 * Produce requests after the broker wrote them, and the leader of a partition is stopped
 * mid-stream and started again, while tidelog's producer (acks all, 5 requests in flight)
 * writes numbered records. Read back with tidelog's consumer: every record exactly once,
 * in send order per partition, and each at the offset its send resolved with.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Producer, type RecordMetadata } from '../../src/client/producer.js'
import { systemClock } from '../../src/common/clock.js'
import { silentLogger } from '../../src/common/logger.js'
import { EmbeddedStore } from '../../src/metadata/store/embedded-store.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import { Broker } from '../../src/server/broker.js'
import { brokerConfigFromProperties } from '../../src/server/broker-config.js'
import { freePort } from '../helpers/broker-process.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'
import { waitUntil } from '../replication/in-process-cluster.js'
import { readAll, text } from './helpers.js'

const PROPERTIES: Record<string, string> = {
  'broker.session.timeout.ms': '3000',
  'replica.lag.time.max.ms': '3000',
  'replica.fetch.backoff.ms': '100',
  'min.insync.replicas': '2',
  'default.replication.factor': '3',
  'auto.create.topics.enable': 'false',
  'log.segment.bytes': '65536',
}

/** Three brokers, broker i listening on ports[i] and advertising proxies[i]. */
class ProxiedCluster {
  readonly brokers: (Broker | null)[] = [null, null, null]
  private constructor(
    readonly store: EmbeddedStore,
    readonly root: string,
    readonly ports: number[],
    readonly proxies: TcpProxy[],
  ) {}

  static async start(): Promise<ProxiedCluster> {
    const root = await mkdtemp(join(tmpdir(), 'tidelog-client-idem-'))
    const store = await EmbeddedStore.open({ clock: systemClock })
    const ports = [await freePort(), await freePort(), await freePort()]
    const proxies = ports.map((port) => new TcpProxy(port))
    for (const proxy of proxies) await proxy.listen()
    const cluster = new ProxiedCluster(store, root, ports, proxies)
    for (let i = 0; i < 3; i++) await cluster.startBroker(i)
    return cluster
  }

  async startBroker(i: number): Promise<void> {
    const props = new Map(Object.entries(PROPERTIES))
    props.set('node.id', String(i))
    props.set('log.dirs', join(this.root, `broker-${i}`))
    props.set('listeners', `PLAINTEXT://127.0.0.1:${this.ports[i]}`)
    props.set('advertised.listeners', `PLAINTEXT://127.0.0.1:${this.proxies[i].port}`)
    this.brokers[i] = await Broker.start(brokerConfigFromProperties(props), {
      store: this.store,
      logger: silentLogger,
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
    await broker.updateMetadata((image) => {
      const topic = broker.placeNewTopic({ name, partitions, replicationFactor: 3, configs: {} })
      return { ...image, topics: new Map(image.topics).set(name, topic) }
    })
    await this.waitFullIsr(name, partitions)
  }

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

  async close(): Promise<void> {
    for (let i = 0; i < 3; i++) await this.stopBroker(i)
    for (const proxy of this.proxies) await proxy.close()
    await this.store.close()
    await rm(this.root, { recursive: true, force: true })
  }
}

/** Every expected value exactly once and in order; returns what is wrong (at most 10 lines). */
function problems(actual: readonly string[], expected: readonly string[]): string[] {
  const found: string[] = []
  const seen = new Set<string>()
  for (const v of actual) {
    if (seen.has(v)) found.push(`duplicate ${v}`)
    seen.add(v)
  }
  for (const v of expected) if (!seen.has(v)) found.push(`missing ${v}`)
  const wanted = new Set(expected)
  const order = actual.filter((v) => wanted.has(v))
  const inOrder = expected.filter((v) => seen.has(v))
  if (order.join() !== inOrder.join()) found.push('out of send order')
  return found.slice(0, 10)
}

describe('enableIdempotence options', () => {
  const bootstrapServers = '127.0.0.1:1'
  it('on by default with acks=all, off with acks 0/1 or when disabled', () => {
    const made: Producer[] = []
    try {
      const defaults = new Producer({ bootstrapServers })
      made.push(defaults)
      assert.equal(defaults.isIdempotent, true)
      const all = new Producer({ bootstrapServers, acks: -1 })
      made.push(all)
      assert.equal(all.isIdempotent, true)
      for (const acks of [0, 1] as const) {
        const p = new Producer({ bootstrapServers, acks })
        made.push(p)
        assert.equal(p.isIdempotent, false)
      }
      const off = new Producer({ bootstrapServers, enableIdempotence: false })
      made.push(off)
      assert.equal(off.isIdempotent, false)
      const noRetries = new Producer({ bootstrapServers, retries: 0 })
      made.push(noRetries)
      assert.equal(noRetries.isIdempotent, false, 'retries 0 turns the default off, as in Kafka')
      const many = new Producer({ bootstrapServers, maxInFlightRequestsPerConnection: 10 })
      made.push(many)
      assert.equal(many.isIdempotent, true, 'max.in.flight is capped at 5 instead')
      const explicit = new Producer({ bootstrapServers, enableIdempotence: true, acks: 'all' })
      made.push(explicit)
      assert.equal(explicit.isIdempotent, true)
      assert.equal(explicit.producerIdentity, null, 'no producer id before the first send')
    } finally {
      for (const p of made) p.client.close()
    }
  })

  it('explicit true with acks other than all, retries 0 or more than 5 in flight is a configuration error', () => {
    for (const bad of [
      { acks: 1 as const },
      { acks: 0 as const },
      { retries: 0 },
      { maxInFlightRequestsPerConnection: 6 },
      { enableIdempotence: 'yes' as unknown as boolean },
    ]) {
      assert.throws(() => new Producer({ bootstrapServers, enableIdempotence: true, ...bad }), {
        code: 'ERR_INVALID_ARGUMENT',
      })
    }
  })
})

describe("tidelog's idempotent producer with forced retries (3 brokers behind proxies)", () => {
  let cluster: ProxiedCluster
  before(async () => {
    cluster = await ProxiedCluster.start()
  })
  after(async () => {
    await cluster?.close()
  })

  it('lost responses and a stopped/restarted leader leave every record once, in send order, at its acknowledged offset', async () => {
    const topic = 'client-idem'
    const partitions = 3
    const records = 3000
    await cluster.createTopic(topic, partitions)
    const producer = new Producer({
      bootstrapServers: cluster.bootstrap,
      clientId: 'client-idem',
      acks: 'all',
      maxInFlightRequestsPerConnection: 5,
      lingerMs: 2,
      batchSize: 2048,
      requestTimeoutMs: 3000,
      deliveryTimeoutMs: 90000,
      retryBackoffMs: 50,
      retryBackoffMaxMs: 500,
    })
    const expected: string[][] = Array.from({ length: partitions }, () => [])
    const acked = new Map<string, RecordMetadata>()
    const failed: string[] = []
    const pending: Promise<unknown>[] = []
    const victim = cluster.leaderOf(topic, 0)
    cluster.dropEvery(5)
    try {
      for (let i = 0; i < records; i++) {
        if (i === 1000) await cluster.stopBroker(victim)
        if (i === 2000) await cluster.startBroker(victim)
        const partition = i % partitions
        const value = `c-${i}`
        expected[partition].push(value)
        pending.push(
          producer.send({ topic, partition, value }).then(
            (metadata) => acked.set(value, metadata),
            (error: Error) => failed.push(`${value}: ${error.message}`),
          ),
        )
        // A steady stream, so sends straddle the lost responses and the leader change.
        if (i % 30 === 29) await sleep(20)
      }
      await producer.flush()
      await Promise.all(pending)
    } finally {
      const dropped = cluster.stopDropping()
      await producer.close()
      assert.ok(dropped >= 10, `only ${dropped} responses were lost`)
    }
    assert.deepEqual(failed.slice(0, 5), [], 'every send acknowledged')
    assert.equal(acked.size, records)
    const metrics = producer.metrics()
    assert.ok(metrics.retries > 0, 'the lost responses forced retries')
    assert.equal(metrics.failedBatches, 0)

    await cluster.waitFullIsr(topic, partitions, 30000)
    const read = await readAll(cluster.bootstrap, topic)
    for (let p = 0; p < partitions; p++) {
      const inPartition = read.filter((r) => r.partition === p)
      const values = inPartition.map((r) => text(r.value) ?? '')
      assert.deepEqual(problems(values, expected[p]), [], `${topic}-${p}`)
      // A duplicate answered with its first offsets: each send resolved with where it is.
      for (const record of inPartition) {
        const metadata = acked.get(text(record.value) ?? '')
        assert.equal(metadata?.offset, record.offset, `offset of ${text(record.value)}`)
        assert.equal(metadata?.partition, p)
      }
    }
  })

  it('sync style (await each send): a leader stopped mid-stream and lost responses leave no duplicate', async () => {
    const topic = 'client-idem-sync'
    await cluster.createTopic(topic, 2)
    const producer = new Producer({
      bootstrapServers: cluster.bootstrap,
      clientId: 'client-idem-sync',
      requestTimeoutMs: 3000,
      deliveryTimeoutMs: 90000,
      retryBackoffMs: 50,
      retryBackoffMaxMs: 500,
      lingerMs: 0,
    })
    assert.equal(producer.isIdempotent, true, 'idempotent by default (acks all)')
    const victim = cluster.leaderOf(topic, 1)
    const expected: string[][] = [[], []]
    cluster.dropEvery(3)
    try {
      for (let i = 0; i < 200; i++) {
        if (i === 70) await cluster.stopBroker(victim)
        if (i === 140) await cluster.startBroker(victim)
        const value = `s-${i}`
        const metadata = await producer.send({ topic, key: `key-${i % 7}`, value })
        expected[metadata.partition].push(value)
      }
    } finally {
      cluster.stopDropping()
      await producer.close()
    }
    const identity = producer.producerIdentity
    assert.ok(identity && identity.producerId >= 0n && identity.producerEpoch >= 0)
    await cluster.waitFullIsr(topic, 2, 30000)
    const read = await readAll(cluster.bootstrap, topic)
    for (let p = 0; p < 2; p++) {
      const values = read.filter((r) => r.partition === p).map((r) => text(r.value) ?? '')
      assert.deepEqual(problems(values, expected[p]), [], `${topic}-${p}`)
    }
  })
})
