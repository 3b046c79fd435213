/**
 * ISR changes a leader proposes, written to the metadata store (Kafka's AlterPartitionManager
 * on the broker and the controller's check in one): a compare-and-set that applies only if
 * the partition state is still the one the proposal was made from (same leader, leader epoch
 * and partition epoch), so a deposed or fenced leader cannot change the ISR. The store's
 * version check under `ClusterMetadata.update` makes the read-compare-write atomic.
 */
import type { Logger } from '../common/logger.js'
import type { ClusterImage, PartitionState } from '../metadata/cluster-image.js'
import type { IsrProposal } from './partition.js'

export interface AlterPartitionManagerOptions {
  readonly nodeId: number
  /** ClusterMetadata.update: applies a change by compare-and-set, retrying on conflict. */
  readonly updateMetadata: (change: (image: ClusterImage) => ClusterImage) => Promise<ClusterImage>
  readonly logger: Logger
}

export class AlterPartitionManager {
  /** ISR changes this broker committed as leader. */
  readonly stats = { shrinks: 0, expands: 0 }

  constructor(private readonly options: AlterPartitionManagerOptions) {}

  /** Writes the proposal; true when it committed, false when the partition state moved on. */
  async submit(proposal: IsrProposal): Promise<boolean> {
    let committed = false
    let previousIsrSize = 0
    await this.options.updateMetadata((image) => {
      committed = false
      const topic = image.topics.get(proposal.topic)
      const state = topic?.partitions[proposal.partition]
      if (!topic || !state || !this.proposalApplies(state, proposal)) return image
      committed = true
      previousIsrSize = state.isr.length
      const partitions = [...topic.partitions]
      partitions[proposal.partition] = { ...state, isr: [...proposal.isr] }
      return { ...image, topics: new Map(image.topics).set(topic.name, { ...topic, partitions }) }
    })
    if (!committed) {
      this.options.logger.info({ ...proposal }, 'ISR change refused: the partition state moved on')
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
}
