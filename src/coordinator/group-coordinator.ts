/**
 * The group coordinator's runtime: one shard per __consumer_offsets partition this broker
 * leads, each loaded from its log before serving (COORDINATOR_LOAD_IN_PROGRESS meanwhile)
 * and dropped when leadership moves (parked requests answered NOT_COORDINATOR). Requests
 * run the deterministic steps of rebalance.ts / offsets.ts; their records are appended with
 * acks=all and whatever depends on them is answered only once they are committed. Time
 * comes from the injected Clock; each group has one timer, armed at its next deadline.
 */

import type { Clock, TimerHandle } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import { type Random, randomUuid } from '../common/random.js'
import type { TransactionResult } from '../common/transaction.js'
import type { ClusterImage } from '../metadata/cluster-image.js'
import type { TopicAdmin } from '../metadata/topic-admin.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { decodeRecordBatch, encodeRecordBatchSync, iterateBatches } from '../protocol/record-batch.js'
import { toErrorCode } from '../replication/kafka-error.js'
import type { LeaderAppend, Partition } from '../replication/partition.js'
import type { AppendResult } from '../replication/replica-manager.js'
import {
  type ConsumerGroupConfig,
  type ConsumerGroupStateName,
  type ConsumerHeartbeatRequest,
  type ConsumerHeartbeatResult,
  checkSingleOwners,
  consumerGroupHeartbeat,
  consumerGroupStateName,
  consumerGroupTick,
  consumerGroupTombstones,
  DEFAULT_CONSUMER_GROUP_CONFIG,
  heartbeatError,
  makeConsumerGroup,
  nextConsumerDeadline,
  snapshotConsumerGroup,
  type TopicsView,
  toWire,
  validateConsumerOffsetRequest,
  validateHeartbeat,
} from './consumer-group.js'
import { type CoordinatorLocation, locateCoordinator } from './coordinator-locator.js'
import {
  type CodeResult,
  type Effects,
  type JoinResult,
  joinError,
  type PartitionCodesResult,
  type SyncResult,
  syncError,
  type TransactionalProducer,
  type WaiterResponse,
} from './effects.js'
import {
  CONSUMER_OFFSETS_TOPIC,
  type CoordinatorConfig,
  type Group,
  type GroupStateName,
  newGroup,
  partitionForGroup,
} from './group.js'
import {
  type CommitRequest,
  commitOffsets,
  commitTxnOffsets,
  completeTransaction,
  deleteGroup,
  deleteOffsets,
  expireOffsets,
  hasPendingCommit,
  OffsetsLoader,
  type TxnCommitRequest,
} from './offsets.js'
import {
  heartbeat,
  type JoinRequest,
  joinGroup,
  leaveGroup,
  type MemberRef,
  nextDeadline,
  type SyncRequest,
  syncGroup,
  tick,
} from './rebalance.js'
import { type CoordinatorRecord, decodeKey } from './records.js'

/** What the coordinator needs from its broker. */
export interface CoordinatorHost {
  readonly nodeId: number
  readonly clock: Clock
  /** Member ids (Kafka: client id + a random UUID). */
  readonly random: Random
  readonly logger: Logger
  readonly replicaManager: {
    getPartition(topic: string, partition: number): Partition | undefined
    appendToLeader(
      topic: string,
      partition: number,
      records: Buffer,
      acks: number,
      timeoutMs: number,
      purgatoryTimer?: undefined,
      leaderAppend?: LeaderAppend,
    ): Promise<AppendResult>
  }
  metadataImage(): ClusterImage
  readonly topicAdmin: Pick<TopicAdmin, 'ensureInternalTopic'>
}

export interface GroupCoordinatorConfig extends CoordinatorConfig {
  readonly offsetsTopicNumPartitions: number
  readonly offsetsTopicReplicationFactor: number
  readonly offsetsTopicSegmentBytes: number
  readonly offsetsCommitTimeoutMs: number
  readonly offsetsRetentionCheckIntervalMs: number
  readonly offsetsLoadBufferSize: number
  /** group.consumer.* (KIP-848); Kafka's defaults when absent. */
  readonly consumerGroup?: ConsumerGroupConfig
  /** group.coordinator.rebalance.protocols: 'consumer' enables ConsumerGroupHeartbeat. */
  readonly rebalanceProtocols?: readonly string[]
}

interface Shard {
  readonly partition: number
  readonly leaderEpoch: number
  loading: boolean
  unloaded: boolean
  groups: Map<string, Group>
  readonly timers: Map<string, { atMs: number; handle: TimerHandle }>
  expiryTimer: TimerHandle | null
  /**
   * The next sequence of each producer's transactional batches in this partition. The
   * partition's producer state checks them as a client's (a repeated sequence would be
   * taken for a retry and silently not written), so TxnOffsetCommit batches carry real
   * sequences, recovered from the log on load; a new epoch starts again at 0.
   */
  readonly producerSequences: Map<bigint, { producerEpoch: number; nextSequence: number }>
  /** Markers told while loading: applied once the load (which may end before them) is done. */
  readonly markersWhileLoading: { producerId: bigint; result: TransactionResult }[]
}

interface Waiter {
  readonly shard: Shard
  readonly resolve: (response: WaiterResponse) => void
  /** The answer when the shard is dropped before the request completes. */
  readonly notCoordinator: WaiterResponse
}

export interface GroupSummary {
  readonly groupId: string
  readonly protocolType: string
  readonly state: GroupStateName | ConsumerGroupStateName
  readonly type: 'classic' | 'consumer'
}

export interface ConsumerGroupDescription {
  readonly groupId: string
  readonly errorCode: number
  readonly errorMessage: string | null
  readonly state: string
  readonly groupEpoch: number
  readonly assignmentEpoch: number
  readonly assignorName: string
  readonly members: readonly {
    memberId: string
    instanceId: string | null
    rackId: string | null
    memberEpoch: number
    clientId: string
    clientHost: string
    subscribedTopicNames: string[]
    subscribedTopicRegex: string | null
    assignment: { topicId: string; topicName: string; partitions: number[] }[]
    targetAssignment: { topicId: string; topicName: string; partitions: number[] }[]
  }[]
}

export interface GroupDescription {
  readonly errorCode: number
  readonly state: GroupStateName
  readonly protocolType: string
  readonly protocolData: string
  readonly members: readonly {
    memberId: string
    groupInstanceId: string | null
    clientId: string
    clientHost: string
    metadata: Buffer
    assignment: Buffer
  }[]
}

export interface OffsetFetchResult {
  readonly errorCode: number
  readonly topics: readonly {
    name: string
    partitions: {
      partition: number
      offset: bigint
      leaderEpoch: number
      metadata: string | null
      errorCode: number
    }[]
  }[]
}

export class GroupCoordinator {
  private readonly shards = new Map<number, Shard>()
  private readonly waiters = new Map<number, Waiter>()
  /**
   * Consumer groups with a write in flight, and the steps waiting for it: one write at a time
   * per group, so that a write refused before reaching the log can be undone in memory
   * without a later step having built on it.
   */
  private readonly consumerWrites = new WeakMap<Group, (() => boolean)[]>()
  /** A consumer group whose timeout write was refused tries again only from here (Kafka: 500 ms later). */
  private readonly consumerTimerRetryAtMs = new WeakMap<Group, number>()
  private nextWaiter = 1
  private creatingTopic: Promise<void> | null = null
  private stopped = false

  constructor(
    private readonly host: CoordinatorHost,
    readonly config: GroupCoordinatorConfig,
  ) {}

  private get clock(): Clock {
    return this.host.clock
  }

  get consumerConfig(): ConsumerGroupConfig {
    return this.config.consumerGroup ?? DEFAULT_CONSUMER_GROUP_CONFIG
  }

  /** Whether group.coordinator.rebalance.protocols has 'consumer' (ConsumerGroupHeartbeat). */
  get consumerProtocolEnabled(): boolean {
    return (this.config.rebalanceProtocols ?? ['classic', 'consumer']).includes('consumer')
  }

  shutdown(): void {
    this.stopped = true
    for (const shard of [...this.shards.values()]) this.unload(shard)
  }

  // ---- leadership of __consumer_offsets partitions ------------------------------------------

  /** Called after each metadata image is applied: load newly led partitions, drop lost ones. */
  onPartitionsChanged(): void {
    if (this.stopped) return
    const topic = this.host.metadataImage().topics.get(CONSUMER_OFFSETS_TOPIC)
    const count = topic?.partitions.length ?? 0
    for (const shard of [...this.shards.values()]) if (shard.partition >= count) this.unload(shard)
    for (let p = 0; p < count; p++) {
      const partition = this.host.replicaManager.getPartition(CONSUMER_OFFSETS_TOPIC, p)
      const shard = this.shards.get(p)
      const leads = partition?.isLeader === true
      if (shard && (!leads || shard.leaderEpoch !== partition?.leaderEpoch)) this.unload(shard)
      if (leads && partition && this.shards.get(p) === undefined) this.startLoading(partition)
    }
  }

  private startLoading(partition: Partition): void {
    const shard: Shard = {
      partition: partition.partition,
      leaderEpoch: partition.leaderEpoch,
      loading: true,
      unloaded: false,
      groups: new Map(),
      timers: new Map(),
      expiryTimer: null,
      producerSequences: new Map(),
      markersWhileLoading: [],
    }
    this.shards.set(shard.partition, shard)
    const started = this.clock.monotonicMs()
    this.load(shard, partition).then(
      (records) => {
        if (shard.unloaded) return
        shard.loading = false
        for (const marker of shard.markersWhileLoading.splice(0))
          this.completeTransaction(shard, marker.producerId, marker.result)
        for (const group of shard.groups.values()) {
          if (group.consumer !== null) checkSingleOwners(group.consumer)
          this.schedule(shard, group)
        }
        this.scheduleExpiry(shard)
        const tookMs = Math.round(this.clock.monotonicMs() - started)
        this.host.logger.info(
          {
            partition: shard.partition,
            leaderEpoch: shard.leaderEpoch,
            groups: shard.groups.size,
            records,
            tookMs,
          },
          'group coordinator loaded __consumer_offsets partition',
        )
      },
      (error: unknown) => {
        this.host.logger.error(
          { err: error, partition: shard.partition },
          'loading __consumer_offsets failed',
        )
        // Answer NOT_COORDINATOR rather than loading forever; the next leadership change retries.
        if (!shard.unloaded) this.unload(shard)
      },
    )
  }

  /** Replays the partition from its log start to its log end; returns the records read. */
  private async load(shard: Shard, partition: Partition): Promise<number> {
    const log = partition.log
    const end = log.logEndOffset
    let offset = log.logStartOffset
    const loader = new OffsetsLoader(shard.groups, this.clock.nowMs(), this.consumerConfig.sessionTimeoutMs)
    while (offset < end && !shard.unloaded) {
      const info = await log.read(offset, {
        maxBytes: this.config.offsetsLoadBufferSize,
        maxOffset: end,
        minOneMessage: true,
      })
      if (info.sizeInBytes === 0) break
      for (const chunk of info.records) {
        for (const span of iterateBatches(chunk)) {
          const batch = await decodeRecordBatch(chunk, span.at)
          loader.replayBatch(batch)
          if (!batch.isControl && batch.isTransactional)
            shard.producerSequences.set(batch.producerId, {
              producerEpoch: batch.producerEpoch,
              nextSequence: batch.baseSequence + batch.lastOffsetDelta + 1,
            })
        }
      }
      offset = info.nextOffset
    }
    loader.finish()
    return loader.records
  }

  private unload(shard: Shard): void {
    shard.unloaded = true
    if (this.shards.get(shard.partition) === shard) this.shards.delete(shard.partition)
    for (const timer of shard.timers.values()) timer.handle.cancel()
    shard.timers.clear()
    shard.expiryTimer?.cancel()
    for (const [id, waiter] of [...this.waiters]) {
      if (waiter.shard !== shard) continue
      this.waiters.delete(id)
      waiter.resolve(waiter.notCoordinator)
    }
    if (!shard.loading)
      this.host.logger.info(
        { partition: shard.partition },
        'group coordinator unloaded __consumer_offsets partition',
      )
  }

  // ---- routing ---------------------------------------------------------------------------

  /** The loaded shard coordinating `groupId` here, or the error a client must see. */
  private route(groupId: string): Shard | number {
    const topic = this.host.metadataImage().topics.get(CONSUMER_OFFSETS_TOPIC)
    if (!topic || topic.partitions.length === 0) return ErrorCode.COORDINATOR_NOT_AVAILABLE
    const p = partitionForGroup(groupId, topic.partitions.length)
    const shard = this.shards.get(p)
    if (!shard)
      return topic.partitions[p].leader === this.host.nodeId
        ? ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        : ErrorCode.NOT_COORDINATOR
    const partition = this.host.replicaManager.getPartition(CONSUMER_OFFSETS_TOPIC, p)
    if (!partition?.isLeader || partition.leaderEpoch !== shard.leaderEpoch) return ErrorCode.NOT_COORDINATOR
    if (shard.loading) return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return shard
  }

  // ---- FindCoordinator ---------------------------------------------------------------------

  findCoordinator(key: string): Promise<CoordinatorLocation> {
    return locateCoordinator(
      {
        topic: CONSUMER_OFFSETS_TOPIC,
        nodeId: this.host.nodeId,
        clock: this.clock,
        logger: this.host.logger,
        metadataImage: () => this.host.metadataImage(),
        createTopic: () => this.createOffsetsTopic(),
        partitionFor: partitionForGroup,
        isLoaded: (p) => this.shards.get(p)?.loading === false,
        isStopped: () => this.stopped,
      },
      key,
    )
  }

  /**
   * Creates __consumer_offsets on first use, as Kafka does: compacted, with
   * offsets.topic.num.partitions partitions and offsets.topic.replication.factor replicas,
   * capped at the live broker count (a dev cluster smaller than the factor still works).
   */
  private createOffsetsTopic(): Promise<void> {
    this.creatingTopic ??= this.host.topicAdmin
      .ensureInternalTopic({
        name: CONSUMER_OFFSETS_TOPIC,
        partitions: this.config.offsetsTopicNumPartitions,
        replicationFactor: this.config.offsetsTopicReplicationFactor,
        configs: {
          'cleanup.policy': 'compact',
          'compression.type': 'producer',
          'segment.bytes': String(this.config.offsetsTopicSegmentBytes),
        },
      })
      .then(
        () => undefined,
        (error: unknown) => {
          this.creatingTopic = null
          throw error
        },
      )
    return this.creatingTopic
  }

  // ---- group membership --------------------------------------------------------------------

  join(req: Omit<JoinRequest, 'newMemberId'>): Promise<JoinResult> {
    const shard = this.route(req.groupId)
    if (typeof shard === 'number') return Promise.resolve(joinError(shard, req.memberId))
    let group = shard.groups.get(req.groupId)
    if (!group || group.state === 'Dead') {
      if (req.memberId !== '') return Promise.resolve(joinError(ErrorCode.UNKNOWN_MEMBER_ID, req.memberId))
      group = newGroup(req.groupId, this.clock.nowMs())
      shard.groups.set(req.groupId, group)
    }
    if (group.consumer !== null) {
      // Kafka 4's downgrade of an empty consumer group to classic; a classic member joining
      // a non-empty consumer group (online migration) is not built here.
      if (group.consumer.members.size > 0)
        return Promise.resolve(joinError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.memberId))
      this.convertToClassic(shard, group)
    }
    const newMemberId = `${req.clientId}-${randomUuid(this.host.random)}`
    const target = group
    return this.run(shard, target, joinError(ErrorCode.NOT_COORDINATOR, req.memberId), (waiter, now) =>
      joinGroup(target, { ...req, newMemberId }, waiter, now, this.config),
    ) as Promise<JoinResult>
  }

  sync(groupId: string, req: SyncRequest): Promise<SyncResult> {
    const shard = this.route(groupId)
    if (typeof shard === 'number') return Promise.resolve(syncError(shard))
    const group = shard.groups.get(groupId)
    if (!group || group.consumer !== null) return Promise.resolve(syncError(ErrorCode.UNKNOWN_MEMBER_ID))
    return this.run(shard, group, syncError(ErrorCode.NOT_COORDINATOR), (waiter, now) =>
      syncGroup(group, req, waiter, now),
    ) as Promise<SyncResult>
  }

  heartbeat(groupId: string, memberId: string, groupInstanceId: string | null, generationId: number): number {
    const shard = this.route(groupId)
    if (typeof shard === 'number') return shard
    const group = shard.groups.get(groupId)
    if (!group || group.consumer !== null) return ErrorCode.UNKNOWN_MEMBER_ID
    const result = heartbeat(group, memberId, groupInstanceId, generationId, this.clock.nowMs())
    this.schedule(shard, group)
    return result.errorCode
  }

  leave(groupId: string, members: readonly MemberRef[]): { errorCode: number; codes: number[] } {
    const shard = this.route(groupId)
    if (typeof shard === 'number') return { errorCode: shard, codes: members.map(() => shard) }
    const group = shard.groups.get(groupId)
    if (!group || group.consumer !== null)
      return { errorCode: ErrorCode.NONE, codes: members.map(() => ErrorCode.UNKNOWN_MEMBER_ID) }
    const { codes, effects } = leaveGroup(group, members, this.clock.nowMs())
    this.execute(shard, group, effects)
    return { errorCode: ErrorCode.NONE, codes }
  }

  // ---- KIP-848 consumer groups ------------------------------------------------------------

  /**
   * ConsumerGroupHeartbeat: joins, reconciles, leaves. Creates the group on a first join
   * (epoch 0); an empty classic group is upgraded, a non-empty one is refused with
   * GROUP_ID_NOT_FOUND (Kafka 4 with migration off; online migration is not built).
   */
  consumerGroupHeartbeat(
    req: ConsumerHeartbeatRequest,
    apiVersion: number,
  ): Promise<ConsumerHeartbeatResult> {
    const config = this.consumerConfig
    const invalid = validateHeartbeat(req, apiVersion, config)
    if (invalid) return Promise.resolve(invalid)
    const shard = this.route(req.groupId)
    if (typeof shard === 'number') return Promise.resolve(heartbeatError(shard))
    let group = shard.groups.get(req.groupId)
    if (group?.state === 'Dead') group = undefined
    if (!group) {
      if (req.memberEpoch !== 0)
        return Promise.resolve(
          heartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${req.groupId} not found.`),
        )
      group = newGroup(req.groupId, this.clock.nowMs())
      shard.groups.set(req.groupId, group)
    }
    if (group.consumer === null) {
      if (group.members.size > 0 || group.state !== 'Empty')
        return Promise.resolve(
          heartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${req.groupId} is not a consumer group.`),
        )
      makeConsumerGroup(group)
    }
    const target = group
    const newMemberId = randomUuid(this.host.random)
    const notCoordinator = heartbeatError(ErrorCode.NOT_COORDINATOR)
    return new Promise<ConsumerHeartbeatResult>((resolve) =>
      this.consumerWrite(target, () => {
        if (shard.unloaded || shard.groups.get(target.groupId) !== target) {
          resolve(notCoordinator)
          return false
        }
        const topics = this.topicsView()
        let writing = false
        this.run(shard, target, notCoordinator, (waiter, now) => {
          const undo = snapshotConsumerGroup(target)
          const effects = consumerGroupHeartbeat(target, req, waiter, now, config, topics, newMemberId)
          writing = effects.records.length > 0
          return writing ? this.undoIfRefused(shard, target, effects, undo) : effects
        }).then((response) => resolve(response as ConsumerHeartbeatResult))
        return writing
      }),
    )
  }

  /**
   * Runs `step` once no other write of the group is in flight; `step` returns whether it
   * started a write (whose end, through undoIfRefused, lets the next step go).
   */
  private consumerWrite(group: Group, step: () => boolean): void {
    const queue = this.consumerWrites.get(group)
    if (queue) {
      queue.push(step)
      return
    }
    this.consumerWrites.set(group, [])
    if (!step()) this.nextConsumerWrite(group)
  }

  private nextConsumerWrite(group: Group): void {
    const queue = this.consumerWrites.get(group)
    if (!queue) return
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) if (next()) return
    this.consumerWrites.delete(group)
  }

  /**
   * Wraps a consumer-group step's effects: a write refused before reaching the log (no base
   * offset) puts the group's state back as it was before the step, and once the write has
   * ended the group's next queued step may run. A shard dropped meanwhile never calls back;
   * its groups are discarded with it.
   */
  private undoIfRefused(shard: Shard, group: Group, effects: Effects, undo: () => void): Effects {
    const after = effects.afterAppend
    return {
      ...effects,
      afterAppend: (code, nowMs, baseOffset) => {
        if (code !== ErrorCode.NONE && baseOffset < 0) {
          undo()
          this.host.logger.info(
            { partition: shard.partition, group: group.groupId, errorCode: code },
            'consumer group write refused; its change undone',
          )
        }
        const result = after ? after(code, nowMs, baseOffset) : { records: [], replies: [] }
        queueMicrotask(() => this.nextConsumerWrite(group))
        return result
      },
    }
  }

  consumerGroupDescribe(groupId: string): ConsumerGroupDescription {
    const fail = (errorCode: number, errorMessage: string | null): ConsumerGroupDescription => ({
      groupId,
      errorCode,
      errorMessage,
      state: 'Dead',
      groupEpoch: -1,
      assignmentEpoch: -1,
      assignorName: '',
      members: [],
    })
    const shard = this.route(groupId)
    if (typeof shard === 'number') return fail(shard, null)
    const group = shard.groups.get(groupId)
    if (!group || group.state === 'Dead')
      return fail(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${groupId} not found.`)
    if (group.consumer === null)
      return fail(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${groupId} is not a consumer group.`)
    const state = group.consumer
    const names = new Map<string, string>()
    for (const [name, topic] of this.host.metadataImage().topics) names.set(topic.topicId, name)
    const described = (assignment: Map<string, number[]>) =>
      toWire(assignment).map((t) => ({
        topicId: t.topicId,
        topicName: names.get(t.topicId) ?? '',
        partitions: [...t.partitions],
      }))
    return {
      groupId,
      errorCode: ErrorCode.NONE,
      errorMessage: null,
      state: consumerGroupStateName(state),
      groupEpoch: state.groupEpoch,
      assignmentEpoch: state.assignmentEpoch,
      assignorName: state.assignorName === '' ? (this.consumerConfig.assignors[0] ?? '') : state.assignorName,
      members: [...state.members.values()].map((m) => ({
        memberId: m.memberId,
        instanceId: m.instanceId,
        rackId: m.rackId,
        memberEpoch: m.memberEpoch,
        clientId: m.clientId,
        clientHost: m.clientHost,
        subscribedTopicNames: [...m.subscribedTopicNames],
        subscribedTopicRegex: m.subscribedTopicRegex,
        assignment: described(m.assignedPartitions),
        targetAssignment: described(state.targetAssignment.get(m.memberId) ?? new Map()),
      })),
    }
  }

  /** The non-internal topics with their ids and partition counts, for the assignors. */
  private topicsView(): TopicsView {
    const byName = new Map<string, { topicId: string; partitions: number }>()
    for (const [name, topic] of this.host.metadataImage().topics) {
      if (name === CONSUMER_OFFSETS_TOPIC || name === '__transaction_state') continue
      byName.set(name, { topicId: topic.topicId, partitions: topic.partitions.length })
    }
    return { byName }
  }

  /** An empty consumer group becomes classic: its consumer records get tombstones. */
  private convertToClassic(shard: Shard, group: Group): void {
    group.type = 'classic'
    group.consumer = null
    group.protocolType = null
    this.execute(shard, group, { records: consumerGroupTombstones(group.groupId), replies: [] })
  }

  // ---- offsets -----------------------------------------------------------------------------

  commit(groupId: string, req: CommitRequest): Promise<PartitionCodesResult> {
    const everyPartition = (code: number): PartitionCodesResult => ({
      errorCode: code,
      partitions: new Map(req.partitions.map((p) => [`${p.topic}\u0000${p.partition}`, code])),
    })
    const shard = this.route(groupId)
    if (typeof shard === 'number') return Promise.resolve(everyPartition(shard))
    let group = shard.groups.get(groupId)
    if (!group || group.state === 'Dead') {
      // Only commits outside group management may create a group.
      if (req.generationId >= 0) return Promise.resolve(everyPartition(ErrorCode.ILLEGAL_GENERATION))
      group = newGroup(groupId, this.clock.nowMs())
      shard.groups.set(groupId, group)
    }
    const target = group
    const image = this.host.metadataImage()
    return this.run(shard, target, everyPartition(ErrorCode.NOT_COORDINATOR), (waiter, now) =>
      commitOffsets(target, req, waiter, now, this.config, (topic) => image.topics.has(topic)),
    ) as Promise<PartitionCodesResult>
  }

  /** TxnOffsetCommit: offsets pending in the producer's transaction until its marker. */
  commitTransactional(groupId: string, req: TxnCommitRequest): Promise<PartitionCodesResult> {
    const everyPartition = (code: number): PartitionCodesResult => ({
      errorCode: code,
      partitions: new Map(req.partitions.map((p) => [`${p.topic}\u0000${p.partition}`, code])),
    })
    const shard = this.route(groupId)
    if (typeof shard === 'number') return Promise.resolve(everyPartition(shard))
    let group = shard.groups.get(groupId)
    if (!group || group.state === 'Dead') {
      // As OffsetCommit: only a commit without group metadata may create a group.
      if (req.generationId >= 0) return Promise.resolve(everyPartition(ErrorCode.ILLEGAL_GENERATION))
      group = newGroup(groupId, this.clock.nowMs())
      shard.groups.set(groupId, group)
    }
    const target = group
    const image = this.host.metadataImage()
    return this.run(shard, target, everyPartition(ErrorCode.NOT_COORDINATOR), (waiter, now) =>
      commitTxnOffsets(target, req, waiter, now, this.config, (topic) => image.topics.has(topic)),
    ) as Promise<PartitionCodesResult>
  }

  /**
   * A COMMIT or ABORT marker was written to a partition led here (the broker's
   * onTransactionMarker): the producer's pending offsets in that __consumer_offsets
   * partition become visible or are dropped (Kafka's onTransactionCompleted).
   */
  onTransactionMarker(topic: string, partition: number, producerId: bigint, result: TransactionResult): void {
    if (topic !== CONSUMER_OFFSETS_TOPIC) return
    const shard = this.shards.get(partition)
    if (!shard || shard.unloaded) return
    if (shard.loading) shard.markersWhileLoading.push({ producerId, result })
    else this.completeTransaction(shard, producerId, result)
  }

  private completeTransaction(shard: Shard, producerId: bigint, result: TransactionResult): void {
    for (const group of shard.groups.values()) completeTransaction(group, producerId, result === 'commit')
  }

  /**
   * OffsetFetch for one group; `topics` null means every partition with a committed offset.
   * With `requireStable` a partition with a commit still pending (a transaction not yet
   * ended, or an append not yet replicated) answers UNSTABLE_OFFSET_COMMIT.
   */
  fetchOffsets(
    groupId: string,
    topics: readonly { name: string; partitions: number[] }[] | null,
    requireStable = false,
    member: { memberId: string; memberEpoch: number } | null = null,
  ): OffsetFetchResult {
    const shard = this.route(groupId)
    if (typeof shard === 'number') return { errorCode: shard, topics: [] }
    const group = shard.groups.get(groupId)
    // OffsetFetch v9+: a consumer group's member must send its current epoch.
    if (group?.consumer && member) {
      const code = validateConsumerOffsetRequest(group.consumer, member.memberId, member.memberEpoch, 'fetch')
      if (code !== ErrorCode.NONE) return { errorCode: code, topics: [] }
    }
    const offsets = group?.offsets ?? new Map()
    const wanted =
      topics ??
      [...offsets].map(([name, partitions]) => ({
        name,
        partitions: [...partitions.keys()].sort((a, b) => a - b),
      }))
    return {
      errorCode: ErrorCode.NONE,
      topics: wanted.map((t) => ({
        name: t.name,
        partitions: t.partitions.map((partition) => {
          if (requireStable && group && hasPendingCommit(group, t.name, partition))
            return {
              partition,
              offset: -1n,
              leaderEpoch: -1,
              metadata: '',
              errorCode: ErrorCode.UNSTABLE_OFFSET_COMMIT,
            }
          const committed = offsets.get(t.name)?.get(partition)
          return {
            partition,
            offset: committed?.offset ?? -1n,
            leaderEpoch: committed?.leaderEpoch ?? -1,
            metadata: committed?.metadata ?? '',
            errorCode: ErrorCode.NONE,
          }
        }),
      })),
    }
  }

  // ---- admin -------------------------------------------------------------------------------

  listGroups(): { errorCode: number; groups: GroupSummary[] } {
    let errorCode: number = ErrorCode.NONE
    const groups: GroupSummary[] = []
    for (const shard of this.shards.values()) {
      if (shard.loading) errorCode = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
      for (const group of shard.groups.values()) {
        if (group.state === 'Dead') continue
        groups.push({
          groupId: group.groupId,
          protocolType: group.protocolType ?? '',
          state: group.consumer !== null ? consumerGroupStateName(group.consumer) : group.state,
          type: group.type,
        })
      }
    }
    return { errorCode, groups }
  }

  /**
   * Every committed offset of the groups this broker coordinates (loaded shards only): the
   * consumer-lag metric subtracts them from the partitions' high watermarks.
   */
  committedOffsets(): { groupId: string; topic: string; partition: number; offset: number }[] {
    const result: { groupId: string; topic: string; partition: number; offset: number }[] = []
    for (const shard of this.shards.values()) {
      if (shard.loading) continue
      for (const group of shard.groups.values()) {
        if (group.state === 'Dead') continue
        for (const [topic, partitions] of group.offsets)
          for (const [partition, committed] of partitions)
            result.push({ groupId: group.groupId, topic, partition, offset: Number(committed.offset) })
      }
    }
    return result
  }

  describeGroup(groupId: string): GroupDescription {
    const shard = this.route(groupId)
    const empty = { state: 'Dead' as const, protocolType: '', protocolData: '', members: [] }
    if (typeof shard === 'number') return { errorCode: shard, ...empty }
    const group = shard.groups.get(groupId)
    // A consumer group is not described by DescribeGroups (Kafka's answer below v6: Dead).
    if (!group || group.consumer !== null) return { errorCode: ErrorCode.NONE, ...empty }
    // Member metadata and assignments are only meaningful once a generation is stable (as Kafka).
    const stable = group.state === 'Stable'
    return {
      errorCode: ErrorCode.NONE,
      state: group.state,
      protocolType: group.protocolType ?? '',
      protocolData: stable ? (group.protocolName ?? '') : '',
      members: [...group.members.values()].map((m) => ({
        memberId: m.memberId,
        groupInstanceId: m.groupInstanceId,
        clientId: m.clientId,
        clientHost: m.clientHost,
        metadata: stable
          ? (m.protocols.find((p) => p.name === group.protocolName)?.metadata ?? Buffer.alloc(0))
          : Buffer.alloc(0),
        assignment: stable ? m.assignment : Buffer.alloc(0),
      })),
    }
  }

  deleteGroup(groupId: string): Promise<number> {
    const shard = this.route(groupId)
    if (typeof shard === 'number') return Promise.resolve(shard)
    const group = shard.groups.get(groupId)
    if (!group) return Promise.resolve(ErrorCode.GROUP_ID_NOT_FOUND)
    const result = this.run(shard, group, { errorCode: ErrorCode.NOT_COORDINATOR }, (waiter) =>
      deleteGroup(group, waiter),
    ) as Promise<CodeResult>
    return result.then((r) => r.errorCode)
  }

  deleteOffsets(
    groupId: string,
    partitions: readonly { topic: string; partition: number }[],
  ): Promise<PartitionCodesResult> {
    const shard = this.route(groupId)
    if (typeof shard === 'number') return Promise.resolve({ errorCode: shard, partitions: new Map() })
    const group = shard.groups.get(groupId)
    if (!group) return Promise.resolve({ errorCode: ErrorCode.GROUP_ID_NOT_FOUND, partitions: new Map() })
    return this.run(shard, group, { errorCode: ErrorCode.NOT_COORDINATOR, partitions: new Map() }, (waiter) =>
      deleteOffsets(group, partitions, waiter),
    ) as Promise<PartitionCodesResult>
  }

  // ---- running steps -----------------------------------------------------------------------

  /** Parks a waiter for the request, runs the step and returns the waiter's answer. */
  private run(
    shard: Shard,
    group: Group,
    notCoordinator: WaiterResponse,
    step: (waiter: number, nowMs: number) => Effects,
  ): Promise<WaiterResponse> {
    const id = this.nextWaiter++
    const promise = new Promise<WaiterResponse>((resolve) => {
      this.waiters.set(id, { shard, resolve, notCoordinator })
    })
    this.execute(shard, group, step(id, this.clock.nowMs()))
    return promise
  }

  private execute(shard: Shard, group: Group, effects: Effects): void {
    for (const r of effects.replies) {
      const waiter = this.waiters.get(r.waiter)
      if (!waiter) continue
      this.waiters.delete(r.waiter)
      waiter.resolve(r.response)
    }
    if (effects.records.length > 0) {
      const afterAppend = effects.afterAppend
      this.append(shard, effects.records, effects.transactional).then(({ code, baseOffset }) => {
        if (shard.unloaded || !afterAppend) return
        this.execute(shard, group, afterAppend(code, this.clock.nowMs(), baseOffset))
      })
    }
    if (group.state === 'Dead' && shard.groups.get(group.groupId) === group) {
      shard.groups.delete(group.groupId)
      shard.timers.get(group.groupId)?.handle.cancel()
      shard.timers.delete(group.groupId)
      return
    }
    this.schedule(shard, group)
  }

  /**
   * Appends with acks=all; resolves with the error code a group API should answer and the
   * batch's base offset (-1 when not appended); never rejects.
   */
  private async append(
    shard: Shard,
    records: readonly CoordinatorRecord[],
    transactional: TransactionalProducer | undefined,
  ): Promise<{ code: number; baseOffset: number }> {
    const batch = encodeRecordBatchSync({
      records: records.map((r) => ({ key: r.key, value: r.value })),
      defaultTimestamp: this.clock.nowMs(),
      ...(transactional ? this.transactionalHeader(shard, transactional, records.length) : {}),
    })
    try {
      const result = await this.host.replicaManager.appendToLeader(
        CONSUMER_OFFSETS_TOPIC,
        shard.partition,
        batch,
        -1,
        this.config.offsetsCommitTimeoutMs,
        undefined,
        // Kafka's AppendOrigin.COORDINATOR: the producer's epoch is checked (a fenced one is
        // refused), not its sequences, and KIP-890 verification is the handler's.
        transactional ? { origin: 'coordinator' } : {},
      )
      // Losing leadership mid-append is routine (failover, shutdown); anything else is worth a warning.
      if (result.errorCode === ErrorCode.NOT_LEADER_OR_FOLLOWER)
        this.host.logger.info({ partition: shard.partition }, 'append to __consumer_offsets lost leadership')
      else if (result.errorCode !== ErrorCode.NONE)
        this.host.logger.warn(
          { partition: shard.partition, errorCode: result.errorCode },
          'append to __consumer_offsets not committed',
        )
      return { code: appendError(result.errorCode), baseOffset: result.baseOffset }
    } catch (error) {
      // Refused before anything was written: the sequence is free again.
      if (transactional) this.releaseSequence(shard, transactional, records.length)
      const code = toErrorCode(error)
      if (code === null) {
        this.host.logger.error(
          { err: error, partition: shard.partition },
          'append to __consumer_offsets failed',
        )
        return { code: ErrorCode.UNKNOWN_SERVER_ERROR, baseOffset: -1 }
      }
      return { code: appendError(code), baseOffset: -1 }
    }
  }

  /** The producer fields of a TxnOffsetCommit batch, taking the producer's next sequences. */
  private transactionalHeader(shard: Shard, producer: TransactionalProducer, count: number) {
    const known = shard.producerSequences.get(producer.producerId)
    const local =
      known !== undefined && known.producerEpoch === producer.producerEpoch ? known.nextSequence : 0
    // The partition's producer state is the authority (it may have seen what this shard
    // did not, as a batch written before a failed append was reported); the local count
    // covers appends still on their way to it.
    const entry = this.host.replicaManager
      .getPartition(CONSUMER_OFFSETS_TOPIC, shard.partition)
      ?.producerState?.lastEntry(producer.producerId)
    const logged =
      entry !== undefined && entry.producerEpoch === producer.producerEpoch && entry.lastSeq >= 0
        ? entry.lastSeq + 1
        : 0
    const baseSequence = Math.max(local, logged)
    // An older epoch keeps the entry: the partition refuses it (INVALID_PRODUCER_EPOCH).
    if (known === undefined || known.producerEpoch <= producer.producerEpoch)
      shard.producerSequences.set(producer.producerId, {
        producerEpoch: producer.producerEpoch,
        nextSequence: (baseSequence + count) % 2 ** 31,
      })
    return {
      producerId: producer.producerId,
      producerEpoch: producer.producerEpoch,
      baseSequence,
      isTransactional: true,
    }
  }

  private releaseSequence(shard: Shard, producer: TransactionalProducer, count: number): void {
    const known = shard.producerSequences.get(producer.producerId)
    if (known?.producerEpoch !== producer.producerEpoch) return
    const nextSequence = known.nextSequence - count
    if (nextSequence <= 0) shard.producerSequences.delete(producer.producerId)
    else
      shard.producerSequences.set(producer.producerId, {
        producerEpoch: producer.producerEpoch,
        nextSequence,
      })
  }

  // ---- timers --------------------------------------------------------------------------------

  private schedule(shard: Shard, group: Group): void {
    if (shard.unloaded || shard.loading) return
    let deadline = group.consumer !== null ? nextConsumerDeadline(group) : nextDeadline(group)
    const retryAtMs = this.consumerTimerRetryAtMs.get(group)
    if (deadline !== null && retryAtMs !== undefined) deadline = Math.max(deadline, retryAtMs)
    const armed = shard.timers.get(group.groupId)
    if (armed && armed.atMs === deadline) return
    armed?.handle.cancel()
    shard.timers.delete(group.groupId)
    if (deadline === null) return
    const delayMs = Math.max(0, deadline - this.clock.nowMs())
    const handle = this.clock.setTimeout(() => this.onTimer(shard, group.groupId), delayMs)
    shard.timers.set(group.groupId, { atMs: deadline, handle })
  }

  private onTimer(shard: Shard, groupId: string): void {
    shard.timers.delete(groupId)
    const group = shard.groups.get(groupId)
    if (shard.unloaded || !group) return
    if (group.consumer === null) {
      this.execute(shard, group, tick(group, this.clock.nowMs()))
      return
    }
    // Session and revocation timeouts write records: one write at a time, as heartbeats.
    this.consumerWrite(group, () => {
      if (shard.unloaded || shard.groups.get(groupId) !== group) return false
      const undo = snapshotConsumerGroup(group)
      const effects = consumerGroupTick(group, this.clock.nowMs())
      if (effects.records.length === 0) {
        this.schedule(shard, group)
        return false
      }
      const retried = this.undoIfRefused(shard, group, effects, undo)
      const after = retried.afterAppend
      this.execute(shard, group, {
        ...retried,
        afterAppend: (code, nowMs, baseOffset) => {
          if (code !== ErrorCode.NONE && baseOffset < 0)
            this.consumerTimerRetryAtMs.set(group, nowMs + CONSUMER_TIMER_RETRY_BACKOFF_MS)
          return after ? after(code, nowMs, baseOffset) : { records: [], replies: [] }
        },
      })
      return true
    })
  }

  /**
   * Every offsets.retention.check.interval.ms: expired offsets (and groups left Empty without
   * offsets) are removed and their tombstones appended (see expireOffsets).
   */
  private scheduleExpiry(shard: Shard): void {
    shard.expiryTimer = this.clock.setTimeout(() => {
      if (shard.unloaded) return
      const now = this.clock.nowMs()
      let offsets = 0
      let groups = 0
      for (const group of [...shard.groups.values()]) {
        const records = expireOffsets(group, now, this.config)
        offsets += records.filter((r) => decodeKey(r.key)?.kind === 'offset').length
        if (group.state === 'Dead') groups++
        if (records.length > 0 || group.state === 'Dead') this.execute(shard, group, { records, replies: [] })
      }
      if (offsets > 0 || groups > 0)
        this.host.logger.info(
          { partition: shard.partition, offsets, groups },
          'removed expired offsets and empty groups',
        )
      this.scheduleExpiry(shard)
    }, this.config.offsetsRetentionCheckIntervalMs)
  }
}

/** How long a consumer group's refused timeout write waits before it is tried again (Kafka's timer retry). */
const CONSUMER_TIMER_RETRY_BACKOFF_MS = 500

/** Kafka's mapping of __consumer_offsets append errors to what group clients should see. */
function appendError(code: number): number {
  switch (code) {
    case ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
    case ErrorCode.NOT_ENOUGH_REPLICAS:
    case ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case ErrorCode.REQUEST_TIMED_OUT:
      return ErrorCode.COORDINATOR_NOT_AVAILABLE
    case ErrorCode.NOT_LEADER_OR_FOLLOWER:
    case ErrorCode.KAFKA_STORAGE_ERROR:
      return ErrorCode.NOT_COORDINATOR
    default:
      return code
  }
}
