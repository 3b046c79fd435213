/**
 * HistoryWriter and readHistoryFile: what the writer puts in a file is a history the parser
 * accepts, event for event, including when the file falls behind and the writer drains.
 */
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { checkHistory } from '../../src/verify/checker.js'
import { HistoryFormatError } from '../../src/verify/history.js'
import { HistoryWriter, readHistoryFile } from '../../src/verify/history-file.js'

async function withDir(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'tidelog-history-'))
  try {
    await body(dir)
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

test('a written history reads back as the same events, header first', async () => {
  await withDir(async (dir) => {
    const path = join(dir, 'h.jsonl')
    const writer = await HistoryWriter.create(path)
    writer.producer('p1', true)
    writer.send({ producer: 'p1', seq: 0, topic: 't', key: null, value: 'a', time: 5 })
    writer.send({ producer: 'p1', seq: 1, topic: 't', value: 'b' })
    writer.ack({ producer: 'p1', seq: 0, topic: 't', partition: 2, offset: 7 })
    writer.fail({ producer: 'p1', seq: 1, error: 'REQUEST_TIMED_OUT' })
    writer.read({ consumer: 'c', topic: 't', partition: 2, offset: 7, key: null, value: 'a' })
    writer.covered({ topic: 't', partition: 2, startOffset: 0, endOffset: 8 })
    await writer.close()

    const text = await readFile(path, 'utf8')
    assert.equal(text.split('\n')[0], '{"type":"header","format":"tidelog-history","version":1}')
    const history = await readHistoryFile(path)
    assert.equal(history.lines, 8)
    assert.deepEqual(history.sends[0], {
      type: 'send',
      line: 3,
      time: 5,
      producer: 'p1',
      seq: 0,
      topic: 't',
      key: null,
      value: 'a',
    })
    assert.equal(typeof history.sends[1].time, 'number', 'time defaults to when the event was written')
    assert.equal(history.sends[1].key, undefined, 'a key not given is not recorded')
    assert.deepEqual([history.acks[0].partition, history.acks[0].offset], [2, 7])
    assert.equal(history.fails[0].error, 'REQUEST_TIMED_OUT')
    assert.equal(history.producers.get('p1')?.idempotent, true)
    const report = checkHistory(history)
    assert.equal(report.ok, true)
    assert.equal(report.counts.acksCheckedForLoss, 1)
  })
})

test('many events through drain() all arrive, in order', async () => {
  await withDir(async (dir) => {
    const path = join(dir, 'big.jsonl')
    const writer = await HistoryWriter.create(path)
    const records = 50_000
    let drained = 0
    for (let seq = 0; seq < records; seq++) {
      writer.send({ producer: 'p', seq, topic: 't', value: `p-${seq}`.padEnd(100, '.') })
      writer.ack({ producer: 'p', seq, topic: 't', partition: 0, offset: seq })
      if (writer.needsDrain) {
        drained++
        await writer.drain()
      }
    }
    await writer.close()
    const history = await readHistoryFile(path)
    assert.equal(history.sends.length, records)
    assert.equal(history.acks.length, records)
    assert.ok(history.acks.every((ack, i) => ack.seq === i && ack.offset === i))
    assert.ok(drained > 0, 'the file fell behind at least once, so drain() was exercised')
  })
})

test('reading a malformed file gives line-numbered errors; a missing file is ENOENT', async () => {
  await withDir(async (dir) => {
    const path = join(dir, 'bad.jsonl')
    const writer = await HistoryWriter.create(path)
    writer.ack({ producer: 'p', seq: 3, topic: 't', partition: 0, offset: 0 })
    await writer.close()
    await assert.rejects(readHistoryFile(path), (error: unknown) => {
      assert.ok(error instanceof HistoryFormatError)
      assert.deepEqual(error.errors, [
        { line: 2, message: "ack for producer 'p' seq 3, which no earlier line sent" },
      ])
      return true
    })
    await assert.rejects(readHistoryFile(join(dir, 'missing.jsonl')), { code: 'ENOENT' })
    await assert.rejects(HistoryWriter.create(join(dir, 'no-such-dir', 'h.jsonl')), { code: 'ENOENT' })
  })
})
