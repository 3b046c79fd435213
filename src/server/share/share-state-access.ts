/**
 * How the group coordinator reaches the share-partition state of a share group (Kafka's
 * Persister: readSummary, initializeState, deleteState, answered by the share coordinator
 * from `__share_group_state`).
 *
 * In tidelog the state lives in memory on each partition's leader (share-partition-manager.ts),
 * so the coordinator reads and changes it there: directly when it leads the partition itself,
 * else with Kafka's share state requests sent to the leader on the inter-broker listener,
 * ReadShareGroupStateSummary (87, plus ListOffsets for the lag's high watermark),
 * InitializeShareGroupState (83) and DeleteShareGroupState (86), which tidelog serves on the
 * partition leader (handlers/*-share-group-state*.ts) where Kafka serves them on the share
 * coordinator. A leader that cannot be reached answers REQUEST_TIMED_OUT for its partitions.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type DeleteShareGroupStateResponse,
  type InitializeShareGroupStateResponse,
  type ListOffsetsResponse,
  type ReadShareGroupStateSummaryResponse,
} from '../../protocol/generated/index.js'
import { BrokerClient } from '../../replication/broker-client.js'
import type { BrokerServices } from '../broker-services.js'
import type { ShareStateSummary, ShareTopicPartition } from './share-partition-manager.js'
import { sharePartitionManagerOf } from './share-services.js'

/** How long a leader has to answer a share state request (Kafka's request.timeout.ms default). */
const REQUEST_TIMEOUT_MS = 30_000
const LATEST_TIMESTAMP = -1n

const unreachable = (errorCode: number): ShareStateSummary => ({
  errorCode,
  startOffset: -1,
  leaderEpoch: -1,
  deliveryCompleteCount: -1,
  highWatermark: -1,
})

/** The leader of `tp` in this broker's metadata, or -1. */
function leaderOf(broker: BrokerServices, tp: ShareTopicPartition): number {
  const topic = broker.metadataImage().topics.get(tp.topic)
  if (topic?.topicId !== tp.topicId) return -1
  return topic.partitions[tp.partition]?.leader ?? -1
}

/**
 * Runs `local` on the partitions led here and `remote` once per other leader with its
 * partitions; answers in the order of `partitions`. A partition without a leader, or whose
 * leader failed to answer, gets `failed(errorCode)`.
 */
async function byLeader<P extends ShareTopicPartition, T>(
  broker: BrokerServices,
  partitions: readonly P[],
  local: (tp: P) => T,
  remote: (client: BrokerClient, tps: P[]) => Promise<T[]>,
  failed: (errorCode: number) => T,
): Promise<T[]> {
  const results: T[] = new Array(partitions.length)
  const elsewhere = new Map<number, number[]>()
  partitions.forEach((tp, i) => {
    const leader = leaderOf(broker, tp)
    if (leader === broker.nodeId) results[i] = local(tp)
    else if (leader < 0) results[i] = failed(ErrorCode.LEADER_NOT_AVAILABLE)
    else elsewhere.set(leader, [...(elsewhere.get(leader) ?? []), i])
  })
  await Promise.all(
    [...elsewhere].map(async ([leader, indexes]) => {
      const client = clientFor(broker, leader)
      let answers: T[] | undefined
      try {
        if (client)
          answers = await withTimeout(
            broker,
            remote(
              client,
              indexes.map((i) => partitions[i]),
            ),
          )
      } catch {
        // The connection may be stuck or gone: the next request dials again.
        if (client) dropClient(broker, leader, client)
      }
      indexes.forEach((at, k) => {
        results[at] = answers ? answers[k] : failed(ErrorCode.REQUEST_TIMED_OUT)
      })
    }),
  )
  return results
}

/** The group's SPSO (and what the lag needs) on each partition. */
export function readStateSummaries(
  broker: BrokerServices,
  groupId: string,
  partitions: readonly ShareTopicPartition[],
): Promise<ShareStateSummary[]> {
  const manager = sharePartitionManagerOf(broker)
  return byLeader(
    broker,
    partitions,
    (tp) => manager.stateSummary(groupId, tp),
    async (client, tps) => {
      const [read, latest] = await Promise.all([
        client.request<ReadShareGroupStateSummaryResponse>(ApiKey.ReadShareGroupStateSummary, 1, {
          groupId,
          topics: byTopicId(tps, (tp) => ({ partition: tp.partition, leaderEpoch: -1 })),
        }),
        client.request<ListOffsetsResponse>(ApiKey.ListOffsets, 7, {
          replicaId: -1,
          isolationLevel: 0,
          topics: byTopicName(tps, (tp) => ({
            partitionIndex: tp.partition,
            currentLeaderEpoch: -1,
            timestamp: LATEST_TIMESTAMP,
            maxNumOffsets: 1,
          })),
        }),
      ])
      return tps.map((tp) => {
        const p = read.results
          .find((t) => t.topicId === tp.topicId)
          ?.partitions.find((q) => q.partition === tp.partition)
        const end = latest.topics
          .find((t) => t.name === tp.topic)
          ?.partitions.find((q) => q.partitionIndex === tp.partition)
        if (!p || !end) return unreachable(ErrorCode.UNKNOWN_SERVER_ERROR)
        if (p.errorCode !== ErrorCode.NONE) return unreachable(p.errorCode)
        return {
          errorCode: end.errorCode,
          startOffset: Number(p.startOffset),
          leaderEpoch: p.leaderEpoch,
          deliveryCompleteCount: p.deliveryCompleteCount,
          highWatermark: Number(end.offset),
        }
      })
    },
    unreachable,
  )
}

/** Starts the group's share-partitions over at the given offsets; an error code per partition. */
export function initializeStates(
  broker: BrokerServices,
  groupId: string,
  partitions: readonly (ShareTopicPartition & { startOffset: number })[],
): Promise<number[]> {
  const manager = sharePartitionManagerOf(broker)
  return byLeader(
    broker,
    partitions,
    (tp) => manager.initializeState(groupId, tp, tp.startOffset),
    async (client, tps) => {
      const response = await client.request<InitializeShareGroupStateResponse>(
        ApiKey.InitializeShareGroupState,
        0,
        {
          groupId,
          topics: byTopicId(tps, (tp) => ({
            partition: tp.partition,
            stateEpoch: 0,
            startOffset: BigInt(tp.startOffset),
          })),
        },
      )
      return tps.map((tp) => codeOf(response.results, tp))
    },
    (code) => code,
  )
}

/** Forgets the group's share-partitions; an error code per partition. */
export function deleteStates(
  broker: BrokerServices,
  groupId: string,
  partitions: readonly ShareTopicPartition[],
): Promise<number[]> {
  const manager = sharePartitionManagerOf(broker)
  return byLeader(
    broker,
    partitions,
    (tp) => manager.deleteState(groupId, tp),
    async (client, tps) => {
      const response = await client.request<DeleteShareGroupStateResponse>(ApiKey.DeleteShareGroupState, 0, {
        groupId,
        topics: byTopicId(tps, (tp) => ({ partition: tp.partition })),
      })
      return tps.map((tp) => codeOf(response.results, tp))
    },
    (code) => code,
  )
}

/**
 * DeleteGroups of a share group: an empty one forgets its state on every partition it has
 * state for, then is removed (NON_EMPTY_GROUP with members). Undefined when `groupId` is not
 * a share group here, for the classic and consumer groups' path.
 */
export async function deleteShareGroup(broker: BrokerServices, groupId: string): Promise<number | undefined> {
  const share = broker.groupCoordinator.share
  const group = share.offsetsTarget(groupId, false)
  if (!('groupEpoch' in group)) return undefined
  if (group.members.size > 0) return ErrorCode.NON_EMPTY_GROUP
  const image = broker.metadataImage()
  const partitions: ShareTopicPartition[] = []
  for (const [topic, { topicId }] of image.topics)
    for (const partition of group.initialized.get(topicId) ?? [])
      partitions.push({ topic, topicId, partition })
  const failed = (await deleteStates(broker, groupId, partitions)).find((code) => code !== ErrorCode.NONE)
  if (failed !== undefined) return failed
  return share.remove(groupId)
}

function codeOf(
  results: readonly { topicId: string; partitions: readonly { partition: number; errorCode: number }[] }[],
  tp: ShareTopicPartition,
): number {
  const found = results
    .find((t) => t.topicId === tp.topicId)
    ?.partitions.find((p) => p.partition === tp.partition)
  return found?.errorCode ?? ErrorCode.UNKNOWN_SERVER_ERROR
}

function byTopicId<P extends ShareTopicPartition, Q>(
  tps: readonly P[],
  partition: (tp: P) => Q,
): { topicId: string; partitions: Q[] }[] {
  const topics = new Map<string, Q[]>()
  for (const tp of tps) topics.set(tp.topicId, [...(topics.get(tp.topicId) ?? []), partition(tp)])
  return [...topics].map(([topicId, partitions]) => ({ topicId, partitions }))
}

function byTopicName<P extends ShareTopicPartition, Q>(
  tps: readonly P[],
  partition: (tp: P) => Q,
): { name: string; partitions: Q[] }[] {
  const topics = new Map<string, Q[]>()
  for (const tp of tps) topics.set(tp.topic, [...(topics.get(tp.topic) ?? []), partition(tp)])
  return [...topics].map(([name, partitions]) => ({ name, partitions }))
}

/** Each broker's connections to the other leaders, redialled when an address changes. */
const clients = new WeakMap<BrokerServices, Map<number, { address: string; client: BrokerClient }>>()

function clientFor(broker: BrokerServices, nodeId: number): BrokerClient | undefined {
  const dialer = broker.interBroker
  const address = dialer?.brokerAddress(nodeId)
  if (!dialer || !address) return undefined
  let known = clients.get(broker)
  if (!known) {
    known = new Map()
    clients.set(broker, known)
  }
  const key = `${address.host}:${address.port}`
  const existing = known.get(nodeId)
  if (existing?.address === key) return existing.client
  existing?.client.close()
  const client = new BrokerClient(
    address.host,
    address.port,
    `broker-${broker.nodeId}-share`,
    dialer.transport,
  )
  known.set(nodeId, { address: key, client })
  return client
}

function dropClient(broker: BrokerServices, nodeId: number, client: BrokerClient): void {
  const known = clients.get(broker)
  if (known?.get(nodeId)?.client === client) known.delete(nodeId)
  client.close()
}

function withTimeout<T>(broker: BrokerServices, promise: Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = broker.clock.setTimeout(
      () => reject(new Error('share state request timed out')),
      REQUEST_TIMEOUT_MS,
    )
    promise.then(
      (value) => {
        timer.cancel()
        resolve(value)
      },
      (error: unknown) => {
        timer.cancel()
        reject(error)
      },
    )
  })
}
