/**
 * Kafka's checkpoint text files: a version line (0), a count line, then one entry per line.
 * Written atomically (temp file, fsync, rename, directory fsync) so a crash leaves the old
 * or the new file. Used for leader-epoch-checkpoint and the broker's offset checkpoints.
 */
import { TidelogError } from '../common/errors.js'
import { exists, type FileSystem, readWholeFile, writeFileAtomically } from '../common/file-system.js'
import { isOffset, type LeaderEpoch, type Offset, toLeaderEpoch, toOffset } from '../common/types.js'

export const CHECKPOINT_VERSION = 0

/** A checkpoint file that does not parse: its reader falls back as if it were missing. */
export class CheckpointFormatError extends TidelogError {
  constructor(message: string) {
    super('ERR_CHECKPOINT_FORMAT', message)
    this.name = 'CheckpointFormatError'
  }
}

export interface EntryFormat<T> {
  toLine(entry: T): string
  /** Undefined when the line is malformed. */
  fromLine(line: string): T | undefined
}

export class CheckpointFile<T> {
  constructor(
    private readonly fs: FileSystem,
    readonly path: string,
    private readonly format: EntryFormat<T>,
  ) {}

  async write(entries: readonly T[]): Promise<void> {
    await this.writeLines(entries.map((e) => this.format.toLine(e)))
  }

  /** Writes entries already formatted (`format.toLine`), one a line. */
  async writeLines(lines: readonly string[]): Promise<void> {
    const body = lines.length === 0 ? '' : `${lines.join('\n')}\n`
    const text = `${CHECKPOINT_VERSION}\n${lines.length}\n${body}`
    await writeFileAtomically(this.fs, this.path, Buffer.from(text, 'utf8'))
  }

  /** The entries, [] when the file does not exist; throws CheckpointFormatError when malformed. */
  async read(): Promise<T[]> {
    if (!(await exists(this.fs, this.path))) return []
    const text = (await readWholeFile(this.fs, this.path)).toString('utf8')
    const lines = text.split('\n')
    if (lines.at(-1) === '') lines.pop()
    if (lines[0]?.trim() !== String(CHECKPOINT_VERSION)) {
      throw new CheckpointFormatError(`${this.path}: unsupported version '${lines[0]}'`)
    }
    const count = Number(lines[1]?.trim())
    if (!Number.isInteger(count) || count < 0 || lines.length - 2 !== count) {
      throw new CheckpointFormatError(`${this.path}: expected ${lines[1]} entries, found ${lines.length - 2}`)
    }
    return lines.slice(2).map((line) => {
      const entry = this.format.fromLine(line)
      if (entry === undefined) throw new CheckpointFormatError(`${this.path}: malformed line '${line}'`)
      return entry
    })
  }
}

function parseNonNegativeInteger(text: string | undefined): number | undefined {
  if (text === undefined || !/^-?\d+$/.test(text)) return undefined
  const value = Number(text)
  return Number.isSafeInteger(value) ? value : undefined
}

/** A leader epoch is an int32: a larger number in a checkpoint is a bad line. */
const INT32_MAX = 0x7fffffff

export interface TopicPartitionOffset {
  readonly topic: string
  readonly partition: number
  readonly offset: Offset
}

/** One `topic partition offset` line, from its fields: a broker writes one per partition. */
export function topicPartitionOffsetLine(topic: string, partition: number, offset: Offset): string {
  return `${topic} ${partition} ${offset}`
}

/** `topic partition offset` lines: recovery-point, replication-offset and log-start-offset checkpoints. */
export const topicPartitionOffsetFormat: EntryFormat<TopicPartitionOffset> = {
  toLine: (e) => topicPartitionOffsetLine(e.topic, e.partition, e.offset),
  fromLine(line) {
    const parts = line.trim().split(' ')
    if (parts.length !== 3) return undefined
    const partition = parseNonNegativeInteger(parts[1])
    const offset = parseNonNegativeInteger(parts[2])
    // -1 is Kafka's "none"; below it the line is not an offset.
    if (parts[0] === '' || partition === undefined || offset === undefined || !isOffset(offset))
      return undefined
    return { topic: parts[0], partition, offset }
  },
}

export interface EpochEntry {
  readonly epoch: LeaderEpoch
  readonly startOffset: Offset
}

/** `epoch startOffset` lines: leader-epoch-checkpoint. */
export const epochEntryFormat: EntryFormat<EpochEntry> = {
  toLine: (e) => `${e.epoch} ${e.startOffset}`,
  fromLine(line) {
    const parts = line.trim().split(/\s+/)
    if (parts.length !== 2) return undefined
    const epoch = parseNonNegativeInteger(parts[0])
    const startOffset = parseNonNegativeInteger(parts[1])
    if (epoch === undefined || startOffset === undefined || epoch < 0 || startOffset < 0) return undefined
    if (epoch > INT32_MAX) return undefined
    return { epoch: toLeaderEpoch(epoch), startOffset: toOffset(startOffset) }
  },
}
