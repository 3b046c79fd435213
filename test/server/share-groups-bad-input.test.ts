/**
 * Issue 33 items 2 and 7: share groups' bad input, with raw requests, on tidelog and on
 * Apache Kafka 4.4; both must answer each step with the same error codes. ShareGroupHeartbeat
 * without a member id, without topics on a join, with a bad epoch, for an unknown group or
 * member, on a classic group; ShareGroupDescribe of a classic group; ShareFetch and
 * ShareAcknowledge without a session, with a stale session epoch, with acknowledgements in
 * the request that opens a session, with offsets never delivered, with malformed batches,
 * for an unknown topic id.
 */
import assert from 'node:assert/strict'
import { Admin } from '../../src/client/admin.js'
import { Producer } from '../../src/client/producer.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { ListGroupsResponse } from '../../src/protocol/generated/list-groups-response.js'
import type { MetadataResponse } from '../../src/protocol/generated/metadata-response.js'
import type { OffsetCommitResponse } from '../../src/protocol/generated/offset-commit-response.js'
import type { ShareAcknowledgeResponse } from '../../src/protocol/generated/share-acknowledge-response.js'
import type { ShareFetchResponse } from '../../src/protocol/generated/share-fetch-response.js'
import type { ShareGroupDescribeResponse } from '../../src/protocol/generated/share-group-describe-response.js'
import type { ShareGroupHeartbeatResponse } from '../../src/protocol/generated/share-group-heartbeat-response.js'
import { createTopics } from '../client/helpers.js'
import { describeBesideKafka } from '../helpers/beside-kafka.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { waitUntil } from '../helpers/wait.js'

const TOPIC = 'share-bad'
const GROUP = 'share-bad-group'
const CLASSIC = 'share-bad-classic'
/** Kafka Uuids in their base64url form, as the Java client makes member ids. */
const MEMBER = 'c2hhcmUtbWVtYmVyLTAwMQ'
const STRANGER = 'c2hhcmUtbWVtYmVyLTAwMg'
const UNKNOWN_TOPIC_ID = 'AAAAAAAAAAAAAAAAAAAAAQ'
const RETRIABLE = new Set<number>([
  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
  ErrorCode.NOT_COORDINATOR,
])

/** The steps, each answered `label code[ partition codes]`. */
async function sequence(bootstrap: string): Promise<string[]> {
  await createTopics(bootstrap, [{ topic: TOPIC, partitions: 1, replicationFactor: 1 }])
  const admin = new Admin({ bootstrapServers: bootstrap })
  await admin.findCoordinator(GROUP)
  await admin.findCoordinator(CLASSIC)
  admin.close()
  const raw = await RawClient.connect(Number(bootstrap.split(':')[1]))
  const lines: string[] = []
  try {
    const metadata = await rawCall<MetadataResponse>(raw, ApiKey.Metadata, 12, {
      topics: [{ name: TOPIC, topicId: 'AAAAAAAAAAAAAAAAAAAAAA' }],
    })
    const topicId = metadata.topics[0].topicId
    const heartbeat = (label: string, body: object) =>
      rawCall<ShareGroupHeartbeatResponse>(raw, ApiKey.ShareGroupHeartbeat, 1, {
        groupId: GROUP,
        ...body,
      }).then((r) => {
        lines.push(`heartbeat ${label} ${r.errorCode}`)
        return r
      })
    await heartbeat('no-member-id', { memberId: '', memberEpoch: 0, subscribedTopicNames: [TOPIC] })
    await heartbeat('join-without-topics', { memberId: MEMBER, memberEpoch: 0, subscribedTopicNames: null })
    await heartbeat('epoch-below-minus-one', {
      memberId: MEMBER,
      memberEpoch: -2,
      subscribedTopicNames: [TOPIC],
    })
    // The join: retried while the coordinator loads (Kafka creates __consumer_offsets lazily).
    let joined: ShareGroupHeartbeatResponse | undefined
    await waitUntil('the share member joins', 60_000, async () => {
      joined = await rawCall<ShareGroupHeartbeatResponse>(raw, ApiKey.ShareGroupHeartbeat, 1, {
        groupId: GROUP,
        memberId: MEMBER,
        memberEpoch: 0,
        subscribedTopicNames: [TOPIC],
      })
      return !RETRIABLE.has(joined.errorCode)
    })
    assert.ok(joined)
    lines.push(`heartbeat join ${joined.errorCode}`)
    const epoch = joined.memberEpoch
    // After the join: the coordinator has loaded (Kafka answers NOT_COORDINATOR until then).
    await heartbeat('unknown-group', {
      groupId: `${GROUP}-absent`,
      memberId: MEMBER,
      memberEpoch: 3,
      subscribedTopicNames: null,
    })
    await heartbeat('fenced-epoch', { memberId: MEMBER, memberEpoch: epoch + 5, subscribedTopicNames: null })
    await heartbeat('unknown-member', { memberId: STRANGER, memberEpoch: epoch, subscribedTopicNames: null })
    await heartbeat('leave-unknown-member', {
      memberId: STRANGER,
      memberEpoch: -1,
      subscribedTopicNames: null,
    })
    // A classic group (made by a commit outside group management) is not a share group.
    const commit = await rawCall<OffsetCommitResponse>(raw, ApiKey.OffsetCommit, 8, {
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
    lines.push(`offset-commit classic ${commit.topics[0].partitions[0].errorCode}`)
    const onClassic = await rawCall<ShareGroupHeartbeatResponse>(raw, ApiKey.ShareGroupHeartbeat, 1, {
      groupId: CLASSIC,
      memberId: MEMBER,
      memberEpoch: 0,
      subscribedTopicNames: [TOPIC],
    })
    lines.push(`heartbeat classic-group ${onClassic.errorCode} ${onClassic.errorMessage}`)
    const described = await rawCall<ShareGroupDescribeResponse>(raw, ApiKey.ShareGroupDescribe, 1, {
      groupIds: [GROUP, CLASSIC],
    })
    for (const g of described.groups)
      lines.push(`describe ${g.groupId} ${g.errorCode} ${g.groupState} ${g.members.length} ${g.assignorName}`)

    const listed = await rawCall<ListGroupsResponse>(raw, ApiKey.ListGroups, 5, {
      statesFilter: [],
      typesFilter: [],
    })
    for (const g of listed.groups
      .filter((l) => l.groupId.startsWith('share-bad'))
      .sort((a, b) => (a.groupId < b.groupId ? -1 : 1)))
      lines.push(`list ${g.groupId} ${g.protocolType} ${g.groupState} ${g.groupType}`)
    const partitionsOf = (r: { responses: { partitions: { errorCode: number }[] }[] }) =>
      r.responses.flatMap((t) => t.partitions.map((p) => p.errorCode)).join(',')
    const fetch = async (label: string, epochOf: number, body: object = {}) => {
      const r = await rawCall<ShareFetchResponse>(raw, ApiKey.ShareFetch, 1, {
        groupId: GROUP,
        memberId: MEMBER,
        shareSessionEpoch: epochOf,
        maxWaitMs: 0,
        minBytes: 0,
        maxRecords: 100,
        batchSize: 100,
        topics: [
          { topicId, partitions: [{ partitionIndex: 0, partitionMaxBytes: 0, acknowledgementBatches: [] }] },
        ],
        ...body,
      })
      lines.push(`fetch ${label} ${r.errorCode} ${partitionsOf(r)}`)
    }
    const acknowledge = async (label: string, epochOf: number, batches: object[]) => {
      const r = await rawCall<ShareAcknowledgeResponse>(raw, ApiKey.ShareAcknowledge, 1, {
        groupId: GROUP,
        memberId: MEMBER,
        shareSessionEpoch: epochOf,
        topics: [
          {
            topicId,
            partitions: [{ partitionIndex: 0, partitionMaxBytes: 0, acknowledgementBatches: batches }],
          },
        ],
      })
      lines.push(`acknowledge ${label} ${r.errorCode} ${partitionsOf(r)}`)
    }
    const accept = (first: bigint, last: bigint) => ({
      firstOffset: first,
      lastOffset: last,
      acknowledgeTypes: [1],
    })
    await fetch('no-session', 3)
    await fetch('no-member-id', 0, { memberId: '' })
    await fetch('open-with-acks', 0, {
      topics: [
        {
          topicId,
          partitions: [{ partitionIndex: 0, partitionMaxBytes: 0, acknowledgementBatches: [accept(0n, 0n)] }],
        },
      ],
    })
    await fetch('open', 0)
    await fetch('stale-epoch', 2)
    await fetch('next', 1)
    await acknowledge('opening-epoch', 0, [accept(0n, 0n)])
    await acknowledge('never-delivered', 2, [accept(0n, 0n)])
    await acknowledge('first-after-last', 3, [accept(5n, 4n)])
    await acknowledge('unknown-type', 4, [{ firstOffset: 0n, lastOffset: 0n, acknowledgeTypes: [9] }])
    await fetch('unknown-topic-id', 5, {
      topics: [
        {
          topicId: UNKNOWN_TOPIC_ID,
          partitions: [{ partitionIndex: 0, partitionMaxBytes: 0, acknowledgementBatches: [] }],
        },
      ],
    })
    await fetch('close', -1, { topics: [] })
    await fetch('after-close', 7)
    await acquiredAndAcknowledged(bootstrap, raw, topicId, lines)
  } finally {
    raw.socket.destroy()
  }
  return lines
}

/**
 * Records acquired by one member: another member's acknowledgement of them, and a second
 * acknowledgement after ACCEPT, are INVALID_RECORD_STATE; their own ACCEPT is not. Records
 * are produced until a fetch acquires some (the share-partition starts at the latest offset
 * when first fetched, and Kafka initializes it asynchronously).
 */
async function acquiredAndAcknowledged(
  bootstrap: string,
  raw: RawClient,
  topicId: string,
  lines: string[],
): Promise<void> {
  const epochs = new Map<string, number>([
    [MEMBER, 0],
    [STRANGER, 0],
  ])
  const partition = (acknowledgementBatches: object[]) => ({
    topicId,
    partitions: [{ partitionIndex: 0, partitionMaxBytes: 0, acknowledgementBatches }],
  })
  const fetch = async (memberId: string, maxWaitMs: number) => {
    const epoch = epochs.get(memberId) ?? 0
    epochs.set(memberId, epoch + 1)
    return rawCall<ShareFetchResponse>(raw, ApiKey.ShareFetch, 1, {
      groupId: GROUP,
      memberId,
      shareSessionEpoch: epoch,
      maxWaitMs,
      minBytes: 1,
      maxRecords: 100,
      batchSize: 100,
      topics: epoch === 0 ? [partition([])] : [],
    })
  }
  const acknowledge = async (label: string, memberId: string, batch: object) => {
    const epoch = epochs.get(memberId) ?? 0
    epochs.set(memberId, epoch + 1)
    const r = await rawCall<ShareAcknowledgeResponse>(raw, ApiKey.ShareAcknowledge, 1, {
      groupId: GROUP,
      memberId,
      shareSessionEpoch: epoch,
      topics: [partition([batch])],
    })
    lines.push(
      `acknowledge ${label} ${r.errorCode} ${r.responses.flatMap((t) => t.partitions.map((p) => p.errorCode))}`,
    )
  }
  await fetch(STRANGER, 0)
  const producer = new Producer({ bootstrapServers: bootstrap, lingerMs: 0 })
  let acquired: { firstOffset: bigint; lastOffset: bigint; deliveryCount: number } | undefined
  try {
    await fetch(MEMBER, 0)
    await waitUntil('a share fetch acquires records', 60_000, async () => {
      await producer.send({ topic: TOPIC, key: null, value: Buffer.from('v') })
      const r = await fetch(MEMBER, 1000)
      acquired = r.responses[0]?.partitions[0]?.acquiredRecords[0]
      return acquired !== undefined
    })
  } finally {
    await producer.close()
  }
  assert.ok(acquired)
  lines.push(`fetch acquired delivery-count ${acquired.deliveryCount}`)
  const batch = { firstOffset: acquired.firstOffset, lastOffset: acquired.firstOffset, acknowledgeTypes: [1] }
  await acknowledge('held-by-another-member', STRANGER, batch)
  await acknowledge('own-accept', MEMBER, batch)
  // Below the start offset now: Kafka passes over it.
  await acknowledge('accepted-twice', MEMBER, batch)
}

describeBesideKafka('share groups: bad input answered as Kafka 4.4 does', {
  tidelog: { properties: { 'offsets.topic.num.partitions': 3 } },
  kafka: { features: { 'share.version': 1 } },
  sequence,
})
