/**
 * The run's clients: the acks=all/acks=1 producer that writes straight to the leader's
 * replica manager (and, with `acksZero`, tidelog's Producer with acks=0 over the simulated
 * network), and, by option, tidelog's consumers and idempotent producer (consumer.ts,
 * idempotent-producer.ts), the transactional producers (tidelog's Producer with a
 * transactional id) with their read_committed consumers and offset readers, and group
 * members with churn. Apart from
 * world.ts so what the run does reads apart from how it is driven; each client keeps the
 * random stream it had, so a seed's choices stay as they were.
 */

import { Producer } from '../client/producer.js'
import { NO_LEADER } from '../metadata/cluster-image.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { encodeRecordBatchSync } from '../protocol/record-batch.js'
import { READ_COMMITTED_CONSUMER, SimConsumer } from './consumer.js'
import { GroupWorkload, OffsetVerifier, SimGroupMember } from './group-member.js'
import { SimIdempotentProducer } from './idempotent-producer.js'
import { SimRandom } from './random.js'
import { ShareWorkload } from './share-workload.js'
import type { SimBroker } from './sim-broker.js'
import { SimTxnProducer, TxnOffsetReader, TxnWorkload } from './txn-producer.js'
import { PRODUCE_TIMEOUT_MS, simClientOptions, type WorldInternals } from './world-internals.js'
import { TOPIC } from './world-view.js'

export const TXN_PRODUCERS = 2
const GROUP_MEMBERS = 3
/** The acks=0 producer's network id (clients are never cut off). */
const ACKS_ZERO_NODE = 200

export class Workload {
  /** False once the liveness phase begins: the producers stop. */
  producing = true
  private nextValue = 0
  readonly consumers: SimConsumer[] = []
  /** `idempotentProducers`: tidelog's own producer (idempotent-producer.ts). */
  idempotentProducer: SimIdempotentProducer | null = null
  /** `transactions`: the producers, their shared counters, the read_committed consumers. */
  readonly txnProducers: SimTxnProducer[] = []
  readonly txnWorkload = new TxnWorkload()
  readonly readCommittedConsumers: SimConsumer[] = []
  readonly txnOffsetReaders: TxnOffsetReader[] = []
  /** `groups`: what the members share, the members and the offset verifier. */
  groupWorkload: GroupWorkload | null = null
  readonly groupMembers: SimGroupMember[] = []
  offsetVerifier: OffsetVerifier | null = null
  /** `share`: the share group's producer and members (share-workload.ts). */
  share: ShareWorkload | null = null
  private readonly acksZeroRandom: SimRandom
  /** `acksZero`: tidelog's Producer with acks=0, made at the first such write. */
  private acksZeroProducer: Producer | null = null
  readonly acksZeroValues: string[] = []

  /** `random`: the plain producer's stream, forked from the world's in its order. */
  constructor(
    private readonly world: WorldInternals,
    private readonly random: SimRandom,
  ) {
    this.acksZeroRandom = new SimRandom(world.options.seed ^ 0xa0)
  }

  /** Starts every client the options ask for, in the order their streams were always drawn. */
  start(): void {
    const next = (): void => {
      if (!this.producing) return
      this.produceOne()
      this.world.scheduler.schedule(this.random.int(5, 60), next)
    }
    this.world.scheduler.schedule(10, next)
    const options = this.world.options
    if (options.consumers === true) this.startConsumers()
    if (options.idempotentProducers === true) this.startIdempotentProducers()
    if (options.transactions === true) this.startTransactions()
    if (options.groups === true) this.startGroup()
    if (options.share === true) {
      this.share = new ShareWorkload(this.world)
      this.share.start()
    }
  }

  stop(): void {
    this.producing = false
    // It stops sending; what it holds is still delivered (the liveness phase waits for it).
    this.idempotentProducer?.close()
    this.acksZeroProducer?.close().catch((error: unknown) => this.world.clientFailure(error))
    for (const producer of this.txnProducers) producer.stopStarting()
    this.share?.stop()
  }

  private startConsumers(): void {
    // Their own random stream: the other choices of a seed stay as they were (the network's
    // delays are drawn for their traffic too, so the traces differ all the same).
    const random = new SimRandom(this.world.options.seed ^ 0xc0de)
    for (let partition = 0; partition < this.world.partitionCount; partition++) {
      const consumer = new SimConsumer(this.world, partition, random.fork())
      this.consumers.push(consumer)
      consumer.start()
    }
  }

  private startIdempotentProducers(): void {
    // Its own stream: the other workload keeps its choices.
    const random = new SimRandom(this.world.options.seed ^ 0x1de4)
    this.idempotentProducer = new SimIdempotentProducer(
      this.world,
      () => this.producing,
      random,
      (leader, partition) => this.epochLed(leader, partition),
    )
    this.idempotentProducer.start()
  }

  private startTransactions(): void {
    const world = this.world
    // Their own random streams: the other choices of a seed stay as they were.
    const producerRandom = new SimRandom(world.options.seed ^ 0x7a11)
    for (let i = 0; i < TXN_PRODUCERS; i++) {
      const producer = new SimTxnProducer(
        world,
        i,
        producerRandom.fork(),
        world.invariants.txn!.book,
        this.txnWorkload,
      )
      this.txnProducers.push(producer)
      producer.start()
    }
    const readerRandom = new SimRandom(world.options.seed ^ 0x7a0f)
    for (let i = 0; i < TXN_PRODUCERS; i++) {
      const reader = new TxnOffsetReader(world, i, readerRandom.fork(), this.txnWorkload, (offset) =>
        world.checkInCallback(() => world.invariants.txn?.onTxnOffsetsFetched(i, offset)),
      )
      this.txnOffsetReaders.push(reader)
      reader.start()
    }
    const consumerRandom = new SimRandom(world.options.seed ^ 0x7c0)
    for (let partition = 0; partition < world.partitionCount; partition++) {
      const consumer = new SimConsumer(world, partition, consumerRandom.fork(), READ_COMMITTED_CONSUMER)
      this.readCommittedConsumers.push(consumer)
      consumer.start()
    }
  }

  private startGroup(): void {
    const world = this.world
    const random = new SimRandom(world.options.seed ^ 0x6709)
    const workload = new GroupWorkload()
    this.groupWorkload = workload
    const active: SimGroupMember[] = []
    const startMember = (): void => {
      const member = new SimGroupMember(world, this.groupMembers.length, random.fork(), workload)
      this.groupMembers.push(member)
      active.push(member)
      member.start()
    }
    for (let i = 0; i < GROUP_MEMBERS; i++) startMember()
    // Churn: every 2-6 s a member dies (it stops, unannounced: its session expires) and a new
    // one joins, so that generations change while the coordinator fails over.
    const churn = (): void => {
      if (!this.producing) return
      const victim = active.splice(random.int(0, active.length - 1), 1)[0]
      victim.stop()
      world.log(`group member ${victim.index} dies; member ${this.groupMembers.length} starts`)
      startMember()
      world.scheduler.schedule(random.int(2000, 6000), churn)
    }
    world.scheduler.schedule(random.int(2000, 6000), churn)
    this.offsetVerifier = new OffsetVerifier(world, random.fork(), workload)
    this.offsetVerifier.start()
  }

  private produceOne(): void {
    const r = this.random
    const partition = r.int(0, this.world.partitionCount - 1)
    const acks = r.chance(0.8) ? -1 : 1
    const value = `v${this.nextValue++}`
    const count = r.int(1, 3)
    const batch = encodeRecordBatchSync({
      records: Array.from({ length: count }, (_, i) => ({ value: Buffer.from(`${value}.${i}`) })),
      defaultTimestamp: this.world.scheduler.nowMs(),
    })
    // The producer's metadata: what a live broker tells it (may be stale).
    const live = this.world.brokerIds.filter(
      (id) => this.world.brokers.get(id)?.started && this.world.brokers.get(id)?.isAlive,
    )
    if (live.length === 0) return
    const informant = this.world.brokers.get(r.pick(live))!
    const leaderId = informant.metadata.image().topics.get(TOPIC)?.partitions[partition]?.leader ?? NO_LEADER
    const leader = this.world.brokers.get(leaderId)
    if (!leader) return
    this.world.stats.produced++
    if (acks === 1 && this.world.options.acksZero === true && this.acksZeroRandom.chance(0.5)) {
      this.produceAcksZero(partition, count, value)
      return
    }
    const incarnation = leader.incarnation
    this.world.scheduler.schedule(r.int(1, 5), () => {
      if (!leader.isAlive || leader.incarnation !== incarnation || !leader.broker) return
      leader.replicaManager
        .appendToLeader({
          topic: TOPIC,
          partition,
          records: batch,
          requiredAcks: acks,
          timeoutMs: PRODUCE_TIMEOUT_MS,
        })
        .then(
          (result) => {
            const leaderEpoch = this.epochLed(leader, partition)
            // The answer travels back; a crash meanwhile loses it.
            this.world.scheduler.schedule(r.int(1, 5), () => {
              if (!leader.isAlive) return
              if (result.errorCode !== ErrorCode.NONE) return
              if (acks === -1) this.world.stats.ackedAll++
              else this.world.stats.ackedOne++
              this.world.invariants.onAcked({
                partition,
                baseOffset: result.baseOffset,
                values: Array.from({ length: count }, (_, i) => `${value}.${i}`),
                acks,
                leaderId,
                leaderEpoch,
              })
              this.world.log(
                `ack ${value} p${partition} @${result.baseOffset} acks=${acks} from broker ${leaderId}`,
              )
            })
          },
          () => undefined,
        )
    })
  }

  /** The leader epoch in which `leader` leads `partition` as its append is answered (-1: not leading). */
  epochLed(leader: SimBroker, partition: number): number {
    const local = leader.broker ? leader.replicaManager.getPartition(TOPIC, partition) : undefined
    return local?.isLeader === true ? local.leaderEpoch : -1
  }

  /**
   * acks=0 writes over the simulated network through the real Produce handler: tidelog's
   * Producer, which finds the leader itself; each send completes once its bytes are written.
   */
  private produceAcksZero(partition: number, count: number, value: string): void {
    // Its own stream: the acks=0 draws of the workload stay as they were.
    this.acksZeroProducer ??= new Producer({
      ...simClientOptions(this.world, ACKS_ZERO_NODE, new SimRandom(this.world.options.seed ^ 0xa1)),
      clientId: 'sim-acks0-producer',
      acks: 0,
      lingerMs: 0,
      requestTimeoutMs: PRODUCE_TIMEOUT_MS,
    })
    this.acksZeroValues.push(value)
    // No claim on them (acks=0): the end of the run counts the ones that were committed.
    for (let i = 0; i < count; i++)
      this.acksZeroProducer.produce({ topic: TOPIC, partition, value: `${value}.${i}` }, () => undefined)
  }
}
