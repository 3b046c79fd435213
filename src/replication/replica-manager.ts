/**
 * The partitions this broker hosts, kept in step with the cluster metadata: it opens a log
 * for every partition assigned here, applies leadership and config changes, and deletes
 * the logs of deleted topics. Produce and fetch go through it.
 */
import type { Clock } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import type { ClusterImage, PartitionState, TopicImage } from '../metadata/cluster-image.js'
import { ErrorCode } from '../protocol/error-codes.js'
import type { LogConfig } from '../storage/log-config.js'
import type { PartitionLog, TopicPartition } from '../storage/partition-log.js'
import { KafkaError } from './kafka-error.js'
import { Partition } from './partition.js'

/** Where partition logs come from (the storage LogManager). */
export interface LogProvider {
  getOrCreateLog(tp: TopicPartition, config: LogConfig): Promise<PartitionLog>
  deleteLog(tp: TopicPartition): Promise<void>
}

/** Effective per-topic settings the replication path needs, resolved from the metadata. */
export interface TopicSettings {
  readonly logConfig: LogConfig
  readonly minInsyncReplicas: number
}

export interface ReplicaManagerOptions {
  readonly nodeId: number
  readonly logs: LogProvider
  readonly clock: Clock
  readonly logger: Logger
  readonly topicSettings: (image: ClusterImage, topic: string) => TopicSettings
  /** True while this broker has no metadata-store session: it must not act as leader. */
  readonly isFenced: () => boolean
}

export interface AppendResult {
  readonly errorCode: number
  readonly baseOffset: number
  readonly logAppendTimeMs: number
  readonly logStartOffset: number
}

function key(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`
}

export class ReplicaManager {
  private readonly partitions = new Map<string, Partition>()
  private readonly settings = new Map<string, TopicSettings>()
  private readonly topicIds = new Map<string, string>()
  /** Image changes are applied one at a time, in order. */
  private applying: Promise<void> = Promise.resolve()

  constructor(private readonly options: ReplicaManagerOptions) {}

  get hostedPartitions(): IterableIterator<Partition> {
    return this.partitions.values()
  }

  getPartition(topic: string, partition: number): Partition | undefined {
    return this.partitions.get(key(topic, partition))
  }

  /** The partition, or the Kafka error a client should see for it. */
  getPartitionOrError(topic: string, partition: number): Partition {
    const hosted = this.partitions.get(key(topic, partition))
    if (hosted) return hosted
    throw new KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, `${topic}-${partition} is not hosted here`)
  }

  topicSettings(topic: string): TopicSettings | undefined {
    return this.settings.get(topic)
  }

  /** Queues the change to `image`; resolves when it has been applied. */
  applyImage(image: ClusterImage): Promise<void> {
    this.applying = this.applying.then(() => this.doApplyImage(image))
    return this.applying
  }

  private async doApplyImage(image: ClusterImage): Promise<void> {
    for (const topic of image.topics.values()) {
      const settings = this.options.topicSettings(image, topic.name)
      this.settings.set(topic.name, settings)
      this.topicIds.set(topic.name, topic.topicId)
      for (const state of topic.partitions) await this.applyPartition(topic, state, settings)
    }
    for (const [name] of this.topicIds) {
      const current = image.topics.get(name)
      if (!current) await this.removeTopic(name)
    }
  }

  private async applyPartition(
    topic: TopicImage,
    state: PartitionState,
    settings: TopicSettings,
  ): Promise<void> {
    const existing = this.partitions.get(key(topic.name, state.partition))
    if (!state.replicas.includes(this.options.nodeId)) {
      if (existing) await this.removePartition(existing)
      return
    }
    if (existing && existing.id.topicId !== topic.topicId) await this.removePartition(existing)
    const hosted = this.partitions.get(key(topic.name, state.partition))
    if (hosted) {
      hosted.updateState(state)
      hosted.log.updateConfig(settings.logConfig)
      return
    }
    const log = await this.options.logs.getOrCreateLog(
      { topic: topic.name, partition: state.partition },
      settings.logConfig,
    )
    const partition = new Partition(
      { topic: topic.name, partition: state.partition, topicId: topic.topicId },
      log,
      this.options.nodeId,
      state,
      this.options.isFenced,
    )
    this.partitions.set(key(topic.name, state.partition), partition)
    partition.maybeIncrementHighWatermark()
  }

  private async removeTopic(name: string): Promise<void> {
    for (const partition of [...this.partitions.values()]) {
      if (partition.topic === name) await this.removePartition(partition)
    }
    this.settings.delete(name)
    this.topicIds.delete(name)
    this.options.logger.info({ topic: name }, 'deleted topic logs')
  }

  private async removePartition(partition: Partition): Promise<void> {
    this.partitions.delete(key(partition.topic, partition.partition))
    await this.options.logs.deleteLog({ topic: partition.topic, partition: partition.partition })
  }

  /** Appends records on the leader of topic-partition (see Partition.appendRecordsToLeader). */
  async appendToLeader(
    topic: string,
    partitionIndex: number,
    records: Buffer,
    requiredAcks: number,
    _timeoutMs: number,
  ): Promise<AppendResult> {
    const partition = this.getPartitionOrError(topic, partitionIndex)
    const minInsyncReplicas = this.settings.get(topic)?.minInsyncReplicas ?? 1
    const info = await partition.appendRecordsToLeader(records, requiredAcks, minInsyncReplicas)
    return {
      errorCode: ErrorCode.NONE,
      baseOffset: info.firstOffset,
      logAppendTimeMs: info.logAppendTimeMs,
      logStartOffset: info.logStartOffset,
    }
  }
}
