/**
 * The workload and the checks of a fault suite, for suites that run brokers as processes:
 * producers that record which record was acknowledged at which offset (confluent-kafka
 * processes running test/fault/producer.py, kafkajs producers in this process), the analysis
 * of those acknowledgements against a final read, and the comparison of replicas' `.log`
 * bytes below the high watermark. Records are "<producer>-<seq>" in partition
 * seq % partitions; producers whose name starts with IDEMPOTENT_PREFIX are idempotent and
 * must write no duplicate.
 *
 * test/fault/suite.ts has its own copy of these (written first); test/netfault uses this one.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { createWriteStream } from 'node:fs'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kafka, type KafkaConfig, logLevel } from 'kafkajs'
import { PYTHON, repoRoot } from './compat-clients.js'

const STDERR_KEPT_CHARS = 20000

/** Names of the idempotent producers start with this. */
export const IDEMPOTENT_PREFIX = 'i'

export interface Ack {
  readonly producer: string
  readonly seq: number
  readonly partition: number
  /**
   * -1 when the record was not acknowledged (error or no report); null when it was, without
   * an offset: librdkafka's idempotent producer "implicitly acks" a message whose request
   * failed once a later batch of the partition succeeds (its IMPLICITACK debug line).
   */
  readonly offset: number | null
  readonly error: string | null
  /** When this process learnt the outcome (Date.now()). */
  readonly atMs: number
}

export interface FaultProducer {
  readonly name: string
  readonly acks: ReadonlyMap<number, Ack>
  readonly sent: number
  /** Stops producing and waits until every record sent has a delivery outcome. */
  stop(): Promise<void>
  /** Why the producer ended before it was stopped, or null. */
  readonly failure: string | null
}

/**
 * Told of each record a producer sends and of each outcome it learns, as they happen: the
 * fault suite writes them to its history file (docs/history-format.md). `timeMs` is the
 * producer process's own clock where it reports one (producer.py's "t").
 */
export interface ProducerObserver {
  onSend(seq: number, partition: number, timeMs?: number): void
  onOutcome(ack: Ack, timeMs?: number): void
}

/** A small deterministic PRNG (mulberry32) so a run can be repeated with its seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export interface PythonProducerSpec {
  readonly bootstrap: string
  readonly topic: string
  readonly partitions: number
  /** Records per second. */
  readonly rate: number
  /** librdkafka properties on top of producer.py's defaults. */
  readonly config: Readonly<Record<string, string | number | boolean>>
  /** Where to append the process's stderr (librdkafka's log, with `debug` set). */
  readonly stderrPath?: string
  /** The Python to run producer.py with (default: Debian's, with librdkafka 2.0.2). */
  readonly python?: string
}

/** A confluent-kafka producer process (test/fault/producer.py). */
export class PythonProducer implements FaultProducer {
  readonly acks = new Map<number, Ack>()
  sent = 0
  private buffered = ''
  private stderr = ''
  private readonly exited: Promise<void>
  private readonly child: ChildProcess

  constructor(
    readonly name: string,
    private readonly spec: PythonProducerSpec,
    private readonly observer?: ProducerObserver,
  ) {
    this.child = spawn(spec.python ?? PYTHON, [join(repoRoot(), 'test', 'fault', 'producer.py')], {
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    const { python: _python, stderrPath: _stderrPath, ...input } = spec
    this.child.stdin!.write(`${JSON.stringify({ ...input, producer: name })}\n`)
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => this.onData(chunk))
    const stderrFile =
      spec.stderrPath === undefined ? null : createWriteStream(spec.stderrPath, { flags: 'a' })
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      stderrFile?.write(chunk)
      // The end explains an exit (a fatal error comes last).
      this.stderr = (this.stderr + chunk).slice(-STDERR_KEPT_CHARS)
    })
    this.exited = new Promise((resolve) =>
      this.child.once('exit', () => {
        stderrFile?.end()
        resolve()
      }),
    )
  }

  private onData(chunk: string): void {
    this.buffered += chunk
    const lines = this.buffered.split('\n')
    this.buffered = lines.pop() ?? ''
    for (const line of lines) {
      if (line.trim() === '') continue
      const json = JSON.parse(line) as {
        q?: number
        s?: number
        p?: number
        o?: number | null
        e?: string | null
        t?: number
        done?: boolean
        sent?: number
      }
      if (json.done) {
        this.sent = json.sent ?? 0
        continue
      }
      if (json.q !== undefined) {
        this.observer?.onSend(json.q, json.q % this.spec.partitions, json.t)
        continue
      }
      const seq = json.s!
      const ack: Ack = {
        producer: this.name,
        seq,
        partition: json.p!,
        // null: librdkafka acknowledged it without an offset (an implicit ack, see Ack).
        offset: json.e === null ? (json.o ?? null) : -1,
        error: json.e ?? null,
        atMs: Date.now(),
      }
      this.acks.set(seq, ack)
      this.observer?.onOutcome(ack, json.t)
    }
  }

  /**
   * Stops producing and waits for every delivery report (bounded by message.timeout.ms). A
   * producer that died first (a fatal client error) is not an exception here: its `failure`
   * says why, and the records it had reported stay in the history to check.
   */
  async stop(timeoutMs = 90000): Promise<void> {
    this.child.stdin!.end()
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs)
    await this.exited
    clearTimeout(timer)
  }

  /** Why the process ended without its final report, or null. */
  get failure(): string | null {
    return this.sent === 0 ? `producer ${this.name} did not finish: ${this.stderr.slice(-3000)}` : null
  }

  /** Kills the process (cleanup after a failure). */
  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL')
  }
}

export interface KafkajsProducerSpec {
  readonly bootstrap: string
  readonly topic: string
  readonly partitions: number
  /** -1 (all) or 1. */
  readonly acks: number
  readonly idempotent: boolean
  /** TLS and SASL settings for the client (the fault suite's SASL_SSL runs). */
  readonly security?: Pick<KafkaConfig, 'ssl' | 'sasl'>
}

/** A kafkajs producer sending one record per request, sequentially, with retries. */
export class KafkajsProducer implements FaultProducer {
  readonly acks = new Map<number, Ack>()
  sent = 0
  private stopped = false
  private readonly loop: Promise<void>

  constructor(
    readonly name: string,
    spec: KafkajsProducerSpec,
    observer?: ProducerObserver,
  ) {
    const kafka = new Kafka({
      ...spec.security,
      clientId: `fault-${name}`,
      brokers: spec.bootstrap.split(','),
      logLevel: logLevel.NOTHING,
      requestTimeout: 5000,
      connectionTimeout: 3000,
      // An idempotent producer retries until it succeeds, as kafkajs advises: a send that gave
      // up leaves its sequence ambiguous, and the next record would reuse it.
      retry: {
        retries: spec.idempotent ? Number.MAX_SAFE_INTEGER : 8,
        initialRetryTime: 100,
        maxRetryTime: 2000,
      },
    })
    const producer = kafka.producer({
      maxInFlightRequests: spec.idempotent ? 5 : 1,
      idempotent: spec.idempotent,
      allowAutoTopicCreation: false,
    })
    this.loop = (async () => {
      await producer.connect()
      try {
        for (let seq = 0; !this.stopped; seq++) {
          const partition = seq % spec.partitions
          this.sent++
          observer?.onSend(seq, partition)
          let ack: Ack
          try {
            const [meta] = await producer.send({
              topic: spec.topic,
              acks: spec.acks,
              timeout: 5000,
              messages: [{ value: `${name}-${seq}`, partition }],
            })
            ack = {
              producer: name,
              seq,
              partition,
              offset: Number(meta.baseOffset),
              error: null,
              atMs: Date.now(),
            }
          } catch (error) {
            const type = (error as { type?: string; name?: string }).type ?? (error as Error).name
            ack = { producer: name, seq, partition, offset: -1, error: type, atMs: Date.now() }
          }
          this.acks.set(seq, ack)
          observer?.onOutcome(ack)
          await sleep(2)
        }
      } finally {
        await producer.disconnect().catch(() => undefined)
      }
    })()
  }

  failure: string | null = null

  async stop(): Promise<void> {
    this.stopped = true
    await this.loop.catch((error: Error) => {
      this.failure = `producer ${this.name} failed: ${error.message}`
    })
  }
}

export interface HistoryAnalysis {
  readonly acknowledged: number
  readonly failed: number
  /** Acknowledged records the final read does not have. */
  readonly lost: number
  readonly lostSample: string[]
  /** Acknowledged records found, but not at the offset they were acknowledged with. */
  readonly offsetMismatches: number
  readonly offsetMismatchSample: string[]
  /** Acknowledged without an offset (librdkafka's implicit acks): checked for presence only. */
  readonly acknowledgedWithoutOffset: number
  /**
   * Implicit acks (offset null) of records that are absent and precede every record of the
   * same producer in that partition's log: librdkafka's own loss, not the broker's. A new
   * idempotent producer's first batch reaches a leader that loses leadership before it is
   * replicated; the new leader has no state for the producer and, as Kafka does since KIP-360,
   * accepts its next batch at any sequence; librdkafka takes that success as proof that the
   * earlier batch was persisted and reports it delivered without an offset
   * (confluent-kafka-go#921, "an explicitly failed message set can be implicitly acked by
   * subsequent batch success"). An absent implicit ack after a record of its producer that
   * the partition does have is counted as lost: the leader knew the producer then, so it
   * must have refused the gap.
   */
  readonly implicitAckLosses: number
  readonly implicitAckLossSample: string[]
  /** Acknowledged records of one producer and partition out of sequence order. */
  readonly orderViolations: number
  readonly orderViolationSample: string[]
  /**
   * The same, for producers whose client may reorder its own retries (not counted above):
   * librdkafka without idempotence ("retrying may cause reordering unless enable.idempotence
   * is set", CONFIGURATION.md), as when a request to a leader that lost its leadership is
   * retried after newer records went to the new leader.
   */
  readonly clientReorders: number
  readonly clientReorderSample: string[]
  /** Extra copies of records of the plain producers (retries: allowed). */
  readonly duplicated: number
  /** Extra copies of records of the idempotent producers (must be 0). */
  readonly idempotentDuplicated: number
  readonly unacknowledgedPresent: number
}

/** Checks acknowledgements against what a final read of every partition from offset 0 found. */
export function analyse(
  acks: readonly Ack[],
  records: readonly { partition: number; offset: number; value: string | null }[],
  mayReorder: (producer: string) => boolean = () => false,
): HistoryAnalysis {
  const occurrences = new Map<string, { partition: number; offset: number }[]>()
  const at = new Map<string, string | null>()
  for (const r of records) {
    at.set(`${r.partition}:${r.offset}`, r.value)
    if (r.value === null) continue
    const list = occurrences.get(r.value) ?? []
    list.push({ partition: r.partition, offset: r.offset })
    occurrences.set(r.value, list)
  }
  // The lowest sequence of each producer present in each partition ("ick1-419" at 2:844).
  const firstPresentSeq = new Map<string, number>()
  for (const r of records) {
    if (r.value === null) continue
    const dash = r.value.lastIndexOf('-')
    const key = `${r.value.slice(0, dash)}/${r.partition}`
    const seq = Number(r.value.slice(dash + 1))
    if (seq < (firstPresentSeq.get(key) ?? Number.POSITIVE_INFINITY)) firstPresentSeq.set(key, seq)
  }
  let acknowledged = 0
  let failed = 0
  let lost = 0
  let implicitAckLosses = 0
  const implicitAckLossSample: string[] = []
  let offsetMismatches = 0
  const lostSample: string[] = []
  const offsetMismatchSample: string[] = []
  const orderViolationSample: string[] = []
  const where = (list: readonly { partition: number; offset: number }[]) =>
    list.map((o) => `${o.partition}:${o.offset}`).join(',')
  const ackedValues = new Set<string>()
  const byProducerPartition = new Map<string, Ack[]>()
  let acknowledgedWithoutOffset = 0
  for (const ack of acks) {
    const value = `${ack.producer}-${ack.seq}`
    if (ack.offset !== null && ack.offset < 0) {
      failed++
      continue
    }
    acknowledged++
    ackedValues.add(value)
    if (!occurrences.has(value)) {
      const first = firstPresentSeq.get(`${ack.producer}/${ack.partition}`)
      if (ack.offset === null && first !== undefined && ack.seq < first) {
        implicitAckLosses++
        if (implicitAckLossSample.length < 10) implicitAckLossSample.push(`${value}@${ack.partition}`)
        continue
      }
      lost++
      if (lostSample.length < 10) lostSample.push(`${value}@${ack.partition}:${ack.offset}`)
      continue
    }
    const there = ack.offset === null ? value : at.get(`${ack.partition}:${ack.offset}`)
    if (ack.offset === null) acknowledgedWithoutOffset++
    else if (there !== value) {
      offsetMismatches++
      if (offsetMismatchSample.length < 20)
        offsetMismatchSample.push(
          `${value} acknowledged at ${ack.partition}:${ack.offset} (t=${ack.atMs}), found at ${where(occurrences.get(value)!)}; at ${ack.partition}:${ack.offset}: ${there === undefined ? 'nothing' : there}`,
        )
    }
    const key = `${ack.producer}/${ack.partition}`
    const list = byProducerPartition.get(key) ?? []
    list.push(ack)
    byProducerPartition.set(key, list)
  }
  let orderViolations = 0
  let clientReorders = 0
  const clientReorderSample: string[] = []
  for (const list of byProducerPartition.values()) {
    list.sort((a, b) => a.seq - b.seq)
    for (let i = 1; i < list.length; i++) {
      const before = occurrences.get(`${list[i - 1].producer}-${list[i - 1].seq}`)![0].offset
      const now = occurrences.get(`${list[i].producer}-${list[i].seq}`)![0].offset
      if (now > before) continue
      const text = `${list[i].producer}-${list[i].seq} (acked ${list[i].partition}:${list[i].offset}) at ${now}, not after ${list[i - 1].producer}-${list[i - 1].seq} (acked ${list[i - 1].offset}) at ${before}`
      if (mayReorder(list[i].producer)) {
        clientReorders++
        if (clientReorderSample.length < 20) clientReorderSample.push(text)
      } else {
        orderViolations++
        if (orderViolationSample.length < 20) orderViolationSample.push(text)
      }
    }
  }
  let duplicated = 0
  let idempotentDuplicated = 0
  let unacknowledgedPresent = 0
  for (const [value, list] of occurrences) {
    if (value.startsWith(IDEMPOTENT_PREFIX)) idempotentDuplicated += list.length - 1
    else duplicated += list.length - 1
    if (!ackedValues.has(value)) unacknowledgedPresent++
  }
  return {
    acknowledged,
    failed,
    lost,
    lostSample,
    offsetMismatches,
    offsetMismatchSample,
    acknowledgedWithoutOffset,
    implicitAckLosses,
    implicitAckLossSample,
    orderViolations,
    orderViolationSample,
    clientReorders,
    clientReorderSample,
    duplicated,
    idempotentDuplicated,
    unacknowledgedPresent,
  }
}

/** Bytes of every `.log` segment in a partition directory. */
export async function dirLogBytes(dir: string): Promise<number> {
  let total = 0
  for (const name of await readdir(dir))
    if (name.endsWith('.log')) total += (await readFile(join(dir, name))).length
  return total
}

/**
 * SHA-256 of a replica's batches that end below the high watermark (with their byte count
 * and end offset), or a description of a gap between batches.
 */
export async function committedDigest(dir: string, highWatermark: number): Promise<string> {
  const segments = (await readdir(dir)).filter((n) => n.endsWith('.log')).sort()
  const hash = createHash('sha256')
  let next = -1
  let bytes = 0
  for (const name of segments) {
    const data = await readFile(join(dir, name))
    for (let at = 0; at + 12 <= data.length; ) {
      const size = 12 + data.readInt32BE(at + 8)
      const base = Number(data.readBigInt64BE(at))
      const last = base + data.readInt32BE(at + 23)
      if (last >= highWatermark) return `${hash.digest('hex')} (${bytes} bytes to offset ${next})`
      if (next !== -1 && base !== next) return `gap at ${next}: next batch at ${base}`
      hash.update(data.subarray(at, at + size))
      bytes += size
      next = last + 1
      at += size
    }
  }
  return `${hash.digest('hex')} (${bytes} bytes to offset ${next})`
}
