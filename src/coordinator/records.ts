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

function skipTags(r: Reader): void {
  const count = r.readUnsignedVarint()
  for (let i = 0; i < count; i++) {
    r.readUnsignedVarint() // the tag
    r.skipTaggedField()
  }
}
