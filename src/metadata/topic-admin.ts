/**
 * The controller's side of the topic admin APIs (Kafka's ReplicationControlManager and
 * ConfigurationControlManager): CreateTopics, CreatePartitions, DeleteTopics,
 * ElectLeaders, AlterPartitionReassignments and config alterations are validated, placed
 * and committed here, each as one compare-and-set on the cluster metadata, and answered
 * per topic or partition with Kafka's error codes and messages. Handlers translate
 * requests and answers; none of them can replace the cluster image.
 *
 * Every plan runs inside the compare-and-set: after a conflict it runs again on the fresh
 * image, so a topic created, deleted or grown meanwhile is judged on what the store holds.
 *
 * A change the metadata store does not commit (unreachable past its deadline, refused as too
 * large, or still conflicting after the retries) fails with CommitFailedError, logged once;
 * each API answers its entries that would have succeeded with its outcome: REQUEST_TIMED_OUT,
 * as Kafka's brokers answer when the controller does not commit in time, or POLICY_VIOLATION
 * for a change too large for any transaction (Kafka's "excessively large batch"). Never an
 * exception to the connection, which would close it.
 *
 * Creations answer once every new partition's leader serves it (ClusterImage
 * servedLeaderEpochs, see leadership-record.ts), bounded by the request's timeout:
 * past it the topic gets REQUEST_TIMED_OUT, as Kafka answers. A client that produces at
 * once must not meet UNKNOWN_TOPIC_OR_PARTITION: a non-idempotent producer retrying its
 * first batches after later ones were written reorders records.
 */
import { ConfigError } from '../common/errors.js'
import { ErrorCode, errorMessage } from '../protocol/error-codes.js'
import {
  type BrokerId,
  type ClusterImage,
  leaderHasStorageError,
  leaderServes,
  type PartitionState,
  type TopicImage,
} from './cluster-image.js'
import { type ClusterMetadata, initialState } from './cluster-metadata.js'
import { decideReassignment } from './reassignment.js'
import { brokerTopicDefaults, validateTopicConfigs } from './topic-config.js'
import { topicNameProblem } from './topic-name.js'

export { collidingTopic, currentOverrides, withOverrides } from './topic-admin-rules.js'
export {
  type AdminOptions,
  AUTO_CREATE_READY_WAIT_MS,
  CommitFailedError,
  type ConfigChange,
  type ConfigTarget,
  type CreatableTopic,
  type CreatedTopic,
  commitFailure,
  type DeletableTopic,
  type DeletedTopic,
  type ElectionType,
  type InternalTopic,
  MAX_PARTITIONS_PER_REQUEST,
  type Outcome,
  type PartitionIncrease,
  type PartitionOutcome,
  type ReassignmentRequest,
  TopicAdminError,
  type TopicAdminOptions,
  type TopicPartitionOutcomes,
} from './topic-admin-types.js'

import {
  checkManualAssignment,
  checkReplicationFactor,
  collidingTopic,
  decideElection,
  resolveDeletions,
  withOverrides,
} from './topic-admin-rules.js'
import {
  type AdminOptions,
  AUTO_CREATE_READY_WAIT_MS,
  CommitFailedError,
  type ConfigChange,
  type CreatableTopic,
  type CreatedTopic,
  commitFailure,
  type DeletableTopic,
  type DeletedTopic,
  type ElectionType,
  excessiveBatch,
  failSuccesses,
  failure,
  type InternalTopic,
  MAX_PARTITIONS_PER_REQUEST,
  OK,
  type Outcome,
  type PartitionIncrease,
  type PartitionOutcome,
  type ReassignmentRequest,
  storageError,
  TopicAdminError,
  type TopicAdminOptions,
  type TopicPartitionOutcomes,
  timedOut,
} from './topic-admin-types.js'

export class TopicAdmin {
  constructor(private readonly options: TopicAdminOptions) {}

  private get metadata(): ClusterMetadata {
    return this.options.metadata
  }

  private setting<T>(name: string): T {
    return this.options.config.values.get(name) as T
  }

  // ---- CreateTopics -------------------------------------------------------------------------

  /**
   * Kafka's checks in its order, per topic: duplicate names in the request INVALID_REQUEST
   * (listed last), internal or illegal names, existing or colliding names, configs,
   * partitions and replication factor or manual assignments, the request's partition
   * budget. Valid topics are created in one change; under validateOnly nothing is.
   */
  async createTopics(topics: readonly CreatableTopic[], options: AdminOptions): Promise<CreatedTopic[]> {
    const counts = new Map<string, number>()
    for (const t of topics) counts.set(t.name, (counts.get(t.name) ?? 0) + 1)
    const unique = topics.filter((t) => counts.get(t.name) === 1)
    const duplicates = [...counts].filter(([, n]) => n > 1).map(([name]) => name)
    // Topics an earlier run of the plan created: a change committed in parts that conflicted
    // after publishing some (see ClusterMetadata) runs the plan again on an image with them.
    const planned = new Map<string, TopicImage>()
    let lastResults: CreatedTopic[] = []
    const plan = (image: ClusterImage) => {
      const results: CreatedTopic[] = []
      const created: TopicImage[] = []
      let budget = MAX_PARTITIONS_PER_REQUEST
      for (const topic of unique) {
        const existing = image.topics.get(topic.name)
        if (existing !== undefined && existing.topicId === planned.get(topic.name)?.topicId) {
          budget -= existing.partitions.length
          results.push({ ...OK, name: topic.name, topic: existing })
          continue
        }
        try {
          const topicPlan = this.planTopic(image, created, topic)
          budget -= topicPlan.partitions.length
          if (budget < 0) throw excessiveBatch()
          created.push(topicPlan)
          planned.set(topic.name, topicPlan)
          results.push({ ...OK, name: topic.name, topic: topicPlan })
        } catch (error) {
          results.push({ ...failure(error), name: topic.name })
        }
      }
      lastResults = results
      if (created.length === 0) return { image, result: results }
      const next = new Map(image.topics)
      for (const topic of created) next.set(topic.name, topic)
      return { image: { ...image, topics: next }, result: results }
    }
    let results: CreatedTopic[]
    try {
      results = options.validateOnly
        ? plan(this.metadata.image()).result
        : await this.change(plan, 'CreateTopics')
    } catch (error) {
      if (!(error instanceof CommitFailedError)) throw error
      // Topics published before the failure exist: they succeeded.
      const image = this.metadata.image()
      results = lastResults.map((r) =>
        r.topic !== undefined && image.topics.get(r.name)?.topicId === r.topic.topicId
          ? r
          : r.errorCode === ErrorCode.NONE
            ? { name: r.name, ...error.outcome }
            : r,
      )
    }
    if (!options.validateOnly) {
      for (const r of results)
        if (r.topic && r.errorCode === ErrorCode.NONE)
          this.options.logger.info({ topic: r.name, partitions: r.topic.partitions.length }, 'created topic')
      results = await this.awaitServed(results, options.timeoutMs)
    }
    for (const name of duplicates)
      results.push({ name, errorCode: ErrorCode.INVALID_REQUEST, errorMessage: 'Duplicate topic name.' })
    return results
  }

  /** Runs Kafka's checks in its order and returns the topic to create, or throws TopicAdminError. */
  private planTopic(image: ClusterImage, earlier: readonly TopicImage[], topic: CreatableTopic): TopicImage {
    const name = topic.name
    if (name === '__cluster_metadata') {
      throw new TopicAdminError(
        ErrorCode.INVALID_REQUEST,
        `Creation of internal topic ${name} is prohibited.`,
      )
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
    try {
      validateTopicConfigs(topic.configs, brokerTopicDefaults(image, this.options.config))
    } catch (error) {
      if (error instanceof ConfigError) throw new TopicAdminError(ErrorCode.INVALID_CONFIG, error.message)
      throw error
    }
    const overrides = topic.configs as Record<string, string>
    if (topic.assignments.length > 0) return this.manualTopic(image, topic, overrides)
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
      topic.numPartitions === -1 ? this.setting<number>('num.partitions') : topic.numPartitions
    const replicationFactor =
      topic.replicationFactor === -1
        ? this.setting<number>('default.replication.factor')
        : topic.replicationFactor
    checkReplicationFactor(replicationFactor, image.brokers.size)
    if (partitions > MAX_PARTITIONS_PER_REQUEST) throw excessiveBatch()
    return this.metadata.createTopicImage({ name, partitions, replicationFactor, configs: overrides })
  }

  private manualTopic(
    image: ClusterImage,
    topic: CreatableTopic,
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
    const byIndex = new Map<number, readonly BrokerId[]>()
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
    if (byIndex.size > MAX_PARTITIONS_PER_REQUEST) throw excessiveBatch()
    const placed = this.metadata.createTopicImage({
      name: topic.name,
      partitions: 0,
      replicationFactor: 0,
      configs,
    })
    const partitions = [...byIndex.keys()].sort((a, b) => a - b).map((i) => initialState(i, byIndex.get(i)!))
    return { ...placed, partitions }
  }

  /**
   * auto.create.topics.enable: creates the missing ones of `names` with the broker defaults
   * (replication factor capped at the registered brokers) and waits up to
   * AUTO_CREATE_READY_WAIT_MS for their leaders.
   */
  async autoCreateTopics(names: readonly string[]): Promise<void> {
    if (this.setting<boolean>('auto.create.topics.enable') !== true) return
    const valid = names.filter((name) => topicNameProblem(name) === null)
    if (valid.length === 0) return
    let created: TopicImage[]
    try {
      created = await this.change((image) => {
        const topics = new Map(image.topics)
        const added: TopicImage[] = []
        for (const name of valid) {
          if (topics.has(name) || collidingTopic(name, topics.keys()) !== null) continue
          const topic = this.metadata.createTopicImage({
            name,
            partitions: this.setting<number>('num.partitions'),
            replicationFactor: Math.min(
              this.setting<number>('default.replication.factor'),
              image.brokers.size,
            ),
            configs: {},
          })
          topics.set(name, topic)
          added.push(topic)
        }
        return { image: added.length === 0 ? image : { ...image, topics }, result: added }
      }, 'auto topic creation')
    } catch (error) {
      // Logged by change(); the Metadata answer lists the topics as unknown, so clients retry.
      if (error instanceof CommitFailedError) return
      throw error
    }
    for (const topic of created)
      this.options.logger.info(
        { topic: topic.name, partitions: topic.partitions.length },
        'auto-created topic',
      )
    await this.waitServed(
      created.map((t) => ({ topicId: t.topicId, name: t.name, from: 0 })),
      AUTO_CREATE_READY_WAIT_MS,
    )
  }

  /** Creates an internal topic unless it exists; does not wait for its leaders. */
  async ensureInternalTopic(spec: InternalTopic): Promise<void> {
    await this.change((image) => {
      if (image.topics.has(spec.name)) return { image, result: undefined }
      const replicationFactor = Math.max(1, Math.min(spec.replicationFactor, image.brokers.size))
      const topic = this.metadata.createTopicImage({ ...spec, replicationFactor })
      this.options.logger.info(
        { topic: spec.name, partitions: spec.partitions, replicationFactor },
        'creating internal topic',
      )
      return { image: { ...image, topics: new Map(image.topics).set(spec.name, topic) }, result: undefined }
    })
  }

  // ---- CreatePartitions ---------------------------------------------------------------------

  /**
   * Raises partition counts: unknown topics UNKNOWN_TOPIC_OR_PARTITION, no increase
   * INVALID_PARTITIONS, manual assignments checked like CreateTopics', names given twice
   * INVALID_REQUEST. All increases land in one change; answers come once the new partitions
   * are served.
   */
  async createPartitions(
    increases: readonly PartitionIncrease[],
    options: AdminOptions,
  ): Promise<(Outcome & { name: string })[]> {
    const counts = new Map<string, number>()
    for (const t of increases) counts.set(t.name, (counts.get(t.name) ?? 0) + 1)
    const plan = (image: ClusterImage) => {
      const topics = new Map(image.topics)
      let budget = MAX_PARTITIONS_PER_REQUEST
      const results = increases.map((increase) => {
        if ((counts.get(increase.name) ?? 0) > 1)
          return {
            name: increase.name,
            errorCode: ErrorCode.INVALID_REQUEST,
            errorMessage: 'Duplicate topic name.',
          }
        try {
          const added = this.planPartitions(image, increase)
          budget -= added.length
          if (budget < 0) throw excessiveBatch()
          const topic = topics.get(increase.name)!
          topics.set(increase.name, { ...topic, partitions: [...topic.partitions, ...added] })
          return {
            name: increase.name,
            ...OK,
            grown: { topicId: topic.topicId, from: topic.partitions.length },
          }
        } catch (error) {
          return { name: increase.name, ...failure(error) }
        }
      })
      return { image: results.some((r) => 'grown' in r) ? { ...image, topics } : image, result: results }
    }
    let planned: ReturnType<typeof plan>['result']
    try {
      planned = options.validateOnly
        ? plan(this.metadata.image()).result
        : await this.change(plan, 'CreatePartitions')
    } catch (error) {
      if (!(error instanceof CommitFailedError)) throw error
      return failSuccesses(plan(this.metadata.image()).result, error.outcome).map(
        ({ name, errorCode, errorMessage }) => ({
          name,
          errorCode,
          errorMessage,
        }),
      )
    }
    if (options.validateOnly)
      return planned.map(({ name, errorCode, errorMessage }) => ({ name, errorCode, errorMessage }))
    const grown = planned.flatMap((r) => ('grown' in r && r.grown ? [{ name: r.name, ...r.grown }] : []))
    const late = await this.waitServed(grown, options.timeoutMs)
    const failed = this.storageFailed(grown)
    return planned.map(({ name, errorCode, errorMessage }) =>
      failed.has(name)
        ? { name, ...storageError() }
        : late.has(name)
          ? { name, ...timedOut() }
          : { name, errorCode, errorMessage },
    )
  }

  private planPartitions(image: ClusterImage, increase: PartitionIncrease): PartitionState[] {
    const topic = image.topics.get(increase.name)
    if (!topic)
      throw new TopicAdminError(
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        errorMessage(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
      )
    const current = topic.partitions.length
    if (increase.count === current) {
      throw new TopicAdminError(ErrorCode.INVALID_PARTITIONS, `Topic already has ${current} partition(s).`)
    }
    if (increase.count < current) {
      throw new TopicAdminError(
        ErrorCode.INVALID_PARTITIONS,
        `The topic ${increase.name} currently has ${current} partition(s); ${increase.count} would not be an increase.`,
      )
    }
    const additional = increase.count - current
    if (additional > MAX_PARTITIONS_PER_REQUEST) throw excessiveBatch()
    const replicationFactor = topic.partitions[0].replicas.length
    if (increase.assignments !== null) {
      if (increase.assignments.length !== additional) {
        throw new TopicAdminError(
          ErrorCode.INVALID_REPLICA_ASSIGNMENT,
          `Attempted to add ${additional} additional partition(s), but only ${increase.assignments.length} assignment(s) were specified.`,
        )
      }
      return increase.assignments.map((brokerIds, i) => {
        checkManualAssignment(image, brokerIds, replicationFactor)
        return initialState(current + i, brokerIds)
      })
    }
    checkReplicationFactor(replicationFactor, image.brokers.size)
    const added: PartitionState[] = []
    for (let i = 0; i < additional; i++)
      added.push(this.metadata.newPartition(current + i, replicationFactor))
    return added
  }

  // ---- DeleteTopics -------------------------------------------------------------------------

  /**
   * Removes topics by name or id in one change (the replica managers delete their logs).
   * Names or ids given twice INVALID_REQUEST, unknown names UNKNOWN_TOPIC_OR_PARTITION,
   * unknown ids UNKNOWN_TOPIC_ID; with delete.topic.enable=false every topic gets
   * TOPIC_DELETION_DISABLED.
   */
  async deleteTopics(wanted: readonly DeletableTopic[]): Promise<DeletedTopic[]> {
    if (this.setting<boolean>('delete.topic.enable') === false) {
      return wanted.map((w) => ({
        ...w,
        errorCode: ErrorCode.TOPIC_DELETION_DISABLED,
        errorMessage: 'Topic deletion is disabled.',
      }))
    }
    let results: DeletedTopic[]
    try {
      results = await this.change((image) => {
        const results = resolveDeletions(image, wanted)
        const gone = new Set(results.filter((r) => r.errorCode === ErrorCode.NONE).map((r) => r.topicId))
        const topics = new Map([...image.topics].filter(([, t]) => !gone.has(t.topicId)))
        return { image: topics.size === image.topics.size ? image : { ...image, topics }, result: results }
      }, 'DeleteTopics')
    } catch (error) {
      if (!(error instanceof CommitFailedError)) throw error
      return failSuccesses(resolveDeletions(this.metadata.image(), wanted), error.outcome)
    }
    for (const r of results)
      if (r.errorCode === ErrorCode.NONE)
        this.options.logger.info({ topic: r.name, topicId: r.topicId }, 'deleted topic')
    return results
  }

  // ---- ElectLeaders -------------------------------------------------------------------------

  /**
   * PREFERRED moves leadership to the first replica when it is live and in the ISR;
   * UNCLEAN gives an offline partition a leader from its live replicas. Null: every partition.
   */
  electLeaders(
    type: ElectionType,
    wanted: readonly { topic: string; partitions: readonly number[] }[] | null,
  ): Promise<TopicPartitionOutcomes[]> {
    return this.changeByPartition('ElectLeaders', (image) => {
      const live = new Set(image.brokers.keys())
      const targets =
        wanted ??
        [...image.topics.values()].map((t) => ({
          topic: t.name,
          partitions: t.partitions.map((p) => p.partition),
        }))
      const topics = new Map(image.topics)
      let changed = false
      const outcomes = targets.map(({ topic, partitions }): TopicPartitionOutcomes => {
        const current = topics.get(topic)
        const states = current ? [...current.partitions] : []
        const results = partitions.map((index): PartitionOutcome => {
          const state = states[index]
          if (!state)
            return {
              partition: index,
              errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
              errorMessage: `${topic}-${index} does not exist`,
            }
          const { outcome, next } = decideElection(state, live, type)
          if (next) {
            states[index] = next
            changed = true
          }
          return { partition: index, ...outcome }
        })
        if (current) topics.set(topic, { ...current, partitions: states })
        return { topic, partitions: results }
      })
      return { image: changed ? { ...image, topics } : image, result: outcomes }
    })
  }

  // ---- AlterPartitionReassignments ----------------------------------------------------------

  /**
   * Starts moving each partition to the given replicas (registered, no duplicates:
   * INVALID_REPLICA_ASSIGNMENT otherwise; as many as now unless
   * `allowReplicationFactorChange`, v1's flag) or cancels the move in progress
   * (NO_REASSIGNMENT_IN_PROGRESS when none); the controller completes moves.
   */
  async alterPartitionReassignments(
    requests: readonly ReassignmentRequest[],
    allowReplicationFactorChange = true,
  ): Promise<TopicPartitionOutcomes[]> {
    // A reassignment changes its topic's record with the partition, so one topic's moves
    // commit in one transaction: at most a transaction's worth per change, as Kafka's
    // partitions move independently.
    const perChange = this.metadata.storeLimits.txnOpsMax - 2
    const outcomes: TopicPartitionOutcomes[] = requests.map((r) => ({ topic: r.name, partitions: [] }))
    for (let from = 0; outcomes.length > 0; from += perChange) {
      const batch = requests.map((r) => ({ ...r, partitions: r.partitions.slice(from, from + perChange) }))
      if (batch.every((r) => r.partitions.length === 0) && from > 0) break
      const answered = await this.alterReassignmentsOnce(batch, allowReplicationFactorChange)
      answered.forEach((t, i) => {
        outcomes[i] = { topic: t.topic, partitions: [...outcomes[i].partitions, ...t.partitions] }
      })
    }
    return outcomes
  }

  private alterReassignmentsOnce(
    requests: readonly ReassignmentRequest[],
    allowReplicationFactorChange: boolean,
  ): Promise<TopicPartitionOutcomes[]> {
    return this.changeByPartition('AlterPartitionReassignments', (image) => {
      const topics = new Map(image.topics)
      let changed = false
      const outcomes = requests.map((wanted): TopicPartitionOutcomes => {
        const topic = topics.get(wanted.name)
        const partitions = topic ? [...topic.partitions] : []
        const results = wanted.partitions.map((p): PartitionOutcome => {
          const state = partitions[p.partitionIndex]
          if (!state)
            return {
              partition: p.partitionIndex,
              errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
              errorMessage: 'Unknown partition',
            }
          const { outcome, next } = decideReassignment(
            state,
            p.replicas,
            image.brokers,
            allowReplicationFactorChange,
          )
          if (next) {
            partitions[p.partitionIndex] = next
            changed = true
          }
          return { partition: p.partitionIndex, ...outcome }
        })
        if (topic) topics.set(wanted.name, { ...topic, partitions })
        return { topic: wanted.name, partitions: results }
      })
      return { image: changed ? { ...image, topics } : image, result: outcomes }
    })
  }

  // ---- AlterConfigs / IncrementalAlterConfigs -----------------------------------------------

  /**
   * Replaces resources' overrides in one change. `plan` computes, from the image the change
   * applies to (it may run again after a conflict), each resource's outcome and the
   * validated new overrides of those that succeed: config rules belong to the config
   * resources (server/config-resources.ts), where they live on; the write is here.
   */
  async alterConfigs<R>(
    plan: (image: ClusterImage) => { changes: readonly ConfigChange[]; result: R },
  ): Promise<R> {
    return this.change((image) => {
      const { changes, result } = plan(image)
      let next = image
      for (const change of changes) next = withOverrides(next, change.target, change.overrides)
      return { image: next, result }
    }, 'AlterConfigs')
  }

  // ---- commit and readiness -----------------------------------------------------------------

  /**
   * One compare-and-set of `plan` (pure; may run again): resolves with its last run's result.
   * A change the store did not commit throws CommitFailedError, logged here once.
   */
  private async change<R>(
    plan: (image: ClusterImage) => { image: ClusterImage; result: R },
    operation = 'metadata change',
  ): Promise<R> {
    let result: R | undefined
    let ran = false
    try {
      await this.metadata.update((image) => {
        const planned = plan(image)
        result = planned.result
        ran = true
        return planned.image
      })
    } catch (error) {
      const outcome = commitFailure(error)
      if (outcome === null) throw error
      this.options.logger.warn({ err: error, operation }, 'metadata store did not commit the change')
      throw new CommitFailedError(outcome, error)
    }
    if (!ran) throw new Error('metadata update ran no plan')
    return result as R
  }

  /** change() for per-partition answers: on a failed commit every would-be success gets its outcome. */
  private async changeByPartition(
    operation: string,
    plan: (image: ClusterImage) => { image: ClusterImage; result: TopicPartitionOutcomes[] },
  ): Promise<TopicPartitionOutcomes[]> {
    try {
      return await this.change(plan, operation)
    } catch (error) {
      if (!(error instanceof CommitFailedError)) throw error
      return plan(this.metadata.image()).result.map((t) => ({
        topic: t.topic,
        partitions: failSuccesses(t.partitions, error.outcome),
      }))
    }
  }

  /**
   * CreateTopics results with REQUEST_TIMED_OUT for topics whose leaders did not serve in
   * time, and KAFKA_STORAGE_ERROR for topics a leader could not create a partition of.
   */
  private async awaitServed(results: CreatedTopic[], timeoutMs: number): Promise<CreatedTopic[]> {
    const created = results.flatMap((r) =>
      r.topic ? [{ name: r.name, topicId: r.topic.topicId, from: 0 }] : [],
    )
    const late = await this.waitServed(created, timeoutMs)
    const failed = this.storageFailed(created)
    return results.map((r) =>
      failed.has(r.name)
        ? { name: r.name, ...storageError() }
        : late.has(r.name)
          ? { name: r.name, ...timedOut() }
          : r,
    )
  }

  /** The topics with a partition (from `from`) whose leader could not create it. */
  private storageFailed(topics: readonly { name: string; topicId: string; from: number }[]): Set<string> {
    const image = this.metadata.image()
    const failed = new Set<string>()
    for (const { name, topicId, from } of topics) {
      const topic = image.topics.get(name)
      if (!topic || topic.topicId !== topicId) continue
      if (topic.partitions.slice(from).some((state) => leaderHasStorageError(image, topic, state)))
        failed.add(name)
    }
    return failed
  }

  /**
   * Waits until every partition from `from` of each topic is served by its leader (or its
   * leader recorded a storage error for it), or `timeoutMs` passed; resolves with the names
   * of the topics still not served. A topic
   * deleted or replaced meanwhile is not waited for. timeoutMs <= 0: no wait (Kafka answers at
   * once then).
   */
  async waitServed(
    topics: readonly { name: string; topicId: string; from: number }[],
    timeoutMs: number,
  ): Promise<Set<string>> {
    const pending = (image: ClusterImage) =>
      new Set(
        topics
          .filter(({ name, topicId, from }) => {
            const topic = image.topics.get(name)
            if (!topic || topic.topicId !== topicId) return false
            return topic.partitions
              .slice(from)
              .some(
                (state) => !leaderServes(image, topic, state) && !leaderHasStorageError(image, topic, state),
              )
          })
          .map((t) => t.name),
      )
    if (timeoutMs <= 0) return new Set()
    const served = await this.waitFor((image) => pending(image).size === 0, timeoutMs)
    if (served) return new Set()
    const late = pending(this.metadata.image())
    this.options.logger.warn(
      { topics: [...late], timeoutMs },
      'new partitions not served by their leaders in time',
    )
    return late
  }

  /**
   * Waits until every partition led by one of `brokerIds` is served by it (a broker just
   * started or restarted serves nothing until it has applied the image); false on timeout.
   */
  waitLeadersServing(brokerIds: readonly BrokerId[], timeoutMs: number): Promise<boolean> {
    const ids = new Set(brokerIds)
    return this.waitFor((image) => {
      for (const topic of image.topics.values())
        for (const state of topic.partitions)
          if (ids.has(state.leader) && !leaderServes(image, topic, state)) return false
      return true
    }, timeoutMs)
  }

  /** Resolves true once `done` holds for the current image, false after `timeoutMs`. */
  private waitFor(done: (image: ClusterImage) => boolean, timeoutMs: number): Promise<boolean> {
    if (done(this.metadata.image())) return Promise.resolve(true)
    return new Promise((resolve) => {
      const finish = (result: boolean) => {
        stop()
        timer.cancel()
        resolve(result)
      }
      const stop = this.metadata.onChange((image) => {
        if (done(image)) finish(true)
      })
      const timer = this.options.clock.setTimeout(() => finish(done(this.metadata.image())), timeoutMs)
    })
  }
}
