/**
 * `tidelog verify` as the real binary (`node bin/tidelog.js`) on history files: its text
 * and JSON reports, and its exit codes (0 clean, 1 anomalies, 2 usage or malformed input);
 * and the history `tidelog bench produce --history` writes against a real broker.
 */
import assert from 'node:assert/strict'
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { Consumer } from '../../src/client/consumer.js'
import { checkHistory } from '../../src/verify/checker.js'
import { readHistoryFile } from '../../src/verify/history-file.js'
import { withBroker } from '../client/helpers.js'
import { tidelogBin } from '../helpers/broker-process.js'
import { type RunResult, run } from '../helpers/cluster.js'
import { repoRoot } from '../helpers/compat-clients.js'

function tidelog(args: readonly string[], input?: string): Promise<RunResult> {
  return run(process.execPath, [tidelogBin(), ...args], { ...(input !== undefined ? { input } : {}) })
}

const CLEAN = [
  { type: 'header', format: 'tidelog-history', version: 1 },
  { type: 'producer', producer: 'p1', idempotent: true },
  { type: 'send', time: 1, producer: 'p1', seq: 0, topic: 'orders', key: 'k', value: 'a' },
  { type: 'send', time: 2, producer: 'p1', seq: 1, topic: 'orders', key: 'k', value: 'b' },
  { type: 'ack', time: 3, producer: 'p1', seq: 0, topic: 'orders', partition: 0, offset: 0 },
  { type: 'ack', time: 4, producer: 'p1', seq: 1, topic: 'orders', partition: 0, offset: 1 },
  { type: 'read', time: 5, topic: 'orders', partition: 0, offset: 0, key: 'k', value: 'a' },
  { type: 'read', time: 6, topic: 'orders', partition: 0, offset: 1, key: 'k', value: 'b' },
  { type: 'covered', time: 7, topic: 'orders', partition: 0, startOffset: 0, endOffset: 2 },
]

const lines = (events: readonly object[]): string => `${events.map((e) => JSON.stringify(e)).join('\n')}\n`

let dir = ''
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tidelog-verify-'))
})
after(async () => {
  await rm(dir, { recursive: true, force: true })
})

async function historyFile(name: string, text: string): Promise<string> {
  const path = join(dir, name)
  await writeFile(path, text)
  return path
}

test('a clean history: exit 0 and a report that says what was checked', async () => {
  const result = await tidelog(['verify', await historyFile('clean.jsonl', lines(CLEAN))])
  assert.equal(result.code, 0, result.stderr)
  assert.match(result.stdout, /^history: 9 lines; 2 sends from 1 producer, 2 acks, 0 fails/)
  assert.match(result.stdout, /checked for loss: 2 of 2 acknowledged writes\n/)
  assert.match(result.stdout, /lost acknowledged writes: 0\n/)
  assert.match(
    result.stdout,
    /not checked: poll order \(poll skips, nonmonotonic polls\): no read names its 'consumer'/,
  )
  assert.match(result.stdout, /OK: no anomalies\n$/)
  assert.equal(result.stderr, '')
})

test('a lost write and a reordering: exit 1, each with its lines, in text and in JSON', async () => {
  // seq 1 acked before seq 0 in the partition, and seq 0's record is missing from the final read.
  const events = [
    ...CLEAN.slice(0, 4),
    { type: 'ack', producer: 'p1', seq: 0, topic: 'orders', partition: 0, offset: 1 },
    { type: 'ack', producer: 'p1', seq: 1, topic: 'orders', partition: 0, offset: 0 },
    { type: 'read', topic: 'orders', partition: 0, offset: 0, key: 'k', value: 'b' },
    CLEAN[8],
  ]
  const path = await historyFile('lost.jsonl', lines(events))
  const text = await tidelog(['verify', path])
  assert.equal(text.code, 1, text.stderr)
  assert.match(
    text.stdout,
    /lost acknowledged writes: 1\n {4}p1 seq 0 "a" \(sent line 3\): acked at orders-0@1 \(ack line 5\), never read; orders-0 was read from 0 to its end 2 \(covered line 8\)\n/,
  )
  assert.match(
    text.stdout,
    /reorderings within a producer and partition: 1\n {4}p1 in orders-0 \(acks\): seq 0 "a" at offset 1 \(ack line 5\) was sent before seq 1 "b" at offset 0 \(ack line 6\)\n/,
  )
  assert.match(text.stdout, /FAILED: 2 anomalies\n$/)

  const json = await tidelog(['verify', path, '--json'])
  assert.equal(json.code, 1, json.stderr)
  const report = JSON.parse(json.stdout)
  assert.equal(report.ok, false)
  assert.equal(report.counts.anomalies, 2)
  assert.deepEqual(
    report.anomalies.lost.map((l: { send: { line: number }; ack: { line: number } }) => [
      l.send.line,
      l.ack.line,
    ]),
    [[3, 5]],
  )
  assert.equal(report.anomalies.reorderings[0].sentSecond.event.line, 6)
})

test('a malformed history: exit 2 with every bad line as FILE:LINE', async () => {
  const text = `${lines(CLEAN.slice(0, 3))}{"type":"ack","producer":"p1","seq":4,"topic":"orders","partition":0,"offset":0}\nnot json\n`
  const path = await historyFile('bad.jsonl', text)
  const result = await tidelog(['verify', path])
  assert.equal(result.code, 2)
  assert.equal(result.stdout, '')
  assert.match(
    result.stderr,
    new RegExp(`${path}:4: ack for producer 'p1' seq 4, which no earlier line sent\n`),
  )
  assert.match(result.stderr, new RegExp(`${path}:5: not JSON`))

  const json = await tidelog(['verify', '--json', path])
  assert.equal(json.code, 2)
  assert.deepEqual(
    JSON.parse(json.stdout).inputErrors.map((e: { line: number }) => e.line),
    [4, 5],
  )
})

test('stdin as -, a missing file, no file and --help', async () => {
  const piped = await tidelog(['verify', '-'], lines(CLEAN))
  assert.equal(piped.code, 0, piped.stderr)
  assert.match(piped.stdout, /OK: no anomalies/)
  const badPipe = await tidelog(['verify', '-'], '{"type":"send"}\n')
  assert.equal(badPipe.code, 2)
  assert.match(badPipe.stderr, /stdin:1: 'producer' must be a non-empty string/)

  const missing = await tidelog(['verify', join(dir, 'nope.jsonl')])
  assert.equal(missing.code, 2)
  assert.match(missing.stderr, /cannot read .*nope\.jsonl: ENOENT/)

  const none = await tidelog(['verify'])
  assert.equal(none.code, 2)
  assert.match(none.stderr, /verify needs a history FILE \(see --help\)/)
  const unknown = await tidelog(['verify', '--frobnicate', 'x'])
  assert.equal(unknown.code, 2)

  const help = await tidelog(['verify', '--help'])
  assert.equal(help.code, 0)
  assert.match(help.stdout, /^Usage: tidelog verify FILE \[--json\]/)
  const top = await tidelog(['help'])
  assert.match(top.stdout, /\n {2}verify {4}Check a history file/)
})

test('bench produce --history writes a history the checker reads; with the reads added it covers every ack', {
  timeout: 120000,
}, async () => {
  await withBroker(async (cluster) => {
    const path = join(dir, 'bench.jsonl')
    const records = 3000
    const bench = await run(
      process.execPath,
      [
        tidelogBin(),
        'bench',
        'produce',
        '--topic',
        'bench-history',
        '--partitions',
        '3',
        '--producers',
        '2',
        '--num-records',
        String(records),
        '--record-size',
        '100',
        '--history',
        path,
        '--bootstrap-server',
        cluster.bootstrapServers,
      ],
      { timeoutMs: 60000 },
    )
    assert.equal(bench.code, 0, bench.stderr)
    assert.match(
      bench.stdout,
      new RegExp(`history written to ${path}; check it with: tidelog verify ${path}`),
    )
    const produced = checkHistory(await readHistoryFile(path))
    assert.equal(produced.ok, true)
    assert.equal(produced.counts.producers, 2)
    assert.equal(produced.counts.sends, records)
    assert.equal(produced.counts.acks, records)
    assert.equal(produced.counts.acksNotCheckedForLoss, records, 'no reads yet: nothing judged for loss')

    // A reader appends what it read, as another tool would: the value is the text before the space.
    const consumer = new Consumer({ bootstrapServers: cluster.bootstrapServers, autoOffsetReset: 'earliest' })
    const reads: string[] = []
    const ends = new Map<number, number>()
    try {
      await consumer.assignTopics(['bench-history'])
      for (let polls = 0; reads.length < records && polls < 200; polls++) {
        for (const r of await consumer.poll(500)) {
          const value = r.value!.toString('utf8')
          assert.equal(value.length, 100)
          reads.push(
            JSON.stringify({
              type: 'read',
              topic: r.topic,
              partition: r.partition,
              offset: r.offset,
              key: null,
              value: value.slice(0, value.indexOf(' ')),
            }),
          )
          ends.set(r.partition, Math.max(ends.get(r.partition) ?? 0, r.offset + 1))
        }
      }
    } finally {
      await consumer.close()
    }
    assert.equal(reads.length, records)
    const covered = [...ends].map(([partition, endOffset]) =>
      JSON.stringify({ type: 'covered', topic: 'bench-history', partition, startOffset: 0, endOffset }),
    )
    await appendFile(path, `${[...reads, ...covered].join('\n')}\n`)
    const result = await tidelog(['verify', path, '--json'])
    assert.equal(result.code, 0, result.stdout.slice(0, 2000))
    const report = JSON.parse(result.stdout)
    assert.equal(report.counts.acksCheckedForLoss, records)
    assert.equal(report.counts.readPositions, records)
  })
})

test("docs/history-format.md's worked example gives the report the page shows", async () => {
  const page = await readFile(join(repoRoot(), 'docs', 'history-format.md'), 'utf8')
  const example = /```json\n([\s\S]*?)```/.exec(page)![1]
  const shown = /\$ tidelog verify example\.jsonl\n([\s\S]*?)\$ echo \$\?\n(\d)/.exec(page)!
  const result = await tidelog(['verify', await historyFile('example.jsonl', example)])
  assert.equal(result.stdout, shown[1])
  assert.equal(result.code, Number(shown[2]))
})

test("docs/history-format.md's transactional example gives the findings the page shows", async () => {
  const page = await readFile(join(repoRoot(), 'docs', 'history-format.md'), 'utf8')
  const example = /```jsonl\n([\s\S]*?)```/.exec(page)![1]
  const shown = /among its other \(empty\) lists:\n\n```\n([\s\S]*?)```/.exec(page)![1]
  const result = await tidelog(['verify', await historyFile('transactional.jsonl', example)])
  assert.equal(result.code, 1)
  assert.ok(result.stdout.includes(shown), result.stdout)
  assert.match(result.stdout, /FAILED: 2 anomalies\n$/)
})
