/**
 * The share-partitions of this broker (Kafka's SharePartitionManager): one SharePartition per
 * (share group, topic id, partition) this broker leads, made on the group's first fetch of
 * it, and the share sessions of the consumers fetching here.
 *
 * A share-partition starts at its group's `share.auto.offset.reset`: the high watermark
 * (latest, Kafka's default) or the log start offset (earliest). Its locks last the group's
 * `share.record.lock.duration.ms`, read at each acquisition. Both are group configs
 * (server/group-configs.ts) whose defaults are the broker's. It belongs to one leader epoch: when the
 * partition's leadership moves or its epoch changes, it is closed and a later fetch starts
 * a new one. Its state is in memory only (not yet in `__share_group_state`), so records
 * acquired but not acknowledged before a leader change are delivered again by the new
 * leader from the reset point; acknowledged ones too. README "Not done yet" says so.
 */
import type { Clock } from '../../common/clock.js'
import { BatchHeader, LOG_OVERHEAD } from '../../protocol/batch-header.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { toErrorCode } from '../../replication/kafka-error.js'
import type { Partition } from '../../replication/partition.js'
import {
  type AcknowledgementBatch,
  type AcquiredRange,
  type AcquireMode,
  type FetchedBatch,
  SharePartition,
  type SharePartitionConfig,
} from './share-partition.js'
import { type ShareSession, ShareSessionCache } from './share-session-cache.js'

export type ShareAutoOffsetReset = 'latest' | 'earliest'

export interface SharePartitionManagerConfig extends SharePartitionConfig {
  /** The broker's share.auto.offset.reset, for groups that set none. */
  readonly autoOffsetReset: ShareAutoOffsetReset
}

/** A share group's own settings (its group configs); absent ones are the broker's. */
export interface ShareGroupOverrides {
  readonly autoOffsetReset?: ShareAutoOffsetReset
  readonly recordLockDurationMs?: number
}

/** A share-partition's place: the topic's name and id and the partition index. */
export interface ShareTopicPartition {
  readonly topic: string
  readonly topicId: string
  readonly partition: number
}

export interface ShareAcquireResult {
  readonly errorCode: number
  /** Whole batches holding the acquired records (the client skips the others' records). */
  readonly records: Buffer[]
  readonly acquired: AcquiredRange[]
}

/** A share-partition's state as DescribeShareGroupOffsets shows it (ReadShareGroupStateSummary). */
export interface ShareStateSummary {
  readonly errorCode: number
  /** SPSO, or -1 when the group has no state on the partition here. */
  readonly startOffset: number
  readonly leaderEpoch: number
  readonly deliveryCompleteCount: number
  readonly highWatermark: number
}

const NO_STATE: ShareStateSummary = {
  errorCode: ErrorCode.NONE,
  startOffset: -1,
  leaderEpoch: -1,
  deliveryCompleteCount: -1,
  highWatermark: -1,
}

interface Hosted {
  readonly sharePartition: SharePartition
  readonly tp: ShareTopicPartition
  readonly leaderEpoch: number
}

const NOTHING: ShareAcquireResult = { errorCode: ErrorCode.NONE, records: [], acquired: [] }

export class SharePartitionManager {
  readonly sessions = new ShareSessionCache()
  private readonly hosted = new Map<string, Hosted>()

  constructor(
    readonly config: SharePartitionManagerConfig,
    private readonly clock: Clock,
    private readonly replicaManager: {
      getPartition(topic: string, partition: number): Partition | undefined
    },
    /** The group configs of a share group, read when they apply (they change at any time). */
    private readonly groupOverrides: (groupId: string) => ShareGroupOverrides = () => ({}),
  ) {}

  /** How long `groupId`'s share consumers hold what they acquire (ShareFetch's acquisitionLockTimeoutMs). */
  recordLockDurationMs(groupId: string): number {
    return this.groupOverrides(groupId).recordLockDurationMs ?? this.config.recordLockDurationMs
  }

  /** How many share-partitions are open here (metrics, tests). */
  get size(): number {
    return this.hosted.size
  }

  /** The group's share-partition on `tp`, made now if need be, or why there is none here. */
  sharePartition(
    groupId: string,
    tp: ShareTopicPartition,
  ): { partition: Partition; share: SharePartition } | number {
    const partition = this.replicaManager.getPartition(tp.topic, tp.partition)
    if (!partition?.isLeader || partition.id.topicId !== tp.topicId) return ErrorCode.NOT_LEADER_OR_FOLLOWER
    const key = keyOf(groupId, tp)
    const existing = this.hosted.get(key)
    if (existing && existing.leaderEpoch === partition.leaderEpoch)
      return { partition, share: existing.sharePartition }
    existing?.sharePartition.close()
    const reset = this.groupOverrides(groupId).autoOffsetReset ?? this.config.autoOffsetReset
    const startOffset = reset === 'earliest' ? partition.log.logStartOffset : partition.highWatermark
    const manager = this
    const config: SharePartitionConfig = {
      deliveryCountLimit: this.config.deliveryCountLimit,
      maxInFlightRecords: this.config.maxInFlightRecords,
      get recordLockDurationMs() {
        return manager.recordLockDurationMs(groupId)
      },
    }
    const share = new SharePartition(config, this.clock, startOffset)
    this.hosted.set(key, { sharePartition: share, tp, leaderEpoch: partition.leaderEpoch })
    return { partition, share }
  }

  /**
   * Reads from the share-partition's next fetch offset up to the high watermark and
   * acquires what `memberId` may take of it (SharePartition.acquire).
   */
  async acquire(
    groupId: string,
    memberId: string,
    tp: ShareTopicPartition,
    limits: { maxRecords: number; maxBytes: number; mode: AcquireMode },
  ): Promise<ShareAcquireResult> {
    const found = this.sharePartition(groupId, tp)
    if (typeof found === 'number') return { ...NOTHING, errorCode: found }
    const { partition, share } = found
    if (!share.canAcquire()) return NOTHING
    const fetchOffset = share.nextFetchOffset()
    if (fetchOffset >= partition.highWatermark) return NOTHING
    let read: Awaited<ReturnType<Partition['read']>>
    try {
      read = await partition.read(fetchOffset, limits.maxBytes, 'read_uncommitted', true)
    } catch (error) {
      const code = toErrorCode(error)
      if (code === null) throw error
      return { ...NOTHING, errorCode: code }
    }
    // Re-checked after the read: leadership may have moved, closing this share-partition.
    const again = this.sharePartition(groupId, tp)
    if (typeof again === 'number') return { ...NOTHING, errorCode: again }
    if (again.share !== share) return NOTHING
    const batches = splitBatches(read.info.records)
    const acquired = share.acquire(memberId, batches, limits.maxRecords, limits.mode)
    if (acquired.length === 0) return NOTHING
    const first = acquired[0].firstOffset
    const last = acquired[acquired.length - 1].lastOffset
    const records = batches.filter((b) => b.lastOffset >= first && b.baseOffset <= last).map((b) => b.bytes)
    return { errorCode: ErrorCode.NONE, records, acquired }
  }

  /** Applies a member's acknowledgements to the group's share-partition on `tp`. */
  acknowledge(
    groupId: string,
    memberId: string,
    tp: ShareTopicPartition,
    batches: readonly AcknowledgementBatch[],
  ): number {
    const found = this.sharePartition(groupId, tp)
    if (typeof found === 'number') return found
    return found.share.acknowledge(memberId, batches)
  }

  /**
   * The group's state on `tp` for DescribeShareGroupOffsets: SPSO, the records done above it
   * and the high watermark (the lag's end). A partition the group never fetched here, or
   * fetched without acknowledging anything yet, has no state: start offset -1, as Kafka
   * answers while nothing was written to the share coordinator.
   */
  stateSummary(groupId: string, tp: ShareTopicPartition): ShareStateSummary {
    const partition = this.ledHere(tp)
    if (typeof partition === 'number') return { ...NO_STATE, errorCode: partition }
    const hosted = this.hosted.get(keyOf(groupId, tp))
    if (!hosted || hosted.leaderEpoch !== partition.leaderEpoch || !hosted.sharePartition.stateWritten)
      return NO_STATE
    return {
      errorCode: ErrorCode.NONE,
      startOffset: hosted.sharePartition.startOffset,
      leaderEpoch: partition.leaderEpoch,
      deliveryCompleteCount: hosted.sharePartition.deliveryCompleteCount,
      highWatermark: partition.highWatermark,
    }
  }

  /**
   * AlterShareGroupOffsets of an empty group: the group's share-partition on `tp` starts over
   * at `startOffset` (what it held is forgotten: no member is left to hold it).
   */
  initializeState(groupId: string, tp: ShareTopicPartition, startOffset: number): number {
    const partition = this.ledHere(tp)
    if (typeof partition === 'number') return partition
    const key = keyOf(groupId, tp)
    this.hosted.get(key)?.sharePartition.close()
    const share = new SharePartition(this.config, this.clock, startOffset)
    share.markWritten()
    this.hosted.set(key, { sharePartition: share, tp, leaderEpoch: partition.leaderEpoch })
    return ErrorCode.NONE
  }

  /** DeleteShareGroupOffsets and DeleteGroups: forgets the group's share-partition on `tp`. */
  deleteState(groupId: string, tp: ShareTopicPartition): number {
    const partition = this.ledHere(tp)
    if (typeof partition === 'number') return partition
    const key = keyOf(groupId, tp)
    this.hosted.get(key)?.sharePartition.close()
    this.hosted.delete(key)
    return ErrorCode.NONE
  }

  private ledHere(tp: ShareTopicPartition): Partition | number {
    const partition = this.replicaManager.getPartition(tp.topic, tp.partition)
    if (!partition?.isLeader || partition.id.topicId !== tp.topicId) return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return partition
  }

  /** Releases what the session's member holds on each of its partitions (the session ended). */
  releaseSession(session: ShareSession): void {
    for (const tp of session.partitions.values()) {
      const hosted = this.hosted.get(keyOf(session.groupId, tp))
      hosted?.sharePartition.releaseAcquiredRecords(session.memberId)
    }
  }

  /** Closes the share-partitions of partitions no longer led here at their epoch (after a metadata change). */
  onPartitionsChanged(): void {
    for (const [key, hosted] of this.hosted) {
      const partition = this.replicaManager.getPartition(hosted.tp.topic, hosted.tp.partition)
      if (
        partition?.isLeader &&
        partition.id.topicId === hosted.tp.topicId &&
        partition.leaderEpoch === hosted.leaderEpoch
      )
        continue
      hosted.sharePartition.close()
      this.hosted.delete(key)
    }
  }

  shutdown(): void {
    for (const hosted of this.hosted.values()) hosted.sharePartition.close()
    this.hosted.clear()
  }
}

/** The batches of a read with their offsets: a share fetch returns only those it acquired from. */
function splitBatches(buffers: readonly Buffer[]): (FetchedBatch & { bytes: Buffer })[] {
  const batches: (FetchedBatch & { bytes: Buffer })[] = []
  for (const buffer of buffers) {
    let at = 0
    while (at + LOG_OVERHEAD <= buffer.length) {
      const header = new BatchHeader(buffer, at)
      const end = at + header.sizeInBytes
      // A partial batch at the end of a read (maxBytes cut it) is not delivered.
      if (end > buffer.length) break
      batches.push({
        baseOffset: header.baseOffset,
        lastOffset: header.lastOffset,
        isControl: header.isControl,
        bytes: buffer.subarray(at, end),
      })
      at = end
    }
  }
  return batches
}

function keyOf(groupId: string, tp: { topicId: string; partition: number }): string {
  return `${tp.topicId}\u0000${tp.partition}\u0000${groupId}`
}
