/**
 * Group-level checks on synthetic histories: a group whose members together read every
 * visible record below its committed offset passes; one that committed past a record no
 * member read (a group skip), or never read records it had time to reach (a group stall),
 * is reported with the group-offset line and the unread records, and nothing else is.
 * Each member's own reads stay in order in these histories, so no per-consumer check can
 * see what the group did.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { formatVerifyReport } from '../../src/verify/format.js'
import { HistoryFormatError, parseHistory } from '../../src/verify/history.js'
import { type Event, HistoryBuilder, onlyAnomalies, TOPIC } from './history-builder.js'

const GROUP = 'g'

function members(h: HistoryBuilder, ...consumers: string[]): HistoryBuilder {
  for (const consumer of consumers) h.events.push({ type: 'consumer', consumer, group: GROUP })
  return h
}

function groupOffset(
  h: HistoryBuilder,
  partition: number,
  offset: number,
  endOffset?: number,
): HistoryBuilder {
  const end = endOffset === undefined ? {} : { endOffset }
  h.events.push({ type: 'group-offset', group: GROUP, topic: TOPIC, partition, offset, ...end })
  return h
}

/** Six records in partition 0 (offsets 0-5), the first three read by c1, the rest by c2. */
function handedOver(): HistoryBuilder {
  const h = members(new HistoryBuilder(), 'c1', 'c2')
  for (let i = 0; i < 6; i++) h.write('p', 0, `v${i}`)
  for (let i = 0; i < 3; i++) h.read('c1', `v${i}`, { poll: 1 })
  for (let i = 3; i < 6; i++) h.read('c2', `v${i}`, { poll: 1 })
  return h
}

test('a group whose members read every record below its committed offset passes', () => {
  const report = groupOffset(handedOver(), 0, 6, 6).check()
  onlyAnomalies(report)
  assert.equal(report.counts.groupOffsets, 1)
  assert.match(formatVerifyReport(report), /1 group offset/)
})

test('a group that committed past a record no member read is a group skip', () => {
  const h = members(new HistoryBuilder(), 'c1', 'c2')
  for (let i = 0; i < 6; i++) h.write('p', 0, `v${i}`)
  // c1 crashes after reading 0-2 with 0-3 committed (an OffsetFetch one past, say): c2
  // starts at 4, and each consumer's own reads are in order.
  for (let i = 0; i < 3; i++) h.read('c1', `v${i}`, { poll: 1 })
  h.events.push({ type: 'crash', consumer: 'c1', group: GROUP })
  for (let i = 4; i < 6; i++) h.read('c2', `v${i}`, { poll: 1 })
  groupOffset(h, 0, 6, 6)
  const report = h.check()
  onlyAnomalies(report, 'groupSkips')
  const [skip] = report.anomalies.groupSkips
  assert.equal(skip.unreadCount, 1)
  assert.equal(skip.unread[0].send.value, 'v3')
  assert.equal(skip.groupOffset.line, h.events.length)
  assert.match(
    formatVerifyReport(report),
    /group skips \(a group committed past records no member read\): 1\n {4}group g in t-0 \(committed offset 6, group-offset line \d+\): no member read 1 record: p seq 3 "v3"/,
  )
})

test('a group that stops short of the end it had time to reach is a group stall', () => {
  const h = members(new HistoryBuilder(), 'c1')
  for (let i = 0; i < 6; i++) h.write('p', 0, `v${i}`)
  for (let i = 0; i < 2; i++) h.read('c1', `v${i}`, { poll: 1 })
  const report = groupOffset(h, 0, 2, 6).check()
  onlyAnomalies(report, 'groupStalls')
  assert.equal(report.anomalies.groupStalls[0].unreadCount, 4)
  // Without an end, the same history says nothing about a stall.
  const noEnd = members(new HistoryBuilder(), 'c1')
  for (let i = 0; i < 6; i++) noEnd.write('p', 0, `v${i}`)
  for (let i = 0; i < 2; i++) noEnd.read('c1', `v${i}`, { poll: 1 })
  onlyAnomalies(groupOffset(noEnd, 0, 2).check())
})

test('a group that committed past the end of the partition skipped what it passed over', () => {
  const h = members(new HistoryBuilder(), 'c1')
  for (let i = 0; i < 4; i++) h.write('p', 0, `v${i}`)
  h.read('c1', 'v0', { poll: 1 })
  h.read('c1', 'v2', { poll: 2 })
  const report = groupOffset(h, 0, 6, 4).check()
  assert.deepEqual(
    report.anomalies.groupSkips[0].unread.map((u) => u.send.value),
    ['v1', 'v3'],
  )
  assert.deepEqual(report.anomalies.groupStalls, [])
})

test("only the group's own members count: another consumer's reads do not cover it", () => {
  const h = members(new HistoryBuilder(), 'c1')
  h.events.push({ type: 'consumer', consumer: 'other', group: 'elsewhere' })
  for (let i = 0; i < 3; i++) h.write('p', 0, `v${i}`)
  h.read('c1', 'v0', { poll: 1 })
  h.read('other', 'v1', { poll: 1 })
  h.read('other', 'v2', { poll: 1 })
  const report = groupOffset(h, 0, 3).check()
  onlyAnomalies(report, 'groupSkips')
  assert.deepEqual(
    report.anomalies.groupSkips[0].unread.map((u) => u.send.value),
    ['v1', 'v2'],
  )
})

test('records of aborted and undecided transactions need not be read by the group', () => {
  const h = members(new HistoryBuilder(), 'c1')
  h.write('p', 0, 'plain')
  h.begin('tx', 'T1').write('tx', 0, 'aborted', { txn: 'T1' }).abort('tx', 'T1')
  h.begin('tx', 'T2').write('tx', 0, 'committed', { txn: 'T2' }).commit('tx', 'T2')
  h.begin('tx', 'T3').write('tx', 0, 'undecided', { txn: 'T3' })
  h.read('c1', 'plain', { poll: 1, isolation: 'read_committed' })
  h.read('c1', 'committed', { poll: 2, isolation: 'read_committed' })
  onlyAnomalies(groupOffset(h, 0, 6, 6).check())
  // The committed transaction's record is required: leave it unread and it is a skip.
  const unread = members(new HistoryBuilder(), 'c1')
  unread.write('p', 0, 'plain')
  unread.begin('tx', 'T2').write('tx', 0, 'committed', { txn: 'T2' }).commit('tx', 'T2')
  unread.read('c1', 'plain', { poll: 1, isolation: 'read_committed' })
  const report = groupOffset(unread, 0, 3).check()
  onlyAnomalies(report, 'groupSkips')
  assert.equal(report.anomalies.groupSkips[0].unread[0].send.value, 'committed')
})

test('consumers naming groups without any group-offset line are listed as not checked', () => {
  const report = handedOver().check()
  onlyAnomalies(report)
  assert.match(report.notChecked.join('\n'), /no 'group-offset' line/)
})

test('malformed group lines are refused with their line numbers', () => {
  const lines: Event[] = [
    { type: 'header', format: 'tidelog-history', version: 1 },
    { type: 'group-offset', group: GROUP, topic: TOPIC, partition: 0, offset: 1 },
    { type: 'consumer', consumer: 'c1', group: GROUP },
    { type: 'consumer', consumer: 'c1', group: GROUP },
    { type: 'group-offset', group: GROUP, topic: TOPIC, partition: 0, offset: -5, endOffset: 4 },
    { type: 'consumer', group: GROUP },
  ]
  const text = lines.map((e) => JSON.stringify(e)).join('\n')
  assert.throws(
    () => parseHistory(text),
    (error: unknown) => {
      assert.ok(error instanceof HistoryFormatError)
      assert.deepEqual(
        error.errors.map((e) => e.line),
        [2, 4, 5, 6],
      )
      assert.match(error.errors[0].message, /group 'g' has no member/)
      assert.match(error.errors[1].message, /consumer 'c1' already declared on line 3/)
      assert.match(error.errors[2].message, /'offset' must be an integer >= 0/)
      assert.match(error.errors[3].message, /'consumer' must be a non-empty string/)
      return true
    },
  )
})
