/**
 * CreateTopics (key 19).
 * Behavior: creates each topic in one metadata change, as Kafka's controller does: a name
 * given twice in one request gets INVALID_REQUEST "Duplicate topic name." (one result per
 * duplicated name, after the others); illegal names INVALID_TOPIC_EXCEPTION with Kafka's
 * message; a name that collides with an existing one once '.' and '_' are unified
 * INVALID_TOPIC_EXCEPTION; an existing name TOPIC_ALREADY_EXISTS; bad configs INVALID_CONFIG;
 * then partitions and replication factor (-1 takes num.partitions and
 * default.replication.factor) or manual assignments (numPartitions and replicationFactor
 * must then be -1, brokers must exist, all partitions the same replica count). A
 * replication factor above the registered brokers is INVALID_REPLICATION_FACTOR.
 * validateOnly runs every check and creates nothing. The timeout is not used: on one broker
 * the topic exists when the metadata change is persisted.
 * Version notes: v1 adds validateOnly and error messages; v2-v4 change nothing on the wire
 * (v4 allows -1 defaults, which every version here accepts); v5 is flexible and returns
 * numPartitions, replicationFactor and the topic's configs; v7 returns the topic id.
 */
import { ConfigError } from '../../common/errors.js'
import type { ClusterImage, PartitionState, TopicImage } from '../../metadata/cluster-image.js'
import { brokerTopicDefaults, resolveTopicConfig, validateTopicConfigs } from '../../metadata/topic-config.js'
import { topicNameProblem, unifyCollisionChars } from '../../metadata/topic-name.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import {
  ApiKey,
  type CreateTopicsRequest,
  type CreateTopicsRequestCreatableTopic,
  type CreateTopicsResponse,
  type CreateTopicsResponseCreatableTopicResult,
  defaultCreateTopicsResponseCreatableTopicResult,
} from '../../protocol/generated/index.js'
import { ZERO_UUID } from '../../protocol/primitives.js'
import type { BrokerServices } from '../broker-services.js'
import type { ApiHandler } from './registry.js'

/** Kafka's controller refuses user operations that would write more records than this. */
export const MAX_PARTITIONS_PER_REQUEST = 10000

export class TopicAdminError extends Error {
  constructor(
    readonly errorCode: number,
    message: string,
  ) {
    super(message)
    this.name = 'TopicAdminError'
  }
}

export const createTopicsHandler: ApiHandler<CreateTopicsRequest, CreateTopicsResponse> = {
  apiKey: ApiKey.CreateTopics,
  minVersion: 0,
  maxVersion: 7,
  async handle(context, request) {
    const broker = context.broker
    const validateOnly = context.apiVersion >= 1 && request.validateOnly
    const { unique, duplicates } = splitDuplicates(request.topics)
    const results: CreateTopicsResponseCreatableTopicResult[] = []
    const created: TopicImage[] = []
    let partitionBudget = MAX_PARTITIONS_PER_REQUEST
    const image = broker.metadataImage()
    for (const topic of unique) {
      try {
        const planned = planTopic(broker, image, created, topic)
        partitionBudget -= planned.partitions.length
        if (partitionBudget < 0) {
          throw new TopicAdminError(
            ErrorCode.POLICY_VIOLATION,
            'Unable to perform excessively large batch operation.',
          )
        }
        created.push(planned)
        results.push({ ...defaultCreateTopicsResponseCreatableTopicResult(), name: topic.name })
      } catch (error) {
        results.push(errorResult(topic.name, error))
      }
    }
    if (!validateOnly && created.length > 0) await commit(broker, created, results)
    const after = broker.metadataImage()
    for (const result of results) {
      if (result.errorCode !== ErrorCode.NONE) continue
      const topic = validateOnly ? created.find((t) => t.name === result.name) : after.topics.get(result.name)
      if (topic)
        describeCreated(result, validateOnly ? withTopic(after, topic) : after, broker, topic, validateOnly)
    }
    for (const name of duplicates) {
      results.push({
        ...defaultCreateTopicsResponseCreatableTopicResult(),
        name,
        errorCode: ErrorCode.INVALID_REQUEST,
        errorMessage: 'Duplicate topic name.',
      })
    }
    return { throttleTimeMs: 0, topics: results }
  },
}

function splitDuplicates(topics: readonly CreateTopicsRequestCreatableTopic[]) {
  const counts = new Map<string, number>()
  for (const t of topics) counts.set(t.name, (counts.get(t.name) ?? 0) + 1)
  return {
    unique: topics.filter((t) => counts.get(t.name) === 1),
    duplicates: [...counts].filter(([, n]) => n > 1).map(([name]) => name),
  }
}

/** Runs Kafka's checks in its order and returns the topic to create, or throws TopicAdminError. */
function planTopic(
  broker: BrokerServices,
  image: ClusterImage,
  earlier: readonly TopicImage[],
  topic: CreateTopicsRequestCreatableTopic,
): TopicImage {
  const name = topic.name
  if (name === '__cluster_metadata') {
    throw new TopicAdminError(ErrorCode.INVALID_REQUEST, `Creation of internal topic ${name} is prohibited.`)
  }
  const problem = topicNameProblem(name)
  if (problem !== null) throw new TopicAdminError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
  if (image.topics.has(name)) {
    throw new TopicAdminError(ErrorCode.TOPIC_ALREADY_EXISTS, `Topic '${name}' already exists.`)
  }
  const colliding = collidingTopic(name, [...image.topics.keys(), ...earlier.map((t) => t.name)])
  if (colliding !== null) {
    throw new TopicAdminError(
      ErrorCode.INVALID_TOPIC_EXCEPTION,
      `Topic '${name}' collides with existing topic: ${colliding}`,
    )
  }
  const configs = topicConfigs(topic)
  try {
    validateTopicConfigs(configs, brokerTopicDefaults(image, broker.config))
  } catch (error) {
    if (error instanceof ConfigError) throw new TopicAdminError(ErrorCode.INVALID_CONFIG, error.message)
    throw error
  }
  const overrides = configs as Record<string, string>
  if (topic.assignments.length > 0) return manualTopic(broker, image, topic, overrides)
  if (topic.replicationFactor < -1 || topic.replicationFactor === 0) {
    throw new TopicAdminError(
      ErrorCode.INVALID_REPLICATION_FACTOR,
      'Replication factor must be larger than 0, or -1 to use the default value.',
    )
  }
  if (topic.numPartitions < -1 || topic.numPartitions === 0) {
    throw new TopicAdminError(
      ErrorCode.INVALID_PARTITIONS,
      'Number of partitions was set to an invalid non-positive value.',
    )
  }
  const partitions =
    topic.numPartitions === -1 ? (broker.config.values.get('num.partitions') as number) : topic.numPartitions
  const replicationFactor =
    topic.replicationFactor === -1
      ? (broker.config.values.get('default.replication.factor') as number)
      : topic.replicationFactor
  checkReplicationFactor(replicationFactor, image.brokers.size)
  if (partitions > MAX_PARTITIONS_PER_REQUEST) {
    throw new TopicAdminError(
      ErrorCode.POLICY_VIOLATION,
      'Unable to perform excessively large batch operation.',
    )
  }
  return broker.placeNewTopic({ name, partitions, replicationFactor, configs: overrides })
}

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

function topicConfigs(topic: CreateTopicsRequestCreatableTopic): Record<string, string | null> {
  const configs: Record<string, string | null> = {}
  for (const config of topic.configs) configs[config.name] = config.value
  return configs
}

function manualTopic(
  broker: BrokerServices,
  image: ClusterImage,
  topic: CreateTopicsRequestCreatableTopic,
  configs: Record<string, string>,
): TopicImage {
  if (topic.replicationFactor !== -1) {
    throw new TopicAdminError(
      ErrorCode.INVALID_REQUEST,
      'A manual partition assignment was specified, but replication factor was not set to -1.',
    )
  }
  if (topic.numPartitions !== -1) {
    throw new TopicAdminError(
      ErrorCode.INVALID_REQUEST,
      'A manual partition assignment was specified, but numPartitions was not set to -1.',
    )
  }
  const byIndex = new Map<number, readonly number[]>()
  let replicationFactor: number | null = null
  for (const assignment of topic.assignments) {
    if (byIndex.has(assignment.partitionIndex)) {
      throw new TopicAdminError(
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        `Found multiple manual partition assignments for partition ${assignment.partitionIndex}`,
      )
    }
    checkManualAssignment(image, assignment.brokerIds, replicationFactor)
    replicationFactor = assignment.brokerIds.length
    byIndex.set(assignment.partitionIndex, assignment.brokerIds)
  }
  for (let i = 0; i < byIndex.size; i++) {
    if (!byIndex.has(i)) {
      throw new TopicAdminError(
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        'partitions should be a consecutive 0-based integer sequence',
      )
    }
  }
  if (byIndex.size > MAX_PARTITIONS_PER_REQUEST) {
    throw new TopicAdminError(
      ErrorCode.POLICY_VIOLATION,
      'Unable to perform excessively large batch operation.',
    )
  }
  const placed = broker.placeNewTopic({ name: topic.name, partitions: 0, replicationFactor: 0, configs })
  const partitions = [...byIndex.keys()].sort((a, b) => a - b).map((i) => manualPartition(i, byIndex.get(i)!))
  return { ...placed, partitions }
}

/** Kafka's validateManualPartitionAssignment: non-empty, registered brokers, no repeats, same size. */
export function checkManualAssignment(
  image: ClusterImage,
  brokerIds: readonly number[],
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

/** A partition on the given replicas, led by the first (all are live on one broker). */
export function manualPartition(partition: number, replicas: readonly number[]): PartitionState {
  return {
    partition,
    replicas: [...replicas],
    isr: [...replicas],
    leader: replicas[0],
    leaderEpoch: 0,
    partitionEpoch: 0,
  }
}

/** Adds the planned topics in one metadata change; a topic created meanwhile gets TOPIC_ALREADY_EXISTS. */
async function commit(
  broker: BrokerServices,
  created: readonly TopicImage[],
  results: CreateTopicsResponseCreatableTopicResult[],
): Promise<void> {
  const lost = new Set<string>()
  await broker.updateMetadata((image) => {
    lost.clear() // the change may run again after a compare-and-set conflict
    const topics = new Map(image.topics)
    for (const topic of created) {
      if (topics.has(topic.name)) lost.add(topic.name)
      else topics.set(topic.name, topic)
    }
    return lost.size === created.length ? image : { ...image, topics }
  })
  for (const result of results) {
    if (lost.has(result.name)) {
      Object.assign(
        result,
        errorResult(
          result.name,
          new TopicAdminError(ErrorCode.TOPIC_ALREADY_EXISTS, `Topic '${result.name}' already exists.`),
        ),
      )
    }
  }
  for (const topic of created) {
    if (!lost.has(topic.name))
      broker.logger.info({ topic: topic.name, partitions: topic.partitions.length }, 'created topic')
  }
}

function withTopic(image: ClusterImage, topic: TopicImage): ClusterImage {
  return { ...image, topics: new Map(image.topics).set(topic.name, topic) }
}

/** v5+: the created topic's shape and every config with its source. */
function describeCreated(
  result: CreateTopicsResponseCreatableTopicResult,
  image: ClusterImage,
  broker: BrokerServices,
  topic: TopicImage,
  validateOnly: boolean,
): void {
  result.topicId = validateOnly ? ZERO_UUID : topic.topicId
  result.numPartitions = topic.partitions.length
  result.replicationFactor = topic.partitions[0]?.replicas.length ?? -1
  result.configs = [...resolveTopicConfig(image, broker.config, topic.name)].map(([name, config]) => ({
    name,
    value: config.sensitive ? null : config.value,
    readOnly: config.readOnly,
    configSource: config.source,
    isSensitive: config.sensitive,
  }))
}

function errorResult(name: string, error: unknown): CreateTopicsResponseCreatableTopicResult {
  if (!(error instanceof TopicAdminError)) throw error
  return {
    ...defaultCreateTopicsResponseCreatableTopicResult(),
    name,
    errorCode: error.errorCode,
    errorMessage: error.message,
  }
}
