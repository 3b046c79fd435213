/**
 * The safety properties checked after every event, and the liveness and durability checks
 * at the end of a run. Each violation throws `Violation` with what was seen.
 */
import { assert, InvariantError } from '../common/assert.js'
import type { Offset } from '../common/types.js'
import { CONSUMER_OFFSETS_TOPIC } from '../coordinator/group.js'
import { checkPartitionState, type PartitionState } from '../metadata/cluster-image.js'
import { decodeRecordBatchSync, iterateBatches } from '../protocol/record-batch.js'
import type { Partition } from '../replication/partition.js'
import { wholeBatches } from './consumer.js'
import type { SimBroker } from './sim-broker.js'
import { TxnInvariants } from './txn-checker.js'
import { TOPIC, Violation, type WorldView } from './world-view.js'

interface Acked {
  readonly partition: number
  readonly baseOffset: number
  readonly count: number
  readonly value: string
  readonly acks: number
  readonly leaderId: number
  /** The leader epoch the leader answered in (-1: it no longer led as the append returned). */
  readonly leaderEpoch: number
  readonly atMs: number
}

/**
 * A broker whose every log dir went offline while it was registered stops itself, controlled:
 * a partition it leads with another ISR member up and registered must have another leader
 * in the store within this many simulated ms (a few store trips; the session is 3000 ms).
 * Failed before it registered (a restarted broker waiting for its old registration to end),
 * it has no lease to revoke: the old registration's expiry governs, so the session timeout
 * is added.
 */
export const FAILED_LOG_DIR_LEADERSHIP_MS = 1000
const FAILED_UNREGISTERED_EXTRA_MS = 3000

/**
 * A partition the store names led by a broker whose registration is gone (its session ended
 * or it stopped) has another leader in the store within this many simulated ms while another
 * ISR member is up and registered: the controller elects as the registration goes, and
 * retries a failed write 2 s later (RECONCILE_RETRY_MS). Issue 39: etcd refused the
 * controller's one transaction for every partition a dead broker led, and it was retried
 * unchanged for good (the metadata-writes-unsplit mutation).
 */
export const UNREGISTERED_LEADERSHIP_MS = 5000
/**
 * With the store away (latency, stalls) the controller may itself be cut off from it: its
 * stall (3-5 s of 2-4 s trips), the end of its session and a new campaign come first.
 */
const UNREGISTERED_LEADERSHIP_STORE_EXTRA_MS = 10_000

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

export class Invariants {
  /** `${partition}:${leader}:${incarnation}` → since when that leader's log dirs are all offline while another ISR member is healthy. */
  private readonly failedLeaderSince = new Map<string, number>()
  /** `${partition}:${leader}` → since when that leader is unregistered while another ISR member is healthy. */
  private readonly unregisteredLeaderSince = new Map<string, number>()
  /** The truth image the last unregistered-leader scan read, and the partitions it found. */
  private unregisteredScan: { image: unknown; partitions: readonly number[] } = {
    image: null,
    partitions: [],
  }
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
  /** Per partition: batches a consumer received before the agreement check saw them committed. */
  private readonly consumedPending = new Map<number, Map<number, { bytes: Buffer; from: number }>>()
  consumedBatches = 0
  /** The most logs of one broker process that held a cleaner checkpoint at a check. */
  cleanerCheckpoints = 0
  /** Groups: per partition of the topic, the highest offset whose commit was acknowledged. */
  private readonly ackedCommit = new Map<number, number>()
  /** Groups: per partition, the highest committed offset an OffsetFetch returned. */
  private readonly fetchedCommit = new Map<number, number>()
  /** Groups: `${generation}:${partition}` → the member index assigned it. */
  private readonly assignedIn = new Map<string, { memberId: string; index: number }>()
  /** Groups: `${offsets partition}:${leader epoch}` → the broker that answered as coordinator. */
  private readonly coordinatorOfEpoch = new Map<string, number>()
  groupChecks = {
    fetches: 0,
    staleFetches: 0,
    staleBehind: 0,
    assignments: 0,
    coordinatorAnswers: 0,
    memberEpochs: 0,
  }

  /** `transactions`: the transactions' checks (txn-checker.ts). */
  readonly txn: TxnInvariants | null

  constructor(private readonly world: WorldView) {
    this.txn = world.options.transactions === true ? new TxnInvariants(world) : null
  }

  onAcked(
    partition: number,
    baseOffset: number,
    count: number,
    value: string,
    acks: number,
    leaderId: number,
    leaderEpoch: number,
  ): void {
    this.acked.push({
      partition,
      baseOffset,
      count,
      value,
      acks,
      leaderId,
      leaderEpoch,
      atMs: this.world.scheduler.now,
    })
    if (acks !== -1 || leaderEpoch < 0) return
    const key = `${partition}:${leaderId}:${leaderEpoch}`
    this.ackedInLeadership.set(key, Math.max(this.ackedInLeadership.get(key) ?? 0, baseOffset + count))
  }

  // ---- groups (`groups`) ---------------------------------------------------------------------

  onCommitAcked(partition: number, offset: number, _member: number): void {
    this.ackedCommit.set(partition, Math.max(this.ackedCommit.get(partition) ?? -1, offset))
  }

  ackedCommitsSnapshot(): ReadonlyMap<number, number> {
    return new Map(this.ackedCommit)
  }

  /**
   * (a) An OffsetFetch answer from the current coordinator holds, per partition, at least the
   * last commit acknowledged before the fetch was sent, and never less than an earlier answer.
   * Current: as the answer arrives, the store names the answering broker leader of the group's
   * __consumer_offsets partition, in the leader epoch that broker's process holds. A deposed
   * coordinator that does not know it yet (a stalled store link) answers from its cache, as
   * Kafka's would: such stale answers are counted (and how many were behind), not checked.
   * Returns whether the answer was checked.
   */
  onOffsetsFetched(
    from: number,
    offsetsPartition: number,
    fetched: ReadonlyMap<number, number>,
    ackedBefore: ReadonlyMap<number, number>,
  ): boolean {
    const state = this.world.truth?.image().topics.get(CONSUMER_OFFSETS_TOPIC)?.partitions[offsetsPartition]
    const local = this.world.brokers
      .get(from)
      ?.replicaManager?.getPartition(CONSUMER_OFFSETS_TOPIC, offsetsPartition)
    const current =
      state !== undefined &&
      state.leader === from &&
      local?.isLeader === true &&
      local.leaderEpoch === state.leaderEpoch
    if (!current) {
      this.groupChecks.staleFetches++
      if ([...ackedBefore].some(([p, acked]) => (fetched.get(p) ?? -1) < acked))
        this.groupChecks.staleBehind++
      return false
    }
    this.groupChecks.fetches++
    for (const [partition, acked] of ackedBefore) {
      const got = fetched.get(partition) ?? -1
      if (got < acked)
        throw new Violation(
          `group offsets: coordinator broker ${from} returned committed offset ${got} for ${TOPIC}-${partition}, below the acknowledged commit ${acked}`,
        )
    }
    for (const [partition, got] of fetched) {
      const before = this.fetchedCommit.get(partition) ?? -1
      if (got < before)
        throw new Violation(
          `group offsets: coordinator broker ${from} returned committed offset ${got} for ${TOPIC}-${partition}, below ${before} returned earlier (went backwards)`,
        )
      this.fetchedCommit.set(partition, got)
    }
    return true
  }

  /** Per KIP-848 member: the highest member epoch a heartbeat answered with. */
  private readonly memberEpochs = new Map<string, number>()

  /**
   * (d) KIP-848: a member's epoch never goes backwards. Epochs only grow while the group's
   * records are kept (a rejoin gets the current, higher epoch); a lower one means a
   * coordinator answered from state that lost committed consumer-group records.
   */
  onMemberEpoch(memberId: string, index: number, epoch: number): void {
    this.groupChecks.memberEpochs++
    const before = this.memberEpochs.get(memberId) ?? 0
    if (epoch < before)
      throw new Violation(
        `consumer group member ${index} (${memberId}): member epoch ${epoch} after ${before} (went backwards)`,
      )
    this.memberEpochs.set(memberId, epoch)
  }

  /** (c) Within a generation no partition is assigned to two members. */
  onGroupAssignment(
    generation: number,
    memberId: string,
    index: number,
    partitions: readonly number[],
  ): void {
    this.groupChecks.assignments++
    for (const partition of partitions) {
      const key = `${generation}:${partition}`
      const other = this.assignedIn.get(key)
      if (other && other.memberId !== memberId)
        throw new Violation(
          `group generation ${generation}: ${TOPIC}-${partition} assigned to member ${other.index} and to member ${index}`,
        )
      this.assignedIn.set(key, { memberId, index })
    }
  }

  /**
   * (b) At most one broker answers as the group's coordinator per __consumer_offsets leader
   * epoch, and only one that led the partition (in its own view) when the request arrived.
   */
  onCoordinatorAnswer(broker: SimBroker, offsetsPartition: number, leaderEpoch: number, api: string): void {
    this.groupChecks.coordinatorAnswers++
    if (leaderEpoch < 0)
      throw new Violation(
        `broker ${broker.nodeId} answered ${api} for the group without leading __consumer_offsets-${offsetsPartition} when the request arrived`,
      )
    const key = `${offsetsPartition}:${leaderEpoch}`
    const other = this.coordinatorOfEpoch.get(key)
    if (other !== undefined && other !== broker.nodeId)
      throw new Violation(
        `two coordinators for the group in __consumer_offsets-${offsetsPartition} leader epoch ${leaderEpoch}: broker ${other}, then broker ${broker.nodeId} (${api})`,
      )
    this.coordinatorOfEpoch.set(key, broker.nodeId)
  }

  private live(): SimBroker[] {
    return [...this.world.brokers.values()].filter((b) => b.isAlive && b.broker !== null)
  }

  async check(): Promise<void> {
    this.checkStoreState()
    const storeChanged = this.traceStoreChanges()
    this.checkFailedLogDirLeadership()
    this.checkUnregisteredLeadership()
    const brokers = this.live()
    for (const broker of brokers) this.checkCleanerCheckpoints(broker)
    const truths = this.world.truth?.image().topics.get(TOPIC)?.partitions
    for (const broker of brokers) {
      for (const partition of broker.replicaManager.hostedPartitions) {
        if (partition.topic !== TOPIC) continue
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
      for (const partition of broker.replicaManager.hostedPartitions) {
        if (partition.topic !== TOPIC) continue
        // Awaited only when there is something to read: with hundreds of partitions an
        // await per partition per event was a large share of a run.
        const reading = this.checkAgreement(broker, partition)
        if (reading !== null) await reading
      }
    }
    // After the agreement check: the committed history then reaches every leader's HW.
    if (this.txn)
      for (const broker of brokers)
        for (const partition of broker.replicaManager.hostedPartitions)
          if (partition.topic === TOPIC) await this.txn.checkPartition(broker, partition)
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
   * The partition states in the store itself are well formed: a non-empty ISR of replicas
   * holding the leader (Kafka's controller keeps this; a broker writes only its own ISR
   * changes, by compare-and-set on its leadership).
   */
  private checkStoreState(): void {
    const image = this.world.truth?.image()
    // Images are immutable: one checked before is checked.
    if (image === undefined || image === this.storeStateChecked) return
    this.storeStateChecked = image
    const topic = image.topics.get(TOPIC)
    if (!topic) return
    for (const state of topic.partitions) {
      try {
        checkPartitionState(TOPIC, state)
        assert(state.isr.length > 0, `${TOPIC}-${state.partition}: empty ISR`)
      } catch (error) {
        if (!(error instanceof InvariantError)) throw error
        throw new Violation(
          `partition state in the store is malformed: ${error.message} (leader ${state.leader}, leader epoch ${state.leaderEpoch}, partition epoch ${state.partitionEpoch}, ISR ${state.isr.join(',')})`,
        )
      }
    }
  }

  /** `${topic}-${partition}` → its leader and ISR as last seen in the store, and their epochs. */
  private readonly storeStates = new Map<
    string,
    {
      readonly text: string
      readonly topicId: string
      readonly leaderEpoch: number
      readonly partitionEpoch: number
    }
  >()
  private lastTruthImage: unknown = null
  /** The store image checkStoreState last checked. */
  private storeStateChecked: unknown = null
  /** `${partition}:${leader epoch}` → its leader in the store (-1: none), for the topic. */
  private readonly storeLeaderOfEpoch = new Map<string, number>()
  /** ISR changes in flight already reported (one trace line each). */
  private readonly reportedInFlight = new WeakSet<object>()

  /**
   * Trace markers (tests assert that a seed's scenario happened): every leader or ISR change
   * in the store, as `STORE topic-partition: leader L epoch E ISR a,b -> ...`. Returns whether
   * the store's image changed since the last check.
   *
   * Checked on the way: a partition's epochs in the store never go back, and every change of
   * its leader or ISR comes with a higher partition epoch. Brokers fence each other's ISR
   * changes by that epoch (compare-and-set on it, KIP-497); the AlterPartitionManager builds
   * many partitions' new states in one write, and a state changed there without its epoch
   * moving would let a stale proposal commit.
   */
  private traceStoreChanges(): boolean {
    const truth = this.world.truth?.image()
    if (!truth || truth === this.lastTruthImage) return false
    this.lastTruthImage = truth
    for (const topic of truth.topics.values()) {
      for (const state of topic.partitions) {
        const key = `${topic.name}-${state.partition}`
        const text = `leader ${state.leader} epoch ${state.leaderEpoch} ISR ${state.isr.join(',')}`
        const before = this.storeStates.get(key)
        if (before !== undefined && before.topicId === topic.topicId)
          this.checkStoreEpochs(key, before, state, text)
        if (before !== undefined && before.text !== text)
          this.world.log(`STORE ${key}: ${before.text} -> ${text}`)
        if (topic.name === TOPIC)
          this.storeLeaderOfEpoch.set(`${state.partition}:${state.leaderEpoch}`, state.leader)
        this.storeStates.set(key, {
          text,
          topicId: topic.topicId,
          leaderEpoch: state.leaderEpoch,
          partitionEpoch: state.partitionEpoch,
        })
      }
    }
    return true
  }

  private checkStoreEpochs(
    key: string,
    before: { readonly text: string; readonly leaderEpoch: number; readonly partitionEpoch: number },
    state: { readonly leaderEpoch: number; readonly partitionEpoch: number },
    text: string,
  ): void {
    const where = `${key} in the store: ${before.text} (partition epoch ${before.partitionEpoch}) -> ${text} (partition epoch ${state.partitionEpoch})`
    if (state.leaderEpoch < before.leaderEpoch) throw new Violation(`leader epoch went back: ${where}`)
    if (state.partitionEpoch < before.partitionEpoch)
      throw new Violation(`partition epoch went back: ${where}`)
    if (text !== before.text && state.partitionEpoch === before.partitionEpoch)
      throw new Violation(`leader or ISR changed without a new partition epoch: ${where}`)
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

  /**
   * Leadership leaves a broker whose every log dir is offline promptly (server/broker.ts stops
   * it, controlled), whenever another ISR member is up and registered to take it over.
   */
  private checkFailedLogDirLeadership(): void {
    const truth = this.world.truth?.image()
    const topic = truth?.topics.get(TOPIC)
    if (!truth || !topic) {
      this.failedLeaderSince.clear()
      return
    }
    const now = this.world.scheduler.now
    const seen = new Set<string>()
    for (const state of topic.partitions) {
      const leader = this.world.brokers.get(state.leader)
      const failed = leader?.allLogDirsOfflineAt
      if (!leader || !failed) continue
      const healthy = (m: number): boolean => {
        const b = this.world.brokers.get(m)
        return b?.isAlive === true && b.started && b.lease !== null && truth.brokers.has(m)
      }
      if (!state.isr.some((m) => m !== state.leader && healthy(m))) continue
      const key = `${state.partition}:${leader.nodeId}:${leader.incarnation}`
      seen.add(key)
      const since = this.failedLeaderSince.get(key) ?? now
      this.failedLeaderSince.set(key, since)
      const limit = FAILED_LOG_DIR_LEADERSHIP_MS + (failed.registered ? 0 : FAILED_UNREGISTERED_EXTRA_MS)
      if (now - since > limit)
        throw new Violation(
          `broker ${leader.nodeId} (incarnation ${leader.incarnation}) has had every log dir offline since ${failed.atMs} ms and is still leader of p${state.partition} in the store (ISR ${state.isr.join(',')}) ${now - since} ms after another ISR member could take over (limit ${limit} ms)`,
        )
    }
    for (const key of [...this.failedLeaderSince.keys()])
      if (!seen.has(key)) this.failedLeaderSince.delete(key)
  }

  /**
   * A dead broker's leaderships fail over: no partition stays led in the store by a broker
   * without a registration for longer than UNREGISTERED_LEADERSHIP_MS while another ISR
   * member is up and registered (a clean election can pick it).
   */
  private checkUnregisteredLeadership(): void {
    const truth = this.world.truth?.image()
    if (!truth) {
      this.unregisteredLeaderSince.clear()
      return
    }
    // Scanned once per store change (every event would cost O(partitions) each).
    if (this.unregisteredScan.image !== truth) {
      const partitions = (truth.topics.get(TOPIC)?.partitions ?? [])
        .filter((s) => s.leader >= 0 && !truth.brokers.has(s.leader))
        .map((s) => s.partition)
      this.unregisteredScan = { image: truth, partitions }
    }
    const now = this.world.scheduler.now
    const seen = new Set<string>()
    const states = truth.topics.get(TOPIC)?.partitions ?? []
    for (const p of this.unregisteredScan.partitions) {
      const state = states[p]
      const healthy = (m: number): boolean => {
        const b = this.world.brokers.get(m)
        return b?.isAlive === true && b.started && b.lease !== null && truth.brokers.has(m)
      }
      if (!state.isr.some((m) => m !== state.leader && healthy(m))) continue
      const key = `${p}:${state.leader}`
      seen.add(key)
      const since = this.unregisteredLeaderSince.get(key) ?? now
      this.unregisteredLeaderSince.set(key, since)
      const limit =
        UNREGISTERED_LEADERSHIP_MS +
        (this.world.storeLatencyMaxMs > 0 ? UNREGISTERED_LEADERSHIP_STORE_EXTRA_MS : 0)
      if (now - since > limit)
        throw new Violation(
          `p${p} is still led in the store by broker ${state.leader}, which has no registration, ${now - since} ms after another ISR member could take over (ISR ${state.isr.join(',')}, leader epoch ${state.leaderEpoch}; limit ${limit} ms)`,
        )
    }
    for (const key of [...this.unregisteredLeaderSince.keys()])
      if (!seen.has(key)) this.unregisteredLeaderSince.delete(key)
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
      const leader = this.storeLeaderOfEpoch.get(key) ?? this.leaderOfEpoch.get(key)
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
            this.matchConsumed(partition.partition, base, bytes)
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

  /**
   * A consumer received `batch` from broker `from`, expecting it at `position`: batches come
   * whole and contiguous, and each equals (bytes) the batch committed at its offset (if the
   * agreement check has not seen that offset committed yet, when it does).
   */
  onConsumed(
    partition: number,
    position: number,
    batch: { base: number; last: number; bytes: Buffer },
    from: number,
  ): void {
    this.consumedBatches++
    if (batch.base !== position)
      throw new Violation(
        `consumer of p${partition} at offset ${position} received a batch at ${batch.base}..${batch.last} from broker ${from}`,
      )
    const committed = this.committed.get(partition)?.get(batch.base)
    if (committed) {
      if (!committed.equals(batch.bytes))
        throw new Violation(
          `consumer of p${partition} received a batch at offset ${batch.base} from broker ${from} that differs from the one committed there`,
        )
      return
    }
    let pending = this.consumedPending.get(partition)
    if (!pending) {
      pending = new Map()
      this.consumedPending.set(partition, pending)
    }
    pending.set(batch.base, { bytes: Buffer.from(batch.bytes), from })
  }

  private matchConsumed(partition: number, base: number, bytes: Buffer): void {
    const pending = this.consumedPending.get(partition)
    const consumed = pending?.get(base)
    if (!pending || !consumed) return
    pending.delete(base)
    if (!consumed.bytes.equals(bytes))
      throw new Violation(
        `consumer of p${partition} received a batch at offset ${base} from broker ${consumed.from} that differs from the one committed there`,
      )
  }

  /**
   * A broker answers a consumer's fetch: no batch in it may reach the broker's high watermark
   * at the time of the answer (read_uncommitted reads committed data only), nor, for a
   * read_committed fetch, its last stable offset.
   */
  onConsumerAnswer(broker: SimBroker, partition: number, records: Buffer, readCommitted = false): void {
    const hosted = broker.replicaManager.getPartition(TOPIC, partition)
    const bound = (readCommitted ? hosted?.lastStableOffset : hosted?.highWatermark) ?? -1
    const name = readCommitted ? 'last stable offset' : 'high watermark'
    for (const batch of wholeBatches(records)) {
      if (batch.last >= bound)
        throw new Violation(
          `broker ${broker.nodeId} answered a ${readCommitted ? 'read_committed ' : ''}consumer of p${partition} with offsets ${batch.base}..${batch.last}, at or above its ${name} ${bound}${hosted?.isLeader === true ? '' : ' (not leading)'}`,
        )
    }
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

  /** At the end: every batch a consumer received was seen committed at its offset. */
  checkConsumedCommitted(): void {
    for (const [partition, pending] of this.consumedPending) {
      for (const [base, consumed] of pending)
        throw new Violation(
          `consumer of p${partition} received a batch at offset ${base} from broker ${consumed.from} that was never seen committed`,
        )
    }
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
    for (const ack of this.acked) {
      if (ack.acks !== -1) continue
      const leaderId = image.topics.get(TOPIC)!.partitions[ack.partition].leader
      const leader = brokers.find((b) => b.nodeId === leaderId)!
      const partition = leader.replicaManager.getPartition(TOPIC, ack.partition)!
      const lost = (why: string): Violation =>
        new Violation(
          `acknowledged acks=all write ${ack.value} (p${ack.partition} @${ack.baseOffset}, acked by broker ${ack.leaderId} at ${ack.atMs} ms) lost: ${why}`,
        )
      if (ack.baseOffset + ack.count > partition.highWatermark)
        throw lost(`high watermark is ${partition.highWatermark}`)
      const read = await partition.log.read(ack.baseOffset as Offset, {
        maxBytes: 1 << 16,
        maxOffset: (ack.baseOffset + ack.count) as Offset,
        minOneMessage: true,
      })
      const chunk = read.records[0]
      if (!chunk) throw lost('nothing at its offset')
      const batch = decodeRecordBatchSync(chunk)
      const record = batch.records.find((rec) => rec.offset === ack.baseOffset)
      const found = record?.value?.toString()
      if (found !== `${ack.value}.0`) throw lost(`offset ${ack.baseOffset} holds ${found ?? 'nothing'}`)
    }
    this.world.log(`all ${this.acked.filter((a) => a.acks === -1).length} acks=all writes survived`)
  }
}
