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
 * answer. The cost is one small write per applied image that changes what this broker leads:
 * an image that changes nothing it leads (its own write's, for one) writes nothing.
 */
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

export class LeadershipRecord {
  /** What the store holds, encoded; null until the first write succeeded. */
  private written: string | null = null
  private wanted: { encoded: string; leaderEpochs: ReadonlyMap<string, number> } | null = null
  private writing = false
  private failures = 0
  private retry: TimerHandle | null = null
  private closed = false

  constructor(private readonly options: LeadershipRecordOptions) {}

  /**
   * After each applied image: the leader epochs this broker now serves, by servedKey. Writes
   * coalesce: while one is in flight only the latest wanted state is kept.
   */
  onApplied(leaderEpochs: ReadonlyMap<string, number>): void {
    const sorted = [...leaderEpochs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    this.wanted = { encoded: JSON.stringify(sorted), leaderEpochs: new Map(sorted) }
    this.maybeWrite()
  }

  close(): void {
    this.closed = true
    this.retry?.cancel()
    this.retry = null
  }

  private maybeWrite(): void {
    const wanted = this.wanted
    if (this.closed || this.writing || this.retry !== null || wanted === null) return
    if (wanted.encoded === this.written) return
    this.writing = true
    this.options.metadata.recordServed(this.options.nodeId, wanted.leaderEpochs).then(
      () => {
        this.writing = false
        this.failures = 0
        this.written = wanted.encoded
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
