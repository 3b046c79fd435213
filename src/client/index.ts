/**
 * tidelog's Kafka client: Producer, Consumer (assign mode or group member), ShareConsumer (KIP-932
 * share groups) and Admin over one shared core
 * (KafkaClient: connections per broker and purpose, ApiVersions negotiation, metadata).
 * It imports only the protocol and common layers, so it works against any Kafka-compatible
 * broker, not just tidelog.
 */

export type { ByteStream } from '../common/network.js'
export {
  Admin,
  type AdminOptions,
  type ClusterDescription,
  type ConfigEntry,
  type ConfigOperation,
  type ConfigResourceType,
  type NewTopic,
  type TopicDescription,
} from './admin.js'
export {
  type ClientOptions,
  type ConnectionPurpose,
  KafkaClient,
  type ThrottleEvent,
  type ThrottleStats,
} from './client.js'
export type { ClientConnector, ConnectTarget } from './connector.js'
export {
  type AssignedPartition,
  Consumer,
  type ConsumerBatch,
  type ConsumerOptions,
  type ConsumerRecord,
  type OffsetResetPolicy,
  type OffsetToCommit,
  type RebalanceListener,
  type TopicPartition,
} from './consumer.js'
export * from './errors.js'
export {
  describeFeatures,
  type FeatureDescription,
  type FeatureLevelUpdate,
  type FeatureMetadata,
  type FeatureUpgradeType,
  updateFeatures,
} from './features.js'
export {
  type AssignorName,
  type GroupAssignment,
  type MemberSubscription,
  type PartitionAssignor,
  type RebalanceProtocol,
  rangeAssignor,
  roundRobinAssignor,
} from './group/assignors.js'
export { CommitFailedError } from './group/errors.js'
export type { CloseOptions } from './group/session.js'
export { createCooperativeStickyAssignor, createStickyAssignor } from './group/sticky-assignor.js'
export type { BrokerNode, PartitionInfo, TopicInfo } from './metadata.js'
export type { ListedOffset, OffsetSpec } from './offsets.js'
export { murmur2, partitionForKey, StickyPartitioner, toPositive } from './partitioner.js'
export {
  type Acks,
  type CompressionName,
  type PartitionerFn,
  Producer,
  type ProducerOptions,
  type ProducerRecord,
  type RecordMetadata,
} from './producer.js'
export type { SaslOptions, SslOptions } from './security-options.js'
export { ShareConsumerStateError } from './share/errors.js'
export {
  type AcknowledgementMode,
  type AcknowledgementResult,
  type AcknowledgeType,
  type ShareAcquireMode,
  ShareConsumer,
  type ShareConsumerOptions,
  type ShareConsumerRecord,
} from './share-consumer.js'
export { tcpConnector } from './tcp-connector.js'
export type { TransactionState } from './transaction-manager.js'
export type { ConsumerGroupMetadata, TransactionOffset } from './transaction-requests.js'
