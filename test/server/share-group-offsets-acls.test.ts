/**
 * The share group offsets APIs under ACLs (StandardAuthorizer, everything allowed where no
 * ACL is found, DENY ACLs for the anonymous principal): GROUP_AUTHORIZATION_FAILED for a
 * denied group, TOPIC_AUTHORIZATION_FAILED on a denied topic's partitions (describe, alter)
 * or on the topic (delete), CLUSTER_AUTHORIZATION_FAILED on the share state requests
 * without CLUSTER_ACTION.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Admin } from '../../src/client/admin.js'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import type { AlterShareGroupOffsetsResponse } from '../../src/protocol/generated/alter-share-group-offsets-response.js'
import type { DeleteShareGroupOffsetsResponse } from '../../src/protocol/generated/delete-share-group-offsets-response.js'
import type { DescribeShareGroupOffsetsResponse } from '../../src/protocol/generated/describe-share-group-offsets-response.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import type { InitializeShareGroupStateResponse } from '../../src/protocol/generated/initialize-share-group-state-response.js'
import {
  AclOperation,
  AclPermissionType,
  PatternType,
  ResourceType,
} from '../../src/security/authorizer/acl.js'
import type { Cluster } from '../../src/server/cluster.js'
import { startBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { waitUntil } from '../helpers/wait.js'

const DENIED_GROUP = 'acl-denied-group'
const GROUP = 'acl-group'
const DENIED_TOPIC = 'acl-denied-topic'

const deny = (resourceType: number, resourceName: string, operation: number) => ({
  resourceType,
  resourceName,
  resourcePatternType: PatternType.LITERAL,
  principal: 'User:ANONYMOUS',
  host: '*',
  operation,
  permissionType: AclPermissionType.DENY,
})

describe('share group offsets APIs under ACLs', () => {
  let cluster: Cluster | undefined
  let raw: RawClient | undefined
  before(async () => {
    cluster = await startBroker({
      port: 0,
      properties: {
        'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
        'allow.everyone.if.no.acl.found': true,
        'offsets.topic.num.partitions': 1,
      },
    })
    // Makes __consumer_offsets, so that the group coordinator answers.
    const admin = new Admin({ bootstrapServers: cluster.bootstrapServers })
    await admin.findCoordinator(GROUP)
    admin.close()
    raw = await RawClient.connect(Number(cluster.bootstrapServers.split(':')[1]))
    const created = await rawCall<{ results: { errorCode: number }[] }>(raw, ApiKey.CreateAcls, 3, {
      creations: [
        deny(ResourceType.GROUP, DENIED_GROUP, AclOperation.ALL),
        deny(ResourceType.TOPIC, DENIED_TOPIC, AclOperation.ALL),
        deny(ResourceType.CLUSTER, 'kafka-cluster', AclOperation.CLUSTER_ACTION),
      ],
    })
    assert.deepEqual(
      created.results.map((r) => r.errorCode),
      [0, 0, 0],
    )
  })
  after(async () => {
    raw?.close()
    await cluster?.stop()
  })

  const describeOffsets = (groupId: string, topics: { topicName: string; partitions: number[] }[] | null) =>
    rawCall<DescribeShareGroupOffsetsResponse>(raw as RawClient, ApiKey.DescribeShareGroupOffsets, 1, {
      groups: [{ groupId, topics }],
    }).then((r) => r.groups[0])
  const alter = (groupId: string, topicName: string) =>
    rawCall<AlterShareGroupOffsetsResponse>(raw as RawClient, ApiKey.AlterShareGroupOffsets, 0, {
      groupId,
      topics: [{ topicName, partitions: [{ partitionIndex: 0, startOffset: 0n }] }],
    })
  const deleteOffsets = (groupId: string, topicName: string) =>
    rawCall<DeleteShareGroupOffsetsResponse>(raw as RawClient, ApiKey.DeleteShareGroupOffsets, 0, {
      groupId,
      topics: [{ topicName }],
    })

  it('answers GROUP_AUTHORIZATION_FAILED for a denied group', { timeout: 60_000 }, async () => {
    // The ACLs apply once the broker has the metadata change.
    await waitUntil('the group ACL applies', 30_000, async () => {
      return (await describeOffsets(DENIED_GROUP, null)).errorCode === ErrorCode.GROUP_AUTHORIZATION_FAILED
    })
    assert.equal((await alter(DENIED_GROUP, 'any')).errorCode, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    assert.equal((await deleteOffsets(DENIED_GROUP, 'any')).errorCode, ErrorCode.GROUP_AUTHORIZATION_FAILED)
  })

  it('answers TOPIC_AUTHORIZATION_FAILED on a denied topic', { timeout: 60_000 }, async () => {
    const altered = await alter(GROUP, DENIED_TOPIC)
    assert.equal(altered.errorCode, ErrorCode.NONE)
    assert.equal(altered.responses[0].partitions[0].errorCode, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    const described = await describeOffsets(GROUP, [{ topicName: DENIED_TOPIC, partitions: [0] }])
    assert.equal(described.topics[0].partitions[0].errorCode, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    const deleted = await deleteOffsets(GROUP, DENIED_TOPIC)
    assert.equal(deleted.responses[0].errorCode, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
  })

  it('answers CLUSTER_AUTHORIZATION_FAILED on the share state requests without CLUSTER_ACTION', async () => {
    const answer = await rawCall<InitializeShareGroupStateResponse>(
      raw as RawClient,
      ApiKey.InitializeShareGroupState,
      0,
      {
        groupId: GROUP,
        topics: [
          {
            topicId: 'AAAAAAAAAAAAAAAAAAAAAQ',
            partitions: [{ partition: 0, stateEpoch: 0, startOffset: 0n }],
          },
        ],
      },
    )
    assert.equal(answer.results[0].partitions[0].errorCode, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
  })
})
