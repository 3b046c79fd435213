/**
 * Committed offsets and group lifecycle records as deterministic steps: OffsetCommit
 * (validated against the group's generation, applied only once its records are
 * committed), OffsetFetch, DeleteGroups, OffsetDelete, offsets.retention.minutes expiry,
 * and `replayRecord`, which rebuilds groups from the __consumer_offsets log when a broker
 * becomes coordinator. Like rebalance.ts: no I/O, no clock.
 */

import type { Offset, ProducerId } from '../common/types.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { decodeConsumerProtocolSubscription } from '../protocol/generated/index.js'
import { Reader } from '../protocol/primitives.js'
import {
  consumerGroupSubscribes,
  consumerGroupTombstones,
  DEFAULT_CONSUMER_GROUP_CONFIG,
  replayConsumerRecord,
  validateConsumerOffsetRequest,
} from './consumer-group.js'
import { type Effects, type PartitionCodesResult, reply, topicPartitionKey } from './effects.js'
import {
  type CommittedOffset,
  type CoordinatorConfig,
  type Group,
  type Member,
  newGroup,
  type PendingTransactionalOffset,
} from './group.js'
import {
  type CoordinatorRecord,
  decodeConsumerKey,
  decodeGroupMetadataValue,
  decodeKey,
  decodeOffsetCommitValue,
  encodeOffsetCommitValue,
  groupMetadataKey,
  offsetCommitKey,
} from './records.js'
import type { ShareGroup } from './share-group.js'
import { decodeShareKey, replayShareRecord } from './share-group-records.js'
import { validateStreamsOffsetRequest } from './streams/streams-group.js'
import {
  decodeStreamsKey,
  replayStreamsRecord,
  streamsGroupTombstones,
} from './streams/streams-group-records.js'

export interface CommitRequest {
  readonly memberId: string
  readonly groupInstanceId: string | null
  /** The generation, or the member epoch for a consumer group (OffsetCommit v9+). */
  readonly generationId: number
  /** The OffsetCommit version (a consumer group's members must use v9+). */
  readonly apiVersion?: number
  /** OffsetCommit v2-4 retention_time_ms; -1 for the broker default. */
  readonly retentionTimeMs: number
  readonly partitions: readonly {
    topic: string
    partition: number
    offset: bigint
    leaderEpoch: number
    metadata: string | null
  }[]
}

/** The group-level check of an OffsetCommit; NONE lets the commit through. */
export function validateCommit(group: Group, req: CommitRequest, nowMs: number): number {
  if (group.state === 'Dead') return ErrorCode.COORDINATOR_NOT_AVAILABLE
  if (group.streams)
    return validateStreamsOffsetRequest(group.streams, req.memberId, req.generationId, 'commit')
  if (group.consumer !== null) {
    // A KIP-848 member commits with OffsetCommit v9+ (member id and epoch); older versions
    // come from classic members, which a consumer group does not have here.
    if ((req.apiVersion ?? 9) < 9 && req.generationId >= 0) return ErrorCode.UNSUPPORTED_VERSION
    return validateConsumerOffsetRequest(group.consumer, req.memberId, req.generationId, 'commit')
  }
  // Commits outside group management (assign-mode consumers, admin tools).
  if (req.generationId < 0 && group.state === 'Empty') return ErrorCode.NONE
  const instance = req.groupInstanceId
  if (
    instance !== null &&
    group.staticMembers.has(instance) &&
    group.staticMembers.get(instance) !== req.memberId
  )
    return ErrorCode.FENCED_INSTANCE_ID
  const member = group.members.get(req.memberId)
  if (!member) return ErrorCode.UNKNOWN_MEMBER_ID
  if (req.generationId !== group.generationId) return ErrorCode.ILLEGAL_GENERATION
  if (group.state === 'CompletingRebalance') return ErrorCode.REBALANCE_IN_PROGRESS
  member.heartbeatDeadlineMs = nowMs + member.sessionTimeoutMs
  return ErrorCode.NONE
}

/**
 * Writes the commit's records; the offsets become visible (and the reply is sent) only
 * after they are committed to the partition (acks=all), so a failover never loses an
 * offset a client was told is committed.
 */
export function commitOffsets(
  group: Group,
  req: CommitRequest,
  waiter: number,
  nowMs: number,
  config: CoordinatorConfig,
  partitionExists: (topic: string, partition: number) => boolean,
): Effects {
  const codes = new Map<string, number>()
  const groupCode = validateCommit(group, req, nowMs)
  const accepted: { topic: string; partition: number; value: CommittedOffset }[] = []
  for (const p of req.partitions) {
    const key = topicPartitionKey(p.topic, p.partition)
    const metadata = p.metadata ?? ''
    if (groupCode !== ErrorCode.NONE) codes.set(key, groupCode)
    else if (Buffer.byteLength(metadata) > config.offsetMetadataMaxBytes)
      codes.set(key, ErrorCode.OFFSET_METADATA_TOO_LARGE)
    else if (!partitionExists(p.topic, p.partition)) codes.set(key, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    else {
      const expireTimestampMs = req.retentionTimeMs >= 0 ? nowMs + req.retentionTimeMs : null
      const value = {
        offset: p.offset,
        leaderEpoch: p.leaderEpoch,
        metadata,
        commitTimestampMs: nowMs,
        expireTimestampMs,
      }
      accepted.push({ topic: p.topic, partition: p.partition, value })
    }
  }
  if (accepted.length === 0) return reply(waiter, { errorCode: ErrorCode.NONE, partitions: codes })
  const records = accepted.map((a) => ({
    key: offsetCommitKey(group.groupId, a.topic, a.partition),
    value: encodeOffsetCommitValue(a.value),
  }))
  for (const a of accepted) addPending(group, topicPartitionKey(a.topic, a.partition), 1)
  const afterAppend = (code: number, _nowMs: number, baseOffset: Offset): Effects => {
    const partitions = new Map(codes)
    for (const a of accepted) {
      const key = topicPartitionKey(a.topic, a.partition)
      addPending(group, key, -1)
      partitions.set(key, offsetAppendError(code))
      if (code === ErrorCode.NONE)
        setOffsetIfNewer(group, a.topic, a.partition, { ...a.value, recordOffset: baseOffset })
    }
    return reply(waiter, { errorCode: ErrorCode.NONE, partitions } satisfies PartitionCodesResult)
  }
  return { records, replies: [], afterAppend }
}

/** Kafka's mapping of append errors to OffsetCommit errors (GroupMetadataManager.storeOffsets). */
export function offsetAppendError(code: number): number {
  switch (code) {
    case ErrorCode.MESSAGE_TOO_LARGE:
    case ErrorCode.RECORD_LIST_TOO_LARGE:
    case ErrorCode.INVALID_FETCH_SIZE:
      return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    default:
      return code
  }
}

export function setOffset(group: Group, topic: string, partition: number, value: CommittedOffset): void {
  let partitions = group.offsets.get(topic)
  if (!partitions) {
    partitions = new Map()
    group.offsets.set(topic, partitions)
  }
  partitions.set(partition, value)
}

/**
 * Kafka's onOffsetCommitAppend / completePendingTxnOffsetCommit: the commit written later to
 * the log wins, so a plain commit written after a transactional one (or the other way round)
 * is not undone by whichever completes last.
 */
function setOffsetIfNewer(group: Group, topic: string, partition: number, value: CommittedOffset): void {
  const current = group.offsets.get(topic)?.get(partition)
  if (current?.recordOffset !== undefined && value.recordOffset !== undefined) {
    if (current.recordOffset >= value.recordOffset) return
  }
  setOffset(group, topic, partition, value)
}

function deleteOffset(group: Group, topic: string, partition: number): void {
  const partitions = group.offsets.get(topic)
  if (!partitions) return
  partitions.delete(partition)
  if (partitions.size === 0) group.offsets.delete(topic)
}

/** Committed offsets or commits on their way (Kafka's GroupMetadata.hasOffsets). */
export function hasOffsets(group: Group): boolean {
  return (
    group.offsets.size > 0 ||
    group.pendingOffsetCommits.size > 0 ||
    group.pendingTransactionalOffsets.size > 0
  )
}

/**
 * A commit of the partition on its way, plain or transactional (Kafka's
 * hasPendingOffsetCommitsForTopicPartition): OffsetFetch with require_stable answers
 * UNSTABLE_OFFSET_COMMIT meanwhile, so a consumer does not start from an offset about to move.
 */
export function hasPendingCommit(group: Group, topic: string, partition: number): boolean {
  const key = topicPartitionKey(topic, partition)
  if (group.pendingOffsetCommits.has(key)) return true
  for (const pending of group.pendingTransactionalOffsets.values()) if (pending.has(key)) return true
  return false
}

function dropPendingTransactional(group: Group, key: string): void {
  for (const [producerId, pending] of group.pendingTransactionalOffsets) {
    pending.delete(key)
    if (pending.size === 0) group.pendingTransactionalOffsets.delete(producerId)
  }
}

function addPending(group: Group, key: string, delta: number): void {
  const count = (group.pendingOffsetCommits.get(key) ?? 0) + delta
  if (count > 0) group.pendingOffsetCommits.set(key, count)
  else group.pendingOffsetCommits.delete(key)
}

// ---- TxnOffsetCommit ----------------------------------------------------------------------

export interface TxnCommitRequest {
  readonly producerId: ProducerId
  readonly producerEpoch: number
  /** KIP-447 group metadata (TxnOffsetCommit v3+); '' / -1 / null from older clients. */
  readonly memberId: string
  readonly groupInstanceId: string | null
  readonly generationId: number
  readonly partitions: CommitRequest['partitions']
}

/**
 * Kafka's ClassicGroup.validateOffsetCommit with isTransactional: a request carrying group
 * metadata (KIP-447) must come from a current member of the current generation, which is
 * what fences a zombie producer whose consumer was kicked out of the group; one without it
 * (TxnOffsetCommit v0-2, as kafkajs sends) is accepted whatever the group's state.
 */
export function validateTxnCommit(group: Group, req: TxnCommitRequest): number {
  if (group.state === 'Dead') return ErrorCode.COORDINATOR_NOT_AVAILABLE
  if (group.streams) {
    if (req.generationId < 0 && req.memberId === '') return ErrorCode.NONE
    return validateStreamsOffsetRequest(group.streams, req.memberId, req.generationId, 'commit')
  }
  if (group.consumer !== null) {
    if (req.generationId < 0 && req.memberId === '') return ErrorCode.NONE
    return validateConsumerOffsetRequest(group.consumer, req.memberId, req.generationId, 'commit')
  }
  if (req.generationId < 0 && group.state === 'Empty') return ErrorCode.NONE
  if (req.generationId < 0 && req.memberId === '' && req.groupInstanceId === null) return ErrorCode.NONE
  const instance = req.groupInstanceId
  if (
    instance !== null &&
    group.staticMembers.has(instance) &&
    group.staticMembers.get(instance) !== req.memberId
  )
    return ErrorCode.FENCED_INSTANCE_ID
  if (!group.members.has(req.memberId)) return ErrorCode.UNKNOWN_MEMBER_ID
  if (req.generationId !== group.generationId) return ErrorCode.ILLEGAL_GENERATION
  return ErrorCode.NONE
}

/**
 * TxnOffsetCommit: the offsets are written as a transactional batch of the request's
 * producer and held pending per producer id; they become visible only when the COMMIT
 * marker of that producer's transaction reaches this partition (completeTransaction), and
 * are dropped on ABORT. The reply waits for the batch to be committed (acks=all).
 */
export function commitTxnOffsets(
  group: Group,
  req: TxnCommitRequest,
  waiter: number,
  nowMs: number,
  config: CoordinatorConfig,
  partitionExists: (topic: string, partition: number) => boolean,
): Effects {
  const codes = new Map<string, number>()
  const groupCode = validateTxnCommit(group, req)
  const accepted: PendingTransactionalOffset[] = []
  for (const p of req.partitions) {
    const key = topicPartitionKey(p.topic, p.partition)
    const metadata = p.metadata ?? ''
    // As Kafka's KafkaApis, unknown partitions are answered before the group is consulted.
    if (!partitionExists(p.topic, p.partition)) codes.set(key, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    else if (groupCode !== ErrorCode.NONE) codes.set(key, groupCode)
    else if (Buffer.byteLength(metadata) > config.offsetMetadataMaxBytes)
      codes.set(key, ErrorCode.OFFSET_METADATA_TOO_LARGE)
    else {
      const value = {
        offset: p.offset,
        leaderEpoch: p.leaderEpoch,
        metadata,
        commitTimestampMs: nowMs,
        expireTimestampMs: null,
      }
      accepted.push({ topic: p.topic, partition: p.partition, value })
    }
  }
  if (accepted.length === 0) return reply(waiter, { errorCode: ErrorCode.NONE, partitions: codes })
  let pending = group.pendingTransactionalOffsets.get(req.producerId)
  if (!pending) {
    pending = new Map()
    group.pendingTransactionalOffsets.set(req.producerId, pending)
  }
  for (const a of accepted) pending.set(topicPartitionKey(a.topic, a.partition), a)
  const records = accepted.map((a) => ({
    key: offsetCommitKey(group.groupId, a.topic, a.partition),
    value: encodeOffsetCommitValue(a.value),
  }))
  const afterAppend = (code: number, _nowMs: number, baseOffset: Offset): Effects => {
    const partitions = new Map(codes)
    const current = group.pendingTransactionalOffsets.get(req.producerId)
    for (const a of accepted) {
      const key = topicPartitionKey(a.topic, a.partition)
      partitions.set(key, offsetAppendError(code))
      // A later TxnOffsetCommit of the same partition replaced this one: it decides.
      if (current?.get(key) !== a) continue
      if (code === ErrorCode.NONE) current.set(key, { ...a, value: { ...a.value, recordOffset: baseOffset } })
      else current.delete(key)
    }
    if (current?.size === 0) group.pendingTransactionalOffsets.delete(req.producerId)
    return reply(waiter, { errorCode: ErrorCode.NONE, partitions } satisfies PartitionCodesResult)
  }
  return {
    records,
    replies: [],
    transactional: { producerId: req.producerId, producerEpoch: req.producerEpoch },
    afterAppend,
  }
}

/**
 * The producer's transaction ended in this group's partition (its marker is written):
 * COMMIT makes its appended offsets visible, unless a plain commit written later already
 * replaced one; ABORT drops them. Returns whether the group held any.
 */
export function completeTransaction(group: Group, producerId: ProducerId, isCommit: boolean): boolean {
  const pending = group.pendingTransactionalOffsets.get(producerId)
  if (!pending) return false
  group.pendingTransactionalOffsets.delete(producerId)
  if (!isCommit) return true
  for (const p of pending.values()) {
    // Not appended yet: its TxnOffsetCommit was never acknowledged, so EndTxn cannot follow it.
    if (p.value.recordOffset === undefined) continue
    setOffsetIfNewer(group, p.topic, p.partition, p.value)
  }
  return true
}

// ---- DeleteGroups and OffsetDelete --------------------------------------------------------

/** DeleteGroups: only an Empty group; its offsets and metadata get tombstones. */
export function deleteGroup(group: Group, waiter: number): Effects {
  if (group.state === 'Dead') return reply(waiter, { errorCode: ErrorCode.GROUP_ID_NOT_FOUND })
  if (group.state !== 'Empty') return reply(waiter, { errorCode: ErrorCode.NON_EMPTY_GROUP })
  const records: CoordinatorRecord[] = []
  for (const [topic, partitions] of group.offsets)
    for (const partition of partitions.keys())
      records.push({ key: offsetCommitKey(group.groupId, topic, partition), value: null })
  if (group.consumer !== null) records.push(...consumerGroupTombstones(group.groupId))
  else if (group.streams) records.push(...streamsGroupTombstones(group.groupId))
  else records.push({ key: groupMetadataKey(group.groupId), value: null })
  group.state = 'Dead'
  group.offsets.clear()
  group.pendingTransactionalOffsets.clear()
  return { records, replies: [], afterAppend: (code) => reply(waiter, { errorCode: code }) }
}

/** OffsetDelete: partitions of topics the (consumer) group still subscribes to are refused. */
export function deleteOffsets(
  group: Group,
  partitions: readonly { topic: string; partition: number }[],
  waiter: number,
): Effects {
  if (group.state === 'Dead')
    return reply(waiter, { errorCode: ErrorCode.GROUP_ID_NOT_FOUND, partitions: new Map() })
  const nonEmpty = group.state !== 'Empty'
  if (nonEmpty && group.protocolType !== 'consumer')
    return reply(waiter, { errorCode: ErrorCode.NON_EMPTY_GROUP, partitions: new Map() })
  const consumer = group.consumer
  const classicSubscribed = nonEmpty && consumer === null ? subscribedTopics(group) : new Set<string>()
  const subscribed = {
    has: (topic: string) =>
      consumer !== null ? consumerGroupSubscribes(consumer, topic) : classicSubscribed.has(topic),
  }
  const codes = new Map<string, number>()
  const records: CoordinatorRecord[] = []
  for (const { topic, partition } of partitions) {
    const key = topicPartitionKey(topic, partition)
    if (subscribed.has(topic)) {
      codes.set(key, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
      continue
    }
    codes.set(key, ErrorCode.NONE)
    dropPendingTransactional(group, key)
    if (group.offsets.get(topic)?.has(partition) !== true) continue
    deleteOffset(group, topic, partition)
    records.push({ key: offsetCommitKey(group.groupId, topic, partition), value: null })
  }
  const result = (code: number) => ({ errorCode: code, partitions: codes })
  if (records.length === 0) return reply(waiter, result(ErrorCode.NONE))
  return { records, replies: [], afterAppend: (code) => reply(waiter, result(code)) }
}

/** Topics in the members' ConsumerProtocolSubscription for the selected protocol. */
export function subscribedTopics(group: Group): Set<string> {
  const topics = new Set<string>()
  for (const member of group.members.values())
    for (const topic of memberTopics(group, member) ?? []) topics.add(topic)
  return topics
}

/** The member's subscribed topics; null when its metadata is not a consumer subscription we can read. */
function memberTopics(group: Group, member: Member): string[] | null {
  const metadata = member.protocols.find((p) => p.name === group.protocolName)?.metadata
  if (!metadata || metadata.length < 2) return null
  try {
    const reader = new Reader(metadata)
    const version = Math.min(reader.readInt16(), 3)
    return decodeConsumerProtocolSubscription(reader, version).topics
  } catch {
    // A custom protocol: it subscribes to nothing we know.
    return null
  }
}

// ---- expiry -------------------------------------------------------------------------------

/**
 * offsets.retention.minutes with Kafka's rules (GroupMetadata.removeExpiredOffsets, KIP-211):
 *  - a group with a protocol type that is Empty: every offset expires once the retention has
 *    passed since the group became Empty (its current state timestamp);
 *  - a Stable consumer group whose members' subscriptions are all readable: offsets of
 *    topics no member subscribes to expire by their commit time;
 *  - a standalone group (commits only, never a member, no protocol type): each offset
 *    expires by its commit time;
 *  - anything else (a rebalance in progress, a non-consumer protocol with members): none.
 * A commit that carried its own retention (OffsetCommit v2-4, value version 1) expires at its
 * expire timestamp instead, under the same group-state rules. Partitions with a commit still
 * being appended never expire. Each expired offset gets a tombstone, so a coordinator that
 * loads the partition later does not bring it back. An Empty group left with no offsets goes
 * Dead; it gets a tombstone too unless it never had a generation (offset storage only), as
 * Kafka's cleanupGroupMetadata does.
 */
export function expireOffsets(group: Group, nowMs: number, config: CoordinatorConfig): CoordinatorRecord[] {
  const records: CoordinatorRecord[] = []
  if (group.state === 'Dead') return records
  for (const { topic, partition } of expiredOffsets(group, nowMs, config)) {
    deleteOffset(group, topic, partition)
    records.push({ key: offsetCommitKey(group.groupId, topic, partition), value: null })
  }
  if (group.state === 'Empty' && !hasOffsets(group)) {
    group.state = 'Dead'
    if (group.consumer !== null) records.push(...consumerGroupTombstones(group.groupId))
    else if (group.streams) records.push(...streamsGroupTombstones(group.groupId))
    else if (group.generationId > 0) records.push({ key: groupMetadataKey(group.groupId), value: null })
  }
  return records
}

/** The offsets `expireOffsets` would remove now. */
export function expiredOffsets(
  group: Group,
  nowMs: number,
  config: CoordinatorConfig,
): { topic: string; partition: number }[] {
  let base: (committed: CommittedOffset) => number
  let keep = new Set<string>()
  const consumer = group.consumer
  if (group.protocolType !== null && group.state === 'Empty') {
    base = () => group.currentStateTimestampMs
  } else if (consumer !== null) {
    // A KIP-848 group with members: offsets of topics nobody subscribes to expire.
    for (const topic of group.offsets.keys()) if (consumerGroupSubscribes(consumer, topic)) keep.add(topic)
    base = (committed) => committed.commitTimestampMs
  } else if (group.protocolType === 'consumer' && group.state === 'Stable') {
    const subscribed = knownSubscribedTopics(group)
    if (subscribed === null) return []
    keep = subscribed
    base = (committed) => committed.commitTimestampMs
  } else if (group.protocolType === null) {
    base = (committed) => committed.commitTimestampMs
  } else {
    return []
  }
  const expired: { topic: string; partition: number }[] = []
  for (const [topic, partitions] of group.offsets) {
    if (keep.has(topic)) continue
    for (const [partition, committed] of partitions) {
      if (group.pendingOffsetCommits.has(topicPartitionKey(topic, partition))) continue
      const due =
        committed.expireTimestampMs !== null
          ? nowMs >= committed.expireTimestampMs
          : nowMs - base(committed) >= config.offsetsRetentionMs
      if (due) expired.push({ topic, partition })
    }
  }
  return expired
}

/**
 * Topics the members subscribe to, or null when any member's subscription cannot be read
 * (then nothing is known to be unsubscribed, as Kafka's subscribedTopics = None).
 */
function knownSubscribedTopics(group: Group): Set<string> | null {
  const topics = new Set<string>()
  for (const member of group.members.values()) {
    const memberSubscription = memberTopics(group, member)
    if (memberSubscription === null) return null
    for (const topic of memberSubscription) topics.add(topic)
  }
  return topics
}

// ---- loading ------------------------------------------------------------------------------

/**
 * Applies one __consumer_offsets record to the groups being loaded. Group metadata makes
 * the group Stable with its members (or Empty), their sessions starting now: members
 * alive keep heartbeating to the new coordinator, dead ones expire.
 */
export function replayRecord(
  groups: Map<string, Group>,
  record: CoordinatorRecord,
  nowMs: number,
  batchOffset?: Offset,
  consumerSessionTimeoutMs = DEFAULT_CONSUMER_GROUP_CONFIG.sessionTimeoutMs,
  shareGroups: Map<string, ShareGroup> = new Map(),
): void {
  const key = decodeKey(record.key)
  if (!key) {
    const consumerKey = decodeConsumerKey(record.key)
    if (consumerKey) replayConsumerRecord(groups, consumerKey, record.value, nowMs, consumerSessionTimeoutMs)
    const shareKey = consumerKey ? undefined : decodeShareKey(record.key)
    if (shareKey) replayShareRecord(shareGroups, shareKey, record.value, nowMs)
    const streamsKey = consumerKey || shareKey ? undefined : decodeStreamsKey(record.key)
    if (streamsKey) replayStreamsRecord(groups, streamsKey, record.value, nowMs)
    return
  }
  let group = groups.get(key.group)
  if (key.kind === 'offset') {
    if (record.value === null) {
      if (group) deleteOffset(group, key.topic, key.partition)
      return
    }
    if (!group) {
      group = newGroup(key.group, nowMs)
      groups.set(key.group, group)
    }
    setOffset(group, key.topic, key.partition, {
      ...decodeOffsetCommitValue(record.value),
      recordOffset: batchOffset,
    })
    return
  }
  if (record.value === null) {
    groups.delete(key.group)
    return
  }
  const value = decodeGroupMetadataValue(record.value)
  const offsets = group?.offsets
  group = newGroup(key.group, value.currentStateTimestampMs >= 0 ? value.currentStateTimestampMs : nowMs)
  if (offsets) for (const [topic, partitions] of offsets) group.offsets.set(topic, partitions)
  group.generationId = value.generation
  group.protocolType = value.protocolType === '' ? null : value.protocolType
  group.protocolName = value.protocol
  group.leaderId = value.leader
  group.state = value.members.length > 0 ? 'Stable' : 'Empty'
  for (const m of value.members) {
    group.members.set(m.memberId, {
      memberId: m.memberId,
      groupInstanceId: m.groupInstanceId,
      clientId: m.clientId,
      clientHost: m.clientHost,
      sessionTimeoutMs: m.sessionTimeoutMs,
      rebalanceTimeoutMs: m.rebalanceTimeoutMs,
      protocolType: value.protocolType,
      protocols: value.protocol !== null ? [{ name: value.protocol, metadata: m.subscription }] : [],
      assignment: m.assignment,
      joinWaiter: null,
      syncWaiter: null,
      heartbeatDeadlineMs: nowMs + m.sessionTimeoutMs,
    })
    if (m.groupInstanceId !== null) group.staticMembers.set(m.groupInstanceId, m.memberId)
  }
  groups.set(key.group, group)
}

/** What loading needs of a __consumer_offsets batch. */
export interface LoadedBatch {
  readonly baseOffset: Offset
  readonly isTransactional: boolean
  readonly producerId: ProducerId
  readonly records: readonly { key: Buffer | null; value: Buffer | null }[]
}

/**
 * Replays a __consumer_offsets partition batch by batch, as Kafka's
 * loadGroupsAndOffsets: plain records apply at once (replayRecord); a transactional
 * batch's offsets are held per producer until that producer's marker, COMMIT applying
 * them and ABORT dropping them; those still open at the end are attached to their groups
 * as pending, for the marker still to come.
 */
export class OffsetsLoader {
  private readonly open = new Map<ProducerId, Map<string, { groupId: string } & PendingTransactionalOffset>>()

  constructor(
    private readonly groups: Map<string, Group>,
    private readonly nowMs: number,
    private readonly consumerSessionTimeoutMs = DEFAULT_CONSUMER_GROUP_CONFIG.sessionTimeoutMs,
    /** The shard's share groups, kept apart from `groups` (share-group-coordinator.ts). */
    private readonly shareGroups: Map<string, ShareGroup> = new Map(),
  ) {}

  /** A data batch (the runtime hands control batches to endTransaction). */
  replayBatch(batch: LoadedBatch): void {
    for (const record of batch.records) {
      if (record.key === null) continue
      if (!batch.isTransactional) {
        replayRecord(
          this.groups,
          { key: record.key, value: record.value },
          this.nowMs,
          batch.baseOffset,
          this.consumerSessionTimeoutMs,
          this.shareGroups,
        )
        continue
      }
      const key = decodeKey(record.key)
      if (key?.kind !== 'offset') continue
      let offsets = this.open.get(batch.producerId)
      if (!offsets) {
        offsets = new Map()
        this.open.set(batch.producerId, offsets)
      }
      const id = `${key.group}\u0000${topicPartitionKey(key.topic, key.partition)}`
      if (record.value === null) {
        offsets.delete(id)
        continue
      }
      const value = { ...decodeOffsetCommitValue(record.value), recordOffset: batch.baseOffset }
      offsets.set(id, { groupId: key.group, topic: key.topic, partition: key.partition, value })
    }
  }

  /** The producer's COMMIT or ABORT marker, read from the log. */
  endTransaction(producerId: ProducerId, isCommit: boolean): void {
    const offsets = this.open.get(producerId)
    this.open.delete(producerId)
    if (!offsets || !isCommit) return
    for (const p of offsets.values()) setOffsetIfNewer(this.group(p.groupId), p.topic, p.partition, p.value)
  }

  /** Attaches the transactions still open to their groups. */
  finish(): void {
    for (const [producerId, offsets] of this.open)
      for (const p of offsets.values()) {
        const group = this.group(p.groupId)
        let pending = group.pendingTransactionalOffsets.get(producerId)
        if (!pending) {
          pending = new Map()
          group.pendingTransactionalOffsets.set(producerId, pending)
        }
        pending.set(topicPartitionKey(p.topic, p.partition), {
          topic: p.topic,
          partition: p.partition,
          value: p.value,
        })
      }
    this.open.clear()
  }

  private group(groupId: string): Group {
    let group = this.groups.get(groupId)
    if (!group) {
      group = newGroup(groupId, this.nowMs)
      this.groups.set(groupId, group)
    }
    return group
  }
}
