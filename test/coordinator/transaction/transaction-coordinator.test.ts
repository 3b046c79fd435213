/**
 * The transaction coordinator over an in-memory `__transaction_state` partition, on a
 * manual clock, with a stand-in for the marker channel (so each test decides when the
 * partition leaders have written their markers): InitProducerId epochs and fencing,
 * AddPartitionsToTxn/verify, EndTxn's Prepare → markers → Complete, the proactive abort of
 * timed-out transactions, transactional id expiration, and a second coordinator loading
 * what the first wrote (resending the markers of a transaction caught mid-commit).
 */

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { silentLogger } from '../../../src/common/logger.js'
import { toOffset, toProducerId } from '../../../src/common/types.js'
import { CONSUMER_OFFSETS_TOPIC } from '../../../src/coordinator/group.js'
import {
  type MarkerChannel,
  type ProducerIdAndEpoch,
  TransactionCoordinator,
  type TransactionCoordinatorConfig,
} from '../../../src/coordinator/transaction/transaction-coordinator.js'
import {
  decodeTransactionLogKey,
  decodeTransactionLogValue,
  TRANSACTION_STATE_TOPIC,
} from '../../../src/coordinator/transaction/transaction-log.js'
import type {
  MarkerJob,
  MarkerOutcome,
} from '../../../src/coordinator/transaction/transaction-marker-sender.js'
import { TransactionState, TV_0, TV_2 } from '../../../src/coordinator/transaction/transaction-metadata.js'
import type { ClusterImage } from '../../../src/metadata/cluster-image.js'
import { ErrorCode } from '../../../src/protocol/error-codes.js'
import { decodeRecordBatch, iterateBatches } from '../../../src/protocol/record-batch.js'
import type { Partition } from '../../../src/replication/partition.js'
import { toBrokerId } from '../../helpers/broker-ids.js'
import { ManualClock } from '../../storage/helpers.js'

const TIMEOUT_MS = 60_000
const CONFIG: TransactionCoordinatorConfig = {
  transactionStateLogNumPartitions: 1,
  transactionStateLogReplicationFactor: 1,
  transactionStateLogMinIsr: 1,
  transactionStateLogSegmentBytes: 1 << 20,
  transactionStateLogLoadBufferSize: 1 << 20,
  transactionMaxTimeoutMs: 900_000,
  transactionalIdExpirationMs: 3_600_000,
  abortTimedOutTransactionCleanupIntervalMs: 10_000,
  removeExpiredTransactionalIdCleanupIntervalMs: 600_000,
  offsetsTopicNumPartitions: 50,
  requestTimeoutMs: 30_000,
  retryBackoffMs: 100,
  retryBackoffMaxMs: 1000,
  addPartitionsRetryBackoffMs: 20,
  addPartitionsRetryBackoffMaxMs: 100,
}

/** __transaction_state-0 in memory: one "offset" per appended batch. */
class MemoryLog {
  readonly batches: Buffer[] = []
  readonly logStartOffset = 0
  get logEndOffset(): number {
    return this.batches.length
  }
  async read(offset: number) {
    const records = this.batches.slice(offset)
    return {
      records,
      sizeInBytes: records.reduce((n, b) => n + b.length, 0),
      nextOffset: this.batches.length,
    }
  }
  /** The last state written for each transactional id (null: tombstone). */
  async latest(): Promise<Map<string, ReturnType<typeof decodeTransactionLogValue> | null>> {
    const out = new Map<string, ReturnType<typeof decodeTransactionLogValue> | null>()
    for (const chunk of this.batches)
      for (const span of iterateBatches(chunk))
        for (const r of (await decodeRecordBatch(chunk, span.at)).records)
          out.set(
            decodeTransactionLogKey(r.key!)!,
            r.value === null ? null : decodeTransactionLogValue(r.value),
          )
    return out
  }
}

class FakeMarkers implements MarkerChannel {
  readonly jobs: { job: MarkerJob; resolve: (outcome: MarkerOutcome) => void }[] = []
  send(job: MarkerJob): Promise<MarkerOutcome> {
    return new Promise((resolve) => this.jobs.push({ job, resolve }))
  }
  shutdown(): void {}
  /** Every leader writes its marker. */
  writeAll(): MarkerJob {
    const next = this.jobs.shift()
    assert.ok(next, 'a marker job was sent')
    for (const [topic, ids] of [...next.job.pending.partitions])
      for (const id of [...ids]) next.job.pending.removePartition(topic, id)
    next.resolve('written')
    return next.job
  }
}

function start(clock: ManualClock, log: MemoryLog, leaderEpoch = 3) {
  const partition = { partition: 0, isLeader: true, leaderEpoch, log } as unknown as Partition
  const one = { partitions: [{ partition: 0, leader: 1 }] }
  const image = {
    brokers: new Map([[1, { nodeId: 1, host: '127.0.0.1', port: 9092 }]]),
    topics: new Map([
      [TRANSACTION_STATE_TOPIC, one],
      ['t', { partitions: [0, 1, 2].map((p) => ({ partition: p, leader: 1 })) }],
    ]),
  } as unknown as ClusterImage
  let nextProducerId = 1000n
  const markers = new FakeMarkers()
  /** Error codes the next appends answer with, in turn (the records are not written). */
  const failures: number[] = []
  const coordinator = new TransactionCoordinator(
    {
      nodeId: toBrokerId(1),
      clock,
      logger: silentLogger,
      replicaManager: {
        getPartition: (topic, p) => (topic === TRANSACTION_STATE_TOPIC && p === 0 ? partition : undefined),
        appendToLeader: async ({ records }) => {
          const failure = failures.shift()
          if (failure !== undefined)
            return {
              errorCode: failure,
              baseOffset: toOffset(-1),
              logAppendTimeMs: -1,
              logStartOffset: toOffset(0),
            }
          log.batches.push(Buffer.from(records))
          return {
            errorCode: ErrorCode.NONE,
            baseOffset: toOffset(log.batches.length - 1),
            logAppendTimeMs: -1,
            logStartOffset: toOffset(0),
          }
        },
      },
      metadataImage: () => image,
      topicAdmin: { ensureInternalTopic: () => Promise.reject(new Error('not in this test')) },
      producerIdManager: { generateProducerId: async () => toProducerId(nextProducerId++) },
      transport: { connect: () => Promise.reject(new Error('no network in this test')) },
      brokerAddress: () => undefined,
    },
    CONFIG,
    markers,
  )
  coordinator.onPartitionsChanged()
  coordinator.startup()
  return { coordinator, markers, failures }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve))
}

async function loaded(coordinator: TransactionCoordinator): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (typeof coordinator.stateManager.getTransactionState('x') !== 'number') return
    await settle()
  }
  throw new Error('the coordinator did not load')
}

const tp = (topic: string, ...ids: number[]) => new Map([[topic, new Set(ids)]])

describe('transaction coordinator', () => {
  it('InitProducerId: a new id at epoch 0, each restart bumps the epoch; bad timeouts and ids refused', async () => {
    const clock = new ManualClock()
    const log = new MemoryLog()
    const { coordinator } = start(clock, log)
    await loaded(coordinator)
    const first = await coordinator.initProducerId('tx', TIMEOUT_MS, null)
    assert.deepEqual(first, { errorCode: ErrorCode.NONE, producerId: 1000n, producerEpoch: 0 })
    const second = await coordinator.initProducerId('tx', TIMEOUT_MS, null)
    assert.deepEqual(second, { errorCode: ErrorCode.NONE, producerId: 1000n, producerEpoch: 1 })
    const kip360 = await coordinator.initProducerId('tx', TIMEOUT_MS, {
      producerId: toProducerId(1000n),
      producerEpoch: 1,
    })
    assert.equal(kip360.producerEpoch, 2)
    const stale = await coordinator.initProducerId('tx', TIMEOUT_MS, {
      producerId: toProducerId(1000n),
      producerEpoch: 0,
    })
    assert.equal(stale.errorCode, ErrorCode.PRODUCER_FENCED)
    assert.equal(stale.producerId, -1n)
    const wrongId = await coordinator.initProducerId('tx', TIMEOUT_MS, {
      producerId: toProducerId(77n),
      producerEpoch: 2,
    })
    assert.equal(wrongId.errorCode, ErrorCode.PRODUCER_FENCED)
    assert.equal(
      (await coordinator.initProducerId('tx', 900_001, null)).errorCode,
      ErrorCode.INVALID_TRANSACTION_TIMEOUT,
    )
    assert.equal(
      (await coordinator.initProducerId('tx', 0, null)).errorCode,
      ErrorCode.INVALID_TRANSACTION_TIMEOUT,
    )
    assert.equal(
      (await coordinator.initProducerId('', TIMEOUT_MS, null)).errorCode,
      ErrorCode.INVALID_REQUEST,
    )
    const written = (await log.latest()).get('tx')
    assert.equal(written?.producerEpoch, 2)
    assert.equal(written?.state, TransactionState.Empty)
    coordinator.shutdown()
  })

  it('commit: partitions added, PrepareCommit acknowledged, markers, then CompleteCommit', async () => {
    const clock = new ManualClock()
    const log = new MemoryLog()
    const { coordinator, markers } = start(clock, log)
    await loaded(coordinator)
    const producer = await coordinator.initProducerId('tx', TIMEOUT_MS, null)
    assert.equal(await coordinator.addPartitions('tx', producer, tp('t', 0, 1)), ErrorCode.NONE)
    assert.equal(await coordinator.addOffsets('tx', producer, 'group-a'), ErrorCode.NONE)
    const [described] = coordinator.describe(['tx'])
    assert.equal(described.transactionState, 'Ongoing')
    assert.deepEqual(described.topics.map((t) => t.topic).sort(), [CONSUMER_OFFSETS_TOPIC, 't'])
    assert.deepEqual(
      coordinator.verifyPartitions('tx', producer, tp('t', 1, 2)).map((r) => r.errorCode),
      [ErrorCode.NONE, ErrorCode.TRANSACTION_ABORTABLE],
    )
    assert.equal(
      coordinator.verifyPartitions('tx', { ...producer, producerEpoch: 9 }, tp('t', 1))[0].errorCode,
      ErrorCode.PRODUCER_FENCED,
    )
    // While more partitions are being added, those already in the transaction still verify.
    const adding = coordinator.addPartitions('tx', producer, tp('t', 2))
    assert.deepEqual(
      coordinator.verifyPartitions('tx', producer, tp('t', 1, 2)).map((r) => r.errorCode),
      [ErrorCode.NONE, ErrorCode.TRANSACTION_ABORTABLE],
    )
    assert.equal(await adding, ErrorCode.NONE)
    assert.equal(
      await coordinator.endTransaction('tx', producer.producerId, producer.producerEpoch, 'commit'),
      ErrorCode.NONE,
    )
    assert.equal((await log.latest()).get('tx')?.state, TransactionState.PrepareCommit)
    // Until the markers are written the transaction is still completing: requests wait for
    // it, and give up with CONCURRENT_TRANSACTIONS if it takes too long.
    const gaveUp = coordinator.addPartitions('tx', producer, tp('t', 0))
    await settle()
    clock.advance(2000)
    assert.equal(await gaveUp, ErrorCode.CONCURRENT_TRANSACTIONS)
    let settled = false
    const retriedCommit = coordinator
      .endTransaction('tx', producer.producerId, producer.producerEpoch, 'commit')
      .finally(() => {
        settled = true
      })
    await settle()
    assert.equal(settled, false, 'parked until the transaction completes')
    const job = markers.writeAll()
    assert.equal(job.result, 'commit')
    assert.equal(job.producerEpoch, producer.producerEpoch)
    assert.equal(job.coordinatorEpoch, 3, 'the coordinator epoch is the partition leader epoch')
    await settle()
    const complete = (await log.latest()).get('tx')
    assert.equal(complete?.state, TransactionState.CompleteCommit)
    assert.equal(complete?.partitions.size, 0)
    // The parked retry of the commit is answered once it completed; an abort of it is refused.
    assert.equal(await retriedCommit, ErrorCode.NONE)
    assert.equal(
      await coordinator.endTransaction('tx', producer.producerId, producer.producerEpoch, 'abort'),
      ErrorCode.INVALID_TXN_STATE,
    )
    // The next transaction starts from CompleteCommit.
    assert.equal(await coordinator.addPartitions('tx', producer, tp('t', 2)), ErrorCode.NONE)
    coordinator.shutdown()
  })

  it('a new instance fences the old one: its open transaction aborted with a bumped epoch', async () => {
    const clock = new ManualClock()
    const log = new MemoryLog()
    const { coordinator, markers } = start(clock, log)
    await loaded(coordinator)
    const zombie = await coordinator.initProducerId('tx', TIMEOUT_MS, null)
    assert.equal(await coordinator.addPartitions('tx', zombie, tp('t', 0)), ErrorCode.NONE)
    const retry = await coordinator.initProducerId('tx', TIMEOUT_MS, null)
    assert.equal(retry.errorCode, ErrorCode.CONCURRENT_TRANSACTIONS, 'the open transaction is aborted first')
    assert.equal((await log.latest()).get('tx')?.state, TransactionState.PrepareAbort)
    assert.equal((await log.latest()).get('tx')?.producerEpoch, zombie.producerEpoch + 1)
    const job = markers.writeAll()
    assert.equal(job.result, 'abort')
    assert.equal(job.producerEpoch, zombie.producerEpoch + 1, 'the markers fence the zombie at the leaders')
    await settle()
    const fresh = await coordinator.initProducerId('tx', TIMEOUT_MS, null)
    assert.equal(fresh.errorCode, ErrorCode.NONE)
    assert.equal(fresh.producerEpoch, zombie.producerEpoch + 2)
    assert.equal(await coordinator.addPartitions('tx', zombie, tp('t', 1)), ErrorCode.PRODUCER_FENCED)
    assert.equal(
      await coordinator.endTransaction('tx', zombie.producerId, zombie.producerEpoch, 'commit'),
      ErrorCode.PRODUCER_FENCED,
    )
    assert.equal(
      await coordinator.endTransaction('tx', toProducerId(5n), fresh.producerEpoch, 'commit'),
      ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    )
    assert.equal(
      await coordinator.endTransaction('tx', fresh.producerId, fresh.producerEpoch, 'commit'),
      ErrorCode.INVALID_TXN_STATE,
      'nothing ongoing to commit',
    )
    coordinator.shutdown()
  })

  it('a transaction past its timeout is aborted by the coordinator, its producer fenced', async () => {
    const clock = new ManualClock()
    const log = new MemoryLog()
    const { coordinator, markers } = start(clock, log)
    await loaded(coordinator)
    const producer = await coordinator.initProducerId('tx', 15_000, null)
    assert.equal(await coordinator.addPartitions('tx', producer, tp('t', 0)), ErrorCode.NONE)
    clock.advance(10_000)
    await settle()
    assert.equal(markers.jobs.length, 0, 'not yet timed out')
    clock.advance(10_000)
    await settle()
    const job = markers.writeAll()
    assert.equal(job.result, 'abort')
    assert.equal(job.producerEpoch, producer.producerEpoch + 1)
    await settle()
    assert.equal((await log.latest()).get('tx')?.state, TransactionState.CompleteAbort)
    assert.equal(
      await coordinator.endTransaction('tx', producer.producerId, producer.producerEpoch, 'commit'),
      ErrorCode.PRODUCER_FENCED,
    )
    coordinator.shutdown()
  })

  it('a failed append is not applied; the Complete* write is retried until it lands', async () => {
    const clock = new ManualClock()
    const log = new MemoryLog()
    const { coordinator, markers, failures } = start(clock, log)
    await loaded(coordinator)
    const producer = await coordinator.initProducerId('tx', TIMEOUT_MS, null)
    failures.push(ErrorCode.NOT_ENOUGH_REPLICAS)
    assert.equal(
      await coordinator.addPartitions('tx', producer, tp('t', 0)),
      ErrorCode.COORDINATOR_NOT_AVAILABLE,
    )
    assert.equal(coordinator.describe(['tx'])[0].transactionState, 'Empty', 'nothing applied')
    assert.equal(await coordinator.addPartitions('tx', producer, tp('t', 0)), ErrorCode.NONE)
    assert.equal(
      await coordinator.endTransaction('tx', producer.producerId, producer.producerEpoch, 'abort'),
      ErrorCode.NONE,
    )
    failures.push(ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_SERVER_ERROR)
    markers.writeAll()
    for (let i = 0; i < 5; i++) {
      await settle()
      clock.advance(CONFIG.retryBackoffMaxMs)
    }
    await settle()
    assert.equal(failures.length, 0, 'both failures met')
    assert.equal((await log.latest()).get('tx')?.state, TransactionState.CompleteAbort)
    assert.equal(coordinator.describe(['tx'])[0].transactionState, 'CompleteAbort')
    coordinator.shutdown()
  })

  it('an idle transactional id expires: a tombstone, then unknown', async () => {
    const clock = new ManualClock()
    const log = new MemoryLog()
    const { coordinator } = start(clock, log)
    await loaded(coordinator)
    await coordinator.initProducerId('idle', TIMEOUT_MS, null)
    clock.advance(CONFIG.removeExpiredTransactionalIdCleanupIntervalMs)
    await settle()
    assert.equal(coordinator.describe(['idle'])[0].errorCode, ErrorCode.NONE, 'not idle long enough yet')
    clock.advance(CONFIG.transactionalIdExpirationMs)
    await settle()
    assert.equal(coordinator.describe(['idle'])[0].errorCode, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
    assert.equal((await log.latest()).get('idle'), null)
    coordinator.shutdown()
  })

  it('a new coordinator loads the log and sends the markers of a transaction caught mid-commit', async () => {
    const clock = new ManualClock()
    const log = new MemoryLog()
    const first = start(clock, log, 3)
    await loaded(first.coordinator)
    const a = await first.coordinator.initProducerId('a', TIMEOUT_MS, null)
    await first.coordinator.addPartitions('a', a, tp('t', 0, 2))
    const b = await first.coordinator.initProducerId('b', TIMEOUT_MS, null)
    await first.coordinator.addPartitions('b', b, tp('t', 1))
    assert.equal(
      await first.coordinator.endTransaction('b', b.producerId, b.producerEpoch, 'commit'),
      ErrorCode.NONE,
    )
    first.coordinator.shutdown() // crashed before any marker was written

    const second = start(clock, log, 4)
    await loaded(second.coordinator)
    await settle()
    const resent = second.markers.writeAll()
    assert.equal(resent.transactionalId, 'b')
    assert.equal(resent.result, 'commit')
    assert.equal(resent.coordinatorEpoch, 4)
    await settle()
    const [da, db] = second.coordinator.describe(['a', 'b'])
    assert.equal(da.transactionState, 'Ongoing')
    assert.deepEqual(da.topics, [{ topic: 't', partitions: [0, 2] }])
    assert.equal(db.transactionState, 'CompleteCommit')
    const ongoing = second.coordinator.list({ states: ['Ongoing', 'Bogus'], producerIds: [], durationMs: -1 })
    assert.deepEqual(ongoing.unknownStateFilters, ['Bogus'])
    assert.deepEqual(
      ongoing.transactionStates.map((s) => s.transactionalId),
      ['a'],
    )
    assert.equal(
      second.coordinator.list({ states: [], producerIds: [b.producerId], durationMs: -1 }).transactionStates
        .length,
      1,
    )
    // The epoch survives the move: the producer keeps going on the new coordinator.
    assert.equal(
      await second.coordinator.endTransaction('a', a.producerId, a.producerEpoch, 'abort'),
      ErrorCode.NONE,
    )
    second.coordinator.shutdown()
  })
})

describe('transaction coordinator, transaction version 2 (KIP-890 part 2)', () => {
  const commitV2 = (c: TransactionCoordinator, p: ProducerIdAndEpoch) =>
    c.endTxn('tx', p, 'commit', true, TV_2)
  const abortV2 = (c: TransactionCoordinator, p: ProducerIdAndEpoch) => c.endTxn('tx', p, 'abort', true, TV_2)

  it('every end bumps the epoch: markers carry it, the answer names it, a retry is the epoch below', async () => {
    const clock = new ManualClock()
    const log = new MemoryLog()
    const { coordinator, markers } = start(clock, log)
    await loaded(coordinator)
    const producer = await coordinator.initProducerId('tx', TIMEOUT_MS, null)
    assert.equal(await coordinator.addPartitions('tx', producer, tp('t', 0), TV_2), ErrorCode.NONE)
    const bumped = { producerId: producer.producerId, producerEpoch: producer.producerEpoch + 1 }
    assert.deepEqual(await commitV2(coordinator, producer), { errorCode: ErrorCode.NONE, ...bumped })
    const prepared = (await log.latest()).get('tx')
    assert.equal(prepared?.state, TransactionState.PrepareCommit)
    assert.equal(
      prepared?.producerEpoch,
      bumped.producerEpoch,
      'PrepareCommit is written with the bumped epoch',
    )
    assert.equal(prepared?.clientTransactionVersion, TV_2)
    // A leader adding a partition for the next transaction while the markers are on their
    // way is answered at once (not parked): its verification guard would not survive them.
    let answered: number | undefined
    void coordinator.addPartitions('tx', bumped, tp('t', 1), TV_2).then((code) => {
      answered = code
    })
    await settle()
    assert.equal(answered, ErrorCode.CONCURRENT_TRANSACTIONS)
    const job = markers.writeAll()
    assert.equal(job.producerEpoch, bumped.producerEpoch, 'the markers fence the ended epoch')
    await settle()
    const complete = (await log.latest()).get('tx')
    assert.equal(complete?.state, TransactionState.CompleteCommit)
    assert.equal(complete?.producerEpoch, bumped.producerEpoch)
    // A retry (the epoch below) is answered with the new epoch; the same epoch is the next
    // transaction, which has nothing to commit; an abort named by the old epoch is refused.
    assert.deepEqual(await commitV2(coordinator, producer), { errorCode: ErrorCode.NONE, ...bumped })
    assert.equal((await commitV2(coordinator, bumped)).errorCode, ErrorCode.INVALID_TXN_STATE)
    assert.equal((await abortV2(coordinator, producer)).errorCode, ErrorCode.INVALID_TXN_STATE)
    assert.equal(
      (await commitV2(coordinator, { ...producer, producerEpoch: producer.producerEpoch - 1 })).errorCode,
      ErrorCode.PRODUCER_FENCED,
    )
    // The ended epoch can start nothing: its late write is fenced at the coordinator.
    assert.equal(await coordinator.addPartitions('tx', producer, tp('t', 1), TV_2), ErrorCode.PRODUCER_FENCED)
    assert.equal(await coordinator.addPartitions('tx', bumped, tp('t', 1), TV_2), ErrorCode.NONE)
    const again = { ...bumped, producerEpoch: bumped.producerEpoch + 1 }
    assert.deepEqual(await abortV2(coordinator, bumped), { errorCode: ErrorCode.NONE, ...again })
    assert.equal(markers.writeAll().result, 'abort')
    await settle()
    assert.equal((await log.latest()).get('tx')?.state, TransactionState.CompleteAbort)
    coordinator.shutdown()
  })

  it('an abort with no transaction ongoing bumps the epoch; a commit of none is refused', async () => {
    const clock = new ManualClock()
    const log = new MemoryLog()
    const { coordinator, markers } = start(clock, log)
    await loaded(coordinator)
    const producer = await coordinator.initProducerId('tx', TIMEOUT_MS, null)
    assert.equal((await commitV2(coordinator, producer)).errorCode, ErrorCode.INVALID_TXN_STATE)
    const bumped = { producerId: producer.producerId, producerEpoch: producer.producerEpoch + 1 }
    assert.deepEqual(await abortV2(coordinator, producer), { errorCode: ErrorCode.NONE, ...bumped })
    const job = markers.writeAll()
    assert.equal(job.pending.partitions.size, 0, 'no partition needs a marker')
    await settle()
    const complete = (await log.latest()).get('tx')
    assert.equal(complete?.state, TransactionState.CompleteAbort)
    assert.equal(complete?.producerEpoch, bumped.producerEpoch)
    // Empty: a retry (the epoch below) of an abort that found no transaction is fenced, as Kafka.
    const other = await coordinator.initProducerId('tx', TIMEOUT_MS, null)
    assert.equal((await abortV2(coordinator, bumped)).errorCode, ErrorCode.PRODUCER_FENCED)
    assert.equal((await abortV2(coordinator, other)).errorCode, ErrorCode.NONE)
    coordinator.shutdown()
  })

  it('the last epoch ends on a new producer id at epoch 0, kept through a retry and a reload', async () => {
    const clock = new ManualClock()
    const log = new MemoryLog()
    const { coordinator, markers } = start(clock, log)
    await loaded(coordinator)
    const producer = await coordinator.initProducerId('tx', TIMEOUT_MS, null)
    const found = coordinator.stateManager.getTransactionState('tx')
    assert.ok(typeof found !== 'number' && found.metadata)
    // As if 32766 transactions had ended (the last epoch a client may use).
    found.metadata.producerEpoch = 32766
    const last = { producerId: producer.producerId, producerEpoch: 32766 }
    assert.equal(await coordinator.addPartitions('tx', last, tp('t', 0), TV_2), ErrorCode.NONE)
    const answer = await commitV2(coordinator, last)
    assert.deepEqual(answer, { errorCode: ErrorCode.NONE, producerId: 1001n, producerEpoch: 0 })
    const prepared = (await log.latest()).get('tx')
    assert.equal(prepared?.nextProducerId, 1001n, 'the next producer id is in the log for a new coordinator')
    assert.equal(markers.writeAll().producerEpoch, 32767, 'the markers use the epoch no client may')
    await settle()
    const complete = (await log.latest()).get('tx')
    assert.equal(complete?.producerId, 1001n)
    assert.equal(complete?.producerEpoch, 0)
    assert.equal(complete?.state, TransactionState.CompleteCommit)
    assert.deepEqual(await commitV2(coordinator, last), answer, 'a retry from the old id gets the new one')
    coordinator.shutdown()
    const second = start(clock, log, 4)
    await loaded(second.coordinator)
    const [described] = second.coordinator.describe(['tx'])
    assert.equal(described.producerId, 1001n)
    assert.equal(described.producerEpoch, 0)
    second.coordinator.shutdown()
  })

  it('transaction version 1 is unchanged: no bump, no producer id or epoch in the answer', async () => {
    const clock = new ManualClock()
    const log = new MemoryLog()
    const { coordinator, markers } = start(clock, log)
    await loaded(coordinator)
    const producer = await coordinator.initProducerId('tx', TIMEOUT_MS, null)
    assert.equal(await coordinator.addPartitions('tx', producer, tp('t', 0)), ErrorCode.NONE)
    assert.deepEqual(await coordinator.endTxn('tx', producer, 'commit', true, TV_0), {
      errorCode: ErrorCode.NONE,
      producerId: -1n,
      producerEpoch: -1,
    })
    assert.equal(markers.writeAll().producerEpoch, producer.producerEpoch)
    await settle()
    assert.equal((await log.latest()).get('tx')?.producerEpoch, producer.producerEpoch)
    assert.equal((await log.latest()).get('tx')?.clientTransactionVersion, TV_0)
    coordinator.shutdown()
  })
})
