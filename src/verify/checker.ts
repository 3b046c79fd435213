/**
 * The checker: a History in, a VerifyReport out, no I/O. It looks for what a Kafka client
 * must never see from a correct cluster (lost acknowledged writes, duplicates from
 * idempotent producers, one producer's records out of send order, records nobody sent,
 * records away from their acknowledged offset, two records at one offset), and lists each
 * anomaly with the events that show it, so a failed run can be read line by line.
 *
 * Records are identified by (topic, value): the format requires each send's value to be
 * unique in its topic. What is judged:
 * - lost: acked, never read, and a `covered` event after the ack says a reader read the
 *   partition from at or below the acked offset to its end. An ack without an offset
 *   (acks=0) is judged only against coverage from offset 0.
 * - duplicate: one sent value read at two positions. Expected (listed apart, not an anomaly)
 *   for producers declared `idempotent: false`, whose retries may write a batch twice.
 * - reordering: two acknowledged sends of one producer in one partition whose offsets (as
 *   acked, or as first read) are in the opposite order of their seq.
 * - phantom read: a read value that no send has, or whose key differs from the send's.
 * - offset mismatch: acked at an offset, read, but never at that partition and offset.
 * - conflicting offset: different values acked or read at one partition and offset.
 * Then Jepsen's Kafka workload's checks over version orders (version-order.ts): poll skips
 * and nonmonotonic polls (polls.ts), aborted reads (G1a), reads of uncommitted records and
 * intermediate reads (G1b) (transactions.ts), and dependency cycles G0 and G1c (cycles.ts).
 * Then the groups' committed offsets against their members' reads: group skips and stalls
 * (groups.ts).
 * Acks of aborted or undecided transactions' records are not judged for loss: a
 * read_committed reader must not see the former, and may or may not see the latter.
 */
import { type DependencyCycle, dependencyEdges, findCycles } from './cycles.js'
import { findGroupAnomalies, type GroupFinding } from './groups.js'
import type { AckEvent, CoveredEvent, History, ReadEvent, SendEvent } from './history.js'
import { findPollAnomalies, type PollStep } from './polls.js'
import {
  type AbortedRead,
  findAbortedReads,
  findIntermediateReads,
  findUncommittedReads,
  type IntermediateRead,
  indexTransactions,
  txnOf,
  type UncommittedRead,
} from './transactions.js'
import { buildVersionOrders } from './version-order.js'

export interface LostWrite {
  readonly send: SendEvent
  readonly ack: AckEvent
  /** The coverage that should have included it. */
  readonly covered: CoveredEvent
}

export interface Duplicate {
  readonly topic: string
  readonly value: string
  readonly send: SendEvent
  /** The first read at each distinct partition and offset. */
  readonly reads: readonly ReadEvent[]
}

export interface Placement {
  readonly send: SendEvent
  readonly offset: number
  /** The ack, or the first read at that offset. */
  readonly event: AckEvent | ReadEvent
}

export interface Reordering {
  readonly producer: string
  readonly topic: string
  readonly partition: number
  /** Whether the acks' offsets or the reads' offsets contradict the send order. */
  readonly source: 'ack' | 'read'
  /** Lower seq, yet at the higher offset. */
  readonly sentFirst: Placement
  /** Higher seq, yet at the lower offset. */
  readonly sentSecond: Placement
}

export interface PhantomRead {
  readonly topic: string
  readonly value: string
  readonly reason: 'never-sent' | 'key-differs'
  /** The send with that value, when its key is what differs. */
  readonly send: SendEvent | null
  readonly reads: readonly ReadEvent[]
}

export interface OffsetMismatch {
  readonly send: SendEvent
  readonly ack: AckEvent
  /** Where the value was read instead. */
  readonly reads: readonly ReadEvent[]
}

export interface ConflictingOffset {
  readonly topic: string
  readonly partition: number
  readonly offset: number
  /** One claim per distinct value: an ack (value from its send) or a read. */
  readonly claims: readonly { readonly value: string; readonly event: AckEvent | ReadEvent }[]
}

export interface Anomalies {
  readonly lost: readonly LostWrite[]
  readonly duplicates: readonly Duplicate[]
  readonly reorderings: readonly Reordering[]
  readonly phantomReads: readonly PhantomRead[]
  readonly offsetMismatches: readonly OffsetMismatch[]
  readonly conflictingOffsets: readonly ConflictingOffset[]
  readonly pollSkips: readonly PollStep[]
  readonly nonmonotonicPolls: readonly PollStep[]
  readonly internalPollSkips: readonly PollStep[]
  readonly internalNonmonotonicPolls: readonly PollStep[]
  readonly abortedReads: readonly AbortedRead[]
  readonly uncommittedReads: readonly UncommittedRead[]
  readonly intermediateReads: readonly IntermediateRead[]
  readonly circularFlows: readonly DependencyCycle[]
  readonly groupSkips: readonly GroupFinding[]
  readonly groupStalls: readonly GroupFinding[]
}

export const UNSEEN_LISTED_MAX = 1000

/** An acknowledged write of a visible record that no read saw and no coverage judged. */
export interface Unseen {
  readonly send: SendEvent
  readonly ack: AckEvent
}

export type AnomalyKind = keyof Anomalies

export const ANOMALY_KINDS: readonly AnomalyKind[] = [
  'lost',
  'duplicates',
  'reorderings',
  'phantomReads',
  'offsetMismatches',
  'conflictingOffsets',
  'pollSkips',
  'nonmonotonicPolls',
  'internalPollSkips',
  'internalNonmonotonicPolls',
  'abortedReads',
  'uncommittedReads',
  'intermediateReads',
  'circularFlows',
  'groupSkips',
  'groupStalls',
]

export interface VerifyReport {
  /** No anomaly of any kind. */
  readonly ok: boolean
  readonly counts: {
    readonly lines: number
    readonly producers: number
    readonly sends: number
    readonly acks: number
    readonly acksWithoutOffset: number
    readonly fails: number
    /** Sends with neither ack nor fail: in flight when the history ended. */
    readonly unanswered: number
    readonly reads: number
    /** Distinct (topic, partition, offset) read. */
    readonly readPositions: number
    readonly coveredPartitions: number
    /** `crash` lines: consumers that stopped without committing or leaving. */
    readonly crashes: number
    /** `group-offset` lines: groups' committed offsets judged against their members' reads. */
    readonly groupOffsets: number
    /** Acks read somewhere, or covered by a later `covered` event. */
    readonly acksCheckedForLoss: number
    /** Acks never read and with no coverage after them: their loss could not be judged. */
    readonly acksNotCheckedForLoss: number
    readonly anomalies: number
    readonly transactions: {
      readonly committed: number
      readonly aborted: number
      readonly undecided: number
    }
    readonly unseen: number
  }
  readonly anomalies: Anomalies
  /**
   * Not anomalies: duplicates of producers declared `idempotent: false`, G0 write cycles,
   * and cycles through a read that need a write-order edge to close (Kafka does not isolate
   * concurrent transactions' writes: see cycles.ts).
   */
  readonly expected: {
    readonly duplicates: readonly Duplicate[]
    readonly writeCycles: readonly DependencyCycle[]
    readonly cyclesThroughWrites: readonly DependencyCycle[]
  }
  /**
   * Jepsen's unseen writes: acknowledged, never read, and no coverage says they are lost.
   * The first UNSEEN_LISTED_MAX (a producer-only history has every ack here); `counts.unseen` has them all.
   */
  readonly unseen: readonly Unseen[]
  readonly notChecked: readonly string[]
}

const recordId = (topic: string, value: string): string => `${topic}\u0000${value}`
const partitionId = (topic: string, partition: number): string => `${topic}\u0000${partition}`
const positionId = (topic: string, partition: number, offset: number): string =>
  `${topic}\u0000${partition}\u0000${offset}`
const sendId = (producer: string, seq: number): string => `${producer}\u0000${seq}`

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key)
  if (list) list.push(value)
  else map.set(key, [value])
}

interface ReadIndex {
  /** record → the first read at each distinct position. */
  readonly byRecord: Map<string, ReadEvent[]>
  /** position → the first read of each distinct value there. */
  readonly byPosition: Map<string, ReadEvent[]>
  /** record → reads whose key differs from the send's, one per position. */
  readonly keyDiffers: Map<string, ReadEvent[]>
}

function indexReads(history: History, sendsByRecord: ReadonlyMap<string, SendEvent>): ReadIndex {
  const byRecord = new Map<string, ReadEvent[]>()
  const byPosition = new Map<string, ReadEvent[]>()
  const keyDiffers = new Map<string, ReadEvent[]>()
  for (const read of history.reads) {
    const record = recordId(read.topic, read.value)
    const atPosition = byPosition.get(positionId(read.topic, read.partition, read.offset))
    if (!atPosition) byPosition.set(positionId(read.topic, read.partition, read.offset), [read])
    else if (!atPosition.some((r) => r.value === read.value)) atPosition.push(read)
    const samePlace = (r: ReadEvent) => r.partition === read.partition && r.offset === read.offset
    const ofRecord = byRecord.get(record)
    if (!ofRecord) byRecord.set(record, [read])
    else if (!ofRecord.some(samePlace)) ofRecord.push(read)
    const send = sendsByRecord.get(record)
    if (send && send.key !== undefined && read.key !== undefined && read.key !== send.key) {
      if (!(keyDiffers.get(record) ?? []).some(samePlace)) push(keyDiffers, record, read)
    }
  }
  return { byRecord, byPosition, keyDiffers }
}

function indexSends(history: History): {
  sendsByRecord: Map<string, SendEvent>
  sendsById: Map<string, SendEvent>
} {
  const sendsByRecord = new Map<string, SendEvent>()
  const sendsById = new Map<string, SendEvent>()
  for (const send of history.sends) {
    sendsByRecord.set(recordId(send.topic, send.value), send)
    sendsById.set(sendId(send.producer, send.seq), send)
  }
  return { sendsByRecord, sendsById }
}

export function checkHistory(history: History): VerifyReport {
  const { sendsByRecord, sendsById } = indexSends(history)
  const txns = indexTransactions(history)
  const sendOfValue = (topic: string, value: string) => sendsByRecord.get(recordId(topic, value))
  /** Records a read_committed reader must see once acknowledged: outside transactions, or committed. */
  const visible = (send: SendEvent | undefined): boolean => {
    const txn = send && txnOf(txns, send)
    return txn === undefined || txn.outcome === 'committed'
  }
  const orders = buildVersionOrders(
    history,
    (producer, seq) => sendsById.get(sendId(producer, seq))!,
    (topic, value) => visible(sendOfValue(topic, value)),
  )
  const ackBySend = new Map<SendEvent, AckEvent>()
  for (const ack of history.acks) ackBySend.set(sendsById.get(sendId(ack.producer, ack.seq))!, ack)
  const reads = indexReads(history, sendsByRecord)
  const coveredByPartition = new Map<string, CoveredEvent[]>()
  for (const covered of history.covered)
    push(coveredByPartition, partitionId(covered.topic, covered.partition), covered)

  const { lost, unseen, unseenCount, offsetMismatches, acksCheckedForLoss } = judgeAcks(
    history,
    sendsById,
    reads,
    coveredByPartition,
    visible,
  )
  const { duplicates, expectedDuplicates, phantomReads } = judgeReadRecords(history, reads, sendsByRecord)

  const { writeCycles, circularFlows, cyclesThroughWrites } = findCycles(
    dependencyEdges(txns, orders, sendOfValue),
  )
  const anomalies: Anomalies = {
    lost,
    duplicates,
    reorderings: findReorderings(ackBySend, reads),
    phantomReads,
    offsetMismatches,
    conflictingOffsets: findConflictingOffsets(history, sendsById, reads),
    ...findPollAnomalies(history, orders),
    abortedReads: findAbortedReads(history, txns, sendOfValue),
    uncommittedReads: findUncommittedReads(history, txns, sendOfValue),
    intermediateReads: findIntermediateReads(txns, orders, sendOfValue),
    circularFlows,
    ...findGroupAnomalies(history, (ack) => sendsById.get(sendId(ack.producer, ack.seq))!, visible),
  }
  const outcomes = { committed: 0, aborted: 0, undecided: 0 }
  for (const txn of txns.values()) outcomes[txn.outcome]++
  const anomalyCount = ANOMALY_KINDS.reduce((n, kind) => n + anomalies[kind].length, 0)
  const answered = history.acks.length + history.fails.length
  return {
    ok: anomalyCount === 0,
    counts: {
      lines: history.lines,
      producers: new Set(history.sends.map((s) => s.producer)).size,
      sends: history.sends.length,
      acks: history.acks.length,
      acksWithoutOffset: history.acks.filter((a) => a.offset === null).length,
      fails: history.fails.length,
      unanswered: history.sends.length - answered,
      reads: history.reads.length,
      readPositions: reads.byPosition.size,
      coveredPartitions: coveredByPartition.size,
      crashes: history.crashes.length,
      groupOffsets: history.groupOffsets.length,
      acksCheckedForLoss,
      acksNotCheckedForLoss: history.acks.length - acksCheckedForLoss,
      anomalies: anomalyCount,
      transactions: outcomes,
      unseen: unseenCount,
    },
    anomalies,
    expected: { duplicates: expectedDuplicates, writeCycles, cyclesThroughWrites },
    unseen,
    notChecked: notChecked(history, txns.size),
  }
}

/** Each acknowledged send against the reads: lost, unseen, or read away from its offset. */
function judgeAcks(
  history: History,
  sendsById: ReadonlyMap<string, SendEvent>,
  reads: ReturnType<typeof indexReads>,
  coveredByPartition: ReadonlyMap<string, CoveredEvent[]>,
  visible: (send: SendEvent) => boolean,
) {
  const lost: LostWrite[] = []
  const unseen: Unseen[] = []
  let unseenCount = 0
  const offsetMismatches: OffsetMismatch[] = []
  let acksCheckedForLoss = 0
  for (const ack of history.acks) {
    const send = sendsById.get(sendId(ack.producer, ack.seq))!
    const readsOfRecord = reads.byRecord.get(recordId(send.topic, send.value)) ?? []
    if (readsOfRecord.length > 0) {
      acksCheckedForLoss++
      const atAckedOffset = readsOfRecord.some(
        (r) => r.partition === ack.partition && r.offset === ack.offset,
      )
      if (ack.offset !== null && !atAckedOffset) offsetMismatches.push({ send, ack, reads: readsOfRecord })
      continue
    }
    const covered = (coveredByPartition.get(partitionId(ack.topic, ack.partition)) ?? []).find(
      (c) => c.line > ack.line && (ack.offset === null ? c.startOffset === 0 : c.startOffset <= ack.offset),
    )
    if (!visible(send)) continue
    if (covered) {
      acksCheckedForLoss++
      lost.push({ send, ack, covered })
    } else if (unseenCount++ < UNSEEN_LISTED_MAX) unseen.push({ send, ack })
  }
  return { lost, unseen, unseenCount, offsetMismatches, acksCheckedForLoss }
}

/** Each record read against what was sent: never sent, read with another key, read twice. */
function judgeReadRecords(
  history: History,
  reads: ReturnType<typeof indexReads>,
  sendsByRecord: ReadonlyMap<string, SendEvent>,
) {
  const duplicates: Duplicate[] = []
  const expectedDuplicates: Duplicate[] = []
  const phantomReads: PhantomRead[] = []
  for (const [record, readsOfRecord] of reads.byRecord) {
    const send = sendsByRecord.get(record)
    const { topic, value } = readsOfRecord[0]
    if (!send) {
      phantomReads.push({ topic, value, reason: 'never-sent', send: null, reads: readsOfRecord })
      continue
    }
    const differing = reads.keyDiffers.get(record)
    if (differing) phantomReads.push({ topic, value, reason: 'key-differs', send, reads: differing })
    if (readsOfRecord.length > 1) {
      const duplicate = { topic, value, send, reads: readsOfRecord }
      if (history.producers.get(send.producer)?.idempotent === false) expectedDuplicates.push(duplicate)
      else duplicates.push(duplicate)
    }
  }
  return { duplicates, expectedDuplicates, phantomReads }
}

/** The checks this history gave nothing to judge, so that a clean report is not over-read. */
function notChecked(history: History, transactions: number): string[] {
  const notes: string[] = []
  if (!history.reads.some((r) => r.consumer !== undefined))
    notes.push("poll order (poll skips, nonmonotonic polls): no read names its 'consumer'")
  if (transactions > 0 && !history.reads.some((r) => r.isolation === 'read_committed'))
    notes.push("aborted and uncommitted reads: no read declares 'isolation' read_committed")
  if (transactions > 0 && !history.reads.some((r) => r.txn !== undefined))
    notes.push('intermediate reads (G1b), circular information flow (G1c): no read is part of a transaction')
  if (history.consumerGroups.size > 0 && history.groupOffsets.length === 0)
    notes.push(
      "group skips and stalls: consumers name groups, but no 'group-offset' line gives a committed offset",
    )
  return notes
}

/**
 * Per producer and partition, acknowledged sends sorted by offset must have increasing seq;
 * each place where seq falls is one reordering. Offsets come from the acks, then from the
 * reads (the lowest offset a record was read at, so a retry's duplicate does not count);
 * a pair found both ways is reported once, from the reads.
 */
function findReorderings(ackBySend: ReadonlyMap<SendEvent, AckEvent>, reads: ReadIndex): Reordering[] {
  const fromReads = new Map<string, Placement[]>()
  for (const [send] of ackBySend) {
    const firstByPartition = new Map<number, ReadEvent>()
    for (const read of reads.byRecord.get(recordId(send.topic, send.value)) ?? []) {
      const first = firstByPartition.get(read.partition)
      if (!first || read.offset < first.offset) firstByPartition.set(read.partition, read)
    }
    for (const [partition, read] of firstByPartition)
      push(fromReads, groupId(send, partition), { send, offset: read.offset, event: read })
  }
  const fromAcks = new Map<string, Placement[]>()
  for (const [send, ack] of ackBySend)
    if (ack.offset !== null)
      push(fromAcks, groupId(send, ack.partition), { send, offset: ack.offset, event: ack })

  const found: Reordering[] = []
  const seen = new Set<string>()
  for (const [source, groups] of [
    ['read', fromReads],
    ['ack', fromAcks],
  ] as const) {
    for (const placements of groups.values()) {
      placements.sort((a, b) => a.offset - b.offset || a.send.seq - b.send.seq)
      for (let i = 1; i < placements.length; i++) {
        const lower = placements[i - 1]
        const higher = placements[i]
        if (lower.send.seq <= higher.send.seq) continue
        const pair = `${lower.send.producer}\u0000${higher.send.seq}\u0000${lower.send.seq}`
        if (seen.has(pair)) continue
        seen.add(pair)
        found.push({
          producer: lower.send.producer,
          topic: lower.send.topic,
          partition: lower.event.partition,
          source,
          sentFirst: higher,
          sentSecond: lower,
        })
      }
    }
  }
  return found
}

function groupId(send: SendEvent, partition: number): string {
  return `${send.producer}\u0000${send.topic}\u0000${partition}`
}

/** Positions where acks and reads together name more than one value. */
function findConflictingOffsets(
  history: History,
  sendsById: ReadonlyMap<string, SendEvent>,
  reads: ReadIndex,
): ConflictingOffset[] {
  type Claims = {
    topic: string
    partition: number
    offset: number
    claims: ConflictingOffset['claims'][number][]
  }
  const byPosition = new Map<string, Claims>()
  const claim = (
    topic: string,
    partition: number,
    offset: number,
    value: string,
    event: AckEvent | ReadEvent,
  ) => {
    const position = positionId(topic, partition, offset)
    const entry = byPosition.get(position)
    if (!entry) byPosition.set(position, { topic, partition, offset, claims: [{ value, event }] })
    else if (!entry.claims.some((c) => c.value === value)) entry.claims.push({ value, event })
  }
  for (const ack of history.acks) {
    if (ack.offset === null) continue
    const send = sendsById.get(sendId(ack.producer, ack.seq))!
    claim(ack.topic, ack.partition, ack.offset, send.value, ack)
  }
  for (const readsAt of reads.byPosition.values())
    for (const read of readsAt) claim(read.topic, read.partition, read.offset, read.value, read)
  return [...byPosition.values()].filter((entry) => entry.claims.length > 1)
}
