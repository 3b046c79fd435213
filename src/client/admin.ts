/**
 * The admin client: topics (create, delete, list, describe), partitions, configs
 * (describe, incremental alter), the cluster, records (delete up to an offset) and offsets.
 * Topic creation and deletion go to the controller, retried on NOT_CONTROLLER and
 * connection errors; a per-item error rejects the call with that item's KafkaProtocolError.
 *
 * ACLs (create, describe, delete) use Kafka's enum names (TOPIC, PREFIXED, READ, ALLOW).
 *
 * Group administration (list/describe groups, reset offsets) needs the group APIs; until the
 * broker serves them, listGroups() rejects with GroupsNotSupportedError.
 */
import { AclOperation, AclPermissionType, PatternType, ResourceType } from '../protocol/acl-codes.js'
import { ErrorCode } from '../protocol/error-codes.js'
import type { AlterClientQuotasResponse } from '../protocol/generated/alter-client-quotas-response.js'
import { decodeConsumerProtocolAssignment } from '../protocol/generated/consumer-protocol-assignment.js'
import type { CreateAclsResponse } from '../protocol/generated/create-acls-response.js'
import type { CreatePartitionsResponse } from '../protocol/generated/create-partitions-response.js'
import type { CreateTopicsRequest } from '../protocol/generated/create-topics-request.js'
import type { CreateTopicsResponse } from '../protocol/generated/create-topics-response.js'
import type { DeleteAclsResponse } from '../protocol/generated/delete-acls-response.js'
import type { DeleteRecordsResponse } from '../protocol/generated/delete-records-response.js'
import type { DeleteTopicsResponse } from '../protocol/generated/delete-topics-response.js'
import type { DescribeAclsResponse } from '../protocol/generated/describe-acls-response.js'
import type { DescribeClientQuotasResponse } from '../protocol/generated/describe-client-quotas-response.js'
import type { DescribeClusterResponse } from '../protocol/generated/describe-cluster-response.js'
import type { DescribeConfigsResponse } from '../protocol/generated/describe-configs-response.js'
import type { DescribeGroupsResponse } from '../protocol/generated/describe-groups-response.js'
import type { DescribeTransactionsResponse } from '../protocol/generated/describe-transactions-response.js'
import type { IncrementalAlterConfigsResponse } from '../protocol/generated/incremental-alter-configs-response.js'
import { ApiKey } from '../protocol/generated/index.js'
import type { ListGroupsResponse } from '../protocol/generated/list-groups-response.js'
import type { ListTransactionsResponse } from '../protocol/generated/list-transactions-response.js'
import type { OffsetCommitResponse } from '../protocol/generated/offset-commit-response.js'
import type { OffsetFetchResponse } from '../protocol/generated/offset-fetch-response.js'
import { Reader, ZERO_UUID } from '../protocol/primitives.js'
import type {
  Acl,
  AclFilter,
  AclOperationName,
  AclResourceTypeName,
  ClientQuotaAlteration,
  ClientQuotaEntity,
  ClientQuotaFilterComponent,
  ClusterDescription,
  ConfigEntry,
  ConfigOperation,
  ConfigResource,
  ConfigResourceType,
  GroupDescription,
  GroupOffset,
  NewTopic,
  TopicDescription,
  TransactionDescription,
  TransactionListing,
} from './admin-types.js'
import { type ClientOptions, type KafkaClient, sharedOrNewClient } from './client.js'
import { GroupsNotSupportedError, KafkaProtocolError } from './errors.js'
import { CoordinatorKeyType, findCoordinator, findGroupCoordinator } from './find-coordinator.js'
import { type PartitionOutcome, requestByLeader, type TopicPartition, tpKey } from './leader-requests.js'
import type { BrokerNode } from './metadata.js'
import { type IsolationLevel, type ListedOffset, listOffsets, type OffsetQuery } from './offsets.js'
import { isRetriableError, sleep } from './retry.js'
import { GROUP_API_KEYS } from './versions.js'

export type {
  Acl,
  AclFilter,
  AclOperationName,
  AclResourceTypeName,
  ClientQuotaAlteration,
  ClientQuotaEntity,
  ClientQuotaFilterComponent,
  ClusterDescription,
  ConfigEntry,
  ConfigOperation,
  ConfigResource,
  ConfigResourceType,
  GroupDescription,
  GroupMemberDescription,
  GroupOffset,
  NewTopic,
  TopicDescription,
  TransactionDescription,
  TransactionListing,
} from './admin-types.js'

export interface AdminOptions extends Partial<ClientOptions> {
  client?: KafkaClient
  /** How long the broker may take for topic operations (default 30000). */
  operationTimeoutMs?: number
}

const RESOURCE_TYPE: Readonly<Record<ConfigResourceType, number>> = { topic: 2, broker: 4 }
const CONFIG_OPERATION: Readonly<Record<ConfigOperation, number>> = {
  set: 0,
  delete: 1,
  append: 2,
  subtract: 3,
}
const CONFIG_SOURCE = [
  'UNKNOWN',
  'DYNAMIC_TOPIC_CONFIG',
  'DYNAMIC_BROKER_CONFIG',
  'DYNAMIC_DEFAULT_BROKER_CONFIG',
  'STATIC_BROKER_CONFIG',
  'DEFAULT_CONFIG',
  'DYNAMIC_BROKER_LOGGER_CONFIG',
  'CLIENT_METRICS_CONFIG',
]
const ATTEMPTS_MAX = 5
/** DescribeClientQuotas match types. */
const MATCH_EXACT = 0
const MATCH_DEFAULT = 1
const MATCH_SPECIFIED = 2

export class Admin {
  readonly client: KafkaClient
  private readonly ownsClient: boolean
  private readonly operationTimeoutMs: number

  constructor(options: AdminOptions) {
    const { client, ownsClient } = sharedOrNewClient(options, 'admin')
    this.client = client
    this.ownsClient = ownsClient
    this.operationTimeoutMs = options.operationTimeoutMs ?? 30000
  }

  async createTopics(topics: readonly NewTopic[], options: { validateOnly?: boolean } = {}): Promise<void> {
    const response = await this.toController<CreateTopicsResponse>(ApiKey.CreateTopics, () =>
      this.createTopicsRequest(topics, options.validateOnly ?? false),
    )
    for (const t of response.topics) throwIf(t.errorCode, `topic ${t.name}`, t.errorMessage)
  }

  async deleteTopics(names: readonly string[]): Promise<void> {
    const response = await this.toController<DeleteTopicsResponse>(ApiKey.DeleteTopics, (version) => ({
      topics: version >= 6 ? names.map((name) => ({ name, topicId: ZERO_UUID })) : [],
      topicNames: version < 6 ? [...names] : [],
      timeoutMs: this.operationTimeoutMs,
    }))
    for (const t of response.responses) throwIf(t.errorCode, `topic ${t.name}`, t.errorMessage)
  }

  async listTopics(options: { includeInternal?: boolean } = {}): Promise<string[]> {
    const snapshot = await this.client.refreshMetadata('all')
    return [...snapshot.topics.values()]
      .filter((t) => options.includeInternal || !t.isInternal)
      .map((t) => t.name)
      .sort()
  }

  /** Partitions with leader, replicas, ISR and offline replicas; all topics when `names` is absent. */
  async describeTopics(names?: readonly string[]): Promise<TopicDescription[]> {
    const snapshot = await this.client.refreshMetadata(names ?? 'all')
    const wanted = names ?? [...snapshot.topics.keys()].sort()
    return wanted.map((name) => {
      const info = snapshot.topics.get(name)
      if (!info)
        throw new KafkaProtocolError(
          snapshot.topicErrors.get(name) ?? ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
          `topic ${name}`,
        )
      return { name, topicId: info.topicId, isInternal: info.isInternal, partitions: [...info.partitions] }
    })
  }

  /** The partition indexes of each of `topics` that exists. */
  private async partitionsOf(topics: readonly string[]): Promise<{ name: string; partitions: number[] }[]> {
    const snapshot = await this.client.refreshMetadata(topics)
    return topics.flatMap((name) => {
      const info = snapshot.topics.get(name)
      return info ? [{ name, partitions: info.partitions.map((p) => p.partition) }] : []
    })
  }

  /** Raises the partition count of topics (never lowers it: Kafka cannot). */
  async createPartitions(
    requests: readonly { topic: string; count: number }[],
    options: { validateOnly?: boolean } = {},
  ): Promise<void> {
    const response = await this.toController<CreatePartitionsResponse>(ApiKey.CreatePartitions, () => ({
      topics: requests.map((r) => ({ name: r.topic, count: r.count, assignments: null })),
      timeoutMs: this.operationTimeoutMs,
      validateOnly: options.validateOnly ?? false,
    }))
    for (const r of response.results) throwIf(r.errorCode, `topic ${r.name}`, r.errorMessage)
  }

  async describeConfigs(
    resources: readonly (ConfigResource & { keys?: readonly string[] })[],
  ): Promise<(ConfigResource & { entries: ConfigEntry[] })[]> {
    const results = []
    for (const resource of resources) {
      const target = resource.type === 'broker' ? Number(resource.name) : 'any'
      const response = await this.retrying(() =>
        this.client.request<DescribeConfigsResponse>(target, ApiKey.DescribeConfigs, () => ({
          resources: [
            {
              resourceType: RESOURCE_TYPE[resource.type],
              resourceName: resource.name,
              configurationKeys: resource.keys ? [...resource.keys] : null,
            },
          ],
          includeSynonyms: false,
          includeDocumentation: false,
        })),
      )
      for (const r of response.results) {
        throwIf(r.errorCode, `${resource.type} ${resource.name}`, r.errorMessage)
        results.push({ ...resource, entries: r.configs.map(toConfigEntry) })
      }
    }
    return results
  }

  async incrementalAlterConfigs(
    changes: readonly (ConfigResource & {
      ops: readonly { name: string; op: ConfigOperation; value?: string | null }[]
    })[],
    options: { validateOnly?: boolean } = {},
  ): Promise<void> {
    for (const change of changes) {
      const target = change.type === 'broker' ? Number(change.name) : 'any'
      const response = await this.retrying(() =>
        this.client.request<IncrementalAlterConfigsResponse>(target, ApiKey.IncrementalAlterConfigs, () => ({
          resources: [
            {
              resourceType: RESOURCE_TYPE[change.type],
              resourceName: change.name,
              configs: change.ops.map((o) => ({
                name: o.name,
                configOperation: CONFIG_OPERATION[o.op],
                value: o.value ?? null,
              })),
            },
          ],
          validateOnly: options.validateOnly ?? false,
        })),
      )
      for (const r of response.responses)
        throwIf(r.errorCode, `${change.type} ${change.name}`, r.errorMessage)
    }
  }

  /** Creates the ACLs (CreateAcls); the first refused one rejects the call with its error. */
  async createAcls(acls: readonly Acl[]): Promise<void> {
    const response = await this.retrying(() =>
      this.client.request<CreateAclsResponse>('any', ApiKey.CreateAcls, () => ({
        creations: acls.map((acl) => ({
          resourceType: ResourceType[acl.resourceType],
          resourceName: acl.resourceName,
          resourcePatternType: PatternType[acl.patternType],
          principal: acl.principal,
          host: acl.host,
          operation: AclOperation[acl.operation],
          permissionType: AclPermissionType[acl.permissionType],
        })),
      })),
    )
    for (const [i, r] of response.results.entries())
      throwIf(r.errorCode, `ACL ${aclText(acls[i])}`, r.errorMessage)
  }

  /** The ACLs the filter selects (DescribeAcls). */
  async describeAcls(filter: AclFilter): Promise<Acl[]> {
    const response = await this.retrying(() =>
      this.client.request<DescribeAclsResponse>('any', ApiKey.DescribeAcls, () => ({
        resourceTypeFilter: ResourceType[filter.resourceType],
        resourceNameFilter: filter.resourceName,
        patternTypeFilter: PatternType[filter.patternType],
        principalFilter: filter.principal,
        hostFilter: filter.host,
        operation: AclOperation[filter.operation],
        permissionType: AclPermissionType[filter.permissionType],
      })),
    )
    throwIf(response.errorCode, 'DescribeAcls', response.errorMessage)
    return response.resources.flatMap((r) =>
      r.acls.map((a) =>
        toAcl({
          ...a,
          resourceType: r.resourceType,
          resourceName: r.resourceName,
          patternType: r.patternType,
        }),
      ),
    )
  }

  /** Deletes every ACL any filter selects (DeleteAcls) and returns them. */
  async deleteAcls(filters: readonly AclFilter[]): Promise<Acl[]> {
    const response = await this.retrying(() =>
      this.client.request<DeleteAclsResponse>('any', ApiKey.DeleteAcls, () => ({
        filters: filters.map((filter) => ({
          resourceTypeFilter: ResourceType[filter.resourceType],
          resourceNameFilter: filter.resourceName,
          patternTypeFilter: PatternType[filter.patternType],
          principalFilter: filter.principal,
          hostFilter: filter.host,
          operation: AclOperation[filter.operation],
          permissionType: AclPermissionType[filter.permissionType],
        })),
      })),
    )
    const deleted: Acl[] = []
    for (const result of response.filterResults) {
      throwIf(result.errorCode, 'DeleteAcls', result.errorMessage)
      for (const matching of result.matchingAcls) {
        throwIf(matching.errorCode, 'DeleteAcls', matching.errorMessage)
        deleted.push(toAcl(matching))
      }
    }
    return deleted
  }

  /** DescribeCluster when the broker serves it, else Metadata. */
  async describeCluster(): Promise<ClusterDescription> {
    const connection = await this.client.anyConnection()
    if (!connection.supports(ApiKey.DescribeCluster)) {
      const snapshot = await this.client.refreshMetadata()
      return {
        clusterId: snapshot.clusterId,
        controllerId: snapshot.controllerId,
        brokers: sortedBrokers(snapshot.brokers.values()),
      }
    }
    const response = await connection.request<DescribeClusterResponse>(ApiKey.DescribeCluster, {
      includeClusterAuthorizedOperations: false,
      endpointType: 1,
    })
    throwIf(response.errorCode, 'describe cluster', response.errorMessage)
    return {
      clusterId: response.clusterId,
      controllerId: response.controllerId,
      brokers: sortedBrokers(
        response.brokers.map((b) => ({ nodeId: b.brokerId, host: b.host, port: b.port, rack: b.rack })),
      ),
    }
  }

  /** Deletes records below `offset` (-1: the high watermark); returns each partition's new low watermark. */
  async deleteRecords(
    requests: readonly (TopicPartition & { offset: number })[],
  ): Promise<Map<string, number>> {
    return requestByLeader<TopicPartition & { offset: number }, number>(
      this.client,
      requests,
      async (nodeId, group) => {
        const byTopic = new Map<string, { partitionIndex: number; offset: bigint }[]>()
        for (const r of group)
          byTopic.set(r.topic, [
            ...(byTopic.get(r.topic) ?? []),
            { partitionIndex: r.partition, offset: BigInt(r.offset) },
          ])
        const response = await this.client.request<DeleteRecordsResponse>(
          nodeId,
          ApiKey.DeleteRecords,
          () => ({
            topics: [...byTopic].map(([name, partitions]) => ({ name, partitions })),
            timeoutMs: this.operationTimeoutMs,
          }),
        )
        const outcomes = new Map<string, PartitionOutcome<number>>()
        for (const t of response.topics) {
          for (const p of t.partitions) {
            outcomes.set(tpKey({ topic: t.name, partition: p.partitionIndex }), {
              errorCode: p.errorCode,
              value: Number(p.lowWatermark),
            })
          }
        }
        return outcomes
      },
    )
  }

  async listOffsets(
    queries: readonly OffsetQuery[],
    isolationLevel: IsolationLevel = 'read_uncommitted',
  ): Promise<ListedOffset[]> {
    return [...(await listOffsets(this.client, queries, isolationLevel)).values()]
  }

  /** Whether the broker serves the consumer-group APIs. */
  async supportsGroups(): Promise<boolean> {
    const connection = await this.client.anyConnection()
    return GROUP_API_KEYS.every((key) => connection.advertises(key)) && connection.supports(ApiKey.ListGroups)
  }

  /**
   * Every group of the cluster: each broker lists only the groups it coordinates, so
   * ListGroups goes to all of them and the answers are merged (Kafka's AdminClient does the same).
   */
  async listGroups(): Promise<{ groupId: string; protocolType: string; state: string }[]> {
    if (!(await this.supportsGroups())) throw new GroupsNotSupportedError('ListGroups')
    const { brokers } = await this.client.refreshMetadata()
    const answers = await Promise.all(
      [...brokers.keys()].map((nodeId) =>
        this.client.request<ListGroupsResponse>(nodeId, ApiKey.ListGroups, () => ({
          statesFilter: [],
          typesFilter: [],
        })),
      ),
    )
    const groups = new Map<string, { groupId: string; protocolType: string; state: string }>()
    for (const response of answers) {
      throwIf(response.errorCode, 'list groups')
      for (const g of response.groups)
        groups.set(g.groupId, { groupId: g.groupId, protocolType: g.protocolType, state: g.groupState })
    }
    return [...groups.values()].sort((a, b) => a.groupId.localeCompare(b.groupId))
  }

  /**
   * Every transactional id of the cluster with its state (ListTransactions on each broker,
   * which lists those it coordinates; merged as Kafka's AdminClient does). `states`
   * filters by state (Ongoing, PrepareCommit, CompleteAbort, ...); `durationMs`, if
   * given, keeps transactions open longer than that (ListTransactions v1).
   */
  async listTransactions(
    filter: { states?: readonly string[]; producerIds?: readonly bigint[]; durationMs?: number } = {},
  ): Promise<TransactionListing[]> {
    const { brokers } = await this.client.refreshMetadata()
    const answers = await Promise.all(
      [...brokers.keys()].map((nodeId) =>
        this.retrying(() =>
          this.client.request<ListTransactionsResponse>(nodeId, ApiKey.ListTransactions, () => ({
            stateFilters: [...(filter.states ?? [])],
            producerIdFilters: [...(filter.producerIds ?? [])],
            durationFilter: BigInt(filter.durationMs ?? -1),
          })),
        ).then((response) => ({ nodeId, response })),
      ),
    )
    const listed: TransactionListing[] = []
    for (const { nodeId, response } of answers) {
      throwIf(response.errorCode, `list transactions on broker ${nodeId}`)
      for (const t of response.transactionStates)
        listed.push({
          transactionalId: t.transactionalId,
          producerId: t.producerId,
          state: t.transactionState,
          coordinator: nodeId,
        })
    }
    return listed.sort((a, b) => a.transactionalId.localeCompare(b.transactionalId))
  }

  /** One transactional id's state at its coordinator (DescribeTransactions). */
  async describeTransaction(transactionalId: string): Promise<TransactionDescription> {
    return this.retrying(async () => {
      const coordinator = await findCoordinator(this.client, transactionalId, CoordinatorKeyType.TRANSACTION)
      const response = await this.client.request<DescribeTransactionsResponse>(
        coordinator,
        ApiKey.DescribeTransactions,
        () => ({ transactionalIds: [transactionalId] }),
      )
      const t = response.transactionStates[0]
      if (!t)
        throw new KafkaProtocolError(ErrorCode.UNKNOWN_SERVER_ERROR, 'empty DescribeTransactions answer')
      throwIf(t.errorCode, `transactional id ${transactionalId}`)
      return {
        transactionalId: t.transactionalId,
        state: t.transactionState,
        coordinator,
        producerId: t.producerId,
        producerEpoch: t.producerEpoch,
        transactionTimeoutMs: t.transactionTimeoutMs,
        transactionStartTimeMs: Number(t.transactionStartTimeMs),
        partitions: t.topics.flatMap((topic) =>
          topic.partitions.map((partition) => ({ topic: topic.topic, partition })),
        ),
      }
    })
  }

  /** The broker coordinating `groupId` (FindCoordinator), retried while none is available. */
  async findCoordinator(groupId: string): Promise<number> {
    return this.retrying(() => findGroupCoordinator(this.client, groupId))
  }

  /** State, protocol, members and their assignments of each group (DescribeGroups at its coordinator). */
  async describeGroups(groupIds: readonly string[]): Promise<GroupDescription[]> {
    const results: GroupDescription[] = []
    for (const groupId of groupIds) {
      results.push(
        await this.toCoordinator(groupId, async (coordinator) => {
          const response = await this.client.request<DescribeGroupsResponse>(
            coordinator,
            ApiKey.DescribeGroups,
            () => ({ groups: [groupId], includeAuthorizedOperations: false }),
          )
          const g = response.groups[0]
          throwIf(g.errorCode, `group ${groupId}`)
          return {
            groupId: g.groupId,
            state: g.groupState,
            protocolType: g.protocolType,
            protocol: g.protocolData,
            coordinator,
            members: g.members.map((m) => ({
              memberId: m.memberId,
              groupInstanceId: m.groupInstanceId,
              clientId: m.clientId,
              clientHost: m.clientHost,
              assignment: g.protocolType === 'consumer' ? decodeAssignment(m.memberAssignment) : [],
            })),
          }
        }),
      )
    }
    return results
  }

  /**
   * Committed offsets of a group (OffsetFetch), of `topics` or of every topic it committed
   * for. `requireStable` (default false, as Java's AdminClient) waits out offsets pending
   * in an open transaction (UNSTABLE_OFFSET_COMMIT, retried) instead of answering the
   * committed ones.
   */
  async listGroupOffsets(
    groupId: string,
    topics?: readonly string[],
    options: { requireStable?: boolean } = {},
  ): Promise<GroupOffset[]> {
    const requireStable = options.requireStable ?? false
    // Named topics are asked for partition by partition: a request for all of a group's
    // offsets lists only committed ones, so a partition whose first commit is still pending
    // in a transaction would not answer UNSTABLE_OFFSET_COMMIT (Kafka's fetchAllOffsets).
    const asked = topics ? await this.partitionsOf(topics) : null
    return this.toCoordinator(groupId, async (coordinator) => {
      const response = await this.client.request<OffsetFetchResponse>(
        coordinator,
        ApiKey.OffsetFetch,
        (version) =>
          version >= 8
            ? {
                groupId: '',
                topics: [],
                groups: [
                  {
                    groupId,
                    memberId: null,
                    memberEpoch: -1,
                    topics: asked?.map((t) => ({ name: t.name, partitionIndexes: t.partitions })) ?? null,
                  },
                ],
                requireStable,
              }
            : {
                groupId,
                topics: asked?.map((t) => ({ name: t.name, partitionIndexes: t.partitions })) ?? null,
                groups: [],
                requireStable: requireStable && version >= 7,
              },
      )
      const group = response.groups.length > 0 ? response.groups[0] : response
      throwIf(group.errorCode, `offsets of group ${groupId}`)
      const offsets: GroupOffset[] = []
      for (const t of group.topics)
        for (const p of t.partitions) {
          if (topics && !topics.includes(t.name)) continue
          throwIf(p.errorCode, `offsets of group ${groupId} on ${t.name}-${p.partitionIndex}`)
          // A partition asked for by name without a committed offset answers -1.
          if (p.committedOffset < 0n) continue
          offsets.push({
            topic: t.name,
            partition: p.partitionIndex,
            offset: Number(p.committedOffset),
            metadata: p.metadata,
          })
        }
      return offsets.sort((a, b) => a.topic.localeCompare(b.topic) || a.partition - b.partition)
    })
  }

  /**
   * Commits offsets for a group from outside it (OffsetCommit with generation -1 and no
   * member id, as Kafka's admin client does): the coordinator accepts it only while the
   * group has no members (else UNKNOWN_MEMBER_ID or REBALANCE_IN_PROGRESS).
   */
  async alterGroupOffsets(
    groupId: string,
    offsets: readonly (TopicPartition & { offset: number; metadata?: string | null })[],
  ): Promise<void> {
    const byTopic = new Map<string, typeof offsets>()
    for (const o of offsets) byTopic.set(o.topic, [...(byTopic.get(o.topic) ?? []), o])
    await this.toCoordinator(groupId, async (coordinator) => {
      const response = await this.client.request<OffsetCommitResponse>(
        coordinator,
        ApiKey.OffsetCommit,
        () => ({
          groupId,
          generationIdOrMemberEpoch: -1,
          memberId: '',
          groupInstanceId: null,
          retentionTimeMs: -1n,
          topics: [...byTopic].map(([name, list]) => ({
            name,
            partitions: list.map((o) => ({
              partitionIndex: o.partition,
              committedOffset: BigInt(o.offset),
              committedLeaderEpoch: -1,
              commitTimestamp: -1n,
              committedMetadata: o.metadata ?? '',
            })),
          })),
        }),
      )
      for (const t of response.topics)
        for (const p of t.partitions)
          throwIf(p.errorCode, `group ${groupId} on ${t.name}-${p.partitionIndex}`)
    })
  }

  /** The quotas of every entity the filter matches (strict: entities with no other type). */
  async describeClientQuotas(
    components: readonly ClientQuotaFilterComponent[] = [],
    options: { strict?: boolean } = {},
  ): Promise<{ entity: ClientQuotaEntity; values: Record<string, number> }[]> {
    const response = await this.retrying(() =>
      this.client.request<DescribeClientQuotasResponse>('any', ApiKey.DescribeClientQuotas, () => ({
        components: components.map((c) => ({
          entityType: c.entityType,
          matchType: c.match === undefined ? MATCH_SPECIFIED : c.match === null ? MATCH_DEFAULT : MATCH_EXACT,
          match: c.match ?? null,
        })),
        strict: options.strict ?? false,
      })),
    )
    throwIf(response.errorCode, 'describe client quotas', response.errorMessage)
    return (response.entries ?? []).map((e) => ({
      entity: Object.fromEntries(
        e.entity.map((p) => [p.entityType === 'user' ? 'user' : 'clientId', p.entityName]),
      ) as ClientQuotaEntity,
      values: Object.fromEntries(e.values.map((v) => [v.key, v.value])),
    }))
  }

  /** Sets and removes quota keys; throws the first entity's error (the others are applied). */
  async alterClientQuotas(
    alterations: readonly ClientQuotaAlteration[],
    options: { validateOnly?: boolean } = {},
  ): Promise<void> {
    const response = await this.retrying(() =>
      this.client.request<AlterClientQuotasResponse>('any', ApiKey.AlterClientQuotas, () => ({
        entries: alterations.map((a) => ({
          entity: [
            ...(a.entity.user !== undefined ? [{ entityType: 'user', entityName: a.entity.user }] : []),
            ...(a.entity.clientId !== undefined
              ? [{ entityType: 'client-id', entityName: a.entity.clientId }]
              : []),
          ],
          ops: a.ops.map((op) => ({ key: op.key, value: op.value ?? 0, remove: op.value === null })),
        })),
        validateOnly: options.validateOnly ?? false,
      })),
    )
    for (const entry of response.entries) {
      const what = entry.entity.map((p) => `${p.entityType}=${p.entityName ?? '<default>'}`).join(',')
      throwIf(entry.errorCode, `client quotas of ${what}`, entry.errorMessage)
    }
  }

  close(): void {
    if (this.ownsClient) this.client.close()
  }

  /** A request to the group's coordinator, found again after NOT_COORDINATOR and the like. */
  private toCoordinator<T>(groupId: string, operation: (coordinator: number) => Promise<T>): Promise<T> {
    return this.retrying(async () => operation(await this.findCoordinator(groupId)))
  }

  private createTopicsRequest(topics: readonly NewTopic[], validateOnly: boolean): CreateTopicsRequest {
    return {
      topics: topics.map((t) => ({
        name: t.topic,
        numPartitions: t.assignments ? -1 : (t.numPartitions ?? -1),
        replicationFactor: t.assignments ? -1 : (t.replicationFactor ?? -1),
        assignments: (t.assignments ?? []).map((brokerIds, partitionIndex) => ({
          partitionIndex,
          brokerIds: [...brokerIds],
        })),
        configs: Object.entries(t.configs ?? {}).map(([name, value]) => ({ name, value })),
      })),
      timeoutMs: this.operationTimeoutMs,
      validateOnly,
    }
  }

  /** A controller request, retried after a metadata refresh on NOT_CONTROLLER or a lost connection. */
  private toController<T extends object>(apiKey: number, build: (version: number) => unknown): Promise<T> {
    return this.retrying(async () => {
      const response = await this.client.request<T>('controller', apiKey, build)
      if (hasNotController(response)) throw new KafkaProtocolError(ErrorCode.NOT_CONTROLLER)
      return response
    })
  }

  private async retrying<T>(operation: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await operation()
      } catch (error) {
        const notController =
          error instanceof KafkaProtocolError && error.errorCode === ErrorCode.NOT_CONTROLLER
        if ((!isRetriableError(error) && !notController) || attempt >= ATTEMPTS_MAX) throw error
        await sleep(this.client.clock, this.client.backoff.delayMs(attempt))
        await this.client.refreshMetadata().catch(() => undefined)
      }
    }
  }
}

function nameOf<T extends Record<string, number>>(table: T, code: number): keyof T {
  const name = (Object.keys(table) as (keyof T)[]).find((key) => table[key] === code)
  if (name === undefined)
    throw new KafkaProtocolError(ErrorCode.UNKNOWN_SERVER_ERROR, `unknown ACL code ${code}`)
  return name
}

function toAcl(wire: {
  resourceType: number
  resourceName: string
  patternType: number
  principal: string
  host: string
  operation: number
  permissionType: number
}): Acl {
  return {
    resourceType: nameOf(ResourceType, wire.resourceType) as AclResourceTypeName,
    resourceName: wire.resourceName,
    patternType: nameOf(PatternType, wire.patternType) as Acl['patternType'],
    principal: wire.principal,
    host: wire.host,
    operation: nameOf(AclOperation, wire.operation) as AclOperationName,
    permissionType: nameOf(AclPermissionType, wire.permissionType) as Acl['permissionType'],
  }
}

/** kafka-acls.sh's rendering of an ACL. */
export function aclText(acl: Acl): string {
  return `(principal=${acl.principal}, host=${acl.host}, operation=${acl.operation}, permissionType=${acl.permissionType}) on ${acl.resourceType}:${acl.patternType}:${acl.resourceName}`
}

function throwIf(errorCode: number, what: string, message?: string | null): void {
  if (errorCode !== ErrorCode.NONE)
    throw new KafkaProtocolError(errorCode, message ? `${what}: ${message}` : what)
}

/** A whole response answered NOT_CONTROLLER (the request must go to the new controller). */
function hasNotController(response: object): boolean {
  const items = response as {
    topics?: { errorCode: number }[]
    responses?: { errorCode: number }[]
    results?: { errorCode: number }[]
  }
  const list = items.topics ?? items.responses ?? items.results ?? []
  return list.length > 0 && list.every((item) => item.errorCode === ErrorCode.NOT_CONTROLLER)
}

function toConfigEntry(c: DescribeConfigsResponse['results'][number]['configs'][number]): ConfigEntry {
  const source = CONFIG_SOURCE[c.configSource] ?? 'UNKNOWN'
  return {
    name: c.name,
    value: c.value,
    readOnly: c.readOnly,
    isDefault: c.configSource === 5 || (c.configSource < 0 && c.isDefault),
    isSensitive: c.isSensitive,
    source,
  }
}

/** The partitions of a consumer-protocol assignment (version-prefixed ConsumerProtocolAssignment). */
function decodeAssignment(bytes: Buffer): TopicPartition[] {
  if (bytes.length < 2) return []
  try {
    const reader = new Reader(bytes)
    const version = Math.min(reader.readInt16(), 3)
    const assignment = decodeConsumerProtocolAssignment(reader, version)
    return assignment.assignedPartitions.flatMap((t) =>
      t.partitions.map((partition) => ({ topic: t.topic, partition })),
    )
  } catch {
    return []
  }
}

function sortedBrokers(brokers: Iterable<BrokerNode>): BrokerNode[] {
  return [...brokers].sort((a, b) => a.nodeId - b.nodeId)
}
