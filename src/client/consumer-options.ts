/**
 * The consumer's options (Kafka's ConsumerConfig names in camelCase) and their resolution:
 * defaults, bounds and the choice between the classic and the consumer group protocol,
 * checked when the consumer is built.
 */
import type { ClientOptions, KafkaClient } from './client.js'
import { InvalidArgumentError } from './errors.js'
import { type AssignorName, type PartitionAssignor, resolveAssignors } from './group/assignors.js'
import type { ConsumerProtocolOptions } from './group/consumer-protocol-session.js'
import type { RebalanceListener, SessionOptions } from './group/session.js'
import type { IsolationLevel } from './offsets.js'
import { intOption, oneOf } from './options.js'

export type OffsetResetPolicy = 'earliest' | 'latest' | 'none'

export interface ConsumerOptions extends Partial<ClientOptions> {
  client?: KafkaClient
  /** auto.offset.reset (default 'latest'): where to start without a position, or after OFFSET_OUT_OF_RANGE. */
  autoOffsetReset?: OffsetResetPolicy
  /** fetch.max.wait.ms (default 500). */
  fetchMaxWaitMs?: number
  /** fetch.min.bytes (default 1). */
  fetchMinBytes?: number
  /** fetch.max.bytes (default 52428800). */
  fetchMaxBytes?: number
  /** max.partition.fetch.bytes (default 1048576). */
  maxPartitionFetchBytes?: number
  /** max.poll.records (default 500). */
  maxPollRecords?: number
  /** isolation.level (default 'read_uncommitted'). */
  isolationLevel?: IsolationLevel
  /** group.id: the consumer group `subscribe()` joins and `commit()` commits for. */
  groupId?: string
  /**
   * group.protocol (default 'classic'): 'consumer' is KIP-848's protocol (ConsumerGroupHeartbeat,
   * server-side assignors); session.timeout.ms, heartbeat.interval.ms and
   * partition.assignment.strategy are then the broker's business and may not be set.
   */
  groupProtocol?: 'classic' | 'consumer'
  /** group.remote.assignor (consumer protocol): the server-side assignor to ask for. */
  groupRemoteAssignor?: string
  /** group.instance.id: static membership (no LeaveGroup on close; rejoining keeps the assignment). */
  groupInstanceId?: string
  /** session.timeout.ms (default 45000). */
  sessionTimeoutMs?: number
  /** heartbeat.interval.ms (default 3000). */
  heartbeatIntervalMs?: number
  /** max.poll.interval.ms (default 300000): longer without a poll and the member leaves the group. */
  maxPollIntervalMs?: number
  /** The JoinGroup rebalance timeout (default: max.poll.interval.ms, as Java). */
  rebalanceTimeoutMs?: number
  /** partition.assignment.strategy (default ['range']): assignors offered, preferred first. */
  partitionAssignmentStrategy?: readonly (AssignorName | PartitionAssignor)[]
  /** enable.auto.commit (default true with a groupId). */
  enableAutoCommit?: boolean
  /** auto.commit.interval.ms (default 5000). */
  autoCommitIntervalMs?: number
  /** Called after the group hands this member partitions (awaited before the poll goes on). */
  onPartitionsAssigned?: RebalanceListener
  /** Called before a rebalance or close takes partitions away (after their commit). */
  onPartitionsRevoked?: RebalanceListener
}

export interface ResolvedConsumerOptions {
  autoOffsetReset: OffsetResetPolicy
  fetchMaxWaitMs: number
  fetchMinBytes: number
  fetchMaxBytes: number
  maxPartitionFetchBytes: number
  maxPollRecords: number
  isolationLevel: IsolationLevel
  group: SessionOptions | null
  /** Set instead of `group` with groupProtocol 'consumer'. */
  consumerGroup: ConsumerProtocolOptions | null
}

function resolveConsumerProtocolOptions(options: ConsumerOptions): ConsumerProtocolOptions | null {
  if (options.groupProtocol !== 'consumer' || options.groupId === undefined) return null
  if (typeof options.groupId !== 'string' || options.groupId === '')
    throw new InvalidArgumentError('group.id must be a non-empty string')
  for (const [name, value] of [
    ['session.timeout.ms', options.sessionTimeoutMs],
    ['heartbeat.interval.ms', options.heartbeatIntervalMs],
    ['partition.assignment.strategy', options.partitionAssignmentStrategy],
  ] as const)
    if (value !== undefined)
      throw new InvalidArgumentError(
        `${name} is not supported with groupProtocol 'consumer' (the broker sets it)`,
      )
  const maxPollIntervalMs = intOption('max.poll.interval.ms', options.maxPollIntervalMs, 300000, 1)
  return {
    groupId: options.groupId,
    groupInstanceId: options.groupInstanceId ?? null,
    remoteAssignor: options.groupRemoteAssignor ?? null,
    rebalanceTimeoutMs: intOption('rebalance.timeout.ms', options.rebalanceTimeoutMs, maxPollIntervalMs, 1),
    enableAutoCommit: options.enableAutoCommit ?? true,
    autoCommitIntervalMs: intOption('auto.commit.interval.ms', options.autoCommitIntervalMs, 5000, 0),
    onPartitionsAssigned: options.onPartitionsAssigned,
    onPartitionsRevoked: options.onPartitionsRevoked,
  }
}

function resolveGroupOptions(options: ConsumerOptions): SessionOptions | null {
  const groupId = options.groupId
  if (groupId === undefined) return null
  const protocol = options.groupProtocol ?? 'classic'
  if (protocol !== 'classic' && protocol !== 'consumer')
    throw new InvalidArgumentError(`group.protocol must be 'classic' or 'consumer', not ${String(protocol)}`)
  if (protocol === 'consumer') return null
  if (typeof groupId !== 'string' || groupId === '')
    throw new InvalidArgumentError('group.id must be a non-empty string')
  const sessionTimeoutMs = intOption('session.timeout.ms', options.sessionTimeoutMs, 45000, 1)
  const heartbeatIntervalMs = intOption('heartbeat.interval.ms', options.heartbeatIntervalMs, 3000, 1)
  if (heartbeatIntervalMs >= sessionTimeoutMs)
    throw new InvalidArgumentError('heartbeat.interval.ms must be lower than session.timeout.ms')
  const maxPollIntervalMs = intOption('max.poll.interval.ms', options.maxPollIntervalMs, 300000, 1)
  return {
    groupId,
    groupInstanceId: options.groupInstanceId ?? null,
    sessionTimeoutMs,
    heartbeatIntervalMs,
    maxPollIntervalMs,
    rebalanceTimeoutMs: intOption('rebalance.timeout.ms', options.rebalanceTimeoutMs, maxPollIntervalMs, 1),
    assignors: resolveAssignors(options.partitionAssignmentStrategy),
    enableAutoCommit: options.enableAutoCommit ?? true,
    autoCommitIntervalMs: intOption('auto.commit.interval.ms', options.autoCommitIntervalMs, 5000, 0),
    onPartitionsAssigned: options.onPartitionsAssigned,
    onPartitionsRevoked: options.onPartitionsRevoked,
  }
}

export function resolveConsumerOptions(options: ConsumerOptions): ResolvedConsumerOptions {
  return {
    group: resolveGroupOptions(options),
    consumerGroup: resolveConsumerProtocolOptions(options),
    autoOffsetReset: oneOf('auto.offset.reset', options.autoOffsetReset, 'latest', [
      'earliest',
      'latest',
      'none',
    ]),
    fetchMaxWaitMs: intOption('fetch.max.wait.ms', options.fetchMaxWaitMs, 500, 0),
    fetchMinBytes: intOption('fetch.min.bytes', options.fetchMinBytes, 1, 0),
    fetchMaxBytes: intOption('fetch.max.bytes', options.fetchMaxBytes, 52428800, 1),
    maxPartitionFetchBytes: intOption(
      'max.partition.fetch.bytes',
      options.maxPartitionFetchBytes,
      1048576,
      1,
    ),
    maxPollRecords: intOption('max.poll.records', options.maxPollRecords, 500, 1),
    isolationLevel: oneOf<IsolationLevel>('isolation.level', options.isolationLevel, 'read_uncommitted', [
      'read_uncommitted',
      'read_committed',
    ]),
  }
}
