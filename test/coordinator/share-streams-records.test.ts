/**
 * Share and streams groups as records of __consumer_offsets (share-group-records.ts,
 * streams/streams-group-records.ts), beside the consumer-group record tests: the bytes of
 * Kafka's record formats, the records a step writes (the difference of the group's records
 * before and after it, tombstones when members go), and replay rebuilding the same group,
 * whatever order compaction left the records in.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { Group } from '../../src/coordinator/group.js'
import { replayRecord } from '../../src/coordinator/offsets.js'
import { type CoordinatorRecord, diffRecords } from '../../src/coordinator/records.js'
import {
  DEFAULT_SHARE_GROUP_CONFIG,
  expireShareMembers,
  newShareGroup,
  type ShareGroup,
  type ShareTopicsView,
  shareGroupHeartbeat,
} from '../../src/coordinator/share-group.js'
import { markInitialized } from '../../src/coordinator/share-group-coordinator.js'
import {
  decodeShareKey,
  shareGroupRecords,
  shareRecordKey,
  snapshotShareGroup,
} from '../../src/coordinator/share-group-records.js'
import { emptyTasks } from '../../src/coordinator/streams/streams-assignor.js'
import {
  DEFAULT_STREAMS_GROUP_CONFIG,
  newStreamsGroup,
  type StreamsGroup,
  type StreamsHeartbeatRequest,
  streamsGroupHeartbeat,
} from '../../src/coordinator/streams/streams-group.js'
import {
  decodeStreamsKey,
  decodeTopologyValue,
  encodeTopologyValue,
  snapshotStreamsGroup,
  streamsGroupRecords,
  streamsGroupTombstones,
} from '../../src/coordinator/streams/streams-group-records.js'
import type { StreamsTopology } from '../../src/coordinator/streams/streams-topology.js'

/** A topic id (Kafka's Uuid, base64url). */
const T = Buffer.alloc(16, 1).toString('base64url')
const SHARE_TOPICS: ShareTopicsView = { byName: new Map([['t', { topicId: T, partitions: 4 }]]) }
const names = () => 't'

/** Runs a share step and appends what it changed, as the coordinator writes it. */
function shareStep(group: ShareGroup, log: CoordinatorRecord[], step: () => void): CoordinatorRecord[] {
  const before = shareGroupRecords(group, names)
  step()
  const records = diffRecords(before, shareGroupRecords(group, names))
  log.push(...records)
  return records
}

function shareJoin(group: ShareGroup, log: CoordinatorRecord[], memberId: string, nowMs = 0): number {
  let epoch = -1
  shareStep(group, log, () => {
    const r = shareGroupHeartbeat(
      group,
      {
        groupId: group.groupId,
        memberId,
        memberEpoch: 0,
        rackId: 'rack-1',
        subscribedTopicNames: ['t'],
        clientId: `client-${memberId}`,
        clientHost: '/127.0.0.1',
      },
      nowMs,
      DEFAULT_SHARE_GROUP_CONFIG,
      SHARE_TOPICS,
    )
    for (const { topicId, partitions } of r.assignment ?? []) markInitialized(group, topicId, partitions)
    epoch = r.memberEpoch
  })
  return epoch
}

function replayAll(log: readonly CoordinatorRecord[], nowMs = 0) {
  const groups = new Map<string, Group>()
  const shareGroups = new Map<string, ShareGroup>()
  for (const record of log) replayRecord(groups, record, nowMs, undefined, undefined, shareGroups)
  return { groups, shareGroups }
}

describe('share group records', () => {
  it("writes Kafka's key and value bytes (ShareGroupMetadata: type 11, flexible value v0)", () => {
    const group = newShareGroup('g')
    group.groupEpoch = 7
    const [metadata] = shareGroupRecords(group, names)
    // Key: int16 type 11, int16-length group id.
    assert.deepEqual(metadata.key, Buffer.from([0, 11, 0, 1, 0x67]))
    // Value: int16 version 0, int32 epoch, int64 metadata hash, no tagged fields.
    assert.deepEqual(metadata.value, Buffer.from([0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0]))
    assert.deepEqual(decodeShareKey(shareRecordKey('share-current-assignment', 'g', 'm')), {
      kind: 'share-current-assignment',
      group: 'g',
      memberId: 'm',
    })
    assert.equal(decodeShareKey(Buffer.from([0, 1, 0, 1, 0x67])), undefined)
  })

  it('replay rebuilds epochs, members, assignments and initialized partitions', () => {
    const group = newShareGroup('g')
    const log: CoordinatorRecord[] = []
    shareJoin(group, log, 'a')
    const epochB = shareJoin(group, log, 'b')
    // a's next heartbeat takes its new target (half the partitions).
    shareStep(group, log, () =>
      shareGroupHeartbeat(
        group,
        {
          groupId: 'g',
          memberId: 'a',
          memberEpoch: 1,
          rackId: null,
          subscribedTopicNames: null,
          clientId: 'client-a',
          clientHost: '/127.0.0.1',
        },
        1,
        DEFAULT_SHARE_GROUP_CONFIG,
        SHARE_TOPICS,
      ),
    )
    const { shareGroups } = replayAll(log, 500)
    const replayed = shareGroups.get('g')
    assert.ok(replayed)
    assert.equal(replayed.groupEpoch, group.groupEpoch)
    assert.equal(replayed.groupEpoch, epochB)
    assert.equal(replayed.assignmentEpoch, group.assignmentEpoch)
    assert.deepEqual([...replayed.members.keys()].sort(), ['a', 'b'])
    for (const [id, m] of group.members) {
      const r = replayed.members.get(id)
      assert.equal(r?.memberEpoch, m.memberEpoch)
      assert.deepEqual(r?.assignment, m.assignment)
      assert.equal(r?.clientId, m.clientId)
      assert.equal(r?.rackId, 'rack-1')
      assert.deepEqual(r?.subscribedTopicNames, ['t'])
      // Sessions start at the load.
      assert.equal(r?.lastHeartbeatMs, 500)
    }
    assert.deepEqual(replayed.targetAssignment, group.targetAssignment)
    assert.deepEqual(replayed.initialized, new Map([[T, new Set([0, 1, 2, 3])]]))
    // Writing the replayed group's records again changes nothing: replay is faithful.
    assert.deepEqual(diffRecords(shareGroupRecords(group, names), shareGroupRecords(replayed, names)), [])
  })

  it("keeps the assignment timestamp in Kafka's tagged field 0 of the target metadata, as streams groups", () => {
    const group = newShareGroup('g')
    group.assignmentEpoch = 2
    group.assignmentTimestampMs = 1_700_000_000_123
    const record = shareGroupRecords(group, names).find(
      (r) => decodeShareKey(r.key)?.kind === 'share-target-metadata',
    )
    const tagged = Buffer.concat([Buffer.from([0, 0, 0, 0, 0, 2, 1, 0, 8]), Buffer.alloc(8)])
    tagged.writeBigInt64BE(1_700_000_000_123n, 9)
    assert.deepEqual(record?.value, tagged)
    const replayed = replayAll(shareGroupRecords(group, names)).shareGroups.get('g')
    assert.deepEqual([replayed?.assignmentEpoch, replayed?.assignmentTimestampMs], [2, 1_700_000_000_123])
  })

  it("a member's expiry writes its tombstones (assignment, target, metadata) and a new epoch", () => {
    const group = newShareGroup('g')
    const log: CoordinatorRecord[] = []
    shareJoin(group, log, 'a', 0)
    shareJoin(group, log, 'b', 10_000)
    const records = shareStep(group, log, () =>
      expireShareMembers(group, DEFAULT_SHARE_GROUP_CONFIG.sessionTimeoutMs + 1, DEFAULT_SHARE_GROUP_CONFIG),
    )
    const tombstones = records.filter((r) => r.value === null).map((r) => decodeShareKey(r.key))
    assert.deepEqual(tombstones, [
      { kind: 'share-current-assignment', group: 'g', memberId: 'a' },
      { kind: 'share-target-member', group: 'g', memberId: 'a' },
      { kind: 'share-member', group: 'g', memberId: 'a' },
    ])
    const { shareGroups } = replayAll(log)
    assert.deepEqual([...(shareGroups.get('g')?.members.keys() ?? [])], ['b'])
    assert.equal(shareGroups.get('g')?.groupEpoch, 3)
    // Tombstones for all of the group's records (DeleteGroups) leave nothing to replay.
    const removal = shareGroupRecords(group, names)
      .map((r) => ({ key: r.key, value: null }))
      .reverse()
    assert.equal(replayAll([...log, ...removal]).shareGroups.size, 0)
  })

  it("replays a member's current assignment left by compaction before its metadata", () => {
    const group = newShareGroup('g')
    const log: CoordinatorRecord[] = []
    shareJoin(group, log, 'a')
    const records = shareGroupRecords(group, names)
    const member = records.filter((r) => decodeShareKey(r.key)?.kind === 'share-member')
    const others = records.filter((r) => decodeShareKey(r.key)?.kind !== 'share-member')
    const replayed = replayAll([...others, ...member]).shareGroups.get('g')
    assert.equal(replayed?.members.get('a')?.memberEpoch, 1)
    assert.equal(replayed?.members.get('a')?.clientId, 'client-a')
    assert.deepEqual(replayed?.members.get('a')?.assignment, group.members.get('a')?.assignment)
  })

  it('a refused write puts the group back as it was', () => {
    const group = newShareGroup('g')
    shareJoin(group, [], 'a')
    const before = shareGroupRecords(group, names)
    const undo = snapshotShareGroup(group)
    shareJoin(group, [], 'b')
    assert.equal(group.members.size, 2)
    undo()
    assert.deepEqual(shareGroupRecords(group, names), before)
  })
})

const TOPOLOGY: StreamsTopology = {
  epoch: 2,
  subtopologies: [
    {
      subtopologyId: '0',
      sourceTopics: ['in'],
      repartitionSinkTopics: ['app-rep'],
      stateChangelogTopics: [],
      repartitionSourceTopics: [],
      copartitionGroups: [],
    },
    {
      subtopologyId: '1',
      sourceTopics: [],
      repartitionSinkTopics: [],
      stateChangelogTopics: [
        {
          name: 'app-changelog',
          partitions: 0,
          replicationFactor: 0,
          topicConfigs: [{ key: 'cleanup.policy', value: 'compact' }],
        },
      ],
      repartitionSourceTopics: [{ name: 'app-rep', partitions: 0, replicationFactor: -1, topicConfigs: [] }],
      copartitionGroups: [{ sourceTopics: [], repartitionSourceTopics: [0] }],
    },
  ],
}
const STREAMS_VIEW = {
  partitionCounts: new Map([
    ['in', 3],
    ['app-rep', 3],
    ['app-changelog', 3],
  ]),
}

function streamsRequest(
  memberId: string,
  memberEpoch: number,
  instanceId: string | null,
): StreamsHeartbeatRequest {
  return {
    groupId: 'g',
    memberId,
    memberEpoch,
    endpointInformationEpoch: 0,
    instanceId,
    rackId: null,
    rebalanceTimeoutMs: memberEpoch === 0 ? 30_000 : -1,
    topology: memberEpoch === 0 ? TOPOLOGY : null,
    owned: memberEpoch === 0 ? emptyTasks() : null,
    processId: `process-${memberId}`,
    userEndpoint: { host: 'localhost', port: 65_000 },
    clientTags: [{ key: 'zone', value: 'a' }],
    shutdownApplication: false,
    clientId: `client-${memberId}`,
    clientHost: '/127.0.0.1',
  }
}

function streamsStep(group: StreamsGroup, log: CoordinatorRecord[], req: StreamsHeartbeatRequest): void {
  const before = streamsGroupRecords(group)
  streamsGroupHeartbeat(group, req, 0, DEFAULT_STREAMS_GROUP_CONFIG, STREAMS_VIEW)
  log.push(...diffRecords(before, streamsGroupRecords(group)))
}

describe('streams group records', () => {
  it('the topology survives its encoding', () => {
    assert.deepEqual(decodeTopologyValue(encodeTopologyValue(TOPOLOGY)), TOPOLOGY)
    assert.equal(decodeStreamsKey(streamsGroupTombstones('g')[1].key)?.kind, 'streams-topology')
    // StreamsGroupTopologyKey: int16 type 23, then the group id.
    assert.deepEqual(streamsGroupTombstones('g')[1].key, Buffer.from([0, 23, 0, 1, 0x67]))
  })

  it('replay rebuilds the epochs, topology, members and tasks; tombstones remove it', () => {
    const group = newStreamsGroup('g')
    const log: CoordinatorRecord[] = []
    streamsStep(group, log, streamsRequest('a', 0, 'i-a'))
    streamsStep(group, log, streamsRequest('b', 0, null))
    streamsStep(group, log, streamsRequest('a', group.members.get('a')?.memberEpoch ?? 0, 'i-a'))
    const groups = new Map<string, Group>()
    for (const record of log) replayRecord(groups, record, 100)
    const holder = groups.get('g')
    const replayed = holder?.streams
    assert.ok(replayed)
    assert.equal(holder?.protocolType, 'streams')
    assert.equal(holder?.state, 'Stable')
    assert.equal(replayed.groupEpoch, group.groupEpoch)
    assert.equal(replayed.assignmentEpoch, group.assignmentEpoch)
    assert.deepEqual(replayed.topology, TOPOLOGY)
    assert.deepEqual(replayed.targetAssignment, group.targetAssignment)
    assert.equal(replayed.staticMembers.get('i-a'), 'a')
    for (const [id, m] of group.members) {
      const r = replayed.members.get(id)
      assert.ok(r)
      assert.equal(r.memberEpoch, m.memberEpoch)
      assert.equal(r.previousMemberEpoch, m.previousMemberEpoch)
      assert.equal(r.state, m.state)
      assert.deepEqual(r.assigned, m.assigned)
      assert.deepEqual(r.activePendingRevocation, m.activePendingRevocation)
      assert.deepEqual(r.userEndpoint, { host: 'localhost', port: 65_000 })
      assert.deepEqual(r.clientTags, [{ key: 'zone', value: 'a' }])
      assert.equal(r.processId, m.processId)
      assert.equal(r.topologyEpoch, 2)
      assert.equal(r.lastHeartbeatMs, 100)
    }
    assert.deepEqual(diffRecords(streamsGroupRecords(group), streamsGroupRecords(replayed)), [])

    // Both leave; the empty group's tombstones (DeleteGroups) take the streams part away.
    streamsStep(group, log, streamsRequest('a', -1, 'i-a'))
    streamsStep(group, log, streamsRequest('b', -1, null))
    assert.equal(group.members.size, 0)
    log.push(...streamsGroupTombstones('g'))
    const after = new Map<string, Group>()
    for (const record of log) replayRecord(after, record, 0)
    assert.equal(after.get('g'), undefined)
  })

  it("keeps the assignment timestamp in Kafka's tagged field 0 of the target metadata, 0 left out", () => {
    const group = newStreamsGroup('g')
    group.assignmentEpoch = 2
    const metadata = () => {
      const record = streamsGroupRecords(group).find(
        (r) => decodeStreamsKey(r.key)?.kind === 'streams-target-metadata',
      )
      assert.ok(record?.value)
      return record.value
    }
    // Version 0, AssignmentEpoch 2, no tagged field.
    assert.deepEqual(metadata(), Buffer.from([0, 0, 0, 0, 0, 2, 0]))
    group.assignmentTimestampMs = 1_700_000_000_123
    const tagged = Buffer.concat([Buffer.from([0, 0, 0, 0, 0, 2, 1, 0, 8]), Buffer.alloc(8)])
    tagged.writeBigInt64BE(1_700_000_000_123n, 9)
    assert.deepEqual(metadata(), tagged)
    const groups = new Map<string, Group>()
    for (const record of streamsGroupRecords(group)) replayRecord(groups, record, 0)
    assert.equal(groups.get('g')?.streams?.assignmentTimestampMs, 1_700_000_000_123)
  })

  it('a refused write puts the group back as it was', () => {
    const group = newStreamsGroup('g')
    streamsStep(group, [], streamsRequest('a', 0, null))
    const before = streamsGroupRecords(group)
    const undo = snapshotStreamsGroup(group)
    streamsStep(group, [], streamsRequest('b', 0, null))
    undo()
    assert.deepEqual(streamsGroupRecords(group), before)
    assert.deepEqual([...group.members.keys()], ['a'])
  })
})
