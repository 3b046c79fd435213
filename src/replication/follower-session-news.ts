/**
 * The leader's side of a follower's incremental fetch session (KIP-227 for followers, issue
 * 38): which session partitions may have news, so that an idle follower's round trip costs
 * the leader O(partitions with news), not O(session partitions).
 *
 * A session partition is "clean" once a fetch found it unchanged (the follower at the log
 * end, nothing new to answer, the follower in the ISR). A clean partition is watched (log
 * end, high watermark, leadership): any such event makes it dirty again, and every dirty one
 * is considered by the next fetch. A clean partition's follower state is linked to the
 * session's clock, the time of the session's last fetch: every fetch of the session is one
 * in which each clean partition was caught up (its fetch offset was the log end, or it would
 * be dirty), so Kafka's lastCaughtUpTimeMs of a linked partition is the clock's time. A dirty
 * partition keeps the link until a fetch considers it, and that fetch folds the clock's time
 * (taken while the partition was still clean) into the follower state before it moves the
 * clock. So a follower that stops fetching, or falls behind on one partition, leaves the ISR
 * after replica.lag.time.max.ms exactly as before; a session closed (evicted, re-created)
 * stops its clock, so its partitions' caught-up time stays at its last fetch.
 *
 * Events tidelog does not watch (a log start moved by retention, a broker registration) are
 * caught by a full pass over the session every FULL_SWEEP_INTERVAL_MS.
 */
import { assert } from '../common/assert.js'
import type { BrokerId } from '../common/types.js'

/** What the bookkeeping needs of a Partition (partition.ts imports this module). */
export interface WatchedPartition {
  readonly isLeader: boolean
  readonly leaderEpoch: number
  watchLogEnd(watcher: () => void): () => void
  watchHighWatermark(watcher: () => void): () => void
  isFollowerInIsr(replicaId: BrokerId): boolean
  followerTimes(replicaId: BrokerId): FollowerTimes | undefined
}

/** How often every session partition is considered again, whatever the events said. */
export const FULL_SWEEP_INTERVAL_MS = 10000

/** The time of a follower session's last fetch, shared by every partition linked to it. */
export interface SessionClock {
  lastFetchMs: number
  /** False once the session is gone: the time no longer moves. */
  open: boolean
}

interface Entry<T> {
  readonly key: string
  target: T
  /** The partition whose events are watched, while the entry is clean or was. */
  partition: WatchedPartition | null
  unwatch: (() => void) | null
  /** The partition's leader epoch when a fetch last found the entry unchanged. */
  leaderEpoch: number
}

export class FollowerSessionNews<T> {
  readonly clock: SessionClock
  private readonly entries = new Map<string, Entry<T>>()
  private readonly byTarget = new Map<T, Entry<T>>()
  private readonly dirty = new Set<Entry<T>>()
  private lastSweepMs: number
  /** Set while a fetch of this session waits: an append to a clean partition ends the wait. */
  private waker: (() => void) | null = null

  constructor(
    readonly replicaId: BrokerId,
    nowMs: number,
    private readonly sweepIntervalMs = FULL_SWEEP_INTERVAL_MS,
  ) {
    this.clock = { lastFetchMs: nowMs, open: true }
    this.lastSweepMs = nowMs
  }

  get size(): number {
    return this.entries.size
  }

  get dirtyCount(): number {
    return this.dirty.size
  }

  /** Adds a session partition, or replaces its target (a new fetch position): it is dirty. */
  set(key: string, target: T): void {
    let entry = this.entries.get(key)
    if (entry === undefined) {
      entry = { key, target, partition: null, unwatch: null, leaderEpoch: -1 }
      this.entries.set(key, entry)
    } else {
      this.byTarget.delete(entry.target)
      entry.target = target
    }
    this.byTarget.set(target, entry)
    this.dirty.add(entry)
  }

  /** A partition the follower forgot: its follower state no longer follows the clock. */
  delete(key: string): void {
    const entry = this.entries.get(key)
    if (entry === undefined) return
    this.unbind(entry)
    this.entries.delete(key)
    this.byTarget.delete(entry.target)
    this.dirty.delete(entry)
  }

  /** The targets a fetch must consider now: the dirty ones, or all of them on a sweep. */
  candidates(nowMs: number): T[] {
    if (nowMs - this.lastSweepMs >= this.sweepIntervalMs) {
      this.lastSweepMs = nowMs
      for (const entry of this.entries.values()) this.dirty.add(entry)
    }
    return this.dirtyTargets()
  }

  /** The dirty targets, without a sweep: what a fetch answers after its wait. */
  dirtyTargets(): T[] {
    const targets: T[] = []
    for (const entry of this.dirty) targets.push(entry.target)
    return targets
  }

  /**
   * A fetch found `target` unchanged on `partition` (the follower caught up, nothing to
   * answer): it turns clean, watched, and linked to the session's clock.
   */
  onUnchanged(target: T, partition: WatchedPartition): void {
    const entry = this.byTarget.get(target)
    if (entry === undefined || !this.clock.open) return
    if (!partition.isFollowerInIsr(this.replicaId)) return
    if (entry.partition !== partition) {
      this.unbind(entry)
      entry.partition = partition
      const onAppend = partition.watchLogEnd(() => this.onEvent(entry, true))
      // A new leadership (epoch) ends a waiting fetch, as its own watch of the partition would.
      const onHighWatermark = partition.watchHighWatermark(() =>
        this.onEvent(entry, !partition.isLeader || partition.leaderEpoch !== entry.leaderEpoch),
      )
      entry.unwatch = () => {
        onAppend()
        onHighWatermark()
      }
    }
    const times = partition.followerTimes(this.replicaId)
    if (times !== undefined && times.session !== this.clock) {
      foldSession(times)
      times.session = this.clock
    }
    entry.leaderEpoch = partition.leaderEpoch
    this.dirty.delete(entry)
  }

  /**
   * Whether a fetch found `target` unchanged and nothing happened to it since: its events
   * wake a waiting fetch through `watch`, which needs no watch of its own on it.
   */
  isClean(target: T): boolean {
    const entry = this.byTarget.get(target)
    return entry !== undefined && entry.partition !== null && !this.dirty.has(entry)
  }

  /**
   * The session's fetch at `nowMs` considered every dirty partition: each clean one was
   * caught up in it. Call after the candidates' follower states were recorded.
   */
  onFetched(nowMs: number): void {
    if (!this.clock.open) return
    assert(nowMs >= this.clock.lastFetchMs, 'a session clock never goes back')
    this.clock.lastFetchMs = nowMs
  }

  /** While a fetch waits: `wake` is called when a clean partition gets records or loses its leader. */
  watch(wake: () => void): () => void {
    this.waker = wake
    return () => {
      if (this.waker === wake) this.waker = null
    }
  }

  /** The session is gone (evicted, closed, re-created): its clock stops and nothing is watched. */
  close(): void {
    this.clock.open = false
    for (const entry of this.entries.values()) entry.unwatch?.()
    this.entries.clear()
    this.byTarget.clear()
    this.dirty.clear()
    this.waker = null
  }

  private onEvent(entry: Entry<T>, wakes: boolean): void {
    this.dirty.add(entry)
    if (wakes) this.waker?.()
  }

  private unbind(entry: Entry<T>): void {
    entry.unwatch?.()
    entry.unwatch = null
    // The partition no longer follows this session's clock: caught up as of its last fetch.
    const times = entry.partition?.followerTimes(this.replicaId)
    if (times?.session === this.clock) foldSession(times)
    entry.partition = null
  }
}

/** What a leader keeps of a follower that a session clock may stand in for. */
export interface FollowerTimes {
  lastCaughtUpTimeMs: number
  lastFetchTimeMs: number
  session?: SessionClock | undefined
}

/** A follower's caught-up time, its session's last fetch included while linked to one. */
export function caughtUpTimeMs(follower: FollowerTimes): number {
  const session = follower.session
  return session === undefined
    ? follower.lastCaughtUpTimeMs
    : Math.max(follower.lastCaughtUpTimeMs, session.lastFetchMs)
}

/**
 * Takes the session's time into the follower's own state and ends the link: the partition
 * was caught up, and fetched, at the session's last fetch.
 */
export function foldSession(follower: FollowerTimes): void {
  const session = follower.session
  if (session === undefined) return
  follower.lastCaughtUpTimeMs = Math.max(follower.lastCaughtUpTimeMs, session.lastFetchMs)
  follower.lastFetchTimeMs = Math.max(follower.lastFetchTimeMs, session.lastFetchMs)
  follower.session = undefined
}
