/**
 * The verifier on a real run: tidelog's transactional producer and a read_committed
 * consumer against an in-process broker record a history as they go (commit, abort, a
 * transaction left open while the consumer reads, then committed). On the shipped broker it
 * is clean. With the simulator's `read-committed-ignores-transactions` mutation planted
 * (read_committed fetches served up to the high watermark with no aborted list: a broker
 * whose LSO ignores open transactions and that forgets aborted ones), `tidelog verify`'s
 * checker finds the aborted transaction's records read (G1a) and the open transaction's
 * record read before its producer was done sending (an uncommitted read), each with its lines.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Consumer } from '../../src/client/consumer.js'
import { Producer } from '../../src/client/producer.js'
import { plant } from '../../src/sim/mutations.js'
import { checkHistory, type VerifyReport } from '../../src/verify/checker.js'
import { formatVerifyReport } from '../../src/verify/format.js'
import { parseHistory } from '../../src/verify/history.js'
import { createTopics, withBroker } from '../client/helpers.js'

const TOPIC = 'verify-txn'
const BROKER_PROPERTIES = {
  'transaction.state.log.replication.factor': 1,
  'transaction.state.log.min.isr': 1,
  'transaction.state.log.num.partitions': 1,
  'offsets.topic.num.partitions': 1,
}

type Event = Record<string, unknown>

/** The history as the clients see it, one event per line, in the order they saw them. */
class Recorder {
  readonly events: Event[] = [{ type: 'header', format: 'tidelog-history', version: 1 }]
  private seq = 0

  add(event: Event): void {
    this.events.push({ time: Date.now(), ...event })
  }

  async send(producer: Producer, txn: string, partition: number, value: string): Promise<void> {
    const seq = this.seq++
    this.add({ type: 'send', producer: 'p1', seq, topic: TOPIC, partition, value, txn })
    const written = await producer.send({ topic: TOPIC, partition, value })
    this.add({
      type: 'ack',
      producer: 'p1',
      seq,
      topic: TOPIC,
      partition: written.partition,
      offset: written.offset,
    })
  }

  line(fields: Event): number {
    const i = this.events.findIndex((e) => Object.entries(fields).every(([k, v]) => e[k] === v))
    assert.ok(i >= 0, `an event with ${JSON.stringify(fields)}`)
    return i + 1
  }

  check(): VerifyReport {
    return checkHistory(parseHistory(`${this.events.map((e) => JSON.stringify(e)).join('\n')}\n`))
  }
}

/** Polls until `done` holds, then until two polls in a row bring nothing more; records every read. */
async function readUntil(consumer: Consumer, history: Recorder, polls: { n: number }, done: () => boolean) {
  const deadline = Date.now() + 30_000
  let quiet = 0
  while (Date.now() < deadline && (!done() || quiet < 2)) {
    const poll = ++polls.n
    const records = await consumer.poll(300)
    quiet = records.length === 0 ? quiet + 1 : 0
    for (const r of records)
      history.add({
        type: 'read',
        consumer: 'c1',
        poll,
        isolation: 'read_committed',
        topic: r.topic,
        partition: r.partition,
        offset: r.offset,
        value: r.value!.toString('utf8'),
      })
  }
  assert.ok(done(), 'the reads arrived')
}

/** T1 committed, T2 aborted, T3 open while c1 reads, then T3 committed and read to the end. */
async function run(bootstrap: string): Promise<Recorder> {
  await createTopics(bootstrap, [{ topic: TOPIC, partitions: 2 }])
  const history = new Recorder()
  const producer = new Producer({ bootstrapServers: bootstrap, transactionalId: 'verify-p1', lingerMs: 0 })
  const consumer = new Consumer({
    bootstrapServers: bootstrap,
    isolationLevel: 'read_committed',
    fetchMaxWaitMs: 100,
  })
  const polls = { n: 0 }
  const seen = (...values: string[]) =>
    values.every((v) => history.events.some((e) => e['type'] === 'read' && e['value'] === v))
  try {
    await producer.initTransactions()
    history.add({ type: 'producer', producer: 'p1', idempotent: true, transactionalId: 'verify-p1' })
    for (const [txn, outcome, values] of [
      ['T1', 'commit', ['a0', 'a1', 'a2']],
      ['T2', 'abort', ['b0', 'b1']],
    ] as const) {
      producer.beginTransaction()
      history.add({ type: 'begin', producer: 'p1', txn })
      for (const [i, value] of values.entries()) await history.send(producer, txn, i % 2, value)
      if (outcome === 'commit') await producer.commitTransaction()
      else await producer.abortTransaction()
      history.add({ type: outcome, producer: 'p1', txn })
    }
    producer.beginTransaction()
    history.add({ type: 'begin', producer: 'p1', txn: 'T3' })
    await history.send(producer, 'T3', 0, 'c0')

    const partitions = [0, 1].map((partition) => ({ topic: TOPIC, partition }))
    consumer.assign(partitions)
    consumer.seekToBeginning()
    for (const { partition } of partitions)
      history.add({ type: 'assign', consumer: 'c1', topic: TOPIC, partition })
    await readUntil(consumer, history, polls, () => seen('a0', 'a1', 'a2'))

    await history.send(producer, 'T3', 0, 'c1')
    await producer.commitTransaction()
    history.add({ type: 'commit', producer: 'p1', txn: 'T3' })
    await readUntil(consumer, history, polls, () => seen('c0', 'c1'))
    const ends = await consumer.endOffsets(partitions)
    for (const { partition } of partitions)
      history.add({
        type: 'covered',
        topic: TOPIC,
        partition,
        startOffset: 0,
        endOffset: ends.get(`${TOPIC}/${partition}`),
      })
  } finally {
    await consumer.close()
    await producer.close()
  }
  return history
}

test('a read_committed run on the shipped broker gives a clean transactional history', {
  timeout: 90_000,
}, async () => {
  await withBroker(
    async (cluster) => {
      const history = await run(cluster.bootstrapServers)
      const report = history.check()
      assert.ok(report.ok, formatVerifyReport(report))
      assert.deepEqual(report.counts.transactions, { committed: 2, aborted: 1, undecided: 0 })
      assert.equal(report.counts.reads, 5, 'a0 a1 a2 c0 c1, nothing of T2')
      assert.equal(report.counts.acksNotCheckedForLoss, 2, "only T2's two records are not judged for loss")
    },
    { properties: BROKER_PROPERTIES },
  )
})

test('with read_committed served past open and aborted transactions, verify finds aborted (G1a) and uncommitted reads', {
  timeout: 90_000,
}, async () => {
  await withBroker(
    async (cluster) => {
      const undo = plant('read-committed-ignores-transactions', () => undefined)
      let history: Recorder
      try {
        history = await run(cluster.bootstrapServers)
      } finally {
        undo()
      }
      const report = history.check()
      assert.equal(report.ok, false)
      assert.deepEqual(
        report.anomalies.abortedReads
          .map((r) => [r.send.value, r.read.line, r.send.line, r.abort.line])
          .sort(),
        ['b0', 'b1'].map((value) => [
          value,
          history.line({ type: 'read', value }),
          history.line({ type: 'send', value }),
          history.line({ type: 'abort', txn: 'T2' }),
        ]),
      )
      assert.deepEqual(
        report.anomalies.uncommittedReads.map((r) => [
          r.send.value,
          r.reason,
          r.read.line,
          r.laterSend?.line,
        ]),
        [
          [
            'c0',
            'still-open',
            history.line({ type: 'read', value: 'c0' }),
            history.line({ type: 'send', value: 'c1' }),
          ],
        ],
      )
      const text = formatVerifyReport(report)
      assert.match(text, /aborted reads \(G1a[^\n]*: 2\n/)
      assert.match(text, /uncommitted reads [^\n]*: 1\n/)
    },
    { properties: BROKER_PROPERTIES },
  )
})
