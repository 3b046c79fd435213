/**
 * The idempotent producer (`idempotentProducers`): tidelog's own `Producer` (acks=all,
 * enable.idempotence, up to five requests in flight per broker), over the simulated network
 * (`SimNetwork.clientConnector`) with the scheduler as its clock and a fork of the seed as
 * its random. It finds leaders, retries, bumps epochs and takes its producer id from
 * InitProducerId as it does against real brokers; the run sends 1-3 records to each
 * partition every 20-80 ms (about as many batches as the hand-written producer it replaced
 * sent). Each acknowledged record joins the acks=all survival check, at the offset the
 * callback gave.
 *
 * Which broker acknowledged a record is not the client's to say: the world's tap on the
 * brokers' Produce answers (`onProduceRequest`) notes it (the HW-vs-ISR check needs the
 * leadership), and writes the trace line of a batch sent again to another broker.
 */
import { Producer } from '../client/producer.js'
import {
  BASE_SEQUENCE_OFFSET,
  LAST_OFFSET_DELTA_OFFSET,
  PRODUCER_EPOCH_OFFSET,
  PRODUCER_ID_OFFSET,
  RECORD_BATCH_OVERHEAD,
} from '../protocol/batch-header.js'
import { ErrorCode } from '../protocol/error-codes.js'
import type { ProduceRequest, ProduceResponse } from '../protocol/generated/index.js'
import type { RequestTap } from '../server/connection.js'
import { recordsBytes } from './invariants-consumer.js'
import type { SimRandom } from './random.js'
import type { SimBroker } from './sim-broker.js'
import { PRODUCE_TIMEOUT_MS, simClientOptions, type WorldInternals } from './world-internals.js'
import { TOPIC } from './world-view.js'

/** The producer's network id (clients are never cut off). */
export const IDEMPOTENT_PRODUCER_NODE = 600
/** Long enough for a failover under the fault model; a record past it fails (counted, not a violation). */
const DELIVERY_TIMEOUT_MS = 30_000

/** A broker's successful answer to one of the producer's batches. */
interface Answer {
  readonly brokerId: number
  /** The leader epoch the broker led in as it answered (-1: it no longer led). */
  readonly leaderEpoch: number
}

export class SimIdempotentProducer {
  private readonly producer: Producer
  /** Per partition: the next record's number (its value is `i<partition>.<number>`). */
  private readonly nextNumber: number[]
  /** `partition:offset` → the broker answer that gave that offset (the latest, for a retried batch). */
  private readonly answers = new Map<string, Answer>()
  /** `partition/producerId/epoch/sequence` → the broker the batch first went to. */
  private readonly firstSentTo = new Map<string, number>()
  sent = 0
  acked = 0
  failed = 0
  readonly failures = new Map<string, number>()

  constructor(
    private readonly world: WorldInternals,
    private readonly producing: () => boolean,
    private readonly random: SimRandom,
    /** The leader epoch in which `leader` leads `partition` now (-1: not leading). */
    private readonly epochLed: (leader: SimBroker, partition: number) => number,
  ) {
    this.nextNumber = Array.from({ length: world.partitionCount }, () => 0)
    this.producer = new Producer({
      ...simClientOptions(world, IDEMPOTENT_PRODUCER_NODE, random.fork()),
      clientId: 'sim-idempotent-producer',
      acks: 'all',
      enableIdempotence: true,
      lingerMs: 5,
      requestTimeoutMs: PRODUCE_TIMEOUT_MS,
      deliveryTimeoutMs: DELIVERY_TIMEOUT_MS,
      metadataMaxAgeMs: 5000,
    })
  }

  start(): void {
    for (let partition = 0; partition < this.world.partitionCount; partition++) {
      const next = (): void => {
        if (!this.producing()) return
        this.sendSome(partition)
        this.world.scheduler.schedule(this.random.int(20, 80), next)
      }
      this.world.scheduler.schedule(this.random.int(10, 50), next)
    }
  }

  /** Records sent whose callback has not run yet. */
  get pending(): number {
    return this.sent - this.acked - this.failed
  }

  /** A short account for the run's trace. */
  summary(): string {
    const m = this.producer.metrics()
    const failures = [...this.failures].map(([why, n]) => `${why}: ${n}`).join(', ')
    return `idempotent producer: ${this.sent} records sent, ${this.acked} acknowledged, ${this.failed} failed${failures ? ` (${failures})` : ''}; ${m.requests} requests, ${m.retries} batch retries, ${m.producerIdResets} producer id resets`
  }

  close(): void {
    this.producer.close().catch((error: unknown) => this.world.clientFailure(error))
  }

  private sendSome(partition: number): void {
    const count = this.random.int(1, 3)
    for (let i = 0; i < count; i++) {
      const value = `i${partition}.${this.nextNumber[partition]++}`
      this.sent++
      this.world.stats.produced++
      this.producer.produce({ topic: TOPIC, partition, value }, (error, metadata) => {
        if (error || !metadata) {
          this.failed++
          const why = error?.name ?? 'no metadata'
          this.failures.set(why, (this.failures.get(why) ?? 0) + 1)
          this.world.log(`idempotent ${value} p${partition} failed: ${error?.message}`)
          return
        }
        this.onAcked(value, partition, metadata.offset)
      })
    }
  }

  private onAcked(value: string, partition: number, offset: number): void {
    this.acked++
    const answer = this.answers.get(`${partition}:${offset}`)
    this.answers.delete(`${partition}:${offset}`)
    if (!answer) {
      this.world.clientFailure(
        new Error(`idempotent ${value} acknowledged at p${partition} @${offset}, but no broker answered so`),
      )
      return
    }
    this.world.stats.ackedAll++
    this.world.invariants.onAcked({
      partition,
      baseOffset: offset,
      values: [value],
      acks: -1,
      leaderId: answer.brokerId,
      leaderEpoch: answer.leaderEpoch,
    })
    this.world.log(`ack ${value} p${partition} @${offset} idempotent from broker ${answer.brokerId}`)
  }

  /**
   * The tap on `broker`'s Produce requests from this producer (acks=all, no transactional
   * id): a batch already sent to another broker goes in the trace, and each successful
   * answer is noted for the records it covers.
   */
  onProduceRequest(broker: SimBroker, request: ProduceRequest): ReturnType<RequestTap> {
    if (request.transactionalId !== null || request.acks !== -1) return undefined
    // v13+ names topics by id only.
    const topicId = broker.metadata.image().topics.get(TOPIC)?.topicId
    const isSimTopic = (t: { name: string; topicId: string }): boolean =>
      t.name === TOPIC || (t.name === '' && t.topicId === topicId)
    const sent = new Map<number, { count: number; key: string; what: string }>()
    for (const topic of request.topicData) {
      if (!isSimTopic(topic)) continue
      for (const p of topic.partitionData) {
        const batch = recordsBytes(p.records)
        if (batch.length < RECORD_BATCH_OVERHEAD) continue
        const producerId = batch.readBigInt64BE(PRODUCER_ID_OFFSET)
        const epoch = batch.readInt16BE(PRODUCER_EPOCH_OFFSET)
        const sequence = batch.readInt32BE(BASE_SEQUENCE_OFFSET)
        const key = `${p.index}/${producerId}/${epoch}/${sequence}`
        const what = `idempotent batch p${p.index} producer ${producerId} epoch ${epoch} sequence ${sequence}`
        sent.set(p.index, { count: batch.readInt32BE(LAST_OFFSET_DELTA_OFFSET) + 1, key, what })
        const first = this.firstSentTo.get(key)
        if (first === undefined) this.firstSentTo.set(key, broker.nodeId)
        else if (first !== broker.nodeId)
          this.world.log(`${what} sent again, to broker ${broker.nodeId} (first to broker ${first})`)
      }
    }
    if (sent.size === 0) return undefined
    return (outcome) => {
      if (!('response' in outcome) || outcome.response === null) return
      for (const topic of (outcome.response as ProduceResponse).responses) {
        if (!isSimTopic(topic)) continue
        for (const p of topic.partitionResponses) {
          const batch = sent.get(p.index)
          if (!batch || p.errorCode !== ErrorCode.NONE) continue
          const answer = { brokerId: broker.nodeId, leaderEpoch: this.epochLed(broker, p.index) }
          const base = Number(p.baseOffset)
          for (let i = 0; i < batch.count; i++) this.answers.set(`${p.index}:${base + i}`, answer)
          if (this.firstSentTo.get(batch.key) !== broker.nodeId)
            this.world.log(`${batch.what} acknowledged by broker ${broker.nodeId} at offset ${base}`)
        }
      }
    }
  }
}
