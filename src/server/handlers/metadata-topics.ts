/**
 * Metadata's description of a topic, kept per topic image: images are immutable and share
 * the objects of topics a change did not touch, so a request meets the same TopicImage until
 * that topic changes and gets the description (and, through metadata-encoding.ts, its
 * encoded partitions) made for an earlier request. Before, every all-topics request looked
 * up every partition's leader in the served records (a string key built per partition) and
 * built and encoded 10,000 partition objects at 10,000 partitions.
 *
 * A description depends on more than the topic: on which brokers are registered (offline
 * replicas) and, for partitions at their first leader epoch, on their leaders' served
 * records (leaderServes, leaderHasStorageError): a topic's description records its entries
 * in those records, a partition's the range it read, and is made again when one differs. Descriptions are shared between requests: callers copy, never change them.
 * Authorization is not part of it: the handler filters and fills in authorized operations
 * per request.
 */
import {
  type BrokerId,
  type ClusterImage,
  leaderHasStorageError,
  leaderServes,
  NO_LEADER,
  type PartitionState,
  type ServedRange,
  servedRangeOf,
  type TopicImage,
} from '../../metadata/cluster-image.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import type {
  MetadataResponseMetadataResponsePartition,
  MetadataResponseMetadataResponseTopic,
} from '../../protocol/generated/index.js'
import { notePreviousList } from './metadata-encoding.js'

/** Kafka's MetadataResponse.NO_LEADER_ID. */
const NO_LEADER_ID = -1
/** Kafka's sentinel for "authorized operations not requested". */
export const AUTHORIZED_OPERATIONS_OMITTED = -2147483648

interface Described {
  /** The registered broker ids it was made with (offline replicas are the others). */
  readonly brokerIds: string
  /**
   * The served records' entries for this topic it read, by leader: null when it read none,
   * 'absent' when the image had none (every named leader then counts as serving).
   */
  readonly served: ReadonlyMap<BrokerId, ServedRanges | undefined> | 'absent' | null
  /** Still in creation (no partition served yet): left out of an all-topics answer. */
  readonly inCreation: boolean
  readonly topic: MetadataResponseMetadataResponseTopic
}

/** A served record's ranges of one topic. */
type ServedRanges = ReadonlyMap<number, ServedRange>

const described = new WeakMap<TopicImage, Described>()
const brokerIdsByMap = new WeakMap<ClusterImage['brokers'], string>()

function brokerIdsOf(image: ClusterImage): string {
  let ids = brokerIdsByMap.get(image.brokers)
  if (ids === undefined) {
    ids = [...image.brokers.keys()].sort((a, b) => a - b).join(',')
    brokerIdsByMap.set(image.brokers, ids)
  }
  return ids
}

function stillValid(entry: Described, image: ClusterImage): boolean {
  if (entry.brokerIds !== brokerIdsOf(image)) return false
  if (entry.served === null) return true
  if (image.servedLeaderEpochs === undefined) return entry.served === 'absent'
  if (entry.served === 'absent') return false
  for (const [leader, ranges] of entry.served)
    if (image.servedLeaderEpochs.get(leader)?.get(entry.topic.topicId) !== ranges) return false
  return true
}

/** The description of `topic` in `image`: shared, not to be changed. */
export function describedTopic(image: ClusterImage, topic: TopicImage): Described {
  const cached = described.get(topic)
  if (cached !== undefined && stillValid(cached, image)) return cached
  // Only a partition at its first leader epoch reads its leader's served record.
  const leaders = new Set<BrokerId>()
  for (const p of topic.partitions) if (p.leader !== NO_LEADER && p.leaderEpoch === 0) leaders.add(p.leader)
  const served =
    leaders.size === 0
      ? null
      : image.servedLeaderEpochs === undefined
        ? ('absent' as const)
        : new Map(
            [...leaders].map((id) => [id, image.servedLeaderEpochs?.get(id)?.get(topic.topicId)] as const),
          )
  const entry: Described = {
    brokerIds: brokerIdsOf(image),
    served,
    inCreation: inCreation(image, topic),
    topic: describeTopic(image, topic),
  }
  described.set(topic, entry)
  return entry
}

/** A single slot: the sorted order of the last topics map, reused while the names stay the same. */
let lastOrder: { topics: ReadonlyMap<string, TopicImage>; names: readonly string[] } | null = null

function sortedNames(topics: ReadonlyMap<string, TopicImage>): readonly string[] {
  if (lastOrder?.topics === topics) return lastOrder.names
  const previous = lastOrder?.names
  // A change to a topic copies the map but keeps its names: checking them is O(topics), a sort is not.
  const names =
    previous !== undefined && previous.length === topics.size && previous.every((name) => topics.has(name))
      ? previous
      : [...topics.keys()].sort((a, b) => a.localeCompare(b))
  lastOrder = { topics, names }
  return names
}

/**
 * Every topic, less those still being created: a topic none of whose partitions is served
 * yet, all at their first leader epoch. Listed, their LEADER_NOT_AVAILABLE partitions made
 * kafkajs reject the whole answer and fail unrelated admin calls; Kafka's brokers list a
 * topic once its leaders have it. Asked for by name, such a topic still answers
 * LEADER_NOT_AVAILABLE (describeTopic), as Kafka does for a topic in creation. The
 * descriptions are shared: copy one before changing it.
 */
export function allTopics(image: ClusterImage): MetadataResponseMetadataResponseTopic[] {
  const topics: MetadataResponseMetadataResponseTopic[] = []
  for (const name of sortedNames(image.topics)) {
    const topic = image.topics.get(name)
    if (topic === undefined) continue
    const entry = describedTopic(image, topic)
    if (!entry.inCreation) topics.push(entry.topic)
  }
  return topics
}

function inCreation(image: ClusterImage, topic: TopicImage): boolean {
  return topic.partitions.every(
    (p) =>
      p.leaderEpoch === 0 &&
      p.leader !== NO_LEADER &&
      !leaderServes(image, topic, p) &&
      !leaderHasStorageError(image, topic, p),
  )
}

function describeTopic(image: ClusterImage, topic: TopicImage): MetadataResponseMetadataResponseTopic {
  const brokerIds = brokerIdsOf(image)
  const entries = topic.partitions.map((p) => describedPartition(image, topic, p, brokerIds))
  const partitions = entries.map((entry) => entry.partition)
  // The list this topic's unchanged partitions were in last: its encoding is copied from.
  const previous = entries.find((entry) => entry.list !== null)?.list
  if (previous !== undefined && previous !== null) notePreviousList(partitions, previous)
  for (const entry of entries) entry.list = partitions
  return {
    errorCode: ErrorCode.NONE,
    name: topic.name,
    topicId: topic.topicId,
    isInternal: topic.name.startsWith('__'),
    partitions,
    topicAuthorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
  }
}

/** A partition's description read no served record (NOT_READ), or the image had none (ABSENT). */
const NOT_READ = Symbol('not read')
const ABSENT = Symbol('absent')

interface DescribedPartition {
  readonly topicId: string
  readonly brokerIds: string
  readonly served: ServedRange | undefined | typeof NOT_READ | typeof ABSENT
  readonly partition: MetadataResponseMetadataResponsePartition
  /** The last description list it was put in (null: none yet). */
  list: readonly MetadataResponseMetadataResponsePartition[] | null
}

/**
 * By partition state: a change to one partition of a 10,000-partition topic describes (and
 * encodes, metadata-encoding.ts) that one again, not the other 9,999.
 */
const describedPartitions = new WeakMap<PartitionState, DescribedPartition>()

/** The served record the description of `p` reads: only a partition at its first leader epoch reads one. */
function servedRead(image: ClusterImage, topicId: string, p: PartitionState): DescribedPartition['served'] {
  if (p.leader === NO_LEADER || p.leaderEpoch > 0) return NOT_READ
  return image.servedLeaderEpochs === undefined
    ? ABSENT
    : servedRangeOf(image, p.leader, topicId, p.partition)
}

function describedPartition(
  image: ClusterImage,
  topic: TopicImage,
  p: PartitionState,
  brokerIds: string,
): DescribedPartition {
  const served = servedRead(image, topic.topicId, p)
  const cached = describedPartitions.get(p)
  if (
    cached !== undefined &&
    cached.topicId === topic.topicId &&
    cached.brokerIds === brokerIds &&
    cached.served === served
  )
    return cached
  const entry: DescribedPartition = {
    topicId: topic.topicId,
    brokerIds,
    served,
    partition: describePartition(image, topic, p),
    list: null,
  }
  describedPartitions.set(p, entry)
  return entry
}

function describePartition(
  image: ClusterImage,
  topic: TopicImage,
  p: PartitionState,
): MetadataResponseMetadataResponsePartition {
  const offlineReplicas = p.replicas.filter((id) => !image.brokers.has(id))
  // A new partition's first leader (epoch 0) is named once it serves the partition, as
  // Kafka answers LEADER_NOT_AVAILABLE for a new topic: named earlier, it would answer
  // UNKNOWN_TOPIC_OR_PARTITION, and a producer retrying its first batches after later ones
  // reorders records. Leaders elected later are named at once, as in Kafka: they host
  // the log already, and a client meeting NOT_LEADER_OR_FOLLOWER refreshes its metadata.
  const served = p.leader !== NO_LEADER && (p.leaderEpoch > 0 || leaderServes(image, topic, p))
  // Its leader's log dir failed while creating it: a client retries, and sees why.
  const errorCode = served
    ? ErrorCode.NONE
    : leaderHasStorageError(image, topic, p)
      ? ErrorCode.KAFKA_STORAGE_ERROR
      : ErrorCode.LEADER_NOT_AVAILABLE
  return {
    errorCode,
    partitionIndex: p.partition,
    leaderId: served ? p.leader : NO_LEADER_ID,
    leaderEpoch: p.leaderEpoch,
    replicaNodes: [...p.replicas],
    isrNodes: [...p.isr],
    offlineReplicas,
  }
}
