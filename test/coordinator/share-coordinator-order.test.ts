/**
 * The share coordinator runs one operation per share-partition key at a time. A new
 * partition leader's ReadShareGroupState (which records its leader epoch) issued while the
 * old leader's WriteShareGroupState is still being committed must answer with that write's
 * state, or the write must be fenced: never the old state with the write then answered as
 * done (the simulator's share workload, seed 7, delivered an accepted record again so).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import { ShareCoordinator } from '../../src/coordinator/share/share-coordinator.js'
import type { ShareStateRead } from '../../src/coordinator/share/share-coordinator-shard.js'
import { SHARE_GROUP_STATE_TOPIC } from '../../src/coordinator/share/share-state-records.js'
import type { ClusterImage } from '../../src/metadata/cluster-image.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { Partition } from '../../src/replication/partition.js'
import { toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock } from '../storage/helpers.js'
import { ToyPartition } from './toy-partition.js'

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
}

function start(partition: ToyPartition): ShareCoordinator {
  const image = {
    brokers: new Map([[1, { nodeId: 1, host: '127.0.0.1', port: 9092 }]]),
    topics: new Map([[SHARE_GROUP_STATE_TOPIC, { partitions: [{ partition: 0, leader: 1 }] }]]),
  } as unknown as ClusterImage
  const coordinator = new ShareCoordinator(
    {
      nodeId: toBrokerId(1),
      clock: new ManualClock(),
      logger: silentLogger,
      replicaManager: {
        getPartition: (topic, p) =>
          topic === SHARE_GROUP_STATE_TOPIC && p === 0 ? (partition as unknown as Partition) : undefined,
        appendToLeader: ({ records }) => partition.append(records),
      },
      metadataImage: () => image,
      topicAdmin: { ensureInternalTopic: () => Promise.reject(new Error('not in this test')) },
    },
    {
      numPartitions: 1,
      replicationFactor: 1,
      minIsr: 1,
      snapshotUpdateRecordsPerSnapshot: 500,
      writeTimeoutMs: 5000,
      loadBufferSize: 1024 * 1024,
    },
  )
  coordinator.onPartitionsChanged()
  return coordinator
}

const KEY = { groupId: 'g', topicId: 'dG9waWMtaWQtMDAwMDAwMA', partition: 0 }
const ACKNOWLEDGED = 2

test('a new leader read waits for the old leader write in flight on the same key', async () => {
  const partition = new ToyPartition()
  const coordinator = start(partition)
  await settle()
  // The old leader (epoch 1) has written offsets 0-9 available once.
  const first = coordinator.writeState(KEY, {
    stateEpoch: 0,
    leaderEpoch: 1,
    startOffset: 0,
    deliveryCompleteCount: 0,
    stateBatches: [{ firstOffset: 0, lastOffset: 9, deliveryState: 0, deliveryCount: 1 }],
  })
  await settle()
  partition.commitAll()
  assert.equal(await first, ErrorCode.NONE)

  // Its write of an ACCEPT of offset 3 is appended, not yet committed, when the new leader reads.
  let written: number | undefined
  const write = coordinator
    .writeState(KEY, {
      stateEpoch: 0,
      leaderEpoch: 1,
      startOffset: 0,
      deliveryCompleteCount: 1,
      stateBatches: [{ firstOffset: 3, lastOffset: 3, deliveryState: ACKNOWLEDGED, deliveryCount: 1 }],
    })
    .then((code) => {
      written = code
    })
  await settle()
  assert.equal(partition.pending, 1)
  let read: ShareStateRead | undefined
  const reading = coordinator.readState(KEY, 2).then((r) => {
    read = r
  })
  for (let i = 0; i < 5 && (read === undefined || written === undefined); i++) {
    await settle()
    partition.commitAll()
  }
  await Promise.all([write, reading])
  assert.ok(read && written !== undefined)
  assert.equal(read.errorCode, ErrorCode.NONE)
  const offset3 = read.stateBatches.find((b) => b.firstOffset <= 3 && b.lastOffset >= 3)
  if (written === ErrorCode.NONE)
    assert.equal(
      offset3?.deliveryState,
      ACKNOWLEDGED,
      `the write was answered as done, but the new leader read offset 3 as ${JSON.stringify(offset3)}`,
    )
  else assert.equal(written, ErrorCode.FENCED_LEADER_EPOCH)
})
