/**
 * TxnOffsetCommit (api 28) and OffsetFetch require_stable on a real broker, with raw
 * requests so each version and error is seen as a client would: KIP-890's verification
 * refuses a commit whose group partition was not added to the transaction
 * (INVALID_TXN_STATE), an added one is pending (UNSTABLE_OFFSET_COMMIT with require_stable
 * in OffsetFetch v7 and the batched v8, the old offset without) until EndTxn's COMMIT
 * marker makes it visible; an older producer epoch is fenced (INVALID_PRODUCER_EPOCH).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { Producer } from '../../src/client/producer.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { AddOffsetsToTxnResponse } from '../../src/protocol/generated/add-offsets-to-txn-response.js'
import type { EndTxnResponse } from '../../src/protocol/generated/end-txn-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { OffsetFetchResponse } from '../../src/protocol/generated/offset-fetch-response.js'
import type { TxnOffsetCommitResponse } from '../../src/protocol/generated/txn-offset-commit-response.js'
import { createTopics } from '../client/helpers.js'
import { withBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

const TXN_ID = 'raw-txn'

test('TxnOffsetCommit: verified against the transaction, pending until the COMMIT marker, fenced by epoch', {
  timeout: 120000,
}, async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: 'in' }])
      const admin = new Admin({ bootstrapServers: bootstrap })
      // The group's coordinator exists (and __consumer_offsets with it) before the raw calls.
      await admin.findCoordinator('g')
      admin.close()
      const producer = new Producer({ bootstrapServers: bootstrap, transactionalId: TXN_ID, lingerMs: 0 })
      const port = Number(bootstrap.split(':')[1])
      const raw = await RawClient.connect(port)
      try {
        await producer.initTransactions()
        const { producerId, producerEpoch } = producer.producerIdentity!
        const commit = (version: number, offset: number, epoch = producerEpoch) =>
          rawCall<TxnOffsetCommitResponse>(raw, ApiKey.TxnOffsetCommit, version, {
            transactionalId: TXN_ID,
            groupId: 'g',
            producerId,
            producerEpoch: epoch,
            generationIdOrMemberEpoch: -1,
            memberId: '',
            groupInstanceId: null,
            topics: [
              {
                name: 'in',
                partitions: [
                  {
                    partitionIndex: 0,
                    committedOffset: BigInt(offset),
                    committedLeaderEpoch: -1,
                    committedMetadata: '',
                  },
                ],
              },
            ],
          }).then((r) => r.topics[0].partitions[0].errorCode)
        const fetched = async (version: number, requireStable: boolean): Promise<string> => {
          const body =
            version >= 8
              ? {
                  groups: [
                    {
                      groupId: 'g',
                      memberId: null,
                      memberEpoch: -1,
                      topics: [{ name: 'in', partitionIndexes: [0] }],
                    },
                  ],
                  requireStable,
                }
              : { groupId: 'g', topics: [{ name: 'in', partitionIndexes: [0] }], requireStable }
          const r = await rawCall<OffsetFetchResponse>(raw, ApiKey.OffsetFetch, version, body)
          const p = (version >= 8 ? r.groups[0].topics : r.topics)[0].partitions[0]
          return p.errorCode === ErrorCode.UNSTABLE_OFFSET_COMMIT ? 'UNSTABLE' : String(p.committedOffset)
        }

        // The group's offsets partition is not in any transaction of this producer yet.
        assert.equal(await commit(3, 5), ErrorCode.INVALID_TXN_STATE)
        assert.equal(await fetched(7, true), '-1')

        producer.beginTransaction()
        const added = await rawCall<AddOffsetsToTxnResponse>(raw, ApiKey.AddOffsetsToTxn, 3, {
          transactionalId: TXN_ID,
          producerId,
          producerEpoch,
          groupId: 'g',
        })
        assert.equal(added.errorCode, ErrorCode.NONE)
        assert.equal(await commit(3, 5), ErrorCode.NONE)
        // v0 (no group metadata, as kafkajs) in the same transaction, a later offset.
        assert.equal(await commit(0, 6), ErrorCode.NONE)
        assert.equal(await fetched(7, true), 'UNSTABLE')
        assert.equal(await fetched(8, true), 'UNSTABLE')
        assert.equal(await fetched(7, false), '-1')
        assert.equal(await fetched(6, false), '-1')

        const ended = await rawCall<EndTxnResponse>(raw, ApiKey.EndTxn, 3, {
          transactionalId: TXN_ID,
          producerId,
          producerEpoch,
          committed: true,
        })
        assert.equal(ended.errorCode, ErrorCode.NONE)
        // The markers are written after EndTxn answers.
        const deadline = Date.now() + 10000
        while ((await fetched(8, true)) !== '6' && Date.now() < deadline)
          await new Promise((resolve) => setTimeout(resolve, 50))
        assert.equal(await fetched(8, true), '6')

        // A newer producer of the id bumps the epoch: the old epoch is fenced.
        const successor = new Producer({ bootstrapServers: bootstrap, transactionalId: TXN_ID })
        try {
          await successor.initTransactions()
          assert.equal(await commit(3, 9), ErrorCode.INVALID_PRODUCER_EPOCH)
        } finally {
          await successor.close()
        }
        assert.equal(await fetched(8, true), '6')
      } finally {
        raw.close()
        await producer.close()
      }
    },
    {
      properties: {
        'transaction.state.log.replication.factor': 1,
        'transaction.state.log.min.isr': 1,
        'transaction.state.log.num.partitions': 1,
        'offsets.topic.num.partitions': 1,
      },
    },
  )
})
