/**
 * Producer state (idempotence) over a real UnifiedLog: Kafka's sequence rules on leader
 * appends (retries answered with their first offsets, gaps, old epochs, new epochs, unknown
 * producers, Int32 wrap), atomicity with pipelined appends, followers applying without
 * checks, truncation, snapshots (Kafka's file format) with rebuild from the log tail, and
 * producer.id.expiration.ms on the injected clock.
 */
import assert from 'node:assert/strict'
import { readdir, readFile, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { TidelogError } from '../../src/common/errors.js'
import { silentLogger } from '../../src/common/logger.js'
import {
  type LeaderEpoch,
  NO_OFFSET,
  type Offset,
  type ProducerId,
  toProducerId,
} from '../../src/common/types.js'
import { ATTRIBUTES_OFFSET, CRC_OFFSET } from '../../src/protocol/batch-header.js'
import { crc32c } from '../../src/protocol/crc32c.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { KafkaError } from '../../src/replication/kafka-error.js'
import { incrementSequence, inSequence, ProducerStateManager } from '../../src/replication/producer-state.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { DEFAULT_LOG_CONFIG, type LogConfig } from '../../src/storage/log-config.js'
import {
  decodeSnapshot,
  encodeSnapshot,
  snapshotFileName,
} from '../../src/storage/producer-state-snapshot.js'
import { type LogAppendInfo, UnifiedLog } from '../../src/storage/unified-log.js'
import { ManualClock, readAll, simpleBatch, withTempDir } from '../storage/helpers.js'

const INT32_MAX = 0x7fffffff
const DAY_MS = 86_400_000

/** A batch of `count` records from producer `pid` at `epoch`, first sequence `seq`. */
function batch(pid: bigint, epoch: number, seq: number, count = 1, timestamp = 1_000_000): Buffer {
  const buf = simpleBatch(count, 8, seq & 0xff, { baseTimestamp: timestamp })
  buf.writeBigInt64BE(pid, 43)
  buf.writeInt16BE(epoch, 51)
  buf.writeInt32BE(seq, 53)
  buf.writeUInt32BE(crc32c(buf.subarray(ATTRIBUTES_OFFSET)), CRC_OFFSET)
  return buf
}

interface Fixture {
  readonly dir: string
  readonly clock: ManualClock
  log: UnifiedLog
  state: ProducerStateManager
}

async function open(
  dir: string,
  clock: ManualClock,
  segmentBytes = DEFAULT_LOG_CONFIG.segmentBytes,
  config: Partial<LogConfig> = {},
) {
  const log = await UnifiedLog.open({
    fs: nodeFileSystem,
    dir: join(dir, 't-0'),
    clock,
    config: { ...DEFAULT_LOG_CONFIG, segmentBytes, ...config },
  })
  const state = new ProducerStateManager(log, { clock, logger: silentLogger, producerIdExpirationMs: DAY_MS })
  await log.attachProducerState(state)
  return { log, state }
}

async function withLog(
  body: (f: Fixture) => Promise<void>,
  segmentBytes?: number,
  config?: Partial<LogConfig>,
): Promise<void> {
  await withTempDir(async (dir) => {
    const clock = new ManualClock()
    const opened = await open(dir, clock, segmentBytes, config)
    const fixture: Fixture = { dir, clock, ...opened }
    try {
      await body(fixture)
    } finally {
      await fixture.log.close()
    }
  })
}

function lead(log: UnifiedLog, buf: Buffer): Promise<LogAppendInfo> {
  return log.append(buf, { assignOffsets: true, leaderEpoch: 0 as LeaderEpoch })
}

async function rejectsWith(promise: Promise<unknown>, code: number): Promise<void> {
  await assert.rejects(promise, (err: unknown) => err instanceof KafkaError && err.errorCode === code)
}

describe('sequence helpers', () => {
  it('wrap from Int32.MAX to 0', () => {
    assert.equal(incrementSequence(INT32_MAX, 1), 0)
    assert.equal(incrementSequence(INT32_MAX - 1, 2), 0)
    assert.equal(incrementSequence(5, 4), 9)
    assert.ok(inSequence(INT32_MAX, 0))
    assert.ok(inSequence(4, 5))
    assert.ok(!inSequence(4, 6))
    assert.ok(!inSequence(INT32_MAX, 1))
  })
})

describe('leader sequence rules', () => {
  it('consecutive batches append; a retry of any of the last 5 gets its first offsets and writes nothing', () =>
    withLog(async ({ log }) => {
      const firsts: number[] = []
      for (let i = 0; i < 6; i++) firsts.push((await lead(log, batch(7n, 0, i * 2, 2))).firstOffset)
      assert.deepEqual(firsts, [0, 2, 4, 6, 8, 10])
      const end = log.logEndOffset
      for (let i = 1; i < 6; i++) {
        const retry = await lead(log, batch(7n, 0, i * 2, 2))
        assert.equal(retry.firstOffset, firsts[i])
        assert.equal(retry.lastOffset, firsts[i] + 1)
        // Kafka answers a retry with the batch's max timestamp as its log append time.
        assert.equal(retry.logAppendTimeMs, 1_000_001)
      }
      assert.equal(log.logEndOffset, end, 'a retry appends nothing')
      // The 6th batch back is forgotten: Kafka calls its retry out of order.
      await rejectsWith(lead(log, batch(7n, 0, 0, 2)), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    }))

  it('a gap is OUT_OF_ORDER_SEQUENCE_NUMBER and leaves the state as it was', () =>
    withLog(async ({ log, state }) => {
      await lead(log, batch(1n, 0, 0, 3))
      await rejectsWith(lead(log, batch(1n, 0, 4)), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
      assert.equal(state.lastEntry(toProducerId(1n))?.lastSeq, 2)
      assert.equal((await lead(log, batch(1n, 0, 3))).firstOffset, 3)
    }))

  it('an older epoch is INVALID_PRODUCER_EPOCH; a newer one must start at 0', () =>
    withLog(async ({ log, state }) => {
      await lead(log, batch(1n, 3, 0, 2))
      await rejectsWith(lead(log, batch(1n, 2, 2)), ErrorCode.INVALID_PRODUCER_EPOCH)
      await rejectsWith(lead(log, batch(1n, 4, 5)), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
      await lead(log, batch(1n, 4, 0))
      assert.equal(state.lastEntry(toProducerId(1n))?.producerEpoch, 4)
      assert.equal(
        state.lastEntry(toProducerId(1n))?.batches.length,
        1,
        'a new epoch forgets the old batches',
      )
      await rejectsWith(lead(log, batch(1n, 3, 2)), ErrorCode.INVALID_PRODUCER_EPOCH)
    }))

  it('an unknown producer id is accepted at any sequence (KIP-360: no UNKNOWN_PRODUCER_ID)', () =>
    withLog(async ({ log, state }) => {
      await lead(log, batch(9n, 0, 42, 2))
      assert.equal(state.lastEntry(toProducerId(9n))?.lastSeq, 43)
      await rejectsWith(lead(log, batch(9n, 0, 45)), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    }))

  it('sequences wrap at Int32.MAX', () =>
    withLog(async ({ log, state }) => {
      await lead(log, batch(2n, 0, INT32_MAX - 1, 3))
      assert.equal(state.lastEntry(toProducerId(2n))?.lastSeq, 0, 'MAX-1, MAX, 0')
      await lead(log, batch(2n, 0, 1))
      const retry = await lead(log, batch(2n, 0, INT32_MAX - 1, 3))
      assert.equal(retry.firstOffset, 0)
    }))

  it('a negative sequence with a producer id is INVALID_RECORD; producers without ids are not tracked', () =>
    withLog(async ({ log, state }) => {
      await rejectsWith(lead(log, batch(2n, 0, -1)), ErrorCode.INVALID_RECORD)
      await lead(log, simpleBatch(2))
      await lead(log, simpleBatch(2))
      assert.equal(state.activeProducers.size, 0)
      assert.equal(state.endOffset, 4)
    }))

  it('pipelined appends are checked in call order, each against the ones before it', () =>
    withLog(async ({ log }) => {
      // Five requests in flight, called in one tick (as pipelined produce requests are),
      // with a retry of the second and a gap among them.
      const results = await Promise.allSettled([
        lead(log, batch(5n, 0, 0, 2)),
        lead(log, batch(5n, 0, 2, 2)),
        lead(log, batch(5n, 0, 2, 2)),
        lead(log, batch(5n, 0, 4, 2)),
        lead(log, batch(5n, 0, 9, 1)),
      ])
      const offsets = results.map((r) => (r.status === 'fulfilled' ? r.value.firstOffset : 'rejected'))
      assert.deepEqual(offsets, [0, 2, 2, 4, 'rejected'])
      assert.equal(log.logEndOffset, 6)
      assert.equal((await readAll(log)).length, 3)
    }))
})

describe('followers, truncation, snapshots', () => {
  it('a follower applies fetched batches without checks; truncation rebuilds the state from the log', () =>
    withLog(async ({ log, state }) => {
      let offset = 0
      for (let seq = 0; seq < 6; seq += 2) {
        const b = batch(3n, 1, seq, 2)
        b.writeBigInt64BE(BigInt(offset), 0)
        offset += 2
        await log.append(b, { assignOffsets: false })
      }
      assert.equal(state.lastEntry(toProducerId(3n))?.lastSeq, 5)
      await log.truncateTo(4 as Offset)
      assert.equal(state.lastEntry(toProducerId(3n))?.lastSeq, 3)
      assert.equal(state.endOffset, 4)
      // The batch cut away is new again (a retry of it writes it once more, as in Kafka).
      assert.equal((await lead(log, batch(3n, 1, 4, 2))).firstOffset, 4)
      await log.truncateFullyAndStartAt(100 as Offset)
      assert.equal(state.activeProducers.size, 0)
      assert.equal(state.endOffset, 100)
    }))

  it("a follower takes a compacted leader's offset gaps: an empty log's first batch at 28, then 40", () =>
    // The leader's cleaner removed offsets 0-27 and 30-39 but kept its log start at 0, so a
    // follower fetching from 0 (new, or truncated fully) gets a first batch at 28. Kafka's
    // producer state moves its end past gaps; an equality check failed this fetch forever.
    withLog(
      async ({ log, state }) => {
        for (const [offset, seq] of [
          [28, 0],
          [40, 2],
        ]) {
          const b = batch(7n, 0, seq, 2)
          b.writeBigInt64BE(BigInt(offset), 0)
          await log.append(b, { assignOffsets: false })
        }
        assert.equal(log.logEndOffset, 42)
        assert.equal(state.endOffset, 42)
        assert.equal(state.lastEntry(toProducerId(7n))?.lastSeq, 3)
      },
      undefined,
      { cleanupPolicy: ['compact'] },
    ))

  it('a roll writes <offset>.snapshot in Kafka format; a reopen after a crash rebuilds snapshot + tail', () =>
    withTempDir(async (dir) => {
      const clock = new ManualClock()
      const { log, state } = await open(dir, clock, 400)
      for (let seq = 0; seq < 40; seq += 2) await lead(log, batch(11n, 2, seq, 2))
      await lead(log, batch(12n, 0, 0, 1))
      const names = (await readdir(log.dir)).filter((n) => n.endsWith('.snapshot'))
      assert.ok(names.length >= 2, `snapshots ${names}`)
      assert.ok(log.numberOfSegments >= 3)
      const lastRoll = log.segmentBaseOffsets.at(-1) as number
      assert.ok(names.includes(snapshotFileName(lastRoll as Offset)))
      const entries = decodeSnapshot(await readFile(join(log.dir, snapshotFileName(lastRoll as Offset))))
      const mine = entries.find((e) => e.producerId === 11n)
      assert.equal(mine?.producerEpoch, 2)
      assert.equal(mine?.lastOffset, lastRoll - 1)
      assert.equal(mine?.offsetDelta, 1)
      const before = [...state.activeProducers.values()].map((e) => [
        e.producerId,
        e.producerEpoch,
        e.lastSeq,
      ])
      // Crash: no close, so no snapshot at the log end.
      await log.closeHandlers()
      const reopened = await open(dir, clock, 400)
      const after = [...reopened.state.activeProducers.values()].map((e) => [
        e.producerId,
        e.producerEpoch,
        e.lastSeq,
      ])
      assert.deepEqual(after.sort(), before.sort())
      // The snapshot keeps each producer's last batch (Kafka's format); the replay of the
      // active segment adds the batches after it.
      const known = reopened.state.lastEntry(toProducerId(11n))?.batches.map((m) => m.firstOffset)
      assert.deepEqual(known, [lastRoll - 2, ...[36, 38].filter((o) => o >= lastRoll)].slice(-5))
      const retry = await lead(reopened.log, batch(11n, 2, 38, 2))
      assert.equal(retry.firstOffset, 38)
      await reopened.log.close()
      assert.ok((await readdir(log.dir)).includes(snapshotFileName(reopened.log.logEndOffset)))
    }))

  it('a clean close snapshots at the log end; a corrupt snapshot is ignored and the log replayed', () =>
    withTempDir(async (dir) => {
      const clock = new ManualClock()
      const first = await open(dir, clock)
      for (let seq = 0; seq < 10; seq++) await lead(first.log, batch(4n, 0, seq))
      await first.log.close()
      const file = join(first.log.dir, snapshotFileName(10 as Offset))
      const bytes = await readFile(file)
      assert.equal(bytes.readInt16BE(0), 1, 'version 1')
      assert.equal(bytes.readUInt32BE(2), crc32c(bytes.subarray(6)), 'CRC-32C of everything after it')
      assert.equal(bytes.length, 10 + 46)
      const second = await open(dir, clock)
      assert.equal(second.state.lastEntry(toProducerId(4n))?.lastSeq, 9)
      await second.log.closeHandlers()
      bytes[bytes.length - 1] ^= 0xff
      await writeFile(file, bytes)
      const third = await open(dir, clock)
      assert.equal(third.state.lastEntry(toProducerId(4n))?.lastSeq, 9)
      assert.equal(third.state.lastEntry(toProducerId(4n))?.batches.length, 5, 'replayed from the log start')
      await third.log.close()
    }))

  it('a close or roll with nothing appended since the last snapshot writes none (Kafka: lastSnapOffset)', () =>
    withTempDir(async (dir) => {
      const clock = new ManualClock()
      const snapshots = async (d: string) => (await readdir(d)).filter((n) => n.endsWith('.snapshot')).sort()
      const empty = await open(dir, clock)
      await empty.log.close()
      assert.deepEqual(await snapshots(empty.log.dir), [], 'an empty log has no state to keep')
      const written = await open(dir, clock)
      for (let seq = 0; seq < 3; seq++) await lead(written.log, batch(4n, 0, seq))
      await written.log.close()
      assert.deepEqual(await snapshots(written.log.dir), [snapshotFileName(3 as Offset)])
      const { mtimeMs } = await stat(join(written.log.dir, snapshotFileName(3 as Offset)))
      clock.advance(1000)
      const idle = await open(dir, clock)
      assert.equal(idle.state.lastEntry(toProducerId(4n))?.lastSeq, 2)
      await idle.log.roll()
      await idle.log.close()
      assert.deepEqual(await snapshots(idle.log.dir), [snapshotFileName(3 as Offset)])
      assert.equal(
        (await stat(join(idle.log.dir, snapshotFileName(3 as Offset)))).mtimeMs,
        mtimeMs,
        'not rewritten',
      )
      const more = await open(dir, clock)
      await lead(more.log, batch(4n, 0, 3))
      await more.log.close()
      assert.deepEqual(await snapshots(more.log.dir), [
        snapshotFileName(3 as Offset),
        snapshotFileName(4 as Offset),
      ])
    }))

  it('snapshot encoding round-trips', () => {
    const entries = [
      {
        producerId: toProducerId(123456789012n),
        producerEpoch: 7,
        lastSequence: INT32_MAX,
        lastOffset: (2 ** 40) as Offset,
        offsetDelta: 4,
        timestamp: 1_700_000_000_123,
        coordinatorEpoch: -1,
        currentTxnFirstOffset: NO_OFFSET,
      },
    ]
    assert.deepEqual(decodeSnapshot(encodeSnapshot(entries)), entries)
  })

  it('a snapshot entry with an out-of-range producer id or offset is corrupt, though its CRC holds', () => {
    const entry = {
      producerId: toProducerId(5n),
      producerEpoch: 0,
      lastSequence: 0,
      lastOffset: 3 as Offset,
      offsetDelta: 0,
      timestamp: 1,
      coordinatorEpoch: -1,
      currentTxnFirstOffset: NO_OFFSET,
    }
    assert.deepEqual(decodeSnapshot(encodeSnapshot([entry])), [entry])
    const corrupt = (error: unknown) => error instanceof TidelogError && error.code === 'CORRUPT_SNAPSHOT'
    assert.throws(
      () => decodeSnapshot(encodeSnapshot([{ ...entry, producerId: -2n as ProducerId }])),
      corrupt,
    )
    assert.throws(() => decodeSnapshot(encodeSnapshot([{ ...entry, lastOffset: -2 as Offset }])), corrupt)
  })
})

describe('producer.id.expiration.ms', () => {
  it('producers idle for the expiration time are forgotten, by the injected clock', () =>
    withLog(async ({ log, state, clock }) => {
      await lead(log, batch(1n, 0, 0, 1, clock.nowMs()))
      clock.advance(DAY_MS / 2)
      await lead(log, batch(2n, 0, 0, 1, clock.nowMs()))
      assert.equal(state.removeExpiredProducers(), 0)
      clock.advance(DAY_MS / 2)
      assert.equal(state.removeExpiredProducers(), 1)
      assert.deepEqual([...state.activeProducers.keys()], [2n])
      // Forgotten: any sequence is accepted again.
      await lead(log, batch(1n, 0, 17, 1, clock.nowMs()))
    }))
})

describe('producer state of many replicas', () => {
  it('starts empty and shared, and each state written keeps its own producers', () =>
    withTempDir(async (dir) => {
      const clock = new ManualClock()
      const a = await open(join(dir, 'a'), clock)
      const b = await open(join(dir, 'b'), clock)
      try {
        assert.equal(a.state.activeProducers.size, 0)
        await lead(a.log, batch(1n, 0, 0, 2))
        assert.equal(a.state.activeProducers.size, 1)
        assert.equal(b.state.activeProducers.size, 0, 'a write to one state leaves the others empty')
        await lead(b.log, batch(2n, 0, 0, 2))
        assert.deepEqual([...b.state.activeProducers.keys()], [toProducerId(2n)])
        assert.deepEqual([...a.state.activeProducers.keys()], [toProducerId(1n)])
      } finally {
        await a.log.close()
        await b.log.close()
      }
    }))
})
