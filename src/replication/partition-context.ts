/**
 * What a Partition is given by its replica manager (its broker's identity, fencing, clock
 * and metadata views) and the ISR changes it proposes through it.
 */
import type { BrokerId, PartitionEpoch } from '../common/types.js'

/** A proposed ISR change, applied by compare-and-set on the partition state's epoch. */
export interface IsrProposal {
  readonly topic: string
  /**
   * The topic the proposing replica belongs to: a replica of a deleted topic, not yet
   * retired, must not change the ISR of a new topic of the same name, whose partition and
   * leader epochs start where the old one's may still be.
   */
  readonly topicId: string
  readonly partition: number
  readonly leaderEpoch: number
  readonly partitionEpoch: PartitionEpoch
  readonly isr: readonly BrokerId[]
  /** The proposing leader's broker epoch (-1: unknown): an older incarnation's proposal is refused. */
  readonly brokerEpoch: number
  /**
   * The broker epochs of the members the proposal adds, as their fetches carried them
   * (KIP-903; -1: a fetch without one): refused unless still their registrations' epochs.
   */
  readonly addedMembers: readonly { readonly brokerId: BrokerId; readonly brokerEpoch: number }[]
}

export interface PartitionContext {
  readonly localBrokerId: BrokerId
  /** True while this broker has no metadata-store session: it must not act as leader. */
  readonly isFenced: () => boolean
  readonly nowMs: () => number
  /** Writes an ISR change; resolves true when committed. */
  readonly alterIsr: (proposal: IsrProposal) => Promise<boolean>
  /**
   * Whether a broker is registered in the metadata (holds a store session). A follower that
   * is not stays out of the ISR however caught up: the controller takes unregistered
   * brokers out of ISRs, and adding it back looped (Kafka's KIP-841 ineligible replicas).
   * Absent: every replica is eligible.
   */
  readonly isRegistered?: (brokerId: BrokerId) => boolean
  /**
   * A registered broker's epoch in the metadata (undefined: not registered, -1: unknown).
   * A follower's fetch with an older epoch comes from a fenced incarnation. Absent: no
   * broker-epoch checks.
   */
  readonly brokerEpochOf?: (brokerId: BrokerId) => number | undefined
  /** This broker's own epoch, from its registration (-1 while unregistered). Absent: -1. */
  readonly localBrokerEpoch?: () => number
  /** The topic's min.insync.replicas (KIP-966: no HW advance below it). Absent: 1. */
  readonly minInsyncReplicas?: (topic: string) => number
  /**
   * A follower's log was cut by something other than its fetcher (a corrupt batch met by a
   * read): its fetcher, which looks only at partitions with news, must send the new position.
   */
  readonly onFollowerLogCut?: (topic: string, partition: number) => void
}
