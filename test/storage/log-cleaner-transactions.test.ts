/**
 * The log cleaner and transactions (Kafka's CleanedTransactionMetadata): aborted records
 * are removed and never shadow an earlier value of their key, markers stay while a batch
 * of their transaction remains and then go after delete.retention.ms, the cleaned
 * segments' `.txnindex` keeps what read_committed still needs, and nothing at or past an
 * open transaction is cleaned.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import { type Offset, toProducerId } from '../../src/common/types.js'
import { BatchHeader } from '../../src/protocol/batch-header.js'
import { decodeRecordBatch, encodeRecordBatch } from '../../src/protocol/record-batch.js'
import { ProducerStateManager } from '../../src/replication/producer-state.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { encodeEndTxnMarker } from '../../src/storage/control-batch.js'
import { cleanLog } from '../../src/storage/log-cleaner.js'
import { fromProperties } from '../../src/storage/log-config.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { ManualClock, readAll, withTempDir } from './helpers.js'

const T0 = 1_700_000_000_000
const DAY_MS = 86_400_000

function put(key: string, value: string, txn?: { producerId: bigint; sequence: number }): Promise<Buffer> {
  return encodeRecordBatch({
    records: [{ key: Buffer.from(key), value: Buffer.from(value), timestamp: T0 }],
    producerId: txn?.producerId ?? -1n,
    producerEpoch: txn === undefined ? -1 : 0,
    baseSequence: txn?.sequence ?? -1,
    isTransactional: txn !== undefined,
  })
}

function marker(producerId: bigint, result: 'commit' | 'abort'): Buffer {
  return encodeEndTxnMarker({
    producerId: toProducerId(producerId),
    producerEpoch: 0,
    coordinatorEpoch: 0,
    result,
    timestampMs: T0,
  })
}

interface Seen {
  readonly offset: number
  readonly key: string | null
  readonly value: string | null
  readonly control: boolean
}

async function contents(log: UnifiedLog): Promise<Seen[]> {
  const out: Seen[] = []
  for (const batch of await readAll(log)) {
    const header = new BatchHeader(batch.bytes)
    if (header.recordsCount === 0) continue
    const decoded = await decodeRecordBatch(batch.bytes)
    for (const r of decoded.records)
      out.push({
        offset: r.offset,
        key: header.isControl ? null : (r.key?.toString() ?? null),
        value: header.isControl ? null : (r.value?.toString() ?? null),
        control: header.isControl,
      })
  }
  return out
}

describe('log cleaner with transactions', () => {
  it('removes aborted records, keeps markers while their data remains, then drops them after delete.retention.ms', () =>
    withTempDir(async (dir) => {
      const clock = new ManualClock(T0)
      const config = fromProperties({
        'cleanup.policy': 'compact',
        'segment.bytes': 600,
        'delete.retention.ms': 1000,
      })
      const log = await UnifiedLog.open({ dir: join(dir, 'c-0'), config, clock, fs: nodeFileSystem })
      await log.attachProducerState(
        new ProducerStateManager(log, { clock, logger: silentLogger, producerIdExpirationMs: DAY_MS }),
      )
      const append = (buf: Buffer, coordinator = false) =>
        log.append(buf, { assignOffsets: true, origin: coordinator ? 'coordinator' : 'client' })
      await append(await put('a', 'committed-a')) // 0
      await append(await put('a', 'aborted-a', { producerId: 1n, sequence: 0 })) // 1
      await append(marker(1n, 'abort'), true) // 2
      await append(await put('b', 'committed-b', { producerId: 2n, sequence: 0 })) // 3
      await append(marker(2n, 'commit'), true) // 4
      for (let i = 0; i < 12; i++) await append(await put(`f${i % 3}`, `filler-${i}`)) // 5-16
      await append(await put('c', 'open-c', { producerId: 3n, sequence: 0 })) // 17: stays open
      for (let i = 0; i < 12; i++) await append(await put('f0', `late-${i}`)) // 18-29
      log.updateHighWatermark(log.logEndOffset)
      assert.ok(log.numberOfSegments > 3, 'several segments')

      const first = await cleanLog(log, clock, silentLogger, { force: true })
      assert.ok(first.cleaned)
      assert.ok(first.endOffset <= 17, `the clean stops before the open transaction (${first.endOffset})`)
      let seen = await contents(log)
      const value = (key: string) => seen.filter((r) => r.key === key).map((r) => r.value)
      assert.deepEqual(
        value('a'),
        ['committed-a'],
        'the aborted write neither stays nor shadows the committed one',
      )
      assert.deepEqual(value('b'), ['committed-b'])
      assert.deepEqual(value('c'), ['open-c'])
      assert.deepEqual(
        seen.filter((r) => r.control).map((r) => r.offset),
        [2, 4],
        'markers stay while batches of their transactions were still there',
      )
      assert.deepEqual(
        log
          .collectAbortedTransactions(0 as Offset, log.logEndOffset)
          .map((t) => [t.firstOffset, t.lastOffset]),
        [[1, 2]],
        'the cleaned segment keeps the aborted transaction in its .txnindex',
      )
      // The producer's emptied batch goes once it expires; then nothing refers to the ABORT marker.
      clock.advance(2 * DAY_MS)
      await cleanLog(log, clock, silentLogger, { force: true })
      const stamped = await cleanLog(log, clock, silentLogger, { force: true })
      assert.equal(stamped.nextDeleteHorizonMs, clock.nowMs() + 1000, 'the marker got a delete horizon')
      seen = await contents(log)
      assert.ok(
        seen.some((r) => r.control && r.offset === 2),
        'kept until delete.retention.ms passes',
      )
      clock.advance(1001)
      await cleanLog(log, clock, silentLogger, { force: true })
      seen = await contents(log)
      assert.deepEqual(
        seen.filter((r) => r.control).map((r) => r.offset),
        [4],
        'the ABORT marker went; the COMMIT marker stays beside its data',
      )
      assert.deepEqual(log.collectAbortedTransactions(0 as Offset, log.logEndOffset), [])
      assert.deepEqual(value('a'), ['committed-a'])
      await log.close()
    }))
})
