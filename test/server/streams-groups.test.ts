/**
 * Issue 33 item 4: streams groups (KIP-1071) through the wire on one broker, with raw
 * requests. A join whose internal topics are missing is answered MISSING_INTERNAL_TOPICS and
 * the broker creates them with the topology's partition count and configs; the next
 * heartbeat gets every task. StreamsGroupDescribe shows the topology and the member's tasks;
 * ListGroups lists the group with type `streams`; a ConsumerGroupHeartbeat or a
 * ShareGroupHeartbeat on it, and a StreamsGroupHeartbeat on a consumer group, answer
 * GROUP_ID_NOT_FOUND; DeleteGroups refuses it while it has a member (NON_EMPTY_GROUP) and
 * deletes it once the member left; the member's OffsetCommit at its epoch is accepted, at an
 * epoch ahead refused (FENCED_MEMBER_EPOCH). A group whose `streams.initial.rebalance.delay.ms`
 * is set gets no tasks, and the status ASSIGNMENT_DELAYED at epoch 0, until the delay is over.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { Cluster } from '../../src/server/cluster.js'
import { createTopics } from '../client/helpers.js'
import { startBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { streamsJoinFields } from '../helpers/streams-heartbeat.js'
import { waitUntil } from '../helpers/wait.js'

const GROUP = 'wordcount-app'
const MEMBER = 'c3RyZWFtcy1tZW1iZXItMDE'
const REPARTITION = `${GROUP}-by-word-repartition`
const CHANGELOG = `${GROUP}-counts-changelog`

const TOPOLOGY = {
  epoch: 1,
  subtopologies: [
    {
      subtopologyId: '0',
      sourceTopics: ['words-in'],
      sourceTopicRegex: [],
      stateChangelogTopics: [],
      repartitionSinkTopics: [REPARTITION],
      repartitionSourceTopics: [],
      copartitionGroups: [],
    },
    {
      subtopologyId: '1',
      sourceTopics: [],
      sourceTopicRegex: [],
      stateChangelogTopics: [
        {
          name: CHANGELOG,
          partitions: 0,
          replicationFactor: 0,
          topicConfigs: [{ key: 'cleanup.policy', value: 'compact' }],
        },
      ],
      repartitionSinkTopics: [],
      repartitionSourceTopics: [{ name: REPARTITION, partitions: 0, replicationFactor: 0, topicConfigs: [] }],
      copartitionGroups: [],
    },
  ],
}

interface Heartbeat {
  errorCode: number
  errorMessage: string | null
  memberEpoch: number
  status: { statusCode: number; statusDetail: string }[] | null
  activeTasks: { subtopologyId: string; partitions: number[] }[] | null
}

function heartbeat(raw: RawClient, body: Record<string, unknown>): Promise<Heartbeat> {
  return rawCall<Heartbeat>(raw, ApiKey.StreamsGroupHeartbeat, 1, {
    groupId: GROUP,
    memberId: MEMBER,
    ...body,
  })
}

describe('streams groups on the wire', () => {
  let cluster: Cluster | undefined
  before(async () => {
    cluster = await startBroker({
      properties: {
        'offsets.topic.num.partitions': 1,
        // Assigned at once: the delay has its own test below (with a group config).
        'group.streams.initial.rebalance.delay.ms': 0,
      },
    })
  })
  after(async () => {
    await cluster?.stop()
  })

  it('creates the internal topics, assigns the tasks, and is a group of its own type', async () => {
    assert.ok(cluster)
    const bootstrap = cluster.bootstrapServers
    await createTopics(bootstrap, [{ topic: 'words-in', partitions: 2, replicationFactor: 1 }])
    const admin = new Admin({ bootstrapServers: bootstrap })
    await admin.findCoordinator(GROUP)
    await admin.findCoordinator('a-consumer-group')
    admin.close()
    const raw = await RawClient.connect(Number(bootstrap.split(':')[1]))
    try {
      let joined: Heartbeat | undefined
      await waitUntil('the streams member joins', 60_000, async () => {
        joined = await heartbeat(raw, streamsJoinFields(TOPOLOGY, 'process-1'))
        return joined.errorCode === ErrorCode.NONE
      })
      assert.ok(joined)
      assert.equal(joined.memberEpoch, 1)
      assert.deepEqual(joined.status, [
        { statusCode: 3, statusDetail: `Internal topics are missing: ${REPARTITION}, ${CHANGELOG}` },
      ])
      // The broker creates them (2 partitions: the source topic's) and the next heartbeat gets every task.
      let epoch = joined.memberEpoch
      let tasks: Heartbeat['activeTasks'] = null
      await waitUntil('the tasks are assigned', 30_000, async () => {
        const beat = await heartbeat(raw, {
          memberEpoch: epoch,
          activeTasks: [],
          standbyTasks: [],
          warmupTasks: [],
        })
        assert.equal(beat.errorCode, ErrorCode.NONE, beat.errorMessage ?? '')
        epoch = beat.memberEpoch
        if (beat.activeTasks !== null) tasks = beat.activeTasks
        return (tasks?.length ?? 0) > 0
      })
      assert.deepEqual(tasks, [
        { subtopologyId: '0', partitions: [0, 1] },
        { subtopologyId: '1', partitions: [0, 1] },
      ])
      const metadata = await rawCall<{ topics: { name: string; partitions: unknown[] }[] }>(
        raw,
        ApiKey.Metadata,
        12,
        {
          topics: [CHANGELOG, REPARTITION].map((name) => ({ name, topicId: 'AAAAAAAAAAAAAAAAAAAAAA' })),
        },
      )
      assert.deepEqual(metadata.topics.map((t) => [t.name, t.partitions.length]).sort(), [
        [REPARTITION, 2],
        [CHANGELOG, 2],
      ])

      const described = await rawCall<{
        groups: {
          errorCode: number
          groupState: string
          topology: { epoch: number } | null
          members: { memberId: string; processId: string; assignment: { activeTasks: unknown[] } }[]
        }[]
      }>(raw, ApiKey.StreamsGroupDescribe, 1, {
        groupIds: [GROUP, 'no-such-group'],
        includeAuthorizedOperations: false,
      })
      assert.equal(described.groups[0]?.errorCode, ErrorCode.NONE)
      assert.equal(described.groups[0]?.groupState, 'Stable')
      assert.equal(described.groups[0]?.topology?.epoch, 1)
      assert.equal(described.groups[0]?.members[0]?.processId, 'process-1')
      assert.equal(described.groups[0]?.members[0]?.assignment.activeTasks.length, 2)
      assert.equal(described.groups[1]?.errorCode, ErrorCode.GROUP_ID_NOT_FOUND)

      const listed = await rawCall<{ groups: { groupId: string; groupState: string; groupType: string }[] }>(
        raw,
        ApiKey.ListGroups,
        5,
        { statesFilter: [], typesFilter: ['streams'] },
      )
      assert.deepEqual(
        listed.groups.map((g) => [g.groupId, g.groupState, g.groupType]),
        [[GROUP, 'Stable', 'streams']],
      )

      const consumer = await rawCall<{ errorCode: number }>(raw, ApiKey.ConsumerGroupHeartbeat, 0, {
        groupId: GROUP,
        memberId: 'x',
        memberEpoch: 0,
        instanceId: null,
        rackId: null,
        rebalanceTimeoutMs: 30_000,
        subscribedTopicNames: ['words-in'],
        serverAssignor: null,
        topicPartitions: [],
      })
      assert.equal(consumer.errorCode, ErrorCode.GROUP_ID_NOT_FOUND)

      const commit = (memberEpoch: number) =>
        rawCall<{ topics: { partitions: { errorCode: number }[] }[] }>(raw, ApiKey.OffsetCommit, 9, {
          groupId: GROUP,
          generationIdOrMemberEpoch: memberEpoch,
          memberId: MEMBER,
          groupInstanceId: null,
          retentionTimeMs: -1,
          topics: [
            {
              name: 'words-in',
              partitions: [
                {
                  partitionIndex: 0,
                  committedOffset: 5n,
                  committedLeaderEpoch: -1,
                  committedMetadata: '',
                  commitTimestamp: -1n,
                },
              ],
            },
          ],
        }).then((r) => r.topics[0]?.partitions[0]?.errorCode)
      assert.equal(await commit(epoch), ErrorCode.NONE)
      assert.equal(await commit(epoch + 1), ErrorCode.FENCED_MEMBER_EPOCH)

      const deleteGroup = () =>
        rawCall<{ results: { errorCode: number }[] }>(raw, ApiKey.DeleteGroups, 2, {
          groupsNames: [GROUP],
        }).then((r) => r.results[0]?.errorCode)
      assert.equal(await deleteGroup(), ErrorCode.NON_EMPTY_GROUP)
      const left = await heartbeat(raw, { memberEpoch: -1 })
      assert.equal(left.errorCode, ErrorCode.NONE)
      assert.equal(left.memberEpoch, -1)
      assert.equal(await deleteGroup(), ErrorCode.NONE)
    } finally {
      raw.socket.destroy()
    }
  })
  it("delays a new group's first assignment by its streams.initial.rebalance.delay.ms", async () => {
    assert.ok(cluster)
    const bootstrap = cluster.bootstrapServers
    const group = 'delayed-app'
    const delayMs = 1500
    const admin = new Admin({ bootstrapServers: bootstrap })
    await admin.findCoordinator(group)
    admin.close()
    const raw = await RawClient.connect(Number(bootstrap.split(':')[1]))
    try {
      const altered = await rawCall<{ responses: { errorCode: number; errorMessage: string | null }[] }>(
        raw,
        ApiKey.IncrementalAlterConfigs,
        1,
        {
          resources: [
            {
              resourceType: 32,
              resourceName: group,
              configs: [
                { name: 'streams.initial.rebalance.delay.ms', configOperation: 0, value: `${delayMs}` },
              ],
            },
          ],
          validateOnly: false,
        },
      )
      assert.equal(altered.responses[0]?.errorCode, ErrorCode.NONE, altered.responses[0]?.errorMessage ?? '')
      const topology = {
        epoch: 1,
        subtopologies: [
          {
            subtopologyId: '0',
            sourceTopics: ['words-in'],
            sourceTopicRegex: [],
            stateChangelogTopics: [],
            repartitionSinkTopics: [],
            repartitionSourceTopics: [],
            copartitionGroups: [],
          },
        ],
      }
      // Epoch 0 joins (all fields); then the member heartbeats at the epoch it was given.
      const beat = (memberEpoch: number) =>
        heartbeat(raw, {
          groupId: group,
          memberEpoch,
          ...(memberEpoch === 0 && { rebalanceTimeoutMs: 30_000, topology, processId: 'process-2' }),
          activeTasks: [],
          standbyTasks: [],
          warmupTasks: [],
        })
      const joined = await beat(0)
      const joinedAtMs = Date.now()
      assert.equal(joined.errorCode, ErrorCode.NONE, joined.errorMessage ?? '')
      // Stable at epoch 1 with no tasks, as Kafka answers (at 0 the next heartbeat would be a join).
      assert.equal(joined.memberEpoch, 1)
      assert.deepEqual(joined.activeTasks ?? [], [])
      assert.deepEqual(
        joined.status?.map((s) => [s.statusCode, s.statusDetail]),
        [[5, 'Assignment delayed due to the configured initial rebalance delay.']],
      )
      let epoch = joined.memberEpoch
      let tasks: Heartbeat['activeTasks'] = null
      await waitUntil('the delayed tasks are assigned', 30_000, async () => {
        const answer = await beat(epoch)
        assert.equal(answer.errorCode, ErrorCode.NONE, answer.errorMessage ?? '')
        epoch = answer.memberEpoch
        if ((answer.activeTasks?.length ?? 0) > 0) tasks = answer.activeTasks
        return tasks !== null
      })
      // The delay runs from the join, answered a moment before joinedAtMs.
      assert.ok(Date.now() - joinedAtMs >= delayMs - 200, `tasks after ${Date.now() - joinedAtMs} ms`)
      assert.deepEqual(tasks, [{ subtopologyId: '0', partitions: [0, 1] }])
      assert.ok(epoch > 1)
    } finally {
      raw.socket.destroy()
    }
  })
})
