/**
 * A check that a store watch still follows the store, whether or not its owner writes.
 *
 * etcd 3.4 before 3.4.31 can leave a watcher unsynced for good (etcd issue 17529): the
 * stream stays open, no error comes, nothing more is delivered. A view that waits for its
 * own write notices (ClusterMetadata's watch check); one that never writes would serve a
 * stale image for ever. etcd's WatchProgressRequest cannot tell here: etcd 3.4.23 answers
 * it at once with the store's revision whether or not the stream's watchers are synced
 * (only 3.4.25 and 3.5.8 made it wait for them, etcd PR 15237), and etcd3 throws on its
 * answer (watch id -1, which names no watcher of its own).
 *
 * So, once per interval, a watch that delivered nothing since the last look is checked:
 * 1. one read of the store's revision (a point read: what an idle broker pays, nothing else);
 *    not past what the watch is known to be complete through: it is fine;
 * 2. else a second watch of the same prefix from the first revision not known complete, on
 *    a stream of its own, for one interval: etcd replays from its history what the watch should have
 *    delivered. If it delivers a revision the watch has still not delivered by the next
 *    look, the watch is stalled; if it delivers nothing, nothing under the prefix changed up
 *    to that read (other prefixes, or another cluster on the same etcd, wrote), and the
 *    watch is complete through it. A replay refused because the revision was compacted
 *    cannot tell either way: the watch is treated as stalled and restarted from a fresh read.
 * A stall is found within about three intervals of the first revision the watch missed.
 */

import { assert } from '../../common/assert.js'
import type { Clock, TimerHandle } from '../../common/clock.js'

/** What the probe reads of the watch it checks. */
export interface ProbedWatch {
  /** One past the last revision delivered (or the revision the watch started from). */
  readonly nextRevision: number
  /** Revisions delivered so far: a change between two looks means the watch is alive. */
  readonly deliveries: number
}

/** A replay opened by the probe; `cancel` may be called after it ended by itself. */
export interface ProbeReplay {
  cancel(): void
}

export interface WatchStallFinding {
  /** A revision under the prefix the replay delivered and the watch did not, or null (compacted). */
  readonly missedRevision: number | null
  readonly nextRevision: number
  /** The store's revision when the replay was opened. */
  readonly storeRevision: number
  readonly reason: 'replay delivered a revision the watch did not' | 'replay start compacted'
}

export interface WatchProbeParts {
  readonly clock: Clock
  readonly intervalMs: number
  /** The store's current revision; a failure skips this look. */
  readonly storeRevision: () => Promise<number>
  /**
   * Watches the same prefix from `fromRevision` on a stream of its own: `onRevision` with
   * each revision delivered, `onCompacted` if etcd refuses the start revision.
   */
  readonly openReplay: (
    fromRevision: number,
    onRevision: (revision: number) => void,
    onCompacted: () => void,
  ) => ProbeReplay
  /** Called once; the probe has stopped. */
  readonly onStall: (finding: WatchStallFinding) => void
  /** A look that failed (store unreachable): nothing is concluded from it. */
  readonly onLookFailed: (err: unknown) => void
}

interface Replay {
  handle: ProbeReplay
  readonly storeRevision: number
  firstRevision: number | null
  compacted: boolean
}

export class WatchProbe {
  private timer: TimerHandle | null = null
  private stopped = false
  /** Every change under the prefix up to this revision has been delivered. */
  private completeThrough: number
  private deliveriesSeen: number
  private replay: Replay | null = null

  constructor(
    private readonly watch: ProbedWatch,
    private readonly parts: WatchProbeParts,
  ) {
    assert(
      Number.isInteger(parts.intervalMs) && parts.intervalMs > 0,
      () => `probe intervalMs ${parts.intervalMs}`,
    )
    this.completeThrough = watch.nextRevision - 1
    this.deliveriesSeen = watch.deliveries
    this.arm()
  }

  stop(): void {
    this.stopped = true
    this.timer?.cancel()
    this.timer = null
    this.endReplay()
  }

  private arm(): void {
    if (this.stopped) return
    this.timer = this.parts.clock.setTimeout(() => {
      this.timer = null
      this.look().then(
        () => this.arm(),
        // look() handles its failures; reaching here is a bug, so crash.
        (bug: unknown) =>
          queueMicrotask(() => {
            throw bug
          }),
      )
    }, this.parts.intervalMs)
  }

  private async look(): Promise<void> {
    if (this.stopped) return
    const delivered = this.watch.deliveries !== this.deliveriesSeen
    this.deliveriesSeen = this.watch.deliveries
    this.completeThrough = Math.max(this.completeThrough, this.watch.nextRevision - 1)
    if (this.replay !== null) {
      this.judgeReplay(delivered)
      return
    }
    if (delivered) return
    let storeRevision: number
    try {
      storeRevision = await this.parts.storeRevision()
    } catch (err) {
      if (!this.stopped) this.parts.onLookFailed(err)
      return
    }
    if (this.stopped || storeRevision <= this.completeThrough) return
    // A delivery while the read was under way: the next look starts over.
    if (this.watch.deliveries !== this.deliveriesSeen) return
    const replay: Replay = {
      handle: { cancel: () => {} },
      storeRevision,
      firstRevision: null,
      compacted: false,
    }
    this.replay = replay
    // Only what is not known complete: a quiet prefix in a busy store replays little each time.
    replay.handle = this.parts.openReplay(
      this.completeThrough + 1,
      (revision) => {
        replay.firstRevision ??= revision
      },
      () => {
        replay.compacted = true
      },
    )
  }

  /** One interval after the replay opened: what it delivered decides. */
  private judgeReplay(delivered: boolean): void {
    const replay = this.replay
    assert(replay !== null, 'a replay to judge')
    this.endReplay()
    const nextRevision = this.watch.nextRevision
    if (replay.firstRevision !== null) {
      if (replay.firstRevision < nextRevision) return // the watch got there meanwhile
      this.stall({
        missedRevision: replay.firstRevision,
        nextRevision,
        storeRevision: replay.storeRevision,
        reason: 'replay delivered a revision the watch did not',
      })
      return
    }
    if (replay.compacted) {
      // The watch delivered past the compaction meanwhile: it is alive; else nothing can tell.
      if (delivered) return
      this.stall({
        missedRevision: null,
        nextRevision,
        storeRevision: replay.storeRevision,
        reason: 'replay start compacted',
      })
      return
    }
    this.completeThrough = Math.max(this.completeThrough, replay.storeRevision)
  }

  private stall(finding: WatchStallFinding): void {
    this.stop()
    this.parts.onStall(finding)
  }

  private endReplay(): void {
    this.replay?.handle.cancel()
    this.replay = null
  }
}

/**
 * One read of the store's revision shared by every probe of a store: a read started less
 * than `maxAgeMs` ago answers them all (a store has several watches, their probes' timers not
 * aligned). An older revision only delays a finding, by at most `maxAgeMs`.
 */
export function sharedRevisionRead(
  read: () => Promise<number>,
  clock: Clock,
  maxAgeMs: number,
): () => Promise<number> {
  let last: { readonly atMs: number; readonly revision: Promise<number> } | null = null
  return () => {
    const nowMs = clock.monotonicMs()
    if (last === null || nowMs - last.atMs >= maxAgeMs) {
      const revision = read()
      last = { atMs: nowMs, revision }
      // A failed read is not shared: the next probe reads again.
      revision.catch(() => {
        if (last?.revision === revision) last = null
      })
    }
    return last.revision
  }
}
