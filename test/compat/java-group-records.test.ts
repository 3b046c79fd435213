/**
 * Issue 33: the share- and streams-group records tidelog writes to __consumer_offsets decode
 * as Kafka's own. A share group of two members and a streams group of two (static members
 * with endpoints and tags, one task pending revocation) are built with tidelog's steps; their
 * records (and an empty streams group's tombstones) are read back by Apache Kafka 4.4's
 * GroupCoordinatorRecordSerde (test/compat/java/GroupRecords.java), which must decode every
 * one to the same fields tidelog holds. A field written in the wrong place or type makes the
 * decode fail or print other values.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import {
  DEFAULT_SHARE_GROUP_CONFIG,
  newShareGroup,
  type ShareGroup,
  shareGroupHeartbeat,
} from '../../src/coordinator/share-group.js'
import { markInitialized } from '../../src/coordinator/share-group-coordinator.js'
import { shareGroupRecords } from '../../src/coordinator/share-group-records.js'
import { emptyTasks } from '../../src/coordinator/streams/streams-assignor.js'
import {
  DEFAULT_STREAMS_GROUP_CONFIG,
  newStreamsGroup,
  type StreamsGroup,
  type StreamsHeartbeatRequest,
  streamsGroupHeartbeat,
} from '../../src/coordinator/streams/streams-group.js'
import {
  streamsGroupRecords,
  streamsGroupTombstones,
} from '../../src/coordinator/streams/streams-group-records.js'
import type { StreamsTopology } from '../../src/coordinator/streams/streams-topology.js'
import { compileJava, exec, JVM_FLAGS } from '../helpers/java.js'

/** Kafka prints a Uuid as base64url: all bytes 7. */
const T = Buffer.alloc(16, 7).toString('base64url')

function shareGroup(): ShareGroup {
  const group = newShareGroup('sg')
  const topics = { byName: new Map([['t', { topicId: T, partitions: 3 }]]) }
  for (const memberId of ['m1', 'm2'])
    shareGroupHeartbeat(
      group,
      {
        groupId: 'sg',
        memberId,
        memberEpoch: 0,
        rackId: 'r',
        subscribedTopicNames: ['t'],
        clientId: 'c',
        clientHost: '/h',
      },
      0,
      DEFAULT_SHARE_GROUP_CONFIG,
      topics,
    )
  markInitialized(group, T, [0, 1, 2])
  return group
}

const TOPOLOGY: StreamsTopology = {
  epoch: 3,
  subtopologies: [
    {
      subtopologyId: '0',
      sourceTopics: ['in'],
      repartitionSinkTopics: ['rep'],
      stateChangelogTopics: [],
      repartitionSourceTopics: [],
      copartitionGroups: [],
    },
    {
      subtopologyId: '1',
      sourceTopics: [],
      repartitionSinkTopics: [],
      stateChangelogTopics: [
        { name: 'cl', partitions: 0, replicationFactor: 0, topicConfigs: [{ key: 'a', value: 'b' }] },
      ],
      repartitionSourceTopics: [{ name: 'rep', partitions: 0, replicationFactor: -1, topicConfigs: [] }],
      copartitionGroups: [{ sourceTopics: [], repartitionSourceTopics: [0] }],
    },
  ],
}

function streamsGroup(): StreamsGroup {
  const group = newStreamsGroup('st')
  const view = {
    partitionCounts: new Map([
      ['in', 2],
      ['rep', 2],
      ['cl', 2],
    ]),
  }
  const request = (memberId: string, memberEpoch: number): StreamsHeartbeatRequest => ({
    groupId: 'st',
    memberId,
    memberEpoch,
    endpointInformationEpoch: 0,
    instanceId: `i-${memberId}`,
    rackId: 'rk',
    rebalanceTimeoutMs: memberEpoch === 0 ? 30_000 : -1,
    topology: memberEpoch === 0 ? TOPOLOGY : null,
    owned: memberEpoch === 0 ? emptyTasks() : null,
    processId: `p-${memberId}`,
    userEndpoint: { host: 'h', port: 9092 },
    clientTags: [{ key: 'k', value: 'v' }],
    shutdownApplication: false,
    clientId: 'c',
    clientHost: '/h',
  })
  // Assigned at each join (no initial rebalance delay): the records show a revocation in progress.
  const config = { ...DEFAULT_STREAMS_GROUP_CONFIG, initialRebalanceDelayMs: 0 }
  const beat = (memberId: string, memberEpoch: number) =>
    streamsGroupHeartbeat(group, request(memberId, memberEpoch), 0, config, view)
  beat('a', 0)
  beat('b', 0)
  // a must give subtopology 1 up to b: pending revocation, b waiting for it (UNRELEASED).
  beat('a', group.members.get('a')?.memberEpoch ?? 0)
  return group
}

test("Kafka 4.4's GroupCoordinatorRecordSerde decodes tidelog's share and streams group records", async () => {
  const share = shareGroup()
  const streams = streamsGroup()
  const records = [
    ...shareGroupRecords(share, () => 't'),
    ...streamsGroupRecords(streams),
    ...streamsGroupTombstones('st'),
  ]
  const dir = await mkdtemp(join(tmpdir(), 'tidelog-group-records-'))
  try {
    const file = join(dir, 'records.txt')
    await writeFile(
      file,
      records
        .map((r) => `${r.key.toString('hex')} ${r.value === null ? '-' : r.value.toString('hex')}`)
        .join('\n'),
    )
    const classpath = await compileJava('GroupRecords', 'server')
    const { stdout } = await exec('java', [...JVM_FLAGS, '-cp', classpath, 'GroupRecords', file], 120_000)
    const lines = stdout.trim().split('\n')
    assert.equal(lines.pop(), 'DONE', stdout)
    // Kafka's generated messages' toString, field by field as tidelog holds them.
    const tasks = (id: string, partitions: string, epochs = false) =>
      `TaskIds(subtopologyId='${id}', partitions=[${partitions}]${epochs ? ', assignmentEpochs=[]' : ''})`
    const m1 = share.members.get('m1')
    assert.equal(m1?.memberEpoch, 1)
    assert.deepEqual(lines, [
      "ShareGroupMetadataKey(groupId='sg') => ShareGroupMetadataValue(epoch=2, metadataHash=0)",
      "ShareGroupMemberMetadataKey(groupId='sg', memberId='m1') => ShareGroupMemberMetadataValue(rackId='r', clientId='c', clientHost='/h', subscribedTopicNames=[t])",
      "ShareGroupMemberMetadataKey(groupId='sg', memberId='m2') => ShareGroupMemberMetadataValue(rackId='r', clientId='c', clientHost='/h', subscribedTopicNames=[t])",
      "ShareGroupTargetAssignmentMetadataKey(groupId='sg') => ShareGroupTargetAssignmentMetadataValue(assignmentEpoch=2, assignmentTimestamp=0)",
      `ShareGroupTargetAssignmentMemberKey(groupId='sg', memberId='m1') => ShareGroupTargetAssignmentMemberValue(topicPartitions=[TopicPartition(topicId=${T}, partitions=[${share.targetAssignment.get('m1')?.get(T)?.join(', ')}])])`,
      `ShareGroupTargetAssignmentMemberKey(groupId='sg', memberId='m2') => ShareGroupTargetAssignmentMemberValue(topicPartitions=[TopicPartition(topicId=${T}, partitions=[${share.targetAssignment.get('m2')?.get(T)?.join(', ')}])])`,
      `ShareGroupCurrentMemberAssignmentKey(groupId='sg', memberId='m1') => ShareGroupCurrentMemberAssignmentValue(memberEpoch=1, previousMemberEpoch=-1, state=2, assignedPartitions=[TopicPartitions(topicId=${T}, partitions=[0, 1, 2])])`,
      `ShareGroupCurrentMemberAssignmentKey(groupId='sg', memberId='m2') => ShareGroupCurrentMemberAssignmentValue(memberEpoch=2, previousMemberEpoch=-1, state=2, assignedPartitions=[TopicPartitions(topicId=${T}, partitions=[${share.members.get('m2')?.assignment.get(T)?.join(', ')}])])`,
      `ShareGroupStatePartitionMetadataKey(groupId='sg') => ShareGroupStatePartitionMetadataValue(initializingTopics=[], initializedTopics=[TopicPartitionsInfo(topicId=${T}, topicName='t', partitions=[0, 1, 2])], deletingTopics=[])`,
      "StreamsGroupMetadataKey(groupId='st') => StreamsGroupMetadataValue(epoch=2, metadataHash=0, validatedTopologyEpoch=-1, lastAssignmentConfigs=[], storedDescriptionTopologyEpoch=-1, failedDescriptionTopologyEpoch=-1)",
      "StreamsGroupTopologyKey(groupId='st') => StreamsGroupTopologyValue(epoch=3, subtopologies=[Subtopology(subtopologyId='0', sourceTopics=[in], sourceTopicRegex=[], stateChangelogTopics=[], repartitionSinkTopics=[rep], repartitionSourceTopics=[], copartitionGroups=[]), Subtopology(subtopologyId='1', sourceTopics=[], sourceTopicRegex=[], stateChangelogTopics=[TopicInfo(name='cl', partitions=0, replicationFactor=0, topicConfigs=[TopicConfig(key='a', value='b')])], repartitionSinkTopics=[], repartitionSourceTopics=[TopicInfo(name='rep', partitions=0, replicationFactor=-1, topicConfigs=[])], copartitionGroups=[CopartitionGroup(sourceTopics=[], sourceTopicRegex=[], repartitionSourceTopics=[0])])])",
      "StreamsGroupMemberMetadataKey(groupId='st', memberId='a') => StreamsGroupMemberMetadataValue(instanceId='i-a', rackId='rk', clientId='c', clientHost='/h', rebalanceTimeoutMs=30000, topologyEpoch=3, processId='p-a', userEndpoint=Endpoint(host='h', port=9092), clientTags=[KeyValue(key='k', value='v')])",
      "StreamsGroupMemberMetadataKey(groupId='st', memberId='b') => StreamsGroupMemberMetadataValue(instanceId='i-b', rackId='rk', clientId='c', clientHost='/h', rebalanceTimeoutMs=30000, topologyEpoch=3, processId='p-b', userEndpoint=Endpoint(host='h', port=9092), clientTags=[KeyValue(key='k', value='v')])",
      "StreamsGroupTargetAssignmentMetadataKey(groupId='st') => StreamsGroupTargetAssignmentMetadataValue(assignmentEpoch=2, assignmentTimestamp=0)",
      // Kafka's StickyTaskAssignor order, (partition, subtopology): a keeps 0-0 and 1-0.
      `StreamsGroupTargetAssignmentMemberKey(groupId='st', memberId='a') => StreamsGroupTargetAssignmentMemberValue(activeTasks=[${tasks('0', '0')}, ${tasks('1', '0')}], standbyTasks=[], warmupTasks=[])`,
      `StreamsGroupTargetAssignmentMemberKey(groupId='st', memberId='b') => StreamsGroupTargetAssignmentMemberValue(activeTasks=[${tasks('0', '1')}, ${tasks('1', '1')}], standbyTasks=[], warmupTasks=[])`,
      `StreamsGroupCurrentMemberAssignmentKey(groupId='st', memberId='a') => StreamsGroupCurrentMemberAssignmentValue(memberEpoch=1, previousMemberEpoch=0, state=0, activeTasks=[${tasks('0', '0', true)}, ${tasks('1', '0', true)}], standbyTasks=[], warmupTasks=[], activeTasksPendingRevocation=[${tasks('0', '1', true)}, ${tasks('1', '1', true)}], standbyTasksPendingRevocation=[], warmupTasksPendingRevocation=[])`,
      "StreamsGroupCurrentMemberAssignmentKey(groupId='st', memberId='b') => StreamsGroupCurrentMemberAssignmentValue(memberEpoch=2, previousMemberEpoch=0, state=1, activeTasks=[], standbyTasks=[], warmupTasks=[], activeTasksPendingRevocation=[], standbyTasksPendingRevocation=[], warmupTasksPendingRevocation=[])",
      "StreamsGroupTargetAssignmentMetadataKey(groupId='st') => TOMBSTONE",
      "StreamsGroupTopologyKey(groupId='st') => TOMBSTONE",
      "StreamsGroupMetadataKey(groupId='st') => TOMBSTONE",
    ])
    // The states printed are tidelog's: a waits to revoke, b for the release.
    assert.equal(streams.members.get('a')?.state, 'UNREVOKED_TASKS')
    assert.equal(streams.members.get('b')?.state, 'UNRELEASED_TASKS')
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
})
