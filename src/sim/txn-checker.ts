/**
 * Transactions in the simulation (`transactions`): what the transactional applications know
 * (`TransactionBook`, filled from tidelog's client's results in txn-producer.ts) and the
 * checks (`TxnInvariants`):
 *
 * - a read_committed consumer never returns a record of an aborted transaction, nor one of a
 *   transaction its producer has not asked to commit (still open: only EndTxn(commit) can
 *   make it visible);
 * - the last stable offset of a leader never passes the first offset of a transaction that
 *   is undecided in its log (no marker below the high watermark: Kafka's ongoing and
 *   unreplicated transactions, ProducerStateManager.firstUndecidedOffset), and never goes
 *   back within a leadership;
 * - a fenced producer epoch never writes again: once a producer learnt a newer epoch (or
 *   producer id) for its transactional id (InitProducerId or a bump), no leader the store still
 *   names (at its leader epoch) appends a data batch of the older one, and no such batch a
 *   deposed leader appended is ever committed; and in each partition's committed log, a
 *   producer's data batches never carry an epoch below one seen before (data or marker);
 * - at the end, once healed: no transaction is left open in any partition, a transaction is
 *   committed on all of its partitions or on none (every record of a transaction the client
 *   saw committed is in the log, once, committed; none of one it saw aborted is), and every
 *   read_committed consumer returned exactly the committed transactional records of its
 *   partition, in log order, once each.
 */
import type { Offset } from '../common/types.js'
import { type DecodedRecordBatch, decodeRecordBatchSync, iterateBatches } from '../protocol/record-batch.js'
import type { Partition } from '../replication/partition.js'
import type { SimBroker } from './sim-broker.js'
import { type DeliveredRecord, TOPIC, Violation, type WorldView } from './world-view.js'

/** Record values of transactional producers: `x<producer>.<transaction>.p<partition>.<index>`. */
export function txnRecordValue(producer: number, txn: number, partition: number, index: number): string {
  return `${txnIdOf(producer, txn)}.p${partition}.${index}`
}

/** The transaction's name in traces and in the book: `x<producer>.<transaction>`. */
export function txnIdOf(producer: number, txn: number): string {
  return `x${producer}.${txn}`
}

export function parseTxnRecordValue(
  value: string,
): { readonly txnId: string; readonly partition: number; readonly index: number } | null {
  const match = /^(x\d+\.\d+)\.p(\d+)\.(\d+)$/.exec(value)
  if (!match) return null
  return { txnId: match[1], partition: Number(match[2]), index: Number(match[3]) }
}

/** COMMIT or ABORT of a control batch (its first record's key: version int16, type int16), else null. */
export function controlTypeOf(batch: DecodedRecordBatch): 'commit' | 'abort' | null {
  if (!batch.isControl) return null
  const key = batch.records[0]?.key
  if (!key || key.length < 4) return null
  const type = key.readInt16BE(2)
  return type === 1 ? 'commit' : type === 0 ? 'abort' : null
}

/** A control record's key and value as Kafka writes them (for tests: markers in synthetic logs). */
export function controlRecord(
  result: 'commit' | 'abort',
  coordinatorEpoch: number,
): { key: Buffer; value: Buffer } {
  const key = Buffer.alloc(4)
  key.writeInt16BE(0, 0)
  key.writeInt16BE(result === 'commit' ? 1 : 0, 2)
  const value = Buffer.alloc(6)
  value.writeInt16BE(0, 0)
  value.writeInt32BE(coordinatorEpoch, 2)
  return { key, value }
}

export type { DeliveredRecord }

/** What a transaction's producer knows of it. */
export type TxnStatus =
  /** Begun, EndTxn not sent. */
  | 'open'
  /** EndTxn(commit) sent, no answer yet. */
  | 'committing'
  /** EndTxn(abort) sent, no answer yet. */
  | 'aborting'
  | 'committed'
  /** Aborted, or ended without the client ever asking to commit (fenced, given up): it cannot commit. */
  | 'aborted'
  /** EndTxn(commit) was sent and the client never learnt the outcome. */
  | 'unknown'

export interface BookedTxn {
  readonly txnId: string
  /** The producer's transaction number (the `n` of `x<producer>.<n>`). */
  readonly txnNumber: number
  readonly transactionalId: string
  readonly producerId: bigint
  readonly producerEpoch: number
  readonly partitions: readonly number[]
  /** Per partition: the records whose send was acknowledged (indexes 0..n-1). */
  readonly ackedRecords: Map<number, number>
  status: TxnStatus
  commitSent: boolean
  /** The group offset it sent with TxnOffsetCommit (partition 0 of its producer's group), or null. */
  offsetSent: number | null
  readonly beganAtMs: number
}

/** The transactional producers' knowledge: their transactions and the epochs InitProducerId gave them. */
export class TransactionBook {
  readonly txns = new Map<string, BookedTxn>()
  /** transactional id → the (producer id, epoch) answers InitProducerId gave, in order. */
  private readonly inits = new Map<string, { producerId: bigint; epoch: number; atMs: number }[]>()
  private readonly transactionalIdOf = new Map<bigint, string>()

  onInitProducerId(transactionalId: string, producerId: bigint, epoch: number, atMs: number): void {
    let list = this.inits.get(transactionalId)
    if (!list) {
      list = []
      this.inits.set(transactionalId, list)
    }
    list.push({ producerId, epoch, atMs })
    this.transactionalIdOf.set(producerId, transactionalId)
  }

  /**
   * When the client first learnt that (producerId, epoch) was superseded: an InitProducerId
   * answer for the same transactional id with a higher epoch or another producer id. null if
   * not (yet), or if the producer id is not a transactional producer's.
   */
  fencedAtMs(producerId: bigint, epoch: number): number | null {
    const transactionalId = this.transactionalIdOf.get(producerId)
    if (transactionalId === undefined) return null
    for (const init of this.inits.get(transactionalId) ?? []) {
      const newer = init.producerId !== producerId || init.epoch > epoch
      // A later answer for the same producer id with an older epoch cannot happen (epochs grow).
      if (newer && this.usedBefore(transactionalId, producerId, epoch, init)) return init.atMs
    }
    return null
  }

  /** (producerId, epoch) was handed out before `init` (so `init` supersedes it). */
  private usedBefore(
    transactionalId: string,
    producerId: bigint,
    epoch: number,
    init: { producerId: bigint; epoch: number; atMs: number },
  ): boolean {
    for (const earlier of this.inits.get(transactionalId) ?? []) {
      if (earlier === init) return false
      if (earlier.producerId === producerId && earlier.epoch >= epoch) return true
    }
    return false
  }

  begin(txn: Omit<BookedTxn, 'ackedRecords' | 'status' | 'commitSent' | 'offsetSent'>): BookedTxn {
    const booked: BookedTxn = {
      ...txn,
      ackedRecords: new Map(),
      status: 'open',
      commitSent: false,
      offsetSent: null,
    }
    this.txns.set(txn.txnId, booked)
    return booked
  }

  counts(): Record<TxnStatus, number> {
    const counts: Record<TxnStatus, number> = {
      open: 0,
      committing: 0,
      aborting: 0,
      committed: 0,
      aborted: 0,
      unknown: 0,
    }
    for (const txn of this.txns.values()) counts[txn.status]++
    return counts
  }
}

/** A transaction's first offset and its marker in one partition's log. */
interface TxnSpan {
  readonly producerId: bigint
  readonly firstOffset: number
  markerOffset: number | null
}

/**
 * One partition's committed log, scanned in offset order as the agreement check sees it
 * committed: the transactions' spans (first data batch to marker) and the producers'
 * epochs. Batches arriving out of order wait until the gap before them is filled.
 */
export class PartitionTxnScan {
  /** Next offset to scan. */
  scannedTo = 0
  private readonly waiting = new Map<number, { last: number; bytes: Buffer }>()
  private readonly open = new Map<bigint, TxnSpan>()
  /** Spans closed by a marker, in marker order. */
  private readonly closed: TxnSpan[] = []
  private readonly maxEpoch = new Map<bigint, number>()

  constructor(readonly partition: number) {}

  /** A batch seen committed at `base`; returns a violation message, or null. */
  add(base: number, bytes: Buffer): string | null {
    const header = decodeRecordBatchSync(bytes)
    if (base < this.scannedTo) return null
    this.waiting.set(base, { last: base + header.lastOffsetDelta, bytes })
    for (;;) {
      const next = this.waiting.get(this.scannedTo)
      if (!next) return null
      this.waiting.delete(this.scannedTo)
      const problem = this.scan(this.scannedTo, decodeRecordBatchSync(next.bytes))
      this.scannedTo = next.last + 1
      if (problem) return problem
    }
  }

  private scan(base: number, batch: DecodedRecordBatch): string | null {
    if (batch.producerId < 0n) return null
    const pid = batch.producerId
    const before = this.maxEpoch.get(pid) ?? -1
    this.maxEpoch.set(pid, Math.max(before, batch.producerEpoch))
    if (!batch.isControl && batch.producerEpoch < before)
      return `fenced epoch wrote again: p${this.partition} offset ${base} holds a data batch of producer ${pid} epoch ${batch.producerEpoch}, after epoch ${before} in that log`
    if (batch.isControl) {
      const span = this.open.get(pid)
      if (span) {
        span.markerOffset = base
        this.closed.push(span)
        this.open.delete(pid)
      }
      return null
    }
    if (batch.isTransactional && !this.open.has(pid))
      this.open.set(pid, { producerId: pid, firstOffset: base, markerOffset: null })
    return null
  }

  /**
   * The first offset of the earliest transaction undecided at high watermark `hw`: begun
   * below it, its marker not below it. null when none.
   */
  firstUndecidedBelow(hw: number): { firstOffset: number; producerId: bigint } | null {
    let first: TxnSpan | null = null
    for (const span of this.open.values())
      if (span.firstOffset < hw && (first === null || span.firstOffset < first.firstOffset)) first = span
    // Closed spans in marker order: only the tail with markers at or above hw counts.
    for (let i = this.closed.length - 1; i >= 0; i--) {
      const span = this.closed[i]
      if ((span.markerOffset ?? 0) < hw) break
      if (span.firstOffset < hw && (first === null || span.firstOffset < first.firstOffset)) first = span
    }
    return first === null ? null : { firstOffset: first.firstOffset, producerId: first.producerId }
  }
}

/** One record of a transactional producer in a log, and how its transaction ended there. */
export interface DecidedRecord {
  readonly offset: number
  readonly value: string
  readonly producerId: bigint
  decision: 'commit' | 'abort' | 'open'
}

/** Every transactional record of a whole log, with its transaction's outcome in that log. */
export function decideLog(batches: readonly DecodedRecordBatch[]): DecidedRecord[] {
  const out: DecidedRecord[] = []
  const open = new Map<bigint, DecidedRecord[]>()
  for (const batch of batches) {
    if (batch.producerId < 0n) continue
    const result = controlTypeOf(batch)
    if (batch.isControl) {
      for (const record of open.get(batch.producerId) ?? []) record.decision = result ?? 'open'
      open.delete(batch.producerId)
      continue
    }
    if (!batch.isTransactional) continue
    let records = open.get(batch.producerId)
    if (!records) {
      records = []
      open.set(batch.producerId, records)
    }
    for (const record of batch.records) {
      const decided: DecidedRecord = {
        offset: record.offset,
        value: record.value?.toString() ?? '',
        producerId: batch.producerId,
        decision: 'open',
      }
      records.push(decided)
      out.push(decided)
    }
  }
  return out
}

/**
 * Data batches of fenced producer epochs that a deposed leader appended: one that had lost
 * its leadership in the store without knowing yet (a stalled store link, a watch event not
 * arrived). Kafka lets such a leader append a late write of an epoch its client already
 * left: the coordinator's markers for the bump went to the new leader, so the deposed one
 * still holds the old epoch's transaction open and skips KIP-890's verification
 * (UnifiedLog.maybeStartTransactionVerification), and nothing refuses the epoch there. The
 * batch is never committed: the followers fetch from the new leader, so the deposed one's
 * high watermark stays below it, and it is truncated away when the broker learns. Kafka's
 * guarantee is that last part, so each is kept here, by partition and base offset, until
 * the committed history shows what that offset holds: the same bytes are a violation.
 */
export class DeposedFencedAppends {
  private readonly byPartition = new Map<number, Map<number, { bytes: Buffer; what: string }>>()

  get size(): number {
    let n = 0
    for (const appends of this.byPartition.values()) n += appends.size
    return n
  }

  add(partition: number, base: number, bytes: Buffer, what: string): void {
    let appends = this.byPartition.get(partition)
    if (!appends) {
      appends = new Map()
      this.byPartition.set(partition, appends)
    }
    appends.set(base, { bytes: Buffer.from(bytes), what })
  }

  /** The batch at `base` of `partition` first seen committed: a violation message, or null. */
  onCommitted(partition: number, base: number, bytes: Buffer): string | null {
    const appends = this.byPartition.get(partition)
    const append = appends?.get(base)
    if (!appends || !append) return null
    // Whatever the offset holds now is decided: either that batch, or it was truncated away.
    appends.delete(base)
    return append.bytes.equals(bytes) ? `${append.what}, and that batch was committed` : null
  }
}

/** Decodes every batch of a records blob (a log read or a fetch answer). */
export function decodeBatches(chunks: readonly Buffer[]): DecodedRecordBatch[] {
  const out: DecodedRecordBatch[] = []
  for (const chunk of chunks)
    for (const span of iterateBatches(chunk))
      out.push(decodeRecordBatchSync(chunk.subarray(span.at, span.at + span.sizeInBytes)))
  return out
}

/**
 * The whole-run end checks on the final logs (one per partition, every transaction decided
 * by then) and the consumers' deliveries. Returns the violation, or null.
 */
export function checkFinalTransactions(
  book: TransactionBook,
  logs: ReadonlyMap<number, readonly DecidedRecord[]>,
  delivered: ReadonlyMap<number, readonly string[]>,
): string | null {
  /** txn id → per partition: record index → decisions (one per copy in the log). */
  const found = new Map<string, Map<number, Map<number, DecidedRecord[]>>>()
  for (const [partition, records] of logs) {
    for (const record of records) {
      const parsed = parseTxnRecordValue(record.value)
      if (!parsed)
        return `p${partition} offset ${record.offset}: a transactional record with a foreign value '${record.value}'`
      if (parsed.partition !== partition)
        return `record ${record.value} of p${parsed.partition} found in p${partition} at offset ${record.offset}`
      if (record.decision === 'open')
        return `transaction ${parsed.txnId} is still open in p${partition} after healing (record ${record.value} at offset ${record.offset}, producer ${record.producerId}): a hanging transaction`
      let byPartition = found.get(parsed.txnId)
      if (!byPartition) {
        byPartition = new Map()
        found.set(parsed.txnId, byPartition)
      }
      let byIndex = byPartition.get(partition)
      if (!byIndex) {
        byIndex = new Map()
        byPartition.set(partition, byIndex)
      }
      const copies = byIndex.get(parsed.index) ?? []
      copies.push(record)
      byIndex.set(parsed.index, copies)
    }
  }
  for (const [txnId, byPartition] of found) {
    const txn = book.txns.get(txnId)
    if (!txn) return `transaction ${txnId} is in the log but no producer began it`
    const decisions = new Set<string>()
    for (const [partition, byIndex] of byPartition) {
      for (const [index, copies] of byIndex) {
        const committed = copies.filter((c) => c.decision === 'commit')
        if (committed.length > 1)
          return `record ${txnId}.p${partition}.${index} committed ${committed.length} times (offsets ${committed.map((c) => c.offset).join(', ')})`
        decisions.add(`${committed.length > 0 ? 'commit' : 'abort'}`)
        if (committed.length > 0 && !txn.commitSent)
          return `transaction ${txnId} is committed in p${partition} (offset ${committed[0].offset}) but its producer never asked to commit it (status ${txn.status})`
      }
    }
    if (decisions.size > 1)
      return `transaction ${txnId} (client: ${txn.status}) is committed in part only: ${[...byPartition].map(([p, byIndex]) => `p${p} ${[...byIndex.values()].map((c) => (c.some((r) => r.decision === 'commit') ? 'C' : 'A')).join('')}`).join(', ')}`
  }
  for (const txn of book.txns.values()) {
    if (txn.status === 'committed') {
      for (const partition of txn.partitions) {
        const acked = txn.ackedRecords.get(partition) ?? 0
        const byIndex = found.get(txn.txnId)?.get(partition)
        for (let index = 0; index < acked; index++) {
          if (!byIndex?.get(index)?.some((r) => r.decision === 'commit'))
            return `transaction ${txn.txnId} was committed (the client saw EndTxn succeed) but record ${txn.txnId}.p${partition}.${index} is not committed in p${partition} (${byIndex?.get(index) ? 'aborted there' : 'absent'})`
        }
      }
    }
    if (txn.status === 'aborted' && found.get(txn.txnId) && decisionOf(found.get(txn.txnId)!) === 'commit')
      return `transaction ${txn.txnId} was aborted (as its client knows) but is committed in the log`
  }
  for (const [partition, records] of logs) {
    const expected = records.filter((r) => r.decision === 'commit').map((r) => `${r.value}@${r.offset}`)
    const got = delivered.get(partition)
    if (got === undefined) continue
    const mismatch = firstMismatch(expected, got)
    if (mismatch !== null)
      return `read_committed consumer of p${partition} returned ${got.length} transactional records, the log commits ${expected.length}; first difference at #${mismatch}: returned ${got[mismatch] ?? 'nothing'}, committed ${expected[mismatch] ?? 'nothing'}`
  }
  return null
}

/**
 * At the end: the committed group offset of producer `producer`'s group is the one its last
 * committed transaction with offsets sent (committed as its client saw, or, unknown to it,
 * committed in the logs); -1 if none.
 */
export function checkFinalOffsets(
  book: TransactionBook,
  producer: number,
  fetched: number,
  logs: ReadonlyMap<number, readonly DecidedRecord[]>,
): string | null {
  const committedInLog = new Set<string>()
  for (const records of logs.values())
    for (const record of records)
      if (record.decision === 'commit') {
        const parsed = parseTxnRecordValue(record.value)
        if (parsed) committedInLog.add(parsed.txnId)
      }
  let expected = -1
  let from = 'no transaction with offsets committed'
  for (const txn of book.txns.values()) {
    if (!txn.txnId.startsWith(`x${producer}.`) || txn.offsetSent === null) continue
    const committed =
      txn.status === 'committed' || (txn.status === 'unknown' && committedInLog.has(txn.txnId))
    if (committed && txn.offsetSent > expected) {
      expected = txn.offsetSent
      from = `transaction ${txn.txnId} (client: ${txn.status})`
    }
  }
  if (fetched !== expected)
    return `group offsets of txn producer ${producer}: the coordinator returns ${fetched}, the last committed transaction with offsets committed ${expected} (${from})`
  return null
}

function decisionOf(byPartition: Map<number, Map<number, DecidedRecord[]>>): 'commit' | 'abort' {
  for (const byIndex of byPartition.values())
    for (const copies of byIndex.values()) if (copies.some((c) => c.decision === 'commit')) return 'commit'
  return 'abort'
}

function firstMismatch(expected: readonly string[], got: readonly string[]): number | null {
  const n = Math.max(expected.length, got.length)
  for (let i = 0; i < n; i++) if (expected[i] !== got[i]) return i
  return null
}

/**
 * The checks that need the brokers: after every event (LSO, appends of fenced epochs) and
 * as a read_committed consumer receives records; the end checks read the final logs.
 */
export class TxnInvariants {
  readonly book = new TransactionBook()
  private readonly scans = new Map<number, PartitionTxnScan>()
  /** Fenced-epoch batches deposed leaders appended, checked as the committed history grows. */
  readonly deposedFencedAppends = new DeposedFencedAppends()
  /** Per broker incarnation and partition: the log end already looked at (appends after it are new). */
  private readonly seenLogEnd = new Map<string, number>()
  /** Per broker incarnation, partition and leader epoch: the last LSO. */
  private readonly lastLso = new Map<string, number>()
  /** Per partition: the transactional records the read_committed consumer returned (`value@offset`), in order. */
  readonly delivered = new Map<number, string[]>()
  stats = {
    lsoChecks: 0,
    followerLsoChecks: 0,
    lsoBehindHw: 0,
    leaderAppendsChecked: 0,
    /** Fenced-epoch batches appended by deposed leaders (allowed unless committed). */
    deposedFencedAppends: 0,
    deliveredRecords: 0,
    offsetFetches: 0,
  }

  constructor(private readonly world: WorldView) {}

  private scanOf(partition: number): PartitionTxnScan {
    let scan = this.scans.get(partition)
    if (!scan) {
      scan = new PartitionTxnScan(partition)
      this.scans.set(partition, scan)
    }
    return scan
  }

  /** A batch of `TOPIC` first seen committed (below some replica's high watermark). */
  onCommitted(partition: number, base: number, bytes: Buffer): void {
    const problem =
      this.deposedFencedAppends.onCommitted(partition, base, bytes) ?? this.scanOf(partition).add(base, bytes)
    if (problem) throw new Violation(problem)
  }

  /** After every event, for each live broker's partitions of `TOPIC` (after the agreement check). */
  async checkPartition(broker: SimBroker, partition: Partition): Promise<void> {
    const key = `${broker.nodeId}.${broker.incarnation}:${partition.partition}`
    const log = partition.log
    if (log.isOffline || broker.logManager.offlineLogDirs.length > 0) return
    const logEnd = log.logEndOffset
    const seen = this.seenLogEnd.get(key)
    this.seenLogEnd.set(key, logEnd)
    if (!partition.isLeader) {
      // KIP-392: a follower serves read_committed fetches too, up to its own LSO.
      this.checkUndecided(broker, partition, 'follower')
      return
    }
    if (seen !== undefined && logEnd > seen) await this.checkLeaderAppends(broker, partition, seen, logEnd)
    this.checkLastStableOffset(broker, partition)
  }

  /**
   * Batches a leader appended since the last event: none of a producer epoch its client knows
   * fenced, from a leader the store names at its leader epoch (the coordinator wrote the
   * bump's markers there, so the old epoch's transaction is closed and a late write of it
   * must be verified, and refused). A deposed leader that does not know yet may append one,
   * as in Kafka (`DeposedFencedAppends`); that batch must then never be committed.
   */
  private async checkLeaderAppends(
    broker: SimBroker,
    partition: Partition,
    from: number,
    to: number,
  ): Promise<void> {
    const read = await partition.log.read(from as Offset, {
      maxBytes: 1 << 20,
      maxOffset: to as Offset,
      minOneMessage: true,
    })
    const now = this.world.scheduler.now
    const state = this.world.truth?.image().topics.get(TOPIC)?.partitions[partition.partition]
    const deposed =
      state !== undefined && (state.leader !== broker.nodeId || state.leaderEpoch !== partition.leaderEpoch)
    for (const chunk of read.records) {
      for (const span of iterateBatches(chunk)) {
        const bytes = chunk.subarray(span.at, span.at + span.sizeInBytes)
        const batch = decodeRecordBatchSync(bytes)
        const base = Number(batch.baseOffset)
        if (base < from || batch.isControl || batch.producerId < 0n) continue
        this.stats.leaderAppendsChecked++
        const fencedAt = this.book.fencedAtMs(batch.producerId, batch.producerEpoch)
        if (fencedAt === null || fencedAt >= now) continue
        const what = `fenced epoch wrote again: ${deposed ? 'deposed ' : ''}leader ${broker.nodeId} (epoch ${partition.leaderEpoch}${deposed ? `; the store has ${state?.leader} at epoch ${state?.leaderEpoch}` : ''}) appended a data batch of producer ${batch.producerId} epoch ${batch.producerEpoch} to p${partition.partition} at offset ${base}, ${now - fencedAt} ms after its client reported a newer epoch (InitProducerId or a bump)`
        // Already below this leader's high watermark: committed (a deposed leader alone in its ISR).
        if (!deposed || base + batch.lastOffsetDelta < partition.highWatermark) throw new Violation(what)
        this.stats.deposedFencedAppends++
        this.world.log(`  (${what}: allowed unless it is committed)`)
        this.deposedFencedAppends.add(partition.partition, base, bytes, what)
      }
    }
  }

  /** The LSO never passes the first offset of a transaction undecided in the log, nor goes back. */
  private checkLastStableOffset(broker: SimBroker, partition: Partition): void {
    const hw = partition.highWatermark
    const lso = partition.lastStableOffset
    const p = partition.partition
    if (lso > hw)
      throw new Violation(
        `leader ${broker.nodeId} of p${p}: last stable offset ${lso} above its high watermark ${hw}`,
      )
    const key = `${broker.nodeId}.${broker.incarnation}:${p}:${partition.leaderEpoch}`
    const last = this.lastLso.get(key) ?? -1
    if (lso < last)
      throw new Violation(
        `leader ${broker.nodeId} of p${p} (epoch ${partition.leaderEpoch}): last stable offset went back ${last} -> ${lso}`,
      )
    this.lastLso.set(key, lso)
    this.checkUndecided(broker, partition, 'leader')
  }

  /** The LSO never passes the first offset of a transaction undecided in the committed log at the replica's HW. */
  private checkUndecided(broker: SimBroker, partition: Partition, role: 'leader' | 'follower'): void {
    const hw = partition.highWatermark
    const lso = partition.lastStableOffset
    const p = partition.partition
    const scan = this.scanOf(p)
    // The committed history must reach this replica's HW (the agreement check just read it).
    if (scan.scannedTo < hw) return
    this.stats.lsoChecks++
    if (role === 'follower') this.stats.followerLsoChecks++
    if (lso < hw) this.stats.lsoBehindHw++
    const undecided = scan.firstUndecidedBelow(hw)
    if (undecided !== null && lso > undecided.firstOffset)
      throw new Violation(
        `${role} ${broker.nodeId} of p${p} (epoch ${partition.leaderEpoch}): last stable offset ${lso} passes offset ${undecided.firstOffset}, the first of producer ${undecided.producerId}'s transaction, which has no marker below the high watermark ${hw}`,
      )
  }

  /**
   * An OffsetFetch (require_stable) of producer `producer`'s group returned `offset`: it must
   * be the offset a transaction sent with TxnOffsetCommit, one whose producer asked to commit
   * it (offsets committed in an aborted or open transaction never become visible).
   */
  onTxnOffsetsFetched(producer: number, offset: number): void {
    this.stats.offsetFetches++
    if (offset < 0) return
    const txnId = txnIdOf(producer, offset - 1)
    const txn = this.book.txns.get(txnId)
    if (!txn || txn.offsetSent !== offset)
      throw new Violation(
        `group of txn producer ${producer}: the coordinator returned committed offset ${offset}, which no transaction sent`,
      )
    if (!txn.commitSent || txn.status === 'aborted' || txn.status === 'aborting')
      throw new Violation(
        `group of txn producer ${producer}: the coordinator returned offset ${offset}, committed in transaction ${txnId}, which its producer ${txn.commitSent ? 'knows aborted' : 'never asked to commit'} (status ${txn.status})`,
      )
  }

  /** A read_committed consumer's poll() returned these records of `partition`. */
  onDelivered(partition: number, records: readonly DeliveredRecord[]): void {
    let list = this.delivered.get(partition)
    if (!list) {
      list = []
      this.delivered.set(partition, list)
    }
    for (const record of records) {
      const parsed = parseTxnRecordValue(record.value)
      if (!parsed) continue
      this.stats.deliveredRecords++
      const at = `${record.value} (offset ${record.offset})`
      const txn = this.book.txns.get(parsed.txnId)
      if (!txn)
        throw new Violation(
          `read_committed consumer of p${partition} returned ${at}, of a transaction no producer began`,
        )
      if (txn.status === 'aborted' || txn.status === 'aborting')
        throw new Violation(
          `read_committed consumer of p${partition} returned ${at} of transaction ${txn.txnId}, which its producer ${txn.status === 'aborted' ? 'knows aborted' : 'is aborting'}`,
        )
      if (!txn.commitSent)
        throw new Violation(
          `read_committed consumer of p${partition} returned ${at} of transaction ${txn.txnId}, which is still open (its producer has not asked to commit it)`,
        )
      list.push(`${record.value}@${record.offset}`)
    }
  }
}
