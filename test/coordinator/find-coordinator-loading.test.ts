/**
 * Issue 18 item 2: while the coordinator loads its __consumer_offsets partition,
 * FindCoordinator answers COORDINATOR_NOT_AVAILABLE (kafkajs retries it; it does not retry
 * the COORDINATOR_LOAD_IN_PROGRESS a JoinGroup would get), and a client that reaches the
 * coordinator anyway still gets COORDINATOR_LOAD_IN_PROGRESS. The partition's log is held
 * mid-read so the load lasts as long as the test wants.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import { systemRandom } from '../../src/common/random.js'
import { CONSUMER_OFFSETS_TOPIC, DEFAULT_COORDINATOR_CONFIG } from '../../src/coordinator/group.js'
import { GroupCoordinator } from '../../src/coordinator/group-coordinator.js'
import type { ClusterImage } from '../../src/metadata/cluster-image.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { Partition } from '../../src/replication/partition.js'
import { toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock } from '../storage/helpers.js'

/** One record batch of __consumer_offsets-0 whose read waits for `release()`. */
class HeldLog {
  readonly logStartOffset = 0
  readonly logEndOffset = 1
  private released!: () => void
  private readonly gate = new Promise<void>((resolve) => {
    this.released = resolve
  })
  release(): void {
    this.released()
  }
  async read() {
    await this.gate
    return { records: [], sizeInBytes: 0, nextOffset: 1 }
  }
}

function startCoordinator(clock: ManualClock, log: HeldLog): GroupCoordinator {
  const partition = { partition: 0, isLeader: true, leaderEpoch: 0, log } as unknown as Partition
  const image = {
    brokers: new Map([[1, { nodeId: 1, host: '127.0.0.1', port: 9092 }]]),
    topics: new Map([[CONSUMER_OFFSETS_TOPIC, { partitions: [{ partition: 0, leader: 1 }] }]]),
  } as unknown as ClusterImage
  const coordinator = new GroupCoordinator(
    {
      nodeId: toBrokerId(1),
      clock,
      random: systemRandom,
      logger: silentLogger,
      replicaManager: {
        getPartition: (topic, p) => (topic === CONSUMER_OFFSETS_TOPIC && p === 0 ? partition : undefined),
        appendToLeader: () => Promise.reject(new Error('not in this test')),
      },
      metadataImage: () => image,
      topicAdmin: { ensureInternalTopic: () => Promise.reject(new Error('not in this test')) },
    },
    {
      ...DEFAULT_COORDINATOR_CONFIG,
      offsetsTopicNumPartitions: 1,
      offsetsTopicReplicationFactor: 1,
      offsetsTopicSegmentBytes: 100 * 1024 * 1024,
      offsetsCommitTimeoutMs: 5000,
      offsetsRetentionCheckIntervalMs: 600_000,
      offsetsLoadBufferSize: 5 * 1024 * 1024,
    },
  )
  coordinator.onPartitionsChanged()
  return coordinator
}

/** Advances the manual clock in small steps until `promise` settles (bounded). */
async function settleOnClock<T>(clock: ManualClock, promise: Promise<T>, maxMs = 60_000): Promise<T> {
  let done = false
  void promise.finally(() => {
    done = true
  })
  for (let elapsed = 0; !done && elapsed <= maxMs; elapsed += 25) {
    clock.advance(25)
    await new Promise((resolve) => setImmediate(resolve))
  }
  assert.ok(done, `not settled after ${maxMs} ms of clock time`)
  return promise
}

test('FindCoordinator answers COORDINATOR_NOT_AVAILABLE while the partition loads, then the coordinator', async () => {
  const clock = new ManualClock()
  const log = new HeldLog()
  const coordinator = startCoordinator(clock, log)
  try {
    const whileLoading = await settleOnClock(clock, coordinator.findCoordinator('group-a'))
    assert.equal(whileLoading.errorCode, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert.equal(whileLoading.nodeId, -1)

    // A client that found the coordinator anyway (an older answer) still hears it is loading.
    const join = await coordinator.join({
      groupId: 'group-a',
      memberId: '',
      groupInstanceId: null,
      clientId: 'c',
      clientHost: '/127.0.0.1',
      sessionTimeoutMs: 10_000,
      rebalanceTimeoutMs: 10_000,
      protocolType: 'consumer',
      protocols: [{ name: 'range', metadata: Buffer.alloc(0) }],
      requireKnownMemberId: false,
      supportsSkipAssignment: false,
    })
    assert.equal(join.errorCode, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

    log.release()
    const loaded = await settleOnClock(clock, coordinator.findCoordinator('group-a'))
    assert.equal(loaded.errorCode, ErrorCode.NONE)
    assert.deepEqual([loaded.nodeId, loaded.host, loaded.port], [1, '127.0.0.1', 9092])
  } finally {
    coordinator.shutdown()
  }
})
