/**
 * The controller: exactly one broker at a time, elected through the metadata store. While
 * it leads it reacts to broker liveness (registrations appear and disappear with their
 * leases): dead brokers leave ISRs and partitions whose leader died get a new one, chosen
 * by the rules in elections.ts. Every change goes through ClusterMetadata.update, so it is
 * a compare-and-set on the partition's state and a stale controller cannot overwrite a
 * newer decision.
 */
import { ExponentialBackoff } from '../common/backoff.js'
import type { Clock, TimerHandle } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import type { BrokerId, ClusterImage, PartitionState, TopicImage } from './cluster-image.js'
import type { ClusterMetadata, ImageDelta } from './cluster-metadata.js'
import { KEYS } from './cluster-metadata.js'
import { type ElectionResult, electPreferred, onBrokerChange } from './elections.js'
import { maybeCompleteReassignment } from './reassignment.js'
import {
  type Leadership,
  type Lease,
  type MetadataStore,
  MetadataStoreError,
} from './store/metadata-store.js'

export const CONTROLLER_ELECTION = 'election/controller'

export interface ControllerOptions {
  readonly nodeId: BrokerId
  readonly store: MetadataStore
  readonly metadata: ClusterMetadata
  readonly lease: Lease
  /** Timers for retries (campaign, announcement, reconcile). */
  readonly clock: Clock
  readonly logger: Logger
  /** Effective unclean.leader.election.enable of a topic (topic override or broker default). */
  readonly uncleanLeaderElection: (image: ClusterImage, topic: string) => boolean
  /** Effective min.insync.replicas of a topic (KIP-966's ELR); absent: 1. */
  readonly minInsyncReplicas?: (image: ClusterImage, topic: string) => number
  /**
   * auto.leader.rebalance.enable: every `intervalMs` (leader.imbalance.check.interval.seconds)
   * the controller gives leaderships back to preferred replicas of any broker whose share of
   * partitions led by someone else exceeds `imbalancePercentage`
   * (leader.imbalance.per.broker.percentage). Null when disabled.
   */
  readonly autoLeaderRebalance?: { readonly intervalMs: number; readonly imbalancePercentage: number } | null
}

export interface ControllerStats {
  elections: number
  uncleanElections: number
}

/** Backoff between campaigns (after an error or a lost leadership) and reconcile retries. */
const RETRY_BACKOFF = new ExponentialBackoff({ initialMs: 200, maxMs: 2000 })
/** A failed reconcile is retried after this (the next metadata change may never come). */
const RECONCILE_RETRY_MS = 2000

export class Controller {
  private leadership: Leadership | null = null
  private stopped = false
  private leaseLost = false
  private reconciling: Promise<void> = Promise.resolve()
  private reconcileAgain = false
  private retryTimer: TimerHandle | null = null
  private reconcileRetryTimer: TimerHandle | null = null
  private rebalanceTimer: TimerHandle | null = null
  readonly stats: ControllerStats = { elections: 0, uncleanElections: 0 }
  /**
   * The partitions changed since the last reconcile, by topic (null: all of the topic's), or
   * null for every partition: after a change of brokers or settings, on taking the lead, and
   * after a failed round. An ISR change reconciled every partition of the cluster.
   */
  private pending: Map<string, Set<number> | null> | null = null

  constructor(private readonly options: ControllerOptions) {}

  get isActive(): boolean {
    return this.leadership !== null
  }

  /**
   * Campaigns in the background for as long as the lease lives: again after a failed
   * campaign (the store unreachable for a while) and after a leadership lost with the
   * lease still alive, so the cluster is never left without a candidate.
   */
  start(): void {
    void this.options.lease.lost.then(() => {
      this.leaseLost = true
    })
    this.options.metadata.onChange((_image, _previous, delta) => {
      this.noteChange(delta)
      this.scheduleReconcile()
    })
    this.campaignAgain(1)
    this.scheduleRebalanceCheck()
  }

  private scheduleRebalanceCheck(): void {
    const settings = this.options.autoLeaderRebalance
    if (!settings || this.stopped) return
    this.rebalanceTimer = this.options.clock.setTimeout(() => {
      const imbalanced = this.isActive
        ? imbalancedPartitions(this.options.metadata.image(), settings.imbalancePercentage)
        : null
      const done =
        imbalanced && imbalanced.size > 0 ? this.electPreferredLeaders(imbalanced) : Promise.resolve(0)
      done
        .then((moved) => {
          if (moved > 0)
            this.options.logger.info(
              { moved },
              'auto leader rebalance moved leaderships to preferred replicas',
            )
        })
        .catch((error: unknown) => this.options.logger.warn({ err: error }, 'auto leader rebalance failed'))
        .finally(() => this.scheduleRebalanceCheck())
    }, settings.intervalMs)
  }

  private get mayCampaign(): boolean {
    return !this.stopped && !this.leaseLost
  }

  private campaignAgain(attempt: number): void {
    this.retryTimer = null
    if (!this.mayCampaign) return
    this.campaign().then(
      () => this.scheduleCampaign(1),
      (error: unknown) => {
        if (!this.mayCampaign) return
        this.options.logger.warn({ err: error, attempt }, 'controller campaign failed; retrying')
        this.scheduleCampaign(attempt + 1)
      },
    )
  }

  private scheduleCampaign(attempt: number): void {
    if (!this.mayCampaign) return
    this.retryTimer = this.options.clock.setTimeout(
      () => this.campaignAgain(attempt),
      RETRY_BACKOFF.delayMs(attempt),
    )
  }

  private async campaign(): Promise<void> {
    const { store, lease, nodeId, logger } = this.options
    // With the same lease a campaign takes over its own key and place in line, also one a
    // failed attempt left behind (written by the store, but the answer never came).
    const leadership = await store.campaign(CONTROLLER_ELECTION, String(nodeId), lease)
    if (!this.mayCampaign) {
      await leadership.resign()
      return
    }
    let leading = true
    void leadership.lost.then(() => {
      leading = false
    })
    this.leadership = leadership
    try {
      await this.announce(() => leading)
      logger.info({ nodeId }, 'became controller')
      this.pending = null
      this.scheduleReconcile()
      await leadership.lost
    } catch (error) {
      // Give the place up, so another broker can lead while this one cannot.
      await leadership.resign().catch((resignError: unknown) => {
        logger.debug({ err: resignError }, 'resigning after a failed announcement failed')
      })
      throw error
    } finally {
      if (this.leadership === leadership) this.leadership = null
    }
    if (this.mayCampaign) logger.warn({ nodeId }, 'lost controller leadership')
  }

  /** Names this broker in the controller key, retrying while the store is unavailable. */
  private async announce(isLeading: () => boolean): Promise<void> {
    const { store, lease, nodeId } = this.options
    const value = JSON.stringify({ nodeId })
    for (let attempt = 1; ; attempt++) {
      try {
        await store.txn([], [{ type: 'put', key: KEYS.controller, value, lease: lease.id }])
        return
      } catch (error) {
        const retriable = error instanceof MetadataStoreError && error.code === 'STORE_UNAVAILABLE'
        if (!retriable || !isLeading() || !this.mayCampaign) throw error
        await new Promise<void>((resolve) =>
          this.options.clock.setTimeout(resolve, RETRY_BACKOFF.delayMs(attempt)),
        )
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    this.rebalanceTimer?.cancel()
    this.retryTimer?.cancel()
    this.reconcileRetryTimer?.cancel()
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
      if (!this.isActive) {
        this.pending = null
        return
      }
      const scope = this.pending
      this.pending = new Map()
      try {
        await this.reconcile(scope)
      } catch (error) {
        this.pending = null
        // Without a retry a failed write would wait for the next metadata change, which
        // may never come (a dead broker's partitions would stay leaderless).
        this.options.logger.warn({ err: error }, 'controller reconcile failed; retrying')
        this.reconcileRetryTimer?.cancel()
        this.reconcileRetryTimer = this.options.clock.setTimeout(
          () => this.scheduleReconcile(),
          RECONCILE_RETRY_MS,
        )
      }
    })
  }

  private noteChange(delta: ImageDelta): void {
    if (this.pending === null) return
    if (delta.full || delta.brokers || delta.settings) {
      this.pending = null
      return
    }
    for (const [name, indices] of delta.topics) {
      const seen = this.pending.get(name)
      if (indices === null) this.pending.set(name, null)
      else if (seen === undefined) this.pending.set(name, new Set(indices))
      else if (seen !== null) for (const index of indices) seen.add(index)
    }
  }

  /** Elections and reassignment completions where needed, over the partitions of `scope` (null: all). */
  private async reconcile(scope: ReadonlyMap<string, ReadonlySet<number> | null> | null): Promise<void> {
    const decisions: { topic: string; before: PartitionState; result: ElectionResult }[] = []
    // A completed reassignment changes the topic's record with the partition: all of a
    // topic's completions commit in one transaction, so at most this many per round (the
    // next round, after this change, completes the others: a rewritten topic record puts
    // the whole topic in its scope).
    const completionsMax = this.options.store.limits.txnOpsMax - 2
    await this.options.metadata.update((image) => {
      decisions.length = 0
      const completions = new Map<string, number>()
      return this.applyToAll(image, scope, (topic, state, live) => {
        const result = onBrokerChange({
          state,
          live,
          uncleanLeaderElection: this.options.uncleanLeaderElection(image, topic.name),
          minIsr: this.options.minInsyncReplicas?.(image, topic.name),
        })
        if (result) decisions.push({ topic: topic.name, before: state, result })
        const afterElection = result?.state ?? state
        const completed = completions.get(topic.name) ?? 0
        const reassigned = completed < completionsMax ? maybeCompleteReassignment(afterElection, live) : null
        if (reassigned) {
          completions.set(topic.name, completed + 1)
          decisions.push({
            topic: topic.name,
            before: afterElection,
            result: { state: reassigned, unclean: false },
          })
          this.options.logger.info(
            { topic: topic.name, partition: state.partition, replicas: reassigned.replicas },
            'reassignment completed',
          )
        }
        return reassigned ?? result?.state ?? null
      })
    })
    this.report(decisions)
  }

  /** Moves every partition (or those of `only`) to its preferred leader where possible. */
  async electPreferredLeaders(only?: ReadonlySet<string>): Promise<number> {
    let moved = 0
    await this.options.metadata.update((image) => {
      moved = 0
      return this.applyToAll(image, null, (topic, state, live) => {
        if (only && !only.has(`${topic.name}-${state.partition}`)) return null
        const result = electPreferred({ state, live, uncleanLeaderElection: false })
        if (result) moved++
        return result?.state ?? null
      })
    })
    return moved
  }

  /** `image` with `decide` applied to every partition, or to those of `scope` when given. */
  private applyToAll(
    image: ClusterImage,
    scope: ReadonlyMap<string, ReadonlySet<number> | null> | null,
    decide: (topic: TopicImage, state: PartitionState, live: ReadonlySet<BrokerId>) => PartitionState | null,
  ): ClusterImage {
    const live = new Set(image.brokers.keys())
    let changed = false
    const topics = new Map(image.topics)
    // In the image's order (by name, partitions by index), as a walk of every topic decides.
    const inScope =
      scope === null
        ? image.topics.values()
        : [...scope.keys()].sort().flatMap((name) => image.topics.get(name) ?? [])
    for (const topic of inScope) {
      let partitions: PartitionState[] | null = null
      const indices = scope?.get(topic.name)
      const states = indices
        ? [...indices].sort((a, b) => a - b).map((index) => topic.partitions[index])
        : topic.partitions
      for (const state of states) {
        if (state === undefined) continue
        const next = decide(topic, state, live)
        if (!next) continue
        partitions ??= [...topic.partitions]
        partitions[state.partition] = next
      }
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

/**
 * Partitions (as `topic-partition`) whose preferred replica does not lead them, for every
 * broker whose share of such partitions among those it should lead exceeds `percentage`.
 */
export function imbalancedPartitions(image: ClusterImage, percentage: number): Set<string> {
  const preferredCount = new Map<BrokerId, number>()
  const notLed = new Map<BrokerId, string[]>()
  for (const topic of image.topics.values()) {
    for (const state of topic.partitions) {
      const preferred = state.replicas[0]
      preferredCount.set(preferred, (preferredCount.get(preferred) ?? 0) + 1)
      if (state.leader !== preferred)
        notLed.set(preferred, [...(notLed.get(preferred) ?? []), `${topic.name}-${state.partition}`])
    }
  }
  const result = new Set<string>()
  for (const [broker, partitions] of notLed) {
    if (!image.brokers.has(broker)) continue
    const ratio = (partitions.length / (preferredCount.get(broker) ?? 1)) * 100
    if (ratio > percentage) for (const p of partitions) result.add(p)
  }
  return result
}
