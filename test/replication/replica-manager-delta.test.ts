/**
 * Issue 38: the replica manager applies an image by its delta (only the topics it names),
 * but only when the delta is relative to the image it was handed last: an image it never
 * saw (a listener registered late, a missed publish) would otherwise leave its changes
 * unapplied for good.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import { toPartitionEpoch } from '../../src/common/types.js'
import type { ClusterImage, PartitionState } from '../../src/metadata/cluster-image.js'
import type { ImageDelta } from '../../src/metadata/image-delta.js'
import type { ReplicaFetcherManager } from '../../src/replication/replica-fetcher-manager.js'
import { ReplicaManager } from '../../src/replication/replica-manager.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { DEFAULT_LOG_CONFIG } from '../../src/storage/log-config.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { ids, toBrokerId } from '../helpers/broker-ids.js'
import { ManualClock, withTempDir } from '../storage/helpers.js'

function state(overrides: Partial<PartitionState> = {}): PartitionState {
  return {
    partition: 0,
    replicas: ids(1, 2, 3),
    isr: ids(1, 2, 3),
    leader: toBrokerId(1),
    leaderEpoch: 0,
    partitionEpoch: toPartitionEpoch(0),
    ...overrides,
  }
}

function image(t: PartitionState, u: PartitionState): ClusterImage {
  return {
    clusterId: 'c',
    controllerId: toBrokerId(1),
    brokers: new Map(ids(1, 2, 3).map((id) => [id, { nodeId: id, host: 'h', port: id, rack: null }])),
    topics: new Map([
      ['t', { name: 't', topicId: 'id-t', partitions: [t], configs: {} }],
      ['u', { name: 'u', topicId: 'id-u', partitions: [u], configs: {} }],
    ]),
  }
}

function onlyTopic(name: string): ImageDelta {
  return { full: false, topics: new Map([[name, [0]]]), brokers: false, settings: false }
}

test('a delta is applied alone after the image it follows, and ignored after one the manager missed', async () => {
  await withTempDir(async (dir) => {
    const clock = new ManualClock()
    const logs: UnifiedLog[] = []
    const manager = new ReplicaManager({
      nodeId: toBrokerId(1),
      logs: {
        getOrCreateLog: async (tp) => {
          const log = await UnifiedLog.open({
            fs: nodeFileSystem,
            dir: join(dir, `${tp.topic}-${tp.partition}`),
            clock,
          })
          logs.push(log)
          return log
        },
        deleteLog: async () => undefined,
        moveLog: () => Promise.reject(new Error('not moved in this test')),
      },
      clock,
      logger: silentLogger,
      topicSettings: () => ({ logConfig: DEFAULT_LOG_CONFIG, minInsyncReplicas: 1 }),
      isFenced: () => false,
      alterIsr: async () => false,
      fetchers: { follow() {}, unfollow() {}, shutdown() {} } as unknown as ReplicaFetcherManager,
      replicaLagTimeMaxMs: 10_000,
    })
    try {
      const first = image(state(), state())
      await manager.applyImage(first)
      const epochOf = (topic: string) => manager.getPartition(topic, 0)?.leaderEpoch
      // Broker 2 leads u in epoch 1: a delta naming only t does not look at u.
      const scoped = image(
        first.topics.get('t')?.partitions[0] ?? state(),
        state({ leader: toBrokerId(2), leaderEpoch: 1 }),
      )
      await manager.applyImage(scoped, { previous: first, delta: onlyTopic('t') })
      assert.equal(epochOf('u'), 0, 'a topic the delta does not name is not applied')
      // Broker 2 leads t in epoch 1 in an image never handed to the manager; the next one's
      // delta names only u: relative to an image the manager missed, it is not used.
      const missed = image(
        state({ leader: toBrokerId(2), leaderEpoch: 1 }),
        state({ leader: toBrokerId(2), leaderEpoch: 1 }),
      )
      const next = image(
        missed.topics.get('t')?.partitions[0] ?? state(),
        state({ leader: toBrokerId(3), leaderEpoch: 2 }),
      )
      await manager.applyImage(next, { previous: missed, delta: onlyTopic('u') })
      assert.equal(epochOf('t'), 1, 'the missed change of t applied')
      assert.equal(epochOf('u'), 2)
    } finally {
      manager.shutdown()
      await manager.idle()
      for (const log of logs) await log.close()
    }
  })
})
