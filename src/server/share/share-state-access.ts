/**
 * How the group coordinator reaches the share-partition state of a share group (Kafka's
 * Persister: readSummary, initializeState, deleteState, answered by the share coordinator
 * from `__share_group_state`).
 *
 * In tidelog the state lives in memory on each partition's leader (share-partition-manager.ts),
 * so the coordinator reads and changes it there: on this broker directly when it leads the
 * partition. A partition led by another broker answers NOT_LEADER_OR_FOLLOWER for now (the
 * inter-broker path is not built yet: docs/share-groups.md "Not done yet"), so the offsets
 * APIs serve the partitions whose leader is the group's coordinator; a one-broker cluster
 * has them all.
 */
import { ErrorCode } from '../../protocol/error-codes.js'
import type { BrokerServices } from '../broker-services.js'
import type { ShareStateSummary, ShareTopicPartition } from './share-partition-manager.js'
import { sharePartitionManagerOf } from './share-services.js'

const ELSEWHERE: ShareStateSummary = {
  errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER,
  startOffset: -1,
  leaderEpoch: -1,
  deliveryCompleteCount: -1,
  highWatermark: -1,
}

/** Whether this broker leads `tp` in its metadata (where the share-partition state is). */
function ledHere(broker: BrokerServices, tp: ShareTopicPartition): boolean {
  const topic = broker.metadataImage().topics.get(tp.topic)
  return topic?.topicId === tp.topicId && topic.partitions[tp.partition]?.leader === broker.nodeId
}

/** The group's SPSO (and what the lag needs) on each partition. */
export async function readStateSummaries(
  broker: BrokerServices,
  groupId: string,
  partitions: readonly ShareTopicPartition[],
): Promise<ShareStateSummary[]> {
  const manager = sharePartitionManagerOf(broker)
  return partitions.map((tp) => (ledHere(broker, tp) ? manager.stateSummary(groupId, tp) : ELSEWHERE))
}

/** Starts the group's share-partitions over at the given offsets; an error code per partition. */
export async function initializeStates(
  broker: BrokerServices,
  groupId: string,
  partitions: readonly (ShareTopicPartition & { startOffset: number })[],
): Promise<number[]> {
  const manager = sharePartitionManagerOf(broker)
  return partitions.map((tp) =>
    ledHere(broker, tp) ? manager.initializeState(groupId, tp, tp.startOffset) : ELSEWHERE.errorCode,
  )
}

/** Forgets the group's share-partitions; an error code per partition. */
export async function deleteStates(
  broker: BrokerServices,
  groupId: string,
  partitions: readonly ShareTopicPartition[],
): Promise<number[]> {
  const manager = sharePartitionManagerOf(broker)
  return partitions.map((tp) =>
    ledHere(broker, tp) ? manager.deleteState(groupId, tp) : ELSEWHERE.errorCode,
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
