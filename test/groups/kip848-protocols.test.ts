/**
 * KIP-848 on the wire, driven by raw requests: a consumer group's state survives a
 * coordinator failover (the new coordinator loads the consumer-group records and accepts
 * the member's current epoch), and groups move between the classic and the consumer
 * protocol as Kafka 4 allows when empty (an empty classic group is upgraded with its
 * offsets, an empty consumer group downgraded) and refuse the other protocol when not
 * (GROUP_ID_NOT_FOUND, INCONSISTENT_GROUP_PROTOCOL). OffsetCommit/OffsetFetch v9 check the
 * member epoch.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { CONSUMER_OFFSETS_TOPIC, partitionForGroup } from '../../src/coordinator/group.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import {
  ApiKey,
  type ConsumerGroupDescribeResponse,
  type ConsumerGroupHeartbeatRequest,
  type ConsumerGroupHeartbeatResponse,
  type FindCoordinatorResponse,
  type JoinGroupResponse,
  type ListGroupsResponse,
  type OffsetCommitResponse,
  type OffsetFetchResponse,
} from '../../src/protocol/generated/index.js'
import { withBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { createTopic } from '../helpers/topics.js'
import { ReplicationCluster, waitUntil } from '../replication/in-process-cluster.js'
import { FAST_GROUP_PROPERTIES, produce, startConsumer, waitFor } from './helpers.js'

const RETRIABLE: readonly number[] = [
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
  ErrorCode.NOT_COORDINATOR,
]

/** A heartbeat, retried while the coordinator is being created, loaded or moved. */
async function heartbeat(
  client: RawClient,
  body: Partial<ConsumerGroupHeartbeatRequest>,
): Promise<ConsumerGroupHeartbeatResponse> {
  const deadline = Date.now() + 20000
  for (;;) {
    const response = await rawCall<ConsumerGroupHeartbeatResponse>(
      client,
      ApiKey.ConsumerGroupHeartbeat,
      1,
      body,
    )
    if (!RETRIABLE.includes(response.errorCode) || Date.now() > deadline) return response
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

function joinBody(groupId: string, memberId: string, topic: string): Partial<ConsumerGroupHeartbeatRequest> {
  return {
    groupId,
    memberId,
    memberEpoch: 0,
    rebalanceTimeoutMs: 30000,
    subscribedTopicNames: [topic],
    topicPartitions: [],
  }
}

/** Makes sure __consumer_offsets exists and the group's coordinator answers (FindCoordinator v4). */
async function findCoordinator(client: RawClient, groupId: string): Promise<number> {
  let nodeId = -1
  await waitFor('a coordinator', 20000, async () => {
    const r = await rawCall<FindCoordinatorResponse>(client, ApiKey.FindCoordinator, 4, {
      keyType: 0,
      coordinatorKeys: [groupId],
    })
    nodeId = r.coordinators[0]?.errorCode === 0 ? r.coordinators[0].nodeId : -1
    return nodeId >= 0
  })
  return nodeId
}

test('3 brokers: a consumer group keeps its members and epochs across a coordinator failover', async () => {
  const cluster = await ReplicationCluster.start(3, {
    ...FAST_GROUP_PROPERTIES,
    'offsets.topic.num.partitions': 3,
    // A target at every change: the second member's epoch below must not depend on whether
    // the failover took more than the assignment interval (KIP-1263's 1 s).
    'group.consumer.assignment.interval.ms': 0,
  })
  const clients: RawClient[] = []
  try {
    await cluster.createTopic('t', 4, 3)
    const group = 'kip848-failover'
    const first = await RawClient.connect(cluster.broker(0).port)
    clients.push(first)
    const coordinator = await findCoordinator(first, group)
    const atCoordinator = await RawClient.connect(cluster.broker(coordinator).port)
    clients.push(atCoordinator)
    const joined = await heartbeat(atCoordinator, joinBody(group, 'member-1', 't'))
    assert.equal(joined.errorCode, ErrorCode.NONE, joined.errorMessage ?? '')
    assert.equal(joined.memberEpoch, 1)
    assert.deepEqual(joined.assignment?.topicPartitions[0]?.partitions, [0, 1, 2, 3])
    const owned = joined.assignment?.topicPartitions ?? []

    const partition = partitionForGroup(group, 3)
    assert.equal(cluster.state(CONSUMER_OFFSETS_TOPIC, partition).leader, coordinator)
    await cluster.stopBroker(coordinator)
    await waitUntil('new coordinator elected', 20000, () => {
      const leader = cluster.state(CONSUMER_OFFSETS_TOPIC, partition).leader
      return leader >= 0 && leader !== coordinator
    })
    const next = cluster.state(CONSUMER_OFFSETS_TOPIC, partition).leader
    const atNext = await RawClient.connect(cluster.broker(next).port)
    clients.push(atNext)
    // The member's next heartbeat, with its epoch and partitions, is simply accepted.
    const again = await heartbeat(atNext, {
      groupId: group,
      memberId: 'member-1',
      memberEpoch: 1,
      topicPartitions: owned,
    })
    assert.equal(again.errorCode, ErrorCode.NONE, again.errorMessage ?? '')
    assert.equal(again.memberEpoch, 1)
    const described = await rawCall<ConsumerGroupDescribeResponse>(atNext, ApiKey.ConsumerGroupDescribe, 0, {
      groupIds: [group],
    })
    const d = described.groups[0]
    assert.equal(d.errorCode, ErrorCode.NONE)
    assert.equal(d.groupEpoch, 1)
    assert.equal(d.assignmentEpoch, 1)
    assert.equal(d.groupState, 'Stable')
    assert.deepEqual(
      d.members.map((m) => [m.memberId, m.memberEpoch, m.assignment.topicPartitions[0]?.partitions]),
      [['member-1', 1, [0, 1, 2, 3]]],
    )
    // A second member joins at the new coordinator: epoch 2, revocation first.
    const second = await heartbeat(atNext, joinBody(group, 'member-2', 't'))
    assert.equal(second.memberEpoch, 2)
    assert.deepEqual(second.assignment?.topicPartitions ?? [], [], 'member-1 has not revoked yet')
  } finally {
    for (const c of clients) c.close()
    await cluster.close()
  }
})

test('classic <-> consumer: empty groups switch protocol (offsets kept), non-empty ones refuse the other protocol', async () => {
  await withBroker(
    async (cluster) => {
      const topic = 'mig'
      await createTopic(cluster, topic, { partitions: 2 })
      const records = await produce(cluster.bootstrapServers, topic, 2, 3, 'r')
      const client = await RawClient.connect(cluster.brokers[0].port)
      try {
        const classic = await startConsumer(cluster.bootstrapServers, 'mg', topic, 'classic-member')
        try {
          await waitFor('classic member consumed', 30000, () => classic.values.length === records.length)
          // A consumer-protocol member may not join a classic group with members.
          const refused = await heartbeat(client, joinBody('mg', 'kip848-member', topic))
          assert.equal(refused.errorCode, ErrorCode.GROUP_ID_NOT_FOUND)
          // Let its offsets be committed before it leaves.
          await new Promise((resolve) => setTimeout(resolve, 600))
        } finally {
          await classic.consumer.disconnect()
        }
        // Empty now: the first consumer-protocol member upgrades it, and the offsets stay.
        const joined = await heartbeat(client, joinBody('mg', 'kip848-member', topic))
        assert.equal(joined.errorCode, ErrorCode.NONE, joined.errorMessage ?? '')
        const epoch = joined.memberEpoch
        const fetchAs = (memberEpoch: number) =>
          rawCall<OffsetFetchResponse>(client, ApiKey.OffsetFetch, 9, {
            groups: [{ groupId: 'mg', memberId: 'kip848-member', memberEpoch, topics: null }],
          })
        const fetched = (await fetchAs(epoch)).groups[0]
        assert.equal(fetched.errorCode, ErrorCode.NONE)
        assert.deepEqual(
          fetched.topics.flatMap((t) => t.partitions.map((p) => [p.partitionIndex, p.committedOffset])),
          [
            [0, 3n],
            [1, 3n],
          ],
        )
        assert.equal((await fetchAs(epoch - 1)).groups[0].errorCode, ErrorCode.STALE_MEMBER_EPOCH)
        const commitAs = async (memberEpoch: number) =>
          (
            await rawCall<OffsetCommitResponse>(client, ApiKey.OffsetCommit, 9, {
              groupId: 'mg',
              generationIdOrMemberEpoch: memberEpoch,
              memberId: 'kip848-member',
              topics: [
                {
                  name: topic,
                  partitions: [
                    {
                      partitionIndex: 0,
                      committedOffset: 3n,
                      committedLeaderEpoch: -1,
                      committedMetadata: '',
                      commitTimestamp: -1n,
                    },
                  ],
                },
              ],
            })
          ).topics[0].partitions[0].errorCode
        assert.equal(await commitAs(epoch), ErrorCode.NONE)
        assert.equal(await commitAs(epoch - 1), ErrorCode.STALE_MEMBER_EPOCH)
        assert.equal(await commitAs(epoch + 1), ErrorCode.FENCED_MEMBER_EPOCH)

        const listed = await rawCall<ListGroupsResponse>(client, ApiKey.ListGroups, 5, {})
        assert.deepEqual(
          listed.groups.filter((g) => g.groupId === 'mg').map((g) => [g.groupType, g.protocolType]),
          [['consumer', 'consumer']],
        )
        // A classic member may not join the consumer group while it has members...
        const join = (memberId: string) =>
          rawCall<JoinGroupResponse>(client, ApiKey.JoinGroup, 5, {
            groupId: 'mg',
            sessionTimeoutMs: 6000,
            rebalanceTimeoutMs: 6000,
            memberId,
            groupInstanceId: null,
            protocolType: 'consumer',
            protocols: [{ name: 'range', metadata: Buffer.alloc(0) }],
          })
        assert.equal((await join('')).errorCode, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        // ... but once it is empty the group goes back to classic.
        const left = await heartbeat(client, { groupId: 'mg', memberId: 'kip848-member', memberEpoch: -1 })
        assert.equal(left.errorCode, ErrorCode.NONE)
        assert.equal(left.memberEpoch, -1)
        assert.equal((await join('')).errorCode, ErrorCode.MEMBER_ID_REQUIRED)
        const relisted = await rawCall<ListGroupsResponse>(client, ApiKey.ListGroups, 5, {})
        assert.equal(relisted.groups.find((g) => g.groupId === 'mg')?.groupType, 'classic')
        const gone = await rawCall<ConsumerGroupDescribeResponse>(client, ApiKey.ConsumerGroupDescribe, 0, {
          groupIds: ['mg', 'no-such-group'],
        })
        assert.deepEqual(
          gone.groups.map((g) => g.errorCode),
          [ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.GROUP_ID_NOT_FOUND],
        )
      } finally {
        client.close()
      }
    },
    { port: 0, properties: FAST_GROUP_PROPERTIES },
  )
})
