/**
 * `share`: a share group (KIP-932) in the simulation, driven by tidelog's own clients over
 * the simulated network (`SimNetwork.clientConnector`, the scheduler as their clock, forks of
 * the seed as their random): an idempotent acks=all Producer writes the topic, so every
 * acknowledged record is known with its offset, and three ShareConsumers of one group in
 * explicit mode consume it. They ACCEPT most records, RELEASE some and REJECT a few; now and
 * then one stalls past its acquisition locks before answering (the locks expire, the records
 * go back with a higher delivery count), or crashes (its connections reset, nothing sent:
 * the broker releases what it held) and a new member takes its place. Faults are the world's
 * (leader crashes, cuts, the group and share coordinators failing over with their
 * partitions). invariants-share.ts holds the checks; `settle` is the end of the run.
 */
import { KafkaClientError } from '../client/errors.js'
import { Producer } from '../client/producer.js'
import { ShareConsumerStateError } from '../client/share/errors.js'
import { type AcknowledgeType, ShareConsumer, type ShareConsumerRecord } from '../client/share-consumer.js'
import { NO_LEADER } from '../metadata/cluster-image.js'
import { sharePartitionManagerOf } from '../server/share/share-services.js'
import { ShareInvariants } from './invariants-share.js'
import { SimRandom } from './random.js'
import type { WorldInternals } from './world-internals.js'
import { TOPIC } from './world-view.js'

export const SHARE_GROUP = 'sim-share'
/** group.share.delivery.count.limit of the run: low, so records reach it. */
export const SHARE_DELIVERY_COUNT_LIMIT = 3
/** group.share.record.lock.duration.ms of the run (the broker's minimum is 1000). */
export const SHARE_LOCK_MS = 2000
const MEMBERS = 3
/** Network ids of the clients (faults cut brokers, never clients). */
const PRODUCER_NODE = 600
const MEMBER_NODE_BASE = 610
/** After healing, how long the consumers have to finish every acknowledged record. */
const SETTLE_MS_MAX = 60_000

export class ShareWorkload {
  readonly invariants: ShareInvariants
  /** False once the liveness phase begins: no more records, stalls or crashes. */
  private faulty = true
  private producer: Producer | null = null
  private nextValue = 0
  private readonly members: ShareMember[] = []
  private readonly random: SimRandom

  constructor(private readonly world: WorldInternals) {
    // Its own stream: the other choices of a seed stay as they were.
    this.random = new SimRandom(world.options.seed ^ 0x54a2e)
    this.invariants = new ShareInvariants(world, SHARE_DELIVERY_COUNT_LIMIT)
  }

  start(): void {
    this.producer = new Producer({
      ...this.clientOptions(PRODUCER_NODE, () => true),
      acks: 'all',
      enableIdempotence: true,
      lingerMs: 5,
      requestTimeoutMs: 3000,
      deliveryTimeoutMs: 120_000,
    })
    const send = (): void => {
      if (!this.faulty) return
      this.produceOne()
      this.world.scheduler.schedule(this.random.int(20, 80), send)
    }
    this.world.scheduler.schedule(50, send)
    for (let i = 0; i < MEMBERS; i++) this.startMember()
    const churn = (): void => {
      if (!this.faulty) return
      const live = this.members.filter((m) => !m.stopped)
      const victim = live[this.random.int(0, live.length - 1)]
      if (victim) {
        victim.crash()
        this.world.log(`share member ${victim.index} crashes; member ${this.members.length} starts`)
        this.startMember()
      }
      this.world.scheduler.schedule(this.random.int(3000, 8000), churn)
    }
    this.world.scheduler.schedule(this.random.int(3000, 8000), churn)
  }

  /** The liveness phase: the producer stops, members stall and crash no more. */
  stop(): void {
    this.faulty = false
    for (const member of this.members) member.faulty = false
  }

  /**
   * After healing: every acknowledged record ACCEPTed, REJECTed or delivered at the limit
   * within SETTLE_MS_MAX (the producer's last records included).
   */
  async settle(): Promise<void> {
    const start = this.world.scheduler.now
    for (;;) {
      const startOffset = (partition: number): number => this.leaderStartOffset(partition)
      if (this.invariants.unsettled(startOffset).length === 0) break
      if (this.world.scheduler.now - start > SETTLE_MS_MAX) {
        this.invariants.checkNoneLost(startOffset)
        break
      }
      await this.world.runFor(500)
    }
    const s = this.invariants.stats
    this.world.log(
      `share: ${this.invariants.acked.size} records acknowledged to the producer, all settled after ${this.world.scheduler.now - start} ms; ${s.deliveries} deliveries (${s.redeliveries} again), ${s.accepted} accepted, ${s.released} released, ${s.rejected} rejected, ${s.reachedLimit} delivered ${SHARE_DELIVERY_COUNT_LIMIT} times, ${s.deposedRedeliveries} settled ones again by a deposed leader; members ${this.members.length}`,
    )
    for (const member of this.members) member.crash()
    void this.producer?.close().catch(() => undefined)
  }

  /** The group's share-partition start offset on the partition's leader now (-1: none open there). */
  private leaderStartOffset(partition: number): number {
    const leader = this.world.truth?.image().topics.get(TOPIC)?.partitions[partition]?.leader ?? NO_LEADER
    const broker = this.world.brokers.get(leader)
    if (!broker?.isAlive || !broker.broker) return -1
    const open = sharePartitionManagerOf(broker.broker)
      .openSharePartitions()
      .find((s) => s.groupId === SHARE_GROUP && s.tp.topic === TOPIC && s.tp.partition === partition)
    return open?.sharePartition.startOffset ?? -1
  }

  private clientOptions(node: number, isAlive: () => boolean) {
    return {
      bootstrapServers: this.world.brokerIds.map((id) => `broker-${id}:9092`),
      clock: this.world.scheduler,
      random: this.random.fork(),
      connector: this.world.network.clientConnector(node, isAlive),
      clientId: `sim-share-${node}`,
      requestTimeoutMs: 3000,
    }
  }

  private produceOne(): void {
    const producer = this.producer
    if (!producer) return
    const value = `s${this.nextValue++}`
    const partition = this.random.int(0, this.world.partitionCount - 1)
    producer.produce({ topic: TOPIC, partition, value }, (error, metadata) => {
      if (error || !metadata) return
      this.world.checkInCallback(() => this.invariants.onProduced(metadata.partition, metadata.offset, value))
    })
  }

  private startMember(): void {
    const index = this.members.length
    const member = new ShareMember(this.world, this.invariants, index, this.random.fork(), (alive) =>
      this.clientOptions(MEMBER_NODE_BASE + index, alive),
    )
    member.faulty = this.faulty
    this.members.push(member)
    member.start()
  }
}

/** One member of the share group: poll, answer each record, sometimes stall, until it crashes. */
class ShareMember {
  stopped = false
  faulty = true
  private alive = true
  private readonly consumer: ShareConsumer

  constructor(
    private readonly world: WorldInternals,
    private readonly invariants: ShareInvariants,
    readonly index: number,
    private readonly random: SimRandom,
    options: (isAlive: () => boolean) => ReturnType<ShareWorkload['clientOptions']>,
  ) {
    this.consumer = new ShareConsumer({
      ...options(() => this.alive),
      groupId: SHARE_GROUP,
      acknowledgementMode: 'explicit',
      maxPollRecords: 20,
      fetchMaxWaitMs: 200,
    })
  }

  start(): void {
    this.consumer.subscribe([TOPIC])
    this.loop().catch((error: unknown) => this.world.clientFailure(error))
  }

  /**
   * A process crash: its connections reset and it sends nothing more (a dead process neither
   * connects nor hears back); the close only stops its timers.
   */
  crash(): void {
    if (this.stopped) return
    this.stopped = true
    this.alive = false
    this.world.network.unlisten(MEMBER_NODE_BASE + this.index)
    void this.consumer.close().catch(() => undefined)
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let records: ShareConsumerRecord[]
      try {
        records = await this.consumer.poll(500)
      } catch (error) {
        if (this.stopped) return
        // Acknowledgement errors of the last answers (a lock expired, a leader moved) surface here.
        if (!(error instanceof KafkaClientError) || error instanceof ShareConsumerStateError) throw error
        await this.sleep(this.random.int(50, 200))
        continue
      }
      if (this.stopped) return
      for (const record of records)
        this.world.checkInCallback(() =>
          this.invariants.onConsumerRecord(
            record.partition,
            record.offset,
            record.value?.toString() ?? '',
            record.deliveryCount,
          ),
        )
      // A stall past the locks: the records go back to the group, then this member's answers fail.
      if (records.length > 0 && this.faulty && this.random.chance(0.04)) {
        const stallMs = SHARE_LOCK_MS + this.random.int(100, 1500)
        this.world.log(`share member ${this.index} stalls ${stallMs} ms holding ${records.length} record(s)`)
        await this.sleep(stallMs)
      }
      if (this.stopped) return
      for (const record of records) this.consumer.acknowledge(record, this.answer())
      if (this.random.chance(0.3)) await this.consumer.commitSync().catch(() => undefined)
    }
  }

  private answer(): AcknowledgeType {
    const r = this.random.next()
    return r < 0.8 ? 'ACCEPT' : r < 0.95 ? 'RELEASE' : 'REJECT'
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.world.scheduler.schedule(ms, resolve))
  }
}
