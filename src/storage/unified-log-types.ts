/**
 * What UnifiedLog takes and returns (Kafka's AppendOrigin, LogAppendInfo, FetchDataInfo,
 * TimestampAndOffset), the producer-state hook it drives (Kafka's ProducerStateManager as
 * the log sees it), and partition directory names. Apart from unified-log.ts so the log's
 * callers and the producer state read the contract without the implementation;
 * unified-log.ts re-exports all of it.
 */
import type { LeaderEpoch, Offset } from '../common/types.js'
import type { AbortedTxn } from './transaction-index.js'

const TOPIC_PARTITION_DIR = /^(.+)-(\d+)$/

export interface TopicPartition {
  readonly topic: string
  readonly partition: number
}

/**
 * Who wrote a leader append (Kafka's AppendOrigin): a client's produce gets every producer
 * check; the coordinators (transaction markers, transactional offset commits) write
 * batches without sequences, checked by epoch only. A follower's append is replication.
 */
export type AppendOrigin = 'client' | 'coordinator'

export interface AppendOptions {
  /** Leader: rewrite base offsets to the next offsets. Follower: the batches must carry them. */
  readonly assignOffsets: boolean
  /** Leader only; default 'client'. */
  readonly origin?: AppendOrigin
  /**
   * Leader only, KIP-890: the token the producer state handed out when the verification
   * of this transactional produce began; a batch opening a transaction needs it current.
   */
  readonly verificationGuard?: object
  /** Leader only: stamped into each batch's partitionLeaderEpoch and recorded in the epoch cache. */
  readonly leaderEpoch?: LeaderEpoch
  /**
   * Leader only. A number stamps LogAppendTime (timestamp type bit, maxTimestamp, CRC); null
   * keeps CreateTime; undefined follows message.timestamp.type (clock time for LogAppendTime).
   */
  readonly logAppendTimeMs?: number | null
}

export interface LogAppendInfo {
  readonly firstOffset: Offset
  readonly lastOffset: Offset
  /** The stamped LogAppendTime, or -1 for CreateTime (as in ProduceResponse). */
  readonly logAppendTimeMs: number
  readonly maxTimestamp: number
  readonly offsetOfMaxTimestamp: Offset
  readonly shallowCount: number
  readonly validBytes: number
  readonly logStartOffset: Offset
}

export interface ReadOptions {
  readonly maxBytes: number
  /** Exclusive bound (high watermark or last stable offset); default the log end offset. */
  readonly maxOffset?: Offset
  /** Return the first batch even when larger than maxBytes (Kafka's minOneMessage). Default true. */
  readonly minOneMessage?: boolean
}

export interface FetchDataInfo {
  /** Whole batches, in offset order: slices of file reads (one per read), no copies. */
  readonly records: Buffer[]
  readonly sizeInBytes: number
  /** Base offset of the first batch returned (may precede the requested offset), else the requested offset. */
  readonly firstOffset: Offset
  /** Offset after the last batch returned, else the requested offset. */
  readonly nextOffset: Offset
  readonly highWatermark: Offset
  readonly logStartOffset: Offset
  readonly logEndOffset: Offset
}

export interface TimestampAndOffset {
  readonly timestamp: number
  readonly offset: Offset
  readonly leaderEpoch: LeaderEpoch | undefined
}

/** The offsets of an earlier identical batch, which a leader answers a producer's retry with. */
export interface DuplicateBatch {
  readonly firstOffset: Offset
  readonly lastOffset: Offset
  readonly maxTimestamp: number
}

/** What the producer state made of an append it accepted. */
export interface ProducerAppendOutcome {
  /** A retry: answered with its first write's offsets, and nothing is written. */
  readonly duplicate?: DuplicateBatch
  /** Transactions this append's ABORT markers ended: entries of the active segment's `.txnindex`. */
  readonly abortedTransactions?: readonly AbortedTxn[]
}

/**
 * Producer state (idempotence and transactions) kept in step with the log, as UnifiedLog drives Kafka's
 * ProducerStateManager. Every call runs on the log's queue, so it sees appends, rolls and
 * truncations in log order, and onAppend is synchronous: no other append can come between
 * a batch's sequence check and its offsets.
 */
export interface ProducerStateHook {
  /**
   * Loads the state (snapshot plus the log after it); the log's queue waits for it.
   * `newLog`: the log's directory was made when it was opened and nothing is in it yet, so
   * there is no snapshot to look for: the state is empty at the log start.
   */
  load(newLog?: boolean): Promise<void>
  /**
   * One append whose batches passed validation and carry their offsets, before the write.
   * A leader append (`options.assignOffsets`) may throw a Kafka outcome to refuse it, or
   * return the batch it duplicates, which is then answered without writing anything.
   */
  onAppend(batches: Buffer, options: AppendOptions): ProducerAppendOutcome | undefined
  /** A new segment starts at `baseOffset` (everything below it is applied): snapshot time. */
  onRoll(baseOffset: Offset): Promise<void>
  /** The log's tail was cut (truncateTo, truncateFullyAndStartAt): the state must follow it. */
  onTruncated(): Promise<void>
  /** Retention deleted segments: snapshots below the log start can go. */
  onSegmentsDeleted(logStartOffset: Offset): Promise<void>
  /** Clean close: a snapshot at the log end spares the next open a replay. */
  onClose(): Promise<void>
  /** First offset of the earliest transaction not yet decided and replicated: the cleaner stops there. */
  firstUnstableOffset?(): Offset | undefined
}

/**
 * A retried batch's answer: its first write's offsets, and as its log append time the
 * batch's max timestamp, which Kafka's UnifiedLog answers for a duplicate whatever the
 * topic's timestamp type (found by test/differential against Kafka 4.4).
 */
export function duplicateAppendInfo(duplicate: DuplicateBatch, logStartOffset: Offset): LogAppendInfo {
  return {
    firstOffset: duplicate.firstOffset,
    lastOffset: duplicate.lastOffset,
    logAppendTimeMs: duplicate.maxTimestamp,
    maxTimestamp: duplicate.maxTimestamp,
    offsetOfMaxTimestamp: duplicate.lastOffset,
    shallowCount: 0,
    validBytes: 0,
    logStartOffset,
  }
}

/** `<topic>-<partition>` as Kafka names partition directories; undefined for other names. */
export function parseTopicPartition(dirName: string): TopicPartition | undefined {
  const match = TOPIC_PARTITION_DIR.exec(dirName)
  if (match === null) return undefined
  return { topic: match[1], partition: Number(match[2]) }
}

export function topicPartitionDirName(tp: TopicPartition): string {
  return `${tp.topic}-${tp.partition}`
}
