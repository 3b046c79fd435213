/**
 * Sends a transaction's COMMIT or ABORT markers (WriteTxnMarkers) to the leader of each of
 * its partitions (Kafka's TransactionMarkerChannelManager), through the inter-broker
 * client, even when the leader is this broker (one path for all). A partition leaves the
 * pending set once its leader wrote the marker or the partition is gone; retriable errors
 * (leader moved, not enough replicas, timeout, connection lost) are retried with backoff
 * after a fresh look at the metadata. A leader answering INVALID_PRODUCER_EPOCH or
 * TRANSACTION_COORDINATOR_FENCED says a newer coordinator took over: sending stops.
 */

import { ExponentialBackoff } from '../../common/backoff.js'
import type { Clock, TimerHandle } from '../../common/clock.js'
import type { Logger } from '../../common/logger.js'
import type { Transport } from '../../common/network.js'
import type { TransactionResult } from '../../common/transaction.js'
import type { BrokerId, ProducerId } from '../../common/types.js'
import type { ClusterImage } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { ApiKey } from '../../protocol/generated/index.js'
import type { WriteTxnMarkersResponse } from '../../protocol/generated/write-txn-markers-response.js'
import { BrokerClient } from '../../replication/broker-client.js'

/** WriteTxnMarkers v1 is the flexible one every Kafka 2.8+ broker serves. */
const WRITE_TXN_MARKERS_VERSION = 1
const CLIENT_ID = 'tidelog-txn-marker-sender'

export interface MarkerSenderHost {
  readonly clock: Clock
  readonly logger: Logger
  /** The inter-broker listener's transport (TLS and SASL when that listener has them). */
  readonly transport: Transport
  metadataImage(): ClusterImage
  /** A broker's endpoint on the inter-broker listener; undefined when it is not registered. */
  brokerAddress(nodeId: BrokerId): { host: string; port: number } | undefined
}

export interface MarkerSenderConfig {
  /** How long one WriteTxnMarkers request may take before it is retried (request.timeout.ms). */
  readonly requestTimeoutMs: number
  readonly retryBackoffMs: number
  readonly retryBackoffMaxMs: number
}

export interface MarkerJob {
  readonly transactionalId: string
  readonly producerId: ProducerId
  readonly producerEpoch: number
  readonly coordinatorEpoch: number
  readonly result: TransactionResult
  /** The partitions still waiting for their marker; shrinks as leaders write them. */
  readonly pending: {
    removePartition(topic: string, partition: number): void
    partitions: ReadonlyMap<string, ReadonlySet<number>>
  }
  /** False once this broker no longer coordinates the transaction at that epoch. */
  isCurrent(): boolean
}

/** How sending ended: every marker written (or its partition gone), fenced, or given up. */
export type MarkerOutcome = 'written' | 'fenced' | 'abandoned'

type PartitionOutcome = 'done' | 'retry' | 'fenced'

export class TransactionMarkerSender {
  private readonly clients = new Map<number, { address: string; client: BrokerClient }>()
  private readonly backoff: ExponentialBackoff
  /** Backoff sleeps, woken at shutdown so no send() is left hanging. */
  private readonly sleepers = new Map<TimerHandle, () => void>()
  private stopped = false

  constructor(
    private readonly host: MarkerSenderHost,
    private readonly config: MarkerSenderConfig,
  ) {
    this.backoff = new ExponentialBackoff({
      initialMs: config.retryBackoffMs,
      maxMs: config.retryBackoffMaxMs,
    })
  }

  shutdown(): void {
    this.stopped = true
    for (const [timer, wake] of this.sleepers) {
      timer.cancel()
      wake()
    }
    this.sleepers.clear()
    for (const { client } of this.clients.values()) client.close()
    this.clients.clear()
  }

  /** Resolves once every pending partition has its marker, or sending must stop. Never rejects. */
  async send(job: MarkerJob): Promise<MarkerOutcome> {
    for (let attempt = 1; ; attempt++) {
      if (this.stopped || !job.isCurrent()) return 'abandoned'
      const byLeader = this.groupByLeader(job)
      if (byLeader.size === 0 && countPartitions(job.pending.partitions) === 0) return 'written'
      const rounds = await Promise.all(
        [...byLeader].map(([leader, topics]) => this.sendTo(leader, job, topics)),
      )
      if (rounds.includes('fenced')) return 'fenced'
      if (countPartitions(job.pending.partitions) === 0) return 'written'
      await this.sleep(this.backoff.delayMs(attempt))
    }
  }

  /**
   * The pending partitions by leader; partitions whose topic or partition no longer exists
   * are dropped (no marker can be written, nor is one needed).
   */
  private groupByLeader(job: MarkerJob): Map<BrokerId, Map<string, number[]>> {
    const image = this.host.metadataImage()
    const byLeader = new Map<BrokerId, Map<string, number[]>>()
    for (const [topic, partitions] of [...job.pending.partitions]) {
      const topicImage = image.topics.get(topic)
      for (const partition of [...partitions]) {
        const state = topicImage?.partitions[partition]
        if (!state) {
          this.host.logger.info(
            { transactionalId: job.transactionalId, topic, partition },
            'partition gone: no transaction marker needed',
          )
          job.pending.removePartition(topic, partition)
          continue
        }
        if (state.leader < 0 || !image.brokers.has(state.leader)) continue
        const topics = byLeader.get(state.leader) ?? new Map<string, number[]>()
        topics.set(topic, [...(topics.get(topic) ?? []), partition])
        byLeader.set(state.leader, topics)
      }
    }
    return byLeader
  }

  private async sendTo(
    leader: BrokerId,
    job: MarkerJob,
    topics: Map<string, number[]>,
  ): Promise<PartitionOutcome> {
    const request = {
      markers: [
        {
          producerId: job.producerId,
          producerEpoch: job.producerEpoch,
          transactionResult: job.result === 'commit',
          coordinatorEpoch: job.coordinatorEpoch,
          topics: [...topics].map(([name, partitionIndexes]) => ({ name, partitionIndexes })),
        },
      ],
    }
    let response: WriteTxnMarkersResponse
    try {
      response = await this.request(leader, request)
    } catch (error) {
      this.host.logger.info(
        { err: error, leader, transactionalId: job.transactionalId },
        'WriteTxnMarkers failed; retrying',
      )
      return 'retry'
    }
    let outcome: PartitionOutcome = 'done'
    for (const marker of response.markers) {
      if (marker.producerId !== job.producerId) continue
      for (const topic of marker.topics)
        for (const p of topic.partitions) {
          const result = this.onPartitionResult(job, topic.name, p.partitionIndex, p.errorCode)
          if (result === 'fenced') outcome = 'fenced'
          else if (result === 'retry' && outcome === 'done') outcome = 'retry'
        }
    }
    return outcome
  }

  /** Kafka's TransactionMarkerRequestCompletionHandler, per partition. */
  private onPartitionResult(
    job: MarkerJob,
    topic: string,
    partition: number,
    errorCode: number,
  ): PartitionOutcome {
    switch (errorCode) {
      case ErrorCode.NONE:
        job.pending.removePartition(topic, partition)
        return 'done'
      case ErrorCode.INVALID_PRODUCER_EPOCH:
      case ErrorCode.TRANSACTION_COORDINATOR_FENCED:
        this.host.logger.info(
          { transactionalId: job.transactionalId, topic, partition, errorCode },
          'transaction markers fenced by a newer producer epoch or coordinator; sending stops',
        )
        return 'fenced'
      case ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT:
      case ErrorCode.UNSUPPORTED_VERSION:
        this.host.logger.warn(
          { transactionalId: job.transactionalId, topic, partition, errorCode },
          'partition cannot take a transaction marker; skipped',
        )
        job.pending.removePartition(topic, partition)
        return 'done'
      case ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
      case ErrorCode.NOT_LEADER_OR_FOLLOWER:
      case ErrorCode.NOT_ENOUGH_REPLICAS:
      case ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
      case ErrorCode.REQUEST_TIMED_OUT:
      case ErrorCode.KAFKA_STORAGE_ERROR:
        return 'retry'
      default:
        // A leader refusing a marker for any other reason is a bug on one side; retrying keeps the
        // transaction open (visible, and timed out by nobody) rather than losing its marker.
        this.host.logger.error(
          { transactionalId: job.transactionalId, topic, partition, errorCode },
          'unexpected WriteTxnMarkers error; retrying',
        )
        return 'retry'
    }
  }

  private request(leader: BrokerId, body: unknown): Promise<WriteTxnMarkersResponse> {
    const client = this.clientFor(leader)
    return new Promise<WriteTxnMarkersResponse>((resolve, reject) => {
      const timer = this.host.clock.setTimeout(() => {
        // The connection may be stuck: drop it, the next request dials again.
        this.dropClient(leader, client)
        reject(new Error(`WriteTxnMarkers to broker ${leader} timed out`))
      }, this.config.requestTimeoutMs)
      client.request<WriteTxnMarkersResponse>(ApiKey.WriteTxnMarkers, WRITE_TXN_MARKERS_VERSION, body).then(
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

  private clientFor(nodeId: BrokerId): BrokerClient {
    const broker = this.host.brokerAddress(nodeId)
    const address = broker ? `${broker.host}:${broker.port}` : ''
    const known = this.clients.get(nodeId)
    if (known && known.address === address) return known.client
    known?.client.close()
    const client = new BrokerClient(broker?.host ?? '', broker?.port ?? -1, CLIENT_ID, this.host.transport)
    this.clients.set(nodeId, { address, client })
    return client
  }

  private dropClient(nodeId: BrokerId, client: BrokerClient): void {
    if (this.clients.get(nodeId)?.client === client) this.clients.delete(nodeId)
    client.close()
  }

  private sleep(delayMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = this.host.clock.setTimeout(() => {
        this.sleepers.delete(timer)
        resolve()
      }, delayMs)
      this.sleepers.set(timer, resolve)
    })
  }
}

function countPartitions(partitions: ReadonlyMap<string, ReadonlySet<number>>): number {
  let count = 0
  for (const ids of partitions.values()) count += ids.size
  return count
}
