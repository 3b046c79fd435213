/**
 * The consumer checks (`consumers`, `transactions`): a broker answers a consumer below its
 * high watermark (read_committed: its last stable offset); the consumers of `consumers`
 * (tidelog's own Consumer, consumer.ts) return records
 * in offset order, skipping control records only, each equal to the record committed there,
 * and at the end every acknowledged acks=all record read back once, at its offset.
 */
import { decodeRecordBatchSync, splitBatches } from '../protocol/record-batch.js'
import type { SimBroker } from './sim-broker.js'
import { TOPIC, Violation } from './world-view.js'

/** Bytes of a fetch response's records field: one buffer, or chunks as the handler built them. */
export function recordsBytes(records: unknown): Buffer {
  if (records === null || records === undefined) return Buffer.alloc(0)
  if (Buffer.isBuffer(records)) return records
  if (Array.isArray(records)) return Buffer.concat(records as Buffer[])
  return Buffer.alloc(0)
}

/** Whole batches of a records blob: [base offset, last offset, bytes]. */
export function wholeBatches(records: Buffer): { base: number; last: number; bytes: Buffer }[] {
  const split = splitBatches(records)
  const out: { base: number; last: number; bytes: Buffer }[] = []
  for (const span of split.batches) {
    const bytes = records.subarray(span.at, span.at + span.sizeInBytes)
    const header = decodeRecordBatchSync(bytes)
    const base = Number(header.baseOffset)
    out.push({ base, last: base + header.lastOffsetDelta, bytes })
  }
  return out
}

/** What a consumer may find at an offset it skipped: a control record (a transaction marker). */
const CONTROL = Symbol('control record')
/** A record's value as the checks keep it (null: no value). */
type Value = string | null
/** An offset the consumer skipped: it must turn out to hold a control record. */
const SKIPPED = Symbol('skipped')

export class ConsumerInvariants {
  /** `recordsChecked`: per partition, offset → the record committed there, once the agreement check saw its batch. */
  private readonly committedRecords = new Map<number, Map<number, Value | typeof CONTROL>>()
  /** Per partition: what a consumer returned (or skipped) before its batch was seen committed. */
  private readonly recordsPending = new Map<number, Map<number, Value | typeof SKIPPED>>()
  /** Per partition: offset → the value the consumer returned there. */
  private readonly consumedRecords = new Map<number, Map<number, Value>>()
  /** Per partition: the offset after the last record the consumer returned. */
  private readonly nextRecord = new Map<number, number>()
  recordsConsumed = 0

  /** `recordsChecked`: the run has record consumers (`consumers`): committed batches are decoded for them. */
  constructor(private readonly recordsChecked: boolean) {}

  /**
   * The partition's consumer returned the record at `offset`: after the one before it, with
   * only control records between them, and equal to the record committed at `offset` (when
   * the agreement check sees it committed, if it has not yet).
   */
  onRecord(partition: number, offset: number, value: Value): void {
    this.recordsConsumed++
    const next = this.nextRecord.get(partition) ?? 0
    if (offset < next)
      throw new Violation(
        `consumer of p${partition} returned offset ${offset} after offset ${next - 1}: read again or out of order`,
      )
    for (let skipped = next; skipped < offset; skipped++) this.expectRecord(partition, skipped, SKIPPED)
    this.nextRecord.set(partition, offset + 1)
    mapOf(this.consumedRecords, partition).set(offset, value)
    this.expectRecord(partition, offset, value)
  }

  /** The consumer's position at the end: offsets it skipped up to there hold control records. */
  onFinalPosition(partition: number, position: number): void {
    const next = this.nextRecord.get(partition) ?? 0
    for (let skipped = next; skipped < position; skipped++) this.expectRecord(partition, skipped, SKIPPED)
    this.nextRecord.set(partition, Math.max(next, position))
  }

  /** Every acknowledged acks=all record was returned by its partition's consumer, at its offset. */
  checkAckedReadBack(partition: number, baseOffset: number, values: readonly string[]): void {
    const consumed = this.consumedRecords.get(partition)
    values.forEach((value, i) => {
      const found = consumed?.get(baseOffset + i)
      if (found !== value)
        throw new Violation(
          `acknowledged ${value} (p${partition} @${baseOffset + i}) not read back by the consumer: it returned ${found === undefined ? 'nothing' : found} there`,
        )
    })
  }

  private expectRecord(partition: number, offset: number, consumed: Value | typeof SKIPPED): void {
    const committed = this.committedRecords.get(partition)?.get(offset)
    if (committed === undefined) mapOf(this.recordsPending, partition).set(offset, consumed)
    else this.compareRecord(partition, offset, consumed, committed)
  }

  private compareRecord(
    partition: number,
    offset: number,
    consumed: Value | typeof SKIPPED,
    committed: Value | typeof CONTROL,
  ): void {
    if (consumed === SKIPPED) {
      if (committed === CONTROL) return
      throw new Violation(
        `consumer of p${partition} skipped offset ${offset}, which holds the committed record ${committed}`,
      )
    }
    if (committed === CONTROL)
      throw new Violation(`consumer of p${partition} returned the control record at offset ${offset}`)
    if (consumed !== committed)
      throw new Violation(
        `consumer of p${partition} returned ${consumed} at offset ${offset}, where ${committed} is committed`,
      )
  }

  /** The agreement check saw `bytes` committed at `base`: a record consumed before must equal it. */
  onCommitted(partition: number, bytes: Buffer): void {
    if (this.recordsChecked) this.onRecordsCommitted(partition, bytes)
  }

  /**
   * A broker answers a consumer's fetch: no batch in it may reach the broker's high watermark
   * at the time of the answer (read_uncommitted reads committed data only), nor, for a
   * read_committed fetch, its last stable offset.
   */
  onConsumerAnswer(broker: SimBroker, partition: number, records: Buffer, readCommitted = false): void {
    const hosted = broker.replicaManager.getPartition(TOPIC, partition)
    const bound = (readCommitted ? hosted?.lastStableOffset : hosted?.highWatermark) ?? -1
    const name = readCommitted ? 'last stable offset' : 'high watermark'
    for (const batch of wholeBatches(records)) {
      if (batch.last >= bound)
        throw new Violation(
          `broker ${broker.nodeId} answered a ${readCommitted ? 'read_committed ' : ''}consumer of p${partition} with offsets ${batch.base}..${batch.last}, at or above its ${name} ${bound}${hosted?.isLeader === true ? '' : ' (not leading)'}`,
        )
    }
  }

  private onRecordsCommitted(partition: number, bytes: Buffer): void {
    const batch = decodeRecordBatchSync(bytes)
    const committed = mapOf(this.committedRecords, partition)
    const pending = this.recordsPending.get(partition)
    const base = Number(batch.baseOffset)
    const found: [number, Value | typeof CONTROL][] = batch.isControl
      ? Array.from({ length: batch.lastOffsetDelta + 1 }, (_, i) => [base + i, CONTROL])
      : batch.records.map((record) => [record.offset, record.value?.toString() ?? null])
    for (const [offset, record] of found) {
      committed.set(offset, record)
      const consumed = pending?.get(offset)
      if (consumed === undefined) continue
      pending!.delete(offset)
      this.compareRecord(partition, offset, consumed, record)
    }
  }

  /** At the end: every record a consumer returned (or offset it skipped) was seen committed. */
  checkConsumedCommitted(): void {
    for (const [partition, pending] of this.recordsPending)
      for (const [offset, consumed] of pending)
        throw new Violation(
          `consumer of p${partition} ${consumed === SKIPPED ? 'skipped' : `returned ${consumed} at`} offset ${offset}, which was never seen committed`,
        )
  }
}

function mapOf<K, V>(maps: Map<number, Map<K, V>>, partition: number): Map<K, V> {
  let map = maps.get(partition)
  if (!map) {
    map = new Map()
    maps.set(partition, map)
  }
  return map
}
