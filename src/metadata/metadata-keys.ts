/**
 * The metadata store's keys and the ClusterImage built from them: parsing values into
 * an image, and the difference between two images as store operations guarded by the
 * versions of the keys they read (cluster-metadata.ts commits them).
 *
 * Key layout (JSON values):
 *   cluster/id                   {clusterId}
 *   brokers/<id>                 {nodeId, host, port, rack, incarnationId}, bound to the broker's
 *                                lease; its modRevision is the broker epoch
 *   controller                   {nodeId}, bound to the controller's lease
 *   topics/<name>                {topicId, configs, replicas: number[][]}
 *   partitions/<name>/<index>    {leader, leaderEpoch, isr, elr?, lastKnownElr?}; partitionEpoch = key version
 *   configs/brokers/<id|''>      dynamic broker configs ('' is the cluster-wide default)
 *   features                     {levels: {<name>: level}}: finalized feature levels; epoch = modRevision
 *   served/<id>/<topicId>/<range> {"<partition>": leaderEpoch}: what broker <id> serves as leader
 *                                of partitions range * 100 to range * 100 + 99 of the topic
 *                                (SERVED_RANGE_PARTITIONS), written by that broker
 *                                (leadership-record.ts) for the ranges that changed, deleted
 *                                when empty. `served/<id>` alone, the one key of the record
 *                                before it was split, is not read, and its broker deletes it
 *   staging/<name>               {topicId, writer}: a writer is staging partitions of topic <name>
 *                                that its record does not name yet (see cluster-metadata.ts)
 */

import { assert } from '../common/assert.js'
import { isBrokerId, toBrokerId, toPartitionEpoch } from '../common/types.js'
import {
  type BrokerId,
  type BrokerRegistration,
  type ClusterImage,
  type FinalizedFeatures,
  type LogEnd,
  NO_LEADER,
  type PartitionState,
  type ServedRange,
  type ServedRecord,
  type TopicImage,
} from './cluster-image.js'
import { diffConfigMaps, diffFeatures, FEATURES_KEY, finalizedFeaturesFrom } from './image-settings.js'
import type { KeyValue, StoreOp, VersionCompare } from './store/metadata-store.js'
import type { TxnPart } from './store/txn-batches.js'

export const KEYS = {
  clusterId: 'cluster/id',
  controller: 'controller',
  brokersPrefix: 'brokers/',
  broker: (id: BrokerId) => `brokers/${id}`,
  topicsPrefix: 'topics/',
  topic: (name: string) => `topics/${name}`,
  partitionsPrefix: 'partitions/',
  partitionsOf: (name: string) => `partitions/${name}/`,
  partition: (name: string, index: number) => `partitions/${name}/${index}`,
  brokerConfigsPrefix: 'configs/brokers/',
  brokerConfigs: (key: string) => `configs/brokers/${key}`,
  clientMetricsConfigsPrefix: 'configs/client-metrics/',
  clientMetricsConfigs: (name: string) => `configs/client-metrics/${name}`,
  groupConfigsPrefix: 'configs/groups/',
  groupConfigs: (groupId: string) => `configs/groups/${groupId}`,
  servedPrefix: 'served/',
  servedOf: (id: BrokerId) => `served/${id}/`,
  servedRange: (id: BrokerId, topicId: string, rangeIndex: number) => `served/${id}/${topicId}/${rangeIndex}`,
  /** The whole record in one key, as written before the split: deleted, never read. */
  servedWhole: (id: BrokerId) => `served/${id}`,
  stagingPrefix: 'staging/',
  staging: (name: string) => `staging/${name}`,
} as const

export interface TopicValue {
  topicId: string
  configs: Record<string, string>
  replicas: BrokerId[][]
}

interface PartitionValue {
  leader: BrokerId
  leaderEpoch: number
  isr: BrokerId[]
  elr?: BrokerId[]
  lastKnownElr?: BrokerId[]
  recoveryLogEnds?: Record<string, LogEnd>
  addingReplicas?: BrokerId[]
  removingReplicas?: BrokerId[]
}

// ---- image <-> keys ---------------------------------------------------------------------

export interface ParsedValue {
  readonly modRevision: number
  readonly value: unknown
  /** For a served record's range: the Map built from it. */
  derived?: unknown
}

/**
 * JSON.parse of `kv`'s value, or the result of an earlier parse of the same revision: every
 * change rebuilt the image from every key, and with 10,000 partitions (and each broker's
 * record of what it serves, one big value) parsing them all was the metadata's main cost,
 * once per ISR change of each partition, in each broker.
 */
export function parseValue(cache: Map<string, ParsedValue>, kv: KeyValue): ParsedValue {
  const cached = cache.get(kv.key)
  if (cached !== undefined && cached.modRevision === kv.modRevision) return cached
  const parsed: ParsedValue = { modRevision: kv.modRevision, value: JSON.parse(kv.value) }
  cache.set(kv.key, parsed)
  return parsed
}

export function buildImage(
  kvs: ReadonlyMap<string, KeyValue>,
  cache: Map<string, ParsedValue>,
): ClusterImage {
  // Keys deleted since the last build leave the cache.
  for (const key of cache.keys()) if (!kvs.has(key)) cache.delete(key)
  const topicValues = new Map<string, ParsedValue>()
  for (const [key, kv] of kvs)
    if (key.startsWith(KEYS.topicsPrefix))
      topicValues.set(key.slice(KEYS.topicsPrefix.length), parseValue(cache, kv))
  const topics = new Map<string, TopicImage>()
  for (const [name, parsedTopic] of [...topicValues].sort(([a], [b]) => (a < b ? -1 : 1)))
    topics.set(name, buildTopic(name, parsedTopic, kvs, cache))
  return assembleImage(buildClusterPart(kvs.values(), cache), topics)
}

/** Everything of the image but its topics: brokers, controller, configs, features, served epochs. */
export interface ClusterPart {
  readonly clusterId: string
  readonly controllerId: BrokerId
  readonly brokers: ReadonlyMap<BrokerId, BrokerRegistration>
  readonly brokerConfigs: ReadonlyMap<string, Readonly<Record<string, string>>>
  readonly clientMetricsConfigs: ReadonlyMap<string, Readonly<Record<string, string>>>
  readonly groupConfigs: ReadonlyMap<string, Readonly<Record<string, string>>>
  readonly finalizedFeatures: FinalizedFeatures | undefined
  readonly servedLeaderEpochs: ReadonlyMap<BrokerId, ServedRecord>
}

export function assembleImage(part: ClusterPart, topics: ReadonlyMap<string, TopicImage>): ClusterImage {
  const { clusterId, controllerId, brokers, brokerConfigs, clientMetricsConfigs, groupConfigs } = part
  const settings = {
    brokerConfigs,
    clientMetricsConfigs,
    groupConfigs,
    ...(part.finalizedFeatures && { finalizedFeatures: part.finalizedFeatures }),
  }
  return {
    clusterId,
    controllerId,
    brokers,
    topics,
    ...settings,
    servedLeaderEpochs: part.servedLeaderEpochs,
  }
}

/**
 * Whether `key` is read into the ClusterPart but for the served records (not a topic's, a
 * partition's, a staging claim or a served range, which ImageBuilder patches by itself).
 */
export function isClusterPartKey(key: string): boolean {
  return (
    key === KEYS.clusterId ||
    key === KEYS.controller ||
    key === FEATURES_KEY ||
    key.startsWith(KEYS.brokersPrefix) ||
    key.startsWith(KEYS.brokerConfigsPrefix) ||
    key.startsWith(KEYS.clientMetricsConfigsPrefix) ||
    key.startsWith(KEYS.groupConfigsPrefix)
  )
}

/** Where a served range's key points; null for the whole-record key of before the split. */
export function parseServedKey(
  key: string,
): { nodeId: BrokerId; topicId: string; rangeIndex: number } | null {
  const rest = key.slice(KEYS.servedPrefix.length).split('/')
  const nodeId = Number(rest[0])
  assert(isBrokerId(nodeId), () => `${key}: not a broker id`)
  if (rest.length === 1) return null
  assert(rest.length === 3 && rest[1] !== '', () => `${key}: not a served range`)
  const rangeIndex = rest[2] === '' ? Number.NaN : Number(rest[2])
  assert(Number.isSafeInteger(rangeIndex) && rangeIndex >= 0, () => `${key}: not a range index`)
  return { nodeId, topicId: rest[1], rangeIndex }
}

export function encodeServedRange(range: ServedRange): string {
  return JSON.stringify(Object.fromEntries(range))
}

/** The range a served key holds, parsed once per revision. */
export function servedRangeValue(cache: Map<string, ParsedValue>, kv: KeyValue): ServedRange {
  const parsed = parseValue(cache, kv)
  parsed.derived ??= new Map(
    Object.entries(parsed.value as Record<string, number>).map(([partition, epoch]) => [
      Number(partition),
      epoch,
    ]),
  )
  return parsed.derived as ServedRange
}

/**
 * `before` with the served ranges of `changes` set (undefined: deleted). Only the records and
 * topics they touch are copied: a range written per change, not every partition read again.
 */
export function patchServed(
  before: ReadonlyMap<BrokerId, ServedRecord>,
  changes: Iterable<readonly [key: string, range: ServedRange | undefined]>,
): ReadonlyMap<BrokerId, ServedRecord> {
  let records: Map<BrokerId, ServedRecord> | null = null
  const copied = new Set<unknown>()
  for (const [key, range] of changes) {
    const where = parseServedKey(key)
    if (where === null) continue
    records ??= new Map(before)
    let record = records.get(where.nodeId) as Map<string, ReadonlyMap<number, ServedRange>> | undefined
    if (record === undefined || !copied.has(record)) {
      record = new Map(record)
      copied.add(record)
      records.set(where.nodeId, record)
    }
    let ranges = record.get(where.topicId) as Map<number, ServedRange> | undefined
    if (ranges === undefined || !copied.has(ranges)) {
      ranges = new Map(ranges)
      copied.add(ranges)
      record.set(where.topicId, ranges)
    }
    if (range === undefined) ranges.delete(where.rangeIndex)
    else ranges.set(where.rangeIndex, range)
    // A full build holds no empty maps; neither may a patched image (differenceFromFullBuild).
    if (ranges.size === 0) record.delete(where.topicId)
    if (record.size === 0) records.delete(where.nodeId)
  }
  return records ?? before
}

/** The ClusterPart of the keys `kvs` (any others are skipped), read in their order. */
export function buildClusterPart(kvs: Iterable<KeyValue>, cache: Map<string, ParsedValue>): ClusterPart {
  const brokers = new Map<BrokerId, BrokerRegistration>()
  const brokerConfigs = new Map<string, Readonly<Record<string, string>>>()
  const clientMetricsConfigs = new Map<string, Readonly<Record<string, string>>>()
  const groupConfigs = new Map<string, Readonly<Record<string, string>>>()
  const servedLeaderEpochs = new Map<BrokerId, Map<string, Map<number, ServedRange>>>()
  let clusterId = ''
  let controller: BrokerId = NO_LEADER
  let finalizedFeatures: FinalizedFeatures | undefined
  for (const kv of kvs) {
    const key = kv.key
    if (key === KEYS.clusterId) clusterId = (JSON.parse(kv.value) as { clusterId: string }).clusterId
    else if (key === KEYS.controller)
      controller = toBrokerId((JSON.parse(kv.value) as { nodeId: number }).nodeId)
    else if (key.startsWith(KEYS.brokersPrefix)) {
      const registration = JSON.parse(kv.value) as BrokerRegistration
      assert(isBrokerId(registration.nodeId), () => `${key}: not a broker id: ${registration.nodeId}`)
      // The registration's own revision is its broker epoch: every registration writes it anew.
      brokers.set(registration.nodeId, { ...registration, brokerEpoch: kv.modRevision })
    } else if (key.startsWith(KEYS.brokerConfigsPrefix)) {
      brokerConfigs.set(key.slice(KEYS.brokerConfigsPrefix.length), JSON.parse(kv.value))
    } else if (key.startsWith(KEYS.clientMetricsConfigsPrefix)) {
      clientMetricsConfigs.set(key.slice(KEYS.clientMetricsConfigsPrefix.length), JSON.parse(kv.value))
    } else if (key.startsWith(KEYS.groupConfigsPrefix)) {
      groupConfigs.set(key.slice(KEYS.groupConfigsPrefix.length), JSON.parse(kv.value))
    } else if (key === FEATURES_KEY) finalizedFeatures = finalizedFeaturesFrom(kv)
    else if (key.startsWith(KEYS.servedPrefix)) {
      const where = parseServedKey(key)
      if (where === null) continue
      let record = servedLeaderEpochs.get(where.nodeId)
      if (record === undefined) servedLeaderEpochs.set(where.nodeId, (record = new Map()))
      let ranges = record.get(where.topicId)
      if (ranges === undefined) record.set(where.topicId, (ranges = new Map()))
      ranges.set(where.rangeIndex, servedRangeValue(cache, kv))
    }
  }
  const controllerId = brokers.has(controller)
    ? controller
    : brokers.size > 0
      ? toBrokerId(Math.min(...brokers.keys()))
      : NO_LEADER
  return {
    clusterId,
    controllerId,
    brokers,
    brokerConfigs,
    clientMetricsConfigs,
    groupConfigs,
    finalizedFeatures,
    servedLeaderEpochs,
  }
}

/**
 * The topic of record `parsedTopic` with every partition its record names. Unchanged
 * partitions and topics keep their objects from the previous build: a change of one
 * partition allocated (and the brokers re-applied) every partition of the cluster.
 */
export function buildTopic(
  name: string,
  parsedTopic: ParsedValue,
  kvs: ReadonlyMap<string, KeyValue>,
  cache: Map<string, ParsedValue>,
): TopicImage {
  const value = parsedTopic.value as TopicValue
  const previous = parsedTopic.derived as TopicImage | undefined
  let same = previous !== undefined
  const partitions = value.replicas.map((replicas, index): PartitionState => {
    const state = partitionState(cache, kvs.get(KEYS.partition(name, index)), replicas, index)
    if (same && previous?.partitions[index] !== state) same = false
    return state
  })
  const topic =
    same && previous !== undefined && previous.partitions.length === partitions.length
      ? previous
      : { name, topicId: value.topicId, partitions, configs: value.configs }
  parsedTopic.derived = topic
  return topic
}

/**
 * `before` (built from `parsedTopic`, whose key did not change since) with the partitions at
 * `indices` read again; `before` itself when none of them changed. Indices past the
 * record's partitions (staged, not published yet) are not read.
 */
export function patchTopic(
  before: TopicImage,
  parsedTopic: ParsedValue,
  indices: ReadonlySet<number>,
  kvs: ReadonlyMap<string, KeyValue>,
  cache: Map<string, ParsedValue>,
): { topic: TopicImage; changed: number[] } {
  const value = parsedTopic.value as TopicValue
  assert(
    value.replicas.length === before.partitions.length,
    () => `topic ${before.name} patched past its record`,
  )
  let partitions: PartitionState[] | null = null
  const changed: number[] = []
  for (const index of indices) {
    if (index >= value.replicas.length) continue
    const key = KEYS.partition(before.name, index)
    const state = partitionState(cache, kvs.get(key), value.replicas[index], index)
    if (state === before.partitions[index]) continue
    partitions ??= [...before.partitions]
    partitions[index] = state
    changed.push(index)
  }
  if (partitions === null) return { topic: before, changed }
  const topic = { name: before.name, topicId: before.topicId, partitions, configs: before.configs }
  parsedTopic.derived = topic
  return { topic, changed }
}

/**
 * A partition's state from its key (absent: not written yet, offline), the object of the
 * previous build while the key's revision and the topic's replica list are the same.
 */
function partitionState(
  cache: Map<string, ParsedValue>,
  kv: KeyValue | undefined,
  replicas: readonly BrokerId[],
  index: number,
): PartitionState {
  if (!kv)
    return {
      partition: index,
      replicas,
      isr: [],
      leader: NO_LEADER,
      leaderEpoch: 0,
      partitionEpoch: toPartitionEpoch(0),
    }
  const parsed = parseValue(cache, kv)
  const previous = parsed.derived as PartitionState | undefined
  if (previous !== undefined && previous.replicas === replicas) return previous
  const state: PartitionState = {
    partition: index,
    replicas,
    ...(parsed.value as PartitionValue),
    partitionEpoch: toPartitionEpoch(kv.version),
  }
  parsed.derived = state
  return state
}

function topicValue(topic: TopicImage): string {
  const value: TopicValue = {
    topicId: topic.topicId,
    configs: { ...topic.configs },
    replicas: topic.partitions.map((p) => [...p.replicas]),
  }
  return JSON.stringify(value)
}

function partitionValue(state: PartitionState): string {
  const value: PartitionValue = { leader: state.leader, leaderEpoch: state.leaderEpoch, isr: [...state.isr] }
  // Written only when non-empty: partitions without an ELR keep the value they always had.
  if (state.elr?.length) value.elr = [...state.elr]
  if (state.lastKnownElr?.length) value.lastKnownElr = [...state.lastKnownElr]
  if (state.recoveryLogEnds && Object.keys(state.recoveryLogEnds).length > 0)
    value.recoveryLogEnds = { ...state.recoveryLogEnds }
  if (state.addingReplicas?.length) value.addingReplicas = [...state.addingReplicas]
  if (state.removingReplicas?.length) value.removingReplicas = [...state.removingReplicas]
  return JSON.stringify(value)
}

/**
 * False when `after` provably encodes to the same topic value as `before` (same id, configs
 * and replica lists by identity), which spares encoding every partition's replicas twice
 * per update of one partition's ISR.
 */
function mayChangeTopicValue(before: TopicImage, after: TopicImage): boolean {
  if (before.topicId !== after.topicId || before.configs !== after.configs) return true
  if (before.partitions.length !== after.partitions.length) return true
  return after.partitions.some((state, index) => state.replicas !== before.partitions[index].replicas)
}

function versionOf(kvs: ReadonlyMap<string, KeyValue>, key: string): number {
  return kvs.get(key)?.version ?? 0
}

/**
 * The store operations turning `base` into `next`, guarded by the versions `base` was built
 * from, cut into parts that each keep the metadata consistent when committed alone.
 */
export interface ImageDiff {
  /**
   * By topic: puts of the partition keys its record does not name yet (a new topic's, or
   * partitions added to a topic), which no reader looks at before the record is written.
   */
  readonly staged: Map<string, TxnPart[]>
  /** The topic ids of the staged topics (the staging claim names it). */
  readonly topicIds: Map<string, string>
  /**
   * Changes readers see, each consistent alone: a topic's record with the partitions whose
   * replicas it changes (the topic's record is the first op), one partition's state, a
   * topic's deletion, one broker config.
   */
  readonly parts: TxnPart[]
}

export function diffParts(
  base: ClusterImage,
  next: ClusterImage,
  kvs: ReadonlyMap<string, KeyValue>,
): ImageDiff {
  const staged = new Map<string, TxnPart[]>()
  const topicIds = new Map<string, string>()
  const parts: TxnPart[] = []
  const guard = (key: string): VersionCompare => ({ key, version: versionOf(kvs, key) })
  for (const name of base.topics.keys()) {
    if (next.topics.has(name)) continue
    parts.push({
      compares: [guard(KEYS.topic(name))],
      ops: [
        { type: 'delete', key: KEYS.topic(name) },
        { type: 'deletePrefix', prefix: KEYS.partitionsOf(name) },
      ],
    })
  }
  for (const [name, after] of next.topics) {
    const before = base.topics.get(name)
    // Images are immutable: an object an update kept is unchanged, with no need to encode it
    // (an update of one partition's ISR encoded all 10,000 partitions twice).
    if (before === after) continue
    const sameTopic = before?.topicId === after.topicId
    const record: TxnPart | null =
      !before || (mayChangeTopicValue(before, after) && topicValue(before) !== topicValue(after))
        ? {
            compares: [guard(KEYS.topic(name))],
            ops: [{ type: 'put', key: KEYS.topic(name), value: topicValue(after) }],
          }
        : null
    const withRecord = { compares: [...(record?.compares ?? [])], ops: [...(record?.ops ?? [])] }
    for (const state of after.partitions) {
      const previous = sameTopic ? before?.partitions[state.partition] : undefined
      if (previous === state) continue
      const encoded = partitionValue(state)
      if (previous && partitionValue(previous) === encoded) continue
      const key = KEYS.partition(name, state.partition)
      const part: TxnPart = { compares: [guard(key)], ops: [{ type: 'put', key, value: encoded }] }
      const unnamed = !before || (sameTopic && state.partition >= before.partitions.length)
      if (unnamed) {
        staged.set(name, [...(staged.get(name) ?? []), part])
        topicIds.set(name, after.topicId)
      } else if (record !== null && (!previous || !sameReplicas(previous.replicas, state.replicas))) {
        withRecord.compares.push(...part.compares)
        withRecord.ops.push(...part.ops)
      } else parts.push(part)
    }
    if (record !== null) parts.push(withRecord)
  }
  diffConfigMaps(base.brokerConfigs, next.brokerConfigs, KEYS.brokerConfigs, guard, parts)
  diffConfigMaps(
    base.clientMetricsConfigs,
    next.clientMetricsConfigs,
    KEYS.clientMetricsConfigs,
    guard,
    parts,
  )
  diffConfigMaps(base.groupConfigs, next.groupConfigs, KEYS.groupConfigs, guard, parts)
  diffFeatures(base.finalizedFeatures, next.finalizedFeatures, guard, parts)
  const keys = [...staged.values(), parts].flat().flatMap((part) => part.compares.map((c) => c.key))
  assert(new Set(keys).size === keys.length, 'a key guarded twice in one update')
  return { staged, topicIds, parts }
}

/** The whole diff as one transaction: staged partitions with everything else. */
export function flatten(diff: ImageDiff): { compares: VersionCompare[]; ops: StoreOp[] } {
  const compares: VersionCompare[] = []
  const ops: StoreOp[] = []
  for (const part of [...[...diff.staged.values()].flat(), ...diff.parts]) {
    compares.push(...part.compares)
    ops.push(...part.ops)
  }
  return { compares, ops }
}

/** Store operations turning `base` into `next` in one transaction, guarded by the versions `base` was built from. */
export function diffImages(
  base: ClusterImage,
  next: ClusterImage,
  kvs: ReadonlyMap<string, KeyValue>,
): { compares: VersionCompare[]; ops: StoreOp[] } {
  return flatten(diffParts(base, next, kvs))
}

/** The topic whose record `part` puts (its first op), or null. */
export function publishedTopic(part: TxnPart): string | null {
  const first = part.ops[0]
  if (first?.type !== 'put' || !first.key.startsWith(KEYS.topicsPrefix)) return null
  return first.key.slice(KEYS.topicsPrefix.length)
}

function sameReplicas(a: readonly BrokerId[], b: readonly BrokerId[]): boolean {
  return a === b || (a.length === b.length && a.every((id, index) => id === b[index]))
}
