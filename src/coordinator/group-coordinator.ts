/**
 * The group coordinator (Kafka's GroupCoordinatorService): the request-facing side of
 * consumer groups and their offsets. It runs on the coordinator runtime
 * (runtime/coordinator-runtime.ts), one GroupCoordinatorShard per __consumer_offsets
 * partition this broker leads: the runtime loads and drops shards and answers for a group
 * whose shard is not here (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR); this class turns
 * each request into a step of rebalance.ts / offsets.ts / consumer-group.ts on the group's
 * shard, whose records are appended with acks=all and whose answers wait for them.
 */

import type { Clock } from '../common/clock.js'
import { type Random, randomUuid } from '../common/random.js'
import type { TransactionResult } from '../common/transaction.js'
import { toProducerId } from '../common/types.js'
import { ErrorCode } from '../protocol/error-codes.js'
import {
  type ConsumerGroupConfig,
  type ConsumerGroupStateName,
  type ConsumerHeartbeatRequest,
  type ConsumerHeartbeatResult,
  consumerGroupHeartbeat,
  consumerGroupStateName,
  consumerGroupTombstones,
  DEFAULT_CONSUMER_GROUP_CONFIG,
  heartbeatError,
  makeConsumerGroup,
  snapshotConsumerGroup,
  type TopicsView,
  toWire,
  validateConsumerOffsetRequest,
  validateHeartbeat,
} from './consumer-group.js'
import type { CoordinatorLocation } from './coordinator-locator.js'
import {
  type CodeResult,
  type Effects,
  type JoinResult,
  joinError,
  type PartitionCodesResult,
  type SyncResult,
  syncError,
  topicPartitionKey,
} from './effects.js'
import {
  CONSUMER_OFFSETS_TOPIC,
  type CoordinatorConfig,
  type Group,
  type GroupStateName,
  newGroup,
  partitionForGroup,
} from './group.js'
import { COORDINATOR_RECORD_SERDE, GroupCoordinatorShard } from './group-coordinator-shard.js'
import {
  type CommitRequest,
  commitOffsets,
  commitTxnOffsets,
  deleteGroup,
  deleteOffsets,
  hasPendingCommit,
  type TxnCommitRequest,
} from './offsets.js'
import {
  heartbeat,
  type JoinRequest,
  joinGroup,
  leaveGroup,
  type MemberRef,
  type SyncRequest,
  syncGroup,
} from './rebalance.js'
import type { CoordinatorRecord } from './records.js'
import { CoordinatorRuntime, type CoordinatorRuntimeHost } from './runtime/coordinator-runtime.js'
import { DEFAULT_SHARE_GROUP_CONFIG, type ShareGroupConfig } from './share-group.js'
import { ShareGroupCoordinator } from './share-group-coordinator.js'
import {
  DEFAULT_STREAMS_GROUP_CONFIG,
  type StreamsGroupConfig,
  type StreamsGroupStateName,
  streamsGroupStateName,
  validateStreamsOffsetRequest,
} from './streams/streams-group.js'
import { StreamsGroupCoordinator } from './streams/streams-group-coordinator.js'

/** What the coordinator needs from its broker. */
export interface CoordinatorHost extends CoordinatorRuntimeHost {
  /** Member ids (Kafka: client id + a random UUID). */
  readonly random: Random
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
  /** group.share.* (KIP-932); Kafka's defaults when absent. */
  readonly shareGroup?: ShareGroupConfig
  /** group.streams.* (KIP-1071); Kafka's defaults when absent. */
  readonly streamsGroup?: StreamsGroupConfig
}

export interface GroupSummary {
  readonly groupId: string
  readonly protocolType: string
  readonly state: GroupStateName | ConsumerGroupStateName | StreamsGroupStateName | 'Empty' | 'Stable'
  readonly type: 'classic' | 'consumer' | 'share' | 'streams'
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
  /** Why a Dead group has nothing to describe: DescribeGroups v6 answers GROUP_ID_NOT_FOUND. */
  readonly notFound?: 'unknown' | 'consumer-group'
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
  private readonly runtime: CoordinatorRuntime<GroupCoordinatorShard, CoordinatorRecord>
  /** Share groups (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe. */
  readonly share: ShareGroupCoordinator
  /** Streams groups (KIP-1071): StreamsGroupHeartbeat and StreamsGroupDescribe. */
  readonly streams: StreamsGroupCoordinator

  constructor(
    private readonly host: CoordinatorHost,
    readonly config: GroupCoordinatorConfig,
  ) {
    this.runtime = new CoordinatorRuntime(host, {
      topic: CONSUMER_OFFSETS_TOPIC,
      name: 'group coordinator',
      serde: COORDINATOR_RECORD_SERDE,
      loadBufferSize: config.offsetsLoadBufferSize,
      noTopicErrorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE,
      partitionFor: partitionForGroup,
      // __consumer_offsets as Kafka creates it on first use: compacted, with
      // offsets.topic.num.partitions partitions and offsets.topic.replication.factor
      // replicas, capped at the live broker count (a dev cluster smaller than the factor works).
      topicSpec: () => ({
        partitions: config.offsetsTopicNumPartitions,
        replicationFactor: config.offsetsTopicReplicationFactor,
        configs: {
          'cleanup.policy': 'compact',
          'compression.type': 'producer',
          'segment.bytes': String(config.offsetsTopicSegmentBytes),
        },
      }),
      newShard: (context) =>
        new GroupCoordinatorShard(context, {
          runtime: this.runtime,
          clock: host.clock,
          logger: host.logger,
          config,
          consumerConfig: this.consumerConfig,
          onLoaded: (shard) => {
            this.share.onShardLoaded(shard)
            this.streams.onShardLoaded(shard)
          },
        }),
    })
    this.share = new ShareGroupCoordinator({
      route: (groupId) => this.route(groupId),
      clock: host.clock,
      metadataImage: () => host.metadataImage(),
      config: config.shareGroup ?? DEFAULT_SHARE_GROUP_CONFIG,
    })
    this.streams = new StreamsGroupCoordinator({
      route: (groupId) => this.route(groupId),
      isOtherType: (shard, groupId) => this.share.has(shard, groupId),
      clock: host.clock,
      metadataImage: () => host.metadataImage(),
      config: config.streamsGroup ?? DEFAULT_STREAMS_GROUP_CONFIG,
    })
  }

  private get clock(): Clock {
    return this.host.clock
  }

  get consumerConfig(): ConsumerGroupConfig {
    return this.config.consumerGroup ?? DEFAULT_CONSUMER_GROUP_CONFIG
  }

  /**
   * A consumer group's settings: the broker's, with the group's own
   * consumer.session.timeout.ms, consumer.heartbeat.interval.ms and
   * consumer.assignment.interval.ms (group configs, validated when set) read at each
   * heartbeat, as Kafka's coordinator does.
   */
  consumerConfigOf(groupId: string): ConsumerGroupConfig {
    const set = this.host.metadataImage().groupConfigs?.get(groupId)
    if (set === undefined) return this.consumerConfig
    const session = set['consumer.session.timeout.ms']
    const heartbeat = set['consumer.heartbeat.interval.ms']
    const assignmentInterval = set['consumer.assignment.interval.ms']
    return {
      ...this.consumerConfig,
      ...(session !== undefined && { sessionTimeoutMs: Number(session) }),
      ...(heartbeat !== undefined && { heartbeatIntervalMs: Number(heartbeat) }),
      ...(assignmentInterval !== undefined && { assignmentIntervalMs: Number(assignmentInterval) }),
    }
  }

  /** Whether group.coordinator.rebalance.protocols has 'consumer' (ConsumerGroupHeartbeat). */
  get consumerProtocolEnabled(): boolean {
    return (this.config.rebalanceProtocols ?? ['classic', 'consumer']).includes('consumer')
  }

  /** Whether group.coordinator.rebalance.protocols has 'streams' (StreamsGroupHeartbeat). */
  get streamsProtocolEnabled(): boolean {
    return (this.config.rebalanceProtocols ?? ['classic', 'consumer', 'streams']).includes('streams')
  }

  shutdown(): void {
    this.runtime.shutdown()
  }

  /** Called after each metadata image is applied: load newly led partitions, drop lost ones. */
  onPartitionsChanged(): void {
    this.runtime.onPartitionsChanged()
  }

  /** The loaded shard coordinating `groupId` here, or the error a client must see. */
  private route(groupId: string): GroupCoordinatorShard | number {
    const context = this.runtime.contextFor(groupId)
    return typeof context === 'number' ? context : context.shard
  }

  findCoordinator(key: string): Promise<CoordinatorLocation> {
    return this.runtime.findCoordinator(key)
  }

  // ---- group membership --------------------------------------------------------------------

  join(req: Omit<JoinRequest, 'newMemberId'>): Promise<JoinResult> {
    const shard = this.route(req.groupId)
    if (typeof shard === 'number') return Promise.resolve(joinError(shard, req.memberId))
    if (this.share.has(shard, req.groupId))
      return Promise.resolve(joinError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.memberId))
    let group = shard.groups.get(req.groupId)
    if (!group || group.state === 'Dead') {
      if (req.memberId !== '') return Promise.resolve(joinError(ErrorCode.UNKNOWN_MEMBER_ID, req.memberId))
      group = newGroup(req.groupId, this.clock.nowMs())
      shard.groups.set(req.groupId, group)
    }
    // A classic member cannot join a streams group (empty or not): Kafka converts only consumer groups.
    if (group.streams) return Promise.resolve(joinError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.memberId))
    if (group.consumer !== null) {
      // Kafka 4's downgrade of an empty consumer group to classic; a classic member joining
      // a non-empty consumer group (online migration) is not built here.
      if (group.consumer.members.size > 0)
        return Promise.resolve(joinError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.memberId))
      this.convertToClassic(shard, group)
    }
    const newMemberId = `${req.clientId}-${randomUuid(this.host.random)}`
    const target = group
    return shard.run(target, joinError(ErrorCode.NOT_COORDINATOR, req.memberId), (waiter, now) =>
      joinGroup(target, { ...req, newMemberId }, waiter, now, this.config),
    ) as Promise<JoinResult>
  }

  sync(groupId: string, req: SyncRequest): Promise<SyncResult> {
    const shard = this.route(groupId)
    if (typeof shard === 'number') return Promise.resolve(syncError(shard))
    const group = shard.groups.get(groupId)
    if (!group || group.consumer !== null || group.streams)
      return Promise.resolve(syncError(ErrorCode.UNKNOWN_MEMBER_ID))
    return shard.run(group, syncError(ErrorCode.NOT_COORDINATOR), (waiter, now) =>
      syncGroup(group, req, waiter, now),
    ) as Promise<SyncResult>
  }

  heartbeat(groupId: string, memberId: string, groupInstanceId: string | null, generationId: number): number {
    const shard = this.route(groupId)
    if (typeof shard === 'number') return shard
    const group = shard.groups.get(groupId)
    if (!group || group.consumer !== null || group.streams) return ErrorCode.UNKNOWN_MEMBER_ID
    const result = heartbeat(group, memberId, groupInstanceId, generationId, this.clock.nowMs())
    shard.schedule(group)
    return result.errorCode
  }

  leave(groupId: string, members: readonly MemberRef[]): { errorCode: number; codes: number[] } {
    const shard = this.route(groupId)
    if (typeof shard === 'number') return { errorCode: shard, codes: members.map(() => shard) }
    const group = shard.groups.get(groupId)
    if (!group || group.consumer !== null || group.streams)
      return { errorCode: ErrorCode.NONE, codes: members.map(() => ErrorCode.UNKNOWN_MEMBER_ID) }
    const { codes, effects } = leaveGroup(group, members, this.clock.nowMs())
    shard.execute(group, effects)
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
    const config = this.consumerConfigOf(req.groupId)
    const invalid = validateHeartbeat(req, apiVersion, config)
    if (invalid) return Promise.resolve(invalid)
    const shard = this.route(req.groupId)
    if (typeof shard === 'number') return Promise.resolve(heartbeatError(shard))
    if (this.share.has(shard, req.groupId))
      return Promise.resolve(
        heartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${req.groupId} is not a consumer group.`),
      )
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
      if (group.members.size > 0 || group.state !== 'Empty' || group.streams)
        return Promise.resolve(
          heartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, `Group ${req.groupId} is not a consumer group.`),
        )
      makeConsumerGroup(group)
    }
    const target = group
    const newMemberId = randomUuid(this.host.random)
    const notCoordinator = heartbeatError(ErrorCode.NOT_COORDINATOR)
    return new Promise<ConsumerHeartbeatResult>((resolve) =>
      shard.consumerWrite(target, () => {
        if (shard.unloaded || shard.groups.get(target.groupId) !== target) {
          resolve(notCoordinator)
          return false
        }
        const topics = this.topicsView()
        let writing = false
        shard
          .run(target, notCoordinator, (waiter, now) => {
            const undo = snapshotConsumerGroup(target)
            const effects = consumerGroupHeartbeat(target, req, waiter, now, config, topics, newMemberId)
            writing = effects.records.length > 0
            return writing ? shard.undoIfRefused(target, effects, undo) : effects
          })
          .then((response) => resolve(response as ConsumerHeartbeatResult))
        return writing
      }),
    )
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

  /**
   * Every topic with its id and partition count, for the assignors. Internal topics are in:
   * Kafka's coordinator resolves a subscribed name or regex against all topics, so a regex
   * such as `.*offsets.*` is given __consumer_offsets (franz-go's Test848RegexBrokerResolves
   * relies on it); excluding internal topics is the client's business.
   */
  private topicsView(): TopicsView {
    const byName = new Map<string, { topicId: string; partitions: number }>()
    for (const [name, topic] of this.host.metadataImage().topics) {
      byName.set(name, { topicId: topic.topicId, partitions: topic.partitions.length })
    }
    return { byName }
  }

  /** An empty consumer group becomes classic: its consumer records get tombstones. */
  private convertToClassic(shard: GroupCoordinatorShard, group: Group): void {
    group.type = 'classic'
    group.consumer = null
    group.protocolType = null
    shard.execute(group, { records: consumerGroupTombstones(group.groupId), replies: [] })
  }

  // ---- offsets -----------------------------------------------------------------------------

  commit(groupId: string, req: CommitRequest): Promise<PartitionCodesResult> {
    return this.commitOffsets(groupId, req, commitOffsets)
  }

  /** TxnOffsetCommit: offsets pending in the producer's transaction until its marker. */
  commitTransactional(groupId: string, req: TxnCommitRequest): Promise<PartitionCodesResult> {
    return this.commitOffsets(groupId, req, commitTxnOffsets)
  }

  /**
   * OffsetCommit and TxnOffsetCommit: the group's step (commitOffsets or commitTxnOffsets),
   * on a group created for the commit if it has none and the commit is not from a member
   * (generation -1), as Kafka's.
   */
  private commitOffsets<Req extends CommitRequest | TxnCommitRequest>(
    groupId: string,
    req: Req,
    step: (
      group: Group,
      req: Req,
      waiter: number,
      nowMs: number,
      config: GroupCoordinatorConfig,
      partitionExists: (topic: string, partition: number) => boolean,
    ) => Effects,
  ): Promise<PartitionCodesResult> {
    const everyPartition = (code: number): PartitionCodesResult => ({
      errorCode: code,
      partitions: new Map(req.partitions.map((p) => [topicPartitionKey(p.topic, p.partition), code])),
    })
    const shard = this.route(groupId)
    if (typeof shard === 'number') return Promise.resolve(everyPartition(shard))
    let group = shard.groups.get(groupId)
    if (!group || group.state === 'Dead') {
      // Only commits outside group management may create a group. A commit with a
      // generation to a group that does not exist: OffsetCommit v9+ says so, as Kafka 4's
      // coordinator does (GROUP_ID_NOT_FOUND); older versions and TxnOffsetCommit cannot.
      if (req.generationId >= 0)
        return Promise.resolve(
          everyPartition(
            'apiVersion' in req && (req.apiVersion ?? 0) >= 9
              ? ErrorCode.GROUP_ID_NOT_FOUND
              : ErrorCode.ILLEGAL_GENERATION,
          ),
        )
      group = newGroup(groupId, this.clock.nowMs())
      shard.groups.set(groupId, group)
    }
    const target = group
    const image = this.host.metadataImage()
    return shard.run(target, everyPartition(ErrorCode.NOT_COORDINATOR), (waiter, now) =>
      step(target, req, waiter, now, this.config, (topic, partition) => {
        const known = image.topics.get(topic)
        return known !== undefined && partition >= 0 && partition < known.partitions.length
      }),
    ) as Promise<PartitionCodesResult>
  }

  /**
   * A COMMIT or ABORT marker was written to a partition led here (the broker's
   * onTransactionMarker): the producer's pending offsets in that __consumer_offsets
   * partition become visible or are dropped (Kafka's onTransactionCompleted).
   */
  onTransactionMarker(topic: string, partition: number, producerId: bigint, result: TransactionResult): void {
    // A bigint, checked here: the simulator's mutations (src/sim/mutations.ts) wrap this method.
    if (topic === CONSUMER_OFFSETS_TOPIC)
      this.runtime.completeTransaction(partition, toProducerId(producerId), result)
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
    if (group?.streams && member) {
      const code = validateStreamsOffsetRequest(group.streams, member.memberId, member.memberEpoch, 'fetch')
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
    const errorCode = this.runtime.isLoading ? ErrorCode.COORDINATOR_LOAD_IN_PROGRESS : ErrorCode.NONE
    const groups: GroupSummary[] = []
    for (const { shard } of this.runtime.activeContexts()) {
      for (const group of shard.groups.values()) {
        if (group.state === 'Dead') continue
        // A streams group: Kafka's protocol type and group type "streams", its own state names.
        if (group.streams)
          groups.push({
            groupId: group.groupId,
            protocolType: 'streams',
            state: streamsGroupStateName(group.streams),
            type: 'streams',
          })
        else
          groups.push({
            groupId: group.groupId,
            protocolType: group.protocolType ?? '',
            state: group.consumer !== null ? consumerGroupStateName(group.consumer) : group.state,
            type: group.type,
          })
      }
      groups.push(...this.share.list(shard))
    }
    return { errorCode, groups }
  }

  /**
   * Every committed offset of the groups this broker coordinates (loaded shards only): the
   * consumer-lag metric subtracts them from the partitions' high watermarks.
   */
  committedOffsets(): { groupId: string; topic: string; partition: number; offset: number }[] {
    const result: { groupId: string; topic: string; partition: number; offset: number }[] = []
    for (const { shard } of this.runtime.activeContexts()) {
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
    // A share group is not described by DescribeGroups either: Kafka's "not a classic group".
    if (!group && this.share.has(shard, groupId))
      return { errorCode: ErrorCode.NONE, notFound: 'consumer-group', ...empty }
    if (!group) return { errorCode: ErrorCode.NONE, notFound: 'unknown', ...empty }
    if (group.consumer !== null || group.streams)
      return { errorCode: ErrorCode.NONE, notFound: 'consumer-group', ...empty }
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
    const result = shard.run(group, { errorCode: ErrorCode.NOT_COORDINATOR }, (waiter) =>
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
    return shard.run(group, { errorCode: ErrorCode.NOT_COORDINATOR, partitions: new Map() }, (waiter) =>
      deleteOffsets(group, partitions, waiter),
    ) as Promise<PartitionCodesResult>
  }
}
