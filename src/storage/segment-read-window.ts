/**
 * What a segment read carries while it walks the file: the window of bytes in memory, and
 * what it found damaged, thrown only if the segment did not change under the read.
 */
import type { Offset } from '../common/types.js'
import { CorruptSegmentError } from './errors.js'

/** What a CorruptionFinding needs of its segment. */
export interface FindingSegment {
  readonly logPath: string
  readonly baseOffset: Offset
  isLayoutVersion(version: number): boolean
}

/**
 * What a read found wrong in the segment's bytes, if anything. Reported only when the file
 * did not change under the read (no truncation or recovery since it began, not deleted or
 * replaced): a read racing a truncation can walk bytes that are no longer there, which is
 * no damage.
 */
export class CorruptionFinding {
  private finding: { position: number; problem: string } | undefined

  constructor(
    private readonly segment: FindingSegment,
    private readonly layoutVersion: number,
  ) {}

  found(position: number, problem: string): void {
    this.finding ??= { position, problem }
  }

  get isFound(): boolean {
    return this.finding !== undefined
  }

  describe(): string {
    return this.finding === undefined ? 'nothing' : `byte ${this.finding.position}: ${this.finding.problem}`
  }

  throwIfFound(): void {
    if (this.finding === undefined || !this.segment.isLayoutVersion(this.layoutVersion)) return
    throw new CorruptSegmentError(
      this.segment.logPath,
      this.segment.baseOffset,
      this.finding.position,
      this.finding.problem,
    )
  }
}

/** A window of file bytes held in memory while scanning batch headers. */
export class ReadWindow {
  buf: Buffer = Buffer.alloc(0)
  start = 0

  get end(): number {
    return this.start + this.buf.length
  }
  covers(position: number, length: number): boolean {
    return position >= this.start && position + length <= this.end
  }
}

/** How translateOffset walks to its batch; every field has a default. */
export interface OffsetWalk {
  /** The window to read into (and leave holding the batch's header); default a new one. */
  readonly window?: ReadWindow
  /** Bytes to read past the batch found (a fetch's maxBytes); default 0. */
  readonly readAheadBytes?: number
  /** Where damage met on the way is noted; default: none noted. */
  readonly corruption?: CorruptionFinding
  /** Walk from byte 0, not from the offset index; default: while the index is distrusted. */
  readonly fromStart?: boolean
  /** Batches may skip offsets (compaction); default true. */
  readonly allowOffsetGaps?: boolean
}
