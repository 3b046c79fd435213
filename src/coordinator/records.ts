/**
 * The records of `__consumer_offsets` in Kafka's own formats (group-coordinator message
 * schemas OffsetCommitKey/Value and GroupMetadataKey/Value), so Kafka's tools could read a
 * tidelog offsets log and the other way round. A key starts with its int16 version: 0 and 1
 * are offset commits, 2 is group metadata. A null value is a tombstone (offset or group
 * deleted). We write OffsetCommitValue v3 (v1 when an expire timestamp is given) and
 * GroupMetadataValue v3, the versions Kafka 3.x writes; we read every version 0-4.
 */
import { Reader, Writer } from '../protocol/primitives.js'

export interface CoordinatorRecord {
  readonly key: Buffer
  readonly value: Buffer | null
}

export interface OffsetCommitKey {
  readonly kind: 'offset'
  readonly group: string
  readonly topic: string
  readonly partition: number
}

export interface GroupMetadataKey {
  readonly kind: 'group'
  readonly group: string
}

export interface OffsetCommitValue {
  readonly offset: bigint
  readonly leaderEpoch: number
  readonly metadata: string
  readonly commitTimestampMs: number
  /** Only in value version 1 (commits from OffsetCommit v2-4 with a retention time). */
  readonly expireTimestampMs: number | null
}

export interface MemberMetadataValue {
  readonly memberId: string
  readonly groupInstanceId: string | null
  readonly clientId: string
  readonly clientHost: string
  readonly rebalanceTimeoutMs: number
  readonly sessionTimeoutMs: number
  readonly subscription: Buffer
  readonly assignment: Buffer
}

export interface GroupMetadataValue {
  readonly protocolType: string
  readonly generation: number
  readonly protocol: string | null
  readonly leader: string | null
  readonly currentStateTimestampMs: number
  readonly members: readonly MemberMetadataValue[]
}

const OFFSET_KEY_VERSION = 1
const GROUP_KEY_VERSION = 2
const OFFSET_VALUE_VERSION = 3
const OFFSET_VALUE_VERSION_WITH_EXPIRE = 1
const GROUP_VALUE_VERSION = 3

export function offsetCommitKey(group: string, topic: string, partition: number): Buffer {
  return new Writer(64)
    .writeInt16(OFFSET_KEY_VERSION)
    .writeString(group)
    .writeString(topic)
    .writeInt32(partition)
    .toBuffer()
}

export function groupMetadataKey(group: string): Buffer {
  return new Writer(32).writeInt16(GROUP_KEY_VERSION).writeString(group).toBuffer()
}

export function encodeOffsetCommitValue(value: OffsetCommitValue): Buffer {
  const w = new Writer(64)
  if (value.expireTimestampMs !== null) {
    w.writeInt16(OFFSET_VALUE_VERSION_WITH_EXPIRE)
    w.writeInt64(value.offset)
    w.writeString(value.metadata)
    w.writeInt64(BigInt(value.commitTimestampMs))
    w.writeInt64(BigInt(value.expireTimestampMs))
    return w.toBuffer()
  }
  w.writeInt16(OFFSET_VALUE_VERSION)
  w.writeInt64(value.offset)
  w.writeInt32(value.leaderEpoch)
  w.writeString(value.metadata)
  w.writeInt64(BigInt(value.commitTimestampMs))
  return w.toBuffer()
}

export function encodeGroupMetadataValue(value: GroupMetadataValue): Buffer {
  const w = new Writer(256)
  w.writeInt16(GROUP_VALUE_VERSION)
  w.writeString(value.protocolType)
  w.writeInt32(value.generation)
  w.writeNullableString(value.protocol)
  w.writeNullableString(value.leader)
  w.writeInt64(BigInt(value.currentStateTimestampMs))
  w.writeArrayLength(value.members.length)
  for (const m of value.members) {
    w.writeString(m.memberId)
    w.writeNullableString(m.groupInstanceId)
    w.writeString(m.clientId)
    w.writeString(m.clientHost)
    w.writeInt32(m.rebalanceTimeoutMs)
    w.writeInt32(m.sessionTimeoutMs)
    w.writeBytes(m.subscription)
    w.writeBytes(m.assignment)
  }
  return w.toBuffer()
}

/** The key's kind and fields; undefined for key versions this coordinator does not know. */
export function decodeKey(key: Buffer): OffsetCommitKey | GroupMetadataKey | undefined {
  const r = new Reader(key)
  const version = r.readInt16()
  if (version === 0 || version === 1) {
    return { kind: 'offset', group: r.readString(), topic: r.readString(), partition: r.readInt32() }
  }
  if (version === GROUP_KEY_VERSION) return { kind: 'group', group: r.readString() }
  return undefined
}

export function decodeOffsetCommitValue(value: Buffer): OffsetCommitValue {
  const r = new Reader(value)
  const version = r.readInt16()
  const flexible = version >= 4
  const offset = r.readInt64()
  const leaderEpoch = version >= 3 ? r.readInt32() : -1
  const metadata = flexible ? r.readCompactString() : r.readString()
  const commitTimestampMs = Number(r.readInt64())
  const expireTimestampMs = version === 1 ? Number(r.readInt64()) : null
  return { offset, leaderEpoch, metadata, commitTimestampMs, expireTimestampMs }
}

export function decodeGroupMetadataValue(value: Buffer): GroupMetadataValue {
  const r = new Reader(value)
  const version = r.readInt16()
  const flexible = version >= 4
  const str = (): string => (flexible ? r.readCompactString() : r.readString())
  const nstr = (): string | null => (flexible ? r.readCompactNullableString() : r.readNullableString())
  const protocolType = str()
  const generation = r.readInt32()
  const protocol = nstr()
  const leader = nstr()
  const currentStateTimestampMs = version >= 2 ? Number(r.readInt64()) : -1
  const count = flexible ? r.readCompactArrayLength() : r.readArrayLength()
  const members: MemberMetadataValue[] = []
  for (let i = 0; i < count; i++) {
    const memberId = str()
    const groupInstanceId = version >= 3 ? nstr() : null
    const clientId = str()
    const clientHost = str()
    const rebalanceTimeoutMs = version >= 1 ? r.readInt32() : 0
    const sessionTimeoutMs = r.readInt32()
    const subscription = Buffer.from(flexible ? r.readCompactBytes() : r.readBytes())
    const assignment = Buffer.from(flexible ? r.readCompactBytes() : r.readBytes())
    if (flexible) skipTags(r)
    members.push({
      memberId,
      groupInstanceId,
      clientId,
      clientHost,
      rebalanceTimeoutMs: rebalanceTimeoutMs || sessionTimeoutMs,
      sessionTimeoutMs,
      subscription,
      assignment,
    })
  }
  return { protocolType, generation, protocol, leader, currentStateTimestampMs, members }
}

export function skipTags(r: Reader): void {
  const count = r.readUnsignedVarint()
  for (let i = 0; i < count; i++) {
    r.readUnsignedVarint() // the tag
    r.skipTaggedField()
  }
}

// ---- group record keys, shared by the consumer-, share- and streams-group records ----------

export interface GroupRecordKey<Kind extends string> {
  readonly kind: Kind
  readonly group: string
  /** Empty for the group-level kinds. */
  readonly memberId: string
}

/**
 * One family of group record keys (consumer, share or streams groups): each kind's int16
 * type (Kafka's coordinator-key apiKey), then the group id, then the member id for the
 * member-level kinds. Keys are non-flexible.
 */
export class GroupRecordKeys<Kind extends string> {
  private readonly kindByType: ReadonlyMap<number, Kind>
  private readonly memberKeyed: ReadonlySet<Kind>

  constructor(
    private readonly types: Readonly<Record<Kind, number>>,
    memberKeyed: readonly Kind[],
  ) {
    this.kindByType = new Map(Object.entries<number>(types).map(([kind, type]) => [type, kind as Kind]))
    this.memberKeyed = new Set(memberKeyed)
  }

  encode(kind: Kind, group: string, memberId = ''): Buffer {
    const w = new Writer(64).writeInt16(this.types[kind]).writeString(group)
    if (this.memberKeyed.has(kind)) w.writeString(memberId)
    return w.toBuffer()
  }

  /** The key, or undefined when it is of another family. */
  decode(key: Buffer): GroupRecordKey<Kind> | undefined {
    const r = new Reader(key)
    const kind = this.kindByType.get(r.readInt16())
    if (kind === undefined) return undefined
    const group = r.readString()
    return { kind, group, memberId: this.memberKeyed.has(kind) ? r.readString() : '' }
  }
}

/** A compact array of compact strings, as the values' topic-name lists. */
export function writeCompactStrings(w: Writer, values: readonly string[]): void {
  w.writeCompactArrayLength(values.length)
  for (const v of values) w.writeCompactString(v)
}

export function readCompactStrings(r: Reader): string[] {
  const n = r.readCompactArrayLength()
  const values: string[] = []
  for (let i = 0; i < n; i++) values.push(r.readCompactString())
  return values
}

// ---- KIP-848 consumer groups ------------------------------------------------------------------
//
// Kafka 3.9's group-coordinator record schemas: keys are non-flexible (int16 version, group
// id, member id), values flexible (compact strings and arrays, a tagged-field section, which
// we write empty and skip when reading). Key versions: 3 ConsumerGroupMetadata, 4
// ConsumerGroupPartitionMetadata (read and ignored: the subscribed topics' metadata is
// recomputed from the cluster image, as Kafka 4.1 does), 5 ConsumerGroupMemberMetadata, 6
// ConsumerGroupTargetAssignmentMetadata, 7 ConsumerGroupTargetAssignmentMember, 8
// ConsumerGroupCurrentMemberAssignment. Every value is version 0.

export type ConsumerRecordKind =
  | 'consumer-group'
  | 'consumer-partition-metadata'
  | 'consumer-member'
  | 'consumer-target-metadata'
  | 'consumer-target-member'
  | 'consumer-current-assignment'

export type ConsumerRecordKey = GroupRecordKey<ConsumerRecordKind>

const CONSUMER_KEYS = new GroupRecordKeys<ConsumerRecordKind>(
  {
    'consumer-group': 3,
    'consumer-partition-metadata': 4,
    'consumer-member': 5,
    'consumer-target-metadata': 6,
    'consumer-target-member': 7,
    'consumer-current-assignment': 8,
  },
  ['consumer-member', 'consumer-target-member', 'consumer-current-assignment'],
)

export function consumerRecordKey(kind: ConsumerRecordKind, group: string, memberId = ''): Buffer {
  return CONSUMER_KEYS.encode(kind, group, memberId)
}

/** The consumer-group record key, or undefined when the key is of another kind. */
export function decodeConsumerKey(key: Buffer): ConsumerRecordKey | undefined {
  return CONSUMER_KEYS.decode(key)
}

/** topic id → partitions, as the values' TopicPartitions arrays. */
export type TopicPartitionsValue = ReadonlyMap<string, readonly number[]>

export interface ConsumerMemberMetadataValue {
  readonly instanceId: string | null
  readonly rackId: string | null
  readonly clientId: string
  readonly clientHost: string
  readonly subscribedTopicNames: readonly string[]
  readonly subscribedTopicRegex: string | null
  readonly rebalanceTimeoutMs: number
  readonly serverAssignor: string | null
}

export interface ConsumerCurrentAssignmentValue {
  readonly memberEpoch: number
  readonly previousMemberEpoch: number
  /** Kafka's MemberState: 0 UNREVOKED_PARTITIONS, 1 UNRELEASED_PARTITIONS, 2 STABLE. */
  readonly state: number
  readonly assignedPartitions: TopicPartitionsValue
  readonly partitionsPendingRevocation: TopicPartitionsValue
}

const CONSUMER_VALUE_VERSION = 0

export function flexibleValue(): Writer {
  return new Writer(128).writeInt16(CONSUMER_VALUE_VERSION)
}

export function endValue(w: Writer): Buffer {
  return w.writeUnsignedVarint(0).toBuffer()
}

export function writeTopicPartitions(w: Writer, value: TopicPartitionsValue): void {
  const topics = [...value].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  w.writeCompactArrayLength(topics.length)
  for (const [topicId, partitions] of topics) {
    w.writeUuid(topicId)
    w.writeCompactArrayLength(partitions.length)
    for (const p of partitions) w.writeInt32(p)
    w.writeUnsignedVarint(0)
  }
}

export function readTopicPartitions(r: Reader): Map<string, number[]> {
  const result = new Map<string, number[]>()
  const count = r.readCompactArrayLength()
  for (let i = 0; i < count; i++) {
    const topicId = r.readUuid()
    const n = r.readCompactArrayLength()
    const partitions: number[] = []
    for (let j = 0; j < n; j++) partitions.push(r.readInt32())
    skipTags(r)
    result.set(topicId, partitions)
  }
  return result
}

export function openValue(value: Buffer): Reader {
  const r = new Reader(value)
  r.readInt16() // every version so far shares version 0's fields
  return r
}

export function encodeConsumerGroupMetadataValue(groupEpoch: number): Buffer {
  return endValue(flexibleValue().writeInt32(groupEpoch))
}

export function decodeConsumerGroupMetadataValue(value: Buffer): number {
  return openValue(value).readInt32()
}

/** The epoch and time of a group's last target assignment (ConsumerGroup, ShareGroup and StreamsGroup alike). */
export interface TargetAssignmentMetadata {
  readonly assignmentEpoch: number
  /** Kafka 4.3+'s tagged AssignmentTimestamp; 0 when never computed, or since the group emptied. */
  readonly assignmentTimestampMs: number
}

/** The tag of the *GroupTargetAssignmentMetadataValue records' AssignmentTimestamp. */
const ASSIGNMENT_TIMESTAMP_TAG = 0

/**
 * A consumer, share or streams group's TargetAssignmentMetadataValue (one layout for the
 * three): AssignmentEpoch, and AssignmentTimestamp as Kafka writes a tagged field, only when
 * not 0, so a group that never had one reads the same in Kafka before 4.3.
 */
export function encodeTargetAssignmentMetadataValue(metadata: TargetAssignmentMetadata): Buffer {
  const w = flexibleValue().writeInt32(metadata.assignmentEpoch)
  if (metadata.assignmentTimestampMs === 0) return endValue(w)
  return w
    .writeUnsignedVarint(1)
    .writeUnsignedVarint(ASSIGNMENT_TIMESTAMP_TAG)
    .writeUnsignedVarint(8)
    .writeInt64(BigInt(metadata.assignmentTimestampMs))
    .toBuffer()
}

export function decodeTargetAssignmentMetadataValue(value: Buffer): TargetAssignmentMetadata {
  const r = openValue(value)
  const assignmentEpoch = r.readInt32()
  let assignmentTimestampMs = 0
  const tags = r.readUnsignedVarint()
  for (let i = 0; i < tags; i++) {
    if (r.readUnsignedVarint() !== ASSIGNMENT_TIMESTAMP_TAG) {
      r.skipTaggedField()
      continue
    }
    r.readUnsignedVarint() // its size
    assignmentTimestampMs = Number(r.readInt64())
  }
  return { assignmentEpoch, assignmentTimestampMs }
}

/**
 * Replays a TargetAssignmentMetadata record (consumer, share or streams group) into the group:
 * a tombstone resets both to 0, as a new group's.
 */
export function replayTargetAssignmentMetadata(
  group: { assignmentEpoch: number; assignmentTimestampMs: number },
  value: Buffer | null,
): void {
  const metadata =
    value === null
      ? { assignmentEpoch: 0, assignmentTimestampMs: 0 }
      : decodeTargetAssignmentMetadataValue(value)
  group.assignmentEpoch = metadata.assignmentEpoch
  group.assignmentTimestampMs = metadata.assignmentTimestampMs
}

export function encodeConsumerTargetMemberValue(partitions: TopicPartitionsValue): Buffer {
  const w = flexibleValue()
  writeTopicPartitions(w, partitions)
  return endValue(w)
}

export function decodeConsumerTargetMemberValue(value: Buffer): Map<string, number[]> {
  return readTopicPartitions(openValue(value))
}

export function encodeConsumerMemberMetadataValue(value: ConsumerMemberMetadataValue): Buffer {
  const w = flexibleValue()
  w.writeCompactNullableString(value.instanceId)
  w.writeCompactNullableString(value.rackId)
  w.writeCompactString(value.clientId)
  w.writeCompactString(value.clientHost)
  writeCompactStrings(w, value.subscribedTopicNames)
  w.writeCompactNullableString(value.subscribedTopicRegex)
  w.writeInt32(value.rebalanceTimeoutMs)
  w.writeCompactNullableString(value.serverAssignor)
  return endValue(w)
}

export function decodeConsumerMemberMetadataValue(value: Buffer): ConsumerMemberMetadataValue {
  const r = openValue(value)
  const instanceId = r.readCompactNullableString()
  const rackId = r.readCompactNullableString()
  const clientId = r.readCompactString()
  const clientHost = r.readCompactString()
  const subscribedTopicNames = readCompactStrings(r)
  const subscribedTopicRegex = r.readCompactNullableString()
  const rebalanceTimeoutMs = r.readInt32()
  const serverAssignor = r.readCompactNullableString()
  return {
    instanceId,
    rackId,
    clientId,
    clientHost,
    subscribedTopicNames,
    subscribedTopicRegex,
    rebalanceTimeoutMs,
    serverAssignor,
  }
}

export function encodeConsumerCurrentAssignmentValue(value: ConsumerCurrentAssignmentValue): Buffer {
  const w = flexibleValue()
  w.writeInt32(value.memberEpoch)
  w.writeInt32(value.previousMemberEpoch)
  w.writeInt8(value.state)
  writeTopicPartitions(w, value.assignedPartitions)
  writeTopicPartitions(w, value.partitionsPendingRevocation)
  return endValue(w)
}

export function decodeConsumerCurrentAssignmentValue(value: Buffer): ConsumerCurrentAssignmentValue {
  const r = openValue(value)
  const memberEpoch = r.readInt32()
  const previousMemberEpoch = r.readInt32()
  const state = r.readInt8()
  const assignedPartitions = readTopicPartitions(r)
  const partitionsPendingRevocation = readTopicPartitions(r)
  return { memberEpoch, previousMemberEpoch, state, assignedPartitions, partitionsPendingRevocation }
}

// ---- shared by the share- and streams-group records -------------------------------------------

/**
 * The records to write for a group's change: tombstones for the keys `before` had and
 * `after` has not (in reverse, so a member's current assignment goes before its metadata,
 * as Kafka removes them), then the records whose value changed, in `after`'s order.
 */
export function diffRecords(
  before: readonly CoordinatorRecord[],
  after: readonly CoordinatorRecord[],
): CoordinatorRecord[] {
  const hex = (b: Buffer) => b.toString('hex')
  const was = new Map(before.map((r) => [hex(r.key), r.value]))
  const now = new Set(after.map((r) => hex(r.key)))
  const records: CoordinatorRecord[] = []
  for (const r of [...before].reverse()) if (!now.has(hex(r.key))) records.push({ key: r.key, value: null })
  for (const r of after) {
    const old = was.get(hex(r.key))
    if (old === undefined || old === null || r.value === null || !old.equals(r.value)) records.push(r)
  }
  return records
}
