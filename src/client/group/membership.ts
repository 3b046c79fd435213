/**
 * One member of a consumer group on the classic protocol, as the Java consumer's
 * AbstractCoordinator/ConsumerCoordinator speak it: find the coordinator (FindCoordinator,
 * key type 0), JoinGroup (a new member first gets its id back with MEMBER_ID_REQUIRED),
 * the leader runs the assignor the coordinator picked over every member's subscription,
 * SyncGroup hands out the assignments, then Heartbeat every heartbeat.interval.ms in the
 * background until the group rebalances. Also the group's offsets (OffsetCommit with the
 * member's generation, OffsetFetch) and LeaveGroup.
 *
 * Error handling, as Java's:
 * - NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost connection or a timeout: forget
 *   the coordinator, find it again after a backoff. COORDINATOR_LOAD_IN_PROGRESS: retry.
 * - REBALANCE_IN_PROGRESS (heartbeat): rejoin at the next poll (heartbeats go on meanwhile).
 * - UNKNOWN_MEMBER_ID: forget the member id and generation, rejoin as a new member.
 * - ILLEGAL_GENERATION: forget the generation, rejoin with the same member id.
 * - FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, GROUP_AUTHORIZATION_FAILED,
 *   INVALID_SESSION_TIMEOUT, GROUP_MAX_SIZE_REACHED and other errors: fatal; the next poll throws.
 *
 * Rebalance protocol (Java's RebalanceProtocol): cooperative (KIP-429) when every configured
 * assignor supports it, else eager. Either way each subscription carries the partitions the
 * member owns and its generation (consumer protocol v1/v2 fields) and the assignor's user
 * data; a cooperative leader checks that no partition goes to a new owner in the same
 * rebalance its old owner still claims it (Java's validateCooperativeAssignment).
 *
 * Requests that can be held by the coordinator (JoinGroup, SyncGroup) and heartbeats
 * travel on the 'group' connection; commits, offset fetches and LeaveGroup on the normal
 * one, so a LeaveGroup is never stuck behind a JoinGroup the coordinator is holding.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import type { HeartbeatResponse } from '../../protocol/generated/heartbeat-response.js'
import { ApiKey } from '../../protocol/generated/index.js'
import type { JoinGroupRequest } from '../../protocol/generated/join-group-request.js'
import type { JoinGroupResponse } from '../../protocol/generated/join-group-response.js'
import type { LeaveGroupResponse } from '../../protocol/generated/leave-group-response.js'
import type { OffsetCommitResponse } from '../../protocol/generated/offset-commit-response.js'
import type { OffsetFetchResponse } from '../../protocol/generated/offset-fetch-response.js'
import type { SyncGroupResponse } from '../../protocol/generated/sync-group-response.js'
import type { ConnectionPurpose, KafkaClient } from '../client.js'
import {
  asClientError,
  ClientClosedError,
  GroupsNotSupportedError,
  KafkaClientError,
  KafkaProtocolError,
  UnsupportedApiError,
} from '../errors.js'
import { findGroupCoordinator } from '../find-coordinator.js'
import { type TopicPartition, tpKey } from '../leader-requests.js'
import { sleep } from '../retry.js'
import {
  type MemberSubscription,
  type PartitionAssignor,
  type RebalanceProtocol,
  rebalanceProtocolOf,
} from './assignors.js'
import { COORDINATOR_GONE, CommitFailedError, coordinatorLost } from './errors.js'
import {
  CONSUMER_PROTOCOL_TYPE,
  decodeAssignment,
  decodeSubscription,
  encodeAssignment,
  encodeSubscription,
} from './protocol.js'

export interface MembershipOptions {
  groupId: string
  groupInstanceId: string | null
  sessionTimeoutMs: number
  rebalanceTimeoutMs: number
  heartbeatIntervalMs: number
  /** Heartbeats stop and the member leaves when poll() is not called for this long. */
  maxPollIntervalMs: number
  assignors: readonly PartitionAssignor[]
}

export interface OffsetToCommit extends TopicPartition {
  offset: number
  metadata?: string | null
}

/** Attempts at one group operation (join, commit, fetch offsets, find coordinator) before it fails. */
const ATTEMPTS_MAX = 50
/** Attempts at a commit or an offset fetch. */
const OFFSET_ATTEMPTS_MAX = 10
/** Beyond the rebalance timeout, what a JoinGroup/SyncGroup may take (Java adds 5 s). */
const JOIN_TIMEOUT_SLACK_MS = 5000

/** Worth another attempt after a backoff (with the coordinator looked up again if lost). */
function retriable(error: unknown): boolean {
  if (coordinatorLost(error)) return true
  return (
    error instanceof KafkaProtocolError &&
    (error.errorCode === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS ||
      error.errorCode === ErrorCode.UNSTABLE_OFFSET_COMMIT ||
      error.errorCode === ErrorCode.REQUEST_TIMED_OUT)
  )
}

export type MemberState = 'unjoined' | 'rebalancing' | 'stable'

export class GroupMembership {
  memberId = ''
  generationId = -1
  /** The assignor the coordinator chose for this generation. */
  protocolName: string | null = null
  leaderId = ''
  state: MemberState = 'unjoined'
  /** Set when the member must (re)join at the next poll. */
  rejoinNeeded = true
  /** Why the last rejoin was requested (for errors and debugging). */
  rejoinReason = 'initial join'
  /** Set by a fatal error; the next poll throws it. */
  fatalError: KafkaClientError | null = null
  private coordinatorId: number | null = null
  private topics: string[] = []
  /** A pattern subscription (Java's subscribe(Pattern)): `topics` are the topics it matches now. */
  private pattern: RegExp | null = null
  private patternCheckedAtMs = Number.NEGATIVE_INFINITY
  /** Leader only: the partition counts the last assignment was computed from. */
  private assignedCounts: Map<string, number> | null = null
  private heartbeat: { readonly abort: AbortController; readonly task: Promise<void> } | null = null
  private lastPollMs: number
  private closed = false
  readonly rebalanceProtocol: RebalanceProtocol

  constructor(
    readonly client: KafkaClient,
    readonly options: MembershipOptions,
    /** Called when a rejoin becomes needed or a fatal error happens (wakes a waiting poll). */
    private readonly onChange: () => void,
    /** The partitions the member owns now, sent in its subscription. */
    private readonly ownedPartitions: () => readonly TopicPartition[] = () => [],
    /** The generation is gone: what the member owned may belong to another member already. */
    private readonly onGenerationLost: () => void = () => undefined,
  ) {
    this.lastPollMs = client.clock.monotonicMs()
    this.rebalanceProtocol = rebalanceProtocolOf(options.assignors)
  }

  get isLeader(): boolean {
    return this.memberId !== '' && this.memberId === this.leaderId
  }

  subscribe(topics: readonly string[]): void {
    const wasPattern = this.pattern !== null
    this.pattern = null
    const next = [...new Set(topics)].sort()
    if (!wasPattern && next.join('\u0000') === this.topics.join('\u0000')) return
    this.topics = next
    this.client.addInterest(next)
    this.requestRejoin('subscription changed')
  }

  /**
   * Subscribes to every topic whose whole name matches `pattern` (Java's Matcher.matches,
   * not a search), internal topics excluded (exclude.internal.topics); the match is taken
   * again before each join and every metadata.max.age.ms, and a change rejoins the group.
   */
  subscribePattern(pattern: RegExp): void {
    this.pattern = new RegExp(`^(?:${pattern.source})$`, pattern.flags.replace(/[gy]/g, ''))
    this.topics = []
    this.patternCheckedAtMs = Number.NEGATIVE_INFINITY
    this.requestRejoin('subscription changed')
  }

  /** Forgets the subscription; the session has already revoked and left. */
  unsubscribe(): void {
    this.pattern = null
    this.topics = []
  }

  get subscription(): readonly string[] {
    return this.topics
  }

  /** Subscribed to topics or to a pattern (which may match nothing yet). */
  get isSubscribed(): boolean {
    return this.pattern !== null || this.topics.length > 0
  }

  /** Pattern subscription: the topics it matches in fresh metadata of every topic; true if they changed. */
  async updatePatternSubscription(): Promise<boolean> {
    const pattern = this.pattern
    if (!pattern) return false
    const snapshot = await this.client.refreshMetadata('all')
    this.patternCheckedAtMs = this.client.clock.monotonicMs()
    if (this.pattern !== pattern) return false // subscription changed meanwhile
    const matched = [...snapshot.topics.values()]
      .filter((t) => !t.isInternal && pattern.test(t.name))
      .map((t) => t.name)
      .sort()
    if (matched.join('\u0000') === this.topics.join('\u0000')) return false
    this.topics = matched
    this.client.addInterest(matched)
    return true
  }

  /** Every metadata.max.age.ms: a pattern matching other topics now rejoins the group. */
  private async maybeCheckPattern(): Promise<void> {
    if (!this.pattern) return
    if (this.client.clock.monotonicMs() - this.patternCheckedAtMs < this.client.options.metadataMaxAgeMs)
      return
    if (await this.updatePatternSubscription())
      this.requestRejoin('pattern subscription matches other topics')
  }

  /** The application polled: it is alive (max.poll.interval.ms). */
  notePoll(): void {
    this.lastPollMs = this.client.clock.monotonicMs()
  }

  requestRejoin(reason: string): void {
    this.rejoinNeeded = true
    this.rejoinReason = reason
    this.onChange()
  }

  // ---- join and sync ----------------------------------------------------------------

  /**
   * Joins (or rejoins) the group and returns this member's assignment. Retries through
   * coordinator moves, new member ids and concurrent rebalances; throws a fatal error,
   * or the last error after ATTEMPTS_MAX attempts.
   */
  async join(): Promise<TopicPartition[]> {
    this.stopHeartbeats()
    this.state = 'rebalancing'
    let lastError: unknown = null
    for (let attempt = 1; attempt <= ATTEMPTS_MAX; attempt++) {
      if (this.closed) throw new ClientClosedError('consumer')
      this.rejoinNeeded = false
      try {
        // As Java: a pattern is matched against fresh metadata before every join.
        await this.updatePatternSubscription()
        const assignment = await this.joinOnce()
        if (assignment) {
          this.state = 'stable'
          this.startHeartbeats()
          return assignment
        }
        continue // a new member id or a rebalance that moved on: join again at once
      } catch (error) {
        if (!retriable(error)) throw this.fail(error)
        lastError = error
        if (coordinatorLost(error)) this.markCoordinatorUnknown()
      }
      await sleep(this.client.clock, this.client.backoff.delayMs(attempt))
    }
    throw this.fail(lastError)
  }

  /** One JoinGroup + SyncGroup round: the assignment, or null to join again at once. */
  private async joinOnce(): Promise<TopicPartition[] | null> {
    const joined = await this.toCoordinator<JoinGroupResponse>(
      ApiKey.JoinGroup,
      (version) => this.joinRequest(version),
      'group',
      this.options.rebalanceTimeoutMs + JOIN_TIMEOUT_SLACK_MS,
    )
    if (!this.onJoinError(joined)) return null
    this.memberId = joined.memberId
    this.generationId = joined.generationId
    this.leaderId = joined.leader
    this.protocolName = joined.protocolName
    const assignments = this.isLeader ? await this.assignAsLeader(joined) : []
    const synced = await this.toCoordinator<SyncGroupResponse>(
      ApiKey.SyncGroup,
      () => ({
        groupId: this.options.groupId,
        generationId: this.generationId,
        memberId: this.memberId,
        groupInstanceId: this.options.groupInstanceId,
        protocolType: CONSUMER_PROTOCOL_TYPE,
        protocolName: this.protocolName,
        assignments,
      }),
      'group',
      this.options.rebalanceTimeoutMs + JOIN_TIMEOUT_SLACK_MS,
    )
    if (!this.onSyncError(synced.errorCode)) return null
    const partitions = decodeAssignment(synced.assignment).partitions
    this.options.assignors
      .find((a) => a.name === this.protocolName)
      ?.onAssignment?.(partitions, this.generationId)
    return partitions
  }

  private joinRequest(version: number): JoinGroupRequest {
    const topics = [...this.topics]
    const ownedPartitions = [...this.ownedPartitions()]
    const generationId = this.generationId
    return {
      groupId: this.options.groupId,
      // JoinGroup v0 has no rebalance timeout: the session timeout bounds the rebalance.
      sessionTimeoutMs: this.options.sessionTimeoutMs,
      rebalanceTimeoutMs: version >= 1 ? this.options.rebalanceTimeoutMs : this.options.sessionTimeoutMs,
      memberId: this.memberId,
      groupInstanceId: this.options.groupInstanceId,
      protocolType: CONSUMER_PROTOCOL_TYPE,
      protocols: this.options.assignors.map((a) => ({
        name: a.name,
        metadata: encodeSubscription({
          topics,
          userData: a.subscriptionUserData?.(topics) ?? null,
          ownedPartitions,
          generationId,
        }),
      })),
      reason: this.rejoinReason,
    }
  }

  /** true: joined; false: join again at once; throws otherwise. */
  private onJoinError(response: JoinGroupResponse): boolean {
    switch (response.errorCode) {
      case ErrorCode.NONE:
        return true
      case ErrorCode.MEMBER_ID_REQUIRED:
        this.memberId = response.memberId
        return false
      case ErrorCode.UNKNOWN_MEMBER_ID:
        this.resetGeneration(true)
        return false
      case ErrorCode.ILLEGAL_GENERATION:
      case ErrorCode.REBALANCE_IN_PROGRESS:
        this.resetGeneration(false)
        return false
      default:
        throw new KafkaProtocolError(response.errorCode, `JoinGroup ${this.options.groupId}`)
    }
  }

  private onSyncError(errorCode: number): boolean {
    switch (errorCode) {
      case ErrorCode.NONE:
        return true
      case ErrorCode.UNKNOWN_MEMBER_ID:
        this.resetGeneration(true)
        return false
      case ErrorCode.ILLEGAL_GENERATION:
      case ErrorCode.REBALANCE_IN_PROGRESS:
        this.resetGeneration(false)
        return false
      default:
        throw new KafkaProtocolError(errorCode, `SyncGroup ${this.options.groupId}`)
    }
  }

  /** The leader's part: every member's subscription through the chosen assignor. */
  private async assignAsLeader(
    joined: JoinGroupResponse,
  ): Promise<{ memberId: string; assignment: Buffer }[]> {
    const assignor = this.options.assignors.find((a) => a.name === joined.protocolName)
    if (!assignor)
      throw new KafkaProtocolError(
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        `the coordinator chose assignor ${joined.protocolName}, which this member does not offer`,
      )
    const members: MemberSubscription[] = joined.members.map((m) => {
      const subscription = decodeSubscription(m.metadata)
      return {
        memberId: m.memberId,
        groupInstanceId: m.groupInstanceId,
        topics: subscription.topics,
        ownedPartitions: subscription.ownedPartitions,
        generationId: subscription.generationId,
        userData: subscription.userData,
      }
    })
    const allTopics = [...new Set(members.flatMap((m) => m.topics))].sort()
    this.client.addInterest(allTopics)
    const snapshot = await this.client.refreshMetadata(allTopics)
    const counts = new Map<string, number>()
    for (const topic of allTopics) {
      const partitions = snapshot.topics.get(topic)?.partitions.length ?? 0
      if (partitions > 0) counts.set(topic, partitions)
    }
    this.assignedCounts = counts
    // JoinGroup v9: a static leader that rejoined keeps the current assignment (KIP-814).
    if (joined.skipAssignment) return []
    const result = assignor.assign(counts, members)
    if (this.rebalanceProtocol === 'cooperative') validateCooperativeAssignment(members, result)
    return members.map((m) => ({
      memberId: m.memberId,
      assignment: encodeAssignment({ partitions: result.get(m.memberId) ?? [] }),
    }))
  }

  /** Forgets the generation (and the member id: a new member next time). */
  resetGeneration(resetMemberId: boolean): void {
    const hadGeneration = this.generationId >= 0
    this.generationId = -1
    this.protocolName = null
    this.leaderId = ''
    this.assignedCounts = null
    if (resetMemberId) this.memberId = ''
    if (this.state === 'stable') this.state = 'unjoined'
    if (hadGeneration) this.onGenerationLost()
  }

  // ---- heartbeats ---------------------------------------------------------------------

  private startHeartbeats(): void {
    this.stopHeartbeats()
    const abort = new AbortController()
    const task = this.heartbeatLoop(abort.signal).catch((error: unknown) => {
      // E.g. FENCED_INSTANCE_ID: another member took this static member's place.
      this.resetGeneration(false)
      this.fail(error)
      this.onChange()
    })
    this.heartbeat = { abort, task }
  }

  stopHeartbeats(): Promise<void> {
    const heartbeat = this.heartbeat
    if (!heartbeat) return Promise.resolve()
    this.heartbeat = null
    heartbeat.abort.abort()
    return heartbeat.task
  }

  /** Runs while this generation is stable; ends on abort or when the member must rejoin. */
  private async heartbeatLoop(signal: AbortSignal): Promise<void> {
    let lastSuccessMs = this.client.clock.monotonicMs()
    const generation = this.generationId
    while (!signal.aborted && this.state === 'stable' && this.generationId === generation) {
      await sleep(this.client.clock, this.options.heartbeatIntervalMs, signal)
      if (signal.aborted || this.closed) return
      if (this.client.clock.monotonicMs() - this.lastPollMs > this.options.maxPollIntervalMs) {
        await this.onPollTimeout()
        return
      }
      try {
        const response = await this.toCoordinator<HeartbeatResponse>(
          ApiKey.Heartbeat,
          () => ({
            groupId: this.options.groupId,
            generationId: generation,
            memberId: this.memberId,
            groupInstanceId: this.options.groupInstanceId,
          }),
          'group',
        )
        if (signal.aborted) return
        if (!this.onHeartbeat(response.errorCode)) return
        lastSuccessMs = this.client.clock.monotonicMs()
        // A failed metadata refresh is tried again at the next heartbeat.
        await this.maybeCheckMetadata().catch(() => undefined)
        await this.maybeCheckPattern().catch(() => undefined)
      } catch (error) {
        if (signal.aborted) return
        if (!retriable(error)) throw error
        if (coordinatorLost(error)) this.markCoordinatorUnknown()
        // No answer for a whole session: the coordinator has surely dropped this member.
        if (this.client.clock.monotonicMs() - lastSuccessMs > this.options.sessionTimeoutMs)
          this.markCoordinatorUnknown()
      }
    }
  }

  /** true: keep heartbeating. */
  private onHeartbeat(errorCode: number): boolean {
    switch (errorCode) {
      case ErrorCode.NONE:
        return true
      case ErrorCode.REBALANCE_IN_PROGRESS:
        // Heartbeats go on (they keep the session alive) until the next poll rejoins.
        if (!this.rejoinNeeded) this.requestRejoin('group is rebalancing')
        return true
      case ErrorCode.ILLEGAL_GENERATION:
        this.resetGeneration(false)
        this.requestRejoin('generation is over (ILLEGAL_GENERATION)')
        return false
      case ErrorCode.UNKNOWN_MEMBER_ID:
        this.resetGeneration(true)
        this.requestRejoin('member is unknown to the coordinator (UNKNOWN_MEMBER_ID)')
        return false
      case ErrorCode.NOT_COORDINATOR:
      case ErrorCode.COORDINATOR_NOT_AVAILABLE:
        this.markCoordinatorUnknown()
        return true
      case ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        return true
      default:
        throw new KafkaProtocolError(errorCode, `Heartbeat ${this.options.groupId}`)
    }
  }

  /** Leader: a subscribed topic's partition count changed since the assignment → rebalance. */
  private async maybeCheckMetadata(): Promise<void> {
    const counts = this.assignedCounts
    if (!this.isLeader || !counts) return
    if (this.client.metadataStale) await this.client.refreshMetadata()
    const snapshot = this.client.metadata
    const topics = new Set([...counts.keys(), ...this.groupTopicsOf(counts)])
    for (const topic of topics) {
      const now = snapshot.topics.get(topic)?.partitions.length ?? 0
      if (now > 0 && now !== (counts.get(topic) ?? 0)) {
        this.requestRejoin(`partitions of ${topic} changed (${counts.get(topic) ?? 0} → ${now})`)
        this.assignedCounts = null
        return
      }
    }
  }

  /** Subscribed topics that had no partitions at the assignment (they may appear later). */
  private groupTopicsOf(counts: ReadonlyMap<string, number>): string[] {
    return this.topics.filter((t) => !counts.has(t))
  }

  /** max.poll.interval.ms passed without a poll: leave, so the group moves on without us. */
  private async onPollTimeout(): Promise<void> {
    await this.leave('consumer poll timeout has expired')
    this.resetGeneration(true)
    this.requestRejoin('poll timeout expired')
  }

  // ---- offsets ------------------------------------------------------------------------

  /**
   * OffsetCommit with this member's generation; throws CommitFailedError when the group
   * refuses. `simple`: a consumer that assigns its own partitions commits outside group
   * management (generation -1, no member id), which the coordinator accepts while the group
   * has no members.
   */
  async commit(offsets: readonly OffsetToCommit[], options: { simple?: boolean } = {}): Promise<void> {
    if (offsets.length === 0) return
    if (options.simple) {
      await this.withRetries(async () => {
        const response = await this.toCoordinator<OffsetCommitResponse>(
          ApiKey.OffsetCommit,
          () => ({ ...this.commitRequest(offsets, -1), memberId: '', groupInstanceId: null }),
          'normal',
        )
        this.checkCommit(response, -1)
      })
      return
    }
    if (this.generationId < 0 || this.state !== 'stable') {
      const code = this.memberId === '' ? ErrorCode.UNKNOWN_MEMBER_ID : ErrorCode.REBALANCE_IN_PROGRESS
      throw new CommitFailedError(code, 'the consumer is not in a stable group generation', offsets)
    }
    const generation = this.generationId
    await this.withRetries(async () => {
      const response = await this.toCoordinator<OffsetCommitResponse>(
        ApiKey.OffsetCommit,
        () => this.commitRequest(offsets, generation),
        'normal',
      )
      this.checkCommit(response, generation)
    })
  }

  private commitRequest(offsets: readonly OffsetToCommit[], generation: number) {
    const byTopic = new Map<string, OffsetToCommit[]>()
    for (const o of offsets) byTopic.set(o.topic, [...(byTopic.get(o.topic) ?? []), o])
    return {
      groupId: this.options.groupId,
      generationIdOrMemberEpoch: generation,
      memberId: this.memberId,
      groupInstanceId: this.options.groupInstanceId,
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

  private checkCommit(response: OffsetCommitResponse, generation: number): void {
    const failed: { tp: TopicPartition; errorCode: number }[] = []
    for (const t of response.topics)
      for (const p of t.partitions)
        if (p.errorCode !== ErrorCode.NONE)
          failed.push({ tp: { topic: t.name, partition: p.partitionIndex }, errorCode: p.errorCode })
    if (failed.length === 0) return
    const { errorCode } = failed[0]
    const tps = failed.map((f) => f.tp)
    const where = `${this.options.groupId} generation ${generation} on ${tps.map((tp) => `${tp.topic}-${tp.partition}`).join(', ')}`
    if (errorCode === ErrorCode.UNKNOWN_MEMBER_ID || errorCode === ErrorCode.ILLEGAL_GENERATION) {
      if (generation >= 0 && this.generationId === generation) {
        this.resetGeneration(errorCode === ErrorCode.UNKNOWN_MEMBER_ID)
        this.requestRejoin(`commit answered ${new KafkaProtocolError(errorCode).errorName}`)
      }
      throw new CommitFailedError(errorCode, where, tps)
    }
    if (errorCode === ErrorCode.REBALANCE_IN_PROGRESS || errorCode === ErrorCode.FENCED_INSTANCE_ID) {
      if (errorCode === ErrorCode.REBALANCE_IN_PROGRESS && generation >= 0)
        this.requestRejoin('commit: group is rebalancing')
      throw new CommitFailedError(errorCode, where, tps)
    }
    throw new KafkaProtocolError(errorCode, `commit of ${where}`)
  }

  /** Committed offsets (-1: none) of the partitions, by tpKey (OffsetFetch, requireStable). */
  async fetchOffsets(partitions: readonly TopicPartition[]): Promise<Map<string, number>> {
    if (partitions.length === 0) return new Map()
    const byTopic = new Map<string, number[]>()
    for (const tp of partitions) byTopic.set(tp.topic, [...(byTopic.get(tp.topic) ?? []), tp.partition])
    const topics = [...byTopic].map(([name, partitionIndexes]) => ({ name, partitionIndexes }))
    return this.withRetries(async () => {
      const response = await this.toCoordinator<OffsetFetchResponse>(
        ApiKey.OffsetFetch,
        (version) =>
          version >= 8
            ? {
                groupId: '',
                topics: [],
                groups: [{ groupId: this.options.groupId, memberId: null, memberEpoch: -1, topics }],
                requireStable: true,
              }
            : { groupId: this.options.groupId, topics, groups: [], requireStable: true },
        'normal',
      )
      const group = response.groups.length > 0 ? response.groups[0] : response
      if (group.errorCode !== ErrorCode.NONE)
        throw new KafkaProtocolError(group.errorCode, `offsets of group ${this.options.groupId}`)
      const offsets = new Map<string, number>()
      for (const t of group.topics)
        for (const p of t.partitions) {
          const tp = { topic: t.name, partition: p.partitionIndex }
          if (p.errorCode !== ErrorCode.NONE)
            throw new KafkaProtocolError(
              p.errorCode,
              `offset of group ${this.options.groupId} on ${tpKey(tp)}`,
            )
          offsets.set(tpKey(tp), Number(p.committedOffset))
        }
      return offsets
    })
  }

  // ---- leaving ------------------------------------------------------------------------

  /** LeaveGroup (best effort: a member that cannot reach the coordinator times out anyway). */
  async leave(reason: string): Promise<void> {
    const memberId = this.memberId
    if (memberId === '') return
    try {
      // Errors in the answer (UNKNOWN_MEMBER_ID: already gone) change nothing: the member is leaving.
      await this.toCoordinator<LeaveGroupResponse>(
        ApiKey.LeaveGroup,
        (version) => ({
          groupId: this.options.groupId,
          memberId: version < 3 ? memberId : '',
          members: version >= 3 ? [{ memberId, groupInstanceId: this.options.groupInstanceId, reason }] : [],
        }),
        'normal',
      )
    } catch (error) {
      if (!(error instanceof KafkaClientError)) throw error
      // Unreachable coordinator: the session timeout removes the member instead.
    }
  }

  /** Stops heartbeats and refuses further joins; sends LeaveGroup unless `leave` is false. */
  async close(options: { leave: boolean }): Promise<void> {
    this.closed = true
    await this.stopHeartbeats()
    if (options.leave) await this.leave('the consumer is being closed')
    this.state = 'unjoined'
  }

  // ---- coordinator --------------------------------------------------------------------

  markCoordinatorUnknown(): void {
    this.coordinatorId = null
  }

  private async findCoordinator(): Promise<number> {
    if (this.coordinatorId !== null) return this.coordinatorId
    this.coordinatorId = await findGroupCoordinator(this.client, this.options.groupId)
    return this.coordinatorId
  }

  /** A request to the coordinator (found first); a whole-response coordinator error is thrown. */
  private async toCoordinator<T extends object>(
    apiKey: number,
    build: (version: number) => unknown,
    purpose: ConnectionPurpose,
    timeoutMs?: number,
  ): Promise<T> {
    const coordinator = await this.findCoordinator()
    const response = await this.client.request<T>(coordinator, apiKey, build, { purpose, timeoutMs })
    const code = (response as { errorCode?: number }).errorCode
    if (code !== undefined && (COORDINATOR_GONE.has(code) || code === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
      throw new KafkaProtocolError(code, `group ${this.options.groupId}`)
    return response
  }

  /** Retries a commit or offset fetch through coordinator moves, with backoff. */
  private async withRetries<T>(operation: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      if (this.closed) throw new ClientClosedError('consumer')
      try {
        return await operation()
      } catch (error) {
        if (!retriable(error) || attempt >= OFFSET_ATTEMPTS_MAX) throw asClientError(error)
        if (coordinatorLost(error)) this.markCoordinatorUnknown()
        await sleep(this.client.clock, this.client.backoff.delayMs(attempt))
      }
    }
  }

  private fail(error: unknown): KafkaClientError {
    // A broker without the group APIs: say so in the catalogue's words.
    const failure =
      error instanceof UnsupportedApiError && !(error instanceof GroupsNotSupportedError)
        ? new GroupsNotSupportedError(error.apiName)
        : asClientError(error)
    this.fatalError = failure
    this.state = 'unjoined'
    this.rejoinNeeded = true
    return failure
  }
}

/**
 * Java's validateCooperativeAssignment: under the cooperative protocol a partition may go to
 * a new owner only in the rebalance after its old owner gave it up; an assignor that moves
 * it at once would have two members consume it.
 */
function validateCooperativeAssignment(
  members: readonly MemberSubscription[],
  assignment: ReadonlyMap<string, readonly TopicPartition[]>,
): void {
  const ownerOf = new Map<string, string>()
  for (const m of members) for (const tp of m.ownedPartitions ?? []) ownerOf.set(tpKey(tp), m.memberId)
  for (const [memberId, partitions] of assignment)
    for (const tp of partitions) {
      const owner = ownerOf.get(tpKey(tp))
      if (owner !== undefined && owner !== memberId)
        throw new KafkaClientError(
          'ERR_ASSIGNOR',
          `the cooperative assignor gave ${tpKey(tp)} to ${memberId} while ${owner} still owns it`,
        )
    }
}
