/**
 * A streams group's topology (KIP-1071; Kafka's StreamsTopology and the topic side of its
 * InternalTopicManager): the subtopologies a Streams application sends when a member joins,
 * checked against the cluster's topics to decide how many tasks each subtopology has, which
 * internal topics (repartition and changelog) must be created first and what a member must
 * be told when the topology cannot run yet (the heartbeat's status list).
 *
 * A subtopology has one task per partition of its input: its source topics and repartition
 * source topics, which must then all have the same partition count (Kafka checks the
 * copartition groups; tidelog checks every input of a subtopology against its largest one
 * only where a copartition group says so, as Kafka does). A repartition topic without a
 * partition count takes the largest task count of the subtopologies that write to it; a
 * changelog topic has one partition per task of its subtopology.
 */

/** A subtopology id ("0", "1", ...), as the client names it. */
export type SubtopologyId = string

export interface TopicConfigEntry {
  readonly key: string
  readonly value: string
}

/** A repartition or changelog topic as the topology asks for it. */
export interface InternalTopicInfo {
  readonly name: string
  /** 0: derived (changelogs must leave it 0). */
  readonly partitions: number
  /** 0 or -1: the broker's default.replication.factor. */
  readonly replicationFactor: number
  readonly topicConfigs: readonly TopicConfigEntry[]
}

export interface CopartitionGroup {
  /** Indexes into the subtopology's sourceTopics. */
  readonly sourceTopics: readonly number[]
  /** Indexes into the subtopology's repartitionSourceTopics. */
  readonly repartitionSourceTopics: readonly number[]
}

export interface Subtopology {
  readonly subtopologyId: SubtopologyId
  readonly sourceTopics: readonly string[]
  /** Source topic patterns: Kafka 4.4 refuses them ("not supported yet"), so does tidelog. */
  readonly sourceTopicRegex?: readonly string[]
  readonly repartitionSinkTopics: readonly string[]
  readonly stateChangelogTopics: readonly InternalTopicInfo[]
  readonly repartitionSourceTopics: readonly InternalTopicInfo[]
  readonly copartitionGroups: readonly CopartitionGroup[]
}

export interface StreamsTopology {
  readonly epoch: number
  readonly subtopologies: readonly Subtopology[]
}

/** The heartbeat's status codes (StreamsGroupHeartbeatResponse.Status). */
export const StreamsStatus = {
  STALE_TOPOLOGY: 0,
  MISSING_SOURCE_TOPICS: 1,
  INCORRECTLY_PARTITIONED_TOPICS: 2,
  MISSING_INTERNAL_TOPICS: 3,
  SHUTDOWN_APPLICATION: 4,
  ASSIGNMENT_DELAYED: 5,
} as const

export interface StreamsStatusEntry {
  readonly statusCode: number
  readonly statusDetail: string
}

/** A topic the coordinator asks the broker to create (Kafka's CreatableTopic of the heartbeat result). */
export interface CreatableInternalTopic {
  readonly name: string
  readonly partitions: number
  /** -1: default.replication.factor. */
  readonly replicationFactor: number
  readonly configs: Readonly<Record<string, string>>
}

/** The topology against the cluster's topics: the task counts, or why it cannot run yet. */
export interface ConfiguredTopology {
  /** Subtopology → task count; empty while not ready. */
  readonly taskCounts: ReadonlyMap<SubtopologyId, number>
  /** Problems, as heartbeat statuses; empty when the topology is ready. */
  readonly problems: readonly StreamsStatusEntry[]
  /** Internal topics to create (MISSING_INTERNAL_TOPICS). */
  readonly missingInternalTopics: readonly CreatableInternalTopic[]
}

/** Partition counts of existing topics, by name. */
export type PartitionCounts = ReadonlyMap<string, number>

/**
 * Kafka's throwIfInvalidTopology: a changelog topic's partition count is derived, never
 * given. Returns the STREAMS_INVALID_TOPOLOGY message, or null.
 */
export function invalidTopologyReason(topology: StreamsTopology): string | null {
  const ids = new Set<string>()
  for (const sub of topology.subtopologies) {
    if (ids.has(sub.subtopologyId)) return `Duplicate subtopology id ${sub.subtopologyId}.`
    ids.add(sub.subtopologyId)
    for (const changelog of sub.stateChangelogTopics)
      if (changelog.partitions !== 0)
        return `Changelog topic ${changelog.name} must have an undefined partition count, but it is set to ${changelog.partitions}.`
    for (const group of sub.copartitionGroups) {
      const badSource = group.sourceTopics.some((i) => i < 0 || i >= sub.sourceTopics.length)
      const badRepartition = group.repartitionSourceTopics.some(
        (i) => i < 0 || i >= sub.repartitionSourceTopics.length,
      )
      if (badSource || badRepartition)
        return `Copartition group of subtopology ${sub.subtopologyId} refers to a topic it does not have.`
    }
  }
  return null
}

/**
 * The partition counts of the repartition topics without one: the largest input of the
 * subtopologies writing to them, repeated until nothing changes (a chain of repartitions).
 */
function repartitionCounts(topology: StreamsTopology, existing: PartitionCounts): Map<string, number> {
  const counts = new Map<string, number>()
  for (const sub of topology.subtopologies)
    for (const t of sub.repartitionSourceTopics) if (t.partitions > 0) counts.set(t.name, t.partitions)
  for (let changed = true; changed; ) {
    changed = false
    for (const sub of topology.subtopologies) {
      const inputs = [
        ...sub.sourceTopics.map((name) => existing.get(name) ?? 0),
        ...sub.repartitionSourceTopics.map((t) => counts.get(t.name) ?? 0),
      ]
      const largest = Math.max(0, ...inputs)
      if (largest === 0) continue
      for (const sink of sub.repartitionSinkTopics) {
        const declared = topology.subtopologies
          .flatMap((s) => s.repartitionSourceTopics)
          .find((t) => t.name === sink)
        if (!declared || declared.partitions > 0) continue
        if ((counts.get(sink) ?? 0) < largest) {
          counts.set(sink, largest)
          changed = true
        }
      }
    }
  }
  return counts
}

function configsOf(info: InternalTopicInfo): Record<string, string> {
  return Object.fromEntries(info.topicConfigs.map((c) => [c.key, c.value]))
}

/** Kafka's InternalTopicManager.configureTopics, as tidelog does it (see the header). */
export function configureTopology(topology: StreamsTopology, existing: PartitionCounts): ConfiguredTopology {
  const problems: StreamsStatusEntry[] = []
  const missingSources = [
    ...new Set(topology.subtopologies.flatMap((s) => s.sourceTopics).filter((name) => !existing.has(name))),
  ].sort()
  if (missingSources.length > 0)
    return {
      taskCounts: new Map(),
      problems: [
        {
          statusCode: StreamsStatus.MISSING_SOURCE_TOPICS,
          statusDetail: `Source topics ${missingSources.join(', ')} are missing.`,
        },
      ],
      missingInternalTopics: [],
    }
  const repartition = repartitionCounts(topology, existing)
  const taskCounts = new Map<SubtopologyId, number>()
  const wanted = new Map<string, CreatableInternalTopic>()
  const incorrect: string[] = []
  for (const sub of topology.subtopologies) {
    const inputs = [
      ...sub.sourceTopics.map((name) => existing.get(name) ?? 0),
      ...sub.repartitionSourceTopics.map((t) => repartition.get(t.name) ?? 0),
    ]
    const tasks = Math.max(0, ...inputs)
    taskCounts.set(sub.subtopologyId, tasks)
    for (const group of sub.copartitionGroups) {
      const counts = [
        ...group.sourceTopics.map((i) => existing.get(sub.sourceTopics[i] ?? '') ?? 0),
        ...group.repartitionSourceTopics.map(
          (i) => repartition.get(sub.repartitionSourceTopics[i]?.name ?? '') ?? 0,
        ),
      ]
      if (new Set(counts).size > 1)
        incorrect.push(...group.sourceTopics.map((i) => sub.sourceTopics[i] ?? ''))
    }
    for (const t of sub.repartitionSourceTopics)
      wanted.set(t.name, {
        name: t.name,
        partitions: repartition.get(t.name) ?? tasks,
        replicationFactor: t.replicationFactor > 0 ? t.replicationFactor : -1,
        configs: configsOf(t),
      })
    for (const t of sub.stateChangelogTopics)
      wanted.set(t.name, {
        name: t.name,
        partitions: tasks,
        replicationFactor: t.replicationFactor > 0 ? t.replicationFactor : -1,
        configs: configsOf(t),
      })
  }
  const missingInternalTopics: CreatableInternalTopic[] = []
  for (const topic of wanted.values()) {
    const count = existing.get(topic.name)
    if (count === undefined) missingInternalTopics.push(topic)
    else if (count !== topic.partitions) incorrect.push(topic.name)
  }
  if (incorrect.length > 0)
    problems.push({
      statusCode: StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS,
      statusDetail: `Following topics do not have the same number of partitions: [${[...new Set(incorrect)].sort().join(', ')}]`,
    })
  if (missingInternalTopics.length > 0)
    problems.push({
      statusCode: StreamsStatus.MISSING_INTERNAL_TOPICS,
      statusDetail: `Internal topics are missing: ${missingInternalTopics
        .map((t) => t.name)
        .sort()
        .join(', ')}`,
    })
  return {
    taskCounts: problems.length > 0 ? new Map() : taskCounts,
    problems,
    missingInternalTopics,
  }
}

/** Every topic the topology reads or writes as a partition count signature (a change re-assigns). */
export function topologySignature(topology: StreamsTopology | null, existing: PartitionCounts): string {
  if (!topology) return ''
  const names = new Set<string>()
  for (const sub of topology.subtopologies) {
    for (const name of sub.sourceTopics) names.add(name)
    for (const t of sub.repartitionSourceTopics) names.add(t.name)
    for (const t of sub.stateChangelogTopics) names.add(t.name)
  }
  return [...names]
    .sort()
    .map((name) => `${name}:${existing.get(name) ?? -1}`)
    .join(',')
}

/** The input topics of a subtopology's task (its partition of each), for IQ endpoints. */
export function inputTopicsOf(topology: StreamsTopology, subtopologyId: SubtopologyId): string[] {
  const sub = topology.subtopologies.find((s) => s.subtopologyId === subtopologyId)
  if (!sub) return []
  return [...sub.sourceTopics, ...sub.repartitionSourceTopics.map((t) => t.name)]
}
