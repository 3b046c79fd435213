/**
 * The Metadata response's encoding with each topic's partitions encoded once: a described
 * topic's partition list (metadata-topics.ts keeps one per topic image) is encoded the first
 * time a request of its version group asks for it and copied by reference afterwards, so an
 * answer for every topic at 10,000 partitions writes a few hundred small fields and appends
 * buffers instead of encoding 10,000 partitions. The bytes are the generated codec's
 * (protocol/generated/apis/metadata.ts): test/server/metadata-encoding.test.ts compares
 * them for every version. Anything this encoder does not write the way the codec does (a
 * field set in a version without it, unknown tagged fields, an unknown version) goes to the
 * codec, which encodes or refuses it as before.
 */

import {
  encodeMetadataResponse,
  type MetadataResponse,
  type MetadataResponseMetadataResponsePartition,
  type MetadataResponseMetadataResponseTopic,
} from '../../protocol/generated/apis/metadata.js'
import { writeTaggedFields } from '../../protocol/generated/common.js'
import { Writer } from '../../protocol/primitives.js'

/** Kafka's sentinel for "authorized operations not requested". */
const AUTHORIZED_OPERATIONS_OMITTED = -2147483648
const VERSION_MAX = 13

type Partitions = readonly MetadataResponseMetadataResponsePartition[]

/**
 * A partition list's encoding changes at v5 (offline replicas), v7 (leader epoch) and v9
 * (compact arrays, tagged fields): four encodings, by group.
 */
function versionGroup(version: number): number {
  return version >= 9 ? 3 : version >= 7 ? 2 : version >= 5 ? 1 : 0
}

interface EncodedList {
  readonly bytes: Buffer
  /** Where the first partition's encoding starts in `bytes` (after the list's length). */
  readonly start: number
  /** Where each partition's encoding ends in `bytes`. */
  readonly ends: Int32Array
}

/** Encoded partition lists by list object, by version group; lists never change once described. */
const encodedLists = new WeakMap<Partitions, (EncodedList | undefined)[]>()
/** A topic's list described again and the list before it, which shares the unchanged partitions. */
const previousLists = new WeakMap<Partitions, Partitions>()

/**
 * `list` replaces `previous` for the same topic, holding the same objects for the
 * partitions that did not change: their bytes are copied from `previous`'s encoding.
 */
export function notePreviousList(list: Partitions, previous: Partitions): void {
  previousLists.set(list, previous)
  // One step back only: a chain of lists, each holding the one before, would keep every
  // list and encoding of a topic that changes often (and is never encoded, hidden from
  // every principal asking).
  previousLists.delete(previous)
}

export function encodeMetadataResponseCached(w: Writer, version: number, body: unknown): void {
  const m = body as MetadataResponse
  if (!Number.isInteger(version) || version < 0 || version > VERSION_MAX || !encodable(m, version)) {
    encodeMetadataResponse(w, version, m)
    return
  }
  const flexible = version >= 9
  if (version >= 3) w.writeInt32(m.throttleTimeMs)
  writeLength(w, flexible, m.brokers.length)
  for (const broker of m.brokers) {
    w.writeInt32(broker.nodeId)
    if (flexible) w.writeCompactString(broker.host)
    else w.writeString(broker.host)
    w.writeInt32(broker.port)
    if (flexible) w.writeCompactNullableString(broker.rack)
    else if (version >= 1) w.writeNullableString(broker.rack)
    if (flexible) writeTaggedFields(w, undefined)
  }
  if (flexible) w.writeCompactNullableString(m.clusterId)
  else if (version >= 2) w.writeNullableString(m.clusterId)
  if (version >= 1) w.writeInt32(m.controllerId)
  writeLength(w, flexible, m.topics.length)
  for (const topic of m.topics) writeTopic(w, version, topic)
  if (version >= 8 && version <= 10) w.writeInt32(m.clusterAuthorizedOperations)
  if (version >= 13) w.writeInt16(m.errorCode)
  if (flexible) writeTaggedFields(w, undefined)
}

function writeTopic(w: Writer, version: number, topic: MetadataResponseMetadataResponseTopic): void {
  const flexible = version >= 9
  w.writeInt16(topic.errorCode)
  // Null names were refused by encodable() below v12.
  if (version >= 12) w.writeCompactNullableString(topic.name)
  else if (flexible) w.writeCompactString(topic.name as string)
  else w.writeString(topic.name as string)
  if (version >= 10) w.writeUuid(topic.topicId)
  if (version >= 1) w.writeBoolean(topic.isInternal)
  w.writeRaw(partitionsBytes(topic.partitions, version))
  if (version >= 8) w.writeInt32(topic.topicAuthorizedOperations)
  if (flexible) writeTaggedFields(w, undefined)
}

/**
 * The encoded list (its length first), from the cache or put together now: the runs of
 * partitions it shares with the list it replaces (a topic of which one partition changed)
 * are copied from that list's encoding, only the others are encoded.
 */
function partitionsBytes(partitions: Partitions, version: number): Buffer {
  const group = versionGroup(version)
  let byGroup = encodedLists.get(partitions)
  if (byGroup === undefined) {
    byGroup = []
    encodedLists.set(partitions, byGroup)
  }
  const cached = byGroup[group]
  if (cached !== undefined) return cached.bytes
  const previous = previousLists.get(partitions)
  const before = previous === undefined ? undefined : encodedLists.get(previous)?.[group]
  const w = new Writer(Math.max(256, partitions.length * 40))
  writeLength(w, group === 3, partitions.length)
  const start = w.length
  const ends = new Int32Array(partitions.length)
  for (let i = 0; i < partitions.length; ) {
    if (previous === undefined || before === undefined || previous[i] !== partitions[i]) {
      writePartition(w, group, partitions[i])
      ends[i++] = w.length
      continue
    }
    let to = i + 1
    while (to < partitions.length && previous[to] === partitions[to]) to++
    const from = i === 0 ? before.start : before.ends[i - 1]
    const base = w.length - from
    w.writeRaw(before.bytes.subarray(from, before.ends[to - 1]))
    for (; i < to; i++) ends[i] = base + before.ends[i]
  }
  const chunks = w.toChunks()
  const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)
  byGroup[group] = { bytes, start, ends }
  // Encoded: the list before it may go (another version group encodes without it).
  previousLists.delete(partitions)
  return bytes
}

function writePartition(w: Writer, group: number, p: MetadataResponseMetadataResponsePartition): void {
  const flexible = group === 3
  w.writeInt16(p.errorCode)
  w.writeInt32(p.partitionIndex)
  w.writeInt32(p.leaderId)
  if (group >= 2) w.writeInt32(p.leaderEpoch)
  writeIds(w, flexible, p.replicaNodes)
  writeIds(w, flexible, p.isrNodes)
  if (group >= 1) writeIds(w, flexible, p.offlineReplicas)
  if (flexible) writeTaggedFields(w, undefined)
}

function writeIds(w: Writer, flexible: boolean, ids: readonly number[]): void {
  writeLength(w, flexible, ids.length)
  for (const id of ids) w.writeInt32(id)
}

function writeLength(w: Writer, flexible: boolean, length: number): void {
  if (flexible) w.writeCompactArrayLength(length)
  else w.writeArrayLength(length)
}

/**
 * Whether this encoder writes `m` as the codec would: no unknown tagged fields (this
 * encoder writes none), no field set in a version without it, no null name before v12.
 * Partition lists already encoded were checked when they were.
 */
function encodable(m: MetadataResponse, version: number): boolean {
  if ((m._unknownTaggedFields?.length ?? 0) > 0) return false
  if ((version < 8 || version > 10) && m.clusterAuthorizedOperations !== AUTHORIZED_OPERATIONS_OMITTED)
    return false
  for (const broker of m.brokers) if ((broker._unknownTaggedFields?.length ?? 0) > 0) return false
  for (const topic of m.topics) {
    if ((topic._unknownTaggedFields?.length ?? 0) > 0) return false
    if (version < 12 && topic.name === null) return false
    if (version < 8 && topic.topicAuthorizedOperations !== AUTHORIZED_OPERATIONS_OMITTED) return false
    if (encodedLists.get(topic.partitions)?.[versionGroup(version)] !== undefined) continue
    for (const p of topic.partitions) if ((p._unknownTaggedFields?.length ?? 0) > 0) return false
  }
  return true
}
