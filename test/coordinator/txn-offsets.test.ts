/**
 * Transactional offset commits in the group coordinator (TxnOffsetCommit, KIP-447
 * fencing, pending offsets per producer, COMMIT/ABORT markers, OffsetFetch
 * require_stable, and the replay of all of it when a coordinator loads the partition), on
 * the GroupCoordinator runtime over an in-memory __consumer_offsets partition that assigns
 * offsets as a log does.
 */

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import { systemRandom } from '../../src/common/random.js'
import { toOffset, toProducerId } from '../../src/common/types.js'
import type { JoinResult } from '../../src/coordinator/effects.js'
import { CONSUMER_OFFSETS_TOPIC, DEFAULT_COORDINATOR_CONFIG } from '../../src/coordinator/group.js'
import { GroupCoordinator, type GroupCoordinatorConfig } from '../../src/coordinator/group-coordinator.js'
import { decodeKey, decodeOffsetCommitValue } from '../../src/coordinator/records.js'
import type { ClusterImage } from '../../src/metadata/cluster-image.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import {
  type DecodedRecordBatch,
  decodeRecordBatch,
  encodeRecordBatchSync,
  iterateBatches,
} from '../../src/protocol/record-batch.js'
import type { Partition } from '../../src/replication/partition.js'
import { toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock } from '../storage/helpers.js'
import { ToyPartition } from './toy-partition.js'

const CONFIG: GroupCoordinatorConfig = {
  ...DEFAULT_COORDINATOR_CONFIG,
  groupInitialRebalanceDelayMs: 0,
  offsetsRetentionCheckIntervalMs: 600_000,
  offsetsTopicNumPartitions: 1,
  offsetsTopicReplicationFactor: 1,
  offsetsTopicSegmentBytes: 100 * 1024 * 1024,
  offsetsCommitTimeoutMs: 5000,
  offsetsLoadBufferSize: 5 * 1024 * 1024,
}

const PRODUCER = { producerId: toProducerId(4000n), producerEpoch: 3 }

/**
 * __consumer_offsets-0 in memory; writes get consecutive offsets, as in a real log (the
 * coordinator's appends are written and answered at once here, not held for a commit).
 */
class MemoryLog extends ToyPartition {
  /** A COMMIT or ABORT control batch of the producer, as WriteTxnMarkers writes it. */
  appendMarker(producerId: bigint, producerEpoch: number, commit: boolean): void {
    const key = Buffer.alloc(4)
    key.writeInt16BE(commit ? 1 : 0, 2)
    const value = Buffer.alloc(6)
    this.write(
      encodeRecordBatchSync({
        records: [{ key, value }],
        producerId,
        producerEpoch,
        isTransactional: true,
        isControl: true,
        defaultTimestamp: 0,
      }),
    )
  }

  async decoded(): Promise<DecodedRecordBatch[]> {
    const out: DecodedRecordBatch[] = []
    for (const chunk of this.batches)
      for (const span of iterateBatches(chunk)) out.push(await decodeRecordBatch(chunk, span.at))
    return out
  }
}

function startCoordinator(clock: ManualClock, log: MemoryLog): GroupCoordinator {
  const partition = { partition: 0, isLeader: true, leaderEpoch: 0, log } as unknown as Partition
  const partitions = [{ partition: 0, leader: 1 }]
  const image = {
    brokers: new Map([[1, { nodeId: 1, host: '127.0.0.1', port: 9092 }]]),
    topics: new Map([
      [CONSUMER_OFFSETS_TOPIC, { partitions }],
      ['t1', { partitions: [...partitions, { partition: 1, leader: 1 }] }],
    ]),
  } as unknown as ClusterImage
  const coordinator = new GroupCoordinator(
    {
      nodeId: toBrokerId(1),
      clock,
      random: systemRandom,
      logger: silentLogger,
      replicaManager: {
        getPartition: (topic, p) => (topic === CONSUMER_OFFSETS_TOPIC && p === 0 ? partition : undefined),
        appendToLeader: async ({ records }) => ({
          errorCode: ErrorCode.NONE,
          baseOffset: toOffset(log.write(records)),
          logAppendTimeMs: -1,
          logStartOffset: toOffset(0),
        }),
      },
      metadataImage: () => image,
      topicAdmin: { ensureInternalTopic: () => Promise.reject(new Error('not in this test')) },
    },
    CONFIG,
  )
  coordinator.onPartitionsChanged()
  return coordinator
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
}

async function loaded(coordinator: GroupCoordinator): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (coordinator.fetchOffsets('any', []).errorCode === ErrorCode.NONE) return
    await settle()
  }
  throw new Error('the coordinator did not load')
}

type Offsets = [topic: string, partition: number, offset: number][]

function partitions(offsets: Offsets) {
  return offsets.map(([topic, partition, offset]) => ({
    topic,
    partition,
    offset: BigInt(offset),
    leaderEpoch: -1,
    metadata: '',
  }))
}

async function txnCommit(
  coordinator: GroupCoordinator,
  groupId: string,
  offsets: Offsets,
  options: { member?: { memberId: string; generationId: number }; producer?: typeof PRODUCER } = {},
): Promise<number[]> {
  const result = await coordinator.commitTransactional(groupId, {
    ...(options.producer ?? PRODUCER),
    memberId: options.member?.memberId ?? '',
    groupInstanceId: null,
    generationId: options.member?.generationId ?? -1,
    partitions: partitions(offsets),
  })
  return [...result.partitions.values()]
}

async function plainCommit(coordinator: GroupCoordinator, groupId: string, offsets: Offsets): Promise<void> {
  const result = await coordinator.commit(groupId, {
    memberId: '',
    groupInstanceId: null,
    generationId: -1,
    retentionTimeMs: -1,
    partitions: partitions(offsets),
  })
  assert.deepEqual(
    [...result.partitions.values()],
    offsets.map(() => ErrorCode.NONE),
  )
}

/** "topic-partition=offset" (or "=UNSTABLE"), for the listed partitions of t1. */
function fetched(coordinator: GroupCoordinator, groupId: string, requireStable: boolean): string[] {
  const result = coordinator.fetchOffsets(groupId, [{ name: 't1', partitions: [0, 1] }], requireStable)
  assert.equal(result.errorCode, ErrorCode.NONE)
  return result.topics.flatMap((t) =>
    t.partitions.map((p) =>
      p.errorCode === ErrorCode.UNSTABLE_OFFSET_COMMIT
        ? `${t.name}-${p.partition}=UNSTABLE`
        : `${t.name}-${p.partition}=${p.offset}`,
    ),
  )
}

async function stableMember(coordinator: GroupCoordinator, groupId: string) {
  const join = (await coordinator.join({
    groupId,
    memberId: '',
    groupInstanceId: null,
    protocolType: 'consumer',
    protocols: [{ name: 'range', metadata: Buffer.alloc(0) }],
    sessionTimeoutMs: 30_000,
    rebalanceTimeoutMs: 10_000,
    clientId: 'c',
    clientHost: '/127.0.0.1',
    requireKnownMemberId: false,
    supportsSkipAssignment: false,
  })) as JoinResult
  assert.equal(join.errorCode, ErrorCode.NONE)
  const sync = await coordinator.sync(groupId, {
    memberId: join.memberId,
    groupInstanceId: null,
    generationId: join.generationId,
    protocolType: 'consumer',
    protocolName: 'range',
    assignments: [{ memberId: join.memberId, assignment: Buffer.alloc(0) }],
  })
  assert.equal(sync.errorCode, ErrorCode.NONE)
  return { memberId: join.memberId, generationId: join.generationId }
}

test('a transactional commit is invisible (UNSTABLE_OFFSET_COMMIT with require_stable) until its COMMIT marker, then visible', async () => {
  const clock = new ManualClock()
  const log = new MemoryLog()
  const coordinator = startCoordinator(clock, log)
  await loaded(coordinator)
  await plainCommit(coordinator, 'g', [['t1', 0, 5]])
  assert.deepEqual(await txnCommit(coordinator, 'g', [['t1', 0, 10]]), [ErrorCode.NONE])
  assert.deepEqual(fetched(coordinator, 'g', false), ['t1-0=5', 't1-1=-1'])
  assert.deepEqual(fetched(coordinator, 'g', true), ['t1-0=UNSTABLE', 't1-1=-1'])

  // A marker of another producer, or in another topic, changes nothing.
  coordinator.onTransactionMarker(CONSUMER_OFFSETS_TOPIC, 0, 9999n, 'commit')
  coordinator.onTransactionMarker('t1', 0, PRODUCER.producerId, 'commit')
  assert.deepEqual(fetched(coordinator, 'g', true), ['t1-0=UNSTABLE', 't1-1=-1'])

  log.appendMarker(PRODUCER.producerId, PRODUCER.producerEpoch, true)
  coordinator.onTransactionMarker(CONSUMER_OFFSETS_TOPIC, 0, PRODUCER.producerId, 'commit')
  assert.deepEqual(fetched(coordinator, 'g', true), ['t1-0=10', 't1-1=-1'])
})

test('an ABORT marker drops the pending offsets; the group keeps its earlier ones', async () => {
  const clock = new ManualClock()
  const log = new MemoryLog()
  const coordinator = startCoordinator(clock, log)
  await loaded(coordinator)
  await plainCommit(coordinator, 'g', [['t1', 0, 5]])
  assert.deepEqual(
    await txnCommit(coordinator, 'g', [
      ['t1', 0, 10],
      ['t1', 1, 20],
    ]),
    [ErrorCode.NONE, ErrorCode.NONE],
  )
  coordinator.onTransactionMarker(CONSUMER_OFFSETS_TOPIC, 0, PRODUCER.producerId, 'abort')
  assert.deepEqual(fetched(coordinator, 'g', true), ['t1-0=5', 't1-1=-1'])
  // A late COMMIT for the same producer finds nothing left to apply.
  coordinator.onTransactionMarker(CONSUMER_OFFSETS_TOPIC, 0, PRODUCER.producerId, 'commit')
  assert.deepEqual(fetched(coordinator, 'g', true), ['t1-0=5', 't1-1=-1'])
})

test('TxnOffsetCommit batches are transactional batches of the producer, with consecutive sequences per epoch', async () => {
  const clock = new ManualClock()
  const log = new MemoryLog()
  const coordinator = startCoordinator(clock, log)
  await loaded(coordinator)
  await txnCommit(coordinator, 'g', [
    ['t1', 0, 1],
    ['t1', 1, 1],
  ])
  await txnCommit(coordinator, 'g', [['t1', 0, 2]])
  const bumped = { producerId: PRODUCER.producerId, producerEpoch: PRODUCER.producerEpoch + 1 }
  await txnCommit(coordinator, 'g', [['t1', 0, 3]], { producer: bumped })
  const batches = await log.decoded()
  assert.deepEqual(
    batches.map((b) => [b.isTransactional, b.producerId, b.producerEpoch, b.baseSequence, b.records.length]),
    [
      [true, 4000n, 3, 0, 2],
      [true, 4000n, 3, 2, 1],
      [true, 4000n, 4, 0, 1],
    ],
  )
  const key = decodeKey(batches[1].records[0].key!)
  assert.deepEqual(key, { kind: 'offset', group: 'g', topic: 't1', partition: 0 })
  assert.equal(decodeOffsetCommitValue(batches[1].records[0].value!).offset, 2n)

  // A new coordinator continues the sequence it finds in the log.
  const next = startCoordinator(clock, log)
  await loaded(next)
  await txnCommit(next, 'g', [['t1', 1, 4]], { producer: bumped })
  const last = (await log.decoded()).at(-1)!
  assert.deepEqual([last.producerEpoch, last.baseSequence], [4, 1])
})

test('KIP-447: a TxnOffsetCommit with group metadata must come from a current member of the current generation', async () => {
  const clock = new ManualClock()
  const log = new MemoryLog()
  const coordinator = startCoordinator(clock, log)
  await loaded(coordinator)
  const member = await stableMember(coordinator, 'g')
  assert.deepEqual(await txnCommit(coordinator, 'g', [['t1', 0, 1]], { member }), [ErrorCode.NONE])
  assert.deepEqual(
    await txnCommit(coordinator, 'g', [['t1', 0, 2]], {
      member: { memberId: member.memberId, generationId: member.generationId - 1 },
    }),
    [ErrorCode.ILLEGAL_GENERATION],
  )
  assert.deepEqual(
    await txnCommit(coordinator, 'g', [['t1', 0, 2]], {
      member: { memberId: 'zombie', generationId: member.generationId },
    }),
    [ErrorCode.UNKNOWN_MEMBER_ID],
  )
  // Without group metadata (TxnOffsetCommit v0-2, kafkajs) a Stable group still accepts it.
  assert.deepEqual(await txnCommit(coordinator, 'g', [['t1', 1, 3]]), [ErrorCode.NONE])
  // A group that does not exist is not created by a commit carrying a generation.
  assert.deepEqual(await txnCommit(coordinator, 'nope', [['t1', 0, 1]], { member }), [
    ErrorCode.ILLEGAL_GENERATION,
  ])
  // An unknown topic keeps its own error when the group fences the request.
  assert.deepEqual(
    await txnCommit(
      coordinator,
      'g',
      [
        ['missing', 0, 1],
        ['t1', 0, 1],
      ],
      { member: { memberId: 'zombie', generationId: member.generationId } },
    ),
    [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_MEMBER_ID],
  )
  // Unknown topics and oversized metadata fail their partitions only.
  const result = await coordinator.commitTransactional('g', {
    ...PRODUCER,
    memberId: '',
    groupInstanceId: null,
    generationId: -1,
    partitions: [
      { topic: 'missing', partition: 0, offset: 1n, leaderEpoch: -1, metadata: '' },
      { topic: 't1', partition: 0, offset: 1n, leaderEpoch: -1, metadata: 'x'.repeat(5000) },
    ],
  })
  assert.deepEqual(
    [...result.partitions.values()],
    [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.OFFSET_METADATA_TOO_LARGE],
  )
})

test('of a plain and a transactional commit of one partition, the one written later wins', async () => {
  const clock = new ManualClock()
  const log = new MemoryLog()
  const coordinator = startCoordinator(clock, log)
  await loaded(coordinator)
  await txnCommit(coordinator, 'g', [
    ['t1', 0, 10],
    ['t1', 1, 10],
  ])
  await plainCommit(coordinator, 'g', [['t1', 0, 7]])
  coordinator.onTransactionMarker(CONSUMER_OFFSETS_TOPIC, 0, PRODUCER.producerId, 'commit')
  log.appendMarker(PRODUCER.producerId, PRODUCER.producerEpoch, true)
  assert.deepEqual(fetched(coordinator, 'g', false), ['t1-0=7', 't1-1=10'])
  // A reload agrees.
  const reloaded = startCoordinator(clock, log)
  await loaded(reloaded)
  assert.deepEqual(fetched(reloaded, 'g', true), ['t1-0=7', 't1-1=10'])
})

test('loading replays transactions: committed ones visible, aborted ones gone, open ones pending until their marker', async () => {
  const clock = new ManualClock()
  const log = new MemoryLog()
  const first = startCoordinator(clock, log)
  await loaded(first)
  const committed = { producerId: toProducerId(1n), producerEpoch: 0 }
  const aborted = { producerId: toProducerId(2n), producerEpoch: 0 }
  const open = { producerId: toProducerId(3n), producerEpoch: 0 }
  await plainCommit(first, 'g', [['t1', 1, 1]])
  await txnCommit(first, 'g', [['t1', 0, 100]], { producer: committed })
  await txnCommit(first, 'h', [['t1', 0, 200]], { producer: aborted })
  await txnCommit(first, 'h', [['t1', 1, 300]], { producer: open })
  // Only offsets in a transaction: a group that appears in the log through a pending commit alone.
  await txnCommit(first, 'only-pending', [['t1', 0, 400]], { producer: open })
  log.appendMarker(committed.producerId, 0, true)
  log.appendMarker(aborted.producerId, 0, false)

  const second = startCoordinator(clock, log)
  await loaded(second)
  assert.deepEqual(fetched(second, 'g', true), ['t1-0=100', 't1-1=1'])
  assert.deepEqual(fetched(second, 'h', true), ['t1-0=-1', 't1-1=UNSTABLE'])
  assert.deepEqual(fetched(second, 'only-pending', true), ['t1-0=UNSTABLE', 't1-1=-1'])
  log.appendMarker(open.producerId, 0, true)
  second.onTransactionMarker(CONSUMER_OFFSETS_TOPIC, 0, open.producerId, 'commit')
  assert.deepEqual(fetched(second, 'h', true), ['t1-0=-1', 't1-1=300'])
  assert.deepEqual(fetched(second, 'only-pending', true), ['t1-0=400', 't1-1=-1'])
})

test('a marker that arrives while the partition is loading is applied once the load is done', async () => {
  const clock = new ManualClock()
  const log = new MemoryLog()
  const first = startCoordinator(clock, log)
  await loaded(first)
  await txnCommit(first, 'g', [['t1', 0, 10]])
  let openGate = (): void => {}
  log.readGate = new Promise<void>((resolve) => {
    openGate = resolve
  })
  const second = startCoordinator(clock, log)
  await settle()
  assert.equal(second.fetchOffsets('g', null).errorCode, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
  // The marker lands past the log end the load read up to.
  log.appendMarker(PRODUCER.producerId, PRODUCER.producerEpoch, true)
  second.onTransactionMarker(CONSUMER_OFFSETS_TOPIC, 0, PRODUCER.producerId, 'commit')
  log.readGate = null
  openGate()
  await loaded(second)
  assert.deepEqual(fetched(second, 'g', true), ['t1-0=10', 't1-1=-1'])
})

test('OffsetDelete drops the pending transactional offsets they cover', async () => {
  const clock = new ManualClock()
  const log = new MemoryLog()
  const coordinator = startCoordinator(clock, log)
  await loaded(coordinator)
  await txnCommit(coordinator, 'g', [
    ['t1', 0, 10],
    ['t1', 1, 10],
  ])
  const deleted = await coordinator.deleteOffsets('g', [{ topic: 't1', partition: 0 }])
  assert.deepEqual([...deleted.partitions.values()], [ErrorCode.NONE])
  coordinator.onTransactionMarker(CONSUMER_OFFSETS_TOPIC, 0, PRODUCER.producerId, 'commit')
  assert.deepEqual(fetched(coordinator, 'g', true), ['t1-0=-1', 't1-1=10'])
})
