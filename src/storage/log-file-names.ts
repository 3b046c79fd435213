/**
 * The names of a partition log's files (Kafka's LogFileUtils): a segment's `.log`,
 * `.index` and `.timeindex` named by its base offset, and the suffixes the cleaner's swap
 * and deletion add.
 */
import { join } from 'node:path'
import type { Offset } from '../common/types.js'

export const LOG_FILE_SUFFIX = '.log'
export const INDEX_FILE_SUFFIX = '.index'
export const TIME_INDEX_FILE_SUFFIX = '.timeindex'

/** Kafka's file name: the base offset zero-padded to 20 digits. */
export function filenamePrefixFromOffset(offset: Offset): string {
  return String(offset).padStart(20, '0')
}

/**
 * `join(dir, name)` as one flat string, for paths kept per log. path.join builds its result
 * piece by piece: until something reads it, V8 keeps that as a tree of about eleven string
 * objects (~400 bytes), and a new log's index and checkpoint paths are not read before a
 * roll or an epoch change. A string decoded from bytes is one object.
 */
export function joinFlat(dir: string, name: string): string {
  return Buffer.from(join(dir, name)).toString()
}

export function logFilePath(dir: string, baseOffset: Offset, fileSuffix = ''): string {
  return join(dir, filenamePrefixFromOffset(baseOffset) + LOG_FILE_SUFFIX + fileSuffix)
}

/** Suffixes of a segment's files while the cleaner builds it, while it is swapped in, and once replaced (Kafka's). */
export const CLEANED_FILE_SUFFIX = '.cleaned'
export const SWAP_FILE_SUFFIX = '.swap'
export const DELETED_FILE_SUFFIX = '.deleted'
