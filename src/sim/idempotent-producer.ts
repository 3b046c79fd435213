/**
 * One idempotent producer for one partition (`idempotentProducers`): a batch at a time,
 * acks=all, sent to the leader a random live broker names; retried with the same bytes
 * after an error or when no answer came within the produce timeout (the leader died, or the
 * answer was lost), as the Java producer with max.in.flight 1 and infinite retries.
 * OUT_OF_ORDER_SEQUENCE_NUMBER: a new epoch from sequence 0 (KIP-360). Its acknowledged
 * batches join the acks=all survival check; no batch of it may be committed twice.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import { encodeRecordBatchSync } from '../protocol/record-batch.js'
import { toErrorCode } from '../replication/kafka-error.js'
import type { SimRandom } from './random.js'
import type { SimBroker } from './sim-broker.js'
import { PRODUCE_TIMEOUT_MS, type ProducingWorkload, type WorldInternals } from './world-internals.js'
import { TOPIC } from './world-view.js'

/** One batch as sent, and sent again unchanged on a retry. */
interface InFlight {
  readonly batch: Buffer
  readonly value: string
  readonly count: number
}

/** A leader's answer to one attempt (errorCode -1: the append failed without a Kafka code). */
interface Answer {
  readonly attempt: number
  readonly from: SimBroker
  readonly fromId: number
  readonly errorCode: number
  readonly baseOffset: number
  readonly leaderEpoch: number
}

export class SimIdempotentProducer {
  private readonly producerId: bigint
  private epoch = 0
  private sequence = 0
  /** The latest attempt: an answer or timeout of an older one does nothing. */
  private attempt = 0

  constructor(
    private readonly world: WorldInternals,
    private readonly workload: ProducingWorkload,
    private readonly partition: number,
    private readonly random: SimRandom,
  ) {
    // With transactions, out of the producer id manager's blocks (0, 1000, 2000, ...), which
    // the transactional producers draw from: two producers must not share an id.
    this.producerId = BigInt((world.options.transactions === true ? 1_000_000_000 : 1000) + partition)
  }

  start(): void {
    this.world.scheduler.schedule(this.random.int(10, 50), () => this.nextBatch())
  }

  private nextBatch(): void {
    if (!this.workload.producing) return
    const value = `i${this.partition}.${this.epoch}.${this.sequence}`
    const count = this.random.int(1, 3)
    const batch = encodeRecordBatchSync({
      records: Array.from({ length: count }, (_, i) => ({ value: Buffer.from(`${value}.${i}`) })),
      defaultTimestamp: this.world.scheduler.nowMs(),
      producerId: this.producerId,
      producerEpoch: this.epoch,
      baseSequence: this.sequence,
    })
    this.send({ batch, value, count })
  }

  private retry(sent: InFlight): void {
    this.world.scheduler.schedule(this.random.int(20, 200), () => this.send(sent))
  }

  private send(sent: InFlight): void {
    const world = this.world
    const r = this.random
    if (!this.workload.producing) return
    const mine = ++this.attempt
    const live = world.brokerIds.filter((id) => world.isUp(id))
    const informant = live.length > 0 ? world.brokers.get(r.pick(live)) : undefined
    const leaderId = informant?.metadata.image().topics.get(TOPIC)?.partitions[this.partition]?.leader ?? -1
    const leader = world.brokers.get(leaderId)
    if (!leader) {
      this.retry(sent)
      return
    }
    world.stats.produced++
    const incarnation = leader.incarnation
    // No answer in time: the leader died or the answer was lost; send the same bytes again.
    world.scheduler.schedule(PRODUCE_TIMEOUT_MS + 500, () => {
      if (this.attempt !== mine || !this.workload.producing) return
      world.log(`idempotent ${sent.value} p${this.partition}: no answer from broker ${leaderId}; retrying`)
      this.retry(sent)
    })
    world.scheduler.schedule(r.int(1, 5), () => {
      if (!leader.isAlive || leader.incarnation !== incarnation || !leader.broker) return
      const answer = (errorCode: number, baseOffset: number, leaderEpoch: number): void =>
        this.onAnswer(sent, {
          attempt: mine,
          from: leader,
          fromId: leaderId,
          errorCode,
          baseOffset,
          leaderEpoch,
        })
      leader.replicaManager
        .appendToLeader({
          topic: TOPIC,
          partition: this.partition,
          records: sent.batch,
          requiredAcks: -1,
          timeoutMs: PRODUCE_TIMEOUT_MS,
        })
        .then(
          (result) =>
            answer(result.errorCode, result.baseOffset, this.workload.epochLed(leader, this.partition)),
          (error: unknown) => answer(toErrorCode(error) ?? -1, -1, -1),
        )
    })
  }

  /** The answer travels back to the producer; a crash meanwhile loses it. */
  private onAnswer(sent: InFlight, answer: Answer): void {
    const world = this.world
    const { value, count } = sent
    const partition = this.partition
    world.scheduler.schedule(this.random.int(1, 5), () => {
      if (!answer.from.isAlive || answer.attempt !== this.attempt || !this.workload.producing) return
      this.attempt++ // this attempt is answered: its timeout does nothing
      const { errorCode, fromId } = answer
      if (errorCode === 0) {
        world.stats.ackedAll++
        world.invariants.onAcked(partition, answer.baseOffset, count, value, -1, fromId, answer.leaderEpoch)
        world.log(`ack ${value} p${partition} @${answer.baseOffset} idempotent from broker ${fromId}`)
        this.sequence += count
        world.scheduler.schedule(this.random.int(5, 40), () => this.nextBatch())
      } else if (errorCode === ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER) {
        world.log(
          `idempotent producer of p${partition}: OUT_OF_ORDER_SEQUENCE_NUMBER for ${value}; new epoch`,
        )
        this.epoch++
        this.sequence = 0
        this.nextBatch()
      } else {
        if (errorCode !== ErrorCode.NOT_LEADER_OR_FOLLOWER && errorCode !== ErrorCode.NOT_ENOUGH_REPLICAS)
          world.log(`idempotent ${value} p${partition}: error ${errorCode} from broker ${fromId}; retrying`)
        this.retry(sent)
      }
    })
  }
}
