/**
 * ListOffsets for the consumer (seek to beginning/end/time) and the admin: the earliest
 * offset, the latest (the high watermark), or the first offset whose timestamp is at least
 * a given time.
 */

import { ApiKey } from '../protocol/generated/index.js'
import type { ListOffsetsRequest } from '../protocol/generated/list-offsets-request.js'
import type { ListOffsetsResponse } from '../protocol/generated/list-offsets-response.js'
import type { KafkaClient } from './client.js'
import { type PartitionOutcome, requestByLeader, type TopicPartition, tpKey } from './leader-requests.js'

/** ListOffsets v10's wait for remote offsets (KIP-1075); unused below v10, which this client stays under. */
const LIST_OFFSETS_TIMEOUT_MS = 30_000

export const EARLIEST_TIMESTAMP = -2
export const LATEST_TIMESTAMP = -1

/** 'earliest', 'latest', or milliseconds since the epoch. */
export type OffsetSpec = 'earliest' | 'latest' | number

export interface OffsetQuery extends TopicPartition {
  readonly spec: OffsetSpec
}

export interface ListedOffset {
  topic: string
  partition: number
  /** -1 when a timestamp query finds no record at or after the time. */
  offset: number
  timestamp: number
  leaderEpoch: number
}

export type IsolationLevel = 'read_uncommitted' | 'read_committed'

export async function listOffsets(
  client: KafkaClient,
  queries: readonly OffsetQuery[],
  isolationLevel: IsolationLevel = 'read_uncommitted',
): Promise<Map<string, ListedOffset>> {
  return requestByLeader<OffsetQuery, ListedOffset>(client, queries, async (nodeId, group) => {
    const response = await client.request<ListOffsetsResponse>(nodeId, ApiKey.ListOffsets, () =>
      request(group, isolationLevel),
    )
    const outcomes = new Map<string, PartitionOutcome<ListedOffset>>()
    for (const topic of response.topics) {
      for (const p of topic.partitions) {
        const offset = p.offset >= 0n ? Number(p.offset) : Number(p.oldStyleOffsets[0] ?? -1n)
        outcomes.set(tpKey({ topic: topic.name, partition: p.partitionIndex }), {
          errorCode: p.errorCode,
          value: {
            topic: topic.name,
            partition: p.partitionIndex,
            offset,
            timestamp: Number(p.timestamp),
            leaderEpoch: p.leaderEpoch,
          },
        })
      }
    }
    return outcomes
  })
}

function request(group: readonly OffsetQuery[], isolationLevel: IsolationLevel): ListOffsetsRequest {
  const byTopic = new Map<string, OffsetQuery[]>()
  for (const q of group) byTopic.set(q.topic, [...(byTopic.get(q.topic) ?? []), q])
  return {
    replicaId: -1,
    isolationLevel: isolationLevel === 'read_committed' ? 1 : 0,
    timeoutMs: LIST_OFFSETS_TIMEOUT_MS,
    topics: [...byTopic].map(([name, qs]) => ({
      name,
      partitions: qs.map((q) => ({
        partitionIndex: q.partition,
        currentLeaderEpoch: -1,
        timestamp: BigInt(specTimestamp(q.spec)),
        maxNumOffsets: 1,
      })),
    })),
  }
}

export function specTimestamp(spec: OffsetSpec): number {
  if (spec === 'earliest') return EARLIEST_TIMESTAMP
  if (spec === 'latest') return LATEST_TIMESTAMP
  return spec
}
