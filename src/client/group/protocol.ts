/**
 * The bytes a consumer group's members exchange through the coordinator, which relays them
 * untouched: JoinGroup protocol metadata (ConsumerProtocolSubscription) and SyncGroup
 * assignments (ConsumerProtocolAssignment), each an int16 version then the versioned
 * body, encoded with the generated codecs. Written at version 3 (the Java client's
 * highest); read at any version, newer ones as 3 (later versions only append fields).
 */
import {
  decodeConsumerProtocolAssignment,
  encodeConsumerProtocolAssignment,
} from '../../protocol/generated/consumer-protocol-assignment.js'
import {
  decodeConsumerProtocolSubscription,
  encodeConsumerProtocolSubscription,
} from '../../protocol/generated/consumer-protocol-subscription.js'
import { Reader, Writer } from '../../protocol/primitives.js'
import type { TopicPartition } from '../leader-requests.js'

export const CONSUMER_PROTOCOL_TYPE = 'consumer'
export const CONSUMER_PROTOCOL_VERSION = 3

export interface Subscription {
  topics: string[]
  userData: Buffer | null
  ownedPartitions: TopicPartition[]
  generationId: number
  rackId: string | null
}

export interface Assignment {
  partitions: TopicPartition[]
  userData: Buffer | null
}

export function encodeSubscription(
  subscription: Pick<Subscription, 'topics'> & Partial<Subscription>,
  version = CONSUMER_PROTOCOL_VERSION,
): Buffer {
  const w = new Writer()
  w.writeInt16(version)
  encodeConsumerProtocolSubscription(w, version, {
    topics: subscription.topics,
    userData: subscription.userData ?? null,
    ownedPartitions: groupByTopic(subscription.ownedPartitions ?? []).map(([topic, partitions]) => ({
      topic,
      partitions,
    })),
    generationId: subscription.generationId ?? -1,
    rackId: subscription.rackId ?? null,
  })
  return w.toBuffer()
}

export function decodeSubscription(bytes: Buffer): Subscription {
  const reader = new Reader(bytes)
  const version = Math.min(reader.readInt16(), CONSUMER_PROTOCOL_VERSION)
  const s = decodeConsumerProtocolSubscription(reader, Math.max(version, 0))
  return {
    topics: s.topics,
    userData: s.userData,
    ownedPartitions: s.ownedPartitions.flatMap((t) =>
      t.partitions.map((partition) => ({ topic: t.topic, partition })),
    ),
    generationId: s.generationId,
    rackId: s.rackId,
  }
}

export function encodeAssignment(
  assignment: Pick<Assignment, 'partitions'> & Partial<Assignment>,
  version = CONSUMER_PROTOCOL_VERSION,
): Buffer {
  const w = new Writer()
  w.writeInt16(version)
  encodeConsumerProtocolAssignment(w, version, {
    assignedPartitions: groupByTopic(assignment.partitions).map(([topic, partitions]) => ({
      topic,
      partitions,
    })),
    userData: assignment.userData ?? null,
  })
  return w.toBuffer()
}

/** An empty buffer (a member the leader gave nothing, as some clients send) is an empty assignment. */
export function decodeAssignment(bytes: Buffer): Assignment {
  if (bytes.length === 0) return { partitions: [], userData: null }
  const reader = new Reader(bytes)
  const version = Math.min(reader.readInt16(), CONSUMER_PROTOCOL_VERSION)
  const a = decodeConsumerProtocolAssignment(reader, Math.max(version, 0))
  return {
    partitions: a.assignedPartitions.flatMap((t) =>
      t.partitions.map((partition) => ({ topic: t.topic, partition })),
    ),
    userData: a.userData,
  }
}

/** Topics in first-seen order, each with its partitions in the given order. */
function groupByTopic(partitions: readonly TopicPartition[]): [string, number[]][] {
  const byTopic = new Map<string, number[]>()
  for (const tp of partitions) {
    const list = byTopic.get(tp.topic)
    if (list) list.push(tp.partition)
    else byTopic.set(tp.topic, [tp.partition])
  }
  return [...byTopic]
}
