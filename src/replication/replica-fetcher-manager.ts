/**
 * The followers' side of replication for one broker (Kafka's ReplicaFetcherManager): which
 * leader each followed partition is fetched from, one LeaderFetcher per leader broker
 * (replica-fetcher.ts), and one followed partition per topic name and index.
 */

import type { BrokerId } from '../common/types.js'
import type { Partition } from './partition.js'
import { type FetcherSettings, type FetcherStats, keyOf, LeaderFetcher, nameKey } from './replica-fetcher.js'

export class ReplicaFetcherManager {
  private readonly fetchers = new Map<BrokerId, LeaderFetcher>()
  private readonly leaderOf = new Map<string, BrokerId>()
  /** The partition followed under each name and index (see follow). */
  private readonly byName = new Map<string, Partition>()
  readonly stats: FetcherStats = {
    committedOffsetsTruncated: 0,
    fetchRequests: 0,
    fetchPartitionsSent: 0,
    fullFetches: 0,
    pollsCut: 0,
    sessionsRefused: 0,
    firstFetches: 0,
    firstFetchWaitMsTotal: 0,
    firstFetchWaitMsMax: 0,
  }

  constructor(private readonly settings: FetcherSettings) {}

  /** Follows `partition` from `leaderId` at `leaderEpoch`; a change restarts with truncation. */
  follow(partition: Partition, leaderId: BrokerId, leaderEpoch: number): void {
    const key = keyOf(partition)
    const current = this.leaderOf.get(key)
    if (current === leaderId && this.fetchers.get(leaderId)?.isFollowing(key, leaderEpoch)) return
    this.unfollow(partition)
    // One partition per name and index: a replica of the topic the name had before (deleted
    // and created again) is not fetched alongside the new one. The replica manager unfollows
    // it first (retired or removed); this keeps OffsetForLeaderEpoch and ListOffsets, which
    // name topics, from meaning two partitions if it ever did not.
    const named = nameKey(partition.topic, partition.partition)
    const other = this.byName.get(named)
    if (other !== undefined && other !== partition) {
      this.settings.logger.warn(
        {
          topic: partition.topic,
          partition: partition.partition,
          old: other.id.topicId,
          new: partition.id.topicId,
        },
        "following a re-created topic's partition while the old one was still followed: dropping the old one",
      )
      this.unfollow(other)
    }
    this.byName.set(named, partition)
    let fetcher = this.fetchers.get(leaderId)
    if (!fetcher) {
      fetcher = new LeaderFetcher(leaderId, this.settings, this.stats, () => this.fetchers.delete(leaderId))
      this.fetchers.set(leaderId, fetcher)
    }
    this.leaderOf.set(key, leaderId)
    fetcher.add(key, {
      partition,
      leaderEpoch,
      truncated: false,
      backoffUntilMs: 0,
      addedMs: this.settings.clock.monotonicMs(),
    })
  }

  unfollow(partition: Partition): void {
    const key = keyOf(partition)
    const leaderId = this.leaderOf.get(key)
    if (leaderId === undefined) return
    this.leaderOf.delete(key)
    const named = nameKey(partition.topic, partition.partition)
    if (this.byName.get(named) === partition) this.byName.delete(named)
    this.fetchers.get(leaderId)?.remove(key)
  }

  /** The next round of `partition`'s fetcher looks at it (its log changed outside the fetcher). */
  touch(partition: Partition): void {
    const key = keyOf(partition)
    const leaderId = this.leaderOf.get(key)
    if (leaderId !== undefined) this.fetchers.get(leaderId)?.touch(key)
  }

  shutdown(): void {
    for (const fetcher of this.fetchers.values()) fetcher.stop()
    this.fetchers.clear()
    this.leaderOf.clear()
    this.byName.clear()
  }
}
