/**
 * The classic rebalance protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the
 * session/rebalance deadlines) as deterministic steps: each takes the group, the request,
 * a waiter id for the request's reply and the time, changes only that group, and returns
 * Effects (records, replies, what to do after the append). No I/O, no clock, no timers:
 * group-coordinator.ts supplies member ids, and the group's shard
 * (group-coordinator-shard.ts) the time, calling `tick` at `nextDeadline`. States and
 * error codes follow Kafka's GroupCoordinator: Empty → PreparingRebalance →
 * CompletingRebalance → Stable, back to PreparingRebalance on any membership or protocol
 * change.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import {
  type CodeResult,
  combine,
  type Effects,
  type JoinResult,
  joinError,
  NO_EFFECTS,
  type Reply,
  reply,
  syncError,
} from './effects.js'
import type { CoordinatorConfig, Group, GroupProtocol, Member } from './group.js'
import { type CoordinatorRecord, encodeGroupMetadataValue, groupMetadataKey } from './records.js'

export interface JoinRequest {
  readonly groupId: string
  /** '' for a member joining for the first time. */
  readonly memberId: string
  readonly groupInstanceId: string | null
  readonly protocolType: string
  readonly protocols: readonly GroupProtocol[]
  readonly sessionTimeoutMs: number
  readonly rebalanceTimeoutMs: number
  readonly clientId: string
  readonly clientHost: string
  /** JoinGroup v4+: a new dynamic member first gets its id back with MEMBER_ID_REQUIRED. */
  readonly requireKnownMemberId: boolean
  /** JoinGroup v9+ (KIP-814): a static leader rejoining a stable group may skip assigning. */
  readonly supportsSkipAssignment: boolean
  /** A fresh member id the runtime made for this request (used only if one is given out). */
  readonly newMemberId: string
}

export interface SyncRequest {
  readonly memberId: string
  readonly groupInstanceId: string | null
  readonly generationId: number
  readonly protocolType: string | null
  readonly protocolName: string | null
  readonly assignments: readonly { memberId: string; assignment: Buffer }[]
}

export interface MemberRef {
  readonly memberId: string
  readonly groupInstanceId: string | null
}

// ---- JoinGroup ----------------------------------------------------------------------------

export function joinGroup(
  group: Group,
  req: JoinRequest,
  waiter: number,
  nowMs: number,
  config: CoordinatorConfig,
): Effects {
  const fail = (code: number): Effects => reply(waiter, joinError(code, req.memberId))
  if (
    req.sessionTimeoutMs < config.groupMinSessionTimeoutMs ||
    req.sessionTimeoutMs > config.groupMaxSessionTimeoutMs
  )
    return fail(ErrorCode.INVALID_SESSION_TIMEOUT)
  if (group.state === 'Dead') return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
  if (!supportsProtocols(group, req.protocolType, req.protocols))
    return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
  if (req.memberId === '') return joinUnknownMember(group, req, waiter, nowMs, config)
  return joinKnownMember(group, req, waiter, nowMs, config)
}

function joinUnknownMember(
  group: Group,
  req: JoinRequest,
  waiter: number,
  nowMs: number,
  config: CoordinatorConfig,
): Effects {
  const memberId = req.newMemberId
  if (req.groupInstanceId !== null) {
    const existing = group.staticMembers.get(req.groupInstanceId)
    if (existing !== undefined && group.members.has(existing))
      return replaceStaticMember(group, existing, req, waiter, nowMs)
  }
  if (group.members.size + group.pendingMembers.size >= config.groupMaxSize)
    return reply(waiter, joinError(ErrorCode.GROUP_MAX_SIZE_REACHED, ''))
  if (req.groupInstanceId === null && req.requireKnownMemberId) {
    // The member must come back with this id: a client that never does costs only a
    // pending entry that expires after its session timeout.
    group.pendingMembers.set(memberId, nowMs + req.sessionTimeoutMs)
    return reply(waiter, joinError(ErrorCode.MEMBER_ID_REQUIRED, memberId))
  }
  return addMemberAndRebalance(group, memberId, req, waiter, nowMs, config)
}

function joinKnownMember(
  group: Group,
  req: JoinRequest,
  waiter: number,
  nowMs: number,
  config: CoordinatorConfig,
): Effects {
  const fail = (code: number): Effects => reply(waiter, joinError(code, req.memberId))
  if (group.pendingMembers.has(req.memberId))
    return addMemberAndRebalance(group, req.memberId, req, waiter, nowMs, config)
  if (isFencedInstance(group, req.memberId, req.groupInstanceId)) return fail(ErrorCode.FENCED_INSTANCE_ID)
  const member = group.members.get(req.memberId)
  if (!member) return fail(ErrorCode.UNKNOWN_MEMBER_ID)
  switch (group.state) {
    case 'PreparingRebalance': {
      const previous = parkJoin(member, waiter)
      updateMember(member, req, nowMs)
      return combine(previous, tryCompleteJoin(group, nowMs))
    }
    case 'CompletingRebalance':
      // The member missed its JoinGroup response: give it again unless it changed protocols.
      if (sameProtocols(member.protocols, req.protocols)) return reply(waiter, joinResult(group, member))
      updateMember(member, req, nowMs)
      member.joinWaiter = waiter
      return rebalance(group, nowMs)
    case 'Stable':
      if (group.leaderId === member.memberId || !sameProtocols(member.protocols, req.protocols)) {
        updateMember(member, req, nowMs)
        member.joinWaiter = waiter
        return rebalance(group, nowMs)
      }
      member.heartbeatDeadlineMs = nowMs + member.sessionTimeoutMs
      return reply(waiter, joinResult(group, member))
    default:
      return fail(ErrorCode.UNKNOWN_MEMBER_ID)
  }
}

/**
 * A static member rejoining with a new member id takes over its instance's membership
 * (KIP-345, Kafka's updateStaticMemberAndRebalance): the old member id is fenced
 * (FENCED_INSTANCE_ID) and, in a stable group whose protocol the rejoin does not change,
 * the member keeps its assignment without a rebalance: the other members notice nothing.
 */
function replaceStaticMember(
  group: Group,
  oldMemberId: string,
  req: JoinRequest,
  waiter: number,
  nowMs: number,
): Effects {
  const member = group.members.get(oldMemberId)!
  const fenced = fenceWaiters(member, ErrorCode.FENCED_INSTANCE_ID)
  group.members.delete(oldMemberId)
  member.memberId = req.newMemberId
  group.members.set(member.memberId, member)
  group.staticMembers.set(req.groupInstanceId!, member.memberId)
  const previousLeader = group.leaderId
  const wasLeader = previousLeader === oldMemberId
  if (wasLeader) group.leaderId = member.memberId
  updateMember(member, req, nowMs)
  // Kafka rebalances only when the protocol the group would select changes.
  if (group.state === 'Stable' && group.protocolName === selectProtocol(group)) {
    // Persist the new member id, then answer with the current generation. A returning
    // leader that can skip assignment (v9+, KIP-814) learns the members; one that cannot
    // is named a follower (the previous leader id, as Kafka answers) so it only syncs:
    // an assignment it sent to a stable group would reach no other member.
    const generation = group.generationId
    const records = [groupMetadataRecord(group, nowMs)]
    const afterAppend = (code: number): Effects => {
      if (code !== ErrorCode.NONE) return reply(waiter, joinError(code, ''))
      if (group.generationId !== generation)
        return reply(waiter, joinError(ErrorCode.REBALANCE_IN_PROGRESS, ''))
      const result = joinResult(group, member)
      if (!wasLeader) return reply(waiter, result)
      if (req.supportsSkipAssignment) return reply(waiter, { ...result, skipAssignment: true })
      return reply(waiter, { ...result, leader: previousLeader ?? '', members: [] })
    }
    return combine(fenced, { records, replies: [], afterAppend })
  }
  member.joinWaiter = waiter
  return combine(
    fenced,
    group.state === 'PreparingRebalance' ? tryCompleteJoin(group, nowMs) : rebalance(group, nowMs),
  )
}

function addMemberAndRebalance(
  group: Group,
  memberId: string,
  req: JoinRequest,
  waiter: number,
  nowMs: number,
  config: CoordinatorConfig,
): Effects {
  group.pendingMembers.delete(memberId)
  const member: Member = {
    memberId,
    groupInstanceId: req.groupInstanceId,
    clientId: req.clientId,
    clientHost: req.clientHost,
    sessionTimeoutMs: req.sessionTimeoutMs,
    rebalanceTimeoutMs: req.rebalanceTimeoutMs,
    protocolType: req.protocolType,
    protocols: req.protocols,
    assignment: Buffer.alloc(0),
    joinWaiter: waiter,
    syncWaiter: null,
    heartbeatDeadlineMs: nowMs + req.sessionTimeoutMs,
  }
  if (group.members.size === 0) group.protocolType = req.protocolType
  group.members.set(memberId, member)
  if (req.groupInstanceId !== null) group.staticMembers.set(req.groupInstanceId, memberId)
  if (group.leaderId === null) group.leaderId = memberId
  if (group.initialDelay) group.initialDelay.newMemberAdded = true
  if (group.state === 'PreparingRebalance') return tryCompleteJoin(group, nowMs)
  return rebalance(group, nowMs, config)
}

// ---- rebalance --------------------------------------------------------------------------

/**
 * Moves the group to PreparingRebalance (members must rejoin within the rebalance timeout)
 * and completes the join at once if everyone already has. A new group first waits
 * group.initial.rebalance.delay.ms so members starting together land in one generation.
 */
export function rebalance(group: Group, nowMs: number, config?: CoordinatorConfig): Effects {
  const replies: Reply[] = []
  if (group.state === 'CompletingRebalance') {
    for (const member of group.members.values()) {
      member.assignment = Buffer.alloc(0)
      if (member.syncWaiter !== null)
        replies.push({ waiter: member.syncWaiter, response: syncError(ErrorCode.REBALANCE_IN_PROGRESS) })
      member.syncWaiter = null
    }
  }
  const wasEmpty = group.state === 'Empty'
  const rebalanceTimeoutMs = maxRebalanceTimeout(group)
  group.state = 'PreparingRebalance'
  group.currentStateTimestampMs = nowMs
  const delayMs = config?.groupInitialRebalanceDelayMs ?? 0
  if (wasEmpty && delayMs > 0) {
    const limitMs = nowMs + Math.max(rebalanceTimeoutMs, delayMs)
    group.initialDelay = { stepMs: delayMs, limitMs, newMemberAdded: false }
    group.rebalanceDeadlineMs = Math.min(nowMs + delayMs, limitMs)
  } else {
    group.initialDelay = null
    group.rebalanceDeadlineMs = nowMs + rebalanceTimeoutMs
  }
  return combine({ records: [], replies }, tryCompleteJoin(group, nowMs))
}

function tryCompleteJoin(group: Group, nowMs: number): Effects {
  if (group.state !== 'PreparingRebalance' || group.initialDelay !== null) return NO_EFFECTS
  if (group.pendingMembers.size > 0) return NO_EFFECTS
  for (const member of group.members.values()) if (member.joinWaiter === null) return NO_EFFECTS
  return completeJoin(group, nowMs)
}

/**
 * Ends the join phase: members that did not rejoin are removed, the generation advances, a
 * protocol is chosen and every joined member gets its response (the leader with the
 * members' metadata, to compute the assignment). An empty group is persisted as such.
 */
function completeJoin(group: Group, nowMs: number): Effects {
  const removed: Reply[] = []
  for (const member of [...group.members.values()])
    if (member.joinWaiter === null) removed.push(...removeMember(group, member.memberId))
  group.rebalanceDeadlineMs = null
  group.initialDelay = null
  group.generationId++
  group.currentStateTimestampMs = nowMs
  if (group.members.size === 0) {
    group.state = 'Empty'
    group.protocolName = null
    group.leaderId = null
    return { records: [groupMetadataRecord(group, nowMs)], replies: removed }
  }
  group.state = 'CompletingRebalance'
  group.protocolName = selectProtocol(group)
  if (group.leaderId === null || !group.members.has(group.leaderId))
    group.leaderId = group.members.keys().next().value ?? null
  const replies: Reply[] = [...removed]
  for (const member of group.members.values()) {
    replies.push({ waiter: member.joinWaiter!, response: joinResult(group, member) })
    member.joinWaiter = null
    member.heartbeatDeadlineMs = nowMs + member.sessionTimeoutMs
  }
  return { records: [], replies }
}

/** Kafka's vote: each member picks its first protocol that every member supports; most votes win. */
export function selectProtocol(group: Group): string {
  const members = [...group.members.values()]
  const candidates = members[0].protocols
    .map((p) => p.name)
    .filter((name) => members.every((m) => m.protocols.some((p) => p.name === name)))
  const votes = new Map<string, number>()
  for (const member of members) {
    const vote = member.protocols.find((p) => candidates.includes(p.name))!.name
    votes.set(vote, (votes.get(vote) ?? 0) + 1)
  }
  // Ties go to the earlier protocol in the first member's preference order.
  let best = candidates[0]
  for (const name of candidates) if ((votes.get(name) ?? 0) > (votes.get(best) ?? 0)) best = name
  return best
}

// ---- SyncGroup ----------------------------------------------------------------------------

export function syncGroup(group: Group, req: SyncRequest, waiter: number, nowMs: number): Effects {
  const fail = (code: number): Effects => reply(waiter, syncError(code))
  if (group.state === 'Dead') return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
  if (isFencedInstance(group, req.memberId, req.groupInstanceId)) return fail(ErrorCode.FENCED_INSTANCE_ID)
  const member = group.members.get(req.memberId)
  if (!member) return fail(ErrorCode.UNKNOWN_MEMBER_ID)
  if (req.generationId !== group.generationId) return fail(ErrorCode.ILLEGAL_GENERATION)
  if (
    (req.protocolType !== null && req.protocolType !== group.protocolType) ||
    (req.protocolName !== null && req.protocolName !== group.protocolName)
  )
    return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
  switch (group.state) {
    case 'PreparingRebalance':
      return fail(ErrorCode.REBALANCE_IN_PROGRESS)
    case 'CompletingRebalance':
      return parkSync(group, member, req, waiter, nowMs)
    case 'Stable':
      member.heartbeatDeadlineMs = nowMs + member.sessionTimeoutMs
      return reply(waiter, syncResult(group, member.assignment))
    default:
      return fail(ErrorCode.UNKNOWN_MEMBER_ID)
  }
}

function parkSync(group: Group, member: Member, req: SyncRequest, waiter: number, nowMs: number): Effects {
  const previous: Effects =
    member.syncWaiter !== null
      ? reply(member.syncWaiter, syncError(ErrorCode.REBALANCE_IN_PROGRESS))
      : NO_EFFECTS
  member.syncWaiter = waiter
  member.heartbeatDeadlineMs = nowMs + member.sessionTimeoutMs
  if (member.memberId !== group.leaderId) return previous
  const assignments = new Map(req.assignments.map((a) => [a.memberId, a.assignment]))
  for (const m of group.members.values()) m.assignment = assignments.get(m.memberId) ?? Buffer.alloc(0)
  const generation = group.generationId
  // The assignment is answered only once the group record carrying it is committed.
  return combine(previous, {
    records: [groupMetadataRecord(group, nowMs)],
    replies: [],
    afterAppend: (code, now) => completeSync(group, generation, code, now),
  })
}

function completeSync(group: Group, generation: number, errorCode: number, nowMs: number): Effects {
  if (group.state !== 'CompletingRebalance' || group.generationId !== generation) return NO_EFFECTS
  const replies: Reply[] = []
  if (errorCode !== ErrorCode.NONE) {
    for (const member of group.members.values()) {
      member.assignment = Buffer.alloc(0)
      if (member.syncWaiter !== null)
        replies.push({ waiter: member.syncWaiter, response: syncError(errorCode) })
      member.syncWaiter = null
    }
    return combine({ records: [], replies }, rebalance(group, nowMs))
  }
  group.state = 'Stable'
  group.currentStateTimestampMs = nowMs
  for (const member of group.members.values()) {
    if (member.syncWaiter !== null)
      replies.push({ waiter: member.syncWaiter, response: syncResult(group, member.assignment) })
    member.syncWaiter = null
    member.heartbeatDeadlineMs = nowMs + member.sessionTimeoutMs
  }
  return { records: [], replies }
}

// ---- Heartbeat and LeaveGroup -------------------------------------------------------------

export function heartbeat(
  group: Group,
  memberId: string,
  groupInstanceId: string | null,
  generationId: number,
  nowMs: number,
): CodeResult {
  if (group.state === 'Dead') return { errorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE }
  if (isFencedInstance(group, memberId, groupInstanceId)) return { errorCode: ErrorCode.FENCED_INSTANCE_ID }
  const member = group.members.get(memberId)
  if (!member) return { errorCode: ErrorCode.UNKNOWN_MEMBER_ID }
  if (generationId !== group.generationId) return { errorCode: ErrorCode.ILLEGAL_GENERATION }
  if (group.state === 'Empty') return { errorCode: ErrorCode.UNKNOWN_MEMBER_ID }
  member.heartbeatDeadlineMs = nowMs + member.sessionTimeoutMs
  if (group.state === 'PreparingRebalance') return { errorCode: ErrorCode.REBALANCE_IN_PROGRESS }
  return { errorCode: ErrorCode.NONE }
}

/** Removes each listed member (by member id, or by group.instance.id for static members). */
export function leaveGroup(
  group: Group,
  leaving: readonly MemberRef[],
  nowMs: number,
): { codes: number[]; effects: Effects } {
  if (group.state === 'Dead')
    return { codes: leaving.map(() => ErrorCode.COORDINATOR_NOT_AVAILABLE), effects: NO_EFFECTS }
  const replies: Reply[] = []
  let removedAny = false
  const codes = leaving.map((ref) => {
    const memberId =
      ref.groupInstanceId !== null ? group.staticMembers.get(ref.groupInstanceId) : ref.memberId
    if (memberId === undefined) return ErrorCode.UNKNOWN_MEMBER_ID
    if (ref.groupInstanceId !== null && ref.memberId !== '' && ref.memberId !== memberId)
      return ErrorCode.FENCED_INSTANCE_ID
    if (group.pendingMembers.delete(memberId)) {
      removedAny = true
      return ErrorCode.NONE
    }
    if (!group.members.has(memberId)) return ErrorCode.UNKNOWN_MEMBER_ID
    replies.push(...removeMember(group, memberId))
    removedAny = true
    return ErrorCode.NONE
  })
  const effects = removedAny ? combine({ records: [], replies }, onMembersRemoved(group, nowMs)) : NO_EFFECTS
  return { codes, effects }
}

function onMembersRemoved(group: Group, nowMs: number): Effects {
  if (group.state === 'Stable' || group.state === 'CompletingRebalance') return rebalance(group, nowMs)
  return tryCompleteJoin(group, nowMs)
}

function removeMember(group: Group, memberId: string): Reply[] {
  const member = group.members.get(memberId)
  if (!member) return []
  const replies = [...fenceWaiters(member, ErrorCode.UNKNOWN_MEMBER_ID).replies]
  group.members.delete(memberId)
  if (member.groupInstanceId !== null && group.staticMembers.get(member.groupInstanceId) === memberId)
    group.staticMembers.delete(member.groupInstanceId)
  if (group.leaderId === memberId) group.leaderId = group.members.keys().next().value ?? null
  return replies
}

// ---- deadlines ----------------------------------------------------------------------------

/** The earliest time `tick` has something to do for this group, or null. */
export function nextDeadline(group: Group): number | null {
  let next = group.rebalanceDeadlineMs ?? Number.POSITIVE_INFINITY
  for (const deadline of group.pendingMembers.values()) next = Math.min(next, deadline)
  for (const member of group.members.values())
    if (member.joinWaiter === null && member.syncWaiter === null)
      next = Math.min(next, member.heartbeatDeadlineMs)
  return Number.isFinite(next) ? next : null
}

/**
 * Expires sessions and rebalance deadlines due at `nowMs`. Members parked in JoinGroup or
 * SyncGroup are kept alive (they cannot heartbeat while blocked), as Kafka does; a leader
 * that never syncs is caught by its own session.
 */
export function tick(group: Group, nowMs: number): Effects {
  const replies: Reply[] = []
  let removedAny = false
  for (const [memberId, deadline] of [...group.pendingMembers])
    if (deadline <= nowMs) {
      group.pendingMembers.delete(memberId)
      removedAny = true
    }
  for (const member of [...group.members.values()]) {
    const blocked = member.joinWaiter !== null || member.syncWaiter !== null
    if (!blocked && member.heartbeatDeadlineMs <= nowMs) {
      replies.push(...removeMember(group, member.memberId))
      removedAny = true
    }
  }
  let effects: Effects = { records: [], replies }
  if (removedAny) effects = combine(effects, onMembersRemoved(group, nowMs))
  if (
    group.state === 'PreparingRebalance' &&
    group.rebalanceDeadlineMs !== null &&
    group.rebalanceDeadlineMs <= nowMs
  )
    effects = combine(effects, onRebalanceDeadline(group, nowMs))
  return effects
}

function onRebalanceDeadline(group: Group, nowMs: number): Effects {
  const delay = group.initialDelay
  if (delay?.newMemberAdded && nowMs < delay.limitMs) {
    delay.newMemberAdded = false
    group.rebalanceDeadlineMs = Math.min(nowMs + delay.stepMs, delay.limitMs)
    return NO_EFFECTS
  }
  return completeJoin(group, nowMs)
}

// ---- helpers ------------------------------------------------------------------------------

export function groupMetadataRecord(group: Group, nowMs: number): CoordinatorRecord {
  const members = [...group.members.values()].map((m) => ({
    memberId: m.memberId,
    groupInstanceId: m.groupInstanceId,
    clientId: m.clientId,
    clientHost: m.clientHost,
    rebalanceTimeoutMs: m.rebalanceTimeoutMs,
    sessionTimeoutMs: m.sessionTimeoutMs,
    subscription: m.protocols.find((p) => p.name === group.protocolName)?.metadata ?? Buffer.alloc(0),
    assignment: m.assignment,
  }))
  const value = encodeGroupMetadataValue({
    protocolType: group.protocolType ?? '',
    generation: group.generationId,
    protocol: group.protocolName,
    leader: group.leaderId,
    currentStateTimestampMs: nowMs,
    members,
  })
  return { key: groupMetadataKey(group.groupId), value }
}

function joinResult(group: Group, member: Member): JoinResult {
  const isLeader = group.leaderId === member.memberId
  return {
    errorCode: ErrorCode.NONE,
    generationId: group.generationId,
    protocolType: group.protocolType,
    protocolName: group.protocolName,
    leader: group.leaderId ?? '',
    memberId: member.memberId,
    skipAssignment: false,
    members: isLeader
      ? [...group.members.values()].map((m) => ({
          memberId: m.memberId,
          groupInstanceId: m.groupInstanceId,
          metadata: m.protocols.find((p) => p.name === group.protocolName)?.metadata ?? Buffer.alloc(0),
        }))
      : [],
  }
}

function syncResult(group: Group, assignment: Buffer) {
  return {
    errorCode: ErrorCode.NONE,
    protocolType: group.protocolType,
    protocolName: group.protocolName,
    assignment,
  }
}

function supportsProtocols(group: Group, protocolType: string, protocols: readonly GroupProtocol[]): boolean {
  if (protocolType === '' || protocols.length === 0) return false
  if (group.members.size === 0) return true
  if (protocolType !== group.protocolType) return false
  const members = [...group.members.values()]
  return protocols.some((p) => members.every((m) => m.protocols.some((q) => q.name === p.name)))
}

function isFencedInstance(group: Group, memberId: string, groupInstanceId: string | null): boolean {
  if (groupInstanceId === null) return false
  const current = group.staticMembers.get(groupInstanceId)
  return current !== undefined && current !== memberId
}

function sameProtocols(a: readonly GroupProtocol[], b: readonly GroupProtocol[]): boolean {
  return a.length === b.length && a.every((p, i) => p.name === b[i].name && p.metadata.equals(b[i].metadata))
}

function updateMember(member: Member, req: JoinRequest, nowMs: number): void {
  member.protocols = req.protocols
  member.protocolType = req.protocolType
  member.sessionTimeoutMs = req.sessionTimeoutMs
  member.rebalanceTimeoutMs = req.rebalanceTimeoutMs
  member.clientId = req.clientId
  member.clientHost = req.clientHost
  member.heartbeatDeadlineMs = nowMs + req.sessionTimeoutMs
}

/** Parks a JoinGroup; a join the member left parked before is answered so it is not lost. */
function parkJoin(member: Member, waiter: number): Effects {
  const previous = member.joinWaiter
  member.joinWaiter = waiter
  if (previous === null) return NO_EFFECTS
  return reply(previous, joinError(ErrorCode.REBALANCE_IN_PROGRESS, member.memberId))
}

function fenceWaiters(member: Member, errorCode: number): Effects {
  const replies: Reply[] = []
  if (member.joinWaiter !== null)
    replies.push({ waiter: member.joinWaiter, response: joinError(errorCode, member.memberId) })
  if (member.syncWaiter !== null) replies.push({ waiter: member.syncWaiter, response: syncError(errorCode) })
  member.joinWaiter = null
  member.syncWaiter = null
  return { records: [], replies }
}

function maxRebalanceTimeout(group: Group): number {
  let max = 0
  for (const member of group.members.values()) max = Math.max(max, member.rebalanceTimeoutMs)
  return max
}
