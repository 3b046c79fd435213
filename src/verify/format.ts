/**
 * A VerifyReport as text for a terminal: the counts, then each anomaly with the history
 * lines that show it (the first EXAMPLES_MAX of each kind; --json gives all of them).
 */

import { ANOMALY_KINDS, type AnomalyKind, type Placement, type VerifyReport } from './checker.js'
import type { AckEvent, ReadEvent, SendEvent } from './history.js'

export const EXAMPLES_MAX = 10

const TITLES: Record<AnomalyKind, string> = {
  lost: 'lost acknowledged writes',
  duplicates: 'duplicates',
  reorderings: 'reorderings within a producer and partition',
  phantomReads: 'reads of records never sent',
  offsetMismatches: 'offset mismatches (read away from the acknowledged offset)',
  conflictingOffsets: 'conflicting offsets (two records at one offset)',
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

function describeAnomalies(report: VerifyReport, kind: AnomalyKind): string[] {
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
  }
}

function examples(lines: readonly string[]): string[] {
  const shown = lines.slice(0, EXAMPLES_MAX).map((line) => `    ${line}`)
  if (lines.length > EXAMPLES_MAX)
    shown.push(`    ... and ${lines.length - EXAMPLES_MAX} more (--json lists all)`)
  return shown
}

export function formatVerifyReport(report: VerifyReport): string {
  const c = report.counts
  const out = [
    `history: ${count(c.lines, 'line')}; ${count(c.sends, 'send')} from ${count(c.producers, 'producer')}, ${count(c.acks, 'ack')}${c.acksWithoutOffset ? ` (${c.acksWithoutOffset} without offset)` : ''}, ${count(c.fails, 'fail')}, ${c.unanswered} unanswered; ${count(c.reads, 'read')} of ${count(c.readPositions, 'offset')}; ${count(c.coveredPartitions, 'partition')} covered to their end`,
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
  for (const note of report.notChecked) out.push(`  not checked: ${note}`)
  out.push(
    report.ok ? 'OK: no anomalies' : `FAILED: ${c.anomalies} ${c.anomalies === 1 ? 'anomaly' : 'anomalies'}`,
  )
  return out.join('\n')
}
