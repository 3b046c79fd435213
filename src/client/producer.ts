/**
 * The producer: `send(record)` partitions the record (explicit partition, murmur2 of the
 * key, or KIP-480's sticky partition), appends it to its partition's open batch, and a
 * sender drains ready batches (full, lingered, flushed or retried) to each partition's
 * leader on that broker's produce connection, at most `maxInFlightRequestsPerConnection`
 * requests per broker.
 *
 * Delivery: `acks` 0/1/all; a retriable error (leader moved, connection lost, timeout,
 * NOT_ENOUGH_REPLICAS...) puts the batch back at the front of its partition's queue with
 * exponential backoff, refreshing metadata first when the leader may have moved. A batch
 * fails after `retries` attempts or once `deliveryTimeoutMs` has passed since it was
 * created. Without idempotence a retry can duplicate a batch whose first answer was lost,
 * and with `maxInFlightRequestsPerConnection` > 1 a retried batch can land after a later
 * one: Kafka documents both. `maxInFlightRequestsPerConnection: 1` keeps order (the
 * partition is muted while its batch is in flight).
 *
 * Sync and async styles (the source's producer.type): `await producer.send(r)` per record,
 * or `send(r, callback)` / the returned promise plus `flush()`. With `producerType: 'sync'`
 * each record is sent only once the previous one is acknowledged, whatever the caller does.
 *
 * Idempotence (`enableIdempotence`, on by default with acks=all as in Kafka 3+): before the
 * first batch goes out the producer gets a producer id and epoch from InitProducerId (any
 * broker; COORDINATOR_NOT_AVAILABLE and other retriable answers are retried with backoff).
 * Each batch is stamped with them and its partition's next sequence when it is first sent,
 * and encoded once: a retry re-sends the same bytes, so the leader (or a new leader, which
 * replicated the producer state) answers a batch it already wrote with its first offsets
 * instead of writing it again. Up to 5 batches per partition are in flight (at most 5
 * requests per connection). Order is kept as Java's Sender keeps it: a failed batch goes
 * back into its queue in sequence order, later in-flight batches of that partition come
 * back with OUT_OF_ORDER_SEQUENCE_NUMBER (retried: they are not the next sequence) or a
 * connection error and line up behind it, and a partition with a retried batch at its head
 * sends one batch at a time until the retries are through. OUT_OF_ORDER_SEQUENCE_NUMBER on
 * the batch that *is* the next sequence (everything before it acknowledged) is a real gap:
 * that batch fails. UNKNOWN_PRODUCER_ID (broker state lost: retention, truncation) and
 * INVALID_PRODUCER_EPOCH reset the partition as KIP-360 does for non-transactional
 * producers: a new producer id (a fresh InitProducerId, the non-transactional "bump"), and
 * the partition's unacknowledged batches re-stamped from sequence 0 once none of them is
 * in flight; other partitions move to the new id when their own in-flight batches are done.
 * A batch that fails for good (gap, fatal error) resets its partition the same way, so the
 * batches behind it do not wait on a sequence that never comes. A batch that expires after
 * it was sent may be in the log, though: re-stamping the batches behind it could write them
 * twice. Those keep their sequences and go first; new batches wait, and the partition keeps
 * its producer id if all of them are acknowledged (the expired one was written, or a later
 * one would have met a gap), or is reset if not (Java's "unresolved sequences").
 */
import { assert } from '../common/assert.js'
import { CompressionType } from '../protocol/batch-header.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { ApiKey } from '../protocol/generated/index.js'
import type { InitProducerIdResponse } from '../protocol/generated/init-producer-id-response.js'
import type { ProduceRequest } from '../protocol/generated/produce-request.js'
import type {
  ProduceResponse,
  ProduceResponsePartitionProduceResponse,
} from '../protocol/generated/produce-response.js'
import type { RecordInput } from '../protocol/record-batch.js'
import { type ClientOptions, KafkaClient } from './client.js'
import {
  asClientError,
  ClientClosedError,
  DeliveryTimeoutError,
  InvalidArgumentError,
  KafkaClientError,
  KafkaProtocolError,
  UnsupportedApiError,
} from './errors.js'
import { BatchBufferPool, MemoryPool } from './memory-pool.js'
import { intOption, oneOf } from './options.js'
import { partitionForKey, StickyPartitioner, type TopicPartitions } from './partitioner.js'
import {
  type BatchEncoding,
  type Bytes,
  CALLBACK,
  failSettle,
  invokeCallback,
  ProducerBatch,
  type ProducerHeaders,
  type RecordCallback,
  type RecordMetadata,
  type Reject,
  recordSizeUpperBound,
  type Settle,
  toBytes,
  toHeaders,
} from './producer-batch.js'
import { backoffMs, isRetriableError, needsMetadataRefresh, sleep } from './retry.js'

export type { RecordCallback, RecordMetadata }

export interface ProducerRecord {
  topic: string
  partition?: number
  key?: Bytes | null
  value: Bytes | null
  /** An object, or a list of pairs when a key repeats. */
  headers?: ProducerHeaders
  /** CreateTime in ms since the epoch; default: when send() was called. */
  timestamp?: number
}

export type Acks = 0 | 1 | -1 | 'all'
export type CompressionName = 'none' | 'gzip' | 'snappy' | 'lz4' | 'zstd'

/** A custom partitioner; return undefined to fall back to the default rules. */
export type PartitionerFn = (record: ProducerRecord, numPartitions: number) => number | undefined

export interface ProducerOptions extends Partial<ClientOptions> {
  /** Share an existing client's connections and metadata instead of opening new ones. */
  client?: KafkaClient
  /** acks (default 'all'): 0 no answer, 1 the leader wrote it, 'all'/-1 every ISR member has it. */
  acks?: Acks
  /** producer.type: 'async' (default) or 'sync' (one record at a time, each acknowledged before the next). */
  producerType?: 'sync' | 'async'
  /** batch.size in bytes (default 16384). */
  batchSize?: number
  /** linger.ms (default 5, Kafka 4's default). */
  lingerMs?: number
  /** compression.type (default 'none'). */
  compression?: CompressionName
  compressionLevel?: number
  /** retries (default 2147483647: bounded by deliveryTimeoutMs). */
  retries?: number
  /** delivery.timeout.ms (default 120000): send to acknowledgement, retries included. */
  deliveryTimeoutMs?: number
  /** max.in.flight.requests.per.connection (default 5). */
  maxInFlightRequestsPerConnection?: number
  /** max.request.size (default 1048576). */
  maxRequestSize?: number
  /** buffer.memory (default 33554432): bytes of records waiting to be acknowledged. */
  bufferMemory?: number
  /** max.block.ms (default 60000): longest send() waits for metadata or buffer space. */
  maxBlockMs?: number
  /** allow.auto.create.topics (default true), as the Java producer. */
  allowAutoTopicCreation?: boolean
  partitioner?: PartitionerFn
  /**
   * enable.idempotence: no duplicates and no reordering across retries (producer id and
   * sequence numbers). Default: on when acks is 'all' (and retries > 0), as in Kafka 3+;
   * off otherwise. `true` with acks other than 'all', retries 0 or more than 5 requests in
   * flight is a configuration error. When on by default, max.in.flight is capped at 5, and
   * a broker without InitProducerId turns it off (explicit `true` then fails the sends).
   */
  enableIdempotence?: boolean
}

interface ResolvedProducerOptions {
  acks: 0 | 1 | -1
  producerType: 'sync' | 'async'
  batchSize: number
  lingerMs: number
  compression: CompressionType
  compressionLevel: number | undefined
  retries: number
  deliveryTimeoutMs: number
  maxInFlight: number
  maxRequestSize: number
  bufferMemory: number
  maxBlockMs: number
  allowAutoTopicCreation: boolean
  requestTimeoutMs: number
  idempotent: boolean
  /** Whether the caller asked for idempotence (else it is the acks=all default). */
  idempotenceExplicit: boolean
}

const COMPRESSION: Readonly<Record<CompressionName, CompressionType>> = {
  none: CompressionType.None,
  gzip: CompressionType.Gzip,
  snappy: CompressionType.Snappy,
  lz4: CompressionType.Lz4,
  zstd: CompressionType.Zstd,
}

/** Added to request.timeout.ms on the client side so the broker's own REQUEST_TIMED_OUT arrives first. */
const CLIENT_TIMEOUT_MARGIN_MS = 2000
/** Passes over pending work in flush() before it settles for what remains. */
const FLUSH_PASSES_MAX = 1000
/** Batches per partition in flight for an idempotent producer (what a broker caches per producer). */
const IDEMPOTENT_IN_FLIGHT_MAX = 5
/** Sequence numbers wrap after Int32 max, as Kafka's DefaultRecordBatch.incrementSequence. */
const SEQUENCE_MODULUS = 2 ** 31
/** transaction.timeout.ms sent in InitProducerId (Kafka's default; unused without a transactional id). */
const TRANSACTION_TIMEOUT_MS = 60000

/** An idempotent producer's sequence bookkeeping for one partition. */
interface PartitionSequences {
  producerId: bigint
  producerEpoch: number
  /** Sequence of the next new batch. */
  next: number
  /** Last sequence acknowledged under producerId/epoch; -1: none. */
  lastAcked: number
  /** Unacknowledged batches are re-stamped under a new producer id before anything else goes. */
  rewrite: boolean
  /**
   * Last sequence of a batch that expired after it was sent (Java's "unresolved sequence"):
   * it may be in the log. -1: none. New batches wait until the batches already stamped are
   * through; then the partition keeps its producer id if every sequence was acknowledged
   * (the expired batch was written), or is reset otherwise.
   */
  unresolvedLast: number
}

function resolveProducerOptions(options: ProducerOptions, requestTimeoutMs: number): ResolvedProducerOptions {
  const acksOption = oneOf<Acks>('acks', options.acks, 'all', [0, 1, -1, 'all'])
  const acks = acksOption === 'all' ? -1 : acksOption
  const retries = intOption('retries', options.retries, 2147483647, 0)
  let maxInFlight = intOption(
    'max.in.flight.requests.per.connection',
    options.maxInFlightRequestsPerConnection,
    5,
    1,
    1000,
  )
  if (options.enableIdempotence !== undefined && typeof options.enableIdempotence !== 'boolean') {
    throw new InvalidArgumentError(
      `enable.idempotence must be a boolean, got ${String(options.enableIdempotence)}`,
    )
  }
  let idempotent: boolean
  if (options.enableIdempotence === true) {
    if (acks !== -1) {
      throw new InvalidArgumentError(
        `enable.idempotence requires acks='all', got ${String(acksOption)}; set enableIdempotence: false or acks: 'all'`,
      )
    }
    if (retries === 0) throw new InvalidArgumentError('enable.idempotence requires retries > 0')
    if (maxInFlight > IDEMPOTENT_IN_FLIGHT_MAX) {
      throw new InvalidArgumentError(
        `enable.idempotence requires max.in.flight.requests.per.connection <= ${IDEMPOTENT_IN_FLIGHT_MAX}, got ${maxInFlight}`,
      )
    }
    idempotent = true
  } else {
    // Kafka 3+: on by default unless acks or retries conflict.
    idempotent = options.enableIdempotence === undefined && acks === -1 && retries > 0
    if (idempotent) maxInFlight = Math.min(maxInFlight, IDEMPOTENT_IN_FLIGHT_MAX)
  }
  const lingerMs = intOption('linger.ms', options.lingerMs, 5, 0)
  const deliveryTimeoutMs = intOption('delivery.timeout.ms', options.deliveryTimeoutMs, 120000, 1)
  if (deliveryTimeoutMs < lingerMs + requestTimeoutMs) {
    throw new InvalidArgumentError(
      `delivery.timeout.ms (${deliveryTimeoutMs}) must be at least linger.ms + request.timeout.ms (${lingerMs + requestTimeoutMs})`,
    )
  }
  return {
    acks,
    producerType: oneOf('producer.type', options.producerType, 'async', ['sync', 'async']),
    batchSize: intOption('batch.size', options.batchSize, 16384, 0),
    lingerMs,
    compression:
      COMPRESSION[
        oneOf<CompressionName>(
          'compression.type',
          options.compression,
          'none',
          Object.keys(COMPRESSION) as CompressionName[],
        )
      ],
    compressionLevel: options.compressionLevel,
    retries,
    deliveryTimeoutMs,
    maxInFlight,
    maxRequestSize: intOption('max.request.size', options.maxRequestSize, 1048576, 1),
    bufferMemory: intOption('buffer.memory', options.bufferMemory, 33554432, 1),
    maxBlockMs: intOption('max.block.ms', options.maxBlockMs, 60000, 0),
    allowAutoTopicCreation: options.allowAutoTopicCreation ?? true,
    requestTimeoutMs,
    idempotent,
    idempotenceExplicit: options.enableIdempotence === true,
  }
}

export class Producer {
  readonly client: KafkaClient
  private readonly options: ResolvedProducerOptions
  private readonly ownsClient: boolean
  private readonly partitioner?: PartitionerFn
  private readonly sticky = new StickyPartitioner()
  /** Per partition ("topic/partition"), its batches in send order; the last may be open. */
  private readonly queues = new Map<string, ProducerBatch[]>()
  private readonly incomplete = new Set<ProducerBatch>()
  private readonly pendingSends = new Set<Promise<unknown>>()
  private readonly inFlightByNode = new Map<number, number>()
  private readonly mutedPartitions = new Set<string>()
  /** The queue the last record went to (queueOf's shortcut); null once it is dropped. */
  private lastQueue: { topic: string; partition: number; queue: ProducerBatch[] } | null = null
  private readonly partitionsCache = new Map<
    string,
    { snapshot: KafkaClient['metadata']; partitions: TopicPartitions }
  >()
  private readonly memory: MemoryPool
  private readonly encoding: BatchEncoding
  private readonly buffers: BatchBufferPool
  private flushing = 0
  private drainScheduled = false
  private wakeTimer: NodeJS.Timeout | null = null
  private wakeAtMs = Number.POSITIVE_INFINITY
  private metadataRefreshAtMs = 0
  private syncTail: Promise<unknown> = Promise.resolve()
  private readonly counters = {
    requests: 0,
    batches: 0,
    retries: 0,
    failedBatches: 0,
    producerIdResets: 0,
  }
  private closed = false
  // Idempotence: the current producer id and epoch (-1n: none yet, or a reset is pending).
  private idempotent: boolean
  private producerId = -1n
  private producerEpoch = -1
  private initProducerIdRunning = false
  private readonly sequences = new Map<string, PartitionSequences>()
  /** Batches per partition sent and not yet answered. */
  private readonly inFlightByPartition = new Map<string, number>()
  private drainCounter = 0

  constructor(options: ProducerOptions) {
    this.ownsClient = options.client === undefined
    this.client = options.client ?? new KafkaClient(requireBootstrap(options))
    this.options = resolveProducerOptions(options, this.client.options.requestTimeoutMs)
    this.partitioner = options.partitioner
    this.memory = new MemoryPool(this.options.bufferMemory, this.options.maxBlockMs)
    this.buffers = new BatchBufferPool(() => this.memory.availableBytes)
    this.encoding = {
      compression: this.options.compression,
      compressionLevel: this.options.compressionLevel,
      batchSize: this.options.batchSize,
      allocate: (bytes) => this.buffers.allocate(bytes),
    }
    this.idempotent = this.options.idempotent
  }

  /** Whether sends are idempotent (false also after a broker turned out not to serve InitProducerId). */
  get isIdempotent(): boolean {
    return this.idempotent
  }

  /** The producer id and epoch in use; null before InitProducerId answered (or without idempotence). */
  get producerIdentity(): { producerId: bigint; producerEpoch: number } | null {
    return this.producerId < 0n ? null : { producerId: this.producerId, producerEpoch: this.producerEpoch }
  }

  /**
   * Sends one record; the promise resolves with its offset once acknowledged (acks=0: once
   * written to the socket) and rejects with a KafkaClientError. The optional callback gets
   * the same outcome, Java style; the promise is then marked handled.
   */
  send(
    record: ProducerRecord,
    callback?: (error: KafkaClientError | null, metadata?: RecordMetadata) => void,
  ): Promise<RecordMetadata> {
    let promise: Promise<RecordMetadata>
    if (this.options.producerType === 'sync') {
      promise = this.syncTail.then(() => this.sendNow(record))
      this.syncTail = promise.catch(() => undefined)
    } else {
      promise = this.sendNow(record)
    }
    if (callback) {
      promise.then(
        (metadata) => invokeCallback(callback, null, metadata),
        (error: unknown) => invokeCallback(callback, asClientError(error)),
      )
    }
    return promise
  }

  /**
   * send(record, callback) without a promise: the callback alone reports the outcome (an
   * error or the record's metadata), called when the batch settles. No promise, resolving
   * functions or promise jobs per record: for callers sending at high rates (the bench tool),
   * as librdkafka's produce() with a delivery report callback.
   */
  produce(record: ProducerRecord, callback: RecordCallback): void {
    if (typeof callback !== 'function') throw new InvalidArgumentError('produce() needs a callback')
    if (this.options.producerType === 'sync') {
      this.send(record, callback).catch(() => undefined)
      return
    }
    this.enqueue(record, callback, CALLBACK)
  }

  /** Sends everything buffered now (linger ignored) and waits until it is acknowledged or failed. */
  async flush(): Promise<void> {
    this.flushing++
    try {
      for (let pass = 0; pass < FLUSH_PASSES_MAX; pass++) {
        if (this.incomplete.size === 0 && this.pendingSends.size === 0) return
        this.scheduleDrain()
        await Promise.allSettled([...this.pendingSends, ...[...this.incomplete].map((b) => b.done)])
      }
    } finally {
      this.flushing--
    }
  }

  /** Flushes, then closes (and closes the client if this producer created it). */
  async close(): Promise<void> {
    if (this.closed) return
    await this.flush()
    this.closed = true
    this.buffers.clear()
    if (this.wakeTimer) clearTimeout(this.wakeTimer)
    if (this.ownsClient) this.client.close()
  }

  /** Produce requests sent, batches in them, batch retries, failed batches and producer id resets so far. */
  metrics(): {
    requests: number
    batches: number
    retries: number
    failedBatches: number
    producerIdResets: number
  } {
    return { ...this.counters }
  }

  /** Records buffered or in flight (for progress reports and tests). */
  get pendingRecordCount(): number {
    let count = this.pendingSends.size
    for (const batch of this.incomplete) count += batch.recordCount
    return count
  }

  // ---- append path ---------------------------------------------------------------------

  private sendNow(record: ProducerRecord): Promise<RecordMetadata> {
    return new Promise<RecordMetadata>((resolve, reject) => this.enqueue(record, resolve, reject))
  }

  /**
   * Appends the record now if its topic's metadata is known, memory is free and no earlier
   * send still waits (order); otherwise waits for those first. `reject` is CALLBACK when
   * `resolve` is a produce() callback.
   */
  private enqueue(record: ProducerRecord, resolve: Settle, reject: Reject): void {
    if (this.closed) {
      failSettle(resolve, reject, new ClientClosedError('producer'))
      return
    }
    // The producer id is fetched while the first batch lingers.
    if (this.idempotent) this.ensureProducerId()
    let input: RecordInput
    try {
      input = toRecordInput(record)
    } catch (error) {
      failSettle(resolve, reject, error as Error)
      return
    }
    const size = recordSizeUpperBound(input)
    if (size + 61 > this.options.maxRequestSize) {
      failSettle(
        resolve,
        reject,
        new KafkaClientError(
          'ERR_RECORD_TOO_LARGE',
          `record of ~${size} bytes exceeds max.request.size ${this.options.maxRequestSize}`,
        ),
      )
      return
    }
    const known = this.client.metadata.topics.get(record.topic)
    if (
      known &&
      known.partitions.length > 0 &&
      this.pendingSends.size === 0 &&
      this.memory.tryReserve(size)
    ) {
      this.append(record, input, size, resolve, reject)
      return
    }
    // Slow path: wait for metadata and memory. Only the wait is tracked (later sends queue
    // behind it, keeping order); once appended the record is an ordinary batch member.
    this.track(
      this.waitUntilAppendable(record.topic, size).then(
        () => this.append(record, input, size, resolve, reject),
        (error: unknown) => failSettle(resolve, reject, error as Error),
      ),
    )
  }

  private track(promise: Promise<void>): void {
    this.pendingSends.add(promise)
    const untrack = (): void => {
      this.pendingSends.delete(promise)
    }
    promise.then(untrack, untrack)
  }

  /** Waits for the topic's metadata, then for the record's buffer memory. */
  private async waitUntilAppendable(topic: string, size: number): Promise<void> {
    this.client.addInterest([topic])
    await this.client.waitForTopics([topic], {
      maxWaitMs: this.options.maxBlockMs,
      allowAutoTopicCreation: this.options.allowAutoTopicCreation,
    })
    await this.memory.reserve(size)
  }

  /** Appends to its partition's open batch; a bad partition releases the memory and rejects. */
  private append(
    record: ProducerRecord,
    input: RecordInput,
    size: number,
    resolve: Settle,
    reject: Reject,
  ): void {
    const info = this.client.metadata.topics.get(record.topic)!
    const numPartitions = info.partitions.length
    let partition: number
    try {
      partition = this.choosePartition(record, input, numPartitions)
    } catch (error) {
      this.memory.release(size)
      failSettle(resolve, reject, error as Error)
      return
    }
    const batch = this.batchFor(record, input, partition, size, numPartitions)
    batch.reservedBytes += size
    batch.append(input, size, resolve, reject)
    this.onAppended(batch)
  }

  private choosePartition(record: ProducerRecord, input: RecordInput, numPartitions: number): number {
    if (record.partition !== undefined) {
      if (!Number.isInteger(record.partition) || record.partition < 0 || record.partition >= numPartitions) {
        throw new InvalidArgumentError(
          `partition ${record.partition} is not in [0, ${numPartitions}) for topic ${record.topic}`,
        )
      }
      return record.partition
    }
    const custom = this.partitioner?.(record, numPartitions)
    if (custom !== undefined) {
      if (!Number.isInteger(custom) || custom < 0 || custom >= numPartitions) {
        throw new InvalidArgumentError(`partitioner returned ${custom}, not in [0, ${numPartitions})`)
      }
      return custom
    }
    if (input.key) return partitionForKey(input.key, numPartitions)
    return this.sticky.partition(record.topic, this.topicPartitions(record.topic, numPartitions))
  }

  /** The open batch to append to; a keyless record that needs a new batch moves the sticky partition first. */
  private batchFor(
    record: ProducerRecord,
    input: RecordInput,
    partition: number,
    size: number,
    numPartitions: number,
  ): ProducerBatch {
    let target = partition
    let queue = this.queueOf(record.topic, target)
    let open = queue.at(-1)
    const sticky = record.partition === undefined && !input.key && this.partitioner === undefined
    if (sticky && !open?.hasRoomFor(size, this.options.batchSize)) {
      target = this.sticky.onNewBatch(
        record.topic,
        this.topicPartitions(record.topic, numPartitions),
        partition,
      )
      queue = this.queueOf(record.topic, target)
      open = queue.at(-1)
    }
    if (open?.hasRoomFor(size, this.options.batchSize)) return open
    const now = Date.now()
    const batch = new ProducerBatch(
      record.topic,
      target,
      now,
      now + this.options.deliveryTimeoutMs,
      this.encoding,
    )
    queue.push(batch)
    this.incomplete.add(batch)
    return batch
  }

  private onAppended(batch: ProducerBatch): void {
    if (batch.isFull(this.options.batchSize) || this.options.lingerMs === 0 || this.flushing > 0) {
      this.scheduleDrain()
    } else if (batch.recordCount === 1) {
      this.wakeAt(batch.createdMs + this.options.lingerMs)
    }
  }

  /** Partition count and available partitions, computed once per metadata snapshot and topic. */
  private topicPartitions(topic: string, numPartitions: number): TopicPartitions {
    const snapshot = this.client.metadata
    let cached = this.partitionsCache.get(topic)
    if (!cached || cached.snapshot !== snapshot || cached.partitions.numPartitions !== numPartitions) {
      cached = {
        snapshot,
        partitions: { numPartitions, available: snapshot.availablePartitions(topic) },
      }
      this.partitionsCache.set(topic, cached)
    }
    return cached.partitions
  }

  private queueOf(topic: string, partition: number): ProducerBatch[] {
    // Consecutive records mostly go to one partition (sticky, or one key): skip the key string.
    const last = this.lastQueue
    if (last !== null && last.partition === partition && last.topic === topic) return last.queue
    const key = `${topic}/${partition}`
    let queue = this.queues.get(key)
    if (!queue) {
      queue = []
      this.queues.set(key, queue)
    }
    this.lastQueue = { topic, partition, queue }
    return queue
  }

  // ---- sender ----------------------------------------------------------------------------

  private scheduleDrain(): void {
    if (this.drainScheduled) return
    this.drainScheduled = true
    setImmediate(() => {
      this.drainScheduled = false
      this.drain()
    })
  }

  private wakeAt(atMs: number): void {
    if (atMs >= this.wakeAtMs) return
    if (this.wakeTimer) clearTimeout(this.wakeTimer)
    this.wakeAtMs = atMs
    this.wakeTimer = setTimeout(
      () => {
        this.wakeTimer = null
        this.wakeAtMs = Number.POSITIVE_INFINITY
        this.drain()
      },
      Math.max(atMs - Date.now(), 0),
    )
  }

  /** Sends every ready batch its broker has room for; arranges to run again when more become ready. */
  private drain(): void {
    const now = Date.now()
    const byNode = new Map<number, ProducerBatch[]>()
    let nextWakeMs = Number.POSITIVE_INFINITY
    let needMetadata = this.client.metadataStale
    if (this.idempotent && this.producerId < 0n && this.queues.size > 0) this.ensureProducerId()
    for (const [key, queue] of this.queues) {
      this.expireQueued(queue, now)
      const first = queue[0]
      if (!first) {
        this.queues.delete(key)
        if (this.lastQueue?.queue === queue) this.lastQueue = null
        continue
      }
      if (this.mutedPartitions.has(key)) continue
      const readyAtMs = this.readyAtMs(first, queue.length, now)
      if (readyAtMs > now) {
        nextWakeMs = Math.min(nextWakeMs, readyAtMs)
        continue
      }
      const leader = this.client.metadata.leaderOf(first.topic, first.partition)
      if (!leader) {
        needMetadata = true
        continue
      }
      if (this.idempotent && !this.idempotentReady(key, queue)) {
        // Sent when the producer id arrives or the partition's in-flight batches answer;
        // the deadline still applies.
        nextWakeMs = Math.min(nextWakeMs, first.deadlineMs)
        continue
      }
      const list = byNode.get(leader.nodeId) ?? []
      list.push(first)
      byNode.set(leader.nodeId, list)
    }
    let sent = 0
    for (const [nodeId, batches] of byNode) sent += this.sendToNode(nodeId, batches)
    // One batch per partition per request: look again for the next ones (pipelining up to
    // max.in.flight), as Java's sender loop does.
    if (sent > 0) this.scheduleDrain()
    if (needMetadata) nextWakeMs = Math.min(nextWakeMs, this.refreshMetadataSoon(now))
    if (nextWakeMs < Number.POSITIVE_INFINITY) this.wakeAt(nextWakeMs)
  }

  /**
   * Whether an idempotent producer may send the head of this partition's queue now. A
   * partition being rewritten (KIP-360 reset) first re-stamps its queued batches under the
   * current producer id once none is in flight; a retried batch (already stamped) goes only
   * when nothing else of its partition is in flight, so retries land in sequence order; a new
   * batch needs a producer id, moves the partition to it when the partition is idle, and at
   * most 5 batches of a partition are in flight.
   */
  private idempotentReady(key: string, queue: ProducerBatch[]): boolean {
    const inFlight = this.inFlightByPartition.get(key) ?? 0
    const state = this.sequences.get(key)
    if (state?.rewrite) {
      if (inFlight > 0 || this.producerId < 0n) return false
      for (const batch of queue) if (batch.hasSequence) batch.resetProducerState()
      this.sequences.set(key, this.freshSequences())
    }
    const first = queue[0]
    if (first.hasSequence) return inFlight === 0
    if (state && state.unresolvedLast >= 0 && !this.resolveSequences(state, first, inFlight)) return false
    if (this.producerId < 0n) return false
    const current = this.sequences.get(key)
    if (!current || current.producerId !== this.producerId || current.producerEpoch !== this.producerEpoch) {
      if (inFlight > 0) return false
      this.sequences.set(key, this.freshSequences())
    }
    return inFlight < IDEMPOTENT_IN_FLIGHT_MAX
  }

  /**
   * Java's maybeResolveSequences, once none of the partition's stamped batches is left: if
   * every stamped sequence was acknowledged, the expired batch was written (a later batch
   * would have met a gap otherwise) and the producer id stays; if not, the partition is
   * reset. Returns whether new batches may go on the current producer id.
   */
  private resolveSequences(state: PartitionSequences, head: ProducerBatch, inFlight: number): boolean {
    if (inFlight > 0) return false
    if ((state.lastAcked + 1) % SEQUENCE_MODULUS === state.next) {
      state.unresolvedLast = -1
      return true
    }
    state.unresolvedLast = -1
    this.resetPartitionOf(head.topic, head.partition, state.producerId, state.producerEpoch)
    return false
  }

  private freshSequences(): PartitionSequences {
    return {
      producerId: this.producerId,
      producerEpoch: this.producerEpoch,
      next: 0,
      lastAcked: -1,
      rewrite: false,
      unresolvedLast: -1,
    }
  }

  /** Gives a new batch the partition's next sequence numbers (idempotent producers). */
  private stamp(key: string, batch: ProducerBatch): void {
    const state = this.sequences.get(key)
    assert(
      state !== undefined && state.producerId === this.producerId && !state.rewrite,
      'stamping a batch of a partition not on the current producer id',
    )
    batch.stamp(state.producerId, state.producerEpoch, state.next)
    state.next = (state.next + batch.recordCount) % SEQUENCE_MODULUS
  }

  /**
   * KIP-360 for a non-transactional producer: the partition's unacknowledged batches are
   * re-stamped from sequence 0 under a new producer id. A new InitProducerId is asked for
   * unless the failing batch is already from an older id (a reset is under way).
   */
  private resetPartition(batch: ProducerBatch): void {
    this.resetPartitionOf(batch.topic, batch.partition, batch.producerId, batch.producerEpoch)
  }

  private resetPartitionOf(
    topic: string,
    partition: number,
    producerId: bigint,
    producerEpoch: number,
  ): void {
    const key = `${topic}/${partition}`
    const state = this.sequences.get(key)
    if (state) {
      state.rewrite = true
      state.unresolvedLast = -1
    } else this.sequences.set(key, { ...this.freshSequences(), rewrite: true })
    if (producerId === this.producerId && producerEpoch === this.producerEpoch) {
      this.counters.producerIdResets++
      this.producerId = -1n
      this.producerEpoch = -1
      this.ensureProducerId()
    }
  }

  /** Starts InitProducerId unless it runs already or an id is in hand; drains when it answers. */
  private ensureProducerId(): void {
    if (this.producerId >= 0n || this.initProducerIdRunning || !this.idempotent) return
    this.initProducerIdRunning = true
    this.initProducerId().then(
      ({ producerId, producerEpoch }) => {
        this.initProducerIdRunning = false
        this.producerId = producerId
        this.producerEpoch = producerEpoch
        this.scheduleDrain()
      },
      (error: unknown) => {
        this.initProducerIdRunning = false
        const failure = asClientError(error)
        if (failure instanceof UnsupportedApiError && !this.options.idempotenceExplicit) {
          // Idempotence by default only: a broker without InitProducerId gets plain sends.
          this.idempotent = false
          this.scheduleDrain()
          return
        }
        // Fatal for the batches waiting on it; later sends try again.
        for (const queue of this.queues.values()) {
          for (let i = queue.length - 1; i >= 0; i--) {
            const batch = queue[i]
            if (batch.hasSequence) continue
            queue.splice(i, 1)
            this.failBatch(batch, failure)
          }
        }
        this.scheduleDrain()
      },
    )
  }

  /** InitProducerId on any broker, retried with backoff while the answer is retriable. */
  private async initProducerId(): Promise<{ producerId: bigint; producerEpoch: number }> {
    for (let attempt = 1; ; attempt++) {
      let failure: KafkaClientError
      try {
        const response = await this.client.request<InitProducerIdResponse>(
          'any',
          ApiKey.InitProducerId,
          () => ({
            transactionalId: null,
            transactionTimeoutMs: TRANSACTION_TIMEOUT_MS,
            producerId: -1n,
            producerEpoch: -1,
          }),
          { timeoutMs: this.options.requestTimeoutMs + CLIENT_TIMEOUT_MARGIN_MS },
        )
        if (response.errorCode === ErrorCode.NONE) {
          return { producerId: response.producerId, producerEpoch: response.producerEpoch }
        }
        failure = new KafkaProtocolError(response.errorCode, null)
      } catch (error) {
        failure = asClientError(error)
      }
      // Nobody waiting (every batch expired, or closed): stop; the next send starts again.
      const idle = this.incomplete.size === 0 && this.pendingSends.size === 0
      if (!isRetriableError(failure) || idle) throw failure
      await sleep(backoffMs(attempt, this.client.options))
    }
  }

  private readyAtMs(first: ProducerBatch, queueLength: number, now: number): number {
    const sendable =
      queueLength > 1 ||
      first.isSealed ||
      first.isFull(this.options.batchSize) ||
      this.flushing > 0 ||
      this.memory.waiting > 0
    const lingerDone = sendable ? now : first.createdMs + this.options.lingerMs
    return Math.max(lingerDone, first.retryAtMs)
  }

  /** Batches waiting in a queue past their delivery timeout fail there (Kafka expires them too). */
  private expireQueued(queue: ProducerBatch[], now: number): void {
    while (queue.length > 0 && queue[0].deadlineMs <= now) {
      const batch = queue.shift()!
      const error = new DeliveryTimeoutError(
        `${batch.recordCount} record(s) for ${batch.topic}-${batch.partition} expired: delivery.timeout.ms ${this.options.deliveryTimeoutMs} passed`,
        batch.lastError,
      )
      this.failBatch(batch, error)
    }
  }

  /** One metadata refresh at a time, at most one per retry.backoff.ms; returns when to look again. */
  private refreshMetadataSoon(now: number): number {
    if (now < this.metadataRefreshAtMs) return this.metadataRefreshAtMs
    this.metadataRefreshAtMs = now + this.client.options.retryBackoffMs
    this.client.refreshMetadata().then(
      () => this.scheduleDrain(),
      // A failed refresh is retried by the next drain; the batches time out if it never succeeds.
      () => this.wakeAt(Date.now() + this.client.options.retryBackoffMs),
    )
    return this.metadataRefreshAtMs
  }

  /** Sends one request with what fits; returns how many batches went. */
  private sendToNode(nodeId: number, candidates: ProducerBatch[]): number {
    const inFlight = this.inFlightByNode.get(nodeId) ?? 0
    if (inFlight >= this.options.maxInFlight) return 0
    const batches: ProducerBatch[] = []
    let bytes = 0
    for (const batch of candidates) {
      // One batch per partition per request, up to max.request.size (the first always goes).
      if (batches.length > 0 && bytes + batch.sizeBytes > this.options.maxRequestSize) continue
      bytes += batch.sizeBytes
      batches.push(batch)
    }
    for (const batch of batches) {
      const key = `${batch.topic}/${batch.partition}`
      const queue = this.queues.get(key)!
      assert(queue[0] === batch, 'drained batch is not at the front of its queue')
      queue.shift()
      batch.inFlight = true
      if (batch.drainOrder < 0) batch.drainOrder = this.drainCounter++
      if (this.idempotent && !batch.hasSequence) this.stamp(key, batch)
      this.inFlightByPartition.set(key, (this.inFlightByPartition.get(key) ?? 0) + 1)
      if (this.options.maxInFlight === 1) this.mutedPartitions.add(key)
    }
    this.inFlightByNode.set(nodeId, inFlight + 1)
    this.counters.requests++
    this.counters.batches += batches.length
    this.sendRequest(nodeId, batches).then(
      () => this.afterRequest(nodeId, batches),
      (error: unknown) => {
        // sendRequest() handles its own failures; anything here is a bug in this file.
        this.afterRequest(nodeId, batches)
        throw error
      },
    )
    return batches.length
  }

  private afterRequest(nodeId: number, batches: readonly ProducerBatch[]): void {
    this.inFlightByNode.set(nodeId, (this.inFlightByNode.get(nodeId) ?? 1) - 1)
    for (const batch of batches) {
      batch.inFlight = false
      if (batch.isSettled) this.buffers.release(batch.releaseBuffers())
      const key = `${batch.topic}/${batch.partition}`
      this.mutedPartitions.delete(key)
      const left = (this.inFlightByPartition.get(key) ?? 1) - 1
      if (left > 0) this.inFlightByPartition.set(key, left)
      else this.inFlightByPartition.delete(key)
    }
    this.scheduleDrain()
  }

  private async sendRequest(nodeId: number, batches: readonly ProducerBatch[]): Promise<void> {
    try {
      const request = await this.produceRequest(batches)
      const connection = await this.client.connectionTo(nodeId, 'produce')
      if (this.options.acks === 0) {
        await connection.sendOneWay(ApiKey.Produce, request)
        for (const batch of batches) this.settle(batch, () => batch.complete(-1, -1))
        return
      }
      const response = await connection.request<ProduceResponse>(ApiKey.Produce, request, {
        timeoutMs: this.options.requestTimeoutMs + CLIENT_TIMEOUT_MARGIN_MS,
      })
      this.onResponse(batches, response)
    } catch (error) {
      const failure = asClientError(error)
      for (const batch of batches) this.onBatchError(batch, failure)
    }
  }

  private async produceRequest(batches: readonly ProducerBatch[]): Promise<ProduceRequest> {
    const byTopic = new Map<string, { index: number; records: Buffer | Buffer[] }[]>()
    for (const batch of batches) {
      const records = await batch.encode()
      const list = byTopic.get(batch.topic) ?? []
      list.push({ index: batch.partition, records })
      byTopic.set(batch.topic, list)
    }
    return {
      transactionalId: null,
      acks: this.options.acks,
      timeoutMs: this.options.requestTimeoutMs,
      topicData: [...byTopic].map(([name, partitionData]) => ({ name, partitionData })),
    }
  }

  private onResponse(batches: readonly ProducerBatch[], response: ProduceResponse): void {
    const results = new Map<string, ProduceResponsePartitionProduceResponse>()
    for (const topic of response.responses) {
      for (const p of topic.partitionResponses) results.set(`${topic.name}/${p.index}`, p)
    }
    for (const batch of batches) {
      const result = results.get(`${batch.topic}/${batch.partition}`)
      if (!result) {
        this.onBatchError(
          batch,
          new KafkaProtocolError(ErrorCode.NETWORK_EXCEPTION, 'partition missing from the produce response'),
        )
      } else if (result.errorCode === ErrorCode.NONE) {
        this.onAcknowledged(batch)
        this.settle(batch, () => batch.complete(Number(result.baseOffset), Number(result.logAppendTimeMs)))
      } else if (result.errorCode === ErrorCode.DUPLICATE_SEQUENCE_NUMBER && batch.hasSequence) {
        // Written before, offsets unknown (older brokers; tidelog answers with the first offsets).
        this.onAcknowledged(batch)
        this.settle(batch, () => batch.complete(-1, -1))
      } else {
        this.onBatchError(batch, new KafkaProtocolError(result.errorCode, result.errorMessage), result)
      }
    }
  }

  private onAcknowledged(batch: ProducerBatch): void {
    if (!batch.hasSequence) return
    const state = this.sequences.get(`${batch.topic}/${batch.partition}`)
    if (!state || state.producerId !== batch.producerId || state.producerEpoch !== batch.producerEpoch) return
    state.lastAcked = (batch.baseSequence + batch.recordCount - 1) % SEQUENCE_MODULUS
  }

  /**
   * Kafka's TransactionManager.canRetry for a non-transactional idempotent producer:
   * 'retry' keeps the batch's sequence, 'reset' re-stamps its partition under a new
   * producer id and retries, 'fail' fails the batch (and resets the partition), undefined
   * leaves the error to the common rules.
   */
  private idempotentVerdict(
    batch: ProducerBatch,
    error: KafkaClientError,
    result?: ProduceResponsePartitionProduceResponse,
  ): 'retry' | 'reset' | 'fail' | undefined {
    if (!(error instanceof KafkaProtocolError)) return undefined
    switch (error.errorCode) {
      case ErrorCode.UNKNOWN_PRODUCER_ID:
        // No log start offset: the partition moved while answering; ask again.
        if (result && result.logStartOffset < 0n) return 'retry'
        return 'reset'
      case ErrorCode.INVALID_PRODUCER_EPOCH:
        return 'reset'
      case ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: {
        // Transient while an earlier batch is not acknowledged (being retried, or lost by a
        // leader change and resent first); a gap when it is the very next sequence.
        const state = this.sequences.get(`${batch.topic}/${batch.partition}`)
        const sameId =
          state !== undefined &&
          state.producerId === batch.producerId &&
          state.producerEpoch === batch.producerEpoch
        if (sameId && state.unresolvedLast >= 0) {
          // Right behind the expired batch: it never reached the log, a real gap. The
          // partition moves to a new producer id and this batch is retried there (Java).
          return (state.unresolvedLast + 1) % SEQUENCE_MODULUS === batch.baseSequence ? 'reset' : 'retry'
        }
        const isNext = sameId && (state.lastAcked + 1) % SEQUENCE_MODULUS === batch.baseSequence
        return batch.sequenceReset || !isNext ? 'retry' : 'fail'
      }
      default:
        return undefined
    }
  }

  private onBatchError(
    batch: ProducerBatch,
    error: KafkaClientError,
    result?: ProduceResponsePartitionProduceResponse,
  ): void {
    batch.lastError = error
    if (this.idempotent && batch.hasSequence && !this.closed) {
      const verdict = this.idempotentVerdict(batch, error, result)
      if (verdict === 'fail') {
        this.failBatch(batch, error)
        return
      }
      if (verdict !== undefined) {
        if (verdict === 'reset') this.resetPartition(batch)
        if (batch.attempts >= this.options.retries) {
          this.failBatch(batch, error)
          return
        }
        batch.attempts++
        this.counters.retries++
        batch.retryAtMs = Math.min(
          Date.now() + backoffMs(batch.attempts, this.client.options),
          batch.deadlineMs,
        )
        this.requeue([batch])
        return
      }
    }
    if (needsMetadataRefresh(error)) {
      this.metadataRefreshAtMs = 0
      this.refreshMetadataSoon(Date.now())
    }
    if (
      error instanceof KafkaProtocolError &&
      error.errorCode === ErrorCode.MESSAGE_TOO_LARGE &&
      batch.recordCount > 1
    ) {
      // The halves need sequences of their own: the partition is re-stamped.
      if (this.idempotent && batch.hasSequence) this.resetPartition(batch)
      this.requeue(batch.split(this.encoding))
      this.incomplete.delete(batch)
      return
    }
    const now = Date.now()
    const retryAtMs = now + backoffMs(batch.attempts + 1, this.client.options)
    if (!isRetriableError(error) || this.closed) {
      this.failBatch(batch, error)
    } else if (batch.attempts >= this.options.retries) {
      this.failBatch(batch, error)
    } else {
      batch.attempts++
      this.counters.retries++
      // Past the deadline the queue expires it (DeliveryTimeoutError, this error as cause).
      batch.retryAtMs = Math.min(retryAtMs, batch.deadlineMs)
      this.requeue([batch])
    }
  }

  /**
   * Puts retried batches back: without idempotence in front of newer ones (Java's
   * reenqueue); with it in drain order among the other retries, so sequences go out in order
   * whatever order the failures arrive in.
   */
  private requeue(batches: ProducerBatch[]): void {
    if (!this.idempotent) {
      this.requeueFront(batches)
      return
    }
    const queue = this.queueOf(batches[0].topic, batches[0].partition)
    for (const batch of batches) {
      let at = 0
      while (at < queue.length && queue[at].drainOrder >= 0 && queue[at].drainOrder <= batch.drainOrder) at++
      queue.splice(at, 0, batch)
      this.incomplete.add(batch)
    }
    this.wakeAt(Math.min(...batches.map((b) => b.retryAtMs)))
  }

  /** Retried batches go back in front of newer ones (Java's reenqueue). */
  private requeueFront(batches: ProducerBatch[]): void {
    const queue = this.queueOf(batches[0].topic, batches[0].partition)
    queue.unshift(...batches)
    for (const batch of batches) this.incomplete.add(batch)
    this.wakeAt(Math.min(...batches.map((b) => b.retryAtMs)))
  }

  private failBatch(batch: ProducerBatch, error: Error): void {
    this.counters.failedBatches++
    if (this.idempotent && batch.hasSequence) {
      if (error instanceof DeliveryTimeoutError && batch.drainOrder >= 0) this.markUnresolved(batch)
      // Its sequences are never acknowledged: the batches behind it are re-stamped.
      else this.resetPartition(batch)
    }
    this.settle(batch, () => batch.fail(error))
  }

  /**
   * A sent batch expired: it may be in the log, so re-stamping the batches behind it could
   * write them twice. They keep their sequences instead, and the partition is resolved once
   * they are through (`resolveSequences`), as Java's TransactionManager does.
   */
  private markUnresolved(batch: ProducerBatch): void {
    const state = this.sequences.get(`${batch.topic}/${batch.partition}`)
    if (!state || state.producerId !== batch.producerId || state.producerEpoch !== batch.producerEpoch) {
      this.resetPartition(batch)
      return
    }
    state.unresolvedLast = (batch.baseSequence + batch.recordCount - 1) % SEQUENCE_MODULUS
  }

  private settle(batch: ProducerBatch, outcome: () => void): void {
    outcome()
    this.incomplete.delete(batch)
    this.memory.release(batch.reservedBytes)
    batch.reservedBytes = 0
    // A batch in a request keeps its bytes until the request is over (afterRequest).
    if (!batch.inFlight) this.buffers.release(batch.releaseBuffers())
  }
}

function requireBootstrap(options: ProducerOptions): ClientOptions {
  if (options.bootstrapServers === undefined)
    throw new InvalidArgumentError('bootstrapServers or client is required')
  return options as ClientOptions
}

function toRecordInput(record: ProducerRecord): RecordInput {
  if (typeof record.topic !== 'string' || record.topic === '')
    throw new InvalidArgumentError('record.topic must be a non-empty string')
  const timestamp = record.timestamp ?? Date.now()
  if (!Number.isSafeInteger(timestamp) || timestamp < 0)
    throw new InvalidArgumentError(`invalid record.timestamp ${record.timestamp}`)
  return {
    key: toBytes(record.key),
    value: toBytes(record.value),
    headers: toHeaders(record.headers),
    timestamp,
  }
}
