/**
 * ISR changes a leader proposes, written to the metadata store (Kafka's AlterPartitionManager
 * on the broker and the controller's check in one): a compare-and-set that applies only if
 * the partition state is still the one the proposal was made from (same leader, leader epoch
 * and partition epoch), so a deposed or fenced leader cannot change the ISR. The store's
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
  readonly nodeId: number
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

export class AlterPartitionManager {
  /** ISR changes this broker committed as leader. */
  readonly stats = { shrinks: 0, expands: 0 }

  constructor(private readonly options: AlterPartitionManagerOptions) {}

  /** Writes the proposal; true when it committed, false when the partition state moved on. */
  async submit(proposal: IsrProposal): Promise<boolean> {
    let committed = false
    let refusal = 'the partition state moved on'
    let previousIsrSize = 0
    const guarded = [this.options.nodeId, ...proposal.addedMembers.map((m) => m.brokerId)]
    await this.options.updateMetadata((image) => {
      committed = false
      const topic = image.topics.get(proposal.topic)
      const state = topic?.partitions[proposal.partition]
      if (!topic || !state || !this.proposalApplies(state, proposal)) return image
      const fenced = this.brokerEpochsRefusal(image, proposal)
      if (fenced !== null) {
        refusal = fenced
        return image
      }
      committed = true
      previousIsrSize = state.isr.length
      const partitions = [...topic.partitions]
      const minIsr = this.options.minInsyncReplicas?.(image, topic.name) ?? 1
      partitions[proposal.partition] = withIsr(state, proposal.isr, minIsr)
      return { ...image, topics: new Map(image.topics).set(topic.name, { ...topic, partitions }) }
    }, guarded)
    if (!committed) {
      this.options.logger.info({ ...proposal }, `ISR change refused: ${refusal}`)
      return false
    }
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
