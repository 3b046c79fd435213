/**
 * The safety properties checked after every event, and the liveness and durability checks
 * at the end of a run. Each violation throws `Violation` with what was seen. This file holds
 * the replicas' checks (epochs, one leader per epoch, high watermark, agreement below it, no
 * duplicate, acknowledged writes survive, convergence) and runs the other families: the
 * store's state (invariants-store.ts), consumers (invariants-consumer.ts), groups
 * (invariants-group.ts) and transactions (txn-checker.ts).
 */
import type { BrokerId, Offset } from '../common/types.js'
import type { PartitionState } from '../metadata/cluster-image.js'
import { decodeRecordBatchSync, iterateBatches } from '../protocol/record-batch.js'
import type { Partition } from '../replication/partition.js'
import { ConsumerInvariants } from './invariants-consumer.js'
import { GroupInvariants } from './invariants-group.js'
import { StoreInvariants } from './invariants-store.js'
import type { SimBroker } from './sim-broker.js'
import { TxnInvariants } from './txn-checker.js'
import { type GroupChecks, type OffsetsBeforeFetch, TOPIC, Violation, type WorldView } from './world-view.js'

export { FAILED_LOG_DIR_LEADERSHIP_MS, UNREGISTERED_LEADERSHIP_MS } from './invariants-store.js'

export interface Acked {
  readonly partition: number
  readonly baseOffset: number
  /** The records' values, from `baseOffset` on. */
  readonly values: readonly string[]
  readonly acks: number
  readonly leaderId: number
  /** The leader epoch the leader answered in (-1: it no longer led as the append returned). */
  readonly leaderEpoch: number
  readonly atMs: number
}

/** What the per-event checks last saw of one replica (one broker incarnation's partition). */
interface ReplicaSeen {
  /** Its log end (a drop goes in the trace); -1 before the first check. */
  logEnd: number
  /** The last leader epoch it applied. */
  leaderEpoch: number
  /** The last partition epoch (ISR version) it applied. */
  partitionEpoch: number
  /** The leader epoch in which it last acted as leader (-1: never), and its HW then. */
  ledEpoch: number
  ledHighWatermark: number
  /** Offsets below this were compared by the agreement check already. */
  checkedUpTo: number
}

export class Invariants implements GroupChecks {
  /** `${partition}:${epoch}` → the broker that acted as leader in it. */
  private readonly leaderOfEpoch = new Map<string, number>()
  /**
   * Per broker incarnation (a SimBroker each) and partition: what the per-event checks last
   * saw of its replica. Objects, not maps of string keys: the checks run for every replica
   * after every event, and with hundreds of partitions the keys were most of their cost.
   */
  private readonly replicasSeen = new WeakMap<SimBroker, Map<number, ReplicaSeen>>()
  /** Per partition: base offset → batch bytes seen below some replica's high watermark. */
  private readonly committed = new Map<number, Map<number, Buffer>>()
  /** Per partition: an idempotent batch's producer id, epoch and base sequence → its base offset. */
  private readonly idempotentAt = new Map<number, Map<string, number>>()
  private readonly acked: Acked[] = []
  /** `${partition}:${leader}:${leader epoch}` → the end of the last acks=all write acknowledged in that leadership. */
  private readonly ackedInLeadership = new Map<string, number>()
  /** The most logs of one broker process that held a cleaner checkpoint at a check. */
  cleanerCheckpoints = 0
  private readonly topicPartitionsOf = new WeakMap<
    SimBroker,
    { readonly hostedCount: number; readonly partitions: readonly Partition[] }
  >()
  /** ISR changes in flight already reported (one trace line each). */
  private readonly reportedInFlight = new WeakSet<object>()
  readonly store: StoreInvariants
  readonly consumer: ConsumerInvariants
  /** `groups`: the group checks (invariants-group.ts); the group clients report here. */
  readonly group: GroupInvariants

  /** `transactions`: the transactions' checks (txn-checker.ts). */
  readonly txn: TxnInvariants | null

  constructor(private readonly world: WorldView) {
    this.txn = world.options.transactions === true ? new TxnInvariants(world) : null
    this.store = new StoreInvariants(world)
    this.consumer = new ConsumerInvariants(world.options.consumers === true)
    this.group = new GroupInvariants(world)
  }

  // GroupChecks, as the group clients see them through WorldView.
  onCommitAcked(partition: number, offset: number, member: number): void {
    this.group.onCommitAcked(partition, offset, member)
  }
  offsetsBeforeFetch(): OffsetsBeforeFetch {
    return this.group.offsetsBeforeFetch()
  }
  onOffsetsFetched(
    from: BrokerId,
    offsetsPartition: number,
    fetched: ReadonlyMap<number, number>,
    before: OffsetsBeforeFetch,
  ): boolean {
    return this.group.onOffsetsFetched(from, offsetsPartition, fetched, before)
  }
  onGroupAssignment(
    generation: number,
    memberId: string,
    index: number,
    partitions: readonly number[],
  ): void {
    this.group.onGroupAssignment(generation, memberId, index, partitions)
  }
  onMemberEpoch(memberId: string, index: number, epoch: number): void {
    this.group.onMemberEpoch(memberId, index, epoch)
  }

  onAcked(ack: Omit<Acked, 'atMs'>): void {
    this.acked.push({ ...ack, atMs: this.world.scheduler.now })
    const { partition, baseOffset, acks, leaderId, leaderEpoch } = ack
    if (acks !== -1 || leaderEpoch < 0) return
    const key = `${partition}:${leaderId}:${leaderEpoch}`
    this.ackedInLeadership.set(
      key,
      Math.max(this.ackedInLeadership.get(key) ?? 0, baseOffset + ack.values.length),
    )
  }

  private live(): SimBroker[] {
    return [...this.world.brokers.values()].filter((b) => b.isAlive && b.broker !== null)
  }

  async check(): Promise<void> {
    const storeChanged = this.store.check()
    const brokers = this.live()
    for (const broker of brokers) this.checkCleanerCheckpoints(broker)
    const truths = this.world.truth?.image().topics.get(TOPIC)?.partitions
    for (const broker of brokers) {
      for (const partition of this.topicPartitions(broker)) {
        const seen = this.replicaSeen(broker, partition.partition)
        this.checkEpochs(broker, partition, seen)
        if (partition.isLeader) {
          if (storeChanged) this.traceIsrChangeInFlight(broker, partition)
          this.checkLeader(broker, partition, brokers, seen, truths)
          this.checkHighWatermarkRaised(broker, partition)
        }
      }
    }
    for (const broker of brokers) {
      for (const partition of this.topicPartitions(broker)) {
        // Awaited only when there is something to read: with hundreds of partitions an
        // await per partition per event was a large share of a run.
        const reading = this.checkAgreement(broker, partition)
        if (reading !== null) await reading
      }
    }
    // After the agreement check: the committed history then reaches every leader's HW.
    if (this.txn)
      for (const broker of brokers)
        for (const partition of this.topicPartitions(broker)) await this.txn.checkPartition(broker, partition)
  }

  /**
   * The topic's partitions `broker` hosts, in its hosting order: a list kept per broker
   * process and rebuilt when the hosted count changed or a kept partition is no longer the
   * hosted one. With thousands of partitions of other topics (`scalePartitions`), filtering
   * every hosted partition after every event was the largest share of the run.
   */
  private topicPartitions(broker: SimBroker): readonly Partition[] {
    const manager = broker.replicaManager
    const kept = this.topicPartitionsOf.get(broker)
    if (
      kept !== undefined &&
      kept.hostedCount === manager.hostedPartitionCount &&
      kept.partitions.every((p) => manager.getPartition(TOPIC, p.partition) === p)
    )
      return kept.partitions
    const partitions: Partition[] = []
    for (const partition of manager.hostedPartitions)
      if (partition.topic === TOPIC) partitions.push(partition)
    this.topicPartitionsOf.set(broker, { hostedCount: manager.hostedPartitionCount, partitions })
    return partitions
  }

  /**
   * No log's cleaner checkpoint (its first dirty offset, persisted as
   * cleaner-offset-checkpoint) is above its log end while nothing runs in the log's queue:
   * a truncation lowers it before it returns (LogManager's onTruncated hook), and a
   * checkpoint read back at start-up above the recovered log end is dropped. Otherwise
   * batches appended after the truncation would count as cleaned and keep a key's older
   * values past its tombstone (the cleaner model test found that with reopens).
   */
  private checkCleanerCheckpoints(broker: SimBroker): void {
    const checkpoints = broker.logManager.cleanerCheckpoints
    this.cleanerCheckpoints = Math.max(this.cleanerCheckpoints, checkpoints.size)
    if (checkpoints.size === 0) return
    for (const log of broker.logManager.allLogs()) {
      const checkpoint = checkpoints.get(log.dir)
      if (checkpoint === undefined || log.hasQueuedWork || checkpoint <= log.logEndOffset) continue
      throw new Violation(
        `broker ${broker.nodeId}.${broker.incarnation} ${log.dir}: cleaner checkpoint ${checkpoint} above the log end ${log.logEndOffset}`,
      )
    }
  }

  /**
   * Trace marker: the store changed, not this partition's state, while its leader had an ISR
   * expansion in flight (seed 33 with store latency: Partition.updateState once dropped it).
   * `pendingIsr` is Partition's private in-flight change, read here only to say it existed.
   */
  private traceIsrChangeInFlight(broker: SimBroker, partition: Partition): void {
    const pending = (partition as unknown as { pendingIsr: { maximal: readonly number[] } | null }).pendingIsr
    const state = this.world.truth?.image().topics.get(TOPIC)?.partitions[partition.partition]
    if (!pending || this.reportedInFlight.has(pending) || pending.maximal.length <= partition.isr.length)
      return
    if (state?.partitionEpoch !== partition.partitionEpoch || state.leaderEpoch !== partition.leaderEpoch)
      return
    this.reportedInFlight.add(pending)
    this.world.log(
      `  (leader ${broker.nodeId} of p${partition.partition}: ISR expansion to ${pending.maximal.join(',')} in flight across an unrelated store change)`,
    )
  }

  private replicaSeen(broker: SimBroker, partition: number): ReplicaSeen {
    let seen = this.replicasSeen.get(broker)
    if (seen === undefined) {
      seen = new Map()
      this.replicasSeen.set(broker, seen)
    }
    let replica = seen.get(partition)
    if (replica === undefined) {
      replica = {
        logEnd: -1,
        leaderEpoch: -1,
        partitionEpoch: -1,
        ledEpoch: -1,
        ledHighWatermark: -1,
        checkedUpTo: 0,
      }
      seen.set(partition, replica)
    }
    return replica
  }

  private checkEpochs(broker: SimBroker, partition: Partition, seen: ReplicaSeen): void {
    const logEnd = partition.log.logEndOffset
    if (seen.logEnd >= 0 && logEnd < seen.logEnd)
      this.world.log(
        `  (log end of p${partition.partition} on broker ${broker.nodeId} dropped ${seen.logEnd} -> ${logEnd})`,
      )
    seen.logEnd = logEnd
    if (partition.leaderEpoch < seen.leaderEpoch)
      throw new Violation(
        `leader epoch went back on broker ${broker.nodeId} for p${partition.partition}: ${seen.leaderEpoch} -> ${partition.leaderEpoch}`,
      )
    seen.leaderEpoch = partition.leaderEpoch
    if (partition.partitionEpoch < seen.partitionEpoch)
      throw new Violation(
        `partition epoch went back on broker ${broker.nodeId} for p${partition.partition}: ${seen.partitionEpoch} -> ${partition.partitionEpoch} (ISR now ${partition.isr.join(',')})`,
      )
    seen.partitionEpoch = partition.partitionEpoch
  }

  private checkLeader(
    broker: SimBroker,
    partition: Partition,
    brokers: readonly SimBroker[],
    seen: ReplicaSeen,
    truths: readonly PartitionState[] | undefined,
  ): void {
    const p = partition.partition
    // Leader epochs of a replica never go back (checkEpochs): in the epoch it already acted
    // as leader in, it is the epoch's recorded leader and its HW is the one kept.
    if (seen.ledEpoch !== partition.leaderEpoch) {
      const epochKey = `${p}:${partition.leaderEpoch}`
      const other = this.leaderOfEpoch.get(epochKey)
      if (other !== undefined && other !== broker.nodeId)
        throw new Violation(
          `two leaders for p${p} in leader epoch ${partition.leaderEpoch}: brokers ${other} and ${broker.nodeId}`,
        )
      this.leaderOfEpoch.set(epochKey, broker.nodeId)
      seen.ledEpoch = partition.leaderEpoch
      seen.ledHighWatermark = -1
    }
    const hw = partition.highWatermark
    if (hw < seen.ledHighWatermark)
      throw new Violation(
        `high watermark of leader ${broker.nodeId} for p${p} went back: ${seen.ledHighWatermark} -> ${hw}`,
      )
    seen.ledHighWatermark = hw
    // The ISR that counts is the store's: a member the leader still lists but the store took
    // out (a restarted broker's registration, a fenced one) cannot be elected, and a member
    // the store added (an expansion the leader has not seen committed yet) can. A leader
    // that lost its leadership without knowing is held to the members both still list.
    const truth = truths?.[p]
    const current =
      truth !== undefined && truth.leader === broker.nodeId && truth.leaderEpoch === partition.leaderEpoch
    const members = truth
      ? [
          ...partition.isr.filter((id) => truth.isr.includes(id)),
          ...(current ? truth.isr.filter((id) => !partition.isr.includes(id)) : []),
        ]
      : partition.isr
    for (const memberId of members) {
      if (memberId === broker.nodeId) continue
      const member = brokers.find((b) => b.nodeId === memberId && b.started)
      const replica = member?.replicaManager.getPartition(TOPIC, p)
      if (!replica) continue
      if (replica.log.logEndOffset < hw)
        throw new Violation(
          `high watermark ${hw} of leader ${broker.nodeId} (epoch ${partition.leaderEpoch}) for p${p} (partition epoch ${partition.partitionEpoch}) exceeds ISR member ${memberId}'s log end ${replica.log.logEndOffset} (ISR ${partition.isr.join(',')}; in the store ${truth ? `${truth.isr.join(',')} at partition epoch ${truth.partitionEpoch}, leader ${truth.leader} epoch ${truth.leaderEpoch}` : 'unknown'})`,
        )
    }
  }

  /**
   * A leader's high watermark is never below what its ISR allows (issue 41: a broker
   * restarted after kill -9 led again in the same epoch with the high watermark of its last
   * checkpoint, and with an ISR of itself alone nothing raised it until the next produce, so
   * acknowledged records stayed invisible). Checked for a broker that acts as leader (it
   * holds a store session) with an ISR of at least min.insync.replicas (below it the HW
   * stays, KIP-966):
   * (b) every acks=all write it acknowledged in leader epochs no other broker has led since
   * (any incarnation of it) and that its log still holds is below its HW while its ISR is
   * itself alone;
   * (a) with no ISR change in flight (its maximal ISR would bound the HW) and every other ISR
   * member's log end known to it (a new leadership or a new incarnation of a follower waits
   * for its first fetch), the HW is the least of its own log end and theirs.
   * `pendingIsr` is Partition's private in-flight change, read here only to skip the check.
   */
  private checkHighWatermarkRaised(broker: SimBroker, partition: Partition): void {
    const log = partition.log
    if (log.isOffline || broker.logManager.offlineLogDirs.length > 0) return
    const minIsr = Math.min(this.world.minInsyncReplicas, partition.replicas.length)
    if (partition.isr.length < minIsr) return
    const p = partition.partition
    const hw = partition.highWatermark
    // The messages and the acknowledged writes are worked out only when needed: this runs
    // for every partition a broker leads after every event.
    const where = () =>
      `leader ${broker.nodeId} (incarnation ${broker.incarnation}, epoch ${partition.leaderEpoch}) of p${p}, ISR ${partition.isr.join(',')}`
    const ackedOf = () => this.ackedInUnbrokenLeadership(p, broker.nodeId, partition.leaderEpoch)
    // A log that lost them (a power-lost broker left the last ISR member by a second
    // impairment, see the README's Open) is the survival and agreement checks' matter.
    const alone = partition.isr.length === 1 && partition.isr[0] === broker.nodeId
    const acked = alone ? ackedOf() : null
    if (acked !== null && alone && hw < acked.end && log.logEndOffset >= acked.end)
      throw new Violation(
        `high watermark ${hw} of ${where()}, below offset ${acked.end} that it acknowledged (acks=all) in epoch ${acked.epoch}, no other broker leading since, for an ISR it still leads alone: acknowledged records invisible (log end ${log.logEndOffset})`,
      )
    const pending = (partition as unknown as { pendingIsr: object | null }).pendingIsr
    if (pending !== null) return
    let allowed = log.logEndOffset as number
    const lag = partition.followerLag()
    for (const id of partition.isr) {
      if (id === broker.nodeId) continue
      const follower = lag.find((f) => f.brokerId === id)
      if (follower === undefined || follower.logEndOffset < 0) return
      allowed = Math.min(allowed, follower.logEndOffset)
    }
    if (hw < allowed) {
      const ends = [`${broker.nodeId} at ${log.logEndOffset}`]
      for (const id of partition.isr)
        if (id !== broker.nodeId) ends.push(`${id} at ${lag.find((f) => f.brokerId === id)?.logEndOffset}`)
      const ackedAny = ackedOf()
      const ackedText =
        ackedAny !== null
          ? `; it acknowledged acks=all writes up to offset ${ackedAny.end} in epoch ${ackedAny.epoch}, no other broker leading since`
          : ''
      throw new Violation(
        `high watermark ${hw} of ${where()}, below ${allowed}, what its ISR allows (log ends ${ends.join(', ')})${ackedText}: records every ISR member holds stay invisible to consumers and ListOffsets`,
      )
    }
  }

  /**
   * The end of the acks=all writes `leaderId` acknowledged for `partition` in leader epochs
   * from which up to `leaderEpoch` no other broker led it (each epoch's leader known, from the
   * store or from the broker acting in it, and `leaderId` or none): any of its incarnations
   * still holds them in its log and an ISR of it alone must show them. Null: none.
   */
  private ackedInUnbrokenLeadership(
    partition: number,
    leaderId: number,
    leaderEpoch: number,
  ): { end: number; epoch: number } | null {
    let found: { end: number; epoch: number } | null = null
    for (let epoch = leaderEpoch; epoch >= 0; epoch--) {
      const key = `${partition}:${epoch}`
      const leader = this.store.leaderOfEpoch(partition, epoch) ?? this.leaderOfEpoch.get(key)
      if (leader === undefined || (leader !== leaderId && leader !== -1)) break
      const end = this.ackedInLeadership.get(`${partition}:${leaderId}:${epoch}`)
      if (end !== undefined && end > (found?.end ?? 0)) found = { end, epoch }
    }
    return found
  }

  /** Batches below this replica's high watermark must equal what any replica ever had there. */
  private checkAgreement(broker: SimBroker, partition: Partition): Promise<void> | null {
    const seen = this.replicaSeen(broker, partition.partition)
    const log = partition.log
    // A log offline after a disk error answers nothing (KAFKA_STORAGE_ERROR); its process
    // restarts from what is in the page cache and is checked again then.
    // (The other logs of its dir are closed: one log dir here, so all of them.)
    if (log.isOffline || broker.logManager.offlineLogDirs.length > 0) return null
    const hw = Math.min(partition.highWatermark, log.logEndOffset)
    const from = Math.max(log.logStartOffset, Math.min(seen.checkedUpTo, log.logEndOffset))
    seen.checkedUpTo = from
    if (from >= hw) return null
    return this.compareCommitted(broker, partition, seen, from, hw)
  }

  /** The agreement check's reading of `partition`'s log from `from` up to `hw`. */
  private async compareCommitted(
    broker: SimBroker,
    partition: Partition,
    seen: ReplicaSeen,
    start: number,
    hw: number,
  ): Promise<void> {
    const log = partition.log
    let from = start
    let committed = this.committed.get(partition.partition)
    if (!committed) {
      committed = new Map()
      this.committed.set(partition.partition, committed)
    }
    while (from < hw) {
      const read = await log.read(from as Offset, {
        maxBytes: 1 << 20,
        maxOffset: hw as Offset,
        minOneMessage: true,
      })
      if (read.sizeInBytes === 0) break
      let next = from
      for (const chunk of read.records) {
        for (const span of iterateBatches(chunk)) {
          const bytes = chunk.subarray(span.at, span.at + span.sizeInBytes)
          const header = decodeRecordBatchSync(bytes)
          const base = Number(header.baseOffset)
          const last = base + header.lastOffsetDelta
          if (last >= hw) break
          const seen = committed.get(base)
          if (seen && !seen.equals(bytes))
            throw new Violation(
              `replicas disagree below the high watermark: p${partition.partition} offset ${base} on broker ${broker.nodeId} (hw ${hw}) differs from the batch seen there before`,
            )
          if (!seen) {
            committed.set(base, Buffer.from(bytes))
            this.consumer.onCommitted(partition.partition, bytes)
            this.txn?.onCommitted(partition.partition, base, bytes)
          }
          // Control batches (transaction markers) carry no sequence.
          if (header.producerId !== -1n && !header.isControl)
            this.checkNoDuplicate(partition.partition, header, base, broker)
          next = Math.max(next, last + 1)
        }
      }
      if (next === from) break
      from = next
    }
    seen.checkedUpTo = from
  }

  /** The first record's value of every batch seen committed (for the run's statistics). */
  committedFirstValues(): Set<string> {
    const values = new Set<string>()
    for (const batches of this.committed.values())
      for (const bytes of batches.values()) {
        const value = decodeRecordBatchSync(bytes).records[0]?.value?.toString()
        if (value !== undefined) values.add(value)
      }
    return values
  }

  /** An idempotent producer's batch is committed at one offset only (no duplicate from a retry). */
  private checkNoDuplicate(
    partition: number,
    header: { producerId: bigint; producerEpoch: number; baseSequence: number },
    base: number,
    broker: SimBroker,
  ): void {
    let seen = this.idempotentAt.get(partition)
    if (!seen) {
      seen = new Map()
      this.idempotentAt.set(partition, seen)
    }
    const key = `${header.producerId}/${header.producerEpoch}/${header.baseSequence}`
    const at = seen.get(key)
    if (at !== undefined && at !== base)
      throw new Violation(
        `duplicate below the high watermark: p${partition} producer ${header.producerId} epoch ${header.producerEpoch} sequence ${header.baseSequence} at offsets ${at} and ${base} (broker ${broker.nodeId})`,
      )
    seen.set(key, base)
  }

  /** null once every partition has a leader, a full ISR, and every replica holds the same log. */
  async convergenceProblem(): Promise<string | null> {
    const brokers = this.live().filter((b) => b.started)
    if (brokers.length !== this.world.brokerIds.length) return `${brokers.length} brokers up`
    const image = brokers[0].metadata.image()
    const topic = image.topics.get(TOPIC)
    if (!topic) return 'topic missing'
    for (const state of topic.partitions) {
      if (state.leader === -1) return `p${state.partition} has no leader`
      const leader = brokers.find((b) => b.nodeId === state.leader)!
      const lp = leader.replicaManager.getPartition(TOPIC, state.partition)
      if (!lp?.isLeader) return `broker ${state.leader} does not lead p${state.partition} yet`
      if (state.isr.length !== state.replicas.length) {
        // Diagnostic peek at the leader's in-flight ISR change (private to Partition).
        const pending = (
          lp as unknown as {
            pendingIsr: { maximal: readonly number[]; leaderEpoch: number; partitionEpoch: number } | null
          }
        ).pendingIsr
        const inFlight = pending
          ? `maximal ISR ${pending.maximal.join(',')} proposed at leader epoch ${pending.leaderEpoch}, partition epoch ${pending.partitionEpoch}`
          : 'none'
        return `p${state.partition} ISR ${state.isr.join(',')} (leader ${state.leader} sees ISR ${lp.isr.join(',')} at partition epoch ${lp.partitionEpoch}, store image at ${state.partitionEpoch}, pending ISR ${inFlight})`
      }
      // The partition's replicas (with more brokers than the replication factor, not all).
      for (const b of brokers.filter((broker) => state.replicas.includes(broker.nodeId))) {
        const rp = b.replicaManager.getPartition(TOPIC, state.partition)
        if (!rp) return `broker ${b.nodeId} does not host p${state.partition}`
        if (rp.log.logEndOffset !== lp.log.logEndOffset || rp.highWatermark !== lp.log.logEndOffset)
          return `p${state.partition} broker ${b.nodeId} log end ${rp.log.logEndOffset} hw ${rp.highWatermark}, leader log end ${lp.log.logEndOffset}`
      }
    }
    return null
  }

  /** Every acks=all write acknowledged during the run is in the leader's log at its offset. */
  async checkAckedSurvived(): Promise<void> {
    const brokers = this.live()
    const image = brokers[0].metadata.image()
    const logs = new Map<number, { partition: Partition; values: Map<number, string | undefined> }>()
    for (const ack of this.acked) {
      if (ack.acks !== -1) continue
      let log = logs.get(ack.partition)
      if (!log) {
        const leaderId = image.topics.get(TOPIC)!.partitions[ack.partition].leader
        const leader = brokers.find((b) => b.nodeId === leaderId)!
        const partition = leader.replicaManager.getPartition(TOPIC, ack.partition)!
        log = { partition, values: await this.committedValues(partition) }
        logs.set(ack.partition, log)
      }
      const { partition, values } = log
      const lost = (why: string): Violation =>
        new Violation(
          `acknowledged acks=all write ${ack.values[0]} (p${ack.partition} @${ack.baseOffset}, acked by broker ${ack.leaderId} at ${ack.atMs} ms) lost: ${why}`,
        )
      if (ack.baseOffset + ack.values.length > partition.highWatermark)
        throw lost(`high watermark is ${partition.highWatermark}`)
      ack.values.forEach((value, i) => {
        const at = ack.baseOffset + i
        if (values.get(at) !== value) throw lost(`offset ${at} holds ${values.get(at) ?? 'nothing'}`)
      })
    }
    this.world.log(`all ${this.acked.filter((a) => a.acks === -1).length} acks=all writes survived`)
  }

  /** Offset → value of every record of `partition`'s log below its high watermark (one pass). */
  private async committedValues(partition: Partition): Promise<Map<number, string | undefined>> {
    const values = new Map<number, string | undefined>()
    let from = partition.log.logStartOffset as number
    while (from < partition.highWatermark) {
      const read = await partition.log.read(from as Offset, {
        maxBytes: 1 << 20,
        maxOffset: partition.highWatermark as Offset,
        minOneMessage: true,
      })
      let next = from
      for (const chunk of read.records)
        for (const span of iterateBatches(chunk)) {
          const batch = decodeRecordBatchSync(chunk.subarray(span.at, span.at + span.sizeInBytes))
          for (const record of batch.records) values.set(record.offset, record.value?.toString())
          next = Math.max(next, Number(batch.baseOffset) + batch.lastOffsetDelta + 1)
        }
      if (next === from) break
      from = next
    }
    return values
  }

  /** `consumers`, at the end: every acknowledged acks=all record was read back once, at its offset. */
  checkAckedReadBack(): void {
    for (const ack of this.acked)
      if (ack.acks === -1) this.consumer.checkAckedReadBack(ack.partition, ack.baseOffset, ack.values)
  }
}
