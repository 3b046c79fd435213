/**
 * The transactional producer's requests to its coordinators, as the Java producer's
 * TxnRequestHandlers send them: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and
 * EndTxn to the transaction coordinator of the transactional id (FindCoordinator key type
 * 1), TxnOffsetCommit to the group's coordinator. Each is retried, with the client's
 * backoff, while its answer is retriable (a coordinator moving or loading, a transaction
 * still completing: CONCURRENT_TRANSACTIONS), looking the coordinator up again when it
 * moved, until `timeoutMs`. The answer says how a failure counts: 'fatal' (fenced,
 * unauthorized, an unexpected error), 'abortable' (the transaction must abort) or
 * 'timeout' (nothing known; the same call may be made again). The state changes are the
 * TransactionManager's; this file only talks.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import type { AddOffsetsToTxnResponse } from '../protocol/generated/add-offsets-to-txn-response.js'
import type { AddPartitionsToTxnResponse } from '../protocol/generated/add-partitions-to-txn-response.js'
import type { EndTxnResponse } from '../protocol/generated/end-txn-response.js'
import { ApiKey } from '../protocol/generated/index.js'
import type { InitProducerIdResponse } from '../protocol/generated/init-producer-id-response.js'
import type { TxnOffsetCommitResponse } from '../protocol/generated/txn-offset-commit-response.js'
import type { KafkaClient } from './client.js'
import {
  asClientError,
  BlockTimeoutError,
  type KafkaClientError,
  KafkaProtocolError,
  ProducerFencedError,
} from './errors.js'
import { CoordinatorKeyType, findCoordinator } from './find-coordinator.js'
import { CLIENT_TIMEOUT_MARGIN_MS } from './producer-options.js'
import { isRetriableError, sleep } from './retry.js'
import type { ProducerIdAndEpoch } from './transaction-manager.js'
import { TRANSACTION_V1_MAX_VERSIONS, TRANSACTION_V2_MIN_VERSIONS } from './versions.js'

export type FailureSeverity = 'fatal' | 'abortable' | 'timeout'

export type TxnResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly severity: FailureSeverity; readonly error: KafkaClientError }

/** An offset to commit in the transaction (Java's OffsetAndMetadata per TopicPartition). */
export interface TransactionOffset {
  readonly topic: string
  readonly partition: number
  /** The next offset to consume (the last processed + 1). */
  readonly offset: number | bigint
  readonly leaderEpoch?: number
  readonly metadata?: string | null
}

/** Java's ConsumerGroupMetadata: the consumer's generation fences a zombie (KIP-447). */
export interface ConsumerGroupMetadata {
  readonly groupId: string
  readonly generationId?: number
  readonly memberId?: string
  readonly groupInstanceId?: string | null
}

type Verdict = 'done' | 'retry' | 'rediscover' | 'abortable' | 'fatal'

/**
 * Java's ADD_PARTITIONS_RETRY_BACKOFF_MS idea: the first AddPartitionsToTxn of a
 * transaction usually meets CONCURRENT_TRANSACTIONS while the previous one's markers are
 * still being written (EndTxn answers before that), which takes milliseconds, not
 * retry.backoff.ms. Java waits 20 ms; a tidelog coordinator writes its markers in a few,
 * and 5 ms roughly halved the commit latency of 100-record transactions on 3 brokers
 * (bench produce --transaction-size 100).
 */
const ADD_PARTITIONS_RETRY_BACKOFF_MS = 5

/** Java's handlers' reading of a transaction coordinator's (and TxnOffsetCommit's) error codes. */
function verdictOf(code: number): Verdict {
  switch (code) {
    case ErrorCode.NONE:
      return 'done'
    case ErrorCode.NOT_COORDINATOR:
    case ErrorCode.COORDINATOR_NOT_AVAILABLE:
    case ErrorCode.REQUEST_TIMED_OUT:
      return 'rediscover'
    case ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
    case ErrorCode.CONCURRENT_TRANSACTIONS:
    case ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
    case ErrorCode.NETWORK_EXCEPTION:
      return 'retry'
    case ErrorCode.TOPIC_AUTHORIZATION_FAILED:
    case ErrorCode.GROUP_AUTHORIZATION_FAILED:
    case ErrorCode.OPERATION_NOT_ATTEMPTED:
    case ErrorCode.UNKNOWN_PRODUCER_ID:
    case ErrorCode.INVALID_PRODUCER_ID_MAPPING:
    case ErrorCode.TRANSACTION_ABORTABLE:
    // TxnOffsetCommit: the consumer left the generation (Java's CommitFailedException).
    case ErrorCode.UNKNOWN_MEMBER_ID:
    case ErrorCode.ILLEGAL_GENERATION:
    case ErrorCode.FENCED_INSTANCE_ID:
    case ErrorCode.REBALANCE_IN_PROGRESS:
      return 'abortable'
    default:
      // Fencing, authorization of the transactional id, INVALID_TXN_STATE,
      // INVALID_TRANSACTION_TIMEOUT, and whatever Java calls unexpected.
      return 'fatal'
  }
}

export interface TransactionRequestsOptions {
  readonly transactionalId: string
  /** transaction.timeout.ms, sent in InitProducerId. */
  readonly transactionTimeoutMs: number
  readonly requestTimeoutMs: number
}

export class TransactionRequests {
  /** The transaction coordinator's node id; null until looked up, or after it moved. */
  private coordinator: number | null = null
  private readonly groupCoordinators = new Map<string, number>()

  constructor(
    private readonly client: KafkaClient,
    private readonly options: TransactionRequestsOptions,
  ) {}

  /**
   * InitProducerId for the transactional id. `current` is the id and epoch in use, for the
   * KIP-360 epoch bump after an aborted transaction whose sequences are unknown.
   */
  initProducerId(
    current: ProducerIdAndEpoch | null,
    timeoutMs: number,
  ): Promise<TxnResult<ProducerIdAndEpoch>> {
    let answer: ProducerIdAndEpoch = { producerId: -1n, producerEpoch: -1 }
    return this.retrying('InitProducerId', timeoutMs, 'transaction', async (nodeId) => {
      const response = await this.client.request<InitProducerIdResponse>(
        nodeId,
        ApiKey.InitProducerId,
        () => ({
          transactionalId: this.options.transactionalId,
          transactionTimeoutMs: this.options.transactionTimeoutMs,
          producerId: current?.producerId ?? -1n,
          producerEpoch: current?.producerEpoch ?? -1,
        }),
        { timeoutMs: this.requestTimeoutMs },
      )
      answer = { producerId: response.producerId, producerEpoch: response.producerEpoch }
      return response.errorCode
    }).then((result) => {
      if (result.ok) return { ok: true, value: answer }
      // Java: every InitProducerId error that is not retried is fatal.
      return result.severity === 'abortable' ? { ...result, severity: 'fatal' } : result
    })
  }

  /**
   * Whether the cluster runs transaction version 2: `transaction.version` finalized at 2 or
   * more (Java's maybeUpdateTransactionV2Enabled reads the same from ApiVersions) and the
   * broker serving Produce v12, EndTxn v5 and TxnOffsetCommit v5. Any broker will do (the
   * finalized levels are the cluster's): the coordinator's connection, which InitProducerId
   * just used, so a partitioned broker first in the list costs no connect timeout.
   */
  async clusterOffersTransactionV2(): Promise<boolean> {
    const connection =
      this.coordinator !== null
        ? await this.client.connectionTo(this.coordinator)
        : await this.client.anyConnection()
    if (connection.finalizedFeatureLevel('transaction.version') < 2) return false
    const offers = (apiKey: number, min: number): boolean =>
      connection.supports(apiKey) && connection.versionFor(apiKey) >= min
    return (
      offers(ApiKey.Produce, TRANSACTION_V2_MIN_VERSIONS.produce) &&
      offers(ApiKey.EndTxn, TRANSACTION_V2_MIN_VERSIONS.endTxn) &&
      offers(ApiKey.TxnOffsetCommit, TRANSACTION_V2_MIN_VERSIONS.txnOffsetCommit)
    )
  }

  /** AddPartitionsToTxn for `partitions`; any partition's retriable error retries them all, as Java. */
  addPartitions(
    producer: ProducerIdAndEpoch,
    partitions: readonly { topic: string; partition: number }[],
    timeoutMs: number,
    firstOfTransaction = false,
  ): Promise<TxnResult<void>> {
    const byTopic = new Map<string, number[]>()
    for (const { topic, partition } of partitions)
      byTopic.set(topic, [...(byTopic.get(topic) ?? []), partition])
    return this.retrying(
      'AddPartitionsToTxn',
      timeoutMs,
      'transaction',
      async (nodeId) => {
        const response = await this.client.request<AddPartitionsToTxnResponse>(
          nodeId,
          ApiKey.AddPartitionsToTxn,
          () => ({
            transactions: [],
            v3AndBelowTransactionalId: this.options.transactionalId,
            v3AndBelowProducerId: producer.producerId,
            v3AndBelowProducerEpoch: producer.producerEpoch,
            v3AndBelowTopics: [...byTopic].map(([name, indexes]) => ({ name, partitions: indexes })),
          }),
          { timeoutMs: this.requestTimeoutMs },
        )
        return worstCode(
          response.resultsByTopicV3AndBelow.flatMap((t) =>
            t.resultsByPartition.map((p) => p.partitionErrorCode),
          ),
        )
      },
      firstOfTransaction ? ADD_PARTITIONS_RETRY_BACKOFF_MS : undefined,
    )
  }

  /** AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction. */
  addOffsets(producer: ProducerIdAndEpoch, groupId: string, timeoutMs: number): Promise<TxnResult<void>> {
    return this.retrying('AddOffsetsToTxn', timeoutMs, 'transaction', async (nodeId) => {
      const response = await this.client.request<AddOffsetsToTxnResponse>(
        nodeId,
        ApiKey.AddOffsetsToTxn,
        () => ({
          transactionalId: this.options.transactionalId,
          producerId: producer.producerId,
          producerEpoch: producer.producerEpoch,
          groupId,
        }),
        { timeoutMs: this.requestTimeoutMs },
      )
      return response.errorCode
    })
  }

  /**
   * TxnOffsetCommit to the group's coordinator; group metadata from v3 on (KIP-447). At
   * transaction version 2 (v5) it also adds the group to the transaction.
   */
  commitOffsets(
    producer: ProducerIdAndEpoch,
    offsets: readonly TransactionOffset[],
    group: ConsumerGroupMetadata,
    timeoutMs: number,
    transactionV2 = false,
  ): Promise<TxnResult<void>> {
    const byTopic = new Map<string, TransactionOffset[]>()
    for (const o of offsets) byTopic.set(o.topic, [...(byTopic.get(o.topic) ?? []), o])
    return this.retrying('TxnOffsetCommit', timeoutMs, { groupId: group.groupId }, async (nodeId) => {
      const response = await this.client.request<TxnOffsetCommitResponse>(
        nodeId,
        ApiKey.TxnOffsetCommit,
        () => ({
          transactionalId: this.options.transactionalId,
          groupId: group.groupId,
          producerId: producer.producerId,
          producerEpoch: producer.producerEpoch,
          generationIdOrMemberEpoch: group.generationId ?? -1,
          memberId: group.memberId ?? '',
          groupInstanceId: group.groupInstanceId ?? null,
          topics: [...byTopic].map(([name, list]) => ({
            name,
            partitions: list.map((o) => ({
              partitionIndex: o.partition,
              committedOffset: BigInt(o.offset),
              committedLeaderEpoch: o.leaderEpoch ?? -1,
              committedMetadata: o.metadata ?? '',
            })),
          })),
        }),
        {
          timeoutMs: this.requestTimeoutMs,
          ...maxVersionAt(transactionV2, TRANSACTION_V1_MAX_VERSIONS.txnOffsetCommit),
        },
      )
      return worstCode(response.topics.flatMap((t) => t.partitions.map((p) => p.errorCode)))
    })
  }

  /**
   * EndTxn: the coordinator writes the markers and completes the transaction. At
   * transaction version 2 (v5) the answer names the bumped epoch (or a new producer id at
   * epoch 0 on overflow) for the next transaction; a retry sends the same epoch again, and
   * the coordinator, seeing the epoch one below its own, answers the same bump. The value
   * is null when the answer names none (v4 and below).
   */
  endTxn(
    producer: ProducerIdAndEpoch,
    commit: boolean,
    timeoutMs: number,
    transactionV2 = false,
  ): Promise<TxnResult<ProducerIdAndEpoch | null>> {
    let next: ProducerIdAndEpoch | null = null
    return this.retrying(
      commit ? 'EndTxn(commit)' : 'EndTxn(abort)',
      timeoutMs,
      'transaction',
      async (nodeId) => {
        const response = await this.client.request<EndTxnResponse>(
          nodeId,
          ApiKey.EndTxn,
          () => ({
            transactionalId: this.options.transactionalId,
            producerId: producer.producerId,
            producerEpoch: producer.producerEpoch,
            committed: commit,
          }),
          {
            timeoutMs: this.requestTimeoutMs,
            ...maxVersionAt(transactionV2, TRANSACTION_V1_MAX_VERSIONS.endTxn),
          },
        )
        next =
          response.producerId >= 0n
            ? { producerId: response.producerId, producerEpoch: response.producerEpoch }
            : null
        return response.errorCode
      },
    ).then((result) => (result.ok ? { ok: true, value: next } : result))
  }

  private get requestTimeoutMs(): number {
    return this.options.requestTimeoutMs + CLIENT_TIMEOUT_MARGIN_MS
  }

  /** Finds the coordinator, sends, and retries until done, failed for good, or `timeoutMs` passed. */
  private async retrying(
    what: string,
    timeoutMs: number,
    target: 'transaction' | { groupId: string },
    once: (nodeId: number) => Promise<number>,
    concurrentBackoffMs?: number,
  ): Promise<TxnResult<void>> {
    const clock = this.client.clock
    const deadlineMs = clock.monotonicMs() + timeoutMs
    let lastError: KafkaClientError | null = null
    for (let attempt = 1; ; attempt++) {
      let verdict: Verdict
      let backoffMs = this.client.backoff.delayMs(attempt)
      try {
        const code = await once(await this.coordinatorFor(target))
        verdict = verdictOf(code)
        if (code === ErrorCode.CONCURRENT_TRANSACTIONS && concurrentBackoffMs !== undefined)
          backoffMs = concurrentBackoffMs
        if (verdict === 'done') return { ok: true, value: undefined }
        lastError =
          code === ErrorCode.PRODUCER_FENCED || code === ErrorCode.INVALID_PRODUCER_EPOCH
            ? new ProducerFencedError(
                code,
                `${what}: the transactional id '${this.options.transactionalId}' has a newer producer (${code === ErrorCode.PRODUCER_FENCED ? 'PRODUCER_FENCED' : 'INVALID_PRODUCER_EPOCH'})`,
              )
            : new KafkaProtocolError(code, what)
      } catch (error) {
        lastError = asClientError(error)
        // FindCoordinator's own answer, a lost connection or a timeout: look up again.
        if (!isRetriableError(lastError)) return { ok: false, severity: 'fatal', error: lastError }
        verdict = 'rediscover'
      }
      if (verdict === 'fatal' || verdict === 'abortable')
        return { ok: false, severity: verdict, error: lastError }
      if (verdict === 'rediscover') this.forget(target)
      if (clock.monotonicMs() >= deadlineMs)
        return {
          ok: false,
          severity: 'timeout',
          error: new BlockTimeoutError(`${what} did not complete within ${timeoutMs} ms`, lastError),
        }
      await sleep(clock, Math.min(backoffMs, Math.max(deadlineMs - clock.monotonicMs(), 0)))
    }
  }

  private async coordinatorFor(target: 'transaction' | { groupId: string }): Promise<number> {
    if (target === 'transaction') {
      this.coordinator ??= await findCoordinator(
        this.client,
        this.options.transactionalId,
        CoordinatorKeyType.TRANSACTION,
      )
      return this.coordinator
    }
    let nodeId = this.groupCoordinators.get(target.groupId)
    if (nodeId === undefined) {
      nodeId = await findCoordinator(this.client, target.groupId, CoordinatorKeyType.GROUP)
      this.groupCoordinators.set(target.groupId, nodeId)
    }
    return nodeId
  }

  private forget(target: 'transaction' | { groupId: string }): void {
    if (target === 'transaction') this.coordinator = null
    else this.groupCoordinators.delete(target.groupId)
  }
}

/** At transaction version 1 a request stays below version 2's versions (`v1Max`). */
function maxVersionAt(transactionV2: boolean, v1Max: number): { maxVersion?: number } {
  return transactionV2 ? {} : { maxVersion: v1Max }
}

/**
 * One code for a response's partitions: the most severe (fatal over abortable over a
 * coordinator move over a retry), NONE when all succeeded.
 */
function worstCode(codes: readonly number[]): number {
  const rank: Record<Verdict, number> = { done: 0, retry: 1, rediscover: 2, abortable: 3, fatal: 4 }
  let worst: number = ErrorCode.NONE
  for (const code of codes) if (rank[verdictOf(code)] > rank[verdictOf(worst)]) worst = code
  return worst
}
