/**
 * KIP-848 consumer groups as records: the builders of Kafka's consumer-group records
 * (ConsumerGroupMetadata, ConsumerGroupMemberMetadata, ConsumerGroupTargetAssignmentMember,
 * ConsumerGroupCurrentMemberAssignment and their tombstones) that each heartbeat step
 * writes, and their replay when a coordinator loads its partition.
 */

import { assert } from '../common/assert.js'
import {
  type ConsumerGroupState,
  type ConsumerMember,
  type Group,
  MemberState,
  newConsumerGroupState,
  newGroup,
  type TopicAssignment,
} from './group.js'
import {
  type ConsumerRecordKey,
  type CoordinatorRecord,
  consumerRecordKey,
  decodeConsumerCurrentAssignmentValue,
  decodeConsumerGroupMetadataValue,
  decodeConsumerMemberMetadataValue,
  decodeConsumerTargetMemberValue,
  encodeConsumerCurrentAssignmentValue,
  encodeConsumerGroupMetadataValue,
  encodeConsumerMemberMetadataValue,
  encodeConsumerTargetMemberValue,
  encodeTargetAssignmentMetadataValue,
  replayTargetAssignmentMetadata,
  type TargetAssignmentMetadata,
} from './records.js'

/** Turns a group (new, or an empty classic one) into a consumer group; Kafka's upgrade. */
export function makeConsumerGroup(group: Group): ConsumerGroupState {
  assert(group.type === 'consumer' || group.members.size === 0, 'only an empty classic group converts')
  group.type = 'consumer'
  group.protocolType = 'consumer'
  group.protocolName = null
  group.leaderId = null
  group.consumer ??= newConsumerGroupState()
  return group.consumer
}

export function groupEpochRecord(groupId: string, epoch: number): CoordinatorRecord {
  return { key: consumerRecordKey('consumer-group', groupId), value: encodeConsumerGroupMetadataValue(epoch) }
}

export function targetMetadataRecord(groupId: string, metadata: TargetAssignmentMetadata): CoordinatorRecord {
  return {
    key: consumerRecordKey('consumer-target-metadata', groupId),
    value: encodeTargetAssignmentMetadataValue(metadata),
  }
}

export function memberMetadataRecord(groupId: string, member: ConsumerMember): CoordinatorRecord {
  return {
    key: consumerRecordKey('consumer-member', groupId, member.memberId),
    value: encodeConsumerMemberMetadataValue(member),
  }
}

export function targetMemberRecord(
  groupId: string,
  memberId: string,
  assignment: TopicAssignment,
): CoordinatorRecord {
  return {
    key: consumerRecordKey('consumer-target-member', groupId, memberId),
    value: encodeConsumerTargetMemberValue(assignment),
  }
}

export function currentAssignmentRecord(groupId: string, member: ConsumerMember): CoordinatorRecord {
  return {
    key: consumerRecordKey('consumer-current-assignment', groupId, member.memberId),
    value: encodeConsumerCurrentAssignmentValue(member),
  }
}

/** A member's records removed, in Kafka's order (assignment, target, subscription). */
export function tombstones(groupId: string, memberId: string): CoordinatorRecord[] {
  return [
    { key: consumerRecordKey('consumer-current-assignment', groupId, memberId), value: null },
    { key: consumerRecordKey('consumer-target-member', groupId, memberId), value: null },
    { key: consumerRecordKey('consumer-member', groupId, memberId), value: null },
  ]
}

/** Every record of an empty consumer group, as tombstones (deletion, or a move to classic). */
export function consumerGroupTombstones(groupId: string): CoordinatorRecord[] {
  return [
    { key: consumerRecordKey('consumer-target-metadata', groupId), value: null },
    { key: consumerRecordKey('consumer-group', groupId), value: null },
  ]
}

/**
 * Applies one consumer-group record while loading. Sessions start at `nowMs`: live members
 * keep heartbeating to the new coordinator, dead ones expire.
 */
export function replayConsumerRecord(
  groups: Map<string, Group>,
  key: ConsumerRecordKey,
  value: Buffer | null,
  nowMs: number,
  sessionTimeoutMs: number,
): void {
  if (key.kind === 'consumer-partition-metadata') return
  let group = groups.get(key.group)
  if (value === null && (group === undefined || group.consumer === null)) return
  if (!group) {
    group = newGroup(key.group, nowMs)
    groups.set(key.group, group)
  }
  if (group.type !== 'consumer') {
    group.members.clear()
    group.staticMembers.clear()
    group.generationId = 0
    makeConsumerGroup(group)
  }
  const state = group.consumer
  assert(state !== null, 'consumer group state')
  switch (key.kind) {
    case 'consumer-group':
      if (value === null) {
        // The consumer group is gone; its offsets (tombstoned separately) stay as a plain group.
        group.type = 'classic'
        group.consumer = null
        group.protocolType = null
        group.state = 'Empty'
        if (group.offsets.size === 0) groups.delete(key.group)
        return
      }
      state.groupEpoch = decodeConsumerGroupMetadataValue(value)
      break
    case 'consumer-target-metadata': {
      replayTargetAssignmentMetadata(state, value)
      break
    }
    case 'consumer-target-member':
      if (value === null) state.targetAssignment.delete(key.memberId)
      else state.targetAssignment.set(key.memberId, decodeConsumerTargetMemberValue(value))
      break
    case 'consumer-member':
      replayMember(state, key.memberId, value, nowMs, sessionTimeoutMs)
      break
    case 'consumer-current-assignment':
      if (value !== null) replayCurrentAssignment(state, key.memberId, value, nowMs)
      break
  }
  group.state = state.members.size > 0 ? 'Stable' : 'Empty'
}

/** A member's subscription and client details (ConsumerGroupMemberMetadata), or its removal. */
function replayMember(
  state: ConsumerGroupState,
  memberId: string,
  value: Buffer | null,
  nowMs: number,
  sessionTimeoutMs: number,
): void {
  const existing = state.members.get(memberId)
  if (value === null) {
    state.members.delete(memberId)
    if (existing?.instanceId != null && state.staticMembers.get(existing.instanceId) === memberId)
      state.staticMembers.delete(existing.instanceId)
    return
  }
  const m = decodeConsumerMemberMetadataValue(value)
  const member: ConsumerMember = existing ?? {
    memberId,
    instanceId: null,
    rackId: null,
    clientId: '',
    clientHost: '',
    subscribedTopicNames: [],
    subscribedTopicRegex: null,
    serverAssignor: null,
    rebalanceTimeoutMs: m.rebalanceTimeoutMs,
    memberEpoch: 0,
    previousMemberEpoch: 0,
    state: MemberState.STABLE,
    assignedPartitions: new Map(),
    partitionsPendingRevocation: new Map(),
    sessionDeadlineMs: nowMs + sessionTimeoutMs,
    revocationDeadlineMs: null,
  }
  member.instanceId = m.instanceId
  member.rackId = m.rackId
  member.clientId = m.clientId
  member.clientHost = m.clientHost
  member.subscribedTopicNames = [...m.subscribedTopicNames]
  member.subscribedTopicRegex = m.subscribedTopicRegex
  member.rebalanceTimeoutMs = m.rebalanceTimeoutMs
  member.serverAssignor = m.serverAssignor
  state.members.set(memberId, member)
  if (m.instanceId !== null) state.staticMembers.set(m.instanceId, memberId)
}

/** A member's epochs and partitions (ConsumerGroupCurrentMemberAssignment). */
function replayCurrentAssignment(
  state: ConsumerGroupState,
  memberId: string,
  value: Buffer,
  nowMs: number,
): void {
  const member = state.members.get(memberId)
  if (!member) return
  const v = decodeConsumerCurrentAssignmentValue(value)
  member.memberEpoch = v.memberEpoch
  member.previousMemberEpoch = v.previousMemberEpoch
  member.state =
    v.state === MemberState.UNREVOKED_PARTITIONS || v.state === MemberState.UNRELEASED_PARTITIONS
      ? v.state
      : MemberState.STABLE
  member.assignedPartitions = new Map([...v.assignedPartitions].map(([t, p]) => [t, [...p]]))
  member.partitionsPendingRevocation = new Map(
    [...v.partitionsPendingRevocation].map(([t, p]) => [t, [...p]]),
  )
  // A revocation in progress gets a whole rebalance timeout again under the new coordinator.
  member.revocationDeadlineMs =
    member.state === MemberState.UNREVOKED_PARTITIONS ? nowMs + member.rebalanceTimeoutMs : null
}

/**
 * A copy of the group's consumer state (and the group fields it moves) to put back when a
 * step's records could not be written at all: the in-memory state must never hold a
 * change the log does not, or the next coordinator's replay would differ from what members
 * were told (seed 109 of `--consumer-protocol`: a refused append left a revocation in memory
 * only, the partition went to a second member, and the replayed log held it twice).
 */
export function snapshotConsumerGroup(group: Group): () => void {
  const state = group.consumer
  const groupState = group.state
  const since = group.currentStateTimestampMs
  if (state === null) return () => undefined
  const copy = (a: TopicAssignment): TopicAssignment => new Map([...a].map(([t, p]) => [t, [...p]]))
  const members = [...state.members.values()].map((m) => ({
    ...m,
    subscribedTopicNames: [...m.subscribedTopicNames],
    assignedPartitions: copy(m.assignedPartitions),
    partitionsPendingRevocation: copy(m.partitionsPendingRevocation),
  }))
  const targets = [...state.targetAssignment].map(([id, a]) => [id, copy(a)] as const)
  const statics = [...state.staticMembers]
  const { groupEpoch, assignmentEpoch, assignmentTimestampMs, subscriptionSignature, assignorName } = state
  return () => {
    state.groupEpoch = groupEpoch
    state.assignmentEpoch = assignmentEpoch
    state.assignmentTimestampMs = assignmentTimestampMs
    state.subscriptionSignature = subscriptionSignature
    state.assignorName = assignorName
    state.members.clear()
    for (const m of members) state.members.set(m.memberId, { ...m })
    state.targetAssignment.clear()
    for (const [id, a] of targets) state.targetAssignment.set(id, copy(a))
    state.staticMembers.clear()
    for (const [instance, id] of statics) state.staticMembers.set(instance, id)
    group.consumer = state
    group.type = 'consumer'
    group.state = groupState
    group.currentStateTimestampMs = since
  }
}
