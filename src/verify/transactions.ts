/**
 * Transaction checks over a parsed history: what each transaction became (committed,
 * aborted, undecided), reads a read_committed consumer must never make (an aborted
 * transaction's records, a transaction's records while it was still open), and Elle's
 * intermediate reads. The dependency cycles (G0, G1c) are in cycles.ts.
 */
import type { History, ReadEvent, SendEvent, TransactionEvent } from './history.js'
import { indexOfRead, partitionKey, type VersionOrder } from './version-order.js'

export type TxnOutcome = 'committed' | 'aborted' | 'undecided'

export interface Transaction {
  readonly producer: string
  readonly txn: string
  readonly begin: TransactionEvent | undefined
  /** Its commit or abort line; undefined while undecided. */
  readonly end: TransactionEvent | undefined
  readonly outcome: TxnOutcome
  readonly sends: readonly SendEvent[]
  /** Reads made as part of it (consume-transform-produce). */
  readonly reads: readonly ReadEvent[]
}

export const txnKey = (producer: string, txn: string): string => `${producer}\u0000${txn}`

export function indexTransactions(history: History): Map<string, Transaction> {
  type Building = { -readonly [K in keyof Transaction]: Transaction[K] } & {
    sends: SendEvent[]
    reads: ReadEvent[]
  }
  const txns = new Map<string, Building>()
  const get = (producer: string, txn: string): Building => {
    const key = txnKey(producer, txn)
    let t = txns.get(key)
    if (!t) {
      t = { producer, txn, begin: undefined, end: undefined, outcome: 'undecided', sends: [], reads: [] }
      txns.set(key, t)
    }
    return t
  }
  for (const event of history.transactions) {
    const t = get(event.producer, event.txn)
    if (event.type === 'begin') t.begin = event
    else {
      t.end = event
      t.outcome = event.type === 'commit' ? 'committed' : 'aborted'
    }
  }
  for (const send of history.sends) if (send.txn !== undefined) get(send.producer, send.txn).sends.push(send)
  for (const read of history.reads)
    if (read.txn !== undefined && read.producer !== undefined) get(read.producer, read.txn).reads.push(read)
  return txns
}

/** The transaction a send belongs to, if any. */
export function txnOf(txns: ReadonlyMap<string, Transaction>, send: SendEvent): Transaction | undefined {
  return send.txn === undefined ? undefined : txns.get(txnKey(send.producer, send.txn))
}

/** G1a: a read_committed read of a record whose transaction aborted. */
export interface AbortedRead {
  readonly read: ReadEvent
  readonly send: SendEvent
  readonly abort: TransactionEvent
}

/**
 * A read_committed read of a record whose transaction had not committed when it was read:
 * the reader's own transaction's record ('own-transaction', Jepsen's precommitted read), or
 * a record of a transaction its producer went on sending in after the read ('still-open':
 * a producer sends nothing more once it asked to commit, so the transaction was open).
 */
export interface UncommittedRead {
  readonly read: ReadEvent
  readonly send: SendEvent
  readonly reason: 'own-transaction' | 'still-open'
  /** For 'still-open': the transaction's first send after the read. */
  readonly laterSend: SendEvent | undefined
}

const readCommitted = (read: ReadEvent): boolean => read.isolation === 'read_committed'

export function findAbortedReads(
  history: History,
  txns: ReadonlyMap<string, Transaction>,
  sendOfValue: (topic: string, value: string) => SendEvent | undefined,
): AbortedRead[] {
  const found: AbortedRead[] = []
  for (const read of history.reads) {
    if (!readCommitted(read)) continue
    const send = sendOfValue(read.topic, read.value)
    const txn = send && txnOf(txns, send)
    if (send && txn?.outcome === 'aborted') found.push({ read, send, abort: txn.end! })
  }
  return found
}

export function findUncommittedReads(
  history: History,
  txns: ReadonlyMap<string, Transaction>,
  sendOfValue: (topic: string, value: string) => SendEvent | undefined,
): UncommittedRead[] {
  const found: UncommittedRead[] = []
  for (const read of history.reads) {
    if (!readCommitted(read)) continue
    const send = sendOfValue(read.topic, read.value)
    const txn = send && txnOf(txns, send)
    if (!send || !txn || txn.outcome === 'aborted') continue
    if (read.txn !== undefined && txnKey(read.producer!, read.txn) === txnKey(txn.producer, txn.txn)) {
      found.push({ read, send, reason: 'own-transaction', laterSend: undefined })
      continue
    }
    const laterSend = firstSendAfter(txn, read.line)
    if (laterSend) found.push({ read, send, reason: 'still-open', laterSend })
  }
  return found
}

/** The transaction's first send after `line` (its sends are in line order: binary search, as a transaction may be large). */
function firstSendAfter(txn: Transaction, line: number): SendEvent | undefined {
  let low = 0
  let high = txn.sends.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (txn.sends[middle].line > line) high = middle
    else low = middle + 1
  }
  return txn.sends[low]
}

/**
 * G1b: a committed transaction's last read of a partition is a record that another
 * transaction overwrote later in that partition (its writes there continue past it), so
 * it read the writer's intermediate state rather than its final one.
 */
export interface IntermediateRead {
  readonly reader: Transaction
  readonly read: ReadEvent
  readonly writer: Transaction
  /** The writer's record the reader saw, and its later record in the same partition. */
  readonly send: SendEvent
  readonly laterSend: SendEvent
}

/** Per committed transaction and partition, the read highest in the version order. */
export function lastReads(
  txn: Transaction,
  orders: ReadonlyMap<string, VersionOrder>,
): Map<string, { read: ReadEvent; index: number }> {
  const last = new Map<string, { read: ReadEvent; index: number }>()
  for (const read of txn.reads) {
    const key = partitionKey(read.topic, read.partition)
    const order = orders.get(key)
    const index = order && indexOfRead(order, read)
    if (index === undefined) continue
    const best = last.get(key)
    if (!best || index > best.index) last.set(key, { read, index })
  }
  return last
}

export function findIntermediateReads(
  txns: ReadonlyMap<string, Transaction>,
  orders: ReadonlyMap<string, VersionOrder>,
  sendOfValue: (topic: string, value: string) => SendEvent | undefined,
): IntermediateRead[] {
  const found: IntermediateRead[] = []
  for (const reader of txns.values()) {
    if (reader.outcome !== 'committed') continue
    for (const [key, { read, index }] of lastReads(reader, orders)) {
      const send = sendOfValue(read.topic, read.value)
      const writer = send && txnOf(txns, send)
      if (!send || !writer || writer === reader || writer.outcome !== 'committed') continue
      const order = orders.get(key)!
      const laterSend = writer.sends.find((s) => {
        const i = order.indexByValue.get(s.value)
        return s.topic === read.topic && i !== undefined && i > index
      })
      if (laterSend) found.push({ reader, read, writer, send, laterSend })
    }
  }
  return found
}
