/**
 * Jepsen's poll checks: a consumer's successive reads of a partition must be neighbours in
 * the partition's version order. A read more than one place after the consumer's previous
 * one there skipped records (poll-skip); one at or before it went back (nonmonotonic poll).
 * Two reads from one poll (same `poll` number) are the internal variants. An `assign` line
 * restarts the consumer's sequence on that partition: after a rebalance or a seek its
 * position may move anywhere. Reads without a consumer, and of records outside the version
 * order (aborted or undecided transactions), are not judged here.
 */
import type { AssignEvent, History, ReadEvent } from './history.js'
import { indexOfRead, partitionKey, type VersionEntry, type VersionOrder } from './version-order.js'

export interface PollStep {
  readonly consumer: string
  readonly topic: string
  readonly partition: number
  /** The consumer's previous read of the partition, and this one. */
  readonly previous: ReadEvent
  readonly next: ReadEvent
  /** Places moved in the version order: 1 is the next record. */
  readonly delta: number
  /** For a skip: the records passed over, with the event that shows each was there. */
  readonly skipped: readonly VersionEntry[]
}

export interface PollAnomalies {
  readonly pollSkips: PollStep[]
  readonly nonmonotonicPolls: PollStep[]
  readonly internalPollSkips: PollStep[]
  readonly internalNonmonotonicPolls: PollStep[]
}

type ConsumerEvent = ReadEvent | AssignEvent

function eventsByConsumer(history: History): Map<string, ConsumerEvent[]> {
  const byConsumer = new Map<string, ConsumerEvent[]>()
  const add = (consumer: string, event: ConsumerEvent) => {
    const list = byConsumer.get(consumer)
    if (list) list.push(event)
    else byConsumer.set(consumer, [event])
  }
  for (const read of history.reads) if (read.consumer !== undefined) add(read.consumer, read)
  for (const assign of history.assigns) add(assign.consumer, assign)
  for (const events of byConsumer.values()) events.sort((a, b) => a.line - b.line)
  return byConsumer
}

export function findPollAnomalies(
  history: History,
  orders: ReadonlyMap<string, VersionOrder>,
): PollAnomalies {
  const found: PollAnomalies = {
    pollSkips: [],
    nonmonotonicPolls: [],
    internalPollSkips: [],
    internalNonmonotonicPolls: [],
  }
  for (const [consumer, events] of eventsByConsumer(history)) {
    const last = new Map<string, { read: ReadEvent; index: number }>()
    for (const event of events) {
      const key = partitionKey(event.topic, event.partition)
      if (event.type === 'assign') {
        last.delete(key)
        continue
      }
      const order = orders.get(key)
      const index = order && indexOfRead(order, event)
      if (order === undefined || index === undefined) continue
      const previous = last.get(key)
      last.set(key, { read: event, index })
      if (!previous) continue
      const delta = index - previous.index
      if (delta === 1) continue
      const internal = event.poll !== undefined && event.poll === previous.read.poll
      const step: PollStep = {
        consumer,
        topic: event.topic,
        partition: event.partition,
        previous: previous.read,
        next: event,
        delta,
        skipped: delta > 1 ? order.entries.slice(previous.index + 1, index) : [],
      }
      if (delta > 1) (internal ? found.internalPollSkips : found.pollSkips).push(step)
      else (internal ? found.internalNonmonotonicPolls : found.nonmonotonicPolls).push(step)
    }
  }
  return found
}
