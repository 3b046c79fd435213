/**
 * Share groups as records of `__consumer_offsets` (KIP-932), in Kafka 4.4's coordinator
 * record formats, so a share group keeps its epochs, members and assignment across a
 * coordinator failover: key types 10 ShareGroupMemberMetadata, 11 ShareGroupMetadata, 12
 * ShareGroupTargetAssignmentMetadata, 13 ShareGroupTargetAssignmentMember, 14
 * ShareGroupCurrentMemberAssignment and 15 ShareGroupStatePartitionMetadata; keys
 * non-flexible, values flexible version 0 (as the consumer-group records in records.ts).
 *
 * A step does not list its records: the coordinator takes the group's records before and
 * after it and writes the difference (diffRecords), so whatever the step changed is written
 * and nothing else. Replay applies them in any order (compaction may leave a member's
 * current assignment before its metadata).
 */
import {
  type CoordinatorRecord,
  encodeTargetAssignmentMetadataValue,
  endValue,
  flexibleValue,
  type GroupRecordKey,
  GroupRecordKeys,
  openValue,
  readCompactStrings,
  readTopicPartitions,
  replayTargetAssignmentMetadata,
  skipTags,
  writeCompactStrings,
  writeTopicPartitions,
} from './records.js'
import { newShareGroup, type ShareAssignment, type ShareGroup, type ShareMember } from './share-group.js'

export type ShareRecordKind =
  | 'share-member'
  | 'share-group'
  | 'share-target-metadata'
  | 'share-target-member'
  | 'share-current-assignment'
  | 'share-state-partitions'

const SHARE_KEYS = new GroupRecordKeys<ShareRecordKind>(
  {
    'share-member': 10,
    'share-group': 11,
    'share-target-metadata': 12,
    'share-target-member': 13,
    'share-current-assignment': 14,
    'share-state-partitions': 15,
  },
  ['share-member', 'share-target-member', 'share-current-assignment'],
)

/** Kafka's MemberState.STABLE: a share member never waits for a revocation. */
const STABLE_STATE = 2

export type ShareRecordKey = GroupRecordKey<ShareRecordKind>

export function shareRecordKey(kind: ShareRecordKind, group: string, memberId?: string): Buffer {
  return SHARE_KEYS.encode(kind, group, memberId)
}

/** The share-group record key, or undefined when the key is of another kind. */
export function decodeShareKey(key: Buffer): ShareRecordKey | undefined {
  return SHARE_KEYS.decode(key)
}

function memberValue(m: ShareMember): Buffer {
  const w = flexibleValue()
  w.writeCompactNullableString(m.rackId)
  w.writeCompactString(m.clientId)
  w.writeCompactString(m.clientHost)
  writeCompactStrings(w, m.subscribedTopicNames)
  return endValue(w)
}

function currentAssignmentValue(m: ShareMember): Buffer {
  const w = flexibleValue()
  w.writeInt32(m.memberEpoch)
  // tidelog's share member does not keep its previous epoch (nothing reads it: a share
  // member is never fenced by a lagging epoch), so the record says -1.
  w.writeInt32(-1)
  w.writeInt8(STABLE_STATE)
  writeTopicPartitions(w, m.assignment)
  return endValue(w)
}

function targetMemberValue(assignment: ShareAssignment): Buffer {
  const w = flexibleValue()
  writeTopicPartitions(w, assignment)
  return endValue(w)
}

/** ShareGroupStatePartitionMetadataValue: every initialized share-partition, none initializing or deleting. */
function statePartitionsValue(
  initialized: ReadonlyMap<string, ReadonlySet<number>>,
  topicName: (topicId: string) => string,
): Buffer {
  const w = flexibleValue()
  w.writeCompactArrayLength(0)
  const topics = [...initialized].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  w.writeCompactArrayLength(topics.length)
  for (const [topicId, partitions] of topics) {
    w.writeUuid(topicId)
    w.writeCompactString(topicName(topicId))
    const sorted = [...partitions].sort((a, b) => a - b)
    w.writeCompactArrayLength(sorted.length)
    for (const p of sorted) w.writeInt32(p)
    w.writeUnsignedVarint(0)
  }
  w.writeCompactArrayLength(0)
  return endValue(w)
}

function readStatePartitions(value: Buffer): Map<string, Set<number>> {
  const r = openValue(value)
  const result = new Map<string, Set<number>>()
  // Initializing and initialized topics both have state to keep; deleting ones are skipped.
  for (let list = 0; list < 2; list++) {
    const n = r.readCompactArrayLength()
    for (let i = 0; i < n; i++) {
      const topicId = r.readUuid()
      r.readCompactString()
      const count = r.readCompactArrayLength()
      const partitions = result.get(topicId) ?? new Set<number>()
      for (let j = 0; j < count; j++) partitions.add(r.readInt32())
      skipTags(r)
      result.set(topicId, partitions)
    }
  }
  return result
}

/**
 * Every record describing the group now, in the order Kafka writes a new group's: its epoch,
 * the members, the target assignment, the members' current assignments, the initialized
 * share-partitions.
 */
export function shareGroupRecords(
  group: ShareGroup,
  topicName: (topicId: string) => string,
): CoordinatorRecord[] {
  const id = group.groupId
  const members = [...group.members.values()]
  const records: CoordinatorRecord[] = [
    // MetadataHash 0: tidelog recomputes the subscribed topics' metadata from the cluster image.
    {
      key: shareRecordKey('share-group', id),
      value: endValue(flexibleValue().writeInt32(group.groupEpoch).writeInt64(0n)),
    },
  ]
  for (const m of members)
    records.push({ key: shareRecordKey('share-member', id, m.memberId), value: memberValue(m) })
  records.push({
    key: shareRecordKey('share-target-metadata', id),
    value: encodeTargetAssignmentMetadataValue(group),
  })
  for (const [memberId, assignment] of group.targetAssignment)
    records.push({
      key: shareRecordKey('share-target-member', id, memberId),
      value: targetMemberValue(assignment),
    })
  for (const m of members)
    records.push({
      key: shareRecordKey('share-current-assignment', id, m.memberId),
      value: currentAssignmentValue(m),
    })
  if (group.initialized.size > 0)
    records.push({
      key: shareRecordKey('share-state-partitions', id),
      value: statePartitionsValue(group.initialized, topicName),
    })
  return records
}

/** The member a record speaks of, made if its other records have not been replayed yet. */
function replayedMember(group: ShareGroup, memberId: string, nowMs: number): ShareMember {
  let member = group.members.get(memberId)
  if (!member) {
    member = {
      memberId,
      memberEpoch: 0,
      rackId: null,
      clientId: '',
      clientHost: '',
      subscribedTopicNames: [],
      assignment: new Map(),
      // Its session starts now: a live member keeps heartbeating to the new coordinator.
      lastHeartbeatMs: nowMs,
    }
    group.members.set(memberId, member)
  }
  return member
}

/** Applies one share-group record while a coordinator loads its partition. */
export function replayShareRecord(
  groups: Map<string, ShareGroup>,
  key: ShareRecordKey,
  value: Buffer | null,
  nowMs: number,
): void {
  let group = groups.get(key.group)
  if (value === null && group === undefined) return
  if (!group) {
    group = newShareGroup(key.group)
    groups.set(key.group, group)
  }
  switch (key.kind) {
    case 'share-group':
      if (value === null) groups.delete(key.group)
      else group.groupEpoch = openValue(value).readInt32()
      return
    case 'share-target-metadata': {
      replayTargetAssignmentMetadata(group, value)
      return
    }
    case 'share-target-member':
      if (value === null) group.targetAssignment.delete(key.memberId)
      else group.targetAssignment.set(key.memberId, readTopicPartitions(openValue(value)))
      return
    case 'share-state-partitions':
      group.initialized.clear()
      if (value !== null)
        for (const [topicId, partitions] of readStatePartitions(value))
          group.initialized.set(topicId, partitions)
      return
    case 'share-member': {
      if (value === null) {
        group.members.delete(key.memberId)
        return
      }
      const r = openValue(value)
      const old = replayedMember(group, key.memberId, nowMs)
      group.members.set(key.memberId, {
        ...old,
        rackId: r.readCompactNullableString(),
        clientId: r.readCompactString(),
        clientHost: r.readCompactString(),
        subscribedTopicNames: readCompactStrings(r),
      })
      return
    }
    case 'share-current-assignment': {
      if (value === null) return
      const r = openValue(value)
      const member = replayedMember(group, key.memberId, nowMs)
      member.memberEpoch = r.readInt32()
      r.readInt32() // previous member epoch
      r.readInt8() // state: always STABLE for a share member
      member.assignment = readTopicPartitions(r)
      return
    }
  }
}

/** A copy of the group to put back when a step's records could not be written at all. */
export function snapshotShareGroup(group: ShareGroup): () => void {
  const copy = (a: ShareAssignment): ShareAssignment => new Map([...a].map(([t, p]) => [t, [...p]]))
  const members = [...group.members.values()].map((m) => ({
    ...m,
    subscribedTopicNames: [...m.subscribedTopicNames],
    assignment: copy(m.assignment),
  }))
  const target = [...group.targetAssignment].map(([id, a]) => [id, copy(a)] as const)
  const initialized = [...group.initialized].map(([t, p]) => [t, new Set(p)] as const)
  const { groupEpoch, assignmentEpoch, assignmentTimestampMs } = group
  return () => {
    group.groupEpoch = groupEpoch
    group.assignmentEpoch = assignmentEpoch
    group.assignmentTimestampMs = assignmentTimestampMs
    group.members.clear()
    for (const m of members) group.members.set(m.memberId, { ...m })
    group.targetAssignment = new Map(target.map(([id, a]) => [id, copy(a)]))
    group.initialized.clear()
    for (const [t, p] of initialized) group.initialized.set(t, new Set(p))
  }
}
