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
 * Transactions (Kafka's ongoing and unreplicated transactions): a transactional batch from
 * a producer with no transaction open here opens one at its base offset; a COMMIT or ABORT
 * control batch ends it. A marker whose epoch is older than the producer's is refused with
 * INVALID_PRODUCER_EPOCH, one from an older coordinator epoch with
 * TRANSACTION_COORDINATOR_FENCED (leader only: a follower copies). A non-transactional
 * batch while a transaction is open is INVALID_TXN_STATE. The first unstable offset is the
 * first offset of the earliest open transaction, or of a transaction whose marker is not
 * yet below the high watermark (so read_committed sees an outcome only once it is
 * replicated); the partition caps it by the high watermark into the last stable offset.
 * An ABORT's transaction goes to the marker segment's `.txnindex`. KIP-890: a transactional
 * produce that would open a transaction must carry the verification guard handed out when
 * its verification began, and a marker for the producer invalidates it.
 *
 * The state follows the log through the log's ProducerStateHook, on the log's queue: so a
 * batch's check and its offsets happen with no other append in between, and truncation
 * rebuilds it before the next append. It survives restarts as `.snapshot` files (see
 * storage/producer-state-snapshot.ts) plus a replay of the log after the latest one.
 */
import { assert } from '../common/assert.js'
import type { Clock } from '../common/clock.js'
import type { Logger } from '../common/logger.js'
import {
  FIRST_OFFSET,
  maxOffset,
  NO_OFFSET,
  nextOffset,
  type Offset,
  type ProducerId,
} from '../common/types.js'
import { BatchHeader, LOG_OVERHEAD, NO_PRODUCER_ID, NO_SEQUENCE } from '../protocol/batch-header.js'
import { ErrorCode } from '../protocol/error-codes.js'
import { readEndTxnMarker } from '../storage/control-batch.js'
import {
  deleteSnapshots,
  listSnapshotOffsets,
  type ProducerSnapshotEntry,
  readSnapshot,
  writeSnapshot,
} from '../storage/producer-state-snapshot.js'
import type { AbortedTxn } from '../storage/transaction-index.js'
import type {
  AppendOptions,
  DuplicateBatch,
  ProducerAppendOutcome,
  ProducerStateHook,
  UnifiedLog,
} from '../storage/unified-log.js'
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

/** No coordinator has written a marker for the producer here yet. */
export const NO_COORDINATOR_EPOCH = -1

/**
 * Kafka's VerificationGuard.SENTINEL: the guard of a transactional produce that was not
 * verified (its transaction was open); it never matches, so such a batch cannot open one.
 */
export const UNVERIFIED: object = Object.freeze({})

/** How an append reached the producer state: Kafka's AppendOrigin. */
type Origin = 'client' | 'coordinator' | 'replication'

/** One producer id's state in one partition. */
export class ProducerStateEntry {
  constructor(
    readonly producerId: ProducerId,
    public producerEpoch: number,
    readonly batches: BatchMetadata[],
    /** Max timestamp of the last batch or marker: producer.id.expiration.ms counts from it (Kafka). */
    public lastTimestamp: number,
    /** The epoch of the coordinator that wrote the producer's last marker here. */
    public coordinatorEpoch = NO_COORDINATOR_EPOCH,
    /** First offset of the producer's open transaction here, or -1. */
    public currentTxnFirstOffset: Offset = NO_OFFSET,
  ) {}

  get hasOngoingTransaction(): boolean {
    return this.currentTxnFirstOffset !== NO_OFFSET
  }

  get lastSeq(): number {
    return this.batches.at(-1)?.lastSeq ?? NO_SEQUENCE
  }

  get lastOffset(): Offset {
    return this.batches.at(-1)?.lastOffset ?? NO_OFFSET
  }

  clone(): ProducerStateEntry {
    return new ProducerStateEntry(
      this.producerId,
      this.producerEpoch,
      [...this.batches],
      this.lastTimestamp,
      this.coordinatorEpoch,
      this.currentTxnFirstOffset,
    )
  }

  /** A new epoch forgets the old one's batches (Kafka's maybeUpdateProducerEpoch). */
  private updateEpoch(epoch: number): void {
    if (epoch === this.producerEpoch) return
    this.batches.length = 0
    this.producerEpoch = epoch
  }

  /** Only the last 5 batches are kept. */
  addBatch(epoch: number, batch: BatchMetadata): void {
    this.updateEpoch(epoch)
    this.batches.push(batch)
    if (this.batches.length > NUM_BATCHES_TO_RETAIN) this.batches.shift()
    this.lastTimestamp = batch.maxTimestamp
  }

  /** A COMMIT or ABORT marker ended the producer's transaction (Kafka's ProducerStateEntry.update). */
  endTransaction(epoch: number, coordinatorEpoch: number, timestamp: number): void {
    this.updateEpoch(epoch)
    this.coordinatorEpoch = coordinatorEpoch
    this.lastTimestamp = timestamp
    this.currentTxnFirstOffset = NO_OFFSET
  }

  /** The batch with exactly this epoch and sequence range, if it is among the last 5. */
  findDuplicate(epoch: number, firstSeq: number, lastSeq: number): BatchMetadata | undefined {
    if (epoch !== this.producerEpoch) return undefined
    return this.batches.find((b) => b.firstSeq === firstSeq && b.lastSeq === lastSeq)
  }
}

export interface ProducerStateOptions {
  readonly clock: Clock
  /** The broker's: messages name the log (`log`), a child logger per replica cost ~270 bytes. */
  readonly logger: Logger
  /** producer.id.expiration.ms */
  readonly producerIdExpirationMs: number
}

/** A transaction whose marker is written, until the high watermark passes the marker. */
interface UnreplicatedTxn {
  readonly producerId: ProducerId
  readonly firstOffset: Offset
  readonly lastOffset: Offset
}

/** What one append does to the transactions, applied in order once the whole append is accepted. */
type TxnEvent =
  | { readonly kind: 'begin'; readonly producerId: ProducerId; readonly firstOffset: Offset }
  | { readonly kind: 'marker'; readonly producerId: ProducerId }
  | {
      readonly kind: 'end'
      readonly producerId: ProducerId
      readonly firstOffset: Offset
      readonly lastOffset: Offset
      readonly aborted: boolean
    }

/** KIP-890's verification of one producer's first write of a transaction here. */
interface VerificationState {
  readonly guard: object
  readonly producerEpoch: number
  /** When it began: one no write used goes after producer.id.expiration.ms, as Kafka's does. */
  readonly startedMs: number
}

/**
 * The state of every replica without producers, transactions or verifications shares this
 * map until its first write (own*): an empty Map costs about 200 bytes with its table,
 * three per replica, and most replicas of a large cluster never see an idempotent producer.
 */
const NO_ENTRIES: ReadonlyMap<ProducerId, never> = new Map<ProducerId, never>()

export class ProducerStateManager implements ProducerStateHook {
  private producers: ReadonlyMap<ProducerId, ProducerStateEntry> = NO_ENTRIES
  /**
   * Open transactions by producer id, their first offsets; transactions open in log order,
   * so the map's insertion order is offset order and its first entry is the earliest.
   */
  private ongoing: ReadonlyMap<ProducerId, Offset> = NO_ENTRIES
  /** Ended transactions whose marker is at or above the high watermark, in marker order. */
  private unreplicated: UnreplicatedTxn[] = []
  /** KIP-890 verifications in flight, by producer id. */
  private verifications: ReadonlyMap<ProducerId, VerificationState> = NO_ENTRIES
  /** Offset after the last batch the state includes: the log end once loaded. */
  private mapEndOffset = FIRST_OFFSET
  /**
   * The map end offset of the newest snapshot on disk, 0 when there is none (Kafka's
   * lastSnapOffset): a snapshot is taken only past it, so closing or rolling a log nothing
   * was appended to since writes nothing (33,000 idle replicas wrote 33,000 snapshots, two
   * fsyncs each, at every shutdown).
   */
  private lastSnapshotOffset = FIRST_OFFSET

  constructor(
    private readonly log: UnifiedLog,
    private readonly options: ProducerStateOptions,
  ) {}

  private ownProducers(): Map<ProducerId, ProducerStateEntry> {
    if (this.producers === NO_ENTRIES) this.producers = new Map()
    return this.producers as Map<ProducerId, ProducerStateEntry>
  }
  private ownOngoing(): Map<ProducerId, Offset> {
    if (this.ongoing === NO_ENTRIES) this.ongoing = new Map()
    return this.ongoing as Map<ProducerId, Offset>
  }
  private ownVerifications(): Map<ProducerId, VerificationState> {
    if (this.verifications === NO_ENTRIES) this.verifications = new Map()
    return this.verifications as Map<ProducerId, VerificationState>
  }

  get activeProducers(): ReadonlyMap<ProducerId, ProducerStateEntry> {
    return this.producers
  }

  get endOffset(): Offset {
    return this.mapEndOffset
  }

  lastEntry(producerId: ProducerId): ProducerStateEntry | undefined {
    return this.producers.get(producerId)
  }

  /** Open transactions: producer id to first offset, earliest first. */
  get ongoingTransactions(): ReadonlyMap<ProducerId, Offset> {
    return this.ongoing
  }

  /**
   * Kafka's firstUnstableOffset: the first offset of the earliest transaction that is open
   * or whose marker is not below the high watermark yet; undefined when there is none.
   */
  firstUnstableOffset(): Offset | undefined {
    const highWatermark = this.log.highWatermark
    while (this.unreplicated.length > 0 && this.unreplicated[0].lastOffset < highWatermark)
      this.unreplicated.shift()
    let first: Offset | undefined
    for (const firstOffset of this.ongoing.values()) {
      first = firstOffset
      break
    }
    for (const txn of this.unreplicated)
      if (first === undefined || txn.firstOffset < first) first = txn.firstOffset
    return first
  }

  // ---- KIP-890 verification ------------------------------------------------------------

  /**
   * Before a transactional produce that would open a transaction is verified with the
   * coordinator: the guard it must append with. Kafka's maybeCreateVerificationStateEntry;
   * a verification already in flight for the same epoch shares its guard.
   */
  beginVerification(producerId: ProducerId, producerEpoch: number): object {
    const existing = this.verifications.get(producerId)
    if (existing !== undefined && existing.producerEpoch === producerEpoch) return existing.guard
    const guard = {}
    this.ownVerifications().set(producerId, { guard, producerEpoch, startedMs: this.options.clock.nowMs() })
    return guard
  }

  /**
   * True when a produce from this producer would open a transaction here (so it needs
   * verifying): none is open, or the open one is of another epoch (Kafka's
   * hasOngoingTransaction(producerId, producerEpoch)). With transaction version 2 every
   * transaction has its own epoch: a write of the next one must not join the previous one
   * while that one's marker is still on its way.
   */
  needsVerification(producerId: ProducerId, producerEpoch: number): boolean {
    const entry = this.producers.get(producerId)
    return entry?.hasOngoingTransaction !== true || entry.producerEpoch !== producerEpoch
  }

  // ---- appends ---------------------------------------------------------------------------

  onAppend(batches: Buffer, options: AppendOptions): ProducerAppendOutcome | undefined {
    const origin: Origin = options.assignOffsets ? (options.origin ?? 'client') : 'replication'
    const updated = new Map<ProducerId, ProducerStateEntry>()
    const events: TxnEvent[] = []
    let end = this.mapEndOffset
    for (let at = 0; at + LOG_OVERHEAD <= batches.length; ) {
      const header = new BatchHeader(batches, at)
      at += header.sizeInBytes
      // A follower of a compacted log takes its leader's offset gaps (the cleaner removed
      // records but not their offsets); a leader assigns the next offset.
      assert(
        origin === 'replication' ? header.baseOffset >= end : header.baseOffset === end,
        () => `batch at ${header.baseOffset}, producer state at ${end}${where(this.log.topicPartition)}`,
      )
      end = header.nextOffset as Offset
      const producerId = header.producerId
      if (producerId === NO_PRODUCER_ID) continue
      if (origin === 'client') {
        // A retry is judged against what was written before this request, as Kafka does.
        const duplicate = this.findDuplicate(header)
        if (duplicate !== undefined) return { duplicate }
      }
      const current = this.producers.get(producerId)
      const entry = updated.get(producerId) ?? current?.clone() ?? newEntry(producerId)
      if (header.isControl) this.appendMarker(entry, header, origin, events)
      else this.appendData(entry, current, header, origin, events, options.verificationGuard)
      updated.set(producerId, entry)
    }
    // All or nothing: a refused or duplicate batch leaves the state as it was.
    for (const [producerId, entry] of updated) this.ownProducers().set(producerId, entry)
    this.mapEndOffset = end
    const abortedTransactions = this.applyTxnEvents(events)
    return abortedTransactions.length > 0 ? { abortedTransactions } : undefined
  }

  /** Kafka's ProducerAppendInfo.appendDataBatch. */
  private appendData(
    entry: ProducerStateEntry,
    current: ProducerStateEntry | undefined,
    header: BatchHeader,
    origin: Origin,
    events: TxnEvent[],
    verificationGuard: object | undefined,
  ): void {
    const tp = this.log.topicPartition
    if (origin === 'client') checkLeaderBatch(entry, current, header, tp)
    else if (origin === 'coordinator') checkMarkerOrCoordinatorEpoch(entry, header, tp)
    else if (header.producerEpoch < entry.producerEpoch) this.warnEpochRegression(entry, header)
    if (origin !== 'replication' && entry.hasOngoingTransaction && !header.isTransactional) {
      throw new KafkaError(
        ErrorCode.INVALID_TXN_STATE,
        `producer ${header.producerId}${where(tp)}: non-transactional batch inside its open transaction`,
      )
    }
    if (origin === 'client' && header.isTransactional && !entry.hasOngoingTransaction)
      this.checkVerification(header, verificationGuard)
    entry.addBatch(header.producerEpoch, batchMetadata(header))
    if (header.isTransactional && !entry.hasOngoingTransaction) {
      entry.currentTxnFirstOffset = header.baseOffset as Offset
      events.push({ kind: 'begin', producerId: entry.producerId, firstOffset: entry.currentTxnFirstOffset })
    }
  }

  /**
   * KIP-890: a client's batch that opens a transaction must hold the guard of a
   * verification that no marker ended since (undefined guard: verification is disabled;
   * UNVERIFIED never matches).
   */
  private checkVerification(header: BatchHeader, guard: object | undefined): void {
    if (guard === undefined) return
    const state = this.verifications.get(header.producerId)
    if (state?.guard === guard && state.producerEpoch === header.producerEpoch) return
    throw new KafkaError(
      ErrorCode.INVALID_TXN_STATE,
      `producer ${header.producerId}${where(this.log.topicPartition)}: transactional batch not verified as part of an ongoing transaction`,
    )
  }

  /** Kafka's ProducerAppendInfo.appendEndTxnMarker. */
  private appendMarker(
    entry: ProducerStateEntry,
    header: BatchHeader,
    origin: Origin,
    events: TxnEvent[],
  ): void {
    const marker = readEndTxnMarker(header)
    if (marker === undefined) return
    events.push({ kind: 'marker', producerId: entry.producerId })
    const tp = this.log.topicPartition
    if (origin === 'replication') {
      if (header.producerEpoch < entry.producerEpoch) this.warnEpochRegression(entry, header)
    } else {
      checkMarkerOrCoordinatorEpoch(entry, header, tp)
      if (entry.coordinatorEpoch > marker.coordinatorEpoch) {
        throw new KafkaError(
          ErrorCode.TRANSACTION_COORDINATOR_FENCED,
          `producer ${header.producerId}${where(tp)}: marker from coordinator epoch ${marker.coordinatorEpoch}, after ${entry.coordinatorEpoch}`,
        )
      }
    }
    // A marker with no data before it (the transaction never wrote here) changes no LSO.
    if (entry.hasOngoingTransaction) {
      events.push({
        kind: 'end',
        producerId: entry.producerId,
        firstOffset: entry.currentTxnFirstOffset,
        lastOffset: header.baseOffset as Offset,
        aborted: marker.result === 'abort',
      })
    }
    entry.endTransaction(header.producerEpoch, marker.coordinatorEpoch, header.maxTimestamp)
  }

  /** Opens and ends transactions in log order; returns the entries for the `.txnindex`. */
  private applyTxnEvents(events: readonly TxnEvent[]): AbortedTxn[] {
    const aborted: AbortedTxn[] = []
    for (const event of events) {
      // A verification covers one transaction's first write: used up by it, and void once
      // any marker ended the producer's transaction (a late write must be verified again).
      if (event.kind !== 'end' && this.verifications.has(event.producerId))
        this.ownVerifications().delete(event.producerId)
      if (event.kind === 'marker') continue
      if (event.kind === 'begin') {
        assert(
          !this.ongoing.has(event.producerId),
          () => `producer ${event.producerId} opened two transactions`,
        )
        this.ownOngoing().set(event.producerId, event.firstOffset)
        continue
      }
      this.ownOngoing().delete(event.producerId)
      this.unreplicated.push(event)
      if (!event.aborted) continue
      // Kafka's lastStableOffset(completedTxn): the earliest other open transaction, else past the marker.
      let lastStableOffset = nextOffset(event.lastOffset)
      for (const firstOffset of this.ongoing.values()) {
        lastStableOffset = firstOffset
        break
      }
      aborted.push({
        producerId: event.producerId,
        firstOffset: event.firstOffset,
        lastOffset: event.lastOffset,
        lastStableOffset,
      })
    }
    return aborted
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
      {
        log: this.log.dir,
        producerId: String(entry.producerId),
        epoch: header.producerEpoch,
        current: entry.producerEpoch,
      },
      'replicated batch with an older producer epoch',
    )
  }

  // ---- expiry ----------------------------------------------------------------------------

  /**
   * Forgets producers idle for producer.id.expiration.ms (by the broker's wall clock), and
   * verifications begun that long ago.
   */
  removeExpiredProducers(nowMs = this.options.clock.nowMs()): number {
    let removed = 0
    for (const [producerId, entry] of this.producers) {
      // An open transaction keeps its producer (Kafka's isProducerExpired).
      if (entry.hasOngoingTransaction || !this.isExpired(entry.lastTimestamp, nowMs)) continue
      this.ownProducers().delete(producerId)
      removed++
    }
    this.removeExpiredVerifications(nowMs)
    return removed
  }

  /** Verifications no write used (the coordinator said no, or the producer went away). */
  private removeExpiredVerifications(nowMs: number): void {
    for (const [producerId, state] of this.verifications)
      if (this.isExpired(state.startedMs, nowMs)) this.ownVerifications().delete(producerId)
  }

  private isExpired(lastTimestamp: number, nowMs: number): boolean {
    return nowMs - lastTimestamp >= this.options.producerIdExpirationMs
  }

  // ---- load, snapshots, truncation -------------------------------------------------------

  /**
   * Rebuilds the state: the latest readable snapshot within [logStartOffset, logEndOffset]
   * (none: empty at the log start), then every batch after it. Snapshots past the log end
   * describe batches the log no longer has (an unflushed tail lost in a crash): deleted.
   *
   * The new state is built aside and replaces the old one at once, after the last await.
   * Reads are not on the log's queue: a read_committed fetch served while a truncation
   * reloads must not see the state half built. Emptied, it had no open transaction, so the
   * LSO rose to the high watermark past a transaction whose ABORT marker the truncation had
   * just cut, with its `.txnindex` entry (issue 35, seed 369395). The old state meanwhile
   * is the safe one, as Kafka's cached first unstable offset is until its rebuild ends: a
   * cut marker was above the high watermark, so its transaction is still unreplicated there.
   * KIP-890 verifications stay as they are: the replayed markers voided theirs once already.
   */
  async load(newLog = false): Promise<void> {
    const { logStartOffset, logEndOffset, dir } = this.log
    if (newLog) {
      assert(logStartOffset === logEndOffset, () => `new log ${dir} holds ${logStartOffset}..${logEndOffset}`)
      this.mapEndOffset = logEndOffset
      this.lastSnapshotOffset = FIRST_OFFSET
      return
    }
    const fs = this.log.fileSystem
    // One listing for both: each directory listing is a syscall round trip per partition
    // of a restart.
    const listed = await listSnapshotOffsets(fs, dir)
    await deleteSnapshots(fs, dir, (offset) => offset > logEndOffset, listed)
    const next = new ProducerStateManager(this.log, this.options)
    let from = logStartOffset
    let snapshotOffset = FIRST_OFFSET
    const offsets = listed.filter((offset) => offset <= logEndOffset)
    for (const offset of offsets.reverse()) {
      if (offset < logStartOffset) break
      const entries = await this.readSnapshotOrNull(offset)
      if (entries === null) continue
      next.loadSnapshotEntries(entries)
      from = offset
      snapshotOffset = offset
      break
    }
    next.mapEndOffset = from
    await next.replay(from, logEndOffset)
    assert(next.mapEndOffset === logEndOffset, () => `state at ${next.mapEndOffset}, log end ${logEndOffset}`)
    this.producers = next.producers
    this.ongoing = next.ongoing
    this.unreplicated = next.unreplicated
    this.mapEndOffset = next.mapEndOffset
    this.lastSnapshotOffset = snapshotOffset
  }

  private async readSnapshotOrNull(offset: Offset): Promise<ProducerSnapshotEntry[] | null> {
    try {
      return await readSnapshot(this.log.fileSystem, this.log.dir, offset)
    } catch (err) {
      if ((err as { code?: string }).code !== 'CORRUPT_SNAPSHOT') throw err
      this.options.logger.warn(
        { log: this.log.dir, err, offset },
        'producer snapshot unreadable; deleting it',
      )
      await deleteSnapshots(this.log.fileSystem, this.log.dir, (o) => o === offset)
      return null
    }
  }

  private loadSnapshotEntries(entries: readonly ProducerSnapshotEntry[]): void {
    const nowMs = this.options.clock.nowMs()
    const open: { producerId: ProducerId; firstOffset: Offset }[] = []
    for (const e of entries) {
      const txnFirstOffset = e.currentTxnFirstOffset >= 0 ? (e.currentTxnFirstOffset as Offset) : NO_OFFSET
      // Kafka drops expired producers as it loads a snapshot (never one with an open transaction).
      if (txnFirstOffset === NO_OFFSET && this.isExpired(e.timestamp, nowMs)) continue
      // A producer whose only write here was a marker has no batch (lastOffset -1).
      const batches: BatchMetadata[] =
        e.lastOffset < 0
          ? []
          : [
              {
                firstSeq: decrementSequence(e.lastSequence, e.offsetDelta),
                lastSeq: e.lastSequence,
                firstOffset: (e.lastOffset - e.offsetDelta) as Offset,
                lastOffset: e.lastOffset,
                maxTimestamp: e.timestamp,
              },
            ]
      this.ownProducers().set(
        e.producerId,
        new ProducerStateEntry(
          e.producerId,
          e.producerEpoch,
          batches,
          e.timestamp,
          e.coordinatorEpoch,
          txnFirstOffset,
        ),
      )
      if (txnFirstOffset !== NO_OFFSET) open.push({ producerId: e.producerId, firstOffset: txnFirstOffset })
    }
    for (const txn of open.sort((a, b) => a.firstOffset - b.firstOffset))
      this.ownOngoing().set(txn.producerId, txn.firstOffset)
  }

  /** Applies the log's batches in [from, to) as a follower would (no checks). */
  private async replay(from: Offset, to: Offset): Promise<void> {
    let offset = from
    const aborted: AbortedTxn[] = []
    while (offset < to) {
      const read = await this.log.read(offset, {
        maxBytes: REPLAY_READ_BYTES,
        maxOffset: to,
        minOneMessage: true,
      })
      if (read.sizeInBytes === 0) break
      for (const chunk of read.records) this.replayChunk(chunk, aborted)
      offset = read.nextOffset
    }
    // The log start may fall inside a batch (DeleteRecords): the state then starts there.
    this.mapEndOffset = maxOffset(this.mapEndOffset, to)
    // Kafka rebuilds the `.txnindex` of recovered segments the same way.
    await this.log.indexAbortedTransactions(aborted)
  }

  private replayChunk(chunk: Buffer, aborted: AbortedTxn[]): void {
    for (let at = 0; at + LOG_OVERHEAD <= chunk.length; ) {
      const header = new BatchHeader(chunk, at)
      at += header.sizeInBytes
      // A read starts at the batch holding the offset: skip what the state already has.
      if (header.nextOffset <= this.mapEndOffset) continue
      this.mapEndOffset = header.nextOffset as Offset
      if (header.producerId === NO_PRODUCER_ID) continue
      const entry = this.producers.get(header.producerId) ?? newEntry(header.producerId)
      const events: TxnEvent[] = []
      if (header.isControl) this.appendMarker(entry, header, 'replication', events)
      else this.appendData(entry, undefined, header, 'replication', events, undefined)
      this.ownProducers().set(header.producerId, entry)
      aborted.push(...this.applyTxnEvents(events))
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
      this.ongoing = new Map()
      this.unreplicated = []
      this.mapEndOffset = logEndOffset
      this.lastSnapshotOffset = FIRST_OFFSET
      return
    }
    await this.load()
  }

  async onSegmentsDeleted(logStartOffset: Offset): Promise<void> {
    await deleteSnapshots(this.log.fileSystem, this.log.dir, (offset) => offset < logStartOffset)
    // The newest went with them (every segment deleted): the next close writes one again.
    if (this.lastSnapshotOffset < logStartOffset) this.lastSnapshotOffset = FIRST_OFFSET
  }

  async onClose(): Promise<void> {
    assert(this.mapEndOffset === this.log.logEndOffset, 'producer state behind the log at close')
    await this.takeSnapshot()
  }

  /**
   * Writes `<mapEndOffset>.snapshot` (Kafka keeps the last batch of each producer only, and
   * each open transaction's first offset).
   */
  async takeSnapshot(): Promise<void> {
    if (this.mapEndOffset <= this.lastSnapshotOffset) return
    const entries: ProducerSnapshotEntry[] = []
    for (const entry of this.producers.values()) {
      const last = entry.batches.at(-1)
      entries.push({
        producerId: entry.producerId,
        producerEpoch: entry.producerEpoch,
        lastSequence: last?.lastSeq ?? NO_SEQUENCE,
        lastOffset: last?.lastOffset ?? NO_OFFSET,
        offsetDelta: last === undefined ? 0 : last.lastOffset - last.firstOffset,
        timestamp: entry.lastTimestamp,
        coordinatorEpoch: entry.coordinatorEpoch,
        currentTxnFirstOffset: entry.currentTxnFirstOffset,
      })
    }
    await writeSnapshot(this.log.fileSystem, this.log.dir, this.mapEndOffset, entries)
    this.lastSnapshotOffset = this.mapEndOffset
  }
}

function newEntry(producerId: ProducerId): ProducerStateEntry {
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

function where(tp: { topic: string; partition: number } | undefined): string {
  return tp === undefined ? '' : ` in ${tp.topic}-${tp.partition}`
}

/**
 * Kafka's checkProducerEpoch for batches without sequences (markers, a coordinator's
 * transactional offset commits): an older epoch than the producer's is refused.
 */
function checkMarkerOrCoordinatorEpoch(
  entry: ProducerStateEntry,
  header: BatchHeader,
  tp: { topic: string; partition: number } | undefined,
): void {
  if (header.producerEpoch >= entry.producerEpoch) return
  throw new KafkaError(
    ErrorCode.INVALID_PRODUCER_EPOCH,
    `producer ${header.producerId}${where(tp)}: epoch ${header.producerEpoch} is older than ${entry.producerEpoch}`,
  )
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
  const epoch = header.producerEpoch
  const firstSeq = header.baseSequence
  const producer = `producer ${header.producerId}${where(tp)}`
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
