/**
 * The producer: `send(record)` partitions the record (explicit partition, a custom
 * partitioner, murmur2 of the key, or KIP-480's sticky partition) and appends it to its
 * partition's open batch in the RecordAccumulator; the Sender drains ready batches (full,
 * lingered, flushed or retried) to each partition's leader, at most
 * `maxInFlightRequestsPerConnection` requests per broker, and retries what may succeed
 * (sender.ts). Without idempotence a retry can duplicate a batch whose first answer was
 * lost, and with `maxInFlightRequestsPerConnection` > 1 a retried batch can land after a
 * later one: Kafka documents both. `maxInFlightRequestsPerConnection: 1` keeps order.
 *
 * Sync and async styles (the source's producer.type): `await producer.send(r)` per record,
 * or `send(r, callback)` / the returned promise plus `flush()`. With `producerType: 'sync'`
 * each record is sent only once the previous one is acknowledged, whatever the caller does.
 *
 * Idempotence (`enableIdempotence`, on by default with acks=all as in Kafka 3+): a producer
 * id from InitProducerId, and per partition sequence numbers that a retry keeps, so the
 * leader (or a new leader) answers a batch it already wrote instead of writing it again.
 * The rules (retries in sequence order, KIP-360 resets, unresolved sequences of expired
 * batches) are in transaction-manager.ts; options and their checks in producer-options.ts.
 *
 * Transactions (`transactionalId`): `initTransactions()` once, then per transaction
 * `beginTransaction()`, sends, optionally `sendOffsetsToTransaction()` (consume-transform-
 * produce), and `commitTransaction()` or `abortTransaction()`. The state machine is Java's
 * (transaction-manager.ts), the coordinator requests transaction-requests.ts'. A
 * partition's batches go once AddPartitionsToTxn added it (at transaction version 2 at
 * once: Produce v12 adds it); commit flushes first. Fencing
 * by a newer producer of the same id rejects with ProducerFencedError (close the
 * producer); any other failure of the transaction with TransactionAbortableError (abort,
 * then go on).
 *
 * Time and randomness are the client's (`clock`, `random` in the options): linger, backoff,
 * delivery.timeout.ms, max.block.ms and the sticky partition choice run on them.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import type { RecordHeader } from '../protocol/record-batch.js'
import { type KafkaClient, sharedOrNewClient } from './client.js'
import {
  asClientError,
  ClientClosedError,
  InvalidArgumentError,
  KafkaClientError,
  KafkaProtocolError,
  ProducerFencedError,
  TransactionAbortableError,
  TransactionStateError,
} from './errors.js'
import type { MetadataSnapshot, TopicInfo } from './metadata.js'
import { partitionForKey } from './partitioner.js'
import {
  CALLBACK,
  failSettle,
  invokeCallback,
  NO_HEADERS,
  RECORD_OVERHEAD_MAX,
  type RecordCallback,
  type RecordMetadata,
  type Reject,
  recordSizeUpperBound,
  type Settle,
  toBytes,
  toHeaders,
} from './producer-batch.js'
import {
  type PartitionerFn,
  type ProducerOptions,
  type ProducerRecord,
  type ResolvedProducerOptions,
  resolveProducerOptions,
} from './producer-options.js'
import { RecordAccumulator } from './record-accumulator.js'
import { Sender } from './sender.js'
import { type ProducerIdAndEpoch, TransactionManager, type TransactionState } from './transaction-manager.js'
import {
  type ConsumerGroupMetadata,
  type TransactionOffset,
  TransactionRequests,
  type TxnResult,
} from './transaction-requests.js'

export type {
  Acks,
  CompressionName,
  PartitionerFn,
  ProducerOptions,
  ProducerRecord,
} from './producer-options.js'
export type { ConsumerGroupMetadata, RecordCallback, RecordMetadata, TransactionOffset, TransactionState }

/** Passes over pending work in flush() before it settles for what remains. */
const FLUSH_PASSES_MAX = 1000

export class Producer {
  readonly client: KafkaClient
  private readonly options: ResolvedProducerOptions
  private readonly ownsClient: boolean
  private readonly partitioner?: PartitionerFn
  private readonly accumulator: RecordAccumulator
  private readonly transactions: TransactionManager
  /** The coordinator requests of a transactional producer; null without a transactionalId. */
  private readonly txnRequests: TransactionRequests | null
  /** The AddPartitionsToTxn in flight: EndTxn waits for it, as Java queues EndTxn behind it. */
  private addInFlight: Promise<void> | null = null
  /** sendOffsetsToTransaction calls not answered yet (settled either way). */
  private readonly offsetsInFlight = new Set<Promise<void>>()
  private addScheduled = false
  private readonly sender: Sender
  /** Sends waiting for metadata or memory, in order: later sends queue behind them. */
  private readonly pendingSends = new Set<Promise<unknown>>()
  private syncTail: Promise<unknown> = Promise.resolve()
  private closed = false
  /** topicInfo's last answer, for the topic and metadata snapshot it was read from. */
  private cachedTopic: string | null = null
  private cachedSnapshot: MetadataSnapshot | null = null
  private cachedTopicInfo: TopicInfo | undefined = undefined

  constructor(options: ProducerOptions) {
    const { client, ownsClient } = sharedOrNewClient(options, 'producer')
    this.client = client
    this.ownsClient = ownsClient
    this.options = resolveProducerOptions(options, this.client.options.requestTimeoutMs)
    this.partitioner = options.partitioner
    this.accumulator = new RecordAccumulator(this.options, client.clock, client.random, () => client.metadata)
    this.transactions = new TransactionManager(this.options.transactionalId)
    this.txnRequests =
      this.options.transactionalId === null
        ? null
        : new TransactionRequests(client, {
            transactionalId: this.options.transactionalId,
            transactionTimeoutMs: this.options.transactionTimeoutMs,
            requestTimeoutMs: this.options.requestTimeoutMs,
          })
    const producer = this
    this.sender = new Sender(client, this.options, this.accumulator, this.transactions, {
      get isClosed() {
        return producer.closed
      },
      get hasPendingSends() {
        return producer.pendingSends.size > 0
      },
      onTransactionalBatchFailed: (error) => this.onTransactionalBatchFailed(error),
    })
  }

  /** Whether sends are idempotent (false also after a broker turned out not to serve InitProducerId). */
  get isIdempotent(): boolean {
    return this.sender.idempotent
  }

  /** The producer id and epoch in use; null before InitProducerId answered (or without idempotence). */
  get producerIdentity(): { producerId: bigint; producerEpoch: number } | null {
    return this.transactions.producerIdAndEpoch
  }

  /** The transactional state (Java's TransactionManager states); 'UNINITIALIZED' also without a transactionalId. */
  get transactionState(): TransactionState {
    return this.transactions.state
  }

  /** The transaction version in use: 2 (KIP-890 part 2) or 1; initTransactions() decides. */
  get transactionVersion(): 1 | 2 {
    return this.transactions.isTransactionV2 ? 2 : 1
  }

  // ---- transactions ------------------------------------------------------------------------

  /**
   * InitProducerId for the transactional id: fences older producers of the id and
   * completes (or aborts) a transaction they left open. Once per producer, before the
   * first transaction; waits up to max.block.ms (BlockTimeoutError: call it again).
   */
  async initTransactions(): Promise<void> {
    this.transactions.beginInitTransactions()
    const requests = this.requests()
    const value = this.check(await requests.initProducerId(null, this.options.maxBlockMs))
    // Java decides once initTransactions answered, from the finalized transaction.version.
    const transactionV2 =
      this.options.transactionVersionMax >= 2 && (await requests.clusterOffersTransactionV2())
    this.transactions.completeInitTransactions(value.producerId, value.producerEpoch, transactionV2)
  }

  /** Starts a transaction (no request: partitions join it as records are sent to them). */
  beginTransaction(): void {
    this.requests()
    this.transactions.beginTransaction()
  }

  /**
   * Commits the consumer's offsets as part of the transaction: they become the group's
   * committed offsets only if the transaction commits. Pass the consumer's
   * groupMetadata() (its generation fences a zombie, KIP-447) or just the group id.
   * `offset` is the next one to consume.
   */
  async sendOffsetsToTransaction(
    offsets: readonly TransactionOffset[],
    group: ConsumerGroupMetadata | string,
  ): Promise<void> {
    const requests = this.requests()
    this.transactions.failIfNotInTransaction('sendOffsetsToTransaction')
    const metadata = typeof group === 'string' ? { groupId: group } : group
    if (typeof metadata.groupId !== 'string' || metadata.groupId === '')
      throw new InvalidArgumentError('sendOffsetsToTransaction needs a group id')
    for (const o of offsets) {
      const valid =
        (typeof o.offset === 'bigint' ? o.offset >= 0n : Number.isSafeInteger(o.offset) && o.offset >= 0) &&
        typeof o.topic === 'string' &&
        o.topic !== '' &&
        Number.isInteger(o.partition) &&
        o.partition >= 0
      if (!valid) throw new InvalidArgumentError(`invalid offset ${o.offset} for ${o.topic}-${o.partition}`)
    }
    if (offsets.length === 0) return
    const producer = this.transactions.producerIdAndEpoch!
    const transactionV2 = this.transactions.isTransactionV2
    const sending = (async () => {
      // Version 2: TxnOffsetCommit adds the group itself, and may have once it is sent.
      if (!transactionV2)
        this.check(await requests.addOffsets(producer, metadata.groupId, this.options.maxBlockMs))
      this.transactions.onOffsetsAdded()
      this.check(
        await requests.commitOffsets(producer, offsets, metadata, this.options.maxBlockMs, transactionV2),
      )
    })()
    // A commit or abort called without awaiting this one waits for it (Java queues EndTxn last).
    const settled = sending.then(
      () => undefined,
      () => undefined,
    )
    this.offsetsInFlight.add(settled)
    settled.then(() => this.offsetsInFlight.delete(settled))
    return sending
  }

  /**
   * Flushes the transaction's records, then commits it (EndTxn): all its records and
   * offsets become visible to read_committed consumers, or none do. A failed record fails
   * the commit with TransactionAbortableError: abortTransaction() then.
   */
  async commitTransaction(): Promise<void> {
    const requests = this.requests()
    this.transactions.beginCommit()
    await this.flushTransaction()
    this.transactions.maybeFailWithError()
    this.transactions.completeTransaction(await this.endTxn(requests, true))
  }

  /** EndTxn if the transaction started at the coordinator; the id and epoch version 2 bumped to. */
  private async endTxn(requests: TransactionRequests, commit: boolean): Promise<ProducerIdAndEpoch | null> {
    if (!this.transactions.needsEndTxn) return null
    const producer = this.transactions.producerIdAndEpoch!
    const transactionV2 = this.transactions.isTransactionV2
    return this.check(await requests.endTxn(producer, commit, this.options.maxBlockMs, transactionV2))
  }

  /**
   * Aborts the transaction: records not sent yet fail (ERR_TRANSACTION_ABORTED), sent ones
   * are awaited, then EndTxn(abort) has every partition's ABORT marker written. Also the
   * way out of TransactionAbortableError; not of fencing.
   */
  async abortTransaction(): Promise<void> {
    const requests = this.requests()
    this.transactions.beginAbort()
    this.sender.abortUndrained(new KafkaClientError('ERR_TRANSACTION_ABORTED', 'the transaction was aborted'))
    await this.flushTransaction()
    const next = await this.endTxn(requests, false)
    if (!this.transactions.needsEpochBump) {
      this.transactions.completeTransaction(next)
      return
    }
    // A failed batch may or may not be in the log: a new epoch starts every sequence at 0.
    const current = this.transactions.producerIdAndEpoch
    this.transactions.beginEpochBump()
    const value = this.check(await requests.initProducerId(current, this.options.maxBlockMs))
    this.transactions.completeInitTransactions(value.producerId, value.producerEpoch)
  }

  /**
   * Before EndTxn: the batches are settled and no AddPartitionsToTxn or AddOffsetsToTxn is
   * in flight, whose answer could still start the transaction at the coordinator (then
   * EndTxn is needed).
   */
  private async flushTransaction(): Promise<void> {
    await this.flush()
    while (this.addInFlight !== null) await this.addInFlight
    await Promise.all(this.offsetsInFlight)
  }

  private requests(): TransactionRequests {
    if (this.closed) throw new ClientClosedError('producer')
    if (this.txnRequests === null)
      throw new TransactionStateError(
        this.transactions.state,
        'transactions need a transactional producer (the transactionalId option)',
      )
    return this.txnRequests
  }

  /** A coordinator request's outcome: its value, or the state change and the error thrown. */
  private check<T>(result: TxnResult<T>): T {
    if (result.ok) return result.value
    if (result.severity === 'fatal') {
      this.transactions.fatalError(result.error)
      this.sender.abortUndrained(result.error)
    } else if (result.severity === 'abortable') {
      this.transactions.abortableError(result.error)
      this.sender.abortUndrained(result.error)
    }
    throw result.error
  }

  private onTransactionalBatchFailed(error: Error): Error {
    let failure = error
    if (
      error instanceof KafkaProtocolError &&
      (error.errorCode === ErrorCode.INVALID_PRODUCER_EPOCH || error.errorCode === ErrorCode.PRODUCER_FENCED)
    ) {
      failure = new ProducerFencedError(
        error.errorCode,
        `${error.message}: a newer producer with transactional id '${this.options.transactionalId}' may have fenced this one`,
      )
    }
    if (
      error instanceof KafkaProtocolError &&
      (error.errorCode === ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED ||
        error.errorCode === ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    ) {
      this.transactions.fatalError(failure)
    } else {
      // Java (KIP-588): even an epoch error on produce is abortable; the abort's EndTxn
      // answers PRODUCER_FENCED if a newer producer really took over.
      this.transactions.abortableError(failure)
    }
    this.sender.abortUndrained(
      new TransactionAbortableError(`the transaction cannot commit: ${failure.message}`, failure),
    )
    return failure
  }

  /** On the next turn of the event loop, as the drain: partitions of one tick share a request. */
  private scheduleAddPartitions(): void {
    if (this.addScheduled) return
    this.addScheduled = true
    this.client.options.defer(() => {
      this.addScheduled = false
      this.maybeAddPartitions()
    })
  }

  /** AddPartitionsToTxn for the partitions sends touched, one request at a time; drains after each. */
  private maybeAddPartitions(): void {
    if (this.addInFlight !== null || !this.transactions.hasPartitionsToAdd || this.txnRequests === null)
      return
    const producer = this.transactions.producerIdAndEpoch
    if (producer === null) return
    const first = !this.transactions.needsEndTxn
    const partitions = this.transactions.takeNewPartitions()
    const transaction = this.transactions.currentTransaction
    this.addInFlight = this.txnRequests
      .addPartitions(producer, partitions, this.options.deliveryTimeoutMs, first)
      .then((result) => {
        this.addInFlight = null
        if (transaction === this.transactions.currentTransaction) {
          if (result.ok) this.transactions.onPartitionsAdded(partitions)
          else {
            // A timeout leaves the transaction unable to commit too: its batches cannot go.
            if (result.severity === 'fatal') this.transactions.fatalError(result.error)
            else this.transactions.abortableError(result.error)
            this.sender.abortUndrained(result.error)
          }
        }
        this.sender.scheduleDrain()
        this.maybeAddPartitions()
      })
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
    this.accumulator.beginFlush()
    try {
      for (let pass = 0; pass < FLUSH_PASSES_MAX; pass++) {
        if (this.accumulator.incompleteCount === 0 && this.pendingSends.size === 0) return
        this.sender.scheduleDrain()
        const batches = [...this.accumulator.incompleteBatches()].map((b) => b.done)
        await Promise.allSettled([...this.pendingSends, ...batches])
      }
    } finally {
      this.accumulator.endFlush()
    }
  }

  /** Flushes, then closes (and closes the client if this producer created it). */
  async close(): Promise<void> {
    if (this.closed) return
    await this.flush()
    this.closed = true
    this.accumulator.close()
    this.sender.close()
    if (this.ownsClient) this.client.close()
  }

  /**
   * Produce requests sent, batches in them, batch retries, failed batches, producer id
   * resets so far, and the quota throttling the brokers reported to this producer's client.
   */
  metrics(): {
    requests: number
    batches: number
    retries: number
    failedBatches: number
    producerIdResets: number
    throttledResponses: number
    throttleTimeMsTotal: number
    throttleTimeMsMax: number
  } {
    const { responses, totalMs, maxMs } = this.client.throttle
    return {
      ...this.sender.counters,
      producerIdResets: this.transactions.producerIdResets,
      throttledResponses: responses,
      throttleTimeMsTotal: totalMs,
      throttleTimeMsMax: maxMs,
    }
  }

  /** Records buffered or in flight (for progress reports and tests). */
  get pendingRecordCount(): number {
    let count = this.pendingSends.size
    for (const batch of this.accumulator.incompleteBatches()) count += batch.recordCount
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
   *
   * This runs once per record and is inlined into its callers' optimized code, so it holds
   * the common path only. No closure is made here: a local that a closure captures lives in
   * a context object allocated on every call, the closure made or not (11 slots and a boxed
   * timestamp per record, when the waiting path's closures were here). Rejections and the
   * wait are methods of their own (`rejectSend`, `enqueueWaiting`).
   */
  private enqueue(record: ProducerRecord, resolve: Settle, reject: Reject): void {
    if (this.closed) {
      failSettle(resolve, reject, new ClientClosedError('producer'))
      return
    }
    if (this.transactions.isTransactional && !this.readyForTransactionalSend(resolve, reject)) return
    const transaction = this.transactions.currentTransaction
    // The producer id is fetched while the first batch lingers.
    this.sender.maybeInitProducerId()
    // The record's fields as the batch takes them, as locals: no RecordInput per record on
    // the fast path (one is made only for a send that has to wait).
    const topic = record.topic
    if (typeof topic !== 'string' || topic === '') {
      this.rejectSend(resolve, reject, new InvalidArgumentError('record.topic must be a non-empty string'))
      return
    }
    const timestamp = record.timestamp ?? this.client.clock.nowMs()
    if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
      this.rejectSend(
        resolve,
        reject,
        new InvalidArgumentError(`invalid record.timestamp ${record.timestamp}`),
      )
      return
    }
    const fields = this.recordFields(record, resolve, reject)
    if (fields === false) return
    const key = fields === true ? null : this.convertedKey
    const value = fields === true ? (record.value as Buffer) : this.convertedValue
    const headers = fields === true ? (NO_HEADERS as RecordHeader[]) : this.convertedHeaders
    const size =
      headers.length === 0
        ? RECORD_OVERHEAD_MAX + (key === null ? 0 : key.length) + (value === null ? 0 : value.length)
        : recordSizeUpperBound({ key, value, headers, timestamp })
    if (size + 61 > this.options.maxRequestSize) {
      this.rejectTooLarge(resolve, reject, size)
      return
    }
    const known = this.topicInfo(topic)
    if (
      known !== undefined &&
      known.partitions.length > 0 &&
      this.pendingSends.size === 0 &&
      this.accumulator.memory.tryReserve(size)
    ) {
      this.append(record, topic, timestamp, key, value, headers, size, resolve, reject, transaction)
      return
    }
    this.enqueueWaiting(record, topic, timestamp, key, value, headers, size, resolve, reject, transaction)
  }

  /** Key, value and headers converted by `recordFields` (kept here: no object per record). */
  private convertedKey: Buffer | null = null
  private convertedValue: Buffer | null = null
  private convertedHeaders: RecordHeader[] = NO_HEADERS as RecordHeader[]

  /**
   * true: the record has a Buffer value and no key or headers (the bench's and a plain
   * producer's case), nothing to convert. Otherwise converts them into the converted*
   * fields and returns 'converted', or rejects the send and returns false.
   */
  private recordFields(record: ProducerRecord, resolve: Settle, reject: Reject): boolean | 'converted' {
    if (
      (record.key === undefined || record.key === null) &&
      record.headers === undefined &&
      Buffer.isBuffer(record.value)
    )
      return true
    try {
      this.convertedKey = toBytes(record.key)
      this.convertedValue = toBytes(record.value)
      this.convertedHeaders = toHeaders(record.headers)
    } catch (error) {
      this.rejectSend(resolve, reject, error as Error)
      return false
    }
    return 'converted'
  }

  private readyForTransactionalSend(resolve: Settle, reject: Reject): boolean {
    try {
      this.transactions.failIfNotReadyForSend()
      return true
    } catch (error) {
      this.rejectSend(resolve, reject, error as Error)
      return false
    }
  }

  private rejectSend(resolve: Settle, reject: Reject, error: Error): void {
    failSettle(resolve, reject, error)
  }

  private rejectTooLarge(resolve: Settle, reject: Reject, size: number): void {
    failSettle(
      resolve,
      reject,
      new KafkaClientError(
        'ERR_RECORD_TOO_LARGE',
        `record of ~${size} bytes exceeds max.request.size ${this.options.maxRequestSize}`,
      ),
    )
  }

  /**
   * Slow path: wait for metadata and memory. Only the wait is tracked (later sends queue
   * behind it, keeping order); once appended the record is an ordinary batch member.
   */
  private enqueueWaiting(
    record: ProducerRecord,
    topic: string,
    timestamp: number,
    key: Buffer | null,
    value: Buffer | null,
    headers: RecordHeader[],
    size: number,
    resolve: Settle,
    reject: Reject,
    transaction: number,
  ): void {
    this.track(
      this.waitUntilAppendable(topic, size).then(
        () => this.append(record, topic, timestamp, key, value, headers, size, resolve, reject, transaction),
        (error: unknown) => failSettle(resolve, reject, error as Error),
      ),
    )
  }

  /** The topic's metadata in the client's current snapshot; the last answer is kept while neither changes. */
  private topicInfo(topic: string): TopicInfo | undefined {
    const snapshot = this.client.metadata
    if (topic !== this.cachedTopic || snapshot !== this.cachedSnapshot) {
      this.cachedTopic = topic
      this.cachedSnapshot = snapshot
      this.cachedTopicInfo = snapshot.topics.get(topic)
    }
    return this.cachedTopicInfo
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
    await this.accumulator.memory.reserve(size)
  }

  /** Appends to its partition's open batch; a bad partition releases the memory and rejects. */
  private append(
    record: ProducerRecord,
    topic: string,
    timestamp: number,
    key: Buffer | null,
    value: Buffer | null,
    headers: RecordHeader[],
    size: number,
    resolve: Settle,
    reject: Reject,
    transaction: number,
  ): void {
    if (this.transactions.isTransactional && !this.isStillInTransaction(transaction)) {
      this.accumulator.memory.release(size)
      failSettle(
        resolve,
        reject,
        new KafkaClientError(
          'ERR_TRANSACTION_ABORTED',
          `the transaction this record was sent in ended (${this.transactions.state}) before it could be appended`,
        ),
      )
      return
    }
    const numPartitions = this.topicInfo(topic)!.partitions.length
    let partition: number
    try {
      partition = this.choosePartition(record, key, numPartitions)
    } catch (error) {
      this.accumulator.memory.release(size)
      failSettle(resolve, reject, error as Error)
      return
    }
    const sticky = record.partition === undefined && !key && this.partitioner === undefined
    const batch = this.accumulator.append(
      topic,
      partition,
      timestamp,
      key,
      value,
      headers,
      size,
      sticky,
      resolve,
      reject,
    )
    if (this.transactions.isTransactional) {
      this.transactions.maybeAddPartition(topic, partition)
      this.scheduleAddPartitions()
    }
    this.sender.onAppended(batch)
  }

  /** A send that waited (metadata, memory) joins its transaction only if that one is still open. */
  private isStillInTransaction(transaction: number): boolean {
    const state = this.transactions.state
    return (
      transaction === this.transactions.currentTransaction &&
      (state === 'IN_TRANSACTION' || state === 'COMMITTING_TRANSACTION')
    )
  }

  private choosePartition(record: ProducerRecord, key: Buffer | null, numPartitions: number): number {
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
    if (key) return partitionForKey(key, numPartitions)
    return this.accumulator.stickyPartition(record.topic, numPartitions)
  }
}
