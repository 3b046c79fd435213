/**
 * KIP-890 part 1, the partition leader's side of the question (Kafka's
 * AddPartitionsToTxnManager): is this partition in the producer's ongoing transaction?
 * Asked of the local coordinator when this broker coordinates the transactional id, else
 * of its coordinator with AddPartitionsToTxn v4 verify_only; for a transaction version 2
 * producer (KIP-890 part 2) the partition is added instead (v5, verify_only false), as
 * Kafka's AddPartitionsToTxnManager does for its `addPartition` operation. The answer is in the terms a
 * producer expects from Produce, as Kafka's ReplicaManager translates it:
 * PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH, and a coordinator that cannot answer now
 * (moved, loading, unreachable, completing a transaction) NOT_ENOUGH_REPLICAS, which every
 * producer retries without a metadata refresh.
 *
 * Adding a partition often meets the previous transaction still writing its markers (a
 * version 2 producer sends its next Produce right after EndTxn): CONCURRENT_TRANSACTIONS.
 * As Kafka's leader does, the add is retried here every add.partitions.to.txn.retry.backoff.ms
 * for up to add.partitions.to.txn.retry.backoff.max.ms (20 and 100 ms), rather than making
 * the producer wait out its own retry backoff for each such transaction.
 */
import type { Clock } from '../../common/clock.js'
import type { Logger } from '../../common/logger.js'
import type { Transport } from '../../common/network.js'
import type { TransactionVerificationRequest, TransactionVerifier } from '../../common/transaction.js'
import { type BrokerId, type ClusterImage, NO_LEADER } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { defaultAddPartitionsToTxnRequest } from '../../protocol/generated/add-partitions-to-txn-request.js'
import type { AddPartitionsToTxnResponse } from '../../protocol/generated/add-partitions-to-txn-response.js'
import { ApiKey } from '../../protocol/generated/index.js'
import { BrokerClient } from '../../replication/broker-client.js'
import type { TransactionCoordinator } from './transaction-coordinator.js'
import { TRANSACTION_STATE_TOPIC } from './transaction-log.js'
import { TV_2 } from './transaction-metadata.js'

/** The first version with verify_only (and the batched form). */
const VERIFY_VERSION = 4
/** Kafka's AddPartitionsToTxnManager adds a TV2 producer's partitions at v5. */
const ADD_VERSION = 5
const CLIENT_ID = 'tidelog-txn-verifier'

export interface VerifierHost {
  readonly nodeId: BrokerId
  readonly clock: Clock
  readonly logger: Logger
  readonly transport: Transport
  metadataImage(): ClusterImage
  /** A broker's endpoint on the inter-broker listener; undefined when it is not registered. */
  brokerAddress(nodeId: BrokerId): { host: string; port: number } | undefined
}

export interface VerifierConfig {
  /** request.timeout.ms: an AddPartitionsToTxn to another broker's coordinator. */
  readonly requestTimeoutMs: number
  /** add.partitions.to.txn.retry.backoff.ms */
  readonly addPartitionsRetryBackoffMs: number
  /** add.partitions.to.txn.retry.backoff.max.ms: how long an add is retried in all. */
  readonly addPartitionsRetryBackoffMaxMs: number
}

export class CoordinatorTransactionVerifier implements TransactionVerifier {
  private readonly clients = new Map<BrokerId, { address: string; client: BrokerClient }>()

  constructor(
    private readonly host: VerifierHost,
    private readonly coordinator: TransactionCoordinator,
    private readonly config: VerifierConfig,
  ) {}

  close(): void {
    for (const { client } of this.clients.values()) client.close()
    this.clients.clear()
  }

  async verify(request: TransactionVerificationRequest): Promise<number> {
    if (request.addPartition !== true) return toProduceError(await this.ask(request))
    const clock = this.host.clock
    const { addPartitionsRetryBackoffMs: backoffMs, addPartitionsRetryBackoffMaxMs: maxMs } = this.config
    const deadlineMs = clock.nowMs() + Math.min(maxMs, this.config.requestTimeoutMs)
    for (;;) {
      const code = await this.ask(request)
      if (code !== ErrorCode.CONCURRENT_TRANSACTIONS || clock.nowMs() + backoffMs > deadlineMs)
        return toProduceError(code)
      await new Promise<void>((resolve) => clock.setTimeout(resolve, backoffMs))
      request.beforeRetry?.()
    }
  }

  /** One question to the coordinator, answered with its own error code. */
  private async ask(request: TransactionVerificationRequest): Promise<number> {
    const producer = { producerId: request.producerId, producerEpoch: request.producerEpoch }
    const partitions = new Map([[request.topic, new Set([request.partition])]])
    const local = this.coordinator.stateManager.getTransactionState(request.transactionalId)
    const add = request.addPartition === true
    if (local !== ErrorCode.NOT_COORDINATOR) {
      if (add) return this.coordinator.addPartitions(request.transactionalId, producer, partitions, TV_2)
      const [result] = this.coordinator.verifyPartitions(request.transactionalId, producer, partitions)
      return result.errorCode
    }
    const image = this.host.metadataImage()
    const topic = image.topics.get(TRANSACTION_STATE_TOPIC)
    const p = this.coordinator.stateManager.partitionFor(request.transactionalId)
    const leader = topic?.partitions[p]?.leader ?? NO_LEADER
    const broker = this.host.brokerAddress(leader)
    if (!broker || leader === this.host.nodeId) return ErrorCode.NOT_ENOUGH_REPLICAS
    try {
      const response = await this.request(leader, `${broker.host}:${broker.port}`, broker, add, {
        // The v3-and-below fields keep their defaults, or v4 cannot be encoded.
        ...defaultAddPartitionsToTxnRequest(),
        transactions: [
          {
            transactionalId: request.transactionalId,
            producerId: request.producerId,
            producerEpoch: request.producerEpoch,
            verifyOnly: !add,
            topics: [{ name: request.topic, partitions: [request.partition] }],
          },
        ],
      })
      if (response.errorCode !== ErrorCode.NONE) return response.errorCode
      for (const txn of response.resultsByTransaction)
        for (const t of txn.topicResults)
          for (const r of t.resultsByPartition)
            if (t.name === request.topic && r.partitionIndex === request.partition)
              return r.partitionErrorCode
      this.host.logger.warn(
        { ...request, producerId: String(request.producerId) },
        'verification answer lacks the partition',
      )
      return ErrorCode.NOT_ENOUGH_REPLICAS
    } catch (error) {
      this.host.logger.info(
        { err: error, coordinator: leader },
        'transaction verification failed; produce retried',
      )
      return ErrorCode.NOT_ENOUGH_REPLICAS
    }
  }

  private request(
    nodeId: BrokerId,
    address: string,
    broker: { host: string; port: number },
    add: boolean,
    body: unknown,
  ): Promise<AddPartitionsToTxnResponse> {
    let known = this.clients.get(nodeId)
    if (!known || known.address !== address) {
      known?.client.close()
      known = { address, client: new BrokerClient(broker.host, broker.port, CLIENT_ID, this.host.transport) }
      this.clients.set(nodeId, known)
    }
    const { client } = known
    return new Promise<AddPartitionsToTxnResponse>((resolve, reject) => {
      const timer = this.host.clock.setTimeout(() => {
        if (this.clients.get(nodeId)?.client === client) this.clients.delete(nodeId)
        client.close()
        reject(new Error(`AddPartitionsToTxn to broker ${nodeId} timed out`))
      }, this.config.requestTimeoutMs)
      const version = add ? ADD_VERSION : VERIFY_VERSION
      client.request<AddPartitionsToTxnResponse>(ApiKey.AddPartitionsToTxn, version, body).then(
        (response) => {
          timer.cancel()
          resolve(response)
        },
        (error: unknown) => {
          timer.cancel()
          reject(error)
        },
      )
    })
  }
}

/** Kafka's ReplicaManager translation of verification errors for Produce. */
export function toProduceError(errorCode: number): number {
  switch (errorCode) {
    case ErrorCode.PRODUCER_FENCED:
      return ErrorCode.INVALID_PRODUCER_EPOCH
    case ErrorCode.CONCURRENT_TRANSACTIONS:
    case ErrorCode.NETWORK_EXCEPTION:
    case ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
    case ErrorCode.COORDINATOR_NOT_AVAILABLE:
    case ErrorCode.NOT_COORDINATOR:
      return ErrorCode.NOT_ENOUGH_REPLICAS
    default:
      return errorCode
  }
}
