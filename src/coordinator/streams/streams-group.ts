/**
 * Streams groups' membership and task assignment (KIP-1071; Kafka's StreamsGroup,
 * StreamsGroupMember and the streams parts of GroupMetadataManager), as pure steps on one
 * group: `(group, request, nowMs, view) → result`.
 *
 * A member joins with epoch 0 and the application's topology; the group keeps the first
 * topology it was sent, as Kafka 4.4 (a member behind its epoch is told STALE_TOPOLOGY, a
 * different topology at its epoch or later is refused: no topology updates yet). Any
 * change of membership, of a member's process or endpoint, of the topology or of its topics'
 * partition counts bumps the group epoch and recomputes the target assignment
 * (streams-assignor.ts). A member then moves towards its target as Kafka's
 * CurrentAssignmentBuilder moves it (streams-reconcile.ts): an active task another member
 * still owns is given only once that member has reported it revoked, so a task is active on
 * one member at a time. Leaving: epoch -1 (the member goes), -2 (a static member goes away
 * for now, keeping its tasks until its session ends or its instance id rejoins). A member
 * silent for group.streams.session.timeout.ms, or not revoking within its rebalance timeout,
 * is removed.
 *
 * The coordinator writes what a step changed to `__consumer_offsets` as Kafka's StreamsGroup*
 * records (streams-group-records.ts) and a new coordinator replays them: after a failover the
 * group keeps its epochs, topology, members and tasks. The group's committed offsets are
 * ordinary offset records.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import { assignmentIntervalOver, DEFAULT_ASSIGNMENT_INTERVAL_MS } from '../assignment-interval.js'
import { assignTasks, emptyTasks, type TasksTuple, taskCount } from './streams-assignor.js'
import {
  computeNextAssignment,
  type OwnedTasks,
  ownedTasksMatch,
  type StreamsMemberState,
  sameTasks,
} from './streams-reconcile.js'
import {
  type ConfiguredTopology,
  type CreatableInternalTopic,
  configureTopology,
  invalidTopologyReason,
  type PartitionCounts,
  StreamsStatus,
  type StreamsStatusEntry,
  type StreamsTopology,
  topologySignature,
} from './streams-topology.js'
import type { StoredTopologyDescription } from './streams-topology-description.js'

export interface StreamsGroupConfig {
  /** group.streams.heartbeat.interval.ms */
  readonly heartbeatIntervalMs: number
  /** group.streams.session.timeout.ms */
  readonly sessionTimeoutMs: number
  /** group.streams.max.size */
  readonly maxSize: number
  /** group.streams.num.standby.replicas */
  readonly numStandbyReplicas: number
  /**
   * group.streams.topology.description.plugin.class is Kafka's in-memory store: members are
   * asked for their topology description and StreamsGroupTopologyDescriptionUpdate keeps it.
   */
  readonly storesTopologyDescriptions: boolean
  /** group.streams.task.offset.interval.ms: how often members report their task offsets (sent to them). */
  readonly taskOffsetIntervalMs: number
  /** group.streams.acceptable.recovery.lag (sent to members; Kafka 4.4's assignor does not read it). */
  readonly acceptableRecoveryLag: number
  /**
   * group.streams.initial.rebalance.delay.ms: a new group's first target assignment waits
   * this long after its first member joined, so members starting together share it.
   */
  readonly initialRebalanceDelayMs: number
  /**
   * group.streams.assignment.interval.ms (KIP-1263): a target assignment is computed at most
   * once per interval; a change within it waits for the first heartbeat after it (no timer).
   */
  readonly assignmentIntervalMs: number
}

export const DEFAULT_STREAMS_GROUP_CONFIG: StreamsGroupConfig = {
  heartbeatIntervalMs: 5000,
  sessionTimeoutMs: 45000,
  maxSize: 2147483647,
  numStandbyReplicas: 0,
  storesTopologyDescriptions: false,
  taskOffsetIntervalMs: 60000,
  acceptableRecoveryLag: 10000,
  initialRebalanceDelayMs: 3000,
  assignmentIntervalMs: DEFAULT_ASSIGNMENT_INTERVAL_MS,
}

export interface Endpoint {
  readonly host: string
  readonly port: number
}

export interface StreamsMember {
  readonly memberId: string
  instanceId: string | null
  rackId: string | null
  clientId: string
  clientHost: string
  processId: string
  userEndpoint: Endpoint | null
  clientTags: { key: string; value: string }[]
  rebalanceTimeoutMs: number
  topologyEpoch: number
  /** -2 after a static member's temporary leave. */
  memberEpoch: number
  previousMemberEpoch: number
  state: StreamsMemberState
  assigned: TasksTuple
  /** Active tasks it must give up before the group moves on (UNREVOKED_TASKS). */
  activePendingRevocation: TasksTuple['active']
  lastHeartbeatMs: number
  /** Fenced if the revocation is not acknowledged by then (its rebalance timeout). */
  revocationDeadlineMs: number | null
}

export interface StreamsGroup {
  readonly groupId: string
  groupEpoch: number
  assignmentEpoch: number
  /**
   * When the target assignment was last computed (Kafka's AssignmentTimestamp); 0 when never,
   * or since the group emptied: the next assignment is then not held by the interval.
   */
  assignmentTimestampMs: number
  topology: StreamsTopology | null
  /** The topology against the topics when the group epoch last moved. */
  configured: ConfiguredTopology | null
  /** The topics' partition counts when the group epoch last moved. */
  signature: string
  readonly members: Map<string, StreamsMember>
  /** instance id → member id. */
  readonly staticMembers: Map<string, string>
  targetAssignment: Map<string, TasksTuple>
  /** Bumped whenever a member's assignment changes: members re-read the IQ endpoints. */
  endpointInformationEpoch: number
  /** The first member that asked the whole application to shut down (until the group is empty). */
  shutdownRequestMemberId: string | null
  /**
   * The assignment configs (num.standby.replicas) the group last ran with: a change moves the
   * group epoch, as Kafka's lastAssignmentConfigs. Null in a group a new coordinator loaded
   * (Kafka writes them in its metadata record, tidelog does not): its first heartbeat takes
   * the current ones without a rebalance.
   */
  assignmentConfigs: string | null
  /**
   * While a new group's first assignment is delayed (its initial rebalance delay), when it
   * is due; null otherwise. In memory only, as Kafka's timer: a group loaded by a new
   * coordinator is assigned at its next heartbeat.
   */
  initialAssignmentDueMs: number | null
  /**
   * The changelog offsets each member last reported (TaskOffsets, TaskEndOffsets): the
   * assignor places tasks by them. In memory only, as Kafka's: a new coordinator has none
   * until members report again.
   */
  readonly taskOffsets: Map<string, MemberTaskOffsets>
  /** The description a member last pushed (KIP-1331), in memory only as Kafka's in-memory store. */
  topologyDescription: StoredTopologyDescription | null
}

/** Offsets per subtopology and partition. */
export type TaskOffsetMap = Map<string, Map<number, bigint>>

export interface MemberTaskOffsets {
  readonly offsets: TaskOffsetMap
  readonly endOffsets: TaskOffsetMap
}

export interface TaskOffsetEntry {
  readonly subtopologyId: string
  readonly partition: number
  readonly offset: bigint
}

export interface StreamsHeartbeatRequest {
  readonly groupId: string
  readonly memberId: string
  readonly memberEpoch: number
  readonly endpointInformationEpoch: number
  readonly instanceId: string | null
  readonly rackId: string | null
  readonly rebalanceTimeoutMs: number
  readonly topology: StreamsTopology | null
  readonly owned: OwnedTasks | null
  readonly processId: string | null
  readonly userEndpoint: Endpoint | null
  readonly clientTags: { key: string; value: string }[] | null
  readonly shutdownApplication: boolean
  readonly clientId: string
  readonly clientHost: string
  /** Null: unchanged since the member's last report. */
  readonly taskOffsets?: readonly TaskOffsetEntry[] | null
  readonly taskEndOffsets?: readonly TaskOffsetEntry[] | null
}

export interface WireTasks {
  readonly subtopologyId: string
  readonly partitions: number[]
}

export interface StreamsHeartbeatResult {
  readonly errorCode: number
  readonly errorMessage: string | null
  readonly memberId: string
  readonly memberEpoch: number
  readonly heartbeatIntervalMs: number
  readonly status: StreamsStatusEntry[]
  /** Sent on a join and whenever the member's tasks changed; null otherwise. */
  readonly tasks: { active: WireTasks[]; standby: WireTasks[]; warmup: WireTasks[] } | null
  readonly endpointInformationEpoch: number
  /** Sent when the member's endpoint epoch is behind the group's. */
  readonly partitionsByUserEndpoint:
    | {
        userEndpoint: Endpoint
        activePartitions: WireTopicPartitions[]
        standbyPartitions: WireTopicPartitions[]
      }[]
    | null
  /** Internal topics the broker should create (MISSING_INTERNAL_TOPICS). */
  readonly creatableTopics: CreatableInternalTopic[]
}

export interface WireTopicPartitions {
  readonly topic: string
  readonly partitions: number[]
}

/** What the cluster's topics look like to the group. */
export interface StreamsTopicsView {
  readonly partitionCounts: PartitionCounts
}

export function streamsHeartbeatError(
  errorCode: number,
  errorMessage: string | null = null,
): StreamsHeartbeatResult {
  return {
    errorCode,
    errorMessage,
    memberId: '',
    memberEpoch: 0,
    heartbeatIntervalMs: 0,
    status: [],
    tasks: null,
    endpointInformationEpoch: 0,
    partitionsByUserEndpoint: null,
    creatableTopics: [],
  }
}

export function newStreamsGroup(groupId: string): StreamsGroup {
  return {
    groupId,
    groupEpoch: 0,
    assignmentEpoch: 0,
    assignmentTimestampMs: 0,
    topology: null,
    configured: null,
    signature: '',
    members: new Map(),
    staticMembers: new Map(),
    targetAssignment: new Map(),
    endpointInformationEpoch: 0,
    shutdownRequestMemberId: null,
    assignmentConfigs: null,
    initialAssignmentDueMs: null,
    taskOffsets: new Map(),
    topologyDescription: null,
  }
}

/** Kafka's MemberTaskOffsets.toNestedMap: the offsets by task, or the duplicate's message. */
function taskOffsetMap(entries: readonly TaskOffsetEntry[]): TaskOffsetMap | string {
  const result: TaskOffsetMap = new Map()
  for (const e of entries) {
    const byPartition = result.get(e.subtopologyId) ?? new Map<number, bigint>()
    if (byPartition.has(e.partition))
      return `Task offsets contain a duplicate entry for subtopology ${e.subtopologyId} and partition ${e.partition}.`
    byPartition.set(e.partition, e.offset)
    result.set(e.subtopologyId, byPartition)
  }
  return result
}

/** The member's offsets after its report (a null list keeps the last one), or the error message. */
function reportedTaskOffsets(
  previous: MemberTaskOffsets | undefined,
  req: StreamsHeartbeatRequest,
): MemberTaskOffsets | string | null {
  if (req.taskOffsets == null && req.taskEndOffsets == null) return null
  const offsets = req.taskOffsets == null ? (previous?.offsets ?? new Map()) : taskOffsetMap(req.taskOffsets)
  if (typeof offsets === 'string') return offsets
  const endOffsets =
    req.taskEndOffsets == null ? (previous?.endOffsets ?? new Map()) : taskOffsetMap(req.taskEndOffsets)
  if (typeof endOffsets === 'string') return endOffsets
  return { offsets, endOffsets }
}

/** Kafka's StreamsGroupState names (StreamsGroup.StreamsGroupState.toString()). */
export type StreamsGroupStateName = 'Empty' | 'NotReady' | 'Assigning' | 'Reconciling' | 'Stable'

export function streamsGroupStateName(group: StreamsGroup): StreamsGroupStateName {
  if (group.members.size === 0) return 'Empty'
  if (!group.configured || group.configured.problems.length > 0) return 'NotReady'
  if (group.assignmentEpoch !== group.groupEpoch) return 'Assigning'
  for (const m of group.members.values())
    if (m.memberEpoch !== group.assignmentEpoch || m.state !== 'STABLE') return 'Reconciling'
  return 'Stable'
}

/** Kafka's throwIfStreamsGroupHeartbeatRequestIsInvalid; the INVALID_REQUEST answer, or null. */
export function validateStreamsHeartbeat(req: StreamsHeartbeatRequest): StreamsHeartbeatResult | null {
  const invalid = (message: string) => streamsHeartbeatError(ErrorCode.INVALID_REQUEST, message)
  if (req.memberId === '') return invalid("MemberId can't be empty.")
  if (req.groupId === '') return invalid("GroupId can't be empty.")
  if (req.instanceId === '') return invalid("InstanceId can't be empty.")
  if (req.rackId === '') return invalid("RackId can't be empty.")
  if (req.memberEpoch === 0) {
    if (req.rebalanceTimeoutMs === -1) return invalid('RebalanceTimeoutMs must be provided in first request.')
    if (req.owned && taskCount(req.owned.active) > 0)
      return invalid('ActiveTasks must be empty when (re-)joining.')
    if (req.owned && taskCount(req.owned.standby) > 0)
      return invalid('StandbyTasks must be empty when (re-)joining.')
    if (req.owned && taskCount(req.owned.warmup) > 0)
      return invalid('WarmupTasks must be empty when (re-)joining.')
    if (req.topology === null) return invalid('Topology must be non-null when (re-)joining.')
    if (req.topology.subtopologies.some((s) => (s.sourceTopicRegex?.length ?? 0) > 0))
      return invalid('Regular expressions for source topics are not supported yet.')
    const reason = invalidTopologyReason(req.topology)
    if (reason !== null) return streamsHeartbeatError(ErrorCode.STREAMS_INVALID_TOPOLOGY, reason)
  } else if (req.memberEpoch === -2) {
    if (req.instanceId === null) return invalid("InstanceId can't be null.")
  } else if (req.memberEpoch < -2) {
    return invalid(`MemberEpoch is ${req.memberEpoch}, but must be greater than or equal to -2.`)
  }
  if (req.memberEpoch !== 0 && req.topology !== null)
    return invalid('Topology can only be provided when (re-)joining.')
  return null
}

/** Kafka's throwIfStreamsGroupMemberEpochIsInvalid: FENCED_MEMBER_EPOCH, or null. */
function fencedReason(member: StreamsMember, req: StreamsHeartbeatRequest): string | null {
  if (req.memberEpoch > member.memberEpoch)
    return `The streams group member has a greater member epoch (${req.memberEpoch}) than the one known by the group coordinator (${member.memberEpoch}). The member must abandon all its partitions and rejoin.`
  if (
    req.memberEpoch < member.memberEpoch &&
    (req.memberEpoch !== member.previousMemberEpoch || !ownedTasksMatch(req.owned, member.assigned))
  )
    return `The streams group member has a smaller member epoch (${req.memberEpoch}) than the one known by the group coordinator (${member.memberEpoch}). The member must abandon all its partitions and rejoin.`
  return null
}

function newMember(req: StreamsHeartbeatRequest, nowMs: number): StreamsMember {
  return {
    memberId: req.memberId,
    instanceId: req.instanceId,
    rackId: req.rackId,
    clientId: req.clientId,
    clientHost: req.clientHost,
    processId: req.processId ?? '',
    userEndpoint: req.userEndpoint,
    clientTags: req.clientTags ?? [],
    rebalanceTimeoutMs: req.rebalanceTimeoutMs,
    topologyEpoch: req.topology?.epoch ?? 0,
    memberEpoch: 0,
    previousMemberEpoch: -1,
    state: 'STABLE',
    assigned: emptyTasks(),
    activePendingRevocation: new Map(),
    lastHeartbeatMs: nowMs,
    revocationDeadlineMs: null,
  }
}

/** Removes a member (leave, expiry, fencing); the group moves to a new epoch. */
export function removeStreamsMember(group: StreamsGroup, memberId: string, view: StreamsTopicsView): void {
  const member = group.members.get(memberId)
  if (!member) return
  group.members.delete(memberId)
  if (member.instanceId !== null && group.staticMembers.get(member.instanceId) === memberId)
    group.staticMembers.delete(member.instanceId)
  group.targetAssignment.delete(memberId)
  group.taskOffsets.delete(memberId)
  bumpGroupEpoch(group, view)
  // As Kafka's streamsGroupFenceMember: the remaining members' target is recomputed at
  // their next heartbeat (within the assignment interval); an emptied group starts afresh.
  if (group.members.size === 0) {
    group.shutdownRequestMemberId = null
    group.assignmentEpoch = group.groupEpoch
    group.assignmentTimestampMs = 0
  }
}

/**
 * The member the request speaks for, created or replaced on a join; or the error answer.
 * `changed` tells whether the membership changed (a new group epoch).
 */
function memberFor(
  group: StreamsGroup,
  req: StreamsHeartbeatRequest,
  nowMs: number,
  config: StreamsGroupConfig,
): { member: StreamsMember; changed: boolean } | StreamsHeartbeatResult {
  const existing = group.members.get(req.memberId)
  if (req.memberEpoch !== 0) {
    if (!existing)
      return streamsHeartbeatError(
        ErrorCode.UNKNOWN_MEMBER_ID,
        `Member ${req.memberId} is not a member of group ${group.groupId}.`,
      )
    const fenced = fencedReason(existing, req)
    if (fenced !== null) return streamsHeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, fenced)
    return { member: existing, changed: false }
  }
  const member = newMember(req, nowMs)
  if (req.instanceId !== null) {
    const previousId = group.staticMembers.get(req.instanceId)
    const previous = previousId === undefined ? undefined : group.members.get(previousId)
    if (previous && previous.memberId !== req.memberId) {
      // Kafka: a static member may only be replaced after it left with epoch -2.
      if (previous.memberEpoch !== -2)
        return streamsHeartbeatError(
          ErrorCode.UNRELEASED_INSTANCE_ID,
          `Static member ${previous.memberId} with instance id ${req.instanceId} is not released yet.`,
        )
      // The new incarnation takes over the old one's tasks and epoch (no rebalance).
      group.members.delete(previous.memberId)
      group.taskOffsets.delete(previous.memberId)
      member.memberEpoch = previous.previousMemberEpoch
      member.assigned = previous.assigned
      member.activePendingRevocation = previous.activePendingRevocation
      member.state = previous.state
    }
    group.staticMembers.set(req.instanceId, req.memberId)
  }
  if (!existing && group.members.size >= config.maxSize)
    return streamsHeartbeatError(
      ErrorCode.GROUP_MAX_SIZE_REACHED,
      `The streams group has reached its maximum capacity of ${config.maxSize} members.`,
    )
  // A member joining again with its id owns nothing now (the request says so): it starts over.
  group.members.set(req.memberId, member)
  return { member, changed: member.memberEpoch === 0 }
}

/** A subtopology's fields in a fixed order, its lists as given (Kafka compares them so). */
function subtopologyKey(s: StreamsTopology['subtopologies'][number]): string {
  return JSON.stringify([
    s.subtopologyId,
    s.sourceTopics,
    s.sourceTopicRegex ?? [],
    s.repartitionSinkTopics,
    s.stateChangelogTopics,
    s.repartitionSourceTopics,
    s.copartitionGroups,
  ])
}

/**
 * Kafka 4.4's maybeUpdateTopology: a group keeps the first topology it was given; a join
 * with an older epoch is only stale (STALE_TOPOLOGY), and one with the same or a newer epoch
 * must bring the very same topology: Kafka does not update topologies yet (so it never
 * answers STREAMS_INVALID_TOPOLOGY_EPOCH or STREAMS_TOPOLOGY_FENCED).
 */
function topologyUpdateRefused(current: StreamsTopology | null, sent: StreamsTopology): boolean {
  if (current === null || sent.epoch < current.epoch) return false
  if (sent.epoch !== current.epoch || sent.subtopologies.length !== current.subtopologies.length) return true
  const keys = new Set(current.subtopologies.map(subtopologyKey))
  return sent.subtopologies.some((s) => !keys.has(subtopologyKey(s)))
}

/** Takes the member's reported metadata; true when it changes what the assignor sees. */
function updateMember(member: StreamsMember, req: StreamsHeartbeatRequest, nowMs: number): boolean {
  member.lastHeartbeatMs = nowMs
  let changed = false
  if (req.rackId !== null && req.rackId !== member.rackId) {
    member.rackId = req.rackId
    changed = true
  }
  if (req.processId !== null && req.processId !== member.processId) {
    member.processId = req.processId
    changed = true
  }
  if (req.userEndpoint !== null && JSON.stringify(req.userEndpoint) !== JSON.stringify(member.userEndpoint)) {
    member.userEndpoint = req.userEndpoint
    changed = true
  }
  if (req.clientTags !== null) member.clientTags = req.clientTags
  if (req.rebalanceTimeoutMs !== -1) member.rebalanceTimeoutMs = req.rebalanceTimeoutMs
  if (req.topology !== null) member.topologyEpoch = req.topology.epoch
  return changed
}

/** A new group epoch, with the topology configured against the topics as they are now. */
function bumpGroupEpoch(group: StreamsGroup, view: StreamsTopicsView): void {
  group.groupEpoch++
  group.signature = topologySignature(group.topology, view.partitionCounts)
  group.configured = group.topology ? configureTopology(group.topology, view.partitionCounts) : null
}

/** The target assignment of the group epoch, computed now. */
function assignTargets(group: StreamsGroup, config: StreamsGroupConfig, nowMs: number): void {
  const stateful = new Set(
    (group.topology?.subtopologies ?? [])
      .filter((s) => s.stateChangelogTopics.length > 0)
      .map((s) => s.subtopologyId),
  )
  group.targetAssignment = assignTasks({
    members: [...group.members.values()].map((m) => ({
      memberId: m.memberId,
      processId: m.processId,
      current: m.assigned,
      taskOffsets: group.taskOffsets.get(m.memberId)?.offsets ?? new Map(),
    })),
    taskCounts: group.configured?.taskCounts ?? new Map(),
    stateful,
    numStandbyReplicas: config.numStandbyReplicas,
  })
  group.assignmentEpoch = group.groupEpoch
  group.assignmentTimestampMs = nowMs
}

function initialAssignmentPending(group: StreamsGroup, nowMs: number): boolean {
  return group.initialAssignmentDueMs !== null && nowMs < group.initialAssignmentDueMs
}

/**
 * The delayed first assignment of a new group, once due (Kafka's
 * computeDelayedTargetAssignment): nothing if every member left meanwhile.
 */
export function assignDueInitialTargets(
  group: StreamsGroup,
  nowMs: number,
  config: StreamsGroupConfig,
): void {
  if (group.initialAssignmentDueMs === null || initialAssignmentPending(group, nowMs)) return
  group.initialAssignmentDueMs = null
  if (group.members.size > 0 && group.groupEpoch > group.assignmentEpoch) assignTargets(group, config, nowMs)
}

/** One heartbeat of a validated request on its group (made for a join by the caller). */
export function streamsGroupHeartbeat(
  group: StreamsGroup,
  req: StreamsHeartbeatRequest,
  nowMs: number,
  config: StreamsGroupConfig,
  view: StreamsTopicsView,
): StreamsHeartbeatResult {
  if (req.memberEpoch === -1 || req.memberEpoch === -2) return leave(group, req, view)
  const firstMember = group.members.size === 0
  if (req.topology !== null && topologyUpdateRefused(group.topology, req.topology))
    return streamsHeartbeatError(ErrorCode.INVALID_REQUEST, 'Topology updates are not supported yet.')
  const offsets = reportedTaskOffsets(group.taskOffsets.get(req.memberId), req)
  if (typeof offsets === 'string') return streamsHeartbeatError(ErrorCode.INVALID_REQUEST, offsets)
  const found = memberFor(group, req, nowMs, config)
  if ('errorCode' in found) return found
  const { member } = found
  if (offsets !== null) group.taskOffsets.set(member.memberId, offsets)
  let changed = found.changed
  changed = updateMember(member, req, nowMs) || changed
  if (req.topology !== null && group.topology === null) {
    group.topology = req.topology
    changed = true
  }
  if (req.shutdownApplication) group.shutdownRequestMemberId ??= member.memberId
  const assignmentConfigs = `num.standby.replicas=${config.numStandbyReplicas}`
  if (group.assignmentConfigs !== null && group.assignmentConfigs !== assignmentConfigs) changed = true
  group.assignmentConfigs = assignmentConfigs
  if (changed || topologySignature(group.topology, view.partitionCounts) !== group.signature)
    bumpGroupEpoch(group, view)
  if (firstMember && config.initialRebalanceDelayMs > 0 && group.initialAssignmentDueMs === null) {
    group.initialAssignmentDueMs = nowMs + config.initialRebalanceDelayMs
    // Members wait at epoch 1 (reconcile): the assignment must come at a later epoch.
    if (group.groupEpoch < 2) bumpGroupEpoch(group, view)
  } else assignDueInitialTargets(group, nowMs, config)
  // Behind after a bump, or loaded so by a new coordinator (the delay's timer is not kept).
  let intervalDelayed = false
  if (group.groupEpoch > group.assignmentEpoch && !initialAssignmentPending(group, nowMs)) {
    if (assignmentIntervalOver(group.assignmentTimestampMs, config.assignmentIntervalMs, nowMs))
      assignTargets(group, config, nowMs)
    else intervalDelayed = true
  }
  const before = { epoch: member.memberEpoch, assigned: member.assigned }
  reconcile(group, member, req.owned, nowMs)
  const tasksChanged = !sameTasks(before.assigned, member.assigned)
  if (tasksChanged) group.endpointInformationEpoch++
  return {
    errorCode: ErrorCode.NONE,
    errorMessage: null,
    memberId: member.memberId,
    memberEpoch: member.memberEpoch,
    heartbeatIntervalMs: config.heartbeatIntervalMs,
    status: statusOf(group, member, intervalDelayed),
    tasks:
      req.memberEpoch === 0 || tasksChanged || before.epoch !== member.memberEpoch
        ? toWireTuple(member.assigned)
        : null,
    endpointInformationEpoch: group.endpointInformationEpoch,
    partitionsByUserEndpoint:
      req.endpointInformationEpoch !== group.endpointInformationEpoch ? endpointsOf(group) : null,
    creatableTopics: [...(group.configured?.missingInternalTopics ?? [])],
  }
}

function leave(
  group: StreamsGroup,
  req: StreamsHeartbeatRequest,
  view: StreamsTopicsView,
): StreamsHeartbeatResult {
  // Kafka's streamsGroupLeave takes the request before it looks the member up.
  if (req.shutdownApplication) group.shutdownRequestMemberId ??= req.memberId
  const member = group.members.get(req.memberId)
  if (!member)
    return streamsHeartbeatError(
      ErrorCode.UNKNOWN_MEMBER_ID,
      `Member ${req.memberId} is not a member of group ${group.groupId}.`,
    )
  if (req.memberEpoch === -2 && member.instanceId !== null) {
    // A static member away for now keeps its tasks until its session ends.
    member.previousMemberEpoch = member.memberEpoch
    member.memberEpoch = -2
  } else {
    removeStreamsMember(group, member.memberId, view)
  }
  return { ...streamsHeartbeatError(ErrorCode.NONE), memberId: req.memberId, memberEpoch: req.memberEpoch }
}

/** Moves the member towards its target (Kafka's CurrentAssignmentBuilder). */
function reconcile(
  group: StreamsGroup,
  member: StreamsMember,
  owned: OwnedTasks | null,
  nowMs: number,
): void {
  // While the first assignment is delayed a member is stable at epoch 1 with no tasks (as
  // Kafka answers): at epoch 0 a client's next heartbeat would be a join without its fields.
  const delayed = group.initialAssignmentDueMs !== null && group.groupEpoch > group.assignmentEpoch
  const next = computeNextAssignment(
    member,
    delayed ? Math.max(1, group.assignmentEpoch) : group.assignmentEpoch,
    delayed ? emptyTasks() : (group.targetAssignment.get(member.memberId) ?? emptyTasks()),
    owned,
    (subtopologyId, partition) => {
      for (const other of group.members.values()) {
        if (other.memberId === member.memberId) continue
        if (other.assigned.active.get(subtopologyId)?.includes(partition)) return true
        if (other.activePendingRevocation.get(subtopologyId)?.includes(partition)) return true
      }
      return false
    },
  )
  if (next.state === 'UNREVOKED_TASKS' && member.state !== 'UNREVOKED_TASKS')
    member.revocationDeadlineMs = nowMs + member.rebalanceTimeoutMs
  if (next.state !== 'UNREVOKED_TASKS') member.revocationDeadlineMs = null
  if (next.memberEpoch !== member.memberEpoch) member.previousMemberEpoch = member.memberEpoch
  member.memberEpoch = next.memberEpoch
  member.state = next.state
  member.assigned = next.assigned
  member.activePendingRevocation = next.activePendingRevocation
}

/** The statuses in Kafka's order: stale topology, delayed assignment, topics, shutdown. */
function statusOf(
  group: StreamsGroup,
  member: StreamsMember,
  intervalDelayed: boolean,
): StreamsStatusEntry[] {
  const status: StreamsStatusEntry[] = []
  const groupEpoch = group.topology?.epoch ?? 0
  if (member.topologyEpoch < groupEpoch)
    status.push({
      statusCode: StreamsStatus.STALE_TOPOLOGY,
      statusDetail: `The member's topology epoch ${member.topologyEpoch} is behind the group's topology epoch ${groupEpoch}.`,
    })
  if (group.initialAssignmentDueMs !== null)
    status.push({
      statusCode: StreamsStatus.ASSIGNMENT_DELAYED,
      statusDetail: 'Assignment delayed due to the configured initial rebalance delay.',
    })
  else if (intervalDelayed)
    status.push({
      statusCode: StreamsStatus.ASSIGNMENT_DELAYED,
      statusDetail: 'Assignment delayed due to the configured assignment interval.',
    })
  status.push(...(group.configured?.problems ?? []))
  if (group.shutdownRequestMemberId !== null)
    status.push({
      statusCode: StreamsStatus.SHUTDOWN_APPLICATION,
      statusDetail: `Streams group member ${group.shutdownRequestMemberId} encountered a fatal error and requested a shutdown for the entire application.`,
    })
  return status
}

export function toWireTasks(tasks: TasksTuple['active']): WireTasks[] {
  return [...tasks]
    .filter(([, partitions]) => partitions.length > 0)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([subtopologyId, partitions]) => ({ subtopologyId, partitions: [...partitions] }))
}

export function toWireTuple(tuple: TasksTuple): {
  active: WireTasks[]
  standby: WireTasks[]
  warmup: WireTasks[]
} {
  return {
    active: toWireTasks(tuple.active),
    standby: toWireTasks(tuple.standby),
    warmup: toWireTasks(tuple.warmup),
  }
}

/** Kafka's IQ information: per member with an endpoint, the input partitions of its tasks. */
function endpointsOf(group: StreamsGroup): NonNullable<StreamsHeartbeatResult['partitionsByUserEndpoint']> {
  const topology = group.topology
  if (!topology) return []
  const partitionsOf = (tasks: TasksTuple['active']): WireTopicPartitions[] => {
    const byTopic = new Map<string, Set<number>>()
    for (const [id, partitions] of tasks) {
      const sub = topology.subtopologies.find((s) => s.subtopologyId === id)
      if (!sub) continue
      for (const topic of [...sub.sourceTopics, ...sub.repartitionSourceTopics.map((t) => t.name)]) {
        const set = byTopic.get(topic) ?? new Set()
        for (const p of partitions) set.add(p)
        byTopic.set(topic, set)
      }
    }
    return [...byTopic]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([topic, set]) => ({ topic, partitions: [...set].sort((a, b) => a - b) }))
  }
  const result: NonNullable<StreamsHeartbeatResult['partitionsByUserEndpoint']> = []
  for (const m of group.members.values()) {
    if (!m.userEndpoint) continue
    const standby = new Map([...m.assigned.standby, ...m.assigned.warmup])
    result.push({
      userEndpoint: m.userEndpoint,
      activePartitions: partitionsOf(m.assigned.active),
      standbyPartitions: partitionsOf(standby),
    })
  }
  return result
}

/** Removes members whose session ran out or who did not revoke in time; true when any was. */
export function expireStreamsMembers(
  group: StreamsGroup,
  nowMs: number,
  config: StreamsGroupConfig,
  view: StreamsTopicsView,
): boolean {
  let expired = false
  for (const member of [...group.members.values()]) {
    const sessionOver = nowMs - member.lastHeartbeatMs >= config.sessionTimeoutMs
    const revocationOver = member.revocationDeadlineMs !== null && nowMs >= member.revocationDeadlineMs
    if (!sessionOver && !revocationOver) continue
    removeStreamsMember(group, member.memberId, view)
    expired = true
  }
  return expired
}

/** When the group's next member session or revocation runs out, or null without members. */
export function nextStreamsDeadline(group: StreamsGroup, config: StreamsGroupConfig): number | null {
  let deadline: number | null = null
  for (const member of group.members.values()) {
    for (const at of [member.lastHeartbeatMs + config.sessionTimeoutMs, member.revocationDeadlineMs]) {
      if (at !== null && (deadline === null || at < deadline)) deadline = at
    }
  }
  return deadline
}

/** Offset commits and fetches of a streams group's members (Kafka's validateOffsetCommit of a StreamsGroup). */
export function validateStreamsOffsetRequest(
  group: StreamsGroup,
  memberId: string,
  memberEpoch: number,
  kind: 'commit' | 'fetch',
): number {
  if (kind === 'fetch' && memberEpoch < 0 && memberId === '') return ErrorCode.NONE
  if (kind === 'commit' && memberEpoch < 0 && group.members.size === 0) return ErrorCode.NONE
  const member = group.members.get(memberId)
  if (!member) return ErrorCode.UNKNOWN_MEMBER_ID
  if (memberEpoch > member.memberEpoch) return ErrorCode.FENCED_MEMBER_EPOCH
  // A commit sent just before the epoch moved (a transaction in flight while another member
  // joined) is still the current owner's: its previous epoch is accepted, as Kafka 4.4 accepts
  // commits of tasks held since an older epoch. Anything older is stale.
  if (memberEpoch < member.memberEpoch && memberEpoch !== member.previousMemberEpoch)
    return ErrorCode.STALE_MEMBER_EPOCH
  return ErrorCode.NONE
}
