/**
 * How a broker reaches the share coordinator of a share-partition (Kafka's
 * DefaultStatePersister, KIP-932): the leader of the `__share_group_state` partition its key
 * "group:topicId:partition" hashes to, called directly when that is this broker, else with
 * Read/WriteShareGroupState (84, 85), InitializeShareGroupState (83), DeleteShareGroupState
 * (86) or ReadShareGroupStateSummary (87) on the inter-broker listener. The topic is made on
 * first use. As Kafka's persister, a call is retried with backoff while the coordinator
 * moves or loads (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
 * no answer), up to PERSISTER_RETRY_MS; then its last error is the answer.
 */
import type {
  ShareStateRead,
  ShareStateSummaryRead,
  ShareStateWrite,
} from '../../coordinator/share/share-coordinator-shard.js'
import { coordinatorKeyOf, type SharePartitionKey } from '../../coordinator/share/share-state-records.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DeleteShareGroupStateResponse,
  type InitializeShareGroupStateResponse,
  type ReadShareGroupStateResponse,
  type ReadShareGroupStateSummaryResponse,
  type WriteShareGroupStateResponse,
} from '../../protocol/generated/index.js'
import type { BrokerClient } from '../../replication/broker-client.js'
import type { BrokerServices } from '../broker-services.js'
import { clientFor, dropClient, sleep, withTimeout } from './share-broker-clients.js'
import type { SharePersister } from './share-partition-manager.js'

/**
 * How long a persister call keeps retrying a coordinator that moves or loads: with a call's
 * own bound, an acknowledgement or fetch waiting on it still answers well within a client's
 * request.timeout.ms (30 s).
 */
const PERSISTER_RETRY_MS = 10_000
const BACKOFF_MS = 100
const BACKOFF_MAX_MS = 1000
/** A remote call's own bound, below the retry budget so a hung connection is retried. */
const CALL_TIMEOUT_MS = 5_000

const RETRIABLE = new Set<number>([
  ErrorCode.NOT_COORDINATOR,
  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
  ErrorCode.REQUEST_TIMED_OUT,
])

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

function partitionOf<P extends { partition: number }>(
  results: readonly { topicId: string; partitions: readonly P[] }[],
  key: SharePartitionKey,
): P | undefined {
  return results.find((t) => t.topicId === key.topicId)?.partitions.find((p) => p.partition === key.partition)
}

const topicsOf = (key: SharePartitionKey, partition: object) => [
  { topicId: key.topicId, partitions: [{ partition: key.partition, ...partition }] },
]

export function sharePersisterOf(broker: BrokerServices): SharePersister {
  return {
    readState: (key, leaderEpoch) => readState(broker, key, leaderEpoch),
    writeState: (key, write) => writeState(broker, key, write),
    initializeState: (key, stateEpoch, startOffset) =>
      simpleCall(
        broker,
        key,
        () => broker.shareCoordinator.initializeState(key, stateEpoch, startOffset),
        (client) =>
          client.request<InitializeShareGroupStateResponse>(ApiKey.InitializeShareGroupState, 0, {
            groupId: key.groupId,
            topics: topicsOf(key, { stateEpoch, startOffset: BigInt(startOffset) }),
          }),
      ),
    deleteState: (key) =>
      simpleCall(
        broker,
        key,
        () => broker.shareCoordinator.deleteState(key),
        (client) =>
          client.request<DeleteShareGroupStateResponse>(ApiKey.DeleteShareGroupState, 0, {
            groupId: key.groupId,
            topics: topicsOf(key, {}),
          }),
      ),
    readSummary: (key) => readSummary(broker, key),
  }
}

function readState(
  broker: BrokerServices,
  key: SharePartitionKey,
  leaderEpoch: number,
): Promise<ShareStateRead> {
  return call(
    broker,
    key,
    () => broker.shareCoordinator.readState(key, leaderEpoch),
    async (client) => {
      const response = await client.request<ReadShareGroupStateResponse>(ApiKey.ReadShareGroupState, 0, {
        groupId: key.groupId,
        topics: topicsOf(key, { leaderEpoch }),
      })
      const p = partitionOf(response.results, key)
      if (!p) return failedRead(ErrorCode.UNKNOWN_SERVER_ERROR)
      return {
        errorCode: p.errorCode,
        startOffset: Number(p.startOffset),
        stateEpoch: p.stateEpoch,
        stateBatches: p.stateBatches.map((b) => ({
          firstOffset: Number(b.firstOffset),
          lastOffset: Number(b.lastOffset),
          deliveryState: b.deliveryState,
          deliveryCount: b.deliveryCount,
        })),
      }
    },
    (read) => read.errorCode,
    failedRead,
  )
}

function writeState(broker: BrokerServices, key: SharePartitionKey, write: ShareStateWrite): Promise<number> {
  return simpleCall(
    broker,
    key,
    () => broker.shareCoordinator.writeState(key, write),
    (client) =>
      client.request<WriteShareGroupStateResponse>(ApiKey.WriteShareGroupState, 1, {
        groupId: key.groupId,
        topics: topicsOf(key, {
          stateEpoch: write.stateEpoch,
          leaderEpoch: write.leaderEpoch,
          startOffset: BigInt(write.startOffset),
          deliveryCompleteCount: write.deliveryCompleteCount,
          stateBatches: write.stateBatches.map((b) => ({
            firstOffset: BigInt(b.firstOffset),
            lastOffset: BigInt(b.lastOffset),
            deliveryState: b.deliveryState,
            deliveryCount: b.deliveryCount,
          })),
        }),
      }),
  )
}

function readSummary(broker: BrokerServices, key: SharePartitionKey): Promise<ShareStateSummaryRead> {
  return call(
    broker,
    key,
    async () => broker.shareCoordinator.readSummary(key),
    async (client) => {
      const response = await client.request<ReadShareGroupStateSummaryResponse>(
        ApiKey.ReadShareGroupStateSummary,
        1,
        { groupId: key.groupId, topics: topicsOf(key, { leaderEpoch: -1 }) },
      )
      const p = partitionOf(response.results, key)
      if (!p) return failedSummary(ErrorCode.UNKNOWN_SERVER_ERROR)
      return {
        errorCode: p.errorCode,
        startOffset: Number(p.startOffset),
        stateEpoch: p.stateEpoch,
        leaderEpoch: p.leaderEpoch,
        deliveryCompleteCount: p.deliveryCompleteCount,
      }
    },
    (summary) => summary.errorCode,
    failedSummary,
  )
}

/** A call answered by one error code per partition. */
function simpleCall(
  broker: BrokerServices,
  key: SharePartitionKey,
  local: () => Promise<number>,
  remote: (
    client: BrokerClient,
  ) => Promise<{ results: { topicId: string; partitions: { partition: number; errorCode: number }[] }[] }>,
): Promise<number> {
  return call(
    broker,
    key,
    local,
    async (client) =>
      partitionOf((await remote(client)).results, key)?.errorCode ?? ErrorCode.UNKNOWN_SERVER_ERROR,
    (code) => code,
    (code) => code,
  )
}

/**
 * One persister call: locally or on the key's coordinator, retried while the coordinator
 * moves or loads.
 */
async function call<T>(
  broker: BrokerServices,
  key: SharePartitionKey,
  local: () => Promise<T>,
  remote: (client: BrokerClient) => Promise<T>,
  errorOf: (answer: T) => number,
  failed: (errorCode: number) => T,
): Promise<T> {
  const deadline = broker.clock.monotonicMs() + PERSISTER_RETRY_MS
  let backoffMs = BACKOFF_MS
  for (;;) {
    const answer = await callOnce(broker, key, local, remote, failed)
    if (!RETRIABLE.has(errorOf(answer)) || broker.clock.monotonicMs() + backoffMs > deadline) return answer
    await sleep(broker, backoffMs)
    backoffMs = Math.min(backoffMs * 2, BACKOFF_MAX_MS)
  }
}

async function callOnce<T>(
  broker: BrokerServices,
  key: SharePartitionKey,
  local: () => Promise<T>,
  remote: (client: BrokerClient) => Promise<T>,
  failed: (errorCode: number) => T,
): Promise<T> {
  let leader = broker.shareCoordinator.leaderOf(key)
  if (leader < 0) {
    // No topic yet (made here, as FindCoordinator would), or no leader for the key's partition.
    const found = await broker.shareCoordinator.findCoordinator(coordinatorKeyOf(key))
    if (found.errorCode !== ErrorCode.NONE) return failed(found.errorCode)
    leader = found.nodeId
  }
  if (leader === broker.nodeId) return local()
  const client = clientFor(broker, leader)
  if (!client) return failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
  try {
    return await withTimeout(broker, remote(client), CALL_TIMEOUT_MS)
  } catch {
    dropClient(broker, leader, client)
    return failed(ErrorCode.REQUEST_TIMED_OUT)
  }
}
