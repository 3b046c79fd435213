/**
 * Issue 6's fault-injection suite: etcd and three `tidelog broker` processes, each behind a
 * TCP proxy it advertises (so clients and the other brokers reach it only through the
 * proxy). Producers (two confluent-kafka processes, two kafkajs producers in this process)
 * write uniquely numbered records ("<producer>-<seq>", partition = seq % partitions, one
 * request in flight, retries on) while the suite kill -9s leaders and followers, restarts
 * them, stops them cleanly, isolates a broker, cuts the link between two, and resets
 * connections, one fault at a time. After healing it waits for every partition to have a
 * leader and a full ISR, consumes everything and checks: no acknowledged record lost, every
 * acknowledged record at the offset it was acknowledged with, per-partition order of
 * acknowledged records by producer sequence, replicas' .log bytes identical up to the high
 * watermark. Duplicates of the plain producers are counted, not failed. Two idempotent
 * producers (confluent-kafka 2.16 `enable.idempotence`, 5 in flight, and kafkajs `idempotent`)
 * write alongside ("i…" names); their duplicates are reported apart and must be zero.
 *
 * Every send, ack and fail, the final read and its coverage of each partition also go to a
 * history file (docs/history-format.md) that `tidelog verify`'s checker reads back, as an
 * independent second check of the same run; the file is kept when the checker finds anything.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kafka, type KafkaConfig, logLevel } from 'kafkajs'
import type { MetadataStore } from '../../src/metadata/store/metadata-store.js'
import { checkHistory, type VerifyReport } from '../../src/verify/checker.js'
import { formatVerifyReport } from '../../src/verify/format.js'
import { HistoryWriter, readHistoryFile } from '../../src/verify/history-file.js'
import { BrokerProcess, freePort } from '../helpers/broker-process.js'
import { makeTestCerts, type TestCerts } from '../helpers/certs.js'
import { confluent, confluentConsume, pypiPython } from '../helpers/compat-clients.js'
import { type EtcdProcess, startEtcd } from '../helpers/etcd.js'
import {
  type Ack,
  analyse,
  committedDigest,
  dirLogBytes,
  type HistoryAnalysis,
  IDEMPOTENT_PREFIX,
  KafkajsProducer,
  type ProducerObserver,
  PythonProducer,
  prng,
} from '../helpers/fault-history.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'
import { waitUntil } from '../helpers/wait.js'

export interface FaultOptions {
  readonly seconds: number
  readonly acks: 'all' | '1'
  readonly unclean: boolean
  readonly partitions?: number
  readonly seed?: number
  /** Faults injected first, in this order, before the seeded random ones (a named scenario's faults). */
  readonly faults?: readonly Fault[]
  /** Records per second of each confluent-kafka producer. */
  readonly rate?: number
  /** Where to write the run's history; default: a temporary file, deleted when the checker passes. */
  readonly historyFile?: string
  /**
   * How every connection is made, the brokers' replication included (default PLAINTEXT).
   * SASL_SSL: one SASL_SSL listener per broker with PLAIN users from its JAAS property and a
   * throwaway CA; clients and followers reach it through its proxy, so the faults cut TLS
   * sessions mid-record and reconnections repeat the handshake and the authentication.
   */
  readonly security?: FaultSecurity
  readonly log?: (line: string) => void
}

export interface FaultReport extends HistoryAnalysis {
  readonly options: Required<Omit<FaultOptions, 'log' | 'historyFile'>>
  readonly durationMs: number
  readonly faults: Record<string, number>
  /** Every fault as injected, in order (what a test asserts its scenario by). */
  readonly events: readonly FaultEvent[]
  readonly sent: number
  readonly consumed: number
  readonly highWatermarks: number[]
  readonly replicasIdentical: boolean
  readonly replicaProblems: string[]
  readonly uncleanElections: number
  /** The history checker's verdict on the run's history file. */
  readonly history: { readonly file: string; readonly kept: boolean; readonly report: VerifyReport }
}

export type FaultSecurity = 'PLAINTEXT' | 'SASL_SSL'

/** The credentials of the SASL_SSL runs: a broker user for replication, a client user for the rest. */
const SASL_JAAS =
  'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret" user_client="client-secret";'

/** What brokers and clients are configured with for one run's security protocol. */
interface SecuritySetup {
  readonly protocol: FaultSecurity
  brokerProperties(port: number, proxyPort: number): Record<string, string>
  /** librdkafka properties (confluent-kafka). */
  readonly librdkafka: Record<string, string>
  readonly kafkajs: Pick<KafkaConfig, 'ssl' | 'sasl'>
  cleanup(): Promise<void>
}

async function securitySetup(protocol: FaultSecurity): Promise<SecuritySetup> {
  if (protocol === 'PLAINTEXT')
    return {
      protocol,
      brokerProperties: (_port, proxyPort) => ({
        'advertised.listeners': `PLAINTEXT://127.0.0.1:${proxyPort}`,
      }),
      librdkafka: {},
      kafkajs: {},
      cleanup: async () => undefined,
    }
  const certs: TestCerts = await makeTestCerts()
  return {
    protocol,
    brokerProperties: (port, proxyPort) => ({
      listeners: `SASL_SSL://127.0.0.1:${port}`,
      'advertised.listeners': `SASL_SSL://127.0.0.1:${proxyPort}`,
      'security.inter.broker.protocol': 'SASL_SSL',
      'sasl.enabled.mechanisms': 'PLAIN',
      'sasl.mechanism.inter.broker.protocol': 'PLAIN',
      'listener.name.sasl_ssl.plain.sasl.jaas.config': SASL_JAAS,
      'ssl.keystore.type': 'PEM',
      'ssl.keystore.location': certs.brokerKeystore,
      'ssl.truststore.type': 'PEM',
      'ssl.truststore.location': certs.caFile,
    }),
    librdkafka: {
      'security.protocol': 'SASL_SSL',
      'sasl.mechanism': 'PLAIN',
      'sasl.username': 'client',
      'sasl.password': 'client-secret',
      'ssl.ca.location': certs.caFile,
    },
    kafkajs: {
      ssl: { ca: [certs.caPem] },
      sasl: { mechanism: 'plain', username: 'client', password: 'client-secret' },
    },
    cleanup: () => certs.cleanup(),
  }
}

const TOPIC = 'fault'
/** Whether a producer's client may put its own retried records after newer ones (see analyse's call). */
function clientMayReorder(producer: string): boolean {
  return producer.startsWith('ck')
}

const BROKERS = [1, 2, 3]

interface PartitionInfo {
  leader: number
  leaderEpoch: number
  isr: number[]
}

class FaultCluster {
  readonly brokers = new Map<number, BrokerProcess>()
  readonly proxies = new Map<number, TcpProxy>()
  store: MetadataStore | null = null

  constructor(
    readonly etcd: EtcdProcess,
    readonly root: string,
    readonly security: SecuritySetup,
  ) {}

  get bootstrap(): string {
    return [...this.proxies.values()].map((p) => `127.0.0.1:${p.port}`).join(',')
  }

  async partitions(): Promise<PartitionInfo[]> {
    const { kvs } = await this.store!.range(`partitions/${TOPIC}/`)
    const out: PartitionInfo[] = []
    for (const kv of kvs) out[Number(kv.key.split('/').pop())] = JSON.parse(kv.value) as PartitionInfo
    return out
  }

  async registered(): Promise<number[]> {
    const { kvs } = await this.store!.range('brokers/')
    return kvs.map((kv) => Number(kv.key.split('/').pop())).sort()
  }

  healAll(): void {
    for (const proxy of this.proxies.values()) proxy.heal()
  }

  async close(): Promise<void> {
    await Promise.all([...this.brokers.values()].map((b) => b.kill()))
    for (const proxy of this.proxies.values()) await proxy.close()
    await this.store?.close()
    await this.etcd.stop()
    await rm(this.root, { recursive: true, force: true })
    await this.security.cleanup()
  }
}

async function startFaultCluster(options: FaultReport['options']): Promise<FaultCluster> {
  const security = await securitySetup(options.security)
  const etcd = await startEtcd()
  const root = await mkdtemp(join(tmpdir(), 'tidelog-fault-'))
  const cluster = new FaultCluster(etcd, root, security)
  try {
    const { EtcdStore } = await import('../../src/metadata/store/etcd-store.js')
    cluster.store = await EtcdStore.connect({ endpoints: [etcd.endpoint] })
    for (const nodeId of BROKERS) {
      const port = await freePort()
      const proxy = new TcpProxy(port)
      await proxy.listen()
      cluster.proxies.set(nodeId, proxy)
      cluster.brokers.set(
        nodeId,
        new BrokerProcess({
          nodeId,
          port,
          logDir: join(root, `broker-${nodeId}`),
          etcdEndpoint: etcd.endpoint,
          properties: {
            ...security.brokerProperties(port, proxy.port),
            'broker.session.timeout.ms': 3000,
            'replica.lag.time.max.ms': 3000,
            'replica.fetch.backoff.ms': 200,
            'default.replication.factor': 3,
            'min.insync.replicas': 2,
            'unclean.leader.election.enable': options.unclean,
            'auto.create.topics.enable': false,
          },
        }),
      )
    }
    await Promise.all([...cluster.brokers.values()].map((b) => b.start(30000)))
    await waitFor('3 brokers registered', 20000, async () => (await cluster.registered()).length === 3)
    return cluster
  } catch (error) {
    await cluster.close()
    throw error
  }
}

async function waitFor(
  what: string,
  timeoutMs: number,
  probe: () => Promise<boolean> | boolean,
): Promise<void> {
  // A probe that throws while a broker restarts is polled again; its last error is the failure.
  return waitUntil(what, timeoutMs, probe, 100)
}

/** A producer's sends and outcomes as send, ack and fail events of the history. */
function historyObserver(history: HistoryWriter, producer: string): ProducerObserver {
  return {
    onSend: (seq, partition, timeMs) =>
      history.send({
        producer,
        seq,
        topic: TOPIC,
        partition,
        key: null,
        value: `${producer}-${seq}`,
        ...(timeMs !== undefined ? { time: timeMs } : {}),
      }),
    onOutcome: (ack, timeMs) => recordOutcome(history, ack, timeMs),
  }
}

/** A producer's answer for one record, as an ack or fail event of the history. */
function recordOutcome(history: HistoryWriter, ack: Ack, timeMs?: number): void {
  const time = timeMs === undefined ? {} : { time: timeMs }
  if (ack.error === null)
    history.ack({
      producer: ack.producer,
      seq: ack.seq,
      topic: TOPIC,
      partition: ack.partition,
      offset: ack.offset,
      ...time,
    })
  else history.fail({ producer: ack.producer, seq: ack.seq, error: ack.error, ...time })
}

export type Fault =
  | 'kill-leader'
  | 'kill-follower'
  | 'restart'
  | 'isolate'
  | 'cut-link'
  | 'reset'
  | 'strand-leader'

export interface FaultEvent {
  readonly fault: Fault
  /** The broker it hit (the first of the two for a cut link). */
  readonly target: number
  /** Partitions the target led in the store when the fault began. */
  readonly ledPartitions: number
  /**
   * Of those, how many had another leader or a higher leader epoch once the target was back
   * (the failover the fault is there to cause). -1 for faults that do not wait for that.
   */
  readonly leadershipsMoved: number
}

export const FAULTS: readonly Fault[] = [
  'kill-leader',
  'kill-follower',
  'restart',
  'isolate',
  'cut-link',
  'reset',
  'strand-leader',
]

export async function runFaultSuite(input: FaultOptions): Promise<FaultReport> {
  const options = {
    seconds: input.seconds,
    acks: input.acks,
    unclean: input.unclean,
    partitions: input.partitions ?? 3,
    seed: input.seed ?? Date.now() % 1_000_000,
    faults: input.faults ?? [],
    rate: input.rate ?? 150,
    security: input.security ?? 'PLAINTEXT',
  }
  const log = input.log ?? ((line: string) => console.log(line))
  const random = prng(options.seed)
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]
  const between = (lo: number, hi: number) => Math.round(lo + random() * (hi - lo))
  const started = Date.now()
  const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)}s`
  log(`fault suite: ${JSON.stringify(options)}`)
  const cluster = await startFaultCluster(options)
  const faults: Record<string, number> = {}
  const historyFile =
    input.historyFile ?? join(tmpdir(), `tidelog-fault-history-${options.seed}-${started}.jsonl`)
  let history: HistoryWriter | null = null
  const events: FaultEvent[] = []
  try {
    history = await HistoryWriter.create(historyFile)
    const admin = new Kafka({
      ...cluster.security.kafkajs,
      clientId: 'fault-admin',
      brokers: cluster.bootstrap.split(','),
      logLevel: logLevel.NOTHING,
    }).admin()
    await admin.connect()
    await admin.createTopics({
      topics: [{ topic: TOPIC, numPartitions: options.partitions, replicationFactor: 3 }],
    })
    await admin.disconnect()
    await waitForHealthy(cluster, options.partitions, 20000)

    const acks = options.acks === 'all' ? -1 : 1
    // Duplicates are expected of the plain producers (retries without idempotence), not of the others.
    for (const name of ['ck1', 'ck2', 'js1', 'js2']) history.producer(name, false)
    for (const name of ['ck1', 'js1']) history.producer(`${IDEMPOTENT_PREFIX}${name}`, true)
    const python = ['ck1', 'ck2'].map(
      (name) =>
        new PythonProducer(
          name,
          {
            bootstrap: cluster.bootstrap,
            topic: TOPIC,
            partitions: options.partitions,
            rate: options.rate,
            // One request in flight: librdkafka without idempotence may otherwise retry a
            // batch after newer ones reached a new leader ("retrying may cause reordering",
            // CONFIGURATION.md), which Kafka allows; with one, a reordering is the broker's.
            config: {
              ...cluster.security.librdkafka,
              acks: options.acks,
              'max.in.flight.requests.per.connection': 1,
            },
          },
          historyObserver(history!, name),
        ),
    )
    python.push(
      new PythonProducer(
        `${IDEMPOTENT_PREFIX}ck1`,
        {
          // librdkafka before 2.3.0 (Debian's is 2.0.2) counts a batch cut by a reset
          // connection as persisted; when its retry is refused unpersisted (say
          // NOT_ENOUGH_REPLICAS), the next batch's OUT_OF_ORDER_SEQUENCE_NUMBER is then a
          // fatal "sequence desynchronization" (librdkafka #4438), on Kafka too.
          python: pypiPython(),
          bootstrap: cluster.bootstrap,
          topic: TOPIC,
          partitions: options.partitions,
          rate: options.rate,
          config: {
            ...cluster.security.librdkafka,
            acks: 'all',
            'enable.idempotence': true,
            'max.in.flight.requests.per.connection': 5,
          },
        },
        historyObserver(history, `${IDEMPOTENT_PREFIX}ck1`),
      ),
    )
    const kafkajsSpec = {
      bootstrap: cluster.bootstrap,
      topic: TOPIC,
      partitions: options.partitions,
      security: cluster.security.kafkajs,
    }
    const kafkajs = ['js1', 'js2'].map(
      (name) =>
        new KafkajsProducer(
          name,
          { ...kafkajsSpec, acks, idempotent: false },
          historyObserver(history!, name),
        ),
    )
    const idempotentJs = `${IDEMPOTENT_PREFIX}js1`
    kafkajs.push(
      new KafkajsProducer(
        idempotentJs,
        { ...kafkajsSpec, acks: -1, idempotent: true },
        historyObserver(history, idempotentJs),
      ),
    )
    await sleep(1000)

    const deadline = started + options.seconds * 1000
    const firstFaults = [...options.faults]
    while (Date.now() < deadline || firstFaults.length > 0) {
      const fault = firstFaults.shift() ?? pick(FAULTS)
      const parts = await cluster.partitions()
      const partition = parts[between(0, parts.length - 1)]
      const holdMs = between(500, 5000)
      faults[fault] = (faults[fault] ?? 0) + 1
      const record = async (target: number, waitForFailover: boolean): Promise<void> => {
        const led = parts.map((p, i) => ({ p, i })).filter(({ p }) => p?.leader === target)
        let moved = -1
        if (waitForFailover) {
          const now = await cluster.partitions()
          moved = led.filter(
            ({ p, i }) => now[i] && (now[i].leader !== target || now[i].leaderEpoch > p.leaderEpoch),
          ).length
        }
        events.push({ fault, target, ledPartitions: led.length, leadershipsMoved: moved })
      }
      switch (fault) {
        case 'kill-leader':
        case 'kill-follower': {
          const followers = BROKERS.filter((id) => id !== partition?.leader)
          const target =
            fault === 'kill-leader' && partition && partition.leader > 0 ? partition.leader : pick(followers)
          const broker = cluster.brokers.get(target)!
          log(
            `${elapsed()} ${fault}: kill -9 broker ${target} (leader of some partition: ${parts.some((p) => p.leader === target)}), down ${holdMs} ms`,
          )
          await broker.kill()
          await sleep(holdMs)
          await broker.start(30000)
          await record(target, true)
          break
        }
        case 'restart': {
          const target = pick(BROKERS)
          log(`${elapsed()} restart: SIGTERM broker ${target} (controlled shutdown), down ${holdMs} ms`)
          const broker = cluster.brokers.get(target)!
          await broker.stop()
          await sleep(holdMs)
          await broker.start(30000)
          await record(target, true)
          break
        }
        case 'isolate': {
          const target = pick(BROKERS)
          log(`${elapsed()} isolate: broker ${target} cut from clients and brokers for ${holdMs} ms`)
          cluster.proxies.get(target)!.cutAll()
          for (const [id, proxy] of cluster.proxies)
            if (id !== target) proxy.cut((c) => c === `tidelog-replica-${target}`)
          await sleep(holdMs)
          cluster.healAll()
          await record(target, false)
          break
        }
        case 'cut-link': {
          const [a, b] = shuffle(BROKERS, random)
          log(`${elapsed()} cut-link: brokers ${a} <-> ${b} for ${holdMs} ms`)
          cluster.proxies.get(a)!.cut((c) => c === `tidelog-replica-${b}`)
          cluster.proxies.get(b)!.cut((c) => c === `tidelog-replica-${a}`)
          await sleep(holdMs)
          cluster.healAll()
          await record(a, false)
          break
        }
        case 'strand-leader': {
          // One broker's failure in two steps: a leader loses its followers (clients still
          // reach it) long enough for its ISR to shrink to itself, then it crashes. Clean
          // election keeps the partition offline until it returns; unclean elects a follower
          // that lacks what the leader accepted alone.
          const target = partition && partition.leader > 0 ? partition.leader : pick(BROKERS)
          log(
            `${elapsed()} strand-leader: broker ${target} cut from the other brokers for 5000 ms, then kill -9, down ${holdMs} ms`,
          )
          cluster.proxies.get(target)!.cut((c) => c?.startsWith('tidelog-replica-') === true)
          for (const [id, proxy] of cluster.proxies)
            if (id !== target) proxy.cut((c) => c === `tidelog-replica-${target}`)
          await sleep(5000)
          const broker = cluster.brokers.get(target)!
          await broker.kill()
          cluster.healAll()
          await sleep(holdMs)
          await broker.start(30000)
          await record(target, true)
          break
        }
        case 'reset': {
          const target = pick(BROKERS)
          const count = cluster.proxies.get(target)!.reset()
          log(`${elapsed()} reset: ${count} connections to broker ${target} dropped`)
          await record(target, false)
          break
        }
      }
      await sleep(between(500, 2000))
    }

    log(`${elapsed()} healing: all links up, all brokers running; stopping producers`)
    cluster.healAll()
    for (const broker of cluster.brokers.values()) if (!broker.isRunning) await broker.start(30000)
    await Promise.all([...python.map((p) => p.stop()), ...kafkajs.map((p) => p.stop())])
    const producerFailures = [...python, ...kafkajs].flatMap((p) => (p.failure === null ? [] : [p.failure]))
    if (producerFailures.length > 0) throw new Error(producerFailures.join('\n'))
    log(`${elapsed()} producers done; waiting for every partition to have a leader and a full ISR`)
    await waitForHealthy(cluster, options.partitions, 60000)
    // Replicas that do not converge are a failure, not a warning: the byte comparison below
    // would compare logs still moving.
    await waitForConverged(cluster, options.partitions, 30000)

    const watermarks = (
      await confluent<{ watermarks: [number, number][] }>('watermarks', {
        bootstrap: cluster.bootstrap,
        topic: TOPIC,
        partitions: range(options.partitions),
        config: cluster.security.librdkafka,
      })
    ).watermarks
    const highWatermarks = watermarks.map(([, high]) => high)
    const consumed = await confluentConsume(
      cluster.bootstrap,
      TOPIC,
      range(options.partitions).map((p) => [p, 0]),
      { timeout: 120, config: cluster.security.librdkafka },
    )
    if (consumed.errors.length > 0) throw new Error(`consume errors: ${JSON.stringify(consumed.errors)}`)
    const verdict = await checkRunHistory(history, historyFile, input.historyFile !== undefined, {
      records: consumed.records,
      timedOut: consumed.timedOut,
      watermarks,
    })
    history = null

    // Stop the brokers cleanly (logs flushed) and compare the replicas' files.
    for (const broker of cluster.brokers.values()) await broker.stop()
    const replicaProblems = await compareReplicaFiles(cluster, options.partitions, highWatermarks)
    const uncleanElections = [...cluster.brokers.values()]
      .flatMap((b) => b.logs())
      .filter((l) => typeof l.msg === 'string' && l.msg.startsWith('UNCLEAN leader election')).length

    const allAcks = [...python, ...kafkajs].flatMap((p) => [...p.acks.values()])
    const sent = python.reduce((n, p) => n + p.sent, 0) + kafkajs.reduce((n, p) => n + p.sent, 0)
    // Plain kafkajs producers send one record at a time, so only the plain librdkafka ones
    // can reorder their own records: librdkafka bounds requests in flight per connection,
    // not per partition (librdkafka#1969), so after a leader change a request retried from
    // the old leader's connection can land after newer records sent to the new one.
    const analysis = analyse(allAcks, consumed.records, clientMayReorder)
    const report: FaultReport = {
      options,
      durationMs: Date.now() - started,
      faults,
      events,
      sent,
      ...analysis,
      consumed: consumed.records.length,
      highWatermarks,
      replicasIdentical: replicaProblems.length === 0,
      replicaProblems,
      uncleanElections,
      history: verdict,
    }
    return report
  } finally {
    await history?.close().catch(() => undefined)
    await cluster.close()
  }
}

/**
 * Ends the history with the final read (the consumer read every partition from its low
 * watermark to EOF, at or past the high watermark taken before it started) and its coverage,
 * then checks the file as `tidelog verify` would.
 */
async function checkRunHistory(
  history: HistoryWriter,
  file: string,
  keep: boolean,
  final: {
    records: readonly { partition: number; offset: number; key: string | null; value: string | null }[]
    timedOut: boolean
    watermarks: readonly [number, number][]
  },
): Promise<FaultReport['history']> {
  for (const r of final.records)
    history.read({
      consumer: 'final-read',
      topic: TOPIC,
      partition: r.partition,
      offset: r.offset,
      key: r.key,
      // No producer sends a null value: read as '' it is a phantom read, as it should be.
      value: r.value ?? '',
    })
  // A read that timed out did not reach every partition's end: it vouches for none.
  if (!final.timedOut)
    final.watermarks.forEach(([low, high], partition) => {
      history.covered({ consumer: 'final-read', topic: TOPIC, partition, startOffset: low, endOffset: high })
    })
  await history.close()
  const report = checkHistory(await readHistoryFile(file))
  const kept = keep || !report.ok || report.counts.acksNotCheckedForLoss > 0
  if (!kept) await rm(file, { force: true })
  return { file, kept, report }
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i)
}

function shuffle<T>(list: readonly T[], random: () => number): T[] {
  const out = [...list]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[out[i], out[j]] = [out[j], out[i]]
  }
  return out
}

async function waitForHealthy(cluster: FaultCluster, partitions: number, timeoutMs: number): Promise<void> {
  await waitFor('every partition led with a full ISR', timeoutMs, async () => {
    if ((await cluster.registered()).length !== 3) return false
    const parts = await cluster.partitions()
    return parts.length === partitions && parts.every((p) => p && p.leader > 0 && p.isr.length === 3)
  })
}

/** Waits until a follower fetch has carried the final high watermark to every replica (files stop changing). */
async function waitForConverged(cluster: FaultCluster, partitions: number, timeoutMs: number): Promise<void> {
  let previous = ''
  await waitFor('replica logs converged', timeoutMs, async () => {
    const sizes: number[] = []
    for (const nodeId of BROKERS)
      for (let p = 0; p < partitions; p++)
        sizes.push(await dirLogBytes(join(cluster.brokers.get(nodeId)!.spec.logDir, `${TOPIC}-${p}`)))
    const now = sizes.join(',')
    const same = now === previous
    previous = now
    const converged = range(partitions).every(
      (p) => sizes[p] === sizes[partitions + p] && sizes[p] === sizes[2 * partitions + p],
    )
    return same && converged
  })
}

/** Each replica's .log bytes of batches below the high watermark, compared by SHA-256. */
async function compareReplicaFiles(
  cluster: FaultCluster,
  partitions: number,
  highWatermarks: number[],
): Promise<string[]> {
  const problems: string[] = []
  for (let p = 0; p < partitions; p++) {
    const digests = new Map<number, string>()
    for (const nodeId of BROKERS) {
      const dir = join(cluster.brokers.get(nodeId)!.spec.logDir, `${TOPIC}-${p}`)
      digests.set(nodeId, await committedDigest(dir, highWatermarks[p]))
    }
    const distinct = new Set(digests.values())
    if (distinct.size !== 1)
      problems.push(
        `${TOPIC}-${p}: replicas differ below HW ${highWatermarks[p]}: ${JSON.stringify([...digests])}`,
      )
  }
  return problems
}

export function formatReport(r: FaultReport): string {
  const faults = Object.entries(r.faults)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ')
  return [
    `fault suite acks=${r.options.acks} unclean=${r.options.unclean} seed=${r.options.seed} duration=${(r.durationMs / 1000).toFixed(1)}s (faults for ${r.options.seconds}s)`,
    `  faults injected: ${faults || 'none'}${r.uncleanElections ? ` (unclean elections: ${r.uncleanElections})` : ''}`,
    `  in order: ${r.events.map((e) => `${e.fault}(broker ${e.target}, led ${e.ledPartitions}${e.leadershipsMoved >= 0 ? `, moved ${e.leadershipsMoved}` : ''})`).join(' ')}`,
    `  sent ${r.sent}, acknowledged ${r.acknowledged}, failed/unacknowledged ${r.failed}`,
    `  LOST ${r.lost}${r.lostSample.length ? ` e.g. ${r.lostSample.join(', ')}` : ''}`,
    `  acknowledged-at-wrong-offset ${r.offsetMismatches}${r.offsetMismatchSample.length ? ` e.g. ${r.offsetMismatchSample.slice(0, 3).join('; ')}` : ''}, without an offset ${r.acknowledgedWithoutOffset} (absent before the producer's first record in the partition, librdkafka's implicit-ack loss: ${r.implicitAckLosses})`,
    `  order violations ${r.orderViolations}${r.orderViolationSample.length ? ` e.g. ${r.orderViolationSample.slice(0, 3).join('; ')}` : ''}, reordered by a plain librdkafka producer's retries ${r.clientReorders}${r.clientReorderSample.length ? ` e.g. ${r.clientReorderSample[0]}` : ''}`,
    `  duplicated ${r.duplicated} (idempotent producers: ${r.idempotentDuplicated}), unacknowledged-but-present ${r.unacknowledgedPresent}, consumed ${r.consumed}, HWs ${r.highWatermarks.join('/')}`,
    `  replicas byte-identical up to the HW: ${r.replicasIdentical ? 'yes' : `NO: ${r.replicaProblems.join('; ')}`}`,
    historySummary(r.history),
  ].join('\n')
}

/** The checker's verdict in one line, or its whole report (indented) when it found something. */
function historySummary(h: FaultReport['history']): string {
  const c = h.report.counts
  const where = h.kept ? `, history kept in ${h.file}` : ''
  const line = `  history checker: ${c.sends} sends, ${c.acks} acks, ${c.reads} reads; ${c.acksCheckedForLoss} of ${c.acks} acks judged for loss, ${h.report.expected.duplicates.length} expected duplicates; ${h.report.ok ? 'no anomalies' : `${c.anomalies} ANOMALIES`}${where}`
  if (h.report.ok && c.acksNotCheckedForLoss === 0) return line
  return `${line}\n${formatVerifyReport(h.report)
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n')}`
}

/** What a strict run (acks=all, clean elections) must show: nothing acknowledged lost, misplaced or reordered (but by a plain librdkafka producer's own retries), no idempotent duplicate, identical replicas, a clean history. */
export function assertNothingLost(report: FaultReport, replay: string): void {
  assert.ok(report.acknowledged > 1000, `only ${report.acknowledged} records acknowledged\n${replay}`)
  assert.equal(report.lost, 0, `lost: ${report.lostSample.join(', ')}\n${replay}`)
  assert.equal(report.offsetMismatches, 0, replay)
  assert.equal(report.orderViolations, 0, replay)
  assert.equal(report.idempotentDuplicated, 0, `idempotent producers wrote duplicates\n${replay}`)
  assert.deepEqual(report.replicaProblems, [], replay)
  const checker = report.history.report
  // The checker judges every producer's order; the plain librdkafka ones may reorder their
  // own retries (clientMayReorder), which analyse counts apart too.
  const clientReorders = checker.anomalies.reorderings.filter((r) => clientMayReorder(r.producer)).length
  assert.equal(
    checker.counts.anomalies - clientReorders,
    0,
    `history checker (${report.history.file}): ${JSON.stringify(checker.anomalies).slice(0, 2000)}\n${replay}`,
  )
  assert.equal(checker.counts.acksCheckedForLoss, checker.counts.acks, 'the checker judged every ack')
  assert.equal(checker.counts.acks, report.acknowledged, 'the history holds every acknowledgement')
}
