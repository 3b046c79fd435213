/**
 * What the handlers ask the authorizer, on the wire (raw requests from the PLAINTEXT
 * listener, whose principal is User:ANONYMOUS, with ACLs written to the broker's ACL store):
 * Metadata hides and refuses topics and needs CREATE to auto-create; the
 * include_*_authorized_operations bitfields of Metadata, DescribeCluster and DescribeGroups;
 * InitProducerId's IDEMPOTENT_WRITE-or-WRITE-on-any-topic rule and transactional id check.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { ErrorCode } from '../../src/protocol/error-codes.js'
import { ApiKey } from '../../src/protocol/generated/index.js'
import {
  type AclBinding,
  AclOperation,
  AclPermissionType,
  PatternType,
  ResourceType,
} from '../../src/security/authorizer/acl.js'
import { operationBits } from '../../src/security/authorizer/standard-authorizer.js'
import type { Cluster } from '../../src/server/cluster.js'
import { startBroker } from '../helpers/cluster.js'
import { rawCall } from '../helpers/raw-call.js'
import { RawClient } from '../helpers/raw-client.js'
import { createTopic } from '../helpers/topics.js'

let cluster: Cluster
let client: RawClient

const OMITTED = -2147483648

function allow(
  resourceType: number,
  resourceName: string,
  operation: number,
  patternType: number = PatternType.LITERAL,
): AclBinding {
  return {
    resourceType,
    resourceName,
    patternType,
    principal: 'User:ANONYMOUS',
    host: '*',
    operation,
    permissionType: AclPermissionType.ALLOW,
  } as AclBinding
}

async function grant(...bindings: AclBinding[]): Promise<void> {
  await cluster.brokers[0].acls!.create(bindings)
}

interface MetadataTopic {
  errorCode: number
  name: string | null
  topicAuthorizedOperations: number
}
interface MetadataResponse {
  topics: MetadataTopic[]
  clusterAuthorizedOperations: number
}

before(async () => {
  cluster = await startBroker({
    properties: {
      'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
      'offsets.topic.replication.factor': '1',
      'offsets.topic.num.partitions': '1',
    },
  })
  for (const topic of ['seen', 'written', 'hidden']) await createTopic(cluster, topic)
  await grant(
    allow(ResourceType.TOPIC, 'seen', AclOperation.DESCRIBE),
    allow(ResourceType.TOPIC, 'auto-', AclOperation.DESCRIBE, PatternType.PREFIXED),
    allow(ResourceType.GROUP, 'g', AclOperation.DESCRIBE),
  )
  const [, port] = cluster.brokers[0].listenerAddress('PLAINTEXT').split(':')
  client = await RawClient.connect(Number(port))
})

after(async () => {
  client?.socket.destroy()
  await cluster?.stop()
})

test('Metadata for all topics lists only the describable ones, with their authorized operations', async () => {
  const all = await rawCall<MetadataResponse>(client, ApiKey.Metadata, 12, {
    topics: null,
    includeTopicAuthorizedOperations: true,
  })
  assert.deepEqual(
    all.topics.map((t) => [t.name, t.errorCode, t.topicAuthorizedOperations]),
    [['seen', 0, operationBits([AclOperation.DESCRIBE])]],
  )
  const withoutOps = await rawCall<MetadataResponse>(client, ApiKey.Metadata, 12, { topics: null })
  assert.equal(withoutOps.topics[0].topicAuthorizedOperations, OMITTED)
})

test('Metadata refuses a named topic it may not describe, and auto-creates only with CREATE', async () => {
  const named = await rawCall<MetadataResponse>(client, ApiKey.Metadata, 9, {
    topics: [{ name: 'hidden' }, { name: 'no-such-topic' }, { name: 'auto-refused' }],
    allowAutoTopicCreation: true,
  })
  assert.deepEqual(
    named.topics.map((t) => [t.name, t.errorCode]),
    [
      ['hidden', ErrorCode.TOPIC_AUTHORIZATION_FAILED],
      ['no-such-topic', ErrorCode.TOPIC_AUTHORIZATION_FAILED],
      ['auto-refused', ErrorCode.TOPIC_AUTHORIZATION_FAILED],
    ],
  )
  assert.equal(cluster.brokers[0].metadataImage().topics.has('auto-refused'), false)
  await grant(allow(ResourceType.TOPIC, 'auto-made', AclOperation.CREATE))
  const created = await rawCall<MetadataResponse>(client, ApiKey.Metadata, 9, {
    topics: [{ name: 'auto-made' }],
    allowAutoTopicCreation: true,
  })
  assert.notEqual(created.topics[0].errorCode, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
  assert.equal(cluster.brokers[0].metadataImage().topics.has('auto-made'), true)
})

test('cluster authorized operations: 0 without DESCRIBE on the cluster, else the allowed set', async () => {
  const ask = async () => ({
    metadata: (
      await rawCall<MetadataResponse>(client, ApiKey.Metadata, 10, {
        topics: [],
        includeClusterAuthorizedOperations: true,
      })
    ).clusterAuthorizedOperations,
    describeCluster: (
      await rawCall<{ clusterAuthorizedOperations: number }>(client, ApiKey.DescribeCluster, 1, {
        includeClusterAuthorizedOperations: true,
      })
    ).clusterAuthorizedOperations,
  })
  assert.deepEqual(await ask(), { metadata: 0, describeCluster: 0 })
  await grant(
    allow(ResourceType.CLUSTER, 'kafka-cluster', AclOperation.DESCRIBE),
    allow(ResourceType.CLUSTER, 'kafka-cluster', AclOperation.ALTER),
  )
  const bits = operationBits([AclOperation.DESCRIBE, AclOperation.ALTER])
  assert.deepEqual(await ask(), { metadata: bits, describeCluster: bits })
})

test('DescribeGroups: GROUP_AUTHORIZATION_FAILED without DESCRIBE, authorized operations when asked', async () => {
  const describe = () =>
    rawCall<{
      groups: { groupId: string; errorCode: number; authorizedOperations: number }[]
    }>(client, ApiKey.DescribeGroups, 5, { groups: ['g', 'h'], includeAuthorizedOperations: true })
  // FindCoordinator (DESCRIBE on g is enough) creates __consumer_offsets; its leader loads it.
  const found = await rawCall<{ coordinators: { errorCode: number }[] }>(client, ApiKey.FindCoordinator, 4, {
    keyType: 0,
    coordinatorKeys: ['g', 'h'],
  })
  assert.deepEqual(
    found.coordinators.map((c) => c.errorCode === ErrorCode.GROUP_AUTHORIZATION_FAILED),
    [false, true],
  )
  let response = await describe()
  for (let attempt = 0; response.groups[0].errorCode !== ErrorCode.NONE && attempt < 50; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    response = await describe()
  }
  assert.deepEqual(
    response.groups.map((g) => [g.groupId, g.errorCode, g.authorizedOperations]),
    [
      ['g', ErrorCode.NONE, operationBits([AclOperation.DESCRIBE])],
      ['h', ErrorCode.GROUP_AUTHORIZATION_FAILED, OMITTED],
    ],
  )
})

test('InitProducerId: idempotent needs IDEMPOTENT_WRITE or WRITE on a topic; transactional needs WRITE on its id', async () => {
  const init = (transactionalId: string | null) =>
    rawCall<{ errorCode: number; producerId: bigint }>(client, ApiKey.InitProducerId, 4, {
      transactionalId,
      transactionTimeoutMs: 60000,
      producerId: -1n,
      producerEpoch: -1,
    })
  assert.equal((await init(null)).errorCode, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
  await grant(allow(ResourceType.TOPIC, 'written', AclOperation.WRITE))
  const idempotent = await init(null)
  assert.equal(idempotent.errorCode, ErrorCode.NONE)
  assert.ok(idempotent.producerId >= 0n)
  assert.equal((await init('tx-1')).errorCode, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
})

test('inter-broker requests from a principal without CLUSTER_ACTION are refused', async () => {
  const partition = {
    partition: 0,
    currentLeaderEpoch: -1,
    fetchOffset: 0n,
    lastFetchedEpoch: -1,
    logStartOffset: -1n,
    partitionMaxBytes: 1024,
  }
  const fetch = (replicaId: number) =>
    rawCall<{ responses: { partitions: { errorCode: number }[] }[] }>(client, ApiKey.Fetch, 12, {
      replicaId,
      maxWaitMs: 0,
      minBytes: 1,
      maxBytes: 1024,
      topics: [{ topic: 'seen', partitions: [partition] }],
    })
  assert.equal((await fetch(1)).responses[0].partitions[0].errorCode, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
  // A consumer may not read it either: DESCRIBE does not imply READ.
  assert.equal((await fetch(-1)).responses[0].partitions[0].errorCode, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
  const markers = await rawCall<{ markers: { topics: { partitions: { errorCode: number }[] }[] }[] }>(
    client,
    ApiKey.WriteTxnMarkers,
    1,
    {
      markers: [
        {
          producerId: 1n,
          producerEpoch: 0,
          transactionResult: true,
          coordinatorEpoch: 0,
          topics: [{ name: 'seen', partitionIndexes: [0] }],
        },
      ],
    },
  )
  assert.equal(markers.markers[0].topics[0].partitions[0].errorCode, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
})

test('OffsetFetch: the group needs DESCRIBE, and topics the principal may not describe are refused', async () => {
  const response = await rawCall<{
    groups: {
      groupId: string
      errorCode: number
      topics: { name: string; partitions: { errorCode: number }[] }[]
    }[]
  }>(client, ApiKey.OffsetFetch, 8, {
    groups: [
      {
        groupId: 'g',
        memberId: null,
        memberEpoch: -1,
        topics: [
          { name: 'seen', partitionIndexes: [0] },
          { name: 'hidden', partitionIndexes: [0] },
        ],
      },
      { groupId: 'h', memberId: null, memberEpoch: -1, topics: null },
    ],
    requireStable: false,
  })
  const [g, h] = response.groups
  assert.equal(g.errorCode, ErrorCode.NONE)
  assert.deepEqual(
    g.topics.map((t) => [t.name, t.partitions[0].errorCode]),
    [
      ['seen', ErrorCode.NONE],
      ['hidden', ErrorCode.TOPIC_AUTHORIZATION_FAILED],
    ],
  )
  assert.equal(h.errorCode, ErrorCode.GROUP_AUTHORIZATION_FAILED)
})
