/**
 * The history checker on synthetic histories: a clean one passes, and each planted anomaly
 * (loss, duplicate, reordering, phantom read, offset mismatch, conflicting offset) is found
 * with the events that show it, and nothing else is reported. Malformed lines give errors
 * with their line numbers.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  ANOMALY_KINDS,
  type AnomalyKind,
  checkHistory,
  UNSEEN_LISTED_MAX,
  type VerifyReport,
} from '../../src/verify/checker.js'
import { formatVerifyReport } from '../../src/verify/format.js'
import { HISTORY_ERRORS_MAX, HistoryFormatError, parseHistory } from '../../src/verify/history.js'
import { HistoryBuilder } from './history-builder.js'

type Event = Record<string, unknown>

const TOPIC = 't'
const PARTITIONS = 2
const SEQS = 6

/**
 * Two idempotent producers, seq 0..5 each, partition seq % 2, every send acked in order;
 * one consumer reads both partitions to their end and says so.
 */
function cleanHistory(): Event[] {
  const events: Event[] = [
    { type: 'header', format: 'tidelog-history', version: 1 },
    { type: 'producer', producer: 'p1', idempotent: true },
    { type: 'producer', producer: 'p2', idempotent: true },
  ]
  const next = Array.from({ length: PARTITIONS }, () => 0)
  const written: Event[][] = Array.from({ length: PARTITIONS }, () => [])
  let time = 1_700_000_000_000
  for (let seq = 0; seq < SEQS; seq++) {
    for (const producer of ['p1', 'p2']) {
      const partition = seq % PARTITIONS
      const value = `${producer}-${seq}`
      events.push({ type: 'send', time: time++, producer, seq, topic: TOPIC, partition, key: null, value })
      const offset = next[partition]++
      events.push({ type: 'ack', time: time++, producer, seq, topic: TOPIC, partition, offset })
      written[partition].push({ partition, offset, value })
    }
  }
  for (const records of written)
    for (const r of records)
      events.push({ type: 'read', time: time++, consumer: 'c1', topic: TOPIC, key: null, ...r })
  for (let partition = 0; partition < PARTITIONS; partition++)
    events.push({
      type: 'covered',
      time: time++,
      consumer: 'c1',
      topic: TOPIC,
      partition,
      startOffset: 0,
      endOffset: next[partition],
    })
  return events
}

const toText = (events: readonly Event[]): string => `${events.map((e) => JSON.stringify(e)).join('\n')}\n`
const check = (events: readonly Event[]): VerifyReport => checkHistory(parseHistory(toText(events)))

/** 1-based line of the only event matching all of `fields`. */
function lineOf(events: readonly Event[], fields: Event): number {
  const matches = events.flatMap((e, i) =>
    Object.entries(fields).every(([k, v]) => e[k] === v) ? [i + 1] : [],
  )
  assert.equal(matches.length, 1, `one event matches ${JSON.stringify(fields)}`)
  return matches[0]
}

function indexOf(events: readonly Event[], fields: Event): number {
  return lineOf(events, fields) - 1
}

/** Every anomaly list but `kinds` is empty. */
function onlyAnomalies(report: VerifyReport, ...kinds: AnomalyKind[]): void {
  for (const kind of ANOMALY_KINDS)
    if (!kinds.includes(kind)) assert.deepEqual(report.anomalies[kind], [], `no ${kind}`)
  assert.equal(report.ok, kinds.length === 0)
}

test('a clean history passes, with every acknowledged write checked for loss', () => {
  const report = check(cleanHistory())
  onlyAnomalies(report)
  assert.equal(report.counts.sends, 12)
  assert.equal(report.counts.acks, 12)
  assert.equal(report.counts.reads, 12)
  assert.equal(report.counts.coveredPartitions, 2)
  assert.equal(report.counts.acksCheckedForLoss, 12)
  assert.equal(report.counts.acksNotCheckedForLoss, 0)
  assert.match(formatVerifyReport(report), /OK: no anomalies$/)
})

test('an acknowledged write missing from reads that covered its partition is lost', () => {
  const events = cleanHistory()
  events.splice(indexOf(events, { type: 'read', value: 'p1-2' }), 1)
  const report = check(events)
  // The reader went from p2-0 to p2-2 past p1-2's acknowledged offset: a poll skip as well.
  onlyAnomalies(report, 'lost', 'pollSkips')
  assert.deepEqual(
    report.anomalies.pollSkips.map((s) => [s.previous.value, s.next.value, s.skipped.map((e) => e.value)]),
    [['p2-0', 'p2-2', ['p1-2']]],
  )
  assert.equal(report.anomalies.lost.length, 1)
  const [lost] = report.anomalies.lost
  assert.equal(lost.send.value, 'p1-2')
  assert.equal(lost.send.line, lineOf(events, { type: 'send', value: 'p1-2' }))
  assert.equal(lost.ack.line, lineOf(events, { type: 'ack', producer: 'p1', seq: 2 }))
  assert.equal(lost.ack.offset, 2)
  assert.equal(lost.covered.line, lineOf(events, { type: 'covered', partition: 0 }))
  assert.match(
    formatVerifyReport(report),
    /lost acknowledged writes: 1\n {4}p1 seq 2 "p1-2" \(sent line \d+\): acked at t-0@2/,
  )
})

test('a loss is judged only where a covered event after the ack vouches for the partition', () => {
  const events = cleanHistory()
  events.splice(indexOf(events, { type: 'read', value: 'p1-2' }), 1)
  // The coverage of partition 0 moved before the ack: it says nothing about that write.
  const [covered] = events.splice(indexOf(events, { type: 'covered', partition: 0 }), 1)
  events.splice(indexOf(events, { type: 'ack', producer: 'p1', seq: 2 }), 0, covered)
  const report = check(events)
  // Not judged lost, and listed as unseen; the reader's jump over it is still a poll skip.
  onlyAnomalies(report, 'pollSkips')
  assert.equal(report.counts.acksNotCheckedForLoss, 1)
  assert.deepEqual(
    report.unseen.map((u) => u.send.value),
    ['p1-2'],
  )

  const started = cleanHistory()
  started.splice(indexOf(started, { type: 'read', value: 'p1-2' }), 1)
  // A reader that started above the acked offset (offset 2) cannot vouch for it either.
  const at = indexOf(started, { type: 'covered', partition: 0 })
  started[at] = { ...started[at], startOffset: 3 }
  assert.equal(check(started).counts.acksNotCheckedForLoss, 1)
  assert.deepEqual(check(started).anomalies.lost, [])
})

test('an acknowledged offset beyond the end a reader saw is lost too (the log was truncated)', () => {
  const events = cleanHistory()
  for (const value of ['p1-4', 'p2-4']) events.splice(indexOf(events, { type: 'read', value }), 1)
  const at = indexOf(events, { type: 'covered', partition: 0 })
  events[at] = { ...events[at], endOffset: 4 }
  const report = check(events)
  onlyAnomalies(report, 'lost')
  assert.deepEqual(
    report.anomalies.lost.map((l) => [l.send.value, l.ack.offset]),
    [
      ['p1-4', 4],
      ['p2-4', 5],
    ],
  )
})

test('a value read at two offsets is a duplicate; expected for a producer declared non-idempotent', () => {
  const events = cleanHistory()
  events.splice(indexOf(events, { type: 'covered', partition: 0 }), 0, {
    type: 'read',
    topic: TOPIC,
    partition: 0,
    offset: 6,
    key: null,
    value: 'p1-2',
  })
  const report = check(events)
  onlyAnomalies(report, 'duplicates')
  const [duplicate] = report.anomalies.duplicates
  assert.equal(report.anomalies.duplicates.length, 1)
  assert.equal(duplicate.send.value, 'p1-2')
  assert.deepEqual(
    duplicate.reads.map((r) => [r.offset, r.line]),
    [
      [2, lineOf(events, { type: 'read', value: 'p1-2', offset: 2 })],
      [6, lineOf(events, { type: 'read', value: 'p1-2', offset: 6 })],
    ],
  )

  events[indexOf(events, { type: 'producer', producer: 'p1' })] = {
    type: 'producer',
    producer: 'p1',
    idempotent: false,
  }
  const atLeastOnce = check(events)
  onlyAnomalies(atLeastOnce)
  assert.equal(atLeastOnce.expected.duplicates.length, 1)
  assert.match(
    formatVerifyReport(atLeastOnce),
    /expected: 1 duplicate from producers declared idempotent: false/,
  )
})

test('reading one offset twice is not a duplicate', () => {
  const events = cleanHistory()
  events.push({
    type: 'read',
    consumer: 'c2',
    topic: TOPIC,
    partition: 1,
    offset: 0,
    key: null,
    value: 'p1-1',
  })
  onlyAnomalies(check(events))
})

test('records of one producer at offsets against its send order are a reordering, from reads or acks', () => {
  const events = cleanHistory()
  // p1's seq 0 and seq 2 (partition 0, offsets 0 and 2) swap places, in the acks and in the reads.
  const swap = (type: string, a: Event, b: Event) => {
    const i = indexOf(events, { type, ...a })
    const j = indexOf(events, { type, ...b })
    const offset = events[i]['offset']
    events[i] = { ...events[i], offset: events[j]['offset'] }
    events[j] = { ...events[j], offset }
  }
  swap('ack', { producer: 'p1', seq: 0 }, { producer: 'p1', seq: 2 })
  swap('read', { value: 'p1-0' }, { value: 'p1-2' })
  // The reader still reads in offset order: the two read lines trade places too.
  const [i, j] = [
    indexOf(events, { type: 'read', value: 'p1-0' }),
    indexOf(events, { type: 'read', value: 'p1-2' }),
  ]
  ;[events[i], events[j]] = [events[j], events[i]]
  const report = check(events)
  onlyAnomalies(report, 'reorderings')
  assert.equal(report.anomalies.reorderings.length, 1, 'found from reads and acks, reported once')
  const [r] = report.anomalies.reorderings
  assert.equal(r.producer, 'p1')
  assert.equal(r.partition, 0)
  assert.equal(r.source, 'read')
  assert.deepEqual([r.sentFirst.send.seq, r.sentFirst.offset], [0, 2])
  assert.deepEqual([r.sentSecond.send.seq, r.sentSecond.offset], [2, 0])
  assert.equal(r.sentFirst.event.line, lineOf(events, { type: 'read', value: 'p1-0' }))
  assert.equal(r.sentFirst.event.offset, 2)

  // Without reads (a producer-only history, as `bench produce --history` writes), the acks show it.
  const acksOnly = events.filter((e) => e['type'] !== 'read' && e['type'] !== 'covered')
  const fromAcks = check(acksOnly)
  onlyAnomalies(fromAcks, 'reorderings')
  assert.equal(fromAcks.anomalies.reorderings[0].source, 'ack')
  assert.equal(
    fromAcks.anomalies.reorderings[0].sentSecond.event.line,
    lineOf(acksOnly, { type: 'ack', seq: 2, producer: 'p1' }),
  )
})

test('a read of a value nobody sent, or of a sent value under another key, is a phantom read', () => {
  const events = cleanHistory()
  events.push({ type: 'read', topic: TOPIC, partition: 1, offset: 6, value: 'ghost' })
  const ghost = check(events)
  onlyAnomalies(ghost, 'phantomReads')
  assert.deepEqual(
    ghost.anomalies.phantomReads.map((p) => [p.reason, p.value, p.reads.map((r) => r.line)]),
    [['never-sent', 'ghost', [events.length]]],
  )

  const rekeyed = cleanHistory()
  const at = indexOf(rekeyed, { type: 'read', value: 'p2-3' })
  rekeyed[at] = { ...rekeyed[at], key: 'k' }
  const report = check(rekeyed)
  onlyAnomalies(report, 'phantomReads')
  assert.equal(report.anomalies.phantomReads[0].reason, 'key-differs')
  assert.equal(report.anomalies.phantomReads[0].send?.line, lineOf(rekeyed, { type: 'send', value: 'p2-3' }))
  assert.equal(report.anomalies.phantomReads[0].reads[0].line, at + 1)
})

test('a record read only at an offset other than its acknowledged one is an offset mismatch', () => {
  const events = cleanHistory()
  const at = indexOf(events, { type: 'read', value: 'p2-5' })
  events[at] = { ...events[at], offset: 9 }
  const report = check(events)
  // The reader also passed over offset 5, where the ack put p2-5: a poll skip.
  onlyAnomalies(report, 'offsetMismatches', 'pollSkips')
  assert.deepEqual(
    report.anomalies.pollSkips.map((s) => s.skipped.map((e) => [e.value, e.offset, e.event.type])),
    [[['p2-5', 5, 'ack']]],
  )
  const [m] = report.anomalies.offsetMismatches
  assert.equal(m.ack.line, lineOf(events, { type: 'ack', producer: 'p2', seq: 5 }))
  assert.equal(m.ack.offset, 5)
  assert.deepEqual(
    m.reads.map((r) => [r.offset, r.line]),
    [[9, at + 1]],
  )
  assert.match(formatVerifyReport(report), /acked at t-1@5 \(ack line \d+\), read only at t-1@9/)
})

test('two different records at one offset conflict', () => {
  const events = cleanHistory()
  events.push({ type: 'read', consumer: 'c2', topic: TOPIC, partition: 0, offset: 0, value: 'p2-0' })
  const report = check(events)
  onlyAnomalies(report, 'conflictingOffsets', 'duplicates')
  const [c] = report.anomalies.conflictingOffsets
  assert.deepEqual([c.partition, c.offset], [0, 0])
  assert.deepEqual(
    c.claims.map((claim) => [claim.value, claim.event.type]),
    [
      ['p1-0', 'ack'],
      ['p2-0', 'read'],
    ],
  )
})

test('fails and unanswered sends are indeterminate: read or not, no anomaly', () => {
  const events = cleanHistory()
  const ack = indexOf(events, { type: 'ack', producer: 'p1', seq: 3 })
  events[ack] = { type: 'fail', producer: 'p1', seq: 3, error: 'REQUEST_TIMED_OUT' }
  events.splice(indexOf(events, { type: 'ack', producer: 'p2', seq: 3 }), 1)
  events.splice(indexOf(events, { type: 'read', value: 'p2-3' }), 1)
  const report = check(events)
  onlyAnomalies(report)
  assert.equal(report.counts.fails, 1)
  assert.equal(report.counts.unanswered, 1)
})

test('an ack without an offset (acks=0) is judged for loss only against coverage from offset 0', () => {
  const events = cleanHistory()
  const ack = indexOf(events, { type: 'ack', producer: 'p1', seq: 1 })
  events[ack] = { ...events[ack], offset: -1 }
  events.splice(indexOf(events, { type: 'read', value: 'p1-1' }), 1)
  const report = check(events)
  onlyAnomalies(report, 'lost')
  assert.equal(report.anomalies.lost[0].ack.offset, null)
  assert.equal(report.counts.acksWithoutOffset, 1)
})

test('transaction events are counted; checks a history gives nothing to judge are named', () => {
  const events = cleanHistory()
  const send = indexOf(events, { type: 'send', value: 'p1-0' })
  events[send] = { ...events[send], txn: 'tx-1' }
  events.push({ type: 'commit', producer: 'p1', txn: 'tx-1' })
  const report = check(events)
  onlyAnomalies(report)
  assert.deepEqual(report.counts.transactions, { committed: 1, aborted: 0, undecided: 0 })
  assert.match(report.notChecked.join('\n'), /no read declares 'isolation' read_committed/)
  assert.match(report.notChecked.join('\n'), /no read is part of a transaction/)
  assert.match(formatVerifyReport(report), /1 transaction \(1 committed, 0 aborted, 0 undecided\)/)
})

function formatErrors(text: string): string[] {
  try {
    parseHistory(text)
  } catch (error) {
    assert.ok(error instanceof HistoryFormatError)
    return error.errors.map((e) => `${e.line}: ${e.message}`)
  }
  assert.fail('the history parsed')
}

test('malformed lines are reported with their line numbers, all of them', () => {
  const lines = [
    '{"type":"header","format":"tidelog-history","version":1}',
    '{"type":"send","producer":"p1","seq":0,"topic":"t","value":"a"}',
    '',
    '{"type":"send","producer":"p1","seq":1,"topic":"t","value":"b"',
    '["send"]',
    '{"type":"write","producer":"p1"}',
    '{"type":"send","producer":"p1","seq":2,"topic":"t"}',
    '{"type":"ack","producer":"p1","seq":7,"topic":"t","partition":0,"offset":3}',
    '{"type":"send","producer":"p1","seq":0,"topic":"t","value":"c"}',
    '{"type":"send","producer":"p2","seq":0,"topic":"t","value":"a"}',
    '{"type":"ack","producer":"p1","seq":0,"topic":"t","partition":0,"offset":"12"}',
    '{"type":"ack","producer":"p1","seq":0,"topic":"t","partition":0,"offset":12}',
    '{"type":"fail","producer":"p1","seq":0}',
    '{"type":"covered","topic":"t","partition":0,"startOffset":5,"endOffset":2}',
    '{"type":"header","format":"tidelog-history","version":1}',
    '{"type":"read","topic":"t","partition":0,"offset":1.5,"value":"a"}',
  ]
  const errors = formatErrors(lines.join('\n'))
  const expected: [number, RegExp][] = [
    [4, /^4: not JSON/],
    [5, /expected a JSON object/],
    [
      6,
      /'type' must be one of header, producer, send, ack, fail, read, covered, assign, crash, consumer, group-offset, begin, commit, abort, got "write"/,
    ],
    [7, /'value' must be a string/],
    [8, /ack for producer 'p1' seq 7, which no earlier line sent/],
    [9, /producer 'p1' already sent seq 0 on line 2/],
    [10, /value "a" was already sent to 't' on line 2/],
    [11, /'offset' must be an integer >= 0, got "12"/],
    [13, /producer 'p1' seq 0 was already answered on line 12/],
    [14, /'endOffset' 2 is below 'startOffset' 5/],
    [15, /the header must come before every event/],
    [16, /'offset' must be an integer >= 0, got 1.5/],
  ]
  assert.equal(errors.length, expected.length, errors.join('\n'))
  expected.forEach(([line, pattern], i) => {
    assert.ok(errors[i].startsWith(`${line}: `), `error ${i} is on line ${line}: ${errors[i]}`)
    assert.match(errors[i], pattern)
  })
})

test('an ack whose value differs from the send, or whose topic differs, is malformed', () => {
  const send = '{"type":"send","producer":"p1","seq":0,"topic":"t","value":"a"}'
  assert.match(
    formatErrors(
      `${send}\n{"type":"ack","producer":"p1","seq":0,"topic":"t","partition":0,"offset":1,"value":"x"}`,
    )[0],
    /^2: ack value "x" differs from the value sent on line 1/,
  )
  assert.match(
    formatErrors(`${send}\n{"type":"ack","producer":"p1","seq":0,"topic":"u","partition":0,"offset":1}`)[0],
    /^2: ack names topic 'u' but seq 0 was sent to 't' \(line 1\)/,
  )
  assert.match(
    formatErrors('{"type":"header","format":"tidelog-history","version":2}')[0],
    /^1: header: this checker reads version 1, got 2/,
  )
})

test('parsing stops listing problems after HISTORY_ERRORS_MAX of them', () => {
  const text = Array.from({ length: HISTORY_ERRORS_MAX + 10 }, () => 'nope').join('\n')
  assert.throws(
    () => parseHistory(text),
    (error: unknown) =>
      error instanceof HistoryFormatError &&
      error.errors.length === HISTORY_ERRORS_MAX &&
      error.truncated &&
      error.errors[HISTORY_ERRORS_MAX - 1].line === HISTORY_ERRORS_MAX,
  )
})

test('acknowledged writes nobody read are unseen: counted, and listed up to UNSEEN_LISTED_MAX', () => {
  const history = new HistoryBuilder()
  for (let i = 0; i < UNSEEN_LISTED_MAX + 5; i++) history.write('p1', 0, `v${i}`)
  const report = history.check()
  assert.equal(report.ok, true)
  assert.equal(report.counts.unseen, UNSEEN_LISTED_MAX + 5)
  assert.equal(report.unseen.length, UNSEEN_LISTED_MAX)
  assert.equal(report.unseen[0].ack.line, history.line({ type: 'ack', seq: 0 }))
  assert.match(formatVerifyReport(report), /unseen: 1005 acknowledged writes never read/)
})
