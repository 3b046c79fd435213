/**
 * `tidelog bench produce|consume|e2e`, in the spirit of kafka-producer-perf-test and
 * kafka-consumer-perf-test, driven by tidelog's own client:
 *   produce  records of --record-size at --throughput (-1: as fast as possible) for
 *            --num-records or --duration; latency is send() to acknowledgement.
 *   consume  reads --num-records (or for --duration) from the beginning of --topic.
 *   e2e      one producer and one consumer; latency is send() to the consumer's poll().
 * Prints a progress line every --interval-ms and a final summary (records/s, MB/s,
 * latency p50/p95/p99/p99.9/max from a bounded sample, latency-sample.ts) with its own CPU use, so a
 * saturated client (event loop ~100 % busy) is visible instead of passing for the broker.
 */
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { Admin } from '../../client/admin.js'
import { Consumer } from '../../client/consumer.js'
import { type KafkaClientError, KafkaProtocolError } from '../../client/errors.js'
import { type Acks, type CompressionName, Producer, type RecordMetadata } from '../../client/producer.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { HistoryWriter } from '../../verify/history-file.js'
import {
  COMMON_OPTIONS,
  clientOptions,
  EXIT_FAILED,
  EXIT_OK,
  EXIT_USAGE,
  guarded,
  isHelp,
  namedTopics,
  out,
  parseInteger,
  printJson,
  UsageError,
} from './common.js'
import { LatencySample } from './latency-sample.js'

export const BENCH_USAGE = `Usage: tidelog bench <produce|consume|e2e> [options]

  [--topic] T               Topic (default: a new tidelog-bench-<time> topic; required for consume)
  --partitions N            Partitions of a created topic (default 6)
  --replication-factor N    Replication factor of a created topic (default: broker default)
  --record-size BYTES       Value size (default 1024)
  --num-records N           Records to send/read (default 1000000)
  --duration S              Run for S seconds instead of a count
  --throughput R            Target records/s, -1 for unlimited (default -1; e2e 1000)
  --acks 0|1|all            (default all)
  --batch-size BYTES        (default 65536)
  --linger-ms N             (default 5)
  --compression C           none|gzip|snappy|lz4|zstd (default none)
  --producers N             Producer instances, each with its own connections (default 1)
  --max-in-flight N         max.in.flight.requests.per.connection (default 5)
  --max-partition-fetch-bytes N  consume: per-partition fetch size (default 10485760, as bench/native/rdkafka-perf.c)
  --interval-ms N           Progress line interval (default 5000)
  --transaction-size N      produce: transactional producers (a transactional id each), N
                            records per transaction, then commitTransaction; prints the
                            commit latency (commitTransaction() call to its return) too
  --history FILE            produce: write every send, ack and fail to FILE for 'tidelog verify'
                            (docs/history-format.md); each value then starts with its unique
                            "<producer>-<seq>" and a space, which is the history's value
  --bootstrap-server HOST:PORT (default 127.0.0.1:9092), --command-config FILE, --json (final summary as JSON)
`

const OPTIONS = {
  ...COMMON_OPTIONS,
  topic: { type: 'string', short: 't' },
  partitions: { type: 'string', default: '6' },
  'replication-factor': { type: 'string' },
  'record-size': { type: 'string', default: '1024' },
  'num-records': { type: 'string' },
  duration: { type: 'string' },
  throughput: { type: 'string' },
  acks: { type: 'string', default: 'all' },
  'batch-size': { type: 'string', default: '65536' },
  'linger-ms': { type: 'string', default: '5' },
  compression: { type: 'string', default: 'none' },
  producers: { type: 'string', default: '1' },
  'max-in-flight': { type: 'string', default: '5' },
  'interval-ms': { type: 'string', default: '5000' },
  'max-partition-fetch-bytes': { type: 'string', default: '10485760' },
  history: { type: 'string' },
  'transaction-size': { type: 'string' },
} as const

type Mode = 'produce' | 'consume' | 'e2e'

interface BenchConfig {
  mode: Mode
  bootstrap: string
  /** --command-config: TLS and SASL client properties. */
  commandConfig: string | undefined
  topic: string | undefined
  partitions: number
  replicationFactor: number
  recordSize: number
  numRecords: number
  durationMs: number | undefined
  throughput: number
  acks: Acks
  batchSize: number
  lingerMs: number
  compression: CompressionName
  producers: number
  maxInFlight: number
  intervalMs: number
  maxPartitionFetchBytes: number
  history: string | undefined
  /** Records per transaction (transactional producers); undefined: not transactional. */
  transactionSize: number | undefined
  json: boolean
}

export async function benchCommand(argv: readonly string[]): Promise<number> {
  const [mode, ...rest] = argv
  return guarded(`bench ${mode ?? ''}`.trim(), async () => {
    const { values, positionals } = parseArgs({
      args: rest,
      options: OPTIONS,
      allowPositionals: true,
      strict: true,
    })
    if (values.help || mode === undefined || isHelp(mode)) {
      process.stdout.write(BENCH_USAGE)
      return mode === undefined ? EXIT_USAGE : EXIT_OK
    }
    if (mode !== 'produce' && mode !== 'consume' && mode !== 'e2e')
      throw new UsageError(`unknown bench mode '${mode}'`)
    const named = namedTopics(values.topic, positionals)
    if (new Set(named).size > 1) throw new UsageError(`name at most one topic, not ${named.join(', ')}`)
    const config = toConfig(mode, { ...values, topic: named[0] })
    const result = await runBench(config)
    if (config.json) printJson(result)
    else printSummary(result)
    return result.failed > 0 || (result.transactions?.failed ?? 0) > 0 ? EXIT_FAILED : EXIT_OK
  })
}

function toConfig(
  mode: Mode,
  values: ReturnType<typeof parseArgs<{ options: typeof OPTIONS }>>['values'],
): BenchConfig {
  const acks = values.acks === 'all' || values.acks === '-1' ? 'all' : (Number(values.acks) as 0 | 1)
  if (acks !== 'all' && acks !== 0 && acks !== 1) throw new UsageError(`--acks expects 0, 1 or all`)
  const durationS = parseInteger(values.duration, '--duration', 1)
  const throughputText = values.throughput ?? (mode === 'e2e' ? '1000' : '-1')
  const throughput = Number(throughputText)
  if (!Number.isFinite(throughput) || (throughput <= 0 && throughput !== -1))
    throw new UsageError('--throughput expects a positive rate or -1')
  if (mode === 'consume' && !values.topic) throw new UsageError('bench consume needs --topic')
  // e2e stamps its values with send times; consume sends nothing to record.
  if (values.history !== undefined && mode !== 'produce')
    throw new UsageError('--history is for bench produce only')
  const transactionSize = parseInteger(values['transaction-size'], '--transaction-size', 1)
  if (transactionSize !== undefined && mode !== 'produce')
    throw new UsageError('--transaction-size is for bench produce only')
  if (transactionSize !== undefined && values.history !== undefined)
    throw new UsageError('--transaction-size and --history cannot be combined')
  if (transactionSize !== undefined && acks !== 'all')
    throw new UsageError('--transaction-size needs --acks all')
  return {
    mode,
    bootstrap: values['bootstrap-server'],
    commandConfig: values['command-config'],
    topic: values.topic,
    partitions: parseInteger(values.partitions, '--partitions', 1)!,
    replicationFactor: parseInteger(values['replication-factor'], '--replication-factor', 1) ?? -1,
    recordSize: parseInteger(values['record-size'], '--record-size', mode === 'e2e' ? 8 : 0)!,
    numRecords:
      parseInteger(values['num-records'], '--num-records', 1) ??
      (durationS !== undefined ? Number.MAX_SAFE_INTEGER : 1_000_000),
    durationMs: durationS === undefined ? undefined : durationS * 1000,
    throughput,
    acks,
    batchSize: parseInteger(values['batch-size'], '--batch-size', 1)!,
    lingerMs: parseInteger(values['linger-ms'], '--linger-ms')!,
    compression: values.compression as CompressionName,
    producers: parseInteger(values.producers, '--producers', 1)!,
    maxInFlight: parseInteger(values['max-in-flight'], '--max-in-flight', 1)!,
    intervalMs: parseInteger(values['interval-ms'], '--interval-ms', 100)!,
    maxPartitionFetchBytes: parseInteger(
      values['max-partition-fetch-bytes'],
      '--max-partition-fetch-bytes',
      1,
    )!,
    history: values.history,
    transactionSize,
    json: values.json,
  }
}

// ---- measurement ----------------------------------------------------------------------------

class Meter {
  readonly latencies = new LatencySample()
  readonly started = performance.now()
  private readonly cpuStart = process.cpuUsage()
  private readonly eluStart = performance.eventLoopUtilization()
  count = 0
  bytes = 0
  failed = 0
  private windowCount = 0
  private windowBytes = 0
  /** The progress line's mean and max: sums, not a second histogram (recordValue per record costs). */
  private windowLatencyCount = 0
  private windowLatencySumUs = 0.5 // a double field from the start (see LatencySample's sum); reset below
  private windowLatencyMaxUs = 0
  private windowStarted = performance.now()
  private windowCpu = process.cpuUsage()

  constructor() {
    this.windowLatencySumUs = 0
  }

  record(bytes: number, latencyUs?: number): void {
    this.count++
    this.bytes += bytes
    this.windowCount++
    this.windowBytes += bytes
    if (latencyUs !== undefined) {
      const value = Math.max(1, Math.round(latencyUs))
      this.latencies.record(value)
      this.windowLatencyCount++
      this.windowLatencySumUs += value
      if (value > this.windowLatencyMaxUs) this.windowLatencyMaxUs = value
    }
  }

  /** kafka-producer-perf-test's progress line, plus this process's CPU. */
  progressLine(): string {
    const now = performance.now()
    const seconds = (now - this.windowStarted) / 1000
    const cpu = process.cpuUsage(this.windowCpu)
    const cpuPct = ((cpu.user + cpu.system) / 1000 / (now - this.windowStarted)) * 100
    const latency =
      this.windowLatencyCount > 0
        ? `, ${ms(this.windowLatencySumUs / this.windowLatencyCount)} ms avg latency, ${ms(this.windowLatencyMaxUs)} ms max latency`
        : ''
    const line = `${this.windowCount} records, ${(this.windowCount / seconds).toFixed(1)} records/sec (${(this.windowBytes / seconds / 1048576).toFixed(2)} MB/sec)${latency}, client CPU ${cpuPct.toFixed(0)}%`
    this.windowCount = 0
    this.windowBytes = 0
    this.windowLatencyCount = 0
    this.windowLatencySumUs = 0
    this.windowLatencyMaxUs = 0
    this.windowStarted = now
    this.windowCpu = process.cpuUsage()
    return line
  }

  /** `windowStartMs`: when the throughput window opened (consume: at its first record). */
  summary(config: BenchConfig, topic: string, windowStartMs = this.started): BenchResult {
    const elapsedMs = performance.now() - windowStartMs
    const cpu = process.cpuUsage(this.cpuStart)
    const elu = performance.eventLoopUtilization(this.eluStart)
    const latency = latencySummary(this.latencies)
    return {
      mode: config.mode,
      topic,
      records: this.count,
      failed: this.failed,
      recordSize: config.recordSize,
      elapsedMs: Math.round(elapsedMs),
      recordsPerSec: Math.round(this.count / (elapsedMs / 1000)),
      mbPerSec: Number((this.bytes / 1048576 / (elapsedMs / 1000)).toFixed(2)),
      latencyMs: latency,
      cpu: {
        userMs: Math.round(cpu.user / 1000),
        systemMs: Math.round(cpu.system / 1000),
        // Over the time the CPU was counted, which may start before the throughput window.
        percentOfOneCore: Math.round(
          ((cpu.user + cpu.system) / 1000 / (performance.now() - this.started)) * 100,
        ),
        eventLoopUtilization: Number(elu.utilization.toFixed(2)),
      },
      settings: {
        acks: config.acks,
        batchSize: config.batchSize,
        lingerMs: config.lingerMs,
        compression: config.compression,
        producers: config.producers,
        maxInFlight: config.maxInFlight,
        throughput: config.throughput,
      },
    }
  }
}

const ms = (us: number): number => Number((us / 1000).toFixed(3))

interface LatencySummary {
  p50: number
  p95: number
  p99: number
  p999: number
  max: number
  mean: number
}

/** Percentiles of latencies in microseconds, in ms; null when none were recorded. */
function latencySummary(sample: LatencySample): LatencySummary | null {
  if (sample.count === 0) return null
  const at = (percentile: number): number => ms(sample.percentile(percentile))
  return { p50: at(50), p95: at(95), p99: at(99), p999: at(99.9), max: ms(sample.max), mean: ms(sample.mean) }
}

interface BenchResult {
  mode: Mode
  topic: string
  records: number
  failed: number
  recordSize: number
  elapsedMs: number
  recordsPerSec: number
  mbPerSec: number
  latencyMs: LatencySummary | null
  /** The history file written (--history). */
  history?: string
  /** --transaction-size: transactions committed and commitTransaction() latency. */
  transactions?: { committed: number; failed: number; size: number; commitLatencyMs: LatencySummary | null }
  cpu: { userMs: number; systemMs: number; percentOfOneCore: number; eventLoopUtilization: number }
  settings: Record<string, unknown>
}

function printSummary(r: BenchResult): void {
  const l = r.latencyMs
  out(
    `${r.records} records ${r.mode === 'consume' ? 'read' : 'sent'} in ${(r.elapsedMs / 1000).toFixed(2)} s: ${r.recordsPerSec} records/sec (${r.mbPerSec} MB/sec)` +
      (l ? `, latency ms p50 ${l.p50}, p95 ${l.p95}, p99 ${l.p99}, p99.9 ${l.p999}, max ${l.max}` : '') +
      (r.failed > 0 ? `, ${r.failed} FAILED` : ''),
  )
  if (r.history) out(`history written to ${r.history}; check it with: tidelog verify ${r.history}`)
  const t = r.transactions
  if (t) {
    const c = t.commitLatencyMs
    out(
      `${t.committed} transactions of ${t.size} records committed${t.failed > 0 ? `, ${t.failed} FAILED` : ''}` +
        (c ? `; commit latency ms p50 ${c.p50}, p95 ${c.p95}, p99 ${c.p99}, max ${c.max}` : ''),
    )
  }
  out(
    `client CPU: ${r.cpu.userMs} ms user + ${r.cpu.systemMs} ms system = ${r.cpu.percentOfOneCore}% of one core; event loop ${Math.round(r.cpu.eventLoopUtilization * 100)}% busy`,
  )
}

// ---- runs -------------------------------------------------------------------------------------

async function runBench(config: BenchConfig): Promise<BenchResult> {
  const topic = await ensureTopic(config)
  if (config.mode === 'consume') return consumeBench(config, topic)
  if (config.transactionSize !== undefined) return transactionalBench(config, topic, config.transactionSize)
  return produceBench(config, topic)
}

async function ensureTopic(config: BenchConfig): Promise<string> {
  const topic = config.topic ?? `tidelog-bench-${Date.now()}`
  if (config.mode === 'consume') return topic
  const admin = new Admin(clientOptions(config.bootstrap, 'tidelog-bench', config.commandConfig))
  try {
    await admin.createTopics([
      { topic, numPartitions: config.partitions, replicationFactor: config.replicationFactor },
    ])
    await admin.client.waitForTopics([topic], { maxWaitMs: 30000 })
  } catch (error) {
    if (!(error instanceof KafkaProtocolError && error.errorCode === ErrorCode.TOPIC_ALREADY_EXISTS))
      throw error
  } finally {
    admin.close()
  }
  return topic
}

function progress(meter: Meter, config: BenchConfig): () => void {
  const timer = setInterval(() => process.stderr.write(`${meter.progressLine()}\n`), config.intervalMs)
  return () => clearInterval(timer)
}

/** Records in flight beyond which the send loop waits; kept under buffer.memory so send() never blocks. */
const OUTSTANDING_MAX = 100_000
const BUFFER_MEMORY = 64 * 1024 * 1024
/** Sends per turn of the event loop before yielding to the sockets. */
const SENDS_PER_TURN = 2000

async function produceBench(config: BenchConfig, topic: string): Promise<BenchResult> {
  const producers = Array.from(
    { length: config.producers },
    (_, i) =>
      new Producer({
        ...clientOptions(config.bootstrap, `tidelog-bench-${i}`, config.commandConfig),
        acks: config.acks,
        batchSize: config.batchSize,
        lingerMs: config.lingerMs,
        compression: config.compression,
        maxInFlightRequestsPerConnection: config.maxInFlight,
        bufferMemory: BUFFER_MEMORY,
      }),
  )
  const history = config.history === undefined ? null : await BenchHistory.open(config, producers.length)
  // Set up before timing, as rdkafka-perf.c's warm-up does (without writing records): the
  // topic's metadata, else the first thousands of sends wait for it on the slow path.
  for (const p of producers) p.client.addInterest([topic])
  await Promise.all(producers.map((p) => p.client.waitForTopics([topic], { maxWaitMs: 30000 })))
  const e2eConsumer = config.mode === 'e2e' ? await startE2eConsumer(config, topic) : null
  const meter = new Meter()
  const e2e = e2eConsumer ? new E2eReceiver(e2eConsumer, meter) : null
  const stopProgress = progress(meter, config)
  const payload = Buffer.alloc(config.recordSize, 'x')
  const outstandingMax = Math.min(
    OUTSTANDING_MAX,
    Math.max(1000, Math.floor((BUFFER_MEMORY * 0.9) / (config.recordSize + 64))),
  )
  let outstanding = 0
  // The callback only counts: the send loop polls the count while it waits (every
  // millisecond, resuming below half). A wake-up called from the callback was a call that
  // ran only once the loop had waited, each time to a new promise's resolve function; the
  // client's settle loop, which inlines this callback, was deoptimized for it twice a run.
  const settled = (): void => {
    outstanding--
  }
  const deadline =
    config.durationMs === undefined ? Number.POSITIVE_INFINITY : meter.started + config.durationMs
  let sent = 0
  // One turn's sends, a function of their own: V8 compiles the loop on the stack (OSR)
  // while the code after it has not run yet; in the async loop below, that code (the
  // waits) deoptimized the compiled send loop, which was then compiled again whole.
  const sendTurn = (turn: number): void => {
    for (let i = 0; i < turn; i++, sent++) {
      const index = sent % producers.length
      const recorded = history?.send(index, topic)
      const value = recorded ? recorded.value : config.mode === 'e2e' ? stamped(payload) : payload
      const sentAt = performance.now()
      outstanding++
      // produce(): a callback, no promise per record (the client's cheapest way in).
      producers[index].produce({ topic, value }, (error, metadata) => {
        if (error) meter.failed++
        else if (!e2e) meter.record(value.length, (performance.now() - sentAt) * 1000)
        if (recorded) history!.settle(recorded, topic, error, metadata)
        settled()
      })
    }
  }
  try {
    while (sent < config.numRecords && performance.now() < deadline) {
      await pace(config, meter.started, sent)
      sendTurn(
        Math.min(
          SENDS_PER_TURN,
          config.numRecords - sent,
          config.throughput > 0 ? Math.max(1, Math.ceil(config.throughput / 1000)) : SENDS_PER_TURN,
        ),
      )
      if (outstanding >= outstandingMax) {
        while (outstanding >= outstandingMax / 2) await sleep(1)
      } else if (history?.needsDrain) await history.drain()
      else await yieldToIo()
    }
    await Promise.all(producers.map((p) => p.flush()))
    await e2e?.finish(sent - meter.failed)
  } finally {
    stopProgress()
    await Promise.all(producers.map((p) => p.close()))
    await e2e?.close()
    await history?.close()
  }
  const result = meter.summary(config, topic)
  return config.history === undefined ? result : { ...result, history: config.history }
}

/**
 * --transaction-size: each producer runs transactions one after another (begin, `size`
 * records, commit), the producers side by side. Latency is per record as for produce
 * (send to acknowledgement); commitTransaction() is timed on its own.
 */
async function transactionalBench(config: BenchConfig, topic: string, size: number): Promise<BenchResult> {
  const base = `tidelog-bench-${Date.now()}`
  const producers = Array.from(
    { length: config.producers },
    (_, i) =>
      new Producer({
        ...clientOptions(config.bootstrap, `tidelog-bench-${i}`, config.commandConfig),
        transactionalId: `${base}-${i}`,
        batchSize: config.batchSize,
        lingerMs: config.lingerMs,
        compression: config.compression,
        maxInFlightRequestsPerConnection: config.maxInFlight,
        bufferMemory: BUFFER_MEMORY,
      }),
  )
  const commits = new LatencySample()
  let committed = 0
  let failedTransactions = 0
  const meter = new Meter()
  const stopProgress = progress(meter, config)
  const payload = Buffer.alloc(config.recordSize, 'x')
  const deadline =
    config.durationMs === undefined ? Number.POSITIVE_INFINITY : meter.started + config.durationMs
  let sent = 0
  const run = async (producer: Producer): Promise<void> => {
    await producer.initTransactions()
    while (sent < config.numRecords && performance.now() < deadline) {
      await pace(config, meter.started, sent)
      const count = Math.min(size, config.numRecords - sent)
      sent += count
      producer.beginTransaction()
      for (let i = 0; i < count; i++) {
        const sentAt = performance.now()
        producer.produce({ topic, value: payload }, (error) => {
          if (error) meter.failed++
          else meter.record(payload.length, (performance.now() - sentAt) * 1000)
        })
      }
      const startedAt = performance.now()
      try {
        await producer.commitTransaction()
        commits.record(Math.max(1, Math.round((performance.now() - startedAt) * 1000)))
        committed++
      } catch (error) {
        failedTransactions++
        process.stderr.write(`transaction failed: ${(error as Error).message}\n`)
        await producer.abortTransaction()
      }
    }
  }
  try {
    await Promise.all(producers.map(run))
  } finally {
    stopProgress()
    await Promise.all(producers.map((p) => p.close().catch(() => undefined)))
  }
  return {
    ...meter.summary(config, topic),
    transactions: { committed, failed: failedTransactions, size, commitLatencyMs: latencySummary(commits) },
  }
}

/**
 * --history: sends, acks and fails of every bench producer. Values must be unique for the
 * checker, so each one starts with "<producer>-<seq> " (padded to --record-size with 'x');
 * the text before the space is the record's value in the history.
 */
class BenchHistory {
  private readonly nextSeq: number[]

  private constructor(
    private readonly writer: HistoryWriter,
    private readonly recordSize: number,
    producers: number,
  ) {
    this.nextSeq = Array.from({ length: producers }, () => 0)
  }

  static async open(config: BenchConfig, producers: number): Promise<BenchHistory> {
    const writer = await HistoryWriter.create(config.history!)
    // Kafka's rule, as the client applies it: idempotent by default when acks=all.
    for (let i = 0; i < producers; i++) writer.producer(producerName(i), config.acks === 'all')
    return new BenchHistory(writer, config.recordSize, producers)
  }

  get needsDrain(): boolean {
    return this.writer.needsDrain
  }

  send(index: number, topic: string): { producer: string; seq: number; value: Buffer } {
    const producer = producerName(index)
    const seq = this.nextSeq[index]++
    const id = `${producer}-${seq}`
    this.writer.send({ producer, seq, topic, value: id, key: null })
    return { producer, seq, value: Buffer.from(`${id} `.padEnd(this.recordSize, 'x')) }
  }

  settle(
    sent: { producer: string; seq: number },
    topic: string,
    error: KafkaClientError | null,
    metadata: RecordMetadata | undefined,
  ): void {
    const { producer, seq } = sent
    if (error || !metadata) this.writer.fail({ producer, seq, error: error?.code ?? 'no metadata' })
    else
      this.writer.ack({
        producer,
        seq,
        topic,
        partition: metadata.partition,
        offset: metadata.offset < 0 ? null : metadata.offset,
      })
  }

  drain(): Promise<void> {
    return this.writer.drain()
  }

  close(): Promise<void> {
    return this.writer.close()
  }
}

function producerName(index: number): string {
  return `bench-${index}`
}

/** Waits until `sent` is within the target rate (no wait for -1). */
async function pace(config: BenchConfig, startedMs: number, sent: number): Promise<void> {
  if (config.throughput <= 0) return
  const dueMs = startedMs + (sent / config.throughput) * 1000
  const waitMs = dueMs - performance.now()
  if (waitMs > 1) await new Promise((resolve) => setTimeout(resolve, waitMs))
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

function yieldToIo(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

/** A copy of the payload with performance.now() in its first 8 bytes (same process, same clock). */
function stamped(payload: Buffer): Buffer {
  const value = Buffer.from(payload)
  value.writeDoubleBE(performance.now(), 0)
  return value
}

/** The e2e consumer: positioned at the end before the first send, records latency as records arrive. */
async function startE2eConsumer(config: BenchConfig, topic: string): Promise<Consumer> {
  const consumer = new Consumer({
    ...clientOptions(config.bootstrap, 'tidelog-bench-e2e', config.commandConfig),
    fetchMaxWaitMs: 100,
    maxPollRecords: 10000,
  })
  const partitions = await consumer.assignTopics([topic])
  // Positions fixed now: a lazy 'latest' looked up after the first sends would skip them.
  const ends = await consumer.endOffsets(partitions)
  for (const tp of partitions) consumer.seek(tp, ends.get(`${tp.topic}/${tp.partition}`) ?? 0)
  return consumer
}

class E2eReceiver {
  private received = 0
  private target = Number.POSITIVE_INFINITY
  private stopping = false
  private readonly loop: Promise<void>

  constructor(
    private readonly consumer: Consumer,
    private readonly meter: Meter,
  ) {
    this.loop = this.run()
  }

  /** Waits for `count` records, or until 10 s pass without one. */
  async finish(count: number): Promise<void> {
    this.target = count
    await this.loop
  }

  async close(): Promise<void> {
    this.stopping = true
    this.consumer.stop()
    await this.loop
    await this.consumer.close()
  }

  private async run(): Promise<void> {
    let idleSince = performance.now()
    while (!this.stopping && this.received < this.target) {
      const records = await this.consumer.poll(200)
      const now = performance.now()
      if (records.length === 0 && this.target !== Number.POSITIVE_INFINITY && now - idleSince > 10000) return
      if (records.length > 0) idleSince = now
      for (const r of records) {
        this.received++
        this.meter.record(r.value!.length, (now - r.value!.readDoubleBE(0)) * 1000)
      }
    }
  }
}

async function consumeBench(config: BenchConfig, topic: string): Promise<BenchResult> {
  const consumer = new Consumer({
    ...clientOptions(config.bootstrap, 'tidelog-bench-consumer', config.commandConfig),
    autoOffsetReset: 'earliest',
    maxPollRecords: 10000,
    maxPartitionFetchBytes: config.maxPartitionFetchBytes,
  })
  await consumer.assignTopics([topic])
  const meter = new Meter()
  const stopProgress = progress(meter, config)
  const deadline =
    config.durationMs === undefined ? Number.POSITIVE_INFINITY : meter.started + config.durationMs
  let idlePolls = 0
  // As rdkafka-perf.c's consumer: records/s and MB/s from the first record to the last, so
  // neither the first fetch's round trip nor close() (which waits out a long-poll fetch, up
  // to fetch.max.wait.ms) counts. CPU still counts from here, that first fetch's decode included.
  let firstRecordAtMs: number | null = null
  let result: BenchResult
  try {
    // Ends at the count, the deadline, or after 10 s without a record.
    while (meter.count < config.numRecords && performance.now() < deadline && idlePolls < 10) {
      const records = await consumer.poll(1000)
      idlePolls = records.length === 0 ? idlePolls + 1 : 0
      if (records.length > 0) firstRecordAtMs ??= performance.now()
      for (const r of records.slice(0, config.numRecords - meter.count))
        meter.record((r.value?.length ?? 0) + (r.key?.length ?? 0))
    }
    result = meter.summary(config, topic, firstRecordAtMs ?? meter.started)
  } finally {
    stopProgress()
    await consumer.close()
  }
  return result
}
