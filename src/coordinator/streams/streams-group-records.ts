/**
 * Streams groups as records of `__consumer_offsets` (KIP-1071), in Kafka 4.4's coordinator
 * record formats, so a streams group keeps its epochs, topology, members and tasks across a
 * coordinator failover: key types 17 StreamsGroupMetadata, 19 StreamsGroupMemberMetadata,
 * 20 StreamsGroupTargetAssignmentMetadata, 21 StreamsGroupTargetAssignmentMember, 22
 * StreamsGroupCurrentMemberAssignment and 23 StreamsGroupTopology; keys non-flexible,
 * values flexible version 0 (tagged fields written empty, skipped when read, except the
 * target assignment metadata's AssignmentTimestamp, which the assignment interval needs).
 *
 * As for share groups (share-group-records.ts), the coordinator writes the difference of the
 * group's records before and after a step. What Kafka keeps only in memory stays so here:
 * the configured topology and the topics' signature (recomputed from the cluster image once
 * loaded), the endpoint-information epoch and a requested shutdown.
 */
import type { Reader, Writer } from '../../protocol/primitives.js'
import { type Group, newGroup } from '../group.js'
import {
  type CoordinatorRecord,
  encodeTargetAssignmentMetadataValue,
  endValue,
  flexibleValue,
  type GroupRecordKey,
  GroupRecordKeys,
  openValue,
  readCompactStrings,
  replayTargetAssignmentMetadata,
  skipTags,
  writeCompactStrings,
} from '../records.js'
import { emptyTasks, type TaskSet, type TasksTuple } from './streams-assignor.js'
import { newStreamsGroup, type StreamsGroup, type StreamsMember } from './streams-group.js'
import { STREAMS_MEMBER_STATE_CODE, type StreamsMemberState } from './streams-reconcile.js'
import type { InternalTopicInfo, StreamsTopology, Subtopology } from './streams-topology.js'

export type StreamsRecordKind =
  | 'streams-group'
  | 'streams-member'
  | 'streams-target-metadata'
  | 'streams-target-member'
  | 'streams-current-assignment'
  | 'streams-topology'

const STREAMS_KEYS = new GroupRecordKeys<StreamsRecordKind>(
  {
    'streams-group': 17,
    'streams-member': 19,
    'streams-target-metadata': 20,
    'streams-target-member': 21,
    'streams-current-assignment': 22,
    'streams-topology': 23,
  },
  ['streams-member', 'streams-target-member', 'streams-current-assignment'],
)
const STATE_BY_CODE = new Map(
  Object.entries(STREAMS_MEMBER_STATE_CODE).map(([state, code]) => [code, state as StreamsMemberState]),
)

export type StreamsRecordKey = GroupRecordKey<StreamsRecordKind>

export function streamsRecordKey(kind: StreamsRecordKind, group: string, memberId?: string): Buffer {
  return STREAMS_KEYS.encode(kind, group, memberId)
}

/** The streams-group record key, or undefined when the key is of another kind. */
export function decodeStreamsKey(key: Buffer): StreamsRecordKey | undefined {
  return STREAMS_KEYS.decode(key)
}

// ---- field codecs -----------------------------------------------------------------------------

function writeInt16s(w: Writer, values: readonly number[]): void {
  w.writeCompactArrayLength(values.length)
  for (const v of values) w.writeInt16(v)
}

function readInt16s(r: Reader): number[] {
  const n = r.readCompactArrayLength()
  const values: number[] = []
  for (let i = 0; i < n; i++) values.push(r.readInt16())
  return values
}

function writeKeyValues(w: Writer, entries: readonly { key: string; value: string }[]): void {
  w.writeCompactArrayLength(entries.length)
  for (const e of entries) w.writeCompactString(e.key).writeCompactString(e.value).writeUnsignedVarint(0)
}

function readKeyValues(r: Reader): { key: string; value: string }[] {
  const n = r.readCompactArrayLength()
  const entries: { key: string; value: string }[] = []
  for (let i = 0; i < n; i++) {
    entries.push({ key: r.readCompactString(), value: r.readCompactString() })
    skipTags(r)
  }
  return entries
}

/** TaskIds: subtopology id and partitions (the tagged AssignmentEpochs left out). */
function writeTasks(w: Writer, tasks: TaskSet): void {
  const entries = [...tasks].filter(([, p]) => p.length > 0).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  w.writeCompactArrayLength(entries.length)
  for (const [subtopologyId, partitions] of entries) {
    w.writeCompactString(subtopologyId)
    w.writeCompactArrayLength(partitions.length)
    for (const p of partitions) w.writeInt32(p)
    w.writeUnsignedVarint(0)
  }
}

function readTasks(r: Reader): TaskSet {
  const tasks: TaskSet = new Map()
  const n = r.readCompactArrayLength()
  for (let i = 0; i < n; i++) {
    const subtopologyId = r.readCompactString()
    const count = r.readCompactArrayLength()
    const partitions: number[] = []
    for (let j = 0; j < count; j++) partitions.push(r.readInt32())
    skipTags(r)
    tasks.set(subtopologyId, partitions)
  }
  return tasks
}

function writeTopicInfos(w: Writer, topics: readonly InternalTopicInfo[]): void {
  w.writeCompactArrayLength(topics.length)
  for (const t of topics) {
    w.writeCompactString(t.name).writeInt32(t.partitions).writeInt16(t.replicationFactor)
    writeKeyValues(w, t.topicConfigs)
    w.writeUnsignedVarint(0)
  }
}

function readTopicInfos(r: Reader): InternalTopicInfo[] {
  const n = r.readCompactArrayLength()
  const topics: InternalTopicInfo[] = []
  for (let i = 0; i < n; i++) {
    const name = r.readCompactString()
    const partitions = r.readInt32()
    const replicationFactor = r.readInt16()
    const topicConfigs = readKeyValues(r)
    skipTags(r)
    topics.push({ name, partitions, replicationFactor, topicConfigs })
  }
  return topics
}

// ---- values -----------------------------------------------------------------------------------

export function encodeTopologyValue(topology: StreamsTopology): Buffer {
  const w = flexibleValue().writeInt32(topology.epoch)
  w.writeCompactArrayLength(topology.subtopologies.length)
  for (const s of topology.subtopologies) {
    w.writeCompactString(s.subtopologyId)
    writeCompactStrings(w, s.sourceTopics)
    writeCompactStrings(w, s.sourceTopicRegex ?? [])
    writeTopicInfos(w, s.stateChangelogTopics)
    writeCompactStrings(w, s.repartitionSinkTopics)
    writeTopicInfos(w, s.repartitionSourceTopics)
    w.writeCompactArrayLength(s.copartitionGroups.length)
    for (const g of s.copartitionGroups) {
      writeInt16s(w, g.sourceTopics)
      writeInt16s(w, []) // SourceTopicRegex: regular expressions are refused at the heartbeat
      writeInt16s(w, g.repartitionSourceTopics)
      w.writeUnsignedVarint(0)
    }
    w.writeUnsignedVarint(0)
  }
  return endValue(w)
}

export function decodeTopologyValue(value: Buffer): StreamsTopology {
  const r = openValue(value)
  const epoch = r.readInt32()
  const n = r.readCompactArrayLength()
  const subtopologies: Subtopology[] = []
  for (let i = 0; i < n; i++) {
    const subtopologyId = r.readCompactString()
    const sourceTopics = readCompactStrings(r)
    const sourceTopicRegex = readCompactStrings(r)
    const stateChangelogTopics = readTopicInfos(r)
    const repartitionSinkTopics = readCompactStrings(r)
    const repartitionSourceTopics = readTopicInfos(r)
    const groups = r.readCompactArrayLength()
    const copartitionGroups: Subtopology['copartitionGroups'][number][] = []
    for (let j = 0; j < groups; j++) {
      const source = readInt16s(r)
      readInt16s(r)
      copartitionGroups.push({ sourceTopics: source, repartitionSourceTopics: readInt16s(r) })
      skipTags(r)
    }
    skipTags(r)
    subtopologies.push({
      subtopologyId,
      sourceTopics,
      ...(sourceTopicRegex.length > 0 && { sourceTopicRegex }),
      stateChangelogTopics,
      repartitionSinkTopics,
      repartitionSourceTopics,
      copartitionGroups,
    })
  }
  return { epoch, subtopologies }
}

function memberValue(m: StreamsMember): Buffer {
  const w = flexibleValue()
  w.writeCompactNullableString(m.instanceId)
  w.writeCompactNullableString(m.rackId)
  w.writeCompactString(m.clientId)
  w.writeCompactString(m.clientHost)
  w.writeInt32(m.rebalanceTimeoutMs)
  w.writeInt32(m.topologyEpoch)
  w.writeCompactString(m.processId)
  if (m.userEndpoint === null) w.writeInt8(-1)
  else
    w.writeInt8(1)
      .writeCompactString(m.userEndpoint.host)
      .writeUInt16(m.userEndpoint.port)
      .writeUnsignedVarint(0)
  writeKeyValues(w, m.clientTags)
  return endValue(w)
}

function currentAssignmentValue(m: StreamsMember): Buffer {
  const w = flexibleValue()
  w.writeInt32(m.memberEpoch)
  w.writeInt32(m.previousMemberEpoch)
  w.writeInt8(STREAMS_MEMBER_STATE_CODE[m.state])
  writeTasks(w, m.assigned.active)
  writeTasks(w, m.assigned.standby)
  writeTasks(w, m.assigned.warmup)
  writeTasks(w, m.activePendingRevocation)
  // Standby and warm-up tasks are given up at once (never pending revocation here).
  writeTasks(w, new Map())
  writeTasks(w, new Map())
  return endValue(w)
}

function targetMemberValue(tasks: TasksTuple): Buffer {
  const w = flexibleValue()
  writeTasks(w, tasks.active)
  writeTasks(w, tasks.standby)
  writeTasks(w, tasks.warmup)
  return endValue(w)
}

/**
 * Every record describing the group now, in the order Kafka writes a new group's: its
 * epoch, topology, members, target assignment and the members' current assignments.
 */
export function streamsGroupRecords(group: StreamsGroup): CoordinatorRecord[] {
  const id = group.groupId
  const members = [...group.members.values()]
  const records: CoordinatorRecord[] = [
    // MetadataHash 0: the topics' signature is recomputed from the cluster image once loaded.
    {
      key: streamsRecordKey('streams-group', id),
      value: endValue(flexibleValue().writeInt32(group.groupEpoch).writeInt64(0n)),
    },
  ]
  if (group.topology !== null)
    records.push({
      key: streamsRecordKey('streams-topology', id),
      value: encodeTopologyValue(group.topology),
    })
  for (const m of members)
    records.push({ key: streamsRecordKey('streams-member', id, m.memberId), value: memberValue(m) })
  records.push({
    key: streamsRecordKey('streams-target-metadata', id),
    value: encodeTargetAssignmentMetadataValue(group),
  })
  for (const [memberId, tasks] of group.targetAssignment)
    records.push({
      key: streamsRecordKey('streams-target-member', id, memberId),
      value: targetMemberValue(tasks),
    })
  for (const m of members)
    records.push({
      key: streamsRecordKey('streams-current-assignment', id, m.memberId),
      value: currentAssignmentValue(m),
    })
  return records
}

/** Tombstones for an empty streams group's own records (DeleteGroups, expiry of an empty group). */
export function streamsGroupTombstones(groupId: string): CoordinatorRecord[] {
  return (['streams-target-metadata', 'streams-topology', 'streams-group'] as const).map((kind) => ({
    key: streamsRecordKey(kind, groupId),
    value: null,
  }))
}

// ---- replay -----------------------------------------------------------------------------------

/** The member a record speaks of, made if its other records have not been replayed yet. */
function replayedMember(group: StreamsGroup, memberId: string, nowMs: number): StreamsMember {
  let member = group.members.get(memberId)
  if (!member) {
    member = {
      memberId,
      instanceId: null,
      rackId: null,
      clientId: '',
      clientHost: '',
      processId: '',
      userEndpoint: null,
      clientTags: [],
      rebalanceTimeoutMs: 0,
      topologyEpoch: 0,
      memberEpoch: 0,
      previousMemberEpoch: -1,
      state: 'STABLE',
      assigned: emptyTasks(),
      activePendingRevocation: new Map(),
      // Its session starts now: a live member keeps heartbeating to the new coordinator.
      lastHeartbeatMs: nowMs,
      revocationDeadlineMs: null,
    }
    group.members.set(memberId, member)
  }
  return member
}

function replayMember(group: StreamsGroup, memberId: string, value: Buffer | null, nowMs: number): void {
  if (value === null) {
    const gone = group.members.get(memberId)
    group.members.delete(memberId)
    if (gone?.instanceId != null && group.staticMembers.get(gone.instanceId) === memberId)
      group.staticMembers.delete(gone.instanceId)
    return
  }
  const r = openValue(value)
  const m = replayedMember(group, memberId, nowMs)
  m.instanceId = r.readCompactNullableString()
  m.rackId = r.readCompactNullableString()
  m.clientId = r.readCompactString()
  m.clientHost = r.readCompactString()
  m.rebalanceTimeoutMs = r.readInt32()
  m.topologyEpoch = r.readInt32()
  m.processId = r.readCompactString()
  if (r.readInt8() < 0) m.userEndpoint = null
  else {
    m.userEndpoint = { host: r.readCompactString(), port: r.readUInt16() }
    skipTags(r)
  }
  m.clientTags = readKeyValues(r)
  if (m.instanceId !== null) group.staticMembers.set(m.instanceId, memberId)
}

function replayCurrentAssignment(group: StreamsGroup, memberId: string, value: Buffer, nowMs: number): void {
  const r = openValue(value)
  const m = replayedMember(group, memberId, nowMs)
  m.memberEpoch = r.readInt32()
  m.previousMemberEpoch = r.readInt32()
  m.state = STATE_BY_CODE.get(r.readInt8()) ?? 'STABLE'
  m.assigned = { active: readTasks(r), standby: readTasks(r), warmup: readTasks(r) }
  m.activePendingRevocation = readTasks(r)
  // A revocation in progress gets a whole rebalance timeout again under the new coordinator.
  m.revocationDeadlineMs = m.state === 'UNREVOKED_TASKS' ? nowMs + m.rebalanceTimeoutMs : null
}

/**
 * Applies one streams-group record while a coordinator loads its partition: to the streams
 * part of the shard's group (a streams group is a group of the shard, holding its offsets).
 */
export function replayStreamsRecord(
  groups: Map<string, Group>,
  key: StreamsRecordKey,
  value: Buffer | null,
  nowMs: number,
): void {
  let holder = groups.get(key.group)
  if (value === null && !holder?.streams) return
  if (!holder) {
    holder = newGroup(key.group, nowMs)
    groups.set(key.group, holder)
  }
  holder.streams ??= newStreamsGroup(key.group)
  holder.protocolType = 'streams'
  const group = holder.streams
  if (key.kind === 'streams-group' && value === null) {
    // The streams group is gone; its offsets (tombstoned separately) stay as a plain group.
    delete holder.streams
    holder.protocolType = null
    holder.state = 'Empty'
    if (holder.offsets.size === 0) groups.delete(key.group)
    return
  }
  applyStreamsRecord(group, key, value, nowMs)
  holder.state = group.members.size > 0 ? 'Stable' : 'Empty'
}

function applyStreamsRecord(
  group: StreamsGroup,
  key: StreamsRecordKey,
  value: Buffer | null,
  nowMs: number,
): void {
  switch (key.kind) {
    case 'streams-group':
      if (value !== null) group.groupEpoch = openValue(value).readInt32()
      return
    case 'streams-topology':
      group.topology = value === null ? null : decodeTopologyValue(value)
      return
    case 'streams-target-metadata': {
      replayTargetAssignmentMetadata(group, value)
      return
    }
    case 'streams-target-member':
      if (value === null) group.targetAssignment.delete(key.memberId)
      else {
        const r = openValue(value)
        group.targetAssignment.set(key.memberId, {
          active: readTasks(r),
          standby: readTasks(r),
          warmup: readTasks(r),
        })
      }
      return
    case 'streams-member':
      replayMember(group, key.memberId, value, nowMs)
      return
    case 'streams-current-assignment':
      if (value !== null) replayCurrentAssignment(group, key.memberId, value, nowMs)
      return
  }
}

/** A copy of the group to put back when a step's records could not be written at all. */
export function snapshotStreamsGroup(group: StreamsGroup): () => void {
  const saved = structuredClone({ ...group, members: [...group.members.values()] })
  return () => {
    const copy = structuredClone(saved)
    group.groupEpoch = copy.groupEpoch
    group.assignmentEpoch = copy.assignmentEpoch
    group.assignmentTimestampMs = copy.assignmentTimestampMs
    group.topology = copy.topology
    group.configured = copy.configured
    group.signature = copy.signature
    group.members.clear()
    for (const m of copy.members) group.members.set(m.memberId, m)
    group.staticMembers.clear()
    for (const [instance, id] of copy.staticMembers) group.staticMembers.set(instance, id)
    group.targetAssignment = copy.targetAssignment
    group.endpointInformationEpoch = copy.endpointInformationEpoch
    group.shutdownRequestMemberId = copy.shutdownRequestMemberId
    group.assignmentConfigs = copy.assignmentConfigs
    group.initialAssignmentDueMs = copy.initialAssignmentDueMs
    group.topologyDescription = copy.topologyDescription
    group.taskOffsets.clear()
    for (const [memberId, offsets] of copy.taskOffsets) group.taskOffsets.set(memberId, offsets)
  }
}
