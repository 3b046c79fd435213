/**
 * The coordinator runtime (src/coordinator/runtime/): shards loaded from their partition on
 * leadership with the leader epoch as coordinator epoch, unloaded when it moves, routing
 * answered uniformly, and writes that complete only once committed and only on the shard
 * that wrote them. Driven with a toy key-value shard over an in-memory partition whose
 * acks=all appends are committed by the test.
 */

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import type { TransactionResult } from '../../src/common/transaction.js'
import { NO_OFFSET, toProducerId } from '../../src/common/types.js'
import { CoordinatorRuntime, type ShardContext } from '../../src/coordinator/runtime/coordinator-runtime.js'
import type { CoordinatorShard, ReplayedBatch } from '../../src/coordinator/runtime/coordinator-shard.js'
import type { ClusterImage } from '../../src/metadata/cluster-image.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { decodeRecordBatch, encodeRecordBatchSync, iterateBatches } from '../../src/protocol/record-batch.js'
import { KafkaError } from '../../src/replication/kafka-error.js'
import type { Partition } from '../../src/replication/partition.js'
import { encodeEndTxnMarker } from '../../src/storage/control-batch.js'
import { toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock } from '../storage/helpers.js'
import { ToyPartition } from './toy-partition.js'

const TOPIC = '__toy_state'

interface KvRecord {
  readonly key: string
  readonly value: string | null
}

/** A replicated map: the state machine under test. */
class KvShard implements CoordinatorShard<KvRecord> {
  readonly entries = new Map<string, string>()
  readonly markers: string[] = []
  loaded = false
  unloaded = false

  constructor(readonly context: ShardContext<KvShard>) {}

  replay(batch: ReplayedBatch<KvRecord>): void {
    for (const r of batch.records) this.apply(r)
  }

  apply(r: KvRecord): void {
    if (r.value === null) this.entries.delete(r.key)
    else this.entries.set(r.key, r.value)
  }

  replayEndTransactionMarker(producerId: bigint, result: TransactionResult): void {
    this.markers.push(`${producerId}:${result}`)
  }

  onLoaded(): void {
    this.loaded = true
  }

  onUnloaded(): void {
    this.unloaded = true
  }

  summary() {
    return { entries: this.entries.size }
  }
}

function kvRecord(key: string, value: string | null): Buffer {
  return encodeRecordBatchSync({
    records: [{ key: Buffer.from(key), value: value === null ? null : Buffer.from(value) }],
    defaultTimestamp: 0,
  })
}

function start(partition: ToyPartition, clock = new ManualClock()) {
  const leaders = [{ partition: 0, leader: 1 }]
  const image = {
    brokers: new Map([[1, { nodeId: 1, host: '127.0.0.1', port: 9092 }]]),
    topics: new Map([[TOPIC, { partitions: leaders }]]),
  } as unknown as ClusterImage
  const runtime = new CoordinatorRuntime<KvShard, KvRecord>(
    {
      nodeId: toBrokerId(1),
      clock,
      logger: silentLogger,
      replicaManager: {
        getPartition: (topic, p) =>
          topic === TOPIC && p === 0 ? (partition as unknown as Partition) : undefined,
        appendToLeader: ({ records }) => partition.append(records),
      },
      metadataImage: () => image,
      topicAdmin: { ensureInternalTopic: () => Promise.reject(new Error('not in this test')) },
    },
    {
      topic: TOPIC,
      name: 'toy coordinator',
      serde: {
        serialize: (r) => ({
          key: Buffer.from(r.key),
          value: r.value === null ? null : Buffer.from(r.value),
        }),
        deserialize: (key, value) => ({
          key: key.toString(),
          value: value === null ? null : value.toString(),
        }),
      },
      loadBufferSize: 1024 * 1024,
      noTopicErrorCode: ErrorCode.NOT_COORDINATOR,
      partitionFor: () => 0,
      topicSpec: () => ({ partitions: 1, replicationFactor: 1, configs: {} }),
      newShard: (context) => new KvShard(context),
    },
  )
  runtime.onPartitionsChanged()
  return { runtime, clock, leaders }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
}

function active(runtime: CoordinatorRuntime<KvShard, KvRecord>): ShardContext<KvShard> {
  const context = runtime.contextFor('k')
  assert.ok(typeof context !== 'number', `expected an active shard, got error ${context}`)
  return context
}

/** A write of one record applied to the shard once committed; answers the error code. */
function put(
  runtime: CoordinatorRuntime<KvShard, KvRecord>,
  context: ShardContext<KvShard>,
  key: string,
  value: string,
): Promise<number> {
  return runtime.scheduleWriteOperation(context, {
    records: [{ key, value }],
    timeoutMs: 5000,
    complete: (errorCode) => {
      if (errorCode === ErrorCode.NONE) context.shard.apply({ key, value })
      return errorCode
    },
    notCoordinator: () => ErrorCode.NOT_COORDINATOR,
  })
}

test('a shard loads its partition on leadership, answering COORDINATOR_LOAD_IN_PROGRESS meanwhile', async () => {
  const partition = new ToyPartition()
  partition.write(kvRecord('a', '1'))
  partition.write(kvRecord('b', '2'))
  partition.write(kvRecord('a', null))
  let open = (): void => undefined
  partition.readGate = new Promise<void>((resolve) => {
    open = resolve
  })
  partition.leaderEpoch = 7
  const { runtime } = start(partition)
  assert.equal(runtime.contextFor('k'), ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
  assert.equal(runtime.isLoading, true)
  open()
  await settle()
  const context = active(runtime)
  assert.equal(context.epoch, 7, 'the coordinator epoch is the leader epoch')
  assert.equal(context.shard.loaded, true)
  assert.deepEqual([...context.shard.entries], [['b', '2']])
  assert.equal(runtime.isLoading, false)
})

test('losing leadership unloads the shard: NOT_COORDINATOR, timers cancelled, onUnloaded', async () => {
  const partition = new ToyPartition()
  const { runtime, clock, leaders } = start(partition)
  await settle()
  const context = active(runtime)
  let fired = false
  context.timer.schedule('t', clock.nowMs() + 100, () => {
    fired = true
  })
  partition.isLeader = false
  assert.equal(runtime.contextFor('k'), ErrorCode.NOT_COORDINATOR, 'answered before the metadata is applied')
  leaders[0] = { partition: 0, leader: 2 }
  runtime.onPartitionsChanged()
  assert.equal(context.state, 'closed')
  assert.equal(context.shard.unloaded, true)
  clock.advance(200)
  assert.equal(fired, false, 'a dropped shard runs no timer')
  assert.equal(runtime.contextFor('k'), ErrorCode.NOT_COORDINATOR)
})

test('a new leader epoch unloads the old shard and loads a new one under that epoch', async () => {
  const partition = new ToyPartition()
  const { runtime } = start(partition)
  await settle()
  const first = active(runtime)
  const written = put(runtime, first, 'x', '1')
  partition.commitAll()
  assert.equal(await written, ErrorCode.NONE)
  partition.leaderEpoch = 2
  assert.equal(runtime.contextFor('k'), ErrorCode.NOT_COORDINATOR, 'the old epoch no longer answers')
  runtime.onPartitionsChanged()
  assert.equal(first.state, 'closed')
  await settle()
  const second = active(runtime)
  assert.notEqual(second, first)
  assert.equal(second.epoch, 2)
  assert.deepEqual([...second.shard.entries], [['x', '1']], 'the new shard replayed the committed write')
  assert.equal(await put(runtime, first, 'y', '2'), ErrorCode.NOT_COORDINATOR, 'the old shard writes nothing')
  assert.equal(partition.inFlight.length, 0)
})

test('a write completes only once its records are committed', async () => {
  const partition = new ToyPartition()
  const { runtime } = start(partition)
  await settle()
  const context = active(runtime)
  let done = false
  const written = put(runtime, context, 'k', 'v').then((code) => {
    done = true
    return code
  })
  await settle()
  assert.equal(partition.logEndOffset, 1, 'appended at once')
  assert.equal(done, false, 'not complete before the high watermark passes it')
  assert.equal(context.shard.entries.has('k'), false)
  partition.commitAll()
  assert.equal(await written, ErrorCode.NONE)
  assert.equal(context.shard.entries.get('k'), 'v')
})

test('a write fails with NOT_COORDINATOR when its shard is unloaded mid-flight', async () => {
  const partition = new ToyPartition()
  const { runtime } = start(partition)
  await settle()
  const context = active(runtime)
  const written = put(runtime, context, 'k', 'v')
  await settle()
  partition.isLeader = false
  runtime.onPartitionsChanged()
  partition.commitAll()
  assert.equal(await written, ErrorCode.NOT_COORDINATOR)
  assert.equal(context.shard.entries.has('k'), false, 'never applied to the dropped shard')
})

test('append errors map to what coordinator clients see; a refused write completes with it', async () => {
  const partition = new ToyPartition()
  const { runtime } = start(partition)
  await settle()
  const context = active(runtime)
  const written = put(runtime, context, 'k', 'v')
  partition.inFlight[0]?.fail(new KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, 'below min ISR'))
  assert.equal(await written, ErrorCode.COORDINATOR_NOT_AVAILABLE)
  assert.equal(context.shard.entries.has('k'), false)
})

test('markers are replayed from the log, and those told while loading applied once loaded', async () => {
  const partition = new ToyPartition()
  partition.write(
    encodeEndTxnMarker({
      producerId: toProducerId(5n),
      producerEpoch: 0,
      result: 'abort',
      coordinatorEpoch: 0,
      timestampMs: 0,
    }),
  )
  let open = (): void => undefined
  partition.readGate = new Promise<void>((resolve) => {
    open = resolve
  })
  const { runtime } = start(partition)
  runtime.completeTransaction(0, toProducerId(6n), 'commit')
  const context = runtime.context(0)
  assert.ok(context)
  assert.deepEqual(context.shard.markers, [], 'held while loading')
  open()
  await settle()
  assert.deepEqual(context.shard.markers, ['5:abort', '6:commit'])
  runtime.completeTransaction(0, toProducerId(7n), 'abort')
  assert.deepEqual(context.shard.markers, ['5:abort', '6:commit', '7:abort'])
})

test('transactional writes carry the producer sequences recovered on load', async () => {
  const partition = new ToyPartition()
  partition.write(
    encodeRecordBatchSync({
      records: [{ key: Buffer.from('a'), value: Buffer.from('1') }],
      producerId: 9n,
      producerEpoch: 2,
      baseSequence: 0,
      isTransactional: true,
      defaultTimestamp: 0,
    }),
  )
  const { runtime } = start(partition)
  await settle()
  const context = active(runtime)
  const written = runtime.scheduleWriteOperation(context, {
    records: [
      { key: 'b', value: '2' },
      { key: 'c', value: '3' },
    ],
    timeoutMs: 5000,
    transactional: { producerId: toProducerId(9n), producerEpoch: 2 },
    complete: (errorCode, baseOffset) => ({ errorCode, baseOffset }),
    notCoordinator: () => ({ errorCode: ErrorCode.NOT_COORDINATOR, baseOffset: NO_OFFSET }),
  })
  partition.commitAll()
  assert.deepEqual(await written, { errorCode: ErrorCode.NONE, baseOffset: 1 })
  const last = partition.batches.at(-1)
  assert.ok(last)
  const [span] = iterateBatches(last)
  assert.ok(span)
  const batch = await decodeRecordBatch(last, span.at)
  assert.equal(batch.isTransactional, true)
  assert.equal(batch.baseSequence, 1, 'continues after the loaded batch')
})

test('a write in flight across a leader epoch change completes NOT_COORDINATOR; the new shard reads it from the log', async () => {
  const partition = new ToyPartition()
  const { runtime } = start(partition)
  await settle()
  const first = active(runtime)
  const written = put(runtime, first, 'k', 'v')
  partition.leaderEpoch = 2
  runtime.onPartitionsChanged()
  partition.commitAll()
  assert.equal(await written, ErrorCode.NOT_COORDINATOR, 'the epoch-1 shard may not answer for it')
  assert.equal(first.shard.entries.has('k'), false)
  await settle()
  const second = active(runtime)
  assert.equal(second.epoch, 2)
  assert.equal(second.shard.entries.get('k'), 'v', 'replayed by the epoch-2 shard')
})
