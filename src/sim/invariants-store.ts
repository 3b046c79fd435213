/**
 * The checks on the metadata store's own state (the ground truth): partition states well
 * formed, epochs that never go back and move with every leader or ISR change, and
 * leaderships that leave a broker whose log dirs all failed or whose registration is gone.
 * They also write the STORE trace markers that tests look for.
 */
import { assert, InvariantError } from '../common/assert.js'
import { type BrokerId, checkPartitionState } from '../metadata/cluster-image.js'
import { TOPIC, Violation, type WorldView } from './world-view.js'

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

export class StoreInvariants {
  /** `${partition}:${leader}:${incarnation}` → since when that leader's log dirs are all offline while another ISR member is healthy. */
  private readonly failedLeaderSince = new Map<string, number>()
  /** `${partition}:${leader}` → since when that leader is unregistered while another ISR member is healthy. */
  private readonly unregisteredLeaderSince = new Map<string, number>()
  /** The truth image the last unregistered-leader scan read, and the partitions it found. */
  private unregisteredScan: { image: unknown; partitions: readonly number[] } = {
    image: null,
    partitions: [],
  }

  constructor(private readonly world: WorldView) {}

  /** Runs the store checks after an event; returns whether the store's image changed since the last. */
  check(): boolean {
    this.checkStoreState()
    const storeChanged = this.traceStoreChanges()
    this.checkFailedLogDirLeadership()
    this.checkUnregisteredLeadership()
    return storeChanged
  }

  /** The leader the store named for the topic's `partition` in `leaderEpoch` (-1: none), if seen. */
  leaderOfEpoch(partition: number, leaderEpoch: number): number | undefined {
    return this.storeLeaderOfEpoch.get(`${partition}:${leaderEpoch}`)
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
  /** Topic and partition state objects of the store's images already traced and checked. */
  private readonly topicsTraced = new WeakSet<object>()
  private readonly statesTraced = new WeakSet<object>()
  /** The store image checkStoreState last checked. */
  private storeStateChecked: unknown = null
  /** `${partition}:${leader epoch}` → its leader in the store (-1: none), for the topic. */
  private readonly storeLeaderOfEpoch = new Map<string, number>()

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
      // Images keep the objects of unchanged topics and partitions: with thousands of
      // partitions, building each one's text after every store change was most of this check.
      if (this.topicsTraced.has(topic)) continue
      this.topicsTraced.add(topic)
      for (const state of topic.partitions) {
        if (this.statesTraced.has(state)) continue
        this.statesTraced.add(state)
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
      const healthy = (m: BrokerId): boolean => {
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
      const healthy = (m: BrokerId): boolean => {
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
}
