/**
 * Opening a partition directory (Kafka's LogLoader): clean up temp files, open segments,
 * and unless the previous shutdown was clean, recover from the segment holding the
 * recovery point: validate every batch, truncate at the first invalid one, drop the
 * segments after it, rebuild indexes. Indexes found missing or corrupt anywhere are
 * rebuilt the same way; a sound one below the recovery point is kept, and its segment's
 * .log is not read. So a restart after kill -9 costs the data written since the last
 * flush, not the size of the log (an index is checked from its used entries only: see
 * abstract-index.ts).
 */
import { basename, join } from 'node:path'
import type { Clock } from '../common/clock.js'
import type { FileSystem } from '../common/file-system.js'
import type { Logger } from '../common/logger.js'
import {
  FIRST_OFFSET,
  type LeaderEpoch,
  maxOffset,
  minOffset,
  type Offset,
  toOffset,
} from '../common/types.js'
import { LeaderEpochFileCache, UNDEFINED_EPOCH } from './leader-epoch-cache.js'
import { segmentOptions } from './local-log.js'
import { hasCompactPolicy, type LogConfig } from './log-config.js'
import {
  filenamePrefixFromOffset,
  INDEX_FILE_SUFFIX,
  logFilePath,
  TIME_INDEX_FILE_SUFFIX,
} from './log-file-names.js'
import type { LogSegment, SegmentOptions } from './log-segment.js'
import { createSegment, openSegment, openSegmentLazily } from './log-segment-open.js'
import { checkBatch } from './record-batch-check.js'
import { TXN_INDEX_FILE_SUFFIX } from './transaction-index.js'
import type { UnifiedLogOptions } from './unified-log-options.js'

/** Leftovers of interrupted deletes, compactions or checkpoint writes. */
const TEMP_FILE_SUFFIXES = ['.deleted', '.cleaned', '.swap', '.tmp']
const SEGMENT_FILE = /^(\d{20})\.(log|index|timeindex|txnindex)$/
const SWAP_LOG_FILE = /^(\d{20})\.log\.swap$/
/** Bytes read at a time while scanning a swap file for its end. */
const SWAP_SCAN_BYTES = 1 << 20

export interface LoadParams {
  readonly fs: FileSystem
  readonly dir: string
  readonly segmentOptions: SegmentOptions
  readonly nowMs: number
  readonly logger: Logger
  readonly hadCleanShutdown: boolean
  readonly recoveryPoint: Offset
  readonly logStartOffset: Offset
  readonly leaderEpochCache: LeaderEpochFileCache
  /** The log is compacted: batches may skip offsets. */
  readonly allowOffsetGaps?: boolean
}

export interface LoadedLog {
  readonly segments: LogSegment[]
  readonly logEndOffset: Offset
  readonly logStartOffset: Offset
  readonly recoveryPoint: Offset
}

interface RecoveryOutcome {
  /** Offset after the last valid batch of the recovered segment, undefined if it has none. */
  readonly nextOffset: Offset | undefined
  /** True when the segment was cut, so later segments cannot be trusted. */
  readonly truncated: boolean
}

/**
 * The log's directory made (a new log: createNewLog) or loaded (loadLog), with its
 * leader-epoch cache: what UnifiedLog.open builds the log from.
 */
export async function openLogDir(
  options: UnifiedLogOptions,
  resolved: { fs: FileSystem; config: LogConfig; clock: Clock; logger: Logger },
): Promise<{ createdNew: boolean; leaderEpochCache: LeaderEpochFileCache; loaded: LoadedLog }> {
  const { fs, config, logger } = resolved
  const createdNew = await fs.mkdir(options.dir) // made now: no listing, nothing to read in it
  const leaderEpochCache = await LeaderEpochFileCache.load(fs, options.dir, logger, createdNew)
  const params = {
    fs,
    dir: options.dir,
    segmentOptions: segmentOptions(config),
    nowMs: resolved.clock.nowMs(),
    // A child only while loading: the log's own messages name it themselves.
    logger: createdNew ? logger : logger.child({ log: basename(options.dir) }),
    // A damaged leader-epoch checkpoint is rebuilt by recovering every segment (see there).
    hadCleanShutdown: (options.hadCleanShutdown ?? false) && !leaderEpochCache.damaged,
    recoveryPoint: leaderEpochCache.damaged ? (0 as Offset) : (options.recoveryPoint ?? (0 as Offset)),
    logStartOffset: options.logStartOffset ?? (0 as Offset),
    leaderEpochCache,
    allowOffsetGaps: hasCompactPolicy(config) || options.wasCompacted === true,
  }
  const loaded = createdNew ? await createNewLog(params) : await loadLog(params)
  return { createdNew, leaderEpochCache, loaded }
}

export async function loadLog(loadParams: LoadParams): Promise<LoadedLog> {
  let params = loadParams
  const { fs, dir } = params
  // The caller (UnifiedLog.open) made the directory: a second mkdir is a syscall per partition.
  let names = await fs.readdir(dir)
  if (names.some((name) => SWAP_LOG_FILE.test(name))) {
    await completeSwaps(params, names)
    names = await fs.readdir(dir)
    // A swapped-in segment is a cleaned one whatever the topic's policy is now.
    params = { ...params, allowOffsetGaps: true }
  }
  await removeTempFiles(params, names)
  const baseOffsets = await findSegmentBaseOffsets(params, names)
  const opened = await openSegments(params, baseOffsets, new Set(names))
  const recoveredSegments = await recoverSegments(params, opened)
  let segments = recoveredSegments.segments
  const recovered = recoveredSegments.recovered.length > 0
  let logStartOffset = maxOffset(params.logStartOffset, segments[0]?.baseOffset ?? params.logStartOffset)
  let logEndOffset = await readLogEndOffset(segments)
  if (segments.length === 0 || logEndOffset < logStartOffset) {
    segments = await restartAt(params, segments, logStartOffset, logEndOffset)
    logEndOffset = logStartOffset
  }
  logStartOffset = maxOffset(logStartOffset, segments[0].baseOffset)
  const active = segments[segments.length - 1]
  const rebuilt = new Set(recoveredSegments.recovered)
  for (const segment of segments) {
    if (segment === active) continue
    // Rebuilt indexes of segments that stay inactive go to disk now, trimmed and fsynced;
    // sound ones left preallocated by a crash are trimmed.
    if (rebuilt.has(segment)) await segment.onBecomeInactiveSegment()
    // A lazily opened segment was trimmed by the roll or close that made it inactive.
    else if (segment.isLoaded) await segment.trimIndexes()
  }
  await active.loadLargestTimestamp()
  await active.onBecomeActiveSegment()
  await params.leaderEpochCache.truncateFromEnd(logEndOffset)
  await params.leaderEpochCache.truncateFromStart(logStartOffset)
  let recoveryPoint = minOffset(params.recoveryPoint, logEndOffset)
  if (recovered && logEndOffset > params.recoveryPoint) {
    // Recovered bytes past the recovery point came from the page cache of a dead process:
    // make them durable before trusting them. Below it they already are, so a log not
    // written since its last flush (most of them, after a crash) costs no fsync.
    for (const segment of segments)
      if (segment.baseOffset >= floorBase(segments, recoveryPoint)) await segment.flush()
  }
  if (recovered || params.hadCleanShutdown) recoveryPoint = logEndOffset
  return { segments, logEndOffset, logStartOffset, recoveryPoint }
}

/**
 * A log whose directory the caller just made (a new replica): nothing to list, read or
 * recover, so one empty segment at the log start, its index files made when first written.
 * What loadLog would find in an empty directory, without its listing and reads.
 */
export async function createNewLog(
  params: Pick<LoadParams, 'fs' | 'dir' | 'segmentOptions' | 'nowMs' | 'logStartOffset'>,
): Promise<LoadedLog> {
  const { logStartOffset } = params
  const segment = await createSegment(
    params.fs,
    params.dir,
    logStartOffset,
    params.segmentOptions,
    params.nowMs,
    '',
    true,
  )
  return { segments: [segment], logEndOffset: logStartOffset, logStartOffset, recoveryPoint: logStartOffset }
}

/**
 * Finishes cleaner swaps a crash interrupted (Kafka's LogLoader.completeSwapOperations). A
 * `<base>.log.swap` exists only once the cleaned segment was complete and fsynced, so it
 * wins: the segments it replaces (those starting in [base, its next offset)) are deleted
 * and it takes its final name; its indexes are rebuilt. `.cleaned` files (a swap that had
 * not begun) are removed with the other temporary files, leaving the old segments.
 */
async function completeSwaps(params: LoadParams, names: readonly string[]): Promise<void> {
  const { fs, dir, logger } = params
  const swaps = names
    .map((name) => SWAP_LOG_FILE.exec(name))
    .filter((match) => match !== null)
    .map((match) => toOffset(Number(match[1])))
    .sort((a, b) => a - b)
  for (const baseOffset of swaps) {
    const prefix = baseOffset.toString().padStart(20, '0')
    const swapPath = join(dir, `${prefix}.log.swap`)
    const nextOffset = await scanNextOffset(fs, swapPath, baseOffset)
    for (const name of await fs.readdir(dir)) {
      const match = SEGMENT_FILE.exec(name)
      if (match === null) continue
      const base = Number(match[1])
      if (base < baseOffset || base >= nextOffset) continue
      logger.warn({ dir, file: name, swap: swapPath }, 'deleting segment file replaced by a cleaned segment')
      await fs.unlink(join(dir, name))
    }
    for (const index of ['index', 'timeindex']) {
      const indexSwap = join(dir, `${prefix}.${index}.swap`)
      if (names.includes(`${prefix}.${index}.swap`)) await fs.unlink(indexSwap)
    }
    // The aborted-transaction index cannot be rebuilt from the segment alone: it is kept.
    if (names.includes(`${prefix}.txnindex.swap`))
      await fs.rename(join(dir, `${prefix}.txnindex.swap`), join(dir, `${prefix}.txnindex`))
    await fs.rename(swapPath, join(dir, `${prefix}.log`))
    logger.warn({ dir, baseOffset, nextOffset }, 'completed an interrupted cleaner swap')
  }
  await fs.syncDir(dir)
}

/** Offset after the last valid batch of a segment file (its base offset when it holds none). */
async function scanNextOffset(fs: FileSystem, path: string, baseOffset: Offset): Promise<Offset> {
  const handle = await fs.open(path, 'r')
  try {
    const { size } = await handle.stat()
    let nextOffset = baseOffset
    let position = 0
    let window = Buffer.alloc(0)
    let windowStart = 0
    const fill = async (from: number, length: number) => {
      window = Buffer.alloc(Math.min(length, size - from))
      let filled = 0
      while (filled < window.length) {
        const n = await handle.read(window, filled, window.length - filled, from + filled)
        if (n === 0) break
        filled += n
      }
      window = window.subarray(0, filled)
      windowStart = from
    }
    while (position < size) {
      if (position + 12 > windowStart + window.length) await fill(position, SWAP_SCAN_BYTES)
      if (position + 12 > windowStart + window.length) break
      const batchBytes = 12 + window.readInt32BE(position - windowStart + 8)
      if (batchBytes <= 12 || position + batchBytes > size) break
      if (position + batchBytes > windowStart + window.length)
        await fill(position, Math.max(SWAP_SCAN_BYTES, batchBytes))
      const check = checkBatch(window, position - windowStart, window.length, size)
      if (!check.ok) break
      nextOffset = (check.batch.lastOffset + 1) as Offset
      position += check.batch.sizeInBytes
    }
    return nextOffset
  } finally {
    await handle.close()
  }
}

async function removeTempFiles(params: LoadParams, names: readonly string[]): Promise<void> {
  for (const name of names) {
    if (!TEMP_FILE_SUFFIXES.some((suffix) => name.endsWith(suffix))) continue
    params.logger.warn({ dir: params.dir, file: name }, 'removing leftover temporary file')
    await params.fs.unlink(join(params.dir, name))
  }
}

/** Base offsets of the .log files, ascending; index files without a .log are deleted. */
async function findSegmentBaseOffsets(params: LoadParams, names: readonly string[]): Promise<Offset[]> {
  const logs = new Set<Offset>()
  for (const name of names) {
    const match = SEGMENT_FILE.exec(name)
    if (match?.[2] === 'log') logs.add(toOffset(Number(match[1])))
  }
  for (const name of names) {
    const match = SEGMENT_FILE.exec(name)
    if (match === null || match[2] === 'log' || logs.has(toOffset(Number(match[1])))) continue
    params.logger.warn({ dir: params.dir, file: name }, 'deleting index file without a log segment')
    await params.fs.unlink(join(params.dir, name))
  }
  return [...logs].sort((a, b) => a - b)
}

/**
 * Opens the segments. After a clean shutdown the inactive ones whose two indexes exist are
 * opened lazily (Kafka's LazyIndex): a stat each, their files opened and their indexes read
 * on first use; the active segment, and every segment after a crash, are opened and their
 * indexes checked now, so recovery can rebuild what is unsound.
 */
async function openSegments(
  params: LoadParams,
  baseOffsets: readonly Offset[],
  names: ReadonlySet<string>,
): Promise<OpenedSegment[]> {
  const opened: OpenedSegment[] = []
  for (const [i, baseOffset] of baseOffsets.entries()) {
    const prefix = filenamePrefixFromOffset(baseOffset)
    const hasTxnIndex = names.has(prefix + TXN_INDEX_FILE_SUFFIX)
    const lazy =
      params.hadCleanShutdown &&
      i < baseOffsets.length - 1 &&
      names.has(prefix + INDEX_FILE_SUFFIX) &&
      names.has(prefix + TIME_INDEX_FILE_SUFFIX)
    if (lazy) {
      const stat = await params.fs.stat(logFilePath(params.dir, baseOffset))
      const segment = await openSegmentLazily(
        params.fs,
        params.dir,
        baseOffset,
        params.segmentOptions,
        params.nowMs,
        { sizeBytes: stat.size, mtimeMs: stat.mtimeMs, hasTxnIndex },
        (problem) =>
          params.logger.warn({ segment: segment.logPath, problem }, 'rebuilding index of log segment'),
      )
      opened.push({ segment, indexProblem: undefined })
      continue
    }
    const { segment, indexProblem } = await openSegment(
      params.fs,
      params.dir,
      baseOffset,
      params.segmentOptions,
      params.nowMs,
      hasTxnIndex,
    )
    opened.push({ segment, indexProblem })
  }
  return opened
}

interface OpenedSegment {
  readonly segment: LogSegment
  readonly indexProblem: string | undefined
}

/** Base offset of the segment holding `offset`, or -1 when it precedes them all. */
function floorBase(segments: readonly LogSegment[], offset: Offset): number {
  let base = -1
  for (const segment of segments) if (segment.baseOffset <= offset) base = segment.baseOffset
  return base
}

async function recoverSegments(
  params: LoadParams,
  opened: readonly OpenedSegment[],
): Promise<{ segments: LogSegment[]; recovered: LogSegment[] }> {
  const segments = opened.map((o) => o.segment)
  const recoverFromBase = params.hadCleanShutdown ? Infinity : floorBase(segments, params.recoveryPoint)
  const kept: LogSegment[] = []
  const recovered: LogSegment[] = []
  for (let i = 0; i < opened.length; i++) {
    const { segment, indexProblem } = opened[i]
    kept.push(segment)
    const unflushed = segment.baseOffset >= recoverFromBase
    if (!unflushed && indexProblem === undefined) continue
    // A new log's index files are made at its first roll or close (createLazily): one that
    // crashed before has none, which the recovery it gets anyway rebuilds without a word.
    if (indexProblem !== undefined && !(unflushed && indexProblem.endsWith(' missing'))) {
      params.logger.warn(
        { segment: segment.logPath, problem: indexProblem },
        'rebuilding index of log segment',
      )
    }
    recovered.push(segment)
    const outcome = await recoverSegment(params, segment)
    if (outcome.truncated) {
      await deleteSegments(
        params,
        opened.slice(i + 1).map((o) => o.segment),
        'after a truncated segment',
      )
      break
    }
  }
  return { segments: kept, recovered }
}

async function recoverSegment(params: LoadParams, segment: LogSegment): Promise<RecoveryOutcome> {
  const epochs: { epoch: LeaderEpoch; startOffset: Offset }[] = []
  let latestEpoch: number = params.leaderEpochCache.latestEpoch ?? UNDEFINED_EPOCH
  const result = await segment.recover(
    segment.baseOffset,
    false,
    (batch) => {
      if (batch.partitionLeaderEpoch > latestEpoch) {
        latestEpoch = batch.partitionLeaderEpoch
        epochs.push({ epoch: batch.partitionLeaderEpoch, startOffset: batch.baseOffset })
      }
    },
    params.allowOffsetGaps === true,
  )
  for (const { epoch, startOffset } of epochs) await params.leaderEpochCache.assign(epoch, startOffset)
  if (result.truncatedBytes === 0) return { nextOffset: result.nextOffset, truncated: false }
  params.logger.warn(
    {
      segment: segment.logPath,
      problem: result.problem,
      validBytes: result.validBytes,
      truncatedBytes: result.truncatedBytes,
      truncatedAtOffset: result.nextOffset ?? segment.baseOffset,
    },
    'recovery truncated an invalid tail of a log segment',
  )
  return { nextOffset: result.nextOffset, truncated: true }
}

async function deleteSegments(
  params: LoadParams,
  segments: readonly LogSegment[],
  why: string,
): Promise<void> {
  for (const segment of segments) {
    params.logger.warn({ segment: segment.logPath, sizeInBytes: segment.size }, `deleting log segment ${why}`)
    await segment.deleteFiles()
  }
}

async function readLogEndOffset(segments: readonly LogSegment[]): Promise<Offset> {
  const active = segments[segments.length - 1]
  if (active === undefined) return FIRST_OFFSET
  return active.readNextOffset()
}

/** An empty directory, or a log ending before its start offset: start over at `logStartOffset`. */
async function restartAt(
  params: LoadParams,
  segments: readonly LogSegment[],
  logStartOffset: Offset,
  logEndOffset: Offset,
): Promise<LogSegment[]> {
  if (segments.length > 0) {
    params.logger.warn(
      { dir: params.dir, logStartOffset, logEndOffset },
      'log ends before its start offset; deleting it',
    )
    await deleteSegments(params, segments, 'below the log start offset')
    await params.leaderEpochCache.clearAndFlush()
  }
  return [await createSegment(params.fs, params.dir, logStartOffset, params.segmentOptions, params.nowMs)]
}
