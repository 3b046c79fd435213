/**
 * KIP-848 consumer groups as deterministic steps, like rebalance.ts for classic groups: no
 * I/O, no clock. A ConsumerGroupHeartbeat updates the member (subscription, assignor),
 * bumps the group epoch when the group's subscriptions or their topics changed, recomputes
 * the target assignment with a server-side assignor when the group epoch is ahead of the
 * assignment epoch, and then reconciles the member towards its target (Kafka's
 * CurrentAssignmentBuilder):
 *
 * - a member that owns partitions its target no longer has must revoke them first: it keeps
 *   its epoch (UNREVOKED_PARTITIONS) until a heartbeat's owned partitions no longer hold any
 *   of them, or it is fenced when its rebalance timeout passes;
 * - a partition moves to a new owner only once no other member holds it (assigned or still
 *   pending revocation); until then the new owner waits at the new epoch
 *   (UNRELEASED_PARTITIONS), so two members never consume one partition at once;
 * - otherwise the member moves to the target epoch with its whole target (STABLE).
 *
 * State changes are written as Kafka's consumer-group records (records.ts), and the reply
 * waits for them to be committed, so a coordinator failover keeps epochs and assignments.
 */

import { assert } from '../common/assert.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { assignmentIntervalOver, DEFAULT_ASSIGNMENT_INTERVAL_MS } from './assignment-interval.js'
import { SERVER_ASSIGNORS } from './consumer-assignors.js'
import { compileRegex, validateConsumerOffsetRequest } from './consumer-group-checks.js'
import {
  consumerGroupTombstones,
  currentAssignmentRecord,
  groupEpochRecord,
  makeConsumerGroup,
  memberMetadataRecord,
  replayConsumerRecord,
  snapshotConsumerGroup,
  targetMemberRecord,
  targetMetadataRecord,
  tombstones,
} from './consumer-group-records.js'
import { type Effects, reply } from './effects.js'
import {
  type ConsumerGroupState,
  type ConsumerMember,
  type Group,
  MemberState,
  type TopicAssignment,
} from './group.js'
import type { CoordinatorRecord } from './records.js'

export {
  compileRegex,
  consumerGroupTombstones,
  makeConsumerGroup,
  replayConsumerRecord,
  snapshotConsumerGroup,
  validateConsumerOffsetRequest,
}

/** A member's epoch after a leave: -1 for good, -2 for a static member coming back. */
export const LEAVE_GROUP_MEMBER_EPOCH = -1
export const LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

export interface ConsumerGroupConfig {
  /** group.consumer.heartbeat.interval.ms */
  readonly heartbeatIntervalMs: number
  /** group.consumer.session.timeout.ms */
  readonly sessionTimeoutMs: number
  /** group.consumer.assignors: the first is the default. */
  readonly assignors: readonly string[]
  /** group.consumer.max.size */
  readonly maxSize: number
  /**
   * group.consumer.assignment.interval.ms (KIP-1263): a target assignment is computed at most
   * once per interval (assignment-interval.ts).
   */
  readonly assignmentIntervalMs: number
}

export const DEFAULT_CONSUMER_GROUP_CONFIG: ConsumerGroupConfig = {
  heartbeatIntervalMs: 5000,
  sessionTimeoutMs: 45000,
  assignors: ['uniform', 'range'],
  maxSize: 2147483647,
  assignmentIntervalMs: DEFAULT_ASSIGNMENT_INTERVAL_MS,
}

/** The cluster's topics as the assignment needs them. */
export interface TopicsView {
  /** name → id and partition count, of every topic (internal ones too, as in Kafka). */
  readonly byName: ReadonlyMap<string, { readonly topicId: string; readonly partitions: number }>
}

export interface WireTopicPartitions {
  readonly topicId: string
  readonly partitions: readonly number[]
}

export interface ConsumerHeartbeatRequest {
  readonly groupId: string
  readonly memberId: string
  readonly memberEpoch: number
  readonly instanceId: string | null
  readonly rackId: string | null
  readonly rebalanceTimeoutMs: number
  readonly subscribedTopicNames: readonly string[] | null
  readonly subscribedTopicRegex: string | null
  readonly serverAssignor: string | null
  readonly topicPartitions: readonly WireTopicPartitions[] | null
  readonly clientId: string
  readonly clientHost: string
}

export interface ConsumerHeartbeatResult {
  readonly errorCode: number
  readonly errorMessage: string | null
  readonly memberId: string | null
  readonly memberEpoch: number
  readonly heartbeatIntervalMs: number
  /** null when unchanged since the member's last heartbeat. */
  readonly assignment: WireTopicPartitions[] | null
}

export function heartbeatError(
  errorCode: number,
  errorMessage: string | null = null,
): ConsumerHeartbeatResult {
  return {
    errorCode,
    errorMessage,
    memberId: null,
    memberEpoch: -1,
    heartbeatIntervalMs: 0,
    assignment: null,
  }
}

/** Kafka's consumer group states, as ConsumerGroupDescribe and ListGroups name them. */
export type ConsumerGroupStateName = 'Empty' | 'Assigning' | 'Reconciling' | 'Stable'

export function consumerGroupStateName(state: ConsumerGroupState): ConsumerGroupStateName {
  if (state.members.size === 0) return 'Empty'
  if (state.assignmentEpoch < state.groupEpoch) return 'Assigning'
  for (const m of state.members.values())
    if (m.state !== MemberState.STABLE || (m.memberEpoch !== state.assignmentEpoch && m.memberEpoch >= 0))
      return 'Reconciling'
  return 'Stable'
}

/**
 * Checks that need no group (Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid);
 * returns the error or null.
 */
export function validateHeartbeat(
  req: ConsumerHeartbeatRequest,
  apiVersion: number,
  config: ConsumerGroupConfig,
): ConsumerHeartbeatResult | null {
  const invalid = (message: string) => heartbeatError(ErrorCode.INVALID_REQUEST, message)
  if (req.groupId === '') return heartbeatError(ErrorCode.INVALID_GROUP_ID, 'GroupId can not be empty.')
  if (apiVersion >= 1 && req.memberId === '') return invalid('MemberId can not be empty.')
  if (req.memberEpoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH)
    return invalid(`MemberEpoch ${req.memberEpoch} is invalid.`)
  if (req.memberEpoch === 0) {
    if (req.rebalanceTimeoutMs <= 0) return invalid('RebalanceTimeoutMs must be provided in first request.')
    if (req.topicPartitions === null || req.topicPartitions.length > 0)
      return invalid('TopicPartitions must be empty when (re-)joining.')
    if (req.subscribedTopicNames === null && req.subscribedTopicRegex === null)
      return invalid('SubscribedTopicNames or SubscribedTopicRegex must be set in first request.')
  } else if (req.memberId === '')
    return heartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, 'MemberId can not be empty.')
  if (req.memberEpoch === LEAVE_GROUP_STATIC_MEMBER_EPOCH && req.instanceId === null)
    return invalid('InstanceId can not be null when MemberEpoch is -2.')
  if (req.serverAssignor !== null && !config.assignors.includes(req.serverAssignor))
    return heartbeatError(
      ErrorCode.UNSUPPORTED_ASSIGNOR,
      `ServerAssignor ${req.serverAssignor} is not supported.`,
    )
  if (req.subscribedTopicRegex !== null && compileRegex(req.subscribedTopicRegex) === null)
    return heartbeatError(
      ErrorCode.INVALID_REGULAR_EXPRESSION,
      `SubscribedTopicRegex ${req.subscribedTopicRegex} is invalid.`,
    )
  return null
}

/** The topic ids a member subscribes to, by name and by regex, among existing topics. */
export function subscribedTopicIds(member: ConsumerMember, topics: TopicsView): Set<string> {
  const ids = new Set<string>()
  for (const name of member.subscribedTopicNames) {
    const topic = topics.byName.get(name)
    if (topic) ids.add(topic.topicId)
  }
  const regex = member.subscribedTopicRegex === null ? null : compileRegex(member.subscribedTopicRegex)
  if (regex) for (const [name, topic] of topics.byName) if (regex.test(name)) ids.add(topic.topicId)
  return ids
}

/** The subscribed topic names (for DescribeGroups, offset expiry and OffsetDelete). */
export function subscribedTopicNames(state: ConsumerGroupState, topics: TopicsView): Set<string> {
  const names = new Set<string>()
  for (const member of state.members.values()) {
    for (const name of member.subscribedTopicNames) names.add(name)
    const regex = member.subscribedTopicRegex === null ? null : compileRegex(member.subscribedTopicRegex)
    if (regex) for (const name of topics.byName.keys()) if (regex.test(name)) names.add(name)
  }
  return names
}

function subscriptionSignature(state: ConsumerGroupState, topics: TopicsView): string {
  const byId = new Map<string, number>()
  for (const [, topic] of topics.byName) byId.set(topic.topicId, topic.partitions)
  const ids = new Set<string>()
  for (const member of state.members.values())
    for (const id of subscribedTopicIds(member, topics)) ids.add(id)
  return [...ids]
    .sort()
    .map((id) => `${id}:${byId.get(id)}`)
    .join(',')
}

// ---- the heartbeat ---------------------------------------------------------------------------

/** What a heartbeat changed so far: the records to write and whether a rebalance is due. */
interface HeartbeatChanges {
  readonly records: CoordinatorRecord[]
  /** The member's metadata record must be written again. */
  metadataChanged: boolean
  /** The group's epoch moves: a member came, went, or changed what it subscribes to. */
  membershipChanged: boolean
}

/** A failed heartbeat: its error code and message. */
interface HeartbeatRefusal {
  readonly code: number
  readonly message: string
}

export function consumerGroupHeartbeat(
  group: Group,
  req: ConsumerHeartbeatRequest,
  waiter: number,
  nowMs: number,
  config: ConsumerGroupConfig,
  topics: TopicsView,
  newMemberId: string,
): Effects {
  const state = group.consumer
  assert(state !== null && group.type === 'consumer', 'heartbeat on a consumer group')
  const changes: HeartbeatChanges = { records: [], metadataChanged: false, membershipChanged: false }
  const respond = (
    member: ConsumerMember,
    epoch: number,
    assignment: WireTopicPartitions[] | null,
  ): Effects =>
    afterRecords(waiter, changes.records, {
      errorCode: ErrorCode.NONE,
      errorMessage: null,
      memberId: member.memberId,
      memberEpoch: epoch,
      // A member that left is told no interval (0), as Kafka does: it is not to come back.
      heartbeatIntervalMs: epoch < 0 ? 0 : config.heartbeatIntervalMs,
      assignment,
    })

  if (req.memberEpoch === LEAVE_GROUP_MEMBER_EPOCH || req.memberEpoch === LEAVE_GROUP_STATIC_MEMBER_EPOCH) {
    const member = state.members.get(req.memberId)
    if (!member)
      return reply(waiter, heartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, unknownMember(req.memberId)))
    const epoch = leave(group, member, req.memberEpoch, nowMs, config, changes.records)
    return respond(member, epoch, null)
  }

  const found =
    req.memberEpoch === 0
      ? joinMember(group, state, req, nowMs, config, newMemberId, changes)
      : knownMember(state, req)
  if ('code' in found) return reply(waiter, heartbeatError(found.code, found.message))
  const member = found
  member.sessionDeadlineMs = nowMs + config.sessionTimeoutMs
  applyMemberDetails(member, req, changes)
  if (changes.metadataChanged) changes.records.push(memberMetadataRecord(group.groupId, member))
  bumpGroupEpoch(group, state, config, topics, changes, nowMs)

  const before = assignmentSnapshot(member)
  const assignedBefore = assignedKey(member)
  reconcile(state, member, req.topicPartitions, nowMs)
  if (assignmentSnapshot(member) !== before || changes.metadataChanged)
    changes.records.push(currentAssignmentRecord(group.groupId, member))
  checkSingleOwners(state)
  group.state = 'Stable'
  const assignedChanged = assignedKey(member) !== assignedBefore
  // Kafka sends the assignment on a full request only (a join, or a member resending all its
  // state after an error), not on every heartbeat that lists the owned partitions: the Java
  // client lists them once it has reconciled, and expects no assignment back unless it moved.
  const full =
    req.memberEpoch === 0 ||
    (req.rebalanceTimeoutMs !== -1 &&
      (req.subscribedTopicNames !== null || req.subscribedTopicRegex !== null) &&
      req.topicPartitions !== null)
  return respond(
    member,
    member.memberEpoch,
    assignedChanged || full ? toWire(member.assignedPartitions) : null,
  )
}

function unknownMember(memberId: string): string {
  return `Member ${memberId} is not a member of the group.`
}

/** A member leaving (epoch -1) or a static member stepping out (-2); returns the epoch to answer. */
function leave(
  group: Group,
  member: ConsumerMember,
  requestEpoch: number,
  nowMs: number,
  config: ConsumerGroupConfig,
  records: CoordinatorRecord[],
): number {
  if (requestEpoch === LEAVE_GROUP_STATIC_MEMBER_EPOCH && member.instanceId !== null) {
    // The static member keeps its assignment (and its partitions stay unassigned to others)
    // until it rejoins with the same instance id or its session times out.
    member.memberEpoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
    member.partitionsPendingRevocation = new Map()
    member.state = MemberState.STABLE
    member.sessionDeadlineMs = nowMs + config.sessionTimeoutMs
    member.revocationDeadlineMs = null
    records.push(currentAssignmentRecord(group.groupId, member))
    return LEAVE_GROUP_STATIC_MEMBER_EPOCH
  }
  records.push(...removeMember(group, member, nowMs))
  return LEAVE_GROUP_MEMBER_EPOCH
}

/** A heartbeat at epoch 0: a new member, a known one rejoining, or a static member returning. */
function joinMember(
  group: Group,
  state: ConsumerGroupState,
  req: ConsumerHeartbeatRequest,
  nowMs: number,
  config: ConsumerGroupConfig,
  newMemberId: string,
  changes: HeartbeatChanges,
): ConsumerMember | HeartbeatRefusal {
  const memberId = req.memberId === '' ? newMemberId : req.memberId
  const returning = returningStaticMember(group, state, req, memberId, changes)
  if (returning !== null && 'code' in returning) return returning
  const member = returning ?? rejoinOrAdd(state, req, memberId, nowMs, config, changes)
  if ('code' in member) return member
  if (req.instanceId !== null) state.staticMembers.set(req.instanceId, memberId)
  return member
}

/**
 * A static member coming back under a new member id takes over the old one's assignment
 * and epoch: no rebalance, the group's other members see nothing (KIP-345 on KIP-848). It
 * reconciles from epoch 0 to the target epoch at once: its target is unchanged. Null when
 * the request is not such a return.
 */
function returningStaticMember(
  group: Group,
  state: ConsumerGroupState,
  req: ConsumerHeartbeatRequest,
  memberId: string,
  changes: HeartbeatChanges,
): ConsumerMember | HeartbeatRefusal | null {
  const staticId = req.instanceId === null ? undefined : state.staticMembers.get(req.instanceId)
  if (staticId === undefined || staticId === memberId) return null
  const previous = state.members.get(staticId)
  if (!previous) return null
  if (previous.memberEpoch !== LEAVE_GROUP_STATIC_MEMBER_EPOCH)
    return {
      code: ErrorCode.UNRELEASED_INSTANCE_ID,
      message: `Static member ${staticId} with instance id ${req.instanceId} is not released yet.`,
    }
  const member = { ...previous, memberId, memberEpoch: 0, previousMemberEpoch: 0, state: MemberState.STABLE }
  changes.records.push(...tombstones(group.groupId, previous.memberId))
  state.members.delete(previous.memberId)
  const target = state.targetAssignment.get(previous.memberId) ?? new Map()
  state.targetAssignment.delete(previous.memberId)
  state.targetAssignment.set(memberId, target)
  changes.records.push(targetMemberRecord(group.groupId, memberId, target))
  state.members.set(memberId, member)
  changes.metadataChanged = true
  return member
}

/** A known member rejoining at epoch 0, or a new member (refused past group.consumer.max.size). */
function rejoinOrAdd(
  state: ConsumerGroupState,
  req: ConsumerHeartbeatRequest,
  memberId: string,
  nowMs: number,
  config: ConsumerGroupConfig,
  changes: HeartbeatChanges,
): ConsumerMember | HeartbeatRefusal {
  const known = state.members.get(memberId)
  if (known) {
    // A known member rejoining owns nothing any more (it said so: TopicPartitions is empty).
    known.assignedPartitions = new Map()
    known.partitionsPendingRevocation = new Map()
    known.state = MemberState.STABLE
    known.memberEpoch = 0
    known.revocationDeadlineMs = null
    return known
  }
  if (state.members.size >= config.maxSize)
    return {
      code: ErrorCode.GROUP_MAX_SIZE_REACHED,
      message: `The group has reached its maximum size ${config.maxSize}.`,
    }
  const member: ConsumerMember = {
    memberId,
    instanceId: req.instanceId,
    rackId: req.rackId,
    clientId: req.clientId,
    clientHost: req.clientHost,
    subscribedTopicNames: [],
    subscribedTopicRegex: null,
    serverAssignor: null,
    rebalanceTimeoutMs: req.rebalanceTimeoutMs,
    memberEpoch: 0,
    previousMemberEpoch: 0,
    state: MemberState.STABLE,
    assignedPartitions: new Map(),
    partitionsPendingRevocation: new Map(),
    sessionDeadlineMs: nowMs,
    revocationDeadlineMs: null,
  }
  state.members.set(memberId, member)
  changes.metadataChanged = true
  changes.membershipChanged = true
  return member
}

/** A heartbeat of a member already in the group, checked against its epoch. */
function knownMember(
  state: ConsumerGroupState,
  req: ConsumerHeartbeatRequest,
): ConsumerMember | HeartbeatRefusal {
  const member = state.members.get(req.memberId)
  if (!member) return { code: ErrorCode.UNKNOWN_MEMBER_ID, message: unknownMember(req.memberId) }
  if (req.memberEpoch === member.memberEpoch) return member
  // A lost response: the member may still use its previous epoch if it owns nothing
  // beyond what it has now (Kafka's throwIfMemberEpochIsInvalid).
  const retried =
    req.memberEpoch < member.memberEpoch &&
    req.memberEpoch === member.previousMemberEpoch &&
    req.topicPartitions !== null &&
    isSubset(req.topicPartitions, member.assignedPartitions)
  if (retried) return member
  return {
    code: ErrorCode.FENCED_MEMBER_EPOCH,
    message: `The consumer group member has a smaller member epoch (${req.memberEpoch}) than the one known by the group coordinator (${member.memberEpoch}).`,
  }
}

/** Subscription and client details that came with this heartbeat (null means unchanged). */
function applyMemberDetails(
  member: ConsumerMember,
  req: ConsumerHeartbeatRequest,
  changes: HeartbeatChanges,
): void {
  if (req.rackId !== null && req.rackId !== member.rackId) {
    member.rackId = req.rackId
    changes.metadataChanged = true
  }
  if (req.rebalanceTimeoutMs > 0 && req.rebalanceTimeoutMs !== member.rebalanceTimeoutMs) {
    member.rebalanceTimeoutMs = req.rebalanceTimeoutMs
    changes.metadataChanged = true
  }
  const subscriptionChanged = (): void => {
    changes.metadataChanged = true
    changes.membershipChanged = true
  }
  if (req.subscribedTopicNames !== null) {
    const names = [...new Set(req.subscribedTopicNames)].sort()
    if (names.join('\u0000') !== member.subscribedTopicNames.join('\u0000')) {
      member.subscribedTopicNames = names
      subscriptionChanged()
    }
  }
  // An empty regex clears it (Kafka's "no regex" in a later heartbeat); sent again (librdkafka
  // sends it on every full heartbeat) it changes nothing.
  const regex = req.subscribedTopicRegex === '' ? null : req.subscribedTopicRegex
  if (req.subscribedTopicRegex !== null && regex !== member.subscribedTopicRegex) {
    member.subscribedTopicRegex = regex
    subscriptionChanged()
  }
  if (req.serverAssignor !== null && req.serverAssignor !== member.serverAssignor) {
    member.serverAssignor = req.serverAssignor
    subscriptionChanged()
  }
}

/**
 * Moves the group epoch when membership or the subscribed topics changed, then reassigns
 * unless the assignment interval holds the group at its previous target (Kafka's
 * maybeUpdateTargetAssignment): the member then reconciles towards that one.
 */
function bumpGroupEpoch(
  group: Group,
  state: ConsumerGroupState,
  config: ConsumerGroupConfig,
  topics: TopicsView,
  changes: HeartbeatChanges,
  nowMs: number,
): void {
  const signature = subscriptionSignature(state, topics)
  if (state.subscriptionSignature === null && !changes.membershipChanged)
    state.subscriptionSignature = signature
  if (signature !== state.subscriptionSignature) {
    state.subscriptionSignature = signature
    changes.membershipChanged = true
  }
  if (changes.membershipChanged) {
    state.groupEpoch++
    changes.records.push(groupEpochRecord(group.groupId, state.groupEpoch))
  }
  if (
    state.groupEpoch > state.assignmentEpoch &&
    assignmentIntervalOver(state.assignmentTimestampMs, config.assignmentIntervalMs, nowMs)
  )
    changes.records.push(...computeTargetAssignment(group, config, topics, nowMs))
}

function afterRecords(
  waiter: number,
  records: readonly CoordinatorRecord[],
  result: ConsumerHeartbeatResult,
): Effects {
  if (records.length === 0) return reply(waiter, result)
  return {
    records,
    replies: [],
    afterAppend: (code) => reply(waiter, code === ErrorCode.NONE ? result : heartbeatError(code)),
  }
}

// ---- target assignment -----------------------------------------------------------------------

/** The group's assignor: the one most members ask for, else the configured default. */
export function chooseAssignor(state: ConsumerGroupState, config: ConsumerGroupConfig): string {
  const votes = new Map<string, number>()
  for (const m of state.members.values())
    if (m.serverAssignor !== null) votes.set(m.serverAssignor, (votes.get(m.serverAssignor) ?? 0) + 1)
  let best = config.assignors[0]
  let bestVotes = 0
  for (const [name, count] of votes)
    if (count > bestVotes || (count === bestVotes && name < best)) {
      best = name
      bestVotes = count
    }
  assert(best !== undefined && SERVER_ASSIGNORS[best] !== undefined, `unknown assignor ${best}`)
  return best
}

function computeTargetAssignment(
  group: Group,
  config: ConsumerGroupConfig,
  topics: TopicsView,
  nowMs: number,
): CoordinatorRecord[] {
  const state = group.consumer
  assert(state !== null, 'consumer group state')
  const name = chooseAssignor(state, config)
  const assignor = SERVER_ASSIGNORS[name]
  assert(assignor !== undefined, 'assignor exists')
  const partitionCounts = new Map<string, number>()
  const members = [...state.members.values()].map((m) => {
    const ids = subscribedTopicIds(m, topics)
    for (const [, topic] of topics.byName)
      if (ids.has(topic.topicId)) partitionCounts.set(topic.topicId, topic.partitions)
    return { memberId: m.memberId, subscribedTopicIds: ids }
  })
  const target = assignor({ members, partitionCounts, previous: state.targetAssignment })
  const records: CoordinatorRecord[] = []
  for (const [memberId, assignment] of target) {
    const previous = state.targetAssignment.get(memberId)
    if (previous === undefined || assignmentKey(previous) !== assignmentKey(assignment))
      records.push(targetMemberRecord(group.groupId, memberId, assignment))
  }
  state.targetAssignment.clear()
  for (const [memberId, assignment] of target) state.targetAssignment.set(memberId, assignment)
  state.assignmentEpoch = state.groupEpoch
  state.assignmentTimestampMs = nowMs
  state.assignorName = name
  records.push(targetMetadataRecord(group.groupId, state))
  return records
}

// ---- reconciliation --------------------------------------------------------------------------

/** Moves the member towards its target assignment (Kafka's CurrentAssignmentBuilder). */
export function reconcile(
  state: ConsumerGroupState,
  member: ConsumerMember,
  owned: readonly WireTopicPartitions[] | null,
  nowMs: number,
): void {
  if (member.memberEpoch === LEAVE_GROUP_STATIC_MEMBER_EPOCH) return
  switch (member.state) {
    case MemberState.STABLE:
      if (member.memberEpoch !== state.assignmentEpoch) computeNextAssignment(state, member, nowMs)
      return
    case MemberState.UNREVOKED_PARTITIONS:
      // Revocation is acknowledged by a heartbeat whose owned partitions hold none of them.
      if (owned !== null && !ownsAny(owned, member.partitionsPendingRevocation))
        computeNextAssignment(state, member, nowMs)
      return
    case MemberState.UNRELEASED_PARTITIONS:
      computeNextAssignment(state, member, nowMs)
      return
  }
}

function computeNextAssignment(state: ConsumerGroupState, member: ConsumerMember, nowMs: number): void {
  const target = state.targetAssignment.get(member.memberId) ?? new Map<string, number[]>()
  const current = member.assignedPartitions
  const kept: TopicAssignment = new Map()
  const revoke: TopicAssignment = new Map()
  const withFree: TopicAssignment = new Map()
  let hasUnreleased = false
  for (const topicId of new Set([...current.keys(), ...target.keys()])) {
    const have = new Set(current.get(topicId) ?? [])
    const want = new Set(target.get(topicId) ?? [])
    const keep = [...have].filter((p) => want.has(p))
    const drop = [...have].filter((p) => !want.has(p))
    const free = [...want].filter((p) => !have.has(p) && !ownedByOther(state, member, topicId, p))
    if ([...want].some((p) => !have.has(p) && ownedByOther(state, member, topicId, p))) hasUnreleased = true
    if (keep.length > 0) kept.set(topicId, sorted(keep))
    if (drop.length > 0) revoke.set(topicId, sorted(drop))
    if (keep.length + free.length > 0) withFree.set(topicId, sorted([...keep, ...free]))
  }
  if (revoke.size > 0) {
    // The member must give these up before anything else: same epoch, the rest kept.
    member.state = MemberState.UNREVOKED_PARTITIONS
    member.assignedPartitions = kept
    member.partitionsPendingRevocation = revoke
    member.revocationDeadlineMs ??= nowMs + member.rebalanceTimeoutMs
    return
  }
  if (member.memberEpoch !== state.assignmentEpoch) {
    member.previousMemberEpoch = member.memberEpoch
    member.memberEpoch = state.assignmentEpoch
  }
  member.assignedPartitions = withFree
  member.partitionsPendingRevocation = new Map()
  member.state = hasUnreleased ? MemberState.UNRELEASED_PARTITIONS : MemberState.STABLE
  member.revocationDeadlineMs = null
}

/** Whether another member still holds the partition (assigned, or not yet revoked). */
function ownedByOther(
  state: ConsumerGroupState,
  self: ConsumerMember,
  topicId: string,
  partition: number,
): boolean {
  for (const m of state.members.values()) {
    if (m === self) continue
    if (m.assignedPartitions.get(topicId)?.includes(partition)) return true
    if (m.partitionsPendingRevocation.get(topicId)?.includes(partition)) return true
  }
  return false
}

function ownsAny(owned: readonly WireTopicPartitions[], partitions: TopicAssignment): boolean {
  for (const t of owned) {
    const pending = partitions.get(t.topicId)
    if (pending && t.partitions.some((p) => pending.includes(p))) return true
  }
  return false
}

function isSubset(owned: readonly WireTopicPartitions[], assigned: TopicAssignment): boolean {
  return owned.every((t) => t.partitions.every((p) => assigned.get(t.topicId)?.includes(p) === true))
}

/**
 * The invariant that revocation before reassignment buys: no partition is held (assigned or
 * pending revocation) by two members at once.
 */
export function checkSingleOwners(state: ConsumerGroupState): void {
  const owners = new Map<string, string>()
  for (const m of state.members.values())
    for (const assignment of [m.assignedPartitions, m.partitionsPendingRevocation])
      for (const [topicId, partitions] of assignment)
        for (const p of partitions) {
          const key = `${topicId}:${p}`
          const other = owners.get(key)
          assert(
            other === undefined || other === m.memberId,
            `partition ${key} held by ${other} and ${m.memberId}`,
          )
          owners.set(key, m.memberId)
        }
}

// ---- members leaving and timing out ----------------------------------------------------------

/**
 * Removes the member, frees its partitions and bumps the group epoch; returns the records.
 * As Kafka's consumerGroupFenceMembers, the others' target is recomputed at their next
 * heartbeat (within the assignment interval), and an emptied group starts afresh: its
 * assignment epoch catches up and its timestamp goes back to 0.
 */
export function removeMember(group: Group, member: ConsumerMember, nowMs: number): CoordinatorRecord[] {
  const state = group.consumer
  assert(state !== null, 'consumer group state')
  state.members.delete(member.memberId)
  state.targetAssignment.delete(member.memberId)
  if (member.instanceId !== null && state.staticMembers.get(member.instanceId) === member.memberId)
    state.staticMembers.delete(member.instanceId)
  state.groupEpoch++
  const records = [
    ...tombstones(group.groupId, member.memberId),
    groupEpochRecord(group.groupId, state.groupEpoch),
  ]
  if (state.members.size === 0) {
    group.state = 'Empty'
    group.currentStateTimestampMs = nowMs
    state.assignmentEpoch = state.groupEpoch
    state.assignmentTimestampMs = 0
    records.push(targetMetadataRecord(group.groupId, state))
  }
  return records
}

/** Session and revocation timeouts due at `nowMs`: those members are removed (fenced). */
export function consumerGroupTick(group: Group, nowMs: number): Effects {
  const state = group.consumer
  if (state === null) return { records: [], replies: [] }
  const records: CoordinatorRecord[] = []
  for (const member of [...state.members.values()]) {
    const sessionOver = member.sessionDeadlineMs <= nowMs
    const revocationOver = member.revocationDeadlineMs !== null && member.revocationDeadlineMs <= nowMs
    if (sessionOver || revocationOver) records.push(...removeMember(group, member, nowMs))
  }
  return { records, replies: [] }
}

export function nextConsumerDeadline(group: Group): number | null {
  const state = group.consumer
  if (state === null) return null
  let next: number | null = null
  for (const m of state.members.values()) {
    for (const at of [m.sessionDeadlineMs, m.revocationDeadlineMs])
      if (at !== null && (next === null || at < next)) next = at
  }
  return next
}

// ---- helpers ---------------------------------------------------------------------------------

export function toWire(assignment: TopicAssignment): WireTopicPartitions[] {
  return [...assignment]
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([topicId, partitions]) => ({ topicId, partitions: [...partitions] }))
}

function sorted(values: number[]): number[] {
  return values.sort((a, b) => a - b)
}

function assignmentKey(assignment: TopicAssignment): string {
  return toWire(assignment)
    .map((t) => `${t.topicId}:${t.partitions.join(',')}`)
    .join(';')
}

function assignedKey(member: ConsumerMember): string {
  return assignmentKey(member.assignedPartitions)
}

function assignmentSnapshot(member: ConsumerMember): string {
  return [
    member.memberEpoch,
    member.previousMemberEpoch,
    member.state,
    assignedKey(member),
    assignmentKey(member.partitionsPendingRevocation),
  ].join('|')
}

/** Whether some member subscribes to the topic, by name or regex (offset expiry, OffsetDelete). */
export function consumerGroupSubscribes(state: ConsumerGroupState, topic: string): boolean {
  for (const m of state.members.values()) {
    if (m.subscribedTopicNames.includes(topic)) return true
    const regex = m.subscribedTopicRegex === null ? null : compileRegex(m.subscribedTopicRegex)
    if (regex?.test(topic)) return true
  }
  return false
}
