/**
 * How the group coordinator reaches the share-partition state of a share group (Kafka's
 * Persister: readSummary, initializeState, deleteState): the share coordinator of each
 * share-partition (share-persister.ts, `__share_group_state`), and for the lag the partition
 * leader's high watermark (directly when led here, else ListOffsets on the inter-broker
 * listener). An initialize or delete also drops this broker's own share-partition if it leads
 * the partition; another leader drops its copy when the group's last share session there ends
 * (share-partition-manager.ts), which an empty group's (the only ones altered) already has.
 * A leader that cannot be reached answers REQUEST_TIMED_OUT for its partitions.
 */
import { type BrokerId, NO_LEADER } from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { ApiKey, type ListOffsetsResponse } from '../../protocol/generated/index.js'
import type { BrokerServices } from '../broker-services.js'
import { clientFor, dropClient, withTimeout } from './share-broker-clients.js'
import type { ShareTopicPartition } from './share-partition-manager.js'
import { sharePersisterOf } from './share-persister.js'
import { sharePartitionManagerOf } from './share-services.js'

const LATEST_TIMESTAMP = -1n

/** A share-partition's state as DescribeShareGroupOffsets shows it (ReadShareGroupStateSummary). */
export interface ShareStateSummary {
  readonly errorCode: number
  /** SPSO, or -1 when the group has no state on the partition. */
  readonly startOffset: number
  readonly leaderEpoch: number
  readonly deliveryCompleteCount: number
  readonly highWatermark: number
}

const unreachable = (errorCode: number): ShareStateSummary => ({
  errorCode,
  startOffset: -1,
  leaderEpoch: -1,
  deliveryCompleteCount: -1,
  highWatermark: -1,
})

/** The leader of `tp` in this broker's metadata, or -1. */
function leaderOf(broker: BrokerServices, tp: ShareTopicPartition): BrokerId {
  const topic = broker.metadataImage().topics.get(tp.topic)
  if (topic?.topicId !== tp.topicId) return NO_LEADER
  return topic.partitions[tp.partition]?.leader ?? NO_LEADER
}

/** Each partition's high watermark from its leader, or why there is none. */
async function highWatermarks(
  broker: BrokerServices,
  partitions: readonly ShareTopicPartition[],
): Promise<{ errorCode: number; highWatermark: number }[]> {
  const results: { errorCode: number; highWatermark: number }[] = new Array(partitions.length)
  const elsewhere = new Map<BrokerId, number[]>()
  partitions.forEach((tp, i) => {
    const leader = leaderOf(broker, tp)
    if (leader === broker.nodeId) {
      const partition = broker.replicaManager.getPartition(tp.topic, tp.partition)
      results[i] = partition?.isLeader
        ? { errorCode: ErrorCode.NONE, highWatermark: partition.highWatermark }
        : { errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, highWatermark: -1 }
    } else if (leader < 0) results[i] = { errorCode: ErrorCode.LEADER_NOT_AVAILABLE, highWatermark: -1 }
    else elsewhere.set(leader, [...(elsewhere.get(leader) ?? []), i])
  })
  await Promise.all(
    [...elsewhere].map(async ([leader, indexes]) => {
      const client = clientFor(broker, leader)
      const tps = indexes.map((i) => partitions[i])
      let latest: ListOffsetsResponse | undefined
      try {
        if (client)
          latest = await withTimeout(
            broker,
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
          )
      } catch {
        if (client) dropClient(broker, leader, client)
      }
      indexes.forEach((at) => {
        const tp = partitions[at]
        const end = latest?.topics
          .find((t) => t.name === tp.topic)
          ?.partitions.find((q) => q.partitionIndex === tp.partition)
        results[at] = end
          ? { errorCode: end.errorCode, highWatermark: Number(end.offset) }
          : { errorCode: ErrorCode.REQUEST_TIMED_OUT, highWatermark: -1 }
      })
    }),
  )
  return results
}

/** The group's SPSO (and what the lag needs) on each partition. */
export async function readStateSummaries(
  broker: BrokerServices,
  groupId: string,
  partitions: readonly ShareTopicPartition[],
): Promise<ShareStateSummary[]> {
  const persister = sharePersisterOf(broker)
  const [summaries, ends] = await Promise.all([
    Promise.all(
      partitions.map((tp) =>
        persister.readSummary({ groupId, topicId: tp.topicId, partition: tp.partition }),
      ),
    ),
    highWatermarks(broker, partitions),
  ])
  return partitions.map((_, i) => {
    const summary = summaries[i]
    const end = ends[i]
    if (summary.errorCode !== ErrorCode.NONE) return unreachable(summary.errorCode)
    return {
      errorCode: end.errorCode,
      startOffset: summary.startOffset,
      leaderEpoch: summary.leaderEpoch,
      deliveryCompleteCount: summary.deliveryCompleteCount,
      highWatermark: end.highWatermark,
    }
  })
}

/**
 * Starts the group's share-partitions over at the given offsets under a new state epoch (the
 * summary's + 1, so a leader still holding the old state is fenced); an error code per partition.
 */
export function initializeStates(
  broker: BrokerServices,
  groupId: string,
  partitions: readonly (ShareTopicPartition & { startOffset: number })[],
): Promise<number[]> {
  const persister = sharePersisterOf(broker)
  return Promise.all(
    partitions.map(async (tp) => {
      const key = { groupId, topicId: tp.topicId, partition: tp.partition }
      const summary = await persister.readSummary(key)
      if (summary.errorCode !== ErrorCode.NONE) return summary.errorCode
      const code = await persister.initializeState(key, Math.max(summary.stateEpoch, 0) + 1, tp.startOffset)
      sharePartitionManagerOf(broker).forget(groupId, tp)
      return code
    }),
  )
}

/** Forgets the group's share-partitions; an error code per partition. */
export function deleteStates(
  broker: BrokerServices,
  groupId: string,
  partitions: readonly ShareTopicPartition[],
): Promise<number[]> {
  const persister = sharePersisterOf(broker)
  return Promise.all(
    partitions.map(async (tp) => {
      const code = await persister.deleteState({ groupId, topicId: tp.topicId, partition: tp.partition })
      sharePartitionManagerOf(broker).forget(groupId, tp)
      return code
    }),
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

function byTopicName<P extends ShareTopicPartition, Q>(
  tps: readonly P[],
  partition: (tp: P) => Q,
): { name: string; partitions: Q[] }[] {
  const topics = new Map<string, Q[]>()
  for (const tp of tps) topics.set(tp.topic, [...(topics.get(tp.topic) ?? []), partition(tp)])
  return [...topics].map(([name, partitions]) => ({ name, partitions }))
}
