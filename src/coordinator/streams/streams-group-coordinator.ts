/**
 * The group coordinator's streams-group side (KIP-1071): StreamsGroupHeartbeat and
 * StreamsGroupDescribe on the streams groups of each __consumer_offsets shard led here,
 * routed as every group request is (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS by the
 * runtime).
 *
 * A streams group is a group of the shard (`shard.groups`) whose `streams` part holds its
 * membership, topology and assignment (streams-group.ts), written to the shard's partition as
 * Kafka's StreamsGroup* records (streams-group-records.ts): each step writes what it changed,
 * one write at a time per group (the shard's writeStep), and answers once the write is
 * committed; a new coordinator replays them, so epochs and tasks survive a failover. Being a
 * group of the shard, its members' offset commits land in the group's offsets as any group's
 * do and ListGroups, DeleteGroups and offset expiry see it. The group's classic state follows
 * its members (Empty without, Stable with), as a consumer group's does. A group id names one
 * group of one type: a streams heartbeat or describe of a classic (non-empty), consumer or
 * share group answers GROUP_ID_NOT_FOUND "Group <id> is not a streams group.", as Kafka. An
 * empty classic group (one holding only offsets, e.g. after the streams group was deleted)
 * becomes a streams group on a member's join, as Kafka converts it.
 */
import type { Clock } from '../../common/clock.js'
import type { ClusterImage } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { type Group, newGroup } from '../group.js'
import type { GroupCoordinatorShard } from '../group-coordinator-shard.js'
import { type CoordinatorRecord, diffRecords } from '../records.js'
import {
  assignDueInitialTargets,
  expireStreamsMembers,
  newStreamsGroup,
  nextStreamsDeadline,
  type StreamsGroup,
  type StreamsGroupConfig,
  type StreamsHeartbeatRequest,
  type StreamsHeartbeatResult,
  type StreamsMember,
  type StreamsTopicsView,
  streamsGroupHeartbeat,
  streamsGroupStateName,
  streamsHeartbeatError,
  type TaskOffsetEntry,
  type TaskOffsetMap,
  toWireTuple,
  validateStreamsHeartbeat,
} from './streams-group.js'
import { snapshotStreamsGroup, streamsGroupRecords } from './streams-group-records.js'
import { STREAMS_MEMBER_STATE_CODE } from './streams-reconcile.js'
import {
  configureTopology,
  StreamsStatus,
  type StreamsTopology,
  topologySignature,
} from './streams-topology.js'
import {
  type DescriptionUpdateOutcome,
  type TopologyDescription,
  TopologyDescriptionRequests,
  updateTopologyDescription,
} from './streams-topology-description.js'

/** How long a streams group's refused expiry write waits before it is tried again (as a consumer group's). */
const TIMER_RETRY_BACKOFF_MS = 500

export interface StreamsGroupCoordinatorDeps {
  /** The loaded shard coordinating a group here, or the error a client must see. */
  route(groupId: string): GroupCoordinatorShard | number
  /** Whether the id names a group of another kind kept outside `shard.groups` (a share group). */
  isOtherType(shard: GroupCoordinatorShard, groupId: string): boolean
  readonly clock: Clock
  metadataImage(): ClusterImage
  readonly config: StreamsGroupConfig
}

/**
 * A group's settings: the broker's group.streams.*, with the group's own
 * streams.session.timeout.ms, streams.heartbeat.interval.ms, streams.num.standby.replicas,
 * streams.initial.rebalance.delay.ms, streams.assignment.interval.ms,
 * streams.task.offset.interval.ms and streams.acceptable.recovery.lag (group configs,
 * validated when set) read at each
 * heartbeat, as Kafka's coordinator does.
 */
function withGroupConfigs(
  config: StreamsGroupConfig,
  set: Readonly<Record<string, string>> | undefined,
): StreamsGroupConfig {
  if (set === undefined) return config
  const session = set['streams.session.timeout.ms']
  const heartbeat = set['streams.heartbeat.interval.ms']
  const standbys = set['streams.num.standby.replicas']
  const initialDelay = set['streams.initial.rebalance.delay.ms']
  const assignmentInterval = set['streams.assignment.interval.ms']
  const taskOffsetInterval = set['streams.task.offset.interval.ms']
  const recoveryLag = set['streams.acceptable.recovery.lag']
  return {
    ...config,
    ...(session !== undefined && { sessionTimeoutMs: Number(session) }),
    ...(heartbeat !== undefined && { heartbeatIntervalMs: Number(heartbeat) }),
    ...(standbys !== undefined && { numStandbyReplicas: Number(standbys) }),
    ...(initialDelay !== undefined && { initialRebalanceDelayMs: Number(initialDelay) }),
    ...(assignmentInterval !== undefined && { assignmentIntervalMs: Number(assignmentInterval) }),
    ...(taskOffsetInterval !== undefined && { taskOffsetIntervalMs: Number(taskOffsetInterval) }),
    ...(recoveryLag !== undefined && { acceptableRecoveryLag: Number(recoveryLag) }),
  }
}

export type StreamsMemberDescription = Omit<
  StreamsMember,
  | 'assigned'
  | 'activePendingRevocation'
  | 'state'
  | 'lastHeartbeatMs'
  | 'revocationDeadlineMs'
  | 'previousMemberEpoch'
> & {
  readonly assignment: ReturnType<typeof toWireTuple>
  readonly targetAssignment: ReturnType<typeof toWireTuple>
  readonly stateCode: number
  /** The offsets it last reported, by subtopology then partition (Kafka's order). */
  readonly taskOffsets: TaskOffsetEntry[]
  readonly taskEndOffsets: TaskOffsetEntry[]
}

function offsetEntries(offsets: TaskOffsetMap | undefined): TaskOffsetEntry[] {
  const entries: TaskOffsetEntry[] = []
  for (const subtopologyId of [...(offsets?.keys() ?? [])].sort())
    for (const [partition, offset] of [...(offsets?.get(subtopologyId) ?? [])].sort(([a], [b]) => a - b))
      entries.push({ subtopologyId, partition, offset })
  return entries
}

export interface StreamsGroupDescription {
  readonly groupId: string
  readonly errorCode: number
  readonly errorMessage: string | null
  readonly state: string
  readonly groupEpoch: number
  readonly assignmentEpoch: number
  readonly topology: StreamsTopology | null
  readonly members: readonly StreamsMemberDescription[]
  /** The stored description of the group's current topology epoch, if any. */
  readonly topologyDescription?: TopologyDescription | null
}

export interface TopologyDescriptionUpdateRequest {
  readonly groupId: string
  readonly memberId: string
  readonly topologyEpoch: number
  readonly topologyDescription: TopologyDescription
}

/** The session timer of a streams group, apart from the shard's group-id keyed timers. */
function timerKey(groupId: string): string {
  return `\u0001streams\u0001${groupId}`
}

/** The timer of a new streams group's delayed first assignment. */
function initialAssignmentKey(groupId: string): string {
  return `\u0001streams-initial\u0001${groupId}`
}

/** The streams part of a group, or null for a group of another type. */
export function streamsOf(group: Group | undefined): StreamsGroup | null {
  return group?.streams ?? null
}

export class StreamsGroupCoordinator {
  private readonly descriptionRequests = new TopologyDescriptionRequests()

  constructor(private readonly deps: StreamsGroupCoordinatorDeps) {}

  /** group.streams.* as the broker runs them. */
  get config(): StreamsGroupConfig {
    return this.deps.config
  }

  /**
   * A loaded shard's replayed streams groups: the topology configured against the topics as
   * they are now (in memory only, as Kafka), the members' sessions timed from now.
   */
  onShardLoaded(shard: GroupCoordinatorShard): void {
    const view = this.topicsView()
    for (const group of shard.groups.values()) {
      const streams = group.streams
      if (!streams) continue
      streams.signature = topologySignature(streams.topology, view.partitionCounts)
      streams.configured = streams.topology ? configureTopology(streams.topology, view.partitionCounts) : null
      this.afterChange(shard, group, streams)
    }
  }

  /** StreamsGroupHeartbeat: joins (creating the group), heartbeats, leaves. */
  async heartbeat(req: StreamsHeartbeatRequest): Promise<StreamsHeartbeatResult> {
    const invalid = validateStreamsHeartbeat(req)
    if (invalid) return invalid
    const shard = this.deps.route(req.groupId)
    if (typeof shard === 'number') return streamsHeartbeatError(shard)
    const group = this.groupFor(shard, req)
    if ('errorCode' in group) return group
    const streams = group.streams
    if (!streams) return streamsHeartbeatError(ErrorCode.UNKNOWN_SERVER_ERROR)
    // Answered NOT_COORDINATOR if the step never runs (the shard dropped, the group deleted).
    let result = streamsHeartbeatError(ErrorCode.NOT_COORDINATOR)
    const code = await shard.writeStep(streams, () => {
      if (shard.groups.get(req.groupId) !== group || group.streams !== streams) return null
      return this.change(streams, () => {
        result = streamsGroupHeartbeat(
          streams,
          req,
          this.deps.clock.nowMs(),
          this.configOf(req.groupId),
          this.topicsView(),
        )
        this.afterChange(shard, group, streams)
      })
    })
    return code === ErrorCode.NONE ? result : streamsHeartbeatError(code)
  }

  /** Runs `mutate` and returns the records of what it changed, with the undo of the change. */
  private change(
    streams: StreamsGroup,
    mutate: () => void,
  ): { records: CoordinatorRecord[]; undo: () => void } {
    const before = streamsGroupRecords(streams)
    const undo = snapshotStreamsGroup(streams)
    mutate()
    return { records: diffRecords(before, streamsGroupRecords(streams)), undo }
  }

  /** The group of a heartbeat, made a streams group on a join when it may be. */
  private groupFor(
    shard: GroupCoordinatorShard,
    req: StreamsHeartbeatRequest,
  ): Group | StreamsHeartbeatResult {
    const notStreams = () =>
      streamsHeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${req.groupId} is not a streams group.`)
    if (this.deps.isOtherType(shard, req.groupId)) return notStreams()
    let group = shard.groups.get(req.groupId)
    if (group?.state === 'Dead') group = undefined
    if (group?.streams) return group
    if (group && (group.consumer !== null || group.members.size > 0 || group.state !== 'Empty'))
      return notStreams()
    // No streams group here: only a join makes one. Kafka's messages differ between a leave
    // (streamsGroupLeave's streamsGroup()) and a heartbeat (getStreamsGroupOrThrow).
    if (req.memberEpoch < 0)
      return streamsHeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${req.groupId} not found.`)
    if (req.memberEpoch !== 0)
      return streamsHeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, `Streams group ${req.groupId} not found.`)
    if (!group) {
      group = newGroup(req.groupId, this.deps.clock.nowMs())
      shard.groups.set(req.groupId, group)
    }
    group.streams = newStreamsGroup(req.groupId)
    group.protocolType = 'streams'
    return group
  }

  /** The classic state follows the members (offset expiry, DeleteGroups); the timer is re-armed. */
  private afterChange(
    shard: GroupCoordinatorShard,
    group: Group,
    streams: StreamsGroup,
    notBeforeMs = 0,
  ): void {
    const state = streams.members.size === 0 ? 'Empty' : 'Stable'
    if (group.state !== state) {
      group.state = state
      group.currentStateTimestampMs = this.deps.clock.nowMs()
    }
    if (!shard.context.isActive) return
    this.armInitialAssignment(shard, group, streams)
    const config = this.configOf(group.groupId)
    const deadline = nextStreamsDeadline(streams, config)
    if (deadline === null) {
      shard.context.timer.cancel(timerKey(group.groupId))
      return
    }
    const live = () =>
      !shard.unloaded && shard.groups.get(group.groupId) === group && group.streams === streams
    shard.context.timer.schedule(timerKey(group.groupId), Math.max(deadline, notBeforeMs), () => {
      if (!live()) return
      void shard
        .writeStep(streams, () =>
          live()
            ? this.change(streams, () =>
                expireStreamsMembers(
                  streams,
                  this.deps.clock.nowMs(),
                  this.configOf(group.groupId),
                  this.topicsView(),
                ),
              )
            : null,
        )
        .then((code) => {
          if (!live()) return
          const retryAtMs = code === ErrorCode.NONE ? 0 : this.deps.clock.nowMs() + TIMER_RETRY_BACKOFF_MS
          this.afterChange(shard, group, streams, retryAtMs)
        })
    })
  }

  /**
   * Assigns a new group's tasks once its initial rebalance delay is over; members see them
   * at their next heartbeat (which assigns too, once the delay is over). A refused write is
   * tried again after a backoff.
   */
  private armInitialAssignment(
    shard: GroupCoordinatorShard,
    group: Group,
    streams: StreamsGroup,
    notBeforeMs = 0,
  ): void {
    const dueMs = streams.initialAssignmentDueMs
    const key = initialAssignmentKey(group.groupId)
    if (dueMs === null) {
      shard.context.timer.cancel(key)
      return
    }
    const live = () =>
      !shard.unloaded && shard.groups.get(group.groupId) === group && group.streams === streams
    shard.context.timer.schedule(key, Math.max(dueMs, notBeforeMs), () => {
      if (!live()) return
      void shard
        .writeStep(streams, () =>
          live()
            ? this.change(streams, () =>
                assignDueInitialTargets(streams, this.deps.clock.nowMs(), this.configOf(group.groupId)),
              )
            : null,
        )
        .then((code) => {
          if (!live()) return
          const retryAtMs = code === ErrorCode.NONE ? 0 : this.deps.clock.nowMs() + TIMER_RETRY_BACKOFF_MS
          this.armInitialAssignment(shard, group, streams, retryAtMs)
        })
    })
  }

  /**
   * StreamsGroupTopologyDescriptionUpdate (KIP-1331), as Kafka's GroupCoordinatorService with
   * its in-memory plugin: UNSUPPORTED_VERSION when no store is configured, then the request's
   * own checks, the routing, the group and member, the epoch and the description.
   */
  updateTopologyDescription(req: TopologyDescriptionUpdateRequest): DescriptionUpdateOutcome {
    const fail = (errorCode: number, errorMessage: string | null) => ({ errorCode, errorMessage })
    if (!this.deps.config.storesTopologyDescriptions)
      return fail(
        ErrorCode.UNSUPPORTED_VERSION,
        'The broker has no streams group topology description plugin configured.',
      )
    if (req.memberId === '') return fail(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    if (req.groupId === '') return fail(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    const shard = this.deps.route(req.groupId)
    if (typeof shard === 'number') return fail(shard, null)
    const group = shard.groups.get(req.groupId)
    const streams = group?.state === 'Dead' ? null : streamsOf(group)
    if (!streams) {
      if ((group && group.state !== 'Dead') || this.deps.isOtherType(shard, req.groupId))
        return fail(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${req.groupId} is not a streams group.`)
      return fail(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${req.groupId} not found.`)
    }
    const outcome = updateTopologyDescription(
      streams,
      req.memberId,
      req.topologyEpoch,
      req.topologyDescription,
    )
    if (outcome.errorCode === ErrorCode.NONE) this.descriptionRequests.clear(req.groupId, req.topologyEpoch)
    return outcome
  }

  /**
   * Kafka's maybeSetTopologyDescriptionRequired: whether a successful v1 heartbeat asks the
   * member for the group's topology description (none stored for the current topology epoch,
   * the member not stale, and not asked within the backoff).
   */
  topologyDescriptionRequired(
    groupId: string,
    apiVersion: number,
    requestMemberEpoch: number,
    result: StreamsHeartbeatResult,
  ): boolean {
    if (apiVersion < 1 || !this.deps.config.storesTopologyDescriptions || requestMemberEpoch < 0) return false
    if (result.errorCode !== ErrorCode.NONE) return false
    if (result.status.some((s) => s.statusCode === StreamsStatus.STALE_TOPOLOGY)) return false
    const shard = this.deps.route(groupId)
    const streams = typeof shard === 'number' ? null : streamsOf(shard.groups.get(groupId))
    const currentEpoch = streams?.topology?.epoch ?? -1
    if (!streams || currentEpoch < 0 || streams.topologyDescription?.topologyEpoch === currentEpoch)
      return false
    return this.descriptionRequests.ask(groupId, currentEpoch, this.deps.clock.nowMs())
  }

  describe(groupId: string): StreamsGroupDescription {
    const fail = (errorCode: number, errorMessage: string | null): StreamsGroupDescription => ({
      groupId,
      errorCode,
      errorMessage,
      state: '',
      groupEpoch: 0,
      assignmentEpoch: 0,
      topology: null,
      members: [],
    })
    const shard = this.deps.route(groupId)
    if (typeof shard === 'number') return fail(shard, null)
    const group = shard.groups.get(groupId)
    const streams = group?.state === 'Dead' ? null : streamsOf(group)
    if (!streams) {
      if ((group && group.state !== 'Dead') || this.deps.isOtherType(shard, groupId))
        return fail(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${groupId} is not a streams group.`)
      return fail(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${groupId} not found.`)
    }
    return {
      groupId,
      errorCode: ErrorCode.NONE,
      errorMessage: null,
      state: streamsGroupStateName(streams),
      groupEpoch: streams.groupEpoch,
      assignmentEpoch: streams.assignmentEpoch,
      topology: streams.topology,
      topologyDescription:
        streams.topology !== null && streams.topologyDescription?.topologyEpoch === streams.topology.epoch
          ? streams.topologyDescription.description
          : null,
      members: [...streams.members.values()].map((m) => ({
        memberId: m.memberId,
        instanceId: m.instanceId,
        rackId: m.rackId,
        clientId: m.clientId,
        clientHost: m.clientHost,
        processId: m.processId,
        userEndpoint: m.userEndpoint,
        clientTags: m.clientTags,
        rebalanceTimeoutMs: m.rebalanceTimeoutMs,
        topologyEpoch: m.topologyEpoch,
        memberEpoch: m.memberEpoch,
        stateCode: STREAMS_MEMBER_STATE_CODE[m.state],
        taskOffsets: offsetEntries(streams.taskOffsets.get(m.memberId)?.offsets),
        taskEndOffsets: offsetEntries(streams.taskOffsets.get(m.memberId)?.endOffsets),
        assignment: toWireTuple(m.assigned),
        targetAssignment: toWireTuple(
          streams.targetAssignment.get(m.memberId) ?? {
            active: new Map(),
            standby: new Map(),
            warmup: new Map(),
          },
        ),
      })),
    }
  }

  /** The settings of one group: the broker's with the group's own configs. */
  configOf(groupId: string): StreamsGroupConfig {
    return withGroupConfigs(this.deps.config, this.deps.metadataImage().groupConfigs?.get(groupId))
  }

  private topicsView(): StreamsTopicsView {
    const partitionCounts = new Map<string, number>()
    for (const [name, topic] of this.deps.metadataImage().topics)
      partitionCounts.set(name, topic.partitions.length)
    return { partitionCounts }
  }
}
