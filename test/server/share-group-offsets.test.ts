/**
 * Share group offsets (KIP-932) with raw requests on one tidelog broker: ApiVersions,
 * DescribeShareGroupOffsets (unknown group, no state yet, after an alter, explicit
 * partitions, unknown topic), AlterShareGroupOffsets and DeleteShareGroupOffsets
 * (NON_EMPTY_GROUP with a member, GROUP_ID_NOT_FOUND for an unknown or classic group,
 * per-partition and per-topic errors), DeleteGroups, ListGroups' share filter and
 * DescribeGroups of a share group. The Java Admin test (test/compat/java-share-group-offsets)
 * checks the same against Kafka 4.4.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { Producer } from '../../src/client/producer.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { AlterShareGroupOffsetsResponse } from '../../src/protocol/generated/alter-share-group-offsets-response.js'
import type { ApiVersionsResponse } from '../../src/protocol/generated/api-versions-response.js'
import type { DeleteGroupsResponse } from '../../src/protocol/generated/delete-groups-response.js'
import type { DeleteShareGroupOffsetsResponse } from '../../src/protocol/generated/delete-share-group-offsets-response.js'
import type { DescribeGroupsResponse } from '../../src/protocol/generated/describe-groups-response.js'
import type { DescribeShareGroupOffsetsResponse } from '../../src/protocol/generated/describe-share-group-offsets-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { ListGroupsResponse } from '../../src/protocol/generated/list-groups-response.js'
import type { OffsetCommitResponse } from '../../src/protocol/generated/offset-commit-response.js'
import type { ShareGroupHeartbeatResponse } from '../../src/protocol/generated/share-group-heartbeat-response.js'
import type { Cluster } from '../../src/server/cluster.js'
import { createTopics } from '../client/helpers.js'
import { startBroker, startCluster } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { waitUntil } from '../helpers/wait.js'

const TOPIC = 'share-offsets'
const GROUP = 'share-offsets-group'
const CLASSIC = 'share-offsets-classic'
const MEMBER = 'c2hhcmUtbWVtYmVyLTAwMQ'

describe('share group offsets APIs', () => {
  let cluster: Cluster | undefined
  let raw: RawClient | undefined
  before(async () => {
    cluster = await startBroker({ port: 0, properties: { 'offsets.topic.num.partitions': 1 } })
    await createTopics(cluster.bootstrapServers, [{ topic: TOPIC, partitions: 2, replicationFactor: 1 }])
    const producer = new Producer({ bootstrapServers: cluster.bootstrapServers })
    for (let i = 0; i < 10; i++)
      await producer.send({ topic: TOPIC, partition: 0, value: Buffer.from(`v${i}`) })
    await producer.close()
    const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
    await admin.findCoordinator(GROUP)
    admin.close()
    raw = await RawClient.connect(Number(cluster.bootstrapServers.split(':')[1]))
  })
  after(async () => {
    raw?.close()
    await cluster?.stop()
  })

  const describeOffsets = (groupId: string, topics: { topicName: string; partitions: number[] }[] | null) =>
    rawCall<DescribeShareGroupOffsetsResponse>(raw as RawClient, ApiKey.DescribeShareGroupOffsets, 1, {
      groups: [{ groupId, topics }],
    }).then((r) => r.groups[0])
  const alter = (groupId: string, topicName: string, partitions: [number, bigint][]) =>
    rawCall<AlterShareGroupOffsetsResponse>(raw as RawClient, ApiKey.AlterShareGroupOffsets, 0, {
      groupId,
      topics: [
        {
          topicName,
          partitions: partitions.map(([partitionIndex, startOffset]) => ({ partitionIndex, startOffset })),
        },
      ],
    })
  const deleteOffsets = (groupId: string, topicNames: string[]) =>
    rawCall<DeleteShareGroupOffsetsResponse>(raw as RawClient, ApiKey.DeleteShareGroupOffsets, 0, {
      groupId,
      topics: topicNames.map((topicName) => ({ topicName })),
    })
  const deleteGroup = (groupId: string) =>
    rawCall<DeleteGroupsResponse>(raw as RawClient, ApiKey.DeleteGroups, 2, { groupsNames: [groupId] }).then(
      (r) => r.results[0].errorCode,
    )
  const heartbeat = (memberEpoch: number) =>
    rawCall<ShareGroupHeartbeatResponse>(raw as RawClient, ApiKey.ShareGroupHeartbeat, 1, {
      groupId: GROUP,
      memberId: MEMBER,
      memberEpoch,
      subscribedTopicNames: memberEpoch === 0 ? [TOPIC] : null,
    })
  /** partition → start/lag of each partition of TOPIC described. */
  const offsetsOf = (group: DescribeShareGroupOffsetsResponse['groups'][number]) =>
    Object.fromEntries(
      (group.topics.find((t) => t.topicName === TOPIC)?.partitions ?? []).map((p) => [
        p.partitionIndex,
        `${p.startOffset}/${p.lag}/${p.errorCode}`,
      ]),
    )

  it('advertises Kafka 4.4 versions', async () => {
    const versions = await rawCall<ApiVersionsResponse>(raw as RawClient, ApiKey.ApiVersions, 3, {
      clientSoftwareName: 'test',
      clientSoftwareVersion: '1',
    })
    const range = (key: number) => {
      const k = versions.apiKeys.find((a) => a.apiKey === key)
      return k && `${k.minVersion}-${k.maxVersion}`
    }
    assert.equal(range(ApiKey.DescribeShareGroupOffsets), '0-1')
    assert.equal(range(ApiKey.AlterShareGroupOffsets), '0-0')
    assert.equal(range(ApiKey.DeleteShareGroupOffsets), '0-0')
    // The share state requests brokers send the share coordinator.
    assert.equal(range(ApiKey.InitializeShareGroupState), '0-0')
    assert.equal(range(ApiKey.DeleteShareGroupState), '0-0')
    assert.equal(range(ApiKey.ReadShareGroupStateSummary), '0-1')
    assert.equal(range(ApiKey.ReadShareGroupState), '0-0')
    assert.equal(range(ApiKey.WriteShareGroupState), '0-1')
  })

  it('answers an unknown group as Kafka: no offsets, GROUP_ID_NOT_FOUND to delete, made by an alter', async () => {
    const described = await describeOffsets('no-such-group', null)
    assert.equal(described.errorCode, ErrorCode.NONE)
    assert.deepEqual(described.topics, [])
    assert.equal((await deleteOffsets('no-such-group', [TOPIC])).errorCode, ErrorCode.GROUP_ID_NOT_FOUND)
    assert.equal(await deleteGroup('no-such-group'), ErrorCode.GROUP_ID_NOT_FOUND)
    // An alter makes the (empty) share group, as Kafka; deleted again here.
    assert.equal((await alter('made-by-alter', TOPIC, [[1, 0n]])).errorCode, ErrorCode.NONE)
    assert.deepEqual(offsetsOf(await describeOffsets('made-by-alter', null)), { 1: '0/0/0' })
    assert.equal(await deleteGroup('made-by-alter'), ErrorCode.NONE)
  })

  it('refuses changes while the group has a member, and shows no start offset before any is written', async () => {
    let joined: ShareGroupHeartbeatResponse | undefined
    await waitUntil('the share member joins', 60_000, async () => {
      joined = await heartbeat(0)
      return joined.errorCode === ErrorCode.NONE
    })
    assert.ok(joined)
    // Assigned: the group has state there, nothing written yet (start -1, lag -1).
    assert.deepEqual(offsetsOf(await describeOffsets(GROUP, null)), { 0: '-1/-1/0', 1: '-1/-1/0' })
    assert.equal((await alter(GROUP, TOPIC, [[0, 3n]])).errorCode, ErrorCode.NON_EMPTY_GROUP)
    assert.equal((await deleteOffsets(GROUP, [TOPIC])).errorCode, ErrorCode.NON_EMPTY_GROUP)
    assert.equal(await deleteGroup(GROUP), ErrorCode.NON_EMPTY_GROUP)
    const listed = await rawCall<ListGroupsResponse>(raw as RawClient, ApiKey.ListGroups, 5, {
      statesFilter: [],
      typesFilter: ['share'],
    })
    assert.deepEqual(
      listed.groups.map((g) => `${g.groupId} ${g.protocolType} ${g.groupState} ${g.groupType}`),
      [`${GROUP} share Stable share`],
    )
    const classicOnly = await rawCall<ListGroupsResponse>(raw as RawClient, ApiKey.ListGroups, 5, {
      statesFilter: [],
      typesFilter: ['classic'],
    })
    assert.deepEqual(classicOnly.groups, [])
    const described = await rawCall<DescribeGroupsResponse>(raw as RawClient, ApiKey.DescribeGroups, 6, {
      groups: [GROUP],
      includeAuthorizedOperations: false,
    })
    assert.equal(described.groups[0].errorCode, ErrorCode.GROUP_ID_NOT_FOUND)
    assert.equal(described.groups[0].errorMessage, `Group ${GROUP} is not a classic group.`)
    assert.equal((await heartbeat(-1)).errorCode, ErrorCode.NONE)
  })

  it('alters the start offsets of an empty group, with per-partition errors', async () => {
    const altered = await alter(GROUP, TOPIC, [
      [0, 3n],
      [1, 0n],
      [7, 1n],
      [0, -5n],
    ])
    assert.equal(altered.errorCode, ErrorCode.NONE)
    assert.deepEqual(
      altered.responses[0].partitions.map((p) => `${p.partitionIndex}:${p.errorCode}`).sort(),
      [`0:${ErrorCode.INVALID_REQUEST}`, '0:0', '1:0', `7:${ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}`].sort(),
    )
    const unknownTopic = await alter(GROUP, 'no-such-topic', [[0, 1n]])
    assert.equal(unknownTopic.responses[0].partitions[0].errorCode, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    // Lag: the high watermark (10 on partition 0, 0 on 1) less the start offset.
    assert.deepEqual(offsetsOf(await describeOffsets(GROUP, null)), { 0: '3/7/0', 1: '0/0/0' })
    const explicit = await describeOffsets(GROUP, [
      { topicName: TOPIC, partitions: [0] },
      { topicName: 'no-such-topic', partitions: [0] },
    ])
    assert.deepEqual(offsetsOf(explicit), { 0: '3/7/0' })
    assert.deepEqual(
      explicit.topics.find((t) => t.topicName === 'no-such-topic')?.partitions.map((p) => p.startOffset),
      [-1n],
    )
  })

  it('deletes an empty group offsets by topic, then the group', async () => {
    const deleted = await deleteOffsets(GROUP, [TOPIC, 'no-such-topic'])
    assert.equal(deleted.errorCode, ErrorCode.NONE)
    assert.deepEqual(
      deleted.responses.map((t) => `${t.topicName}:${t.errorCode}`),
      [`${TOPIC}:0`, `no-such-topic:${ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}`],
    )
    assert.deepEqual((await describeOffsets(GROUP, null)).topics, [])
    // Again: the group has no state on the topic any more.
    assert.equal(
      (await deleteOffsets(GROUP, [TOPIC])).responses[0].errorCode,
      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )
    assert.equal(await deleteGroup(GROUP), ErrorCode.NONE)
    assert.equal(await deleteGroup(GROUP), ErrorCode.GROUP_ID_NOT_FOUND)
    const listed = await rawCall<ListGroupsResponse>(raw as RawClient, ApiKey.ListGroups, 5, {
      statesFilter: [],
      typesFilter: ['share'],
    })
    assert.deepEqual(listed.groups, [])
  })

  it('answers a classic group GROUP_ID_NOT_FOUND: it is not a share group', async () => {
    const commit = await rawCall<OffsetCommitResponse>(raw as RawClient, ApiKey.OffsetCommit, 8, {
      groupId: CLASSIC,
      generationIdOrMemberEpoch: -1,
      memberId: '',
      topics: [
        {
          name: TOPIC,
          topicId: 'AAAAAAAAAAAAAAAAAAAAAA',
          partitions: [
            {
              partitionIndex: 0,
              committedOffset: 0n,
              committedLeaderEpoch: -1,
              commitTimestamp: -1n,
              committedMetadata: null,
            },
          ],
        },
      ],
    })
    assert.equal(commit.topics[0].partitions[0].errorCode, ErrorCode.NONE)
    const altered = await alter(CLASSIC, TOPIC, [[0, 1n]])
    assert.equal(altered.errorCode, ErrorCode.GROUP_ID_NOT_FOUND)
    assert.equal(altered.errorMessage, `Group ${CLASSIC} is not a share group.`)
    assert.equal((await deleteOffsets(CLASSIC, [TOPIC])).errorCode, ErrorCode.GROUP_ID_NOT_FOUND)
  })
})

/**
 * Two brokers, a topic with a partition on each: the coordinator reads, alters and deletes
 * the state of the partition led by the other broker with the share state requests
 * (ReadShareGroupStateSummary and ListOffsets, InitializeShareGroupState,
 * DeleteShareGroupState), as of the one it leads itself.
 */
describe('share group offsets on partitions led by another broker', () => {
  const group = 'share-offsets-remote'
  let cluster: Cluster | undefined
  before(async () => {
    cluster = await startCluster({ brokers: 2, port: 0, properties: { 'offsets.topic.num.partitions': 1 } })
  })
  after(async () => {
    await cluster?.stop()
  })

  it('alters, describes and deletes the state on both leaders', { timeout: 120_000 }, async () => {
    assert.ok(cluster)
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: TOPIC, partitions: 2, replicationFactor: 1 }])
    const producer = new Producer({ bootstrapServers: bootstrap })
    for (let i = 0; i < 4; i++)
      await producer.send({ topic: TOPIC, partition: 0, value: Buffer.from(`a${i}`) })
    for (let i = 0; i < 6; i++)
      await producer.send({ topic: TOPIC, partition: 1, value: Buffer.from(`b${i}`) })
    await producer.close()
    const admin = new Admin({ bootstrapServers: bootstrap })
    const coordinatorId = await admin.findCoordinator(group)
    admin.close()
    const coordinator = cluster.brokers.find((b) => b.nodeId === coordinatorId)
    assert.ok(coordinator)
    const leaders = [0, 1].map(
      (p) => cluster?.brokers.find((b) => b.replicaManager.getPartition(TOPIC, p)?.isLeader)?.nodeId,
    )
    assert.ok(
      leaders.some((leader) => leader !== coordinatorId),
      `a partition led elsewhere than the coordinator ${coordinatorId}: leaders ${leaders}`,
    )
    const raw = await RawClient.connect(coordinator.port)
    try {
      const alter = await rawCall<AlterShareGroupOffsetsResponse>(raw, ApiKey.AlterShareGroupOffsets, 0, {
        groupId: group,
        topics: [
          {
            topicName: TOPIC,
            partitions: [
              { partitionIndex: 0, startOffset: 1n },
              { partitionIndex: 1, startOffset: 2n },
            ],
          },
        ],
      })
      assert.deepEqual(
        alter.responses[0].partitions.map((p) => `${p.partitionIndex}:${p.errorCode}`),
        ['0:0', '1:0'],
      )
      const describeAll = async () => {
        const r = await rawCall<DescribeShareGroupOffsetsResponse>(raw, ApiKey.DescribeShareGroupOffsets, 1, {
          groups: [{ groupId: group, topics: null }],
        })
        return (r.groups[0].topics[0]?.partitions ?? []).map(
          (p) => `${p.partitionIndex}:${p.startOffset}/${p.lag}/${p.errorCode}`,
        )
      }
      // Lag: the high watermark (4 and 6) less the start offset.
      assert.deepEqual(await describeAll(), ['0:1/3/0', '1:2/4/0'])
      const deleted = await rawCall<DeleteShareGroupOffsetsResponse>(raw, ApiKey.DeleteShareGroupOffsets, 0, {
        groupId: group,
        topics: [{ topicName: TOPIC }],
      })
      assert.equal(deleted.responses[0].errorCode, ErrorCode.NONE)
      assert.deepEqual(await describeAll(), [])
      // The leaders forgot the state: an explicit describe finds none on either partition.
      const explicit = await rawCall<DescribeShareGroupOffsetsResponse>(
        raw,
        ApiKey.DescribeShareGroupOffsets,
        1,
        {
          groups: [{ groupId: group, topics: [{ topicName: TOPIC, partitions: [0, 1] }] }],
        },
      )
      assert.deepEqual(
        explicit.groups[0].topics[0].partitions.map((p) => `${p.startOffset}/${p.errorCode}`),
        ['-1/0', '-1/0'],
      )
      const groups = await rawCall<DeleteGroupsResponse>(raw, ApiKey.DeleteGroups, 2, {
        groupsNames: [group],
      })
      assert.equal(groups.results[0].errorCode, ErrorCode.NONE)
    } finally {
      raw.close()
    }
  })
})
