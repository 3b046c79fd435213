/**
 * Issue 15, log side, against real brokers through tidelog's own codecs: transactional
 * produce, WriteTxnMarkers (COMMIT/ABORT control batches written as leader with acks=all,
 * epoch and coordinator-epoch fencing, per-partition errors), Fetch read_committed up to
 * the LSO with the aborted transactions of the range, ListOffsets read_committed, and
 * followers replicating open transactions and the aborted-transaction index.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kafka, logLevel } from 'kafkajs'
import { type Offset, toProducerId } from '../../src/common/types.js'
import { BatchHeader } from '../../src/protocol/batch-header.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import {
  ApiKey,
  type FetchResponse,
  type ListOffsetsResponse,
  type ProduceResponse,
  type WriteTxnMarkersResponse,
} from '../../src/protocol/generated/index.js'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import { startCluster } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

const TOPIC = 'txn-log'
const PID = toProducerId(4242n)

function batch(seq: number, count: number, transactional: boolean): Buffer {
  return encodeRecordBatchSync({
    records: Array.from({ length: count }, (_, i) => ({
      value: Buffer.from(`r${seq + i}`),
      timestamp: Date.now(),
    })),
    producerId: transactional ? PID : -1n,
    producerEpoch: transactional ? 0 : -1,
    baseSequence: transactional ? seq : -1,
    isTransactional: transactional,
  })
}

function batchesOf(
  records: FetchResponse['responses'][number]['partitions'][number]['records'],
): BatchHeader[] {
  const buf = records === null ? Buffer.alloc(0) : Buffer.isBuffer(records) ? records : Buffer.concat(records)
  const headers: BatchHeader[] = []
  for (let at = 0; at + 12 <= buf.length; ) {
    const header = new BatchHeader(buf, at)
    headers.push(header)
    at += header.sizeInBytes
  }
  return headers
}

test('transactional batches, WriteTxnMarkers and read_committed fetches on a 3-broker cluster', async () => {
  // The coordinator is not part of this test: KIP-890 verification is tested below.
  const cluster = await startCluster({
    brokers: 3,
    port: 0,
    properties: { 'transaction.partition.verification.enable': false },
  })
  const kafka = new Kafka({ brokers: cluster.bootstrapServers.split(','), logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  let client: RawClient | undefined
  try {
    await admin.connect()
    await admin.createTopics({
      topics: [{ topic: TOPIC, numPartitions: 1, replicationFactor: 3 }],
      waitForLeaders: true,
    })
    let leaderIndex = -1
    for (let attempt = 0; attempt < 300 && leaderIndex < 0; attempt++) {
      leaderIndex = cluster.brokers.findIndex(
        (b) => b.replicaManager.getPartition(TOPIC, 0)?.isLeader === true,
      )
      if (leaderIndex < 0) await new Promise((resolve) => setTimeout(resolve, 10))
    }
    assert.ok(leaderIndex >= 0, 'a leader')
    const address = cluster.bootstrapServers.split(',')[leaderIndex]
    client = await RawClient.connect(Number(address.split(':')[1]))
    const raw = client

    const produce = async (records: Buffer): Promise<number> => {
      const response = await rawCall<ProduceResponse>(raw, ApiKey.Produce, 8, {
        transactionalId: 'tx-1',
        acks: -1,
        timeoutMs: 5000,
        topicData: [{ name: TOPIC, partitionData: [{ index: 0, records }] }],
      })
      return response.responses[0].partitionResponses[0].errorCode
    }
    const markers = async (
      commit: boolean,
      producerEpoch: number,
      coordinatorEpoch: number,
      partitions = [0],
    ) => {
      const response = await rawCall<WriteTxnMarkersResponse>(raw, ApiKey.WriteTxnMarkers, 1, {
        markers: [
          {
            producerId: PID,
            producerEpoch,
            transactionResult: commit,
            coordinatorEpoch,
            topics: [{ name: TOPIC, partitionIndexes: partitions }],
          },
        ],
      })
      assert.equal(response.markers[0].producerId, PID)
      return response.markers[0].topics[0].partitions.map((p) => [p.partitionIndex, p.errorCode])
    }
    const fetchCommitted = async (fetchOffset: number, maxWaitMs = 0, on = raw) => {
      const response = await rawCall<FetchResponse>(on, ApiKey.Fetch, 11, {
        replicaId: -1,
        maxWaitMs,
        minBytes: maxWaitMs > 0 ? 1 : 0,
        maxBytes: 1 << 20,
        isolationLevel: 1,
        sessionId: 0,
        sessionEpoch: -1,
        topics: [
          {
            topic: TOPIC,
            partitions: [
              {
                partition: 0,
                fetchOffset: BigInt(fetchOffset),
                partitionMaxBytes: 1 << 20,
                currentLeaderEpoch: -1,
                logStartOffset: -1n,
                lastFetchedEpoch: -1,
              },
            ],
          },
        ],
        forgottenTopicsData: [],
        rackId: '',
      })
      return response.responses[0].partitions[0]
    }
    const latestCommitted = async () => {
      const response = await rawCall<ListOffsetsResponse>(raw, ApiKey.ListOffsets, 5, {
        replicaId: -1,
        isolationLevel: 1,
        topics: [
          {
            name: TOPIC,
            partitions: [{ partitionIndex: 0, timestamp: -1n, currentLeaderEpoch: -1, maxNumOffsets: 1 }],
          },
        ],
      })
      return Number(response.topics[0].partitions[0].offset)
    }

    assert.equal(await produce(batch(0, 1, false)), ErrorCode.NONE) // offset 0
    assert.equal(await produce(batch(0, 3, true)), ErrorCode.NONE) // 1-3: the transaction opens at 1
    let fetched = await fetchCommitted(0)
    assert.equal(fetched.highWatermark, 4n)
    assert.equal(fetched.lastStableOffset, 1n, 'the open transaction holds the LSO')
    assert.deepEqual(
      batchesOf(fetched.records).map((b) => b.baseOffset),
      [0],
    )
    assert.equal(await latestCommitted(), 1)

    assert.deepEqual(await markers(false, 0, 5), [[0, ErrorCode.NONE]]) // ABORT at 4
    fetched = await fetchCommitted(0)
    assert.equal(fetched.lastStableOffset, 5n)
    assert.deepEqual(fetched.abortedTransactions, [{ producerId: PID, firstOffset: 1n }])
    const batches = batchesOf(fetched.records)
    assert.deepEqual(
      batches.map((b) => [b.baseOffset, b.isControl]),
      [
        [0, false],
        [1, false],
        [4, true],
      ],
    )
    assert.equal(await latestCommitted(), 5)

    // The next transaction commits; a marker from an older coordinator epoch is fenced.
    assert.equal(await produce(batch(3, 2, true)), ErrorCode.NONE) // 5-6
    assert.deepEqual(await markers(true, 0, 4), [[0, ErrorCode.TRANSACTION_COORDINATOR_FENCED]])
    assert.equal(await latestCommitted(), 5)
    assert.deepEqual(await markers(true, 0, 5, [0, 7]), [
      [0, ErrorCode.NONE],
      [7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
    ])
    fetched = await fetchCommitted(5)
    assert.equal(fetched.lastStableOffset, 8n)
    assert.deepEqual(fetched.abortedTransactions, [], 'a committed range has no aborted transactions')
    // A read_committed long poll at the LSO waits for the commit, not for the open records.
    assert.equal(await produce(batch(5, 1, true)), ErrorCode.NONE) // 8
    const consumer = await RawClient.connect(Number(address.split(':')[1]))
    try {
      const startedMs = Date.now()
      const polled = fetchCommitted(8, 10_000, consumer)
      await new Promise((resolve) => setTimeout(resolve, 200))
      assert.deepEqual(await markers(true, 0, 5), [[0, ErrorCode.NONE]]) // COMMIT at 9
      const woken = await polled
      assert.ok(Date.now() - startedMs < 5000, 'woken by the LSO moving')
      assert.equal(woken.lastStableOffset, 10n)
      assert.deepEqual(
        batchesOf(woken.records).map((b) => b.baseOffset),
        [8, 9],
      )
    } finally {
      consumer.close()
    }
    // A producer epoch older than the producer's: the marker is refused.
    const bumped = await rawCall<WriteTxnMarkersResponse>(raw, ApiKey.WriteTxnMarkers, 0, {
      markers: [
        {
          producerId: PID,
          producerEpoch: 1,
          transactionResult: false,
          coordinatorEpoch: 5,
          topics: [{ name: TOPIC, partitionIndexes: [0] }],
        },
      ],
    })
    assert.equal(bumped.markers[0].topics[0].partitions[0].errorCode, ErrorCode.NONE)
    assert.deepEqual(await markers(false, 0, 5), [[0, ErrorCode.INVALID_PRODUCER_EPOCH]])

    // Followers (acks=all put every write in the ISR) hold the same transactions.
    const leaderLog = cluster.brokers[leaderIndex].replicaManager.getPartition(TOPIC, 0)!.log
    for (const [i, broker] of cluster.brokers.entries()) {
      if (i === leaderIndex) continue
      const partition = broker.replicaManager.getPartition(TOPIC, 0)!
      assert.equal(partition.log.logEndOffset, leaderLog.logEndOffset)
      assert.deepEqual(
        partition.log.collectAbortedTransactions(0 as Offset, partition.log.logEndOffset),
        leaderLog.collectAbortedTransactions(0 as Offset, leaderLog.logEndOffset),
      )
      assert.equal(partition.producerState?.lastEntry(PID)?.producerEpoch, 1)
      assert.equal(partition.producerState?.ongoingTransactions.size, 0)
    }
  } finally {
    client?.close()
    await admin.disconnect()
    await cluster.stop()
  }
})
