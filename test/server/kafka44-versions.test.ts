/**
 * Issue 33: the versions Kafka 4.x added, on a real broker with raw requests (the
 * differential sequence `kafka-4.4-versions` compares the same requests with Kafka 4.4).
 * ApiVersions advertises Kafka 4.4's maxima where tidelog has their semantics and its
 * feature levels (v4 and v3 differ, KAFKA-17011); v5 refuses a client that meant another
 * node; OffsetCommit/OffsetFetch v10 address topics by id and see the same offsets as v9 by
 * name; ListTransactions v2 filters by a transactional id pattern.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { Producer } from '../../src/client/producer.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { ApiVersionsResponse } from '../../src/protocol/generated/api-versions-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { ListTransactionsResponse } from '../../src/protocol/generated/list-transactions-response.js'
import type { MetadataResponse } from '../../src/protocol/generated/metadata-response.js'
import type { OffsetCommitResponse } from '../../src/protocol/generated/offset-commit-response.js'
import type { OffsetFetchResponse } from '../../src/protocol/generated/offset-fetch-response.js'
import { createTopics } from '../client/helpers.js'
import { withBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'

const TOPIC = 'v44'
const GROUP = 'v44-group'
const UNKNOWN_TOPIC_ID = 'AAAAAAAAAAAAAAAAAAAAAQ'
const SOFTWARE = { clientSoftwareName: 'test', clientSoftwareVersion: '1' }

test('Kafka 4.4 versions: ApiVersions features and targets, topic-id offsets, transactional id patterns', {
  timeout: 120_000,
}, async () => {
  await withBroker(
    async (cluster) => {
      const bootstrap = cluster.bootstrapServers
      await createTopics(bootstrap, [{ topic: TOPIC, partitions: 2 }])
      const admin = new Admin({ bootstrapServers: bootstrap })
      await admin.findCoordinator(GROUP)
      admin.close()
      const raw = await RawClient.connect(Number(bootstrap.split(':')[1]))
      try {
        // --------------------------------------------------------------- ApiVersions
        const v4 = await rawCall<ApiVersionsResponse>(raw, ApiKey.ApiVersions, 4, SOFTWARE)
        const max = new Map(v4.apiKeys.map((k) => [k.apiKey, k.maxVersion]))
        assert.deepEqual(
          [
            ApiKey.Produce,
            ApiKey.Fetch,
            ApiKey.ListOffsets,
            ApiKey.Metadata,
            ApiKey.OffsetCommit,
            ApiKey.OffsetFetch,
            ApiKey.DescribeGroups,
            ApiKey.ApiVersions,
            ApiKey.EndTxn,
            ApiKey.TxnOffsetCommit,
          ].map((k) => max.get(k)),
          [13, 18, 11, 13, 10, 10, 6, 5, 5, 6],
          "Kafka 4.4's maxima",
        )
        assert.deepEqual(
          v4.supportedFeatures.map((f) => [f.name, f.minVersion, f.maxVersion]),
          [
            ['group.version', 0, 1],
            ['kraft.version', 0, 0],
            ['share.version', 0, 1],
            ['streams.version', 0, 1],
            ['transaction.version', 0, 2],
          ],
        )
        assert.deepEqual(
          v4.finalizedFeatures.map((f) => [f.name, f.minVersionLevel, f.maxVersionLevel]),
          [
            ['group.version', 1, 1],
            ['share.version', 1, 1],
            ['streams.version', 1, 1],
            ['transaction.version', 2, 2],
          ],
          'transaction.version 2 by default, as Kafka 4.4: Kafka 4 producers use transaction version 2',
        )
        assert.equal(v4.finalizedFeaturesEpoch, 0n)
        const v3 = await rawCall<ApiVersionsResponse>(raw, ApiKey.ApiVersions, 3, SOFTWARE)
        assert.deepEqual(v3.supportedFeatures, [], 'below v4, no feature with minimum 0 (KAFKA-17011)')
        assert.equal(v3.finalizedFeatures.length, 4)

        const metadata = await rawCall<MetadataResponse>(raw, ApiKey.Metadata, 13, {
          topics: [{ name: TOPIC, topicId: 'AAAAAAAAAAAAAAAAAAAAAA' }],
        })
        assert.equal(metadata.errorCode, ErrorCode.NONE)
        const clusterId = metadata.clusterId!
        const nodeId = metadata.brokers[0].nodeId
        const topicId = metadata.topics[0].topicId
        const target = async (body: { clusterId: string | null; nodeId: number }) =>
          rawCall<ApiVersionsResponse>(raw, ApiKey.ApiVersions, 5, { ...SOFTWARE, ...body })
        const right = await target({ clusterId, nodeId })
        assert.equal(right.errorCode, ErrorCode.NONE)
        assert.equal(right.apiKeys.length, v4.apiKeys.length)
        for (const wrong of [
          { clusterId: 'elsewhere', nodeId },
          { clusterId, nodeId: nodeId + 1 },
        ]) {
          const answer = await target(wrong)
          assert.equal(answer.errorCode, ErrorCode.REBOOTSTRAP_REQUIRED, JSON.stringify(wrong))
          assert.deepEqual([answer.apiKeys, answer.finalizedFeatures], [[], []])
        }
        assert.equal((await target({ clusterId: null, nodeId })).errorCode, ErrorCode.INVALID_REQUEST)
        assert.equal((await target({ clusterId: null, nodeId: -1 })).errorCode, ErrorCode.NONE)

        // --------------------------------------------------------------- offsets by topic id
        const commit = await rawCall<OffsetCommitResponse>(raw, ApiKey.OffsetCommit, 10, {
          groupId: GROUP,
          generationIdOrMemberEpoch: -1,
          topics: [
            {
              name: '',
              topicId,
              partitions: [
                {
                  partitionIndex: 1,
                  committedOffset: 42n,
                  committedLeaderEpoch: -1,
                  committedMetadata: 'm',
                  commitTimestamp: -1n,
                },
              ],
            },
            {
              name: '',
              topicId: UNKNOWN_TOPIC_ID,
              partitions: [
                {
                  partitionIndex: 0,
                  committedOffset: 1n,
                  committedLeaderEpoch: -1,
                  committedMetadata: '',
                  commitTimestamp: -1n,
                },
              ],
            },
          ],
        })
        assert.deepEqual(
          commit.topics.map((t) => [t.topicId, t.partitions.map((p) => p.errorCode)]),
          [
            [topicId, [ErrorCode.NONE]],
            [UNKNOWN_TOPIC_ID, [ErrorCode.UNKNOWN_TOPIC_ID]],
          ],
        )
        const fetchV10 = await rawCall<OffsetFetchResponse>(raw, ApiKey.OffsetFetch, 10, {
          groups: [{ groupId: GROUP, memberId: null, memberEpoch: -1, topics: null }],
        })
        assert.deepEqual(
          fetchV10.groups[0].topics.map((t) => [
            t.topicId,
            t.partitions.map((p) => [p.partitionIndex, p.committedOffset]),
          ]),
          [[topicId, [[1, 42n]]]],
          'all topics, by id',
        )
        const fetchV9 = await rawCall<OffsetFetchResponse>(raw, ApiKey.OffsetFetch, 9, {
          groups: [
            {
              groupId: GROUP,
              memberId: null,
              memberEpoch: -1,
              topics: [{ name: TOPIC, partitionIndexes: [1] }],
            },
          ],
        })
        assert.equal(
          fetchV9.groups[0].topics[0].partitions[0].committedOffset,
          42n,
          'v9 by name sees the same offset',
        )
        const unknownV10 = await rawCall<OffsetFetchResponse>(raw, ApiKey.OffsetFetch, 10, {
          groups: [
            {
              groupId: GROUP,
              memberId: null,
              memberEpoch: -1,
              topics: [{ name: '', topicId: UNKNOWN_TOPIC_ID, partitionIndexes: [0] }],
            },
          ],
        })
        assert.equal(unknownV10.groups[0].topics[0].partitions[0].errorCode, ErrorCode.UNKNOWN_TOPIC_ID)
      } finally {
        raw.close()
      }

      // --------------------------------------------------------------- ListTransactions v2
      for (const transactionalId of ['v44-pattern-1', 'v44-other']) {
        const producer = new Producer({ bootstrapServers: bootstrap, transactionalId, lingerMs: 0 })
        await producer.initTransactions()
        await producer.close()
      }
      // One broker: it coordinates every transactional id.
      const txnRaw = await RawClient.connect(Number(bootstrap.split(':')[1]))
      try {
        const list = async (transactionalIdPattern: string | null) => {
          const r = await rawCall<ListTransactionsResponse>(txnRaw, ApiKey.ListTransactions, 2, {
            stateFilters: [],
            producerIdFilters: [],
            durationFilter: -1n,
            transactionalIdPattern,
          })
          return [r.errorCode, r.transactionStates.map((t) => t.transactionalId).sort()]
        }
        assert.deepEqual(await list(null), [ErrorCode.NONE, ['v44-other', 'v44-pattern-1']])
        assert.deepEqual(await list(''), [ErrorCode.NONE, ['v44-other', 'v44-pattern-1']])
        assert.deepEqual(await list('v44-pattern-.*'), [ErrorCode.NONE, ['v44-pattern-1']])
        assert.deepEqual(await list('pattern'), [ErrorCode.NONE, []], 'the whole id must match')
        assert.deepEqual(await list('v44-(['), [ErrorCode.INVALID_REGULAR_EXPRESSION, []])
      } finally {
        txnRaw.close()
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
