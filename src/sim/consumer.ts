/**
 * A simulated consumer (`consumers`): one per partition, speaking the Kafka wire protocol
 * over the simulated network to the real Fetch handler, as a Java consumer with
 * isolation.level=read_uncommitted does: replicaId -1, the leader and its leader epoch from
 * a random live broker's (possibly stale) metadata, `currentLeaderEpoch` sent (KIP-320).
 * NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, OFFSET_OUT_OF_RANGE
 * (a stale leader with a shorter log) and connection errors refresh the metadata and retry
 * at the same position after a backoff; the position never resets (nothing it consumed can
 * have gone: it was below a high watermark).
 *
 * What it receives is checked by `Invariants.onConsumed`: whole batches only, contiguous
 * from its position, each equal (bytes) to the batch committed at that offset.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import { defaultFetchRequest } from '../protocol/generated/fetch-request.js'
import { ApiKey, type FetchResponse } from '../protocol/generated/index.js'
import { ZERO_UUID } from '../protocol/primitives.js'
import { decodeRecordBatchSync, splitBatches } from '../protocol/record-batch.js'
import { BrokerClient } from '../replication/broker-client.js'
import { MUTATED_CONSUMER_REPLICA_ID } from './mutations.js'
import { SimNetwork } from './network.js'
import type { SimRandom } from './random.js'
import { TOPIC, type WorldView } from './world-view.js'

const FETCH_VERSION = 11
const FETCH_WAIT_MS = 200
const REQUEST_TIMEOUT_MS = 1500
/** Consumers' network ids: clients are never cut off (faults impair brokers). */
export const CONSUMER_NODE_BASE = 100

/** Bytes of a fetch response's records field: one buffer, or chunks as the handler built them. */
export function recordsBytes(records: unknown): Buffer {
  if (records === null || records === undefined) return Buffer.alloc(0)
  if (Buffer.isBuffer(records)) return records
  if (Array.isArray(records)) return Buffer.concat(records as Buffer[])
  return Buffer.alloc(0)
}

/** Whole batches of a records blob: [base offset, last offset, bytes]. */
export function wholeBatches(records: Buffer): { base: number; last: number; bytes: Buffer }[] {
  const split = splitBatches(records)
  const out: { base: number; last: number; bytes: Buffer }[] = []
  for (const span of split.batches) {
    const bytes = records.subarray(span.at, span.at + span.sizeInBytes)
    const header = decodeRecordBatchSync(bytes)
    const base = Number(header.baseOffset)
    out.push({ base, last: base + header.lastOffsetDelta, bytes })
  }
  return out
}

export class SimConsumer {
  /** Next offset to consume. */
  position = 0
  fetches = 0
  errors = 0
  /** Error code → how many answers carried it (the run's final line). */
  readonly errorCodes = new Map<number, number>()
  private client: BrokerClient | null = null
  private clientOf = -1
  private stopped = false
  private readonly transport

  constructor(
    private readonly world: WorldView,
    readonly partition: number,
    private readonly random: SimRandom,
  ) {
    this.transport = world.network.transportFor(CONSUMER_NODE_BASE + partition, () => !this.stopped)
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
    const informant = this.world.brokers.get(this.random.pick(live))!
    const state = informant.metadata.image().topics.get(TOPIC)?.partitions[this.partition]
    if (!state || state.leader === -1) {
      this.later(this.random.int(50, 150))
      return
    }
    const leaderId = state.leader
    const epoch = state.leaderEpoch
    if (this.client === null || this.clientOf !== leaderId) {
      this.client?.close()
      this.client = new BrokerClient(
        SimNetwork.hostOf(leaderId),
        9092,
        `sim-consumer-${this.partition}`,
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
        replicaId:
          this.world.options.mutation === 'consumer-reads-log-end' ? MUTATED_CONSUMER_REPLICA_ID : -1,
        maxWaitMs: FETCH_WAIT_MS,
        minBytes: 1,
        maxBytes: 64 * 1024,
        isolationLevel: 0,
        sessionId: 0,
        sessionEpoch: -1,
        topics: [
          {
            topic: TOPIC,
            topicId: ZERO_UUID,
            partitions: [
              {
                partition: this.partition,
                currentLeaderEpoch: epoch,
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
    this.world.log(`consumer p${this.partition}: ${why}; retrying at ${this.position}`)
    this.later(this.random.int(50, 200))
  }

  private onResponse(response: FetchResponse, leaderId: number, fetchOffset: number): void {
    const data = response.responses
      .find((t) => t.topic === TOPIC)
      ?.partitions.find((p) => p.partitionIndex === this.partition)
    const code = data?.errorCode ?? response.errorCode
    if (!data || code !== ErrorCode.NONE) {
      this.errors++
      this.errorCodes.set(code, (this.errorCodes.get(code) ?? 0) + 1)
      if (code !== ErrorCode.NOT_LEADER_OR_FOLLOWER && code !== ErrorCode.FENCED_LEADER_EPOCH)
        this.world.log(`consumer p${this.partition}: error ${code} from broker ${leaderId} at ${fetchOffset}`)
      this.later(this.random.int(50, 150))
      return
    }
    if (fetchOffset !== this.position) {
      this.later(0)
      return
    }
    const batches = wholeBatches(recordsBytes(data.records))
    for (const batch of batches) {
      this.world.onConsumed(this.partition, this.position, batch, leaderId)
      this.position = batch.last + 1
    }
    this.later(batches.length > 0 ? 0 : this.random.int(0, 20))
  }
}
