/**
 * The share coordinator (Kafka's ShareCoordinatorService, KIP-932): the persisted state of
 * every share-partition, on `__share_group_state`, a third runtime beside the group and
 * transaction coordinators (coordinator-runtime.ts). A share-partition's key
 * "group:topicId:partition" hashes to one partition of the topic (Kafka's
 * Utils.abs(key.hashCode()) % partitions); that partition's leader serves
 * Read/WriteShareGroupState for the partition leaders, and
 * Initialize/Delete/ReadShareGroupStateSummary for the group coordinators. The topic is
 * made on first use (FindCoordinator key type 2, or the first persister call), compacted,
 * with Kafka's defaults: share.coordinator.state.topic.num.partitions 50, replication
 * factor 3 and min ISR 2, both capped at the live broker count as for the other internal
 * topics.
 */
import { type BrokerId, NO_LEADER } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import type { CoordinatorLocation } from '../coordinator-locator.js'
import { partitionForGroup } from '../group.js'
import { CoordinatorRuntime, type CoordinatorRuntimeHost } from '../runtime/coordinator-runtime.js'
import {
  ShareCoordinatorShard,
  type ShareOperation,
  type ShareStateRead,
  type ShareStateSummaryRead,
  type ShareStateWrite,
} from './share-coordinator-shard.js'
import {
  coordinatorKeyOf,
  SHARE_GROUP_STATE_TOPIC,
  SHARE_STATE_SERDE,
  type SharePartitionKey,
  type ShareStateRecord,
} from './share-state-records.js'

export interface ShareCoordinatorConfig {
  /** share.coordinator.state.topic.num.partitions */
  readonly numPartitions: number
  /** share.coordinator.state.topic.replication.factor */
  readonly replicationFactor: number
  /** share.coordinator.state.topic.min.isr */
  readonly minIsr: number
  /** share.coordinator.snapshot.update.records.per.snapshot */
  readonly snapshotUpdateRecordsPerSnapshot: number
  /** share.coordinator.write.timeout.ms: how long a write waits for the in-sync replicas. */
  readonly writeTimeoutMs: number
  /** share.coordinator.load.buffer.size */
  readonly loadBufferSize: number
}

export const DEFAULT_SHARE_COORDINATOR_CONFIG: ShareCoordinatorConfig = {
  numPartitions: 50,
  replicationFactor: 3,
  minIsr: 2,
  snapshotUpdateRecordsPerSnapshot: 500,
  writeTimeoutMs: 5000,
  loadBufferSize: 5 * 1024 * 1024,
}

/**
 * The `__share_group_state` partition of a share-partition key: Kafka's partitionFor, the
 * same Utils.abs(key.hashCode()) % partitions as a group id's __consumer_offsets partition.
 */
export function partitionForShareKey(coordinatorKey: string, partitionCount: number): number {
  return partitionForGroup(coordinatorKey, partitionCount)
}

const failedRead = (errorCode: number): ShareStateRead => ({
  errorCode,
  startOffset: -1,
  stateEpoch: -1,
  stateBatches: [],
})

const failedSummary = (errorCode: number): ShareStateSummaryRead => ({
  errorCode,
  startOffset: -1,
  stateEpoch: -1,
  leaderEpoch: -1,
  deliveryCompleteCount: -1,
})

export class ShareCoordinator {
  private readonly runtime: CoordinatorRuntime<ShareCoordinatorShard, ShareStateRecord>
  /**
   * WriteShareGroupState calls that reached an active shard here, and how long each took until
   * answered, its records committed or refused (Kafka's share-coordinator-metrics write-total,
   * write-latency-avg and write-latency-max).
   */
  readonly writeStats = { count: 0, totalLatencyMs: 0, maxLatencyMs: 0 }
  /** Per key, the end of its last operation: the next one starts after it. */
  private readonly operations = new Map<string, Promise<void>>()

  constructor(
    private readonly host: CoordinatorRuntimeHost,
    readonly config: ShareCoordinatorConfig,
  ) {
    this.runtime = new CoordinatorRuntime(host, {
      topic: SHARE_GROUP_STATE_TOPIC,
      name: 'share coordinator',
      serde: SHARE_STATE_SERDE,
      loadBufferSize: config.loadBufferSize,
      noTopicErrorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE,
      partitionFor: partitionForShareKey,
      topicSpec: () => this.topicSpec(),
      newShard: () => new ShareCoordinatorShard(config.snapshotUpdateRecordsPerSnapshot),
    })
  }

  onPartitionsChanged(): void {
    this.runtime.onPartitionsChanged()
  }

  shutdown(): void {
    this.runtime.shutdown()
  }

  /** FindCoordinator key type 2: the leader of the key's partition (the topic made on first use). */
  findCoordinator(coordinatorKey: string): Promise<CoordinatorLocation> {
    return this.runtime.findCoordinator(coordinatorKey)
  }

  /** The broker leading `key`'s partition in this broker's metadata, or -1 (none, or no topic). */
  leaderOf(key: SharePartitionKey): BrokerId {
    const topic = this.host.metadataImage().topics.get(SHARE_GROUP_STATE_TOPIC)
    if (!topic || topic.partitions.length === 0) return NO_LEADER
    return topic.partitions[partitionForShareKey(coordinatorKeyOf(key), topic.partitions.length)].leader
  }

  // ---- the share state operations, one key each ---------------------------------------------

  readState(key: SharePartitionKey, leaderEpoch: number): Promise<ShareStateRead> {
    return this.run(key, (shard) => shard.readState(key, leaderEpoch), failedRead)
  }

  async writeState(key: SharePartitionKey, write: ShareStateWrite): Promise<number> {
    const nowMs = this.host.clock.nowMs()
    const startMs = this.host.clock.monotonicMs()
    let reached = false
    const code = await this.run(
      key,
      (shard) => {
        reached = true
        return shard.writeState(key, write, nowMs)
      },
      (errorCode) => errorCode,
    )
    if (reached) {
      const latencyMs = this.host.clock.monotonicMs() - startMs
      this.writeStats.count++
      this.writeStats.totalLatencyMs += latencyMs
      this.writeStats.maxLatencyMs = Math.max(this.writeStats.maxLatencyMs, latencyMs)
    }
    return code
  }

  initializeState(key: SharePartitionKey, stateEpoch: number, startOffset: number): Promise<number> {
    const nowMs = this.host.clock.nowMs()
    return this.run(
      key,
      (shard) => shard.initializeState(key, stateEpoch, startOffset, nowMs),
      (code) => code,
    )
  }

  deleteState(key: SharePartitionKey): Promise<number> {
    return this.run(
      key,
      (shard) => shard.deleteState(key),
      (code) => code,
    )
  }

  readSummary(key: SharePartitionKey): ShareStateSummaryRead {
    const context = this.runtime.contextFor(coordinatorKeyOf(key))
    if (typeof context === 'number') return failedSummary(context)
    return context.shard.readSummary(key)
  }

  /**
   * Runs an operation on `key` once the key's earlier operations are done. An operation
   * looks at the committed state, so two at once would both miss the other: a new leader's
   * read (which records its epoch) answered without a write of the old leader still being
   * committed, and that write then answered as done, so an acknowledgement the old leader
   * confirmed was lost to the new one (the simulator's share workload, seed 7). Kafka's
   * runtime has operations see the uncommitted state instead; one at a time per key is the
   * same order here, and a partition leader sends one write at a time per key anyway.
   */
  private run<T>(
    key: SharePartitionKey,
    operation: (shard: ShareCoordinatorShard) => ShareOperation<T>,
    failed: (errorCode: number) => T,
  ): Promise<T> {
    const id = coordinatorKeyOf(key)
    const previous = this.operations.get(id)
    const result = previous
      ? previous.then(() => this.runNow(key, operation, failed))
      : this.runNow(key, operation, failed)
    const done = result.then(
      () => undefined,
      () => undefined,
    )
    this.operations.set(id, done)
    void done.then(() => {
      if (this.operations.get(id) === done) this.operations.delete(id)
    })
    return result
  }

  /**
   * Runs an operation on the key's active shard and writes its records; the answer once they
   * are committed (applied to the shard then), or the error a partition leader or group
   * coordinator should see: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
   * COORDINATOR_NOT_AVAILABLE.
   */
  private async runNow<T>(
    key: SharePartitionKey,
    operation: (shard: ShareCoordinatorShard) => ShareOperation<T>,
    failed: (errorCode: number) => T,
  ): Promise<T> {
    const context = this.runtime.contextFor(coordinatorKeyOf(key))
    if (typeof context === 'number') return failed(context)
    const { records, response } = operation(context.shard)
    return this.runtime.scheduleWriteOperation(context, {
      records,
      timeoutMs: this.config.writeTimeoutMs,
      notCoordinator: () => failed(ErrorCode.NOT_COORDINATOR),
      complete: (errorCode) => {
        if (errorCode !== ErrorCode.NONE) return failed(errorCode)
        for (const record of records) context.shard.apply(record)
        return response
      },
    })
  }

  /** __share_group_state as Kafka creates it: compacted, factor and min ISR capped at the live brokers. */
  private topicSpec() {
    const live = Math.max(1, this.host.metadataImage().brokers.size)
    const replicationFactor = Math.min(this.config.replicationFactor, live)
    const minIsr = Math.min(this.config.minIsr, replicationFactor)
    return {
      partitions: this.config.numPartitions,
      replicationFactor: this.config.replicationFactor,
      configs: {
        'cleanup.policy': 'compact',
        'compression.type': 'producer',
        'min.insync.replicas': String(minIsr),
        'unclean.leader.election.enable': 'false',
      },
    }
  }
}
