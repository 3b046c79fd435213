/**
 * A group member on KIP-848's consumer protocol (`groupProtocol: 'consumer'`), as the Java
 * consumer's ConsumerMembershipManager speaks it: one ConsumerGroupHeartbeat loop to the
 * coordinator carries the subscription (topic names, or a RegExp's source as
 * SubscribedTopicRegex), the partitions the member owns, and its epoch; the coordinator
 * assigns (server-side assignors) and answers with the partitions the member may use now.
 * The member reconciles each new assignment as a delta, like the cooperative protocol:
 * partitions gone are committed (auto-commit), announced to onPartitionsRevoked and dropped,
 * and the next heartbeat, sent at once, says so (the coordinator hands them to their new
 * owner only then); partitions added start at their committed offsets and are announced to
 * onPartitionsAssigned. Offsets are committed and fetched with the member id and epoch
 * (OffsetCommit/OffsetFetch v9).
 *
 * Errors, as Java's:
 * - FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID: the partitions are lost (dropped without a
 *   commit, announced as revoked); the member rejoins with epoch 0.
 * - NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost connection or a timeout: find the
 *   coordinator again after a backoff; COORDINATOR_LOAD_IN_PROGRESS: retry after a backoff.
 * - anything else (UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED, UNRELEASED_INSTANCE_ID,
 *   INVALID_REQUEST, GROUP_ID_NOT_FOUND, an unsupported API): fatal, the next poll throws.
 * Close and unsubscribe leave the group (epoch -1; -2 for a static member, which keeps its
 * partitions for its return).
 */
import type { Clock } from '../../common/clock.js'
import { randomUuid } from '../../common/random.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type ConsumerGroupHeartbeatRequest,
  type ConsumerGroupHeartbeatResponse,
  type OffsetCommitResponse,
  type OffsetFetchResponse,
} from '../../protocol/generated/index.js'
import type { KafkaClient } from '../client.js'
import { asClientError, ClientClosedError, KafkaClientError, KafkaProtocolError } from '../errors.js'
import { findGroupCoordinator } from '../find-coordinator.js'
import { type TopicPartition, tpKey } from '../leader-requests.js'
import { sleep } from '../retry.js'
import { COORDINATOR_GONE, CommitFailedError, coordinatorLost, MEMBER_FENCED } from './errors.js'
import type { OffsetToCommit } from './membership.js'
import type { CloseOptions, GroupHost, RebalanceListener } from './session.js'

export interface ConsumerProtocolOptions {
  groupId: string
  groupInstanceId: string | null
  /** group.remote.assignor: the server-side assignor to ask for; null: the broker's default. */
  remoteAssignor: string | null
  rebalanceTimeoutMs: number
  enableAutoCommit: boolean
  autoCommitIntervalMs: number
  onPartitionsAssigned?: RebalanceListener
  onPartitionsRevoked?: RebalanceListener
}

const LEAVE_EPOCH = -1
const STATIC_LEAVE_EPOCH = -2
/** Until the first answer gives the broker's group.consumer.heartbeat.interval.ms. */
const INITIAL_HEARTBEAT_INTERVAL_MS = 5000
const OFFSET_ATTEMPTS_MAX = 10

function retriable(error: unknown): boolean {
  return (
    coordinatorLost(error) ||
    (error instanceof KafkaProtocolError &&
      (error.errorCode === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS ||
        error.errorCode === ErrorCode.UNSTABLE_OFFSET_COMMIT ||
        error.errorCode === ErrorCode.STALE_MEMBER_EPOCH))
  )
}

export class ConsumerProtocolSession {
  /** The identity consumer.ts reports (groupMetadata(): the member epoch as generation). */
  readonly membership: {
    readonly options: { readonly groupId: string; readonly groupInstanceId: string | null }
    memberId: string
    generationId: number
    subscription: string[]
  }
  lastAutoCommitError: KafkaClientError | null = null
  private topics: string[] | null = null
  private pattern: RegExp | null = null
  private memberEpoch = 0
  private coordinatorId: number | null = null
  private loop: { readonly abort: AbortController; readonly task: Promise<void> } | null = null
  /** Everything the next heartbeat must send again (after a join or a lost response). */
  private sendFull = true
  private heartbeatIntervalMs = INITIAL_HEARTBEAT_INTERVAL_MS
  private firstAssignment: { promise: Promise<void>; resolve: () => void } | null = null
  private pendingError: KafkaClientError | null = null
  private wakeLoop: (() => void) | null = null
  private autoCommitTask: Promise<void> | null = null
  private nextAutoCommitMs = 0
  private readonly committed = new Map<string, number>()
  /**
   * The offset each partition's latest commit asked for: a commit retried after a backoff
   * (STALE_MEMBER_EPOCH while the epoch moves on) drops what a later commit superseded, so
   * an older auto-commit never overwrites a newer commit (a later, lower one still goes).
   */
  private readonly requested = new Map<string, number>()
  private closed = false
  private readonly clock: Clock

  constructor(
    private readonly client: KafkaClient,
    private readonly options: ConsumerProtocolOptions,
    private readonly host: GroupHost,
  ) {
    this.clock = client.clock
    // KIP-1082: the member makes its own id (ConsumerGroupHeartbeat v1 requires one).
    this.membership = {
      options: { groupId: options.groupId, groupInstanceId: options.groupInstanceId },
      memberId: randomUuid(client.random),
      generationId: -1,
      subscription: [],
    }
  }

  get subscribed(): boolean {
    return this.topics !== null || this.pattern !== null
  }

  subscribe(topics: readonly string[] | RegExp): void {
    if (topics instanceof RegExp) {
      this.pattern = topics
      this.topics = null
      this.membership.subscription = []
    } else {
      this.topics = [...new Set(topics)].sort()
      this.pattern = null
      this.membership.subscription = [...this.topics]
      this.client.addInterest(this.topics)
    }
    this.sendFull = true
    this.firstAssignment ??= deferred()
    if (!this.loop && !this.closed) this.startLoop()
    else this.kick()
  }

  /** Leaves the group (revoking everything, after a commit with auto-commit); subscribe() may follow. */
  async unsubscribe(): Promise<void> {
    if (!this.subscribed) return
    await this.stopAndLeave(LEAVE_EPOCH)
    this.topics = null
    this.pattern = null
    this.membership.subscription = []
    this.memberEpoch = 0
    this.membership.generationId = -1
    this.sendFull = true
    this.committed.clear()
  }

  /** Throws a fatal group error; waits (until `deadlineMs`) for the first assignment. */
  async beforePoll(deadlineMs: number): Promise<boolean> {
    this.throwPending()
    if (!this.subscribed) {
      this.maybeAutoCommit()
      return true
    }
    const first = this.firstAssignment
    if (first) {
      const left = deadlineMs - this.clock.monotonicMs()
      if (left > 0) await Promise.race([first.promise, sleep(this.clock, left)])
      this.throwPending()
      if (this.firstAssignment) return false
    }
    this.maybeAutoCommit()
    return true
  }

  interrupt(): void {
    this.firstAssignment?.resolve()
  }

  async commit(offsets?: readonly OffsetToCommit[]): Promise<void> {
    const list = offsets ?? this.host.positions()
    if (list.length === 0) return
    const simple = !this.subscribed
    if (!simple && this.memberEpoch <= 0)
      throw new CommitFailedError(ErrorCode.UNKNOWN_MEMBER_ID, 'the consumer has no member epoch yet', list)
    for (const o of list) this.requested.set(tpKey(o), o.offset)
    await this.withRetries(async () => {
      const current = list.filter((o) => this.requested.get(tpKey(o)) === o.offset)
      if (current.length === 0) return
      const epoch = simple ? -1 : this.memberEpoch
      const response = await this.toCoordinator<OffsetCommitResponse>(ApiKey.OffsetCommit, (version) => {
        if (!simple && version < 9)
          throw new KafkaClientError(
            'ERR_UNSUPPORTED_VERSION',
            'OffsetCommit v9 is needed with groupProtocol consumer',
          )
        return commitRequest(this.options.groupId, simple ? '' : this.membership.memberId, epoch, current)
      })
      const failed = response.topics.flatMap((t) =>
        t.partitions
          .filter((p) => p.errorCode !== ErrorCode.NONE)
          .map((p) => ({ topic: t.name, partition: p.partitionIndex, errorCode: p.errorCode })),
      )
      if (failed.length === 0) return
      const code = failed[0].errorCode
      if (code === ErrorCode.STALE_MEMBER_EPOCH)
        throw new KafkaProtocolError(code, 'commit with an old epoch')
      if (MEMBER_FENCED.has(code))
        throw new CommitFailedError(code, `${this.options.groupId} epoch ${epoch}`, failed)
      throw new KafkaProtocolError(code, `commit of group ${this.options.groupId}`)
    })
    for (const o of list) this.committed.set(tpKey(o), o.offset)
  }

  async committedOffsets(partitions: readonly TopicPartition[]): Promise<Map<string, number>> {
    if (partitions.length === 0) return new Map()
    const byTopic = new Map<string, number[]>()
    for (const tp of partitions) byTopic.set(tp.topic, [...(byTopic.get(tp.topic) ?? []), tp.partition])
    const topics = [...byTopic].map(([name, partitionIndexes]) => ({ name, partitionIndexes }))
    return this.withRetries(async () => {
      const member = this.subscribed && this.memberEpoch > 0
      const response = await this.toCoordinator<OffsetFetchResponse>(ApiKey.OffsetFetch, (version) =>
        version >= 8
          ? {
              groupId: '',
              topics: [],
              groups: [
                {
                  groupId: this.options.groupId,
                  memberId: member && version >= 9 ? this.membership.memberId : null,
                  memberEpoch: member && version >= 9 ? this.memberEpoch : -1,
                  topics,
                },
              ],
              requireStable: true,
            }
          : { groupId: this.options.groupId, topics, groups: [], requireStable: true },
      )
      const group = response.groups.length > 0 ? response.groups[0] : response
      if (group.errorCode !== ErrorCode.NONE)
        throw new KafkaProtocolError(group.errorCode, `offsets of group ${this.options.groupId}`)
      const offsets = new Map<string, number>()
      for (const t of group.topics)
        for (const p of t.partitions) {
          if (p.errorCode !== ErrorCode.NONE)
            throw new KafkaProtocolError(p.errorCode, `offset of ${t.name}-${p.partitionIndex}`)
          offsets.set(tpKey({ topic: t.name, partition: p.partitionIndex }), Number(p.committedOffset))
        }
      return offsets
    })
  }

  async close(options: CloseOptions = {}): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.interrupt()
    if (options.abandon) await this.abandon()
    else if (this.subscribed)
      await this.stopAndLeave(this.options.groupInstanceId !== null ? STATIC_LEAVE_EPOCH : LEAVE_EPOCH)
    else {
      await this.autoCommitTask
      if (this.options.enableAutoCommit && this.host.assignment().length > 0) await this.commitQuietly()
    }
  }

  async settled(): Promise<void> {
    await this.loop?.task
  }

  // ---- the heartbeat loop ------------------------------------------------------------

  private startLoop(): void {
    const abort = new AbortController()
    const task = this.heartbeatLoop(abort.signal).catch((error: unknown) => {
      this.pendingError = asClientError(error)
      this.firstAssignment?.resolve()
      this.host.wake()
    })
    this.loop = { abort, task }
  }

  /** Sends the next heartbeat now instead of after the interval. */
  private kick(): void {
    const wake = this.wakeLoop
    this.wakeLoop = null
    wake?.()
  }

  private async heartbeatLoop(signal: AbortSignal): Promise<void> {
    for (let failures = 0; !signal.aborted && !this.closed; ) {
      let immediate = false
      try {
        const response = await this.heartbeat(this.memberEpoch)
        if (signal.aborted) return
        immediate = await this.onHeartbeat(response)
        failures = 0
      } catch (error) {
        if (signal.aborted) return
        if (!retriable(error)) throw error
        if (coordinatorLost(error)) this.coordinatorId = null
        // The answer may have been lost: the next heartbeat repeats everything.
        this.sendFull = true
        failures++
        await sleep(this.clock, this.client.backoff.delayMs(failures), signal)
        continue
      }
      if (immediate) continue
      await new Promise<void>((resolve) => {
        this.wakeLoop = resolve
        sleep(this.clock, this.heartbeatIntervalMs, signal).then(resolve)
      })
      this.wakeLoop = null
    }
  }

  private heartbeat(memberEpoch: number): Promise<ConsumerGroupHeartbeatResponse> {
    const full = this.sendFull || memberEpoch === 0
    const owned = this.ownedByTopicId()
    return this.toCoordinator<ConsumerGroupHeartbeatResponse>(
      ApiKey.ConsumerGroupHeartbeat,
      (version): ConsumerGroupHeartbeatRequest => ({
        groupId: this.options.groupId,
        memberId: this.membership.memberId,
        memberEpoch,
        instanceId: this.options.groupInstanceId,
        rackId: null,
        rebalanceTimeoutMs: full ? this.options.rebalanceTimeoutMs : -1,
        subscribedTopicNames: full ? (this.topics ?? (version >= 1 ? null : [])) : null,
        subscribedTopicRegex: full && version >= 1 && this.pattern ? this.pattern.source : null,
        serverAssignor: full ? this.options.remoteAssignor : null,
        // Always sent: what the member owns is how the coordinator sees a revocation done.
        topicPartitions: memberEpoch === 0 ? [] : owned,
      }),
    )
  }

  /** Handles an answer; true when the next heartbeat should go at once. */
  private async onHeartbeat(response: ConsumerGroupHeartbeatResponse): Promise<boolean> {
    const code = response.errorCode
    if (MEMBER_FENCED.has(code)) {
      await this.losePartitions()
      this.memberEpoch = 0
      this.membership.generationId = -1
      this.sendFull = true
      return true
    }
    if (code !== ErrorCode.NONE) {
      if (code === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS || COORDINATOR_GONE.has(code))
        throw new KafkaProtocolError(code, `ConsumerGroupHeartbeat ${this.options.groupId}`)
      throw new KafkaProtocolError(
        code,
        `ConsumerGroupHeartbeat ${this.options.groupId}: ${response.errorMessage ?? ''}`,
      )
    }
    this.sendFull = false
    this.memberEpoch = response.memberEpoch
    this.membership.generationId = response.memberEpoch
    if (response.heartbeatIntervalMs > 0) this.heartbeatIntervalMs = response.heartbeatIntervalMs
    if (response.assignment === null) return false
    const changed = await this.reconcile(response.assignment.topicPartitions)
    const first = this.firstAssignment
    this.firstAssignment = null
    first?.resolve()
    this.host.wake()
    return changed
  }

  /** Applies the coordinator's assignment as a delta; true when the owned set changed. */
  private async reconcile(
    assignment: readonly { topicId: string; partitions: readonly number[] }[],
  ): Promise<boolean> {
    let names = this.client.metadata.topics
    const byId = () => new Map([...names.values()].map((t) => [t.topicId, t.name]))
    let ids = byId()
    if (assignment.some((t) => !ids.has(t.topicId))) {
      names = (await this.client.refreshMetadata(this.pattern ? 'all' : [])).topics
      ids = byId()
    }
    const target: TopicPartition[] = []
    for (const t of assignment) {
      const topic = ids.get(t.topicId)
      // A topic we cannot name yet: the next heartbeat's answer repeats the assignment.
      if (topic === undefined) {
        this.sendFull = true
        continue
      }
      for (const partition of t.partitions) target.push({ topic, partition })
    }
    if (this.pattern) this.membership.subscription = [...new Set(target.map((tp) => tp.topic))].sort()
    const before = this.host.assignment()
    const wanted = new Set(target.map(tpKey))
    const had = new Set(before.map(tpKey))
    const revoked = before.filter((tp) => !wanted.has(tpKey(tp)))
    const added = target.filter((tp) => !had.has(tpKey(tp)))
    if (revoked.length > 0) {
      const keys = new Set(revoked.map(tpKey))
      const positions = this.host.positions().filter((p) => keys.has(tpKey(p)))
      this.host.removePartitions(revoked)
      if (this.options.enableAutoCommit) await this.commitQuietly(positions)
      await this.callListener(this.options.onPartitionsRevoked, revoked)
    }
    if (added.length > 0) {
      const committed = await this.committedOffsets(added)
      for (const [key, offset] of committed) if (offset >= 0) this.committed.set(key, offset)
      this.host.addPartitions(
        added.map((tp) => {
          const offset = committed.get(tpKey(tp)) ?? -1
          return offset >= 0 ? { ...tp, offset } : { ...tp }
        }),
      )
      this.nextAutoCommitMs = this.clock.monotonicMs() + this.options.autoCommitIntervalMs
      await this.callListener(this.options.onPartitionsAssigned, added)
    }
    return revoked.length > 0 || added.length > 0
  }

  /** Fenced: another member may own the partitions already; they go without a commit. */
  private async losePartitions(): Promise<void> {
    const owned = this.host.assignment()
    if (owned.length === 0) return
    this.host.removePartitions(owned)
    await this.callListener(this.options.onPartitionsRevoked, owned)
  }

  private ownedByTopicId(): { topicId: string; partitions: number[] }[] {
    const byTopic = new Map<string, number[]>()
    for (const tp of this.host.assignment()) {
      const topicId = this.client.metadata.topics.get(tp.topic)?.topicId
      if (topicId === undefined) continue
      byTopic.set(topicId, [...(byTopic.get(topicId) ?? []), tp.partition])
    }
    return [...byTopic].map(([topicId, partitions]) => ({
      topicId,
      partitions: partitions.sort((a, b) => a - b),
    }))
  }

  /** Heartbeats stop with no commit, revocation or leave: the coordinator times the member out. */
  private async abandon(): Promise<void> {
    const loop = this.loop
    this.loop = null
    loop?.abort.abort()
    this.kick()
    await loop?.task
    this.host.setAssignment([])
  }

  private async stopAndLeave(epoch: number): Promise<void> {
    const loop = this.loop
    this.loop = null
    loop?.abort.abort()
    this.kick()
    await loop?.task
    await this.autoCommitTask
    const owned = this.host.assignment()
    if (owned.length > 0 && this.memberEpoch > 0) {
      if (this.options.enableAutoCommit) await this.commitQuietly()
      await this.callListener(this.options.onPartitionsRevoked, owned)
    }
    this.host.setAssignment([])
    if (this.memberEpoch > 0) {
      try {
        // Best effort: an unreachable coordinator times the member out instead.
        await this.heartbeat(epoch)
      } catch (error) {
        if (!(error instanceof KafkaClientError)) throw error
      }
    }
  }

  // ---- offsets and helpers -------------------------------------------------------------

  private maybeAutoCommit(): void {
    if (!this.options.enableAutoCommit || this.autoCommitTask) return
    if (this.subscribed && this.memberEpoch <= 0) return
    const now = this.clock.monotonicMs()
    if (now < this.nextAutoCommitMs) return
    this.nextAutoCommitMs = now + this.options.autoCommitIntervalMs
    const changed = this.host.positions().filter((p) => this.committed.get(tpKey(p)) !== p.offset)
    if (changed.length === 0) return
    const tracked = this.commitQuietly(changed).finally(() => {
      if (this.autoCommitTask === tracked) this.autoCommitTask = null
    })
    this.autoCommitTask = tracked
  }

  private async commitQuietly(offsets?: readonly OffsetToCommit[]): Promise<void> {
    try {
      await this.commit(offsets)
      this.lastAutoCommitError = null
    } catch (error) {
      this.lastAutoCommitError = asClientError(error)
    }
  }

  private async callListener(listener: RebalanceListener | undefined, partitions: TopicPartition[]) {
    if (!listener) return
    try {
      await listener(partitions.map((tp) => ({ topic: tp.topic, partition: tp.partition })))
    } catch (error) {
      this.pendingError ??= asClientError(error)
    }
  }

  private throwPending(): void {
    const error = this.pendingError
    if (!error) return
    this.pendingError = null
    // The loop ended on a fatal error: the next subscribe()/poll starts it again.
    if (!this.loop || this.closed) this.loop = null
    throw error
  }

  private async toCoordinator<T extends object>(
    apiKey: number,
    build: (version: number) => unknown,
  ): Promise<T> {
    this.coordinatorId ??= await findGroupCoordinator(this.client, this.options.groupId)
    const response = await this.client.request<T>(this.coordinatorId, apiKey, build, { purpose: 'group' })
    const code = (response as { errorCode?: number }).errorCode
    if (
      code !== undefined &&
      (COORDINATOR_GONE.has(code) || code === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    ) {
      if (COORDINATOR_GONE.has(code)) this.coordinatorId = null
      throw new KafkaProtocolError(code, `group ${this.options.groupId}`)
    }
    return response
  }

  private async withRetries<T>(operation: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      if (this.closed && !this.subscribed) throw new ClientClosedError('consumer')
      try {
        return await operation()
      } catch (error) {
        if (!retriable(error) || attempt >= OFFSET_ATTEMPTS_MAX) throw asClientError(error)
        if (coordinatorLost(error)) this.coordinatorId = null
        await sleep(this.clock, this.client.backoff.delayMs(attempt))
      }
    }
  }
}

function commitRequest(
  groupId: string,
  memberId: string,
  memberEpoch: number,
  offsets: readonly OffsetToCommit[],
) {
  const byTopic = new Map<string, OffsetToCommit[]>()
  for (const o of offsets) byTopic.set(o.topic, [...(byTopic.get(o.topic) ?? []), o])
  return {
    groupId,
    generationIdOrMemberEpoch: memberEpoch,
    memberId,
    groupInstanceId: null,
    retentionTimeMs: -1n,
    topics: [...byTopic].map(([name, list]) => ({
      name,
      partitions: list.map((o) => ({
        partitionIndex: o.partition,
        committedOffset: BigInt(o.offset),
        committedLeaderEpoch: -1,
        commitTimestamp: -1n,
        committedMetadata: o.metadata ?? '',
      })),
    })),
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined
  const promise = new Promise<void>((r) => {
    resolve = r
  })
  return { promise, resolve }
}
