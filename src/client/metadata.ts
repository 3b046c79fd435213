/**
 * The client's view of the cluster: brokers, controller, and for each topic its partitions
 * with leader, leader epoch, replicas, ISR and offline replicas. Built from Metadata
 * responses and replaced whole on each refresh, so readers never see half an update.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import type { MetadataResponse } from '../protocol/generated/metadata-response.js'

export interface BrokerNode {
  readonly nodeId: number
  readonly host: string
  readonly port: number
  readonly rack: string | null
}

export interface PartitionInfo {
  readonly topic: string
  readonly partition: number
  /** -1 when the partition has no leader (offline). */
  readonly leader: number
  readonly leaderEpoch: number
  readonly replicas: readonly number[]
  readonly isr: readonly number[]
  readonly offlineReplicas: readonly number[]
  readonly errorCode: number
}

export interface TopicInfo {
  readonly name: string
  readonly topicId: string
  readonly isInternal: boolean
  readonly errorCode: number
  /** Sorted by partition index. */
  readonly partitions: readonly PartitionInfo[]
}

export class MetadataSnapshot {
  constructor(
    readonly brokers: ReadonlyMap<number, BrokerNode>,
    readonly controllerId: number,
    readonly clusterId: string | null,
    readonly topics: ReadonlyMap<string, TopicInfo>,
    /** Topics the last refresh asked for that came back with an error (e.g. UNKNOWN_TOPIC_OR_PARTITION). */
    readonly topicErrors: ReadonlyMap<string, number>,
    readonly updatedAtMs: number,
  ) {}

  /** Never refreshed: stale at any age (updatedAtMs is on the client clock's monotonic scale). */
  static empty(): MetadataSnapshot {
    return new MetadataSnapshot(new Map(), -1, null, new Map(), new Map(), Number.NEGATIVE_INFINITY)
  }

  partition(topic: string, partition: number): PartitionInfo | undefined {
    const partitions = this.topics.get(topic)?.partitions
    if (!partitions) return undefined
    const dense = partitions[partition]
    return dense?.partition === partition ? dense : partitions.find((p) => p.partition === partition)
  }

  /** Leader of a partition, or undefined while it has none or the broker is unknown. */
  leaderOf(topic: string, partition: number): BrokerNode | undefined {
    const info = this.partition(topic, partition)
    if (!info || info.leader < 0) return undefined
    return this.brokers.get(info.leader)
  }

  /** Partitions with a live leader: the sticky partitioner only picks among these (KIP-480). */
  availablePartitions(topic: string): number[] {
    const info = this.topics.get(topic)
    if (!info) return []
    return info.partitions.filter((p) => p.leader >= 0 && this.brokers.has(p.leader)).map((p) => p.partition)
  }

  /**
   * Merges a response into a new snapshot. Topics the response does not mention are kept
   * (a refresh for some topics must not forget others); topics it reports unknown are dropped.
   */
  merge(response: MetadataResponse, nowMs: number, allTopics: boolean): MetadataSnapshot {
    const brokers = new Map<number, BrokerNode>()
    for (const b of response.brokers)
      brokers.set(b.nodeId, { nodeId: b.nodeId, host: b.host, port: b.port, rack: b.rack })
    const topics = new Map<string, TopicInfo>(allTopics ? [] : this.topics)
    const topicErrors = new Map<string, number>()
    for (const t of response.topics) {
      if (t.name === null) continue
      if (t.errorCode !== ErrorCode.NONE && t.errorCode !== ErrorCode.LEADER_NOT_AVAILABLE) {
        topics.delete(t.name)
        topicErrors.set(t.name, t.errorCode)
        continue
      }
      if (t.errorCode !== ErrorCode.NONE) topicErrors.set(t.name, t.errorCode)
      topics.set(t.name, toTopicInfo(t.name, t))
    }
    const clusterId = response.clusterId ?? this.clusterId
    return new MetadataSnapshot(brokers, response.controllerId, clusterId, topics, topicErrors, nowMs)
  }
}

function toTopicInfo(name: string, t: MetadataResponse['topics'][number]): TopicInfo {
  const partitions: PartitionInfo[] = t.partitions
    .map((p) => ({
      topic: name,
      partition: p.partitionIndex,
      leader: p.leaderId,
      leaderEpoch: p.leaderEpoch,
      replicas: p.replicaNodes,
      isr: p.isrNodes,
      offlineReplicas: p.offlineReplicas,
      errorCode: p.errorCode,
    }))
    .sort((a, b) => a.partition - b.partition)
  return { name, topicId: t.topicId, isInternal: t.isInternal, errorCode: t.errorCode, partitions }
}
