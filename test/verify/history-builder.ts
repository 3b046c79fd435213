/**
 * Builds synthetic histories for the verifier's tests: one topic, offsets assigned as a
 * broker would (each send acked at its partition's next offset, and a transaction's commit
 * or abort takes one offset in each partition it wrote, as its marker does), and the line
 * of any event found by its fields.
 */
import assert from 'node:assert/strict'
import { ANOMALY_KINDS, type AnomalyKind, checkHistory, type VerifyReport } from '../../src/verify/checker.js'
import { parseHistory } from '../../src/verify/history.js'

export type Event = Record<string, unknown>
export const TOPIC = 't'

export class HistoryBuilder {
  readonly events: Event[] = [{ type: 'header', format: 'tidelog-history', version: 1 }]
  private readonly nextSeq = new Map<string, number>()
  private readonly nextOffset = new Map<number, number>()
  private readonly offsetOf = new Map<string, { partition: number; offset: number }>()
  /** producer/txn → the partitions it wrote, for its marker. */
  private readonly written = new Map<string, Set<number>>()

  /** A send acked at the partition's next offset (`ack: false`: sent, never answered). */
  write(
    producer: string,
    partition: number,
    value: string,
    options: { txn?: string; ack?: boolean } = {},
  ): this {
    const seq = this.nextSeq.get(producer) ?? 0
    this.nextSeq.set(producer, seq + 1)
    const txn = options.txn === undefined ? {} : { txn: options.txn }
    this.events.push({ type: 'send', producer, seq, topic: TOPIC, partition, value, ...txn })
    const offset = this.take(partition)
    this.offsetOf.set(value, { partition, offset })
    if (options.txn !== undefined) {
      const key = `${producer}/${options.txn}`
      this.written.set(key, (this.written.get(key) ?? new Set()).add(partition))
    }
    if (options.ack !== false)
      this.events.push({ type: 'ack', producer, seq, topic: TOPIC, partition, offset })
    return this
  }

  begin(producer: string, txn: string): this {
    this.events.push({ type: 'begin', producer, txn })
    return this
  }

  commit(producer: string, txn: string): this {
    return this.end('commit', producer, txn)
  }

  abort(producer: string, txn: string): this {
    return this.end('abort', producer, txn)
  }

  /** A read of `value` where it was written; `fields` adds isolation, poll, producer/txn. */
  read(consumer: string, value: string, fields: Event = {}): this {
    const at = this.offsetOf.get(value)
    assert.ok(at, `${value} was written`)
    this.events.push({ type: 'read', consumer, topic: TOPIC, ...at, value, ...fields })
    return this
  }

  assign(consumer: string, partition: number): this {
    this.events.push({ type: 'assign', consumer, topic: TOPIC, partition })
    return this
  }

  /** A reader read `partition` from 0 to its current end. */
  covered(partition: number): this {
    this.events.push({
      type: 'covered',
      topic: TOPIC,
      partition,
      startOffset: 0,
      endOffset: this.nextOffset.get(partition) ?? 0,
    })
    return this
  }

  /** 1-based line of the only event with all of `fields`. */
  line(fields: Event): number {
    const matches = this.events.flatMap((e, i) =>
      Object.entries(fields).every(([k, v]) => e[k] === v) ? [i + 1] : [],
    )
    assert.equal(matches.length, 1, `one event matches ${JSON.stringify(fields)}`)
    return matches[0]
  }

  text(): string {
    return `${this.events.map((e) => JSON.stringify(e)).join('\n')}\n`
  }

  check(): VerifyReport {
    return checkHistory(parseHistory(this.text()))
  }

  private end(type: 'commit' | 'abort', producer: string, txn: string): this {
    for (const partition of this.written.get(`${producer}/${txn}`) ?? []) this.take(partition)
    this.events.push({ type, producer, txn })
    return this
  }

  private take(partition: number): number {
    const offset = this.nextOffset.get(partition) ?? 0
    this.nextOffset.set(partition, offset + 1)
    return offset
  }
}

/** Every anomaly list but `kinds` is empty, and the report fails exactly when some kind is expected. */
export function onlyAnomalies(report: VerifyReport, ...kinds: AnomalyKind[]): void {
  for (const kind of ANOMALY_KINDS)
    if (!kinds.includes(kind)) assert.deepEqual(report.anomalies[kind], [], `no ${kind}`)
  for (const kind of kinds) assert.ok(report.anomalies[kind].length > 0, `some ${kind}`)
  assert.equal(report.ok, kinds.length === 0)
}
