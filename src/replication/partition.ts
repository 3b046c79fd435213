/**
 * One hosted partition replica: its log, its role and leader epoch, and the high watermark.
 * On a single-replica ISR the leader's log end is committed as soon as it is written; the
 * follower side and ISR tracking build on this class (replication issue).
 */
import { assert } from '../common/assert.js'
import type { PartitionState } from '../metadata/cluster-image.js'
import {
  BatchHeader,
  CONTROL_FLAG_MASK,
  LOG_OVERHEAD,
  RECORDS_COUNT_OFFSET,
} from '../protocol/batch-header.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { convertLegacyToV2, decodeRecordBatch, isLegacyMagic } from '../protocol/record-batch.js'
import type { FetchDataInfo, LogAppendInfo, PartitionLog } from '../storage/partition-log.js'
import { KafkaError } from './kafka-error.js'

export interface PartitionIdentity {
  readonly topic: string
  readonly partition: number
  readonly topicId: string
}

export type IsolationLevel = 'read_uncommitted' | 'read_committed'

export class Partition {
  private state: PartitionState
  private readonly highWatermarkWatchers = new Set<() => void>()
  /** Appends that need async preparation (legacy up-conversion, key checks) queue here. */
  private preparedAppendTail: Promise<unknown> = Promise.resolve()
  private preparingAppends = 0

  constructor(
    readonly id: PartitionIdentity,
    readonly log: PartitionLog,
    private readonly localBrokerId: number,
    state: PartitionState,
    private readonly isFenced: () => boolean = () => false,
  ) {
    this.state = state
  }

  get topic(): string {
    return this.id.topic
  }
  get partition(): number {
    return this.id.partition
  }
  get leaderEpoch(): number {
    return this.state.leaderEpoch
  }
  /** Leader by the metadata and still holding a store session (no split brain). */
  get isLeader(): boolean {
    return this.state.leader === this.localBrokerId && !this.isFenced()
  }
  get isr(): readonly number[] {
    return this.state.isr
  }
  get replicas(): readonly number[] {
    return this.state.replicas
  }
  get highWatermark(): number {
    return this.log.highWatermark
  }
  /** Without transactions the last stable offset is the high watermark. */
  get lastStableOffset(): number {
    return this.log.highWatermark
  }

  /** Applies a new partition state from the metadata; epochs never go back. */
  updateState(next: PartitionState): void {
    assert(
      next.leaderEpoch >= this.state.leaderEpoch,
      () => `${this.topic}-${this.partition}: leader epoch ${next.leaderEpoch} < ${this.state.leaderEpoch}`,
    )
    this.state = next
  }

  /** Calls `watcher` whenever the high watermark advances, until the returned function is called. */
  watchHighWatermark(watcher: () => void): () => void {
    this.highWatermarkWatchers.add(watcher)
    return () => this.highWatermarkWatchers.delete(watcher)
  }

  /**
   * Checks a request's current leader epoch (Fetch v9+, ListOffsets v4+): -1 means "not
   * given"; older means the client is behind (FENCED_LEADER_EPOCH), newer means we are
   * (UNKNOWN_LEADER_EPOCH).
   */
  checkLeaderEpoch(currentLeaderEpoch: number): void {
    if (currentLeaderEpoch === -1 || currentLeaderEpoch === this.leaderEpoch) return
    throw new KafkaError(
      currentLeaderEpoch < this.leaderEpoch ? ErrorCode.FENCED_LEADER_EPOCH : ErrorCode.UNKNOWN_LEADER_EPOCH,
      `leader epoch ${currentLeaderEpoch} vs ${this.leaderEpoch}`,
    )
  }

  ensureLeader(): void {
    if (!this.isLeader)
      throw new KafkaError(
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        `not the leader of ${this.topic}-${this.partition}`,
      )
  }

  /**
   * Appends a producer's records as leader. `requiredAcks` -1 needs min.insync.replicas
   * ISR members before the append (NOT_ENOUGH_REPLICAS otherwise).
   */
  async appendRecordsToLeader(
    records: Buffer,
    requiredAcks: number,
    minInsyncReplicas: number,
  ): Promise<LogAppendInfo> {
    this.ensureLeader()
    if (requiredAcks === -1 && this.isr.length < minInsyncReplicas) {
      throw new KafkaError(
        ErrorCode.NOT_ENOUGH_REPLICAS,
        `ISR ${this.isr.length} is below min.insync.replicas ${minInsyncReplicas}`,
      )
    }
    const needsPreparation = isLegacyMagic(records) || this.log.config.cleanupPolicy.includes('compact')
    // The log orders appends by call time; requests pipelined on one connection call this in
    // order, so the common path must reach log.append before its first await.
    if (!needsPreparation && this.preparingAppends === 0) return this.appendPrepared(records)
    this.preparingAppends++
    const appended = this.preparedAppendTail.then(async () => {
      try {
        const batches = isLegacyMagic(records) ? await this.upConvert(records) : records
        if (this.log.config.cleanupPolicy.includes('compact')) await checkKeysPresent(batches)
        return this.appendPrepared(batches)
      } finally {
        this.preparingAppends--
      }
    })
    this.preparedAppendTail = appended.catch(() => undefined)
    return appended
  }

  private async appendPrepared(batches: Buffer): Promise<LogAppendInfo> {
    checkProducerBatches(batches)
    const info = await this.log.append(batches, { assignOffsets: true, leaderEpoch: this.leaderEpoch })
    this.maybeIncrementHighWatermark()
    return info
  }

  /**
   * Old clients send magic 0/1 message sets; the log stores v2 only, as Kafka 3.x does.
   * LogAppendTime, when the topic asks for it, is stamped by the log like any batch.
   */
  private upConvert(records: Buffer): Promise<Buffer> {
    return convertLegacyToV2(records)
  }

  /** The high watermark is the smallest log end among ISR members; alone, our own. */
  maybeIncrementHighWatermark(): void {
    if (this.isr.length !== 1 || this.isr[0] !== this.localBrokerId) return
    const before = this.log.highWatermark
    const after = this.log.updateHighWatermark(this.log.logEndOffset)
    if (after > before) for (const watcher of [...this.highWatermarkWatchers]) watcher()
  }

  /** Reads committed records for a consumer (up to the high watermark, or the LSO). */
  read(
    fetchOffset: number,
    maxBytes: number,
    isolation: IsolationLevel,
    minOneMessage: boolean,
  ): Promise<FetchDataInfo> {
    const maxOffset = isolation === 'read_committed' ? this.lastStableOffset : this.highWatermark
    return this.log.read(fetchOffset, { maxBytes, maxOffset, minOneMessage })
  }

  /** Bytes between `fetchOffset` and the high watermark are available when the log end moved. */
  hasDataAfter(fetchOffset: number, isolation: IsolationLevel): boolean {
    const bound = isolation === 'read_committed' ? this.lastStableOffset : this.highWatermark
    return fetchOffset < bound
  }
}

/**
 * Producer-side rules Kafka applies before the log's own checks (which cover size and CRC):
 * records present, consecutive offsets inside each batch, no control batches.
 */
function checkProducerBatches(batches: Buffer): void {
  if (batches.length === 0) throw new KafkaError(ErrorCode.INVALID_RECORD, 'produce request with no records')
  let at = 0
  while (at + LOG_OVERHEAD <= batches.length) {
    const header = new BatchHeader(batches, at)
    if (at + RECORDS_COUNT_OFFSET + 4 > batches.length) break // truncated: the log reports it
    const count = header.recordsCount
    if (count === 0 || count !== header.lastOffsetDelta + 1) {
      throw new KafkaError(
        ErrorCode.INVALID_RECORD,
        `batch of ${count} records with lastOffsetDelta ${header.lastOffsetDelta}`,
      )
    }
    if (header.attributes & CONTROL_FLAG_MASK) {
      throw new KafkaError(ErrorCode.INVALID_RECORD, 'producers may not write control batches')
    }
    at += Math.max(header.sizeInBytes, LOG_OVERHEAD)
  }
}

/** A compacted topic needs a key on every record (Kafka: INVALID_RECORD). */
async function checkKeysPresent(batches: Buffer): Promise<void> {
  let at = 0
  while (at + LOG_OVERHEAD <= batches.length) {
    const batch = await decodeRecordBatch(batches, at).catch(() => null)
    if (batch === null) return // framing and CRC errors are reported by the log's checks
    if (batch.records.some((record) => record.key === null)) {
      throw new KafkaError(ErrorCode.INVALID_RECORD, 'Compacted topic cannot accept message without key')
    }
    at += new BatchHeader(batches, at).sizeInBytes
  }
}
