/**
 * Request bodies for the differential sequences, built from the generated defaults so that
 * a step names only what it is about. Record batches carry fixed timestamps (BASE_TIMESTAMP_MS
 * plus a step's offset), so that both brokers store the same bytes.
 */
import { CRC_OFFSET, MAGIC_OFFSET } from '../../src/protocol/batch-header.js'
import {
  defaultAddPartitionsToTxnRequestAddPartitionsToTxnTopic,
  defaultCreateTopicsRequestCreatableReplicaAssignment,
  defaultCreateTopicsRequestCreatableTopic,
  defaultCreateTopicsRequestCreatableTopicConfig,
  defaultDeleteRecordsRequestDeleteRecordsPartition,
  defaultDeleteRecordsRequestDeleteRecordsTopic,
  defaultDescribeConfigsRequestDescribeConfigsResource,
  defaultFetchRequestFetchPartition,
  defaultFetchRequestFetchTopic,
  defaultJoinGroupRequestJoinGroupRequestProtocol,
  defaultListOffsetsRequestListOffsetsPartition,
  defaultListOffsetsRequestListOffsetsTopic,
  defaultMetadataRequestMetadataRequestTopic,
  defaultOffsetCommitRequestOffsetCommitRequestPartition,
  defaultOffsetCommitRequestOffsetCommitRequestTopic,
  defaultOffsetFetchRequestOffsetFetchRequestGroup,
  defaultOffsetFetchRequestOffsetFetchRequestTopic,
  defaultOffsetFetchRequestOffsetFetchRequestTopics,
  defaultProduceRequestPartitionProduceData,
  defaultProduceRequestTopicProduceData,
  defaultSyncGroupRequestSyncGroupRequestAssignment,
} from '../../src/protocol/generated/all.js'
import { ZERO_UUID } from '../../src/protocol/primitives.js'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import type { TargetContext } from './harness.js'

/**
 * The timestamp of the runs' records: a minute back from the start, whole seconds, so that
 * Kafka 4's one-hour "too far ahead" check never applies unless a step means it to.
 */
export const BASE_TIMESTAMP_MS = Math.floor(Date.now() / 1000) * 1000 - 60_000

/** Config resource types of DescribeConfigs. */
export const RESOURCE_TOPIC = 2
export const RESOURCE_BROKER = 4

export interface BatchOptions {
  readonly count?: number
  /** Added to BASE_TIMESTAMP_MS for the first record; record i is 10 ms after record i-1. */
  readonly timestampOffsetMs?: number
  readonly valueBytes?: number
  readonly producerId?: bigint
  readonly producerEpoch?: number
  readonly baseSequence?: number
  readonly isTransactional?: boolean
  readonly prefix?: string
}

/** One v2 batch of `count` records `prefix-i` with headers, at fixed timestamps. */
export function batch(options: BatchOptions = {}): Buffer {
  const count = options.count ?? 3
  const prefix = options.prefix ?? 'v'
  const first = BASE_TIMESTAMP_MS + (options.timestampOffsetMs ?? 0)
  return encodeRecordBatchSync({
    records: Array.from({ length: count }, (_, i) => ({
      key: i % 2 === 0 ? Buffer.from(`k${i}`) : null,
      value: Buffer.from(
        options.valueBytes ? `${prefix}-${i}-`.padEnd(options.valueBytes, 'x') : `${prefix}-${i}`,
      ),
      headers: i === 0 ? [{ key: 'h', value: Buffer.from('1') }] : [],
      timestamp: first + 10 * i,
    })),
    defaultTimestamp: first,
    ...(options.producerId !== undefined ? { producerId: options.producerId } : {}),
    ...(options.producerEpoch !== undefined ? { producerEpoch: options.producerEpoch } : {}),
    ...(options.baseSequence !== undefined ? { baseSequence: options.baseSequence } : {}),
    ...(options.isTransactional ? { isTransactional: true } : {}),
  })
}

/** A copy of `buf` with one CRC-covered byte flipped: CORRUPT_MESSAGE. */
export function corruptCrc(buf: Buffer): Buffer {
  const copy = Buffer.from(buf)
  copy.writeUInt32BE((copy.readUInt32BE(CRC_OFFSET) ^ 0xdeadbeef) >>> 0, CRC_OFFSET)
  return copy
}

/** A copy of `buf` with its magic byte set to `magic`. */
export function withMagic(buf: Buffer, magic: number): Buffer {
  const copy = Buffer.from(buf)
  copy[MAGIC_OFFSET] = magic
  return copy
}

export function metadata(topics: string[] | null, allowAutoTopicCreation = false) {
  return {
    topics:
      topics === null
        ? null
        : topics.map((name) => ({ ...defaultMetadataRequestMetadataRequestTopic(), name })),
    allowAutoTopicCreation,
  }
}

export function metadataByIds(ids: string[]) {
  return {
    topics: ids.map((topicId) => ({ ...defaultMetadataRequestMetadataRequestTopic(), topicId, name: null })),
  }
}

export interface NewTopic {
  readonly name: string
  readonly partitions?: number
  readonly replicationFactor?: number
  readonly configs?: Readonly<Record<string, string | null>>
  /** Replica node ranks (node#i) per partition; numPartitions and replicationFactor become -1. */
  readonly assignments?: readonly (readonly number[])[]
}

export function createTopics(ctx: TargetContext, topics: readonly NewTopic[], validateOnly = false) {
  return {
    topics: topics.map((t) => ({
      ...defaultCreateTopicsRequestCreatableTopic(),
      name: t.name,
      numPartitions: t.assignments ? -1 : (t.partitions ?? 1),
      replicationFactor: t.assignments ? -1 : (t.replicationFactor ?? 1),
      assignments: (t.assignments ?? []).map((ranks, partitionIndex) => ({
        ...defaultCreateTopicsRequestCreatableReplicaAssignment(),
        partitionIndex,
        brokerIds: ranks.map((rank) => (rank < 0 ? rank : ctx.nodeId(rank))),
      })),
      configs: Object.entries(t.configs ?? {}).map(([name, value]) => ({
        ...defaultCreateTopicsRequestCreatableTopicConfig(),
        name,
        value,
      })),
    })),
    timeoutMs: 30_000,
    validateOnly,
  }
}

export function produce(
  topic: string,
  partition: number,
  records: Buffer | null,
  acks = -1,
  transactionalId: string | null = null,
) {
  return {
    transactionalId,
    acks,
    timeoutMs: 10_000,
    topicData: [
      {
        ...defaultProduceRequestTopicProduceData(),
        name: topic,
        partitionData: [{ ...defaultProduceRequestPartitionProduceData(), index: partition, records }],
      },
    ],
  }
}

export interface FetchPartition {
  readonly topic: string
  readonly partition: number
  readonly offset: number
  readonly partitionMaxBytes?: number
  readonly currentLeaderEpoch?: number
  /** Sends this id instead of the topic's (an unknown topic id). */
  readonly topicId?: string
}

export function fetch(
  ctx: TargetContext,
  partitions: readonly FetchPartition[],
  options: { maxBytes?: number; isolationLevel?: number } = {},
) {
  const topics = new Map<string, FetchPartition[]>()
  for (const p of partitions) {
    const key = p.topicId ?? p.topic
    topics.set(key, [...(topics.get(key) ?? []), p])
  }
  return {
    maxWaitMs: 0,
    minBytes: 0,
    maxBytes: options.maxBytes ?? 0x7fffffff,
    isolationLevel: options.isolationLevel ?? 0,
    topics: [...topics.values()].map((ps) => ({
      ...defaultFetchRequestFetchTopic(),
      topic: ps[0].topic,
      topicId: ps[0].topicId ?? ctx.topicId(ps[0].topic),
      partitions: ps.map((p) => ({
        ...defaultFetchRequestFetchPartition(),
        partition: p.partition,
        fetchOffset: BigInt(p.offset),
        partitionMaxBytes: p.partitionMaxBytes ?? 1024 * 1024,
        currentLeaderEpoch: p.currentLeaderEpoch ?? -1,
      })),
    })),
  }
}

export const LATEST = -1
export const EARLIEST = -2
export const MAX_TIMESTAMP = -3
export const EARLIEST_LOCAL = -4

export function listOffsets(
  topic: string,
  partitions: readonly { partition: number; timestamp: number; currentLeaderEpoch?: number }[],
  isolationLevel = 0,
) {
  return {
    replicaId: -1,
    isolationLevel,
    topics: [
      {
        ...defaultListOffsetsRequestListOffsetsTopic(),
        name: topic,
        partitions: partitions.map((p) => ({
          ...defaultListOffsetsRequestListOffsetsPartition(),
          partitionIndex: p.partition,
          timestamp: BigInt(p.timestamp),
          currentLeaderEpoch: p.currentLeaderEpoch ?? -1,
        })),
      },
    ],
  }
}

/** A TxnOffsetCommit of one partition's offset by a producer (id 4242, epoch 0) nobody registered. */
export function txnOffsetCommit(
  transactionalId: string,
  groupId: string,
  topic: string,
  partition: number,
  offset: number,
) {
  return {
    transactionalId,
    groupId,
    producerId: 4242n,
    producerEpoch: 0,
    generationIdOrMemberEpoch: -1,
    memberId: '',
    groupInstanceId: null,
    topics: [
      {
        name: topic,
        topicId: ZERO_UUID,
        partitions: [
          {
            partitionIndex: partition,
            committedOffset: BigInt(offset),
            committedLeaderEpoch: -1,
            committedMetadata: '',
          },
        ],
      },
    ],
  }
}

export function offsetCommit(
  groupId: string,
  topic: string,
  offsets: readonly { partition: number; offset: number; metadata?: string | null }[],
  member: { generation?: number; memberId?: string } = {},
) {
  return {
    groupId,
    generationIdOrMemberEpoch: member.generation ?? -1,
    memberId: member.memberId ?? '',
    groupInstanceId: null,
    retentionTimeMs: -1n,
    topics: [
      {
        ...defaultOffsetCommitRequestOffsetCommitRequestTopic(),
        name: topic,
        partitions: offsets.map((o) => ({
          ...defaultOffsetCommitRequestOffsetCommitRequestPartition(),
          partitionIndex: o.partition,
          committedOffset: BigInt(o.offset),
          committedMetadata: o.metadata ?? '',
        })),
      },
    ],
  }
}

/** OffsetFetch in the layout of `version`: one group at the top (v0-7) or a list of groups (v8+). */
export function offsetFetch(
  groupId: string,
  topics: readonly { name: string; partitions: number[] }[] | null,
  version: number,
) {
  if (version < 8)
    return {
      groupId,
      topics:
        topics === null
          ? null
          : topics.map((t) => ({
              ...defaultOffsetFetchRequestOffsetFetchRequestTopic(),
              name: t.name,
              partitionIndexes: t.partitions,
            })),
      requireStable: false,
    }
  return {
    groups: [
      {
        ...defaultOffsetFetchRequestOffsetFetchRequestGroup(),
        groupId,
        topics:
          topics === null
            ? null
            : topics.map((t) => ({
                ...defaultOffsetFetchRequestOffsetFetchRequestTopics(),
                name: t.name,
                partitionIndexes: t.partitions,
              })),
      },
    ],
    requireStable: false,
  }
}

export function describeConfigs(
  resources: readonly { type: number; name: string; keys?: string[] | null }[],
  includeSynonyms = true,
) {
  return {
    resources: resources.map((r) => ({
      ...defaultDescribeConfigsRequestDescribeConfigsResource(),
      resourceType: r.type,
      resourceName: r.name,
      configurationKeys: r.keys ?? null,
    })),
    includeSynonyms,
    includeDocumentation: false,
  }
}

export function deleteRecords(topic: string, offsets: readonly { partition: number; offset: number }[]) {
  return {
    topics: [
      {
        ...defaultDeleteRecordsRequestDeleteRecordsTopic(),
        name: topic,
        partitions: offsets.map((o) => ({
          ...defaultDeleteRecordsRequestDeleteRecordsPartition(),
          partitionIndex: o.partition,
          offset: BigInt(o.offset),
        })),
      },
    ],
    timeoutMs: 10_000,
  }
}

export function initProducerId(transactionalId: string | null, transactionTimeoutMs = 60_000) {
  return { transactionalId, transactionTimeoutMs, producerId: -1n, producerEpoch: -1 }
}

/** AddPartitionsToTxn as a client sends it (v3 and below). */
export function addPartitionsToTxn(
  transactionalId: string,
  producerId: bigint,
  producerEpoch: number,
  topic: string,
  partitions: number[],
) {
  return {
    v3AndBelowTransactionalId: transactionalId,
    v3AndBelowProducerId: producerId,
    v3AndBelowProducerEpoch: producerEpoch,
    v3AndBelowTopics: [
      { ...defaultAddPartitionsToTxnRequestAddPartitionsToTxnTopic(), name: topic, partitions },
    ],
  }
}

export function endTxn(
  transactionalId: string,
  producerId: bigint,
  producerEpoch: number,
  committed: boolean,
) {
  return { transactionalId, producerId, producerEpoch, committed }
}

/** A consumer protocol subscription (version 0) to `topics`: JoinGroup metadata. */
export function subscription(topics: string[]): Buffer {
  const parts: Buffer[] = []
  const int16 = (n: number) => {
    const b = Buffer.alloc(2)
    b.writeInt16BE(n)
    return b
  }
  const int32 = (n: number) => {
    const b = Buffer.alloc(4)
    b.writeInt32BE(n)
    return b
  }
  parts.push(int16(0), int32(topics.length))
  for (const t of topics) parts.push(int16(Buffer.byteLength(t)), Buffer.from(t))
  parts.push(int32(-1))
  return Buffer.concat(parts)
}

export function joinGroup(groupId: string, memberId: string, topics: string[]) {
  return {
    groupId,
    sessionTimeoutMs: 30_000,
    rebalanceTimeoutMs: 30_000,
    memberId,
    groupInstanceId: null,
    protocolType: 'consumer',
    protocols: [
      { ...defaultJoinGroupRequestJoinGroupRequestProtocol(), name: 'range', metadata: subscription(topics) },
    ],
    reason: null,
  }
}

export function syncGroup(groupId: string, generationId: number, memberId: string, assignment: Buffer) {
  return {
    groupId,
    generationId,
    memberId,
    groupInstanceId: null,
    protocolType: 'consumer',
    protocolName: 'range',
    assignments: [{ ...defaultSyncGroupRequestSyncGroupRequestAssignment(), memberId, assignment }],
  }
}
