/**
 * The coordinators' settings (transaction, group, share-partition and share coordinator)
 * read from the broker's typed configuration: Kafka's transaction.*, group.* and
 * group.share.* properties.
 */
import type { GroupCoordinatorConfig } from '../coordinator/group-coordinator.js'
import {
  DEFAULT_SHARE_COORDINATOR_CONFIG,
  type ShareCoordinatorConfig,
} from '../coordinator/share/share-coordinator.js'
import type { TransactionCoordinatorConfig } from '../coordinator/transaction/transaction-coordinator.js'
import type { BrokerConfig } from './broker-config.js'
import type { ShareAutoOffsetReset, SharePartitionManagerConfig } from './share/share-partition-manager.js'

/** The transaction coordinator's settings from the broker's transaction.* properties. */
export function transactionCoordinatorConfig(config: BrokerConfig): TransactionCoordinatorConfig {
  const value = (name: string): number => config.values.get(name) as number
  return {
    transactionStateLogNumPartitions: value('transaction.state.log.num.partitions'),
    transactionStateLogReplicationFactor: value('transaction.state.log.replication.factor'),
    transactionStateLogMinIsr: value('transaction.state.log.min.isr'),
    transactionStateLogSegmentBytes: value('transaction.state.log.segment.bytes'),
    transactionStateLogLoadBufferSize: value('transaction.state.log.load.buffer.size'),
    transactionMaxTimeoutMs: value('transaction.max.timeout.ms'),
    transactionalIdExpirationMs: value('transactional.id.expiration.ms'),
    abortTimedOutTransactionCleanupIntervalMs: value(
      'transaction.abort.timed.out.transaction.cleanup.interval.ms',
    ),
    removeExpiredTransactionalIdCleanupIntervalMs: value(
      'transaction.remove.expired.transaction.cleanup.interval.ms',
    ),
    offsetsTopicNumPartitions: value('offsets.topic.num.partitions'),
    requestTimeoutMs: value('request.timeout.ms'),
    addPartitionsRetryBackoffMs: value('add.partitions.to.txn.retry.backoff.ms'),
    addPartitionsRetryBackoffMaxMs: value('add.partitions.to.txn.retry.backoff.max.ms'),
    // Kafka's marker channel retries on its network client's poll; these bound ours.
    retryBackoffMs: 100,
    retryBackoffMaxMs: 1000,
  }
}

/** The coordinator's settings from the broker's group.* and offsets.* properties. */
export function groupCoordinatorConfig(config: BrokerConfig): GroupCoordinatorConfig {
  const value = (name: string): number => config.values.get(name) as number
  return {
    groupMinSessionTimeoutMs: value('group.min.session.timeout.ms'),
    groupMaxSessionTimeoutMs: value('group.max.session.timeout.ms'),
    groupInitialRebalanceDelayMs: value('group.initial.rebalance.delay.ms'),
    groupMaxSize: value('group.max.size'),
    offsetMetadataMaxBytes: value('offset.metadata.max.bytes'),
    offsetsRetentionMs: value('offsets.retention.minutes') * 60_000,
    offsetsTopicNumPartitions: value('offsets.topic.num.partitions'),
    offsetsTopicReplicationFactor: value('offsets.topic.replication.factor'),
    offsetsTopicSegmentBytes: value('offsets.topic.segment.bytes'),
    offsetsCommitTimeoutMs: value('offsets.commit.timeout.ms'),
    offsetsRetentionCheckIntervalMs: value('offsets.retention.check.interval.ms'),
    offsetsLoadBufferSize: value('offsets.load.buffer.size'),
    rebalanceProtocols: config.values.get('group.coordinator.rebalance.protocols') as string[],
    consumerGroup: {
      heartbeatIntervalMs: value('group.consumer.heartbeat.interval.ms'),
      sessionTimeoutMs: value('group.consumer.session.timeout.ms'),
      assignors: config.values.get('group.consumer.assignors') as string[],
      maxSize: value('group.consumer.max.size'),
      assignmentIntervalMs: value('group.consumer.assignment.interval.ms'),
    },
    shareGroup: {
      heartbeatIntervalMs: value('group.share.heartbeat.interval.ms'),
      sessionTimeoutMs: value('group.share.session.timeout.ms'),
      maxSize: value('group.share.max.size'),
      assignmentIntervalMs: value('group.share.assignment.interval.ms'),
    },
    streamsGroup: {
      heartbeatIntervalMs: value('group.streams.heartbeat.interval.ms'),
      sessionTimeoutMs: value('group.streams.session.timeout.ms'),
      maxSize: value('group.streams.max.size'),
      numStandbyReplicas: value('group.streams.num.standby.replicas'),
      taskOffsetIntervalMs: value('group.streams.task.offset.interval.ms'),
      acceptableRecoveryLag: value('group.streams.acceptable.recovery.lag'),
      initialRebalanceDelayMs: value('group.streams.initial.rebalance.delay.ms'),
      assignmentIntervalMs: value('group.streams.assignment.interval.ms'),
      storesTopologyDescriptions: config.values.get('group.streams.topology.description.plugin.class') !== '',
    },
  }
}

/** The share-partitions' settings (KIP-932) from the broker's group.share.* properties. */
export function sharePartitionManagerConfig(config: BrokerConfig): SharePartitionManagerConfig {
  const value = (name: string): number => config.values.get(name) as number
  return {
    recordLockDurationMs: value('group.share.record.lock.duration.ms'),
    deliveryCountLimit: value('group.share.delivery.count.limit'),
    maxInFlightRecords: value('group.share.partition.max.record.locks'),
    maxShareSessions: value('group.share.max.share.sessions'),
    autoOffsetReset: config.values.get('tidelog.share.auto.offset.reset') as ShareAutoOffsetReset,
  }
}

/** The share coordinator's settings from the broker's share.coordinator.* properties. */
export function shareCoordinatorConfig(config: BrokerConfig): ShareCoordinatorConfig {
  const value = (name: string): number => config.values.get(name) as number
  return {
    ...DEFAULT_SHARE_COORDINATOR_CONFIG,
    numPartitions: value('share.coordinator.state.topic.num.partitions'),
    replicationFactor: value('share.coordinator.state.topic.replication.factor'),
    minIsr: value('share.coordinator.state.topic.min.isr'),
    snapshotUpdateRecordsPerSnapshot: value('share.coordinator.snapshot.update.records.per.snapshot'),
    writeTimeoutMs: value('share.coordinator.write.timeout.ms'),
  }
}
