/**
 * Issue 33 item 4: a streams group's bad input, with raw requests, on tidelog and on Apache
 * Kafka 4.4 (both with ACLs: DESCRIBE on one source topic denied); both must answer each step
 * with the same code and message. A heartbeat (epoch > 0) or a leave for a group that does
 * not exist is GROUP_ID_NOT_FOUND, with the two messages Kafka has; a join whose topology
 * names a Kafka internal topic or an invalid topic name is STREAMS_INVALID_TOPOLOGY; one whose
 * topic may not be described is TOPIC_AUTHORIZATION_FAILED; once the group has a topology, a
 * join with a newer epoch or another topology at the same epoch is INVALID_REQUEST "Topology
 * updates are not supported yet." (Kafka 4.4 never answers STREAMS_INVALID_TOPOLOGY_EPOCH or
 * STREAMS_TOPOLOGY_FENCED), and one with an older epoch is told STALE_TOPOLOGY.
 */
import assert from 'node:assert/strict'
import { Admin } from '../../src/client/admin.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import {
  AclOperation,
  AclPermissionType,
  PatternType,
  ResourceType,
} from '../../src/security/authorizer/acl.js'
import { createTopics } from '../client/helpers.js'
import { describeBesideKafka } from '../helpers/beside-kafka.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { streamsJoinFields } from '../helpers/streams-heartbeat.js'
import { waitUntil } from '../helpers/wait.js'

const GROUP = 'streams-bad-input-app'
const TOPIC = 'streams-bad-input-in'
const SECRET = 'streams-bad-input-secret'
const MEMBER = 'c3RyZWFtcy1iYWQtbWVtYjE'
const OTHER = 'c3RyZWFtcy1iYWQtbWVtYjI'
const AUTHORIZER = {
  'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
  'allow.everyone.if.no.acl.found': true,
}
const RETRIABLE = new Set<number>([
  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
  ErrorCode.NOT_COORDINATOR,
])

function topology(epoch: number, sourceTopics: string[]) {
  return {
    epoch,
    subtopologies: [
      {
        subtopologyId: '0',
        sourceTopics,
        sourceTopicRegex: [],
        stateChangelogTopics: [],
        repartitionSinkTopics: [],
        repartitionSourceTopics: [],
        copartitionGroups: [],
      },
    ],
  }
}

interface Answer {
  errorCode: number
  errorMessage: string | null
  memberEpoch: number
  status: { statusCode: number; statusDetail: string }[] | null
}

async function sequence(bootstrap: string): Promise<string[]> {
  await createTopics(bootstrap, [
    { topic: TOPIC, partitions: 1, replicationFactor: 1 },
    { topic: SECRET, partitions: 1, replicationFactor: 1 },
  ])
  const raw = await RawClient.connect(Number(bootstrap.split(':')[1]))
  const lines: string[] = []
  try {
    const acl = await rawCall<{ results: { errorCode: number }[] }>(raw, ApiKey.CreateAcls, 3, {
      creations: [
        {
          resourceType: ResourceType.TOPIC,
          resourceName: SECRET,
          resourcePatternType: PatternType.LITERAL,
          principal: 'User:ANONYMOUS',
          host: '*',
          operation: AclOperation.DESCRIBE,
          permissionType: AclPermissionType.DENY,
        },
      ],
    })
    assert.deepEqual(
      acl.results.map((r) => r.errorCode),
      [ErrorCode.NONE],
    )
    const admin = new Admin({ bootstrapServers: bootstrap })
    await admin.findCoordinator(GROUP)
    admin.close()
    const heartbeat = (body: object) =>
      rawCall<Answer>(raw, ApiKey.StreamsGroupHeartbeat, 1, { groupId: GROUP, memberId: MEMBER, ...body })
    const join = (memberId: string, epoch: number, sources: string[]) =>
      heartbeat({ memberId, ...streamsJoinFields(topology(epoch, sources), `process-${memberId}`) })
    const note = (label: string, r: Answer) => lines.push(`${label} ${r.errorCode} ${r.errorMessage}`)
    note('internal-topic', await join(MEMBER, 1, [TOPIC, '__consumer_offsets']))
    note('invalid-name', await join(MEMBER, 1, [TOPIC, 'no spaces allowed']))
    // The ACL reaches every node's authorizer in its own time.
    let denied: Answer | undefined
    await waitUntil('DESCRIBE is denied', 30_000, async () => {
      denied = await join(MEMBER, 1, [TOPIC, SECRET])
      return denied.errorCode === ErrorCode.TOPIC_AUTHORIZATION_FAILED
    })
    assert.ok(denied)
    note('describe-denied', denied)
    // Kafka creates __consumer_offsets on the first join: retried while the coordinator loads.
    let joined: Answer | undefined
    await waitUntil('the member joins', 60_000, async () => {
      joined = await join(MEMBER, 2, [TOPIC])
      return !RETRIABLE.has(joined.errorCode)
    })
    assert.ok(joined)
    note('join', joined)
    note('unknown-group-heartbeat', await heartbeat({ groupId: `${GROUP}-absent`, memberEpoch: 3 }))
    note('unknown-group-leave', await heartbeat({ groupId: `${GROUP}-absent`, memberEpoch: -1 }))
    note('newer-topology-epoch', await join(OTHER, 3, [TOPIC]))
    note('other-topology-same-epoch', await join(OTHER, 2, [TOPIC, SECRET.replace('secret', 'other')]))
    const stale = await join(OTHER, 1, [TOPIC])
    note('older-topology-epoch', stale)
    lines.push(
      `older-topology-epoch status ${JSON.stringify(stale.status?.filter((s) => s.statusCode === 0))}`,
    )
    await heartbeat({ memberId: OTHER, memberEpoch: -1 })
    await heartbeat({ memberEpoch: -1 })
  } finally {
    raw.close()
  }
  return lines
}

describeBesideKafka('streams groups: bad input beside Kafka 4.4', {
  tidelog: { properties: { 'offsets.topic.num.partitions': 1, ...AUTHORIZER } },
  kafka: { properties: AUTHORIZER },
  sequence,
})
