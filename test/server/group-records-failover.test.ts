/**
 * Share and streams groups survive a group-coordinator failover (issue 33): on a 3-broker
 * in-process cluster a share group (two members) and a streams group (one member with its
 * tasks) are built on the broker leading __consumer_offsets' only partition; that broker is
 * stopped. The new coordinator, once it has replayed the ShareGroup* and StreamsGroup*
 * records, describes both groups as before (group and assignment epochs, members, their
 * epochs and assignments, the topology), and a member's heartbeat at its old epoch is
 * accepted at that epoch. Without the replay (planted: the loader skipping those records)
 * the new coordinator answers GROUP_ID_NOT_FOUND for both groups.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { ShareGroupDescribeResponse } from '../../src/protocol/generated/share-group-describe-response.js'
import type { ShareGroupHeartbeatResponse } from '../../src/protocol/generated/share-group-heartbeat-response.js'
import type { StreamsGroupDescribeResponse } from '../../src/protocol/generated/streams-group-describe-response.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { ReplicationCluster, waitUntil } from '../replication/in-process-cluster.js'

const SHARE_GROUP = 'records-failover-share'
const STREAMS_GROUP = 'records-failover-streams'
const SHARE_TOPIC = 'records-failover-in'
const STREAMS_TOPIC = 'records-failover-words'
const A = 'c2hhcmUtbWVtYmVyLWFhYWE'
const B = 'c2hhcmUtbWVtYmVyLWJiYmI'
const S = 'c3RyZWFtcy1tZW1iZXItc3Nz'

/** One stateless subtopology reading the source topic: no internal topics to create. */
const TOPOLOGY = {
  epoch: 1,
  subtopologies: [
    {
      subtopologyId: '0',
      sourceTopics: [STREAMS_TOPIC],
      sourceTopicRegex: [],
      stateChangelogTopics: [],
      repartitionSinkTopics: [],
      repartitionSourceTopics: [],
      copartitionGroups: [],
    },
  ],
}

interface StreamsHeartbeat {
  errorCode: number
  errorMessage: string | null
  memberEpoch: number
  activeTasks: { subtopologyId: string; partitions: number[] }[] | null
}

const portOf = (cluster: ReplicationCluster, index: number) =>
  Number(cluster.broker(index).bootstrapServers.split(':')[1])

function shareHeartbeat(raw: RawClient, memberId: string, memberEpoch: number) {
  return rawCall<ShareGroupHeartbeatResponse>(raw, ApiKey.ShareGroupHeartbeat, 1, {
    groupId: SHARE_GROUP,
    memberId,
    memberEpoch,
    subscribedTopicNames: memberEpoch === 0 ? [SHARE_TOPIC] : null,
  })
}

function streamsHeartbeat(raw: RawClient, memberEpoch: number, owned: StreamsHeartbeat['activeTasks']) {
  return rawCall<StreamsHeartbeat>(raw, ApiKey.StreamsGroupHeartbeat, 0, {
    groupId: STREAMS_GROUP,
    memberId: S,
    memberEpoch,
    endpointInformationEpoch: 0,
    instanceId: null,
    rackId: null,
    rebalanceTimeoutMs: memberEpoch === 0 ? 30_000 : -1,
    topology: memberEpoch === 0 ? TOPOLOGY : null,
    activeTasks: owned,
    standbyTasks: owned === null ? null : [],
    warmupTasks: owned === null ? null : [],
    processId: memberEpoch === 0 ? 'process-s' : null,
    userEndpoint: null,
    clientTags: null,
    taskOffsets: null,
    taskEndOffsets: null,
    shutdownApplication: false,
  })
}

/** What must survive of the share group: its epochs and each member's epoch and partitions. */
async function describeShare(raw: RawClient) {
  const r = await rawCall<ShareGroupDescribeResponse>(raw, ApiKey.ShareGroupDescribe, 1, {
    groupIds: [SHARE_GROUP],
    includeAuthorizedOperations: false,
  })
  const g = r.groups[0]
  return {
    errorCode: g.errorCode,
    state: g.groupState,
    groupEpoch: g.groupEpoch,
    assignmentEpoch: g.assignmentEpoch,
    members: g.members
      .map((m) => ({
        memberId: m.memberId,
        memberEpoch: m.memberEpoch,
        subscribed: m.subscribedTopicNames,
        partitions: m.assignment.topicPartitions.flatMap((t) => t.partitions).sort(),
      }))
      .sort((x, y) => (x.memberId < y.memberId ? -1 : 1)),
  }
}

async function describeStreams(raw: RawClient) {
  const r = await rawCall<StreamsGroupDescribeResponse>(raw, ApiKey.StreamsGroupDescribe, 0, {
    groupIds: [STREAMS_GROUP],
    includeAuthorizedOperations: false,
  })
  const g = r.groups[0]
  return {
    errorCode: g.errorCode,
    state: g.groupState,
    groupEpoch: g.groupEpoch,
    assignmentEpoch: g.assignmentEpoch,
    topologyEpoch: g.topology?.epoch ?? -1,
    members: g.members.map((m) => ({
      memberId: m.memberId,
      memberEpoch: m.memberEpoch,
      processId: m.processId,
      active: m.assignment.activeTasks,
    })),
  }
}

test('3 brokers: share and streams groups keep their epochs and assignments when the group coordinator moves', async () => {
  const cluster = await ReplicationCluster.start(3, {
    'offsets.topic.num.partitions': 1,
    // Members must outlive the failover on a loaded machine.
    'group.share.session.timeout.ms': 120_000,
    'group.streams.session.timeout.ms': 120_000,
    // The streams member is assigned at its join (the delay is tested in streams-groups.test.ts).
    'group.streams.initial.rebalance.delay.ms': 0,
    // b's join reassigns at once (the assignment interval is tested in test/coordinator).
    'group.share.assignment.interval.ms': 0,
  })
  const clients: RawClient[] = []
  const connect = async (index: number) => {
    const raw = await RawClient.connect(portOf(cluster, index))
    clients.push(raw)
    return raw
  }
  try {
    await cluster.createTopic(SHARE_TOPIC, 2, 3)
    await cluster.createTopic(STREAMS_TOPIC, 2, 3)
    const admin = new Admin({ bootstrapServers: cluster.bootstrap })
    await admin.findCoordinator(SHARE_GROUP)
    admin.close()
    await waitUntil('__consumer_offsets in sync on 3 brokers', 30_000, () => {
      const state = cluster.state('__consumer_offsets', 0)
      return state.leader >= 0 && state.isr.length === 3
    })
    const coordinator = cluster.state('__consumer_offsets', 0).leader
    const onCoordinator = await connect(coordinator)

    // The share group: a joins, b joins (a new epoch), a takes its share of the new target.
    let a = await shareHeartbeat(onCoordinator, A, 0)
    await waitUntil('a joins', 30_000, async () => {
      if (a.errorCode !== ErrorCode.NONE) a = await shareHeartbeat(onCoordinator, A, 0)
      return a.errorCode === ErrorCode.NONE
    })
    const b = await shareHeartbeat(onCoordinator, B, 0)
    assert.equal(b.errorCode, ErrorCode.NONE)
    a = await shareHeartbeat(onCoordinator, A, a.memberEpoch)
    assert.equal(a.errorCode, ErrorCode.NONE)
    assert.equal(a.memberEpoch, b.memberEpoch, 'a moved to the group epoch b joined at')

    // The streams group: s joins with its topology, then owns every task at the group's epoch.
    let s = await streamsHeartbeat(onCoordinator, 0, [])
    assert.equal(s.errorCode, ErrorCode.NONE, s.errorMessage ?? '')
    s = await streamsHeartbeat(onCoordinator, s.memberEpoch, s.activeTasks)
    assert.equal(s.errorCode, ErrorCode.NONE, s.errorMessage ?? '')

    const shareBefore = await describeShare(onCoordinator)
    const streamsBefore = await describeStreams(onCoordinator)
    assert.equal(shareBefore.errorCode, ErrorCode.NONE)
    assert.equal(shareBefore.members.length, 2)
    assert.deepEqual(shareBefore.members.flatMap((m) => m.partitions).sort(), [0, 1])
    assert.equal(streamsBefore.errorCode, ErrorCode.NONE)
    assert.deepEqual(streamsBefore.members[0].active, [{ subtopologyId: '0', partitions: [0, 1] }])

    // The group coordinator goes; another broker leads __consumer_offsets and loads it.
    await cluster.stopBroker(coordinator)
    await waitUntil('a new group coordinator', 30_000, () => {
      const leader = cluster.state('__consumer_offsets', 0).leader
      return leader >= 0 && leader !== coordinator
    })
    const onNew = await connect(cluster.state('__consumer_offsets', 0).leader)
    let shareAfter = await describeShare(onNew)
    await waitUntil('the new coordinator has loaded its groups', 60_000, async () => {
      shareAfter = await describeShare(onNew)
      return (
        shareAfter.errorCode !== ErrorCode.COORDINATOR_LOAD_IN_PROGRESS &&
        shareAfter.errorCode !== ErrorCode.NOT_COORDINATOR
      )
    })
    assert.deepEqual(shareAfter, shareBefore, 'the share group as the old coordinator described it')
    assert.deepEqual(await describeStreams(onNew), streamsBefore, 'the streams group as before')

    // Members heartbeat on at their epochs: nothing to rejoin, no new epoch.
    const aAgain = await shareHeartbeat(onNew, A, a.memberEpoch)
    assert.equal(aAgain.errorCode, ErrorCode.NONE, aAgain.errorMessage ?? '')
    assert.equal(aAgain.memberEpoch, a.memberEpoch)
    const sAgain = await streamsHeartbeat(onNew, s.memberEpoch, s.activeTasks)
    assert.equal(sAgain.errorCode, ErrorCode.NONE, sAgain.errorMessage ?? '')
    assert.equal(sAgain.memberEpoch, s.memberEpoch)
    assert.equal((await describeShare(onNew)).groupEpoch, shareBefore.groupEpoch)
    assert.equal((await describeStreams(onNew)).groupEpoch, streamsBefore.groupEpoch)

    // A member leaving is written too: b's leave is seen by the next coordinator's describe.
    const left = await shareHeartbeat(onNew, B, -1)
    assert.equal(left.errorCode, ErrorCode.NONE)
    const afterLeave = await describeShare(onNew)
    assert.deepEqual(
      afterLeave.members.map((m) => m.memberId),
      [A],
    )
    assert.equal(afterLeave.groupEpoch, shareBefore.groupEpoch + 1)
  } finally {
    for (const raw of clients) raw.close()
    await cluster.close()
  }
})
