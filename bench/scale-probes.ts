/**
 * What bench:scale asks a running cluster, by the same Kafka requests to tidelog and to
 * Apache Kafka: Metadata (leaders, ISRs), ListOffsets to each leader (does it serve the
 * partition?) and DescribeLogDirs to each broker (does it host its replicas?).
 */
import type { CreatePartitionsResponse } from '../src/protocol/generated/create-partitions-response.js'
import type { CreateTopicsResponse } from '../src/protocol/generated/create-topics-response.js'
import type { DescribeLogDirsResponse } from '../src/protocol/generated/describe-log-dirs-response.js'
import { ApiKey, apis, loadAllApiCodecs } from '../src/protocol/generated/index.js'
import { defaultListOffsetsRequestListOffsetsPartition } from '../src/protocol/generated/list-offsets-request.js'
import type { ListOffsetsResponse } from '../src/protocol/generated/list-offsets-response.js'
import { defaultMetadataRequestMetadataRequestTopic } from '../src/protocol/generated/metadata-request.js'
import type {
  MetadataResponse,
  MetadataResponseMetadataResponsePartition as PartitionMetadata,
} from '../src/protocol/generated/metadata-response.js'
import { BrokerClient } from '../src/replication/broker-client.js'
import { nodeNetwork } from '../src/runtime/node-network.js'
import type { DeployedCluster } from './deployed-cluster.js'

await loadAllApiCodecs()

/** How far a topic is from fully created: partitions in each state, out of `partitions`. */
export interface TopicProgress {
  readonly partitions: number
  /** Led by a live broker, as Metadata says. */
  readonly led: number
  /** With every replica in the ISR. */
  readonly inSync: number
  /** Answered by their leader's ListOffsets without an error. */
  readonly served: number
  /** Replicas whose log the hosting broker's DescribeLogDirs lists, out of partitions * RF. */
  readonly replicaLogs: number
  readonly replicas: number
  /** Why the last Metadata probe failed, if it did. */
  readonly error?: string
}

export const isComplete = (p: TopicProgress): boolean =>
  p.led === p.partitions &&
  p.inSync === p.partitions &&
  p.served === p.partitions &&
  p.replicaLogs === p.replicas

export const describeProgress = (p: TopicProgress): string =>
  `${p.led} led, ${p.inSync} in sync, ${p.served} served of ${p.partitions}; ${p.replicaLogs} of ${p.replicas} replica logs` +
  (p.error === undefined ? '' : `; Metadata failed: ${p.error}`)

export class ScaleProbes {
  private readonly clients = new Map<number, BrokerClient>()

  constructor(
    private readonly cluster: Pick<DeployedCluster, 'nodeIds' | 'address' | 'isRunning'>,
    private readonly replicationFactor = 3,
  ) {}

  private client(nodeId: number): BrokerClient {
    let client = this.clients.get(nodeId)
    if (client === undefined) {
      const [host, port] = this.cluster.address(nodeId).split(':')
      client = new BrokerClient(host, Number(port), 'scale-bench', nodeNetwork)
      this.clients.set(nodeId, client)
    }
    return client
  }

  /** A live broker to ask. */
  anyLive(): number {
    const id = this.cluster.nodeIds.find((n) => this.cluster.isRunning(n))
    if (id === undefined) throw new Error('no broker is running')
    return id
  }

  request<T>(nodeId: number, apiKey: number, version: number, body: object): Promise<T> {
    const defaults = apis.get(apiKey)!.defaultRequest() as object
    return this.client(nodeId).request<T>(apiKey, version, { ...defaults, ...body })
  }

  async createTopic(topic: string, partitions: number, timeoutMs: number): Promise<void> {
    const response = await this.request<CreateTopicsResponse>(this.anyLive(), ApiKey.CreateTopics, 5, {
      topics: [
        {
          name: topic,
          numPartitions: partitions,
          replicationFactor: this.replicationFactor,
          assignments: [],
          configs: [],
        },
      ],
      timeoutMs,
      validateOnly: false,
    })
    const [result] = response.topics
    // REQUEST_TIMED_OUT: created, not yet everywhere; the caller waits for that anyway.
    if (result.errorCode !== 0 && result.errorCode !== 7)
      throw new Error(`CreateTopics ${topic}: error ${result.errorCode} ${result.errorMessage ?? ''}`)
  }

  /** CreatePartitions v3: `topic` grown to `count` partitions. */
  async createPartitions(topic: string, count: number, timeoutMs: number): Promise<void> {
    const response = await this.request<CreatePartitionsResponse>(
      this.anyLive(),
      ApiKey.CreatePartitions,
      3,
      {
        topics: [{ name: topic, count, assignments: null }],
        timeoutMs,
        validateOnly: false,
      },
    )
    const [result] = response.results
    if (result.errorCode !== 0 && result.errorCode !== 7)
      throw new Error(
        `CreatePartitions ${topic} to ${count}: error ${result.errorCode} ${result.errorMessage ?? ''}`,
      )
  }

  /** Metadata v12; `topics` null asks for every topic. */
  metadata(topics: readonly string[] | null, nodeId = this.anyLive()): Promise<MetadataResponse> {
    return this.request<MetadataResponse>(nodeId, ApiKey.Metadata, 12, {
      topics:
        topics === null
          ? null
          : topics.map((name) => ({ ...defaultMetadataRequestMetadataRequestTopic(), name })),
      allowAutoTopicCreation: false,
    })
  }

  async partitionsOf(topic: string): Promise<{ controllerId: number; partitions: PartitionMetadata[] }> {
    const response = await this.metadata([topic])
    const found = response.topics.find((t) => t.name === topic)
    return { controllerId: response.controllerId, partitions: found?.errorCode === 0 ? found.partitions : [] }
  }

  /** Partitions of `topic` each leader answers ListOffsets (latest) for without an error. */
  async served(topic: string, partitions: readonly PartitionMetadata[]): Promise<number> {
    const byLeader = new Map<number, number[]>()
    for (const p of partitions) {
      if (p.leaderId < 0 || !this.cluster.isRunning(p.leaderId)) continue
      // Pushed, not copied: a copy per partition was O(partitions^2) in this process, which
      // shares the machine with the brokers it measures (6e7 copies per leader at 33,000).
      const indexes = byLeader.get(p.leaderId)
      if (indexes === undefined) byLeader.set(p.leaderId, [p.partitionIndex])
      else indexes.push(p.partitionIndex)
    }
    let served = 0
    for (const [leader, indexes] of byLeader) {
      const response = await this.request<ListOffsetsResponse>(leader, ApiKey.ListOffsets, 1, {
        replicaId: -1,
        topics: [
          {
            name: topic,
            partitions: indexes.map((partitionIndex) => ({
              ...defaultListOffsetsRequestListOffsetsPartition(),
              partitionIndex,
              timestamp: -1n,
            })),
          },
        ],
      }).catch(() => null)
      for (const t of response?.topics ?? []) served += t.partitions.filter((p) => p.errorCode === 0).length
    }
    return served
  }

  /** Replica logs of `topic` the live brokers list in DescribeLogDirs. */
  async replicaLogs(topic: string): Promise<number> {
    let logs = 0
    for (const id of this.cluster.nodeIds) {
      if (!this.cluster.isRunning(id)) continue
      const response = await this.request<DescribeLogDirsResponse>(id, ApiKey.DescribeLogDirs, 1, {
        topics: null,
      }).catch(() => null)
      for (const dir of response?.results ?? [])
        for (const t of dir.topics) if (t.name === topic) logs += t.partitions.length
    }
    return logs
  }

  /** Where `topic` stands; the costly probes only once Metadata shows every partition led and in sync. */
  async progress(topic: string, partitions: number): Promise<TopicProgress> {
    let error: string | undefined
    const metadata = await this.partitionsOf(topic).catch((e: unknown) => {
      error = String(e)
      return { partitions: [] as PartitionMetadata[] }
    })
    const live = (id: number) => id >= 0 && this.cluster.isRunning(id)
    const led = metadata.partitions.filter((p) => p.errorCode === 0 && live(p.leaderId)).length
    const inSync = metadata.partitions.filter((p) => p.isrNodes.length === p.replicaNodes.length).length
    const replicas = partitions * this.replicationFactor
    const settled = led === partitions && inSync === partitions
    const served = settled ? await this.served(topic, metadata.partitions) : 0
    const replicaLogs = settled && served === partitions ? await this.replicaLogs(topic) : 0
    return { partitions, led, inSync, served, replicaLogs, replicas, error }
  }

  /** Partitions of `topic` led by a live broker and answered by it (the failover's end). */
  async ledAndServed(topic: string, partitions: number): Promise<boolean> {
    const metadata = await this.partitionsOf(topic).catch(() => ({ partitions: [] as PartitionMetadata[] }))
    const led = metadata.partitions.filter(
      (p) => p.errorCode === 0 && p.leaderId >= 0 && this.cluster.isRunning(p.leaderId),
    )
    return led.length === partitions && (await this.served(topic, led)) === partitions
  }

  close(): void {
    for (const client of this.clients.values()) client.close()
    this.clients.clear()
  }
}
