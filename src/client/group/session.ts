/**
 * What a subscribed consumer does around each poll, as the Java consumer's
 * ConsumerCoordinator.poll: (re)join the group when needed (eager protocol: commit and
 * give up every partition first, then join, then seed positions from the committed
 * offsets), auto-commit every auto.commit.interval.ms, and on close commit, revoke and
 * leave. The partitions themselves are handed to the consumer's own assign machinery
 * through `GroupHost`, so fetching is the same as in assign mode.
 *
 * A join runs in the background: a poll waits for it only until its own deadline, and the
 * next poll waits again, as Java's poll(timeout) does.
 *
 * Cooperative protocol (KIP-429, every assignor cooperative): the member keeps its
 * partitions and goes on fetching them while it rejoins (polls do not wait for the join);
 * the new assignment is applied as a delta: partitions no longer assigned are committed and
 * revoked, then the member rejoins at once so that their new owner gets them in the
 * follow-up rebalance; partitions added are positioned at their committed offsets. The
 * listeners see only the delta. A member whose generation is gone (ILLEGAL_GENERATION,
 * UNKNOWN_MEMBER_ID) has lost its partitions: it drops them all without committing.
 */
import type { Clock } from '../../common/clock.js'
import { asClientError, type KafkaClientError } from '../errors.js'
import { type TopicPartition, tpKey } from '../leader-requests.js'
import { GroupMembership, type MembershipOptions, type OffsetToCommit } from './membership.js'

/** consumer.close()'s options. */
export interface CloseOptions {
  /**
   * Leave as a process that dies would: no commit, no revocation callback, no LeaveGroup;
   * heartbeats stop and the coordinator expires the member after its session timeout
   * (fault tests: the group must then hand its partitions on from the committed offsets).
   */
  readonly abandon?: boolean
}

export interface GroupHost {
  /** Replaces the consumer's partitions; `offset` absent: autoOffsetReset decides. */
  setAssignment(partitions: readonly (TopicPartition & { offset?: number })[]): void
  assignment(): TopicPartition[]
  /** The next offset to consume of each partition that has a position. */
  positions(): OffsetToCommit[]
  /** Adds partitions to the current ones (cooperative), leaving the others untouched. */
  addPartitions(partitions: readonly (TopicPartition & { offset?: number })[]): void
  /** Removes partitions (cooperative), leaving the others untouched. */
  removePartitions(partitions: readonly TopicPartition[]): void
  /** Wakes a poll waiting for records. */
  wake(): void
}

export type RebalanceListener = (partitions: TopicPartition[]) => Promise<void> | void

export interface SessionOptions extends MembershipOptions {
  enableAutoCommit: boolean
  autoCommitIntervalMs: number
  onPartitionsAssigned?: RebalanceListener
  onPartitionsRevoked?: RebalanceListener
}

export class GroupSession {
  readonly membership: GroupMembership
  /** The last auto-commit's failure, if it failed (auto-commits never throw into poll). */
  lastAutoCommitError: KafkaClientError | null = null
  private joining: Promise<void> | null = null
  /** A failure of the background join or of a rebalance listener, thrown by the next poll. */
  private pendingError: KafkaClientError | null = null
  private autoCommitTask: Promise<void> | null = null
  private nextAutoCommitMs = 0
  /** Offsets this member last committed, by tpKey (auto-commit skips unchanged ones). */
  private readonly committed = new Map<string, number>()
  private interruptWait: (() => void) | null = null
  /** Cooperative: partitions dropped when the generation was lost, not yet announced. */
  private lost: TopicPartition[] = []
  private closed = false
  private readonly clock: Clock

  constructor(
    client: ConstructorParameters<typeof GroupMembership>[0],
    private readonly options: SessionOptions,
    private readonly host: GroupHost,
  ) {
    this.clock = client.clock
    this.membership = new GroupMembership(
      client,
      options,
      () => {
        this.host.wake()
        this.interrupt()
      },
      () => this.host.assignment(),
      () => this.onGenerationLost(),
    )
  }

  /**
   * Cooperative: partitions kept through a rebalance are only ours while the generation is;
   * once it is gone (Java's onPartitionsLost) they stop at once, uncommitted, and the
   * revocation listener hears of them at the next rebalance step.
   */
  private onGenerationLost(): void {
    if (!this.cooperative || this.closed) return
    const owned = this.host.assignment()
    if (owned.length === 0) return
    this.host.removePartitions(owned)
    this.lost.push(...owned)
  }

  private async announceLost(): Promise<void> {
    const lost = this.lost
    if (lost.length === 0) return
    this.lost = []
    await this.callListener(this.options.onPartitionsRevoked, lost)
  }

  private get cooperative(): boolean {
    return this.membership.rebalanceProtocol === 'cooperative'
  }

  get subscribed(): boolean {
    return this.membership.isSubscribed
  }

  subscribe(topics: readonly string[] | RegExp): void {
    if (topics instanceof RegExp) this.membership.subscribePattern(topics)
    else this.membership.subscribe(topics)
  }

  /**
   * Java's unsubscribe: after a join still running, commits (auto-commit), revokes every
   * partition, leaves the group (dynamic members) and forgets the member id and generation;
   * subscribe() or assign() may follow.
   */
  async unsubscribe(): Promise<void> {
    if (!this.subscribed) return
    await this.joining
    await this.autoCommitTask
    const owned = this.host.assignment()
    if (this.membership.state === 'stable' && owned.length > 0 && this.options.enableAutoCommit)
      await this.commitQuietly()
    this.host.setAssignment([])
    if (owned.length > 0) await this.callListener(this.options.onPartitionsRevoked, owned)
    this.membership.unsubscribe()
    await this.membership.stopHeartbeats()
    if (this.options.groupInstanceId === null)
      await this.membership.leave('the consumer unsubscribed from all topics')
    this.membership.resetGeneration(true)
    this.membership.state = 'unjoined'
    this.membership.rejoinNeeded = true
    this.committed.clear()
  }

  /**
   * Called at every pass of a poll. Throws a fatal group error; returns false while a join
   * is still running at `deadlineMs` (the poll then returns no records).
   */
  async beforePoll(deadlineMs: number): Promise<boolean> {
    this.membership.notePoll()
    this.throwPending()
    if (!this.subscribed) {
      this.maybeAutoCommit() // assign mode with a groupId: simple commits
      return true
    }
    if (!this.joining && this.membership.rejoinNeeded && !this.closed) this.startRejoin()
    // Cooperative: the partitions kept through the rebalance go on being fetched meanwhile.
    if (this.joining && this.cooperative && this.host.assignment().length > 0) return true
    if (this.joining) {
      await this.waitFor(this.joining, deadlineMs - this.clock.monotonicMs())
      this.throwPending()
      if (this.isJoining()) return false
    }
    this.maybeAutoCommit()
    return true
  }

  /** Ends a wait in beforePoll early (stop(), close(), a rebalance request). */
  interrupt(): void {
    const wake = this.interruptWait
    this.interruptWait = null
    wake?.()
  }

  /** Commits the consumed positions, or the given offsets. */
  async commit(offsets?: readonly OffsetToCommit[]): Promise<void> {
    const list = offsets ?? this.host.positions()
    await this.membership.commit(list, { simple: !this.subscribed })
    for (const o of list) this.committed.set(tpKey(o), o.offset)
  }

  async committedOffsets(partitions: readonly TopicPartition[]): Promise<Map<string, number>> {
    return this.membership.fetchOffsets(partitions)
  }

  /** Commits (auto-commit), revokes, leaves (dynamic members only, as Java), and stops heartbeats. */
  async close(options: CloseOptions = {}): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.interrupt()
    await this.autoCommitTask
    if (options.abandon) {
      this.host.setAssignment([])
      return this.membership.close({ leave: false })
    }
    const owned = this.host.assignment()
    if (!this.subscribed && owned.length > 0 && this.options.enableAutoCommit) await this.commitQuietly()
    if (this.membership.state === 'stable' && owned.length > 0) {
      if (this.options.enableAutoCommit) await this.commitQuietly()
      await this.callListener(this.options.onPartitionsRevoked, owned)
    }
    this.host.setAssignment([])
    await this.membership.close({ leave: this.options.groupInstanceId === null })
  }

  /** Resolves once a join still running at close has ended (after the client closed, at once). */
  async settled(): Promise<void> {
    await this.joining
  }

  private isJoining(): boolean {
    return this.joining !== null
  }

  private throwPending(): void {
    // Thrown once, as Java's poll does; the next poll tries to join again.
    const fatal = this.membership.fatalError
    if (fatal) {
      this.membership.fatalError = null
      throw fatal
    }
    const error = this.pendingError
    if (!error) return
    this.pendingError = null
    throw error
  }

  private startRejoin(): void {
    const joining = this.rebalance().then(
      () => undefined,
      (error: unknown) => {
        if (!this.closed) this.pendingError = asClientError(error)
      },
    )
    const tracked = joining.finally(() => {
      if (this.joining === tracked) this.joining = null
      this.host.wake()
    })
    this.joining = tracked
  }

  private rebalance(): Promise<void> {
    return this.cooperative ? this.cooperativeRebalance() : this.eagerRebalance()
  }

  /** Eager rebalance: commit and revoke everything, join, seed positions, announce. */
  private async eagerRebalance(): Promise<void> {
    await this.autoCommitTask
    const owned = this.host.assignment()
    if (owned.length > 0) {
      // Commits only while the generation is still ours (else the partitions are already lost).
      if (this.options.enableAutoCommit && this.membership.generationId >= 0) await this.commitQuietly()
      this.host.setAssignment([])
      await this.callListener(this.options.onPartitionsRevoked, owned)
    }
    const assigned = await this.membership.join()
    const committed = await this.membership.fetchOffsets(assigned)
    this.committed.clear()
    for (const [key, offset] of committed) if (offset >= 0) this.committed.set(key, offset)
    this.host.setAssignment(
      assigned.map((tp) => {
        const offset = committed.get(tpKey(tp)) ?? -1
        return offset >= 0 ? { ...tp, offset } : { ...tp }
      }),
    )
    this.nextAutoCommitMs = this.clock.monotonicMs() + this.options.autoCommitIntervalMs
    await this.callListener(this.options.onPartitionsAssigned, assigned)
  }

  /** Cooperative rebalance (Java's onJoinPrepare/onJoinComplete for COOPERATIVE). */
  private async cooperativeRebalance(): Promise<void> {
    await this.autoCommitTask
    await this.announceLost()
    const owned = this.host.assignment()
    if (owned.length > 0 && this.membership.generationId < 0) {
      // Not joined yet, or the generation is gone: nothing of ours to commit.
      this.host.removePartitions(owned)
      await this.callListener(this.options.onPartitionsRevoked, owned)
    } else if (owned.length > 0) {
      // Partitions of topics no longer subscribed go now; the others stay through the join.
      const subscribed = new Set(this.membership.subscription)
      const dropped = owned.filter((tp) => !subscribed.has(tp.topic))
      const positions = this.host.positions()
      this.host.removePartitions(dropped)
      if (this.options.enableAutoCommit) await this.commitQuietly(positions)
      if (dropped.length > 0) await this.callListener(this.options.onPartitionsRevoked, dropped)
    }
    const assigned = await this.membership.join()
    await this.announceLost()
    const before = this.host.assignment()
    const assignedKeys = new Set(assigned.map(tpKey))
    const beforeKeys = new Set(before.map(tpKey))
    const revoked = before.filter((tp) => !assignedKeys.has(tpKey(tp)))
    const added = assigned.filter((tp) => !beforeKeys.has(tpKey(tp)))
    if (revoked.length > 0) {
      // Positions taken and the partitions removed at once: polls go on while the commit runs.
      const positions = this.positionsOf(revoked)
      this.host.removePartitions(revoked)
      if (this.options.enableAutoCommit) await this.commitQuietly(positions)
      await this.callListener(this.options.onPartitionsRevoked, revoked)
      // Their new owner gets them in the next rebalance, which this member starts now.
      this.membership.requestRejoin('need to revoke partitions and re-join')
    }
    const committed = await this.membership.fetchOffsets(added)
    for (const [key, offset] of committed) if (offset >= 0) this.committed.set(key, offset)
    this.host.addPartitions(
      added.map((tp) => {
        const offset = committed.get(tpKey(tp)) ?? -1
        return offset >= 0 ? { ...tp, offset } : { ...tp }
      }),
    )
    this.nextAutoCommitMs = this.clock.monotonicMs() + this.options.autoCommitIntervalMs
    // As Java's cooperative protocol: called after every rebalance, with what was added (maybe nothing).
    await this.callListener(this.options.onPartitionsAssigned, added)
  }

  private positionsOf(partitions: readonly TopicPartition[]): OffsetToCommit[] {
    const keys = new Set(partitions.map(tpKey))
    return this.host.positions().filter((p) => keys.has(tpKey(p)))
  }

  private maybeAutoCommit(): void {
    if (!this.options.enableAutoCommit || this.autoCommitTask) return
    if (this.subscribed && this.membership.state !== 'stable') return
    const now = this.clock.monotonicMs()
    if (now < this.nextAutoCommitMs) return
    this.nextAutoCommitMs = now + this.options.autoCommitIntervalMs
    const changed = this.host.positions().filter((p) => this.committed.get(tpKey(p)) !== p.offset)
    if (changed.length === 0) return
    const task = this.commit(changed).then(
      () => {
        this.lastAutoCommitError = null
      },
      (error: unknown) => {
        // As Java: an async auto-commit failure is remembered, not thrown; a refused
        // generation has already asked for a rejoin.
        this.lastAutoCommitError = asClientError(error)
      },
    )
    const tracked = task.finally(() => {
      if (this.autoCommitTask === tracked) this.autoCommitTask = null
    })
    this.autoCommitTask = tracked
  }

  /** A commit before revoking or closing: a failure is remembered (the partitions go anyway). */
  private async commitQuietly(offsets?: readonly OffsetToCommit[]): Promise<void> {
    try {
      await this.commit(offsets)
    } catch (error) {
      this.lastAutoCommitError = asClientError(error)
    }
  }

  private async callListener(listener: RebalanceListener | undefined, partitions: TopicPartition[]) {
    if (!listener) return
    try {
      await listener(partitions.map((tp) => ({ topic: tp.topic, partition: tp.partition })))
    } catch (error) {
      // As Java: a listener's exception surfaces from the poll, after the rebalance step.
      this.pendingError ??= asClientError(error)
    }
  }

  private waitFor(promise: Promise<void>, timeoutMs: number): Promise<void> {
    if (timeoutMs <= 0) return Promise.resolve()
    return new Promise((resolve) => {
      const timer = this.clock.setTimeout(done, timeoutMs)
      const self = this
      function done(): void {
        timer.cancel()
        if (self.interruptWait === done) self.interruptWait = null
        resolve()
      }
      this.interruptWait = done
      promise.then(done, done)
    })
  }
}
