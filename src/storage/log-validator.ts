/**
 * Append-time rules for record batches (Kafka's LogValidator): framing, magic 2 and CRC
 * (through record-batch-check), max.message.bytes and record counts of a leader's
 * batches, segment.bytes, and then either the leader's offset assignment (base offsets,
 * partitionLeaderEpoch, LogAppendTime stamped in place) or the follower's check that the
 * batches carry the offsets the log expects, in non-decreasing epochs.
 *
 * Compression: batches stay encoded. The protocol layer's validator refuses a codec Kafka
 * does not know; stamping LogAppendTime rewrites only the header (attributes, maxTimestamp,
 * CRC), so a compressed batch is never decompressed here, as Kafka does for magic 2.
 *
 * Pure: no clock, no disk. The log passes in its end offset, its latest epoch, its
 * configuration and the LogAppendTime to stamp; the validator throws a StorageError with
 * Kafka's code to refuse the whole append.
 */

import { type LeaderEpoch, NO_OFFSET, type Offset } from '../common/types.js'
import {
  BASE_TIMESTAMP_OFFSET,
  BATCH_LENGTH_OFFSET,
  LAST_OFFSET_DELTA_OFFSET,
  LOG_OVERHEAD,
  PARTITION_LEADER_EPOCH_OFFSET,
  TimestampType,
} from '../protocol/batch-header.js'
import { setLogAppendTime } from '../protocol/record-batch.js'
import { StorageError } from './errors.js'
import type { LogConfig } from './log-config.js'
import type { AppendedBatch } from './log-segment.js'
import { type BatchSummary, checkBatch, writeInt64 } from './record-batch-check.js'
import { NO_TIMESTAMP } from './time-index.js'
import type { AppendOptions } from './unified-log-types.js'

/** Marks CreateTime where a LogAppendTime would go (ProduceResponse's logAppendTimeMs). */
export const NO_LOG_APPEND_TIME = -1

/** A leader epoch starting at an offset, for the leader-epoch cache once the batches are written. */
export interface EpochStart {
  readonly epoch: LeaderEpoch
  readonly startOffset: Offset
}

/** What an append will add to the log, known before the write (the log start comes after). */
export interface ValidatedAppendInfo {
  /** -1 when the append holds no batch. */
  readonly firstOffset: Offset
  readonly lastOffset: Offset
  /** The stamped LogAppendTime, or -1 for CreateTime. */
  readonly logAppendTimeMs: number
  readonly maxTimestamp: number
  readonly offsetOfMaxTimestamp: Offset
  /** Batches in the append. */
  readonly shallowCount: number
  readonly validBytes: number
}

export interface ValidatedAppend {
  readonly batches: AppendedBatch[]
  readonly epochStarts: EpochStart[]
  readonly info: ValidatedAppendInfo
}

interface CommonRules {
  /** The offset the append must start at: the log end offset plus the appends before it in the group. */
  readonly nextOffset: Offset
  /** The log's latest leader epoch, counting the appends before it in the group (-1: none). */
  readonly latestEpoch: LeaderEpoch
  /** segment.bytes: an append must fit in one segment. */
  readonly segmentBytes: number
}

/** A produce request on the leader (Kafka's AppendOrigin.Client). */
export interface LeaderRules extends CommonRules {
  readonly origin: 'leader'
  /** max.message.bytes, per batch. */
  readonly maxMessageBytes: number
  /** Stamped into each batch's partitionLeaderEpoch; must not be older than latestEpoch. */
  readonly leaderEpoch: LeaderEpoch | undefined
  /** The LogAppendTime to stamp, or -1 to keep CreateTime (see resolveLogAppendTime). */
  readonly logAppendTimeMs: number
  /**
   * CreateTime bounds (message.timestamp.before/after.max.ms) around the broker clock's
   * `nowMs`; absent: none.
   */
  readonly timestampBounds?: {
    readonly nowMs: number
    readonly beforeMaxMs: number
    readonly afterMaxMs: number
  }
}

/** Batches a follower fetched from its leader (Kafka's AppendOrigin.Replication). */
export interface FollowerRules extends CommonRules {
  readonly origin: 'follower'
  /** A compacted leader's batches leave offset gaps; then only going back is an error. */
  readonly offsetGapsAllowed: boolean
}

export type AppendRules = LeaderRules | FollowerRules

/**
 * The LogAppendTime of a leader append: the caller's choice (a number stamps it, null keeps
 * CreateTime), else message.timestamp.type decides, with `nowMs` for LogAppendTime.
 */
export function resolveLogAppendTime(
  requested: number | null | undefined,
  timestampType: TimestampType,
  nowMs: () => number,
): number {
  if (requested === null) return NO_LOG_APPEND_TIME
  if (requested !== undefined) return requested
  return timestampType === TimestampType.LogAppendTime ? nowMs() : NO_LOG_APPEND_TIME
}

/** What the log knows when an append's turn comes. */
export interface LogAppendState {
  readonly nextOffset: Offset
  readonly latestEpoch: LeaderEpoch
  /** The broker clock, read only when the rules need the time. */
  readonly nowMs: () => number
  /** The log is, or was, compacted: a follower's batches may skip offsets. */
  readonly offsetGapsAllowed: boolean
}

/**
 * The rules a log's configuration sets for one append (what Kafka's UnifiedLog hands its
 * LogValidator): a leader's (`assignOffsets`) with its epoch, LogAppendTime and CreateTime
 * bounds, else a follower's.
 */
export function appendRules(options: AppendOptions, config: LogConfig, log: LogAppendState): AppendRules {
  const { nextOffset, latestEpoch } = log
  if (options.assignOffsets) {
    return {
      origin: 'leader',
      nextOffset,
      latestEpoch,
      segmentBytes: config.segmentBytes,
      maxMessageBytes: config.maxMessageBytes,
      leaderEpoch: options.leaderEpoch,
      logAppendTimeMs: resolveLogAppendTime(options.logAppendTimeMs, config.messageTimestampType, log.nowMs),
      timestampBounds: {
        nowMs: log.nowMs(),
        beforeMaxMs: config.messageTimestampBeforeMaxMs,
        afterMaxMs: config.messageTimestampAfterMaxMs,
      },
    }
  }
  return {
    origin: 'follower',
    nextOffset,
    latestEpoch,
    segmentBytes: config.segmentBytes,
    offsetGapsAllowed: log.offsetGapsAllowed,
  }
}

/**
 * Validates the batches concatenated in `buffer` and, for a leader, rewrites their offsets,
 * epoch and LogAppendTime in place. Throws a StorageError (MESSAGE_TOO_LARGE,
 * CORRUPT_MESSAGE, INVALID_RECORD, RECORD_BATCH_TOO_LARGE, INVALID_LEADER_EPOCH,
 * UNEXPECTED_APPEND_OFFSET) to refuse the whole append; every check runs before the first
 * byte is patched, so a refused buffer is left as received.
 */
export function validateAppend(buffer: Buffer, rules: AppendRules): ValidatedAppend {
  const summaries = validateBatches(buffer, rules.origin === 'leader' ? rules.maxMessageBytes : undefined)
  if (summaries.length === 0) return { batches: [], epochStarts: [], info: emptyAppendInfo(rules.nextOffset) }
  if (buffer.length > rules.segmentBytes) {
    throw new StorageError(
      'RECORD_BATCH_TOO_LARGE',
      `append of ${buffer.length} bytes exceeds segment.bytes ${rules.segmentBytes}`,
    )
  }
  if (rules.origin === 'leader') return assignOffsets(buffer, summaries, rules)
  return checkFollowerOffsets(buffer, summaries, rules)
}

/**
 * Framing, magic, CRC of every batch in the buffer; for a leader (`maxMessageBytes` given)
 * also each batch's size and that its record count matches its offset range (a producer
 * never sends the gaps only compaction makes).
 */
export function validateBatches(buffer: Buffer, maxMessageBytes: number | undefined): BatchSummary[] {
  const isLeader = maxMessageBytes !== undefined
  const summaries: BatchSummary[] = []
  let at = 0
  while (at < buffer.length) {
    if (isLeader && buffer.length - at >= LOG_OVERHEAD) {
      const size = LOG_OVERHEAD + buffer.readInt32BE(at + BATCH_LENGTH_OFFSET)
      if (size > maxMessageBytes) {
        throw new StorageError(
          'MESSAGE_TOO_LARGE',
          `batch of ${size} bytes exceeds max.message.bytes ${maxMessageBytes}`,
        )
      }
    }
    const check = checkBatch(buffer, at, buffer.length, buffer.length)
    if (!check.ok)
      throw new StorageError('CORRUPT_MESSAGE', `batch at byte ${at} is invalid: ${check.problem}`)
    const batch = check.batch
    if (
      isLeader &&
      (batch.recordsCount <= 0 || batch.recordsCount !== batch.lastOffset - batch.baseOffset + 1)
    ) {
      throw new StorageError(
        'INVALID_RECORD',
        `batch at byte ${at} has ${batch.recordsCount} records but lastOffsetDelta ${batch.lastOffset - batch.baseOffset}`,
      )
    }
    summaries.push(batch)
    at += batch.sizeInBytes
  }
  return summaries
}

/**
 * Kafka's LogValidator refuses a CreateTime outside [now - before.max, now + after.max]
 * (INVALID_TIMESTAMP). Checked on the header without decoding a record: the batch's max
 * timestamp bounds every record from above exactly; from below, its first timestamp stands
 * for the earliest (Kafka reads each record; a producer stamps them in order).
 */
function checkTimestamps(
  buffer: Buffer,
  batch: BatchSummary,
  bounds: NonNullable<LeaderRules['timestampBounds']>,
): void {
  const first = Number(buffer.readBigInt64BE(batch.position + BASE_TIMESTAMP_OFFSET))
  const max = batch.maxTimestamp
  if (max !== NO_TIMESTAMP && max - bounds.nowMs > bounds.afterMaxMs)
    throw new StorageError(
      'INVALID_TIMESTAMP',
      `timestamp ${max} of the batch at offset ${batch.baseOffset} is more than ${bounds.afterMaxMs} ms ahead of the broker's ${bounds.nowMs} (message.timestamp.after.max.ms)`,
    )
  if (first !== NO_TIMESTAMP && bounds.nowMs - first > bounds.beforeMaxMs)
    throw new StorageError(
      'INVALID_TIMESTAMP',
      `timestamp ${first} of the batch at offset ${batch.baseOffset} is more than ${bounds.beforeMaxMs} ms behind the broker's ${bounds.nowMs} (message.timestamp.before.max.ms)`,
    )
}

function assignOffsets(
  buffer: Buffer,
  summaries: readonly BatchSummary[],
  rules: LeaderRules,
): ValidatedAppend {
  const { nextOffset, latestEpoch, leaderEpoch: epoch, logAppendTimeMs } = rules
  if (epoch !== undefined && epoch < latestEpoch) {
    throw new StorageError(
      'INVALID_LEADER_EPOCH',
      `leader epoch ${epoch} is older than the log's ${latestEpoch}`,
    )
  }
  if (logAppendTimeMs === NO_LOG_APPEND_TIME && rules.timestampBounds !== undefined)
    for (const batch of summaries) checkTimestamps(buffer, batch, rules.timestampBounds)
  const batches: AppendedBatch[] = []
  let offset = nextOffset
  let maxTimestamp = NO_TIMESTAMP
  let offsetOfMaxTimestamp = nextOffset
  for (const batch of summaries) {
    const lastOffsetDelta = buffer.readInt32BE(batch.position + LAST_OFFSET_DELTA_OFFSET)
    writeInt64(buffer, batch.position, offset)
    if (epoch !== undefined) buffer.writeInt32BE(epoch, batch.position + PARTITION_LEADER_EPOCH_OFFSET)
    if (logAppendTimeMs !== NO_LOG_APPEND_TIME) setLogAppendTime(buffer, batch.position, logAppendTimeMs)
    const batchMaxTimestamp = logAppendTimeMs !== NO_LOG_APPEND_TIME ? logAppendTimeMs : batch.maxTimestamp
    const lastOffset = (offset + lastOffsetDelta) as Offset
    if (batchMaxTimestamp > maxTimestamp) {
      maxTimestamp = batchMaxTimestamp
      offsetOfMaxTimestamp = lastOffset
    }
    batches.push({
      sizeInBytes: batch.sizeInBytes,
      baseOffset: offset,
      lastOffset,
      maxTimestamp: batchMaxTimestamp,
    })
    offset = (lastOffset + 1) as Offset
  }
  const epochStarts = epoch !== undefined && epoch >= 0 ? [{ epoch, startOffset: nextOffset }] : []
  return {
    batches,
    epochStarts,
    info: {
      firstOffset: nextOffset,
      lastOffset: (offset - 1) as Offset,
      logAppendTimeMs,
      maxTimestamp,
      offsetOfMaxTimestamp,
      shallowCount: summaries.length,
      validBytes: buffer.length,
    },
  }
}

function checkFollowerOffsets(
  buffer: Buffer,
  summaries: readonly BatchSummary[],
  rules: FollowerRules,
): ValidatedAppend {
  const { nextOffset, offsetGapsAllowed } = rules
  const batches: AppendedBatch[] = []
  const epochStarts: EpochStart[] = []
  let expected = nextOffset
  let epoch = rules.latestEpoch
  let maxTimestamp = NO_TIMESTAMP
  let offsetOfMaxTimestamp = nextOffset
  for (const batch of summaries) {
    if (offsetGapsAllowed ? batch.baseOffset < expected : batch.baseOffset !== expected) {
      throw new StorageError(
        'UNEXPECTED_APPEND_OFFSET',
        `batch base offset ${batch.baseOffset}, expected ${expected} (log end offset ${nextOffset})`,
      )
    }
    if (batch.partitionLeaderEpoch >= 0 && batch.partitionLeaderEpoch < epoch) {
      throw new StorageError(
        'INVALID_LEADER_EPOCH',
        `batch epoch ${batch.partitionLeaderEpoch} after epoch ${epoch}`,
      )
    }
    if (batch.partitionLeaderEpoch > epoch) {
      epoch = batch.partitionLeaderEpoch
      epochStarts.push({ epoch, startOffset: batch.baseOffset })
    }
    if (batch.maxTimestamp > maxTimestamp) {
      maxTimestamp = batch.maxTimestamp
      offsetOfMaxTimestamp = batch.lastOffset
    }
    batches.push(batch)
    expected = (batch.lastOffset + 1) as Offset
  }
  return {
    batches,
    epochStarts,
    info: {
      firstOffset: nextOffset,
      lastOffset: (expected - 1) as Offset,
      logAppendTimeMs: NO_LOG_APPEND_TIME,
      maxTimestamp,
      offsetOfMaxTimestamp,
      shallowCount: summaries.length,
      validBytes: buffer.length,
    },
  }
}

/** An append without batches: nothing written, no offsets (Kafka answers -1). */
export function emptyAppendInfo(nextOffset: Offset): ValidatedAppendInfo {
  return {
    firstOffset: NO_OFFSET,
    lastOffset: NO_OFFSET,
    logAppendTimeMs: NO_LOG_APPEND_TIME,
    maxTimestamp: NO_TIMESTAMP,
    offsetOfMaxTimestamp: nextOffset,
    shallowCount: 0,
    validBytes: 0,
  }
}
