/**
 * The share-partitions of this broker (Kafka's SharePartitionManager): one SharePartition per
 * (share group, topic id, partition) this broker leads, made on the group's first fetch of
 * it, and the share sessions of the consumers fetching here.
 *
 * A share-partition is made from the state the share coordinator keeps (`SharePersister`,
 * ReadShareGroupState with this leader's epoch, which fences the previous leader's writes);
 * with none it starts at its group's `share.auto.offset.reset`: the high watermark (latest,
 * Kafka's default) or the log start offset (earliest). Each change is written back
 * (WriteShareGroupState): an acknowledgement answers once its write is committed (rolled back
 * if the write fails, as Kafka's), a released lock or a closed session writes in the background
 * (the session's release rolled back too if its write fails). Writes of one share-partition go one at
 * a time, the next carrying all changes made meanwhile. Its locks last the group's
 * `share.record.lock.duration.ms`, read at each acquisition. It belongs to one leader epoch:
 * when the partition's leadership moves or its epoch changes it is closed and a later fetch
 * makes a new one from the persisted state. It is also dropped when its last share session
 * ends, so a group's next consumers start from the persisted state, which an
 * AlterShareGroupOffsets or DeleteShareGroupOffsets of the (then empty) group may have changed.
 */
import type { Clock } from '../../common/clock.js'
import type { Logger } from '../../common/logger.js'
import { type ProducerId, toOffset } from '../../common/types.js'
import type {
  ShareStateRead,
  ShareStateSummaryRead,
  ShareStateWrite,
} from '../../coordinator/share/share-coordinator-shard.js'
import type { SharePartitionKey } from '../../coordinator/share/share-state-records.js'
import { BatchHeader, LOG_OVERHEAD } from '../../protocol/batch-header.js'
import { ErrorCode } from '../../protocol/error-codes.js'
import { toErrorCode } from '../../replication/kafka-error.js'
import type { IsolationLevel, Partition } from '../../replication/partition.js'
import type { AbortedTxn } from '../../storage/transaction-index.js'
import {
  type AcknowledgementBatch,
  type AcquiredRange,
  type AcquireMode,
  acknowledgedRecordCounts,
  type FetchedBatch,
  SharePartition,
  type SharePartitionConfig,
} from './share-partition.js'
import { type ShareSession, ShareSessionCache } from './share-session-cache.js'

/** What the share-partitions and the group coordinator ask of the share coordinator (share-persister.ts). */
export interface SharePersister {
  readState(key: SharePartitionKey, leaderEpoch: number): Promise<ShareStateRead>
  writeState(key: SharePartitionKey, write: ShareStateWrite): Promise<number>
  initializeState(key: SharePartitionKey, stateEpoch: number, startOffset: number): Promise<number>
  deleteState(key: SharePartitionKey): Promise<number>
  readSummary(key: SharePartitionKey): Promise<ShareStateSummaryRead>
}

export type ShareAutoOffsetReset = 'latest' | 'earliest'

export interface SharePartitionManagerConfig extends SharePartitionConfig {
  /** The broker's share.auto.offset.reset, for groups that set none. */
  readonly autoOffsetReset: ShareAutoOffsetReset
  /** group.share.max.share.sessions: share sessions open on this broker at most. */
  readonly maxShareSessions?: number
}

/** A share group's own settings (its group configs); absent ones are the broker's. */
export interface ShareGroupOverrides {
  readonly autoOffsetReset?: ShareAutoOffsetReset
  readonly recordLockDurationMs?: number
  readonly deliveryCountLimit?: number
  readonly maxInFlightRecords?: number
  /** share.isolation.level: Kafka's default (no broker setting) is read_uncommitted. */
  readonly isolationLevel?: IsolationLevel
  /** share.renew.acknowledge.enable: Kafka's default (no broker setting) is true. */
  readonly renewAcknowledgeEnabled?: boolean
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

interface Hosted {
  readonly sharePartition: SharePartition
  readonly tp: ShareTopicPartition
  readonly groupId: string
  readonly leaderEpoch: number
  /** The state epoch read from the share coordinator: each write carries it. */
  readonly stateEpoch: number
  /** The write on its way to the share coordinator, and the one waiting behind it. */
  writing: Promise<number> | null
  queued: Promise<number> | null
}

const NOTHING: ShareAcquireResult = { errorCode: ErrorCode.NONE, records: [], acquired: [] }

/** Errors after which the share coordinator will refuse this share-partition's writes: it is dropped. */
const FENCED = new Set<number>([ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH])

/** What the share metrics read (ops/metrics.ts names them after Kafka's). */
export interface ShareManagerStats {
  /** Sessions ended by their connection closing (Kafka's ShareSessionEvictionsPerSec). */
  sessionEvictions: number
  /** Records acknowledged, by AcknowledgeType (Kafka's RecordAcknowledgementsPerSec). */
  readonly recordAcknowledgements: Map<number, number>
  /** Lock expiries of share-partitions no longer open here, kept so the counter never drops. */
  closedAcquisitionLockTimeouts: number
  /** BrokerTopicMetrics' Total/FailedShareFetchRequestsPerSec and Total/FailedShareAcknowledgementRequestsPerSec, by topic. */
  readonly topicRequests: {
    readonly fetch: Map<string, number>
    readonly failedFetch: Map<string, number>
    readonly acknowledgement: Map<string, number>
    readonly failedAcknowledgement: Map<string, number>
  }
  /** ShareGroupMetrics' PartitionLoadTimeMs: share-partitions made here from their state, and how long reading it took. */
  readonly partitionLoads: { count: number; totalMs: number; maxMs: number }
}

/** One more for `key` in a counter map. */
export function countOne(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1)
}

export class SharePartitionManager {
  readonly sessions: ShareSessionCache
  readonly stats: ShareManagerStats = {
    sessionEvictions: 0,
    recordAcknowledgements: new Map(),
    closedAcquisitionLockTimeouts: 0,
    topicRequests: {
      fetch: new Map(),
      failedFetch: new Map(),
      acknowledgement: new Map(),
      failedAcknowledgement: new Map(),
    },
    partitionLoads: { count: 0, totalMs: 0, maxMs: 0 },
  }
  private readonly hosted = new Map<string, Hosted>()
  /** Share-partitions being made (their state read): concurrent fetches wait for the same one. */
  private readonly opening = new Map<string, Promise<Hosted | number>>()
  /**
   * The last write of each dropped share-partition still on its way: a new share-partition of
   * the same key reads its state only after it. Same leader epoch, so the coordinator does not
   * fence that write; read first, the new one would miss it (an ACCEPT whose write was retried
   * at a moved share coordinator was delivered again: simulator seed 202 --share).
   */
  private readonly draining = new Map<string, Promise<void>>()

  constructor(
    readonly config: SharePartitionManagerConfig,
    private readonly clock: Clock,
    private readonly replicaManager: {
      getPartition(topic: string, partition: number): Partition | undefined
    },
    /** The group configs of a share group, read when they apply (they change at any time). */
    private readonly groupOverrides: (groupId: string) => ShareGroupOverrides = () => ({}),
    /** The share coordinator; none keeps the state in memory only (unit tests). */
    private readonly persister?: SharePersister,
    private readonly logger?: Logger,
  ) {
    this.sessions = new ShareSessionCache(config.maxShareSessions)
  }

  /** How long `groupId`'s share consumers hold what they acquire (ShareFetch's acquisitionLockTimeoutMs). */
  recordLockDurationMs(groupId: string): number {
    return this.groupOverrides(groupId).recordLockDurationMs ?? this.config.recordLockDurationMs
  }

  /** How far `groupId`'s share fetches read: its share.isolation.level. */
  isolationLevel(groupId: string): IsolationLevel {
    return this.groupOverrides(groupId).isolationLevel ?? 'read_uncommitted'
  }

  /** How many share-partitions are open here (metrics, tests). */
  get size(): number {
    return this.hosted.size
  }

  /** The group's share-partition on `tp` if it is open here at the partition's current epoch. */
  private current(
    groupId: string,
    tp: ShareTopicPartition,
  ): { partition: Partition; hosted?: Hosted } | number {
    const partition = this.replicaManager.getPartition(tp.topic, tp.partition)
    if (!partition?.isLeader || partition.id.topicId !== tp.topicId) return ErrorCode.NOT_LEADER_OR_FOLLOWER
    const existing = this.hosted.get(keyOf(groupId, tp))
    if (existing && existing.leaderEpoch === partition.leaderEpoch) return { partition, hosted: existing }
    if (existing) this.drop(keyOf(groupId, tp), existing)
    return { partition }
  }

  /** The group's share-partition on `tp`, made now (from the persisted state) if need be, or why there is none. */
  async sharePartition(
    groupId: string,
    tp: ShareTopicPartition,
  ): Promise<{ partition: Partition; share: SharePartition } | number> {
    const found = this.current(groupId, tp)
    if (typeof found === 'number') return found
    if (found.hosted) return { partition: found.partition, share: found.hosted.sharePartition }
    const key = keyOf(groupId, tp)
    let opening = this.opening.get(key)
    if (!opening) {
      opening = this.open(groupId, tp, found.partition).finally(() => this.opening.delete(key))
      this.opening.set(key, opening)
    }
    const opened = await opening
    if (typeof opened === 'number') return opened
    const again = this.current(groupId, tp)
    if (typeof again === 'number') return again
    if (again.hosted !== opened) return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return { partition: again.partition, share: opened.sharePartition }
  }

  private async open(
    groupId: string,
    tp: ShareTopicPartition,
    partition: Partition,
  ): Promise<Hosted | number> {
    const leaderEpoch = partition.leaderEpoch
    const startMs = this.clock.monotonicMs()
    await this.draining.get(keyOf(groupId, tp))
    const read = this.persister
      ? await this.persister.readState({ groupId, topicId: tp.topicId, partition: tp.partition }, leaderEpoch)
      : undefined
    if (read && read.errorCode !== ErrorCode.NONE) {
      this.logger?.info({ groupId, ...tp, errorCode: read.errorCode }, 'share-partition state not read')
      return read.errorCode
    }
    // Leadership may have moved while reading.
    const now = this.replicaManager.getPartition(tp.topic, tp.partition)
    if (!now?.isLeader || now.leaderEpoch !== leaderEpoch) return ErrorCode.NOT_LEADER_OR_FOLLOWER
    const manager = this
    const config: SharePartitionConfig = {
      get deliveryCountLimit() {
        return manager.groupOverrides(groupId).deliveryCountLimit ?? manager.config.deliveryCountLimit
      },
      get maxInFlightRecords() {
        return manager.groupOverrides(groupId).maxInFlightRecords ?? manager.config.maxInFlightRecords
      },
      get recordLockDurationMs() {
        return manager.recordLockDurationMs(groupId)
      },
      get renewAcknowledgeEnabled() {
        return manager.groupOverrides(groupId).renewAcknowledgeEnabled ?? true
      },
    }
    let share: SharePartition
    if (read && read.startOffset >= 0)
      share = new SharePartition(config, this.clock, read.startOffset, read.stateBatches)
    else {
      const reset = this.groupOverrides(groupId).autoOffsetReset ?? this.config.autoOffsetReset
      share = new SharePartition(
        config,
        this.clock,
        reset === 'earliest' ? partition.log.logStartOffset : partition.highWatermark,
      )
    }
    const hosted: Hosted = {
      sharePartition: share,
      tp,
      groupId,
      leaderEpoch,
      stateEpoch: read?.stateEpoch ?? 0,
      writing: null,
      queued: null,
    }
    share.onStateChanged = () => void this.persist(hosted)
    this.hosted.set(keyOf(groupId, tp), hosted)
    const loadMs = this.clock.monotonicMs() - startMs
    const loads = this.stats.partitionLoads
    loads.count++
    loads.totalMs += loadMs
    loads.maxMs = Math.max(loads.maxMs, loadMs)
    return hosted
  }

  /**
   * Writes the share-partition's state to the share coordinator after the write in flight
   * (if any); resolves with the write's error code. Fenced: the share-partition is dropped.
   */
  private persist(hosted: Hosted): Promise<number> {
    if (!this.persister) return Promise.resolve(ErrorCode.NONE)
    if (hosted.queued) return hosted.queued
    if (hosted.writing) {
      const queued = hosted.writing.then(() => {
        hosted.queued = null
        return this.startWrite(hosted)
      })
      hosted.queued = queued
      return queued
    }
    return this.startWrite(hosted)
  }

  private startWrite(hosted: Hosted): Promise<number> {
    const persister = this.persister
    if (!persister) return Promise.resolve(ErrorCode.NONE)
    const state = hosted.sharePartition.persistentState()
    const { groupId, tp } = hosted
    const writing = persister
      .writeState(
        { groupId, topicId: tp.topicId, partition: tp.partition },
        {
          stateEpoch: hosted.stateEpoch,
          leaderEpoch: hosted.leaderEpoch,
          startOffset: state.startOffset,
          deliveryCompleteCount: state.deliveryCompleteCount,
          stateBatches: state.batches,
        },
      )
      .then((code) => {
        if (hosted.writing === writing) hosted.writing = null
        if (code !== ErrorCode.NONE)
          this.logger?.info({ groupId, ...tp, errorCode: code }, 'share-partition state not written')
        if (FENCED.has(code) && this.hosted.get(keyOf(groupId, tp)) === hosted)
          this.drop(keyOf(groupId, tp), hosted)
        return code
      })
    hosted.writing = writing
    return writing
  }

  private drop(key: string, hosted: Hosted): void {
    const pending = hosted.queued ?? hosted.writing
    if (pending) {
      const drained = pending.then(
        () => undefined,
        () => undefined,
      )
      this.draining.set(key, drained)
      void drained.then(() => {
        if (this.draining.get(key) === drained) this.draining.delete(key)
      })
    }
    if (this.hosted.get(key) === hosted)
      this.stats.closedAcquisitionLockTimeouts += hosted.sharePartition.acquisitionLockTimeouts
    hosted.sharePartition.close()
    if (this.hosted.get(key) === hosted) this.hosted.delete(key)
  }

  /**
   * Reads from the share-partition's next fetch offset up to the high watermark (the last
   * stable offset for a group whose share.isolation.level is read_committed, its aborted
   * transactions' records archived, never delivered) and acquires what `memberId` may take
   * of it (SharePartition.acquire). While the share coordinator cannot be read (it moves or
   * loads) nothing is acquired: the consumer's next fetch tries again.
   */
  async acquire(
    groupId: string,
    memberId: string,
    tp: ShareTopicPartition,
    limits: { maxRecords: number; maxBytes: number; mode: AcquireMode },
  ): Promise<ShareAcquireResult> {
    const found = await this.sharePartition(groupId, tp)
    if (typeof found === 'number')
      return found === ErrorCode.NOT_LEADER_OR_FOLLOWER ? { ...NOTHING, errorCode: found } : NOTHING
    const { partition, share } = found
    if (!share.canAcquire()) return NOTHING
    const fetchOffset = toOffset(share.nextFetchOffset())
    const isolation = this.isolationLevel(groupId)
    if (!partition.hasDataAfter(fetchOffset, isolation)) return NOTHING
    let read: Awaited<ReturnType<Partition['read']>>
    try {
      read = await partition.read(fetchOffset, limits.maxBytes, isolation, true)
    } catch (error) {
      const code = toErrorCode(error)
      if (code === null) throw error
      return { ...NOTHING, errorCode: code }
    }
    // Re-checked after the read: leadership may have moved, closing this share-partition.
    const again = this.current(groupId, tp)
    if (typeof again === 'number') return { ...NOTHING, errorCode: again }
    if (again.hosted?.sharePartition !== share) return NOTHING
    const batches = splitBatches(read.info.records, read.abortedTransactions ?? [])
    const acquired = share.acquire(memberId, batches, limits.maxRecords, limits.mode)
    if (acquired.length === 0) return NOTHING
    const first = acquired[0].firstOffset
    const last = acquired[acquired.length - 1].lastOffset
    const records = batches.filter((b) => b.lastOffset >= first && b.baseOffset <= last).map((b) => b.bytes)
    return { errorCode: ErrorCode.NONE, records, acquired }
  }

  /**
   * Applies a member's acknowledgements to the group's share-partition on `tp`, answering once
   * the new state is written to the share coordinator. If the write fails the change is rolled
   * back, as Kafka's SharePartition does: the records are the member's again under their locks
   * (released if a lock ran out meanwhile), and the member gets the write's error.
   */
  async acknowledge(
    groupId: string,
    memberId: string,
    tp: ShareTopicPartition,
    batches: readonly AcknowledgementBatch[],
  ): Promise<number> {
    const found = this.current(groupId, tp)
    if (typeof found === 'number') return found
    // Records are acknowledged only where they were acquired: by this share-partition.
    if (!found.hosted) return ErrorCode.INVALID_RECORD_STATE
    const share = found.hosted.sharePartition
    const { errorCode, transition } = share.beginAcknowledge(memberId, batches)
    if (errorCode !== ErrorCode.NONE || transition === null) return errorCode
    const written = await this.persist(found.hosted)
    share.completeTransition(transition, written === ErrorCode.NONE)
    if (written !== ErrorCode.NONE) return written
    for (const [type, count] of acknowledgedRecordCounts(batches))
      this.stats.recordAcknowledgements.set(type, (this.stats.recordAcknowledgements.get(type) ?? 0) + count)
    return ErrorCode.NONE
  }

  /**
   * Forgets the group's share-partition on `tp` here (its persisted state was initialized or
   * deleted: the next fetch reads it again).
   */
  forget(groupId: string, tp: ShareTopicPartition): void {
    const key = keyOf(groupId, tp)
    const hosted = this.hosted.get(key)
    if (hosted) this.drop(key, hosted)
  }

  /**
   * Releases what the session's member holds on each of its partitions (the session ended),
   * rolled back if the write fails (as an acknowledgement's); a share-partition no other
   * session of the group has is dropped once its writes are done.
   */
  releaseSession(session: ShareSession): void {
    for (const tp of session.partitions.values()) {
      const key = keyOf(session.groupId, tp)
      const hosted = this.hosted.get(key)
      if (!hosted) continue
      const share = hosted.sharePartition
      const transition = share.beginRelease(session.memberId)
      if (transition.offsets.length > 0)
        void this.persist(hosted).then((code) =>
          share.completeTransition(transition, code === ErrorCode.NONE),
        )
      if (this.persister && !this.sessions.anyHolds(session.groupId, tp, session))
        void Promise.resolve(hosted.queued ?? hosted.writing).then(() => {
          if (!this.sessions.anyHolds(session.groupId, tp) && !hosted.sharePartition.hasAcquiredRecords)
            this.drop(key, hosted)
        })
    }
  }

  /**
   * The connection `session` was opened on closed (Kafka's ClientConnectionDisconnectListener):
   * unless the member opened another session since, the session ends and the member's
   * acquired records are released at once rather than when their locks expire.
   */
  onConnectionClosed(session: ShareSession): void {
    if (this.sessions.get(session.groupId, session.memberId) !== session) return
    this.sessions.removeMember(session.groupId, session.memberId)
    this.stats.sessionEvictions++
    this.releaseSession(session)
  }

  /** The share-partitions open here with their group (the share metrics' per-partition gauges). */
  openSharePartitions(): { groupId: string; tp: ShareTopicPartition; sharePartition: SharePartition }[] {
    return [...this.hosted.values()].map(({ groupId, tp, sharePartition }) => ({
      groupId,
      tp,
      sharePartition,
    }))
  }

  shutdown(): void {
    for (const hosted of this.hosted.values()) hosted.sharePartition.close()
    this.hosted.clear()
  }
}

/**
 * The batches of a read with their offsets: a share fetch returns only those it acquired
 * from. A transactional batch of a producer whose transaction was aborted (between the
 * aborted transaction's first offset and its abort marker) is marked, as Kafka's consumer
 * and SharePartition find them.
 */
function splitBatches(
  buffers: readonly Buffer[],
  abortedTransactions: readonly AbortedTxn[],
): (FetchedBatch & { bytes: Buffer })[] {
  const pending = [...abortedTransactions].sort((a, b) => a.firstOffset - b.firstOffset)
  const abortedProducers = new Set<ProducerId>()
  const batches: (FetchedBatch & { bytes: Buffer })[] = []
  for (const buffer of buffers) {
    let at = 0
    while (at + LOG_OVERHEAD <= buffer.length) {
      const header = new BatchHeader(buffer, at)
      const end = at + header.sizeInBytes
      // A partial batch at the end of a read (maxBytes cut it) is not delivered.
      if (end > buffer.length) break
      while (pending.length > 0 && pending[0].firstOffset <= header.lastOffset)
        abortedProducers.add((pending.shift() as AbortedTxn).producerId)
      const producerId = header.producerId
      const isAborted = header.isTransactional && !header.isControl && abortedProducers.has(producerId)
      // The marker ends the producer's aborted transaction: its later batches are another one.
      if (header.isControl) abortedProducers.delete(producerId)
      batches.push({
        baseOffset: header.baseOffset,
        lastOffset: header.lastOffset,
        isControl: header.isControl,
        isAborted,
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
