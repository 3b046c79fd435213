/**
 * ISR changes a leader proposes, written to the metadata store (Kafka's AlterPartitionManager
 * on the broker and the controller's check in one): a compare-and-set that applies only if
 * the partition state is still the one the proposal was made from (same topic id, leader,
 * leader epoch and partition epoch), so a deposed or fenced leader, or a replica of a deleted
 * topic, cannot change the ISR. The store's
 * version check under `ClusterMetadata.update` makes the read-compare-write atomic.
 *
 * Broker epochs fence incarnations (Kafka's AlterPartition broker epoch and KIP-903): the
 * proposal carries the leader's broker epoch and those of the members it adds, and applies
 * only while each is still its broker's registration, guarded in the same compare-and-set.
 */
import type { Logger } from '../common/logger.js'
import {
  type BrokerId,
  brokerEpochOf,
  type ClusterImage,
  type PartitionState,
} from '../metadata/cluster-image.js'
import { withIsr } from '../metadata/elections.js'
import type { IsrProposal } from './partition.js'

export interface AlterPartitionManagerOptions {
  readonly nodeId: BrokerId
  /** ClusterMetadata.update: applies a change by compare-and-set, retrying on conflict. */
  /** ClusterMetadata.update: `guardBrokers`' registrations are part of the compare. */
  readonly updateMetadata: (
    change: (image: ClusterImage) => ClusterImage,
    guardBrokers: readonly BrokerId[],
  ) => Promise<ClusterImage>
  readonly logger: Logger
  /** Effective min.insync.replicas of a topic: a shrink below it moves members to the ELR (KIP-966). Absent: 1. */
  readonly minInsyncReplicas?: (image: ClusterImage, topic: string) => number
}

/** One proposal waiting for its batch, and how its caller learns the outcome. */
interface Queued {
  readonly proposal: IsrProposal
  readonly resolve: (committed: boolean) => void
  readonly reject: (error: unknown) => void
}

/** What the compare-and-set decided for one proposal of a batch. */
interface Outcome {
  committed: boolean
  refusal: string
  previousIsrSize: number
}

/**
 * Proposals are batched as Kafka's AlterPartitionManager batches AlterPartition items: one
 * write is in flight at a time, and every proposal made meanwhile goes in the next one. A
 * write per proposal made N partitions cost N store writes and N metadata images, each
 * applied by every broker over every partition (O(N^2): 3 brokers at RF 3 did not get
 * 3,000 partitions served in 100 s). Each proposal of a batch is still decided on its own
 * (a refused one does not hold back the others), against the state the batch is applied to.
 */
export class AlterPartitionManager {
  /** ISR changes this broker committed as leader. */
  readonly stats = { shrinks: 0, expands: 0, writes: 0 }
  private queued: Queued[] = []
  private writing = false

  constructor(private readonly options: AlterPartitionManagerOptions) {}

  /** Writes the proposal; true when it committed, false when the partition state moved on. */
  submit(proposal: IsrProposal): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.queued.push({ proposal, resolve, reject })
      // Deferred to a microtask: the proposals one pass makes (the ISR expiration check over
      // every partition) go in one batch rather than the first alone.
      if (!this.writing && this.queued.length === 1) queueMicrotask(() => this.maybeWrite())
    })
  }

  private maybeWrite(): void {
    if (this.writing || this.queued.length === 0) return
    // A partition goes once per batch: a second proposal for it (from a Partition object that
    // replaced the first) would be checked against the first's uncommitted result, whose
    // partition epoch is still the old one, and both would count as committed.
    const batch: Queued[] = []
    const later: Queued[] = []
    const seen = new Set<string>()
    for (const queued of this.queued) {
      const key = `${queued.proposal.topic}\u0000${queued.proposal.partition}`
      if (seen.has(key)) later.push(queued)
      else {
        seen.add(key)
        batch.push(queued)
      }
    }
    this.queued = later
    this.writing = true
    this.write(batch).finally(() => {
      this.writing = false
      this.maybeWrite()
    })
  }

  private async write(batch: readonly Queued[]): Promise<void> {
    const outcomes = new Map<Queued, Outcome>()
    const guarded = new Set([this.options.nodeId])
    for (const { proposal } of batch) for (const m of proposal.addedMembers) guarded.add(m.brokerId)
    try {
      this.stats.writes++
      await this.options.updateMetadata((image) => this.applyBatch(image, batch, outcomes), [...guarded])
    } catch (error) {
      // The outcome is unknown (a store timeout may still commit): each partition resends.
      for (const { reject } of batch) reject(error)
      return
    }
    for (const queued of batch) {
      const outcome = outcomes.get(queued)
      queued.resolve(outcome === undefined ? false : this.report(queued.proposal, outcome))
    }
  }

  /** The change function of a batch's compare-and-set (it may run again after a conflict). */
  private applyBatch(
    image: ClusterImage,
    batch: readonly Queued[],
    outcomes: Map<Queued, Outcome>,
  ): ClusterImage {
    outcomes.clear()
    // Copied once per topic a batch changes, not once per proposal (10,000 partitions of one topic).
    const changed = new Map<string, PartitionState[]>()
    for (const queued of batch) {
      const { proposal } = queued
      const outcome: Outcome = {
        committed: false,
        refusal: 'the partition state moved on',
        previousIsrSize: 0,
      }
      outcomes.set(queued, outcome)
      const topic = image.topics.get(proposal.topic)
      const state = topic?.partitions[proposal.partition]
      if (!topic || topic.topicId !== proposal.topicId || !state || !this.proposalApplies(state, proposal))
        continue
      const fenced = this.brokerEpochsRefusal(image, proposal)
      if (fenced !== null) {
        outcome.refusal = fenced
        continue
      }
      outcome.committed = true
      outcome.previousIsrSize = state.isr.length
      let partitions = changed.get(topic.name)
      if (partitions === undefined) {
        partitions = [...topic.partitions]
        changed.set(topic.name, partitions)
      }
      const minIsr = this.options.minInsyncReplicas?.(image, topic.name) ?? 1
      partitions[proposal.partition] = withIsr(state, proposal.isr, minIsr)
    }
    if (changed.size === 0) return image
    const topics = new Map(image.topics)
    for (const [name, partitions] of changed) {
      const topic = image.topics.get(name)
      if (topic) topics.set(name, { ...topic, partitions })
    }
    return { ...image, topics }
  }

  /** Logs and counts one proposal's outcome; whether it committed. */
  private report(proposal: IsrProposal, outcome: Outcome): boolean {
    if (!outcome.committed) {
      this.options.logger.info({ ...proposal }, `ISR change refused: ${outcome.refusal}`)
      return false
    }
    const { previousIsrSize } = outcome
    const grew = proposal.isr.length > previousIsrSize
    if (grew) this.stats.expands++
    else this.stats.shrinks++
    this.options.logger.info({ ...proposal, previousIsrSize }, grew ? 'ISR expanded' : 'ISR shrunk')
    return true
  }

  /** The compare of the compare-and-set: the proposal was made from the current leadership. */
  proposalApplies(state: PartitionState, proposal: IsrProposal): boolean {
    return (
      state.leader === this.options.nodeId &&
      state.leaderEpoch === proposal.leaderEpoch &&
      state.partitionEpoch === proposal.partitionEpoch
    )
  }

  /**
   * Why the proposal's broker epochs are no longer the registrations' (null: they are): the
   * leader's own (STALE_BROKER_EPOCH: a newer incarnation replaced it) or an added member's
   * (INELIGIBLE_REPLICA: unregistered, or its fetches came from an incarnation since
   * replaced). -1 is unknown and not checked, as Kafka accepts members whose fetch version
   * carries no epoch.
   */
  brokerEpochsRefusal(image: ClusterImage, proposal: IsrProposal): string | null {
    const own = brokerEpochOf(image, this.options.nodeId)
    if (proposal.brokerEpoch >= 0 && own !== proposal.brokerEpoch)
      return `STALE_BROKER_EPOCH: broker epoch ${proposal.brokerEpoch} of the leader, registered ${own ?? 'none'}`
    for (const { brokerId, brokerEpoch } of proposal.addedMembers) {
      const registered = brokerEpochOf(image, brokerId)
      if (registered === undefined) return `INELIGIBLE_REPLICA: broker ${brokerId} is not registered`
      if (brokerEpoch >= 0 && registered >= 0 && registered !== brokerEpoch)
        return `INELIGIBLE_REPLICA: broker ${brokerId} fetched with epoch ${brokerEpoch}, registered ${registered}`
    }
    return null
  }
}
