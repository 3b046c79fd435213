/**
 * Share groups' membership and assignment (KIP-932; Kafka's ShareGroup and the share parts
 * of GroupMetadataManager), as pure steps on one group: `(group, request, nowMs) → result`.
 *
 * A member joins with epoch 0 and its subscribed topic names, heartbeats with its current
 * epoch, and leaves with -1. Any change of membership, subscription or of the subscribed
 * topics' partitions bumps the group epoch; a heartbeat then recomputes the target
 * assignment with the `simple` assignor (simpleAssign), at most once per
 * group.share.assignment.interval.ms (KIP-1263, assignment-interval.ts: within it the members
 * keep the previous target). A share group needs no revocation (partitions are shared), so a
 * member takes its target at its next heartbeat, its member epoch becoming the assignment
 * epoch. A member leaving or silent for group.share.session.timeout.ms is removed with its
 * target, as Kafka's shareGroupFenceMember: the others' target follows at their next heartbeat.
 *
 * The coordinator writes what a step changed to `__consumer_offsets` as Kafka's ShareGroup*
 * records (share-group-records.ts) and a new coordinator replays them: after a failover the
 * group keeps its epochs, members and assignment, and members heartbeat on with their epochs.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import { assignmentIntervalOver, DEFAULT_ASSIGNMENT_INTERVAL_MS } from './assignment-interval.js'

export interface ShareGroupConfig {
  /** group.share.heartbeat.interval.ms */
  readonly heartbeatIntervalMs: number
  /** group.share.session.timeout.ms */
  readonly sessionTimeoutMs: number
  /** group.share.max.size */
  readonly maxSize: number
  /** group.share.assignment.interval.ms (KIP-1263) */
  readonly assignmentIntervalMs: number
}

export const DEFAULT_SHARE_GROUP_CONFIG: ShareGroupConfig = {
  heartbeatIntervalMs: 5000,
  sessionTimeoutMs: 45000,
  maxSize: 200,
  assignmentIntervalMs: DEFAULT_ASSIGNMENT_INTERVAL_MS,
}

/** topic id → partitions, sorted. */
export type ShareAssignment = Map<string, number[]>

export interface ShareMember {
  readonly memberId: string
  memberEpoch: number
  rackId: string | null
  readonly clientId: string
  readonly clientHost: string
  subscribedTopicNames: string[]
  assignment: ShareAssignment
  lastHeartbeatMs: number
}

export interface ShareGroup {
  readonly groupId: string
  groupEpoch: number
  assignmentEpoch: number
  /**
   * When the target assignment was last computed (Kafka's AssignmentTimestamp); 0 when never,
   * or since the group emptied: the next one is then not held by the assignment interval.
   */
  assignmentTimestampMs: number
  readonly members: Map<string, ShareMember>
  targetAssignment: Map<string, ShareAssignment>
  /**
   * The share-partitions the group has state for (Kafka's initialized topics of the
   * ShareGroupStatePartitionMetadata record): every partition ever assigned or altered,
   * until its topic's offsets or the group are deleted. topic id → partitions.
   */
  readonly initialized: Map<string, Set<number>>
}

export interface ShareHeartbeatRequest {
  readonly groupId: string
  readonly memberId: string
  readonly memberEpoch: number
  readonly rackId: string | null
  readonly subscribedTopicNames: string[] | null
  readonly clientId: string
  readonly clientHost: string
}

export interface ShareHeartbeatResult {
  readonly errorCode: number
  readonly errorMessage: string | null
  readonly memberId: string | null
  readonly memberEpoch: number
  readonly heartbeatIntervalMs: number
  /** Sent on a join and whenever the member's assignment changed; null otherwise. */
  readonly assignment: { topicId: string; partitions: number[] }[] | null
}

/** The topics a share group may be assigned: name → id and partition count. */
export interface ShareTopicsView {
  readonly byName: ReadonlyMap<string, { topicId: string; partitions: number }>
}

export const SIMPLE_ASSIGNOR = 'simple'

export function shareHeartbeatError(
  errorCode: number,
  errorMessage: string | null = null,
): ShareHeartbeatResult {
  return {
    errorCode,
    errorMessage,
    memberId: null,
    memberEpoch: -1,
    heartbeatIntervalMs: 0,
    assignment: null,
  }
}

export function newShareGroup(groupId: string): ShareGroup {
  return {
    groupId,
    groupEpoch: 0,
    assignmentEpoch: 0,
    assignmentTimestampMs: 0,
    members: new Map(),
    targetAssignment: new Map(),
    initialized: new Map(),
  }
}

/** Kafka's state of a share group: Empty without members, Stable with. */
export function shareGroupStateName(group: ShareGroup): 'Empty' | 'Stable' {
  return group.members.size === 0 ? 'Empty' : 'Stable'
}

/** Kafka's throwIfShareGroupHeartbeatRequestIsInvalid. */
export function validateShareHeartbeat(req: ShareHeartbeatRequest): ShareHeartbeatResult | null {
  const invalid = (message: string) => shareHeartbeatError(ErrorCode.INVALID_REQUEST, message)
  if (req.groupId === '') return invalid("GroupId can't be empty.")
  if (req.rackId === '') return invalid("RackId can't be empty.")
  if (req.memberId === '') return invalid("MemberId can't be empty.")
  if (req.memberEpoch < -1) return invalid('MemberEpoch is invalid.')
  if (req.memberEpoch === 0 && (req.subscribedTopicNames === null || req.subscribedTopicNames.length === 0))
    return invalid('SubscribedTopicNames must be set in first request.')
  return null
}

/** One heartbeat of a validated request on its group (made for a join by the caller). */
export function shareGroupHeartbeat(
  group: ShareGroup,
  req: ShareHeartbeatRequest,
  nowMs: number,
  config: ShareGroupConfig,
  topics: ShareTopicsView,
): ShareHeartbeatResult {
  let member = group.members.get(req.memberId)
  if (req.memberEpoch === -1) {
    if (!member)
      return shareHeartbeatError(
        ErrorCode.UNKNOWN_MEMBER_ID,
        `Member ${req.memberId} is not a member of group ${group.groupId}.`,
      )
    removeShareMember(group, req.memberId)
    return { ...shareHeartbeatError(ErrorCode.NONE), memberId: req.memberId, memberEpoch: -1 }
  }
  let changed = false
  if (!member) {
    if (req.memberEpoch !== 0)
      return shareHeartbeatError(
        ErrorCode.UNKNOWN_MEMBER_ID,
        `Member ${req.memberId} is not a member of group ${group.groupId}.`,
      )
    if (group.members.size >= config.maxSize)
      return shareHeartbeatError(
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        `The share group has reached its maximum capacity of ${config.maxSize} members.`,
      )
    member = {
      memberId: req.memberId,
      memberEpoch: 0,
      rackId: req.rackId,
      clientId: req.clientId,
      clientHost: req.clientHost,
      subscribedTopicNames: [],
      assignment: new Map(),
      lastHeartbeatMs: nowMs,
    }
    group.members.set(req.memberId, member)
    changed = true
  } else if (req.memberEpoch !== 0 && req.memberEpoch !== member.memberEpoch) {
    return shareHeartbeatError(
      ErrorCode.FENCED_MEMBER_EPOCH,
      'The share group member has a different epoch than expected.',
    )
  }
  member.lastHeartbeatMs = nowMs
  if (req.rackId !== null) member.rackId = req.rackId
  if (req.subscribedTopicNames !== null) {
    const names = [...new Set(req.subscribedTopicNames)].sort()
    if (names.join('\u0000') !== member.subscribedTopicNames.join('\u0000')) {
      member.subscribedTopicNames = names
      changed = true
    }
  }
  updateTarget(group, topics, changed, config, nowMs)
  let sendAssignment = req.memberEpoch === 0
  if (member.memberEpoch !== group.assignmentEpoch) {
    const target = group.targetAssignment.get(member.memberId) ?? new Map()
    sendAssignment ||= !sameAssignment(target, member.assignment)
    member.assignment = target
    member.memberEpoch = group.assignmentEpoch
  }
  return {
    errorCode: ErrorCode.NONE,
    errorMessage: null,
    memberId: member.memberId,
    memberEpoch: member.memberEpoch,
    heartbeatIntervalMs: config.heartbeatIntervalMs,
    assignment: sendAssignment ? toWire(member.assignment) : null,
  }
}

/** Removes the members whose session timed out; true when any was. */
export function expireShareMembers(group: ShareGroup, nowMs: number, config: ShareGroupConfig): boolean {
  let expired = false
  for (const member of [...group.members.values()]) {
    if (nowMs - member.lastHeartbeatMs < config.sessionTimeoutMs) continue
    removeShareMember(group, member.memberId)
    expired = true
  }
  return expired
}

/** When the group's next member session runs out, or null without members. */
export function nextShareDeadline(group: ShareGroup, config: ShareGroupConfig): number | null {
  let deadline: number | null = null
  for (const member of group.members.values()) {
    const at = member.lastHeartbeatMs + config.sessionTimeoutMs
    if (deadline === null || at < deadline) deadline = at
  }
  return deadline
}

export function toWire(assignment: ShareAssignment): { topicId: string; partitions: number[] }[] {
  return [...assignment]
    .filter(([, partitions]) => partitions.length > 0)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([topicId, partitions]) => ({ topicId, partitions: [...partitions] }))
}

/** Removes a member and its target; the group moves to a new epoch, an emptied one starts afresh. */
function removeShareMember(group: ShareGroup, memberId: string): void {
  group.members.delete(memberId)
  group.targetAssignment.delete(memberId)
  group.groupEpoch++
  if (group.members.size > 0) return
  group.assignmentEpoch = group.groupEpoch
  group.assignmentTimestampMs = 0
}

/**
 * A new epoch when membership or subscriptions changed, or when the target would differ (a
 * subscribed topic was created or grew) and no recomputation is pending already; then the
 * new target unless the assignment interval holds the previous one.
 */
function updateTarget(
  group: ShareGroup,
  topics: ShareTopicsView,
  changed: boolean,
  config: ShareGroupConfig,
  nowMs: number,
): void {
  const pending = group.groupEpoch > group.assignmentEpoch
  if (changed || (!pending && !sameTargets(simpleAssign(group, topics), group.targetAssignment)))
    group.groupEpoch++
  if (group.groupEpoch === group.assignmentEpoch) return
  if (!assignmentIntervalOver(group.assignmentTimestampMs, config.assignmentIntervalMs, nowMs)) return
  group.targetAssignment = simpleAssign(group, topics)
  group.assignmentEpoch = group.groupEpoch
  group.assignmentTimestampMs = nowMs
}

function sameTargets(a: Map<string, ShareAssignment>, b: Map<string, ShareAssignment>): boolean {
  return a.size === b.size && [...a].every(([memberId, x]) => sameAssignment(x, b.get(memberId) ?? new Map()))
}

/**
 * The `simple` assignor's principles (Kafka's SimpleAssignor): every partition of a
 * subscribed topic goes to ceil(subscribers / partitions) of its subscribers, so a
 * partition is shared when members outnumber partitions; members' counts differ by at most
 * one where subscriptions allow; a member keeps what it had when that keeps the balance.
 * Kafka's builders differ in their tie-breaking, so the exact placement may differ.
 */
export function simpleAssign(group: ShareGroup, topics: ShareTopicsView): Map<string, ShareAssignment> {
  const memberIds = [...group.members.keys()].sort()
  const result = new Map<string, ShareAssignment>(memberIds.map((id) => [id, new Map()]))
  const load = new Map<string, number>(memberIds.map((id) => [id, 0]))
  const topicNames = [
    ...new Set(memberIds.flatMap((id) => group.members.get(id)?.subscribedTopicNames ?? [])),
  ].sort()
  for (const name of topicNames) {
    const topic = topics.byName.get(name)
    if (!topic || topic.partitions === 0) continue
    const subscribers = memberIds.filter((id) => group.members.get(id)?.subscribedTopicNames.includes(name))
    const sharing = Math.ceil(subscribers.length / topic.partitions)
    for (let partition = 0; partition < topic.partitions; partition++) {
      const had = (id: string) =>
        group.members.get(id)?.assignment.get(topic.topicId)?.includes(partition) === true
      const chosen = [...subscribers]
        .sort((a, b) => (load.get(a) ?? 0) - (load.get(b) ?? 0) || Number(had(b)) - Number(had(a)))
        .slice(0, sharing)
      for (const id of chosen) {
        const assignment = result.get(id)
        if (!assignment) continue
        const partitions = assignment.get(topic.topicId) ?? []
        partitions.push(partition)
        assignment.set(topic.topicId, partitions)
        load.set(id, (load.get(id) ?? 0) + 1)
      }
    }
  }
  return result
}

function sameAssignment(a: ShareAssignment, b: ShareAssignment): boolean {
  const wa = toWire(a)
  const wb = toWire(b)
  return JSON.stringify(wa) === JSON.stringify(wb)
}
