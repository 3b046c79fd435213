/**
 * The three ways a LogSegment comes to be: created empty (a roll, a new log, the cleaner's
 * output), opened with its indexes loaded and checked (the active segment, and every
 * segment after a crash), or opened lazily (an inactive segment of a cleanly shut down
 * log: nothing opened or read until first use, as Kafka's LazyIndex).
 */
import { assert } from '../common/assert.js'
import type { FileSystem } from '../common/file-system.js'
import type { Offset } from '../common/types.js'
import {
  filenamePrefixFromOffset,
  INDEX_FILE_SUFFIX,
  joinFlat,
  logFilePath,
  TIME_INDEX_FILE_SUFFIX,
} from './log-file-names.js'
import { indexProblemOf, LogSegment, type SegmentOptions } from './log-segment.js'
import { OffsetIndex } from './offset-index.js'
import { TimeIndex } from './time-index.js'
import { TransactionIndex, TXN_INDEX_FILE_SUFFIX } from './transaction-index.js'

function segmentIndexes(
  fs: FileSystem,
  dir: string,
  baseOffset: Offset,
  options: SegmentOptions,
  fileSuffix = '',
) {
  const prefix = joinFlat(dir, filenamePrefixFromOffset(baseOffset))
  return {
    offsetIndex: new OffsetIndex(
      fs,
      prefix + INDEX_FILE_SUFFIX + fileSuffix,
      baseOffset,
      options.maxIndexBytes,
    ),
    timeIndex: new TimeIndex(
      fs,
      prefix + TIME_INDEX_FILE_SUFFIX + fileSuffix,
      baseOffset,
      options.maxIndexBytes,
    ),
    txnIndex: new TransactionIndex(fs, prefix + TXN_INDEX_FILE_SUFFIX + fileSuffix),
  }
}

/**
 * Creates a new empty segment; its indexes are preallocated as the active segment's.
 * `inNewDir`: the directory was just made (a new log), so no file of this segment can be
 * there: the index files are made when first written (AbstractIndex.createLazily) and no
 * leftover transaction index is looked for. One open instead of three opens, two
 * ftruncates and an unlink.
 */
export async function createSegment(
  fs: FileSystem,
  dir: string,
  baseOffset: Offset,
  options: SegmentOptions,
  nowMs: number,
  fileSuffix = '',
  inNewDir = false,
): Promise<LogSegment> {
  assert(Number.isSafeInteger(baseOffset) && baseOffset >= 0, () => `bad segment base offset ${baseOffset}`)
  const { offsetIndex, timeIndex, txnIndex } = segmentIndexes(fs, dir, baseOffset, options, fileSuffix)
  const log = await fs.open(logFilePath(dir, baseOffset, fileSuffix), 'w+')
  if (inNewDir) {
    offsetIndex.createLazily()
    timeIndex.createLazily()
  } else {
    try {
      await offsetIndex.create(true)
      await timeIndex.create(true)
    } catch (err) {
      await Promise.allSettled([log.close(), offsetIndex.close()])
      throw err
    }
    // A leftover index of an earlier segment at this offset (a log restarted here) is not ours.
    await txnIndex.deleteFile()
  }
  return new LogSegment({
    fs,
    dir,
    baseOffset,
    options,
    log,
    sizeInBytes: 0,
    offsetIndex,
    timeIndex,
    txnIndex: new TransactionIndex(fs, txnIndex.path),
    createdMs: nowMs,
    fileSuffix,
  })
}

/**
 * Opens an existing segment and loads its indexes. `indexProblem` says why the indexes
 * cannot be trusted (missing, corrupt); the caller then rebuilds them with recover().
 * `hasTxnIndex` false (a directory listing showed none) spares the open that finds none.
 */
export async function openSegment(
  fs: FileSystem,
  dir: string,
  baseOffset: Offset,
  options: SegmentOptions,
  nowMs: number,
  hasTxnIndex = true,
): Promise<{ segment: LogSegment; indexProblem: string | undefined }> {
  const { offsetIndex, timeIndex, txnIndex } = segmentIndexes(fs, dir, baseOffset, options)
  const log = await fs.open(logFilePath(dir, baseOffset), 'r+')
  const stat = await log.stat()
  if (hasTxnIndex) await txnIndex.load()
  const offsetProblem = await offsetIndex.load(stat.size)
  const timeProblem = await timeIndex.load(stat.size)
  const indexProblem = indexProblemOf(offsetProblem, timeProblem)
  const segment = new LogSegment({
    fs,
    dir,
    baseOffset,
    options,
    log,
    sizeInBytes: stat.size,
    offsetIndex,
    timeIndex,
    txnIndex,
    createdMs: nowMs,
    lastModifiedMs: stat.mtimeMs,
    maxTimestamp: indexProblem === undefined ? timeIndex.lastEntry : undefined,
  })
  return { segment, indexProblem }
}

/**
 * An inactive segment of a cleanly shut down log, with nothing opened or read: `sizeBytes`
 * and `mtimeMs` come from the caller's stat of the .log. The .log opens on its first read,
 * the indexes load on first use (LogSegment.ensureLoaded), and an index found unsound then
 * is rebuilt (`onIndexRebuild` says why). The .txnindex is read now when there is one (rare:
 * segments with aborted transactions), so collecting a fetch's aborted transactions stays
 * a synchronous lookup.
 */
export async function openSegmentLazily(
  fs: FileSystem,
  dir: string,
  baseOffset: Offset,
  options: SegmentOptions,
  nowMs: number,
  file: { readonly sizeBytes: number; readonly mtimeMs: number; readonly hasTxnIndex: boolean },
  onIndexRebuild: (problem: string) => void,
): Promise<LogSegment> {
  const { offsetIndex, timeIndex, txnIndex } = segmentIndexes(fs, dir, baseOffset, options)
  if (file.hasTxnIndex) await txnIndex.load()
  return new LogSegment({
    fs,
    dir,
    baseOffset,
    options,
    log: undefined,
    sizeInBytes: file.sizeBytes,
    offsetIndex,
    timeIndex,
    txnIndex,
    createdMs: nowMs,
    lastModifiedMs: file.mtimeMs,
    onIndexRebuild,
  })
}
