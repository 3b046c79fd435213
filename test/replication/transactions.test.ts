/**
 * The log side of transactions over a real UnifiedLog and its ProducerStateManager:
 * transactional batches open a transaction, COMMIT/ABORT control batches end it, the
 * first unstable offset (and the LSO, capped by the high watermark), Kafka's marker epoch
 * and coordinator epoch checks, the `.txnindex` of aborted transactions (Kafka's format),
 * snapshots carrying open transactions, recovery by replay, truncation and followers.
 */
import assert from 'node:assert/strict'
import { readFile, rm, stat, truncate } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import type { FileSystem } from '../../src/common/file-system.js'
import { silentLogger } from '../../src/common/logger.js'
import { type LeaderEpoch, type Offset, toProducerId } from '../../src/common/types.js'
import { BatchHeader } from '../../src/protocol/batch-header.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import { KafkaError } from '../../src/replication/kafka-error.js'
import { ProducerStateManager, UNVERIFIED } from '../../src/replication/producer-state.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { encodeEndTxnMarker, readEndTxnMarker } from '../../src/storage/control-batch.js'
import { DEFAULT_LOG_CONFIG } from '../../src/storage/log-config.js'
import { snapshotFileName } from '../../src/storage/producer-state-snapshot.js'
import { TransactionIndex } from '../../src/storage/transaction-index.js'
import { type LogAppendInfo, UnifiedLog } from '../../src/storage/unified-log.js'
import { ManualClock, withTempDir } from '../storage/helpers.js'

const DAY_MS = 86_400_000

function txnBatch(pid: bigint, epoch: number, seq: number, count = 1, transactional = true): Buffer {
  return encodeRecordBatchSync({
    records: Array.from({ length: count }, (_, i) => ({
      value: Buffer.from(`v${seq + i}`),
      timestamp: 1_000,
    })),
    producerId: pid,
    producerEpoch: epoch,
    baseSequence: seq,
    isTransactional: transactional,
  })
}

function marker(pid: bigint, epoch: number, result: 'commit' | 'abort', coordinatorEpoch = 0): Buffer {
  return encodeEndTxnMarker({
    producerId: toProducerId(pid),
    producerEpoch: epoch,
    coordinatorEpoch,
    result,
    timestampMs: 2_000,
  })
}

interface Fixture {
  readonly path: string
  readonly clock: ManualClock
  log: UnifiedLog
  state: ProducerStateManager
}

async function open(
  path: string,
  clock: ManualClock,
  segmentBytes = DEFAULT_LOG_CONFIG.segmentBytes,
  fs: FileSystem = nodeFileSystem,
) {
  const log = await UnifiedLog.open({
    fs,
    dir: path,
    clock,
    config: { ...DEFAULT_LOG_CONFIG, segmentBytes },
  })
  const state = new ProducerStateManager(log, { clock, logger: silentLogger, producerIdExpirationMs: DAY_MS })
  await log.attachProducerState(state)
  return { log, state }
}

async function withLog(body: (f: Fixture) => Promise<void>, segmentBytes?: number): Promise<void> {
  await withTempDir(async (dir) => {
    const clock = new ManualClock()
    const path = join(dir, 't-0')
    const fixture: Fixture = { path, clock, ...(await open(path, clock, segmentBytes)) }
    try {
      await body(fixture)
    } finally {
      await fixture.log.close()
    }
  })
}

/**
 * The real file system, calling `beforeEach` before every operation: the moments an
 * operation of the log (a truncation, a load) awaits the disk, where a read running beside
 * it can see its state half done.
 */
function observedFileSystem(beforeEach: () => void): FileSystem {
  return new Proxy(nodeFileSystem, {
    get(target, name, receiver) {
      const value: unknown = Reflect.get(target, name, receiver)
      if (typeof value !== 'function') return value
      return (...args: unknown[]) => {
        beforeEach()
        return value.apply(target, args)
      }
    },
  })
}

function lead(log: UnifiedLog, buf: Buffer): Promise<LogAppendInfo> {
  return log.append(buf, { assignOffsets: true, leaderEpoch: 0 as LeaderEpoch })
}

function coordinator(log: UnifiedLog, buf: Buffer): Promise<LogAppendInfo> {
  return log.append(buf, { assignOffsets: true, leaderEpoch: 0 as LeaderEpoch, origin: 'coordinator' })
}

function lso(log: UnifiedLog, state: ProducerStateManager): number {
  const first = state.firstUnstableOffset()
  return first === undefined ? log.highWatermark : Math.min(first, log.highWatermark)
}

async function rejectsWith(promise: Promise<unknown>, code: number): Promise<void> {
  await assert.rejects(promise, (err: unknown) => err instanceof KafkaError && err.errorCode === code)
}

describe('control batches', () => {
  it('an end transaction marker round-trips as Kafka encodes it (key version 0 + type, value version 0 + epoch)', () => {
    const buf = marker(9n, 3, 'abort', 17)
    const header = new BatchHeader(buf)
    assert.ok(header.isControl && header.isTransactional)
    assert.equal(header.producerId, 9n)
    assert.equal(header.producerEpoch, 3)
    assert.equal(header.baseSequence, -1)
    assert.deepEqual(readEndTxnMarker(header), { result: 'abort', coordinatorEpoch: 17 })
    assert.deepEqual(readEndTxnMarker(new BatchHeader(marker(9n, 3, 'commit', 2))), {
      result: 'commit',
      coordinatorEpoch: 2,
    })
  })
})

describe('transactions in the producer state', () => {
  it('a transaction holds the first unstable offset until its marker is below the high watermark', () =>
    withLog(async ({ log, state }) => {
      await lead(log, txnBatch(5n, 0, 0, 2, false))
      await lead(log, txnBatch(1n, 0, 0, 2)) // offsets 2-3: opens the transaction at 2
      await lead(log, txnBatch(1n, 0, 2, 1)) // 4
      log.updateHighWatermark(log.logEndOffset)
      assert.equal(state.firstUnstableOffset(), 2)
      assert.equal(lso(log, state), 2)
      assert.deepEqual([...state.ongoingTransactions], [[1n, 2]])
      const info = await coordinator(log, marker(1n, 0, 'commit'))
      assert.equal(info.firstOffset, 5)
      assert.equal(state.ongoingTransactions.size, 0)
      log.updateHighWatermark(5 as Offset)
      assert.equal(
        lso(log, state),
        2,
        'the marker is not replicated yet: the transaction still bounds the LSO',
      )
      log.updateHighWatermark(6 as Offset)
      assert.equal(state.firstUnstableOffset(), undefined)
      assert.equal(lso(log, state), 6)
      assert.equal(
        log.collectAbortedTransactions(0 as Offset, 6 as Offset).length,
        0,
        'a commit indexes nothing',
      )
    }))

  it('the earliest of several open transactions bounds the LSO; ending it moves the bound to the next', () =>
    withLog(async ({ log, state }) => {
      await lead(log, txnBatch(1n, 0, 0)) // 0
      await lead(log, txnBatch(2n, 0, 0)) // 1
      await lead(log, txnBatch(1n, 0, 1)) // 2
      await coordinator(log, marker(1n, 0, 'abort')) // 3
      log.updateHighWatermark(log.logEndOffset)
      assert.equal(state.firstUnstableOffset(), 1)
      const [aborted] = log.collectAbortedTransactions(0 as Offset, 4 as Offset)
      assert.deepEqual(aborted, { producerId: 1n, firstOffset: 0, lastOffset: 3, lastStableOffset: 1 })
      await coordinator(log, marker(2n, 0, 'commit')) // 4
      log.updateHighWatermark(log.logEndOffset)
      assert.equal(state.firstUnstableOffset(), undefined)
    }))

  it('a marker from an older producer epoch is INVALID_PRODUCER_EPOCH, from an older coordinator epoch TRANSACTION_COORDINATOR_FENCED', () =>
    withLog(async ({ log, state }) => {
      await lead(log, txnBatch(1n, 4, 0))
      await rejectsWith(coordinator(log, marker(1n, 3, 'abort', 5)), ErrorCode.INVALID_PRODUCER_EPOCH)
      await coordinator(log, marker(1n, 4, 'abort', 5))
      await lead(log, txnBatch(1n, 4, 1))
      await rejectsWith(
        coordinator(log, marker(1n, 4, 'commit', 4)),
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
      )
      assert.equal(
        state.ongoingTransactions.get(toProducerId(1n)),
        2,
        'a refused marker leaves the transaction open',
      )
      // A newer producer epoch in a marker (the coordinator aborting for a bumped epoch) is taken.
      await coordinator(log, marker(1n, 5, 'abort', 6))
      assert.equal(state.lastEntry(toProducerId(1n))?.producerEpoch, 5)
      assert.equal(state.lastEntry(toProducerId(1n))?.coordinatorEpoch, 6)
      await rejectsWith(lead(log, txnBatch(1n, 4, 2)), ErrorCode.INVALID_PRODUCER_EPOCH)
      assert.equal((await lead(log, txnBatch(1n, 5, 0))).firstOffset, 4, 'the new epoch starts at sequence 0')
    }))

  it('a non-transactional batch inside an open transaction is INVALID_TXN_STATE', () =>
    withLog(async ({ log }) => {
      await lead(log, txnBatch(1n, 0, 0))
      await rejectsWith(lead(log, txnBatch(1n, 0, 1, 1, false)), ErrorCode.INVALID_TXN_STATE)
      await coordinator(log, marker(1n, 0, 'commit'))
      assert.equal((await lead(log, txnBatch(1n, 0, 1, 1, false))).firstOffset, 2)
    }))

  it('a marker with no transaction open ends nothing and indexes nothing', () =>
    withLog(async ({ log, state }) => {
      await coordinator(log, marker(3n, 1, 'abort', 2))
      log.updateHighWatermark(log.logEndOffset)
      assert.equal(state.firstUnstableOffset(), undefined)
      assert.equal(log.collectAbortedTransactions(0 as Offset, 1 as Offset).length, 0)
      assert.equal(state.lastEntry(toProducerId(3n))?.coordinatorEpoch, 2)
    }))

  it('an open transaction keeps its producer past producer.id.expiration.ms', () =>
    withLog(async ({ log, state, clock }) => {
      await lead(log, txnBatch(1n, 0, 0))
      await lead(log, txnBatch(2n, 0, 0, 1, false))
      clock.advance(2 * DAY_MS)
      assert.equal(state.removeExpiredProducers(), 1)
      assert.ok(state.lastEntry(toProducerId(1n)) !== undefined)
    }))
})

describe('KIP-890 verification guards', () => {
  const verified = (log: UnifiedLog, buf: Buffer, guard: object) =>
    log.append(buf, { assignOffsets: true, leaderEpoch: 0 as LeaderEpoch, verificationGuard: guard })

  it('a batch opening a transaction needs the current guard; any marker voids it; the open transaction needs none', () =>
    withLog(async ({ log, state }) => {
      const guard = state.beginVerification(toProducerId(1n), 0)
      assert.equal(
        state.beginVerification(toProducerId(1n), 0),
        guard,
        'verifications in flight share a guard',
      )
      await rejectsWith(verified(log, txnBatch(1n, 0, 0), {}), ErrorCode.INVALID_TXN_STATE)
      await verified(log, txnBatch(1n, 0, 0), guard)
      assert.equal(state.needsVerification(toProducerId(1n), 0), false)
      // TV2: a write of the next epoch must not join the open transaction of this one.
      assert.equal(state.needsVerification(toProducerId(1n), 1), true)
      await verified(log, txnBatch(1n, 0, 1), guard)
      await coordinator(log, marker(1n, 0, 'abort'))
      assert.equal(state.needsVerification(toProducerId(1n), 0), true)
      const late = state.beginVerification(toProducerId(1n), 0)
      // An abort lands between the verification and the write: the write must not open a transaction.
      await coordinator(log, marker(1n, 0, 'abort'))
      await rejectsWith(verified(log, txnBatch(1n, 0, 2), late), ErrorCode.INVALID_TXN_STATE)
      assert.equal(state.ongoingTransactions.size, 0)
    }))

  it('a write sent unverified because its transaction was open cannot reopen it after a marker ended it', () =>
    withLog(async ({ log, state }) => {
      await verified(log, txnBatch(toProducerId(1n), 0, 0), state.beginVerification(toProducerId(1n), 0))
      await verified(log, txnBatch(1n, 0, 1), UNVERIFIED)
      await coordinator(log, marker(1n, 0, 'abort'))
      await rejectsWith(verified(log, txnBatch(1n, 0, 2), UNVERIFIED), ErrorCode.INVALID_TXN_STATE)
      assert.equal(state.ongoingTransactions.size, 0)
    }))

  it('a guard from another producer epoch does not count; unused ones expire with producer.id.expiration.ms', () =>
    withLog(async ({ log, state, clock }) => {
      const old = state.beginVerification(toProducerId(1n), 0)
      await rejectsWith(verified(log, txnBatch(1n, 1, 0), old), ErrorCode.INVALID_TXN_STATE)
      const stale = state.beginVerification(toProducerId(2n), 0)
      clock.advance(DAY_MS)
      state.removeExpiredProducers()
      await rejectsWith(verified(log, txnBatch(2n, 0, 0), stale), ErrorCode.INVALID_TXN_STATE)
    }))
})

describe('the aborted transaction index', () => {
  it('is Kafka’s .txnindex: 34-byte entries of version, producer id, first, last and last stable offsets', () =>
    withLog(async ({ log, path }) => {
      await lead(log, txnBatch(7n, 0, 0, 3)) // 0-2
      await coordinator(log, marker(7n, 0, 'abort')) // 3
      await log.flush()
      const file = await readFile(join(path, '00000000000000000000.txnindex'))
      assert.equal(file.length, 34)
      assert.equal(file.readInt16BE(0), 0)
      assert.equal(file.readBigInt64BE(2), 7n)
      assert.equal(file.readBigInt64BE(10), 0n)
      assert.equal(file.readBigInt64BE(18), 3n)
      assert.equal(file.readBigInt64BE(26), 4n)
    }))

  it('collects the aborted transactions overlapping a range across segments, stopping once one’s LSO passes it', () =>
    withLog(async ({ log }) => {
      for (let round = 0; round < 4; round++) {
        await lead(log, txnBatch(1n, 0, round * 2, 2))
        await coordinator(log, marker(1n, 0, round % 2 === 0 ? 'abort' : 'commit'))
        await log.roll()
      }
      // Rounds 0 and 2 aborted: offsets 0-1 (marker 2) and 6-7 (marker 8).
      assert.deepEqual(
        log.collectAbortedTransactions(0 as Offset, 12 as Offset).map((t) => [t.firstOffset, t.lastOffset]),
        [
          [0, 2],
          [6, 8],
        ],
      )
      assert.deepEqual(
        log.collectAbortedTransactions(3 as Offset, 12 as Offset).map((t) => t.firstOffset),
        [6],
      )
      assert.deepEqual(
        log.collectAbortedTransactions(0 as Offset, 2 as Offset).map((t) => t.firstOffset),
        [0],
      )
      assert.equal(log.collectAbortedTransactions(9 as Offset, 12 as Offset).length, 0)
    }))

  it('goes with its segment when retention deletes it', () =>
    withLog(async ({ log, path }) => {
      await lead(log, txnBatch(1n, 0, 0)) // 0
      await coordinator(log, marker(1n, 0, 'abort')) // 1
      await log.roll()
      await lead(log, txnBatch(2n, 0, 0, 1, false)) // 2
      await log.roll()
      log.updateHighWatermark(log.logEndOffset)
      const txnIndex = join(path, '00000000000000000000.txnindex')
      assert.equal((await readFile(txnIndex)).length, 34)
      await log.deleteRecordsBefore(2 as Offset)
      assert.equal(await log.deleteOldSegments(), 1)
      await assert.rejects(readFile(txnIndex), { code: 'ENOENT' })
      assert.deepEqual(log.collectAbortedTransactions(2 as Offset, 3 as Offset), [])
    }))

  it('recovery restores a lost entry in marker order, also before the last one', () =>
    withTempDir(async (dir) => {
      const index = new TransactionIndex(nodeFileSystem, join(dir, 'x.txnindex'))
      const entry = (last: number) => ({
        producerId: toProducerId(BigInt(last)),
        firstOffset: (last - 1) as Offset,
        lastOffset: last as Offset,
        lastStableOffset: (last + 1) as Offset,
      })
      await index.append(entry(2))
      await index.append(entry(9))
      await index.restore(entry(5))
      await index.restore(entry(9))
      await index.restore(entry(12))
      assert.deepEqual(
        index.allEntries.map((e) => e.lastOffset),
        [2, 5, 9, 12],
      )
      await index.close()
      const reread = new TransactionIndex(nodeFileSystem, join(dir, 'x.txnindex'))
      await reread.load()
      assert.deepEqual(reread.allEntries, index.allEntries)
      await reread.close()
    }))

  it('appendAll puts every entry in memory before any write awaits the disk', () =>
    withTempDir(async (dir) => {
      // Markers become readable while the entries are written: a read_committed fetch in
      // between must find every aborted transaction (seen missing in the netfault jepsen run).
      const index = new TransactionIndex(nodeFileSystem, join(dir, 'y.txnindex'))
      const entry = (last: number) => ({
        producerId: toProducerId(BigInt(last)),
        firstOffset: (last - 1) as Offset,
        lastOffset: last as Offset,
        lastStableOffset: (last + 1) as Offset,
      })
      const written = index.appendAll([entry(3), entry(5), entry(7)])
      assert.deepEqual(
        index.collect(0 as Offset, 10 as Offset).abortedTransactions.map((e) => e.lastOffset),
        [3, 5, 7],
      )
      await written
      await index.close()
      const reread = new TransactionIndex(nodeFileSystem, join(dir, 'y.txnindex'))
      await reread.load()
      assert.deepEqual(reread.allEntries, index.allEntries)
      await reread.close()
    }))

  it('opens a new file once however many entries appendAll writes at once', () =>
    withTempDir(async (dir) => {
      // Each write opened the missing file itself, and a second `w+` truncated what the first
      // had written: the reread index began with a zeroed entry (a CI failure, 2026-12-07).
      const opens: string[] = []
      const counting: FileSystem = {
        ...nodeFileSystem,
        open: (path, flags) => {
          opens.push(flags)
          return nodeFileSystem.open(path, flags)
        },
      }
      const index = new TransactionIndex(counting, join(dir, 'z.txnindex'))
      const entries = [3, 5, 7].map((last) => ({
        producerId: toProducerId(BigInt(last)),
        firstOffset: (last - 1) as Offset,
        lastOffset: last as Offset,
        lastStableOffset: (last + 1) as Offset,
      }))
      await index.appendAll(entries)
      await index.close()
      assert.deepEqual(opens, ['r+', 'w+'])
      const reread = new TransactionIndex(nodeFileSystem, join(dir, 'z.txnindex'))
      await reread.load()
      assert.deepEqual(reread.allEntries, entries)
      await reread.close()
    }))

  it('truncation drops the entries of the markers it removes and reopens their transactions', () =>
    withLog(async ({ log, state }) => {
      await lead(log, txnBatch(1n, 0, 0, 2)) // 0-1
      await coordinator(log, marker(1n, 0, 'abort')) // 2
      await log.truncateTo(2 as Offset)
      assert.equal(log.collectAbortedTransactions(0 as Offset, 3 as Offset).length, 0)
      assert.equal(state.ongoingTransactions.get(toProducerId(1n)), 0)
      await coordinator(log, marker(1n, 0, 'abort'))
      assert.equal(log.collectAbortedTransactions(0 as Offset, 3 as Offset).length, 1)
    }))
})

describe('transactions across restarts and on followers', () => {
  it('a snapshot carries open transactions (currentTxnFirstOffset) and coordinator epochs through a clean restart', () =>
    withTempDir(async (dir) => {
      const clock = new ManualClock()
      const path = join(dir, 't-0')
      let { log } = await open(path, clock)
      await lead(log, txnBatch(1n, 2, 0, 2)) // 0-1, open
      await lead(log, txnBatch(2n, 0, 0)) // 2
      await coordinator(log, marker(2n, 0, 'abort', 9)) // 3
      await log.close()
      const snapshot = await readFile(join(path, snapshotFileName(4 as Offset)))
      assert.ok(snapshot.length > 10)
      const reopened = await open(path, clock)
      log = reopened.log
      assert.deepEqual([...reopened.state.ongoingTransactions], [[1n, 0]])
      assert.equal(reopened.state.lastEntry(toProducerId(2n))?.coordinatorEpoch, 9)
      assert.equal(log.collectAbortedTransactions(0 as Offset, 4 as Offset).length, 1)
      await coordinator(log, marker(1n, 2, 'commit', 9))
      log.updateHighWatermark(log.logEndOffset)
      assert.equal(reopened.state.firstUnstableOffset(), undefined)
      await log.close()
    }))

  it('without snapshots the state is rebuilt from the log, and a lost .txnindex is written again', () =>
    withTempDir(async (dir) => {
      const clock = new ManualClock()
      const path = join(dir, 't-0')
      const { log } = await open(path, clock)
      await lead(log, txnBatch(1n, 0, 0, 2)) // 0-1
      await coordinator(log, marker(1n, 0, 'abort')) // 2
      await lead(log, txnBatch(2n, 0, 0)) // 3, open
      await log.close()
      await rm(join(path, snapshotFileName(4 as Offset)))
      await rm(join(path, '00000000000000000000.txnindex'))
      const reopened = await open(path, clock)
      assert.deepEqual([...reopened.state.ongoingTransactions], [[2n, 3]])
      assert.deepEqual(reopened.log.collectAbortedTransactions(0 as Offset, 4 as Offset), [
        { producerId: 1n, firstOffset: 0, lastOffset: 2, lastStableOffset: 3 },
      ])
      await reopened.log.close()
    }))

  it('a crash that loses the ABORT marker loses its .txnindex entry too, and the transaction is open again', () =>
    withTempDir(async (dir) => {
      const clock = new ManualClock()
      const path = join(dir, 't-0')
      const { log } = await open(path, clock)
      await lead(log, txnBatch(1n, 0, 0, 2)) // 0-1
      const cut = (await stat(join(path, '00000000000000000000.log'))).size
      await coordinator(log, marker(1n, 0, 'abort')) // 2
      await log.flush()
      assert.equal(log.collectAbortedTransactions(0 as Offset, 3 as Offset).length, 1)
      // A crash: no clean close, and the marker's bytes never reached the disk.
      await log.closeHandlers()
      await truncate(join(path, '00000000000000000000.log'), cut)
      const reopened = await open(path, clock)
      assert.equal(reopened.log.logEndOffset, 2)
      assert.deepEqual(reopened.log.collectAbortedTransactions(0 as Offset, 3 as Offset), [])
      assert.deepEqual([...reopened.state.ongoingTransactions], [[1n, 0]])
      assert.equal((await readFile(join(path, '00000000000000000000.txnindex'))).length, 0)
      await reopened.log.close()
    }))

  // Issue 35, seed 369395: an old leader that wrote an ABORT marker the new leader lacks cuts
  // it when it follows; read_committed fetches it serves meanwhile (KIP-392 lets consumers
  // read followers) computed the LSO from producer state the reload had emptied, so it
  // fell to the high watermark, and the `.txnindex` entry had gone with the marker: the
  // aborted records were served as committed.
  it('a follower cutting an ABORT marker keeps the LSO at the reopened transaction while its state reloads', () =>
    withTempDir(async (dir) => {
      const clock = new ManualClock()
      const leader = await open(join(dir, 'l-0'), clock)
      let observing = false
      const lsoWhileTruncating: number[] = []
      const fs = observedFileSystem(() => {
        if (observing) lsoWhileTruncating.push(lso(follower.log, follower.state))
      })
      const follower = await open(join(dir, 'f-0'), clock, DEFAULT_LOG_CONFIG.segmentBytes, fs)
      try {
        await lead(leader.log, txnBatch(5n, 0, 0, 2, false)) // 0-1
        await lead(leader.log, txnBatch(1n, 0, 0)) // 2: opens producer 1's transaction
        await lead(leader.log, txnBatch(5n, 0, 2, 5, false)) // 3-7
        await lead(leader.log, txnBatch(2n, 0, 0)) // 8: opens producer 2's transaction
        await coordinator(leader.log, marker(1n, 0, 'abort')) // 9: not replicated to the ISR
        const read = await leader.log.read(0 as Offset, { maxBytes: 1 << 20 })
        await follower.log.append(Buffer.concat(read.records), { assignOffsets: false })
        follower.log.updateHighWatermark(8 as Offset)
        assert.equal(lso(follower.log, follower.state), 2, 'the marker is above the high watermark')
        // The new leader's log ends at 9: this replica cuts the marker.
        observing = true
        await follower.log.truncateTo(9 as Offset)
        observing = false
        assert.ok(lsoWhileTruncating.length > 0, 'the truncation touched the disk')
        assert.ok(
          lsoWhileTruncating.every((offset) => offset <= 2),
          `LSO while truncating: ${lsoWhileTruncating.join(', ')}; above 2 serves the aborted record at 2`,
        )
        assert.deepEqual(
          [...follower.state.ongoingTransactions],
          [
            [1n, 2],
            [2n, 8],
          ],
        )
        assert.equal(lso(follower.log, follower.state), 2)
        assert.deepEqual(follower.log.collectAbortedTransactions(0 as Offset, 9 as Offset), [])
      } finally {
        await leader.log.close()
        await follower.log.close()
      }
    }))

  it('a follower applies fetched transactional batches and markers without checks', () =>
    withTempDir(async (dir) => {
      const clock = new ManualClock()
      const leader = await open(join(dir, 'l-0'), clock)
      const follower = await open(join(dir, 'f-0'), clock)
      await lead(leader.log, txnBatch(1n, 0, 0, 2))
      await coordinator(leader.log, marker(1n, 0, 'abort', 3))
      await lead(leader.log, txnBatch(1n, 0, 2))
      const read = await leader.log.read(0 as Offset, { maxBytes: 1 << 20 })
      await follower.log.append(Buffer.concat(read.records), { assignOffsets: false })
      assert.deepEqual([...follower.state.ongoingTransactions], [[1n, 3]])
      assert.deepEqual(follower.log.collectAbortedTransactions(0 as Offset, 4 as Offset), [
        { producerId: 1n, firstOffset: 0, lastOffset: 2, lastStableOffset: 3 },
      ])
      assert.equal(follower.state.lastEntry(toProducerId(1n))?.coordinatorEpoch, 3)
      await leader.log.close()
      await follower.log.close()
    }))
})
