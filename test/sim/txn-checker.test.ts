/**
 * The transactions' checks of the simulator (src/sim/txn-checker.ts) on synthetic logs: the
 * log scan behind the LSO and epoch checks, the final
 * all-or-nothing check, and what the producers' book says about fenced epochs. A checker
 * that cannot fail proves nothing, so each check is shown failing on a log that breaks it.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  type DecodedRecordBatch,
  decodeRecordBatchSync,
  encodeRecordBatchSync,
} from '../../src/protocol/record-batch.js'
import {
  checkFinalOffsets,
  checkFinalTransactions,
  controlRecord,
  controlTypeOf,
  DeposedFencedAppends,
  decideLog,
  PartitionTxnScan,
  parseTxnRecordValue,
  TransactionBook,
  TxnInvariants,
  txnRecordValue,
} from '../../src/sim/txn-checker.js'
import type { WorldView } from '../../src/sim/world-view.js'

interface Spec {
  readonly pid?: bigint
  readonly epoch?: number
  readonly values?: readonly string[]
  readonly marker?: 'commit' | 'abort'
  readonly plain?: boolean
}

/** A log of batches at consecutive offsets: transactional data, markers, or plain records. */
function log(specs: readonly Spec[]): {
  batches: DecodedRecordBatch[]
  bytes: { base: number; bytes: Buffer }[]
} {
  let offset = 0
  const batches: DecodedRecordBatch[] = []
  const bytes: { base: number; bytes: Buffer }[] = []
  for (const spec of specs) {
    const records = spec.marker
      ? [controlRecord(spec.marker, 0)]
      : (spec.values ?? ['v']).map((v) => ({ value: Buffer.from(v) }))
    const encoded = encodeRecordBatchSync({
      records,
      baseOffset: offset,
      defaultTimestamp: 1000,
      ...(spec.plain === true
        ? {}
        : {
            producerId: spec.pid ?? 7n,
            producerEpoch: spec.epoch ?? 0,
            baseSequence: 0,
            isTransactional: true,
            isControl: spec.marker !== undefined,
          }),
    })
    batches.push(decodeRecordBatchSync(encoded))
    bytes.push({ base: offset, bytes: encoded })
    offset += records.length
  }
  return { batches, bytes }
}

const v = (txn: number, partition: number, index: number, producer = 0): string =>
  txnRecordValue(producer, txn, partition, index)

describe('simulation: transactions checker', () => {
  it('record values name their transaction, partition and index', () => {
    assert.deepEqual(parseTxnRecordValue(v(12, 1, 3, 4)), { txnId: 'x4.12', partition: 1, index: 3 })
    assert.equal(parseTxnRecordValue('v12.0'), null)
  })

  it("control records carry Kafka's key (version 0, type 0 abort / 1 commit)", () => {
    const { batches } = log([{ marker: 'commit' }, { marker: 'abort' }, { values: ['a'] }])
    assert.deepEqual(batches.map(controlTypeOf), ['commit', 'abort', null])
    assert.equal(controlRecord('commit', 5).key.toString('hex'), '00000001')
    assert.equal(controlRecord('abort', 5).value.toString('hex'), '000000000005')
  })

  it('the log scan knows the first undecided transaction at a high watermark', () => {
    const scan = new PartitionTxnScan(0)
    const { bytes } = log([
      { plain: true }, // 0
      { pid: 1n }, // 1: txn of 1 starts
      { pid: 2n }, // 2: txn of 2 starts
      { pid: 1n, marker: 'commit' }, // 3
      { plain: true }, // 4
      { pid: 2n, marker: 'abort' }, // 5
      { plain: true }, // 6
    ])
    // Out of order: waits for the gap.
    assert.equal(scan.add(bytes[1].base, bytes[1].bytes), null)
    assert.equal(scan.scannedTo, 0)
    for (const b of bytes) assert.equal(scan.add(b.base, b.bytes), null)
    assert.equal(scan.scannedTo, 7)
    assert.equal(scan.firstUndecidedBelow(1), null)
    assert.deepEqual(scan.firstUndecidedBelow(2), { firstOffset: 1, producerId: 1n })
    // Producer 1's marker at 3 is not below HW 3: still undecided there (Kafka's unreplicated txn).
    assert.deepEqual(scan.firstUndecidedBelow(3), { firstOffset: 1, producerId: 1n })
    assert.deepEqual(scan.firstUndecidedBelow(4), { firstOffset: 2, producerId: 2n })
    assert.deepEqual(scan.firstUndecidedBelow(5), { firstOffset: 2, producerId: 2n })
    assert.equal(scan.firstUndecidedBelow(6), null)
    assert.equal(scan.firstUndecidedBelow(7), null)
  })

  it('a data batch of an epoch below one the log already holds is a fenced epoch writing again', () => {
    const scan = new PartitionTxnScan(1)
    const { bytes } = log([
      { pid: 1n, epoch: 3 },
      { pid: 1n, epoch: 4, marker: 'abort' },
      { pid: 1n, epoch: 3 },
    ])
    assert.equal(scan.add(bytes[0].base, bytes[0].bytes), null)
    assert.equal(scan.add(bytes[1].base, bytes[1].bytes), null)
    assert.match(
      scan.add(bytes[2].base, bytes[2].bytes) ?? '',
      /fenced epoch wrote again: p1 offset 2 .* epoch 3, after epoch 4/,
    )
  })

  it("a deposed leader's fenced-epoch batch is allowed while uncommitted, a violation once committed", () => {
    // What a deposed leader appended at offset 2 (a fenced epoch's late write), and what the
    // new leader holds there.
    const deposed = log([
      { pid: 1n, epoch: 3 },
      { pid: 1n, epoch: 3 },
      { pid: 1n, epoch: 3, values: ['late'] },
    ])
    const current = log([
      { pid: 1n, epoch: 3 },
      { pid: 1n, epoch: 3 },
      { pid: 2n, epoch: 0 },
    ])
    const appends = new DeposedFencedAppends()
    appends.add(0, 2, deposed.bytes[2].bytes, 'fenced epoch wrote again: deposed leader 1 ...')
    assert.equal(appends.onCommitted(1, 2, deposed.bytes[2].bytes), null, 'another partition')
    assert.equal(appends.onCommitted(0, 1, deposed.bytes[1].bytes), null, 'another offset')
    // Truncated away: the offset committed with the new leader's batch; the entry is done.
    assert.equal(appends.onCommitted(0, 2, current.bytes[2].bytes), null)
    assert.equal(appends.size, 0)
    // Committed as appended: the violation.
    appends.add(0, 2, deposed.bytes[2].bytes, 'fenced epoch wrote again: deposed leader 1 ...')
    assert.match(
      appends.onCommitted(0, 2, deposed.bytes[2].bytes) ?? '',
      /^fenced epoch wrote again: deposed leader 1 \.\.\., and that batch was committed$/,
    )
  })

  it('the book says when an epoch was superseded by InitProducerId', () => {
    const book = new TransactionBook()
    book.onInitProducerId('t', 5n, 0, 100)
    assert.equal(book.fencedAtMs(5n, 0), null)
    book.onInitProducerId('t', 5n, 1, 200)
    assert.equal(book.fencedAtMs(5n, 0), 200)
    assert.equal(book.fencedAtMs(5n, 1), null)
    book.onInitProducerId('t', 9n, 0, 300)
    assert.equal(book.fencedAtMs(5n, 1), 300)
    assert.equal(book.fencedAtMs(9n, 0), null)
    assert.equal(book.fencedAtMs(42n, 0), null, 'not a transactional producer')
  })

  /** A book with one transaction x0.0 over partitions 0 and 1, one record acknowledged in each. */
  function bookWith(status: 'committed' | 'aborted' | 'unknown'): TransactionBook {
    const book = new TransactionBook()
    const txn = book.begin({
      txnId: 'x0.0',
      txnNumber: 0,
      transactionalId: 't',
      producerId: 1n,
      producerEpoch: 0,
      partitions: [0, 1],
      beganAtMs: 0,
    })
    txn.ackedRecords.set(0, 1)
    txn.ackedRecords.set(1, 1)
    txn.commitSent = status !== 'aborted'
    txn.status = status
    return book
  }

  const decided = (specs: readonly Spec[]) => decideLog(log(specs).batches)

  it('a transaction committed on every partition, read back once, passes', () => {
    const logs = new Map([
      [
        0,
        decided([
          { pid: 1n, values: [v(0, 0, 0)] },
          { pid: 1n, marker: 'commit' },
        ]),
      ],
      [
        1,
        decided([
          { pid: 1n, values: [v(0, 1, 0)] },
          { pid: 1n, marker: 'commit' },
        ]),
      ],
    ])
    const delivered = new Map([
      [0, [`${v(0, 0, 0)}@0`]],
      [1, [`${v(0, 1, 0)}@0`]],
    ])
    assert.equal(checkFinalTransactions(bookWith('committed'), logs, delivered), null)
    assert.equal(checkFinalTransactions(bookWith('unknown'), logs, delivered), null)
  })

  it('a transaction committed on one partition and aborted on the other fails', () => {
    const logs = new Map([
      [
        0,
        decided([
          { pid: 1n, values: [v(0, 0, 0)] },
          { pid: 1n, marker: 'commit' },
        ]),
      ],
      [
        1,
        decided([
          { pid: 1n, values: [v(0, 1, 0)] },
          { pid: 1n, marker: 'abort' },
        ]),
      ],
    ])
    assert.match(
      checkFinalTransactions(bookWith('committed'), logs, new Map()) ?? '',
      /x0\.0 .*committed in part only/,
    )
    assert.match(checkFinalTransactions(bookWith('unknown'), logs, new Map()) ?? '', /committed in part only/)
  })

  it('a committed transaction missing from a partition fails', () => {
    const logs = new Map([
      [
        0,
        decided([
          { pid: 1n, values: [v(0, 0, 0)] },
          { pid: 1n, marker: 'commit' },
        ]),
      ],
      [1, decided([{ plain: true }])],
    ])
    assert.match(
      checkFinalTransactions(bookWith('committed'), logs, new Map()) ?? '',
      /x0\.0\.p1\.0 is not committed in p1 \(absent\)/,
    )
  })

  it('an aborted transaction committed in the log, or one left open, fails', () => {
    const committed = new Map([
      [
        0,
        decided([
          { pid: 1n, values: [v(0, 0, 0)] },
          { pid: 1n, marker: 'commit' },
        ]),
      ],
    ])
    assert.match(
      checkFinalTransactions(bookWith('aborted'), committed, new Map()) ?? '',
      /never asked to commit/,
    )
    const open = new Map([[0, decided([{ pid: 1n, values: [v(0, 0, 0)] }])]])
    assert.match(
      checkFinalTransactions(bookWith('unknown'), open, new Map()) ?? '',
      /still open in p0 .*hanging/,
    )
  })

  it('a record committed twice fails', () => {
    const logs = new Map([
      [
        0,
        decided([
          { pid: 1n, values: [v(0, 0, 0)] },
          { pid: 1n, marker: 'commit' },
          { pid: 1n, values: [v(0, 0, 0)] },
          { pid: 1n, marker: 'commit' },
        ]),
      ],
      [
        1,
        decided([
          { pid: 1n, values: [v(0, 1, 0)] },
          { pid: 1n, marker: 'commit' },
        ]),
      ],
    ])
    assert.match(checkFinalTransactions(bookWith('committed'), logs, new Map()) ?? '', /committed 2 times/)
  })

  it("a read_committed consumer's records must be the log's committed ones, in order, once each", () => {
    const logs = new Map([
      [
        0,
        decided([
          { pid: 1n, values: [v(0, 0, 0)] },
          { pid: 1n, marker: 'commit' },
        ]),
      ],
      [
        1,
        decided([
          { pid: 1n, values: [v(0, 1, 0)] },
          { pid: 1n, marker: 'commit' },
        ]),
      ],
    ])
    assert.match(
      checkFinalTransactions(bookWith('committed'), logs, new Map([[0, []]])) ?? '',
      /consumer of p0 returned 0 transactional records, the log commits 1/,
    )
    assert.match(
      checkFinalTransactions(
        bookWith('committed'),
        logs,
        new Map([[0, [`${v(0, 0, 0)}@0`, `${v(0, 0, 0)}@0`]]]),
      ) ?? '',
      /first difference at #1/,
    )
    // The right record at another offset (a client that numbers records wrongly).
    assert.match(
      checkFinalTransactions(bookWith('committed'), logs, new Map([[0, [`${v(0, 0, 0)}@1`]]])) ?? '',
      /first difference at #0/,
    )
  })

  it('a group offset is visible only from a transaction asked to commit; at the end the last committed one', () => {
    const checks = new TxnInvariants({} as WorldView)
    const book = checks.book
    const begin = (
      n: number,
      status: 'committed' | 'aborted' | 'unknown' | 'open',
      offset: number | null,
    ) => {
      const txn = book.begin({
        txnId: `x0.${n}`,
        txnNumber: n,
        transactionalId: 't',
        producerId: 1n,
        producerEpoch: 0,
        partitions: [0],
        beganAtMs: 0,
      })
      txn.status = status
      txn.commitSent = status === 'committed' || status === 'unknown'
      txn.offsetSent = offset
    }
    begin(0, 'committed', 1)
    begin(1, 'aborted', 2)
    begin(2, 'unknown', 3)
    begin(3, 'open', 4)
    checks.onTxnOffsetsFetched(0, -1)
    checks.onTxnOffsetsFetched(0, 1)
    checks.onTxnOffsetsFetched(0, 3)
    assert.throws(
      () => checks.onTxnOffsetsFetched(0, 2),
      /offset 2, committed in transaction x0\.1, which its producer never asked to commit/,
    )
    assert.throws(() => checks.onTxnOffsetsFetched(0, 4), /never asked to commit \(status open\)/)
    assert.throws(() => checks.onTxnOffsetsFetched(0, 9), /which no transaction sent/)
    const none = new Map<number, ReturnType<typeof decideLog>>()
    // x0.2's outcome is unknown to its client: the logs decide.
    assert.equal(checkFinalOffsets(book, 0, 1, none), null)
    assert.match(
      checkFinalOffsets(book, 0, 3, none) ?? '',
      /returns 3, the last committed transaction with offsets committed 1/,
    )
    const committed = new Map([
      [
        0,
        decided([
          { pid: 1n, values: [v(2, 0, 0)] },
          { pid: 1n, marker: 'commit' },
        ]),
      ],
    ])
    assert.equal(checkFinalOffsets(book, 0, 3, committed), null)
  })
})
