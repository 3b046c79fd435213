/**
 * The replica fetcher over an injected transport and a manual clock: a leader connection
 * that never answers (half-open: no FIN, no RST) is dropped after the fetch wait plus the
 * request timeout and the fetcher reconnects, instead of stalling every partition it
 * carries forever.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { test } from 'node:test'
import { silentLogger } from '../../src/common/logger.js'
import type { ByteStream } from '../../src/common/network.js'
import { Partition } from '../../src/replication/partition.js'
import { ReplicaFetcherManager } from '../../src/replication/replica-fetcher.js'
import { nodeFileSystem } from '../../src/runtime/node-file-system.js'
import { UnifiedLog } from '../../src/storage/unified-log.js'
import { ManualClock, withTempDir } from '../storage/helpers.js'

const tick = () => new Promise((resolve) => setImmediate(resolve))

test('a fetch that is never answered drops the connection and reconnects', async () => {
  await withTempDir(async (dir) => {
    const clock = new ManualClock()
    const connections: { written: number; destroyed: boolean }[] = []
    const transport = {
      async connect(): Promise<ByteStream> {
        const state = { written: 0, destroyed: false }
        connections.push(state)
        return {
          remoteAddress: '127.0.0.1:1',
          writableNeedDrain: false,
          pause: () => undefined,
          resume: () => undefined,
          onDrain: () => undefined,
          write: () => void state.written++,
          onData: () => undefined,
          onClose: () => undefined,
          destroy: () => void (state.destroyed = true),
        }
      },
    }
    const log = await UnifiedLog.open({ fs: nodeFileSystem, dir: join(dir, 't-0'), clock })
    const partition = new Partition(
      // Fetch v13+ names topics by id: a real (base64url) Kafka uuid.
      { topic: 't', partition: 0, topicId: 'AAAAAAAAAAAAAAAAAAAAAg' },
      log,
      { partition: 0, replicas: [1, 2], isr: [1, 2], leader: 2, leaderEpoch: 0, partitionEpoch: 0 },
      { localBrokerId: 1, isFenced: () => false, nowMs: () => clock.now, alterIsr: async () => false },
    )
    const fetchers = new ReplicaFetcherManager({
      nodeId: 1,
      clock,
      logger: silentLogger,
      transport,
      brokerAddress: () => ({ host: '127.0.0.1', port: 1 }),
      fetchMaxBytes: 1 << 20,
      fetchResponseMaxBytes: 10 << 20,
      fetchWaitMaxMs: 500,
      fetchMinBytes: 1,
      fetchBackoffMs: 100,
      requestTimeoutMs: 2000,
    })
    try {
      fetchers.follow(partition, 2, 0)
      for (let i = 0; i < 10; i++) await tick()
      assert.equal(connections.length, 1)
      assert.equal(connections[0].written, 1, 'one fetch sent')
      clock.advance(2499)
      for (let i = 0; i < 10; i++) await tick()
      assert.equal(connections[0].destroyed, false, 'still within the timeout')
      clock.advance(1)
      for (let i = 0; i < 10; i++) await tick()
      assert.equal(connections[0].destroyed, true, 'the silent connection is dropped')
      clock.advance(100) // backoff
      for (let i = 0; i < 10; i++) await tick()
      assert.equal(connections.length, 2, 'and the fetcher reconnects')
      assert.equal(connections[1].written, 1)
    } finally {
      fetchers.shutdown()
      await log.close()
    }
  })
})
