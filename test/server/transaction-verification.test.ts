/**
 * KIP-890 part 1 on a real broker, with a stand-in for the transaction coordinator's
 * TransactionVerifier: a transactional produce that would open a transaction is verified
 * first (Kafka's error translation), a marker written while a verification is in flight
 * voids it (the late write of an aborted transaction is refused instead of hanging the
 * LSO), the marker listener hears of each marker, and DescribeProducers shows the state.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type {
  TransactionMarkerListener,
  TransactionVerificationRequest,
  TransactionVerifier,
} from '../../src/common/transaction.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import {
  ApiKey,
  apis,
  type DescribeProducersResponse,
  type IncrementalAlterConfigsResponse,
  loadAllApiCodecs,
  type ProduceResponse,
  type WriteTxnMarkersResponse,
} from '../../src/protocol/generated/index.js'
import { defaultProduceRequest } from '../../src/protocol/generated/produce-request.js'
import { decodeResponseHeader } from '../../src/protocol/generated/response-header.js'
import { Reader } from '../../src/protocol/primitives.js'
import { encodeRecordBatchSync } from '../../src/protocol/record-batch.js'
import { startCluster } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { createTopic } from '../helpers/topics.js'

// The tests below call the registry's codecs directly, which need them loaded.
await loadAllApiCodecs()

const TOPIC = 'verified'
const PID = 77n

function txnBatch(seq: number, producerId = PID): Buffer {
  return encodeRecordBatchSync({
    records: [{ value: Buffer.from(`r${seq}`), timestamp: Date.now() }],
    producerId,
    producerEpoch: 0,
    baseSequence: seq,
    isTransactional: true,
  })
}

test('transactional produce is verified with the coordinator before it opens a transaction (KIP-890)', async () => {
  const cluster = await startCluster({ brokers: 1, port: 0 })
  let client: RawClient | undefined
  let coordinatorClient: RawClient | undefined
  try {
    await createTopic(cluster, TOPIC, { partitions: 3 })
    const broker = cluster.brokers[0]
    client = await RawClient.connect(Number(cluster.bootstrapServers.split(':').at(-1)))
    const raw = client
    // The markers come on their own connection, as from a coordinator: responses on one
    // connection leave in order, and a produce may wait for its verification.
    coordinatorClient = await RawClient.connect(Number(cluster.bootstrapServers.split(':').at(-1)))
    const coordinatorRaw = coordinatorClient
    const produce = async (partition: number, seq: number) => {
      const response = await rawCall<ProduceResponse>(raw, ApiKey.Produce, 9, {
        transactionalId: 'tx-v',
        acks: -1,
        timeoutMs: 5000,
        topicData: [{ name: TOPIC, partitionData: [{ index: partition, records: txnBatch(seq) }] }],
      })
      return response.responses[0].partitionResponses[0].errorCode
    }
    const abort = async (partition: number) => {
      const response = await rawCall<WriteTxnMarkersResponse>(coordinatorRaw, ApiKey.WriteTxnMarkers, 1, {
        markers: [
          {
            producerId: PID,
            producerEpoch: 0,
            transactionResult: false,
            coordinatorEpoch: 0,
            topics: [{ name: TOPIC, partitionIndexes: [partition] }],
          },
        ],
      })
      return response.markers[0].topics[0].partitions[0].errorCode
    }

    // The broker's own coordinator, before any transactional id was placed: no
    // __transaction_state, so no coordinator to ask (Kafka: COORDINATOR_NOT_AVAILABLE,
    // translated for Produce into the retriable NOT_ENOUGH_REPLICAS).
    assert.equal(await produce(0, 0), ErrorCode.NOT_ENOUGH_REPLICAS)
    // A broker built without a coordinator: nothing can verify, so the batch is refused.
    Object.defineProperty(broker, 'transactionVerifier', { value: undefined, configurable: true })
    assert.equal(await produce(0, 0), ErrorCode.INVALID_TXN_STATE)

    const asked: TransactionVerificationRequest[] = []
    let gate: Promise<void> | undefined
    const verifier: TransactionVerifier = {
      async verify(request) {
        // The leader's guard restart is a callback; the question is the rest.
        const { beforeRetry, ...question } = request
        assert.equal(typeof beforeRetry, 'function')
        asked.push(question)
        await gate
        if (request.partition === 1) return ErrorCode.INVALID_TXN_STATE
        if (request.partition === 2) return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE
      },
    }
    const heard: unknown[][] = []
    const listener: TransactionMarkerListener = (...args) => heard.push(args)
    // The services' contract (BrokerServices.transactionVerifier, onTransactionMarker), set as the coordinator would.
    Object.defineProperty(broker, 'transactionVerifier', { value: verifier, configurable: true })
    Object.defineProperty(broker, 'onTransactionMarker', { value: listener, configurable: true })

    assert.equal(await produce(0, 0), ErrorCode.NONE)
    assert.deepEqual(asked, [
      {
        transactionalId: 'tx-v',
        producerId: PID,
        producerEpoch: 0,
        topic: TOPIC,
        partition: 0,
        // Produce below v12: verified, not added (transaction version 1).
        addPartition: false,
      },
    ])
    assert.equal(await produce(0, 1), ErrorCode.NONE)
    assert.equal(asked.length, 1, 'a write inside the open transaction is not verified again')
    assert.equal(await produce(1, 0), ErrorCode.INVALID_TXN_STATE, 'not added to the transaction')
    assert.equal(await produce(2, 0), ErrorCode.NOT_ENOUGH_REPLICAS, 'coordinator unavailable: retriable')

    const described = await rawCall<DescribeProducersResponse>(raw, ApiKey.DescribeProducers, 0, {
      topics: [{ name: TOPIC, partitionIndexes: [0, 9] }],
    })
    const [p0, p9] = described.topics[0].partitions
    assert.equal(p0.errorCode, ErrorCode.NONE)
    assert.equal(p0.activeProducers.length, 1)
    assert.equal(p0.activeProducers[0].producerId, PID)
    assert.equal(p0.activeProducers[0].lastSequence, 1)
    assert.equal(p0.activeProducers[0].currentTxnStartOffset, 0n)
    assert.equal(p0.activeProducers[0].coordinatorEpoch, -1)
    assert.equal(p9.errorCode, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    assert.equal(await abort(0), ErrorCode.NONE)
    assert.deepEqual(heard, [[TOPIC, 0, PID, 'abort']])
    assert.equal(broker.replicaManager.getPartition(TOPIC, 0)?.producerState?.ongoingTransactions.size, 0)

    // A late write: verified while its transaction was still open, the abort marker lands
    // before it is appended. The voided verification refuses it.
    let open: () => void = () => {}
    gate = new Promise((resolve) => {
      open = resolve
    })
    const late = produce(0, 2)
    while (asked.length < 4) await new Promise((resolve) => setTimeout(resolve, 5))
    assert.equal(await abort(0), ErrorCode.NONE)
    open()
    assert.equal(await late, ErrorCode.INVALID_TXN_STATE)
    const partition = broker.replicaManager.getPartition(TOPIC, 0)!
    assert.equal(partition.producerState?.ongoingTransactions.size, 0, 'no transaction hangs the LSO')
    assert.equal(partition.lastStableOffset, partition.highWatermark)
    gate = undefined
    assert.equal(await produce(0, 2), ErrorCode.NONE, 'verified again, the next transaction opens')

    // Pipelined requests of one producer, both waiting for verification, keep their order.
    gate = new Promise((resolve) => {
      open = resolve
    })
    const pipelined = [3, 4].map((seq, i) =>
      RawClient.frame(ApiKey.Produce, 9, 9000 + i, {
        ...defaultProduceRequest(),
        transactionalId: 'tx-v',
        acks: 1,
        timeoutMs: 5000,
        topicData: [{ name: TOPIC, partitionData: [{ index: 0, records: txnBatch(seq, 80n) }] }],
      }),
    )
    for (const frame of pipelined) raw.write(frame)
    await new Promise((resolve) => setTimeout(resolve, 50))
    open()
    const answers: ProduceResponse[] = []
    for (let i = 0; i < 2; i++) {
      const frame = await raw.readFrame()
      assert.ok(frame !== null)
      const reader = new Reader(frame)
      decodeResponseHeader(reader, apis.get(ApiKey.Produce)!.responseHeaderVersion(9))
      answers.push(apis.get(ApiKey.Produce)!.decodeResponse(reader, 9) as ProduceResponse)
    }
    const results = answers.map((a) => a.responses[0].partitionResponses[0])
    assert.deepEqual(
      results.map((r) => r.errorCode),
      [ErrorCode.NONE, ErrorCode.NONE],
    )
    assert.equal(results[1].baseOffset, results[0].baseOffset + 1n, 'appended in arrival order')

    // Transactional records need a transactional id (Kafka's authorization step refuses them).
    const anonymous = await rawCall<ProduceResponse>(raw, ApiKey.Produce, 9, {
      transactionalId: null,
      acks: 1,
      timeoutMs: 5000,
      topicData: [{ name: TOPIC, partitionData: [{ index: 0, records: txnBatch(0, 81n) }] }],
    })
    assert.equal(
      anonymous.responses[0].partitionResponses[0].errorCode,
      ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    )

    // transaction.partition.verification.enable is dynamic, as in Kafka: off at the cluster
    // default, a batch the coordinator would refuse opens its transaction unverified.
    const altered = await rawCall<IncrementalAlterConfigsResponse>(raw, ApiKey.IncrementalAlterConfigs, 0, {
      resources: [
        {
          resourceType: 4,
          resourceName: '',
          configs: [
            { name: 'transaction.partition.verification.enable', configOperation: 0, value: 'false' },
          ],
        },
      ],
      validateOnly: false,
    })
    assert.equal(altered.responses[0].errorCode, ErrorCode.NONE)
    for (let i = 0; i < 200; i++) {
      if (
        broker.metadataImage().brokerConfigs?.get('')?.['transaction.partition.verification.enable'] ===
        'false'
      )
        break
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    const asksBefore = asked.length
    assert.equal(await produce(1, 0), ErrorCode.NONE)
    assert.equal(asked.length, asksBefore, 'the coordinator was not asked')
  } finally {
    client?.close()
    coordinatorClient?.close()
    await cluster.stop()
  }
})
