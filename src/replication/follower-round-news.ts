/**
 * The follower's side of an idle round (issue 38): which followed partitions a replica
 * fetcher's next round must look at again, so that a round in which nothing happened costs
 * O(partitions with news), not O(partitions followed) (readyPartitions walked every
 * followed partition twice a second per leader: the largest item of an idle broker's
 * profile at 10,000 partitions RF 3).
 *
 * What a round sends for a partition (its fetch position, log start, leader epoch) changes
 * only when the fetcher itself acts on it, and each such act names the partition here: it
 * was added or removed, the leader answered for it (records appended, an error backing it
 * off, an out-of-range offset truncating it), its truncation finished, or its backoff ended.
 * What moves a follower's log outside the fetcher (retention moving the log start, a
 * corrupt batch cut by a read) is caught by a full pass every `sweepIntervalMs`, as the
 * leader's session sweep (follower-session-news.ts) catches what it does not watch.
 */
import { assert } from '../common/assert.js'
import { FULL_SWEEP_INTERVAL_MS } from './follower-session-news.js'

/** What the bookkeeping reads of the fetcher's followed partition. */
export interface RoundPartition {
  readonly truncated: boolean
  readonly backoffUntilMs: number
  /** The backoff is the short one of a leader catching up: its end cuts a long poll short. */
  readonly shortBackoff?: boolean
}

export class FollowerRoundNews<F extends RoundPartition> {
  /** Keys the next round looks at (added, removed, answered, truncated, backoff ended). */
  private readonly pending = new Set<string>()
  /** Partitions whose backoff had not ended when a round last looked at them. */
  private readonly backingOff = new Map<string, F>()
  /** Partitions added and not truncated yet (KIP-101/279), by key. */
  private readonly untruncated = new Map<string, F>()
  private lastSweepMs: number

  constructor(
    nowMs: number,
    private readonly sweepIntervalMs = FULL_SWEEP_INTERVAL_MS,
  ) {
    assert(sweepIntervalMs > 0, 'a sweep interval is positive')
    this.lastSweepMs = nowMs
  }

  /** A partition followed (again, in a new leader epoch): truncated first, then fetched. */
  added(key: string, followed: F): void {
    this.pending.add(key)
    if (!followed.truncated) this.untruncated.set(key, followed)
  }

  /** Something the next round sends for `key` may differ: unfollowed, answered, truncated. */
  touched(key: string): void {
    this.pending.add(key)
  }

  /** `key` backs off: the next round leaves it out of the fetch, the round after its end takes it back. */
  backedOff(key: string, followed: F): void {
    this.pending.add(key)
    this.backingOff.set(key, followed)
  }

  /** The partitions waiting for their truncation, `isFollowed` telling those still followed. */
  waitingForTruncation(isFollowed: (key: string, followed: F) => boolean): F[] {
    const waiting: F[] = []
    for (const [key, followed] of this.untruncated) {
      if (!isFollowed(key, followed)) this.untruncated.delete(key)
      else if (followed.truncated) this.afterTruncation(key)
      else waiting.push(followed)
    }
    return waiting
  }

  /** Call after a truncation pass: each partition it finished is fetched from the next round. */
  truncationsDone(): void {
    for (const [key, followed] of this.untruncated) if (followed.truncated) this.afterTruncation(key)
  }

  /**
   * How long until the first short backoff ends, or undefined when none is pending. One
   * millisecond is added because a timer may fire a fraction of a millisecond before the
   * monotonic clock reaches its deadline: a wake-up that found the partition still backing
   * off would start a long poll without it, and the partition would wait that poll out
   * (replica.fetch.wait.max.ms) while the leader takes writes for it.
   */
  shortBackoffRemainingMs(nowMs: number): number | undefined {
    let earliest = Number.POSITIVE_INFINITY
    for (const f of this.backingOff.values())
      if (f.shortBackoff === true && f.backoffUntilMs > nowMs) earliest = Math.min(earliest, f.backoffUntilMs)
    return earliest === Number.POSITIVE_INFINITY ? undefined : Math.ceil(earliest - nowMs) + 1
  }

  /**
   * The keys the round at `nowMs` must look at, `all` on a sweep; each is looked at once,
   * then forgotten until touched again. Backoffs ended by now are among them.
   */
  take(nowMs: number, all: Iterable<string>): string[] {
    for (const [key, followed] of this.backingOff) {
      if (followed.backoffUntilMs > nowMs) continue
      this.backingOff.delete(key)
      this.pending.add(key)
    }
    if (nowMs - this.lastSweepMs >= this.sweepIntervalMs) {
      this.lastSweepMs = nowMs
      for (const key of all) this.pending.add(key)
    }
    const keys = [...this.pending]
    this.pending.clear()
    return keys
  }

  private afterTruncation(key: string): void {
    this.untruncated.delete(key)
    this.pending.add(key)
  }
}
