/**
 * The read-only view of a broker that the metrics, health checks and console use. The
 * broker builds one object of this shape (a few lines in server/broker.ts), so the ops
 * layer depends on the parts it reads and never on the broker class.
 */
import type { ConfigValue } from '../common/config-def.js'
import type { GroupCoordinator } from '../coordinator/group-coordinator.js'
import type { ClusterImage } from '../metadata/cluster-image.js'
import type { ReplicaManager } from '../replication/replica-manager.js'
import type { LogManager } from '../storage/log-manager.js'

export interface SessionCounters {
  readonly sessionLosses: number
  readonly reregistrations: number
  /** Event-loop stalls longer than a third of broker.session.timeout.ms, and the longest. */
  readonly stalls: number
  readonly longestStallMs: number
  /** The metadata watch started again from a fresh read (ended by the store, or stalled). */
  readonly watch: { readonly restarts: number; readonly stalls: number; readonly probeStalls: number }
}

export interface ControllerCounters {
  /** Leader changes this broker made while controller (clean and unclean). */
  readonly leaderElections: number
  readonly uncleanLeaderElections: number
}

/** This broker's share sessions and share-partitions (KIP-932), as the share metrics read them. */
export interface ShareMetricsView {
  readonly sessionCount: number
  readonly sessionPartitionCount: number
  readonly sessionEvictions: number
  /** Records acknowledged by Kafka's capitalized AcknowledgeType name (Accept, Release, Reject, Renew). */
  readonly recordAcknowledgements: ReadonlyMap<string, number>
  /** Lock expiries of share-partitions closed since: part of the total, with no partition label left. */
  readonly closedAcquisitionLockTimeouts: number
  /** Share fetch and acknowledgement requests, and failed ones, by topic name. */
  readonly topicRequests: {
    readonly fetch: ReadonlyMap<string, number>
    readonly failedFetch: ReadonlyMap<string, number>
    readonly acknowledgement: ReadonlyMap<string, number>
    readonly failedAcknowledgement: ReadonlyMap<string, number>
  }
  /** Share-partitions made from their persisted state, and the milliseconds reading it took. */
  readonly partitionLoads: { readonly count: number; readonly totalMs: number; readonly maxMs: number }
  readonly sharePartitions: readonly {
    readonly groupId: string
    readonly topic: string
    readonly partition: number
    readonly inFlightMessages: number
    readonly acquisitionLockTimeouts: number
  }[]
}

export interface BrokerMetricsSource {
  readonly nodeId: number
  readonly replicaManager: Pick<
    ReplicaManager,
    'hostedPartitions' | 'fetcherStats' | 'topicSettings' | 'getPartition'
  >
  readonly logManager: Pick<LogManager, 'offlineLogDirs' | 'onLogFlushed'>
  readonly groupCoordinator: Pick<GroupCoordinator, 'committedOffsets' | 'listGroups' | 'share'>
  /** host:port of this broker's Kafka listener (the console's own admin client connects there). */
  bootstrapServers(): string
  metadataImage(): ClusterImage
  /** Is this broker the active controller? */
  isActiveController(): boolean
  controllerCounters(): ControllerCounters
  /** ISR changes this broker made as leader (Kafka's IsrShrinksPerSec / IsrExpandsPerSec). */
  isrCounters(): { readonly shrinks: number; readonly expands: number }
  /** Slow synchronous appends of this process's file system (0 where it has none). */
  syncAppendStalls(): number
  /** Open connections of the Kafka listener. */
  connectionCount(): number
  /** Registered in the metadata store with a live session (not fenced). */
  isRegistered(): boolean
  /** Store sessions lost, registrations made again, event-loop stalls and metadata watch restarts. */
  sessionCounters?(): SessionCounters
  /** A broker property by its Kafka name. */
  configValue(name: string): ConfigValue | undefined
  /** The share metrics' view; null until this broker served a share request. */
  shareMetrics?(): ShareMetricsView | null
  /** This broker's share coordinator's WriteShareGroupState calls and their latency (ms). */
  shareCoordinatorWrites?(): {
    readonly count: number
    readonly totalLatencyMs: number
    readonly maxLatencyMs: number
  }
  /** Metrics clients pushed (KIP-714), in Prometheus' text format, appended to /metrics. */
  clientTelemetryExposition?(): string
}
