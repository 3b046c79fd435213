/**
 * The transaction coordinator on three in-process brokers, spoken to in Kafka's wire
 * protocol: FindCoordinator with key type TRANSACTION (v1 and the batched v4) places a
 * transactional id on the leader of its __transaction_state partition, created on first
 * use; InitProducerId, AddPartitionsToTxn (v3 and the v4 verify_only form), Describe- and
 * ListTransactions there; NOT_COORDINATOR elsewhere; and the KIP-890 verifier asked from
 * the coordinator itself and from another broker (AddPartitionsToTxn v4 over the wire).
 */

import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { toProducerId } from '../../src/common/types.js'
import { partitionForTransactionalId } from '../../src/coordinator/transaction/transaction-state-manager.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { AddPartitionsToTxnResponse } from '../../src/protocol/generated/add-partitions-to-txn-response.js'
import type { DescribeTransactionsResponse } from '../../src/protocol/generated/describe-transactions-response.js'
import type { FindCoordinatorResponse } from '../../src/protocol/generated/find-coordinator-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { InitProducerIdResponse } from '../../src/protocol/generated/init-producer-id-response.js'
import type { ListTransactionsResponse } from '../../src/protocol/generated/list-transactions-response.js'
import type { Broker } from '../../src/server/broker.js'
import type { Cluster } from '../../src/server/cluster.js'
import { startCluster } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

const TOPIC = 'txn-coordinator-t'

async function call<T>(broker: Broker, apiKey: number, version: number, body: unknown): Promise<T> {
  const client = await RawClient.connect(broker.port)
  try {
    return await rawCall<T>(client, apiKey, version, body, 15000)
  } finally {
    client.close()
  }
}

describe('transaction coordinator on 3 brokers', () => {
  let cluster: Cluster
  before(async () => {
    cluster = await startCluster({
      brokers: 3,
      port: 0,
      properties: {
        'transaction.state.log.num.partitions': 5,
        'broker.session.timeout.ms': 3000,
        'offsets.topic.replication.factor': 3,
      },
    })
    const admin = cluster.brokers[0]
    await admin.topicAdmin.createTopics(
      [{ name: TOPIC, numPartitions: 3, replicationFactor: 3, assignments: [], configs: {} }],
      { validateOnly: false, timeoutMs: 10000 },
    )
  })
  after(async () => {
    await cluster?.stop()
  })

  it('finds, initialises, adds partitions, verifies and describes a transactional id', async () => {
    const txnId = 'tx-cluster-a'
    let found: FindCoordinatorResponse | null = null
    for (let attempt = 0; attempt < 100; attempt++) {
      found = await call<FindCoordinatorResponse>(cluster.brokers[1], ApiKey.FindCoordinator, 1, {
        key: txnId,
        keyType: 1,
      })
      if (found.errorCode === ErrorCode.NONE) break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    assert.equal(found?.errorCode, ErrorCode.NONE, `FindCoordinator: ${found?.errorMessage}`)
    const coordinator = cluster.brokers.find((b) => b.nodeId === found?.nodeId)
    assert.ok(coordinator, 'the coordinator is one of the brokers')
    assert.equal(found?.port, coordinator.port)
    // Broker 2 learns of the new __transaction_state partition's leader a moment after
    // broker 1 did; until then it answers COORDINATOR_NOT_AVAILABLE, as Kafka does.
    let batched = await call<FindCoordinatorResponse>(cluster.brokers[2], ApiKey.FindCoordinator, 4, {
      keyType: 1,
      coordinatorKeys: [txnId, ''],
    })
    for (
      let attempt = 0;
      batched.coordinators[0].errorCode === ErrorCode.COORDINATOR_NOT_AVAILABLE && attempt < 100;
      attempt++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      batched = await call<FindCoordinatorResponse>(cluster.brokers[2], ApiKey.FindCoordinator, 4, {
        keyType: 1,
        coordinatorKeys: [txnId, ''],
      })
    }
    assert.equal(
      batched.coordinators[0].errorCode,
      ErrorCode.NONE,
      batched.coordinators[0].errorMessage ?? '',
    )
    assert.equal(batched.coordinators[0].nodeId, coordinator.nodeId)
    assert.equal(batched.coordinators[1].errorCode, ErrorCode.INVALID_REQUEST)

    const other = cluster.brokers.find((b) => b !== coordinator)!
    const elsewhere = await call<InitProducerIdResponse>(other, ApiKey.InitProducerId, 4, {
      transactionalId: txnId,
      transactionTimeoutMs: 60000,
    })
    assert.equal(elsewhere.errorCode, ErrorCode.NOT_COORDINATOR)
    // Found through another broker, the coordinator may still be loading its partition.
    let init = await call<InitProducerIdResponse>(coordinator, ApiKey.InitProducerId, 4, {
      transactionalId: txnId,
      transactionTimeoutMs: 60000,
    })
    for (
      let attempt = 0;
      init.errorCode === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS && attempt < 100;
      attempt++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      init = await call<InitProducerIdResponse>(coordinator, ApiKey.InitProducerId, 4, {
        transactionalId: txnId,
        transactionTimeoutMs: 60000,
      })
    }
    assert.equal(init.errorCode, ErrorCode.NONE)
    assert.equal(init.producerEpoch, 0)
    const tooLong = await call<InitProducerIdResponse>(coordinator, ApiKey.InitProducerId, 4, {
      transactionalId: txnId,
      transactionTimeoutMs: 900_001,
    })
    assert.equal(tooLong.errorCode, ErrorCode.INVALID_TRANSACTION_TIMEOUT)

    const unknown = await call<AddPartitionsToTxnResponse>(coordinator, ApiKey.AddPartitionsToTxn, 3, {
      v3AndBelowTransactionalId: txnId,
      v3AndBelowProducerId: init.producerId,
      v3AndBelowProducerEpoch: init.producerEpoch,
      v3AndBelowTopics: [
        { name: TOPIC, partitions: [0] },
        { name: 'no-such-topic', partitions: [0] },
      ],
    })
    const codes = (r: AddPartitionsToTxnResponse['resultsByTopicV3AndBelow']) =>
      Object.fromEntries(
        r.flatMap((t) =>
          t.resultsByPartition.map((p) => [`${t.name}-${p.partitionIndex}`, p.partitionErrorCode]),
        ),
      )
    assert.deepEqual(codes(unknown.resultsByTopicV3AndBelow), {
      [`${TOPIC}-0`]: ErrorCode.OPERATION_NOT_ATTEMPTED,
      'no-such-topic-0': ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    })
    const added = await call<AddPartitionsToTxnResponse>(coordinator, ApiKey.AddPartitionsToTxn, 3, {
      v3AndBelowTransactionalId: txnId,
      v3AndBelowProducerId: init.producerId,
      v3AndBelowProducerEpoch: init.producerEpoch,
      v3AndBelowTopics: [{ name: TOPIC, partitions: [0, 1] }],
    })
    assert.deepEqual(codes(added.resultsByTopicV3AndBelow), {
      [`${TOPIC}-0`]: ErrorCode.NONE,
      [`${TOPIC}-1`]: ErrorCode.NONE,
    })
    const fencedOld = await call<AddPartitionsToTxnResponse>(coordinator, ApiKey.AddPartitionsToTxn, 1, {
      v3AndBelowTransactionalId: txnId,
      v3AndBelowProducerId: init.producerId,
      v3AndBelowProducerEpoch: init.producerEpoch + 5,
      v3AndBelowTopics: [{ name: TOPIC, partitions: [2] }],
    })
    assert.deepEqual(codes(fencedOld.resultsByTopicV3AndBelow), {
      [`${TOPIC}-2`]: ErrorCode.INVALID_PRODUCER_EPOCH,
    })

    const verify = await call<AddPartitionsToTxnResponse>(coordinator, ApiKey.AddPartitionsToTxn, 4, {
      transactions: [
        {
          transactionalId: txnId,
          producerId: init.producerId,
          producerEpoch: init.producerEpoch,
          verifyOnly: true,
          topics: [{ name: TOPIC, partitions: [1, 2] }],
        },
      ],
    })
    assert.equal(verify.errorCode, ErrorCode.NONE)
    assert.deepEqual(codes(verify.resultsByTransaction[0].topicResults), {
      [`${TOPIC}-1`]: ErrorCode.NONE,
      // Kafka 4.4's coordinator: not in the transaction is TRANSACTION_ABORTABLE (the leader
      // answers producers before Produce v11 INVALID_TXN_STATE).
      [`${TOPIC}-2`]: ErrorCode.TRANSACTION_ABORTABLE,
    })

    const claim = (partition: number, producerEpoch = init.producerEpoch) => ({
      transactionalId: txnId,
      producerId: toProducerId(init.producerId),
      producerEpoch,
      topic: TOPIC,
      partition,
    })
    for (const broker of cluster.brokers) {
      assert.equal(
        await broker.transactionVerifier.verify(claim(0)),
        ErrorCode.NONE,
        `verified from ${broker.nodeId}`,
      )
      assert.equal(await broker.transactionVerifier.verify(claim(2)), ErrorCode.TRANSACTION_ABORTABLE)
      assert.equal(await broker.transactionVerifier.verify(claim(1, 9)), ErrorCode.INVALID_PRODUCER_EPOCH)
    }

    // An id of the same __transaction_state partition that no producer used; and one of another.
    const samePartition = (id: string) =>
      partitionForTransactionalId(id, 5) === partitionForTransactionalId(txnId, 5)
    const neverSeen = Array.from({ length: 100 }, (_, i) => `never-seen-${i}`).find(samePartition)!
    const txnState = coordinator.metadataImage().topics.get('__transaction_state')!
    const ledElsewhere = (id: string) =>
      txnState.partitions[partitionForTransactionalId(id, 5)].leader !== coordinator.nodeId
    const elsewhereId = Array.from({ length: 100 }, (_, i) => `other-${i}`).find(ledElsewhere)!
    const described = await call<DescribeTransactionsResponse>(coordinator, ApiKey.DescribeTransactions, 0, {
      transactionalIds: [txnId, neverSeen, elsewhereId],
    })
    const [state, missing, notHere] = described.transactionStates
    assert.equal(notHere.errorCode, ErrorCode.NOT_COORDINATOR)
    assert.equal(state.errorCode, ErrorCode.NONE)
    assert.equal(state.transactionState, 'Ongoing')
    assert.equal(state.producerId, init.producerId)
    assert.deepEqual(state.topics, [{ topic: TOPIC, partitions: [0, 1] }])
    assert.ok(state.transactionStartTimeMs > 0n)
    assert.equal(missing.errorCode, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
    const listed = await call<ListTransactionsResponse>(coordinator, ApiKey.ListTransactions, 1, {
      stateFilters: ['Ongoing'],
      producerIdFilters: [],
      durationFilter: -1n,
    })
    assert.deepEqual(
      listed.transactionStates.map((s) => s.transactionalId),
      [txnId],
    )
  })
})
