/**
 * The controller: exactly one broker at a time, elected through the metadata store. While
 * it leads it reacts to broker liveness (registrations appear and disappear with their
 * leases): dead brokers leave ISRs and partitions whose leader died get a new one, chosen
 * by the rules in elections.ts. Every change goes through ClusterMetadata.update, so it is
 * a compare-and-set on the partition's state and a stale controller cannot overwrite a
 * newer decision.
 */
import type { Logger } from '../common/logger.js'
import type { BrokerId, ClusterImage, PartitionState, TopicImage } from './cluster-image.js'
import type { ClusterMetadata } from './cluster-metadata.js'
import { KEYS } from './cluster-metadata.js'
import { type ElectionResult, electPreferred, onBrokerChange } from './elections.js'
import type { Leadership, Lease, MetadataStore } from './store/metadata-store.js'

export const CONTROLLER_ELECTION = 'election/controller'

export interface ControllerOptions {
  readonly nodeId: BrokerId
  readonly store: MetadataStore
  readonly metadata: ClusterMetadata
  readonly lease: Lease
  readonly logger: Logger
  /** Effective unclean.leader.election.enable of a topic (topic override or broker default). */
  readonly uncleanLeaderElection: (image: ClusterImage, topic: string) => boolean
}

export interface ControllerStats {
  elections: number
  uncleanElections: number
}

export class Controller {
  private leadership: Leadership | null = null
  private stopped = false
  private reconciling: Promise<void> = Promise.resolve()
  private reconcileAgain = false
  readonly stats: ControllerStats = { elections: 0, uncleanElections: 0 }

  constructor(private readonly options: ControllerOptions) {}

  get isActive(): boolean {
    return this.leadership !== null
  }

  /** Campaigns in the background; leads until stopped or the lease is lost. */
  start(): void {
    this.campaign().catch((error: unknown) => {
      if (!this.stopped) this.options.logger.error({ err: error }, 'controller campaign failed')
    })
  }

  private async campaign(): Promise<void> {
    const { store, lease, nodeId, metadata, logger } = this.options
    const leadership = await store.campaign(CONTROLLER_ELECTION, String(nodeId), lease)
    if (this.stopped) {
      await leadership.resign()
      return
    }
    this.leadership = leadership
    await store.txn(
      [],
      [{ type: 'put', key: KEYS.controller, value: JSON.stringify({ nodeId }), lease: lease.id }],
    )
    logger.info({ nodeId }, 'became controller')
    metadata.onChange(() => this.scheduleReconcile())
    this.scheduleReconcile()
    await leadership.lost
    this.leadership = null
    logger.warn({ nodeId }, 'lost controller leadership')
  }

  async stop(): Promise<void> {
    this.stopped = true
    const leadership = this.leadership
    this.leadership = null
    if (leadership) await leadership.resign()
  }

  /** Runs reconcile once more after the one in progress (changes arrive while it writes). */
  private scheduleReconcile(): void {
    if (this.reconcileAgain) return
    this.reconcileAgain = true
    this.reconciling = this.reconciling.then(async () => {
      this.reconcileAgain = false
      if (!this.isActive) return
      try {
        await this.reconcile()
      } catch (error) {
        this.options.logger.error({ err: error }, 'controller reconcile failed')
      }
    })
  }

  private async reconcile(): Promise<void> {
    const decisions: { topic: string; before: PartitionState; result: ElectionResult }[] = []
    await this.options.metadata.update((image) => {
      decisions.length = 0
      return this.applyToAll(image, (topic, state, live) => {
        const result = onBrokerChange({
          state,
          live,
          uncleanLeaderElection: this.options.uncleanLeaderElection(image, topic.name),
        })
        if (result) decisions.push({ topic: topic.name, before: state, result })
        return result?.state ?? null
      })
    })
    this.report(decisions)
  }

  /** Moves every partition (or those of `only`) to its preferred leader where possible. */
  async electPreferredLeaders(only?: ReadonlySet<string>): Promise<number> {
    let moved = 0
    await this.options.metadata.update((image) => {
      moved = 0
      return this.applyToAll(image, (topic, state, live) => {
        if (only && !only.has(`${topic.name}-${state.partition}`)) return null
        const result = electPreferred({ state, live, uncleanLeaderElection: false })
        if (result) moved++
        return result?.state ?? null
      })
    })
    return moved
  }

  private applyToAll(
    image: ClusterImage,
    decide: (topic: TopicImage, state: PartitionState, live: ReadonlySet<BrokerId>) => PartitionState | null,
  ): ClusterImage {
    const live = new Set(image.brokers.keys())
    let changed = false
    const topics = new Map(image.topics)
    for (const topic of image.topics.values()) {
      let partitions: PartitionState[] | null = null
      topic.partitions.forEach((state, index) => {
        const next = decide(topic, state, live)
        if (!next) return
        partitions ??= [...topic.partitions]
        partitions[index] = next
      })
      if (partitions) {
        topics.set(topic.name, { ...topic, partitions })
        changed = true
      }
    }
    return changed ? { ...image, topics } : image
  }

  private report(
    decisions: readonly { topic: string; before: PartitionState; result: ElectionResult }[],
  ): void {
    const { logger } = this.options
    for (const { topic, before, result } of decisions) {
      const after = result.state
      if (after.leader === before.leader) continue
      this.stats.elections++
      if (result.unclean) {
        this.stats.uncleanElections++
        logger.warn(
          {
            topic,
            partition: after.partition,
            leader: after.leader,
            previousIsr: before.isr,
            leaderEpoch: after.leaderEpoch,
          },
          'UNCLEAN leader election: the new leader was not in the ISR; committed records it lacks are lost',
        )
      } else if (after.leader === -1) {
        logger.warn(
          { topic, partition: after.partition, isr: after.isr },
          'partition offline: no live ISR member',
        )
      } else {
        logger.info(
          { topic, partition: after.partition, leader: after.leader, leaderEpoch: after.leaderEpoch },
          'elected leader',
        )
      }
    }
  }
}
