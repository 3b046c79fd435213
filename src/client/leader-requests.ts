/**
 * Requests addressed to partition leaders (ListOffsets, DeleteRecords): group the
 * partitions by leader, send one request per broker, and retry the partitions that came
 * back with a retriable or leadership error after a metadata refresh, a bounded number of
 * times.
 */
import { ErrorCode } from '../protocol/error-codes.js'
import type { KafkaClient } from './client.js'
import { InvalidArgumentError, KafkaProtocolError } from './errors.js'
import { isRetriableError, needsMetadataRefresh, sleep } from './retry.js'

export interface TopicPartition {
  readonly topic: string
  readonly partition: number
}

export function tpKey(tp: TopicPartition): string {
  return `${tp.topic}/${tp.partition}`
}

export interface PartitionOutcome<R> {
  errorCode: number
  value?: R
  errorMessage?: string | null
}

/** Sends the items one broker is leader for; returns an outcome per tpKey. */
export type LeaderSend<T extends TopicPartition, R> = (
  nodeId: number,
  items: readonly T[],
) => Promise<Map<string, PartitionOutcome<R>>>

const ATTEMPTS_MAX = 6

export async function requestByLeader<T extends TopicPartition, R>(
  client: KafkaClient,
  items: readonly T[],
  send: LeaderSend<T, R>,
): Promise<Map<string, R>> {
  const results = new Map<string, R>()
  const keys = new Set(items.map(tpKey))
  // Kafka rejects a request naming a partition twice (INVALID_REQUEST): one item per partition.
  if (keys.size !== items.length)
    throw new InvalidArgumentError('each partition may appear only once per call')
  let pending = [...items]
  let lastError: unknown = null
  for (let attempt = 1; pending.length > 0 && attempt <= ATTEMPTS_MAX; attempt++) {
    if (attempt > 1) await sleep(client.clock, client.backoff.delayMs(attempt - 1))
    const topics = [...new Set(pending.map((i) => i.topic))]
    const snapshot =
      attempt > 1 || topics.some((t) => !client.metadata.topics.has(t))
        ? await client.refreshMetadata(topics)
        : client.metadata
    const { byLeader, retry, failure } = groupByLeader(pending, snapshot)
    if (failure) throw failure
    const sends = [...byLeader].map(([nodeId, group]) => sendGroup(nodeId, group, send, results))
    const outcomes = await Promise.all(sends)
    pending = [...retry, ...outcomes.flatMap((o) => o.retry)]
    lastError =
      outcomes.find((o) => o.error)?.error ??
      (retry.length > 0 ? new KafkaProtocolError(ErrorCode.LEADER_NOT_AVAILABLE) : null)
  }
  if (pending.length > 0) throw lastError ?? new KafkaProtocolError(ErrorCode.LEADER_NOT_AVAILABLE)
  return results
}

function groupByLeader<T extends TopicPartition>(
  items: readonly T[],
  snapshot: KafkaClient['metadata'],
): { byLeader: Map<number, T[]>; retry: T[]; failure: KafkaProtocolError | null } {
  const byLeader = new Map<number, T[]>()
  const retry: T[] = []
  for (const item of items) {
    const topicError = snapshot.topicErrors.get(item.topic)
    if (!snapshot.topics.has(item.topic)) {
      const code = topicError ?? ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
      if (code !== ErrorCode.LEADER_NOT_AVAILABLE)
        return { byLeader, retry, failure: new KafkaProtocolError(code, `topic ${item.topic}`) }
    }
    const info = snapshot.partition(item.topic, item.partition)
    if (snapshot.topics.has(item.topic) && !info) {
      return {
        byLeader,
        retry,
        failure: new KafkaProtocolError(
          ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
          `${item.topic}-${item.partition}`,
        ),
      }
    }
    const leader = snapshot.leaderOf(item.topic, item.partition)
    if (!leader) {
      retry.push(item)
      continue
    }
    const list = byLeader.get(leader.nodeId) ?? []
    list.push(item)
    byLeader.set(leader.nodeId, list)
  }
  return { byLeader, retry, failure: null }
}

async function sendGroup<T extends TopicPartition, R>(
  nodeId: number,
  group: readonly T[],
  send: LeaderSend<T, R>,
  results: Map<string, R>,
): Promise<{ retry: T[]; error: unknown }> {
  let outcomes: Map<string, PartitionOutcome<R>>
  try {
    outcomes = await send(nodeId, group)
  } catch (error) {
    if (!isRetriableError(error)) throw error
    return { retry: [...group], error }
  }
  const retry: T[] = []
  let error: unknown = null
  for (const item of group) {
    const outcome = outcomes.get(tpKey(item)) ?? { errorCode: ErrorCode.UNKNOWN_SERVER_ERROR }
    if (outcome.errorCode === ErrorCode.NONE) {
      results.set(tpKey(item), outcome.value as R)
      continue
    }
    const failure = new KafkaProtocolError(
      outcome.errorCode,
      outcome.errorMessage ?? `${item.topic}-${item.partition}`,
    )
    if (!isRetriableError(failure) && !needsMetadataRefresh(failure)) throw failure
    retry.push(item)
    error = failure
  }
  return { retry, error }
}
