/**
 * The records of `__share_group_state` in Kafka's formats (share-coordinator message schemas
 * ShareSnapshotKey/Value, record type 0, and ShareUpdateKey/Value, type 1): a key is the
 * int16 record type then group id, topic id and partition (not flexible); a value is its
 * int16 version (0) then the flexible body. A snapshot is a share-partition's whole state, an
 * update the batches that changed since (merged into the last snapshot on replay); a null
 * value is a tombstone (the state was deleted).
 */
import { Reader, Writer } from '../../protocol/primitives.js'

export const SHARE_GROUP_STATE_TOPIC = '__share_group_state'

const SNAPSHOT_TYPE = 0
const UPDATE_TYPE = 1
const VALUE_VERSION = 0
const TAG_DELIVERY_COMPLETE_COUNT = 0

/** Kafka's SharePartitionKey: one group's state on one partition of one topic. */
export interface SharePartitionKey {
  readonly groupId: string
  readonly topicId: string
  readonly partition: number
}

/** Kafka's PersisterStateBatch: offsets first..last (inclusive) in one state and count. */
export interface ShareStateBatch {
  readonly firstOffset: number
  readonly lastOffset: number
  /** RecordState ids: 0 available, 2 acknowledged, 4 archived. */
  readonly deliveryState: number
  readonly deliveryCount: number
}

/** Kafka's ShareGroupOffset: a share-partition's persisted state. */
export interface ShareGroupOffset {
  readonly snapshotEpoch: number
  /** Bumped by each InitializeShareGroupState: a write of an older one is fenced. */
  readonly stateEpoch: number
  readonly leaderEpoch: number
  readonly startOffset: number
  /** -1 when unknown (a writer that does not send it). */
  readonly deliveryCompleteCount: number
  readonly createTimestampMs: number
  readonly writeTimestampMs: number
  readonly stateBatches: readonly ShareStateBatch[]
}

/** ShareUpdateValue: what changed; startOffset and leaderEpoch -1 when unchanged. */
export interface ShareUpdate {
  readonly snapshotEpoch: number
  readonly leaderEpoch: number
  readonly startOffset: number
  readonly deliveryCompleteCount: number
  readonly stateBatches: readonly ShareStateBatch[]
}

export type ShareStateRecord =
  | { readonly kind: 'snapshot'; readonly key: SharePartitionKey; readonly value: ShareGroupOffset | null }
  | { readonly kind: 'update'; readonly key: SharePartitionKey; readonly value: ShareUpdate | null }

/** Kafka's SharePartitionKey.asCoordinatorKey: how FindCoordinator (key type 2) names it. */
export function coordinatorKeyOf(key: SharePartitionKey): string {
  return `${key.groupId}:${key.topicId}:${key.partition}`
}

/** The parts of a coordinator key, or undefined when it is not "group:topicId:partition". */
export function parseCoordinatorKey(text: string): SharePartitionKey | undefined {
  const last = text.lastIndexOf(':')
  const middle = last > 0 ? text.lastIndexOf(':', last - 1) : -1
  if (middle < 0) return undefined
  const partition = Number(text.slice(last + 1))
  if (!Number.isInteger(partition) || partition < 0) return undefined
  return { groupId: text.slice(0, middle), topicId: text.slice(middle + 1, last), partition }
}

function writeKey(type: number, key: SharePartitionKey): Buffer {
  return new Writer(64)
    .writeInt16(type)
    .writeString(key.groupId)
    .writeUuid(key.topicId)
    .writeInt32(key.partition)
    .toBuffer()
}

function writeBatches(w: Writer, batches: readonly ShareStateBatch[]): void {
  w.writeCompactArrayLength(batches.length)
  for (const b of batches)
    w.writeInt64(BigInt(b.firstOffset))
      .writeInt64(BigInt(b.lastOffset))
      .writeInt8(b.deliveryState)
      .writeInt16(b.deliveryCount)
      .writeUnsignedVarint(0)
}

function readBatches(r: Reader): ShareStateBatch[] {
  const count = r.readCompactArrayLength()
  const batches: ShareStateBatch[] = []
  for (let i = 0; i < count; i++) {
    const firstOffset = Number(r.readInt64())
    const lastOffset = Number(r.readInt64())
    const deliveryState = r.readInt8()
    const deliveryCount = r.readInt16()
    skipTaggedFields(r)
    batches.push({ firstOffset, lastOffset, deliveryState, deliveryCount })
  }
  return batches
}

/** The delivery complete count as tag 0 when known (KIP-1226), else no tagged fields. */
function writeTags(w: Writer, deliveryCompleteCount: number): void {
  if (deliveryCompleteCount < 0) {
    w.writeUnsignedVarint(0)
    return
  }
  w.writeUnsignedVarint(1).writeUnsignedVarint(TAG_DELIVERY_COMPLETE_COUNT).writeUnsignedVarint(4)
  w.writeInt32(deliveryCompleteCount)
}

/** Reads the tagged fields, returning the delivery complete count if present. */
function readTags(r: Reader): number {
  let deliveryCompleteCount = -1
  const count = r.readUnsignedVarint()
  for (let i = 0; i < count; i++) {
    const tag = r.readUnsignedVarint()
    const size = r.readUnsignedVarint()
    if (tag === TAG_DELIVERY_COMPLETE_COUNT && size === 4) deliveryCompleteCount = r.readInt32()
    else r.readRaw(size)
  }
  return deliveryCompleteCount
}

function skipTaggedFields(r: Reader): void {
  readTags(r)
}

export function encodeShareStateRecord(record: ShareStateRecord): { key: Buffer; value: Buffer | null } {
  const key = writeKey(record.kind === 'snapshot' ? SNAPSHOT_TYPE : UPDATE_TYPE, record.key)
  if (record.value === null) return { key, value: null }
  const w = new Writer(128).writeInt16(VALUE_VERSION)
  if (record.kind === 'snapshot') {
    const v = record.value
    w.writeInt32(v.snapshotEpoch).writeInt32(v.stateEpoch).writeInt32(v.leaderEpoch)
    w.writeInt64(BigInt(v.startOffset))
    w.writeInt64(BigInt(v.createTimestampMs)).writeInt64(BigInt(v.writeTimestampMs))
    writeBatches(w, v.stateBatches)
    writeTags(w, v.deliveryCompleteCount)
  } else {
    const v = record.value
    w.writeInt32(v.snapshotEpoch).writeInt32(v.leaderEpoch).writeInt64(BigInt(v.startOffset))
    writeBatches(w, v.stateBatches)
    writeTags(w, v.deliveryCompleteCount)
  }
  return { key, value: w.toBuffer() }
}

/** undefined for a record type or value version this broker does not know (skipped on replay). */
export function decodeShareStateRecord(keyBytes: Buffer, value: Buffer | null): ShareStateRecord | undefined {
  const k = new Reader(keyBytes)
  const type = k.readInt16()
  if (type !== SNAPSHOT_TYPE && type !== UPDATE_TYPE) return undefined
  const key: SharePartitionKey = { groupId: k.readString(), topicId: k.readUuid(), partition: k.readInt32() }
  if (value === null)
    return type === SNAPSHOT_TYPE ? { kind: 'snapshot', key, value } : { kind: 'update', key, value }
  const r = new Reader(value)
  if (r.readInt16() !== VALUE_VERSION) return undefined
  if (type === SNAPSHOT_TYPE) {
    const snapshotEpoch = r.readInt32()
    const stateEpoch = r.readInt32()
    const leaderEpoch = r.readInt32()
    const startOffset = Number(r.readInt64())
    const createTimestampMs = Number(r.readInt64())
    const writeTimestampMs = Number(r.readInt64())
    const stateBatches = readBatches(r)
    const deliveryCompleteCount = readTags(r)
    return {
      kind: 'snapshot',
      key,
      value: {
        snapshotEpoch,
        stateEpoch,
        leaderEpoch,
        startOffset,
        deliveryCompleteCount,
        createTimestampMs,
        writeTimestampMs,
        stateBatches,
      },
    }
  }
  const snapshotEpoch = r.readInt32()
  const leaderEpoch = r.readInt32()
  const startOffset = Number(r.readInt64())
  const stateBatches = readBatches(r)
  const deliveryCompleteCount = readTags(r)
  return {
    kind: 'update',
    key,
    value: { snapshotEpoch, leaderEpoch, startOffset, deliveryCompleteCount, stateBatches },
  }
}

export const SHARE_STATE_SERDE = {
  serialize: encodeShareStateRecord,
  deserialize: decodeShareStateRecord,
}

/**
 * Kafka's PersisterStateBatchCombiner: `updates` written over `current` (an offset in both
 * takes the update's state and count), everything below `startOffset` dropped, neighbours
 * with the same state and count joined. Both inputs may be in any order; the result is
 * sorted and non-overlapping.
 */
export function combineStateBatches(
  current: readonly ShareStateBatch[],
  updates: readonly ShareStateBatch[],
  startOffset: number,
): ShareStateBatch[] {
  let result: ShareStateBatch[] = [...current].sort((a, b) => a.firstOffset - b.firstOffset)
  for (const update of updates) {
    const next: ShareStateBatch[] = []
    for (const b of result) {
      if (b.lastOffset < update.firstOffset || b.firstOffset > update.lastOffset) {
        next.push(b)
        continue
      }
      if (b.firstOffset < update.firstOffset) next.push({ ...b, lastOffset: update.firstOffset - 1 })
      if (b.lastOffset > update.lastOffset) next.push({ ...b, firstOffset: update.lastOffset + 1 })
    }
    next.push(update)
    result = next.sort((a, b) => a.firstOffset - b.firstOffset)
  }
  const joined: ShareStateBatch[] = []
  for (const b of result) {
    if (b.lastOffset < startOffset) continue
    const trimmed = b.firstOffset < startOffset ? { ...b, firstOffset: startOffset } : b
    const last = joined.at(-1)
    if (
      last &&
      last.lastOffset + 1 === trimmed.firstOffset &&
      last.deliveryState === trimmed.deliveryState &&
      last.deliveryCount === trimmed.deliveryCount
    )
      joined[joined.length - 1] = { ...last, lastOffset: trimmed.lastOffset }
    else joined.push(trimmed)
  }
  return joined
}
