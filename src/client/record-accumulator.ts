/**
 * Kafka's RecordAccumulator: per partition ("topic/partition") a queue of batches in send
 * order, the last one open for appends. A batch is ready when it is full (batch.size),
 * lingered for linger.ms, sealed by a send, flushed, or memory is short (someone waits for
 * buffer.memory); a retried one not before its backoff. Record bytes are accounted in the
 * memory pool (buffer.memory, max.block.ms) from append until the batch settles. The
 * sticky partitioner (KIP-480) lives here as in Java: a keyless record that needs a new
 * batch moves its topic's sticky partition first.
 *
 * No timers of its own: the sender asks when the next batch becomes ready and wakes then.
 */
import { assert } from '../common/assert.js'
import type { Clock } from '../common/clock.js'
import type { Random } from '../common/random.js'
import type { RecordHeader } from '../protocol/record-batch.js'
import { BatchBufferPool, MemoryPool } from './memory-pool.js'
import type { MetadataSnapshot } from './metadata.js'
import { StickyPartitioner, type TopicPartitions } from './partitioner.js'
import { type BatchEncoding, ProducerBatch, type Reject, type Settle } from './producer-batch.js'
import type { ResolvedProducerOptions } from './producer-options.js'
import { partitionKey } from './transaction-manager.js'

interface CachedPartitions {
  readonly topic: string
  readonly snapshot: MetadataSnapshot
  readonly partitions: TopicPartitions
}

export class RecordAccumulator {
  readonly memory: MemoryPool
  readonly encoding: BatchEncoding
  private readonly buffers: BatchBufferPool
  private readonly sticky: StickyPartitioner
  /** Per partition, its batches in send order; the last may be open. */
  private readonly queues = new Map<string, ProducerBatch[]>()
  /** Batches not settled yet, queued or in flight. */
  private readonly incomplete = new Set<ProducerBatch>()
  /** The queue the last record went to (queueOf's shortcut); null once it is dropped. */
  private lastQueue: { topic: string; partition: number; queue: ProducerBatch[] } | null = null
  private readonly partitionsCache = new Map<string, CachedPartitions>()
  /** The entry the last lookup found (topicPartitions' shortcut). */
  private lastPartitions: CachedPartitions | null = null
  private flushesInProgress = 0

  constructor(
    private readonly options: ResolvedProducerOptions,
    private readonly clock: Clock,
    random: Random,
    private readonly metadata: () => MetadataSnapshot,
  ) {
    this.memory = new MemoryPool(options.bufferMemory, options.maxBlockMs, clock)
    this.buffers = new BatchBufferPool(() => this.memory.availableBytes)
    this.encoding = {
      compression: options.compression,
      compressionLevel: options.compressionLevel,
      batchSize: options.batchSize,
      allocate: (bytes) => this.buffers.allocate(bytes),
    }
    this.sticky = new StickyPartitioner(random)
  }

  get hasQueues(): boolean {
    return this.queues.size > 0
  }

  get incompleteCount(): number {
    return this.incomplete.size
  }

  /** Unsettled batches (for flush and progress counts). */
  incompleteBatches(): IterableIterator<ProducerBatch> {
    return this.incomplete.values()
  }

  get isFlushing(): boolean {
    return this.flushesInProgress > 0
  }

  beginFlush(): void {
    this.flushesInProgress++
  }

  endFlush(): void {
    assert(this.flushesInProgress > 0, 'endFlush without beginFlush')
    this.flushesInProgress--
  }

  /** The sticky partition for a keyless record (KIP-480). */
  stickyPartition(topic: string, numPartitions: number): number {
    return this.sticky.partition(topic, this.topicPartitions(topic, numPartitions))
  }

  /**
   * Appends a record whose `sizeBytes` are reserved in the memory pool to its partition's
   * open batch (a new one if none has room); `sticky` records may move partition first.
   */
  append(
    topic: string,
    partition: number,
    timestamp: number,
    key: Buffer | null,
    value: Buffer | null,
    headers: readonly RecordHeader[] | undefined,
    sizeBytes: number,
    sticky: boolean,
    resolve: Settle,
    reject: Reject,
  ): ProducerBatch {
    const batch = this.batchFor(topic, partition, sizeBytes, sticky)
    batch.reservedBytes += sizeBytes
    batch.appendFields(timestamp, key, value, headers, sizeBytes, resolve, reject)
    return batch
  }

  /** Whether a batch that just got a record is ready at once (else it lingers). */
  isSendableNow(batch: ProducerBatch): boolean {
    return batch.isFull(this.options.batchSize) || this.options.lingerMs === 0 || this.isFlushing
  }

  /** When the head of a queue may be sent: linger over (or no reason to wait) and backoff over. */
  readyAtMs(first: ProducerBatch, queueLength: number, nowMs: number): number {
    const sendable =
      queueLength > 1 ||
      first.isSealed ||
      first.isFull(this.options.batchSize) ||
      this.isFlushing ||
      this.memory.waiting > 0
    const lingerDone = sendable ? nowMs : first.createdMs + this.options.lingerMs
    return Math.max(lingerDone, first.retryAtMs)
  }

  /** The partitions' queues, for the sender's drain (empty ones are dropped as it meets them). */
  queueEntries(): IterableIterator<[string, ProducerBatch[]]> {
    return this.queues.entries()
  }

  dropEmptyQueue(key: string, queue: ProducerBatch[]): void {
    assert(queue.length === 0, 'dropping a queue with batches')
    this.queues.delete(key)
    if (this.lastQueue?.queue === queue) this.lastQueue = null
  }

  /** Takes off the front of its queue the batches past their delivery timeout. */
  takeExpired(queue: ProducerBatch[], nowMs: number): ProducerBatch[] {
    const expired: ProducerBatch[] = []
    while (queue.length > 0 && queue[0].deadlineMs <= nowMs) expired.push(queue.shift()!)
    return expired
  }

  /** Takes a ready batch off the front of its queue to send it. */
  takeHead(key: string, batch: ProducerBatch): void {
    const queue = this.queues.get(key)
    assert(queue !== undefined && queue[0] === batch, 'drained batch is not at the front of its queue')
    queue.shift()
  }

  /**
   * Puts retried batches back: in front of newer ones (Java's reenqueue), or, for an
   * idempotent producer, in drain order among the other retries, so sequences go out in
   * order whatever order the failures arrive in.
   */
  reenqueue(batches: readonly ProducerBatch[], inDrainOrder: boolean): void {
    assert(batches.length > 0, 'reenqueue of nothing')
    const queue = this.queueOf(batches[0].topic, batches[0].partition)
    if (!inDrainOrder) {
      queue.unshift(...batches)
    } else {
      for (const batch of batches) {
        let at = 0
        while (at < queue.length && queue[at].drainOrder >= 0 && queue[at].drainOrder <= batch.drainOrder)
          at++
        queue.splice(at, 0, batch)
      }
    }
    for (const batch of batches) this.incomplete.add(batch)
  }

  /** Splits a batch the broker found too large; the halves are incomplete in its place. */
  split(batch: ProducerBatch): [ProducerBatch, ProducerBatch] {
    const halves = batch.split(this.encoding)
    this.incomplete.delete(batch)
    return halves
  }

  /** Takes out of the queues every batch not stamped yet (they waited for a producer id that failed). */
  takeUnsequenced(): ProducerBatch[] {
    const taken: ProducerBatch[] = []
    for (const queue of this.queues.values()) {
      for (let i = queue.length - 1; i >= 0; i--) {
        if (queue[i].hasSequence) continue
        taken.push(queue[i])
        queue.splice(i, 1)
      }
    }
    return taken
  }

  /** A batch settled: its memory goes back; its buffers too unless a request still reads them. */
  deallocate(batch: ProducerBatch): void {
    this.incomplete.delete(batch)
    this.memory.release(batch.reservedBytes)
    batch.reservedBytes = 0
    if (!batch.inFlight) this.buffers.release(batch.releaseBuffers())
  }

  /** A request is over: a settled batch's buffers can be reused now. */
  afterRequest(batch: ProducerBatch): void {
    if (batch.isSettled) this.buffers.release(batch.releaseBuffers())
  }

  close(): void {
    this.buffers.clear()
  }

  /** The open batch to append to; a keyless record that needs a new batch moves the sticky partition first. */
  private batchFor(topic: string, partition: number, sizeBytes: number, sticky: boolean): ProducerBatch {
    let target = partition
    let queue = this.queueOf(topic, target)
    let open = queue.at(-1)
    if (sticky && !open?.hasRoomFor(sizeBytes, this.options.batchSize)) {
      const numPartitions = this.metadata().topics.get(topic)?.partitions.length ?? 0
      target = this.sticky.onNewBatch(topic, this.topicPartitions(topic, numPartitions), partition)
      queue = this.queueOf(topic, target)
      open = queue.at(-1)
    }
    if (open?.hasRoomFor(sizeBytes, this.options.batchSize)) return open
    const nowMs = this.clock.monotonicMs()
    const batch = new ProducerBatch(
      topic,
      target,
      nowMs,
      nowMs + this.options.deliveryTimeoutMs,
      this.encoding,
    )
    queue.push(batch)
    this.incomplete.add(batch)
    return batch
  }

  /** Partition count and available partitions, computed once per metadata snapshot and topic. */
  private topicPartitions(topic: string, numPartitions: number): TopicPartitions {
    const snapshot = this.metadata()
    // Consecutive records mostly name one topic: skip the map lookup for it.
    let cached = this.lastPartitions
    if (cached === null || cached.topic !== topic) cached = this.partitionsCache.get(topic) ?? null
    if (
      cached === null ||
      cached.snapshot !== snapshot ||
      cached.partitions.numPartitions !== numPartitions
    ) {
      cached = {
        topic,
        snapshot,
        partitions: { numPartitions, available: snapshot.availablePartitions(topic) },
      }
      this.partitionsCache.set(topic, cached)
    }
    this.lastPartitions = cached
    return cached.partitions
  }

  private queueOf(topic: string, partition: number): ProducerBatch[] {
    // Consecutive records mostly go to one partition (sticky, or one key): skip the key string.
    const last = this.lastQueue
    if (last !== null && last.partition === partition && last.topic === topic) return last.queue
    const key = partitionKey(topic, partition)
    let queue = this.queues.get(key)
    if (!queue) {
      queue = []
      this.queues.set(key, queue)
    }
    this.lastQueue = { topic, partition, queue }
    return queue
  }
}
