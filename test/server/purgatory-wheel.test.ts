/**
 * The delayed fetches of a broker wait on its timing wheel (issue 38 item 2): many long
 * polls are many wheel entries, not many clock timers, and each is still answered no
 * earlier than its fetch.max.wait.ms.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ApiKey, type FetchResponse } from '../../src/protocol/generated/index.js'
import { ZERO_UUID } from '../../src/protocol/primitives.js'
import { BrokerClient } from '../../src/replication/broker-client.js'
import { nodeNetwork } from '../../src/runtime/node-network.js'
import { ReplicationCluster } from '../replication/in-process-cluster.js'

const POLLS = 40
const MAX_WAIT_MS = 600

test('long polls wait on the broker timing wheel and are answered no earlier than maxWaitMs', async () => {
  const cluster = await ReplicationCluster.start(1, {})
  const clients: BrokerClient[] = []
  try {
    await cluster.createTopic('waiting', 1, 1)
    const broker = cluster.broker(0)
    const wheel = broker.timingWheel
    const pendingBefore = wheel.pendingTimers
    const polls = Array.from({ length: POLLS }, async (_, i) => {
      const client = new BrokerClient('127.0.0.1', broker.port, `poll-${i}`, nodeNetwork)
      clients.push(client)
      const startedMs = performance.now()
      const response = await client.request<FetchResponse>(ApiKey.Fetch, 11, {
        replicaId: -1,
        maxWaitMs: MAX_WAIT_MS,
        minBytes: 1,
        maxBytes: 1 << 20,
        isolationLevel: 0,
        sessionId: 0,
        sessionEpoch: -1,
        topics: [
          {
            topic: 'waiting',
            topicId: ZERO_UUID,
            partitions: [
              {
                partition: 0,
                currentLeaderEpoch: -1,
                fetchOffset: 0n,
                lastFetchedEpoch: -1,
                logStartOffset: -1n,
                partitionMaxBytes: 1 << 20,
              },
            ],
          },
        ],
        forgottenTopicsData: [],
        rackId: '',
      })
      assert.equal(response.responses[0].partitions[0].errorCode, 0)
      return performance.now() - startedMs
    })
    // Every poll is parked once the wheel holds one entry each (or the test times out).
    const deadline = performance.now() + 10_000
    while (wheel.pendingTimers < pendingBefore + POLLS) {
      assert.ok(
        performance.now() < deadline,
        `${wheel.pendingTimers - pendingBefore} of ${POLLS} polls on the wheel`,
      )
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    const elapsedMs = await Promise.all(polls)
    for (const ms of elapsedMs) assert.ok(ms >= MAX_WAIT_MS, `a long poll answered after ${ms.toFixed(1)} ms`)
    assert.ok(wheel.pendingTimers < pendingBefore + POLLS, 'the expired polls left the wheel')
  } finally {
    for (const client of clients) client.close()
    await cluster.close()
  }
})
