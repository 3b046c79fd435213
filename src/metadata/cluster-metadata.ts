/**
 * A broker's view of the cluster metadata kept in the metadata store, and the way it
 * changes it. The view mirrors every key of the store (one range read, then a watch from
 * the next revision) and derives an immutable ClusterImage from it after each change.
 *
 * Writes are optimistic: `update(change)` applies a pure function to the current image,
 * turns the difference into store operations guarded by the versions of the keys it read
 * (compare-and-set), and retries on a conflict with fresh state. It resolves once this
 * view has applied the write, so callers see their own change.
 *
 * Key layout (JSON values):
 *   cluster/id                   {clusterId}
 *   brokers/<id>                 {nodeId, host, port, rack, incarnationId}, bound to the broker's
 *                                lease; its modRevision is the broker epoch
 *   controller                   {nodeId}, bound to the controller's lease
 *   topics/<name>                {topicId, configs, replicas: number[][]}
 *   partitions/<name>/<index>    {leader, leaderEpoch, isr, elr?, lastKnownElr?}; partitionEpoch = key version
 *   configs/brokers/<id|''>      dynamic broker configs ('' is the cluster-wide default)
 *   served/<id>                  {"<topicId>:<partition>": leaderEpoch}: what broker <id>
 *                                serves as leader, written by that broker (leadership-record.ts)
 */
import { assert } from '../common/assert.js'
import type { Logger } from '../common/logger.js'
import type { Random } from '../common/random.js'
import {
  type BrokerId,
  type BrokerRegistration,
  type ClusterImage,
  type LogEnd,
  NO_LEADER,
  type PartitionState,
  type TopicImage,
} from './cluster-image.js'
import { onBrokerRegistered } from './elections.js'
import { newUuid } from './ids.js'
import { assignReplicas } from './placement.js'
import type {
  KeyValue,
  Lease,
  MetadataStore,
  StoreOp,
  VersionCompare,
  Watch,
  WatchEvent,
} from './store/metadata-store.js'

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
  servedPrefix: 'served/',
  served: (id: BrokerId) => `served/${id}`,
} as const

export interface NewTopic {
  readonly name: string
  readonly partitions: number
  readonly replicationFactor: number
  readonly configs: Readonly<Record<string, string>>
}

export interface RegisterOptions {
  /** The process found its logs without a clean-shutdown marker: it leaves the ELRs (KIP-966). */
  readonly uncleanShutdown?: boolean
  /** Effective min.insync.replicas of a topic (its ELR); absent: 1. */
  readonly minInsyncReplicas?: (image: ClusterImage, topic: string) => number
  /** After an unclean shutdown: what the registering broker's log of a partition still holds. */
  readonly logEnd?: (topic: string, partition: number) => LogEnd | undefined
}

export type ImageListener = (image: ClusterImage, previous: ClusterImage) => void

interface TopicValue {
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

const MAX_UPDATE_ATTEMPTS = 20

export class ClusterMetadata {
  private readonly kvs = new Map<string, KeyValue>()
  private revision = 0
  private current: ClusterImage
  private readonly listeners: ImageListener[] = []
  private revisionWaiters: { revision: number; resolve: () => void }[] = []
  private watch: Watch | null = null
  /** Set after this process first registered its broker. */
  private registeredOnce = false

  private constructor(
    private readonly store: MetadataStore,
    private readonly random: Random,
    private readonly logger: Logger,
  ) {
    this.current = { clusterId: '', controllerId: NO_LEADER, brokers: new Map(), topics: new Map() }
  }

  /** Reads the store, starts following it, and makes sure a cluster id exists. */
  static async open(
    store: MetadataStore,
    options: { clusterId: string | null; random: Random; logger: Logger },
  ) {
    const metadata = new ClusterMetadata(store, options.random, options.logger)
    await metadata.ensureClusterId(options.clusterId)
    await metadata.reload()
    metadata.follow()
    return metadata
  }

  /** Watches every key from the next revision; a watch that ends (compaction) restarts from a fresh read. */
  private follow(): void {
    this.watch = this.store.watch(
      '',
      this.revision + 1,
      (events, revision) => this.onEvents(events, revision),
      (error) => {
        if (this.watch === null || error.code === 'STORE_CLOSED') return
        this.logger.warn({ err: error }, 'metadata watch ended; reloading')
        this.reload().then(
          () => this.follow(),
          (reloadError: unknown) => this.logger.error({ err: reloadError }, 'metadata reload failed'),
        )
      },
    )
  }

  image(): ClusterImage {
    return this.current
  }

  /** Calls `listener` after every new image; the returned function stops it. */
  onChange(listener: ImageListener): () => void {
    this.listeners.push(listener)
    return () => {
      const index = this.listeners.indexOf(listener)
      if (index >= 0) this.listeners.splice(index, 1)
    }
  }

  close(): void {
    this.watch?.cancel()
    this.watch = null
  }

  private async ensureClusterId(wanted: string | null): Promise<void> {
    const existing = await this.store.get(KEYS.clusterId)
    if (existing) {
      const stored = (JSON.parse(existing.value) as { clusterId: string }).clusterId
      if (wanted !== null && wanted !== stored) {
        throw new Error(`cluster.id ${wanted} does not match ${stored} in the metadata store`)
      }
      return
    }
    const value = JSON.stringify({ clusterId: wanted ?? newUuid(this.random) })
    await this.store.txn([{ key: KEYS.clusterId, version: 0 }], [{ type: 'put', key: KEYS.clusterId, value }])
  }

  /** Replaces the mirror with a fresh read (after a conflict, the watch may lag the store). */
  private async reload(): Promise<void> {
    const { kvs, revision } = await this.store.range('')
    if (revision < this.revision) return
    this.kvs.clear()
    for (const kv of kvs) this.kvs.set(kv.key, kv)
    this.publish(revision)
  }

  /** Parsed values by key, reused while a key's modRevision is unchanged (see parseValue). */
  private readonly parsed = new Map<string, ParsedValue>()

  private onEvents(events: readonly WatchEvent[], revision: number): void {
    if (revision <= this.revision) return // already seen through a reload
    for (const { type, kv } of events) {
      if (type === 'put') this.kvs.set(kv.key, kv)
      else this.kvs.delete(kv.key)
    }
    this.publish(revision)
  }

  private publish(revision: number): void {
    const previous = this.current
    this.revision = revision
    this.current = buildImage(this.kvs, this.parsed)
    for (const listener of [...this.listeners]) listener(this.current, previous)
    const ready = this.revisionWaiters.filter((w) => w.revision <= revision)
    this.revisionWaiters = this.revisionWaiters.filter((w) => w.revision > revision)
    for (const waiter of ready) waiter.resolve()
  }

  private waitForRevision(revision: number): Promise<void> {
    if (this.revision >= revision) return Promise.resolve()
    return new Promise((resolve) => this.revisionWaiters.push({ revision, resolve }))
  }

  /**
   * Applies `change` (a pure function; it may run more than once) by compare-and-set and
   * resolves with the image that includes it. The registrations of `guardBrokers` are part
   * of the compare: the change applies only if each is still the one (same broker epoch)
   * `change` saw, as the controller checks broker epochs in AlterPartition.
   */
  async update(
    change: (image: ClusterImage) => ClusterImage,
    guardBrokers: readonly BrokerId[] = [],
  ): Promise<ClusterImage> {
    for (let attempt = 1; attempt <= MAX_UPDATE_ATTEMPTS; attempt++) {
      const base = this.current
      const next = change(base)
      if (next === base) return base
      const { compares, ops } = diffImages(base, next, this.kvs)
      if (ops.length === 0) return base
      for (const id of new Set(guardBrokers)) {
        const kv = this.kvs.get(KEYS.broker(id))
        compares.push({ key: KEYS.broker(id), version: kv?.version ?? 0, modRevision: kv?.modRevision ?? 0 })
      }
      const result = await this.store.txn(compares, ops)
      if (result.succeeded) {
        await this.waitForRevision(result.revision)
        return this.current
      }
      this.logger.debug({ attempt }, 'metadata update conflicted; retrying with fresh state')
      await this.reload()
    }
    throw new Error(`metadata update still conflicting after ${MAX_UPDATE_ATTEMPTS} attempts`)
  }

  /**
   * Registers a broker bound to `lease` and resolves with its broker epoch (the revision
   * that wrote the registration), or null when it kept conflicting with concurrent writes.
   * A registration of the same node id by another incarnation
   * is replaced at once, as KRaft's registration does, instead of waiting for its lease to
   * expire: the new broker epoch fences the previous process (its ISR changes, its ISR
   * membership and its fetches carry the old epoch), which sees the replacement and stops.
   */
  async register(
    registration: BrokerRegistration,
    lease: Lease,
    options: RegisterOptions = {},
  ): Promise<number | null> {
    assert(registration.incarnationId !== undefined, 'a registration names its incarnation')
    const key = KEYS.broker(registration.nodeId)
    const { brokerEpoch: _derived, ...stored } = registration
    const put = { type: 'put', key, value: JSON.stringify(stored), lease: lease.id } as const
    for (let attempt = 1; attempt <= MAX_UPDATE_ATTEMPTS; attempt++) {
      const base = this.current
      const existing = this.kvs.get(key)
      // A process's first registration is a new incarnation (Kafka: a new broker epoch): it
      // gives up what its predecessor held in the same transaction, so no controller sees it
      // registered while it still leads, counts in an ISR or (unclean) stands in an ELR.
      // Registering again after a lost session is the same process with the same log.
      const registered = { ...base, brokers: new Map(base.brokers).set(registration.nodeId, registration) }
      const next = this.registeredOnce
        ? registered
        : leaveLeadershipsAndIsrs(registered, registration.nodeId, options)
      const { compares, ops } = diffImages(base, next, this.kvs)
      compares.push({ key, version: existing?.version ?? 0, modRevision: existing?.modRevision ?? 0 })
      ops.push(put)
      const result = await this.store.txn(compares, ops)
      if (result.succeeded) {
        await this.waitForRevision(result.revision)
        const previous = existing
          ? (JSON.parse(existing.value) as BrokerRegistration).incarnationId
          : undefined
        if (existing && previous !== registration.incarnationId)
          this.logger.info(
            {
              nodeId: registration.nodeId,
              previousIncarnationId: previous,
              incarnationId: registration.incarnationId,
            },
            'replaced the registration of a previous incarnation of this broker',
          )
        this.registeredOnce = true
        return result.revision
      }
      this.logger.debug({ attempt }, 'registration conflicted; retrying with fresh state')
      await this.reload()
    }
    return null
  }

  /**
   * Records what `nodeId` serves as leader (see ClusterImage.servedLeaderEpochs). Only that
   * broker writes its key, so a plain put: no compare-and-set needed.
   */
  async recordServed(nodeId: BrokerId, leaderEpochs: ReadonlyMap<string, number>): Promise<void> {
    const value = JSON.stringify(Object.fromEntries(leaderEpochs))
    await this.store.txn([], [{ type: 'put', key: KEYS.served(nodeId), value }])
  }

  /** A new topic placed over the live brokers (Kafka's assignment rules). */
  createTopicImage(spec: NewTopic): TopicImage {
    const brokers = [...this.current.brokers.values()]
    const assignment =
      spec.partitions === 0
        ? []
        : assignReplicas(brokers, spec.partitions, spec.replicationFactor, () => this.random.next())
    return {
      name: spec.name,
      topicId: newUuid(this.random),
      partitions: assignment.map((replicas, partition) => initialState(partition, replicas)),
      configs: { ...spec.configs },
    }
  }

  /** A partition added to an existing topic, placed like a new one. */
  newPartition(partition: number, replicationFactor: number): PartitionState {
    const brokers = [...this.current.brokers.values()]
    const [replicas] = assignReplicas(brokers, 1, replicationFactor, () => this.random.next(), partition)
    return initialState(partition, replicas)
  }
}

/** A new partition on the given replicas, led by the first, every replica in the ISR. */
export function initialState(partition: number, replicas: readonly BrokerId[]): PartitionState {
  return {
    partition,
    replicas: [...replicas],
    isr: [...replicas],
    leader: replicas[0],
    leaderEpoch: 0,
    partitionEpoch: 0,
  }
}

// ---- image <-> keys ---------------------------------------------------------------------

interface ParsedValue {
  readonly modRevision: number
  readonly value: unknown
  /** For a served record: the Map built from it. */
  derived?: unknown
}

/**
 * JSON.parse of `kv`'s value, or the result of an earlier parse of the same revision: every
 * change rebuilt the image from every key, and with 10,000 partitions (and each broker's
 * record of what it serves, one big value) parsing them all was the metadata's main cost,
 * once per ISR change of each partition, in each broker.
 */
function parseValue(cache: Map<string, ParsedValue>, kv: KeyValue): ParsedValue {
  const cached = cache.get(kv.key)
  if (cached !== undefined && cached.modRevision === kv.modRevision) return cached
  const parsed: ParsedValue = { modRevision: kv.modRevision, value: JSON.parse(kv.value) }
  cache.set(kv.key, parsed)
  return parsed
}

function buildImage(kvs: ReadonlyMap<string, KeyValue>, cache: Map<string, ParsedValue>): ClusterImage {
  // Keys deleted since the last build leave the cache.
  for (const key of cache.keys()) if (!kvs.has(key)) cache.delete(key)
  const brokers = new Map<BrokerId, BrokerRegistration>()
  const topicValues = new Map<string, ParsedValue>()
  const partitionKvs = new Map<string, KeyValue>()
  const brokerConfigs = new Map<string, Readonly<Record<string, string>>>()
  const servedLeaderEpochs = new Map<BrokerId, ReadonlyMap<string, number>>()
  let clusterId = ''
  let controller: BrokerId = NO_LEADER
  for (const [key, kv] of kvs) {
    if (key === KEYS.clusterId) clusterId = (JSON.parse(kv.value) as { clusterId: string }).clusterId
    else if (key === KEYS.controller) controller = (JSON.parse(kv.value) as { nodeId: number }).nodeId
    else if (key.startsWith(KEYS.brokersPrefix)) {
      const registration = JSON.parse(kv.value) as BrokerRegistration
      // The registration's own revision is its broker epoch: every registration writes it anew.
      brokers.set(registration.nodeId, { ...registration, brokerEpoch: kv.modRevision })
    } else if (key.startsWith(KEYS.topicsPrefix))
      topicValues.set(key.slice(KEYS.topicsPrefix.length), parseValue(cache, kv))
    else if (key.startsWith(KEYS.partitionsPrefix)) partitionKvs.set(key, kv)
    else if (key.startsWith(KEYS.brokerConfigsPrefix)) {
      brokerConfigs.set(key.slice(KEYS.brokerConfigsPrefix.length), JSON.parse(kv.value))
    } else if (key.startsWith(KEYS.servedPrefix)) {
      const parsed = parseValue(cache, kv)
      parsed.derived ??= new Map(Object.entries(parsed.value as Record<string, number>))
      servedLeaderEpochs.set(
        Number(key.slice(KEYS.servedPrefix.length)),
        parsed.derived as ReadonlyMap<string, number>,
      )
    }
  }
  const topics = new Map<string, TopicImage>()
  for (const [name, parsedTopic] of [...topicValues].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const value = parsedTopic.value as TopicValue
    // Unchanged partitions and topics keep their objects from the previous image: a change
    // of one partition allocated (and the brokers re-applied) every partition of the cluster.
    const previous = parsedTopic.derived as TopicImage | undefined
    let same = previous !== undefined
    const partitions = value.replicas.map((replicas, index): PartitionState => {
      const state = partitionState(cache, partitionKvs.get(KEYS.partition(name, index)), replicas, index)
      if (same && previous?.partitions[index] !== state) same = false
      return state
    })
    const topic =
      same && previous !== undefined && previous.partitions.length === partitions.length
        ? previous
        : { name, topicId: value.topicId, partitions, configs: value.configs }
    parsedTopic.derived = topic
    topics.set(name, topic)
  }
  const controllerId = brokers.has(controller)
    ? controller
    : brokers.size > 0
      ? Math.min(...brokers.keys())
      : NO_LEADER
  return { clusterId, controllerId, brokers, topics, brokerConfigs, servedLeaderEpochs }
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
    return { partition: index, replicas, isr: [], leader: NO_LEADER, leaderEpoch: 0, partitionEpoch: 0 }
  const parsed = parseValue(cache, kv)
  const previous = parsed.derived as PartitionState | undefined
  if (previous !== undefined && previous.replicas === replicas) return previous
  const state: PartitionState = {
    partition: index,
    replicas,
    ...(parsed.value as PartitionValue),
    partitionEpoch: kv.version,
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

/** Store operations turning `base` into `next`, guarded by the versions `base` was built from. */
export function diffImages(
  base: ClusterImage,
  next: ClusterImage,
  kvs: ReadonlyMap<string, KeyValue>,
): { compares: VersionCompare[]; ops: StoreOp[] } {
  const compares: VersionCompare[] = []
  const ops: StoreOp[] = []
  const guard = (key: string) => compares.push({ key, version: versionOf(kvs, key) })
  for (const name of base.topics.keys()) {
    if (next.topics.has(name)) continue
    guard(KEYS.topic(name))
    ops.push(
      { type: 'delete', key: KEYS.topic(name) },
      { type: 'deletePrefix', prefix: KEYS.partitionsOf(name) },
    )
  }
  for (const [name, after] of next.topics) {
    const before = base.topics.get(name)
    // Images are immutable: an object an update kept is unchanged, with no need to encode it
    // (an update of one partition's ISR encoded all 10,000 partitions twice).
    if (before === after) continue
    if (!before || (mayChangeTopicValue(before, after) && topicValue(before) !== topicValue(after))) {
      guard(KEYS.topic(name))
      ops.push({ type: 'put', key: KEYS.topic(name), value: topicValue(after) })
    }
    for (const state of after.partitions) {
      const previous = before?.topicId === after.topicId ? before.partitions[state.partition] : undefined
      if (previous === state) continue
      const encoded = partitionValue(state)
      if (previous && partitionValue(previous) === encoded) continue
      const key = KEYS.partition(name, state.partition)
      guard(key)
      ops.push({ type: 'put', key, value: encoded })
    }
  }
  diffBrokerConfigs(base, next, guard, ops)
  assert(new Set(compares.map((c) => c.key)).size === compares.length, 'a key guarded twice in one update')
  return { compares, ops }
}

function diffBrokerConfigs(
  base: ClusterImage,
  next: ClusterImage,
  guard: (key: string) => void,
  ops: StoreOp[],
): void {
  const before = base.brokerConfigs ?? new Map()
  const after = next.brokerConfigs ?? new Map()
  for (const name of new Set([...before.keys(), ...after.keys()])) {
    const a = after.get(name)
    const value = a && Object.keys(a).length > 0 ? JSON.stringify(a) : null
    const old = before.get(name)
    const oldValue = old && Object.keys(old).length > 0 ? JSON.stringify(old) : null
    if (value === oldValue) continue
    const key = KEYS.brokerConfigs(name)
    guard(key)
    ops.push(value === null ? { type: 'delete', key } : { type: 'put', key, value })
  }
}

/**
 * A broker process registering for the first time gives up what its previous process held (see
 * elections.onBrokerRegistered): found by the deterministic simulation (seed 36), where a
 * broker restarted after a power loss re-registered before any controller saw it go and
 * led again in the same leader epoch with a shorter log; followers truncated acknowledged
 * records to match it.
 */
function leaveLeadershipsAndIsrs(
  image: ClusterImage,
  nodeId: BrokerId,
  options: RegisterOptions,
): ClusterImage {
  const live = new Set(image.brokers.keys())
  let changed = false
  const topics = new Map(image.topics)
  for (const topic of image.topics.values()) {
    const minIsr = options.minInsyncReplicas?.(image, topic.name)
    const partitions = topic.partitions.map((state) => {
      const input = { state, live, uncleanLeaderElection: false, minIsr }
      const unclean = options.uncleanShutdown === true
      const logEnd = unclean ? options.logEnd?.(topic.name, state.partition) : undefined
      const result = onBrokerRegistered(input, nodeId, unclean, logEnd)
      if (result) changed = true
      return result?.state ?? state
    })
    topics.set(topic.name, { ...topic, partitions })
  }
  return changed ? { ...image, topics } : image
}
