/**
 * Per-partition producer state for idempotent producers (Kafka's ProducerStateManager,
 * ProducerStateEntry and ProducerAppendInfo): for each producer id its epoch and the
 * sequence and offset ranges of its last 5 batches.
 *
 * Behavior (Kafka 3.x rules, checked on the leader only; followers apply what they fetch):
 * - a batch whose epoch and first/last sequences equal one of the last 5 is a retry: it is
 *   answered with the offsets it was first written at, and nothing is appended (Kafka
 *   >= 2.x answers success, not DUPLICATE_SEQUENCE_NUMBER);
 * - an epoch older than the producer's: INVALID_PRODUCER_EPOCH;
 * - a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
 * - same epoch: the first sequence must follow the last one (Int32.MAX wraps to 0), else
 *   OUT_OF_ORDER_SEQUENCE_NUMBER;
 * - a producer id with no state here (new, expired, or its batches gone with retention or
 *   truncation) is accepted at any sequence: since KIP-360 (Kafka 2.5) brokers no longer
 *   answer UNKNOWN_PRODUCER_ID.
 *
 * The state follows the log through the log's ProducerStateHook, on the log's queue: so a
 * batch's check and its offsets happen with no other append in between, and truncation
 * rebuilds it before the next append. It survives restarts as `.snapshot` files (see
 * storage/producer-state-snapshot.ts) plus a replay of the log after the latest one.
 */
import { assert } from '../common/assert.js'
import type { Clock } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import { maxOffset, NO_OFFSET, type Offset } from '../common/types.js'
import { BatchHeader, LOG_OVERHEAD, NO_PRODUCER_ID, NO_SEQUENCE } from '../protocol/batch-header.js'
import { ErrorCode } from '../protocol/error-codes.js'
import {
  deleteSnapshots,
  listSnapshotOffsets,
  type ProducerSnapshotEntry,
  readSnapshot,
  writeSnapshot,
} from '../storage/producer-state-snapshot.js'
import type { DuplicateBatch, ProducerStateHook, UnifiedLog } from '../storage/unified-log.js'
import { KafkaError } from './kafka-error.js'

/** Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: clients keep at most 5 requests in flight. */
export const NUM_BATCHES_TO_RETAIN = 5
export const NO_PRODUCER_EPOCH = -1
const INT32_MAX = 0x7fffffff
/** Bytes read per step when replaying the log into the state. */
const REPLAY_READ_BYTES = 1 << 20

export interface BatchMetadata {
  readonly firstSeq: number
  readonly lastSeq: number
  readonly firstOffset: Offset
  readonly lastOffset: Offset
  readonly maxTimestamp: number
}

/** `sequence + increment`, wrapping past Int32.MAX to 0 as producers do. */
export function incrementSequence(sequence: number, increment: number): number {
  if (sequence > INT32_MAX - increment) return increment - (INT32_MAX - sequence) - 1
  return sequence + increment
}

export function decrementSequence(sequence: number, decrement: number): number {
  if (sequence < decrement) return INT32_MAX - (decrement - sequence) + 1
  return sequence - decrement
}

/** True when `nextSeq` directly follows `lastSeq`. */
export function inSequence(lastSeq: number, nextSeq: number): boolean {
  return nextSeq === lastSeq + 1 || (nextSeq === 0 && lastSeq === INT32_MAX)
}

/** One producer id's state in one partition. */
export class ProducerStateEntry {
  constructor(
    readonly producerId: bigint,
    public producerEpoch: number,
    readonly batches: BatchMetadata[],
    /** Max timestamp of the last batch: producer.id.expiration.ms counts from it (Kafka). */
    public lastTimestamp: number,
  ) {}

  get lastSeq(): number {
    return this.batches.at(-1)?.lastSeq ?? NO_SEQUENCE
  }

  get lastOffset(): Offset {
    return this.batches.at(-1)?.lastOffset ?? NO_OFFSET
  }

  clone(): ProducerStateEntry {
    return new ProducerStateEntry(this.producerId, this.producerEpoch, [...this.batches], this.lastTimestamp)
  }

  /** A new epoch forgets the old one's batches; only the last 5 are kept. */
  addBatch(epoch: number, batch: BatchMetadata): void {
    if (epoch !== this.producerEpoch) {
      this.batches.length = 0
      this.producerEpoch = epoch
    }
    this.batches.push(batch)
    if (this.batches.length > NUM_BATCHES_TO_RETAIN) this.batches.shift()
    this.lastTimestamp = batch.maxTimestamp
  }

  /** The batch with exactly this epoch and sequence range, if it is among the last 5. */
  findDuplicate(epoch: number, firstSeq: number, lastSeq: number): BatchMetadata | undefined {
    if (epoch !== this.producerEpoch) return undefined
    return this.batches.find((b) => b.firstSeq === firstSeq && b.lastSeq === lastSeq)
  }
}

export interface ProducerStateOptions {
  readonly clock: Clock
  readonly logger: Logger
  /** producer.id.expiration.ms */
  readonly producerIdExpirationMs: number
}

export class ProducerStateManager implements ProducerStateHook {
  private producers = new Map<bigint, ProducerStateEntry>()
  /** Offset after the last batch the state includes: the log end once loaded. */
  private mapEndOffset = 0 as Offset

  constructor(
    private readonly log: UnifiedLog,
    private readonly options: ProducerStateOptions,
  ) {}

  get activeProducers(): ReadonlyMap<bigint, ProducerStateEntry> {
    return this.producers
  }

  get endOffset(): Offset {
    return this.mapEndOffset
  }

  lastEntry(producerId: bigint): ProducerStateEntry | undefined {
    return this.producers.get(producerId)
  }

  // ---- appends ---------------------------------------------------------------------------

  onAppend(batches: Buffer, fromLeader: boolean): DuplicateBatch | undefined {
    const updated = new Map<bigint, ProducerStateEntry>()
    let end = this.mapEndOffset
    for (let at = 0; at + LOG_OVERHEAD <= batches.length; ) {
      const header = new BatchHeader(batches, at)
      at += header.sizeInBytes
      assert(header.baseOffset === end, () => `batch at ${header.baseOffset}, producer state at ${end}`)
      end = header.nextOffset as Offset
      const producerId = header.producerId
      if (producerId === NO_PRODUCER_ID) continue
      if (fromLeader) {
        // A retry is judged against what was written before this request, as Kafka does.
        const duplicate = this.findDuplicate(header)
        if (duplicate !== undefined) return duplicate
      }
      const current = this.producers.get(producerId)
      const entry = updated.get(producerId) ?? current?.clone() ?? newEntry(producerId)
      if (fromLeader) checkLeaderBatch(entry, current, header, this.log.topicPartition)
      else if (header.producerEpoch < entry.producerEpoch) this.warnEpochRegression(entry, header)
      entry.addBatch(header.producerEpoch, batchMetadata(header))
      updated.set(producerId, entry)
    }
    // All or nothing: a refused or duplicate batch leaves the state as it was.
    for (const [producerId, entry] of updated) this.producers.set(producerId, entry)
    this.mapEndOffset = end
    return undefined
  }

  private findDuplicate(header: BatchHeader): DuplicateBatch | undefined {
    const lastSeq = incrementSequence(header.baseSequence, header.lastOffsetDelta)
    const found = this.producers
      .get(header.producerId)
      ?.findDuplicate(header.producerEpoch, header.baseSequence, lastSeq)
    if (found === undefined) return undefined
    return { firstOffset: found.firstOffset, lastOffset: found.lastOffset, maxTimestamp: found.maxTimestamp }
  }

  private warnEpochRegression(entry: ProducerStateEntry, header: BatchHeader): void {
    // Kafka logs and applies it too: the leader decided, a follower copies.
    this.options.logger.warn(
      { producerId: String(entry.producerId), epoch: header.producerEpoch, current: entry.producerEpoch },
      'replicated batch with an older producer epoch',
    )
  }

  // ---- expiry ----------------------------------------------------------------------------

  /** Forgets producers idle for producer.id.expiration.ms (by the broker's wall clock). */
  removeExpiredProducers(nowMs = this.options.clock.nowMs()): number {
    let removed = 0
    for (const [producerId, entry] of this.producers) {
      if (!this.isExpired(entry.lastTimestamp, nowMs)) continue
      this.producers.delete(producerId)
      removed++
    }
    return removed
  }

  private isExpired(lastTimestamp: number, nowMs: number): boolean {
    return nowMs - lastTimestamp >= this.options.producerIdExpirationMs
  }

  // ---- load, snapshots, truncation -------------------------------------------------------

  /**
   * Rebuilds the state: the latest readable snapshot within [logStartOffset, logEndOffset]
   * (none: empty at the log start), then every batch after it. Snapshots past the log end
   * describe batches the log no longer has (an unflushed tail lost in a crash): deleted.
   */
  async load(): Promise<void> {
    const { logStartOffset, logEndOffset, dir } = this.log
    const fs = this.log.fileSystem
    await deleteSnapshots(fs, dir, (offset) => offset > logEndOffset)
    this.producers = new Map()
    let from = logStartOffset
    const offsets = await listSnapshotOffsets(fs, dir)
    for (const offset of offsets.reverse()) {
      if (offset < logStartOffset) break
      const entries = await this.readSnapshotOrNull(offset)
      if (entries === null) continue
      this.loadSnapshotEntries(entries)
      from = offset
      break
    }
    this.mapEndOffset = from
    await this.replay(from, logEndOffset)
    assert(this.mapEndOffset === logEndOffset, () => `state at ${this.mapEndOffset}, log end ${logEndOffset}`)
  }

  private async readSnapshotOrNull(offset: Offset): Promise<ProducerSnapshotEntry[] | null> {
    try {
      return await readSnapshot(this.log.fileSystem, this.log.dir, offset)
    } catch (err) {
      if ((err as { code?: string }).code !== 'CORRUPT_SNAPSHOT') throw err
      this.options.logger.warn({ err, offset }, 'producer snapshot unreadable; deleting it')
      await deleteSnapshots(this.log.fileSystem, this.log.dir, (o) => o === offset)
      return null
    }
  }

  private loadSnapshotEntries(entries: readonly ProducerSnapshotEntry[]): void {
    const nowMs = this.options.clock.nowMs()
    for (const e of entries) {
      // Kafka drops expired producers as it loads a snapshot.
      if (this.isExpired(e.timestamp, nowMs)) continue
      const batch: BatchMetadata = {
        firstSeq: decrementSequence(e.lastSequence, e.offsetDelta),
        lastSeq: e.lastSequence,
        firstOffset: (e.lastOffset - e.offsetDelta) as Offset,
        lastOffset: e.lastOffset,
        maxTimestamp: e.timestamp,
      }
      this.producers.set(
        e.producerId,
        new ProducerStateEntry(e.producerId, e.producerEpoch, [batch], e.timestamp),
      )
    }
  }

  /** Applies the log's batches in [from, to) as a follower would (no checks). */
  private async replay(from: Offset, to: Offset): Promise<void> {
    let offset = from
    while (offset < to) {
      const read = await this.log.read(offset, {
        maxBytes: REPLAY_READ_BYTES,
        maxOffset: to,
        minOneMessage: true,
      })
      if (read.sizeInBytes === 0) break
      for (const chunk of read.records) this.replayChunk(chunk)
      offset = read.nextOffset
    }
    // The log start may fall inside a batch (DeleteRecords): the state then starts there.
    this.mapEndOffset = maxOffset(this.mapEndOffset, to)
  }

  private replayChunk(chunk: Buffer): void {
    for (let at = 0; at + LOG_OVERHEAD <= chunk.length; ) {
      const header = new BatchHeader(chunk, at)
      at += header.sizeInBytes
      // A read starts at the batch holding the offset: skip what the state already has.
      if (header.nextOffset <= this.mapEndOffset) continue
      this.mapEndOffset = header.nextOffset as Offset
      if (header.producerId === NO_PRODUCER_ID || header.isControl) continue
      const entry = this.producers.get(header.producerId) ?? newEntry(header.producerId)
      entry.addBatch(header.producerEpoch, batchMetadata(header))
      this.producers.set(header.producerId, entry)
    }
  }

  async onRoll(baseOffset: Offset): Promise<void> {
    assert(
      this.mapEndOffset === baseOffset,
      () => `roll at ${baseOffset}, producer state at ${this.mapEndOffset}`,
    )
    await this.takeSnapshot()
  }

  async onTruncated(): Promise<void> {
    const { logStartOffset, logEndOffset } = this.log
    if (logStartOffset === logEndOffset) {
      // truncateFullyAndStartAt (or a log cut to nothing): Kafka forgets everything.
      await deleteSnapshots(this.log.fileSystem, this.log.dir, () => true)
      this.producers = new Map()
      this.mapEndOffset = logEndOffset
      return
    }
    await this.load()
  }

  async onSegmentsDeleted(logStartOffset: Offset): Promise<void> {
    await deleteSnapshots(this.log.fileSystem, this.log.dir, (offset) => offset < logStartOffset)
  }

  async onClose(): Promise<void> {
    assert(this.mapEndOffset === this.log.logEndOffset, 'producer state behind the log at close')
    await this.takeSnapshot()
  }

  /** Writes `<mapEndOffset>.snapshot` (Kafka keeps the last batch of each producer only). */
  async takeSnapshot(): Promise<void> {
    const entries: ProducerSnapshotEntry[] = []
    for (const entry of this.producers.values()) {
      const last = entry.batches.at(-1)
      if (last === undefined) continue
      entries.push({
        producerId: entry.producerId,
        producerEpoch: entry.producerEpoch,
        lastSequence: last.lastSeq,
        lastOffset: last.lastOffset,
        offsetDelta: last.lastOffset - last.firstOffset,
        timestamp: entry.lastTimestamp,
        coordinatorEpoch: -1,
        currentTxnFirstOffset: -1,
      })
    }
    await writeSnapshot(this.log.fileSystem, this.log.dir, this.mapEndOffset, entries)
  }
}

function newEntry(producerId: bigint): ProducerStateEntry {
  return new ProducerStateEntry(producerId, NO_PRODUCER_EPOCH, [], -1)
}

function batchMetadata(header: BatchHeader): BatchMetadata {
  return {
    firstSeq: header.baseSequence,
    lastSeq: incrementSequence(header.baseSequence, header.lastOffsetDelta),
    // Header offsets are the log's: the batch passed validation and carries its offsets.
    firstOffset: header.baseOffset as Offset,
    lastOffset: header.lastOffset as Offset,
    maxTimestamp: header.maxTimestamp,
  }
}

/**
 * Kafka's ProducerAppendInfo.checkProducerEpoch and checkSequence for a client's batch.
 * `entry` holds this request's earlier batches; `current` is the state before the request.
 */
function checkLeaderBatch(
  entry: ProducerStateEntry,
  current: ProducerStateEntry | undefined,
  header: BatchHeader,
  tp: { topic: string; partition: number } | undefined,
): void {
  const where = tp === undefined ? '' : ` in ${tp.topic}-${tp.partition}`
  const epoch = header.producerEpoch
  const firstSeq = header.baseSequence
  const producer = `producer ${header.producerId}${where}`
  if (firstSeq < 0)
    throw new KafkaError(ErrorCode.INVALID_RECORD, `${producer}: invalid sequence ${firstSeq}`)
  if (epoch < entry.producerEpoch) {
    // Kafka answers INVALID_PRODUCER_EPOCH (not PRODUCER_FENCED) to produce since 2.7.
    throw new KafkaError(
      ErrorCode.INVALID_PRODUCER_EPOCH,
      `${producer}: epoch ${epoch} is older than ${entry.producerEpoch}`,
    )
  }
  if (epoch !== entry.producerEpoch) {
    if (firstSeq !== 0 && entry.producerEpoch !== NO_PRODUCER_EPOCH) {
      throw new KafkaError(
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        `${producer}: new epoch ${epoch} starts at sequence ${firstSeq}, not 0`,
      )
    }
    return
  }
  const unknown = current === undefined || current.producerEpoch === NO_PRODUCER_EPOCH
  if (!unknown && !inSequence(entry.lastSeq, firstSeq)) {
    throw new KafkaError(
      ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
      `${producer}: sequence ${firstSeq} after ${entry.lastSeq} (epoch ${epoch})`,
    )
  }
}
