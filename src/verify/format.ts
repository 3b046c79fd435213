/**
 * A VerifyReport as text for a terminal: the counts, then each anomaly with the history
 * lines that show it (the first EXAMPLES_MAX of each kind; --json gives all of them).
 */

import { ANOMALY_KINDS, type AnomalyKind, type Placement, type VerifyReport } from './checker.js'
import { type DependencyCycle, type DependencyEdge, txnName } from './cycles.js'
import type { GroupFinding } from './groups.js'
import type { AckEvent, ReadEvent, SendEvent } from './history.js'
import type { PollStep } from './polls.js'

export const EXAMPLES_MAX = 10

const TITLES: Record<AnomalyKind, string> = {
  lost: 'lost acknowledged writes',
  duplicates: 'duplicates',
  reorderings: 'reorderings within a producer and partition',
  phantomReads: 'reads of records never sent',
  offsetMismatches: 'offset mismatches (read away from the acknowledged offset)',
  conflictingOffsets: 'conflicting offsets (two records at one offset)',
  pollSkips: 'poll skips (a consumer jumped over records)',
  nonmonotonicPolls: 'nonmonotonic polls (a consumer went back)',
  internalPollSkips: 'poll skips within one poll',
  internalNonmonotonicPolls: 'nonmonotonic reads within one poll',
  abortedReads: 'aborted reads (G1a: read_committed saw an aborted transaction)',
  uncommittedReads: 'uncommitted reads (read_committed saw an open transaction)',
  intermediateReads: "intermediate reads (G1b: a transaction's last read is another's non-final write)",
  circularFlows: 'circular information flow (G1c: transactions that read each other in a cycle)',
  groupSkips: 'group skips (a group committed past records no member read)',
  groupStalls: 'group stalls (a group never read records it had time to reach)',
}

const q = (text: string): string => JSON.stringify(text)
const count = (n: number, noun: string): string => `${n} ${noun}${n === 1 ? '' : 's'}`

function sent(send: SendEvent): string {
  return `${send.producer} seq ${send.seq} ${q(send.value)} (sent line ${send.line})`
}

function at(event: AckEvent | ReadEvent): string {
  return `${event.topic}-${event.partition}@${event.offset ?? '?'} (${event.type} line ${event.line})`
}

function placed(p: Placement): string {
  return `seq ${p.send.seq} ${q(p.send.value)} at offset ${p.offset} (${p.event.type} line ${p.event.line})`
}

function step(s: PollStep): string {
  const skipped =
    s.skipped.length === 0
      ? ''
      : `, skipping ${s.skipped
          .slice(0, 3)
          .map((e) => `${q(e.value)} at offset ${e.offset} (${e.event.type} line ${e.event.line})`)
          .join(', ')}${s.skipped.length > 3 ? ` and ${s.skipped.length - 3} more` : ''}`
  return `${s.consumer} in ${s.topic}-${s.partition}: read ${q(s.previous.value)} at offset ${s.previous.offset} (read line ${s.previous.line}), then ${q(s.next.value)} at offset ${s.next.offset} (read line ${s.next.line}): ${s.delta > 0 ? '+' : ''}${s.delta} in the version order${skipped}`
}

function groupFinding(f: GroupFinding, kind: 'groupSkips' | 'groupStalls'): string {
  const g = f.groupOffset
  const where =
    kind === 'groupSkips'
      ? `committed offset ${g.offset}`
      : `committed offset ${g.offset}, end ${g.endOffset}`
  const shown = f.unread.slice(0, 3).map((u) => `${sent(u.send)} acked at ${at(u.ack)}`)
  const more = f.unreadCount > shown.length ? ` and ${f.unreadCount - shown.length} more` : ''
  return `group ${g.group} in ${g.topic}-${g.partition} (${where}, group-offset line ${g.line}): no member read ${count(f.unreadCount, 'record')}: ${shown.join(', ')}${more}`
}

function edge(e: DependencyEdge): string {
  const how =
    e.kind === 'ww'
      ? `its record (${e.first.type} line ${e.first.line}) precedes ${txnName(e.to)}'s (${e.second.type} line ${e.second.line}) in ${e.topic}-${e.partition}`
      : `${txnName(e.to)} read its record (sent line ${e.first.line}) last in ${e.topic}-${e.partition} (read line ${e.second.line})`
  return `${txnName(e.from)} -${e.kind}-> ${txnName(e.to)}: ${how}`
}

function cycle(c: DependencyCycle): string {
  return `${c.kind}: ${c.edges.map(edge).join('; ')}`
}

function describeTransactionAnomalies(report: VerifyReport, kind: AnomalyKind): string[] | undefined {
  const a = report.anomalies
  switch (kind) {
    case 'abortedReads':
      return a.abortedReads.map(
        (r) =>
          `${sent(r.send)} in transaction ${r.send.txn}, aborted (abort line ${r.abort.line}): read at ${at(r.read)}`,
      )
    case 'uncommittedReads':
      return a.uncommittedReads.map((r) =>
        r.reason === 'own-transaction'
          ? `${sent(r.send)}: read at ${at(r.read)} inside its own transaction ${r.send.txn}, before it committed`
          : `${sent(r.send)} in transaction ${r.send.txn}: read at ${at(r.read)}, while the transaction was open (it sent again on line ${r.laterSend!.line})`,
      )
    case 'intermediateReads':
      return a.intermediateReads.map(
        (r) =>
          `${txnName(r.reader)} read ${sent(r.send)} last at ${at(r.read)}, but ${txnName(r.writer)} wrote on to that partition (sent line ${r.laterSend.line})`,
      )
    case 'circularFlows':
      return a.circularFlows.map(cycle)
    case 'groupSkips':
    case 'groupStalls':
      return a[kind].map((f) => groupFinding(f, kind))
    case 'pollSkips':
    case 'nonmonotonicPolls':
    case 'internalPollSkips':
    case 'internalNonmonotonicPolls':
      return a[kind].map(step)
    default:
      return undefined
  }
}

function describeAnomalies(report: VerifyReport, kind: AnomalyKind): string[] {
  const transactional = describeTransactionAnomalies(report, kind)
  if (transactional) return transactional
  const a = report.anomalies
  switch (kind) {
    case 'lost':
      return a.lost.map(
        (l) =>
          `${sent(l.send)}: acked at ${at(l.ack)}, never read; ${l.covered.topic}-${l.covered.partition} was read from ${l.covered.startOffset} to its end ${l.covered.endOffset} (covered line ${l.covered.line})`,
      )
    case 'duplicates':
      return a.duplicates.map((d) => `${sent(d.send)}: read at ${d.reads.map(at).join(', ')}`)
    case 'reorderings':
      return a.reorderings.map(
        (r) =>
          `${r.producer} in ${r.topic}-${r.partition} (${r.source}s): ${placed(r.sentFirst)} was sent before ${placed(r.sentSecond)}`,
      )
    case 'phantomReads':
      return a.phantomReads.map((p) =>
        p.reason === 'never-sent'
          ? `${q(p.value)} in ${p.topic}: never sent, read at ${p.reads.map(at).join(', ')}`
          : `${sent(p.send!)} with key ${q(String(p.send!.key))}: read with key ${p.reads.map((r) => `${q(String(r.key))} at ${at(r)}`).join(', ')}`,
      )
    case 'offsetMismatches':
      return a.offsetMismatches.map(
        (m) => `${sent(m.send)}: acked at ${at(m.ack)}, read only at ${m.reads.map(at).join(', ')}`,
      )
    case 'conflictingOffsets':
      return a.conflictingOffsets.map(
        (c) =>
          `${c.topic}-${c.partition}@${c.offset}: ${c.claims.map((claim) => `${q(claim.value)} (${claim.event.type} line ${claim.event.line})`).join(' vs ')}`,
      )
    default:
      return []
  }
}

function examples(lines: readonly string[]): string[] {
  const shown = lines.slice(0, EXAMPLES_MAX).map((line) => `    ${line}`)
  if (lines.length > EXAMPLES_MAX)
    shown.push(`    ... and ${lines.length - EXAMPLES_MAX} more (--json lists all)`)
  return shown
}

function transactionCounts(report: VerifyReport): string {
  const t = report.counts.transactions
  const total = t.committed + t.aborted + t.undecided
  return total === 0
    ? ''
    : `; ${count(total, 'transaction')} (${t.committed} committed, ${t.aborted} aborted, ${t.undecided} undecided)`
}

export function formatVerifyReport(report: VerifyReport): string {
  const c = report.counts
  const out = [
    `history: ${count(c.lines, 'line')}; ${count(c.sends, 'send')} from ${count(c.producers, 'producer')}, ${count(c.acks, 'ack')}${c.acksWithoutOffset ? ` (${c.acksWithoutOffset} without offset)` : ''}, ${count(c.fails, 'fail')}, ${c.unanswered} unanswered; ${count(c.reads, 'read')} of ${count(c.readPositions, 'offset')}; ${count(c.coveredPartitions, 'partition')} covered to their end${c.crashes ? `; ${count(c.crashes, 'crashed consumer')}` : ''}${c.groupOffsets ? `; ${count(c.groupOffsets, 'group offset')}` : ''}${transactionCounts(report)}`,
    `checked for loss: ${c.acksCheckedForLoss} of ${c.acks} acknowledged writes` +
      (c.acksNotCheckedForLoss > 0
        ? ` (${c.acksNotCheckedForLoss} never read and with no 'covered' event after them: not judged)`
        : ''),
  ]
  for (const kind of ANOMALY_KINDS) {
    const lines = describeAnomalies(report, kind)
    out.push(`  ${TITLES[kind]}: ${lines.length}`)
    out.push(...examples(lines))
  }
  const expected = report.expected.duplicates
  if (expected.length > 0) {
    out.push(
      `  expected: ${count(expected.length, 'duplicate')} from producers declared idempotent: false (retries)`,
    )
  }
  const writeCycles = report.expected.writeCycles
  if (writeCycles.length > 0) {
    out.push(
      `  allowed: ${count(writeCycles.length, 'write cycle')} (G0: Kafka does not isolate concurrent transactions' writes)`,
    )
    out.push(...examples(writeCycles.map(cycle)))
  }
  const throughWrites = report.expected.cyclesThroughWrites
  if (throughWrites.length > 0) {
    out.push(
      `  allowed: ${count(throughWrites.length, 'cycle')} through a read closed by write order (not G1c: a ww edge orders records, not transactions)`,
    )
    out.push(...examples(throughWrites.map(cycle)))
  }
  if (report.counts.unseen > 0) {
    out.push(
      `  unseen: ${count(report.counts.unseen, 'acknowledged write')} never read, and no 'covered' event says whether lost`,
    )
    out.push(...examples(report.unseen.map((u) => `${sent(u.send)}: acked at ${at(u.ack)}`)))
  }
  for (const note of report.notChecked) out.push(`  not checked: ${note}`)
  out.push(
    report.ok ? 'OK: no anomalies' : `FAILED: ${c.anomalies} ${c.anomalies === 1 ? 'anomaly' : 'anomalies'}`,
  )
  return out.join('\n')
}
