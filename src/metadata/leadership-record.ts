/**
 * A broker's record, in the metadata store, of the partitions it serves as leader and in
 * which leader epoch (ClusterImage.servedLeaderEpochs). A partition state naming a leader
 * is written by the controller before that leader has created the log and taken the role;
 * until it has, the leader answers UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER. With
 * this record, CreateTopics can answer once the new partitions are served, and Metadata can
 * answer LEADER_NOT_AVAILABLE until then, as Kafka does for new topics.
 *
 * Why the store rather than asking each leader over the inter-broker client: every broker
 * already follows the store, so the handling broker learns readiness from its own image,
 * on the image change itself (no polling, connections or timeouts of its own), and so do
 * later Metadata requests to any broker, which a one-off question to the leader could not
 * answer. The cost is one write of this broker's whole record per change of what it leads,
 * coalesced: an image that changes nothing it leads (its own write's, for one) writes nothing;
 * while one write is in flight only the latest state waits; and while later images are still
 * queued to be applied the record waits for them (see onImageQueued). One logical change the
 * controller had to cut into many store transactions (an election over thousands of
 * partitions: 24 at 3,000) reaches the other brokers as as many images, and rewriting the
 * record after each was 24 writes of every leadership per surviving broker.
 */
import { assert } from '../common/assert.js'
import { ExponentialBackoff } from '../common/backoff.js'
import type { Clock, TimerHandle } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import type { BrokerId } from './cluster-image.js'

export interface LeadershipRecordOptions {
  readonly nodeId: BrokerId
  readonly metadata: {
    recordServed(nodeId: BrokerId, leaderEpochs: ReadonlyMap<string, number>): Promise<void>
  }
  readonly clock: Clock
  readonly logger: Logger
}

/** Retries of a failed write: the record must not stay stale while the store recovers. */
const RETRY_BACKOFF = new ExponentialBackoff({ initialMs: 100, maxMs: 5000 })
/**
 * How long later images may hold the record back: a broker that never drains its queue (a
 * stream of ISR changes under load), or whose next image is a creation of thousands of logs
 * taking seconds, must still publish what it already leads (CreateTopics waits for it).
 */
export const SERVED_DEFER_MAX_MS = 1000

export class LeadershipRecord {
  /** What the store holds; null until the first write succeeded. */
  private written: ReadonlyMap<string, number> | null = null
  private wanted: ReadonlyMap<string, number> | null = null
  private writing = false
  private failures = 0
  private retry: TimerHandle | null = null
  private closed = false
  /** Images handed to the replica manager and not yet settled (applied or failed). */
  private imagesQueued = 0
  /** Set while an applied image's state is held back for later ones: writes it when due. */
  private deferTimer: TimerHandle | null = null
  /** How to read what is served now, from the last settled image. */
  private served: (() => ReadonlyMap<string, number>) | null = null

  constructor(private readonly options: LeadershipRecordOptions) {}

  /** An image was queued to be applied: the record waits for it (onImageSettled). */
  onImageQueued(): void {
    this.imagesQueued++
  }

  /**
   * An image queued with onImageQueued was applied, or failed to be (its partitions that
   * were applied are served all the same). `served` is asked only when the record is to be
   * written: once no later image is queued, or SERVED_DEFER_MAX_MS after the state was first
   * held back (what is served then: the images applied so far, one of them maybe in part).
   */
  onImageSettled(served: () => ReadonlyMap<string, number>): void {
    assert(this.imagesQueued > 0, 'an image settled that was not queued')
    this.imagesQueued--
    this.served = served
    if (this.imagesQueued === 0) {
      this.onApplied(served())
      return
    }
    this.deferTimer ??= this.options.clock.setTimeout(() => {
      this.deferTimer = null
      if (!this.closed && this.served !== null) this.onApplied(this.served())
    }, SERVED_DEFER_MAX_MS)
  }

  /**
   * The leader epochs this broker now serves, by servedKey (after applied images, or when it
   * holds a store session again), a map the caller no longer changes. Writes coalesce: while
   * one is in flight only the latest wanted state is kept.
   */
  onApplied(leaderEpochs: ReadonlyMap<string, number>): void {
    this.deferTimer?.cancel()
    this.deferTimer = null
    this.wanted = leaderEpochs
    this.maybeWrite()
  }

  close(): void {
    this.closed = true
    this.retry?.cancel()
    this.retry = null
    this.deferTimer?.cancel()
    this.deferTimer = null
  }

  private maybeWrite(): void {
    const wanted = this.wanted
    if (this.closed || this.writing || this.retry !== null || wanted === null) return
    if (this.written !== null && sameEntries(wanted, this.written)) return
    this.writing = true
    this.options.metadata.recordServed(this.options.nodeId, wanted).then(
      () => {
        this.writing = false
        this.failures = 0
        this.written = wanted
        this.maybeWrite()
      },
      (error: unknown) => {
        this.writing = false
        this.failures++
        if (this.closed) return
        const delayMs = RETRY_BACKOFF.delayMs(this.failures)
        this.options.logger.warn({ err: error, delayMs }, 'recording served leaderships failed; retrying')
        this.retry = this.options.clock.setTimeout(() => {
          this.retry = null
          this.maybeWrite()
        }, delayMs)
      },
    )
  }
}

/** Compared without encoding: sorting and stringifying thousands of keys per image cost more. */
function sameEntries(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): boolean {
  if (a === b) return true
  if (a.size !== b.size) return false
  for (const [key, epoch] of a) if (b.get(key) !== epoch) return false
  return true
}
