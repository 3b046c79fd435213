/**
 * Streams groups' steps (coordinator/streams/) without a broker, on a manual clock: joining
 * with a topology, the statuses Kafka gives before a topology can run (missing source and
 * internal topics), task assignment and its balance, moving a task only after its owner
 * revoked it (a task is active on one member at a time, checked after every heartbeat of a
 * random interleaving), leaving (-1, static -2), session and revocation expiry, and Kafka's
 * errors (INVALID_REQUEST, STREAMS_INVALID_TOPOLOGY, FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID).
 * With a planted bug (a member takes a target task another member has not released yet)
 * two tests failed: "task 1-0 on c and b" among them.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { assignTasks, emptyTasks, type TaskSet } from '../../src/coordinator/streams/streams-assignor.js'
import {
  assignDueInitialTargets,
  DEFAULT_STREAMS_GROUP_CONFIG,
  expireStreamsMembers,
  newStreamsGroup,
  nextStreamsDeadline,
  type StreamsGroup,
  type StreamsHeartbeatRequest,
  type StreamsHeartbeatResult,
  type StreamsTopicsView,
  streamsGroupHeartbeat,
  streamsGroupStateName,
  validateStreamsHeartbeat,
  validateStreamsOffsetRequest,
} from '../../src/coordinator/streams/streams-group.js'
import { StreamsStatus, type StreamsTopology } from '../../src/coordinator/streams/streams-topology.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'

/**
 * Without the initial rebalance delay and the assignment interval (their own tests below): a
 * change is assigned at once.
 */
const config = { ...DEFAULT_STREAMS_GROUP_CONFIG, initialRebalanceDelayMs: 0, assignmentIntervalMs: 0 }

/** A word count: subtopology 0 reads `in` and writes the repartition topic, 1 counts with a changelog. */
const TOPOLOGY: StreamsTopology = {
  epoch: 1,
  subtopologies: [
    {
      subtopologyId: '0',
      sourceTopics: ['in'],
      repartitionSinkTopics: ['app-by-word-repartition'],
      stateChangelogTopics: [],
      repartitionSourceTopics: [],
      copartitionGroups: [],
    },
    {
      subtopologyId: '1',
      sourceTopics: [],
      repartitionSinkTopics: [],
      stateChangelogTopics: [
        { name: 'app-counts-changelog', partitions: 0, replicationFactor: 0, topicConfigs: [] },
      ],
      repartitionSourceTopics: [
        { name: 'app-by-word-repartition', partitions: 0, replicationFactor: 0, topicConfigs: [] },
      ],
      copartitionGroups: [],
    },
  ],
}

function view(topics: Record<string, number>): StreamsTopicsView {
  return { partitionCounts: new Map(Object.entries(topics)) }
}

const READY = view({ in: 3, 'app-by-word-repartition': 3, 'app-counts-changelog': 3 })

function request(
  memberId: string,
  memberEpoch: number,
  owned: TaskSet | null = null,
): StreamsHeartbeatRequest {
  return {
    groupId: 'g',
    memberId,
    memberEpoch,
    endpointInformationEpoch: 0,
    instanceId: null,
    rackId: null,
    rebalanceTimeoutMs: memberEpoch === 0 ? 30_000 : -1,
    topology: memberEpoch === 0 ? TOPOLOGY : null,
    owned: owned === null ? (memberEpoch === 0 ? emptyTasks() : null) : { ...emptyTasks(), active: owned },
    processId: `process-${memberId}`,
    userEndpoint: null,
    clientTags: null,
    shutdownApplication: false,
    clientId: 'client',
    clientHost: '/127.0.0.1',
  }
}

function activeOf(result: StreamsHeartbeatResult): TaskSet {
  return new Map((result.tasks?.active ?? []).map((t) => [t.subtopologyId, t.partitions]))
}

function count(tasks: TaskSet): number {
  return [...tasks.values()].reduce((n, p) => n + p.length, 0)
}

/** No task is active on two members (assigned or still being revoked). */
function assertSingleOwners(group: StreamsGroup): void {
  const owner = new Map<string, string>()
  for (const m of group.members.values()) {
    for (const tasks of [m.assigned.active, m.activePendingRevocation])
      for (const [id, partitions] of tasks)
        for (const p of partitions) {
          const key = `${id}-${p}`
          assert.ok(
            !owner.has(key) || owner.get(key) === m.memberId,
            `task ${key} on ${owner.get(key)} and ${m.memberId}`,
          )
          owner.set(key, m.memberId)
        }
  }
}

describe('streams group heartbeats', () => {
  it('joins, creates the missing internal topics first, then assigns every task to the one member', () => {
    const group = newStreamsGroup('g')
    const waiting = streamsGroupHeartbeat(group, request('a', 0), 0, config, view({ in: 3 }))
    assert.equal(waiting.errorCode, ErrorCode.NONE)
    assert.equal(waiting.memberEpoch, 1)
    assert.deepEqual(
      waiting.status.map((s) => s.statusCode),
      [StreamsStatus.MISSING_INTERNAL_TOPICS],
    )
    assert.deepEqual(
      waiting.creatableTopics.map((t) => [t.name, t.partitions, t.replicationFactor]),
      [
        ['app-by-word-repartition', 3, -1],
        ['app-counts-changelog', 3, -1],
      ],
    )
    assert.equal(count(activeOf(waiting)), 0)
    assert.equal(streamsGroupStateName(group), 'NotReady')
    // The topics now exist: the next heartbeat moves the group to a new epoch with 6 tasks.
    const ready = streamsGroupHeartbeat(group, request('a', 1, new Map()), 100, config, READY)
    assert.equal(ready.memberEpoch, 2)
    assert.deepEqual(ready.status, [])
    assert.deepEqual(ready.creatableTopics, [])
    assert.deepEqual(
      activeOf(ready),
      new Map([
        ['0', [0, 1, 2]],
        ['1', [0, 1, 2]],
      ]),
    )
    assert.equal(streamsGroupStateName(group), 'Stable')
  })

  it('says which source topics are missing', () => {
    const group = newStreamsGroup('g')
    const result = streamsGroupHeartbeat(group, request('a', 0), 0, config, view({}))
    assert.deepEqual(result.status, [
      { statusCode: StreamsStatus.MISSING_SOURCE_TOPICS, statusDetail: 'Source topics in are missing.' },
    ])
    assert.deepEqual(result.creatableTopics, [])
  })

  it('moves tasks to a second member only after the first revoked them', () => {
    const group = newStreamsGroup('g')
    const a0 = streamsGroupHeartbeat(group, request('a', 0), 0, config, READY)
    assert.equal(count(activeOf(a0)), 6)
    const b0 = streamsGroupHeartbeat(group, request('b', 0), 10, config, READY)
    assert.equal(b0.memberEpoch, 2)
    // b's target tasks are still a's: b gets none yet.
    assert.equal(count(activeOf(b0)), 0)
    assertSingleOwners(group)
    // a is told to keep 3 and stays at its epoch until it reports the others revoked.
    const a1 = streamsGroupHeartbeat(group, request('a', 1, activeOf(a0)), 20, config, READY)
    assert.equal(a1.memberEpoch, 1)
    const kept = activeOf(a1)
    assert.equal(count(kept), 3)
    const stillOwning = streamsGroupHeartbeat(group, request('a', 1, activeOf(a0)), 30, config, READY)
    assert.equal(stillOwning.memberEpoch, 1)
    const b1 = streamsGroupHeartbeat(group, request('b', 2, new Map()), 40, config, READY)
    assert.equal(count(activeOf(b1)), 0, 'b took tasks a still owns')
    assertSingleOwners(group)
    const a2 = streamsGroupHeartbeat(group, request('a', 1, kept), 50, config, READY)
    assert.equal(a2.memberEpoch, 2)
    const b2 = streamsGroupHeartbeat(group, request('b', 2, new Map()), 60, config, READY)
    assert.equal(count(activeOf(b2)), 3)
    assertSingleOwners(group)
    assert.equal(streamsGroupStateName(group), 'Stable')
  })

  it('never has a task active on two members, whatever the order of heartbeats', () => {
    let seed = 7
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed / 2147483648
    }
    const group = newStreamsGroup('g')
    const owned = new Map<string, { epoch: number; tasks: TaskSet }>()
    const ids = ['a', 'b', 'c', 'd']
    for (let step = 0; step < 400; step++) {
      const id = ids[Math.floor(random() * ids.length)] ?? 'a'
      const mine = owned.get(id)
      const leave = mine !== undefined && random() < 0.05
      const req = mine === undefined ? request(id, 0) : request(id, leave ? -1 : mine.epoch, mine.tasks)
      const result = streamsGroupHeartbeat(group, req, step * 10, config, READY)
      assert.equal(result.errorCode, ErrorCode.NONE, result.errorMessage ?? '')
      if (leave) owned.delete(id)
      // A client gives up what it is no longer assigned and takes what it is given.
      else if (result.tasks !== null) owned.set(id, { epoch: result.memberEpoch, tasks: activeOf(result) })
      else if (mine) owned.set(id, { epoch: result.memberEpoch, tasks: mine.tasks })
      assertSingleOwners(group)
    }
    // Quiet heartbeats of everyone left: all 6 tasks end up owned, balanced.
    for (let round = 0; round < 4; round++)
      for (const [id, mine] of owned) {
        const result = streamsGroupHeartbeat(
          group,
          request(id, mine.epoch, mine.tasks),
          5000 + round,
          config,
          READY,
        )
        owned.set(id, { epoch: result.memberEpoch, tasks: result.tasks ? activeOf(result) : mine.tasks })
      }
    const counts = [...owned.values()].map((m) => count(m.tasks))
    assert.equal(
      counts.reduce((a, b) => a + b, 0),
      6,
    )
    assert.ok(Math.max(...counts) - Math.min(...counts) <= 1, `unbalanced: ${counts}`)
  })

  it('removes a member that leaves or whose session ends, and one that does not revoke in time', () => {
    const group = newStreamsGroup('g')
    streamsGroupHeartbeat(group, request('a', 0), 0, config, READY)
    const b = streamsGroupHeartbeat(group, request('b', 0), 0, config, READY)
    assert.equal(b.memberEpoch, 2)
    // a must revoke 3 tasks within its rebalance timeout (30 s) and never does.
    streamsGroupHeartbeat(
      group,
      request(
        'a',
        1,
        new Map([
          ['0', [0, 1, 2]],
          ['1', [0, 1, 2]],
        ]),
      ),
      1000,
      config,
      READY,
    )
    assert.equal(nextStreamsDeadline(group, config), 31_000)
    streamsGroupHeartbeat(group, request('b', 2, new Map()), 30_000, config, READY)
    assert.equal(expireStreamsMembers(group, 31_000, config, READY), true)
    assert.deepEqual([...group.members.keys()], ['b'])
    // b's session (45 s from its last heartbeat at 30 s) ends too.
    assert.equal(expireStreamsMembers(group, 74_999, config, READY), false)
    assert.equal(expireStreamsMembers(group, 75_000, config, READY), true)
    assert.equal(streamsGroupStateName(group), 'Empty')
    const c = streamsGroupHeartbeat(group, request('c', 0), 80_000, config, READY)
    const left = streamsGroupHeartbeat(group, request('c', -1), 80_001, config, READY)
    assert.equal(left.memberEpoch, -1)
    assert.equal(c.errorCode, ErrorCode.NONE)
    assert.equal(group.members.size, 0)
  })

  it('keeps a static member that left with -2 and gives its tasks to its next incarnation', () => {
    const group = newStreamsGroup('g')
    const first = streamsGroupHeartbeat(group, { ...request('a', 0), instanceId: 'i1' }, 0, config, READY)
    const epoch = group.groupEpoch
    streamsGroupHeartbeat(group, { ...request('a', -2), instanceId: 'i1' }, 10, config, READY)
    assert.equal(group.members.get('a')?.memberEpoch, -2)
    const other = streamsGroupHeartbeat(group, { ...request('x', 0), instanceId: 'i1' }, 20, config, READY)
    assert.equal(other.errorCode, ErrorCode.NONE)
    assert.deepEqual(activeOf(other), activeOf(first))
    assert.equal(group.groupEpoch, epoch, 'a static replacement is no rebalance')
    const taken = streamsGroupHeartbeat(group, { ...request('y', 0), instanceId: 'i1' }, 30, config, READY)
    assert.equal(taken.errorCode, ErrorCode.UNRELEASED_INSTANCE_ID)
  })

  it('answers Kafka errors', () => {
    const group = newStreamsGroup('g')
    assert.equal(
      validateStreamsHeartbeat({ ...request('a', 0), topology: null })?.errorMessage,
      'Topology must be non-null when (re-)joining.',
    )
    assert.equal(validateStreamsHeartbeat({ ...request('', 0) })?.errorCode, ErrorCode.INVALID_REQUEST)
    assert.equal(validateStreamsHeartbeat({ ...request('a', -3) })?.errorCode, ErrorCode.INVALID_REQUEST)
    const badChangelog: StreamsTopology = {
      epoch: 1,
      subtopologies: [
        {
          ...TOPOLOGY.subtopologies[0],
          subtopologyId: '0',
          sourceTopics: ['in'],
          repartitionSinkTopics: [],
          stateChangelogTopics: [{ name: 'c', partitions: 4, replicationFactor: 0, topicConfigs: [] }],
          repartitionSourceTopics: [],
          copartitionGroups: [],
        },
      ],
    }
    assert.equal(
      validateStreamsHeartbeat({ ...request('a', 0), topology: badChangelog })?.errorCode,
      ErrorCode.STREAMS_INVALID_TOPOLOGY,
    )
    assert.equal(
      streamsGroupHeartbeat(group, request('a', 3, new Map()), 0, config, READY).errorCode,
      ErrorCode.UNKNOWN_MEMBER_ID,
    )
    streamsGroupHeartbeat(group, request('a', 0), 0, config, READY)
    const ahead = streamsGroupHeartbeat(group, request('a', 5, new Map()), 1, config, READY)
    assert.equal(ahead.errorCode, ErrorCode.FENCED_MEMBER_EPOCH)
    assert.equal(validateStreamsOffsetRequest(group, 'a', 1, 'commit'), ErrorCode.NONE)
    assert.equal(validateStreamsOffsetRequest(group, 'a', 2, 'commit'), ErrorCode.FENCED_MEMBER_EPOCH)
    assert.equal(validateStreamsOffsetRequest(group, 'zz', 1, 'commit'), ErrorCode.UNKNOWN_MEMBER_ID)
  })

  it('tells a member behind the topology epoch that it is stale, and refuses topology updates as Kafka 4.4', () => {
    const group = newStreamsGroup('g')
    streamsGroupHeartbeat(
      group,
      { ...request('a', 0), topology: { ...TOPOLOGY, epoch: 2 } },
      0,
      config,
      READY,
    )
    const stale = streamsGroupHeartbeat(group, request('b', 0), 0, config, READY)
    assert.deepEqual(stale.status, [
      {
        statusCode: StreamsStatus.STALE_TOPOLOGY,
        statusDetail: "The member's topology epoch 1 is behind the group's topology epoch 2.",
      },
    ])
    // Kafka 4.4 updates no topology: a newer epoch, or another topology at the group's, is refused.
    const refused = {
      errorCode: ErrorCode.INVALID_REQUEST,
      message: 'Topology updates are not supported yet.',
    }
    const newer = streamsGroupHeartbeat(
      group,
      { ...request('c', 0), topology: { ...TOPOLOGY, epoch: 3 } },
      0,
      config,
      READY,
    )
    assert.deepEqual({ errorCode: newer.errorCode, message: newer.errorMessage }, refused)
    const other = { ...TOPOLOGY, epoch: 2, subtopologies: TOPOLOGY.subtopologies.slice(0, 1) }
    const changed = streamsGroupHeartbeat(group, { ...request('c', 0), topology: other }, 0, config, READY)
    assert.deepEqual({ errorCode: changed.errorCode, message: changed.errorMessage }, refused)
    assert.equal(group.members.has('c'), false)
    const same = streamsGroupHeartbeat(
      group,
      { ...request('c', 0), topology: { ...TOPOLOGY, epoch: 2 } },
      0,
      config,
      READY,
    )
    assert.equal(same.errorCode, ErrorCode.NONE)
    assert.equal(group.topology?.epoch, 2)
  })
})

describe('streams group assignment configs and shutdown', () => {
  it('moves the group epoch when num.standby.replicas changes, as Kafka compares its assignment configs', () => {
    const group = newStreamsGroup('g')
    const a = streamsGroupHeartbeat(group, request('a', 0), 0, config, READY)
    const b = streamsGroupHeartbeat(group, request('b', 0), 0, config, READY)
    streamsGroupHeartbeat(group, request('a', a.memberEpoch, activeOf(a)), 0, config, READY)
    const epoch = group.groupEpoch
    streamsGroupHeartbeat(group, request('b', b.memberEpoch, null), 0, config, READY)
    assert.equal(group.groupEpoch, epoch, 'nothing changed')
    const withStandbys = { ...config, numStandbyReplicas: 1 }
    streamsGroupHeartbeat(group, request('b', b.memberEpoch, null), 0, withStandbys, READY)
    assert.equal(group.groupEpoch, epoch + 1)
    // Subtopology 1 is stateful: each of its 3 tasks gets a standby on the other member.
    const standbys = [...group.targetAssignment.values()].map((t) => count(t.standby))
    assert.equal(
      standbys.reduce((x, y) => x + y, 0),
      3,
    )
  })

  it("names the member that asked for the application's shutdown, as Kafka 4.4", () => {
    const group = newStreamsGroup('g')
    const a = streamsGroupHeartbeat(group, request('a', 0), 0, config, READY)
    streamsGroupHeartbeat(group, request('b', 0), 0, config, READY)
    const asked = streamsGroupHeartbeat(
      group,
      { ...request('a', a.memberEpoch, null), shutdownApplication: true },
      0,
      config,
      READY,
    )
    const detail = `Streams group member a encountered a fatal error and requested a shutdown for the entire application.`
    assert.deepEqual(
      asked.status
        .filter((s) => s.statusCode === StreamsStatus.SHUTDOWN_APPLICATION)
        .map((s) => s.statusDetail),
      [detail],
    )
  })
})

describe('streams group initial rebalance delay', () => {
  const delayed = { ...DEFAULT_STREAMS_GROUP_CONFIG, initialRebalanceDelayMs: 3000, assignmentIntervalMs: 0 }
  const delayedStatus = (r: StreamsHeartbeatResult) =>
    r.status.filter((s) => s.statusCode === StreamsStatus.ASSIGNMENT_DELAYED).map((s) => s.statusDetail)

  it("holds a new group's first assignment until the delay is over, then shares it among those who joined", () => {
    const group = newStreamsGroup('g')
    const a = streamsGroupHeartbeat(group, request('a', 0), 1000, delayed, READY)
    assert.equal(a.errorCode, ErrorCode.NONE)
    assert.equal(count(activeOf(a)), 0)
    assert.equal(a.memberEpoch, 1)
    assert.deepEqual(delayedStatus(a), ['Assignment delayed due to the configured initial rebalance delay.'])
    assert.equal(group.initialAssignmentDueMs, 4000)
    assert.equal(streamsGroupStateName(group), 'Assigning')
    const b = streamsGroupHeartbeat(group, request('b', 0), 2000, delayed, READY)
    assert.equal(count(activeOf(b)), 0)
    assert.equal(group.assignmentEpoch, 0)
    // Before the delay is over nothing is assigned, then the timer's step assigns once.
    assignDueInitialTargets(group, 3999, delayed)
    assert.equal(group.assignmentEpoch, 0)
    assignDueInitialTargets(group, 4000, delayed)
    assert.equal(group.initialAssignmentDueMs, null)
    assert.equal(group.assignmentEpoch, group.groupEpoch)
    const a2 = streamsGroupHeartbeat(group, request('a', a.memberEpoch, new Map()), 4100, delayed, READY)
    const b2 = streamsGroupHeartbeat(group, request('b', b.memberEpoch, new Map()), 4100, delayed, READY)
    assert.deepEqual(delayedStatus(a2), [])
    assert.equal(a2.memberEpoch, group.groupEpoch)
    // 6 tasks, both members joined within the delay: one assignment shares them.
    assert.equal(count(activeOf(a2)), 3)
    assert.equal(count(activeOf(b2)), 3)
  })

  it('assigns at the first heartbeat after the delay when no timer ran (a coordinator that loaded the group)', () => {
    const group = newStreamsGroup('g')
    const a = streamsGroupHeartbeat(group, request('a', 0), 0, delayed, READY)
    assert.equal(count(activeOf(a)), 0)
    const later = streamsGroupHeartbeat(group, request('a', a.memberEpoch, new Map()), 3000, delayed, READY)
    assert.equal(count(activeOf(later)), 6)
    assert.deepEqual(delayedStatus(later), [])
  })

  it('delays only the first assignment of an empty group: a member joining a running group is assigned at once', () => {
    const group = newStreamsGroup('g')
    const a = streamsGroupHeartbeat(group, request('a', 0), 0, delayed, READY)
    assignDueInitialTargets(group, 3000, delayed)
    streamsGroupHeartbeat(group, request('a', a.memberEpoch, new Map()), 3000, delayed, READY)
    const b = streamsGroupHeartbeat(group, request('b', 0), 3100, delayed, READY)
    assert.deepEqual(delayedStatus(b), [])
    assert.equal(group.assignmentEpoch, group.groupEpoch)
    assert.ok(group.targetAssignment.get('b') !== undefined)
  })

  it('assigns nothing when every member left before the delay was over', () => {
    const group = newStreamsGroup('g')
    streamsGroupHeartbeat(group, request('a', 0), 0, delayed, READY)
    streamsGroupHeartbeat(group, request('a', -1), 100, delayed, READY)
    assert.equal(group.members.size, 0)
    assignDueInitialTargets(group, 3000, delayed)
    assert.equal(group.initialAssignmentDueMs, null)
    assert.equal(group.targetAssignment.size, 0)
  })
})

describe('streams group assignment interval', () => {
  const batched = { ...DEFAULT_STREAMS_GROUP_CONFIG, initialRebalanceDelayMs: 0, assignmentIntervalMs: 1000 }
  const delayedStatus = (r: StreamsHeartbeatResult) =>
    r.status.filter((s) => s.statusCode === StreamsStatus.ASSIGNMENT_DELAYED).map((s) => s.statusDetail)

  it('computes a new target at most once per interval, at the first heartbeat after it', () => {
    const group = newStreamsGroup('g')
    const a = streamsGroupHeartbeat(group, request('a', 0), 10_000, batched, READY)
    assert.equal(count(activeOf(a)), 6)
    assert.equal(group.assignmentTimestampMs, 10_000)
    // b joins within the interval: a new group epoch, the old target (b has no tasks yet).
    const b = streamsGroupHeartbeat(group, request('b', 0), 10_400, batched, READY)
    assert.equal(group.groupEpoch, 2)
    assert.equal(group.assignmentEpoch, 1)
    assert.equal(b.memberEpoch, 1)
    assert.equal(count(activeOf(b)), 0)
    assert.deepEqual(delayedStatus(b), ['Assignment delayed due to the configured assignment interval.'])
    assert.equal(streamsGroupStateName(group), 'Assigning')
    // c joins too, still within it: batched into the same next assignment.
    streamsGroupHeartbeat(group, request('c', 0), 10_999, batched, READY)
    assert.equal(group.assignmentEpoch, 1)
    // The first heartbeat once the interval is over assigns the three of them together.
    const b2 = streamsGroupHeartbeat(group, request('b', 1, new Map()), 11_000, batched, READY)
    assert.deepEqual(delayedStatus(b2), [])
    assert.equal(group.assignmentEpoch, group.groupEpoch)
    assert.equal(group.assignmentTimestampMs, 11_000)
    assert.deepEqual(
      [...group.targetAssignment.values()].map((t) => count(t.active)),
      [2, 2, 2],
    )
  })

  it('leaves the target of a member that left until the next heartbeat after the interval', () => {
    const group = newStreamsGroup('g')
    const a = streamsGroupHeartbeat(group, request('a', 0), 0, batched, READY)
    streamsGroupHeartbeat(group, request('b', 0), 1000, batched, READY)
    assert.equal(group.assignmentEpoch, 2)
    streamsGroupHeartbeat(group, request('b', -1), 1500, batched, READY)
    // As Kafka's fencing: a new group epoch, b's target gone, no new target yet.
    assert.equal(group.groupEpoch, 3)
    assert.equal(group.assignmentEpoch, 2)
    assert.deepEqual([...group.targetAssignment.keys()], ['a'])
    const early = streamsGroupHeartbeat(group, request('a', 1, activeOf(a)), 1999, batched, READY)
    assert.deepEqual(delayedStatus(early), ['Assignment delayed due to the configured assignment interval.'])
    assert.equal(count(group.targetAssignment.get('a')?.active ?? new Map()), 3)
    streamsGroupHeartbeat(group, request('a', 1, activeOf(a)), 2000, batched, READY)
    assert.equal(group.assignmentEpoch, 3)
    assert.equal(count(group.targetAssignment.get('a')?.active ?? new Map()), 6)
    // An emptied group starts afresh: its next assignment is not held by the interval.
    streamsGroupHeartbeat(group, request('a', -1), 2100, batched, READY)
    assert.equal(group.assignmentTimestampMs, 0)
    const again = streamsGroupHeartbeat(group, request('c', 0), 2200, batched, READY)
    assert.equal(count(activeOf(again)), 6)
  })
})

describe('streams task assignor', () => {
  it('balances, keeps what members have, and places standbys on other processes', () => {
    const taskCounts = new Map([
      ['0', 4],
      ['1', 4],
    ])
    const result = assignTasks({
      members: [
        {
          memberId: 'a',
          processId: 'p1',
          current: {
            ...emptyTasks(),
            active: new Map([
              ['0', [0, 1, 2, 3]],
              ['1', [0, 1]],
            ]),
          },
          taskOffsets: new Map(),
        },
        { memberId: 'b', processId: 'p2', current: emptyTasks(), taskOffsets: new Map() },
        { memberId: 'c', processId: 'p2', current: emptyTasks(), taskOffsets: new Map() },
      ],
      taskCounts,
      stateful: new Set(['1']),
      numStandbyReplicas: 1,
    })
    const a = result.get('a')
    assert.ok(a)
    assert.equal(count(a.active), 3)
    // a keeps 3 of its own.
    for (const [id, partitions] of a.active)
      for (const p of partitions) assert.ok(id === '0' || (id === '1' && p < 2))
    assert.deepEqual([...result.values()].map((t) => count(t.active)).sort(), [2, 3, 3])
    // Every stateful task has one standby, never on its active member's process.
    for (let p = 0; p < 4; p++) {
      const activeOn = [...result].find(([, t]) => t.active.get('1')?.includes(p))?.[0]
      const standbyOn = [...result].filter(([, t]) => t.standby.get('1')?.includes(p)).map(([id]) => id)
      assert.equal(standbyOn.length, 1)
      const processOf = (id: string | undefined) => (id === 'a' ? 'p1' : 'p2')
      assert.notEqual(processOf(standbyOn[0]), processOf(activeOn))
    }
  })

  const member = (
    memberId: string,
    current: Partial<{ active: TaskSet; standby: TaskSet }> = {},
    offsets: [string, number, bigint][] = [],
  ) => {
    const taskOffsets = new Map<string, Map<number, bigint>>()
    for (const [id, p, offset] of offsets)
      taskOffsets.set(id, (taskOffsets.get(id) ?? new Map()).set(p, offset))
    return { memberId, processId: `p-${memberId}`, current: { ...emptyTasks(), ...current }, taskOffsets }
  }

  it("gives a task without an active owner to the member holding its state, most offsets first, as Kafka's", () => {
    const result = assignTasks({
      members: [
        member('a'),
        member('b', {}, [['1', 0, 900n]]),
        member('c', {}, [
          ['1', 0, 500n],
          ['1', 1, 500n],
        ]),
      ],
      taskCounts: new Map([['1', 2]]),
      stateful: new Set(['1']),
      numStandbyReplicas: 0,
    })
    assert.deepEqual(result.get('a')?.active, new Map())
    assert.deepEqual(result.get('b')?.active, new Map([['1', [0]]]))
    assert.deepEqual(result.get('c')?.active, new Map([['1', [1]]]))
  })

  it('moves an active task to its standby, and a standby back to its previous active member or holder', () => {
    const result = assignTasks({
      members: [
        member('a', { active: new Map([['1', [0, 1]]]) }),
        member('b', { standby: new Map([['1', [0]]]) }),
        member('c', { standby: new Map([['1', [1]]]) }),
        member('d'),
      ],
      taskCounts: new Map([['1', 2]]),
      stateful: new Set(['1']),
      numStandbyReplicas: 1,
    })
    assert.deepEqual(result.get('a')?.active, new Map([['1', [0]]]))
    assert.deepEqual(result.get('c')?.active, new Map([['1', [1]]]))
    assert.deepEqual(result.get('b')?.standby, new Map([['1', [0]]]))
    assert.deepEqual(result.get('d')?.standby, new Map([['1', [1]]]))
    for (const tuple of result.values()) assert.deepEqual(tuple.warmup, new Map())
  })

  it('takes the task offsets of the heartbeat into the assignment, and refuses a duplicate', () => {
    const delayed = {
      ...DEFAULT_STREAMS_GROUP_CONFIG,
      initialRebalanceDelayMs: 3000,
      assignmentIntervalMs: 0,
    }
    const group = newStreamsGroup('g')
    streamsGroupHeartbeat(group, request('a', 0), 0, delayed, READY)
    const offset = { subtopologyId: '1', partition: 1, offset: 5n }
    const duplicate = streamsGroupHeartbeat(
      group,
      { ...request('b', 0), taskOffsets: [offset, offset] },
      100,
      delayed,
      READY,
    )
    assert.equal(duplicate.errorCode, ErrorCode.INVALID_REQUEST)
    assert.equal(
      duplicate.errorMessage,
      'Task offsets contain a duplicate entry for subtopology 1 and partition 1.',
    )
    assert.equal(group.members.has('b'), false)
    streamsGroupHeartbeat(group, { ...request('b', 0), taskOffsets: [offset] }, 100, delayed, READY)
    assignDueInitialTargets(group, 3000, delayed)
    assert.ok(group.targetAssignment.get('b')?.active.get('1')?.includes(1))
    assert.deepEqual(group.taskOffsets.get('b')?.offsets, new Map([['1', new Map([[1, 5n]])]]))
    // A heartbeat without offsets keeps the last report; leaving drops it.
    streamsGroupHeartbeat(
      group,
      request('b', group.members.get('b')?.memberEpoch ?? 0, null),
      3100,
      delayed,
      READY,
    )
    assert.equal(group.taskOffsets.get('b')?.offsets.get('1')?.get(1), 5n)
    streamsGroupHeartbeat(group, request('b', -1), 3200, delayed, READY)
    assert.equal(group.taskOffsets.has('b'), false)
  })
})
