/**
 * The admin client's values, kept apart from the client as Kafka's admin package keeps them
 * apart from KafkaAdminClient (NewTopic, TopicDescription, ConfigEntry, AclBinding ...): what
 * callers pass and get back.
 */
import type { AclOperation, ResourceType } from '../protocol/acl-codes.js'
import type { TopicPartition } from './leader-requests.js'
import type { BrokerNode, PartitionInfo } from './metadata.js'

export interface NewTopic {
  topic: string
  /** -1: the broker's num.partitions. */
  numPartitions?: number
  /** -1: the broker's default.replication.factor. */
  replicationFactor?: number
  configs?: Readonly<Record<string, string>>
  /** Manual placement: replica broker ids per partition (then numPartitions/replicationFactor stay -1). */
  assignments?: readonly (readonly number[])[]
}

export interface TopicDescription {
  name: string
  topicId: string
  isInternal: boolean
  partitions: PartitionInfo[]
}

export type ConfigResourceType = 'topic' | 'broker'

export type ConfigOperation = 'set' | 'delete' | 'append' | 'subtract'

export interface ConfigEntry {
  name: string
  value: string | null
  readOnly: boolean
  isDefault: boolean
  isSensitive: boolean
  source: string
}

export interface ConfigResource {
  type: ConfigResourceType
  name: string
}

export interface GroupMemberDescription {
  memberId: string
  groupInstanceId: string | null
  clientId: string
  clientHost: string
  /** The partitions of the member's assignment (consumer protocol); empty when not decodable. */
  assignment: TopicPartition[]
}

export interface GroupDescription {
  groupId: string
  /** Stable, PreparingRebalance, CompletingRebalance, Empty, Dead. */
  state: string
  protocolType: string
  /** The selected assignor (e.g. range). */
  protocol: string
  /** The broker coordinating the group. */
  coordinator: number
  members: GroupMemberDescription[]
}

export interface GroupOffset extends TopicPartition {
  /** -1: nothing committed. */
  offset: number
  metadata: string | null
}

export interface ClusterDescription {
  clusterId: string | null
  controllerId: number
  brokers: BrokerNode[]
}

/** A client quota entity (KIP-546): a null name is that type's default; absent, not part of it. */
export interface ClientQuotaEntity {
  readonly user?: string | null
  readonly clientId?: string | null
}

/** One filter component: a name, null for the default, undefined for any name of the type. */
export interface ClientQuotaFilterComponent {
  readonly entityType: 'user' | 'client-id'
  readonly match?: string | null
}

export interface ClientQuotaAlteration {
  readonly entity: ClientQuotaEntity
  /** A number sets the quota key (producer_byte_rate, consumer_byte_rate, request_percentage); null removes it. */
  readonly ops: readonly { readonly key: string; readonly value: number | null }[]
}

export type AclResourceTypeName = Exclude<keyof typeof ResourceType, 'UNKNOWN' | 'ANY'>

export type AclOperationName = Exclude<keyof typeof AclOperation, 'UNKNOWN' | 'ANY'>

/** One ACL: `principal` (User:name or User:*) from `host` (an IP or *) may or may not do `operation`. */
export interface Acl {
  readonly resourceType: AclResourceTypeName
  readonly resourceName: string
  readonly patternType: 'LITERAL' | 'PREFIXED'
  readonly principal: string
  readonly host: string
  readonly operation: AclOperationName
  readonly permissionType: 'ALLOW' | 'DENY'
}

/** Selects ACLs: ANY and null match everything; MATCH selects the ACLs that apply to a name. */
export interface AclFilter {
  readonly resourceType: AclResourceTypeName | 'ANY'
  readonly resourceName: string | null
  readonly patternType: 'LITERAL' | 'PREFIXED' | 'ANY' | 'MATCH'
  readonly principal: string | null
  readonly host: string | null
  readonly operation: AclOperationName | 'ANY'
  readonly permissionType: 'ALLOW' | 'DENY' | 'ANY'
}

export interface TransactionListing {
  readonly transactionalId: string
  readonly producerId: bigint
  /** Kafka's names: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, ... */
  readonly state: string
  readonly coordinator: number
}

export interface TransactionDescription {
  readonly transactionalId: string
  readonly state: string
  readonly coordinator: number
  readonly producerId: bigint
  readonly producerEpoch: number
  readonly transactionTimeoutMs: number
  /** -1 when no transaction is open. */
  readonly transactionStartTimeMs: number
  readonly partitions: readonly { topic: string; partition: number }[]
}
