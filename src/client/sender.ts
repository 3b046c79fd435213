/**
 * Kafka's Sender: drains ready batches from the accumulator to each partition's leader on
 * that broker's produce connection, one batch per partition per request and at most
 * max.in.flight.requests.per.connection requests per broker, and handles the answers.
 *
 * Delivery: a retriable error (leader moved, connection lost, timeout,
 * NOT_ENOUGH_REPLICAS...) puts the batch back into its partition's queue with the client's
 * exponential backoff, refreshing metadata first when the leader may have moved. A batch
 * fails after `retries` attempts or once delivery.timeout.ms has passed since it was
 * created, queued or in flight (KIP-91, Java's expiredBatches and getExpiredInflightBatches).
 * An expired batch still in flight keeps its request: its partition stays muted and counted
 * in flight until the answer or the request timeout, which only tells the sequence
 * bookkeeping whether it was written (its records already failed). MESSAGE_TOO_LARGE splits
 * a batch in two. max.in.flight 1 mutes a partition while its batch is in flight, which
 * keeps order.
 *
 * Idempotence: InitProducerId (any broker, retried with backoff) before the first batch
 * goes, and whenever the TransactionManager gave the producer id up; every sequence rule is
 * the TransactionManager's, this file only asks it and acts (see transaction-manager.ts).
 * A broker without InitProducerId turns the default idempotence off.
 *
 * Time is the client's clock: linger, backoff and expiry run on it, so a simulation (or a
 * test's manual clock) drives them. Drains run on the next turn of the event loop, so
 * appends of one tick share a request.
 */
import type { TimerHandle } from '../common/clock.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { ApiKey } from '../protocol/generated/index.js'
import type { InitProducerIdResponse } from '../protocol/generated/init-producer-id-response.js'
import type { ProduceRequest } from '../protocol/generated/produce-request.js'
import type {
  ProduceResponse,
  ProduceResponsePartitionProduceResponse,
} from '../protocol/generated/produce-response.js'
import { ZERO_UUID } from '../protocol/primitives.js'
import type { KafkaClient } from './client.js'
import {
  asClientError,
  DeliveryTimeoutError,
  type KafkaClientError,
  KafkaProtocolError,
  UnsupportedApiError,
} from './errors.js'
import type { ProducerBatch } from './producer-batch.js'
import { CLIENT_TIMEOUT_MARGIN_MS, type ResolvedProducerOptions } from './producer-options.js'
import type { RecordAccumulator } from './record-accumulator.js'
import { isRetriableError, needsMetadataRefresh, sleep } from './retry.js'
import { partitionKey, type TransactionManager } from './transaction-manager.js'
import { TRANSACTION_V1_MAX_VERSIONS } from './versions.js'

/** transaction.timeout.ms sent in InitProducerId (Kafka's default; unused without a transactional id). */
const TRANSACTION_TIMEOUT_MS = 60000

export interface SenderCounters {
  requests: number
  batches: number
  retries: number
  failedBatches: number
}

export interface SenderHost {
  /** Whether the producer is closed (no more retries). */
  readonly isClosed: boolean
  /** Whether sends wait for metadata or memory (someone still needs a producer id). */
  readonly hasPendingSends: boolean
  /**
   * A transactional producer's batch failed for good: the transaction can no longer
   * commit. Returns the error its records get (fencing as a ProducerFencedError).
   */
  onTransactionalBatchFailed?(error: Error): Error
}

export class Sender {
  readonly counters: SenderCounters = { requests: 0, batches: 0, retries: 0, failedBatches: 0 }
  /** False also after a broker turned out not to serve InitProducerId (default idempotence only). */
  private idempotentNow: boolean
  private drainScheduled = false
  private wakeTimer: TimerHandle | null = null
  /** After close nothing runs again: a metadata refresh still failing would re-arm the wake timer forever. */
  private closed = false
  private wakeAtMs = Number.POSITIVE_INFINITY
  private metadataRefreshAtMs = 0
  private readonly inFlightByNode = new Map<number, number>()
  private readonly mutedPartitions = new Set<string>()
  /** Batches per partition sent and not yet answered. */
  private readonly inFlightByPartition = new Map<string, number>()
  /** Batches sent and not yet answered, for delivery.timeout.ms (KIP-91). */
  private readonly inFlightBatches = new Set<ProducerBatch>()
  /**
   * No in-flight batch expires before this (a lower bound, as Java's nextBatchExpiryTimeMs):
   * the drains in between skip the scan of inFlightBatches.
   */
  private inFlightExpiryMs = Number.POSITIVE_INFINITY
  private drainCounter = 0
  private initProducerIdRunning = false

  constructor(
    private readonly client: KafkaClient,
    private readonly options: ResolvedProducerOptions,
    private readonly accumulator: RecordAccumulator,
    private readonly transactions: TransactionManager,
    private readonly host: SenderHost,
  ) {
    this.idempotentNow = options.idempotent
  }

  get idempotent(): boolean {
    return this.idempotentNow
  }

  /** A record was appended to `batch`: send soon if it is ready, else wake when its linger ends. */
  onAppended(batch: ProducerBatch): void {
    if (this.accumulator.isSendableNow(batch)) this.scheduleDrain()
    else if (batch.recordCount === 1) this.wakeAt(batch.createdMs + this.options.lingerMs)
  }

  scheduleDrain(): void {
    if (this.drainScheduled || this.closed) return
    this.drainScheduled = true
    // The next turn of the event loop, not a timer: appends of this tick join the request.
    this.client.options.defer(() => {
      this.drainScheduled = false
      this.drain()
    })
  }

  close(): void {
    this.closed = true
    this.cancelWake()
  }

  /** Starts InitProducerId unless it runs already or an id is in hand; drains when it answers. */
  maybeInitProducerId(): void {
    // A transactional producer's id comes from initTransactions, for its transactional id.
    if (this.transactions.isTransactional) return
    if (this.transactions.hasProducerId || this.initProducerIdRunning || !this.idempotentNow) return
    this.initProducerIdRunning = true
    this.initProducerId().then(
      ({ producerId, producerEpoch }) => {
        this.initProducerIdRunning = false
        this.transactions.setProducerIdAndEpoch(producerId, producerEpoch)
        this.scheduleDrain()
      },
      (error: unknown) => {
        this.initProducerIdRunning = false
        const failure = asClientError(error)
        if (failure instanceof UnsupportedApiError && !this.options.idempotenceExplicit) {
          // Idempotence by default only: a broker without InitProducerId gets plain sends.
          this.idempotentNow = false
          this.scheduleDrain()
          return
        }
        // Fatal for the batches waiting on it; later sends try again.
        for (const batch of this.accumulator.takeUnsequenced()) this.failBatch(batch, failure)
        this.scheduleDrain()
      },
    )
  }

  private wakeAt(atMs: number): void {
    if (atMs >= this.wakeAtMs || this.closed) return
    this.wakeTimer?.cancel()
    this.wakeAtMs = atMs
    const clock = this.client.clock
    this.wakeTimer = clock.setTimeout(
      () => {
        this.wakeTimer = null
        this.wakeAtMs = Number.POSITIVE_INFINITY
        this.drain()
      },
      Math.max(atMs - clock.monotonicMs(), 0),
    )
  }

  /** Sends every ready batch its broker has room for; arranges to run again when more become ready. */
  private drain(): void {
    if (this.closed) return
    const now = this.client.clock.monotonicMs()
    const byNode = new Map<number, ProducerBatch[]>()
    let nextWakeMs = Number.POSITIVE_INFINITY
    let needMetadata = this.client.metadataStale
    this.expireInFlight(now)
    for (const [key, queue] of this.accumulator.queueEntries()) {
      for (const batch of this.accumulator.takeExpired(queue, now)) this.expire(batch, now)
      const first = queue[0]
      if (!first) {
        this.accumulator.dropEmptyQueue(key, queue)
        continue
      }
      if (this.mutedPartitions.has(key)) {
        // Its batch in flight may stay unanswered past this one's deadline.
        nextWakeMs = Math.min(nextWakeMs, first.deadlineMs)
        continue
      }
      const readyAtMs = this.accumulator.readyAtMs(first, queue.length, now)
      if (readyAtMs > now) {
        nextWakeMs = Math.min(nextWakeMs, readyAtMs)
        continue
      }
      const leader = this.client.metadata.leaderOf(first.topic, first.partition)
      if (!leader) {
        needMetadata = true
        continue
      }
      if (!this.transactions.isSendToPartitionAllowed(key)) {
        // Waits for AddPartitionsToTxn, which drains again when answered.
        nextWakeMs = Math.min(nextWakeMs, first.deadlineMs)
        continue
      }
      if (
        this.idempotentNow &&
        !this.transactions.readyToSend(key, queue, this.inFlightByPartition.get(key) ?? 0)
      ) {
        // Sent when the producer id arrives or the partition's in-flight batches answer;
        // the deadline still applies.
        nextWakeMs = Math.min(nextWakeMs, first.deadlineMs)
        continue
      }
      const list = byNode.get(leader.nodeId) ?? []
      list.push(first)
      byNode.set(leader.nodeId, list)
    }
    if (this.idempotentNow && this.accumulator.hasQueues) this.maybeInitProducerId()
    let sent = 0
    for (const [nodeId, batches] of byNode) sent += this.sendToNode(nodeId, batches)
    // One batch per partition per request: look again for the next ones (pipelining up to
    // max.in.flight), as Java's sender loop does.
    if (sent > 0) this.scheduleDrain()
    if (needMetadata) nextWakeMs = Math.min(nextWakeMs, this.refreshMetadataSoon(now))
    nextWakeMs = Math.min(nextWakeMs, this.inFlightExpiryMs)
    if (nextWakeMs < Number.POSITIVE_INFINITY) this.wakeAt(nextWakeMs)
    // Nothing queued or in flight: a wake armed for a deadline (up to delivery.timeout.ms
    // away) has nothing left to do and would keep the process alive.
    else if (!this.accumulator.hasQueues && this.inFlightBatches.size === 0) this.cancelWake()
  }

  private cancelWake(): void {
    this.wakeTimer?.cancel()
    this.wakeTimer = null
    this.wakeAtMs = Number.POSITIVE_INFINITY
  }

  /**
   * Fails the in-flight batches past their delivery timeout, and notes when the next one
   * is due. Their requests go on: the answer still tells whether the sequence was written.
   */
  private expireInFlight(now: number): void {
    if (now < this.inFlightExpiryMs) return
    let nextMs = Number.POSITIVE_INFINITY
    for (const batch of this.inFlightBatches) {
      if (batch.isSettled) continue
      if (batch.deadlineMs <= now) this.expire(batch, now)
      else nextMs = Math.min(nextMs, batch.deadlineMs)
    }
    this.inFlightExpiryMs = nextMs
  }

  /**
   * A batch past its delivery timeout fails, queued or in flight (Java's message). One sent
   * before is told to the TransactionManager as possibly written (see failBatch).
   */
  private expire(batch: ProducerBatch, now: number): void {
    const error = new DeliveryTimeoutError(
      `Expiring ${batch.recordCount} record(s) for ${batch.topic}-${batch.partition}: ${now - batch.createdMs} ms has passed since batch creation (delivery.timeout.ms ${this.options.deliveryTimeoutMs})`,
      batch.lastError,
    )
    this.failBatch(batch, error)
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
      const idle = this.accumulator.incompleteCount === 0 && !this.host.hasPendingSends
      if (!isRetriableError(failure) || idle) throw failure
      await sleep(this.client.clock, this.client.backoff.delayMs(attempt))
    }
  }

  /** One metadata refresh at a time, at most one per retry.backoff.ms; returns when to look again. */
  private refreshMetadataSoon(now: number): number {
    if (now < this.metadataRefreshAtMs) return this.metadataRefreshAtMs
    this.metadataRefreshAtMs = now + this.client.options.retryBackoffMs
    this.client.refreshMetadata().then(
      () => this.scheduleDrain(),
      // A failed refresh is retried by the next drain; the batches time out if it never succeeds.
      () => this.wakeAt(this.client.clock.monotonicMs() + this.client.options.retryBackoffMs),
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
      // A reset in this drain (another partition's unresolved sequence) took the producer
      // id away: the batch waits for the new one.
      if (this.idempotentNow && !batch.hasSequence) {
        if (!this.transactions.canStamp(partitionKey(batch.topic, batch.partition))) continue
      }
      // One batch per partition per request, up to max.request.size (the first always goes).
      if (batches.length > 0 && bytes + batch.sizeBytes > this.options.maxRequestSize) continue
      bytes += batch.sizeBytes
      batches.push(batch)
    }
    if (batches.length === 0) return 0
    for (const batch of batches) {
      const key = partitionKey(batch.topic, batch.partition)
      this.accumulator.takeHead(key, batch)
      batch.inFlight = true
      if (batch.drainOrder < 0) batch.drainOrder = this.drainCounter++
      if (this.idempotentNow && !batch.hasSequence) this.transactions.stampBatch(key, batch)
      this.inFlightByPartition.set(key, (this.inFlightByPartition.get(key) ?? 0) + 1)
      if (this.options.maxInFlight === 1) this.mutedPartitions.add(key)
      this.inFlightBatches.add(batch)
      this.inFlightExpiryMs = Math.min(this.inFlightExpiryMs, batch.deadlineMs)
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
      this.inFlightBatches.delete(batch)
      this.accumulator.afterRequest(batch)
      const key = partitionKey(batch.topic, batch.partition)
      this.mutedPartitions.delete(key)
      const left = (this.inFlightByPartition.get(key) ?? 1) - 1
      if (left > 0) this.inFlightByPartition.set(key, left)
      else this.inFlightByPartition.delete(key)
    }
    if (this.inFlightBatches.size === 0) this.inFlightExpiryMs = Number.POSITIVE_INFINITY
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
      // A transactional producer at version 1 stays below Produce v12, which would ask the
      // leader to add the partition itself (Java's useTransactionV1Version).
      const versionMax =
        this.transactions.isTransactional && !this.transactions.isTransactionV2
          ? TRANSACTION_V1_MAX_VERSIONS.produce
          : undefined
      const response = await connection.request<ProduceResponse>(ApiKey.Produce, request, {
        timeoutMs: this.options.requestTimeoutMs + CLIENT_TIMEOUT_MARGIN_MS,
        version: connection.versionFor(ApiKey.Produce, versionMax),
      })
      // An answer after the deadline does not complete the send (KIP-91): the timer may
      // not have fired yet when the answer arrives.
      this.expireInFlight(this.client.clock.monotonicMs())
      this.onResponse(batches, response)
    } catch (error) {
      this.expireInFlight(this.client.clock.monotonicMs())
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
      transactionalId: this.transactions.transactionalId,
      acks: this.options.acks,
      timeoutMs: this.options.requestTimeoutMs,
      topicData: [...byTopic].map(([name, partitionData]) => ({ name, topicId: ZERO_UUID, partitionData })),
    }
  }

  private onResponse(batches: readonly ProducerBatch[], response: ProduceResponse): void {
    const results = new Map<string, ProduceResponsePartitionProduceResponse>()
    for (const topic of response.responses) {
      for (const p of topic.partitionResponses) results.set(partitionKey(topic.name, p.index), p)
    }
    for (const batch of batches) {
      const result = results.get(partitionKey(batch.topic, batch.partition))
      if (batch.isSettled) {
        // Expired in flight: its records failed already; a write acknowledged now resolves
        // its unresolved sequence (TransactionManager), nothing else is left to do.
        const written =
          result?.errorCode === ErrorCode.NONE ||
          (result?.errorCode === ErrorCode.DUPLICATE_SEQUENCE_NUMBER && batch.hasSequence)
        if (written) this.transactions.handleCompletedBatch(batch)
      } else if (!result) {
        this.onBatchError(
          batch,
          new KafkaProtocolError(ErrorCode.NETWORK_EXCEPTION, 'partition missing from the produce response'),
        )
      } else if (result.errorCode === ErrorCode.NONE) {
        this.transactions.handleCompletedBatch(batch)
        this.settle(batch, () => batch.complete(Number(result.baseOffset), Number(result.logAppendTimeMs)))
      } else if (result.errorCode === ErrorCode.DUPLICATE_SEQUENCE_NUMBER && batch.hasSequence) {
        // Written before, offsets unknown (older brokers; tidelog answers with the first offsets).
        this.transactions.handleCompletedBatch(batch)
        this.settle(batch, () => batch.complete(-1, -1))
      } else {
        this.onBatchError(batch, new KafkaProtocolError(result.errorCode, result.errorMessage), result)
      }
    }
  }

  private onBatchError(
    batch: ProducerBatch,
    error: KafkaClientError,
    result?: ProduceResponsePartitionProduceResponse,
  ): void {
    // Expired in flight: no retry, no split, no verdict (Java's canRetry asks isDone first).
    if (batch.isSettled) return
    batch.lastError = error
    const now = this.client.clock.monotonicMs()
    if (
      this.idempotentNow &&
      batch.hasSequence &&
      !this.host.isClosed &&
      error instanceof KafkaProtocolError
    ) {
      const verdict = this.transactions.canRetry(batch, error.errorCode, result?.logStartOffset)
      if (verdict !== undefined) this.maybeInitProducerId()
      if (verdict === 'fail' || (verdict !== undefined && batch.attempts >= this.options.retries)) {
        this.failBatch(batch, error)
        return
      }
      if (verdict !== undefined) {
        this.retry(batch, now)
        return
      }
    }
    if (needsMetadataRefresh(error)) {
      this.metadataRefreshAtMs = 0
      this.refreshMetadataSoon(now)
    }
    if (
      error instanceof KafkaProtocolError &&
      error.errorCode === ErrorCode.MESSAGE_TOO_LARGE &&
      batch.recordCount > 1
    ) {
      // The halves need sequences of their own: the partition is re-stamped.
      if (this.idempotentNow && batch.hasSequence) {
        this.transactions.requestEpochBumpForPartition(batch)
        this.maybeInitProducerId()
      }
      this.requeue(this.accumulator.split(batch))
      return
    }
    if (!isRetriableError(error) || this.host.isClosed || batch.attempts >= this.options.retries) {
      this.failBatch(batch, error)
    } else {
      this.retry(batch, now)
    }
  }

  /** Back into its queue after a backoff; past the deadline the queue expires it (this error as cause). */
  private retry(batch: ProducerBatch, now: number): void {
    batch.attempts++
    this.counters.retries++
    batch.retryAtMs = Math.min(now + this.client.backoff.delayMs(batch.attempts), batch.deadlineMs)
    this.requeue([batch])
  }

  private requeue(batches: readonly ProducerBatch[]): void {
    this.accumulator.reenqueue(batches, this.idempotentNow)
    this.wakeAt(Math.min(...batches.map((b) => b.retryAtMs)))
  }

  /**
   * Fails every batch not sent yet (no sequence): a transaction that is aborting, or can no
   * longer commit (Java's abortUndrainedBatches). Sent batches still complete.
   */
  abortUndrained(error: Error): void {
    for (const batch of this.accumulator.takeUnsequenced()) this.failBatch(batch, error)
  }

  private failBatch(batch: ProducerBatch, failure: Error): void {
    const error =
      this.transactions.isTransactional && this.host.onTransactionalBatchFailed
        ? this.host.onTransactionalBatchFailed(failure)
        : failure
    this.counters.failedBatches++
    if (this.idempotentNow && batch.hasSequence) {
      this.transactions.handleFailedBatch(
        batch,
        error instanceof DeliveryTimeoutError && batch.drainOrder >= 0,
      )
      this.maybeInitProducerId()
    }
    this.settle(batch, () => batch.fail(error))
  }

  private settle(batch: ProducerBatch, outcome: () => void): void {
    outcome()
    this.accumulator.deallocate(batch)
  }
}
