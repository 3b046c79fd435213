/**
 * The consumer's fetch state: a partition's position and reset, the fetched results waiting
 * to be polled, and the Fetch request built for one leader (Kafka's FetchCollector and
 * AbstractFetch hold the same).
 */
import {
  defaultFetchRequest,
  defaultFetchRequestFetchPartition,
  type FetchRequest,
} from '../protocol/generated/fetch-request.js'
import { ZERO_UUID } from '../protocol/primitives.js'
import type { KafkaClient } from './client.js'
import type { ResolvedConsumerOptions } from './consumer-options.js'
import type { AbortedTransaction, ConsumerRecord } from './fetch-records.js'
import { type TopicPartition, tpKey } from './leader-requests.js'
import type { OffsetSpec } from './offsets.js'

type FetchSizes = Pick<
  ResolvedConsumerOptions,
  'fetchMaxWaitMs' | 'fetchMinBytes' | 'fetchMaxBytes' | 'isolationLevel' | 'maxPartitionFetchBytes'
>

export interface PartitionState {
  readonly tp: TopicPartition
  /** Next offset to return; null while it must be looked up (reset or seek by time). */
  position: number | null
  resetTo: OffsetSpec | 'none' | null
  /** Assign mode with a groupId: look up the group's committed offset before resetTo. */
  useCommitted: boolean
  paused: boolean
  highWatermark: number
  logStartOffset: number
}

export interface Buffered {
  readonly state: PartitionState
  /** The position these records continue from; stale (dropped) if the position moved. */
  fetchOffset: number
  records: ConsumerRecord[]
  nextOffset: number
  /** False while its records are still being decoded (nextOffset is known from the batch headers). */
  decoded: boolean
}

/** A fetched partition's records, to decode into their (already buffered) entry. */
export interface PendingDecode {
  readonly state: PartitionState
  readonly blob: Buffer | null
  readonly fetchOffset: number
  readonly aborted: readonly AbortedTransaction[] | null
  /** The buffered entry to fill; null: decode first, then buffer (none to fill, or nextOffset unknown). */
  readonly entry: Buffered | null
  /** Whether the batch headers told the next offset (false: legacy messages, or bad framing). */
  readonly nextOffsetKnown: boolean
}

/** A full fetch (no session) of the given partitions from their leader, at `offsets`. */
export function buildFetchRequest(
  options: FetchSizes,
  client: KafkaClient,
  states: readonly PartitionState[],
  offsets: ReadonlyMap<string, number>,
): FetchRequest {
  const byTopic = new Map<string, PartitionState[]>()
  for (const s of states) byTopic.set(s.tp.topic, [...(byTopic.get(s.tp.topic) ?? []), s])
  return {
    ...defaultFetchRequest(),
    maxWaitMs: options.fetchMaxWaitMs,
    minBytes: options.fetchMinBytes,
    maxBytes: options.fetchMaxBytes,
    isolationLevel: options.isolationLevel === 'read_committed' ? 1 : 0,
    // Full fetches (sessionId 0, sessionEpoch -1: the defaults); replicaId -1, a consumer.
    topics: [...byTopic].map(([topic, list]) => ({
      topic,
      topicId: ZERO_UUID,
      partitions: list.map((s) => ({
        ...defaultFetchRequestFetchPartition(),
        partition: s.tp.partition,
        // KIP-320: a demoted leader answers FENCED_LEADER_EPOCH rather than serve as a follower.
        currentLeaderEpoch: client.metadata.partition(s.tp.topic, s.tp.partition)?.leaderEpoch ?? -1,
        fetchOffset: BigInt(offsets.get(tpKey(s.tp))!),
        partitionMaxBytes: options.maxPartitionFetchBytes,
      })),
    })),
  }
}
