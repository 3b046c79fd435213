/**
 * Version orders, as Jepsen's Kafka workload infers them: each partition is a list of
 * values in offset order, offsets' gaps ignored (transaction markers and aborted records
 * take offsets no consumer sees). The poll and transaction checks judge positions in these
 * lists rather than raw offsets, so "the next record" means the next visible one.
 */
import type { AckEvent, History, ReadEvent, SendEvent } from './history.js'

export interface VersionEntry {
  readonly value: string
  readonly offset: number
  /** The first ack or read that placed the value at this offset. */
  readonly event: AckEvent | ReadEvent
}

export interface VersionOrder {
  readonly entries: readonly VersionEntry[]
  /** value → its index in `entries` (its lowest, should a duplicate place it twice). */
  readonly indexByValue: ReadonlyMap<string, number>
  /** offset → index in `entries`. */
  readonly indexByOffset: ReadonlyMap<number, number>
}

/** Where a read sits: at its own offset (a duplicate's second copy is a place of its own), else its value's place. */
export function indexOfRead(order: VersionOrder, read: ReadEvent): number | undefined {
  const atOffset = order.indexByOffset.get(read.offset)
  if (atOffset !== undefined && order.entries[atOffset].value === read.value) return atOffset
  return order.indexByValue.get(read.value)
}

export const partitionKey = (topic: string, partition: number): string => `${topic}\u0000${partition}`

/**
 * One version order per partition from acks with an offset and reads, keeping only values
 * `visible` accepts (the caller leaves out records of aborted or undecided transactions,
 * which a read_committed consumer must not see). At an offset claimed by two values (a
 * conflicting offset, reported elsewhere) the first claim in line order wins.
 */
export function buildVersionOrders(
  history: History,
  sendOf: (producer: string, seq: number) => SendEvent,
  visible: (topic: string, value: string) => boolean,
): Map<string, VersionOrder> {
  const byPartition = new Map<string, Map<number, VersionEntry>>()
  const place = (
    topic: string,
    partition: number,
    offset: number,
    value: string,
    event: AckEvent | ReadEvent,
  ) => {
    if (!visible(topic, value)) return
    const key = partitionKey(topic, partition)
    let offsets = byPartition.get(key)
    if (!offsets) byPartition.set(key, (offsets = new Map()))
    const earlier = offsets.get(offset)
    if (!earlier || earlier.event.line > event.line) offsets.set(offset, { value, offset, event })
  }
  for (const ack of history.acks)
    if (ack.offset !== null)
      place(ack.topic, ack.partition, ack.offset, sendOf(ack.producer, ack.seq).value, ack)
  for (const read of history.reads) place(read.topic, read.partition, read.offset, read.value, read)

  const orders = new Map<string, VersionOrder>()
  for (const [key, offsets] of byPartition) {
    const entries = [...offsets.values()].sort((a, b) => a.offset - b.offset)
    const indexByValue = new Map<string, number>()
    const indexByOffset = new Map<number, number>()
    entries.forEach((entry, i) => {
      if (!indexByValue.has(entry.value)) indexByValue.set(entry.value, i)
      indexByOffset.set(entry.offset, i)
    })
    orders.set(key, { entries, indexByValue, indexByOffset })
  }
  return orders
}
