/**
 * One broker for the share group tests that speak raw requests (test/server/share/*-broker):
 * the internal topics at one partition each so that every coordinator lives on partition 0,
 * share groups starting from the earliest offset, single-partition topics with their records
 * produced, and the group coordinator loaded before the first test; plus the ShareFetch,
 * ShareAcknowledge and ShareGroupHeartbeat bodies those tests send.
 */
import assert from 'node:assert/strict'
import { Admin } from '../../src/client/admin.js'
import { Producer } from '../../src/client/producer.js'
import type { ShareFetchResponse } from '../../src/protocol/generated/index.js'
import { createTopics } from '../client/helpers.js'
import { type Cluster, startBroker } from './cluster.js'
import { RawClient } from './raw-client.js'

export interface ShareBrokerTopic {
  readonly topic: string
  /** Records produced to partition 0 before the tests, valued `${valuePrefix}${i}`. */
  readonly records?: number
  readonly valuePrefix?: string
}

export interface ShareBrokerOptions {
  /** Broker properties beside the share defaults (they may override them). */
  readonly properties?: Readonly<Record<string, string | number | boolean>>
  readonly topics: readonly ShareBrokerTopic[]
  /** A group whose coordinator is looked up first, so that the internal topic exists and is loaded. */
  readonly coordinatorGroup: string
}

export class ShareBroker {
  private readonly clients: RawClient[] = []

  private constructor(readonly cluster: Cluster) {}

  static async start(options: ShareBrokerOptions): Promise<ShareBroker> {
    const cluster = await startBroker({
      port: 0,
      properties: {
        'offsets.topic.num.partitions': 1,
        'share.coordinator.state.topic.num.partitions': 1,
        'tidelog.share.auto.offset.reset': 'earliest',
        ...options.properties,
      },
    })
    const broker = new ShareBroker(cluster)
    try {
      await createTopics(
        cluster.bootstrapServers,
        options.topics.map((t) => ({ topic: t.topic, partitions: 1, replicationFactor: 1 })),
      )
      const producer = new Producer({ bootstrapServers: cluster.bootstrapServers, lingerMs: 0 })
      try {
        for (const { topic, records = 0, valuePrefix = 'v' } of options.topics)
          for (let i = 0; i < records; i++)
            await producer.send({ topic, partition: 0, value: Buffer.from(`${valuePrefix}${i}`) })
      } finally {
        await producer.close()
      }
      const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
      try {
        await admin.findCoordinator(options.coordinatorGroup)
      } finally {
        admin.close()
      }
    } catch (error) {
      await broker.stop()
      throw error
    }
    return broker
  }

  /** The topic's id in the broker's metadata; asserts the topic exists. */
  topicId(topic: string): string {
    const id = this.cluster.brokers[0].metadataImage().topics.get(topic)?.topicId
    assert.ok(id !== undefined && id !== '', `${topic} has a topic id`)
    return id
  }

  /** A raw connection to the broker, closed by `stop` unless the test closes it first. */
  async connect(): Promise<RawClient> {
    const raw = await RawClient.connect(Number(this.cluster.bootstrapServers.split(':')[1]))
    this.clients.push(raw)
    return raw
  }

  async stop(): Promise<void> {
    for (const raw of this.clients) raw.close()
    await this.cluster.stop()
  }
}

export interface ShareFetchParams {
  readonly groupId: string
  readonly memberId: string
  readonly shareSessionEpoch: number
  readonly topicId: string
  readonly partition?: number
  readonly maxWaitMs?: number
}

/**
 * A ShareFetch body for one partition that acknowledges nothing: the opening fetch
 * (epoch 0) names the partition, later fetches of the session name nothing new.
 */
export function shareFetchBody(params: ShareFetchParams) {
  const { shareSessionEpoch, topicId, partition = 0, maxWaitMs = 100 } = params
  return {
    groupId: params.groupId,
    memberId: params.memberId,
    shareSessionEpoch,
    maxWaitMs,
    minBytes: 1,
    maxBytes: 1 << 20,
    maxRecords: 100,
    batchSize: 100,
    topics:
      shareSessionEpoch === 0
        ? [
            {
              topicId,
              partitions: [{ partitionIndex: partition, partitionMaxBytes: 0, acknowledgementBatches: [] }],
            },
          ]
        : [],
    forgottenTopicsData: [],
  }
}

/** A ShareFetch answer's acquired ranges, as first-last×deliveryCount. */
export function acquiredRanges(response: ShareFetchResponse): string[] {
  return response.responses
    .flatMap((t) => t.partitions)
    .flatMap((p) => p.acquiredRecords)
    .map((a) => `${a.firstOffset}-${a.lastOffset}x${a.deliveryCount}`)
}

export interface AcknowledgementBatch {
  readonly firstOffset: bigint
  readonly lastOffset: bigint
  readonly acknowledgeTypes: readonly number[]
}

/** A ShareAcknowledge body for partition 0 of one topic. */
export function shareAcknowledgeBody(
  groupId: string,
  memberId: string,
  shareSessionEpoch: number,
  topicId: string,
  acknowledgementBatches: readonly AcknowledgementBatch[],
) {
  return {
    groupId,
    memberId,
    shareSessionEpoch,
    topics: [{ topicId, partitions: [{ partitionIndex: 0, acknowledgementBatches }] }],
  }
}

/** A ShareGroupHeartbeat body; a joining member (epoch 0) subscribes to `topics`. */
export function shareHeartbeatBody(groupId: string, memberId: string, memberEpoch: number, topics: string[]) {
  return {
    groupId,
    memberId,
    memberEpoch,
    rackId: null,
    subscribedTopicNames: memberEpoch === 0 ? topics : null,
  }
}
