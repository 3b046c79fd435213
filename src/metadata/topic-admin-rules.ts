/**
 * The topic admin APIs' rules as pure functions of the cluster image (parts of Kafka's
 * ReplicationControlManager and ConfigurationControlManager): topic name collisions,
 * replication factor and manual assignment checks, which deletions and elections apply,
 * and the config overrides of a target. topic-admin.ts plans and commits with them.
 */
import { ErrorCode, errorMessage } from '../protocol/error-codes.js'
import { ZERO_UUID } from '../protocol/primitives.js'
import {
  type BrokerId,
  type ClusterImage,
  dynamicBrokerConfigs,
  NO_LEADER,
  type PartitionState,
  topicById,
} from './cluster-image.js'
import { electPreferred, onBrokerChange } from './elections.js'
import {
  type ConfigTarget,
  type DeletableTopic,
  type DeletedTopic,
  type ElectionType,
  OK,
  type Outcome,
  TopicAdminError,
} from './topic-admin-types.js'
import { unifyCollisionChars } from './topic-name.js'

// ---- checks shared by CreateTopics and CreatePartitions ------------------------------------

/** The first existing topic whose name equals `name` once '.' and '_' are unified. */
export function collidingTopic(name: string, existing: Iterable<string>): string | null {
  const unified = unifyCollisionChars(name)
  const matches = [...existing].filter((other) => other !== name && unifyCollisionChars(other) === unified)
  return matches.length === 0 ? null : matches.sort()[0]
}

export function checkReplicationFactor(replicationFactor: number, brokerCount: number): void {
  if (replicationFactor > brokerCount) {
    throw new TopicAdminError(
      ErrorCode.INVALID_REPLICATION_FACTOR,
      `Unable to replicate the partition ${replicationFactor} time(s): The target replication factor of ` +
        `${replicationFactor} cannot be reached because only ${brokerCount} broker(s) are registered.`,
    )
  }
}

/** Kafka's validateManualPartitionAssignment: non-empty, registered brokers, no repeats, same size. */
export function checkManualAssignment(
  image: ClusterImage,
  brokerIds: readonly BrokerId[],
  replicationFactor: number | null,
): void {
  if (brokerIds.length === 0) {
    throw new TopicAdminError(
      ErrorCode.INVALID_REPLICA_ASSIGNMENT,
      'The manual partition assignment includes an empty replica list.',
    )
  }
  const sorted = [...brokerIds].sort((a, b) => a - b)
  for (let i = 0; i < sorted.length; i++) {
    if (!image.brokers.has(sorted[i])) {
      throw new TopicAdminError(
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        `The manual partition assignment includes broker ${sorted[i]}, but no such broker is registered.`,
      )
    }
    if (i > 0 && sorted[i] === sorted[i - 1]) {
      throw new TopicAdminError(
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        `The manual partition assignment includes the broker ${sorted[i]} more than once.`,
      )
    }
  }
  if (replicationFactor !== null && sorted.length !== replicationFactor) {
    throw new TopicAdminError(
      ErrorCode.INVALID_REPLICA_ASSIGNMENT,
      `The manual partition assignment includes a partition with ${sorted.length} replica(s), but this is ` +
        `not consistent with previous partitions, which have ${replicationFactor} replica(s).`,
    )
  }
}

// ---- DeleteTopics, elections, reassignments, configs --------------------------------------

export function resolveDeletions(image: ClusterImage, wanted: readonly DeletableTopic[]): DeletedTopic[] {
  const keyOf = (w: DeletableTopic) => w.name ?? `id:${w.topicId}`
  const counts = new Map<string, number>()
  for (const w of wanted) counts.set(keyOf(w), (counts.get(keyOf(w)) ?? 0) + 1)
  const result = (
    name: string | null,
    topicId: string,
    errorCode: number,
    message?: string,
  ): DeletedTopic => ({
    name,
    topicId,
    errorCode,
    errorMessage: errorCode === ErrorCode.NONE ? null : (message ?? errorMessage(errorCode)),
  })
  return wanted.map((w) => {
    if (w.name !== null) {
      if ((counts.get(w.name) ?? 0) > 1)
        return result(w.name, ZERO_UUID, ErrorCode.INVALID_REQUEST, 'Duplicate topic name.')
      const topic = image.topics.get(w.name)
      if (!topic) return result(w.name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
      return result(topic.name, topic.topicId, ErrorCode.NONE)
    }
    if ((counts.get(keyOf(w)) ?? 0) > 1)
      return result(null, w.topicId, ErrorCode.INVALID_REQUEST, 'Duplicate topic id.')
    if (w.topicId === ZERO_UUID) {
      return result(
        null,
        w.topicId,
        ErrorCode.INVALID_REQUEST,
        `Attempt to find topic with invalid topicId ${w.topicId}`,
      )
    }
    const topic = topicById(image, w.topicId)
    if (!topic) return result(null, w.topicId, ErrorCode.UNKNOWN_TOPIC_ID)
    return result(topic.name, topic.topicId, ErrorCode.NONE)
  })
}

export function decideElection(
  state: PartitionState,
  live: ReadonlySet<BrokerId>,
  type: ElectionType,
): { outcome: Outcome; next: PartitionState | null } {
  const fail = (errorCode: number, message: string) => ({
    outcome: { errorCode, errorMessage: message },
    next: null,
  })
  if (type === 'preferred') {
    if (state.leader === state.replicas[0])
      return fail(ErrorCode.ELECTION_NOT_NEEDED, 'Leader is already the preferred replica')
    const result = electPreferred({ state, live, uncleanLeaderElection: false })
    if (!result)
      return fail(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, 'Preferred replica is not live or not in the ISR')
    return { outcome: OK, next: result.state }
  }
  if (state.leader !== NO_LEADER && live.has(state.leader))
    return fail(ErrorCode.ELECTION_NOT_NEEDED, 'Partition has a live leader')
  const result = onBrokerChange({ state, live, uncleanLeaderElection: true })
  if (!result || result.state.leader === NO_LEADER)
    return fail(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, 'No live replica to elect')
  return { outcome: OK, next: result.state }
}

/** The image with a resource's overrides replaced. */
export function withOverrides(
  image: ClusterImage,
  target: ConfigTarget,
  overrides: Readonly<Record<string, string>>,
): ClusterImage {
  if (target.kind === 'topic') {
    const topic = image.topics.get(target.topic)
    if (!topic) return image
    return {
      ...image,
      topics: new Map(image.topics).set(target.topic, { ...topic, configs: { ...overrides } }),
    }
  }
  if (target.kind === 'client-metrics') {
    const clientMetricsConfigs = new Map(image.clientMetricsConfigs ?? [])
    if (Object.keys(overrides).length === 0) clientMetricsConfigs.delete(target.name)
    else clientMetricsConfigs.set(target.name, { ...overrides })
    return { ...image, clientMetricsConfigs }
  }
  if (target.kind === 'group') {
    const groupConfigs = new Map(image.groupConfigs ?? [])
    if (Object.keys(overrides).length === 0) groupConfigs.delete(target.groupId)
    else groupConfigs.set(target.groupId, { ...overrides })
    return { ...image, groupConfigs }
  }
  const brokerConfigs = new Map(image.brokerConfigs ?? [])
  if (Object.keys(overrides).length === 0) brokerConfigs.delete(target.key)
  else brokerConfigs.set(target.key, { ...overrides })
  return { ...image, brokerConfigs }
}

/** The overrides a resource holds now (topic configs or dynamic broker configs). */
export function currentOverrides(image: ClusterImage, target: ConfigTarget): Record<string, string> {
  if (target.kind === 'topic') return { ...(image.topics.get(target.topic)?.configs ?? {}) }
  if (target.kind === 'client-metrics') return { ...(image.clientMetricsConfigs?.get(target.name) ?? {}) }
  if (target.kind === 'group') return { ...(image.groupConfigs?.get(target.groupId) ?? {}) }
  return { ...dynamicBrokerConfigs(image, target.key) }
}
