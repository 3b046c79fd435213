/**
 * A simulated read_committed consumer (`transactions`): one per partition, Fetch v11 with
 * isolation_level 1 over the simulated network to the leader a random live broker names,
 * as the Java consumer with isolation.level=read_committed: the broker answers up to the
 * last stable offset with the aborted transactions of the range, and the client drops
 * control batches and the batches of aborted transactions (`filterReadCommitted`).
 * Errors and lost answers: refresh, back off, retry at the same position (as consumer.ts).
 *
 * The raw batches go through the same checks as a read_uncommitted consumer's (whole,
 * contiguous from the position, equal to the batch committed at their offset); the records
 * it returns go to `TxnInvariants.onDelivered`.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import { defaultFetchRequest } from '../protocol/generated/fetch-request.js'
import { ApiKey, type FetchResponse } from '../protocol/generated/index.js'
import { ZERO_UUID } from '../protocol/primitives.js'
import { decodeRecordBatchSync } from '../protocol/record-batch.js'
import { BrokerClient } from '../replication/broker-client.js'
import { recordsBytes, wholeBatches } from './invariants-consumer.js'
import { SimNetwork } from './network.js'
import type { SimRandom } from './random.js'
import { filterReadCommitted } from './txn-checker.js'
import { TOPIC, type WorldView } from './world-view.js'

const FETCH_VERSION = 11
const FETCH_WAIT_MS = 200
const REQUEST_TIMEOUT_MS = 1500
/** read_committed consumers' network ids (clients are never cut off). */
export const TXN_CONSUMER_NODE_BASE = 500

export class SimReadCommittedConsumer {
  /** Next offset to fetch. */
  position = 0
  fetches = 0
  errors = 0
  /** Records returned, and records of aborted transactions dropped. */
  returned = 0
  dropped = 0
  private client: BrokerClient | null = null
  private clientOf = -1
  private stopped = false
  private readonly transport

  constructor(
    private readonly world: WorldView,
    readonly partition: number,
    private readonly random: SimRandom,
  ) {
    this.transport = world.network.transportFor(TXN_CONSUMER_NODE_BASE + partition, () => !this.stopped)
  }

  start(): void {
    this.world.scheduler.schedule(this.random.int(10, 100), () => this.poll())
  }

  stop(): void {
    this.stopped = true
    this.client?.close()
  }

  private later(ms: number): void {
    if (!this.stopped) this.world.scheduler.schedule(ms, () => this.poll())
  }

  private poll(): void {
    if (this.stopped) return
    const live = this.world.brokerIds.filter((id) => {
      const b = this.world.brokers.get(id)
      return b?.isAlive === true && b.started
    })
    if (live.length === 0) {
      this.later(100)
      return
    }
    const state = this.world.brokers.get(this.random.pick(live))!.metadata.image().topics.get(TOPIC)
      ?.partitions[this.partition]
    if (!state || state.leader === -1) {
      this.later(this.random.int(50, 150))
      return
    }
    const leaderId = state.leader
    if (this.client === null || this.clientOf !== leaderId) {
      this.client?.close()
      this.client = new BrokerClient(
        SimNetwork.hostOf(leaderId),
        9092,
        `sim-rc-consumer-${this.partition}`,
        this.transport,
      )
      this.clientOf = leaderId
    }
    const client = this.client
    const fetchOffset = this.position
    this.fetches++
    let answered = false
    const timer = this.world.scheduler.schedule(REQUEST_TIMEOUT_MS + FETCH_WAIT_MS, () => {
      if (answered || this.stopped) return
      answered = true
      this.fail(client, `no answer from broker ${leaderId}`)
    })
    client
      .request<FetchResponse>(ApiKey.Fetch, FETCH_VERSION, {
        ...defaultFetchRequest(),
        replicaId: -1,
        maxWaitMs: FETCH_WAIT_MS,
        minBytes: 1,
        maxBytes: 64 * 1024,
        isolationLevel: 1,
        sessionId: 0,
        sessionEpoch: -1,
        topics: [
          {
            topic: TOPIC,
            topicId: ZERO_UUID,
            partitions: [
              {
                partition: this.partition,
                currentLeaderEpoch: state.leaderEpoch,
                fetchOffset: BigInt(fetchOffset),
                lastFetchedEpoch: -1,
                logStartOffset: -1n,
                partitionMaxBytes: 32 * 1024,
                replicaDirectoryId: ZERO_UUID,
              },
            ],
          },
        ],
        forgottenTopicsData: [],
        rackId: '',
      })
      .then(
        (response) => {
          if (answered || this.stopped) return
          answered = true
          timer.cancelled = true
          this.onResponse(response, leaderId, fetchOffset)
        },
        (error: unknown) => {
          if (answered || this.stopped) return
          answered = true
          timer.cancelled = true
          this.fail(client, String(error))
        },
      )
  }

  private fail(client: BrokerClient, why: string): void {
    this.errors++
    client.close()
    if (this.client === client) this.client = null
    this.world.log(`read_committed consumer p${this.partition}: ${why}; retrying at ${this.position}`)
    this.later(this.random.int(50, 200))
  }

  private onResponse(response: FetchResponse, leaderId: number, fetchOffset: number): void {
    const data = response.responses
      .find((t) => t.topic === TOPIC)
      ?.partitions.find((p) => p.partitionIndex === this.partition)
    const code = data?.errorCode ?? response.errorCode
    if (!data || code !== ErrorCode.NONE) {
      this.errors++
      if (code !== ErrorCode.NOT_LEADER_OR_FOLLOWER && code !== ErrorCode.FENCED_LEADER_EPOCH)
        this.world.log(
          `read_committed consumer p${this.partition}: error ${code} from broker ${leaderId} at ${fetchOffset}`,
        )
      this.later(this.random.int(50, 150))
      return
    }
    if (fetchOffset !== this.position) {
      this.later(0)
      return
    }
    const batches = wholeBatches(recordsBytes(data.records))
    let expected = this.position
    for (const batch of batches) {
      this.world.onConsumed(this.partition, expected, batch, leaderId)
      expected = batch.last + 1
    }
    const decoded = batches.map((b) => decodeRecordBatchSync(b.bytes))
    const records = filterReadCommitted(decoded, data.abortedTransactions ?? [])
    const dataRecords = decoded.filter((b) => !b.isControl).reduce((n, b) => n + b.records.length, 0)
    this.returned += records.length
    this.dropped += dataRecords - records.length
    this.world.onTxnDelivered(this.partition, records, leaderId)
    this.position = expected
    this.later(batches.length > 0 ? 0 : this.random.int(0, 20))
  }
}
