/**
 * OffsetForLeaderEpoch on a leader that has not appended in its own epoch yet. Kafka's
 * leader writes its epoch into the leader-epoch cache when elected, so an epoch between
 * the cache's latest and the current one ends at the log end; tidelog's log learns an
 * epoch only with its first batch, and answered "unknown" (-1/-1), sending followers back
 * to truncating to their own high watermark (the pre-KIP-101 behaviour).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { OffsetForLeaderEpochResponse } from '../../src/protocol/generated/offset-for-leader-epoch-response.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { simpleBatch } from '../storage/helpers.js'
import { ReplicationCluster, waitUntil } from './in-process-cluster.js'

test('a new leader answers OffsetForLeaderEpoch for epochs it has not written in yet', async () => {
  const cluster = await ReplicationCluster.start(3, {
    'broker.session.timeout.ms': 3000,
    'replica.fetch.backoff.ms': 200,
    'min.insync.replicas': 2,
  })
  try {
    await cluster.createTopic('epochs', 1, 3)
    const first = cluster.state('epochs', 0)
    const result = await cluster.broker(first.leader).replicaManager.appendToLeader({
      topic: 'epochs',
      partition: 0,
      records: simpleBatch(5),
      requiredAcks: -1,
      timeoutMs: 10000,
    })
    assert.equal(result.errorCode, ErrorCode.NONE)
    await cluster.stopBroker(first.leader)
    await waitUntil('a new leader', 5000, () => {
      const s = cluster.state('epochs', 0)
      return s.leader !== first.leader && s.leader >= 0
    })
    const { leader, leaderEpoch } = cluster.state('epochs', 0)
    assert.equal(leaderEpoch, first.leaderEpoch + 1)
    const log = cluster.replica(leader, 'epochs', 0).log
    assert.equal(log.latestEpoch, first.leaderEpoch, 'nothing written in the new epoch yet')
    const client = await RawClient.connect(cluster.broker(leader).port)
    try {
      const ask = (epoch: number) =>
        rawCall<OffsetForLeaderEpochResponse>(client, ApiKey.OffsetForLeaderEpoch, 3, {
          replicaId: 99,
          topics: [
            {
              topic: 'epochs',
              partitions: [{ partition: 0, currentLeaderEpoch: leaderEpoch, leaderEpoch: epoch }],
            },
          ],
        }).then((r) => r.topics[0].partitions[0])
      const current = await ask(leaderEpoch)
      assert.equal(current.errorCode, ErrorCode.NONE)
      assert.equal(current.endOffset, 5n)
      assert.equal(current.leaderEpoch, first.leaderEpoch)
      const old = await ask(first.leaderEpoch)
      assert.equal(old.endOffset, 5n)
      const future = await ask(leaderEpoch + 1)
      assert.equal(future.endOffset, -1n, 'an epoch past the current one stays unknown')
    } finally {
      client.socket.destroy()
    }
  } finally {
    await cluster.close()
  }
})
