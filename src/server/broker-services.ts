import type { Clock } from '../common/clock.js'
import type { FileSystem } from '../common/file-system.js'
import type { Logger } from '../common/logger.js'
import type { Transport } from '../common/network.js'
import type { TransactionMarkerListener, TransactionVerifier } from '../common/transaction.js'
import type { GroupCoordinator } from '../coordinator/group-coordinator.js'
import type { ShareCoordinator } from '../coordinator/share/share-coordinator.js'
import type { TransactionCoordinator } from '../coordinator/transaction/transaction-coordinator.js'
import type { BrokerId, ClusterImage } from '../metadata/cluster-image.js'
import type { FeatureMetadata } from '../metadata/feature-control.js'
import type { ProducerIdManager } from '../metadata/producer-id-manager.js'
import type { TopicAdmin } from '../metadata/topic-admin.js'
import type { ReplicaManager } from '../replication/replica-manager.js'
import type { AclStore } from '../security/authorizer/acl-store.js'
import type { Authorizer } from '../security/authorizer/standard-authorizer.js'
import type { DelegationTokenStore } from '../security/delegation-tokens.js'
import type { ScramCredentialStore } from '../security/scram-credentials.js'
import type { LogManager } from '../storage/log-manager.js'
import type { BrokerConfig } from './broker-config.js'
import type { FetchSessionCache } from './fetch-session-cache.js'
import type { ClientQuotaStore } from './quota/client-quota-store.js'
import type { ClientQuotas } from './quota/client-quotas.js'
import type { ClientMetricsManager } from './telemetry/client-metrics-manager.js'

/** The one door from handlers to the broker's services (Redpanda's request_context idea). */
export interface BrokerServices {
  readonly nodeId: BrokerId
  readonly config: BrokerConfig
  /** The API versions this broker serves, ordered by api key (ApiVersions). */
  apiVersionRanges(): { apiKey: number; minVersion: number; maxVersion: number }[]
  readonly clock: Clock
  /** The clock with one timing wheel for per-request timers (see Broker.timingWheel). */
  readonly timingWheel: Clock
  /** The log directories' disk (DescribeLogDirs' sizes). */
  readonly fileSystem: FileSystem
  readonly logger: Logger
  readonly replicaManager: ReplicaManager
  readonly logManager: LogManager
  readonly fetchSessions: FetchSessionCache
  /** Cluster-wide unique producer ids for InitProducerId. */
  readonly producerIdManager: ProducerIdManager
  /** Consumer groups and committed offsets of the __consumer_offsets partitions led here. */
  readonly groupCoordinator: GroupCoordinator
  /** Transactions of the __transaction_state partitions led here. */
  readonly transactionCoordinator: TransactionCoordinator
  /** Share-partition state (KIP-932) of the __share_group_state partitions led here. */
  readonly shareCoordinator: ShareCoordinator
  /**
   * Every metadata change an admin request makes (topics, partitions, elections,
   * reassignments, configs): validated, placed and committed on the controller's side.
   */
  readonly topicAdmin: TopicAdmin
  /**
   * KIP-890 verification of transactional produce, by the transaction coordinator. Absent
   * only in a broker built without a coordinator; then transactional batches are refused.
   */
  readonly transactionVerifier?: TransactionVerifier
  /** Told of every COMMIT/ABORT marker written here (the group coordinator's pending offsets). */
  readonly onTransactionMarker?: TransactionMarkerListener
  /**
   * The cluster metadata's compare-and-set change, for the finalized feature levels
   * (UpdateFeatures, metadata/feature-control.ts); topics and configs go through topicAdmin.
   */
  readonly metadata: FeatureMetadata
  /** SCRAM credentials in the metadata store (AlterUserScramCredentials, SCRAM logins). */
  readonly scramCredentials?: ScramCredentialStore
  /** Delegation tokens in the metadata store (Create/Renew/Expire/DescribeDelegationToken). */
  readonly delegationTokens?: DelegationTokenStore
  /** Decides what each principal may do (allows everything when authorizer.class.name is empty). */
  readonly authorizer: Authorizer
  /** The ACLs in the metadata store (CreateAcls, DescribeAcls, DeleteAcls); null without an authorizer. */
  readonly acls: AclStore | null
  /** Client quotas in the metadata store (AlterClientQuotas, DescribeClientQuotas). */
  readonly clientQuotaStore?: ClientQuotaStore
  /** Client quota enforcement (a consumer's fetch size is bounded by its quota). */
  readonly clientQuotas?: ClientQuotas
  /** Client telemetry (KIP-714): subscriptions matched, pushes checked, pushed metrics kept. */
  readonly clientMetrics: ClientMetricsManager
  /** The latest metadata snapshot this broker has applied. */
  metadataImage(): ClusterImage
  /**
   * How this broker dials another on the inter-broker listener for requests of its own (the
   * share group offsets APIs reach the share-partitions' leaders with it). Absent in brokers
   * built without a network; then only partitions led here are reachable.
   */
  readonly interBroker?: {
    readonly transport: Transport
    brokerAddress(nodeId: BrokerId): { host: string; port: number } | undefined
  }
}
