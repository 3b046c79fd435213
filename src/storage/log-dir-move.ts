/**
 * Moving a partition's directory from one log dir to another (AlterReplicaLogDirs), in
 * steps that a crash at any point leaves recoverable, without Kafka's future replica
 * fetcher: the log is closed first, so its files no longer change.
 *
 * 1. copy every file into `<dest>/<topic>-<partition>.<id>-future`, each fsynced, then the
 *    directory and its parent;
 * 2. rename the source to `<src>/<topic>-<partition>.<id>-delete` (marked for deletion);
 * 3. rename the future directory to `<dest>/<topic>-<partition>`;
 * 4. remove the marked source.
 *
 * At startup (LogManager.open), `-delete` directories are removed as before, and a `-future`
 * directory is promoted by step 3 when no log dir holds its partition (the crash came
 * between steps 2 and 3: the copy is complete, the source is gone), else removed (the crash
 * came before step 2: the source is intact). The names are Kafka's (UnifiedLog's
 * `-future` and `-delete` suffixes), so Kafka's tools read them alike.
 */
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import type { FileSystem } from '../common/file-system.js'
import { parseTopicPartition, type TopicPartition, topicPartitionDirName } from './unified-log.js'

export const DELETE_DIR_SUFFIX = '-delete'
export const FUTURE_DIR_SUFFIX = '-future'

/** 1 MiB: the copy's read and write size. */
const COPY_CHUNK_BYTES = 1024 * 1024

/** `<topic>-<partition>.<id><suffix>`, Kafka's name for a directory being moved or deleted. */
export function markedDirName(tp: TopicPartition, id: string, suffix: string): string {
  return `${topicPartitionDirName(tp)}.${id}${suffix}`
}

/** The partition of a `-future` directory name, undefined when it is not one. */
export function futureDirPartition(name: string): TopicPartition | undefined {
  const m = /^(.+)\.[0-9a-f]{32}-future$/.exec(name)
  return m ? parseTopicPartition(m[1]) : undefined
}

/** Copies the closed log directory `from` into a new directory `to`, durably. */
async function copyDir(fs: FileSystem, from: string, to: string): Promise<void> {
  await fs.mkdir(to)
  const buffer = Buffer.allocUnsafe(COPY_CHUNK_BYTES)
  for (const name of await fs.readdir(from)) {
    const stat = await fs.stat(join(from, name))
    // A log directory holds files only; anything else is not the log's.
    if (!stat.isFile) continue
    const source = await fs.open(join(from, name), 'r')
    try {
      const target = await fs.open(join(to, name), 'wx+')
      try {
        for (let position = 0; ; ) {
          const n = await source.read(buffer, 0, COPY_CHUNK_BYTES, position)
          if (n === 0) break
          await target.write(buffer.subarray(0, n), position)
          position += n
        }
        await target.sync()
      } finally {
        await target.close()
      }
    } finally {
      await source.close()
    }
  }
  await fs.syncDir(to)
}

/**
 * Moves the closed log directory of `tp` from log dir `sourceLogDir` to `destLogDir`
 * (steps 1-4 above); returns the new directory. A failure before step 2 removes the
 * partial copy and leaves the source as it was.
 */
export async function moveLogDir(
  fs: FileSystem,
  tp: TopicPartition,
  sourceLogDir: string,
  destLogDir: string,
): Promise<string> {
  const id = randomUUID().replaceAll('-', '')
  const source = join(sourceLogDir, topicPartitionDirName(tp))
  const future = join(destLogDir, markedDirName(tp, id, FUTURE_DIR_SUFFIX))
  const dest = join(destLogDir, topicPartitionDirName(tp))
  try {
    await copyDir(fs, source, future)
    await fs.syncDir(destLogDir)
  } catch (err) {
    await fs.rmdir(future).catch(() => undefined)
    throw err
  }
  const marked = join(sourceLogDir, markedDirName(tp, id, DELETE_DIR_SUFFIX))
  await fs.rename(source, marked)
  await fs.syncDir(sourceLogDir)
  await fs.rename(future, dest)
  await fs.syncDir(destLogDir)
  await fs.rmdir(marked)
  return dest
}
