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
 * answer. The cost is a write per applied image that changes what this broker leads, of the
 * ranges that changed: an image that changes nothing it leads (its own write's, for one)
 * writes nothing.
 *
 * Why ranges (`served/<id>/<topicId>/<range>`, metadata-keys.ts) rather than one key: the one
 * key was rewritten whole after each image, and a failover the controller writes in 79
 * transactions at 10,000 partitions made each survivor write ~160 KB 79 times; a broker
 * leading more than ~48,000 partitions could not write it at all (etcd's 1.5 MiB request).
 * A write of several ranges may take several transactions (packTxns): each range is whole
 * in itself, and a range not yet rewritten only holds leaderships the broker had at an
 * earlier image, which a reader's image as recent as the write already names elsewhere or
 * at a later epoch; a reader may see "not served yet" a moment longer, never a partition
 * served that is not.
 */
import { ExponentialBackoff } from '../common/backoff.js'
import type { Clock, TimerHandle } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import type { BrokerId, ServedRange, ServedRecord } from './cluster-image.js'
import { encodeServedRange, KEYS } from './metadata-keys.js'
import type { StoreOp } from './store/metadata-store.js'

export interface LeadershipRecordOptions {
  readonly nodeId: BrokerId
  readonly metadata: ServedRecordStore
  readonly clock: Clock
  readonly logger: Logger
}

/** The store side of a leadership record (ClusterMetadata). */
export interface ServedRecordStore {
  /** The keys of `nodeId`'s record in the store and their ranges (null: the whole-record key of before the split). */
  readServed(nodeId: BrokerId): Promise<Map<string, ServedRange | null>>
  /** Applies independent puts and deletes of served keys, in as few transactions as the store allows. */
  writeServed(ops: readonly StoreOp[]): Promise<void>
}

/** Retries of a failed write: the record must not stay stale while the store recovers. */
const RETRY_BACKOFF = new ExponentialBackoff({ initialMs: 100, maxMs: 5000 })

export class LeadershipRecord {
  /**
   * What the store holds of this broker's record, by key; null until read (at start, and
   * after a failed write, which may have applied part of its transactions).
   */
  private written: Map<string, ServedRange | null> | null = null
  private wanted: ServedRecord | null = null
  private writing = false
  private failures = 0
  private retry: TimerHandle | null = null
  private closed = false

  constructor(private readonly options: LeadershipRecordOptions) {}

  /**
   * After each applied image: the leader epochs this broker now serves. Writes coalesce:
   * while one is in flight only the latest wanted state is kept.
   */
  onApplied(record: ServedRecord): void {
    this.wanted = record
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
    this.writing = true
    this.write(wanted).then(
      () => {
        this.writing = false
        this.failures = 0
        this.maybeWrite()
      },
      (error: unknown) => {
        this.writing = false
        this.written = null
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

  private async write(wanted: ServedRecord): Promise<void> {
    const { nodeId, metadata } = this.options
    this.written ??= await metadata.readServed(nodeId)
    const { ops, next } = servedRecordOps(nodeId, wanted, this.written)
    if (ops.length > 0) await metadata.writeServed(ops)
    this.written = next
    if (this.wanted === wanted) this.wanted = null
  }
}

/**
 * The store ops turning `written` (keys of `nodeId`'s record) into `wanted`: a put of each
 * range whose content changed, a delete of each key no longer wanted; and what the store
 * then holds.
 */
export function servedRecordOps(
  nodeId: BrokerId,
  wanted: ServedRecord,
  written: ReadonlyMap<string, ServedRange | null>,
): { ops: StoreOp[]; next: Map<string, ServedRange | null> } {
  const ops: StoreOp[] = []
  const next = new Map<string, ServedRange>()
  for (const [topicId, ranges] of wanted)
    for (const [rangeIndex, range] of ranges) {
      if (range.size === 0) continue
      const key = KEYS.servedRange(nodeId, topicId, rangeIndex)
      next.set(key, range)
      if (!sameRange(written.get(key), range)) ops.push({ type: 'put', key, value: encodeServedRange(range) })
    }
  for (const key of written.keys()) if (!next.has(key)) ops.push({ type: 'delete', key })
  return { ops, next }
}

function sameRange(a: ServedRange | null | undefined, b: ServedRange): boolean {
  if (a === b) return true
  if (a === null || a === undefined || a.size !== b.size) return false
  for (const [partition, epoch] of b) if (a.get(partition) !== epoch) return false
  return true
}
