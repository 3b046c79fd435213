/**
 * One hosted partition replica: its log, its role and leader epoch, and the high watermark.
 *
 * As leader it tracks each follower's log end (from the offsets they fetch at), keeps the
 * high watermark at the smallest log end of the ISR, proposes ISR expansion when a
 * follower catches up and shrinkage when one falls behind for replica.lag.time.max.ms.
 * ISR changes are compare-and-set writes to the metadata store; until one is committed the
 * high watermark is computed over the larger of the two sets (Kafka's "maximal ISR"), so it
 * never passes a member's log end. As follower it appends what it fetched, offsets as
 * given, and takes the leader's high watermark (capped by its own log end).
 */
import { assert } from '../common/assert.js'
import {
  ACKS_ALL,
  type Acks,
  type BrokerId,
  FIRST_OFFSET,
  type LeaderEpoch,
  minOffset,
  NO_BROKER_ID,
  NO_OFFSET,
  type Offset,
  type PartitionEpoch,
} from '../common/types.js'
import { NO_LEADER, type PartitionState } from '../metadata/cluster-image.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { convertLegacyToV2, isLegacyMagic } from '../protocol/record-batch.js'
import { CorruptSegmentError } from '../storage/errors.js'
import type { AbortedTxn } from '../storage/transaction-index.js'
import type { AppendOrigin, FetchDataInfo, LogAppendInfo, UnifiedLog } from '../storage/unified-log.js'
import {
  caughtUpTimeMs,
  type FollowerTimes,
  foldSession,
  type SessionClock,
} from './follower-session-news.js'
import { KafkaError } from './kafka-error.js'
import type { IsrProposal, PartitionContext } from './partition-context.js'
import { checkKeysPresent, checkProducerBatches } from './producer-batch-checks.js'
import { ProducerStateManager } from './producer-state.js'
import { type ReplicaView, selectRackAware } from './replica-selector.js'

export interface PartitionIdentity {
  readonly topic: string
  readonly partition: number
  readonly topicId: string
}

export type IsolationLevel = 'read_uncommitted' | 'read_committed'

export interface ConsumerRead {
  readonly info: FetchDataInfo
  /** read_committed only: the aborted transactions of the range read. */
  readonly abortedTransactions: readonly AbortedTxn[] | undefined
}

/** How a leader append is checked (see AppendOptions). */
export interface LeaderAppend {
  /** 'coordinator' for transaction markers and a coordinator's transactional batches. Default 'client'. */
  readonly origin?: AppendOrigin
  /** KIP-890: from ProducerStateManager.beginVerification, once the coordinator verified the produce. */
  readonly verificationGuard?: object
}

export type { IsrProposal, PartitionContext } from './partition-context.js'

interface PendingIsr {
  readonly maximal: readonly BrokerId[]
  /** The partition state the proposal was made against. */
  readonly leaderEpoch: number
  readonly partitionEpoch: PartitionEpoch
  readonly isr: readonly BrokerId[]
  readonly brokerEpoch: number
  readonly addedMembers: IsrProposal['addedMembers']
  /** The write failed without an answer (a store timeout): it may have committed. */
  outcomeUnknown: boolean
}

interface FollowerState {
  /** -1 until the follower's first fetch under this leadership. */
  logEndOffset: Offset
  lastCaughtUpTimeMs: number
  lastFetchLeaderLogEndOffset: Offset
  lastFetchTimeMs: number
  /** The broker epoch its fetches carry (-1: none yet, or fetches without one). */
  brokerEpoch: number
  /** Set while its fetch session skips this partition: caught up as of the session's last fetch. */
  session?: SessionClock | undefined
}

export interface FollowerLag {
  readonly brokerId: BrokerId
  readonly logEndOffset: Offset
  readonly lagMessages: number
  readonly caughtUpAgoMs: number
}

/**
 * Shared by every replica until it needs its own: an empty Map or Set costs about 200 bytes
 * of heap with its table, and most replicas of a large cluster never watch or lead (at RF 3
 * two in three are followers). Never written: see ownFollowers, watch.
 */
const NO_FOLLOWERS: ReadonlyMap<BrokerId, FollowerState> = new Map()
const NO_WATCHERS: ReadonlySet<() => void> = new Set()
/** The settled start of an append chain, shared. */
const SETTLED: Promise<unknown> = Promise.resolve()

export class Partition {
  private state: PartitionState
  private highWatermarkWatchers = NO_WATCHERS
  private logEndWatchers = NO_WATCHERS
  private followers = NO_FOLLOWERS
  /** The high watermark the leader last reported to this follower. */
  private lastLeaderHighWatermark = FIRST_OFFSET
  /**
   * The ISR change in flight, if any (Kafka's PendingExpandIsr/PendingShrinkIsr): its maximal
   * ISR (committed ∪ proposed) bounds the high watermark until a newer partition state
   * arrives or the write is refused.
   */
  private pendingIsr: PendingIsr | null = null
  /** The log end when this leadership began: a follower joins the ISR only past it. */
  private leaderEpochStartOffset = FIRST_OFFSET
  /** Appends that need async preparation (legacy up-conversion, key checks) queue here. */
  private preparedAppendTail = SETTLED
  private preparingAppends = 0
  /** The last append taken as leader, settled or not: the log lands appends in call order. */
  private lastLeaderAppend = SETTLED
  /** Set by retire(): the topic this replica belongs to is gone from the metadata. */
  private retiredValue = false

  constructor(
    readonly id: PartitionIdentity,
    readonly log: UnifiedLog,
    state: PartitionState,
    private readonly context: PartitionContext,
  ) {
    this.state = state
    if (this.isLeaderByMetadata) this.resetFollowers()
  }

  private get localBrokerId(): BrokerId {
    return this.context.localBrokerId
  }

  private get isLeaderByMetadata(): boolean {
    return this.state.leader === this.localBrokerId
  }

  get topic(): string {
    return this.id.topic
  }
  get partition(): number {
    return this.id.partition
  }
  get leaderEpoch(): LeaderEpoch {
    // The metadata image keeps epochs as plain numbers; they are branded where they meet the log.
    return this.state.leaderEpoch as LeaderEpoch
  }
  /** Leader by the metadata, still holding a store session (no split brain), and not retired. */
  get isLeader(): boolean {
    return this.isLeaderByMetadata && !this.context.isFenced() && !this.retiredValue
  }
  /** Whether retire() was called: this replica's topic was deleted or replaced. */
  get retired(): boolean {
    return this.retiredValue
  }

  /**
   * The metadata no longer has this replica's topic (deleted, or a new topic of the same
   * name with a new topic id): called as soon as the image says so, before the replica
   * manager gets round to deleting the log, which waits behind earlier images' work. From
   * now on it leads nothing: no ISR proposals (whose partition and leader epochs could match
   * the new topic's partition of the same index), no high watermark moves, no appends. The
   * acks=all produces and delayed fetches parked on it are woken now, so they answer at once
   * rather than at their timeout (the followers stopped fetching it: its high watermark
   * would never reach them), as Kafka completes a stopped partition's delayed operations.
   */
  retire(): void {
    if (this.retiredValue) return
    this.retiredValue = true
    this.pendingIsr = null
    for (const watcher of [...this.highWatermarkWatchers]) watcher()
    for (const watcher of [...this.logEndWatchers]) watcher()
  }
  get leaderId(): BrokerId {
    return this.state.leader
  }
  get partitionEpoch(): PartitionEpoch {
    return this.state.partitionEpoch
  }
  get isr(): readonly BrokerId[] {
    return this.state.isr
  }
  get replicas(): readonly BrokerId[] {
    return this.state.replicas
  }
  get highWatermark(): Offset {
    return this.log.highWatermark
  }
  /** The log end this leadership began at (Kafka's leaderEpochStartOffsetOpt); null when not leader. */
  get leaderEpochStart(): Offset | null {
    return this.isLeaderByMetadata ? this.leaderEpochStartOffset : null
  }
  /** Idempotent producers' state, kept by the log on leaders and followers alike. */
  get producerState(): ProducerStateManager | undefined {
    const state = this.log.producerState
    return state instanceof ProducerStateManager ? state : undefined
  }
  /**
   * Kafka's lastStableOffset: the first offset of the earliest transaction still open (or
   * whose marker is not replicated yet), capped by the high watermark; read_committed
   * consumers read below it.
   */
  get lastStableOffset(): Offset {
    const highWatermark = this.log.highWatermark
    const firstUnstable = this.producerState?.firstUnstableOffset()
    return firstUnstable === undefined ? highWatermark : minOffset(firstUnstable, highWatermark)
  }

  /** Applies a new partition state from the metadata; epochs never go back. */
  updateState(next: PartitionState): void {
    assert(
      next.leaderEpoch >= this.state.leaderEpoch,
      () => `${this.topic}-${this.partition}: leader epoch ${next.leaderEpoch} < ${this.state.leaderEpoch}`,
    )
    const newLeadership = next.leader === this.localBrokerId && next.leaderEpoch !== this.state.leaderEpoch
    const leadershipChanged = next.leader !== this.state.leader || next.leaderEpoch !== this.state.leaderEpoch
    const partitionEpochChanged = next.partitionEpoch !== this.state.partitionEpoch
    this.state = next
    // An image change that leaves this partition's state as it was (another partition, a
    // broker registering) keeps the proposal in flight: its maximal ISR still bounds the HW.
    // A newer partition state (ours committed, or anyone else's write) ends it.
    const pending = this.pendingIsr
    if (
      pending !== null &&
      (next.leaderEpoch !== pending.leaderEpoch || next.partitionEpoch !== pending.partitionEpoch)
    )
      this.pendingIsr = null
    if (newLeadership) this.resetFollowers()
    else if (this.isLeaderByMetadata) this.syncFollowersWithReplicas()
    if (this.isLeaderByMetadata) this.maybeIncrementHighWatermark()
    // acks=all produces waiting on the old leadership must learn it ended (they check the
    // epoch); a follower session that skips this partition must see a new ISR at once.
    if (leadershipChanged || partitionEpochChanged)
      for (const watcher of [...this.highWatermarkWatchers]) watcher()
  }

  /** A reassignment adds and removes replicas under the same leadership. */
  private syncFollowersWithReplicas(): void {
    for (const id of [...this.followers.keys()])
      if (!this.state.replicas.includes(id)) this.ownFollowers().delete(id)
    for (const id of this.state.replicas) {
      if (id === this.localBrokerId || this.followers.has(id)) continue
      this.ownFollowers().set(id, {
        logEndOffset: NO_OFFSET,
        lastCaughtUpTimeMs: 0,
        lastFetchLeaderLogEndOffset: FIRST_OFFSET,
        lastFetchTimeMs: 0,
        brokerEpoch: -1,
      })
    }
  }

  /**
   * A new leadership knows nothing of its followers' logs: their log ends are unknown (so
   * the high watermark waits for their first fetch) and ISR members get a full lag window.
   */
  private resetFollowers(): void {
    this.followers = NO_FOLLOWERS
    this.leaderEpochStartOffset = this.log.logEndOffset
    const now = this.context.nowMs()
    for (const id of this.state.replicas) {
      if (id === this.localBrokerId) continue
      this.ownFollowers().set(id, {
        logEndOffset: NO_OFFSET,
        lastCaughtUpTimeMs: this.state.isr.includes(id) ? now : 0,
        lastFetchLeaderLogEndOffset: FIRST_OFFSET,
        lastFetchTimeMs: 0,
        brokerEpoch: -1,
      })
    }
  }

  /** This partition's own followers map, made on the first write (NO_FOLLOWERS is shared). */
  private ownFollowers(): Map<BrokerId, FollowerState> {
    if (this.followers === NO_FOLLOWERS) this.followers = new Map()
    return this.followers as Map<BrokerId, FollowerState>
  }

  /** Calls `watcher` after every append to the log, until the returned function is called. */
  watchLogEnd(watcher: () => void): () => void {
    if (this.logEndWatchers === NO_WATCHERS) this.logEndWatchers = new Set()
    const watchers = this.logEndWatchers as Set<() => void>
    watchers.add(watcher)
    return () => watchers.delete(watcher)
  }

  /** Calls `watcher` whenever the high watermark advances, until the returned function is called. */
  watchHighWatermark(watcher: () => void): () => void {
    if (this.highWatermarkWatchers === NO_WATCHERS) this.highWatermarkWatchers = new Set()
    const watchers = this.highWatermarkWatchers as Set<() => void>
    watchers.add(watcher)
    return () => watchers.delete(watcher)
  }

  /**
   * Checks a request's current leader epoch (Fetch v9+, ListOffsets v4+): -1 means "not
   * given"; older means the client is behind (FENCED_LEADER_EPOCH), newer means we are
   * (UNKNOWN_LEADER_EPOCH).
   */
  checkLeaderEpoch(currentLeaderEpoch: number): void {
    if (currentLeaderEpoch === -1 || currentLeaderEpoch === this.leaderEpoch) return
    throw new KafkaError(
      currentLeaderEpoch < this.leaderEpoch ? ErrorCode.FENCED_LEADER_EPOCH : ErrorCode.UNKNOWN_LEADER_EPOCH,
      `leader epoch ${currentLeaderEpoch} vs ${this.leaderEpoch}`,
    )
  }

  /**
   * A consumer reads from the leader or, when it may read from any replica (KIP-392: Fetch
   * v11+ carries its client metadata), from a follower of a partition that has a leader.
   */
  ensureConsumerReadable(followerReadAllowed: boolean): void {
    if (this.isLeader) return
    if (followerReadAllowed && !this.isLeaderByMetadata && this.state.leader !== NO_LEADER) return
    this.ensureLeader()
  }

  /**
   * KIP-392: the follower a consumer in `clientRack` should fetch from instead of this
   * leader, or -1 (NO_BROKER_ID) to fetch here. Only ISR members whose log holds `fetchOffset` are named,
   * so a follower that falls out of the ISR is not named again, and a consumer sent to one
   * comes back here when its answer fails or the choice expires.
   */
  preferredReadReplica(
    fetchOffset: Offset,
    clientRack: string,
    rackOf: (brokerId: BrokerId) => string | null,
  ): BrokerId {
    const leader: ReplicaView = {
      brokerId: this.localBrokerId,
      rack: rackOf(this.localBrokerId),
      logEndOffset: this.log.logEndOffset,
      timeSinceLastCaughtUpMs: 0,
    }
    const now = this.context.nowMs()
    const candidates = [leader]
    for (const [brokerId, follower] of this.followers) {
      if (!this.state.isr.includes(brokerId) || follower.logEndOffset < fetchOffset) continue
      if (fetchOffset < this.log.logStartOffset) continue
      candidates.push({
        brokerId,
        rack: rackOf(brokerId),
        logEndOffset: follower.logEndOffset,
        timeSinceLastCaughtUpMs: now - caughtUpTimeMs(follower),
      })
    }
    const selected = selectRackAware(clientRack, leader, candidates)
    return selected.brokerId === this.localBrokerId ? NO_BROKER_ID : selected.brokerId
  }

  ensureLeader(): void {
    if (!this.isLeader)
      throw new KafkaError(
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        `not the leader of ${this.topic}-${this.partition}`,
      )
  }

  /**
   * DeleteRecords on the leader (Kafka's deleteRecordsOnLeader): the log now starts at
   * `offset` (-1: the high watermark), which must not pass the high watermark
   * (OFFSET_OUT_OF_RANGE). Resolves to the new log start offset (the low watermark).
   */
  deleteRecordsOnLeader(offset: Offset): Promise<Offset> {
    this.ensureLeader()
    return this.log.deleteRecordsBefore(offset)
  }

  /**
   * Appends a producer's records as leader. `requiredAcks` -1 needs min.insync.replicas
   * ISR members before the append (NOT_ENOUGH_REPLICAS otherwise).
   */
  async appendRecordsToLeader(
    records: Buffer,
    requiredAcks: Acks,
    minInsyncReplicas: number,
    leaderAppend: LeaderAppend = {},
  ): Promise<LogAppendInfo> {
    this.ensureLeader()
    if (requiredAcks === ACKS_ALL && this.isr.length < minInsyncReplicas) {
      throw new KafkaError(
        ErrorCode.NOT_ENOUGH_REPLICAS,
        `ISR ${this.isr.length} is below min.insync.replicas ${minInsyncReplicas}`,
      )
    }
    const needsPreparation = isLegacyMagic(records) || this.log.config.cleanupPolicy.includes('compact')
    // The log orders appends by call time; requests pipelined on one connection call this in
    // order, so the common path must reach log.append before its first await.
    if (!needsPreparation && this.preparingAppends === 0) return this.appendPrepared(records, leaderAppend)
    this.preparingAppends++
    const appended = this.preparedAppendTail.then(async () => {
      try {
        const batches = isLegacyMagic(records) ? await this.upConvert(records) : records
        if (this.log.config.cleanupPolicy.includes('compact')) await checkKeysPresent(batches)
        return this.appendPrepared(batches, leaderAppend)
      } finally {
        this.preparingAppends--
      }
    })
    this.preparedAppendTail = appended.catch(() => undefined)
    return appended
  }

  private async appendPrepared(batches: Buffer, leaderAppend: LeaderAppend): Promise<LogAppendInfo> {
    // A queued (prepared) append may run after this broker stopped leading: never write then.
    this.ensureLeader()
    const origin = leaderAppend.origin ?? 'client'
    checkProducerBatches(batches, origin)
    // Idempotent producers' sequence checks run inside log.append, on the log's queue
    // (ProducerStateManager as its ProducerStateHook): in call order, with no other append
    // between a batch's check and its offsets. A retry resolves with its first offsets.
    const appended = this.log.append(batches, {
      assignOffsets: true,
      leaderEpoch: this.leaderEpoch,
      origin,
      verificationGuard: leaderAppend.verificationGuard,
    })
    this.lastLeaderAppend = appended.catch(() => undefined)
    const info = await appended
    this.onAppended()
    this.maybeIncrementHighWatermark()
    return info
  }

  private onAppended(): void {
    for (const watcher of [...this.logEndWatchers]) watcher()
  }

  // ---- leader side: followers, ISR, high watermark ----------------------------------------

  /**
   * Records a follower's fetch at `fetchOffset` (its log end). It is caught up when it asks
   * for the leader's log end, or for what was the log end at its previous fetch (then it was
   * caught up as of that fetch), as Kafka's Replica.updateFetchState.
   */
  updateFollowerFetchState(replicaId: BrokerId, requestedOffset: Offset, brokerEpoch = -1): void {
    const follower = this.followers.get(replicaId)
    if (!follower || this.isStaleFetch(replicaId, brokerEpoch)) return
    foldSession(follower)
    if (brokerEpoch > follower.brokerEpoch) {
      // A new incarnation of the follower: what the previous one fetched says nothing of the
      // log this one has (it may have lost unflushed records), as Kafka's Replica resets.
      if (follower.brokerEpoch >= 0) {
        follower.logEndOffset = NO_OFFSET
        follower.lastCaughtUpTimeMs = 0
        follower.lastFetchLeaderLogEndOffset = FIRST_OFFSET
        follower.lastFetchTimeMs = 0
      }
      follower.brokerEpoch = brokerEpoch
    }
    const fetchOffset = receivedOffset(requestedOffset)
    const now = this.context.nowMs()
    const leaderLogEnd = this.log.logEndOffset
    if (fetchOffset >= leaderLogEnd) follower.lastCaughtUpTimeMs = now
    else if (fetchOffset >= follower.lastFetchLeaderLogEndOffset) {
      follower.lastCaughtUpTimeMs = Math.max(follower.lastCaughtUpTimeMs, follower.lastFetchTimeMs)
    }
    follower.logEndOffset = fetchOffset
    follower.lastFetchLeaderLogEndOffset = leaderLogEnd
    follower.lastFetchTimeMs = now
    this.maybeExpandIsr(replicaId, follower)
    this.maybeIncrementHighWatermark()
  }

  /**
   * Whether a follower's fetch comes from a fenced incarnation: its broker epoch is older
   * than one this leader saw it fetch with, or than its registration's (Kafka answers
   * NOT_LEADER_OR_FOLLOWER to such a fetch). A fetch without an epoch (-1) is never stale.
   */
  isStaleFetch(replicaId: BrokerId, brokerEpoch: number): boolean {
    if (brokerEpoch < 0) return false
    const seen = this.followers.get(replicaId)?.brokerEpoch ?? -1
    const registered = this.context.brokerEpochOf?.(replicaId) ?? -1
    return brokerEpoch < seen || brokerEpoch < registered
  }

  /**
   * A follower outside the ISR that reached the high watermark joins it, and only once it
   * also reached the log end this leadership started at: a new leader's high watermark may
   * lag what the previous one acknowledged (Kafka's KAFKA-7128 rule).
   */
  private maybeExpandIsr(replicaId: BrokerId, follower: FollowerState): void {
    if (this.maybeResendIsr() || this.state.isr.includes(replicaId)) return
    if (follower.logEndOffset < Math.max(this.log.highWatermark, this.leaderEpochStartOffset)) return
    if (this.context.isRegistered?.(replicaId) === false) return
    // KIP-903: only the incarnation the metadata registered may join, not one whose fetches
    // this leader has not seen yet (its predecessor's caught-up state proves nothing).
    const registered = this.context.brokerEpochOf?.(replicaId) ?? -1
    if (registered >= 0 && follower.brokerEpoch >= 0 && follower.brokerEpoch !== registered) return
    this.propose([...this.state.isr, replicaId])
  }

  /** Whether a follower's session may skip this partition (in the ISR, no change pending). */
  isFollowerInIsr(replicaId: BrokerId): boolean {
    return this.isLeader && this.pendingIsr === null && this.state.isr.includes(replicaId)
  }

  /** A follower's fetch times, which its fetch session may link to its clock (follower-session-news.ts). */
  followerTimes(replicaId: BrokerId): FollowerTimes | undefined {
    return this.followers.get(replicaId)
  }

  /** ISR followers that have not caught up within `lagTimeMaxMs` leave the ISR. */
  maybeShrinkIsr(lagTimeMaxMs: number): void {
    if (this.maybeResendIsr()) return
    const now = this.context.nowMs()
    // Runs over every led partition each replica.lag.time.max.ms / 2: nothing allocated
    // unless a member lags.
    let anyLagging = false
    for (const id of this.state.isr) anyLagging ||= this.isLagging(id, now, lagTimeMaxMs)
    if (!anyLagging) return
    this.propose(this.state.isr.filter((id) => !this.isLagging(id, now, lagTimeMaxMs)))
  }

  private isLagging(id: BrokerId, nowMs: number, lagTimeMaxMs: number): boolean {
    if (id === this.localBrokerId) return false
    const follower = this.followers.get(id)
    return follower === undefined || nowMs - caughtUpTimeMs(follower) > lagTimeMaxMs
  }

  /**
   * True when no new ISR change may be proposed now: not leader, or one in flight. A write
   * whose outcome is unknown is sent again as it was (same base epochs, so the
   * compare-and-set refuses it if the first one committed), as Kafka's AlterPartition
   * manager retries: dropping it would let the HW pass a member the store may have added.
   */
  private maybeResendIsr(): boolean {
    if (!this.isLeader) return true
    const pending = this.pendingIsr
    if (pending === null) return false
    if (pending.outcomeUnknown) {
      pending.outcomeUnknown = false
      this.sendProposal(pending, true)
    }
    return true
  }

  private propose(isr: readonly BrokerId[]): void {
    assert(isr.includes(this.localBrokerId), 'an ISR proposal must keep the leader')
    const pending: PendingIsr = {
      maximal: [...new Set([...this.state.isr, ...isr])],
      leaderEpoch: this.state.leaderEpoch,
      partitionEpoch: this.state.partitionEpoch,
      isr,
      brokerEpoch: this.context.localBrokerEpoch?.() ?? -1,
      addedMembers: isr
        .filter((id) => !this.state.isr.includes(id))
        .map((brokerId) => ({ brokerId, brokerEpoch: this.followers.get(brokerId)?.brokerEpoch ?? -1 })),
      outcomeUnknown: false,
    }
    this.pendingIsr = pending
    this.sendProposal(pending, false)
  }

  private sendProposal(pending: PendingIsr, resent: boolean): void {
    const isr = pending.isr
    const proposal: IsrProposal = {
      topic: this.topic,
      topicId: this.id.topicId,
      partition: this.partition,
      leaderEpoch: pending.leaderEpoch,
      partitionEpoch: pending.partitionEpoch,
      isr,
      brokerEpoch: pending.brokerEpoch,
      addedMembers: pending.addedMembers,
    }
    this.context.alterIsr(proposal).then(
      (committed) => {
        // Committed: the new state (a newer partition epoch) is on its way through the
        // metadata, and until it is applied here the maximal ISR keeps bounding the HW.
        // Refused: the state moved on; the next fetch or lag check proposes afresh. A resent
        // write refused may be refused because the first one committed: it waits for the
        // newer state (the store has it, so the metadata brings it) to end it.
        if (!committed && !resent && this.pendingIsr === pending) this.onProposalRefused()
      },
      () => {
        // No answer: the next fetch or lag check sends it again; meanwhile it bounds the HW.
        if (this.pendingIsr === pending) pending.outcomeUnknown = true
      },
    )
  }

  /**
   * The change in flight was refused: the committed ISR bounds the HW again. A refused
   * expansion's new member no longer holds it down, so the HW is raised now rather than at
   * the next fetch or produce (seed 5 of `--scale 1000 --ticks 6000 --store-stalls`: the
   * member added shut down meanwhile, and the HW stayed 3 offsets below what the ISR held).
   */
  private onProposalRefused(): void {
    this.pendingIsr = null
    this.maybeIncrementHighWatermark()
  }

  /** The ISR the high watermark must respect: committed plus proposed while a change is in flight. */
  private get maximalIsr(): readonly BrokerId[] {
    return this.pendingIsr?.maximal ?? this.state.isr
  }

  /** The high watermark is the smallest log end among ISR members (a new member's included). */
  maybeIncrementHighWatermark(): void {
    if (!this.isLeader) return
    // KIP-966: below min ISR (capped at the replication factor) the HW stays, so a replica
    // that leaves the ISR meanwhile (for the ELR) still holds every committed record.
    const minIsr = Math.min(this.context.minInsyncReplicas?.(this.topic) ?? 1, this.state.replicas.length)
    if (this.state.isr.length < minIsr) return
    let candidate: Offset = this.log.logEndOffset
    for (const id of this.maximalIsr) {
      if (id === this.localBrokerId) continue
      const follower = this.followers.get(id)
      if (!follower || follower.logEndOffset < 0) return // unknown yet: wait for its fetch
      candidate = minOffset(candidate, follower.logEndOffset)
    }
    this.setHighWatermark(candidate)
  }

  private setHighWatermark(offset: Offset): void {
    const before = this.log.highWatermark
    if (offset <= before) return
    const after = this.log.updateHighWatermark(offset)
    assert(after <= this.log.logEndOffset, 'high watermark beyond the log end')
    if (after > before) for (const watcher of [...this.highWatermarkWatchers]) watcher()
  }

  /** Per-follower lag, for DescribeLogDirs and topic descriptions. */
  followerLag(): FollowerLag[] {
    const now = this.context.nowMs()
    const end = this.log.logEndOffset
    return [...this.followers].map(([brokerId, f]) => ({
      brokerId,
      logEndOffset: f.logEndOffset,
      lagMessages: f.logEndOffset < 0 ? end : end - f.logEndOffset,
      caughtUpAgoMs: now - caughtUpTimeMs(f),
    }))
  }

  /** Reads for a follower: everything appended, up to the log end. */
  readForFollower(fetchOffset: Offset, maxBytes: number): Promise<FetchDataInfo> {
    return this.readLog(receivedOffset(fetchOffset), {
      maxBytes,
      maxOffset: this.log.logEndOffset,
      minOneMessage: true,
    })
  }

  /**
   * Every read of the log goes through here. A batch that fails its CRC or framing is
   * never served: a follower (read by a consumer near it, KIP-392) cuts its log there and
   * fetches the rest from the leader again; a leader takes its log dir offline, so the
   * controller moves leadership to an in-sync replica, whose copy passed the same checks
   * when it was appended. The reader gets KAFKA_STORAGE_ERROR and retries.
   */
  private async readLog(offset: Offset, options: Parameters<UnifiedLog['read']>[1]): Promise<FetchDataInfo> {
    try {
      return await this.log.read(offset, options)
    } catch (err) {
      if (!(err instanceof CorruptSegmentError)) throw err
      if (this.isLeaderByMetadata) this.log.markCorrupt(err)
      else {
        await this.log.truncateAtCorruption(err)
        this.context.onFollowerLogCut?.(this.topic, this.partition)
      }
      throw err
    }
  }

  // ---- follower side -----------------------------------------------------------------------

  /** Appends batches fetched from the leader, offsets and leader epochs as they are. */
  async appendAsFollower(batches: Buffer, leaderHighWatermark: number): Promise<void> {
    assert(!this.isLeaderByMetadata, 'a leader does not append fetched batches')
    if (batches.length > 0) {
      await this.log.append(batches, { assignOffsets: false })
      this.onAppended()
    }
    this.updateFollowerHighWatermark(leaderHighWatermark)
  }

  /**
   * Follower truncation (Kafka's Partition.truncateTo): cuts the log at `targetOffset`, the
   * end of the leader's epoch history (OffsetForLeaderEpoch) or of its log (ListOffsets).
   * The replica fetcher's truncations all come here: a leader's log, or a target past the
   * log end, is a bug (InvariantError). The log asserts the rest once it is cut: log start
   * <= high watermark <= log end (UnifiedLog.checkInvariants), and its leader epoch cache
   * keeps no epoch starting at or past the new end (truncateFromEnd). The log's
   * promise is returned as is: an await here would add a turn to every truncation, and the
   * deterministic simulation's seeds would replay other histories.
   */
  truncateTo(targetOffset: Offset): Promise<boolean> {
    this.checkFollowerTruncation('truncateTo', targetOffset)
    const logEndOffset = this.log.logEndOffset
    assert(
      targetOffset <= logEndOffset,
      () => `${this.topic}-${this.partition}: truncation to ${targetOffset} past the log end ${logEndOffset}`,
    )
    return this.log.truncateTo(targetOffset)
  }

  /**
   * Resolves once every append this replica took while leading has reached its log (or
   * failed). A replica that stopped leading waits for them before it decides what to
   * truncate, as Kafka's makeFollower waits on leaderIsrUpdateLock for the appends holding
   * it: an append still queued when the fetcher compared the leader's epoch end with the log
   * end landed afterwards, and the replica kept a batch of its old epoch that the new
   * leader never had (a 30-minute netfault run: an ABORT marker at 29220 on one replica,
   * written 2.5 s later in the next epoch on the others).
   */
  leaderAppendsLanded(): Promise<unknown> {
    return this.lastLeaderAppend
  }

  /** A follower behind the leader's log start (Kafka's truncateFullyAndStartAt) starts over there. */
  truncateFullyAndStartAt(newOffset: Offset): Promise<void> {
    this.checkFollowerTruncation('truncateFullyAndStartAt', newOffset)
    return this.log.truncateFullyAndStartAt(newOffset)
  }

  private checkFollowerTruncation(operation: string, offset: Offset): void {
    assert(
      !this.isLeaderByMetadata,
      () => `${this.topic}-${this.partition}: ${operation}(${offset}) on the leader's log`,
    )
  }

  /** A follower's high watermark is the leader's, capped by what it has. */
  updateFollowerHighWatermark(leaderHighWatermark: number): void {
    if (this.isLeaderByMetadata) return
    const reported = receivedOffset(leaderHighWatermark)
    this.lastLeaderHighWatermark = reported
    this.setHighWatermark(minOffset(reported, this.log.logEndOffset))
  }

  /**
   * How far this replica's log is behind what is committed: for a follower, the leader's
   * last reported high watermark minus its own log end; 0 for the leader.
   */
  get offsetLag(): number {
    if (this.isLeaderByMetadata) return 0
    return Math.max(0, this.lastLeaderHighWatermark - this.log.logEndOffset)
  }

  /**
   * Old clients send magic 0/1 message sets; the log stores v2 only, as Kafka 3.x does.
   * LogAppendTime, when the topic asks for it, is stamped by the log like any batch.
   */
  private upConvert(records: Buffer): Promise<Buffer> {
    return convertLegacyToV2(records)
  }

  /**
   * Reads committed records for a consumer: up to the high watermark, or for
   * read_committed up to the LSO with the aborted transactions overlapping what was read
   * (Kafka's addAbortedTransactions: the consumer drops their records).
   */
  async read(
    fetchOffset: Offset,
    maxBytes: number,
    isolation: IsolationLevel,
    minOneMessage: boolean,
  ): Promise<ConsumerRead> {
    const committed = isolation === 'read_committed'
    const maxOffset = committed ? this.lastStableOffset : this.highWatermark
    const info = await this.readLog(receivedOffset(fetchOffset), { maxBytes, maxOffset, minOneMessage })
    if (!committed) return { info, abortedTransactions: undefined }
    const abortedTransactions =
      info.sizeInBytes === 0 ? [] : this.log.collectAbortedTransactions(info.firstOffset, info.nextOffset)
    return { info, abortedTransactions }
  }

  /** Bytes between `fetchOffset` and the high watermark are available when the log end moved. */
  hasDataAfter(fetchOffset: Offset, isolation: IsolationLevel): boolean {
    const bound = isolation === 'read_committed' ? this.lastStableOffset : this.highWatermark
    return fetchOffset < bound
  }
}

/**
 * An offset as a consumer, a follower or the leader sent it. Not asserted: the log answers
 * one outside [logStartOffset, logEndOffset] with OFFSET_OUT_OF_RANGE, and clamps a reported
 * high watermark into its own range.
 */
function receivedOffset(value: number): Offset {
  return value as Offset
}
