/**
 * The group checks (`groups`): (a) OffsetFetch from the current coordinator returns at least
 * every acknowledged commit and never less than an answer that arrived before it was sent, (b) one coordinator per __consumer_offsets
 * leader epoch, (c) no partition assigned to two members of a generation, (d) a KIP-848
 * member's epoch never goes back, (e) a member's poll() returns a partition's records in
 * order while it holds it, (f) every acknowledged commit follows a consumed record. The group
 * members (tidelog's Consumer, group-member.ts) and the offset verifier report to them.
 */
import type { BrokerId } from '../common/types.js'
import { CONSUMER_OFFSETS_TOPIC } from '../coordinator/group.js'
import type { SimBroker } from './sim-broker.js'
import { type GroupChecks, type OffsetsBeforeFetch, TOPIC, Violation, type WorldView } from './world-view.js'

export class GroupInvariants implements GroupChecks {
  /** Per partition of the topic, the highest offset whose commit was acknowledged. */
  private readonly ackedCommit = new Map<number, number>()
  /** Per partition, the highest committed offset an OffsetFetch returned. */
  private readonly fetchedCommit = new Map<number, number>()
  /** `${generation}:${partition}` → the member index assigned it. */
  private readonly assignedIn = new Map<string, { memberId: string; index: number }>()
  /** `${offsets partition}:${leader epoch}` → the broker that answered as coordinator. */
  private readonly coordinatorOfEpoch = new Map<string, number>()
  readonly counts = {
    fetches: 0,
    staleFetches: 0,
    staleBehind: 0,
    overtaken: 0,
    assignments: 0,
    coordinatorAnswers: 0,
    memberEpochs: 0,
    records: 0,
  }

  constructor(private readonly world: WorldView) {}

  /** Per partition: every offset a member's poll() returned. */
  private readonly consumed = new Map<number, Set<number>>()
  /** `${member}:${partition}` → the last offset poll() returned to that member while it held it. */
  private readonly lastReturned = new Map<string, number>()

  /**
   * (e) A member's poll() returns a partition's records in offset order, none twice, while it
   * holds the partition (`held`: false for its first record after the partition was assigned).
   */
  onGroupRecord(member: number, partition: number, offset: number, held: boolean): void {
    this.counts.records++
    const key = `${member}:${partition}`
    const last = this.lastReturned.get(key)
    if (held && last !== undefined && offset <= last)
      throw new Violation(
        `group member ${member}: poll returned ${TOPIC}-${partition} offset ${offset} after offset ${last} (read again or out of order)`,
      )
    this.lastReturned.set(key, offset)
    let offsets = this.consumed.get(partition)
    if (!offsets) {
      offsets = new Set()
      this.consumed.set(partition, offsets)
    }
    offsets.add(offset)
  }

  /** (f) An acknowledged commit names the offset after a record some member's poll() returned. */
  onCommitAcked(partition: number, offset: number, member: number): void {
    if (!this.consumed.get(partition)?.has(offset - 1))
      throw new Violation(
        `group member ${member}: commit of ${TOPIC}-${partition} at ${offset} acknowledged, but no member consumed offset ${offset - 1}`,
      )
    this.ackedCommit.set(partition, Math.max(this.ackedCommit.get(partition) ?? -1, offset))
  }

  offsetsBeforeFetch(): OffsetsBeforeFetch {
    return { acked: new Map(this.ackedCommit), fetched: new Map(this.fetchedCommit) }
  }

  /**
   * (a) An OffsetFetch answer from the current coordinator holds, per partition, at least the
   * last commit acknowledged before the fetch was sent, and never less than an answer that
   * arrived before the fetch was sent. Not less than every earlier answer: two fetches that
   * overlap may be answered in either order (seed 304: a fetch sent at 19461 ms into a
   * 1-1076 ms network delay was answered, from before a commit, at 20518 ms, after another
   * verifier's fetch sent at 20508 ms returned that commit); such an answer is counted.
   * Current: as the answer arrives, the store names the answering broker leader of the group's
   * __consumer_offsets partition, in the leader epoch that broker's process holds. A deposed
   * coordinator that does not know it yet (a stalled store link) answers from its cache, as
   * Kafka's would: such stale answers are counted (and how many were behind), not checked.
   * Returns whether the answer was checked.
   */
  onOffsetsFetched(
    from: BrokerId,
    offsetsPartition: number,
    fetched: ReadonlyMap<number, number>,
    before: OffsetsBeforeFetch,
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
      this.counts.staleFetches++
      if ([...before.acked].some(([p, acked]) => (fetched.get(p) ?? -1) < acked)) this.counts.staleBehind++
      return false
    }
    this.counts.fetches++
    for (const [partition, acked] of before.acked) {
      const got = fetched.get(partition) ?? -1
      if (got < acked)
        throw new Violation(
          `group offsets: coordinator broker ${from} returned committed offset ${got} for ${TOPIC}-${partition}, below the acknowledged commit ${acked}`,
        )
    }
    for (const [partition, got] of fetched) {
      const returnedBefore = before.fetched.get(partition) ?? -1
      if (got < returnedBefore)
        throw new Violation(
          `group offsets: coordinator broker ${from} returned committed offset ${got} for ${TOPIC}-${partition}, below ${returnedBefore} returned before the fetch was sent (went backwards)`,
        )
      const highest = this.fetchedCommit.get(partition) ?? -1
      if (got < highest) {
        this.counts.overtaken++
        this.world.log(
          `group offsets: broker ${from} returned ${got} for ${TOPIC}-${partition} to a fetch overtaken by one that returned ${highest} (they overlapped; not checked against it)`,
        )
      }
      this.fetchedCommit.set(partition, Math.max(highest, got))
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
    this.counts.memberEpochs++
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
    this.counts.assignments++
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
    this.counts.coordinatorAnswers++
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
}
