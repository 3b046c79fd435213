/**
 * tidelog storage: Kafka-compatible partition logs on disk. The broker uses LogManager
 * (all logs of its log.dirs) and UnifiedLog (one replica's log); the rest is exported for
 * tools and tests. Storage takes its FileSystem from the caller: Node's real one is
 * runtime/node-file-system.ts.
 */

export type { FileHandle, FileStat, FileSystem, OpenFlags } from '../common/file-system.js'
export { BoundedFileSystem, DEFAULT_MAX_OPEN_FILES } from './bounded-file-system.js'
export type { EpochEntry, TopicPartitionOffset } from './checkpoint-file.js'
export type { StorageErrorCode } from './errors.js'
export { CorruptSegmentError, isStorageError, StorageError } from './errors.js'
export type { EpochEndOffset } from './leader-epoch-cache.js'
export {
  LEADER_EPOCH_CHECKPOINT_FILENAME,
  LeaderEpochFileCache,
  UNDEFINED_EPOCH,
  UNDEFINED_EPOCH_OFFSET,
} from './leader-epoch-cache.js'
export type { LocalReadResult } from './local-log.js'
export { LocalLog } from './local-log.js'
export type { CleanableRange, CleanOptions, CleanStats, LogCleanerOptions } from './log-cleaner.js'
export { cleanableRange, cleanLog, LogCleaner } from './log-cleaner.js'
export type { CleanupPolicy, LogConfig, LogConfigProperties } from './log-config.js'
export {
  DEFAULT_LOG_CONFIG,
  fromProperties,
  hasCompactPolicy,
  hasDeletePolicy,
  LOG_CONFIG_KEYS,
  toProperties,
} from './log-config.js'
export { filenamePrefixFromOffset } from './log-file-names.js'
export type { LogManagerOptions } from './log-manager.js'
export {
  CLEAN_SHUTDOWN_FILE,
  CLEANER_OFFSET_CHECKPOINT_FILE,
  HIGH_WATERMARK_CHECKPOINT_FILE,
  LOG_START_OFFSET_CHECKPOINT_FILE,
  LogManager,
  RECOVERY_POINT_CHECKPOINT_FILE,
} from './log-manager.js'
export { LogSegment } from './log-segment.js'
export type { AppendRules, EpochStart, ValidatedAppend, ValidatedAppendInfo } from './log-validator.js'
export { resolveLogAppendTime, validateAppend, validateBatches } from './log-validator.js'
export { OffsetIndex } from './offset-index.js'
export { TimeIndex } from './time-index.js'
export type {
  AppendOptions,
  FetchDataInfo,
  LeaderEpoch,
  LogAppendInfo,
  Offset,
  ReadOptions,
  TimestampAndOffset,
  TopicPartition,
  UnifiedLogOptions,
} from './unified-log.js'
export { parseTopicPartition, topicPartitionDirName, UnifiedLog } from './unified-log.js'
